/*
 * metrics_fleet.c — the whole fleet as a Prometheus text exposition
 * (`orchestrate status --prometheus`, metrics.h), for node_exporter's
 * textfile collector on an admin host and the alert rules of
 * contrib/prometheus/orchestrate.rules.yml.
 *
 * It counts what `status` counts, from the same reads: a host is failed when
 * its puppet or validation state is, waiting when its puppet state is pending
 * or a pause applies to it (and it has not failed), unaccounted when it is
 * provisioned but not alive (get_failures's count), behind when it runs
 * another version than the desired one, or none.
 *
 * Cardinality.  A textfile collector's series live as long as the file, and
 * a fleet has thousands of hosts, so no family has a label per host but one:
 *   group    the groups hosts registered in: the operator's few (dc1, dc2),
 *            "" for the hosts in none;
 *   version  the versions hosts run: a handful during a rollout;
 *   type, state, reason   fixed sets (a wait reason a node writes that is
 *            not one of ours counts as "other");
 *   host     only orchestrate_fleet_waiting_host_since_timestamp_seconds, and
 *            only for the WAITING_HOSTS_SHOWN hosts that have waited longest,
 *            so that the "stuck in a wait" alert can name them: at most ten
 *            series whatever the fleet's size.
 * Names are valid names by the time they reach us (key_split() and the value
 * decoders refuse anything else), but every label value is escaped anyway.
 *
 * Output is deterministic (families in a fixed order, label values sorted),
 * so that two reads of an unchanged fleet differ only in the read's time and
 * revision.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"
#include "output/metrics.h"
#include "render_internal.h"

/* The longest waits named host by host (see the cardinality note above). */
#define WAITING_HOSTS_SHOWN 10
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Why a waiting host waits: what the node writes in its pending state's
 * "wait" (node.c), then the two we add. */
static const char *const wait_reasons[] = {
	"dependency", "slot", "group", "canary", "halt", "pause", "splay",
	"unknown",	/* pending, no reason said (an older node, or by hand) */
	"other",	/* a reason that is none of the above */
};
enum { REASON_PAUSE = 5, REASON_UNKNOWN = 7, REASON_OTHER = 8, _REASON_MAX = 9 };

static bool host_failed(const struct host_view *h)
{
	return h->puppet == STATE_FAILED || h->validation == STATE_FAILED;
}

/* The reason h waits (an index of wait_reasons), or -1 when it does not. */
static int host_wait_reason(const struct host_view *h)
{
	if (host_failed(h))
		return -1;
	if (h->puppet == STATE_PENDING) {
		if (!h->wait)
			return REASON_UNKNOWN;
		for (int k = 0; k < REASON_UNKNOWN; k++)
			if (strcmp(h->wait, wait_reasons[k]) == 0)
				return k;
		return REASON_OTHER;
	}
	return h->paused ? REASON_PAUSE : -1;
}

/* Since when h waits: its pending state's time, else (paused only) the
 * newest change of its states; 0 when not recorded. */
static int64_t host_wait_since(const struct host_view *h)
{
	if (h->puppet == STATE_PENDING && h->state_time[STATUS_PUPPET] > 0)
		return h->state_time[STATUS_PUPPET];
	return h->changed;
}

static bool at_version(const struct host_view *h, const char *version)
{
	return version && h->running_version && strcmp(h->running_version, version) == 0;
}

/* --- distinct label values ------------------------------------------------------ */

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * The distinct values of a per-host string (the group, or the running
 * version; NULL counts as ""), sorted: *ret (caller frees the array, not the
 * strings) and *ret_n.  O(n log n), so that 10,000 hosts in 10,000 groups
 * cost no more than a sort.
 */
static int distinct(const struct fleet_view *v, bool by_version, const char ***ret,
		    size_t *ret_n)
{
	const char **all = calloc(v->n ? v->n : 1, sizeof(*all));
	size_t n = 0;

	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const char *s = by_version ? v->hosts[i].running_version : v->hosts[i].group;
		all[i] = s ? s : "";
	}
	qsort(all, v->n, sizeof(*all), str_cmp);
	for (size_t i = 0; i < v->n; i++)
		if (n == 0 || strcmp(all[n - 1], all[i]) != 0)
			all[n++] = all[i];
	*ret = all;
	*ret_n = n;
	return 0;
}

