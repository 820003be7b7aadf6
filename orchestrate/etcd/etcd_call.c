/*
 * etcd_call.c — unary requests that do not block the daemon's loop.
 *
 * A blocking request holds the loop for as long as etcd takes, up to the
 * request timeout per endpoint; when etcd is slower than that, the request is
 * abandoned and, worse, sent again while etcd still works on the first one.
 * An asynchronous call runs on the client's multi handle beside the watch
 * streams, on an easy handle (and so a connection) of its own: the loop serves
 * everything else while it waits, and the caller may give it the patience the
 * request deserves (a keepalive: until the lease would expire) instead of the
 * request timeout.
 *
 * An attempt's outcome is read by etcd_attempt_read(), the blocking calls'
 * own reader, so both kinds fail over and report errors the same way.  What
 * differs is who waits: here curl tells etcd_call_transfer_done() from the
 * loop (multi_collect in etcd_watch.c), and the caller's function runs there,
 * after curl has returned.  A call that needs a token waits for the client's
 * one authentication (etcd_token_request) instead of logging in itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "etcd/etcd.h"
#include "etcd_internal.h"

struct etcd_call {
	enum etcd_transfer transfer;	/* first: CURLINFO_PRIVATE points here */
	struct etcd_client *c;
	struct etcd_call *next;		/* in c->calls */

	const char *path;		/* a literal */
	char *body;
	long attempt_ms;		/* each attempt's timeout */
	size_t attempt;			/* endpoints tried, the current one included */
	bool reauthed;
	bool awaiting_token;		/* parked until the login ends (on_token) */
	bool authenticates;		/* the authentication itself: sent with no token */
	uint64_t token_gen;		/* the token its last attempt carried */
	struct etcd_attempts failed;	/* over its endpoints */

	CURL *easy;
	struct curl_slist *headers;
	struct buf reply;

	/* Reads a successful reply into the call's value: 0, an error, or 1
	 * when the call goes on with the next request it set up (call->body,
	 * call->path: a snapshot read's next page). */
	int (*decode)(struct etcd_call *call, const cJSON *reply, int64_t *ret);
	bool streamed;			/* waits on the keepalive stream, */
	uint64_t deadline;		/* until then (CLOCK_MONOTONIC, usec), */
	sd_event_source *deadline_timer;	/* which this enforces */
	char *witness;			/* a settled txn's (etcd_txn_witness) */
	int64_t since;			/* ...and its etcd_txn_settle() revision */
	bool either;			/* a txn whose failure branch is a success too */
	bool gone_is_done;		/* a revoke: a lease gone already is revoked */
	int64_t granting;		/* a grant of this id: one that exists is granted */
	struct etcd_snapshot *snapshot;	/* a snapshot read's ranges and lists */
	etcd_value_fn fn;
	void *userdata;
};

static void call_unlink(struct etcd_call *call)
{
	for (struct etcd_call **p = &call->c->calls; *p; p = &(*p)->next) {
		if (*p == call) {
			*p = call->next;
			return;
		}
	}
}

static void snapshot_free(struct etcd_snapshot *s);

static void call_free(struct etcd_call *call)
{
	if (call->streamed)
		etcd_keepalive_stream_forget(call->c, call);
	sd_event_source_disable_unref(call->deadline_timer);
	if (call->easy) {
		curl_multi_remove_handle(call->c->multi, call->easy);
		curl_easy_cleanup(call->easy);
	}
	curl_slist_free_all(call->headers);
	buf_release(&call->reply);
	if (call->authenticates) {
		/* the password */
		explicit_bzero(call->body, strlen(call->body));
		if (call->c->authenticating == call)
			call->c->authenticating = NULL;
	}
	free(call->body);
	free(call->witness);
	snapshot_free(call->snapshot);
	free(call);
}

void etcd_call_cancel(struct etcd_call *call)
{
	if (!call)
		return;
	call_unlink(call);
	call_free(call);
}

void etcd_calls_free(struct etcd_client *c)
{
	while (c->calls)
		etcd_call_cancel(c->calls);
}

