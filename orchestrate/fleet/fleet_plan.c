/*
 * fleet_plan.c — `orchestrate plan`: the rollout a trigger would start,
 * simulated with the nodes' own model and decision (fleet_plan.h).
 *
 * The simulation keeps a fleet model loaded with the rollout keys as read
 * (policy, holders, failure and canary records, halt, promote), with
 * current_version moved to the planned version when that is a new trigger,
 * so that the records of the old rollout stop counting exactly as they do on
 * a node.  Each stage's queue is put into the model's holders a window at a
 * time (a host's rank depends only on the holders ahead of it, so the window
 * need hold no more than the stage's slots): that keeps a plan of 10,000
 * hosts linear in the hosts rather than quadratic.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "fleet/fleet_model.h"
#include "fleet/fleet_plan.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

static const char *const wait_names[_PLAN_WAIT_MAX] = {
	[PLAN_WAIT_NONE] = "none",
	[PLAN_WAIT_HALTED] = "halted",
	[PLAN_WAIT_PAUSED] = "paused",
	[PLAN_WAIT_DEPENDENCY] = "dependency",
	[PLAN_WAIT_STAGE] = "group",
	[PLAN_WAIT_BUDGET] = "budget",
};

const char *plan_wait_name(enum plan_wait w)
{
	return w < _PLAN_WAIT_MAX ? wait_names[w] : "none";
}

/* --- medians -------------------------------------------------------------------------- */

static int int64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int64_t plan_median(int64_t *v, size_t n)
{
	if (n == 0)
		return -1;
	qsort(v, n, sizeof(*v), int64_cmp);
	return v[(n - 1) / 2];
}

int64_t run_history_median(const struct run_history *h)
{
	int64_t d[FLEET_HISTORY_MAX];
	size_t n = 0;

	for (size_t i = 0; i < h->n && i < FLEET_HISTORY_MAX; i++)
		if (h->runs[i].result == RUN_SUCCESS && h->runs[i].duration >= 0)
			d[n++] = h->runs[i].duration;
	return plan_median(d, n);
}

/* --- release ---------------------------------------------------------------------------- */

void fleet_plan_release(struct fleet_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->hosts[i].host);
		free(p->hosts[i].group);
		free(p->hosts[i].running);
		free(p->hosts[i].why);
	}
	free(p->hosts);
	for (size_t i = 0; i < p->n_batches; i++)
		free(p->batches[i].hosts);
	free(p->batches);
	for (size_t i = 0; i < p->n_groups; i++)
		free(p->groups[i].group);
	free(p->groups);
	free(p->version);
	free(p->current);
	free(p->halted);
	rollout_policy_release(&p->policy);
	*p = (struct fleet_plan){ 0 };
}

/* --- the simulation's model ---------------------------------------------------------------- */

/* The simulation: the model, where it is in revisions, and the plan. */
struct sim {
	struct fleet_model m;
	char *own_host;		/* the model's own host and group, put back before release */
	char *own_group;
	int64_t next_rev;	/* for the records the simulation writes */
	struct fleet_plan *p;
	const struct plan_input *in;
};

static int sim_put(struct sim *s, const char *key, const char *value)
{
	struct etcd_event ev = { .type = ETCD_EVENT_PUT };
	unsigned changed = 0;

	ev.kv.key = (char *)key;
	ev.kv.key_len = strlen(key);
	ev.kv.value = (char *)value;
	ev.kv.value_len = strlen(value);
	ev.kv.mod_revision = ev.kv.create_revision = s->next_rev++;
	return fleet_model_apply(&s->m, &ev, 1, &changed);
}

/* A record of the planned rollout under key (a canary's, the promote). */
static int sim_record(struct sim *s, const char *key, const char *reason)
{
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = { .version = s->p->version, .trigger = s->m.trigger,
				      .reason = (char *)reason };
	int r = rollout_record_encode(&rec, &value);
	return r < 0 ? r : sim_put(s, key, value);
}