/* The index of s (NULL: "") in the sorted values. */
static size_t value_index(const char *const *values, size_t n, const char *s)
{
	const char *key = s ? s : "";
	const char *const *p = bsearch(&key, values, n, sizeof(*values), str_cmp);
	return p ? (size_t)(p - values) : 0;	/* every value is there */
}

/* --- samples -------------------------------------------------------------------------- */

/* NAME{L1="V1",L2="V2"} VALUE: labels as name/value pairs, NULL-ended. */
static int sample(struct buf *out, const char *name, const char *const *labels, double value)
{
	int r = buf_adds(out, name);

	if (r >= 0 && labels && labels[0]) {
		for (size_t k = 0; r >= 0 && labels[k]; k += 2) {
			if ((r = buf_printf(out, "%s%s=\"", k ? "," : "{", labels[k])) < 0 ||
			    (r = metrics_escape_label(labels[k + 1], out)) < 0)
				break;
			r = buf_addc(out, '"');
		}
		if (r >= 0)
			r = buf_addc(out, '}');
	}
	if (r < 0)
		return r;
	/* whole numbers (counts, unix times) as integers, the rest as %g */
	if (value == (double)(long long)value)
		return buf_printf(out, " %lld\n", (long long)value);
	return buf_printf(out, " %.17g\n", value);
}

static int gauge(struct buf *out, const char *name, const char *help, double value)
{
	int r = metrics_family(out, name, "gauge", help);
	return r < 0 ? r : sample(out, name, NULL, value);
}

/* A gauge whose sample is there only when has is true (a budget or a
 * deadline the policy may not set, a time that may not be known): its HELP
 * and TYPE are always there, so that the family is documented in the file. */
static int gauge_if(struct buf *out, const char *name, const char *help, bool has, double value)
{
	int r = metrics_family(out, name, "gauge", help);
	return r < 0 || !has ? r : sample(out, name, NULL, value);
}

/* One family with a sample per group. */
static int per_group(struct buf *out, const char *name, const char *help,
		     const char *const *groups, const size_t *counts, size_t n_groups)
{
	int r = metrics_family(out, name, "gauge", help);
	for (size_t g = 0; r >= 0 && g < n_groups; g++)
		r = sample(out, name, (const char *[]){ "group", groups[g], NULL },
			   (double)counts[g]);
	return r;
}

/* --- the families ------------------------------------------------------------------ */

/* What is counted per group. */
enum group_count {
	GC_HOSTS, GC_ALIVE, GC_NOT_ALIVE, GC_UNACCOUNTED, GC_AT_DESIRED, GC_BEHIND, GC_FAILED,
	GC_PAUSED, _GC_MAX,
};

static const struct {
	const char *name, *help;
} group_families[_GC_MAX] = {
	[GC_HOSTS] = { "orchestrate_fleet_hosts",
		       "Hosts known to the fleet (any key of theirs under status/, running_version/, alive/ or groups/), per group." },
	[GC_ALIVE] = { "orchestrate_fleet_hosts_alive",
		       "Hosts whose daemon holds its alive key (keeps its lease), per group." },
	[GC_NOT_ALIVE] = { "orchestrate_fleet_hosts_not_alive",
			   "Hosts with no alive key: no daemon heard from within its lease's TTL (unaccounted hosts included), per group." },
	[GC_UNACCOUNTED] = { "orchestrate_fleet_hosts_unaccounted",
			     "Hosts provisioned (status/provisioned/success) but not alive, per group." },
	[GC_AT_DESIRED] = { "orchestrate_fleet_hosts_at_desired_version",
			    "Hosts running the desired version (rollout progress: divide by orchestrate_fleet_hosts), per group." },
	[GC_BEHIND] = { "orchestrate_fleet_hosts_behind",
			"Hosts running another version than the desired one, or none (0 with no desired version), per group." },
	[GC_FAILED] = { "orchestrate_fleet_hosts_failed",
			"Hosts whose puppet or validation state is failed (retrying ones too), per group." },
	[GC_PAUSED] = { "orchestrate_fleet_hosts_paused",
			"Hosts a pause applies to (global, their group's or their own), per group." },
};

