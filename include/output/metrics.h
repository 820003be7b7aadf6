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
	uint64_t lease_regrants;
	const char *const *states;	/* every state name, in order */
	size_t n_states;
	size_t state;			/* the index of the current one */
};

/* Renders every metric into out (appending). */
int metrics_render(const struct metrics *m, struct buf *out);

#endif
