/*
 * etcd_internal.h — what etcd.c and etcd_watch.c share and nobody else sees:
 * the client's insides and the request plumbing (easy-handle setup, error
 * mapping, authentication).
 */
#ifndef ORCHESTRATE_ETCD_INTERNAL_H
#define ORCHESTRATE_ETCD_INTERNAL_H

#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "base/buf.h"
#include "base/clock.h"
#include "etcd/etcd.h"

/* No reply we accept is larger than this; a bigger one is a hostile server. */
#define ETCD_MAX_REPLY (256u << 20)

struct etcd_client {
	char **endpoints;
	size_t n_endpoints;
	size_t current;			/* index of the endpoint to try first */
	char *cacert, *cert, *key;
	char *user, *password;
	char *token;			/* auth token, NULL before authenticating */
	uint64_t token_gen;		/* counts the tokens taken: which one a request carried */
	struct etcd_call *authenticating;	/* the one authentication in flight (etcd_call.c) */
	int auth_failed;		/* while its waiters hear that it failed: the error */
	uint64_t token_used_ms;		/* when a request last carried the token */
	uint64_t token_expires_ms;	/* a JWT's expiry (monotonic); 0: the token does not say */
	uint64_t token_renew_ms;	/* the keep's login before it (0: not drawn yet) */
	long token_keep_ms;		/* etcd_client_keep_token(): its limit, */
	char *keep_key;			/* the key it reads, */
	sd_event_source *keep_timer;	/* when it looks again, */
	struct etcd_call *keeping;	/* and its read in flight */
	long login_spread_ms;		/* etcd_client_spread_logins(); 0: none */
	uint64_t login_after_ms;	/* the spread login of the lost token: not before (0: none drawn) */
	sd_event_source *login_timer;	/* ...which then starts, for the calls parked until it */
	char *denied_key;		/* etcd_denied_key(): the write etcd refused */
	long timeout_ms;

	CURL *easy;			/* reused by unary calls: keeps connections */
	struct buf error;		/* etcd_last_error() */
	uint64_t requests;		/* counted, for debugging */
	uint64_t reconnects;
	uint64_t events;		/* delivered by its watches */
	uint64_t backlog_answers;	/* etcd_client_backlog_answers() */
	int64_t revision;		/* etcd_client_revision() */
	/* etcd_txn_replaced(): what the last write txn's put that asked for it
	 * replaced (empty: nothing), and that txn's revision (0: none yet) */
	struct etcd_kv replaced;
	int64_t replaced_at;

	/* event-loop mode (etcd_client_attach_event) */
	sd_event *event;
	CURLM *multi;
	sd_event_source *multi_timer;
	struct etcd_watch *watches;	/* linked through etcd_watch.next */
	struct etcd_call *calls;	/* unary requests in flight, through etcd_call.next */
	struct etcd_keepalive_stream *keepalive;	/* etcd_keepalive.c; NULL: none yet */
};

/* What an easy handle on the client's multi carries as CURLINFO_PRIVATE: the
 * first member of a watch and of an asynchronous call alike, so that a
 * finished transfer finds its owner. */
enum etcd_transfer { ETCD_TRANSFER_WATCH, ETCD_TRANSFER_CALL, ETCD_TRANSFER_KEEPALIVE };

/* A finished transfer of an asynchronous call (etcd_call.c). */
void etcd_call_transfer_done(struct etcd_call *call, CURLcode code);
/* Frees every call still in flight, without calling back. */
void etcd_calls_free(struct etcd_client *c);

/*
 * The keepalive stream (etcd_keepalive.c).  _send puts call's renewal (body,
 * a JSON object) on the client's stream, opening it when none is; false when
 * the stream cannot take it (the caller sends a request of its own).  The
 * stream then answers the call with etcd_call_streamed_answer(), or, when it
 * ends first, hands it back with etcd_call_streamed_lost().  _forget drops the
 * stream a call waits on (its answer would come late).  _dispatch reads what
 * has come back (after curl ran), _transfer_done ends a stream curl finished,
 * and _unwatched (from curl's socket callback) names a socket curl let go
 * of: the next _dispatch ends the stream if etcd closed it.
 */
