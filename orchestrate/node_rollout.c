/*
 * node_rollout.c — what a node waits for before a run: its declared
 * dependencies and, under a rollout policy, its turn and a slot.
 *
 * Everything here is answered from the fleet model, at the revision of the
 * event being evaluated: the catalog for dependencies (so a trigger one second
 * after the only mysql host died does not run the nodes that need it), the
 * policy and the holders for slots.  Taking a slot is one write (the holder
 * key, under the node's lease); the node learns its place in the queue from
 * the same stream that carries the holders of every other node.
 *
 * Two policies need more than the model, and read: max_percent (the alive
 * count it is a percentage of) and groups (whether the earlier groups are
 * done).  While an earlier group is behind, a second stream watches
 * running_version/ and alive/, the two things that can end the wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "buf.h"
#include "cleanup.h"
#include "config.h"
#include "log.h"
#include "node_internal.h"
#include "schema.h"

/*
 * The catalog the dependencies are checked against: the model's, when its
 * catalog watches have delivered everything up to the revision the node acts
 * on; else the dependencies' entries read at exactly that revision.  A txn
 * that withdraws the only mysql host and sets the desired version reaches the
 * stream as two frames of one revision (one per watch), and etcd marks no end
 * of a revision: without this a node could start a run between the two.  Only
 * nodes with dependencies, and only then, pay this one small read.
 */
static int node_dependency_catalog(struct node *n, struct catalog *tmp, const struct catalog **ret)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(freep) struct etcd_watch_range *ranges = NULL;
	_cleanup_(freep) char *dir = NULL;
	size_t count;
	int64_t low = INT64_MAX;
	int r;

	*ret = &n->model.catalog;
	if (!n->stream || (r = fleet_model_ranges(&n->model, &ranges, &count)) < 0)
		return 0;
	for (size_t i = FLEET_MODEL_CATALOG_RANGE; i < count; i++) {
		int64_t rev = etcd_watch_range_revision(n->stream, i);
		if (rev < low)
			low = rev;
	}
	if (low >= n->model.revision)
		return 0;
	if (!(dir = key_services_dir(n->fleet.prefix)))
		return -ENOMEM;
	for (size_t i = 0; i < cfg->n_depends; i++) {
		_cleanup_(freep) char *sdir = key_service_dir(n->fleet.prefix, cfg->depends[i].service);
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
		if (!sdir)
			return -ENOMEM;
		if ((r = etcd_get_prefix(n->etcd, sdir, 0, n->model.revision, &kvs)) < 0 ||
		    (r = catalog_from_kvs(&kvs, dir, tmp)) < 0)
			return r;
	}
	catalog_sort(tmp);
	*ret = tmp;
	return 0;
}

/* NULL when every dependency is met, else what is missing (caller frees), and
 * *ret_short the short form for STATUS=.  Out of memory or a failed read is
 * not "met". */
char *node_missing_dependencies(struct node *n, char **ret_short)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT, s = BUF_INIT;
	_cleanup_(catalog_releasep) struct catalog tmp = CATALOG_INIT;
	const struct catalog *cat;
	int r = 0;

	if (cfg->n_depends == 0)
		return NULL;
	r = node_dependency_catalog(n, &tmp, &cat);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf why = BUF_INIT;
		(void)buf_printf(&why, "cannot check dependencies: %s", node_etcd_error(n));
		*ret_short = strdup("dependencies (etcd unreachable)");
		return buf_detach(&why);
	}
	for (size_t i = 0; i < cfg->n_depends && r >= 0; i++) {
		const struct config_depend *d = &cfg->depends[i];
		size_t have = catalog_count_hosts(cat, d->service, d->healthy);
		if ((long)have >= d->count)
			continue;
		if ((r = buf_printf(&b, "%swaiting for %ld %s%s, have %zu", b.len ? "; " : "",
				    d->count, d->healthy ? "healthy " : "", d->service, have)) >= 0)
			r = buf_printf(&s, "%s%ld\u00d7 %s", s.len ? ", " : "", d->count, d->service);
	}
	if (r < 0) {
		*ret_short = strdup("dependencies (out of memory)");
		return strdup("cannot check dependencies: out of memory");
	}
	if (b.len == 0)
		return NULL;
	*ret_short = buf_detach(&s);
	return buf_detach(&b);
}

/* Gives the slot (or the place in the queue for one) back. */
static void node_drop_holder(struct node *n)
{
	if (!n->holding)
		return;
	_cleanup_(freep) char *key = key_rollout_holder(n->fleet.prefix, n->host);
	if (!key || etcd_delete(n->etcd, key) < 0)
		log_warnx("cannot release rollout slot: %s, its lease will", node_etcd_error(n));
	else
		log_debug("rollout slot released");
	n->holding = false;
	n->has_slot = false;
}

