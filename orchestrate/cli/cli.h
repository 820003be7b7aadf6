/*
 * cli.h — what the dispatcher (cli.c) shares with the command files (cmd_*.c).
 *
 * Each command is declared in its own file, next to its function, as a struct
 * command: its name, arity, synopsis, description and its own options (a
 * struct cli_option table whose entries point at that file's variables, the
 * arg_* of systemd's tools).  So a new flag is one line beside the command
 * that reads it, and its help line is made from that same line.  cli.c lists
 * the commands in its table, and does, once for all of them, what none should
 * repeat: parse every option, check the arity, print help, resolve the
 * settings.
 *
 * A command function receives only its positional arguments and a struct cli;
 * it validates its names, asks for the fleet (the etcd client is created
 * lazily, after validation, so that an invalid name never reaches a request),
 * prints (through render.h), and returns the exit status.  It never calls the
 * etcd client nor builds a key: that is fleet.h's job.
 */
#ifndef ORCHESTRATE_CLI_H
#define ORCHESTRATE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/exitcode.h"
#include "fleet/fleet.h"
#include "config/options.h"

/* --- options of one command ---------------------------------------------------- */

enum cli_option_kind {
	CLI_OPT_FLAG,		/* bool *: set to true */
	CLI_OPT_STRING,		/* const char **: the argument (points into argv) */
	CLI_OPT_LONG,		/* long *: a whole number in [min, max] */
	CLI_OPT_SECONDS,	/* double *: a number of seconds, 0 to 1e9 */
	CLI_OPT_CALLBACK,	/* parse(name, arg, value): 0 or an exit status */
};

struct cli_option {
	const char *name;		/* the long option, without "--" */
	enum cli_option_kind kind;
	void *value;			/* where the value goes */
	long min, max;			/* CLI_OPT_LONG's range */
	int (*parse)(const char *name, const char *arg, void *value);
	const char *arg;		/* the argument's name in help ("OLD"); NULL: none */
	const char *help;		/* for CMD -h; '\n' separates lines */
};

#define CLI_FLAG(n, v, h) { .name = (n), .kind = CLI_OPT_FLAG, .value = (v), .help = (h) }
#define CLI_STRING(n, a, v, h) \
	{ .name = (n), .kind = CLI_OPT_STRING, .value = (v), .arg = (a), .help = (h) }
#define CLI_LONG(n, a, v, lo, hi, h)                                              \
	{ .name = (n), .kind = CLI_OPT_LONG, .value = (v), .min = (lo), .max = (hi), \
	  .arg = (a), .help = (h) }
#define CLI_SECONDS(n, v, h) \
	{ .name = (n), .kind = CLI_OPT_SECONDS, .value = (v), .arg = "SECONDS", .help = (h) }
#define CLI_CALLBACK(n, a, fn, v, h)                                                  \
	{ .name = (n), .kind = CLI_OPT_CALLBACK, .value = (v), .parse = (fn), .arg = (a), \
	  .help = (h) }
#define CLI_OPTIONS_END { .name = NULL }

/* --- commands -------------------------------------------------------------------- */

enum command_group { G_OPERATORS, G_NODES, G_CI, G_PUPPET, G_HUMANS, _G_MAX };

struct cli;

struct command {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv);
	int min_args, max_args;		/* max -1: any number */
	enum command_group group;
	const struct cli_option *options;	/* NULL: none of its own */
	const char *needs;		/* what the arity error says is missing */
	const char *synopsis;		/* after "orchestrate " */
	const char *description;	/* '\n' separates lines */
	const char *help;		/* more lines for CMD -h (actions, -v), or NULL */
};

struct cli {
	const struct command *cmd;
	const char *name;		/* the command's name, for messages */
	struct options_resolved *opt;
	struct fleet fleet;		/* .etcd NULL until cli_fleet() */
};

/* The fleet (and its etcd client), made on first use.  Returns 0 or an exit
 * status (having printed why). */
int cli_fleet(struct cli *cli, struct fleet **ret);

/* "orchestrate: MESSAGE" on stderr, one line whatever the arguments hold
 * (render_sanitize()); returns status, for `return cli_error(…)`. */
int cli_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints what failed ("WHAT: etcd 'http://…': connection refused"; what may be
 * NULL) and returns cli_exit_code(r).  The words are etcd's last error when r
 * came from etcd, else strerror's. */
int cli_fleet_error(struct cli *cli, int r, const char *what);
/* Checks a HOST/VERSION/SERVICE/GROUP argument: 0 when valid, else prints
 * "invalid KIND 'NAME': PROBLEM" and returns 64. */
int cli_check_name(const char *kind, const char *name);
/* Prints "write failure on standard output" for a render_*() error (or "out
 * of memory") and returns the exit status; 0 when r is not an error. */
int cli_output(int r);

/* The local version (local_version_read()): 1 and *ret when the file names a
 * valid version, 0 when there is none (absent, blank, or invalid: then with a
 * warning), or an exit status > 1 (66) after printing why it cannot be read. */
int cli_local_version(struct cli *cli, char **ret);

/* How far a wait is (render_progress(), what: "hosts at v2"): logged with -v,
 * and, when stderr is a terminal, drawn on one line there ("3/10 hosts at v2,
 * 1 failed, 2 waiting"), cut to its width, that cli_progress_end() clears
 * before the answer is printed. */
void cli_progress(const struct fleet_progress *p, void *what);
/* Whether the progress line is drawn: the waits count failed and waiting
 * hosts only then (FLEET_WAIT_STATES), so that scripts pay nothing for it. */
bool cli_progress_on_terminal(void);
void cli_progress_end(void);

/* --- the commands ------------------------------------------------------------------ */

/* cmd_versions.c */
extern const struct command command_trigger_update, command_rollback,
	command_current_version, command_local_version, command_pending_update,
	command_update_own_info, command_running_versions, command_hosts_at_version,
	command_verify_hosts, command_check_single_version;
/* cmd_status.c */
extern const struct command command_update_own_status, command_get_failures,
	command_local_health, command_status, command_ping;
/* cmd_events.c */
extern const struct command command_events;
/* cmd_services.c */
extern const struct command command_publish_service, command_unpublish_service,
	command_get_services, command_cache_services, command_wait_for_service;
/* cmd_history.c */
extern const struct command command_history;
/* cmd_plan.c */
extern const struct command command_plan;
/* cmd_identity.c */
extern const struct command command_node_identity;
/* cmd_admin.c */
extern const struct command command_provision, command_decommission, command_pause,
	command_pauses, command_resume, command_rollout_policy, command_promote;

#endif
