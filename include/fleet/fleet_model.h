/*
 * fleet_model.h — what one node knows of the fleet, kept current from one watch
 * stream.
 *
 * A node acts on four parts of the key space: the desired version, the pauses,
 * the rollout (policy and slot holders) and the service catalog (all of it, or
 * only the services it consumes).  The model reads them once at one revision
 * (fleet_model_read_start), names the ranges to watch from the next revision on
 * (fleet_model_ranges: one stream carries them all), and applies every watch
 * event to memory (fleet_model_apply).  So a node never reads etcd on the
 * trigger path: every decision is made from the model, at the revision of the
 * event that triggered it, and a catalog change costs each consumer one event
 * rather than a read of the whole catalog.
 *
 * What the model cannot tell from its own events it does not guess: a value
 * that is not plausible (a current_version that is not a name) leaves
 * desired_known false, so that no run starts on it; a policy that does not
 * decode is taken as the most careful one (max_parallel 1).
 *
 * This is fleet-layer code: it knows the key layout, talks to etcd only in
 * fleet_model_read_start(), and neither logs nor exits.
 */
#ifndef ORCHESTRATE_FLEET_MODEL_H
#define ORCHESTRATE_FLEET_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/catalog.h"

/* What an applied batch of events changed (fleet_model_apply's mask). */
enum {
	MODEL_VERSION = 1 << 0,
	MODEL_PAUSE = 1 << 1,
	MODEL_ROLLOUT = 1 << 2,
	MODEL_CATALOG = 1 << 3,
	MODEL_SELF_GONE = 1 << 4,	/* this host's alive/ key was deleted */
};

/* One rollout/holders/HOST key. */
struct rollout_holder {
	char *host;
	char *group;			/* NULL when none (or not decodable) */
	int64_t create_revision;	/* the queue order */
};

struct fleet_model;
typedef void (*fleet_model_read_fn)(int error, struct fleet_model *m, void *userdata);

struct fleet_model {
	/* Fixed at fleet_model_init(). */
	char *prefix;
	char *host, *group;		/* group may be NULL */
	char **consumed;		/* NULL-terminated; NULL: the whole catalog */
	char *k_version, *k_pause_dir, *k_rollout_dir, *k_policy, *k_holders_dir;
	char *k_failed_dir, *k_canary_dir, *k_halted, *k_promoted, *k_stages_dir;
	char *k_services_dir;
	char *k_alive;			/* this host's own alive/HOST (NULL: no host) */
	char **k_service_dirs;		/* one per consumed service, NULL-terminated */
	char *k_holders_end, *k_rollout_end;	/* the ends of those prefixes */
	/* Set by the daemon after fleet_model_init(): the node follows the slot
	 * queue itself (fleet_queue.h), so the model neither keeps nor
	 * watches rollout/holders/, whose every key would otherwise reach
	 * every node.  rollout/ is then watched as two ranges, below and
	 * above holders/. */
	bool queue_apart;

	/* What etcd said: revision is the newest event applied.  A txn that
	 * touches two watched ranges reaches the node as one frame per range,
	 * so each range says how far it is complete on its own: every write
	 * to pause/ up to pause_revision, and to rollout/ up to
	 * rollout_revision, has been applied (the start guard relies on it). */
	int64_t revision;
	int64_t pause_revision;
	int64_t rollout_revision;
	int64_t rollout_high_revision;	/* queue_apart: rollout/ above holders/ */
	bool desired_known;		/* false: implausible current_version */
	char *desired;			/* NULL: none set */
	int64_t trigger;		/* current_version's mod revision: the rollout's id */
	struct etcd_kv_list pauses;	/* every pause/ key, sorted by key */
	int policy_state;		/* 0 none, 1 set, -EPROTO undecodable */
	struct rollout_policy policy;	/* max_parallel 1 when undecodable */
	struct rollout_holder *holders;	/* sorted by create revision */
	size_t n_holders, cap_holders;
	uint64_t holder_releases;	/* holder keys deleted since the last read */
	struct rollout_holder *released;	/* the latest deleted (create_revision: */
	size_t n_released;		/* the deletion's), for fleet_model_take_released */
	/* The safety records (fleet_rollout.h), raw; only those of the
	 * current trigger count. */
	struct etcd_kv_list failed;	/* rollout/failed/HOST, sorted by key */
	struct etcd_kv_list canaries;	/* rollout/canary/HOST */
	struct etcd_kv halted;		/* rollout/halted; key NULL: none */
	struct etcd_kv promoted;	/* rollout/promoted; key NULL: none */
	struct etcd_kv_list stages;	/* rollout/stages/GROUP, sorted by key */
	struct catalog catalog;		/* sorted; only the consumed services */
	/* This host's own puppet and validation status as the read found them
	 * (STATE_INVALID: none; the newest when several are set, which only
	 * happens by hand).  The stream does not follow them: the node itself
	 * writes them. */
	enum status_state own_puppet, own_validation;

