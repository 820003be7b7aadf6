/*
 * fleet.h — fleet operations: what orchestrate means by versions, statuses,
 * services, policies and pauses, as requests to etcd.
 *
 * This layer sits between the etcd client (which knows nothing of the layout)
 * and the command line and daemon (which print, exit and run hooks).  Every
 * change that touches several keys is one txn, so that a reader never sees a host
 * in two states of one type, or a current_version
 * without its previous_version.  Functions neither print nor exit; they return 0
 * (or a documented positive answer) or a negative errno-style code, and
 * fleet_last_error() (the etcd client's etcd_last_error()) says what failed when
 * the code came from etcd.  The command line reaches etcd through this layer
 * only: it never builds a key or calls the client itself.
 *
 * Names (hosts, versions, services, groups) must be validated by the caller with
 * schema_name_valid(); a function given an invalid name returns -EINVAL without
 * sending any request.
 *
 * One header, one file a concern (a heading below names its file when that is
 * not fleet.c, and so does a note before a declaration from another file than
 * its section's): fleet.c, the operations, each one request or one txn;
 * fleet_codec.c, every stored value's JSON; fleet_view.c, the whole-fleet view
 * and its reading thread (the command line's); fleet_batch.c, the batches (the
 * daemon's); fleet_cli.c, what only the command line asks; fleet_identity.c
 * and fleet_wait.c as headed.
 */
#ifndef ORCHESTRATE_FLEET_H
#define ORCHESTRATE_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"

struct fleet {
	struct etcd_client *etcd;
	const char *prefix;		/* "" for none */
	/* When set, fleet_view_read() reads half of its ranges on a second client
	 * made from these options, in a thread, while this one reads the rest: at
	 * 10,000 hosts the view is 60,000 keys and etcd's gateway, not the client,
	 * is the bottleneck, so two streams halve the wait.  NULL: one client. */
	const struct etcd_options *parallel;
};

/* --- versions -------------------------------------------------------------- */

/* Returns 1 and *ret_version when current_version is set, 0 when not.  A value
 * that is not a valid name is -EBADMSG (and a reply the gateway never sends
 * -EPROTO, as always): an implausible answer is never a version. */
int fleet_current_version(struct fleet *f, char **ret_version, int64_t *ret_revision);
/* Sets current_version and previous_version in one txn.  With if_current, only
 * when current_version still holds it (returns 1 when it did not, 0 when set).
 * -EAGAIN when other writers won every one of a few attempts. */
int fleet_trigger_update(struct fleet *f, const char *version, const char *if_current);
/* current ← previous in one txn, guarded against a concurrent change.  Returns
 * 0 and *ret_version on success, 1 when there is nothing to roll back to,
 * -EBADMSG when previous_version holds no valid version, -EAGAIN when the
 * versions changed meanwhile. */
int fleet_rollback(struct fleet *f, char **ret_version);

/* Puts running_version/HOST {"version":V,"time":T} under lease: one put, which
 * replaces the version the host ran before (a host is under one version by
 * construction). */
int fleet_set_running_version(struct fleet *f, const char *host, const char *version,
			      int64_t lease);
/* fleet_codec.c: decodes running_version/HOST's value strictly: 0 and *ret_version (caller
 * frees) when it is a JSON object whose "version" is a valid name, -EBADMSG
 * otherwise (the host then counts as running no version), -ENOMEM. */
int fleet_running_decode(const char *value, size_t len, char **ret_version);
/* Every host with a decodable running_version/HOST at one revision (0:
 * newest), in key order (sorted by host), with its version. */
struct fleet_running {
	char **hosts;
	char **versions;
	size_t n;
	int64_t revision;
};
int fleet_running_read(struct fleet *f, int64_t revision, struct fleet_running *ret);
void fleet_running_release(struct fleet_running *rv);
static inline void fleet_running_releasep(struct fleet_running *rv) { fleet_running_release(rv); }
/* Every version with at least one host, sorted; NULL-terminated. */
int fleet_running_versions(struct fleet *f, char ***ret_versions);
/* Hosts whose running_version/HOST says VERSION, sorted; NULL-terminated. */
int fleet_hosts_at_version(struct fleet *f, const char *version, char ***ret_hosts,
			   int64_t *ret_revision);