/* Sends the current attempt: endpoint (current + attempt) of the client. */
static int call_send(struct etcd_call *call)
{
	struct etcd_client *c = call->c;
	size_t i = (c->current + call->attempt) % c->n_endpoints;

	if (call->easy) {
		curl_multi_remove_handle(c->multi, call->easy);
		curl_easy_reset(call->easy);
	} else if (!(call->easy = curl_easy_init())) {
		return -ENOMEM;
	}
	curl_slist_free_all(call->headers);
	call->headers = NULL;
	buf_release(&call->reply);

	int r = etcd_easy_setup(c, call->easy, c->endpoints[i], call->path, call->body,
				call->attempt_ms, &call->headers);
	if (r < 0)
		return r;
	curl_easy_setopt(call->easy, CURLOPT_WRITEFUNCTION, etcd_write_to_buf);
	curl_easy_setopt(call->easy, CURLOPT_WRITEDATA, &call->reply);
	curl_easy_setopt(call->easy, CURLOPT_PRIVATE, &call->transfer);
	call->token_gen = c->token_gen;
	if (c->token && !call->authenticates)
		c->token_used_ms = etcd_now_ms();
	c->requests++;
	return curl_multi_add_handle(c->multi, call->easy) == CURLM_OK ? 0 : -ENOMEM;
}

/* Sends the call's attempt now, or parks it until the client has a token. */
static int call_dispatch(struct etcd_call *call)
{
	struct etcd_client *c = call->c;

	if (call->authenticates || !etcd_token_needed(c))
		return call_send(call);
	/* Told while the waiters of a failed authentication hear of it: one
	 * asked for from their callbacks would only ask etcd again at once. */
	if (c->auth_failed < 0)
		return c->auth_failed;
	call->awaiting_token = true;
	return etcd_token_request(c);
}

/* Ends the call: the caller's function, then the call is gone. */
static void call_finish(struct etcd_call *call, int error, const cJSON *reply)
{
	int64_t value = 0;

	if (error >= 0)
		error = call->decode(call, reply, &value);
	else if (call->gone_is_done && etcd_lease_was_gone(call->c, error))
		error = 0;
	else if (call->granting > 0 && etcd_lease_existed(call->c, error))
		error = 0, value = call->granting;	/* an earlier send was applied */
	else if (call->authenticates)
		error = etcd_auth_error(call->c, error);
	if (error > 0) {
		/* The next request of the same call, from the member that just
		 * answered (c->current). */
		call->attempt = 0;
		call->reauthed = false;
		if ((error = call_dispatch(call)) >= 0)
			return;
	}
	call_unlink(call);
	call->fn(error < 0 ? error : 0, value, call->userdata);
	call_free(call);
}

void etcd_call_transfer_done(struct etcd_call *call, CURLcode code)
{
	struct etcd_client *c = call->c;
	size_t i = (c->current + call->attempt) % c->n_endpoints;
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	long http_code = 0;
	int r = -ECONNREFUSED;

	if (code == CURLE_OK)
		curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &http_code);
	switch (etcd_attempt_read(c, i, call->path, call->body, code, http_code, &call->reply,
				  &call->failed, &r, &reply)) {
	case ETCD_ATTEMPT_DONE:
		call_finish(call, r, reply);
		return;
	case ETCD_ATTEMPT_ELSEWHERE:
		if (++call->attempt < c->n_endpoints)
			break;
		call_finish(call, etcd_attempts_error(&call->failed, r), NULL);
		return;
	case ETCD_ATTEMPT_REAUTH:
		if (call->reauthed) {
			call_finish(call, etcd_token_refused_again(c), NULL);
			return;
		}
		/* Simple tokens expire after etcd's --auth-token-ttl: the
		 * call waits for a new one, asked for once for all of them.
		 * A JWT given before etcd's users or roles changed is refused
		 * on every host at once: that login is spread. */
		call->reauthed = true;
		bool changed = strstr(etcd_last_error(c), "auth store is old");
		etcd_token_refused(c, call->token_gen);
		if (changed)
			etcd_login_spread(c, "as one given before etcd's users or roles "
					  "changed (every JWT of a fleet is refused then)");
		/* the same member again, with the new token */
		call->attempt = (i + c->n_endpoints - c->current) % c->n_endpoints;
		break;
	}
	if ((r = call_dispatch(call)) < 0)
		call_finish(call, r, NULL);
}

static int call_new(struct etcd_client *c, const char *path, char *body, long timeout_ms,
		    int (*decode)(struct etcd_call *, const cJSON *, int64_t *),
		    const char *witness, etcd_value_fn fn, void *userdata,
		    struct etcd_call **ret)
{
	_cleanup_(freep) char *text = body;

	if (!c->multi)
		return -EINVAL;
	etcd_call_begin(c);

	struct etcd_call *call = calloc(1, sizeof(*call));
	if (!call)
		return -ENOMEM;
	call->transfer = ETCD_TRANSFER_CALL;
	call->c = c;
	call->path = path;
	call->body = TAKE_PTR(text);
	call->attempt_ms = timeout_ms / (long)c->n_endpoints;
	if (call->attempt_ms < c->timeout_ms)
		call->attempt_ms = c->timeout_ms;
	call->decode = decode;
	if (witness && !(call->witness = strdup(witness))) {
		call_free(call);
		return -ENOMEM;
	}
	call->fn = fn;
	call->userdata = userdata;
	*ret = call;
	return 0;
}

