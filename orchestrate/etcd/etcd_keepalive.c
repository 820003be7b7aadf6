/*
 * etcd_keepalive.c — the client's lease keepalive stream: one long request to
 * the gateway's /v3/lease/keepalive that carries every renewal of the node's
 * lease, one JSON object each way per renewal.
 *
 * Why a stream.  The gateway serves LeaseKeepAlive, a gRPC stream, for every
 * HTTP request: a renewal sent as a request of its own costs etcd the HTTP
 * request, a new gRPC stream behind it, and the JSON on both: measured on
 * etcd 3.4 (bench/keepalive-cost.py), 0.59 ms of etcd's CPU per renewal when a
 * hundred come together, against 0.14 ms on streams already open, and 0.86
 * against 0.55 ms when each comes alone.  An idle fleet's renewals are most
 * of what it asks of etcd, and an etcd held to a tenth of a core spends about
 * half of it on 1,000 idle nodes.  On the stream a renewal is one chunk of
 * the request's body, and etcd's answer one line of the reply's.
 *
 * How.  The request body is chunked and fed by curl's read callback, which
 * pauses while there is nothing to send; a renewal appends its object and
 * unpauses.  Go's HTTP server reads such a body while the reply is under way
 * once it has said 100 Continue, so the request asks for it.  One renewal is
 * out at a time (the node sends the next only after the last's answer), so
 * each answer belongs to the call waiting for it.  A call that is given up on
 * (its patience ran out, or its owner cancelled it) takes the stream with it:
 * its late answer must not be read as the next renewal's.
 *
 * The stream is a fast path, not a second protocol.  When it ends without
 * answering (etcd restarted, the connection dropped, the gateway said no) the
 * waiting call goes on as the unary request it would have been (etcd_call.c),
 * with its failover, re-authentication and errors; the next renewal opens a
 * stream again.  A gateway that refuses the stream three times in a row with
 * an HTTP error while etcd answers otherwise is not asked again.  etcd's own
 * refusal of the renewal that opened a stream also comes with an HTTP error
 * (stream_etcd_refusal): that is an answer, not a gateway that cannot stream.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "etcd_internal.h"

/* A gateway that refuses the stream this many times in a row is not asked
 * again: every renewal goes as a request of its own. */
#define KEEPALIVE_STREAM_REFUSALS 3

/* No answer on the stream is anywhere near this; more is a hostile peer. */
#define KEEPALIVE_MAX_REPLY (1u << 20)

struct etcd_keepalive_stream {
	enum etcd_transfer transfer;	/* first: CURLINFO_PRIVATE points here */
	struct etcd_client *c;
	CURL *easy;			/* NULL: no stream open */
	struct curl_slist *headers;
	size_t endpoint;		/* index into c->endpoints */
	struct etcd_open_body body;	/* the renewals still to send */
	struct buf in;			/* what came back, not yet a whole line */
	curl_socket_t unwatched;	/* a socket curl let go of (_unwatched) */
	bool http_error;		/* the reply is not the stream's 200 */
	bool answered;			/* this stream answered once at least */
	unsigned refusals;		/* streams refused in a row (HTTP errors) */
	bool unusable;			/* KEEPALIVE_STREAM_REFUSALS reached */
	struct etcd_call *waiting;	/* the call the next answer is for */
};

static void stream_disconnect(struct etcd_keepalive_stream *ks)
{
	CURL *easy = TAKE_PTR(ks->easy);	/* first: removing it lets go of its socket */
	if (easy) {
		curl_multi_remove_handle(ks->c->multi, easy);
		curl_easy_cleanup(easy);
	}
	curl_slist_free_all(ks->headers);
	ks->headers = NULL;
	etcd_open_body_reset(&ks->body);
	buf_reset(&ks->in);
	ks->unwatched = CURL_SOCKET_BAD;
}

void etcd_keepalive_stream_free(struct etcd_client *c)
{
	struct etcd_keepalive_stream *ks = c->keepalive;
	if (!ks)
		return;
	stream_disconnect(ks);
	etcd_open_body_release(&ks->body);
	buf_release(&ks->in);
	free(ks);
	c->keepalive = NULL;
}

static size_t stream_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct etcd_keepalive_stream *ks = userdata;
	size_t n = size * nmemb;
	long code = 0;

	curl_easy_getinfo(ks->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200)
		ks->http_error = true;
	if (ks->in.len + n > KEEPALIVE_MAX_REPLY || buf_add(&ks->in, data, n) < 0)
		return 0;
	return n;
}

