/*
 * etcd_watch.c — watch streams over the gateway's POST /v3/watch, and the glue
 * that drives libcurl's multi interface from an sd-event loop.
 *
 * A watch is one long HTTP response carrying newline-delimited JSON frames:
 *
 *   {"result":{"header":{…},"created":true}}
 *   {"result":{"header":{"revision":"7"},"events":[{"kv":{…}},{"type":"DELETE",…}]}}
 *   {"result":{"header":{…},"canceled":true,"compact_revision":"5"}}
 *   {"error":{"grpc_code":14,"message":"…"}}
 *
 * The same struct etcd_watch serves both modes:
 *
 *  - blocking (etcd_watch(), the command line): a private multi handle polled
 *    with curl_multi_poll() until the callback is satisfied or the deadline;
 *  - event loop (etcd_watch_start_ranges(), the daemon): the client's multi handle,
 *    whose sockets and timer are sd-event sources (etcd_client_attach_event).
 *
 * In both modes curl's write callback only appends bytes; frames are decoded and
 * handed to the caller's callback after curl returns, never from inside curl,
 * so a callback may make other etcd requests or stop watches freely.
 *
 * Resuming.  The watch remembers the last revision it delivered.  When a stream
 * drops (member died, TCP reset, a silent stream past its idle limit, an error
 * frame that another member may not share) it reconnects to the next endpoint
 * from that revision + 1, and drops any event at or below it, since etcd can
 * repeat events across a reconnect.  Only event revisions and progress
 * notifications advance the revision: a "created" frame's header revision says
 * nothing about which older events are still to come.  When the resume revision
 * was compacted the watch ends with -ESTALE and the compact revision: the caller
 * must read everything again, as nothing else can tell it what it missed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "base/base64.h"
#include "base/backoff.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "etcd_internal.h"

#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 5000
#define RECONNECT_SPREAD_MS 1000	/* the first reconnect of a daemon's stream */
/* A blocking watch gives up after this many rounds over the endpoints without
 * one stream being established: the cluster is unreachable. */
#define BLOCKING_MAX_ROUNDS 2
/* A stream that has some of its watches created but not all this long after
 * it opened is opened again (see etcd_watch_ranges()); the daemon's streams
 * wait longer, since a fleet starting at once keeps etcd busy. */
#define CREATE_WAIT_MS 1000
#define CREATE_WAIT_LOOP_MS 2000

struct watch_range {
	char *key, *range_end;		/* range_end NULL: one key */
	size_t key_len, range_end_len;
	unsigned flags;			/* ETCD_WATCH_NO_PUT, ETCD_WATCH_PREV_KV */
	int64_t last_rev;		/* last revision delivered */
	int64_t watch_id;		/* etcd's id on the current stream; -1 before created */
	bool sent;			/* its create went on the current stream */
	/* A range added to the running stream (etcd_watch_add): its owner's
	 * handle, whose callbacks it delivers to; NULL for the stream's own
	 * ranges, and once its owner removed it.  A removed range stays until
	 * etcd confirms its cancel (its frames until then are dropped), or
	 * until the next stream, which does not carry it. */
	struct etcd_watch_part *part;
	bool removed;
};

struct etcd_watch_part {
	struct etcd_watch *w;		/* NULL once the stream it rode is gone */
	etcd_watch_fn on_events;
	etcd_watch_error_fn on_error;
	void *userdata;
};

struct etcd_watch {
	enum etcd_transfer transfer;	/* first: CURLINFO_PRIVATE points here */
	struct etcd_client *c;
	struct etcd_watch *next;	/* in c->watches (event-loop mode only) */
	CURLM *multi;			/* the multi handle it runs on */
	bool blocking;

	/* The watched ranges, all carried by one stream: each is one create
	 * request, and each resumes from its own last delivered revision,
	 * since a txn that touches two ranges gives two frames of one revision. */
	struct watch_range *ranges;
	size_t n_ranges;
	size_t n_own;			/* the first n_own: the stream's own, never removed */
	size_t n_created;		/* created frames seen on this stream */
	size_t n_connect;		/* creates sent as the stream opened */
	etcd_watch_fn on_events;
	etcd_watch_error_fn on_error;
	void *userdata;

	CURL *easy;			/* the current stream, NULL between streams */
	struct curl_slist *headers;
	struct buf stream;		/* bytes not yet split into frames */
	/* Event-loop mode: the request's body stays open, so that a range
	 * added later is one more create on it (and a removed one a cancel),
	 * paused while there is nothing to send. */
	struct etcd_open_body body;
	curl_socket_t unwatched;	/* a socket curl let go of (etcd_watch_unwatched) */
	size_t endpoint;		/* index into c->endpoints */
	bool got_frame;			/* a valid frame arrived on this stream */
	bool http_error;		/* the stream answered with a non-200 status */
	bool awaiting_token;		/* connects once the client has one */
	bool member_lost;		/* the member ended its last stream (restart, connection) */
	uint64_t token_gen;		/* the token the stream carried */
	unsigned failures;		/* streams in a row that gave no valid frame */
	uint64_t reconnect_at;		/* monotonic ms; 0: no reconnect pending */
	uint64_t idle_ms;		/* reopen a stream silent this long; 0: never */
	uint64_t last_data_ms;
	uint64_t connect_ms;		/* when the current stream was opened */

	bool finished;
	int result;
	int64_t compact;

	bool dispatching;		/* inside a callback: defer the free */
	bool stop_requested;
	sd_event_source *timer;		/* event-loop mode: reconnect and idle timer */
};

static int watch_arm_timer(struct etcd_watch *w);

/* The revision every range is complete up to: the lowest of theirs. */
static int64_t watch_low_revision(const struct etcd_watch *w)
{
	int64_t low = INT64_MAX;
	for (size_t i = 0; i < w->n_ranges; i++)
		if (!w->ranges[i].removed && w->ranges[i].last_rev < low)
			low = w->ranges[i].last_rev;
	return w->n_ranges ? low : 0;
}

/* --- frames ------------------------------------------------------------------ */

void etcd_events_free(struct etcd_event *events, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		etcd_kv_release(&events[i].kv);
		etcd_kv_release(&events[i].prev_kv);
	}
	free(events);
}

/* The frame is {"error":…}: its gRPC code and message.  Both unary ({"error":
 * "text","code":N,"message":…}) and stream ({"error":{"grpc_code":N,…}}) forms. */
static bool frame_error(const cJSON *frame, long *ret_code, const char **ret_message)
{
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(frame, "error");
	if (!error)
		return false;
	const cJSON *holder = cJSON_IsObject(error) ? error : frame;
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(holder, "grpc_code");
	if (!code)
		code = cJSON_GetObjectItemCaseSensitive(holder, "code");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(holder, "message");
	*ret_code = etcd_grpc_code(code);
	*ret_message = cJSON_IsString(msg) ? msg->valuestring
		       : cJSON_IsString(error) ? error->valuestring : "stream error";
	return true;
}