static void call_link(struct etcd_call *call)
{
	call->next = call->c->calls;
	call->c->calls = call;
}

static int call_start(struct etcd_client *c, const char *path, char *body, long timeout_ms,
		      int (*decode)(struct etcd_call *, const cJSON *, int64_t *),
		      const char *witness, etcd_value_fn fn, void *userdata,
		      struct etcd_call **ret)
{
	struct etcd_call *call;
	int r = call_new(c, path, body, timeout_ms, decode, witness, fn, userdata, &call);
	if (r < 0)
		return r;
	if ((r = call_dispatch(call)) < 0) {
		call_free(call);
		return r;
	}
	call_link(call);
	*ret = call;
	return 0;
}

/* --- the token: one authentication for every call that waits on it ------------- */

/* How long a login waits, shared among the members as a write's patience
 * is (never less than the request timeout each).  etcd checks a password
 * with bcrypt, 72 ms of its CPU here at its default cost (120 writes' worth),
 * and checks all it was sent side by side: when a fleet logs in at once (at
 * its start, after etcd restarts, at a trigger after etcd's --auth-token-ttl
 * of idleness) each login takes about as long as all of them together.  A
 * login given up on is a password etcd checks all the same, and then once
 * more: so it waits long.  Nothing else waits meanwhile but the requests
 * that need the token (lease renewals do not). */
#define ETCD_LOGIN_PATIENCE_MS 120000L

bool etcd_token_needed(const struct etcd_client *c)
{
	return c->user && !c->token;
}

static int call_decode_token(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	(void)ret;
	return etcd_auth_take(call->c, reply);
}

/* The parked call that comes first in c->calls, or NULL. */
static struct etcd_call *first_awaiting(struct etcd_client *c)
{
	for (struct etcd_call *call = c->calls; call; call = call->next)
		if (call->awaiting_token)
			return call;
	return NULL;
}

static void keep_arm(struct etcd_client *c);
static void keep_renewal_failed(struct etcd_client *c);

static void on_token(int error, int64_t value, void *userdata)
{
	struct etcd_client *c = userdata;
	struct etcd_call *call;
	(void)value;

	c->authenticating = NULL;	/* a waiter's callback may ask for the next one */
	/* Each waiter is sent, or told; a callback may start or cancel calls,
	 * so the walk starts over after each one. */
	c->auth_failed = error;
	while ((call = first_awaiting(c))) {
		call->awaiting_token = false;
		int r = error < 0 ? error : call_send(call);
		if (r < 0)
			call_finish(call, r, NULL);
	}
	etcd_watch_token_ready(c, error);
	c->auth_failed = 0;
	if (c->keep_timer) {	/* the keep counts from the new token, or retries */
		if (error < 0)
			keep_renewal_failed(c);
		keep_arm(c);
	}
}

static int login_timer_arm(struct etcd_client *c);

int etcd_token_request(struct etcd_client *c)
{
	struct etcd_call *call;
	int r;

	if (c->authenticating)
		return 0;
	if (c->login_after_ms > etcd_now_ms())
		return login_timer_arm(c);	/* the spread login's moment */
	_cleanup_(cJSON_Deletep) cJSON *request = etcd_auth_request(c);
	char *body = request ? cJSON_PrintUnformatted(request) : NULL;
	if (!body)
		return -ENOMEM;
	if ((r = call_new(c, "/v3/auth/authenticate", body, ETCD_LOGIN_PATIENCE_MS,
			  call_decode_token, NULL, on_token, c, &call)) < 0)
		return r;
	call->authenticates = true;
	if ((r = call_send(call)) < 0) {
		call_free(call);
		return r;
	}
	call_link(call);
	c->authenticating = call;
	return 0;
}

/* --- spreading a fleet's logins (etcd_client_spread_logins) -------------------- */

void etcd_client_spread_logins(struct etcd_client *c, long ms)
{
	c->login_spread_ms = ms > 0 ? ms : 0;
}

void etcd_login_spread(struct etcd_client *c, const char *why)
{
	uint64_t now = etcd_now_ms();

	if (c->login_spread_ms <= 0 || c->authenticating || !etcd_token_needed(c))
		return;
	if (c->login_after_ms == 0) {
		c->login_after_ms = now + random_between(0, (uint64_t)c->login_spread_ms);
		log_info("etcd refused this host's token %s: logging in again in %.1f s, a random "
			 "moment of etcd.login_spread (%ld s), so that a fleet does not log in at once",
			 why, (double)(c->login_after_ms - now) / 1000.0, c->login_spread_ms / 1000);
	}
}

