/*
 * etcd.c — unary requests to etcd's v3 gateway: ranges, puts, deletes, txns,
 * leases, status and authentication, with failover across the endpoints of one
 * cluster.  Watch streams live in etcd_watch.c.
 *
 * Every request goes through etcd_call(): it serialises the body once, then tries
 * the endpoints in order starting with the one that answered last.  A transport
 * failure, an HTTP 5xx, or a gRPC code that another member may not share
 * (Unavailable, DeadlineExceeded, "leader changed") moves on to the next member;
 * anything else is the cluster's answer and is returned.  A refused token is
 * renewed once (etcd's simple tokens expire after --auth-token-ttl).
 *
 * One easy handle is reused for all unary calls so that consecutive requests
 * (a paged range, the reads of `status`) share one keep-alive connection.
 */
#define _GNU_SOURCE	/* memmem */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/array.h"
#include "base/address.h"
#include "base/base64.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "etcd_internal.h"
#include "base/strv.h"

#define DEFAULT_TIMEOUT_MS 5000
/*
 * Page size.  Measured against etcd 3.4's gateway with 10,000 keys: a page of
 * 5,000 keys costs ~55 ms, one of 10,000 ~120 ms (its JSON marshalling grows
 * faster than linearly), one of 2,000 ~30 ms but every page also pays a count
 * of the whole remaining range.  5,000 is the sweet spot.
 */

/* gRPC status codes that the gateway puts in "code". */
enum {
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNAVAILABLE = 14,
	GRPC_UNAUTHENTICATED = 16,
};

void etcd_set_error(struct etcd_client *c, const char *fmt, ...)
{
	va_list ap;
	buf_reset(&c->error);
	va_start(ap, fmt);
	buf_vprintf(&c->error, fmt, ap);
	va_end(ap);
}

const char *etcd_last_error(const struct etcd_client *c)
{
	return c->error.len ? buf_str(&c->error) : "etcd: no error";
}

const char *etcd_current_endpoint(const struct etcd_client *c)
{
	return c->endpoints[c->current];
}

uint64_t etcd_client_reconnects(const struct etcd_client *c) { return c->reconnects; }
uint64_t etcd_client_events(const struct etcd_client *c) { return c->events; }
uint64_t etcd_client_backlog_answers(const struct etcd_client *c) { return c->backlog_answers; }

/* --- endpoints --------------------------------------------------------------- */

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '_';
}

static bool path_char(char c)
{
	return host_char(c) || c == '~' || c == '/';
}

/* Checks HOST[:PORT] of [s, e); NULL when fine, else the problem. */
static const char *authority_problem(const char *s, const char *e)
{
	const char *colon = NULL;

	if (s == e)
		return "no host";
	if (memchr(s, '@', (size_t)(e - s)))
		return "a user in the URL is not allowed (use --user and a password file)";
	if (*s == '[') {
		const char *close = memchr(s, ']', (size_t)(e - s));
		char v6[ADDRESS_TEXT_MAX + 1];
		if (!close || (size_t)(close - s - 1) > ADDRESS_TEXT_MAX)
			return "an IPv6 address in brackets is not closed";
		memcpy(v6, s + 1, (size_t)(close - s - 1));
		v6[close - s - 1] = '\0';
		if (address_family(v6, NULL) != 6)
			return "not an IPv6 address in brackets";
		if (close + 1 < e && close[1] != ':')
			return "unexpected text after the IPv6 address";
		colon = close + 1 < e ? close + 1 : NULL;
	} else {
		const char *p, *c1 = memchr(s, ':', (size_t)(e - s));
		if (c1 && memchr(c1 + 1, ':', (size_t)(e - c1 - 1)))
			return "an IPv6 address needs brackets, as in http://[::1]:2379";
		for (p = s; p < e && *p != ':'; p++)
			if (!host_char(*p))
				return "the host holds a character that no host name has";
		if (p == s)
			return "no host";
		colon = p < e ? p : NULL;
	}
	if (colon) {
		long port = 0;
		if (colon + 1 == e)
			return "empty port";
		for (const char *p = colon + 1; p < e; p++) {
			if (*p < '0' || *p > '9')
				return "the port is not a number";
			if (port <= 65535)
				port = port * 10 + (*p - '0');
		}
		if (port < 1 || port > 65535)
			return "the port is not 1-65535";
	}
	return NULL;
}

int etcd_endpoint_parse(const char *text, size_t len, char **ret, const char **ret_problem)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	const char *end = text + len, *rest = text, *slash;
	const char *problem = NULL;

	*ret = NULL;
	for (const char *p = text; p < end; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			problem = "contains a space or a control character";
	const char *sep = len >= 3 ? memmem(text, len, "://", 3) : NULL;
	if (problem) {
		/* said above */
	} else if (len == 0) {
		problem = "empty";
	} else if (sep) {
		size_t slen = (size_t)(sep - text);
		if (!((slen == 4 && strncasecmp(text, "http", 4) == 0) ||
		      (slen == 5 && strncasecmp(text, "https", 5) == 0)))
			problem = "the scheme is not http:// or https://";
		else if (buf_add(&b, text, slen) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < b.len; i++)
			b.data[i] = (char)(b.data[i] | 0x20);	/* lower case */
		rest = sep + 3;
	} else if (buf_adds(&b, "http") < 0) {
		return -ENOMEM;
	}
	if (!problem) {
		slash = memchr(rest, '/', (size_t)(end - rest));
		problem = authority_problem(rest, slash ? slash : end);
		for (const char *p = slash; !problem && p && p < end; p++)
			if (!path_char(*p))
				problem = "the path holds a character that is not allowed (no query, no fragment)";
	}
	if (problem) {
		if (ret_problem)
			*ret_problem = problem;
		return -EINVAL;
	}
	/* "http://h:2379/" and "http://h:2379" name the same member */
	while (end > rest && end[-1] == '/')
		end--;
	if (buf_adds(&b, "://") < 0 || buf_add(&b, rest, (size_t)(end - rest)) < 0)
		return -ENOMEM;
	*ret = buf_detach(&b);
	return *ret ? 0 : -ENOMEM;
}