/* The gRPC code named in a watch's cancel_reason, 0 when it names none we act
 * on.  Only the codes that change what the client does are worth telling. */
static long cancel_reason_code(const char *reason)
{
	if (strstr(reason, "code = Unauthenticated") || strstr(reason, "invalid auth token"))
		return 16;
	if (strstr(reason, "code = PermissionDenied") || strstr(reason, "permission denied"))
		return 7;
	if (strstr(reason, "code = InvalidArgument"))
		return 3;
	return 0;
}

/* Decodes the array events into ev (room for all of them), counting in *n
 * the events decoded, which the caller frees; -EPROTO on the first bad one. */
static int decode_events(const cJSON *events, struct etcd_event *ev, size_t *n)
{
	const cJSON *item;
	cJSON_ArrayForEach(item, events) {
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(item, "type");
		const cJSON *kv = cJSON_GetObjectItemCaseSensitive(item, "kv");
		const cJSON *prev = cJSON_GetObjectItemCaseSensitive(item, "prev_kv");
		if (!cJSON_IsObject(item) || (type && !cJSON_IsString(type)))
			return -EPROTO;
		/* The gateway leaves out the zero value: no "type" is a PUT. */
		if (!type || strcmp(type->valuestring, "PUT") == 0)
			ev[*n].type = ETCD_EVENT_PUT;
		else if (strcmp(type->valuestring, "DELETE") == 0)
			ev[*n].type = ETCD_EVENT_DELETE;
		else
			return -EPROTO;
		ev[*n].prev_kv = (struct etcd_kv){ 0 };
		if (etcd_decode_kv(kv, &ev[*n].kv) < 0)
			return -EPROTO;
		if (prev && etcd_decode_kv(prev, &ev[*n].prev_kv) < 0) {
			etcd_kv_release(&ev[*n].kv);
			return -EPROTO;
		}
		(*n)++;
	}
	return 0;
}

/*
 * Decodes a frame.  Besides the public contract, returns 1 for an error frame,
 * with its gRPC code and message (pointing into *ret_json, which the caller
 * frees), and 2 for a watch cancelled with no reason: the answer to a cancel
 * request (etcd 3.4 says nothing more then).
 */
static int decode_frame(const char *text, size_t len, struct etcd_event **ret_events,
			size_t *ret_n, int64_t *ret_revision, int64_t *ret_compact,
			bool *ret_created, int64_t *ret_watch_id, cJSON **ret_json,
			long *ret_code, const char **ret_message)
{
	*ret_events = NULL;
	*ret_n = 0;
	*ret_revision = *ret_compact = *ret_watch_id = 0;
	*ret_created = false;
	*ret_json = NULL;

	_cleanup_(cJSON_Deletep) cJSON *frame = cJSON_ParseWithLength(text, len);
	if (!cJSON_IsObject(frame))
		return -EPROTO;
	if (frame_error(frame, ret_code, ret_message)) {
		*ret_json = TAKE_PTR(frame);
		return 1;
	}
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(frame, "result");
	if (!cJSON_IsObject(result))
		return -EPROTO;
	const cJSON *header = cJSON_GetObjectItemCaseSensitive(result, "header");
	if (!cJSON_IsObject(header) || etcd_decode_int64(header, "revision", ret_revision) < 0)
		return -EPROTO;
	/* Which watch of the stream the frame is for; JSON leaves out id 0, and
	 * a creation refused (an expired token) comes back as id -1. */
	if (etcd_decode_int64(result, "watch_id", ret_watch_id) < 0 || *ret_watch_id < -1)
		return -EPROTO;

	const cJSON *created = cJSON_GetObjectItemCaseSensitive(result, "created");
	const cJSON *canceled = cJSON_GetObjectItemCaseSensitive(result, "canceled");
	if ((created && !cJSON_IsBool(created)) || (canceled && !cJSON_IsBool(canceled)))
		return -EPROTO;
	*ret_created = cJSON_IsTrue(created);
	if (cJSON_IsTrue(canceled)) {
		int64_t compact;
		if (etcd_decode_int64(result, "compact_revision", &compact) < 0)
			return -EPROTO;
		if (compact > 0) {
			*ret_compact = compact;
			return -ESTALE;
		}
		/* A watch refused at creation comes back as a cancel whose reason is
		 * the gRPC status in text ("rpc error: code = Unauthenticated desc =
		 * etcdserver: invalid auth token" for an expired token): hand it on
		 * as the error frame it stands for, so that a refused token is
		 * renewed like on any other request. */
		const cJSON *reason = cJSON_GetObjectItemCaseSensitive(result, "cancel_reason");
		if (!reason)
			return 2;	/* cancelled as asked (etcd_watch_remove) */
		if (!cJSON_IsString(reason))
			return -EPROTO;
		*ret_code = cancel_reason_code(reason->valuestring);
		if (*ret_code == 0)
			return -EPROTO;
		*ret_message = reason->valuestring;
		*ret_json = TAKE_PTR(frame);
		return 1;
	}

	const cJSON *events = cJSON_GetObjectItemCaseSensitive(result, "events");
	if (!events)
		return 0;
	if (!cJSON_IsArray(events))
		return -EPROTO;
	int count = cJSON_GetArraySize(events);
	struct etcd_event *ev = calloc((size_t)count + 1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	size_t n = 0;
	if (decode_events(events, ev, &n) < 0) {
		etcd_events_free(ev, n);
		return -EPROTO;
	}
	*ret_events = ev;
	*ret_n = n;
	return 0;
}

int etcd_decode_watch_frame(const char *text, size_t len, struct etcd_event **ret_events,
			    size_t *ret_n, int64_t *ret_revision, int64_t *ret_compact,
			    bool *ret_created)
{
	_cleanup_(cJSON_Deletep) cJSON *json = NULL;
	long code = 0;
	const char *message = NULL;
	int64_t watch_id;
	int r = decode_frame(text, len, ret_events, ret_n, ret_revision, ret_compact,
			     ret_created, &watch_id, &json, &code, &message);
	if (r == 2)
		r = -EPROTO;	/* nobody asked for a cancel here */
	if (r == 1) {
		bool retry, reauth;
		r = etcd_grpc_errno(code, message, false, &retry, &reauth);
		if (r == 0)
			r = -EPROTO;
	}
	return r;
}

/* --- one stream -------------------------------------------------------------- */

static size_t watch_write(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct etcd_watch *w = userdata;
	size_t n = size * nmemb;
	long code = 0;
	curl_easy_getinfo(w->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200)
		w->http_error = true;
	/* One frame never comes near the limit; a stream that does is hostile. */
	if (w->stream.len + n > ETCD_MAX_REPLY || buf_add(&w->stream, data, n) < 0)
		return 0;
	w->last_data_ms = etcd_now_ms();
	return n;
}

static void watch_disconnect(struct etcd_watch *w)
{
	CURL *easy = TAKE_PTR(w->easy);	/* first: removing it lets go of its socket */
	if (easy) {
		curl_multi_remove_handle(w->multi, easy);
		curl_easy_cleanup(easy);
	}
	curl_slist_free_all(w->headers);
	w->headers = NULL;
	buf_reset(&w->stream);
	etcd_open_body_reset(&w->body);
	w->unwatched = CURL_SOCKET_BAD;
}

/* Sends text (one request object) on the open body of the current stream. */
static int watch_send(struct etcd_watch *w, const char *text)
{
	if (etcd_open_body_add(&w->body, text) < 0)
		return -ENOMEM;
	etcd_open_body_resume(&w->body, w->easy);
	return 0;
}

static int watch_send_cancel(struct etcd_watch *w, int64_t watch_id)
{
	char text[96];
	snprintf(text, sizeof(text), "{\"cancel_request\":{\"watch_id\":\"%" PRId64 "\"}}",
		 watch_id);
	return watch_send(w, text);
}

static void watch_range_release(struct watch_range *wr)
{
	free(wr->key);
	free(wr->range_end);
}

/* Drops range i from the watch: the next ones keep their order, which is
 * the order of their creates on the stream. */
static void watch_range_drop(struct etcd_watch *w, size_t i)
{
	watch_range_release(&w->ranges[i]);
	memmove(&w->ranges[i], &w->ranges[i + 1], (w->n_ranges - i - 1) * sizeof(w->ranges[0]));
	w->n_ranges--;
}

static void watch_drop_removed(struct etcd_watch *w)
{
	for (size_t i = w->n_ranges; i-- > w->n_own;)
		if (w->ranges[i].removed)
			watch_range_drop(w, i);
}

/* The range added as part p, or n_ranges. */
static size_t watch_range_of_part(const struct etcd_watch *w, const struct etcd_watch_part *p)
{
	for (size_t i = w->n_own; i < w->n_ranges; i++)
		if (w->ranges[i].part == p)
			return i;
	return w->n_ranges;
}

/*
 * Ends added range i: nothing more is delivered for it.  Created on the
 * current stream, it is cancelled there, and kept until etcd says so (its
 * frames until then are recognised and dropped); sent and not created yet,
 * it is cancelled once created (watch_handle_frame); not sent, it goes now.
 * The stream itself goes on: its other watches lose nothing.
 */
static int watch_range_remove(struct etcd_watch *w, size_t i)
{
	struct watch_range *wr = &w->ranges[i];

	wr->part = NULL;
	if (wr->removed)
		return 0;
	wr->removed = true;
	if (!w->easy || !wr->sent) {
		watch_range_drop(w, i);
		return 0;
	}
	return wr->watch_id >= 0 ? watch_send_cancel(w, wr->watch_id) : 0;
}

/* The range etcd knows as watch_id on this stream, or n_ranges. */
static size_t watch_range_of(const struct etcd_watch *w, int64_t watch_id)
{
	for (size_t i = 0; i < w->n_ranges; i++)
		if (w->ranges[i].sent && w->ranges[i].watch_id == watch_id)
			return i;
	return w->n_ranges;
}

static int add_bytes(cJSON *obj, const char *field, const char *data, size_t len)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (base64_encode(data, len, &b) < 0 || buf_grow(&b, 0) < 0)
		return -ENOMEM;
	return cJSON_AddStringToObject(obj, field, buf_str(&b)) ? 0 : -ENOMEM;
}