/* Every request that needs the token meanwhile waits for that moment, the
 * watches too (parked, awaiting_token): the login is asked for then, unless
 * a token came sooner. */
static int on_login_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)s;
	(void)usec;

	if (etcd_token_needed(c)) {
		int r = etcd_token_request(c);
		if (r < 0)
			on_token(r, 0, c);	/* its waiters hear of it */
	}
	return 0;
}

static int login_timer_arm(struct etcd_client *c)
{
	uint64_t usec = c->login_after_ms * 1000;

	if (!c->event)
		return -EINVAL;
	if (!c->login_timer) {
		if (sd_event_add_time(c->event, &c->login_timer, CLOCK_MONOTONIC, usec, 100000,
				      on_login_timer, c) < 0)
			return -ENOMEM;
	} else if (sd_event_source_set_time(c->login_timer, usec) < 0) {
		return -ENOMEM;
	}
	return sd_event_source_set_enabled(c->login_timer, SD_EVENT_ONESHOT) < 0 ? -ENOMEM : 0;
}

/* --- keeping the token in use (etcd_client_keep_token) ------------------------- */

/*
 * A simple token lives while it is used: the keep reads with it once it went
 * unused for 3/4 to all of token_keep.  A JSON Web Token (etcd --auth-token
 * jwt) expires at the time it carries however it is used, so a read keeps
 * nothing: the keep logs in again before then, at a random moment between
 * 2/3 and 5/6 of the token's life, so that a trigger never meets an expired
 * token (a whole fleet's logins at once) and hosts that logged in together
 * renew apart.  Its sixth of the life left is the login's time to answer.
 */
static int call_decode_nothing(struct etcd_call *call, const cJSON *reply, int64_t *ret);

static bool token_expires(const struct etcd_client *c)
{
	return c->token && c->token_expires_ms;
}

/* A renewal that failed leaves the token as it was: try again halfway to
 * its expiry, until too little is left to be worth it; then the token is
 * left to expire, and the read keep's refusal logs in as for any token. */
static void keep_renewal_failed(struct etcd_client *c)
{
	uint64_t now = etcd_now_ms();

	if (!token_expires(c) || now < c->token_renew_ms)
		return;
	if (c->token_expires_ms > now + 2000)
		c->token_renew_ms = now + (c->token_expires_ms - now) / 2;
	else
		c->token_expires_ms = 0;
}

static void on_kept(int error, int64_t value, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)error;	/* a refused token was renewed on the way; else the next try */
	(void)value;
	c->keeping = NULL;
	keep_arm(c);
}

static int on_keep_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct etcd_client *c = userdata;
	(void)s;
	(void)usec;

	if (c->keeping)
		return 0;	/* on_kept arms it again */
	if (token_expires(c)) {
		uint64_t now = etcd_now_ms();
		if (c->authenticating)
			return 0;	/* on_token arms it again */
		if (c->token_renew_ms && now >= c->token_renew_ms) {
			log_debug("etcd: logging in again %.1f s before this host's token expires",
				  (double)((int64_t)c->token_expires_ms - (int64_t)now) / 1000.0);
			if (etcd_token_request(c) >= 0)
				return 0;	/* on_token arms it again */
			keep_renewal_failed(c);
		}
	} else if (c->token && etcd_now_ms() >= c->token_used_ms + (uint64_t)c->token_keep_ms * 3 / 4) {
		_cleanup_(cJSON_Deletep) cJSON *req = etcd_range_request(
			c->keep_key, strlen(c->keep_key), NULL, 0, ETCD_COUNT_ONLY | ETCD_SERIALIZABLE,
			0, 0);
		char *body = req ? cJSON_PrintUnformatted(req) : NULL;
		if (body && call_start(c, "/v3/kv/range", body, c->timeout_ms, call_decode_nothing,
				       NULL, on_kept, c, &c->keeping) >= 0)
			return 0;
	}
	keep_arm(c);
	return 0;
}

/* The next look: for a token that expires, its renewal (drawn once per
 * token); else 3/4 to all of the limit after the token's last use (or from
 * now, before there is a token), so that hosts started together do not read
 * together. */