int etcd_endpoints_parse(const char *text, char ***v, size_t *n, char **ret_bad,
			 const char **ret_problem)
{
	for (const char *p = text;;) {
		const char *comma = strchr(p, ',');
		const char *s = p, *e = comma ? comma : p + strlen(p);
		char *endpoint;
		int r;

		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		r = etcd_endpoint_parse(s, (size_t)(e - s), &endpoint, ret_problem);
		if (r == -EINVAL && ret_bad)
			*ret_bad = strndup(s, (size_t)(e - s));
		if (r < 0 || (r = strv_consume(v, n, endpoint)) < 0)
			return r;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* --- the client --------------------------------------------------------------- */

static char *strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int etcd_client_new(const struct etcd_options *o, struct etcd_client **ret)
{
	if (!o->endpoints || !o->endpoints[0])
		return -EINVAL;
	_cleanup_(etcd_client_freep) struct etcd_client *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	size_t n = 0;
	while (o->endpoints[n])
		n++;
	c->endpoints = calloc(n + 1, sizeof(char *));
	if (!c->endpoints)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *problem;
		int r = etcd_endpoint_parse(o->endpoints[i], strlen(o->endpoints[i]),
					    &c->endpoints[i], &problem);
		if (r < 0)
			return r;
	}
	c->n_endpoints = n;
	c->cacert = strdup_or_null(o->cacert);
	c->cert = strdup_or_null(o->cert);
	c->key = strdup_or_null(o->key);
	c->user = strdup_or_null(o->user);
	c->password = strdup_or_null(o->password ? o->password : (o->user ? "" : NULL));
	c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	c->token_keep_ms = o->token_keep_ms;
	c->easy = curl_easy_init();
	if (!c->easy)
		return -ENOMEM;
	*ret = TAKE_PTR(c);
	return 0;
}

struct etcd_client *etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return NULL;
	while (c->watches)
		etcd_watch_stop(c->watches);
	etcd_keep_token_stop(c);
	etcd_calls_free(c);
	etcd_keepalive_stream_free(c);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	sd_event_source_disable_unref(c->multi_timer);
	sd_event_unref(c->event);
	if (c->easy)
		curl_easy_cleanup(c->easy);
	strv_free(c->endpoints);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c->user);
	if (c->password)
		explicit_bzero(c->password, strlen(c->password));
	free(c->password);
	free(c->token);
	free(c->denied_key);
	etcd_kv_release(&c->replaced);
	buf_release(&c->error);
	free(c);
	return NULL;
}

size_t etcd_write_to_buf(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct buf *b = userdata;
	size_t n = size * nmemb;
	if (b->len + n > ETCD_MAX_REPLY || buf_add(b, data, n) < 0)
		return 0;	/* aborts the transfer: CURLE_WRITE_ERROR */
	return n;
}

size_t etcd_open_body_read(char *dest, size_t size, size_t nitems, void *userdata)
{
	struct etcd_open_body *b = userdata;
	size_t room = size * nitems, left = b->out.len - b->sent;

	if (left == 0) {
		b->paused = true;
		return CURL_READFUNC_PAUSE;
	}
	if (left > room)
		left = room;
	memcpy(dest, b->out.data + b->sent, left);
	b->sent += left;
	if (b->sent == b->out.len) {
		buf_reset(&b->out);
		b->sent = 0;
	}
	return left;
}

int etcd_open_body_add(struct etcd_open_body *b, const char *text)
{
	return buf_adds(&b->out, text) < 0 ? -ENOMEM : 0;
}

void etcd_open_body_resume(struct etcd_open_body *b, CURL *easy)
{
	if (b->paused && easy) {
		b->paused = false;
		curl_easy_pause(easy, CURLPAUSE_CONT);
	}
}

void etcd_open_body_reset(struct etcd_open_body *b)
{
	buf_reset(&b->out);
	b->sent = 0;
	b->paused = false;
}

void etcd_open_body_release(struct etcd_open_body *b)
{
	etcd_open_body_reset(b);
	buf_release(&b->out);
}

int etcd_easy_setup(struct etcd_client *c, CURL *easy, const char *endpoint, const char *path,
		    const char *body, long timeout_ms, struct curl_slist **headers)
{
	_cleanup_(buf_releasep) struct buf url = BUF_INIT;
	if (buf_printf(&url, "%s%s", endpoint, path) < 0)
		return -ENOMEM;

	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (!h)
		return -ENOMEM;
	if (c->token) {
		_cleanup_(buf_releasep) struct buf auth = BUF_INIT;
		buf_printf(&auth, "Authorization: %s", c->token);
		struct curl_slist *h2 = curl_slist_append(h, buf_str(&auth));
		if (!h2) {
			curl_slist_free_all(h);
			return -ENOMEM;
		}
		h = h2;
	}
	*headers = h;

	curl_easy_setopt(easy, CURLOPT_URL, buf_str(&url));
	curl_easy_setopt(easy, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body);
	curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPIDLE, 30L);
	curl_easy_setopt(easy, CURLOPT_TCP_KEEPINTVL, 10L);
	/* The gateway is the only peer: never follow redirects, never use a proxy
	 * from the environment for loopback or cluster traffic. */
	curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(easy, CURLOPT_PROXY, "");
	curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->cacert)
		curl_easy_setopt(easy, CURLOPT_CAINFO, c->cacert);
	if (c->cert)
		curl_easy_setopt(easy, CURLOPT_SSLCERT, c->cert);
	if (c->key)
		curl_easy_setopt(easy, CURLOPT_SSLKEY, c->key);
	return 0;
}

static bool curl_error_is_tls_trust(CURLcode code)
{
	return code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE ||
	       code == CURLE_SSL_CERTPROBLEM || code == CURLE_SSL_ISSUER_ERROR;
}

int etcd_grpc_errno(long grpc_code, const char *message, bool have_user,
		    bool *ret_retry_elsewhere, bool *ret_reauth)
{
	*ret_retry_elsewhere = false;
	*ret_reauth = false;
	if (!message)
		message = "";

	switch (grpc_code) {
	case GRPC_UNAUTHENTICATED:
		*ret_reauth = have_user;
		return -EACCES;
	case GRPC_PERMISSION_DENIED:
		return -EACCES;
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
		*ret_retry_elsewhere = true;
		return -ECONNREFUSED;
	case GRPC_RESOURCE_EXHAUSTED:
		if (strstr(message, "space"))
			return -ENOSPC;
		*ret_retry_elsewhere = true;
		return strstr(message, "too many requests") ? -EBUSY : -ECONNREFUSED;
	case GRPC_OUT_OF_RANGE:
		if (strstr(message, "compacted"))
			return -ESTALE;
		return -EINVAL;
	case GRPC_INVALID_ARGUMENT:
		/* A token issued before a user or role changed is refused as "old"
		 * (etcd 3.4 sends InvalidArgument): a fresh one is the cure. */
		if (strstr(message, "auth store is old") || strstr(message, "invalid auth token")) {
			*ret_reauth = have_user;
			return -EACCES;
		}
		if (strstr(message, "authentication failed") || strstr(message, "user name"))
			return -EACCES;
		return -EINVAL;
	case GRPC_FAILED_PRECONDITION:
	case GRPC_NOT_FOUND:
		return -EINVAL;
	default:
		/* Unknown or Internal: "leader changed", "no leader" and friends
		 * are transient on this member; so is the gateway's own "context
		 * deadline exceeded" (etcd did not answer it in time: the request
		 * may still be applied, so it is no definite failure).  etcd
		 * 3.4.23's gateway sends "too many requests" here too, as HTTP
		 * 500 and code 2 (captured from one held to a fifth of a core
		 * under 8,000 txns at once): refused before it was proposed, so
		 * never applied (etcd.h, -EBUSY). */
		if (strstr(message, "too many requests")) {
			*ret_retry_elsewhere = true;
			return -EBUSY;
		}
		if (strstr(message, "leader") || strstr(message, "timed out") ||
		    strstr(message, "deadline exceeded") || strstr(message, "context canceled")) {
			*ret_retry_elsewhere = true;
			return -ECONNREFUSED;
		}
		return -EPROTO;
	}
}