static int stream_open(struct etcd_keepalive_stream *ks)
{
	struct etcd_client *c = ks->c;
	int r;

	if (!(ks->easy = curl_easy_init()))
		return -ENOMEM;
	ks->endpoint = c->current;
	/* No body here (NULL): curl then reads it from stream_read, chunked,
	 * and with no total timeout: each renewal has its own deadline. */
	r = etcd_easy_setup(c, ks->easy, c->endpoints[ks->endpoint], "/v3/lease/keepalive", NULL,
			    0, &ks->headers);
	struct curl_slist *h = r < 0 ? NULL : curl_slist_append(ks->headers, "Expect: 100-continue");
	if (!h) {
		stream_disconnect(ks);
		return r < 0 ? r : -ENOMEM;
	}
	ks->headers = h;
	curl_easy_setopt(ks->easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(ks->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(ks->easy, CURLOPT_READFUNCTION, etcd_open_body_read);
	curl_easy_setopt(ks->easy, CURLOPT_READDATA, &ks->body);
	curl_easy_setopt(ks->easy, CURLOPT_WRITEFUNCTION, stream_write);
	curl_easy_setopt(ks->easy, CURLOPT_WRITEDATA, ks);
	curl_easy_setopt(ks->easy, CURLOPT_PRIVATE, &ks->transfer);
	ks->http_error = false;
	ks->answered = false;
	c->requests++;
	if (curl_multi_add_handle(c->multi, ks->easy) != CURLM_OK) {
		stream_disconnect(ks);
		return -ENOMEM;
	}
	return 0;
}

bool etcd_keepalive_stream_send(struct etcd_client *c, struct etcd_call *call, const char *body)
{
	struct etcd_keepalive_stream *ks = c->keepalive;

	if (!ks) {
		if (!(ks = calloc(1, sizeof(*ks))))
			return false;
		ks->transfer = ETCD_TRANSFER_KEEPALIVE;
		ks->unwatched = CURL_SOCKET_BAD;
		ks->c = c;
		c->keepalive = ks;
	}
	if (ks->unusable || ks->waiting)
		return false;
	if (etcd_open_body_add(&ks->body, body) < 0 || etcd_open_body_add(&ks->body, "\n") < 0) {
		stream_disconnect(ks);
		return false;
	}
	if (!ks->easy) {
		if (stream_open(ks) < 0) {
			stream_disconnect(ks);	/* the body must not wait for the next stream */
			return false;
		}
	} else {
		etcd_open_body_resume(&ks->body, ks->easy);
	}
	ks->waiting = call;
	return true;
}

void etcd_keepalive_stream_forget(struct etcd_client *c, struct etcd_call *call)
{
	struct etcd_keepalive_stream *ks = c->keepalive;
	if (ks && ks->waiting == call) {
		ks->waiting = NULL;
		stream_disconnect(ks);
	}
}

bool etcd_keepalive_frame(const char *data, size_t len, size_t *ret_len, size_t *ret_consumed)
{
	const char *nl = memchr(data, '\n', len);
	const char *end = NULL;
	size_t lead = strspn(data, " \t\r\n");

	if (nl) {
		*ret_len = (size_t)(nl - data);
		*ret_consumed = *ret_len + 1;
		return true;
	}
	if (lead >= len || data[lead] != '{')
		return false;
	_cleanup_(cJSON_Deletep) cJSON *whole = cJSON_ParseWithLengthOpts(data, len, &end, false);
	if (!whole || !end || strspn(end, " \t\r") < (size_t)(data + len - end))
		return false;	/* not all of it yet */
	*ret_len = *ret_consumed = len;
	return true;
}

/* Hands every whole frame that came back to the call waiting for it. */
static void stream_process(struct etcd_keepalive_stream *ks)
{
	size_t len, consumed;

	while (ks->easy && !ks->http_error && ks->in.len > 0 &&
	       etcd_keepalive_frame(ks->in.data, ks->in.len, &len, &consumed)) {
		bool blank = strspn(ks->in.data, " \t\r") >= len;
		_cleanup_(cJSON_Deletep) cJSON *reply =
			blank ? NULL : cJSON_ParseWithLength(ks->in.data, len);
		buf_consume(&ks->in, consumed);
		struct etcd_call *call = blank ? NULL : TAKE_PTR(ks->waiting);
		if (reply && cJSON_GetObjectItemCaseSensitive(reply, "error"))
			stream_disconnect(ks);	/* its last word: the next renewal opens another */
		if (!call)
			continue;	/* an answer nobody waits for: none is sent */
		ks->answered = true;
		ks->refusals = 0;
		/* The call's function may send the next renewal: the stream
		 * is ready for it (nothing waits, the buffer is consumed), or
		 * closed, and the renewal opens a new one. */
		etcd_call_streamed_answer(call, reply, ks->endpoint);
	}
}

/*
 * curl stopped watching the stream's socket while the stream runs.  It does
 * not end a transfer whose upload is paused when the server hangs up: it
 * stops reading and drops the socket from its watch list, and the transfer
 * waits for a renewal to write, while the one waiting for its answer would
 * wait out its whole patience (a restarted etcd, a member gone, a connection
 * cut).  Called from curl's socket callback with the socket let go of; the
 * dispatch that follows curl's run looks at it (stream_hung_up), not here,
 * inside curl.
 */
void etcd_keepalive_stream_unwatched(struct etcd_client *c, CURL *easy, curl_socket_t fd)
{
	struct etcd_keepalive_stream *ks = c->keepalive;

	if (ks && ks->easy && easy == ks->easy)
		ks->unwatched = fd;
}

/*
 * Whether the socket curl let go of is closed on etcd's side: end of file,
 * or a reset, on a peek.  A socket let go of for any other reason (a
 * connection attempt that lost to another address, already closed by curl:
 * EBADF) is left to curl.  Counting every let-go as a hang-up opened a new
 * stream for nearly every renewal of a busy fleet (README, "A keepalive
 * stream etcd hung up on").
 */
static bool stream_hung_up(struct etcd_keepalive_stream *ks)
{
	curl_socket_t fd = ks->unwatched;

	ks->unwatched = CURL_SOCKET_BAD;
	return fd != CURL_SOCKET_BAD && etcd_socket_hung_up(fd);
}

bool etcd_socket_hung_up(curl_socket_t fd)
{
	char byte;
	ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT));
}