static bool add_no_put(cJSON *req)
{
	cJSON *filters = cJSON_AddArrayToObject(req, "filters");
	cJSON *f = cJSON_CreateString("NOPUT");
	if (!filters || !f || !cJSON_AddItemToArray(filters, f)) {
		cJSON_Delete(f);
		return false;
	}
	return true;
}

/* Appends one range's create request to the stream's body. */
static int add_create_request(struct buf *body, const struct watch_range *wr)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *req = cJSON_AddObjectToObject(obj, "create_request");
	char rev[32];
	snprintf(rev, sizeof(rev), "%" PRId64, wr->last_rev + 1);
	if (!req || add_bytes(req, "key", wr->key, wr->key_len) < 0 ||
	    (wr->range_end && add_bytes(req, "range_end", wr->range_end, wr->range_end_len) < 0) ||
	    ((wr->flags & ETCD_WATCH_NO_PUT) && !add_no_put(req)) ||
	    ((wr->flags & ETCD_WATCH_PREV_KV) && !cJSON_AddTrueToObject(req, "prev_kv")) ||
	    /* Revision 0 is "from now"; the created frame then tells which. */
	    (wr->last_rev > 0 && !cJSON_AddStringToObject(req, "start_revision", rev)) ||
	    /* Progress notifications advance the resume revision on a quiet
	     * prefix and prove the stream alive. */
	    !cJSON_AddTrueToObject(req, "progress_notify"))
		return -ENOMEM;
	_cleanup_(freep) char *text = cJSON_PrintUnformatted(obj);
	if (!text || buf_adds(body, text) < 0)
		return -ENOMEM;
	return 0;
}

