/*
 * etcd.h — a client for etcd's v3 HTTP/JSON gateway (etcd 3.4+), on libcurl.
 *
 * The client knows requests, endpoints, TLS, authentication, leases and watch
 * streams; it knows nothing of orchestrate's key layout (that is schema.h).
 *
 * Endpoints.  A client holds a list of endpoints that form one cluster.  A request
 * that fails on one member for a reason that another member may not share
 * (connection refused, timeout, HTTP 5xx, "leader changed", "no leader") is sent
 * to the next member; the member that answered is remembered and tried first
 * next time.  Errors that every member would give (a refused permission, a
 * compare that failed, a malformed request) are returned at once.
 *
 * Errors.  Every function returns 0 (or a count) on success and a negative
 * errno-style code on failure; the client keeps a one-line description of the
 * last failure for the caller to print (etcd_last_error()).  The codes:
 *   -ECONNREFUSED  no endpoint answered (unreachable, timed out, 5xx everywhere)
 *   -EBUSY         etcd refused a write as "too many requests": it had committed
 *                  over 5,000 entries more than it had applied, and refused this
 *                  one before proposing it, so it was not applied and may be sent
 *                  again; that etcd is far behind (a caller should slow down)
 *   -EACCES        authentication failed or permission denied
 *   -EKEYEXPIRED   etcd refused the token of a fresh login too: it read the
 *                  request only after its --auth-token-ttl (or its users
 *                  changed meanwhile); nothing was applied, try again later
 *   -EPROTO        a reply that is not what the gateway sends (bad JSON, types)
 *   -ENOSPC        the cluster raised the NOSPACE alarm
 *   -ESTALE        a watch's start revision was compacted (see etcd_watch)
 *   -ETIMEDOUT     a blocking watch's deadline passed
 *   -EINVAL        the request was refused as invalid (gRPC InvalidArgument)
 *   -ENOMEM
 *
 * Gateway JSON.  int64 values are strings; fields holding zero, false or empty
 * are left out (a txn that did not succeed has no "succeeded", a PUT event has no
 * "type"); keys and values are base64.  The decoders in this file accept exactly
 * that and nothing else; see etcd_decode_*() which the unit tests drive directly.
 *
 * Blocking and event-loop use.  The command line calls the blocking functions.
 * The daemon uses the same blocking functions for short unary requests (each is
 * bounded by the request timeout) and runs its watch streams asynchronously on
 * its sd-event loop: etcd_client_attach_event() drives the client's stream multi
 * handle from sd-event, after which etcd_watch_start_ranges() streams do not block.
 */
#ifndef ORCHESTRATE_ETCD_H
#define ORCHESTRATE_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

struct etcd_client;
typedef struct sd_event sd_event;

struct etcd_options {
	char **endpoints;		/* NULL-terminated list of URLs, at least one */
	const char *cacert;		/* PEM CA bundle to verify servers, or NULL */
	const char *cert;		/* client certificate (PEM), or NULL */
	const char *key;		/* client key (PEM), or NULL */
	const char *user;		/* etcd user, or NULL for no authentication */
	const char *password;
	long timeout_ms;		/* per request, per endpoint; 0 means 5000 */
	long token_keep_ms;		/* etcd_client_keep_token()'s limit; 0: none */
	long login_spread_ms;		/* etcd_client_spread_logins()' window; 0: none */
};

/* One key-value pair.  key and value are NUL-terminated copies; the lengths
 * are authoritative, since etcd keys and values may hold any bytes. */
