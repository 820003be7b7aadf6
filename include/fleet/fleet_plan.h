/*
 * fleet_plan.h — what a trigger of VERSION would do now (`orchestrate plan`).
 *
 * The plan is not a second implementation of the rollout policy: it loads
 * the fleet's rollout keys into a fleet model (fleet_model.h), exactly as a
 * node does, and asks fleet_model_decide() about every host in turn over a
 * simulated queue, stage by stage, as the nodes would ask it: the hosts it
 * answers ROLLOUT_START form a batch; the batch is then taken as done (its
 * holders released, its canaries recorded) and the rest ask again.  What
 * makes a node wait before it asks — a pause, a dependency, an earlier group
 * still behind — is taken in the node's own order (node_evaluate_run: halt,
 * pause, dependencies, then the slot).
 *
 * What etcd cannot tell is said, not guessed: a host's dependencies are in
 * its own config, so only a host that last published a dependency wait is
 * shown waiting for one; which host of a stage falls into which batch
 * follows the order the hosts queue in at the trigger (the create revisions
 * of their holder keys), so the plan puts the hosts already queued first and
 * the rest by name; the splay is in each node's config, not in etcd.
 *
 * fleet_plan_read() reads (the whole-fleet view, rollout/ at its revision,
 * history/ beside them); fleet_plan_build() is pure, for the unit tests.
 */
#ifndef ORCHESTRATE_FLEET_PLAN_H
#define ORCHESTRATE_FLEET_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "fleet/fleet.h"

enum plan_fate {
	PLAN_RUN,		/* in a batch */
	PLAN_AT_VERSION,	/* runs VERSION already: nothing to do */
	PLAN_WAIT,		/* alive, but would not run: plan_host.wait says why */
	PLAN_DEAD,		/* known, but no alive key */
};

enum plan_wait {
	PLAN_WAIT_NONE,
	PLAN_WAIT_HALTED,	/* the rollout of VERSION is halted */
	PLAN_WAIT_PAUSED,	/* a pause applies (why: which) */
	PLAN_WAIT_DEPENDENCY,	/* it last published a dependency wait (why: its detail) */
	PLAN_WAIT_STAGE,	/* an earlier group will not finish (why: which and who) */
	PLAN_WAIT_BUDGET,	/* the failure budget is spent: the first to start halts */
	_PLAN_WAIT_MAX,
};
const char *plan_wait_name(enum plan_wait w);	/* "halted", "paused", ... */

struct plan_host {
	char *host;
	char *group;		/* NULL: none */
	char *running;		/* the version it runs; NULL: none */
	bool provisioned;	/* dead and provisioned: unaccounted */
	bool in_progress;	/* a candidate whose config run is under way now (puppet/running) */
	enum plan_fate fate;
	enum plan_wait wait;
	char *why;		/* from etcd (a pause's reason, a detail): render safely */
	size_t batch;		/* PLAN_RUN: 1-based */
	int64_t median;		/* median seconds of its successful runs; -1: none known */
};

struct plan_batch {
	size_t stage;		/* index into the policy's groups; n_groups: the unlisted */
	const char *group;	/* the stage's group; NULL: the unlisted, or no groups */
	bool canary;		/* its hosts run as canaries */
	bool promote_before;	/* a promote comes first (plan.auto_promote: by the
				 * nodes; else an operator's `orchestrate promote`) */
	size_t *hosts;		/* indices into fleet_plan.hosts, in queue order */
	size_t n;
	int64_t estimate;	/* seconds; -1: not known */
};

struct plan_group_time {
	char *group;		/* NULL: hosts of no group */
	int64_t median;		/* median of its hosts' medians; -1: none known */
	size_t hosts;		/* hosts with a median */
};

struct fleet_plan {
	char *version;		/* what the plan is for; NULL: none given and none set */
	char *current;		/* current_version; NULL: unset */
	bool new_trigger;	/* version is not the current rollout: a trigger starts one */
	int64_t revision;	/* of every read */
	int policy_state;	/* 0 none, 1 set, -EPROTO undecodable (taken as max_parallel 1) */
	struct rollout_policy policy;	/* as the nodes take it */
	size_t alive;
	long budget;		/* hosts that may fail without a halt; -1: no budget */
	size_t failed;		/* failures of this rollout counted already */
	size_t canaries_done;	/* canaries of this rollout validated already */
	bool promoted;		/* this rollout's canaries are promoted already */
	char *halted;		/* this rollout is halted: why ("" when not said); NULL: not */
	bool budget_spent;	/* the budget is spent already: the next start halts */
	struct plan_host *hosts;	/* sorted by name */
	size_t n;
	struct plan_batch *batches;
	size_t n_batches;
	size_t counts[4];	/* hosts by fate (enum plan_fate) */
	size_t unaccounted;	/* dead and provisioned */
	struct plan_group_time *groups;	/* each group with hosts, by name; NULL group last */
	size_t n_groups;
	int64_t median;		/* of every host's median; -1: none known */
	int64_t estimate;	/* the batches' estimates summed; -1: not known */
	bool manual_promote;	/* a promote is an operator's (no auto_promote, or a failure
				 * holds it back): the estimate leaves the wait out */
};

void fleet_plan_release(struct fleet_plan *p);
static inline void fleet_plan_releasep(struct fleet_plan *p) { fleet_plan_release(p); }

/*
 * What fleet_plan_build() plans from.  rollout holds the keys under
 * P/rollout/ and P/current_version (values as stored, mod and create
 * revisions as etcd gave them); medians[i] is the median run time of
 * history_hosts[i] (run_history_median(); sorted by host, n_histories of them).
 */
struct plan_input {
	const char *prefix;
	const char *version;	/* NULL: current_version */
	const struct fleet_view *view;
	const struct etcd_kv_list *rollout;
	char *const *history_hosts;
	const int64_t *medians;
	size_t n_histories;
};

/* The plan (pure).  ret->version NULL: no version given and none set. */
int fleet_plan_build(const struct plan_input *in, struct fleet_plan *ret);

/* Reads the fleet (fleet_view_read) and, at its revision, rollout/ and
 * current_version, then builds the plan.  history/ (only the estimate needs
 * it) is read at the same time on a second client when f->parallel is set,
 * so at the newest revision rather than the view's. */
int fleet_plan_read(struct fleet *f, const char *version, struct fleet_plan *ret);

/* The median of v's n values (sorts v; the lower of the middle two); -1 when
 * n is 0. */
int64_t plan_median(int64_t *v, size_t n);
/* The median duration of h's successful runs, any version; -1: none. */
int64_t run_history_median(const struct run_history *h);

#endif
