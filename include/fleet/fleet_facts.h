/*
 * fleet_facts.h — what a node's decision needs that its model does not hold,
 * read without blocking, in one request at one revision.
 *
 * The model (fleet_model.h) follows what every decision reads: the desired
 * version, pauses, the rollout and the catalog a node consumes.  A few
 * decisions need more, and only under some settings:
 *
 *   - max_percent: how many hosts are alive (in the node's stage);
 *   - groups: whether every alive host of the earlier groups runs the version
 *     (alive/, running_version/ and the groups' members);
 *   - max_fail_percent: how many hosts are alive, once a host failed;
 *   - depends: the entries of the services a node depends on, when its
 *     catalog watches have not yet delivered the revision the node acts on.
 *
 * These are read as facts: a snapshot of exactly the ranges asked for
 * (etcd_snapshot_start), which the node keeps and answers its questions from
 * (the pure functions below) for as long as they are at least as new as its
 * model.  Reading them used to be several blocking requests per decision, and
 * a decision under an etcd slower than the request timeout held the loop,
 * and with it the keepalive, for each of them.
 *
 * Fleet-layer code: it knows the key layout and neither logs nor exits.
 */
#ifndef ORCHESTRATE_FLEET_FACTS_H
#define ORCHESTRATE_FLEET_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "fleet/catalog.h"
#include "fleet/fleet.h"

/* What to read. */
enum {
	FACTS_ALIVE = 1 << 0,	/* how many hosts are alive (count only) */
	FACTS_STAGES = 1 << 1,	/* alive/ (keys), running_version/, each group's members */
	FACTS_SERVICES = 1 << 2,	/* the entries of the services named */
};

struct fleet_facts_ask {
	unsigned what;
	char *const *groups;		/* FACTS_STAGES: the policy's groups */
	size_t n_groups;
	char *const *services;		/* FACTS_SERVICES: the services depended on */
	size_t n_services;
};

/* Host names, sorted (strcmp). */
struct fleet_hosts {
	char **names;
	size_t n;
};

struct fleet_facts {
	int64_t revision;		/* the one revision every fact is of; 0: none */
	unsigned what;
	size_t alive;			/* FACTS_ALIVE or FACTS_STAGES */
	/* FACTS_STAGES */
	struct fleet_hosts alive_hosts;
	struct fleet_running running;	/* running_version/, sorted by host */
	char **groups;			/* the groups read, NULL-terminated */
	struct fleet_hosts *members;	/* per group */
	size_t n_groups;
	/* FACTS_SERVICES */
	char **services;		/* the services read, NULL-terminated */
	struct catalog catalog;		/* their entries, sorted */
};

void fleet_facts_release(struct fleet_facts *x);
static inline void fleet_facts_releasep(struct fleet_facts *x) { fleet_facts_release(x); }

/* Whether x holds everything ask asks for (same groups and services, or
 * more). */
bool fleet_facts_cover(const struct fleet_facts *x, const struct fleet_facts_ask *ask);

/*
 * Reads what ask names, in one request (several when a range is longer than
 * a page).  fn runs from the loop with 0 and the facts (it may take them: the
 * call releases what is left after it returns) or an error; *ret is the call
 * in flight, for fleet_call_cancel(), until fn runs.
 */
typedef void (*fleet_facts_fn)(int error, struct fleet_facts *x, void *userdata);
int fleet_facts_read_start(struct fleet *f, const struct fleet_facts_ask *ask, long patience_ms,
			   fleet_facts_fn fn, void *userdata, struct etcd_call **ret);

/*
 * Staged rollouts (pure, from FACTS_STAGES): whether every alive host of the
 * groups before group's stage runs desired, host itself aside.  1 when so
 * (or when nothing is before it), 0 with *ret_group (caller frees) and
 * *ret_behind set to the first group still behind; -EAGAIN when x does not
 * hold a group of p.
 */
int fleet_facts_stage_ready(const struct fleet_facts *x, const struct rollout_policy *p,
			    const char *group, const char *host, const char *desired,
			    char **ret_group, size_t *ret_behind);
/* max_percent of the alive hosts of group's stage (of the fleet, without
 * groups), at least 1.  -EAGAIN when x lacks what p needs. */
int fleet_facts_percent_limit(const struct fleet_facts *x, const struct rollout_policy *p,
			      const char *group, long *ret);
/* What FACTS_ALIVE and FACTS_STAGES ask of p: the groups' members only
 * when p has groups (else the count will do). */
void fleet_facts_ask_policy(const struct rollout_policy *p, struct fleet_facts_ask *ask);

#endif