/* --- statuses -------------------------------------------------------------- */

/*
 * Moves host to STATE of TYPE: one txn that puts status/TYPE/STATE/HOST with
 * {"time","version","exit_code","detail"} and deletes the host's key under every
 * other state of that type.  detail is cut to SCHEMA_DETAIL_MAX bytes (keeping
 * the tail, where a failed run's error is) and may be NULL; version may be NULL.
 */
int fleet_set_status(struct fleet *f, const char *host, enum status_type type,
		     enum status_state state, const char *version, int exit_code,
		     const char *detail);
/* The host's state of TYPE (STATE_INVALID when it has none), with the value's
 * detail when ret_detail is not NULL. */
int fleet_get_status(struct fleet *f, const char *host, enum status_type type,
		     enum status_state *ret_state, char **ret_detail);

/* --- run history (history/HOST) ------------------------------------------------ */

/*
 * A host's last runs, newest first, in one key per host that only that host
 * writes: rewritten whole by the txn that ends each run (no request of its
 * own), read back once by the daemon at start.  The value:
 *   {"runs":[{"version":V,"start":T,"duration":S,"result":R,"attempt":N,
 *             "error":"first error line"},…]}
 * at most FLEET_HISTORY_MAX runs; "error" at most FLEET_HISTORY_ERROR_MAX
 * bytes of valid UTF-8, one line, absent when the run succeeded.
 */
#define FLEET_HISTORY_MAX 10
#define FLEET_HISTORY_ERROR_MAX 200

enum run_result {
	RUN_SUCCESS,		/* "success": config and validation succeeded */
	RUN_FAILED,		/* "failed": the config (or upgrade) hook failed */
	RUN_VALIDATION,		/* "validation": the validate hook failed */
	RUN_DEADLINE,		/* "deadline": killed at healthy_deadline */
	RUN_INTERRUPTED,	/* "interrupted": the daemon died during it */
	_RUN_RESULT_MAX,
};
const char *run_result_name(enum run_result r);
int run_result_from_name(const char *name);	/* -1 when unknown */

struct run_entry {
	char *version;			/* a valid name */
	int64_t start;			/* unix time the run started; 0: not known */
	int64_t duration;		/* seconds; -1: not known */
	enum run_result result;
	long attempt;			/* 1 for a first try; 0: not known */
	char *error;			/* first error line; NULL: none */
};
struct run_history {
	struct run_entry runs[FLEET_HISTORY_MAX];	/* newest first */
	size_t n;
};
/* fleet_codec.c (pure): */
void run_history_release(struct run_history *h);
static inline void run_history_releasep(struct run_history *h) { run_history_release(h); }
/* Puts a copy of e in front, dropping the oldest past FLEET_HISTORY_MAX;
 * e->error is cut to its bound here.  -EINVAL for an invalid version. */
int run_history_prepend(struct run_history *h, const struct run_entry *e);
/* The stored value; caller frees. */
int run_history_encode(const struct run_history *h, char **ret);
/* Decodes a stored value: the runs that are plausible (a valid version and a
 * known result), at most FLEET_HISTORY_MAX; the rest is skipped, never
 * trusted (a time that is not a whole number is 0, an error line is cut to
 * its bound, valid UTF-8, one line).  -EBADMSG when the value is not a JSON
 * object with a "runs" array. */
int run_history_decode(const char *value, size_t len, struct run_history *ret);
/* The first error line of a hook's detail (the first line that says
 * "error" or "fail", else the last non-empty line), at most
 * FLEET_HISTORY_ERROR_MAX bytes of valid UTF-8 without control characters;
 * NULL (0) when detail holds nothing. */
int run_error_line(const char *detail, char **ret);

/* fleet_cli.c: history/HOST: 1 and *ret when the key exists (an undecodable
 * value gives no runs), 0 when it does not.  One read. */
int fleet_history_get(struct fleet *f, const char *host, struct run_history *ret);
/* fleet.c: the same read without blocking (the daemon's, at its start): fn
 * runs from the loop with 1 and the runs (it may take them), 0 when the key
 * does not exist, -EACCES when etcd refuses it to this host, or another
 * error; *ret is the call in flight, for fleet_call_cancel(), until then. */
