/*
 * metrics.h — the daemon's metrics in the Prometheus text exposition format,
 * for node_exporter's textfile collector (orchestrated.8, paths.metrics_file).
 *
 * Pure rendering: the node fills a struct metrics with what it knows and writes
 * the result with file_write_atomic() (a temporary file renamed over the old
 * one, as the textfile collector wants).  Every metric has its HELP and TYPE
 * lines; label values are escaped as the format says (backslash, double quote,
 * newline), although versions and hook names are validated names anyway.
 */
#ifndef ORCHESTRATE_METRICS_H
#define ORCHESTRATE_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"

struct metrics_hook {
	const char *name;		/* "config", "validate", … */
	bool ran;			/* false: no sample for this hook yet */
	int exit_code;			/* -1 when killed by a signal or not started */
	double duration;		/* seconds */
	double time;			/* unix time of its end, seconds */
};

struct metrics {
	const char *desired_version;	/* NULL: none set, or unknown */
	const char *local_version;	/* NULL: none */
	const struct metrics_hook *hooks;
	size_t n_hooks;
	size_t catalog_entries;
	uint64_t etcd_reconnects;
	uint64_t watch_events;
	uint64_t lease_regrants;
	long lease_ttl;			/* seconds, as granted; 0: no lease yet */
	uint64_t slot_queue_reads;
	uint64_t slot_queue_scans;	/* ...that read the whole queue */
	uint64_t etcd_strains;		/* signs etcd was behind (node_pace.c) */
	uint64_t pace_usec;		/* the window writes are spread over, 0: none */
	const char *const *states;	/* every state name, in order */
	size_t n_states;
	size_t state;			/* the index of the current one */
};

/* Renders every metric into out (appending). */
int metrics_render(const struct metrics *m, struct buf *out);

/* --- the pieces both expositions are made of --------------------------------- */

/* Appends s to out escaped as a label value, without the quotes: backslash,
 * double quote and newline as \\, \" and \n (the text format's rule), every
 * other byte as it is.  NULL appends nothing. */
int metrics_escape_label(const char *s, struct buf *out);
/* "# HELP NAME HELP" and "# TYPE NAME TYPE" (help is ours: no escaping). */
int metrics_family(struct buf *out, const char *name, const char *type, const char *help);

/* --- the fleet's metrics (metrics_fleet.c) ------------------------------------- */

/*
 * `orchestrate status --prometheus`: the whole fleet as a Prometheus text
 * exposition, for node_exporter's textfile collector on an admin host, from
 * the reads `status` makes (the view, the rollout's records, the policy) and
 * nothing else.  orchestrate(1) lists the series; the alert rules in
 * contrib/prometheus/ use them.
 */
struct metrics_fleet {
	const struct fleet_view *view;
	const struct rollout_state *rollout;	/* NULL: not read */
	const struct rollout_policy *policy;	/* NULL: none set (or not valid) */
	bool policy_invalid;			/* rollout/policy holds no valid policy */
	int64_t now;				/* unix time of the read */
};
int metrics_fleet_render(const struct metrics_fleet *m, struct buf *out);

#endif