/*
 * etcd's refusal of the renewal that opened the stream, or NULL.  The gateway
 * says nothing until etcd answers the first renewal; when etcd refuses it
 * (etcd 3.4's "waiting for the applied index took too long" while its apply
 * queue is over a second) the reply carries the error's HTTP status, 503,
 * and the same {"error":{"grpc_code":...}} object a running stream ends
 * with.  It is etcd's answer to the renewal: not a gateway that cannot
 * stream (which three in a row would make the node stop asking for
 * streams), nor a reason to send the renewal again at once into the same
 * queue (README, "A refusal is an answer").
 */
static cJSON *stream_etcd_refusal(struct etcd_keepalive_stream *ks)
{
	size_t len, consumed;

	if (ks->in.len == 0 || !etcd_keepalive_frame(ks->in.data, ks->in.len, &len, &consumed))
		return NULL;
	cJSON *reply = cJSON_ParseWithLength(ks->in.data, len);
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(reply, "error");
	if (!cJSON_IsObject(error) ||
	    !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(error, "grpc_code"))) {
		cJSON_Delete(reply);
		return NULL;
	}
	return reply;
}

/* etcd's refusal (stream_etcd_refusal) is the reply's last word, but curl
 * does not end the transfer on it: its upload is paused, not done.  Waited
 * for, the refused renewal waited out its patience, the lease's whole time
 * left, and the lease went with it. */
static bool stream_refused(struct etcd_keepalive_stream *ks)
{
	if (!ks->http_error)
		return false;
	_cleanup_(cJSON_Deletep) cJSON *refusal = stream_etcd_refusal(ks);
	return refusal != NULL;
}

void etcd_keepalive_stream_dispatch(struct etcd_client *c)
{
	struct etcd_keepalive_stream *ks = c->keepalive;

	if (!ks || !ks->easy)
		return;
	stream_process(ks);
	if (ks->easy && (stream_refused(ks) || stream_hung_up(ks)))
		etcd_keepalive_stream_transfer_done(ks);
}

void etcd_keepalive_stream_transfer_done(struct etcd_keepalive_stream *ks)
{
	/* Lines that came with the end still count. */
	stream_process(ks);
	_cleanup_(cJSON_Deletep) cJSON *refusal = ks->http_error ? stream_etcd_refusal(ks) : NULL;
	if (refusal)
		ks->refusals = 0;	/* the gateway streams: etcd answered */
	else if (ks->http_error && !ks->answered && ++ks->refusals >= KEEPALIVE_STREAM_REFUSALS)
		ks->unusable = true;
	stream_disconnect(ks);
	struct etcd_call *call = TAKE_PTR(ks->waiting);
	if (call && refusal)
		etcd_call_streamed_answer(call, refusal, ks->endpoint);
	else if (call)
		etcd_call_streamed_lost(call, 0);
}