static int watch_connect(struct etcd_watch *w)
{
	struct etcd_client *c = w->c;
	_cleanup_(buf_releasep) struct buf body = BUF_INIT;

	/* The gateway reads one JSON object after another from the body and
	 * creates each watch on the one gRPC stream behind this request; it
	 * reads the first before it answers, the others beside the answer.
	 * Over HTTP/1.1, Go's server discards what is left of a request's body
	 * when the answer's headers go out, unless the request said "Expect:
	 * 100-continue" (it cannot tell then where that body ends): without it
	 * a stream whose answer came before its body was read carried only
	 * its first watches (11 to 17 of 200 streams of 20 ranges here, and
	 * 7 of 400 sent by curl's command line; with it, 0 of 2,000: t0187).
	 * So the request asks for 100 Continue, as the keepalive stream does
	 * (etcd_keepalive.c), and every create is in the body as it is sent.  Without TLS etcd's port gives
	 * every HTTP/2 request to gRPC, not to the gateway. */
	watch_drop_removed(w);		/* a new stream does not carry them */
	for (size_t i = 0; i < w->n_ranges; i++) {
		w->ranges[i].watch_id = -1;
		w->ranges[i].sent = true;
		if (add_create_request(&body, &w->ranges[i]) < 0)
			return -ENOMEM;
	}
	w->n_created = 0;
	w->n_connect = w->n_ranges;
	const char *text = buf_str(&body);

	if (etcd_token_needed(c)) {
		/* A command's watch has nothing else to do; the daemon's loop
		 * has, and waits for the one authentication of the client. */
		if (w->blocking) {
			int r = etcd_authenticate(c);
			if (r < 0)
				return r;
		} else {
			int r = etcd_token_request(c);
			if (r < 0)
				return r;
			w->awaiting_token = true;
			w->got_frame = false;
			w->reconnect_at = 0;
			return 0;
		}
	}
	w->easy = curl_easy_init();
	if (!w->easy)
		return -ENOMEM;
	/* No total timeout on a stream: liveness comes from TCP keepalive, the
	 * idle limit and progress notifications.  A command's watch sends its
	 * body whole; the daemon's stays open (watch_read), chunked, for the
	 * ranges added later. */
	int r = etcd_easy_setup(c, w->easy, c->endpoints[w->endpoint], "/v3/watch",
				w->blocking ? text : NULL, 0, &w->headers);
	struct curl_slist *h = r < 0 ? NULL : curl_slist_append(w->headers, "Expect: 100-continue");
	if (!h || (!w->blocking && etcd_open_body_add(&w->body, text) < 0)) {
		watch_disconnect(w);
		return r < 0 ? r : -ENOMEM;
	}
	w->headers = h;
	curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, h);
	if (!w->blocking) {
		curl_easy_setopt(w->easy, CURLOPT_POST, 1L);
		curl_easy_setopt(w->easy, CURLOPT_READFUNCTION, etcd_open_body_read);
		curl_easy_setopt(w->easy, CURLOPT_READDATA, &w->body);
	}
	curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->easy, CURLOPT_PRIVATE, w);
	w->got_frame = false;
	w->http_error = false;
	w->reconnect_at = 0;
	w->token_gen = c->token_gen;
	if (c->token)
		c->token_used_ms = etcd_now_ms();
	w->last_data_ms = w->connect_ms = etcd_now_ms();
	c->requests++;
	if (curl_multi_add_handle(w->multi, w->easy) != CURLM_OK) {
		watch_disconnect(w);
		return -ENOMEM;
	}
	return 0;
}

/* Ends the watch with result; in event-loop mode tells the owner of an error,
 * and the owners of the ranges added to it, which end with it. */
static void watch_finish(struct etcd_watch *w, int result, int64_t compact)
{
	watch_disconnect(w);
	w->finished = true;
	w->result = result;
	w->compact = compact;
	w->reconnect_at = 0;
	if (w->blocking || result >= 0)
		return;
	w->dispatching = true;
	for (size_t i = w->n_own; i < w->n_ranges && !w->stop_requested; i++) {
		struct etcd_watch_part *p = w->ranges[i].part;
		if (p && p->on_error)
			p->on_error(w, result, 0, p->userdata);
	}
	if (w->on_error && !w->stop_requested)
		w->on_error(w, result, compact, w->userdata);
	w->dispatching = false;
}

/* Drops the current stream and schedules the next one on the next endpoint. */
static void watch_schedule_reconnect(struct etcd_watch *w)
{
	struct etcd_client *c = w->c;
	bool established = w->got_frame;
	watch_disconnect(w);
	c->reconnects++;
	if (established)
		w->failures = 0;
	else
		w->failures++;
	if (w->blocking && w->failures >= BLOCKING_MAX_ROUNDS * c->n_endpoints) {
		watch_finish(w, -ECONNREFUSED, 0);
		return;
	}
	w->endpoint = (w->endpoint + 1) % c->n_endpoints;
	uint64_t delay = 0;
	if (!established) {
		/* Every stream of a fleet drops at once when etcd restarts:
		 * the jitter spreads their reconnects. */
		static const struct backoff b = { 2 * RECONNECT_MIN_MS, RECONNECT_MAX_MS, 0 };
		delay = backoff_delay(&b, w->failures);
	} else if (!w->blocking) {
		/* A stream that worked drops with every other one of the fleet
		 * when its member restarts or leaves: spread even the first
		 * reconnect (a daemon's; a command's watch has one user
		 * waiting and goes at once).  The watch resumes from its
		 * revision, so the wait loses nothing. */
		delay = random_between(0, RECONNECT_SPREAD_MS);
	}
	w->reconnect_at = etcd_now_ms() + delay;
	/* Without its timer the watch would never come back: say so to the
	 * owner, whose resync has a timer of its own. */
	if (!w->blocking && watch_arm_timer(w) < 0)
		watch_finish(w, -ENOMEM, 0);
}

/*
 * etcd refused the token the stream carried: the client drops it (unless a
 * newer one replaced it already), and unless a token is there, the stream
 * parks until the client has logged in again (watch_connect).  When the
 * member had ended the stream before (it restarted, and forgot every token),
 * every host of a fleet is here within a second, and a daemon's client
 * spreads that login (etcd_client_spread_logins): the login, and so the
 * stream, waits for the client's moment, or for a token any other request
 * brought sooner.  A stream this client reopened itself (silent past its
 * idle limit) is alone: its token went unused past etcd's TTL, and it logs
 * in at once.  The stream stays on its member (the login goes there too).
 */
static void watch_token_refused(struct etcd_watch *w)
{
	etcd_token_refused(w->c, w->token_gen);
	if (w->blocking || !w->member_lost || !etcd_token_needed(w->c)) {
		watch_schedule_reconnect(w);
		return;
	}
	watch_disconnect(w);
	w->c->reconnects++;
	etcd_login_spread(w->c, "on a watch stream it had ended (a member that "
				"restarts forgets every token)");
	if (watch_connect(w) < 0)
		watch_schedule_reconnect(w);
	else
		watch_arm_timer(w);	/* nothing to time while parked */
}

/* One frame, decoded (decode_frame): it holds nothing of the stream's bytes,
 * so the stream's buffer may be consumed before the frame is handled. */
struct frame {
	int r;				/* decode_frame()'s result */
	struct etcd_event *events;
	size_t n;
	int64_t revision, compact, watch_id;
	bool created;
	cJSON *json;			/* an error frame: code and message point into it */
	long code;
	const char *message;
};

/* What handling the frame left: its JSON (an error frame's). */
static void frame_releasep(struct frame *f)
{
	cJSON_Delete(f->json);
	f->json = NULL;
}

static void frame_decode(struct frame *f, const char *text, size_t len)
{
	*f = (struct frame){ 0 };
	f->r = decode_frame(text, len, &f->events, &f->n, &f->revision, &f->compact,
			    &f->created, &f->watch_id, &f->json, &f->code, &f->message);
}

/* Handles one complete frame, decoded; takes its events (the caller frees
 * its JSON).  Returns false when the watch must not be touched any more (it
 * stopped, or its owner stopped it from a callback). */