/* Loads the rollout keys as read, then moves current_version to the planned
 * version when that is a new trigger (its revision after every read one). */
static int sim_load(struct sim *s)
{
	const struct etcd_kv_list *l = s->in->rollout;
	int64_t top = 0;
	int r;

	for (size_t i = 0; i < l->n; i++) {
		struct etcd_event ev = { .type = ETCD_EVENT_PUT, .kv = l->kvs[i] };
		unsigned changed = 0;
		if ((r = fleet_model_apply(&s->m, &ev, 1, &changed)) < 0)
			return r;
		if (l->kvs[i].mod_revision > top)
			top = l->kvs[i].mod_revision;
	}
	if (s->in->view->revision > top)
		top = s->in->view->revision;
	s->next_rev = top + 1;
	return 0;
}

static void sim_release(struct sim *s)
{
	/* the model frees its own host and group */
	s->m.host = s->own_host;
	s->m.group = s->own_group;
	fleet_model_release(&s->m);
}

/* --- classification ----------------------------------------------------------------------- */

static int set_why(struct plan_host *h, enum plan_wait w, const char *why)
{
	h->fate = PLAN_WAIT;
	h->wait = w;
	free(h->why);
	h->why = why ? strdup(why) : NULL;
	return why && !h->why ? -ENOMEM : 0;
}

static int64_t median_of(const struct plan_input *in, const char *host)
{
	size_t lo = 0, hi = in->n_histories;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(in->history_hosts[mid], host);
		if (c == 0)
			return in->medians[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* What a node checks before it asks for a slot, in its order
 * (node_evaluate_run): alive, at the version, paused, dependencies.  The
 * halt comes first on a node, but is said after, for the hosts that would
 * have run. */
static int classify(const struct host_view *v, const char *version, struct plan_host *h)
{
	if (!(h->host = strdup(v->host)) || (v->group && !(h->group = strdup(v->group))) ||
	    (v->running_version && !(h->running = strdup(v->running_version))))
		return -ENOMEM;
	h->provisioned = v->provisioned == STATE_SUCCESS;
	h->fate = PLAN_RUN;	/* a candidate, until the simulation says */
	if (!v->alive)
		h->fate = PLAN_DEAD;
	else if (v->running_version && strcmp(v->running_version, version) == 0)
		h->fate = PLAN_AT_VERSION;
	else if (v->paused)
		return set_why(h, PLAN_WAIT_PAUSED, v->paused);
	else if (v->puppet == STATE_PENDING && v->wait && strcmp(v->wait, "dependency") == 0)
		return set_why(h, PLAN_WAIT_DEPENDENCY, v->detail);
	/* mid-rollout: it holds its slot, first in the queue */
	h->in_progress = h->fate == PLAN_RUN && v->puppet == STATE_RUNNING;
	return 0;
}

static int plan_hosts(struct plan_input const *in, struct fleet_plan *p)
{
	const struct fleet_view *v = in->view;
	int r;

	p->hosts = calloc(v->n ? v->n : 1, sizeof(*p->hosts));
	if (!p->hosts)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		if (!schema_name_valid(v->hosts[i].host))
			continue;
		struct plan_host *h = &p->hosts[p->n++];
		h->median = median_of(in, v->hosts[i].host);
		if ((r = classify(&v->hosts[i], p->version, h)) < 0)
			return r;
		if (v->hosts[i].alive)
			p->alive++;
	}
	return 0;
}

/* --- the queue of a stage --------------------------------------------------------------------- */

struct queued {
	size_t host;		/* index into plan.hosts */
	int64_t holder;		/* its holder key's create revision; INT64_MAX: none */
};

static int queued_cmp(const void *a, const void *b)
{
	const struct queued *x = a, *y = b;
	if (x->holder != y->holder)
		return x->holder < y->holder ? -1 : 1;
	return (x->host > y->host) - (x->host < y->host);
}

static int64_t holder_revision(const struct fleet_model *m, const char *host)
{
	for (size_t i = 0; i < m->n_holders; i++)
		if (strcmp(m->holders[i].host, host) == 0)
			return m->holders[i].create_revision;
	return INT64_MAX;
}

static size_t host_stage(const struct fleet_plan *p, const struct plan_host *h)
{
	return p->policy_state ? rollout_policy_stage(&p->policy, h->group) : 0;
}

/* The stage's candidates, the hosts already queued first (by create
 * revision), then by name (the hosts are sorted by name). */
static int stage_queue(struct sim *s, size_t stage, const int64_t *holders, struct queued **ret,
		       size_t *ret_n)
{
	struct fleet_plan *p = s->p;
	struct queued *q = calloc(p->n ? p->n : 1, sizeof(*q));
	size_t n = 0;

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		if (p->hosts[i].fate == PLAN_RUN && p->hosts[i].batch == 0 &&
		    host_stage(p, &p->hosts[i]) == stage)
			q[n++] = (struct queued){ i, holders[i] };
	qsort(q, n, sizeof(*q), queued_cmp);
	*ret = q;
	*ret_n = n;
	return 0;
}

/* The alive hosts of a stage: what max_percent is a share of. */
static size_t stage_alive(const struct fleet_plan *p, size_t stage)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n; i++)
		n += p->hosts[i].fate != PLAN_DEAD && host_stage(p, &p->hosts[i]) == stage;
	return n;
}

