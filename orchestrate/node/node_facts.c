/*
 * node_facts.c — what the node's decisions need beyond its model (the alive
 * hosts, the earlier groups' progress, a dependency's entries at the revision
 * acted on), read without blocking the loop (fleet_facts.h).
 *
 * A decision that needs facts it does not hold starts their read and waits:
 * the answer schedules an evaluation, which decides from them.  Facts serve
 * every decision for as long as they are new enough (node_facts_fresh_from:
 * a read is at etcd's newest revision, so it is as new as the model that
 * asked for it).  One read is in flight at a time, and it asks for all the
 * policy may need, so a decision costs one request, not one per question.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "fleet/fleet_lease.h"
#include "node_internal.h"

/* What the rollout policy may ask beyond the model. */
static unsigned node_facts_policy_need(const struct node *n)
{
	const struct rollout_policy *p = &n->sync.model.policy;

	if (n->sync.model.policy_state != 1)
		return 0;
	if (p->n_groups)
		return FACTS_STAGES;
	if ((p->max_percent > 0 && p->max_parallel <= 0) || p->max_fail_percent > 0)
		return FACTS_ALIVE;
	return 0;
}

/* The ask for need: the policy's groups, the services depended on.  services
 * must hold cfg->n_depends pointers. */
static void node_facts_ask(const struct node *n, unsigned need, const char **services,
			   struct fleet_facts_ask *ask)
{
	const struct config *cfg = n->opt.config;
	const struct rollout_policy *policy = &n->sync.model.policy;

	*ask = (struct fleet_facts_ask){ 0 };
	if (need & (FACTS_ALIVE | FACTS_STAGES))
		fleet_facts_ask_policy(policy, ask);
	if ((need & FACTS_SERVICES) && cfg->n_depends) {
		for (size_t i = 0; i < cfg->n_depends; i++)
			services[i] = cfg->depends[i].service;
		ask->what |= FACTS_SERVICES;
		ask->services = (char *const *)services;
		ask->n_services = cfg->n_depends;
	}
}

static void node_on_facts(int error, struct fleet_facts *x, void *userdata)
{
	struct node *n = userdata;

	n->facts.read = NULL;
	if (error < 0) {
		log_warnx("cannot read the fleet's state for the rollout: %s, will retry",
			  node_etcd_error(n));
		node_retry_later(n);
		return;
	}
	fleet_facts_release(&n->facts.have);
	n->facts.have = *x;
	*x = (struct fleet_facts){ 0 };
	n->facts.answered = true;
	log_debug("fleet state for the rollout read at revision %lld",
		  (long long)n->facts.have.revision);
	node_schedule_evaluate(n);
}

static int node_facts_read(struct node *n, unsigned need)
{
	_cleanup_(freep) const char **services = NULL;
	struct fleet_facts_ask ask;
	int r;

	if (n->facts.read)
		return 0;	/* its answer evaluates again */
	if (n->opt.config->n_depends && !(services = calloc(n->opt.config->n_depends,
							   sizeof(*services))))
		return -ENOMEM;
	node_facts_ask(n, need | node_facts_policy_need(n), services, &ask);
	if (ask.what == 0)
		return -EINVAL;
	r = fleet_facts_read_start(&n->fleet, &ask, node_etcd_patience(n), node_on_facts, n,
				   &n->facts.read);
	if (r >= 0)
		n->facts.answered = false;
	return r < 0 ? r : 0;
}

/*
 * How new facts must be to answer need.  A dependency's entries must be as
 * new as the model: the point of reading them is the revision the node acts
 * on.  The alive hosts and the groups' progress change with events the model
 * does not follow (alive/, running_version/), so its revision says nothing of
 * them: they are read once per rollout (as new as its trigger) and again after
 * an event of the stage watch, which follows exactly those while a group is
 * behind.  Tying them to the model's revision instead made every slot taken
 * or freed anywhere a read by every waiting node: O(N) reads per node.
 */
static int64_t node_facts_fresh_from(const struct node *n, unsigned need)
{
	int64_t from = n->facts.seen;

	if ((need & FACTS_SERVICES) && n->sync.model.revision > from)
		from = n->sync.model.revision;
	if (n->sync.model.trigger > from)
		from = n->sync.model.trigger;
	return from;
}

int node_facts_get(struct node *n, unsigned need, int64_t since, const struct fleet_facts **ret)
{
	_cleanup_(freep) const char **services = NULL;
	const struct fleet_facts *x = &n->facts.have;
	struct fleet_facts_ask ask;

	if (n->opt.config->n_depends && !(services = calloc(n->opt.config->n_depends,
							   sizeof(*services))))
		return -ENOMEM;
	node_facts_ask(n, need, services, &ask);
	if (fleet_facts_cover(x, &ask) &&
	    x->revision >= (since > 0 ? since : node_facts_fresh_from(n, need))) {
		*ret = x;
		return 1;
	}
	if (fleet_facts_cover(x, &ask) && n->facts.answered && !n->retry_timer) {
		/* The answer that just came is older than needed (a member
		 * behind the one the stream is on, or a stage event right
		 * after it): ask again after the backoff, not at once. */
		n->facts.answered = false;
		node_retry_later(n);
		return 0;
	}
	return node_facts_read(n, need);
}

void node_facts_prefetch(struct node *n)
{
	const struct fleet_facts *x;

	if (n->sync.model.policy_state == 1 && n->sync.model.policy.max_fail_percent > 0 &&
	    node_facts_get(n, FACTS_ALIVE, 0, &x) < 0)
		log_debug("cannot read the alive hosts ahead: %s", node_etcd_error(n));
}

void node_facts_seen(struct node *n, int64_t revision)
{
	if (revision > n->facts.seen)
		n->facts.seen = revision;
}

void node_facts_client_changed(struct node *n)
{
	if (!n->facts.read)
		return;
	n->facts.read = NULL;
	node_schedule_evaluate(n);	/* the decision that waited asks again */
}

void node_facts_release(struct node *n)
{
	fleet_call_cancel(n->facts.read);
	n->facts.read = NULL;
	fleet_facts_release(&n->facts.have);
	n->facts.seen = 0;
}