typedef void (*fleet_history_fn)(int result, struct run_history *h, void *userdata);
int fleet_history_read_start(struct fleet *f, const char *host, long patience_ms,
			     fleet_history_fn fn, void *userdata, struct etcd_call **ret);
/* Whether the last request failed because etcd refused history/HOST (a
 * node role made by hand before the history existed): the daemon then keeps
 * no history rather than lose its end txns. */
bool fleet_denied_history(const struct fleet *f);
/* Adds history/HOST := h to the batch (the end of a run). */
struct fleet_batch;
int fleet_batch_history(struct fleet_batch *b, const char *host, const struct run_history *h);

/* fleet_cli.c: every host's runs of version (history --version V), one range
 * over history/: hosts sorted, each host's runs newest first.  An entry's
 * version points into nothing of its own: it is version. */
struct host_run {
	char *host;
	struct run_entry run;
};
int fleet_history_version(struct fleet *f, const char *version, struct host_run **ret,
			  size_t *ret_n);
void host_runs_free(struct host_run *r, size_t n);

/* --- registration ---------------------------------------------------------- */

int fleet_provision(struct fleet *f, const char *host);
/* Deletes every key of host in one txn; returns the number of keys deleted. */
int fleet_decommission(struct fleet *f, const char *host);

/* --- services -------------------------------------------------------------- */

/* Puts available_services/SERVICE/HOST {"addresses":{…},"healthy":…} under
 * lease (0: none).  An entry says where a service is and whether it is
 * healthy; the version its host runs is running_version/HOST's. */
int fleet_publish_service(struct fleet *f, const char *service, const char *host,
			  const struct catalog_entry *addresses, size_t n_addresses,
			  bool healthy, int64_t lease);
int fleet_unpublish_service(struct fleet *f, const char *service, const char *host);
/* Reads the whole catalog at one revision (0: newest). */
int fleet_read_catalog(struct fleet *f, int64_t revision, struct catalog *ret);

/* --- pause ----------------------------------------------------------------- */

enum pause_scope { PAUSE_GLOBAL, PAUSE_GROUP, PAUSE_HOST };

int fleet_pause(struct fleet *f, enum pause_scope scope, const char *name, const char *reason);
/* Returns the number of keys removed (0 when it was not paused). */
int fleet_resume(struct fleet *f, enum pause_scope scope, const char *name);

/* Every pause set, global first, then groups and hosts by name (pause --list);
 * name is NULL for the global one, reason NULL when none was given.  Free with
 * pause_entries_free(). */
struct pause_entry {
	enum pause_scope scope;
	char *name;
	char *reason;
	int64_t time;		/* 0 when not recorded */
};
/* fleet_cli.c: */
int fleet_pauses_list(struct fleet *f, struct pause_entry **ret, size_t *ret_n);
void pause_entries_free(struct pause_entry *p, size_t n);

/* How many hosts registered in group (keys under groups/GROUP/; one count-only
 * range), so that `pause --group` can warn about a group nobody is in. */
int fleet_group_size(struct fleet *f, const char *group, size_t *ret);
/* fleet_cli.c: 1 when host is alive or provisioned (registered at some time),
 * 0 when etcd has never heard of it. */
int fleet_host_known(struct fleet *f, const char *host);

/* fleet_cli.c: one host in full (`status HOST`): each state it holds, with its time, exit
 * code, version and whole detail, and its alive key with the lease it is under. */
struct host_state {
	enum status_type type;
	enum status_state state;
	int64_t time;
	int exit_code;
	char *version;			/* NULL when not recorded */
	char *detail;			/* NULL when none */
	long attempts;			/* a failure's attempts so far; 0: not recorded */
	int64_t first_failure;		/* unix time of the first; 0: not recorded */
	char *wait;			/* pending: why ("slot", ...); NULL: not said */
};
struct host_record {
	struct host_state *states;	/* by type, then state */
	size_t n_states;
	bool alive;
	int64_t alive_time;
	long alive_pid;
	char *alive_version;
	int64_t lease;			/* alive/HOST's lease; 0 when none */
	struct run_history history;	/* its last runs (history/HOST), newest first */
};
int fleet_host_record(struct fleet *f, const char *host, struct host_record *ret);
void host_record_release(struct host_record *h);
static inline void host_record_releasep(struct host_record *h) { host_record_release(h); }