static int families_per_group(const struct fleet_view *v, struct buf *out, size_t *ret_alive)
{
	_cleanup_(freep) const char **groups = NULL;
	_cleanup_(freep) size_t *counts = NULL;
	size_t n_groups = 0, alive = 0;
	int r;

	if ((r = distinct(v, false, &groups, &n_groups)) < 0)
		return r;
	counts = calloc((n_groups ? n_groups : 1) * _GC_MAX, sizeof(*counts));
	if (!counts)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		const struct host_view *h = &v->hosts[i];
		size_t *c = &counts[value_index(groups, n_groups, h->group) * _GC_MAX];
		bool behind = v->current_version && !at_version(h, v->current_version);

		c[GC_HOSTS]++;
		c[h->alive ? GC_ALIVE : GC_NOT_ALIVE]++;
		alive += h->alive;
		c[GC_UNACCOUNTED] += !h->alive && h->provisioned == STATE_SUCCESS;
		c[GC_AT_DESIRED] += at_version(h, v->current_version);
		c[GC_BEHIND] += behind;
		c[GC_FAILED] += host_failed(h);
		c[GC_PAUSED] += h->paused != NULL;
	}
	for (int k = 0; k < _GC_MAX; k++) {
		_cleanup_(freep) size_t *column = calloc(n_groups ? n_groups : 1, sizeof(*column));
		if (!column)
			return -ENOMEM;
		for (size_t g = 0; g < n_groups; g++)
			column[g] = counts[g * _GC_MAX + k];
		if ((r = per_group(out, group_families[k].name, group_families[k].help, groups,
				   column, n_groups)) < 0)
			return r;
	}
	*ret_alive = alive;
	return 0;
}

/* Hosts by running version, and those running none. */
static int families_versions(const struct fleet_view *v, struct buf *out)
{
	_cleanup_(freep) const char **versions = NULL;
	_cleanup_(freep) size_t *counts = NULL;
	size_t n = 0, none = 0;
	int r;

	if ((r = distinct(v, true, &versions, &n)) < 0)
		return r;
	if (!(counts = calloc(n ? n : 1, sizeof(*counts))))
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		if (v->hosts[i].running_version)
			counts[value_index(versions, n, v->hosts[i].running_version)]++;
		else
			none++;
	}
	r = metrics_family(out, "orchestrate_fleet_hosts_running_version", "gauge",
			   "Hosts by the version they run (running_version/HOST).");
	for (size_t k = 0; r >= 0 && k < n; k++)
		if (*versions[k])	/* "" is the hosts under none */
			r = sample(out, "orchestrate_fleet_hosts_running_version",
				   (const char *[]){ "version", versions[k], NULL }, (double)counts[k]);
	if (r < 0)
		return r;
	return gauge(out, "orchestrate_fleet_hosts_unversioned",
		     "Hosts running no version (no valid running_version/HOST).", (double)none);
}

/* Hosts by puppet and validation state, as the totals of `status` count
 * them: every state the type allows, and "none", each with its sample (0
 * too), so that a rule never sees a series vanish. */
static int family_states(const struct fleet_view *v, struct buf *out)
{
	static const enum status_type types[] = { STATUS_PUPPET, STATUS_VALIDATION };
	static const enum status_state order[] = {
		STATE_FAILED, STATE_PENDING, STATE_RUNNING, STATE_SUCCESS,
	};
	const char *name = "orchestrate_fleet_hosts_state";
	int r = metrics_family(out, name, "gauge",
			       "Hosts by the state of their config run (type puppet) and of their validation, as status counts them (none: no state).");

	for (size_t t = 0; r >= 0 && t < ELEMENTSOF(types); t++) {
		size_t counts[_STATE_MAX + 1] = { 0 };
		for (size_t i = 0; i < v->n; i++) {
			enum status_state s = types[t] == STATUS_PUPPET ? v->hosts[i].puppet :
					      v->hosts[i].validation;
			counts[s >= 0 && s < _STATE_MAX ? (size_t)s : _STATE_MAX]++;
		}
		const char *type = status_type_name(types[t]);
		for (size_t k = 0; r >= 0 && k < ELEMENTSOF(order); k++)
			if (status_state_allowed(types[t], order[k]))
				r = sample(out, name,
					   (const char *[]){ "type", type, "state",
							     status_state_name(order[k]), NULL },
					   (double)counts[order[k]]);
		if (r >= 0)
			r = sample(out, name, (const char *[]){ "type", type, "state", "none", NULL },
				   (double)counts[_STATE_MAX]);
	}
	return r;
}