	/* Who waits for fleet_model_read_start(). */
	fleet_model_read_fn read_fn;
	void *read_userdata;
};

/*
 * Prepares an empty model for host (in group, may be NULL) under prefix P.
 * consumed NULL follows the whole catalog; otherwise only those services
 * (duplicates are dropped; an empty list follows none).
 */
int fleet_model_init(struct fleet_model *m, const char *P, const char *host, const char *group,
		     char *const *consumed);
void fleet_model_release(struct fleet_model *m);

/*
 * Reads everything the model holds at one revision (replacing what it held),
 * without blocking the loop, in one request (etcd_snapshot_start: a txn of
 * every range; a catalog longer than a page goes on in pages).  fn
 * runs from the loop with 0 once m holds the new view, or with an error (m
 * then holds what it held).  m must live until then; *ret is the read in
 * flight, for fleet_call_cancel(), until fn runs.
 */
int fleet_model_read_start(struct fleet *f, struct fleet_model *m, long patience_ms,
			   fleet_model_read_fn fn, void *userdata, struct etcd_call **ret);

/* The ranges to watch from m->revision + 1: current_version, pause/, rollout/
 * (two ranges around holders/ when queue_apart), this host's alive/ key and
 * the catalog (whole or per consumed service), in that order: the catalog's are those from
 * fleet_model_catalog_range() on.  *ret points into m (valid until m
 * changes or is released); free only the array. */
int fleet_model_ranges(const struct fleet_model *m, struct etcd_watch_range **ret,
		       size_t *ret_n);
size_t fleet_model_catalog_range(const struct fleet_model *m);

/* Applies watch events (in revision order) and ORs into *ret_changed what they
 * changed.  Only -ENOMEM fails, and then the model must be read again. */
int fleet_model_apply(struct fleet_model *m, const struct etcd_event *events, size_t n,
		      unsigned *ret_changed);

/* Whether a pause applies to the node: 1 and *ret_reason ("global: freeze"),
 * or 0. */
int fleet_model_paused(const struct fleet_model *m, char **ret_reason);

/*
 * The node's place among the holders of its stage: the stage of a holder is
 * the index of its group in the policy's groups (the unlisted come after
 * them).  Returns 1 with *ret_rank (0-based, by create revision) when host
 * holds a key, 0 when it does not; *ret_in_stage counts the stage's holders.
 */
int fleet_model_holder_rank(const struct fleet_model *m, size_t *ret_rank,
			    size_t *ret_in_stage);

/* The rollout of the desired version at its trigger: whether it is halted
 * (*ret_halt, when not NULL, gets the record: release it), promoted, how many
 * hosts failed it and how many canaries validated it, and whether host has a
 * failure or canary record of it. */
bool fleet_model_halted(const struct fleet_model *m, struct rollout_record *ret_halt);
bool fleet_model_promoted(const struct fleet_model *m);

/*
 * A staged rollout's gate (rollout/stages/GROUP: the stage after GROUP) for
 * the current trigger.  STAGE_GATE_NONE when there is none (absent, another
 * trigger's, or unreadable), STAGE_GATE_WATCHED while one host of the stage
 * watches the earlier groups for it (*ret_host, when not NULL: caller
 * frees), STAGE_GATE_OPEN once that host saw them done.  *ret_mod is the
 * key's mod revision (0: absent), for a guarded write over it.
 */
