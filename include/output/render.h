/*
 * render.h — what the command line prints: the status table and its JSON twin,
 * every command's answer as text or JSON, and the sanitiser that every text
 * from outside goes through on its way to a terminal.  Pure output: nothing
 * here talks to etcd, reads the environment or decides about colour (the
 * caller does, from isatty() and NO_COLOR) — so every function can be driven
 * by a unit test with fabricated data and a memory stream.
 *
 * Every function returns 0 or a negative errno-style code (-ENOMEM, -EIO when
 * the stream reports an error).
 *
 * render.c holds the status table, its JSON and the sanitiser;
 * render_commands.c every other command's answer (noted where a declaration
 * of it stands among render.c's).
 */
#ifndef ORCHESTRATE_RENDER_H
#define ORCHESTRATE_RENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/buf.h"
#include "fleet/fleet.h"
#include "fleet/fleet_events.h"
#include "fleet/fleet_rollout.h"
#include "fleet/fleet_plan.h"
#include "output/hiera.h"

/* How status draws the fleet (render_status_view()). */
struct render_status_options {
	size_t width;			/* the terminal's columns; under 40: 80 */
	bool color;			/* ANSI colours */
	int64_t now;			/* unix seconds AGE counts from */
	/* filters of the rows (all must hold); the header and totals count
	 * the whole fleet */
	bool failed;			/* puppet or validation failed */
	bool behind;			/* not at the desired version */
	const char *group;		/* in this group */
	char *const *hosts;		/* one of these (NULL-terminated); NULL: any */
	bool summary;			/* the header and totals, no rows */
	bool show_policy;		/* a "policy:" line (policy NULL: none set) */
	const struct rollout_policy *policy;
	const char *policy_problem;	/* the stored policy is not valid: why */
	/* the rollout's halt, revert, canaries and failures (fleet_rollout_state());
	 * NULL: not shown */
	const struct rollout_state *rollout;
	const char *heard;		/* a line under the header (--watch's "last heard"), or NULL */
	const char *banner;		/* a line above it (--watch's etcd outage), or NULL */
};

/*
 * The header — the desired version, the policy, the rollout's halt or revert,
 * canaries and failures against the budget (from o->rollout, a line each when
 * there is something to say), per group the alive hosts at the desired
 * version of its alive hosts ("progress: dc1 10/12, dc2 0/8"),
 * and the counts (hosts, behind, alive, unaccounted, paused; failed, waiting)
 * — then one row a host — HOST, VERSION, PUPPET, VALIDATION, ALIVE, GROUP,
 * AGE, DETAIL — failed hosts first, then waiting (pending or paused), then
 * behind the desired version, then the rest, each by name; columns as wide as
 * their widest cell; DETAIL (the last line of the detail that looks like an
 * error — "Error:", "FAILED", "failed" — else its last line, after "attempt
 * 3 since 12:01: " for a retrying host or "wait slot: " for a waiting one) cut to what the
 * width leaves it, or, when that is less than 20 columns, on an indented line
 * of its own below the row.  Then the totals: hosts by running version, by
 * puppet and validation state.
 */
int render_status_view(const struct fleet_view *v, FILE *out,
		       const struct render_status_options *o);
/* render_status_view() at 80 columns, all hosts, no policy line. */
int render_status_table(const struct fleet_view *v, FILE *out, bool color, int64_t now);

/* render_commands.c: one host in full (status HOST): its version against the desired one, group,
 * pause, alive key (time, pid, version, lease), then every state it holds with
 * its time, exit code, version and whole detail (RENDER_BLOCK, indented). */
int render_host(FILE *out, const struct fleet_view *v, const struct host_view *h,
		const struct host_record *rec, int64_t now);
/* {"host","group","running_version","desired_version","behind","paused",
 * "alive":{"time","pid","version","lease"}|null,"states":[{"type","state",
 * "time","exit_code","version","detail"}],"runs":[…as render_json_history]} */
int render_json_host(FILE *out, const struct fleet_view *v, const struct host_view *h,
		     const struct host_record *rec);

/* render_commands.c: a host's runs (history/HOST), newest first, one line each,
 * indented by two spaces: "WHEN  VERSION  RESULT  DURATION  attempt N  ERROR"
 * (WHEN local "YYYY-MM-DD HH:MM:SS"; the error line sanitized, RENDER_CELL);
 * "  none" when there is none.  status HOST prints it under "runs:". */