long etcd_grpc_code(const cJSON *code)
{
	if (!cJSON_IsNumber(code) || !(code->valuedouble >= 0 && code->valuedouble <= 255))
		return 2;
	return (long)code->valuedouble;
}

int etcd_map_grpc_error(struct etcd_client *c, const char *endpoint, long grpc_code,
			const char *message, bool *ret_retry_elsewhere, bool *ret_reauth)
{
	etcd_set_error(c, "etcd '%s': %s", endpoint, message ? message : "(no message)");
	if (message && strstr(message, "waiting for the applied index"))
		c->backlog_answers++;
	return etcd_grpc_errno(grpc_code, message, c->user != NULL, ret_retry_elsewhere,
			       ret_reauth);
}

/* Reads the gateway's unary error object {"error","message","code"}. */
static int map_error_body(struct etcd_client *c, const char *endpoint, long http_code,
			  const cJSON *body, bool *retry, bool *reauth)
{
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(body, "code");
	const cJSON *msg = cJSON_GetObjectItemCaseSensitive(body, "message");
	const cJSON *streamed = cJSON_GetObjectItemCaseSensitive(body, "error");
	if (!cJSON_IsNumber(code) && cJSON_IsObject(streamed)) {
		/* A streaming call's (a keepalive): {"error":{"grpc_code",
		 * "message",...}} */
		code = cJSON_GetObjectItemCaseSensitive(streamed, "grpc_code");
		msg = cJSON_GetObjectItemCaseSensitive(streamed, "message");
	}
	if (!cJSON_IsNumber(code)) {
		etcd_set_error(c, "etcd '%s': HTTP %ld with a reply that is not a gateway error",
			       endpoint, http_code);
		*retry = http_code >= 500;
		*reauth = false;
		return *retry ? -ECONNREFUSED : -EPROTO;
	}
	return etcd_map_grpc_error(c, endpoint, etcd_grpc_code(code),
				   cJSON_IsString(msg) ? msg->valuestring : NULL, retry, reauth);
}

/* The key of the write a request at path with body makes (a put's, a delete's,
 * a txn's first operation), base64-decoded, or NULL. */
static char *write_key(const char *path, const char *body_text)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_Parse(body_text);
	const cJSON *key = NULL;

	if (strcmp(path, "/v3/kv/put") == 0 || strcmp(path, "/v3/kv/deleterange") == 0) {
		key = cJSON_GetObjectItemCaseSensitive(body, "key");
	} else if (strcmp(path, "/v3/kv/txn") == 0) {
		const cJSON *ops = cJSON_GetObjectItemCaseSensitive(body, "success");
		const cJSON *op = cJSON_IsArray(ops) ? cJSON_GetArrayItem(ops, 0) : NULL;
		const cJSON *req = op ? op->child : NULL;
		key = req ? cJSON_GetObjectItemCaseSensitive(req, "key") : NULL;
	}
	if (!cJSON_IsString(key))
		return NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (base64_decode(key->valuestring, strlen(key->valuestring), &b) < 0 ||
	    buf_addc(&b, '\0') < 0 || memchr(b.data, '\0', b.len - 1))
		return NULL;
	return buf_detach(&b);
}

const char *etcd_denied_key(const struct etcd_client *c)
{
	return c->denied_key;
}

void etcd_call_begin(struct etcd_client *c)
{
	free(c->denied_key);
	c->denied_key = NULL;
}

static enum etcd_attempt attempt_read(struct etcd_client *c, size_t i, const char *path,
				      const char *body_text, CURLcode code, long http_code,
				      const struct buf *reply, bool *tls_refused, int *ret_error,
				      cJSON **ret_reply)
{
	const char *endpoint = c->endpoints[i];

	if (code != CURLE_OK) {
		if (code == CURLE_WRITE_ERROR) {
			etcd_set_error(c, "etcd '%s': reply larger than %u MiB or out of memory",
				       endpoint, ETCD_MAX_REPLY >> 20);
			*ret_error = -EPROTO;
			return ETCD_ATTEMPT_DONE;
		}
		etcd_set_error(c, "etcd '%s': %s", endpoint, curl_easy_strerror(code));
		if (curl_error_is_tls_trust(code))
			*tls_refused = true;
		*ret_error = -ECONNREFUSED;
		return ETCD_ATTEMPT_ELSEWHERE;
	}

	_cleanup_(cJSON_Deletep) cJSON *json = cJSON_ParseWithLength(reply->data ? reply->data : "",
								    reply->len);
	if (!cJSON_IsObject(json)) {
		/* etcd's JSON gateway, with --client-cert-auth and auth
		 * enabled, refuses every request over a client certificate
		 * that has a Common Name (embed/serve.go): it cannot pass the
		 * CN on as the user.  Say so and what works instead. */
		if (http_code == 400 && reply->data &&
		    memmem(reply->data, reply->len, "CommonName of client", 20)) {
			etcd_set_error(c, "etcd '%s': with auth enabled, etcd's JSON gateway refuses "
				       "a client certificate that has a Common Name; use one "
				       "without a CN and a password (--user)", endpoint);
			*ret_error = -EACCES;
			return ETCD_ATTEMPT_DONE;
		}
		etcd_set_error(c, "etcd '%s': HTTP %ld with a reply that is not JSON",
			       endpoint, http_code);
		if (http_code >= 500 || http_code == 0) {
			*ret_error = -ECONNREFUSED;
			return ETCD_ATTEMPT_ELSEWHERE;
		}
		*ret_error = -EPROTO;
		return ETCD_ATTEMPT_DONE;
	}
	if (http_code == 200) {
		int64_t rev;
		const cJSON *header = cJSON_GetObjectItemCaseSensitive(json, "header");
		if (cJSON_IsObject(header) && etcd_decode_int64(header, "revision", &rev) == 0 &&
		    rev > c->revision)
			c->revision = rev;
		c->current = i;
		*ret_reply = TAKE_PTR(json);
		*ret_error = 0;
		return ETCD_ATTEMPT_DONE;
	}

	bool retry, reauth;
	int r = map_error_body(c, endpoint, http_code, json, &retry, &reauth);
	*ret_error = r;
	if (r == -EACCES && !reauth) {
		free(c->denied_key);
		c->denied_key = write_key(path, body_text);
	}
	if (reauth)
		return ETCD_ATTEMPT_REAUTH;
	return retry ? ETCD_ATTEMPT_ELSEWHERE : ETCD_ATTEMPT_DONE;
}