static bool watch_handle_frame(struct etcd_watch *w, struct frame *f)
{
	struct etcd_client *c = w->c;
	struct etcd_event *events = f->events;
	size_t n = f->n;
	int64_t revision = f->revision, compact = f->compact, watch_id = f->watch_id;
	bool created = f->created;
	long code = f->code;
	const char *message = f->message;
	int r = f->r;
	if (r == 2 || r == -ESTALE) {
		/* The end of one range's watch: one we removed (its cancel
		 * answered), or an added one compacted, ends that range alone. */
		size_t i = watch_range_of(w, watch_id);
		if (i < w->n_ranges && i >= w->n_own) {
			struct etcd_watch_part *p = w->ranges[i].part;
			/* etcd keeps a compacted watcher (its memory, and a
			 * count in its watcher gauge) until it is cancelled
			 * or the stream ends: it is removed as its owner
			 * would, and its cancel's answer drops it. */
			if (r == 2)
				watch_range_drop(w, i);
			else if (watch_range_remove(w, i) < 0) {
				watch_finish(w, -ENOMEM, 0);
				return false;
			}
			if (p && r == -ESTALE) {
				p->w = NULL;	/* its range is gone: removing it frees it alone */
				if (p->on_error) {
					w->dispatching = true;
					p->on_error(w, -ESTALE, compact, p->userdata);
					w->dispatching = false;
				}
			}
			return !w->stop_requested;
		}
		if (r == 2)
			r = -EPROTO;	/* a cancel nobody asked for */
	}
	if (r == 1) {
		bool retry, reauth;
		r = etcd_map_grpc_error(c, c->endpoints[w->endpoint], code, message, &retry, &reauth);
		if (reauth) {
			watch_token_refused(w);
			return false;
		}
		/* A stream error that is not a verdict on the request itself
		 * ("the client connection is closing", gRPC's Canceled, while
		 * a member restarts) is the member's trouble: resume elsewhere.
		 * A member that says so before it hangs up ended the stream as
		 * much as one that only hangs up (an open body keeps the
		 * connection until etcd closes it, so this frame often comes
		 * first, and the transfer may then end cleanly): a refused
		 * token after it is the restart's, and that login is spread. */
		if (retry || r == -EPROTO) {
			w->member_lost = true;
			watch_schedule_reconnect(w);
			return false;
		}
		watch_finish(w, r, 0);
		return false;
	}
	if (r == -ESTALE) {
		etcd_set_error(c, "etcd '%s': watch revision %" PRId64 " was compacted (at %" PRId64 ")",
			       c->endpoints[w->endpoint], watch_low_revision(w) + 1, compact);
		watch_finish(w, -ESTALE, compact);
		return false;
	}
	if (r == -EPROTO) {
		etcd_set_error(c, "etcd '%s': malformed watch frame", c->endpoints[w->endpoint]);
		watch_schedule_reconnect(w);
		return false;
	}
	if (r < 0) {
		watch_finish(w, r, 0);
		return false;
	}

	if (created) {
		/* Creations are acknowledged in the order of the requests: this
		 * one is for the first range sent and not created yet. */
		size_t i = watch_range_of(w, -1);
		if (i >= w->n_ranges) {
			etcd_events_free(events, n);
			etcd_set_error(c, "etcd '%s': more watches created than requested",
				       c->endpoints[w->endpoint]);
			watch_schedule_reconnect(w);
			return false;
		}
		w->n_created++;
		struct watch_range *wr = &w->ranges[i];
		wr->watch_id = watch_id;
		if (wr->removed && watch_send_cancel(w, watch_id) < 0) {
			etcd_events_free(events, n);
			watch_finish(w, -ENOMEM, 0);
			return false;
		}
		/* A watch "from now" starts after the revision of its creation. */
		if (wr->last_rev == 0)
			wr->last_rev = revision;
		w->got_frame = true;
		w->failures = 0;
		w->member_lost = false;
		etcd_events_free(events, n);
		/* the first creation starts the wait for the others */
		if (!w->blocking && w->n_created == 1 && w->n_connect > 1)
			(void)watch_arm_timer(w);
		return true;
	}
	size_t at = watch_range_of(w, watch_id);
	struct watch_range *wr = at < w->n_ranges ? &w->ranges[at] : NULL;
	if (!wr) {
		etcd_events_free(events, n);
		etcd_set_error(c, "etcd '%s': watch frame for unknown watch %" PRId64,
			       c->endpoints[w->endpoint], watch_id);
		watch_schedule_reconnect(w);
		return false;
	}
	w->got_frame = true;
	w->failures = 0;
	if (wr->removed) {
		etcd_events_free(events, n);	/* sent before etcd read its cancel */
		return true;
	}

	/* Drop what was delivered before a reconnect; events of one revision come
	 * in one frame per watch, so comparing with the previous frames' revision
	 * of the same range is exact. */
	size_t kept = 0;
	int64_t newest = wr->last_rev;
	for (size_t i = 0; i < n; i++) {
		if (events[i].kv.mod_revision <= wr->last_rev) {
			etcd_kv_release(&events[i].kv);
			continue;
		}
		if (events[i].kv.mod_revision > newest)
			newest = events[i].kv.mod_revision;
		events[kept++] = events[i];
	}
	if (n == 0 && revision > newest)
		newest = revision;	/* a progress notification */
	wr->last_rev = newest;

	int cb = 0;
	struct etcd_watch_part *p = wr->part;	/* wr may move in the callback */
	if (kept > 0 || n == 0) {
		w->dispatching = true;
		w->c->events += kept;
		if (p)
			cb = p->on_events(events, kept, revision, p->userdata);
		else
			cb = w->on_events(events, kept, revision, w->userdata);
		w->dispatching = false;
	}
	etcd_events_free(events, kept);
	if (w->stop_requested)
		return false;
	if (cb != 0 && p) {
		/* An added range's owner is done with it: that range alone
		 * ends (the owner still removes its handle). */
		at = watch_range_of_part(w, p);
		if (at < w->n_ranges && watch_range_remove(w, at) < 0) {
			watch_finish(w, -ENOMEM, 0);
			return false;
		}
		return true;
	}
	if (cb != 0) {
		watch_finish(w, cb, 0);
		return false;
	}
	return true;
}

/*
 * The length of the whole frame the stream's buffer starts with, and what to
 * consume with it; false when none is whole yet.  A frame is a line, but for
 * the error that ends a stream: the gateway writes it last with no line
 * break, and on a body that stays open the reply does not end after it
 * (etcd_keepalive_frame).  Only such an error is looked for whole, since
 * parsing every partial frame as it grows would cost a large one dearly.
 */
static bool watch_frame(const struct etcd_watch *w, size_t *ret_len, size_t *ret_consumed)
{
	const char *data = w->stream.data;
	size_t len = w->stream.len;
	size_t lead = len ? strspn(data, " \t\r\n") : 0;
	static const char error[] = "{\"error\"";

	if (len == 0)
		return false;
	if (memchr(data, '\n', len))
		return etcd_keepalive_frame(data, len, ret_len, ret_consumed);
	if (len - lead < sizeof(error) - 1 || memcmp(data + lead, error, sizeof(error) - 1) != 0)
		return false;
	return etcd_keepalive_frame(data, len, ret_len, ret_consumed);
}