int render_runs(FILE *out, const struct run_history *h);
/* history HOST: "runs of HOST:" then render_runs(); and
 * {"host","runs":[{"version","start","duration","result","attempt","error"}]}
 * (duration null when not known, error null when none). */
int render_history(FILE *out, const char *host, const struct run_history *h);
int render_json_history(FILE *out, const char *host, const struct run_history *h);
/* history --version V: one line a run, "HOST  WHEN  RESULT  DURATION  attempt N
 * ERROR", hosts sorted; and {"version","runs":[{"host",…as above}]}. */
int render_history_version(FILE *out, const char *version, const struct host_run *runs,
			   size_t n);
int render_json_history_version(FILE *out, const char *version, const struct host_run *runs,
				size_t n);

/* render_commands.c: pause --list: "SCOPE NAME SINCE REASON" rows, or "no pause set"; and
 * {"pauses":[{"scope","name","time","reason"}]}. */
int render_pauses(FILE *out, const struct pause_entry *p, size_t n, int64_t now);
int render_json_pauses(FILE *out, const struct pause_entry *p, size_t n);
/* The same as one JSON object: {"current_version","previous_version","revision",
 * "rollout":{…} (when rollout is not NULL),"hosts":[…],"totals":{…}}, followed
 * by a newline.  Each host has "attempts", "first_failure" and "wait" too. */
int render_status_json(const struct fleet_view *v, const struct rollout_state *rollout,
		       FILE *out);
/* "HALTED: REASON (by HOST at 12:01)[, reverted to V]" or "reverted to V41
 * after V42 halted: REASON (by ...)"; nothing when s is neither halted nor
 * reverted.  Appends to out. */
int render_halt_text(const struct rollout_state *s, int64_t now, struct buf *out);
/*
 * A wait's progress line (verify_hosts --wait, check_single_version --wait,
 * wait_for_service): "412/1000 hosts at v42" (what: "hosts at v42"), then,
 * when p->states, ", 3 failed, 12 waiting", then, when p->halted, ", halted:
 * REASON" (sanitised) and ", reverted to v41"; cut to width columns with
 * "..." (0: no limit), so that it stays one line that "\r" can redraw.
 * Appends to out.
 */
int render_progress(const struct fleet_progress *p, const char *what, size_t width,
		    struct buf *out);
/* A unix time as an operator reads it, local: "12:01" within the last day,
 * else "2026-11-23 12:01"; "?" when unknown. */
int render_clock(int64_t t, int64_t now, struct buf *out);

/* render_events.c: one event of `orchestrate events` a line,
 * "TIME REVISION KIND HOST VERSION [WORDS]" — TIME in UTC
 * ("2026-11-26T10:01:02Z", the value's time, else now), HOST and VERSION "-"
 * when none, WORDS "from V", the stage, "attempt N", "wait W" and the detail
 * — sanitised as one line (RENDER_LINE); and the JSON line
 * {"revision","time","kind","host","version"[,"from","stage","attempt",
 * "wait","scope"],"detail"}. */
int render_event(FILE *out, const struct fleet_event *e, int64_t now);
int render_json_event(FILE *out, const struct fleet_event *e, int64_t now);

/* render_commands.c: a NULL-terminated list, one item a line. */
int render_lines(char *const *items, FILE *out);

/* An age in one unit, rounded down: "5s", "3m", "2h", "4d" ("0s" when negative). */
int render_age(int64_t seconds, struct buf *out);

/* --- text from outside ---------------------------------------------------------- */

/*
 * The one sanitiser of every human output: what etcd, a hook or a file says
 * (a status detail, a pause reason, an error message from the server, a line
 * of the profile list) goes to a terminal through it, so that no byte in it
 * can drive the terminal (an escape sequence, a C1 control such as U+009B, a
 * byte that is not UTF-8) or, on one line, forge another.  Valid UTF-8 text
 * without control characters comes out unchanged.
 *
 *   RENDER_LINE   one line (messages): a newline is written "\n", a tab "\t",
 *                 every other control byte, and every byte of a C1 control or
 *                 of an invalid sequence, "\xNN";
 *   RENDER_BLOCK  several lines (local_health -v's details): newlines and tabs
 *                 kept, the rest as RENDER_LINE;
 *   RENDER_CELL   a table cell (status's DETAIL): every control character a
 *                 space and every invalid byte '?', so that the width in
 *                 characters stays what it was.
 *
 * Appends to out; 0 or -ENOMEM.
 */