/* --- rollout policy --------------------------------------------------------- */

/*
 * rollout/policy, decoded: {"max_parallel":N} or {"max_percent":P}, optional
 * "groups":["dc1","dc2",…].  With groups, a host of a later group starts a
 * config run only when every alive host of the earlier groups runs the desired
 * version, and max_parallel/max_percent count within the host's own group.
 * Neither max set means no limit (only the groups, if any, stage the rollout).
 */
struct rollout_policy {
	long max_parallel;		/* 0: not set */
	double max_percent;		/* 0: not set; else in (0, 100] */
	char **groups;			/* NULL-terminated; NULL when none */
	size_t n_groups;

	/* Safety: a rollout that stops itself (orchestrate(1), ROLLOUT SAFETY). */
	bool has_max_failures;		/* halt when more than max_failures hosts fail */
	long max_failures;
	double max_fail_percent;	/* 0: not set; else halt above it, of the alive hosts */
	long healthy_deadline;		/* s from a run's start to validated; 0: none */
	long progress_deadline;		/* s without a slot freed while hosts queue; 0: none */
	long min_healthy_time;		/* s a validated host keeps its slot, then validates again */
	bool auto_revert;		/* a halt sets current_version back to previous_version */
	long canary;			/* 0: none; else N hosts run, then wait for promote */
	bool auto_promote;		/* canaries done and no failure: promote */
};

/* Whether p sets a failure budget. */
static inline bool rollout_policy_has_budget(const struct rollout_policy *p)
{
	return p->has_max_failures || p->max_fail_percent > 0;
}

/* fleet_codec.c: */
void rollout_policy_release(struct rollout_policy *p);
static inline void rollout_policy_releasep(struct rollout_policy *p) { rollout_policy_release(p); }
/* Why p is not a valid policy ("max_parallel and max_percent are exclusive",
 * "duplicate group 'dc1'", …), or NULL when it is.  Static or p-owned storage. */
const char *rollout_policy_problem(const struct rollout_policy *p);
/* Decodes a stored value; -EPROTO when it is not a valid policy. */
int rollout_policy_decode(const char *value, size_t len, struct rollout_policy *ret);
/* Encodes p (which must be valid) as the stored JSON; caller frees. */
int rollout_policy_encode(const struct rollout_policy *p, char **ret);
/* fleet.c: */
/* Returns 1 and *ret when a policy is set, 0 when none, -EPROTO when the stored
 * value is not a valid policy (*ret_raw, when not NULL, then holds it). */
int fleet_get_policy(struct fleet *f, struct rollout_policy *ret, char **ret_raw);
/* -EINVAL (nothing sent) when p is not valid. */
int fleet_set_policy(struct fleet *f, const struct rollout_policy *p);
/* Returns 1 when a policy was removed, 0 when there was none. */
int fleet_clear_policy(struct fleet *f);

/* Which pause of list (a read of pause/) applies to host in group (may be NULL):
 * global first, then the group's, then the host's.  1 and *ret_reason ("global:
 * kernel freeze") when one does, 0 when none.  The daemon, its model and the
 * fleet view all use it, so all say the same. */
int fleet_pause_find(const struct etcd_kv_list *list, const char *P, const char *host,
		     const char *group, char **ret_reason);

/* --- batches: several changes of one host in one txn (fleet_batch.c) -------- */

/*
 * Each fleet_batch_*() checks its arguments (-EINVAL, nothing added) and adds
 * its puts and deletes; fleet_batch_commit() sends them as one txn (no request
 * at all when the batch is empty).  A status move puts the new state and
 * deletes the host's others, as fleet_set_status() does.
 */