struct waiting_host {
	const struct host_view *h;
	int reason;
	int64_t since;
};

static int waiting_cmp(const void *a, const void *b)
{
	const struct waiting_host *x = a, *y = b;
	/* the longest wait first (an unknown start last), then by name */
	if (x->since != y->since) {
		if (!x->since || !y->since)
			return x->since ? -1 : 1;
		return x->since < y->since ? -1 : 1;
	}
	return strcmp(x->h->host, y->h->host);
}

/* Waiting hosts by reason, since when the longest of each has waited, and
 * the longest waits host by host. */
static int families_waiting(const struct fleet_view *v, struct buf *out)
{
	_cleanup_(freep) struct waiting_host *w = calloc(v->n ? v->n : 1, sizeof(*w));
	size_t counts[_REASON_MAX] = { 0 }, n = 0;
	int64_t oldest[_REASON_MAX] = { 0 };
	const char *name;
	int r;

	if (!w)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		int k = host_wait_reason(&v->hosts[i]);
		if (k < 0)
			continue;
		w[n] = (struct waiting_host){ &v->hosts[i], k, host_wait_since(&v->hosts[i]) };
		counts[k]++;
		if (w[n].since > 0 && (!oldest[k] || w[n].since < oldest[k]))
			oldest[k] = w[n].since;
		n++;
	}
	qsort(w, n, sizeof(*w), waiting_cmp);

	name = "orchestrate_fleet_hosts_waiting";
	r = metrics_family(out, name, "gauge",
			   "Hosts that wait (pending, or paused) and have not failed, by why: dependency, slot, group, canary, halt, pause, splay, unknown, other.");
	for (int k = 0; r >= 0 && k < _REASON_MAX; k++)
		r = sample(out, name, (const char *[]){ "reason", wait_reasons[k], NULL },
			   (double)counts[k]);
	if (r < 0)
		return r;
	name = "orchestrate_fleet_waiting_since_timestamp_seconds";
	r = metrics_family(out, name, "gauge",
			   "Per reason, since when (unix time of its pending state) the host waiting longest waits; no sample when none waits.");
	for (int k = 0; r >= 0 && k < _REASON_MAX; k++)
		if (oldest[k])
			r = sample(out, name, (const char *[]){ "reason", wait_reasons[k], NULL },
				   (double)oldest[k]);
	if (r < 0)
		return r;
	name = "orchestrate_fleet_waiting_host_since_timestamp_seconds";
	r = metrics_family(out, name, "gauge",
			   "The " STRINGIFY(WAITING_HOSTS_SHOWN) " hosts waiting longest, each with since when it waits (unix time) and why; the only series per host.");
	for (size_t i = 0; r >= 0 && i < n && i < WAITING_HOSTS_SHOWN; i++) {
		const struct host_view *h = w[i].h;
		if (!w[i].since)
			break;	/* sorted last: no time to alert on */
		r = sample(out, name,
			   (const char *[]){ "host", h->host, "group", h->group ? h->group : "",
					     "reason", wait_reasons[w[i].reason], NULL },
			   (double)w[i].since);
	}
	return r;
}

/*
 * The rollout: the desired version, the trigger, the halt and revert, the
 * failure budget, the progress deadline and the times progress is judged
 * by.  The last progress is the newest validation success of a host that
 * runs the desired version (a node writes it in the txn that moves its
 * running_version): etcd keeps no time of the trigger itself, so before the
 * first host arrives there is none, and the daemons' own progress_deadline
 * halt is what speaks then.
 */