static void keep_arm(struct etcd_client *c)
{
	uint64_t usec;

	if (token_expires(c)) {
		uint64_t now = etcd_now_ms();
		if (!c->token_renew_ms) {
			uint64_t life = c->token_expires_ms > now ? c->token_expires_ms - now : 0;
			c->token_renew_ms = now + life * 2 / 3 + random_between(0, life / 6);
		}
		usec = c->token_renew_ms * 1000;
	} else {
		uint64_t keep = (uint64_t)c->token_keep_ms;
		uint64_t from = c->token ? c->token_used_ms : etcd_now_ms();
		usec = (from + keep * 3 / 4 + random_between(0, keep / 4)) * 1000;
	}

	if (!c->keep_timer) {
		if (sd_event_add_time(c->event, &c->keep_timer, CLOCK_MONOTONIC, usec, 100000,
				      on_keep_timer, c) < 0)
			return;
	} else if (sd_event_source_set_time(c->keep_timer, usec) < 0) {
		return;
	}
	(void)sd_event_source_set_enabled(c->keep_timer, SD_EVENT_ONESHOT);
}

int etcd_client_keep_token(struct etcd_client *c, const char *key)
{
	if (!c->event || !key)
		return -EINVAL;
	if (!c->user || c->token_keep_ms <= 0)
		return 0;
	char *copy = strdup(key);
	if (!copy)
		return -ENOMEM;
	free(c->keep_key);
	c->keep_key = copy;
	keep_arm(c);
	return c->keep_timer ? 0 : -ENOMEM;
}

void etcd_keep_token_stop(struct etcd_client *c)
{
	c->login_timer = sd_event_source_disable_unref(c->login_timer);
	c->keep_timer = sd_event_source_disable_unref(c->keep_timer);
	etcd_call_cancel(c->keeping);
	c->keeping = NULL;
	free(c->keep_key);
	c->keep_key = NULL;
}

static int call_decode_keepalive(struct etcd_call *call, const cJSON *reply, int64_t *ret);

/* --- calls answered on the keepalive stream ---------------------------------------- */

static uint64_t call_now(const struct etcd_call *call)
{
	uint64_t usec = 0;
	(void)sd_event_now(call->c->event, CLOCK_MONOTONIC, &usec);
	return usec;
}

/* A streamed call's patience ran out: as a request's timeout would end it. */
static int on_streamed_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct etcd_call *call = userdata;
	struct etcd_client *c = call->c;

	etcd_keepalive_stream_forget(c, call);
	call->streamed = false;
	etcd_set_error(c, "etcd '%s': %s", c->endpoints[c->current],
		       curl_easy_strerror(CURLE_OPERATION_TIMEDOUT));
	call_finish(call, -ECONNREFUSED, NULL);
	return 0;
}

void etcd_call_streamed_lost(struct etcd_call *call, size_t attempt)
{
	struct etcd_client *c = call->c;
	uint64_t now = call_now(call);
	long left_ms = call->deadline > now ? (long)((call->deadline - now) / 1000) : 0;
	int r;

	call->streamed = false;
	sd_event_source_disable_unref(call->deadline_timer);
	call->deadline_timer = NULL;
	call->attempt = attempt;
	call->attempt_ms = left_ms / (long)c->n_endpoints;
	if (call->attempt_ms < c->timeout_ms)
		call->attempt_ms = c->timeout_ms;
	if ((r = call_dispatch(call)) < 0)
		call_finish(call, r, NULL);
}

void etcd_call_streamed_answer(struct etcd_call *call, const cJSON *reply, size_t i)
{
	struct etcd_client *c = call->c;
	const cJSON *error = cJSON_GetObjectItemCaseSensitive(reply, "error");
	const cJSON *result = cJSON_GetObjectItemCaseSensitive(reply, "result");

	call->streamed = false;
	if (cJSON_IsObject(error)) {
		const cJSON *msg = cJSON_GetObjectItemCaseSensitive(error, "message");
		bool retry, reauth;
		int r = etcd_map_grpc_error(
			c, c->endpoints[i],
			etcd_grpc_code(cJSON_GetObjectItemCaseSensitive(error, "grpc_code")),
			cJSON_IsString(msg) ? msg->valuestring : NULL, &retry, &reauth);
		if (reauth) {
			/* the request of its own waits for a new token */
			etcd_token_refused(c, c->token_gen);
			etcd_call_streamed_lost(call, (i + c->n_endpoints - c->current) % c->n_endpoints);
			return;
		}
		if (retry && c->n_endpoints > 1) {
			etcd_call_streamed_lost(call, (i + 1 + c->n_endpoints - c->current) %
							      c->n_endpoints);
			return;
		}
		call_finish(call, r, NULL);
		return;
	}
	if (!cJSON_IsObject(result)) {
		etcd_set_error(c, "etcd '%s': unexpected reply to lease keepalive", c->endpoints[i]);
		call_finish(call, -EPROTO, NULL);
		return;
	}
	int64_t rev;
	const cJSON *header = cJSON_GetObjectItemCaseSensitive(result, "header");
	if (cJSON_IsObject(header) && etcd_decode_int64(header, "revision", &rev) == 0 &&
	    rev > c->revision)
		c->revision = rev;
	c->current = i;
	call_finish(call, 0, reply);
}