struct fleet_batch;
int fleet_batch_new(struct fleet *f, struct fleet_batch **ret);
struct fleet_batch *fleet_batch_free(struct fleet_batch *b);
static inline void fleet_batch_freep(struct fleet_batch **b) { if (*b) fleet_batch_free(*b); }
int fleet_batch_status(struct fleet_batch *b, const char *host, enum status_type type,
		       enum status_state state, const char *version, int exit_code,
		       const char *detail);
/* Puts running_version/HOST {"version":V,"time":T}: one put. */
/* What a status value may say beyond its state (0 / NULL: nothing):
 * a failure's attempts and the time of the first, or why a pending host
 * waits ("dependency", "slot", "group", "pause", "canary", "halt", "splay"). */
struct status_extra {
	long attempts;
	int64_t first_failure;
	const char *wait;
};
int fleet_batch_status_extra(struct fleet_batch *b, const char *host, enum status_type type,
			     enum status_state state, const char *version, int exit_code,
			     const char *detail, const struct status_extra *extra);
int fleet_batch_running_version(struct fleet_batch *b, const char *host, const char *version,
				int64_t lease);
int fleet_batch_alive(struct fleet_batch *b, const char *host, const char *version, long pid,
		      int64_t lease);
/* value from fleet_service_value(). */
int fleet_batch_service(struct fleet_batch *b, const char *service, const char *host,
			const char *value, int64_t lease);
int fleet_batch_unpublish(struct fleet_batch *b, const char *service, const char *host);
/* The host's place in the slot queue (fleet_queue.h); holds: its run
 * started, which the next in the queue waits for, and place, when known (not
 * NULL), where it stood then: the host behind takes its own count from it. */
struct queue_place;
int fleet_batch_holder(struct fleet_batch *b, const char *host, const char *version,
		       const char *group, bool holds, const struct queue_place *place,
		       int64_t lease);
int fleet_batch_release_holder(struct fleet_batch *b, const char *host);
/* The host queued last: written in the txn that creates the host's key in
 * the slot queue, after it, so that the host queueing next finds the key
 * just ahead of its own without reading the queue (fleet_queue.h). */
int fleet_batch_queue_tail(struct fleet_batch *b, const char *host);
/*
 * Guards, for the fleet layer's own use (fleet_model_guard_start() builds the
 * one the node needs; nothing above the fleet layer names a key): the batch is
 * written only if KEY's mod revision is exactly revision, or only if no key of
 * its range (KEY alone, or every key starting with it) was written after
 * revision.  A deletion leaves no key behind, so it never fails the second.
 */
int fleet_batch_if_written_at(struct fleet_batch *b, const char *key, int64_t revision);
int fleet_batch_if_unchanged_since(struct fleet_batch *b, const char *key, bool prefix,
				   int64_t revision);
/* Sends the batch as one txn (nothing at all when it is empty): 0 when it was
 * written, -ECANCELED when a guard did not hold (nothing was written), or the
 * error.  *ret_revision (may be NULL) is the revision etcd answered at. */
int fleet_batch_commit(struct fleet_batch *b, int64_t *ret_revision);
/*
 * The same without blocking (the fleet's client attached to an event loop):
 * fn gets 0 and the revision, -ECANCELED, or the error, from the loop; the
 * batch stays the caller's and may be sent again.  patience_ms bounds the
 * whole call (etcd_txn_commit_start).  Returns 1 when the batch is empty
 * (nothing sent, fn never runs); *ret is the call in flight, for
 * fleet_call_cancel() (fleet_lease.h), until fn runs.
 *
 * The batch is sent settled (etcd_txn_settle, at the client's revision when
 * first sent): a send whose outcome is unknown (a timeout, etcd's "request
 * timed out", a reply lost with its connection) may be sent again as it is,
 * and a first send that was applied is then reported as written, nothing
 * written twice.  libcurl resends by itself when a reused connection closes
 * before any reply, so even one call may reach etcd twice.
 */
