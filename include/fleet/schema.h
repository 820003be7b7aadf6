/*
 * schema.h — orchestrate's key layout in etcd (orchestrate(1) "Key layout"), name validation and
 * status mapping.  Pure functions: no I/O.
 *
 * Every key is built here and nowhere else, from a prefix and validated names,
 * so that a hostile name can never address another key: names are checked
 * (schema_name_valid) before a key is built, and key builders refuse an invalid
 * name rather than build a key from it.
 *
 *   P/current_version                    P/previous_version
 *   P/running_version/HOST               P/alive/HOST
 *   P/status/TYPE/STATE/HOST             P/available_services/SERVICE/HOST
 *   P/rollout/policy                     P/rollout/holders/HOST
 *   P/groups/GROUP/HOST                  P/pause/global
 *   P/pause/groups/GROUP                 P/pause/hosts/HOST
 *   P/history/HOST                       P/rollout_tail
 *
 * The prefix P is used as given ("" by default) with one "/" between it and the
 * layout; a trailing "/" on P is ignored, so "/fleet" and "/fleet/" are the same.
 */
#ifndef ORCHESTRATE_SCHEMA_H
#define ORCHESTRATE_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>

#define SCHEMA_NAME_MAX 253
#define SCHEMA_DETAIL_MAX 4096

/* 1–253 bytes of [A-Za-z0-9._:@+-] starting with a letter or a digit (so never
 * "-x", ".", ".." or ".hidden"). */
bool schema_name_valid(const char *name);
/* A one-line reason why name is invalid ("empty", "longer than 253 bytes",
 * "contains '/'", "is '..'") or NULL when it is valid.  Static storage. */
const char *schema_name_problem(const char *name);
/* The prefix may be empty or any path of valid names separated by "/". */
bool schema_prefix_valid(const char *prefix);

enum status_type { STATUS_PUPPET, STATUS_VALIDATION, STATUS_PROVISIONED, _STATUS_TYPE_MAX };
enum status_state {
	STATE_RUNNING,
	STATE_SUCCESS,
	STATE_FAILED,
	STATE_PENDING,
	_STATE_MAX,
	STATE_INVALID = -1,
};

const char *status_type_name(enum status_type t);
int status_type_from_name(const char *name);		/* -1 when unknown */
const char *status_state_name(enum status_state s);
int status_state_from_name(const char *name);		/* STATE_INVALID when unknown */
/* Whether STATE is one of TYPE's states (puppet: all four; validation: running,
 * success, failed; provisioned: success, failed). */
bool status_state_allowed(enum status_type t, enum status_state s);
/*
 * Maps update_own_status's RESULT (an exit code or a state name) to a state:
 * puppet 0, 2 → success; 1, 4, 6 → failed; -1 → pending; other codes → failed.
 * validation 0 → success, anything else → failed.  A state name must be allowed
 * for the type.  Returns STATE_INVALID for anything else.
 */
enum status_state status_from_result(enum status_type t, const char *result);

/*
 * Key builders.  Each returns a newly allocated key, or NULL when a name is
 * invalid or memory runs out.  The *_dir variants return the directory with a
 * trailing "/", for prefix ranges and watches.
 */
char *key_root(const char *prefix);					/* P/: every key */
char *key_current_version(const char *prefix);
char *key_previous_version(const char *prefix);
char *key_running_version_dir(const char *prefix);			/* P/running_version/ */
/* One key per host, {"version":V,"time":T}: each key a node writes sits at a
 * path with the host as its last component, so that etcd can grant it to
 * that host alone (node_identity). */
char *key_running_version(const char *prefix, const char *host);
char *key_status_dir(const char *prefix);				/* P/status/ */
char *key_status(const char *prefix, enum status_type t, enum status_state s, const char *host);
/* P/status/TYPE/STATE/: the hosts in one state (the waits' failed and pending counts) */
char *key_status_state_dir(const char *prefix, enum status_type t, enum status_state s);
char *key_services_dir(const char *prefix);				/* P/available_services/ */
char *key_service_dir(const char *prefix, const char *service);
char *key_service(const char *prefix, const char *service, const char *host);
char *key_alive_dir(const char *prefix);
char *key_alive(const char *prefix, const char *host);
char *key_rollout_policy(const char *prefix);
char *key_rollout_dir(const char *prefix);				/* P/rollout/ */
char *key_rollout_holders_dir(const char *prefix);
char *key_rollout_holder(const char *prefix, const char *host);
/* P/rollout_tail: the host that queued last (fleet_queue.h) */
char *key_rollout_tail(const char *prefix);
char *key_rollout_failed_dir(const char *prefix);			/* P/rollout/failed/ */
char *key_rollout_failed(const char *prefix, const char *host);
char *key_rollout_canary_dir(const char *prefix);			/* P/rollout/canary/ */
char *key_rollout_canary(const char *prefix, const char *host);
char *key_rollout_halted(const char *prefix);
char *key_rollout_promoted(const char *prefix);
char *key_rollout_stages_dir(const char *prefix);			/* P/rollout/stages/ */
char *key_rollout_stage(const char *prefix, const char *group);
char *key_groups_dir(const char *prefix);
char *key_group_members_dir(const char *prefix, const char *group);	/* P/groups/GROUP/ */
char *key_group_host(const char *prefix, const char *group, const char *host);
char *key_pause_dir(const char *prefix);				/* P/pause/ */
char *key_pause_global(const char *prefix);
char *key_pause_group(const char *prefix, const char *group);
char *key_pause_host(const char *prefix, const char *host);
/* P/history/HOST: the host's last runs, one key written by that host alone
 * (in its end-of-run txn); P/history/ for `history --version`. */
char *key_history_dir(const char *prefix);
char *key_history(const char *prefix, const char *host);

/* What kind of key key is below prefix, for a message: "running_version",
 * "status/puppet", "available_services", "alive", "rollout/holders", "groups",
 * "pause", "current_version"…, or "a key outside the layout".  Static storage
 * (overwritten by the next call). */
const char *key_class(const char *prefix, const char *key);

/*
 * Splits a key read from etcd below dir (as returned by a *_dir builder) into
 * its remaining path components: "glance/web1" below available_services/ gives
 * {"glance","web1"}.  Returns the number of components (at most max) written to
 * parts as pointers into the buffer copy *ret_copy (free it), or -EINVAL when the
 * key is not below dir, has a different number of components than max, or any
 * component is not a valid name.  Keys that fail are skipped by callers: a
 * hostile key written by hand never becomes a host or service name.
 */
int key_split(const char *key, size_t key_len, const char *dir, char **parts, int max,
	      char **ret_copy);

#endif
