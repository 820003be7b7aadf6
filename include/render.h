/*
 * render.h — what the command line prints: the status table and its JSON twin,
 * and plain lists of names.  Pure output: nothing here talks to etcd, reads the
 * environment or decides about colour (the caller does, from isatty() and
 * NO_COLOR) — so every function can be driven by a unit test with a fabricated
 * fleet_view and a memory stream.
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
/* A NULL-terminated list as one JSON array of strings and a newline. */
int render_json_strings(char *const *items, FILE *out);

/* An age in one unit, rounded down: "5s", "3m", "2h", "4d" ("0s" when negative). */
int render_age(int64_t seconds, struct buf *out);

#endif