/* Decodes and delivers every complete frame in the stream buffer. */
static void watch_process(struct etcd_watch *w)
{
	size_t len, consumed;

	while (!w->finished && w->easy && w->stream.len > 0 && watch_frame(w, &len, &consumed)) {
		/* Decoded in place, then consumed, then handled: a callback
		 * may reconnect and reset the buffer, and the decoded frame
		 * holds none of its bytes.  No copy of the frame: one of a
		 * busy catalog's is tens of KiB, and allocating that much
		 * each frame made malloc consolidate its free lists each
		 * time (a seventh of the daemon's CPU per catalog event,
		 * bench/catalog-events.sh). */
		const char *text = w->stream.data;
		size_t start = 0;
		while (start < len && (text[start] == ' ' || text[start] == '\t' ||
				       text[start] == '\r'))
			start++;
		_cleanup_(frame_releasep) struct frame f = { 0 };
		if (start < len)
			frame_decode(&f, text + start, len - start);
		buf_consume(&w->stream, consumed);
		if (start == len)
			continue;
		if (!watch_handle_frame(w, &f))
			return;
	}
}

/* The stream's transfer ended (curl says done). */
static void watch_transfer_done(struct etcd_watch *w, CURLcode code)
{
	struct etcd_client *c = w->c;
	const char *endpoint = c->endpoints[w->endpoint];

	/* Frames that arrived with the end of the transfer still count. */
	if (!w->http_error)
		watch_process(w);
	if (w->finished || w->stop_requested || !w->easy)
		return;

	if (w->http_error) {
		_cleanup_(cJSON_Deletep) cJSON *json = cJSON_ParseWithLength(
			w->stream.data ? w->stream.data : "", w->stream.len);
		long grpc = 0;
		const char *message = NULL;
		if (cJSON_IsObject(json) && frame_error(json, &grpc, &message)) {
			bool retry, reauth;
			int r = etcd_map_grpc_error(c, endpoint, grpc, message, &retry, &reauth);
			if (reauth) {
				watch_token_refused(w);
				return;
			}
			if (!retry && r != -EPROTO) {
				watch_finish(w, r, 0);
				return;
			}
		} else {
			etcd_set_error(c, "etcd '%s': watch answered with HTTP error", endpoint);
		}
	} else if (code != CURLE_OK) {
		etcd_set_error(c, "etcd '%s': %s", endpoint, curl_easy_strerror(code));
		w->member_lost = true;
	} else {
		etcd_set_error(c, "etcd '%s': watch stream closed", endpoint);
		w->member_lost = true;
	}
	watch_schedule_reconnect(w);
}

/* Collects finished transfers of a multi handle. */
static void multi_collect(CURLM *multi)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		enum etcd_transfer *t = NULL;
		curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
		if (t && *t == ETCD_TRANSFER_CALL)
			etcd_call_transfer_done((struct etcd_call *)t, msg->data.result);
		else if (t && *t == ETCD_TRANSFER_KEEPALIVE)
			etcd_keepalive_stream_transfer_done((struct etcd_keepalive_stream *)t);
		else if (t)
			watch_transfer_done((struct etcd_watch *)t, msg->data.result);
	}
}

static void watch_free(struct etcd_watch *w)
{
	watch_disconnect(w);
	sd_event_source_disable_unref(w->timer);
	buf_release(&w->stream);
	etcd_open_body_release(&w->body);
	for (size_t i = 0; i < w->n_ranges; i++) {
		if (w->ranges[i].part)
			w->ranges[i].part->w = NULL;	/* its owner still removes it */
		watch_range_release(&w->ranges[i]);
	}
	free(w->ranges);
	free(w);
}

static void watch_freep(struct etcd_watch **w)
{
	if (*w)
		watch_free(*w);
}

/* Fills wr from the caller's range (its strings copied). */
static int watch_range_init(struct watch_range *wr, const struct etcd_watch_range *r)
{
	*wr = (struct watch_range){ .flags = r->flags, .watch_id = -1 };
	wr->key_len = strlen(r->key);
	if (!(wr->key = strdup(r->key)))
		return -ENOMEM;
	if (r->range_end) {
		wr->range_end_len = strlen(r->range_end);
		wr->range_end = strdup(r->range_end);
	} else if (r->prefix && (wr->range_end = malloc(wr->key_len + 1))) {
		wr->range_end_len = etcd_prefix_end(wr->key, wr->key_len, wr->range_end);
	}
	if ((r->range_end || r->prefix) && !wr->range_end) {
		free(wr->key);
		return -ENOMEM;
	}
	wr->last_rev = r->start_revision > 0 ? r->start_revision - 1 : 0;
	return 0;
}

static struct etcd_watch *watch_new(struct etcd_client *c, const struct etcd_watch_range *ranges,
				    size_t n_ranges, etcd_watch_fn on_events, void *userdata)
{
	_cleanup_(watch_freep) struct etcd_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->transfer = ETCD_TRANSFER_WATCH;
	w->c = c;
	w->unwatched = CURL_SOCKET_BAD;
	w->endpoint = c->current;
	w->on_events = on_events;
	w->userdata = userdata;
	w->ranges = calloc(n_ranges ? n_ranges : 1, sizeof(*w->ranges));
	if (!w->ranges)
		return NULL;
	for (size_t i = 0; i < n_ranges; i++, w->n_ranges++)
		if (watch_range_init(&w->ranges[i], &ranges[i]) < 0)
			return NULL;
	w->n_own = w->n_ranges;
	return TAKE_PTR(w);
}

/* --- blocking mode ----------------------------------------------------------- */

int etcd_watch(struct etcd_client *c, const char *key, bool prefix, int64_t start_revision,
	       uint64_t deadline_ms, etcd_watch_fn fn, void *userdata,
	       int64_t *ret_compact_revision)
{
	struct etcd_watch_range range = { .key = key, .prefix = prefix, .start_revision = start_revision };
	return etcd_watch_ranges(c, &range, 1, deadline_ms, fn, userdata, ret_compact_revision);
}