static int families_rollout(const struct metrics_fleet *m, size_t alive, struct buf *out)
{
	const struct fleet_view *v = m->view;
	const struct rollout_state *s = m->rollout;
	const struct rollout_policy *p = m->policy;
	bool current = s && s->version && v->current_version;
	long budget = p ? render_failure_budget(p, alive) : -1;
	int64_t progress = 0, change = 0;
	const char *name = "orchestrate_fleet_desired_version_info";
	int r;

	for (size_t i = 0; i < v->n; i++) {
		const struct host_view *h = &v->hosts[i];
		if (h->changed > change)
			change = h->changed;
		if (at_version(h, v->current_version) && h->validation == STATE_SUCCESS &&
		    h->state_time[STATUS_VALIDATION] > progress)
			progress = h->state_time[STATUS_VALIDATION];
	}
	if ((r = metrics_family(out, name, "gauge",
				"The desired version (current_version), and the one before it (previous_version, \"\" when none); no sample when none is set.")) < 0 ||
	    (v->current_version &&
	     (r = sample(out, name,
			 (const char *[]){ "version", v->current_version, "previous",
					   v->previous_version ? v->previous_version : "", NULL },
			 1)) < 0) ||
	    (r = gauge_if(out, "orchestrate_fleet_trigger_revision",
			  "The etcd revision of the trigger (current_version's mod revision): it changes with every trigger_update, rollback or revert.",
			  current && s->trigger > 0, (double)(current ? s->trigger : 0))) < 0 ||
	    (r = gauge(out, "orchestrate_fleet_rollout_halted",
		       "1 when the rollout of the desired version is halted (rollout/halted of this trigger), else 0.",
		       current && s->halted)) < 0 ||
	    (r = gauge(out, "orchestrate_fleet_rollout_reverted",
		       "1 when the desired version is where a halted rollout reverted to (auto_revert), else 0.",
		       current && s->reverted)) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_rollout_halt_timestamp_seconds",
			  "When the rollout halted (unix time); no sample when it is not halted or reverted.",
			  current && (s->halted || s->reverted) && s->halt.time > 0,
			  (double)(current ? s->halt.time : 0))) < 0 ||
	    (r = gauge(out, "orchestrate_fleet_rollout_failures",
		       "Hosts that failed the rollout of the desired version (rollout/failed records of this trigger): what the failure budget counts.",
		       (double)(current ? s->failed : 0))) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_failure_budget",
			  "The failures the policy allows before the rollout halts (max_failures, max_fail_percent of the alive hosts); no sample without a budget.",
			  budget >= 0, (double)budget)) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_failure_budget_left",
			  "The failure budget minus the failures (negative: above the budget); no sample without a budget.",
			  budget >= 0, (double)budget - (double)(current ? s->failed : 0))) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_policy_progress_deadline_seconds",
			  "The policy's progress_deadline: how long a rollout may go without progress; no sample when not set.",
			  p && p->progress_deadline > 0, (double)(p ? p->progress_deadline : 0))) < 0 ||
	    (r = gauge(out, "orchestrate_fleet_policy_valid",
		       "0 when rollout/policy holds no valid policy (the nodes then refuse to start runs under it), else 1.",
		       !m->policy_invalid)) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_last_progress_timestamp_seconds",
			  "The newest validation success of a host running the desired version (unix time); no sample when no host runs it.",
			  progress > 0, (double)progress)) < 0 ||
	    (r = gauge_if(out, "orchestrate_fleet_last_change_timestamp_seconds",
			  "The newest state change of any host (unix time); no sample when none is recorded.",
			  change > 0, (double)change)) < 0)
		return r;
	return 0;
}

int metrics_fleet_render(const struct metrics_fleet *m, struct buf *out)
{
	const struct fleet_view *v = m->view;
	size_t alive = 0;
	int r;

	if ((r = gauge(out, "orchestrate_fleet_read_timestamp_seconds",
		       "When orchestrate read the fleet for this file (unix time): a stale file is an old one.",
		       (double)m->now)) < 0 ||
	    (r = gauge(out, "orchestrate_fleet_read_revision",
		       "The etcd revision the fleet was read at.", (double)v->revision)) < 0 ||
	    (r = families_per_group(v, out, &alive)) < 0 ||
	    (r = families_versions(v, out)) < 0 ||
	    (r = family_states(v, out)) < 0 ||
	    (r = families_waiting(v, out)) < 0 ||
	    (r = families_rollout(m, alive, out)) < 0)
		return r;
	return 0;
}