struct etcd_call;
/* Nothing to send: no change and no guard. */
bool fleet_batch_empty(const struct fleet_batch *b);
typedef void (*fleet_commit_fn)(int error, int64_t revision, void *userdata);
int fleet_batch_commit_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			     void *userdata, struct etcd_call **ret);
/*
 * Whether a batch sent before (fleet_batch_commit_start) was applied, asked
 * without writing (etcd_txn_applied_start: a read that waits for etcd to
 * apply what it has committed): fn gets 0 and the revision it was written at,
 * 0 and revision 0 when it was not applied (send it again), or an error.
 * 1 when the batch cannot be asked about (never sent, or it puts nothing):
 * sending it again is then the only way, and harmless.
 */
int fleet_batch_applied_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			      void *userdata, struct etcd_call **ret);
/*
 * The registration, without blocking: puts alive/HOST {"time","version","pid"}
 * under lease, status/provisioned/success/HOST (one txn with the provisioned
 * move) and groups/GROUP/HOST when group is not NULL.  fn gets 0 and the
 * revision, or the error.  Its txn writes the same whichever branch holds,
 * so a resend is harmless.
 */
int fleet_register_start(struct fleet *f, const char *host, const char *group,
			 const char *version, long pid, int64_t lease, long patience_ms,
			 fleet_commit_fn fn, void *userdata, struct etcd_call **ret);

/* fleet_codec.c: the JSON value of available_services/SERVICE/HOST; -EINVAL for a bad name or
 * address.  A node compares it with what it published to write only changes. */
int fleet_service_value(const char *service, const char *host,
			const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
			char **ret);

/* --- the fleet at a glance (fleet_view.c) ------------------------------------ */

struct host_view {
	char *host;
	char *running_version;		/* NULL when under none */
	enum status_state puppet;	/* STATE_INVALID when none */
	enum status_state validation;
	enum status_state provisioned;
	bool alive;
	char *alive_version;		/* what alive/HOST says it runs */
	char *group;
	int64_t changed;		/* unix time of the newest status change */
	int64_t state_time[_STATUS_TYPE_MAX];	/* of each type's state; 0: none or not recorded */
	char *detail;			/* detail of a failed or pending state */
	int puppet_exit_code;
	char *paused;			/* "group dc1: power work" when a pause applies */
	/* From the state the detail comes from (status_extra): a failure's
	 * attempts and the time of the first (0: not recorded), and why a
	 * pending host waits ("slot", "group", ...; NULL: not said). */
	long attempts;
	int64_t first_failure;
	char *wait;
};

struct fleet_view {
	struct host_view *hosts;	/* sorted by host */
	size_t n;
	char *current_version;		/* NULL when unset */
	char *previous_version;
	int64_t revision;
};

/* Reads everything about every host at one revision. */
int fleet_view_read(struct fleet *f, struct fleet_view *ret);
void fleet_view_release(struct fleet_view *v);
static inline void fleet_view_releasep(struct fleet_view *v) { fleet_view_release(v); }

/* fleet_codec.c: unix time now (seconds); the value stored in "time" fields. */
int64_t fleet_now(void);

/* --- the connection, for the command line (fleet_cli.c) ---------------------- */

/*
 * Makes f a fleet on a new etcd client of opts, with prefix (NULL or "" for
 * none; kept by pointer): -EINVAL when the options are not valid (an endpoint
 * the client refuses, see etcd_endpoint_parse()), -ENOMEM.  The daemon makes
 * its own client and fills struct fleet itself.
 */
int fleet_open(struct fleet *f, const struct etcd_options *opts, const char *prefix);
/* Frees the client fleet_open() made; f is empty afterwards.  NULL is fine. */
void fleet_close(struct fleet *f);
/* What the last request to etcd failed on, one line ("etcd
 * 'http://10.0.0.1:2379': connection refused"), to print after an error
 * that came from etcd; NULL when f has no client. */
const char *fleet_last_error(const struct fleet *f);
/* When the last request was a write etcd refused (the user lacks the
 * grant): "etcd: permission denied writing CLASS as user 'U'" (or "as the
 * client certificate's user"), CLASS the kind of key ("running_version",
 * "status/puppet"...); else NULL.  The command line and the daemon say it
 * alike.  Storage of the calling thread, overwritten by the next call. */
const char *fleet_denied_error(const struct fleet *f);

/* Asks the cluster for its status: the etcd version of the member that
 * answered, and that member's endpoint (both for the caller to free). */