enum etcd_attempt etcd_attempt_read(struct etcd_client *c, size_t i, const char *path,
				    const char *body_text, CURLcode code, long http_code,
				    const struct buf *reply, struct etcd_attempts *a,
				    int *ret_error, cJSON **ret_reply)
{
	enum etcd_attempt next = attempt_read(c, i, path, body_text, code, http_code, reply,
					      &a->tls_refused, ret_error, ret_reply);
	/* etcd refused it before proposing it: no copy of it can be applied */
	if (next == ETCD_ATTEMPT_ELSEWHERE && *ret_error != -EBUSY)
		a->unsure = true;
	return next;
}

int etcd_attempts_error(const struct etcd_attempts *a, int last)
{
	if (a->tls_refused && last == -ECONNREFUSED)
		return -EACCES;
	if (a->unsure && last == -EBUSY)
		return -ECONNREFUSED;
	return last;
}

int etcd_token_refused_again(struct etcd_client *c)
{
	/* A permission problem it is not: what needs saying is how late etcd is. */
	_cleanup_(freep) char *said = strdup(etcd_last_error(c));
	etcd_set_error(c, "%s (the token of a fresh login too: etcd read the request only after "
		       "its --auth-token-ttl)", said ? said : "invalid auth token");
	return -EKEYEXPIRED;
}

int etcd_reauthenticate(struct etcd_client *c)
{
	etcd_token_refused(c, c->token_gen);
	return etcd_authenticate(c);
}

/*
 * One unary request with failover.  On success *ret holds the parsed reply
 * (an object).  raw_path is e.g. "/v3/kv/range".
 */
static int etcd_call(struct etcd_client *c, const char *path, const cJSON *body, cJSON **ret)
{
	_cleanup_(freep) char *text = cJSON_PrintUnformatted(body);
	if (!text)
		return -ENOMEM;
	bool reauthed = false;
	struct etcd_attempts failed = { 0 };
	int r = -ECONNREFUSED;

	etcd_call_begin(c);
	if (etcd_token_needed(c)) {
		r = etcd_authenticate(c);
		if (r < 0)
			return r;
	}

	for (size_t attempt = 0; attempt < c->n_endpoints; attempt++) {
		size_t i = (c->current + attempt) % c->n_endpoints;
		_cleanup_(buf_releasep) struct buf reply = BUF_INIT;
		struct curl_slist *headers = NULL;

		curl_easy_reset(c->easy);
		r = etcd_easy_setup(c, c->easy, c->endpoints[i], path, text, c->timeout_ms, &headers);
		if (r < 0)
			return r;
		curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, etcd_write_to_buf);
		curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, &reply);
		c->requests++;
		CURLcode code = curl_easy_perform(c->easy);
		curl_slist_free_all(headers);
		long http_code = 0;
		if (code == CURLE_OK)
			curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &http_code);

		switch (etcd_attempt_read(c, i, path, text, code, http_code, &reply, &failed, &r,
					  ret)) {
		case ETCD_ATTEMPT_DONE:
			return r;
		case ETCD_ATTEMPT_ELSEWHERE:
			continue;
		case ETCD_ATTEMPT_REAUTH:
			if (reauthed)
				return etcd_token_refused_again(c);
			reauthed = true;
			int k = etcd_reauthenticate(c);
			if (k < 0)
				return k;
			attempt--;	/* the same member again, with the new token */
			continue;
		}
	}
	return etcd_attempts_error(&failed, r);
}

int etcd_request(struct etcd_client *c, const char *path, const cJSON *body, cJSON **ret)
{
	if (!path || strncmp(path, "/v3/", 4) != 0 || !body)
		return -EINVAL;
	return etcd_call(c, path, body, ret);
}

const char *etcd_client_user(const struct etcd_client *c)
{
	return c->user;
}

cJSON *etcd_auth_request(const struct etcd_client *c)
{
	cJSON *body = cJSON_CreateObject();
	if (!body || !cJSON_AddStringToObject(body, "name", c->user) ||
	    !cJSON_AddStringToObject(body, "password", c->password ? c->password : "")) {
		cJSON_Delete(body);
		return NULL;
	}
	return body;
}

int etcd_auth_error(struct etcd_client *c, int r)
{
	/* A cluster without authentication enabled answers FailedPrecondition:
	 * go on without a token rather than refuse to work. */
	if (r == -EINVAL && strstr(etcd_last_error(c), "not enabled"))
		return 0;
	if (r == -EINVAL || r == -EPROTO)
		return -EACCES;
	return r;
}

int etcd_token_expiry(const char *token, int64_t *ret_exp)
{
	/* header.payload.signature, each base64url; a simple token is
	 * "random.index", one dot. */
	const char *payload = strchr(token, '.');
	const char *end = payload ? strchr(payload + 1, '.') : NULL;
	if (!end || strchr(end + 1, '.'))
		return 0;
	payload++;
	_cleanup_(buf_releasep) struct buf json = BUF_INIT;
	if (base64url_decode(payload, (size_t)(end - payload), &json) < 0)
		return 0;
	_cleanup_(cJSON_Deletep) cJSON *claims = cJSON_ParseWithLength(json.data, json.len);
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(claims, "exp");
	/* Seconds since the epoch; a value past the year 5000 is no date
	 * this client can reckon with (and must not overflow its sums). */
	if (!cJSON_IsNumber(exp) || !(exp->valuedouble > 0 && exp->valuedouble < 1e11))
		return 0;
	*ret_exp = (int64_t)exp->valuedouble;
	return 1;
}

/* When a token taken now expires, on the monotonic clock: 0 when it does not
 * say (a simple token, which lives while it is used), or when this host's
 * clock is ahead of etcd's by more than the token's life. */
static uint64_t token_expires_ms(const char *token)
{
	int64_t exp;
	if (etcd_token_expiry(token, &exp) <= 0)
		return 0;
	int64_t life_ms = exp * 1000 - (int64_t)clock_msec(CLOCK_REALTIME);
	return life_ms > 0 ? etcd_now_ms() + (uint64_t)life_ms : 0;
}

int etcd_auth_take(struct etcd_client *c, const cJSON *reply)
{
	const cJSON *token = cJSON_GetObjectItemCaseSensitive(reply, "token");
	if (!cJSON_IsString(token)) {
		etcd_set_error(c, "etcd '%s': authentication reply without a token",
			       etcd_current_endpoint(c));
		return -EPROTO;
	}
	/* A token goes into an HTTP header: refuse one that could split it. */
	if (strpbrk(token->valuestring, "\r\n")) {
		etcd_set_error(c, "etcd '%s': authentication token holds a line break",
			       etcd_current_endpoint(c));
		return -EPROTO;
	}
	char *copy = strdup(token->valuestring);
	if (!copy)
		return -ENOMEM;
	free(c->token);
	c->token = copy;
	c->token_gen++;
	c->token_expires_ms = token_expires_ms(copy);
	c->token_renew_ms = 0;	/* drawn by the keep (etcd_call.c) */
	c->login_after_ms = 0;	/* the next token lost is spread anew */
	return 0;
}

void etcd_token_refused(struct etcd_client *c, uint64_t gen)
{
	/* A request sent with an older token says nothing of this one. */
	if (gen != c->token_gen)
		return;
	free(c->token);
	c->token = NULL;
}