/* The stage gate of fleet_facts_stage_ready(): every alive host of the earlier
 * groups at the version.  Returns the first host that will not be (index),
 * or p->n when none, and *ret_behind how many. */
static size_t stage_blocker(const struct fleet_plan *p, size_t stage, size_t *ret_behind)
{
	size_t first = p->n, behind = 0;

	for (size_t i = 0; p->policy.n_groups && i < p->n; i++) {
		const struct plan_host *h = &p->hosts[i];
		if (h->fate != PLAN_WAIT || !h->group ||
		    rollout_policy_stage(&p->policy, h->group) >= p->policy.n_groups ||
		    rollout_policy_stage(&p->policy, h->group) >= stage)
			continue;
		if (first == p->n)
			first = i;
		behind++;
	}
	*ret_behind = behind;
	return first;
}

/* --- the batches --------------------------------------------------------------------------- */

/* Puts the first n of q into the model as the stage's holders, in order. */
static int sim_window(struct sim *s, const struct queued *q, size_t n)
{
	struct fleet_model *m = &s->m;

	rollout_holders_free(m->holders, m->n_holders);
	m->n_holders = 0;
	if (ARRAY_GROW(m->holders, m->cap_holders, n ? n : 1, 8) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct plan_host *h = &s->p->hosts[q[i].host];
		struct rollout_holder *hd = &m->holders[i];
		*hd = (struct rollout_holder){ strdup(h->host), h->group ? strdup(h->group) : NULL,
					       (int64_t)i + 1 };
		m->n_holders = i + 1;
		if (!hd->host || (h->group && !hd->group))
			return -ENOMEM;
	}
	return 0;
}

/* Asks the model as host h would: fleet_model_decide() with its slot limit,
 * queued, counting the alive hosts when the budget asks for them. */
static int sim_ask(struct sim *s, const struct plan_host *h, long limit,
		   struct rollout_decision *d)
{
	struct rollout_ask ask = { .limit = limit, .alive = -1, .queued = true };
	int r;

	s->m.host = h->host;
	s->m.group = h->group;
	r = fleet_model_decide(&s->m, &ask, d);
	if (r >= 0 && d->verdict == ROLLOUT_COUNT_ALIVE) {
		free(d->halt_reason);
		ask.alive = (long)s->p->alive;
		r = fleet_model_decide(&s->m, &ask, d);
	}
	return r;
}