void node_unwatch_stage(struct node *n)
{
	n->stage_watch = etcd_watch_stop(n->stage_watch);
}

/* Done with the rollout, or no policy: no slot, no waiting for a group. */
void node_release_slot(struct node *n)
{
	node_drop_holder(n);
	node_unwatch_stage(n);
}

static int node_on_stage_events(const struct etcd_event *ev, size_t count, int64_t revision,
				void *userdata)
{
	if (count > 0)
		node_schedule_evaluate(userdata);
	return 0;
}

/* While the node waits for an earlier group: what can end the wait is a host
 * reaching the version (running_version/) or a host dying or joining
 * (alive/); a new policy comes on the node's own stream.  Watched from the
 * revision the decision was made at. */
static int node_watch_stage(struct node *n, int64_t from)
{
	const char *P = n->fleet.prefix;
	_cleanup_(freep) char *kr = key_running_version_dir(P);
	_cleanup_(freep) char *ka = key_alive_dir(P);

	if (n->stage_watch)
		return 0;
	if (!kr || !ka)
		return -ENOMEM;
	struct etcd_watch_range ranges[] = { { kr, true, from }, { ka, true, from } };
	return etcd_watch_start_ranges(n->etcd, ranges, ELEMENTSOF(ranges), node_watch_idle_ms(n),
				       node_on_stage_events, node_on_watch_error, n,
				       &n->stage_watch);
}

/*
 * Takes a rollout slot when a policy is set.  Returns 1 when the node may run
 * (no policy, or its stage's turn and a slot held), 0 when it must wait — for
 * an earlier group (ret_wait->group set) or for a slot — or a negative code.
 *
 * Slots are counted among the holders of the node's own stage: the first
 * max_parallel of them by create revision hold one.  Holders of other stages
 * are hosts still retrying an earlier group (which keeps this stage waiting
 * anyway) or the unlisted, which must not eat a listed group's slots.
 */
int node_take_slot(struct node *n, struct slot_wait *ret_wait)
{
	const struct rollout_policy *policy = &n->model.policy;
	const struct config *cfg = n->opt.config;
	size_t rank, in_stage;
	long limit = 0, cap;
	bool canary;
	int r;

	if (n->has_slot)
		return 1;
	if (n->model.policy_state == 0) {
		node_release_slot(n);
		return 1;
	}
	/* Until promoted, the canaries are the first hosts to hold a slot: the
	 * ones running now (holders) and those that validated (canary/). */
	canary = policy->canary > 0 && !fleet_model_promoted(&n->model);
	if (policy->n_groups) {
		int64_t revision = 0;
		r = fleet_stage_ready(&n->fleet, policy, cfg->group, n->host, n->model.desired,
				      &ret_wait->group, &ret_wait->behind, &revision);
		if (r < 0)
			return r;
		if (r == 0) {
			node_drop_holder(n);
			return node_watch_stage(n, revision + 1);
		}
		node_unwatch_stage(n);
	}

	if (policy->max_parallel > 0)
		limit = policy->max_parallel;
	else if (policy->max_percent > 0 &&
		 (r = fleet_percent_limit(&n->fleet, policy, cfg->group, &limit)) < 0)
		return r;
	if (limit <= 0 && !canary) {
		node_release_slot(n);
		return 1;	/* groups alone: the whole group at once */
	}
	cap = limit;
	if (canary) {
		size_t done = fleet_model_canaries(&n->model);
		long left = policy->canary > (long)done ? policy->canary - (long)done : 0;
		ret_wait->canaries_done = done;
		if (cap <= 0 || left < cap)
			cap = left;
	}

	if (!n->holding) {
		/* Queued: the place is known once the key comes back on the
		 * stream, so the host waits at least until then: say so in the
		 * same txn (node_wait then finds it said). */
		_cleanup_(fleet_batch_freep) struct fleet_batch *b = NULL;
		_cleanup_(freep) char *detail = node_slot_detail(n);
		_cleanup_(freep) char *said = NULL;
		struct status_extra x = { .wait = "slot" };
		bool say = !node_failed_here(n);
		if (!detail || asprintf(&said, "slot: %s", detail) < 0)
			return -ENOMEM;
		if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
		    (r = fleet_batch_holder(b, n->host, n->model.desired, cfg->group, n->lease)) < 0 ||
		    (say && (r = fleet_batch_status_extra(b, n->host, STATUS_PUPPET, STATE_PENDING,
							  n->model.desired, -1, detail, &x)) < 0) ||
		    (r = fleet_batch_commit(b, NULL)) < 0)
			return r;
		n->holding = true;
		if (say)
			set_str(&n->pending_detail, said);
	}
	/* Our own key reaches the model through the stream, like everyone's:
	 * until it has, the place in the queue is not known yet. */
	ret_wait->limit = limit;
	if (fleet_model_holder_rank(&n->model, &rank, &in_stage) == 0) {
		ret_wait->holders = in_stage + 1;
		return 0;
	}
	ret_wait->holders = in_stage;
	ret_wait->ranked = true;
	ret_wait->rank = rank;
	if ((long)rank < cap) {
		n->has_slot = true;
		n->canary_run = canary;
		if (canary)
			log_info("rollout slot taken as canary %zu of %ld", ret_wait->canaries_done + rank + 1,
				 policy->canary);
		else
			log_info("rollout slot taken (%zu of %ld)", rank + 1, limit);
		return 1;
	}
	/* Past the canaries, promote is what the host waits for first. */
	ret_wait->canary = canary;
	if (ret_wait->canary && policy->auto_promote && rank == 0 &&
	    ret_wait->canaries_done >= (size_t)policy->canary &&
	    fleet_model_failures(&n->model) == 0) {
		/* The first in the queue speaks for it; the txn makes it once. */
		_cleanup_(freep) char *by = NULL;
		if (asprintf(&by, "auto (%s)", n->host) < 0)
			return -ENOMEM;
		r = fleet_promote(&n->fleet, by, n->model.trigger, NULL);
		if (r < 0)
			return r;
		if (r > 0)
			log_fields(LOG_NOTICE, n->model.desired, NULL,
				   "canaries of %s validated with no failure: promoted",
				   n->model.desired);
	}
	return 0;
}