enum render_text { RENDER_LINE, RENDER_BLOCK, RENDER_CELL };
int render_sanitize(const char *text, size_t len, enum render_text mode, struct buf *out);

/* --- what the commands print (render_commands.c) -------------------------------- */

/*
 * Each command's answer, as text for people or, the *_json twins, as one JSON
 * object on one line (the shapes orchestrate(1) documents).  Text that comes
 * from outside goes through render_sanitize(); names are valid names already.
 */

/* {"FIELD":"VERSION"}, or {"FIELD":null} when version is NULL (current_version,
 * local_version). */
int render_json_version(FILE *out, const char *field, const char *version);
/* pending_update: {"local","desired","pending","reachable","message"}. */
int render_json_pending(FILE *out, const char *local, const char *desired, bool pending,
			bool reachable, const char *message);
/* {"version":VERSION,"FIELD":[NAMES]}, without "version" when it is NULL
 * (running_versions, hosts_at_version, verify_hosts). */
int render_json_names(FILE *out, const char *version, const char *field, char *const *names);

/* check_single_version: "VERSION: N hosts" a line (-v), and
 * {"version","single","running_versions":{VERSION:N,…}}. */
int render_version_counts(FILE *out, const struct fleet_version_count *counts, size_t n);
int render_json_single_version(FILE *out, const char *version, bool single,
			       const struct fleet_version_count *counts, size_t n);

/* get_failures: three counts ("failed puppet: N"...), or with hosts one
 * "failed puppet HOST" (validation, unaccounted) a line; and
 * {"failed_puppet":[…],"failed_validation":[…],"unaccounted":[…],"rollout":{…}}
 * ("rollout" as status --json's, when rollout is not NULL). */
int render_failures(FILE *out, const struct fleet_failures *fl, bool hosts);
int render_json_failures(FILE *out, const struct fleet_failures *fl,
			 const struct rollout_state *rollout);

/* local_health: this host's two states and their details. */
struct render_health {
	const char *host;
	enum status_state puppet, validation;	/* STATE_INVALID: none */
	const char *puppet_detail, *validation_detail;
};
/* "puppet: STATE" and "validation: STATE", then with details each non-empty
 * detail under "puppet detail:" (RENDER_BLOCK). */
int render_health(FILE *out, const struct render_health *h, bool details);
int render_json_health(FILE *out, const struct render_health *h);

/* ping: "ENDPOINT: etcd VERSION"; {"endpoint","version"}, or with error
 * {"endpoint":null,"version":null,"error":…}. */
int render_ping(FILE *out, const char *endpoint, const char *server_version);
int render_json_ping(FILE *out, const char *endpoint, const char *server_version,
		     const char *error);

/* get_services --json: {"revision","skipped","entries":[{"service","host",
 * "iface","address","healthy"},…]}. */
int render_json_catalog(FILE *out, const struct catalog *cat);
/* wait_for_service --json: {"service","count","healthy","seen","ok"}. */
int render_json_service_wait(FILE *out, const char *service, size_t count, bool healthy,
			     size_t seen, bool ok);

/* rollout_policy: "max_parallel: N" (or max_percent, or "unlimited") and
 * "groups: G1 G2", or "no policy" when p is NULL; the JSON is the stored
 * value (rollout_policy_encode()), or null. */
int render_policy(FILE *out, const struct rollout_policy *p);
int render_json_policy(FILE *out, const struct rollout_policy *p);

/* --- plan (render_plan.c) ------------------------------------------------------- */

/*
 * plan: the head (version, trigger, policy, host counts), the failure budget
 * (and the halt), one line a batch in order — "batch N  GROUP  [canary]
 * K hosts  ~ESTIMATE  HOSTS" with "then the canaries are promoted" before
 * the batch a promote comes first — the waiting hosts with why, the dead,
 * those at the version already, and the estimated duration with the median
 * run of the fleet and of each group.  The JSON is orchestrate(1)'s PLAN shape.
 */
struct fleet_plan;
int render_plan(FILE *out, const struct fleet_plan *p);
int render_json_plan(FILE *out, const struct fleet_plan *p);

#endif