int etcd_watch_ranges(struct etcd_client *c, const struct etcd_watch_range *ranges,
		      size_t n_ranges, uint64_t deadline_ms, etcd_watch_fn fn, void *userdata,
		      int64_t *ret_compact_revision)
{
	CURLM *multi = curl_multi_init();
	if (!multi)
		return -ENOMEM;
	struct etcd_watch *w = watch_new(c, ranges, n_ranges, fn, userdata);
	if (!w) {
		curl_multi_cleanup(multi);
		return -ENOMEM;
	}
	w->multi = multi;
	w->blocking = true;

	int r = watch_connect(w);
	while (r == 0 && !w->finished) {
		uint64_t now = etcd_now_ms();
		if (deadline_ms && now >= deadline_ms) {
			r = -ETIMEDOUT;
			break;
		}
		if (!w->easy && w->reconnect_at && now >= w->reconnect_at) {
			r = watch_connect(w);
			continue;
		}
		/* A stream whose watches are not all created in time is opened
		 * again, and each range resumes from its last revision: a
		 * gateway that discards the rest of the body once it answered
		 * (watch_connect; one in front of etcd that drops the Expect)
		 * would otherwise leave them missing for good. */
		if (w->easy && w->n_created > 0 && w->n_created < w->n_connect &&
		    now >= w->connect_ms + CREATE_WAIT_MS) {
			watch_schedule_reconnect(w);
			continue;
		}
		int running;
		curl_multi_perform(multi, &running);
		watch_process(w);
		if (w->finished)
			break;
		multi_collect(multi);
		if (w->finished)
			break;

		/* Sleep until data, the deadline or the next reconnect. */
		uint64_t wake = deadline_ms ? deadline_ms : now + 1000;
		if (w->easy && w->n_created > 0 && w->n_created < w->n_connect &&
		    w->connect_ms + CREATE_WAIT_MS < wake)
			wake = w->connect_ms + CREATE_WAIT_MS;
		if (!w->easy && w->reconnect_at && w->reconnect_at < wake)
			wake = w->reconnect_at;
		long timeout = wake > now ? (long)(wake - now) : 0;
		if (timeout > 1000)
			timeout = 1000;
		curl_multi_poll(multi, NULL, 0, (int)timeout, NULL);
	}
	if (r == 0)
		r = w->result;
	if (r == -ESTALE && ret_compact_revision)
		*ret_compact_revision = w->compact;
	watch_free(w);
	curl_multi_cleanup(multi);
	return r;
}

/* --- event-loop mode --------------------------------------------------------- */

/* Some watches the stream opened with are created, not all (yet).  A range
 * added later is a create on a body the gateway already reads as it comes:
 * not waited for (on a slow etcd it may take seconds, and a new stream
 * would cost far more than the wait). */
static bool watch_partly_created(const struct etcd_watch *w)
{
	return w->easy && w->n_created > 0 && w->n_created < w->n_connect;
}

static int on_watch_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct etcd_watch *w = userdata;
	uint64_t now = etcd_now_ms();
	if (w->finished)
		return 0;
	if (!w->easy && w->reconnect_at) {
		if (now >= w->reconnect_at && watch_connect(w) < 0)
			watch_schedule_reconnect(w);
	} else if (watch_partly_created(w) && now >= w->connect_ms + CREATE_WAIT_LOOP_MS) {
		/* The rest of the body was dropped (watch_connect): every range
		 * resumes from its last revision on a new stream. */
		etcd_set_error(w->c, "etcd '%s': %zu of %zu watches created, reopening the stream",
			       w->c->endpoints[w->endpoint], w->n_created, w->n_connect);
		w->got_frame = true;
		watch_schedule_reconnect(w);
		return 0;
	} else if (w->easy && w->idle_ms && now - w->last_data_ms >= w->idle_ms) {
		etcd_set_error(w->c, "etcd '%s': watch silent for %" PRIu64 " s, reopening",
			       w->c->endpoints[w->endpoint], w->idle_ms / 1000);
		w->got_frame = true;	/* it was alive once: reconnect at once */
		watch_schedule_reconnect(w);
		return 0;
	}
	watch_arm_timer(w);
	return 0;
}

static int watch_arm_timer(struct etcd_watch *w)
{
	uint64_t at_ms;
	int r;
	if (!w->easy && w->reconnect_at)
		at_ms = w->reconnect_at;
	else if (watch_partly_created(w))
		at_ms = w->connect_ms + CREATE_WAIT_LOOP_MS;
	else if (w->easy && w->idle_ms)
		at_ms = w->last_data_ms + w->idle_ms;
	else
		return w->timer ? sd_event_source_set_enabled(w->timer, SD_EVENT_OFF) : 0;
	uint64_t usec = at_ms * 1000;
	if (!w->timer)
		r = sd_event_add_time(w->c->event, &w->timer, CLOCK_MONOTONIC, usec, 10000,
				      on_watch_timer, w);
	else
		r = sd_event_source_set_time(w->timer, usec);
	if (r < 0)
		return r;
	return sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
}

void etcd_watch_token_ready(struct etcd_client *c, int error)
{
	for (;;) {
		struct etcd_watch *w = c->watches;
		while (w && !w->awaiting_token)
			w = w->next;
		if (!w)
			return;
		w->awaiting_token = false;
		if (w->finished)
			continue;
		if (error < 0 || watch_connect(w) < 0)
			watch_schedule_reconnect(w);
		else
			watch_arm_timer(w);
	}
}

static void watch_unlink(struct etcd_watch *w)
{
	for (struct etcd_watch **p = &w->c->watches; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			return;
		}
	}
}

static bool watch_has_frame(const struct etcd_watch *w)
{
	size_t len, consumed;
	return !w->finished && w->easy && w->stream.len > 0 && watch_frame(w, &len, &consumed);
}

/*
 * The stream of an open body ended while curl does not see it: curl does not
 * end a transfer whose upload is paused when the server hangs up (it lets go
 * of the socket: etcd_watch_unwatched), nor when the reply is an HTTP error
 * that has come whole.  Either is the end of the stream.
 */
static bool watch_ended_unseen(struct etcd_watch *w)
{
	curl_socket_t fd = w->unwatched;

	w->unwatched = CURL_SOCKET_BAD;
	if (!w->easy || w->blocking)
		return false;
	if (w->http_error) {
		_cleanup_(cJSON_Deletep) cJSON *json = cJSON_ParseWithLength(
			w->stream.data ? w->stream.data : "", w->stream.len);
		if (json)
			return true;
	}
	return fd != CURL_SOCKET_BAD && etcd_socket_hung_up(fd);
}

void etcd_watch_unwatched(struct etcd_client *c, CURL *easy, curl_socket_t fd)
{
	for (struct etcd_watch *w = c->watches; w; w = w->next)
		if (w->easy && w->easy == easy)
			w->unwatched = fd;
}

/*
 * After curl ran: finished transfers, then complete frames, for every watch.  A
 * callback may start or stop any watch, so the walk starts over whenever one
 * was delivered to (the watches already walked have nothing left, so this is
 * cheap); watches stopped from inside their own callbacks are freed here.
 */