/* A keepalive goes on the client's stream when it can (etcd_keepalive.c says
 * why), with a timer for its patience; else as a request of its own. */
static int call_start_keepalive(struct etcd_client *c, char *body, long timeout_ms,
				etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	struct etcd_call *call;
	int r = call_new(c, "/v3/lease/keepalive", body, timeout_ms, call_decode_keepalive, NULL,
			 fn, userdata, &call);
	if (r < 0)
		return r;
	call->deadline = call_now(call) + (uint64_t)(timeout_ms > 0 ? timeout_ms : c->timeout_ms) * 1000;
	if (sd_event_add_time(c->event, &call->deadline_timer, CLOCK_MONOTONIC, call->deadline, 0,
			      on_streamed_deadline, call) >= 0 &&
	    etcd_keepalive_stream_send(c, call, call->body)) {
		call->streamed = true;
	} else {
		sd_event_source_disable_unref(call->deadline_timer);
		call->deadline_timer = NULL;
		if ((r = call_dispatch(call)) < 0) {
			call_free(call);
			return r;
		}
	}
	call_link(call);
	*ret = call;
	return 0;
}

static int call_decode_keepalive(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	return etcd_decode_keepalive(call->c, reply, ret);
}

static int call_decode_grant(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	return etcd_decode_grant(call->c, reply, ret);
}

static int call_decode_txn(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	bool succeeded;
	int r = etcd_decode_txn(call->c, reply, call->witness, &succeeded, ret);
	if (r < 0)
		return r;
	return succeeded || call->either ? 0 : -ECANCELED;
}

static int call_decode_applied(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	return etcd_decode_applied(call->c, reply, call->witness, call->since, ret);
}

int etcd_txn_applied_start(struct etcd_client *c, const struct etcd_txn *t, long timeout_ms,
			   etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	char *body = NULL;
	int64_t since;
	int r = etcd_txn_applied_body(t, &body, &since);
	if (r < 0)
		return r;
	if ((r = call_start(c, "/v3/kv/range", body, timeout_ms, call_decode_applied,
			    etcd_txn_witness(t), fn, userdata, ret)) < 0)
		return r;
	(*ret)->since = since;
	return 0;
}

int etcd_lease_keepalive_start(struct etcd_client *c, int64_t id, long timeout_ms,
			       etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	char *body = NULL;
	int r = etcd_lease_body(id, &body);
	if (r < 0)
		return r;
	return call_start_keepalive(c, body, timeout_ms, fn, userdata, ret);
}

int etcd_lease_grant_start(struct etcd_client *c, int64_t ttl, int64_t id, long timeout_ms,
			   etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	char *body = NULL;
	int r = etcd_grant_body(ttl, id, &body);
	if (r < 0)
		return r;
	if ((r = call_start(c, "/v3/lease/grant", body, timeout_ms, call_decode_grant, NULL, fn,
			    userdata, ret)) < 0)
		return r;
	(*ret)->granting = id;
	return 0;
}

static int call_decode_nothing(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	return 0;
}

int etcd_lease_revoke_start(struct etcd_client *c, int64_t id, long timeout_ms,
			    etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	char *body = NULL;
	int r = etcd_lease_body(id, &body);
	if (r < 0)
		return r;
	if ((r = call_start(c, "/v3/lease/revoke", body, timeout_ms, call_decode_nothing, NULL,
			    fn, userdata, ret)) < 0)
		return r;
	(*ret)->gone_is_done = true;
	return 0;
}

int etcd_txn_commit_start(struct etcd_client *c, const struct etcd_txn *t, long timeout_ms,
			  etcd_value_fn fn, void *userdata, struct etcd_call **ret)
{
	char *body = cJSON_PrintUnformatted(etcd_txn_body(t));
	int r;
	if (!body)
		return -ENOMEM;
	if ((r = call_start(c, "/v3/kv/txn", body, timeout_ms, call_decode_txn,
			    etcd_txn_witness(t), fn, userdata, ret)) < 0)
		return r;
	(*ret)->either = etcd_txn_is_either(t);
	return 0;
}

/* --- snapshot reads ---------------------------------------------------------- */