enum stage_gate { STAGE_GATE_NONE, STAGE_GATE_WATCHED, STAGE_GATE_OPEN };
enum stage_gate fleet_model_stage_gate(const struct fleet_model *m, const char *group,
				       int64_t *ret_mod, char **ret_host);
/* A gate of the current trigger that host watches for, other than keep
 * (NULL: any): its group (points into m) and *ret_mod, or NULL. */
const char *fleet_model_stage_claimed(const struct fleet_model *m, const char *host,
				      const char *keep, int64_t *ret_mod);
size_t fleet_model_failures(const struct fleet_model *m);
size_t fleet_model_canaries(const struct fleet_model *m);
bool fleet_model_failed_here(const struct fleet_model *m, bool any_trigger);
/* The host's own failure record of the rollout (decoded into *ret), if any. */
bool fleet_model_own_failure(const struct fleet_model *m, struct rollout_record *ret);

/*
 * The rollout's answer to one host, from the model alone (pure: the node asks
 * it at every evaluation, the unit tests drive it directly).  Whoever would
 * start a run checks the failure budget first, in the same model: a revision
 * that frees a slot and records the failure that spends the budget gives
 * ROLLOUT_HALT, never ROLLOUT_START.
 */
enum rollout_verdict {
	ROLLOUT_START,		/* a slot (or no limit): start the run */
	ROLLOUT_QUEUE,		/* queue for a slot first: put the holder key */
	ROLLOUT_WAIT,		/* queued behind others (or its key not back yet) */
	ROLLOUT_WAIT_CANARY,	/* the canaries go first: wait for promote */
	ROLLOUT_HALT,		/* it would start, but the budget is spent: halt */
	ROLLOUT_COUNT_ALIVE,	/* it would start: count the alive hosts (for
				 * max_fail_percent) and ask again */
};
struct rollout_ask {
	long limit;		/* the slots of the host's stage; 0: no limit */
	long alive;		/* alive hosts for max_fail_percent; < 0: not counted */
	bool queued;		/* the host put its holder key */
	bool has_slot;		/* it took a slot already (splay, retry): kept */
	/* queue_apart: the host's place, as the caller follows it. */
	bool placed;		/* its key is in the queue and its place known: */
	size_t ahead;		/* the holders created before it */
};
struct rollout_decision {
	enum rollout_verdict verdict;
	size_t failed;		/* failure records of the current trigger */
	size_t canaries_done;	/* canary records of the current trigger */
	bool canary;		/* START: as a canary; WAIT_CANARY: promote awaited */
	long cap;		/* slots open to the stage now (canaries left) */
	bool ranked;		/* the host's key is in the model: */
	size_t rank;		/* its place in the stage's queue, 0-based */
	size_t in_stage;	/* holders of the stage */
	char *halt_reason;	/* HALT: why (caller frees) */
};
int fleet_model_decide(const struct fleet_model *m, const struct rollout_ask *ask,
		       struct rollout_decision *ret);

/*
 * The guard of a run's start: adds to b the compares that hold only while
 * nothing that could stop the run was written since the model's view —
 * current_version still at the trigger, and no write under rollout/failed/,
 * rollout/canary/, rollout/halted, rollout/policy or pause/ after the
 * revision the model has of each.  The start txn then fails (-ECANCELED from
 * fleet_batch_commit) instead of starting a host on a view that is behind,
 * whatever the timing between hosts, at no request of its own.
 */
int fleet_model_guard_start(const struct fleet_model *m, struct fleet_batch *b);

/* Hands out the holders deleted since the last call (at most
 * FLEET_MODEL_RELEASED_MAX, the latest): free with rollout_holders_free. */
#define FLEET_MODEL_RELEASED_MAX 64
size_t fleet_model_take_released(struct fleet_model *m, struct rollout_holder **ret);
void rollout_holders_free(struct rollout_holder *h, size_t n);

/* The stage of group in policy: its index in p->groups, or p->n_groups (after
 * every listed group) when it has none or one the policy does not list. */
size_t rollout_policy_stage(const struct rollout_policy *p, const char *group);

/* The slots max_percent gives a stage of alive hosts (pure): at least 1.
 * fleet_facts_percent_limit() and the plan (fleet_plan.h) both count with it. */
long rollout_percent_limit(const struct rollout_policy *p, size_t alive);

#endif