int etcd_authenticate(struct etcd_client *c)
{
	if (!c->user)
		return 0;
	_cleanup_(cJSON_Deletep) cJSON *body = etcd_auth_request(c);
	if (!body)
		return -ENOMEM;

	/* etcd_call() would authenticate first: call with no user for this one. */
	char *user = c->user;
	c->user = NULL;
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	int r = etcd_call(c, "/v3/auth/authenticate", body, &reply);
	c->user = user;
	return r < 0 ? etcd_auth_error(c, r) : etcd_auth_take(c, reply);
}

/* --- JSON helpers ------------------------------------------------------------ */

static int add_bytes(cJSON *obj, const char *field, const void *data, size_t len)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (base64_encode(data, len, &b) < 0 || buf_grow(&b, 0) < 0)
		return -ENOMEM;
	return cJSON_AddStringToObject(obj, field, buf_str(&b)) ? 0 : -ENOMEM;
}

static int add_int64(cJSON *obj, const char *field, int64_t v)
{
	char s[32];
	snprintf(s, sizeof(s), "%" PRId64, v);
	return cJSON_AddStringToObject(obj, field, s) ? 0 : -ENOMEM;
}

int etcd_decode_int64(const cJSON *obj, const char *field, int64_t *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	if (!v) {
		*ret = 0;
		return 0;
	}
	if (cJSON_IsString(v)) {
		const char *s = v->valuestring;
		char *end;
		if (!*s || (!(*s >= '0' && *s <= '9') && *s != '-'))
			return -EPROTO;
		errno = 0;
		long long n = strtoll(s, &end, 10);
		if (errno || *end)
			return -EPROTO;
		*ret = n;
		return 0;
	}
	if (cJSON_IsNumber(v)) {
		double d = v->valuedouble;
		if (d != d || d < -9.2e18 || d > 9.2e18 || (double)(int64_t)d != d)
			return -EPROTO;
		*ret = (int64_t)d;
		return 0;
	}
	return -EPROTO;
}

static int decode_bytes(const cJSON *obj, const char *field, bool required, char **ret,
			size_t *ret_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, field);
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (!v) {
		if (required)
			return -EPROTO;
	} else {
		if (!cJSON_IsString(v))
			return -EPROTO;
		if (base64_decode(v->valuestring, strlen(v->valuestring), &b) < 0)
			return -EPROTO;
	}
	*ret_len = b.len;
	*ret = buf_detach(&b);
	return *ret ? 0 : -ENOMEM;
}

void etcd_kv_release(struct etcd_kv *kv)
{
	if (!kv)
		return;
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

int etcd_decode_kv(const cJSON *obj, struct etcd_kv *ret)
{
	struct etcd_kv kv = { 0 };
	int r;
	if (!cJSON_IsObject(obj))
		return -EPROTO;
	if ((r = decode_bytes(obj, "key", true, &kv.key, &kv.key_len)) < 0 ||
	    (r = decode_bytes(obj, "value", false, &kv.value, &kv.value_len)) < 0 ||
	    (r = etcd_decode_int64(obj, "create_revision", &kv.create_revision)) < 0 ||
	    (r = etcd_decode_int64(obj, "mod_revision", &kv.mod_revision)) < 0 ||
	    (r = etcd_decode_int64(obj, "version", &kv.version)) < 0 ||
	    (r = etcd_decode_int64(obj, "lease", &kv.lease)) < 0) {
		etcd_kv_release(&kv);
		return r;
	}
	*ret = kv;
	return 0;
}

void etcd_kv_list_release(struct etcd_kv_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		etcd_kv_release(&l->kvs[i]);
	free(l->kvs);
	memset(l, 0, sizeof(*l));
}

static int kv_list_push(struct etcd_kv_list *l, struct etcd_kv *kv)
{
	if (ARRAY_GROW(l->kvs, l->cap, l->n + 1, 64) < 0)
		return -ENOMEM;
	l->kvs[l->n++] = *kv;
	memset(kv, 0, sizeof(*kv));
	return 0;
}

static int decode_header_revision(const cJSON *body, int64_t *ret)
{
	const cJSON *header = cJSON_GetObjectItemCaseSensitive(body, "header");
	if (!cJSON_IsObject(header))
		return -EPROTO;
	return etcd_decode_int64(header, "revision", ret);
}

int etcd_decode_range(const cJSON *body, struct etcd_kv_list *ret, bool *ret_more)
{
	int r = decode_header_revision(body, &ret->revision);
	if (r < 0)
		return r;
	if ((r = etcd_decode_int64(body, "count", &ret->count)) < 0)
		return r;
	const cJSON *more = cJSON_GetObjectItemCaseSensitive(body, "more");
	if (more && !cJSON_IsBool(more))
		return -EPROTO;
	*ret_more = cJSON_IsTrue(more);
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(body, "kvs");
	if (!kvs)
		return 0;
	if (!cJSON_IsArray(kvs))
		return -EPROTO;
	const cJSON *item;
	cJSON_ArrayForEach(item, kvs) {
		struct etcd_kv kv;
		if ((r = etcd_decode_kv(item, &kv)) < 0)
			return r;
		if ((r = kv_list_push(ret, &kv)) < 0) {
			etcd_kv_release(&kv);
			return r;
		}
	}
	return 0;
}

/* --- ranges ------------------------------------------------------------------ */

size_t etcd_prefix_end(const char *prefix, size_t len, char *end)
{
	/* The smallest key greater than every key starting with prefix: drop
	 * trailing 0xff bytes, then add one to the last byte. */
	memcpy(end, prefix, len);
	while (len > 0) {
		unsigned char last = (unsigned char)end[len - 1];
		if (last < 0xff) {
			end[len - 1] = (char)(last + 1);
			return len;
		}
		len--;
	}
	end[0] = '\0';
	return 1;	/* "\0" as range_end means "every key from key on" */
}

static int protocol_error(struct etcd_client *c, const char *what)
{
	etcd_set_error(c, "etcd '%s': malformed %s reply", etcd_current_endpoint(c), what);
	return -EPROTO;
}

int etcd_get(struct etcd_client *c, const char *key, struct etcd_kv *ret, int64_t *ret_revision)
{
	return etcd_get_at(c, key, 0, ret, ret_revision);
}

int etcd_get_at(struct etcd_client *c, const char *key, int64_t revision, struct etcd_kv *ret,
		int64_t *ret_revision)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	if (!body || add_bytes(body, "key", key, strlen(key)) < 0 ||
	    (revision > 0 && add_int64(body, "revision", revision) < 0))
		return -ENOMEM;
	int r = etcd_call(c, "/v3/kv/range", body, &reply);
	if (r < 0)
		return r;
	bool more;
	if (etcd_decode_range(reply, &list, &more) < 0 || list.n > 1)
		return protocol_error(c, "range");
	if (ret_revision)
		*ret_revision = list.revision;
	if (list.n == 0)
		return 0;
	if (list.kvs[0].key_len != strlen(key) || memcmp(list.kvs[0].key, key, list.kvs[0].key_len))
		return protocol_error(c, "range");
	if (ret) {
		*ret = list.kvs[0];
		memset(&list.kvs[0], 0, sizeof(list.kvs[0]));
	}
	return 1;
}