struct snapshot_range {
	char *key, *end;		/* end NULL: the key alone */
	size_t key_len, end_len;
	unsigned flags;			/* ETCD_KEYS_ONLY, ETCD_COUNT_ONLY, ... */
	long limit;			/* ETCD_NEWEST_FIRST's */
	int64_t max_create_revision;
	int64_t at;			/* a count's own revision; 0: the snapshot's */
	bool more;			/* etcd holds keys past the last page read */
};

struct etcd_snapshot {
	struct snapshot_range *ranges;
	struct etcd_kv_list *lists;
	size_t n;
	size_t paging;			/* the range whose next page is asked for */
	int64_t at;			/* the revision asked for; 0: the newest */
	int64_t revision;		/* 0 until the txn answered */
	etcd_snapshot_fn fn;
	void *userdata;
};

static void snapshot_free(struct etcd_snapshot *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->ranges[i].key);
		free(s->ranges[i].end);
		etcd_kv_list_release(&s->lists[i]);
	}
	free(s->ranges);
	free(s->lists);
	free(s);
}

static int snapshot_malformed(struct etcd_call *call)
{
	etcd_set_error(call->c, "etcd '%s': malformed snapshot reply",
		       etcd_current_endpoint(call->c));
	return -EPROTO;
}

/* The txn's reply: a response_range per range, in order. */
static int snapshot_decode_txn(struct etcd_call *call, const cJSON *reply)
{
	struct etcd_snapshot *s = call->snapshot;
	const cJSON *header = cJSON_GetObjectItemCaseSensitive(reply, "header");
	const cJSON *responses = cJSON_GetObjectItemCaseSensitive(reply, "responses");
	const cJSON *item;
	size_t i = 0;

	if (!cJSON_IsObject(header) || etcd_decode_int64(header, "revision", &s->revision) < 0 ||
	    s->revision <= 0 || s->revision < s->at || !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "succeeded")) ||
	    !cJSON_IsArray(responses) || (size_t)cJSON_GetArraySize(responses) != s->n)
		return snapshot_malformed(call);
	if (s->at > 0)
		s->revision = s->at;	/* the header says the newest, not the one read */
	cJSON_ArrayForEach(item, responses) {
		const cJSON *range = cJSON_GetObjectItemCaseSensitive(item, "response_range");
		struct snapshot_range *sr = &s->ranges[i];
		struct etcd_kv_list *l = &s->lists[i++];
		if (!cJSON_IsObject(range) || etcd_decode_range(range, l, &sr->more) < 0)
			return snapshot_malformed(call);
		l->revision = sr->at ? sr->at : s->revision;
		if (sr->at > s->revision)
			return snapshot_malformed(call);
		if (sr->flags & ETCD_NEWEST_FIRST) {
			/* The newest limit keys are all it asked for: no page
			 * follows, and they must be at most limit. */
			if (l->n > (size_t)sr->limit)
				return snapshot_malformed(call);
			sr->more = false;
		}
		/* One key is that key or nothing; a page that says more has
		 * keys, or the next page could never start after its last. */
		if ((!sr->end && (sr->more || l->n > 1 ||
				  (l->n == 1 && (l->kvs[0].key_len != sr->key_len ||
						 memcmp(l->kvs[0].key, sr->key, sr->key_len))))) ||
		    (sr->more && l->n == 0))
			return snapshot_malformed(call);
	}
	return 0;
}

/* A later page of range s->paging. */
static int snapshot_decode_page(struct etcd_call *call, const cJSON *reply)
{
	struct etcd_snapshot *s = call->snapshot;
	struct snapshot_range *sr = &s->ranges[s->paging];
	struct etcd_kv_list *l = &s->lists[s->paging];
	size_t before = l->n;
	int64_t count = l->count;	/* the first page's total stands */

	if (etcd_decode_range(reply, l, &sr->more) < 0 || (sr->more && l->n == before))
		return snapshot_malformed(call);
	l->count = count;
	l->revision = s->revision;
	return 0;
}

static int call_decode_snapshot(struct etcd_call *call, const cJSON *reply, int64_t *ret)
{
	struct etcd_snapshot *s = call->snapshot;
	int r = s->revision ? snapshot_decode_page(call, reply) : snapshot_decode_txn(call, reply);
	if (r < 0)
		return r;
	while (s->paging < s->n && !s->ranges[s->paging].more)
		s->paging++;
	if (s->paging == s->n) {
		*ret = s->revision;
		return 0;
	}

	struct snapshot_range *sr = &s->ranges[s->paging];
	size_t next_len;
	_cleanup_(freep) char *next = etcd_page_after(&s->lists[s->paging], &next_len);
	if (!next)
		return -ENOMEM;
	_cleanup_(cJSON_Deletep) cJSON *req =
		etcd_range_request(next, next_len, sr->end, sr->end_len, sr->flags, 0, s->revision);
	char *body = req ? cJSON_PrintUnformatted(req) : NULL;
	if (!body)
		return -ENOMEM;
	free(call->body);
	call->body = body;
	call->path = "/v3/kv/range";
	return 1;
}