struct etcd_keepalive_stream;
bool etcd_keepalive_stream_send(struct etcd_client *c, struct etcd_call *call, const char *body);
void etcd_keepalive_stream_forget(struct etcd_client *c, struct etcd_call *call);
void etcd_keepalive_stream_dispatch(struct etcd_client *c);
void etcd_keepalive_stream_unwatched(struct etcd_client *c, CURL *easy, curl_socket_t fd);
/* The same for a daemon's watch stream, whose body stays open too
 * (etcd_watch.c): the next dispatch ends the stream if etcd closed it. */
void etcd_watch_unwatched(struct etcd_client *c, CURL *easy, curl_socket_t fd);
/* Whether a socket curl let go of is closed on the peer's side (end of file
 * or a reset, on a peek); one closed by curl (EBADF) is not. */
bool etcd_socket_hung_up(curl_socket_t fd);
void etcd_keepalive_stream_transfer_done(struct etcd_keepalive_stream *ks);
void etcd_keepalive_stream_free(struct etcd_client *c);
/*
 * Whether data (len bytes, NUL-terminated) starts with a whole frame of the
 * keepalive stream's reply: a line (*ret_len without its line break), or a
 * whole JSON object with no line break after it (all of data).  The gateway
 * ends each answer with a line break, but not the error that ends a stream
 * (grpc-gateway writes it alone, last), and the reply does not end after it
 * either: Go's server then waits for the rest of a request body that stays
 * open for the next renewal.  Read only as lines, that error was never seen:
 * a renewal etcd refused within a second ("waiting for the applied index took
 * too long", under a write backlog) waited out its whole patience, most of
 * the TTL, and the lease was gone when a prompt retry would have renewed it.
 * *ret_consumed is what to drop with the frame.
 */
bool etcd_keepalive_frame(const char *data, size_t len, size_t *ret_len, size_t *ret_consumed);
/* The stream's answer to a call (reply NULL: not JSON), from endpoint i. */
void etcd_call_streamed_answer(struct etcd_call *call, const cJSON *reply, size_t i);
/* The stream ended before answering: the call goes on as a request of its
 * own, from endpoint (current + attempt). */
void etcd_call_streamed_lost(struct etcd_call *call, size_t attempt);

/* Sets URL, TLS, timeouts and the JSON body (copied) on an easy handle; the
 * headers list (Content-Type, Authorization) is built into *headers, which the
 * caller frees after the transfer. */
int etcd_easy_setup(struct etcd_client *c, CURL *easy, const char *endpoint, const char *path,
		    const char *body, long timeout_ms, struct curl_slist **headers);

/* curl's write callback for unary replies: appends to a struct buf, up to
 * ETCD_MAX_REPLY. */
size_t etcd_write_to_buf(char *data, size_t size, size_t nmemb, void *userdata);

/* The request body of a long stream (the keepalive stream, a daemon's watch
 * stream) stays open: what is queued goes out, then curl's read pauses until
 * more is queued (etcd_open_body_add, then _resume). */
struct etcd_open_body {
	struct buf out;			/* what is still to send */
	size_t sent;			/* of out, already given to curl */
	bool paused;			/* curl's read waits for more */
};

/* curl's read callback (CURLOPT_READDATA: the struct etcd_open_body). */
size_t etcd_open_body_read(char *dest, size_t size, size_t nitems, void *userdata);
int etcd_open_body_add(struct etcd_open_body *b, const char *text);
/* Wakes the transfer easy if its read paused on an empty body. */
void etcd_open_body_resume(struct etcd_open_body *b, CURL *easy);
/* For a new transfer: nothing queued, nothing paused. */
void etcd_open_body_reset(struct etcd_open_body *b);
void etcd_open_body_release(struct etcd_open_body *b);

/* Starts a unary request: forgets the last refused write. */
void etcd_call_begin(struct etcd_client *c);