int fleet_ping(struct fleet *f, char **ret_server_version, char **ret_endpoint);

/* --- identities (fleet_identity.c) ------------------------------------------------ */

/*
 * One etcd user and role per host: user HOST (etcd takes a client
 * certificate's CN as the user), role orchestrate-node-HOST.  A grant is
 * etcd's: [key, range_end) (range_end NULL: key alone) with a permission.
 */
enum fleet_perm { FLEET_PERM_READ, FLEET_PERM_WRITE, FLEET_PERM_READWRITE };
struct fleet_grant {
	char *key;
	char *range_end;		/* NULL: the exact key */
	enum fleet_perm perm;
};
const char *fleet_perm_name(enum fleet_perm p);	/* "READ", "WRITE", "READWRITE" */
void fleet_grants_free(struct fleet_grant *g, size_t n);
/* "orchestrate-node-HOST"; NULL for an invalid name or out of memory. */
char *fleet_identity_role(const char *host);
/*
 * What host needs, under prefix P (pure): READWRITE on each key it writes —
 * status/TYPE/STATE/HOST (the 9 allowed), alive/HOST, running_version/HOST,
 * history/HOST,
 * rollout/holders/HOST, rollout/failed/HOST, rollout/canary/HOST,
 * rollout/halted, rollout/promoted, groups/GROUP/HOST (when group is not
 * NULL) and available_services/S/HOST for each of services (NULL-terminated,
 * may be NULL) — and READ on current_version, previous_version and the prefixes
 * pause/, rollout/, available_services/, alive/, running_version/, groups/.
 * -EINVAL for an invalid name.
 */
int fleet_identity_grants(const char *P, const char *host, const char *group,
			  char *const *services, struct fleet_grant **ret, size_t *ret_n);
/*
 * Makes the user host (with password, or for certificate authentication with
 * none when password is NULL) and its role hold exactly grants: revokes the
 * role's other permissions, grants the missing ones, creates the user and role
 * and binds them when needed.  *ret_changes: how many changes it made (0 the
 * second time).  Needs etcd's root role.
 */
int fleet_identity_apply(struct fleet *f, const char *host, const char *password,
			 const struct fleet_grant *grants, size_t n, size_t *ret_changes);
/* Deletes the user host and its role; returns how many of the two existed. */
int fleet_identity_remove(struct fleet *f, const char *host);

/* --- failures (fleet_view.c) --------------------------------------------------- */

/* What get_failures reports, from one view: the hosts failed in puppet, those
 * failed in validation, and the unaccounted ones (provisioned, not alive),
 * each a sorted NULL-terminated vector (never NULL) with its length. */
struct fleet_failures {
	char **puppet, **validation, **unaccounted;
	size_t n_puppet, n_validation, n_unaccounted;
};

int fleet_view_failures(const struct fleet_view *v, struct fleet_failures *ret);
void fleet_failures_release(struct fleet_failures *fl);
static inline void fleet_failures_releasep(struct fleet_failures *fl) { fleet_failures_release(fl); }

/* --- waiting (fleet_wait.c) ------------------------------------------------------ */

/*
 * The waiting commands (verify_hosts --wait, check_single_version --wait,
 * wait_for_service) read the keys they need at one revision, and when the
 * answer is not yes yet, follow an etcd watch from the next revision until it
 * is, or until the deadline: never a polling loop.  A compacted revision reads
 * again.  deadline_ms is a CLOCK_MONOTONIC millisecond (clock_deadline_ms()):
 * CLOCK_DEADLINE_NOW looks once and does not wait, CLOCK_DEADLINE_NEVER waits
 * for as long as it takes.
 *
 * Each returns 1 when the answer is yes, 0 when the deadline passed first (its
 * out parameters then describe the last state seen), or a negative code.
 * progress, when not NULL, is called with how far the answer is after the
 * first read and after each change of it.
 */