/* The call's own function: hands the lists to the caller's. */
static void snapshot_done(int error, int64_t revision, void *userdata)
{
	struct etcd_call *call = userdata;
	struct etcd_snapshot *s = call->snapshot;
	s->fn(error, error < 0 ? NULL : s->lists, error < 0 ? 0 : s->n, revision, s->userdata);
}

static int snapshot_new(const struct etcd_range *ranges, size_t n, struct etcd_snapshot **ret)
{
	struct etcd_snapshot *s = calloc(1, sizeof(*s));
	if (!s || !(s->ranges = calloc(n, sizeof(*s->ranges))) ||
	    !(s->lists = calloc(n, sizeof(*s->lists)))) {
		if (s)
			free(s->ranges);
		free(s);
		return -ENOMEM;
	}
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		struct snapshot_range *sr = &s->ranges[i];
		sr->key_len = strlen(ranges[i].key);
		sr->flags = ranges[i].flags;
		sr->limit = ranges[i].limit;
		sr->max_create_revision = ranges[i].max_create_revision;
		sr->at = ranges[i].revision;
		if (sr->at < 0 || (sr->at > 0 && !(sr->flags & ETCD_COUNT_ONLY) &&
				   ranges[i].prefix)) {
			snapshot_free(s);
			return -EINVAL;	/* a count or one key never pages: only they may */
		}
		if ((sr->flags & ETCD_NEWEST_FIRST) &&
		    (sr->limit <= 0 || sr->max_create_revision <= 0 ||
		     (sr->flags & ETCD_COUNT_ONLY))) {
			snapshot_free(s);
			return -EINVAL;
		}
		if (!(sr->key = strdup(ranges[i].key))) {
			snapshot_free(s);
			return -ENOMEM;
		}
		if (ranges[i].prefix) {
			if (!(sr->end = malloc(sr->key_len + 1))) {
				snapshot_free(s);
				return -ENOMEM;
			}
			sr->end_len = etcd_prefix_end(sr->key, sr->key_len, sr->end);
		}
	}
	*ret = s;
	return 0;
}

/* The txn: a range operation per range, all at one revision. */
static int snapshot_body(const struct etcd_snapshot *s, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	cJSON *success = body ? cJSON_AddArrayToObject(body, "success") : NULL;
	if (!success)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++) {
		const struct snapshot_range *sr = &s->ranges[i];
		cJSON *op = cJSON_CreateObject();
		cJSON *req = etcd_range_request(sr->key, sr->key_len, sr->end, sr->end_len,
						sr->flags, 0, sr->at ? sr->at : s->at);
		if (req && (sr->flags & ETCD_NEWEST_FIRST) &&
		    etcd_range_newest_first(req, sr->limit, sr->max_create_revision) < 0) {
			cJSON_Delete(req);
			req = NULL;
		}
		if (!op || !req || !cJSON_AddItemToArray(success, op) ||
		    !cJSON_AddItemToObject(op, "request_range", req)) {
			cJSON_Delete(req);
			return -ENOMEM;
		}
	}
	*ret = cJSON_PrintUnformatted(body);
	return *ret ? 0 : -ENOMEM;
}

int etcd_snapshot_start(struct etcd_client *c, const struct etcd_range *ranges, size_t n,
			int64_t revision, long timeout_ms, etcd_snapshot_fn fn, void *userdata,
			struct etcd_call **ret)
{
	struct etcd_snapshot *s = NULL;
	struct etcd_call *call;
	char *body = NULL;
	int r;

	if (n == 0)
		return -EINVAL;
	if ((r = snapshot_new(ranges, n, &s)) < 0)
		return r;
	s->at = revision > 0 ? revision : 0;
	if ((r = snapshot_body(s, &body)) < 0 ||
	    (r = call_new(c, "/v3/kv/txn", body, timeout_ms, call_decode_snapshot, NULL,
			  snapshot_done, NULL, &call)) < 0) {
		snapshot_free(s);
		return r;
	}
	s->fn = fn;
	s->userdata = userdata;
	call->snapshot = s;
	call->userdata = call;
	if ((r = call_dispatch(call)) < 0) {
		call_free(call);
		return r;
	}
	call_link(call);
	*ret = call;
	return 0;
}
