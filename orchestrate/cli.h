/*
 * cli.h — what the command table in cli.c shares with the cmd_*.c files.
 *
 * The dispatcher (cli.c) parses every option, checks the arity, handles help
 * and resolves the settings; a command function receives only its positional
 * arguments and a struct cli holding everything else, validates its names,
 * asks for the fleet (the etcd client is created lazily, after validation, so
 * that an invalid name never reaches a request), prints, and returns the exit
 * status.  Commands print their own errors through cli_error()/cli_etcd_error().
 */
#ifndef ORCHESTRATE_CLI_H
#define ORCHESTRATE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "etcd.h"
#include "fleet.h"
#include "hiera.h"
#include "options.h"

/* Every per-command option, parsed by the dispatcher into struct cli_args. */
struct cli_args {
	const char *if_current;		/* trigger_update --if-current OLD */
	double wait;			/* --wait/--timeout SECONDS; -1: not given */
	const char *detail;		/* update_own_status --detail */
	long count;			/* wait_for_service --count, default 1 */
	bool healthy;			/* wait_for_service --healthy */
	struct catalog_entry *addresses;	/* publish_service --address (iface, address) */
	size_t n_addresses;
	long ttl;			/* publish_service --ttl; -1: none */
	const char *output;		/* cache_services --output */
	bool hosts;			/* get_failures --hosts */
	const char *group;		/* pause/resume --group */
	const char *host;		/* pause/resume --host */
	const char *reason;		/* pause --reason */
	long interval;			/* update_own_info --interval, -1: default */
	const char *version;		/* update_own_info --version */
	bool watch;			/* status --watch */
	long max_parallel;		/* rollout_policy set --max-parallel; -1: not given */
	long max_percent;		/* rollout_policy set --max-percent; -1: not given */
	const char *groups;		/* rollout_policy set --groups G1,G2 */
};

struct command;

struct cli {
	const struct command *cmd;
	const char *name;		/* the command's name, for messages */
	struct options_resolved *opt;
	struct cli_args args;
	struct etcd_client *etcd;	/* NULL until cli_fleet() */
	struct fleet fleet;
};

/* The etcd client and fleet, created on first use.  Returns 0 or an exit
 * status (having printed why). */
int cli_fleet(struct cli *cli, struct fleet **ret);

/* "orchestrate: MESSAGE" on stderr; returns status for `return cli_error(…)`. */
int cli_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A warning, "orchestrate: MESSAGE", control bytes escaped (one line). */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints etcd's last error (prefixed by what, when not NULL) and returns the
 * exit status for r (69 unreachable, 77 refused, …). */
int cli_etcd_error(struct cli *cli, int r, const char *what);
/* Checks a HOST/VERSION/SERVICE/GROUP argument: 0 when valid, else prints
 * "invalid KIND 'NAME': PROBLEM" and returns 64. */
int cli_check_name(const char *kind, const char *name);

/* Prints a JSON document (one line) on stdout and frees it; 0 or 1 on ENOMEM. */
int cli_print_json(cJSON *doc);
/* cJSON_AddStringToObject, or null when s is NULL. */
cJSON *cli_json_string_or_null(cJSON *obj, const char *name, const char *s);
/* An array of strings from a NULL-terminated list. */
cJSON *cli_json_strv(char *const *v);

/* Reads and trims the local version file: 1 and *ret when it names a valid
 * version, 0 when absent or empty (or invalid, with a warning), or an exit
 * status > 1 after printing why it cannot be read. */
int cli_local_version(struct cli *cli, char **ret);

/* CLOCK_MONOTONIC in milliseconds, the clock of etcd_watch's deadlines. */
uint64_t cli_now_ms(void);
/* The deadline for a wait of secs seconds (< 0: none, returns 0). */
uint64_t cli_deadline(double secs);

/*
 * Waiting on a directory of keys: the set of keys below dir (suffixes, each
 * `components` valid names joined by '/'), with their values when wanted.  It
 * is read at one revision, then kept up to date from an etcd watch starting at
 * the next revision, until done() says yes or the deadline passes; a compacted
 * revision reads again.  Never a polling loop.
 */
struct keyset {
	char **keys;			/* suffixes below dir, e.g. "web1" or "v2/web1" */
	char **values;
	size_t n;
	size_t cap;
	size_t *index;			/* hash slots: position + 1, 0 empty */
	size_t index_cap;		/* a power of two */
};
typedef bool (*keyset_done_fn)(const struct keyset *s, void *userdata);
void keyset_release(struct keyset *s);
/* Index of key in s, or -1. */
long keyset_find(const struct keyset *s, const char *key);
/* Adds key (value may be NULL) or replaces its value. */
int keyset_put(struct keyset *s, const char *key, const char *value, size_t value_len);
/*
 * Returns 1 when done() held, 0 when the deadline passed first (or deadline is
 * 0 and it did not hold at once: "check once"), or an exit status > 1 after
 * printing an etcd error.  *s holds the last state seen either way.
 * wait_forever makes a zero deadline mean "no deadline" instead.
 */
int cli_wait_keyset(struct cli *cli, const char *dir, int components, bool values,
		    uint64_t deadline_ms, bool wait_forever, keyset_done_fn done,
		    void *userdata, struct keyset *s);

/* Reads one name a line from f (blank lines and '#' comments skipped, spaces
 * trimmed) and appends them to a NULL-terminated list.  -errno on failure. */
int cli_read_lines(FILE *f, char ***list, size_t *n);
int cli_strv_push(char ***list, size_t *n, const char *s);
bool cli_strv_contains(char *const *v, const char *s);

/* --- the commands -------------------------------------------------------------- */

/* cmd_versions.c */
int cmd_trigger_update(struct cli *cli, int argc, char **argv);
int cmd_rollback(struct cli *cli, int argc, char **argv);
int cmd_current_version(struct cli *cli, int argc, char **argv);
int cmd_local_version(struct cli *cli, int argc, char **argv);
int cmd_pending_update(struct cli *cli, int argc, char **argv);
int cmd_update_own_info(struct cli *cli, int argc, char **argv);
int cmd_running_versions(struct cli *cli, int argc, char **argv);
int cmd_hosts_at_version(struct cli *cli, int argc, char **argv);
int cmd_verify_hosts(struct cli *cli, int argc, char **argv);
int cmd_check_single_version(struct cli *cli, int argc, char **argv);

/* cmd_status.c */
int cmd_update_own_status(struct cli *cli, int argc, char **argv);
int cmd_get_failures(struct cli *cli, int argc, char **argv);
int cmd_local_health(struct cli *cli, int argc, char **argv);
int cmd_status(struct cli *cli, int argc, char **argv);
int cmd_ping(struct cli *cli, int argc, char **argv);

/* cmd_services.c */
int cmd_publish_service(struct cli *cli, int argc, char **argv);
int cmd_unpublish_service(struct cli *cli, int argc, char **argv);
int cmd_get_services(struct cli *cli, int argc, char **argv);
int cmd_cache_services(struct cli *cli, int argc, char **argv);
int cmd_wait_for_service(struct cli *cli, int argc, char **argv);

/* cmd_admin.c */
int cmd_provision(struct cli *cli, int argc, char **argv);
int cmd_decommission(struct cli *cli, int argc, char **argv);
int cmd_pause(struct cli *cli, int argc, char **argv);
int cmd_resume(struct cli *cli, int argc, char **argv);
int cmd_rollout_policy(struct cli *cli, int argc, char **argv);

#endif
