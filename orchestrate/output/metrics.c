/*
 * metrics.c — the Prometheus text format of metrics.h.
 *
 * The file is small (a dozen families) and rewritten whole on each state change
 * and hook end, never on a timer: between two rewrites nothing it says has
 * changed, except the etcd reconnect counter, which is as fresh as the last
 * event.  Families follow the naming conventions: *_info gauges carry a label
 * and the value 1, *_total are counters, times are in seconds.
 */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "output/metrics.h"

int metrics_escape_label(const char *s, struct buf *out)
{
	int r = 0;
	for (; s && *s && r >= 0; s++) {
		switch (*s) {
		case '\\': r = buf_adds(out, "\\\\"); break;
		case '"': r = buf_adds(out, "\\\""); break;
		case '\n': r = buf_adds(out, "\\n"); break;
		default: r = buf_addc(out, *s); break;
		}
	}
	return r < 0 ? r : 0;
}

int metrics_family(struct buf *out, const char *name, const char *type, const char *help)
{
	return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{label="value"} followed by the caller's value. */
static int labelled(struct buf *out, const char *name, const char *label, const char *value)
{
	int r;
	if ((r = buf_printf(out, "%s{%s=\"", name, label)) < 0 ||
	    (r = metrics_escape_label(value, out)) < 0)
		return r;
	return buf_adds(out, "\"} ");
}

static int info(struct buf *out, const char *name, const char *help, const char *version)
{
	int r = metrics_family(out, name, "gauge", help);
	if (r >= 0 && version && (r = labelled(out, name, "version", version)) >= 0)
		r = buf_adds(out, "1\n");
	return r;
}

/* One family with a sample per hook that ran; which picks the value. */
enum hook_value { HOOK_EXIT, HOOK_DURATION, HOOK_TIME };

static int hook_family(struct buf *out, const struct metrics *m, const char *name,
		       const char *help, enum hook_value which)
{
	int r = metrics_family(out, name, "gauge", help);
	for (size_t i = 0; r >= 0 && i < m->n_hooks; i++) {
		const struct metrics_hook *h = &m->hooks[i];
		if (!h->ran)
			continue;
		if ((r = labelled(out, name, "hook", h->name)) < 0)
			break;
		switch (which) {
		case HOOK_EXIT: r = buf_printf(out, "%d\n", h->exit_code); break;
		case HOOK_DURATION: r = buf_printf(out, "%.3f\n", h->duration); break;
		case HOOK_TIME: r = buf_printf(out, "%.3f\n", h->time); break;
		}
	}
	return r;
}

int metrics_render(const struct metrics *m, struct buf *out)
{
	int r;

	if ((r = info(out, "orchestrate_desired_version_info",
		      "The desired version (current_version) as the node last read it.",
		      m->desired_version)) < 0 ||
	    (r = info(out, "orchestrate_local_version_info",
		      "The version whose config run and validation last succeeded here.",
		      m->local_version)) < 0 ||
	    (r = hook_family(out, m, "orchestrate_hook_last_exit_code",
			     "Exit code of the last run of each hook (-1: killed or not started).",
			     HOOK_EXIT)) < 0 ||
	    (r = hook_family(out, m, "orchestrate_hook_last_duration_seconds",
			     "How long the last run of each hook took.", HOOK_DURATION)) < 0 ||
	    (r = hook_family(out, m, "orchestrate_hook_last_run_timestamp_seconds",
			     "When the last run of each hook ended (unix time).", HOOK_TIME)) < 0 ||
	    (r = metrics_family(out, "orchestrate_catalog_entries", "gauge",
			"Entries (service, host, interface, address) of the service catalog.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_catalog_entries %zu\n", m->catalog_entries)) < 0 ||
	    (r = metrics_family(out, "orchestrate_etcd_reconnects_total", "counter",
			"Watch streams reconnected since the daemon started.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_etcd_reconnects_total %llu\n",
			    (unsigned long long)m->etcd_reconnects)) < 0 ||
	    (r = metrics_family(out, "orchestrate_watch_events_total", "counter",
			"Events etcd's watches delivered to the node (since its last new connection).")) < 0 ||
	    (r = buf_printf(out, "orchestrate_watch_events_total %llu\n",
			    (unsigned long long)m->watch_events)) < 0 ||
	    (r = metrics_family(out, "orchestrate_lease_regrants_total", "counter",
			"Times the node's lease was lost and granted again.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_lease_regrants_total %llu\n",
			    (unsigned long long)m->lease_regrants)) < 0 ||
	    (r = metrics_family(out, "orchestrate_lease_ttl_seconds", "gauge",
			"TTL of the node's lease as etcd granted it: timing.lease_ttl, or up to four times it after leases lost to a busy etcd.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_lease_ttl_seconds %ld\n", m->lease_ttl)) < 0 ||
	    (r = metrics_family(out, "orchestrate_slot_queue_reads_total", "counter",
			"Reads of the node's place in a rollout's slot queue.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_slot_queue_reads_total %llu\n",
			    (unsigned long long)m->slot_queue_reads)) < 0 ||
	    (r = metrics_family(out, "orchestrate_slot_queue_scans_total", "counter",
			"Of those reads, the ones that read the whole queue, since the queue's "
			"tail did not name the host just ahead (or a key entered the queue "
			"without naming itself there).")) < 0 ||
	    (r = buf_printf(out, "orchestrate_slot_queue_scans_total %llu\n",
			    (unsigned long long)m->slot_queue_scans)) < 0 ||
	    (r = metrics_family(out, "orchestrate_etcd_strains_total", "counter",
			"Signs that etcd was behind (an answer slower than a second, a request "
			"that failed or got no answer in time) for which the node slowed its "
			"writes.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_etcd_strains_total %llu\n",
			    (unsigned long long)m->etcd_strains)) < 0 ||
	    (r = metrics_family(out, "orchestrate_etcd_pace_seconds", "gauge",
			"The window over which the node spreads its writes while etcd is behind; "
			"0 at full speed.")) < 0 ||
	    (r = buf_printf(out, "orchestrate_etcd_pace_seconds %.1f\n",
			    (double)m->pace_usec / 1e6)) < 0 ||
	    (r = metrics_family(out, "orchestrate_state", "gauge",
			"The node's state: 1 for the current one, 0 for the others.")) < 0)
		return r;
	for (size_t i = 0; i < m->n_states; i++) {
		if ((r = labelled(out, "orchestrate_state", "state", m->states[i])) < 0 ||
		    (r = buf_printf(out, "%d\n", i == m->state)) < 0)
			return r;
	}
	return 0;
}