/* Empties a range read that failed half-way and returns r. */
static int range_fail(struct etcd_kv_list *l, int r)
{
	etcd_kv_list_release(l);
	return r;
}

int etcd_get_prefix_paged(struct etcd_client *c, const char *prefix, unsigned flags,
			  int64_t revision, long page_size, struct etcd_kv_list *ret)
{
	size_t plen = strlen(prefix);
	_cleanup_(freep) char *end = malloc(plen + 1);
	_cleanup_(freep) char *next = strdup(prefix);
	size_t next_len = plen;
	if (!end || !next)
		return -ENOMEM;
	size_t end_len = etcd_prefix_end(prefix, plen, end);
	memset(ret, 0, sizeof(*ret));
	for (;;) {
		_cleanup_(cJSON_Deletep) cJSON *body =
			etcd_range_request(next, next_len, end, end_len, flags, page_size, revision);
		_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
		if (!body)
			return range_fail(ret, -ENOMEM);

		int r = etcd_call(c, "/v3/kv/range", body, &reply);
		if (r < 0) {
			etcd_kv_list_release(ret);
			return r;
		}
		bool more = false;
		size_t before = ret->n;
		int64_t count_total = ret->count;
		r = etcd_decode_range(reply, ret, &more);
		if (r < 0) {
			etcd_kv_list_release(ret);
			return protocol_error(c, "range");
		}
		if (revision <= 0)
			revision = ret->revision;	/* pin every later page */
		if (before > 0)
			ret->count = count_total;	/* the first page's total stands */
		if (!more || (flags & ETCD_COUNT_ONLY))
			break;
		if (ret->n == before) {	/* "more" with an empty page: never loop */
			etcd_kv_list_release(ret);
			return protocol_error(c, "range");
		}
		free(next);
		if (!(next = etcd_page_after(ret, &next_len))) {
			etcd_kv_list_release(ret);
			return -ENOMEM;
		}
	}
	ret->revision = revision;
	return 0;
}

int etcd_get_prefix(struct etcd_client *c, const char *prefix, unsigned flags, int64_t revision,
		    struct etcd_kv_list *ret)
{
	return etcd_get_prefix_paged(c, prefix, flags, revision, 0, ret);
}

/* --- the requests of a snapshot read (etcd_call.c sends them) ---------------- */

char *etcd_page_after(const struct etcd_kv_list *l, size_t *ret_len)
{
	/* The smallest key after the last one read: that key + "\0". */
	const struct etcd_kv *last = &l->kvs[l->n - 1];
	char *next = malloc(last->key_len + 1);
	if (!next)
		return NULL;
	memcpy(next, last->key, last->key_len);
	next[last->key_len] = '\0';
	*ret_len = last->key_len + 1;
	return next;
}

cJSON *etcd_range_request(const char *key, size_t key_len, const char *end, size_t end_len,
			  unsigned flags, long page_size, int64_t revision)
{
	_cleanup_(cJSON_Deletep) cJSON *req = cJSON_CreateObject();
	bool count_only = flags & ETCD_COUNT_ONLY;

	/* Every field is checked: a page sent without its "revision" would be
	 * read at another moment than the first, and the result would no
	 * longer be one snapshot. */
	if (!req || add_bytes(req, "key", key, key_len) < 0 ||
	    (end && add_bytes(req, "range_end", end, end_len) < 0) ||
	    (count_only && !cJSON_AddTrueToObject(req, "count_only")) ||
	    (!count_only && end &&
	     add_int64(req, "limit", page_size > 0 ? page_size : ETCD_PAGE_SIZE) < 0) ||
	    (!count_only && (flags & ETCD_KEYS_ONLY) && !cJSON_AddTrueToObject(req, "keys_only")) ||
	    ((flags & ETCD_SERIALIZABLE) && !cJSON_AddTrueToObject(req, "serializable")) ||
	    (revision > 0 && add_int64(req, "revision", revision) < 0))
		return NULL;
	return TAKE_PTR(req);
}

int etcd_range_newest_first(cJSON *req, long limit, int64_t max_create_revision)
{
	/* etcd reads the whole range, drops the keys created later, sorts the
	 * rest and keeps the first limit: "more" then says there were more. */
	cJSON_DeleteItemFromObjectCaseSensitive(req, "limit");
	if (add_int64(req, "limit", limit) < 0 ||
	    add_int64(req, "max_create_revision", max_create_revision) < 0 ||
	    !cJSON_AddStringToObject(req, "sort_order", "DESCEND") ||
	    !cJSON_AddStringToObject(req, "sort_target", "CREATE"))
		return -ENOMEM;
	return 0;
}

/* --- writes ------------------------------------------------------------------ */

int etcd_put(struct etcd_client *c, const char *key, const char *value, size_t value_len,
	     int64_t lease)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body || add_bytes(body, "key", key, strlen(key)) < 0 ||
	    add_bytes(body, "value", value, value_len) < 0)
		return -ENOMEM;
	if (lease && add_int64(body, "lease", lease) < 0)
		return -ENOMEM;
	return etcd_call(c, "/v3/kv/put", body, &reply);
}

static int delete_range(struct etcd_client *c, const char *key)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body || add_bytes(body, "key", key, strlen(key)) < 0)
		return -ENOMEM;
	int r = etcd_call(c, "/v3/kv/deleterange", body, &reply);
	if (r < 0)
		return r;
	int64_t deleted;
	if (etcd_decode_int64(reply, "deleted", &deleted) < 0 || deleted < 0)
		return protocol_error(c, "deleterange");
	return deleted > INT32_MAX ? INT32_MAX : (int)deleted;
}

int etcd_delete(struct etcd_client *c, const char *key)
{
	return delete_range(c, key);
}

/* --- transactions ------------------------------------------------------------ */

struct etcd_txn {
	cJSON *body;
	cJSON *compare, *success, *failure;
	/* the first put of the success branch (etcd_txn_settle) */
	char *witness_key, *witness_value;
	int64_t since;			/* etcd_txn_settle()'s */
	bool settled;
	bool either;			/* etcd_txn_either_branch() */
};

struct etcd_txn *etcd_txn_new(void)
{
	struct etcd_txn *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->body = cJSON_CreateObject();
	if (!t->body)
		return etcd_txn_free(t);
	t->compare = cJSON_AddArrayToObject(t->body, "compare");
	t->success = cJSON_AddArrayToObject(t->body, "success");
	t->failure = cJSON_AddArrayToObject(t->body, "failure");
	if (!t->compare || !t->success || !t->failure)
		return etcd_txn_free(t);
	return t;
}

struct etcd_txn *etcd_txn_free(struct etcd_txn *t)
{
	if (t) {
		cJSON_Delete(t->body);
		free(t->witness_key);
		free(t->witness_value);
		free(t);
	}
	return NULL;
}