char *node_slot_detail(struct node *n)
{
	char *s = NULL;
	return asprintf(&s, "waiting for a rollout slot for %s", or_none(n->model.desired)) < 0 ? NULL
												: s;
}

/* --- halting ---------------------------------------------------------------------------- */

bool node_halt_pending(const struct node *n)
{
	return n->halt_revision > 0 && n->model.revision < n->halt_revision;
}

bool node_failed_here(const struct node *n)
{
	return n->attempts > 0 && str_eq(n->fail_version, n->model.desired) &&
	       n->fail_trigger == n->model.trigger;
}

int node_halt(struct node *n, const char *reason, size_t failed)
{
	const struct fleet_model *m = &n->model;
	_cleanup_(freep) char *reverted = NULL;
	int64_t revision = 0;
	int r;

	if (!m->desired_known || !m->desired || m->trigger <= 0 || fleet_model_halted(m, NULL))
		return 0;
	r = fleet_halt(&n->fleet, m->desired, m->trigger, m->halted.key ? m->halted.mod_revision : 0,
		       n->host, reason, (long)failed, m->policy.auto_revert, &reverted, &revision);
	/* Until the stream brings the model to the halt's revision, this node
	 * alone knows of it: node_evaluate_run() takes it as halted. */
	if (r > 0 || r == -EACCES)
		n->halt_revision = revision;
	if (r == -EACCES) {
		log_fields(LOG_ERR, m->desired, NULL,
			   "halted the rollout of %s (%s), but etcd refused the automatic revert: "
			   "this host may not write current_version", m->desired, reason);
		return 1;
	}
	if (r < 0) {
		log_warnx("cannot halt the rollout of %s (%s): %s, will retry", m->desired, reason,
			  node_etcd_error(n));
		n->budget_trigger = 0;
		node_schedule_resync(n, USEC_PER_SEC);
		return 0;
	}
	if (r == 0)
		return 0;	/* another node was first, or a new trigger came */
	if (reverted)
		log_fields(LOG_ERR, m->desired, NULL, "halted the rollout of %s: %s; reverted to %s",
			   m->desired, reason, reverted);
	else
		log_fields(LOG_ERR, m->desired, NULL, "halted the rollout of %s: %s", m->desired,
			   reason);
	return 1;
}

/*
 * The failure budget, checked by the hosts that failed (no one else needs
 * to): a host whose own failure record has reached its model sees every
 * record written before it, so the host whose failure crosses the budget
 * is sure to see it crossed.  Once per count and trigger; max_fail_percent
 * costs one count-only read of alive/.
 */
int node_check_budget(struct node *n)
{
	const struct fleet_model *m = &n->model;
	_cleanup_(freep) char *reason = NULL;
	size_t failed;
	int r;

	if (m->policy_state != 1 || !rollout_policy_has_budget(&m->policy) ||
	    !fleet_model_failed_here(m, false) || fleet_model_halted(m, NULL))
		return 0;
	failed = fleet_model_failures(m);
	if (n->budget_trigger == m->trigger && n->budget_count == failed)
		return 0;
	n->budget_trigger = m->trigger;
	n->budget_count = failed;
	r = node_budget_exceeded(n, failed, &reason);
	if (r < 0) {
		n->budget_trigger = 0;
		node_schedule_resync(n, USEC_PER_SEC);
		return 0;
	}
	return r > 0 ? node_halt(n, reason, failed) : 0;
}