struct fleet_progress {
	size_t have;		/* hosts at the version (that publish the service) */
	size_t want;		/* of how many */
	/* With FLEET_WAIT_STATES (the waits for a version), of the hosts not at
	 * the version yet (fleet_wait_host_state()): */
	bool states;		/* failed and waiting were counted (etcd let us read them) */
	size_t failed;		/* failed at the version: config or validation */
	size_t waiting;		/* pending for the version: waiting for a slot, a group... */
	/* The rollout of the version is halted (fleet_wait_halt_applies()): why
	 * (as stored, "" when no reason was recorded; NULL: not halted), and
	 * what an automatic revert went back to (NULL: none). */
	const char *halted;
	const char *reverted_to;
	/* The last read or watch failed and the wait tries again (with
	 * backoff, until its deadline): etcd's error; NULL while it answers. */
	const char *retrying;
};
typedef void (*fleet_progress_fn)(const struct fleet_progress *p, void *userdata);

/* flags of the waits for a version */
enum {
	/* Count failed and waiting hosts and the halt for progress too: reads
	 * and watches status/puppet/failed/, status/validation/failed/,
	 * status/puppet/pending/, rollout/halted and current_version besides
	 * running_version/, on the same stream.  For a person watching only: a
	 * range etcd does not let the user read is left out, not an error. */
	FLEET_WAIT_STATES = 1 << 0,
};

/* Until every host of hosts (NULL-terminated, valid names; repeats count once)
 * runs version.  *ret_missing: those that do not, in the order given (never
 * NULL, empty on 1). */
int fleet_wait_hosts_at_version(struct fleet *f, const char *version, char *const *hosts,
				uint64_t deadline_ms, unsigned flags, fleet_progress_fn progress,
				void *userdata, char ***ret_missing);

/* How many hosts run a version (check_single_version's answer). */
struct fleet_version_count {
	char *version;
	size_t hosts;
};
void fleet_version_counts_free(struct fleet_version_count *counts, size_t n);

/* Until version runs somewhere and no other version runs anywhere.  *ret_counts:
 * the hosts of every running version, sorted by version (caller frees with
 * fleet_version_counts_free()). */
int fleet_wait_single_version(struct fleet *f, const char *version, uint64_t deadline_ms,
			      unsigned flags, fleet_progress_fn progress, void *userdata,
			      struct fleet_version_count **ret_counts, size_t *ret_n);

/* Until count hosts publish service (counting only healthy ones with healthy),
 * as hiera_render() would show them: a host counts when its value is one the
 * catalog decodes.  *ret_seen: how many hosts counted last. */
int fleet_wait_service(struct fleet *f, const char *service, size_t count, bool healthy,
		       uint64_t deadline_ms, fleet_progress_fn progress, void *userdata,
		       size_t *ret_seen);

/*
 * What the progress of a wait for version counts a host as, from the version
 * it runs and the versions of its puppet/failed, validation/failed and
 * puppet/pending statuses (each NULL when it has none): at the version; else
 * failed when a failed status is about the version (a retrying host keeps
 * it); else waiting when its pending status is; else other (behind, or
 * running now).  Pure, for the unit tests.
 */
enum fleet_host_state {
	FLEET_HOST_AT,
	FLEET_HOST_FAILED,
	FLEET_HOST_WAITING,
	FLEET_HOST_OTHER,
};
enum fleet_host_state fleet_wait_host_state(const char *version, const char *running,
					    const char *puppet_failed,
					    const char *validation_failed, const char *pending);

/*
 * Whether halt (a decoded rollout/halted) stops the rollout of version, given
 * current_version (NULL when unset) and its mod revision: the record is about
 * version, and, when current_version is version again, belongs to its trigger
 * (a new trigger of the version leaves the old record behind, ignored).  A
 * halt whose revert put another version in place still applies.
 */
struct rollout_record;
bool fleet_wait_halt_applies(const struct rollout_record *halt, const char *version,
			     const char *current, int64_t current_mod);

/* Blocks until anything below the prefix changes after revision, or the
 * deadline (clock_deadline_ms()) passes (status --watch): 1 on a change, 0
 * when the deadline passed first (status --watch redraws then, so that AGE
 * ticks), or a negative code.  A compacted revision counts as a change: the
 * caller reads everything again either way. */
int fleet_wait_change_until(struct fleet *f, int64_t revision, uint64_t deadline_ms);

#endif