static const char *const cmp_names[] = {
	[ETCD_CMP_EQUAL] = "EQUAL",
	[ETCD_CMP_NOT_EQUAL] = "NOT_EQUAL",
	[ETCD_CMP_GREATER] = "GREATER",
	[ETCD_CMP_LESS] = "LESS",
};

static cJSON *txn_compare(struct etcd_txn *t, const char *key, enum etcd_cmp cmp,
			  const char *target)
{
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddItemToArray(t->compare, o);
	if (add_bytes(o, "key", key, strlen(key)) < 0 ||
	    !cJSON_AddStringToObject(o, "target", target) ||
	    !cJSON_AddStringToObject(o, "result", cmp_names[cmp]))
		return NULL;
	return o;
}

static int txn_if_int(struct etcd_txn *t, const char *key, enum etcd_cmp cmp, const char *target,
		      const char *field, int64_t v)
{
	cJSON *o = txn_compare(t, key, cmp, target);
	return o && add_int64(o, field, v) == 0 ? 0 : -ENOMEM;
}

int etcd_txn_if_version(struct etcd_txn *t, const char *key, enum etcd_cmp cmp, int64_t version)
{
	return txn_if_int(t, key, cmp, "VERSION", "version", version);
}

int etcd_txn_if_mod_revision(struct etcd_txn *t, const char *key, enum etcd_cmp cmp, int64_t rev)
{
	return txn_if_int(t, key, cmp, "MOD", "mod_revision", rev);
}

int etcd_txn_if_prefix_mod_revision(struct etcd_txn *t, const char *prefix, enum etcd_cmp cmp,
				    int64_t rev)
{
	size_t len = strlen(prefix);
	_cleanup_(freep) char *end = malloc(len + 1);
	cJSON *o;

	if (!end)
		return -ENOMEM;
	size_t end_len = etcd_prefix_end(prefix, len, end);
	o = txn_compare(t, prefix, cmp, "MOD");
	return o && add_int64(o, "mod_revision", rev) == 0 &&
		       add_bytes(o, "range_end", end, end_len) == 0 ? 0 : -ENOMEM;
}

static cJSON *txn_op(struct etcd_txn *t, bool on_success, const char *kind)
{
	cJSON *op = cJSON_CreateObject();
	if (!op)
		return NULL;
	cJSON_AddItemToArray(on_success ? t->success : t->failure, op);
	return cJSON_AddObjectToObject(op, kind);
}

int etcd_txn_put(struct etcd_txn *t, bool on_success, const char *key, const char *value,
		 int64_t lease)
{
	cJSON *o = txn_op(t, on_success, "request_put");
	if (!o || add_bytes(o, "key", key, strlen(key)) < 0 ||
	    add_bytes(o, "value", value, strlen(value)) < 0)
		return -ENOMEM;
	if (on_success && !t->witness_key) {
		t->witness_key = strdup(key);
		t->witness_value = strdup(value);
		if (!t->witness_key || !t->witness_value)
			return -ENOMEM;
	}
	return lease ? add_int64(o, "lease", lease) : 0;
}

int etcd_txn_put_replacing(struct etcd_txn *t, const char *key, const char *value, int64_t lease)
{
	int r = etcd_txn_put(t, true, key, value, lease);
	if (r < 0)
		return r;
	cJSON *o = cJSON_GetArrayItem(t->success, cJSON_GetArraySize(t->success) - 1);
	o = o ? cJSON_GetObjectItemCaseSensitive(o, "request_put") : NULL;
	return o && cJSON_AddTrueToObject(o, "prev_kv") ? 0 : -ENOMEM;
}

/* The first put response of a txn's reply that carries the key it replaced
 * (etcd_txn_put_replacing) goes to the client, with the txn's revision. */
static void txn_keep_replaced(struct etcd_client *c, const cJSON *reply, int64_t revision)
{
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(reply, "responses");
	const cJSON *item;

	etcd_kv_release(&c->replaced);
	c->replaced = (struct etcd_kv){ 0 };
	c->replaced_at = revision;
	cJSON_ArrayForEach(item, responses) {
		const cJSON *put = cJSON_GetObjectItemCaseSensitive(item, "response_put");
		const cJSON *prev = put ? cJSON_GetObjectItemCaseSensitive(put, "prev_kv") : NULL;
		struct etcd_kv kv = { 0 };
		if (!cJSON_IsObject(prev))
			continue;
		if (etcd_decode_kv(prev, &kv) < 0) {
			etcd_kv_release(&kv);
			c->replaced_at = 0;	/* not known */
		} else
			c->replaced = kv;
		return;
	}
}

const struct etcd_kv *etcd_txn_replaced(const struct etcd_client *c, int64_t revision)
{
	return revision > 0 && c->replaced_at == revision ? &c->replaced : NULL;
}

int etcd_txn_delete(struct etcd_txn *t, bool on_success, const char *key)
{
	cJSON *o = txn_op(t, on_success, "request_delete_range");
	return o && add_bytes(o, "key", key, strlen(key)) == 0 ? 0 : -ENOMEM;
}

int etcd_txn_delete_prefix(struct etcd_txn *t, bool on_success, const char *prefix)
{
	size_t len = strlen(prefix);
	_cleanup_(freep) char *end = malloc(len + 1);
	size_t end_len;
	cJSON *o;

	if (!end)
		return -ENOMEM;
	end_len = etcd_prefix_end(prefix, len, end);
	o = txn_op(t, on_success, "request_delete_range");
	return o && add_bytes(o, "key", prefix, len) == 0 &&
		       add_bytes(o, "range_end", end, end_len) == 0 ? 0 : -ENOMEM;
}

int etcd_txn_settle(struct etcd_txn *t, int64_t since)
{
	if (!t->witness_key || t->settled)
		return 0;
	/* Not written after `since`: else the failure branch reads it back. */
	cJSON *o = txn_compare(t, t->witness_key, ETCD_CMP_LESS, "MOD");
	if (!o || add_int64(o, "mod_revision", since + 1) < 0)
		return -ENOMEM;
	o = txn_op(t, false, "request_range");
	if (!o || add_bytes(o, "key", t->witness_key, strlen(t->witness_key)) < 0)
		return -ENOMEM;
	t->settled = true;
	t->since = since;
	return 0;
}

const cJSON *etcd_txn_body(const struct etcd_txn *t)
{
	return t->body;
}

void etcd_txn_either_branch(struct etcd_txn *t)
{
	t->either = true;
}

bool etcd_txn_is_either(const struct etcd_txn *t)
{
	return t->either;
}

const char *etcd_txn_witness(const struct etcd_txn *t)
{
	return t->settled ? t->witness_value : NULL;
}

int etcd_txn_applied_body(const struct etcd_txn *t, char **ret_text, int64_t *ret_since)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	if (!t->settled)
		return -EINVAL;
	if (!body || add_bytes(body, "key", t->witness_key, strlen(t->witness_key)) < 0 ||
	    !(*ret_text = cJSON_PrintUnformatted(body)))
		return -ENOMEM;
	*ret_since = t->since;
	return 0;
}