static void client_dispatch(struct etcd_client *c)
{
	multi_collect(c->multi);
	etcd_keepalive_stream_dispatch(c);
	for (;;) {
		/* Each found is asked once (watch_ended_unseen forgets the
		 * socket): the walk starts over, as a callback may change it. */
		struct etcd_watch *w = c->watches;
		while (w && (w->stop_requested || w->finished || !watch_ended_unseen(w)))
			w = w->next;
		if (!w)
			break;
		watch_transfer_done(w, CURLE_OK);
	}
	for (;;) {
		struct etcd_watch *w = c->watches;
		while (w && !watch_has_frame(w) && !w->stop_requested)
			w = w->next;
		if (!w)
			break;
		if (!w->stop_requested) {
			watch_process(w);
			if (!w->stop_requested && w->easy)
				watch_arm_timer(w);
		}
		if (w->stop_requested) {
			watch_unlink(w);
			watch_free(w);
		}
	}
}

static int on_curl_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct etcd_client *c = userdata;
	int flags = 0, running;
	if (revents & EPOLLIN)
		flags |= CURL_CSELECT_IN;
	if (revents & EPOLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (revents & (EPOLLERR | EPOLLHUP))
		flags |= CURL_CSELECT_ERR;
	curl_multi_socket_action(c->multi, fd, flags, &running);
	client_dispatch(c);
	return 0;
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct etcd_client *c = userp;
	sd_event_source *s = socketp;
	if (what == CURL_POLL_REMOVE) {
		sd_event_source_disable_unref(s);
		curl_multi_assign(c->multi, fd, NULL);
		etcd_keepalive_stream_unwatched(c, easy, fd);
		etcd_watch_unwatched(c, easy, fd);
		return 0;
	}
	uint32_t events = 0;
	if (what & CURL_POLL_IN)
		events |= EPOLLIN;
	if (what & CURL_POLL_OUT)
		events |= EPOLLOUT;
	if (s)
		return sd_event_source_set_io_events(s, events) < 0 ? -1 : 0;
	if (sd_event_add_io(c->event, &s, fd, events, on_curl_io, c) < 0)
		return -1;
	/* Streams are read before anything of normal priority runs (the
	 * node's evaluation among it): frames that have arrived are applied
	 * first, so that a decision sees every one of them. */
	(void)sd_event_source_set_priority(s, SD_EVENT_PRIORITY_IMPORTANT);
	curl_multi_assign(c->multi, fd, s);
	return 0;
}

static int on_multi_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct etcd_client *c = userdata;
	int running;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	client_dispatch(c);
	return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
	struct etcd_client *c = userp;
	if (timeout_ms < 0)
		return sd_event_source_set_enabled(c->multi_timer, SD_EVENT_OFF) < 0 ? -1 : 0;
	uint64_t now;
	sd_event_now(c->event, CLOCK_MONOTONIC, &now);
	if (sd_event_source_set_time(c->multi_timer, now + (uint64_t)timeout_ms * 1000) < 0 ||
	    sd_event_source_set_enabled(c->multi_timer, SD_EVENT_ONESHOT) < 0)
		return -1;
	return 0;
}

int etcd_client_attach_event(struct etcd_client *c, sd_event *event)
{
	if (c->event)
		return -EBUSY;
	c->multi = curl_multi_init();
	if (!c->multi)
		return -ENOMEM;
	int r = sd_event_add_time(event, &c->multi_timer, CLOCK_MONOTONIC, UINT64_MAX, 1000,
				  on_multi_timer, c);
	if (r < 0)
		return r;
	sd_event_source_set_enabled(c->multi_timer, SD_EVENT_OFF);
	c->event = sd_event_ref(event);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	return 0;
}

int etcd_watch_start_ranges(struct etcd_client *c, const struct etcd_watch_range *ranges,
			    size_t n_ranges, uint64_t idle_ms, etcd_watch_fn on_events,
			    etcd_watch_error_fn on_error, void *userdata, struct etcd_watch **ret)
{
	if (!c->event || n_ranges == 0)
		return -EINVAL;
	struct etcd_watch *w = watch_new(c, ranges, n_ranges, on_events, userdata);
	if (!w)
		return -ENOMEM;
	w->multi = c->multi;
	w->on_error = on_error;
	w->idle_ms = idle_ms;
	w->next = c->watches;
	c->watches = w;
	if (watch_connect(w) < 0)
		watch_schedule_reconnect(w);	/* try again from the loop */
	else
		watch_arm_timer(w);
	if (ret)
		*ret = w;
	return 0;
}

struct etcd_watch *etcd_watch_stop(struct etcd_watch *w)
{
	if (!w)
		return NULL;
	if (w->dispatching) {
		/* Inside this watch's own callback: free once it returns. */
		w->stop_requested = true;
		watch_disconnect(w);
		w->finished = true;
		return NULL;
	}
	watch_unlink(w);
	watch_free(w);
	return NULL;
}


int64_t etcd_watch_range_revision(const struct etcd_watch *w, size_t i)
{
	return i < w->n_own ? w->ranges[i].last_rev : 0;
}

int etcd_watch_add(struct etcd_watch *w, const struct etcd_watch_range *range,
		   etcd_watch_fn on_events, etcd_watch_error_fn on_error, void *userdata,
		   struct etcd_watch_part **ret)
{
	_cleanup_(freep) struct etcd_watch_part *p = NULL;
	struct watch_range wr;

	if (!w || w->blocking || w->finished || w->stop_requested)
		return -EINVAL;
	if (!(p = calloc(1, sizeof(*p))))
		return -ENOMEM;
	struct watch_range *v = realloc(w->ranges, (w->n_ranges + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	w->ranges = v;
	if (watch_range_init(&wr, range) < 0)
		return -ENOMEM;
	*p = (struct etcd_watch_part){ .w = w, .on_events = on_events, .on_error = on_error,
				       .userdata = userdata };
	wr.part = p;
	/* On the open stream, one more create; between streams, the next
	 * one carries it with the others (watch_connect). */
	if (w->easy) {
		_cleanup_(buf_releasep) struct buf create = BUF_INIT;
		if (add_create_request(&create, &wr) < 0 || watch_send(w, buf_str(&create)) < 0) {
			watch_range_release(&wr);
			return -ENOMEM;
		}
		wr.sent = true;
	}
	w->ranges[w->n_ranges++] = wr;
	*ret = TAKE_PTR(p);
	return 0;
}

struct etcd_watch_part *etcd_watch_remove(struct etcd_watch_part *p)
{
	if (!p)
		return NULL;
	struct etcd_watch *w = p->w;
	size_t i = w ? watch_range_of_part(w, p) : 0;
	/* A cancel that cannot be queued (no memory) leaves a range whose
	 * frames nobody takes: the stream starts over without it. */
	if (w && i < w->n_ranges && watch_range_remove(w, i) < 0 && !w->dispatching)
		watch_schedule_reconnect(w);
	free(p);
	return NULL;
}