/*
 * Hosts that died holding a slot count against the budget too.  An expired
 * lease deletes a holder, and so does every run's end; they differ in what
 * the holder's host left at that revision: a run's end deletes its
 * puppet/running in the same txn, a death does not.  One host looks, the
 * first in the queue (one read per freed slot), and writes the dead host's
 * failure record, once (create-if-absent); it then checks the budget, since
 * the dead host cannot.
 */
int node_check_released(struct node *n)
{
	const struct fleet_model *m = &n->model;
	struct rollout_holder *gone = NULL;
	size_t n_gone = fleet_model_take_released(&n->model, &gone);
	size_t rank, in_stage;
	size_t wrote = 0;

	if (n_gone == 0)
		return 0;
	if (m->policy_state == 1 && rollout_policy_has_budget(&m->policy) && m->desired_known &&
	    m->desired && m->trigger > 0 && !fleet_model_halted(m, NULL) &&
	    fleet_model_holder_rank(m, &rank, &in_stage) == 1 && rank == 0) {
		for (size_t i = 0; i < n_gone; i++) {
			if (strcmp(gone[i].host, n->host) == 0 ||
			    gone[i].create_revision <= m->trigger)
				continue;
			int r = fleet_record_dead_holder(&n->fleet, gone[i].host,
							 gone[i].create_revision, m->desired,
							 m->trigger);
			if (r < 0)
				log_warnx("cannot check whether %s died holding a slot: %s",
					  gone[i].host, node_etcd_error(n));
			if (r > 0) {
				log_fields(LOG_WARNING, m->desired, NULL,
					   "%s died holding a rollout slot for %s: counted as failed",
					   gone[i].host, m->desired);
				wrote++;
			}
		}
	}
	rollout_holders_free(gone, n_gone);
	free(gone);
	if (wrote) {
		/* Their records are not in the model yet: count them in. */
		_cleanup_(freep) char *reason = NULL;
		size_t failed = fleet_model_failures(m) + wrote;
		if (node_budget_exceeded(n, failed, &reason) > 0)
			return node_halt(n, reason, failed);
	}
	return 0;
}

/* Whether failed hosts are more than the policy's budget: 1 and *ret_reason,
 * 0, or a negative code (max_fail_percent reads the alive count). */
int node_budget_exceeded(struct node *n, size_t failed, char **ret_reason)
{
	const struct rollout_policy *p = &n->model.policy;

	if (n->model.policy_state != 1)
		return 0;
	if (p->has_max_failures && (long)failed > p->max_failures)
		return asprintf(ret_reason, "%zu host%s failed, more than max_failures %ld", failed,
				failed == 1 ? "" : "s", p->max_failures) < 0 ? -ENOMEM : 1;
	if (p->max_fail_percent > 0) {
		_cleanup_(freep) char *adir = key_alive_dir(n->fleet.prefix);
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list alive = ETCD_KV_LIST_INIT;
		if (!adir)
			return -ENOMEM;
		if (etcd_get_prefix(n->etcd, adir, ETCD_COUNT_ONLY, 0, &alive) < 0) {
			log_warnx("cannot count the alive hosts for the failure budget: %s",
				  node_etcd_error(n));
			return -EIO;
		}
		if ((double)failed * 100.0 <= p->max_fail_percent * (double)alive.count)
			return 0;
		return asprintf(ret_reason, "%zu of %lld hosts failed, more than max_fail_percent %g",
				failed, (long long)alive.count, p->max_fail_percent) < 0 ? -ENOMEM : 1;
	}
	return 0;
}

/* --- progress_deadline ------------------------------------------------------------------- */

static int node_on_progress_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	_cleanup_(freep) char *reason = NULL;

	node_timer_cancel(&n->progress_timer);
	if (n->state != NODE_WAIT_SLOT || n->progress_releases != n->model.holder_releases)
		return 0;
	if (asprintf(&reason, "no rollout slot freed for %ld s (progress_deadline)",
		     n->model.policy.progress_deadline) >= 0)
		(void)node_halt(n, reason, fleet_model_failures(&n->model));
	return 0;
}

/* The first host in the queue for a slot watches the rollout's progress:
 * every freed slot starts the deadline again. */
void node_watch_progress(struct node *n, const struct slot_wait *w)
{
	long deadline = n->model.policy.progress_deadline;

	if (deadline <= 0 || !w->ranked || w->canary || (long)w->rank != w->limit) {
		node_timer_cancel(&n->progress_timer);
		return;
	}
	if (n->progress_timer && n->progress_releases == n->model.holder_releases)
		return;
	n->progress_releases = n->model.holder_releases;
	if (node_timer_arm(n, &n->progress_timer, (uint64_t)deadline * USEC_PER_SEC,
			   node_on_progress_deadline) < 0)
		log_warnx("cannot arm the progress deadline timer");
}