/* Whether kv is a settled txn's witness as that txn put it: exactly its value
 * (a txn's reply reads it back after a failed settle compare; a read asks). */
static bool witness_holds(const struct etcd_kv *kv, const char *witness)
{
	return kv->value_len == strlen(witness) && memcmp(kv->value, witness, kv->value_len) == 0;
}

int etcd_decode_applied(struct etcd_client *c, const cJSON *reply, const char *witness,
			int64_t since, int64_t *ret_revision)
{
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	bool more;

	if (etcd_decode_range(reply, &list, &more) < 0 || list.n > 1)
		return protocol_error(c, "range");
	*ret_revision = 0;
	if (list.n == 1 && list.kvs[0].mod_revision > since && witness_holds(&list.kvs[0], witness))
		*ret_revision = list.kvs[0].mod_revision;
	return 0;
}

int64_t etcd_client_revision(const struct etcd_client *c)
{
	return c->revision;
}

/* A settled txn's failure branch read its witness back: does it hold the
 * value this txn puts (the first send was applied)?  *ret_revision is then
 * the revision it was written at. */
static bool txn_witness_applied(const cJSON *reply, const char *witness, int64_t *ret_revision)
{
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(reply, "responses");
	const cJSON *first = cJSON_IsArray(responses) ? cJSON_GetArrayItem(responses, 0) : NULL;
	const cJSON *range = first ? cJSON_GetObjectItemCaseSensitive(first, "response_range")
				   : NULL;
	const cJSON *kvs = range ? cJSON_GetObjectItemCaseSensitive(range, "kvs") : NULL;
	const cJSON *kv = cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
	_cleanup_(etcd_kv_releasep) struct etcd_kv got = { 0 };

	if (!cJSON_IsObject(kv) || etcd_decode_kv(kv, &got) < 0)
		return false;
	if (!witness_holds(&got, witness))
		return false;
	*ret_revision = got.mod_revision;
	return true;
}

int etcd_decode_txn(struct etcd_client *c, const cJSON *reply, const char *witness,
		    bool *ret_succeeded, int64_t *ret_revision)
{
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(reply, "succeeded");
	if (ok && !cJSON_IsBool(ok))
		return protocol_error(c, "txn");
	int64_t rev;
	if (decode_header_revision(reply, &rev) < 0)
		return protocol_error(c, "txn");
	bool succeeded = cJSON_IsTrue(ok);	/* absent means false */
	if (succeeded)
		txn_keep_replaced(c, reply, rev);
	else if (witness && txn_witness_applied(reply, witness, &rev))
		succeeded = true;
	if (ret_succeeded)
		*ret_succeeded = succeeded;
	if (ret_revision)
		*ret_revision = rev;
	return 0;
}

int etcd_txn_commit(struct etcd_client *c, struct etcd_txn *t, bool *ret_succeeded,
		    int64_t *ret_revision)
{
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	int r = etcd_call(c, "/v3/kv/txn", t->body, &reply);
	if (r < 0)
		return r;
	return etcd_decode_txn(c, reply, etcd_txn_witness(t), ret_succeeded, ret_revision);
}

/* --- leases ------------------------------------------------------------------ */

int etcd_grant_body(int64_t ttl, int64_t id, char **ret_text)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	if (!body || add_int64(body, "TTL", ttl) < 0 || (id > 0 && add_int64(body, "ID", id) < 0) ||
	    !(*ret_text = cJSON_PrintUnformatted(body)))
		return -ENOMEM;
	return 0;
}

int etcd_lease_grant(struct etcd_client *c, int64_t ttl, int64_t *ret_id)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body || add_int64(body, "TTL", ttl) < 0)
		return -ENOMEM;
	int r = etcd_call(c, "/v3/lease/grant", body, &reply);
	if (r < 0)
		return r;
	return etcd_decode_grant(c, reply, ret_id);
}

int etcd_decode_grant(struct etcd_client *c, const cJSON *reply, int64_t *ret_id)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(reply, "error");
	if (cJSON_IsString(err) && *err->valuestring) {
		etcd_set_error(c, "etcd '%s': %s", etcd_current_endpoint(c), err->valuestring);
		return -EPROTO;
	}
	int64_t id;
	if (etcd_decode_int64(reply, "ID", &id) < 0 || id == 0)
		return protocol_error(c, "lease grant");
	*ret_id = id;
	return 0;
}

int etcd_decode_keepalive(struct etcd_client *c, const cJSON *reply, int64_t *ret_ttl)
{
	/* The keepalive endpoint is a stream: its one answer is under "result". */
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(reply, "result");
	if (!cJSON_IsObject(result)) {
		const cJSON *error = cJSON_GetObjectItemCaseSensitive(reply, "error");
		if (cJSON_IsObject(error)) {
			const cJSON *code = cJSON_GetObjectItemCaseSensitive(error, "grpc_code");
			const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
			bool retry, reauth;
			return etcd_map_grpc_error(c, etcd_current_endpoint(c),
						   etcd_grpc_code(code),
						   cJSON_IsString(msg) ? msg->valuestring : NULL,
						   &retry, &reauth);
		}
		return protocol_error(c, "lease keepalive");
	}
	int64_t ttl;
	if (etcd_decode_int64(result, "TTL", &ttl) < 0 || ttl < 0)
		return protocol_error(c, "lease keepalive");
	*ret_ttl = ttl;
	return 0;
}

int etcd_lease_body(int64_t id, char **ret_text)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	if (!body || add_int64(body, "ID", id) < 0)
		return -ENOMEM;
	*ret_text = cJSON_PrintUnformatted(body);
	return *ret_text ? 0 : -ENOMEM;
}

bool etcd_lease_was_gone(const struct etcd_client *c, int error)
{
	return error == -EINVAL && strstr(etcd_last_error(c), "lease not found");
}

bool etcd_lease_existed(const struct etcd_client *c, int error)
{
	return error == -EINVAL && strstr(etcd_last_error(c), "lease already exists");
}

int etcd_lease_revoke(struct etcd_client *c, int64_t id)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body || add_int64(body, "ID", id) < 0)
		return -ENOMEM;
	int r = etcd_call(c, "/v3/lease/revoke", body, &reply);
	return etcd_lease_was_gone(c, r) ? 0 : r;
}

/* --- cluster ----------------------------------------------------------------- */

int etcd_status(struct etcd_client *c, char **ret_server_version, char **ret_endpoint)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body)
		return -ENOMEM;
	int r = etcd_call(c, "/v3/maintenance/status", body, &reply);
	if (r < 0)
		return r;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(reply, "version");
	if (!cJSON_IsString(v))
		return protocol_error(c, "status");
	if (ret_server_version && !(*ret_server_version = strdup(v->valuestring)))
		return -ENOMEM;
	if (ret_endpoint && !(*ret_endpoint = strdup(etcd_current_endpoint(c))))
		return -ENOMEM;
	return 0;
}
