/*
 * render_internal.h — what render.c lends render_commands.c and
 * metrics_fleet.c: the stream check every printer ends with, the failure
 * budget, and the JSON pieces both print.
 */
#ifndef ORCHESTRATE_RENDER_INTERNAL_H
#define ORCHESTRATE_RENDER_INTERNAL_H

#include <stdbool.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"

/* 0, or -EIO when out reports an error. */
int render_stream_status(FILE *out);
/* Whether h runs another version than the desired one (or none). */
bool render_host_behind(const struct fleet_view *v, const struct host_view *h);
/* The failures a rollout may have before it halts: max_failures, and
 * max_fail_percent of the alive hosts (more than that halts: 10% of 25 alive
 * allows 2), the smaller when both are set.  -1: no budget.  The status
 * header and the fleet's metrics (metrics_fleet.c) say the same. */
long render_failure_budget(const struct rollout_policy *p, size_t alive);
/* Adds item to obj under name; false (and item freed) when either is missing. */
bool render_json_add(cJSON *obj, const char *name, cJSON *item);
/* The "rollout" object of `status --json` and `get_failures --json`. */
cJSON *render_json_rollout(const struct rollout_state *s);
/* Prints obj on one line to out. */
int render_json_emit(cJSON *obj, FILE *out);
/* A string from etcd as valid UTF-8 (U+FFFD for what is not), or null for
 * NULL; NULL when out of memory. */
cJSON *render_json_text(const char *s);

/*
 * The settings of a policy, in the one order every view shows them (the
 * status header's line, `rollout_policy get`): fn gets each set one's name
 * and value ("5", "dc1 dc2" with group_sep " ", NULL for a flag that is on),
 * and whether the value is in seconds.  The limit comes first, always:
 * max_parallel, max_percent, or max_parallel "unlimited".
 */
typedef void (*policy_setting_fn)(const char *name, const char *value, bool seconds, void *ud);
void render_policy_walk(const struct rollout_policy *p, const char *group_sep,
			policy_setting_fn fn, void *ud);

#endif