static int batch_add(struct fleet_plan *p, size_t stage, bool canary, bool promote_before,
		     const struct queued *q, size_t n)
{
	struct plan_batch *nb = realloc(p->batches, (p->n_batches + 1) * sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	p->batches = nb;
	struct plan_batch *b = &p->batches[p->n_batches];
	*b = (struct plan_batch){ .stage = stage, .canary = canary,
				  .promote_before = promote_before, .n = n };
	b->group = stage < p->policy.n_groups ? p->policy.groups[stage] : NULL;
	if (!(b->hosts = calloc(n ? n : 1, sizeof(*b->hosts))))
		return -ENOMEM;
	p->n_batches++;
	for (size_t i = 0; i < n; i++) {
		b->hosts[i] = q[i].host;
		p->hosts[q[i].host].batch = p->n_batches;
	}
	return 0;
}

/* Every host of q (and of the later stages, the caller's loop) waits. */
static int queue_wait(struct sim *s, const struct queued *q, size_t n, enum plan_wait w,
		      const char *why)
{
	int r;
	for (size_t i = 0; i < n; i++)
		if ((r = set_why(&s->p->hosts[q[i].host], w, why)) < 0)
			return r;
	return 0;
}

/* Records the canaries of a batch that ran as such (each validated, as the
 * plan assumes every run does). */
static int sim_canaries(struct sim *s, const struct queued *q, size_t n)
{
	int r;
	for (size_t i = 0; i < n; i++) {
		_cleanup_(freep) char *key = NULL;
		if (asprintf(&key, "%s%s", s->m.k_canary_dir, s->p->hosts[q[i].host].host) < 0)
			return -ENOMEM;
		if ((r = sim_record(s, key, NULL)) < 0)
			return r;
	}
	return 0;
}

/*
 * One batch of a stage's queue q[0..n): asks the hosts at the head, in
 * order, until one would not start.  Returns how many started (the batch),
 * 0 when a promote is awaited (*ret_promote), or -ECANCELED when the budget
 * halts the rollout (*ret_halt: why).
 */
static int sim_batch(struct sim *s, const struct queued *q, size_t n, long limit,
		     bool *ret_canary, bool *ret_promote, char **ret_halt)
{
	const struct rollout_policy *pol = &s->m.policy;
	size_t window = limit > 0 ? (size_t)limit : pol->canary > 0 ? (size_t)pol->canary : 1;
	size_t started = 0;
	int r;

	if (window > n)
		window = n;
	if ((r = sim_window(s, q, window)) < 0)
		return r;
	for (size_t i = 0; i < window; i++) {
		_cleanup_(freep) char *halt = NULL;
		struct rollout_decision d = { 0 };
		if ((r = sim_ask(s, &s->p->hosts[q[i].host], limit, &d)) < 0)
			return r;
		halt = d.halt_reason;
		if (d.verdict == ROLLOUT_HALT) {
			*ret_halt = TAKE_PTR(halt);
			return -ECANCELED;
		}
		if (d.verdict == ROLLOUT_WAIT_CANARY && i == 0)
			*ret_promote = true;
		if (d.verdict != ROLLOUT_START)
			break;
		*ret_canary = d.canary;
		if (!d.ranked)
			return (int)n;	/* no limit: the whole stage at once */
		started++;
	}
	return (int)started;
}

/* Lets the canaries' promote happen in the model (by the nodes with
 * auto_promote, else by an operator). */
static int sim_promote(struct sim *s)
{
	return sim_record(s, s->m.k_promoted, "plan");
}

/* The batches of one stage, until its queue is empty or nothing starts. */
static int sim_stage(struct sim *s, size_t stage, const int64_t *holders, bool *ret_halted)
{
	struct fleet_plan *p = s->p;
	_cleanup_(freep) struct queued *q = NULL;
	size_t n = 0, at = 0;
	bool promote_before = false, promoted_here = false;
	long limit = 0;
	int r;

	if ((r = stage_queue(s, stage, holders, &q, &n)) < 0 || n == 0)
		return r;
	if (p->policy_state && p->policy.max_parallel > 0)
		limit = p->policy.max_parallel;
	else if (p->policy_state && p->policy.max_percent > 0)
		limit = rollout_percent_limit(&p->policy, stage_alive(p, stage));
	while (at < n) {
		_cleanup_(freep) char *halt = NULL;
		bool canary = false, promote = false;
		r = sim_batch(s, q + at, n - at, limit, &canary, &promote, &halt);
		if (r == -ECANCELED) {
			*ret_halted = true;
			return queue_wait(s, q + at, n - at, PLAN_WAIT_BUDGET, halt);
		}
		if (r < 0)
			return r;
		if (r == 0 && promote && !promoted_here) {
			if ((r = sim_promote(s)) < 0)
				return r;
			promote_before = promoted_here = true;
			continue;
		}
		if (r == 0)	/* the model gives no slot: not expected, said */
			return queue_wait(s, q + at, n - at, PLAN_WAIT_NONE,
					  "the rollout model gives no slot");
		if ((r = batch_add(p, stage, canary, promote_before, q + at, (size_t)r)) < 0)
			return r;
		if (canary && (r = sim_canaries(s, q + at, p->batches[p->n_batches - 1].n)) < 0)
			return r;
		at += p->batches[p->n_batches - 1].n;
		promote_before = false;
	}
	return 0;
}

/* Why a stage waits for an earlier group: "group dc1: 2 hosts will not reach
 * v2 (web3, paused)". */
static int stage_blocked(struct sim *s, size_t stage, size_t blocker, size_t behind)
{
	struct fleet_plan *p = s->p;
	const struct plan_host *b = &p->hosts[blocker];
	_cleanup_(freep) char *why = NULL;
	int r;

	if (asprintf(&why, "group %s: %zu host%s will not reach %s (%s: %s)", b->group, behind,
		     behind == 1 ? "" : "s", p->version, b->host, plan_wait_name(b->wait)) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		struct plan_host *h = &p->hosts[i];
		if (h->fate == PLAN_RUN && h->batch == 0 && host_stage(p, h) == stage &&
		    (r = set_why(h, PLAN_WAIT_STAGE, why)) < 0)
			return r;
	}
	return 0;
}

static int sim_run(struct sim *s)
{
	struct fleet_plan *p = s->p;
	size_t stages = p->policy_state ? p->policy.n_groups + 1 : 1;
	_cleanup_(freep) int64_t *holders = calloc(p->n ? p->n : 1, sizeof(*holders));
	bool halted = false;
	int r;

	if (!holders)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		holders[i] = holder_revision(&s->m, p->hosts[i].host);
	for (size_t stage = 0; stage < stages; stage++) {
		size_t behind = 0, blocker = stage_blocker(p, stage, &behind);
		if (halted) {
			_cleanup_(freep) struct queued *q = NULL;
			size_t n = 0;
			if ((r = stage_queue(s, stage, holders, &q, &n)) < 0 ||
			    (r = queue_wait(s, q, n, PLAN_WAIT_BUDGET, "the failure budget is spent")) < 0)
				return r;
			continue;
		}
		r = blocker < p->n ? stage_blocked(s, stage, blocker, behind)
				   : sim_stage(s, stage, holders, &halted);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- what the plan says around the batches ------------------------------------------------- */

/* The failure budget in hosts, from rollout_budget_spent() itself: the
 * most failures it lets pass. */
static int plan_budget(struct fleet_plan *p)
{
	p->budget = -1;
	if (p->policy_state != 1 || !rollout_policy_has_budget(&p->policy))
		return 0;
	for (size_t k = 0; k <= p->alive + 1; k++) {
		_cleanup_(freep) char *why = NULL;
		int r = rollout_budget_spent(&p->policy, k, (long)p->alive, &why);
		if (r < 0)
			return r;
		if (r > 0) {
			p->budget = (long)k - 1;
			break;
		}
	}
	if (p->budget < 0 && p->policy.has_max_failures)
		p->budget = p->policy.max_failures;
	p->budget_spent = p->budget >= 0 && (long)p->failed > p->budget;
	return 0;
}

static int group_time_cmp(const void *a, const void *b)
{
	const struct plan_group_time *x = a, *y = b;
	if (!x->group || !y->group)
		return !x->group - !y->group;
	return strcmp(x->group, y->group);
}

static bool same_group(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Each group's median: the median of its hosts' medians. */
static int plan_group_times(struct fleet_plan *p)
{
	_cleanup_(freep) int64_t *v = calloc(p->n ? p->n : 1, sizeof(*v));
	size_t all = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		const struct plan_host *h = &p->hosts[i];
		size_t g;
		for (g = 0; g < p->n_groups; g++)
			if (same_group(p->groups[g].group, h->group))
				break;
		if (g < p->n_groups)
			continue;
		struct plan_group_time *ng = realloc(p->groups, (p->n_groups + 1) * sizeof(*ng));
		if (!ng)
			return -ENOMEM;
		p->groups = ng;
		struct plan_group_time *t = &p->groups[p->n_groups++];
		*t = (struct plan_group_time){ .group = h->group ? strdup(h->group) : NULL };
		if (h->group && !t->group)
			return -ENOMEM;
		size_t k = 0;
		for (size_t j = i; j < p->n; j++)
			if (same_group(p->hosts[j].group, h->group) && p->hosts[j].median >= 0)
				v[k++] = p->hosts[j].median;
		t->hosts = k;
		t->median = plan_median(v, k);
	}
	qsort(p->groups, p->n_groups, sizeof(*p->groups), group_time_cmp);
	for (size_t i = 0; i < p->n; i++)
		if (p->hosts[i].median >= 0)
			v[all++] = p->hosts[i].median;
	p->median = plan_median(v, all);
	return 0;
}

static int64_t group_median(const struct fleet_plan *p, const char *group)
{
	for (size_t g = 0; g < p->n_groups; g++)
		if (same_group(p->groups[g].group, group))
			return p->groups[g].median;
	return -1;
}

/* A batch takes as long as its slowest host (its own median, else its
 * group's, else the fleet's), plus min_healthy_time, which a validated host
 * holds its slot for. */
static void plan_estimates(struct fleet_plan *p)
{
	p->estimate = p->n_batches ? 0 : -1;
	for (size_t b = 0; b < p->n_batches; b++) {
		struct plan_batch *pb = &p->batches[b];
		pb->estimate = -1;
		for (size_t i = 0; i < pb->n; i++) {
			const struct plan_host *h = &p->hosts[pb->hosts[i]];
			int64_t t = h->median >= 0 ? h->median : group_median(p, h->group);
			if (t < 0)
				t = p->median;
			if (t > pb->estimate)
				pb->estimate = t;
		}
		if (pb->estimate >= 0 && p->policy_state == 1)
			pb->estimate += p->policy.min_healthy_time;
		/* auto_promote waits for canaries without a failure (node_promote_if_due) */
		if (pb->promote_before && (!p->policy.auto_promote || p->failed > 0))
			p->manual_promote = true;
		if (pb->estimate < 0 || p->estimate < 0)
			p->estimate = -1;
		else
			p->estimate += pb->estimate;
	}
}

/* --- the plan ------------------------------------------------------------------------------ */

/* The version and the rollout state of it, from the model as loaded. */
static int plan_rollout(struct sim *s, const char *version)
{
	struct fleet_plan *p = s->p;
	struct fleet_model *m = &s->m;
	_cleanup_(rollout_record_releasep) struct rollout_record halt = { 0 };

	if (m->desired_known && m->desired && !(p->current = strdup(m->desired)))
		return -ENOMEM;
	if (!version)
		version = p->current;
	if (!version)
		return 0;
	if (!(p->version = strdup(version)))
		return -ENOMEM;
	p->new_trigger = !p->current || strcmp(p->current, version) != 0;
	if (p->new_trigger) {
		int r = sim_put(s, m->k_version, version);
		if (r < 0)
			return r;
	}
	p->failed = fleet_model_failures(m);
	p->canaries_done = fleet_model_canaries(m);
	p->promoted = fleet_model_promoted(m);
	if (fleet_model_halted(m, &halt) && !(p->halted = strdup(halt.reason ? halt.reason : "")))
		return -ENOMEM;
	return 0;
}

static int plan_halted(struct fleet_plan *p)
{
	int r;
	for (size_t i = 0; i < p->n; i++)
		if (p->hosts[i].fate == PLAN_RUN &&
		    (r = set_why(&p->hosts[i], PLAN_WAIT_HALTED, p->halted)) < 0)
			return r;
	return 0;
}

static int plan_fill(struct sim *s, const char *version)
{
	struct fleet_plan *p = s->p;
	int r;

	if ((r = sim_load(s)) < 0 || (r = plan_rollout(s, version)) < 0 || !p->version)
		return r;
	p->policy_state = s->m.policy_state;
	if ((r = plan_hosts(s->in, p)) < 0)
		return r;
	/* the model's policy, read-only until the model is released */
	p->policy = s->m.policy;
	r = plan_budget(p);
	if (r >= 0)
		r = p->halted ? plan_halted(p) : sim_run(s);
	p->policy = (struct rollout_policy){ 0 };
	if (r < 0)
		return r;
	if ((r = plan_group_times(p)) < 0)
		return r;
	for (size_t i = 0; i < p->n; i++) {
		p->counts[p->hosts[i].fate]++;
		p->unaccounted += p->hosts[i].fate == PLAN_DEAD && p->hosts[i].provisioned;
	}
	/* keep the model's policy: the model is done with it */
	p->policy = s->m.policy;
	s->m.policy = (struct rollout_policy){ 0 };
	plan_estimates(p);
	return 0;
}

int fleet_plan_build(const struct plan_input *in, struct fleet_plan *ret)
{
	static char *const no_services[] = { NULL };
	struct fleet_plan p = { .revision = in->view->revision, .budget = -1, .median = -1,
				.estimate = -1 };
	struct sim s = { .p = &p, .in = in };
	int r;

	if (in->version && !schema_name_valid(in->version))
		return -EINVAL;
	if ((r = fleet_model_init(&s.m, in->prefix ? in->prefix : "", "plan", NULL,
				  no_services)) < 0)
		return r;
	s.own_host = s.m.host;
	s.own_group = s.m.group;
	r = plan_fill(&s, in->version);
	sim_release(&s);
	if (r < 0) {
		fleet_plan_release(&p);
		return r;
	}
	*ret = p;
	return 0;
}

/* --- reading --------------------------------------------------------------------------------- */

struct plan_read {
	struct fleet_view view;
	struct etcd_kv_list rollout;
	char **hosts;		/* with a history, sorted */
	int64_t *medians;
	size_t n;
};

static void plan_read_release(struct plan_read *pr)
{
	fleet_view_release(&pr->view);
	etcd_kv_list_release(&pr->rollout);
	strv_free(pr->hosts);
	free(pr->medians);
	*pr = (struct plan_read){ 0 };
}

static void plan_read_releasep(struct plan_read *pr) { plan_read_release(pr); }

/* rollout/ and current_version (exact) at the view's revision, in one list. */
static int read_rollout(struct fleet *f, struct plan_read *pr)
{
	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *dir = key_rollout_dir(P);
	_cleanup_(freep) char *cur = key_current_version(P);
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list cv = ETCD_KV_LIST_INIT;
	int r;

	if (!dir || !cur)
		return -ENOMEM;
	if ((r = etcd_get_prefix(f->etcd, dir, 0, pr->view.revision, &pr->rollout)) < 0 ||
	    (r = etcd_get_prefix(f->etcd, cur, 0, pr->view.revision, &cv)) < 0)
		return r;
	for (size_t i = 0; i < cv.n; i++) {
		if (!kv_is(&cv.kvs[i], cur))
			continue;
		if (ARRAY_GROW(pr->rollout.kvs, pr->rollout.cap, pr->rollout.n + 1, 8) < 0)
			return -ENOMEM;
		pr->rollout.kvs[pr->rollout.n++] = cv.kvs[i];
		memset(&cv.kvs[i], 0, sizeof(cv.kvs[i]));
	}
	return 0;
}

/* history/, each host's value reduced to its median (10,000 histories are
 * never held decoded at once). */
static int read_medians(struct plan_read *pr, const char *dir, const struct etcd_kv_list *list)
{
	size_t count = 0;
	int r;

	if (!(pr->medians = calloc(list->n ? list->n : 1, sizeof(*pr->medians))))
		return -ENOMEM;
	for (size_t i = 0; i < list->n; i++) {
		_cleanup_(run_history_releasep) struct run_history h = { 0 };
		_cleanup_(freep) char *copy = NULL;
		char *host;

		if (key_split(list->kvs[i].key, list->kvs[i].key_len, dir, &host, 1, &copy) != 1)
			continue;
		r = run_history_decode(list->kvs[i].value, list->kvs[i].value_len, &h);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			continue;
		if ((r = strv_push(&pr->hosts, &count, host)) < 0)
			return r;
		pr->medians[pr->n++] = run_history_median(&h);
	}
	return 0;
}

/* The history range on a client of its own, beside the view's reads: it is
 * as big as the status range at 10,000 hosts, and it only feeds the
 * estimate, so it need not be pinned to the view's revision. */
struct history_lane {
	struct etcd_client *etcd;
	const char *dir;
	struct etcd_kv_list list;
	int r;
};

static void *history_lane_run(void *userdata)
{
	struct history_lane *l = userdata;
	l->r = etcd_get_prefix(l->etcd, l->dir, 0, 0, &l->list);
	return NULL;
}

/* One attempt: the view, rollout/ at its revision, and history/ (in a
 * thread when f->parallel allows one, else at the view's revision). */
static int plan_read_once(struct fleet *f, struct plan_read *pr)
{
	_cleanup_(freep) char *dir = key_history_dir(fleet_prefix(f));
	_cleanup_(etcd_client_freep) struct etcd_client *second = NULL;
	struct history_lane lane = { .dir = dir, .list = ETCD_KV_LIST_INIT, .r = -EAGAIN };
	pthread_t thread;
	bool threaded = false;
	int r;

	if (!dir)
		return -ENOMEM;
	if (f->parallel && etcd_client_new(f->parallel, &second) >= 0) {
		lane.etcd = second;
		threaded = pthread_create(&thread, NULL, history_lane_run, &lane) == 0;
	}
	r = fleet_view_read(f, &pr->view);
	if (threaded)
		pthread_join(thread, NULL);
	if (r >= 0)
		r = read_rollout(f, pr);
	/* say what failed through the client the caller asks */
	if (r >= 0 && lane.r < 0) {
		etcd_kv_list_release(&lane.list);
		r = etcd_get_prefix(f->etcd, dir, 0, pr->view.revision, &lane.list);
	}
	if (r >= 0)
		r = read_medians(pr, dir, &lane.list);
	etcd_kv_list_release(&lane.list);
	return r;
}

int fleet_plan_read(struct fleet *f, const char *version, struct fleet_plan *ret)
{
	int r = -ESTALE;

	if (version && !name_ok(version))
		return -EINVAL;
	/* a compaction that overtakes the pinned reads reads again, as the view does */
	for (int attempt = 0; attempt < 3 && r == -ESTALE; attempt++) {
		_cleanup_(plan_read_releasep) struct plan_read pr = { 0 };

		if ((r = plan_read_once(f, &pr)) < 0)
			continue;
		struct plan_input in = {
			.prefix = fleet_prefix(f), .version = version, .view = &pr.view,
			.rollout = &pr.rollout, .history_hosts = pr.hosts, .medians = pr.medians,
			.n_histories = pr.n,
		};
		return fleet_plan_build(&in, ret);
	}
	return r;
}