/* How one attempt of a unary request ended. */
enum etcd_attempt {
	ETCD_ATTEMPT_DONE,	/* *ret_error is the answer: 0 with *ret_reply, or an error */
	ETCD_ATTEMPT_ELSEWHERE,	/* another member may answer: try the next endpoint */
	ETCD_ATTEMPT_REAUTH,	/* the token was refused: a new one, the same member again */
};

/* What the failed attempts of one request said, across its endpoints. */
struct etcd_attempts {
	bool tls_refused;	/* an endpoint's certificate was not trusted */
	bool unsure;		/* one ended with no definite answer: it may be applied */
};

/* Reads one attempt on endpoint i from what curl returned (code, the HTTP
 * status, the reply's bytes), for the blocking and the asynchronous calls
 * alike: records the error message and the refused key, notes in *a what a
 * failed attempt says, and on success makes i the endpoint to try first. */
enum etcd_attempt etcd_attempt_read(struct etcd_client *c, size_t i, const char *path,
				    const char *body_text, CURLcode code, long http_code,
				    const struct buf *reply, struct etcd_attempts *a,
				    int *ret_error, cJSON **ret_reply);

/* The error of a request whose every endpoint failed, the last with last:
 * no endpoint trusted is -EACCES; "too many requests" (-EBUSY) from the last
 * is -ECONNREFUSED when an earlier attempt may have been applied. */
int etcd_attempts_error(const struct etcd_attempts *a, int last);

/* A range read's page: this many keys at most (etcd_get_prefix, snapshots). */
#define ETCD_PAGE_SIZE 5000
/* Where the next page of a range read starts: just after l's last key (l holds
 * at least one).  NULL when out of memory. */
char *etcd_page_after(const struct etcd_kv_list *l, size_t *ret_len);
/* One range request, as a JSON object: the key alone (end NULL), or [key, end)
 * a page of page_size keys at a time (<= 0: ETCD_PAGE_SIZE); flags as
 * etcd_get_prefix()'s; at revision when > 0.  NULL when out of memory. */
cJSON *etcd_range_request(const char *key, size_t key_len, const char *end, size_t end_len,
			  unsigned flags, long page_size, int64_t revision);
/* Turns a range request into ETCD_NEWEST_FIRST's: at most limit keys
 * created at or before max_create_revision, newest first. */
int etcd_range_newest_first(cJSON *req, long limit, int64_t max_create_revision);
/* The endpoint that answered last (or will be tried first). */
const char *etcd_current_endpoint(const struct etcd_client *c);
/* Whether error, the last call's, is etcd's "lease already exists": a
 * grant of an id that was granted. */
bool etcd_lease_existed(const struct etcd_client *c, int error);
/* A token refused although it came from a fresh login: records why and
 * returns -EKEYEXPIRED. */
int etcd_token_refused_again(struct etcd_client *c);
/* Drops the token and authenticates again (blocking). */
int etcd_reauthenticate(struct etcd_client *c);
/* The token carried by a request sent at generation gen was refused: it is
 * dropped, unless a newer one was taken since. */
void etcd_token_refused(struct etcd_client *c, uint64_t gen);

/* The body of a request about one lease (a keepalive, a revoke), and a
 * keepalive's reply read into the TTL. */
int etcd_lease_body(int64_t id, char **ret_text);
int etcd_decode_keepalive(struct etcd_client *c, const cJSON *reply, int64_t *ret_ttl);
/* A lease grant's request body, and its reply read into the lease id. */
int etcd_grant_body(int64_t ttl, int64_t id, char **ret_text);
int etcd_decode_grant(struct etcd_client *c, const cJSON *reply, int64_t *ret_id);
/* A txn's reply: whether it succeeded and its revision.  With witness (the
 * value a settled txn puts, etcd_txn_settle), a failed compare whose read-back
 * witness holds that value counts as succeeded, at the witness's revision. */
int etcd_decode_txn(struct etcd_client *c, const cJSON *reply, const char *witness,
		    bool *ret_succeeded, int64_t *ret_revision);
