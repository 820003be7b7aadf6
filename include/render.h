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
 */
#ifndef ORCHESTRATE_RENDER_H
#define ORCHESTRATE_RENDER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h"
#include "fleet.h"
#include "hiera.h"

/*
 * One row a host — HOST, VERSION, PUPPET, VALIDATION, ALIVE, GROUP, AGE, DETAIL —
 * hosts behind the desired version first, then by name; columns as wide as their
 * widest cell; DETAIL (the last line of the detail) truncated so that a row of
 * typical names fits 80 columns, or, when the other columns leave it less than
 * 20, on an indented line of its own below the row.  Then the totals: hosts by running version, by
 * puppet and validation state, and the unaccounted hosts (provisioned, not
 * alive).  now (unix seconds) is what AGE counts from.  color adds ANSI colours.
 */
int render_status_table(const struct fleet_view *v, FILE *out, bool color, int64_t now);
/* The same as one JSON object: {"current_version","previous_version","revision",
 * "hosts":[…],"totals":{…}}, followed by a newline. */
int render_status_json(const struct fleet_view *v, FILE *out);

/* A NULL-terminated list, one item a line. */
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

/* --- what the commands print ----------------------------------------------------- */

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
 * {"failed_puppet":[…],"failed_validation":[…],"unaccounted":[…]}. */
int render_failures(FILE *out, const struct fleet_failures *fl, bool hosts);
int render_json_failures(FILE *out, const struct fleet_failures *fl);

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

#endif