struct etcd_kv {
	char *key;
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

struct etcd_kv_list {
	struct etcd_kv *kvs;
	size_t n;
	size_t cap;
	int64_t revision;	/* the store revision the range was read at */
	int64_t count;		/* total matching keys (count_only fills only this) */
};

#define ETCD_KV_LIST_INIT { NULL, 0, 0, 0, 0 }

void etcd_kv_list_release(struct etcd_kv_list *l);
static inline void etcd_kv_list_releasep(struct etcd_kv_list *l) { etcd_kv_list_release(l); }

/* A new client; -EINVAL when there is no endpoint or one is not valid
 * (etcd_endpoint_parse()). */
int etcd_client_new(const struct etcd_options *opts, struct etcd_client **ret);
struct etcd_client *etcd_client_free(struct etcd_client *c);
static inline void etcd_client_freep(struct etcd_client **c) { if (*c) etcd_client_free(*c); }

/* "etcd 'http://10.0.0.1:2379': connection refused" — the last failure. */
const char *etcd_last_error(const struct etcd_client *c);
/* Records the one-line message etcd_last_error() gives: the client's own, or
 * a caller's failure on the way to a request (one it could not build), so
 * that the message printed for the failure names it and not an older one. */
void etcd_set_error(struct etcd_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Endpoints.  An endpoint is the URL of a member's gateway:
 *
 *   [http:// | https://] HOST [:PORT] [/PATH]
 *
 * with no scheme meaning http:// (so "127.0.0.1:2379" is http://127.0.0.1:2379);
 * HOST a name or IPv4 address of [A-Za-z0-9._-], or an IPv6 address in
 * brackets ("[::1]:2379"); PORT 1-65535 (none: the scheme's, 80 or 443);
 * PATH, for a gateway behind a proxy, of [A-Za-z0-9._~/-].  No user
 * ("user@host": use the client's user and password), query, fragment, space
 * or control character.  This is the one rule for --etcd, --host/--port,
 * ORCHESTRATE_ETCD and etcd.endpoints of the config file, checked before any
 * request.
 *
 * etcd_endpoint_parse() checks the len bytes of text and returns the endpoint
 * as the client uses it (scheme lower-case, trailing "/" dropped) in *ret, or
 * -EINVAL with *ret_problem (static text: "port 99999 is not 1-65535") when
 * it is not one.
 */
int etcd_endpoint_parse(const char *text, size_t len, char **ret, const char **ret_problem);
/*
 * Splits "URL,URL,..." (spaces around the commas allowed) and appends each
 * endpoint, parsed, to the NULL-terminated vector (*v, *n) (strv.h).  On
 * -EINVAL, *ret_bad (when not NULL) is a copy of the offending item (caller
 * frees) and *ret_problem says what is wrong with it.
 */
int etcd_endpoints_parse(const char *text, char ***v, size_t *n, char **ret_bad,
			 const char **ret_problem);

/* --- ranges ---------------------------------------------------------------- */

enum {
	ETCD_KEYS_ONLY = 1 << 0,	/* values are left empty */
	ETCD_COUNT_ONLY = 1 << 1,	/* only ret->count and ret->revision */
	/* Served by the member asked from what it has applied, without a round
	 * of consensus or a wait for its apply queue (a snapshot read whose
	 * ranges all say so is a serializable txn): at least as new as what
	 * that member's watches delivered, possibly older than the cluster. */
	ETCD_SERIALIZABLE = 1 << 2,
	/* A snapshot range only: the keys created before max_create_revision
	 * (struct etcd_range), newest first by create revision, at most limit
	 * of them and no further page.  etcd's lock recipe: the last of them is
	 * the key just ahead of one created at max_create_revision + 1. */
	ETCD_NEWEST_FIRST = 1 << 3,
};

/*
 * Reads one key.  Returns 1 and fills *ret (if not NULL) when the key exists,
 * 0 when it does not.  ret_revision (may be NULL) receives the store revision.
 */
int etcd_get(struct etcd_client *c, const char *key, struct etcd_kv *ret, int64_t *ret_revision);
/* The same at revision (0: newest).  A read of exactly one key needs only a
 * grant of that key, where a prefix range of it needs the range. */
int etcd_get_at(struct etcd_client *c, const char *key, int64_t revision, struct etcd_kv *ret,
		int64_t *ret_revision);
void etcd_kv_release(struct etcd_kv *kv);
static inline void etcd_kv_releasep(struct etcd_kv *kv) { etcd_kv_release(kv); }

/*
 * Reads every key starting with prefix, sorted by key, at one revision: pages
 * of page_size keys (0: 5000), each pinned to the revision of the first page, so
 * that a range of any size is one consistent snapshot.  revision 0 reads the
 * newest; otherwise that revision (-ESTALE if compacted).
 */
int etcd_get_prefix(struct etcd_client *c, const char *prefix, unsigned flags,
		    int64_t revision, struct etcd_kv_list *ret);
/* As etcd_get_prefix() with an explicit page size (tests use a small one). */
int etcd_get_prefix_paged(struct etcd_client *c, const char *prefix, unsigned flags,
			  int64_t revision, long page_size, struct etcd_kv_list *ret);

/* The range end that makes [prefix, end) cover every key starting with prefix;
 * "\0" (all keys) for an empty prefix.  Returns the length written to end. */
size_t etcd_prefix_end(const char *prefix, size_t len, char *end);

/* --- writes ---------------------------------------------------------------- */

int etcd_put(struct etcd_client *c, const char *key, const char *value, size_t value_len,
	     int64_t lease);
/* Deletes one key; returns the number deleted (0 or 1). */
int etcd_delete(struct etcd_client *c, const char *key);

/*
 * Transactions.  Build with etcd_txn_new() and the etcd_txn_*() helpers (each
 * returns 0 or -ENOMEM), then commit.  *ret_succeeded tells whether the compares
 * held (so the success branch ran).  Every multi-key change that must be atomic
 * goes through one txn.
 */
enum etcd_cmp { ETCD_CMP_EQUAL, ETCD_CMP_NOT_EQUAL, ETCD_CMP_GREATER, ETCD_CMP_LESS };

struct etcd_txn;
struct etcd_txn *etcd_txn_new(void);
struct etcd_txn *etcd_txn_free(struct etcd_txn *t);
static inline void etcd_txn_freep(struct etcd_txn **t) { if (*t) etcd_txn_free(*t); }

/* version 0 compares "the key does not exist". */
int etcd_txn_if_version(struct etcd_txn *t, const char *key, enum etcd_cmp cmp, int64_t version);
int etcd_txn_if_mod_revision(struct etcd_txn *t, const char *key, enum etcd_cmp cmp, int64_t rev);
/* The same for every key that starts with prefix (etcd's range compare): it
 * holds when each of them compares so; an empty range compares as a missing
 * key (mod revision 0).  "LESS than R + 1" says "nothing in it written after R". */
int etcd_txn_if_prefix_mod_revision(struct etcd_txn *t, const char *prefix, enum etcd_cmp cmp,
				    int64_t rev);
/* on_success: the op runs when the compares hold; otherwise when they fail. */
int etcd_txn_put(struct etcd_txn *t, bool on_success, const char *key, const char *value,
		 int64_t lease);
/* A put of the success branch that asks etcd for the key it replaces:
 * etcd_txn_replaced() then has it, once the txn was applied. */
int etcd_txn_put_replacing(struct etcd_txn *t, const char *key, const char *value,
			   int64_t lease);
/*
 * What the first put of the write txn applied at revision replaced
 * (etcd_txn_put_replacing): the key as it was, or an empty kv (no key was
 * there); NULL when not known: the last txn this client read the answer of
 * is another, or a resend of it was found applied by a read, which says
 * nothing of it.  Valid until the client reads the next txn answer, so
 * within the function the txn's answer calls.
 */
const struct etcd_kv *etcd_txn_replaced(const struct etcd_client *c, int64_t revision);
int etcd_txn_delete(struct etcd_txn *t, bool on_success, const char *key);
/* Deletes every key that starts with prefix. */
int etcd_txn_delete_prefix(struct etcd_txn *t, bool on_success, const char *prefix);
int etcd_txn_commit(struct etcd_client *c, struct etcd_txn *t, bool *ret_succeeded,
		    int64_t *ret_revision);
/*
 * Settling a write that may have been applied.  A txn whose reply was lost (a
 * timeout, a member that answered "request timed out" or went away) may still
 * have been applied: sending it again blindly would write its keys twice.
 * etcd_txn_settle() makes the txn a resend of one first sent when the client
 * had seen revision `since` (etcd_client_revision() then): it holds only while
 * its witness (the first key its success branch puts) was not written after
 * `since`, and when that fails it reads the witness back; a witness holding
 * exactly the value this txn puts means the first send was applied, and the
 * commit reports success without writing anything.  No extra request, and a
 * resend is idempotent.  A txn that puts nothing needs no settling (deleting
 * again deletes nothing): it is left as it is.
 */
int etcd_txn_settle(struct etcd_txn *t, int64_t since);
/* Both branches of the txn are a success (a write whose compare only chooses
 * what to write): etcd_txn_commit_start() then reports a failed compare as
 * applied, not -ECANCELED. */
void etcd_txn_either_branch(struct etcd_txn *t);
/* The newest revision of any reply this client has read (0 before one). */
int64_t etcd_client_revision(const struct etcd_client *c);

/* --- leases ---------------------------------------------------------------- */

int etcd_lease_grant(struct etcd_client *c, int64_t ttl, int64_t *ret_id);

/* --- asynchronous requests (event-loop mode) -------------------------------- */

/*
 * A unary request that runs on the client's multi handle beside the watches
 * (etcd_client_attach_event first), so that the loop goes on while etcd takes
 * its time.  Failover is the blocking calls': each endpoint once, starting with
 * the one that answered last.  timeout_ms is the patience of the whole call:
 * each attempt gets max(the client's request timeout, timeout_ms / endpoints),
 * so that a slow member is waited for while a dead one is left in time.
 *
 * fn is called exactly once, from the loop (never from inside curl and never
 * from inside the start function), with 0 and the call's value or with an
 * error; etcd_last_error() says what failed.  The call is freed after fn
 * returns.  etcd_call_cancel() stops one that has not called back yet: fn is
 * then never called.
 */
struct etcd_call;
typedef void (*etcd_value_fn)(int error, int64_t value, void *userdata);
/* One keepalive; the value is the remaining TTL, 0 when the lease is gone. */
int etcd_lease_keepalive_start(struct etcd_client *c, int64_t id, long timeout_ms,
			       etcd_value_fn fn, void *userdata, struct etcd_call **ret);
/*
 * A lease grant; the value is the new lease's id.  id 0 lets etcd choose it;
 * id > 0 asks for that one, which makes the grant safe to send again: when
 * an earlier send of it was applied (it went unanswered, etcd applied it
 * later), etcd says the lease exists and the call ends with id.  A grant
 * etcd chooses the id of, sent twice, leaves a lease nobody renews, which
 * etcd must still expire (a proposal of its own).
 */
int etcd_lease_grant_start(struct etcd_client *c, int64_t ttl, int64_t id, long timeout_ms,
			   etcd_value_fn fn, void *userdata, struct etcd_call **ret);
/* A lease revoke (the value is 0): the lease's keys go at once, not at its
 * expiry.  A lease that expired already counts as revoked. */
int etcd_lease_revoke_start(struct etcd_client *c, int64_t id, long timeout_ms,
			    etcd_value_fn fn, void *userdata, struct etcd_call **ret);
/* A txn; the value is the revision it was applied at.  -ECANCELED when its
 * compares failed (nothing written); a settled txn (etcd_txn_settle) whose
 * first send was applied counts as applied, at the witness's revision.  The
 * txn is copied: the caller may free it at once. */
int etcd_txn_commit_start(struct etcd_client *c, const struct etcd_txn *t, long timeout_ms,
			  etcd_value_fn fn, void *userdata, struct etcd_call **ret);
/*
 * Whether an earlier send of a settled txn (etcd_txn_settle) was applied,
 * without writing anything: a read of its witness.  The value is the revision
 * the witness was written at when it holds exactly this txn's value and was
 * written after `since`, else 0: not applied, so sending it again is needed.
 * -EINVAL for a txn that is not settled.
 *
 * Why read before sending again: etcd answers "request timed out" while the
 * write is still in its apply queue, and a resend joins that queue behind it
 * (the resend settles, but it is one more proposal for an etcd that has fallen
 * behind, and a lease keepalive fails while etcd's apply lags).  The read is
 * linearizable: etcd answers it once it has applied everything committed
 * before it, so it waits for the queue instead of adding to it, and costs etcd
 * no proposal.  Give it the patience of a write.
 */
int etcd_txn_applied_start(struct etcd_client *c, const struct etcd_txn *t, long timeout_ms,
			   etcd_value_fn fn, void *userdata, struct etcd_call **ret);
void etcd_call_cancel(struct etcd_call *call);

/*
 * A snapshot read that does not block: every range of ranges[] at one
 * revision (revision > 0: that one, which etcd refuses with -ESTALE when it
 * was compacted; else the newest), in one request (a txn of range operations,
 * which etcd serves without a proposal and linearizably, as a range).  A
 * prefix range longer than a page (5000 keys) goes on in pages pinned to that
 * revision, a request each.  fn gets a list per range, in order, and the
 * revision; it may take the lists' contents (the lists are released after it
 * returns).  A range of one key holds that key or nothing; a count-only range
 * holds its count alone.
 */
struct etcd_range {
	const char *key;
	bool prefix;			/* every key starting with key; else key alone */
	unsigned flags;			/* ETCD_KEYS_ONLY, ETCD_COUNT_ONLY, ... */
	long limit;			/* ETCD_NEWEST_FIRST: at most this many keys... */
	int64_t max_create_revision;	/* ...created at or before this revision */
	/* A count (ETCD_COUNT_ONLY) or one key (not prefix): read at this
	 * earlier revision (0: the snapshot's), which never pages.  etcd
	 * counts from its index, whatever the revision, without reading a
	 * key: how many keys a range held back then. */
	int64_t revision;
};
typedef void (*etcd_snapshot_fn)(int error, struct etcd_kv_list *lists, size_t n,
				 int64_t revision, void *userdata);
int etcd_snapshot_start(struct etcd_client *c, const struct etcd_range *ranges, size_t n,
			int64_t revision, long timeout_ms, etcd_snapshot_fn fn, void *userdata,
			struct etcd_call **ret);
int etcd_lease_revoke(struct etcd_client *c, int64_t id);
/* Whether error, the last call's, is etcd's "requested lease not found": the
 * lease expired or was revoked (a revoke of it is as done as it gets; a write
 * under it is refused, after etcd made it a proposal). */
bool etcd_lease_was_gone(const struct etcd_client *c, int error);

/* --- cluster --------------------------------------------------------------- */

/* POST /v3/maintenance/status on the current endpoint, failing over. */
int etcd_status(struct etcd_client *c, char **ret_server_version, char **ret_endpoint);

/* --- watches --------------------------------------------------------------- */

enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE };

struct etcd_event {
	enum etcd_event_type type;
	struct etcd_kv kv;	/* for DELETE, only key and mod_revision */
	struct etcd_kv prev_kv;	/* ETCD_WATCH_PREV_KV: the key before; else empty */
};

/*
 * Called with each batch of events (n may be 0 for progress), and the header
 * revision of the frame.  Events at or below the revision already delivered are
 * dropped before the call (etcd may repeat them after a reconnect).  Return 0 to
 * go on, 1 to stop the watch, or a negative code to stop it with that error.
 */
typedef int (*etcd_watch_fn)(const struct etcd_event *events, size_t n, int64_t revision,
			     void *userdata);

/*
 * Blocking watch for the command line: watches [key, key+prefix-end) (or one key
 * when prefix is false) from start_revision, until fn returns non-zero or
 * deadline_ms (CLOCK_MONOTONIC milliseconds, 0 for none) passes.  A stream that
 * drops is resumed on the next endpoint from the last revision seen.  Returns fn's
 * result, -ETIMEDOUT at the deadline, or -ESTALE (with *ret_compact_revision set
 * when not NULL) when start_revision is compacted: the caller must read again.
 */
int etcd_watch(struct etcd_client *c, const char *key, bool prefix, int64_t start_revision,
	       uint64_t deadline_ms, etcd_watch_fn fn, void *userdata,
	       int64_t *ret_compact_revision);

/*
 * The same over several ranges on one stream (struct etcd_watch_range below;
 * each from its own start_revision): a frame's events all belong to one range,
 * and fn tells which from the keys.  A compaction of any range ends the watch
 * with -ESTALE.
 */
struct etcd_watch_range;
int etcd_watch_ranges(struct etcd_client *c, const struct etcd_watch_range *ranges,
		      size_t n_ranges, uint64_t deadline_ms, etcd_watch_fn fn, void *userdata,
		      int64_t *ret_compact_revision);

/*
 * Asynchronous watches for the daemon.  After etcd_client_attach_event(), a
 * watch started with etcd_watch_start_ranges() runs on the event loop.  It resumes by
 * itself on a dropped stream (next endpoint, from the last revision seen + 1) and
 * is reopened when it has been silent for idle_ms (a dead TCP stream must not
 * hang the node).  on_error is called with -ESTALE when the resume revision was
 * compacted (the watch has stopped: read everything again and start a new one),
 * or with another code when it cannot go on; it is not called after
 * etcd_watch_stop().
 */
struct etcd_watch;
typedef void (*etcd_watch_error_fn)(struct etcd_watch *w, int error, int64_t compact_revision,
				    void *userdata);

int etcd_client_attach_event(struct etcd_client *c, sd_event *event);

/*
 * Keeps the client's token in use (event-loop mode, a user configured, the
 * options' token_keep_ms above 0): once no request carried it for 3/4 to all
 * of token_keep_ms (at random), a count-only serializable read of key does.
 * etcd's simple tokens expire after --auth-token-ttl seconds unused (300 by
 * default), and a daemon's lease renewals do not use them; without this,
 * every idle host would log in again at the first write of a trigger, a
 * bcrypt check each at etcd, all at once.  key: one the user may read.
 */
int etcd_client_keep_token(struct etcd_client *c, const char *key);

/*
 * Spreads the logins a fleet makes at once (event-loop mode, a user
 * configured, ms above 0; the daemon's client, not a command's).  When an
 * etcd member restarts it has forgotten every simple token (they live in the
 * members' memory), and every host of a fleet whose watch stream comes back
 * to it finds its token refused within a second.  etcd checks
 * each password with bcrypt (72 ms of its CPU here at its default cost) and
 * all it was sent side by side: 1,000 at once starved its applies, and lease
 * renewals timed out until a quarter of the leases were lost.  So such a
 * watch asks for the login at a random moment within ms, drawn once per
 * token lost; so does a call whose JWT etcd refused as given before its
 * users or roles changed (every host's JWT is refused then).  Every request
 * that needs the token meanwhile waits for that moment, and every watch
 * waiting goes as soon as a token is there.
 */
void etcd_client_spread_logins(struct etcd_client *c, long ms);

/*
 * One stream carrying several watches (the daemon's one stream per node: etcd
 * holds ~90 KiB per stream and ~11 KiB per extra watch on it).  Each range is
 * one create request on the stream and resumes by itself from the last revision
 * delivered for it, so no event of any range is lost or delivered twice across
 * a reconnect; a frame's events all belong to one range (the callback tells
 * which from the keys).  A compaction of any range ends the whole watch with
 * -ESTALE.  start_revision 0 is "from now".
 */
struct etcd_watch_range {
	const char *key;
	bool prefix;
	int64_t start_revision;
	const char *range_end;	/* [key, range_end) when not NULL (prefix unused) */
	unsigned flags;		/* ETCD_WATCH_NO_PUT, ETCD_WATCH_PREV_KV */
};
enum {
	ETCD_WATCH_NO_PUT = 1 << 0,	/* deletions only */
	ETCD_WATCH_PREV_KV = 1 << 1,	/* each event with the key as it was before */
};

int etcd_watch_start_ranges(struct etcd_client *c, const struct etcd_watch_range *ranges,
			    size_t n_ranges, uint64_t idle_ms, etcd_watch_fn on_events,
			    etcd_watch_error_fn on_error, void *userdata, struct etcd_watch **ret);
struct etcd_watch *etcd_watch_stop(struct etcd_watch *w);

/*
 * One range added to a running stream of etcd_watch_start_ranges(), with
 * callbacks of its own: a watch that comes and goes (the slot queue's) costs
 * one create on the stream already open, not a stream of its own (an HTTP
 * request, and ~90 KiB in etcd).  The daemon's stream keeps its request body
 * open for this.  The range resumes with the stream from its own revision;
 * its compaction ends it alone (on_error, -ESTALE), and so does a non-zero
 * return of on_events; an error that ends the stream ends it too (on_error
 * with that error).  Its owner removes it with etcd_watch_remove() in every
 * case, whether the range or the stream ended first (a stopped stream leaves
 * its parts ended, for their owners to remove).  Returns -EINVAL for a
 * blocking or ended stream.
 */
struct etcd_watch_part;
int etcd_watch_add(struct etcd_watch *w, const struct etcd_watch_range *range,
		   etcd_watch_fn on_events, etcd_watch_error_fn on_error, void *userdata,
		   struct etcd_watch_part **ret);
/* Cancels the range on the stream (etcd's watch goes, the stream stays) and
 * frees p; nothing more is delivered for it.  NULL: nothing.  Returns NULL. */
struct etcd_watch_part *etcd_watch_remove(struct etcd_watch_part *p);
/* The last revision delivered for range i of etcd_watch_start_ranges(). */
int64_t etcd_watch_range_revision(const struct etcd_watch *w, size_t i);
/* How many times streams were reconnected (for metrics and tests). */
uint64_t etcd_client_reconnects(const struct etcd_client *c);
/* How many events its watches delivered (for metrics and tests). */
uint64_t etcd_client_events(const struct etcd_client *c);
/* How many answers etcd gave as a member over a second behind applying what
 * it committed ("waiting for the applied index took too long": etcd 3.4
 * renews no lease then).  Such an answer says that etcd is there and busy,
 * where a request unanswered says nothing. */
uint64_t etcd_client_backlog_answers(const struct etcd_client *c);

/* --- decoding (exposed for unit tests and fuzzing) ------------------------ */

/* Decodes one kv object of the gateway; -EPROTO on wrong types or bad base64. */
int etcd_decode_kv(const cJSON *obj, struct etcd_kv *ret);
/* Decodes a range response body into ret (appending). */
int etcd_decode_range(const cJSON *body, struct etcd_kv_list *ret, bool *ret_more);
/* Parses an int64 that the gateway sends as a string (or, leniently, a number);
 * an absent field is 0. */
int etcd_decode_int64(const cJSON *obj, const char *field, int64_t *ret);

/*
 * Decodes one frame of a watch stream.  Returns 0 and fills the out parameters
 * for a result frame, -ESTALE (with *ret_compact) for a compaction cancel, -EPROTO
 * for anything malformed, or the mapped error for an {"error":…} frame.
 * ret_created tells a creation acknowledgement.
 */
int etcd_decode_watch_frame(const char *text, size_t len, struct etcd_event **ret_events,
			    size_t *ret_n, int64_t *ret_revision, int64_t *ret_compact,
			    bool *ret_created);
void etcd_events_free(struct etcd_event *events, size_t n);

/*
 * One unary request to the gateway at path ("/v3/auth/role/grant") with a JSON
 * body, with the client's failover, token and error mapping: 0 and *ret (the
 * reply object, caller frees), or a negative code as above.  For the few
 * requests this client has no function of its own for (etcd's auth API: see
 * fleet_identity.c).
 */
int etcd_request(struct etcd_client *c, const char *path, const cJSON *body, cJSON **ret);
/* When the last request was a write etcd refused (-EACCES: the user lacks the
 * permission), the key it wrote (a txn's first); else NULL.  Client-owned. */
const char *etcd_denied_key(const struct etcd_client *c);
/* The user the client authenticates as, or NULL (none, or a client certificate
 * whose CN etcd takes as the user). */
const char *etcd_client_user(const struct etcd_client *c);

#endif