/* The read of a settled txn's witness (etcd_txn_applied_start), and the
 * `since` it was settled with; -EINVAL when the txn is not settled.  Its
 * reply: *ret_revision is the witness's revision when it holds `witness` (the
 * txn's value) and was written after `since`, else 0. */
int etcd_txn_applied_body(const struct etcd_txn *t, char **ret_text, int64_t *ret_since);
int etcd_decode_applied(struct etcd_client *c, const cJSON *reply, const char *witness,
			int64_t since, int64_t *ret_revision);
/* The body of a txn and, when settled, its witness's value (NULL if not). */
const cJSON *etcd_txn_body(const struct etcd_txn *t);
const char *etcd_txn_witness(const struct etcd_txn *t);
bool etcd_txn_is_either(const struct etcd_txn *t);

/* Maps a gateway error object ({"error","message","code"} for unary calls, or
 * {"grpc_code","message"} inside a stream) to an error code, recording the
 * message.  *ret_retry_elsewhere is set when another member may succeed,
 * *ret_reauth when the token was refused. */
int etcd_map_grpc_error(struct etcd_client *c, const char *endpoint, long grpc_code,
			const char *message, bool *ret_retry_elsewhere, bool *ret_reauth);

/* The gRPC code held by a JSON number; 2 (Unknown) when it is absent, not a
 * number, or not a code at all (a hostile 1e300 must not reach a cast). */
long etcd_grpc_code(const cJSON *code);

/* The pure part of the mapping, for stream frames decoded without a client. */
int etcd_grpc_errno(long grpc_code, const char *message, bool have_user,
		    bool *ret_retry_elsewhere, bool *ret_reauth);

/* Authenticates (when a user is configured) and stores the token (blocking:
 * the command line's way; the daemon's is etcd_token_request()). */
int etcd_authenticate(struct etcd_client *c);
/* An authentication's body: the user and the password.  NULL: no memory. */
cJSON *etcd_auth_request(const struct etcd_client *c);
/* An authentication's reply: the token taken (and counted in token_gen), or
 * -EPROTO.  A failed authentication's error: 0 from a cluster with
 * authentication off (no token then), else the error (a refused password is
 * -EACCES). */
int etcd_auth_take(struct etcd_client *c, const cJSON *reply);
/* The expiry a JSON Web Token carries (etcd --auth-token jwt): 1 and
 * *ret_exp, its "exp" claim in seconds since the epoch; 0 for a token that
 * carries none (a simple token) or that cannot be read. */
int etcd_token_expiry(const char *token, int64_t *ret_exp);
int etcd_auth_error(struct etcd_client *c, int r);

/*
 * The asynchronous requests' token (etcd_call.c).  One authentication at a
 * time: etcd checks a password with bcrypt, tens of milliseconds of its CPU,
 * and after a restart every client of a fleet needs a new token at once.
 * _request starts the authentication unless one is in flight; a call or a
 * watch that needs the token waits for it instead of blocking the loop.  Its
 * outcome goes to every waiting call and, through etcd_watch_token_ready(),
 * every waiting watch.
 */
bool etcd_token_needed(const struct etcd_client *c);
int etcd_token_request(struct etcd_client *c);
/* The token came (error 0) or the authentication failed: the watches that
 * waited for it connect, or schedule their reconnect (etcd_watch.c). */
void etcd_watch_token_ready(struct etcd_client *c, int error);
/* A token refused on every host of a fleet at once (why, logged with the
 * moment): the next login waits for a random moment of the client's spread,
 * drawn once per token lost, and so does every request that needs the token
 * meanwhile (etcd_token_request).  Nothing to spread without a spread, with a
 * login in flight, or with a token there already. */
void etcd_login_spread(struct etcd_client *c, const char *why);
/* Ends the token's timers (the keep's, a spread login's) and the keep's
 * read (the client is freed). */
void etcd_keep_token_stop(struct etcd_client *c);

/* CLOCK_MONOTONIC in milliseconds, the clock of watch deadlines. */
static inline uint64_t etcd_now_ms(void)
{
	return clock_msec(CLOCK_MONOTONIC);
}

#endif
