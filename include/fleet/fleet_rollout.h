/*
 * fleet_rollout.h — the records that let a rollout stop itself, with no
 * central decider.
 *
 * Every record names the trigger it belongs to: the mod revision of
 * current_version when the rollout began (a trigger_update, a rollback or an
 * automatic revert each make a new one).  A record of another trigger has no
 * effect, so a new trigger needs to clear nothing, and a node decides from the
 * records of the current trigger alone:
 *
 *   rollout/failed/HOST  HOST failed at the version (config, validation or
 *                        healthy_deadline): written once per trigger by HOST
 *                        in the txn of its failure, deleted by its success.
 *                        The failure budget counts them.
 *   rollout/halted       the rollout stopped: no node starts a new run for
 *                        the version.  Written once (a txn that compares the
 *                        record and current_version) by the node that saw
 *                        the budget or a deadline exceeded; with auto_revert
 *                        the same txn sets current_version back.
 *   rollout/canary/HOST  HOST ran the version as a canary and validated.
 *   rollout/promoted     the canaries are accepted: every host may run.
 *   rollout/stages/GROUP the stage after GROUP: watched for by one of its
 *                        hosts (under that host's lease), then opened by
 *                        it, once every alive host of GROUP and the groups
 *                        before it runs the version.  The stage's other
 *                        hosts wait for this one key.
 *
 * Values are JSON objects; rollout_record decodes any of them.  The
 * promote and resume txns are here; the per-host records go into a node's
 * own batch (fleet_batch_failure, fleet_batch_canary) so that they cost no
 * request of their own, and the node's halt and dead-holder records are
 * guarded batches too (fleet_batch_halt, fleet_batch_dead_holder).
 */
#ifndef ORCHESTRATE_FLEET_ROLLOUT_H
#define ORCHESTRATE_FLEET_ROLLOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "fleet/fleet.h"

struct rollout_record {
	char *version;		/* the version the record is about */
	int64_t trigger;	/* current_version's mod revision then; 0: unknown */
	int64_t time;		/* unix time it was written */
	char *host;		/* halted: the node that halted; promoted: NULL */
	char *reason;		/* halted: why; promoted: by whom */
	char *stage;		/* failed: "config", "validation", "deadline" */
	char *reverted_to;	/* halted with auto_revert: the version restored */
	long attempts;		/* failed: the attempts so far */
	long failed;		/* halted: the failures counted */
};

void rollout_record_release(struct rollout_record *r);
static inline void rollout_record_releasep(struct rollout_record *r) { rollout_record_release(r); }
/* -EPROTO when value is not an object with a valid "version". */
int rollout_record_decode(const char *value, size_t len, struct rollout_record *ret);
int rollout_record_encode(const struct rollout_record *r, char **ret);
/* Whether r belongs to the rollout of version at trigger. */
bool rollout_record_current(const struct rollout_record *r, const char *version, int64_t trigger);

/*
 * The failure budget of p (pure): 1 and *ret_reason (caller frees) when
 * failed hosts are more than it allows, else 0.  alive is the alive hosts
 * max_fail_percent is a share of; with a percentage and a failure, an
 * alive < 0 (not counted) is -EAGAIN: count them and ask again.
 */
int rollout_budget_spent(const struct rollout_policy *p, size_t failed, long alive,
			 char **ret_reason);
/* Puts HOST's failure record (in the node's end-of-run batch). */
int fleet_batch_failure(struct fleet_batch *b, const char *host, const char *version,
			int64_t trigger, long attempts, const char *stage);
int fleet_batch_clear_failure(struct fleet_batch *b, const char *host);
int fleet_batch_canary(struct fleet_batch *b, const char *host, const char *version,
		       int64_t trigger);
/*
 * The automatic promote of the canaries of version at trigger, by by, as a
 * batch's guarded write: it lands only while current_version is still that
 * trigger and rollout/promoted still at promoted_mod (0: absent), so it is
 * written once, never over an operator's, and from the node's model alone
 * (no read; fleet_promote() reads, for the command line).  A failed guard
 * writes nothing.
 */
int fleet_batch_promote(struct fleet_batch *b, const char *version, int64_t trigger,
			int64_t promoted_mod, const char *by);

/*
 * A staged rollout's gate, rollout/stages/GROUP (the stage after GROUP), for
 * version at trigger, as a batch's guarded write (current_version still at
 * trigger, the gate still at stage_mod, 0: absent): host claims the watch of
 * the earlier groups for its stage ("watching", under lease, so that the
 * claim goes with the host), or, having seen them done, opens it ("open",
 * with no lease).  A failed guard writes nothing: another host claimed it
 * first, or a new trigger came.
 */
int fleet_batch_stage(struct fleet_batch *b, const char *group, const char *version,
		      int64_t trigger, int64_t stage_mod, const char *host, bool open, int64_t lease);
/* Gives a claim up (its host's stage changed: a new group, a new policy),
 * guarded by its mod revision, so that a newer claim is left alone. */
int fleet_batch_stage_drop(struct fleet_batch *b, const char *group, int64_t stage_mod);

/*
 * A halt as the daemon makes it, without blocking its loop: what it writes
 * (rollout_halt_init), the automatic revert's target read first when the
 * policy asks for one (fleet_halt_read_start), then one guarded write in the
 * node's queue (fleet_batch_halt).  The caller owns it until the write ended.
 */
struct rollout_halt {
	struct rollout_record rec;	/* the halt record; rec.reverted_to: the revert's target */
	int64_t halted_mod;		/* rollout/halted's mod revision seen (0: absent) */
	int64_t previous_mod;		/* previous_version's, read with the target */
	/* Who waits for fleet_halt_read_start(). */
	void (*read_fn)(int error, struct rollout_halt *h, void *userdata);
	void *read_userdata;
};
typedef void (*fleet_halt_read_fn)(int error, struct rollout_halt *h, void *userdata);
/* The halt of version at trigger by host, for reason, with failed hosts
 * counted; no revert yet.  -EINVAL for a bad version or trigger. */
int rollout_halt_init(struct rollout_halt *h, const char *version, int64_t trigger,
		      int64_t halted_mod, const char *host, const char *reason, long failed);
void rollout_halt_release(struct rollout_halt *h);
/* etcd refused the revert (the node's role may not write current_version):
 * the halt goes without it. */
void rollout_halt_drop_revert(struct rollout_halt *h);
/*
 * Reads previous_version (one single-key snapshot read, on the loop): when
 * it names a version other than the halted one, h then reverts to it,
 * guarded by previous_version's mod revision; when there is nothing to go
 * back to, or "back" is where the fleet is, h halts only.  fn gets 0, or an
 * error (h unchanged).  h must live until then; *ret is the read in flight,
 * for fleet_call_cancel(), until fn runs.
 */
int fleet_halt_read_start(struct fleet *f, struct rollout_halt *h, long patience_ms,
			  fleet_halt_read_fn fn, void *userdata, struct etcd_call **ret);
/*
 * The halt as a batch's guarded write: it lands only while current_version
 * still has mod revision h's trigger and rollout/halted still has
 * h->halted_mod, so that one node halts a rollout, once (a failed guard
 * writes nothing: another node was first, or a new trigger came).  With a
 * revert, the same txn compares previous_version, sets current_version back
 * to it and previous_version to the halted version.
 */
int fleet_batch_halt(struct fleet_batch *b, const struct rollout_halt *h);

/*
 * A holder deleted at a revision was dead, not done, when the host's
 * puppet/running at that revision still says the version (a run's end
 * deletes both in one txn; an expired lease deletes only the holder).  The
 * question and its answer, the caller's until the read ended.
 */
struct dead_holder {
	char *host;
	int64_t revision;		/* the holder's deletion */
	char *version;			/* the rollout it would count against */
	int64_t trigger;
	bool died;			/* the read's answer */
	void (*read_fn)(int error, struct dead_holder *d, void *userdata);
	void *read_userdata;
};
typedef void (*fleet_dead_holder_fn)(int error, struct dead_holder *d, void *userdata);
int dead_holder_init(struct dead_holder *d, const char *host, int64_t revision,
		     const char *version, int64_t trigger);
void dead_holder_release(struct dead_holder *d);
/* Reads puppet/running/HOST at d->revision (one single-key snapshot read
 * pinned to it, on the loop) and sets d->died.  fn gets 0, -ESTALE when the
 * revision was compacted (nobody can tell any more), or another error.  d
 * must live until then; *ret is the read in flight, for fleet_call_cancel(). */
int fleet_dead_holder_read_start(struct fleet *f, struct dead_holder *d, long patience_ms,
				 fleet_dead_holder_fn fn, void *userdata, struct etcd_call **ret);
/* The dead host's failure record (stage "died") as a batch's guarded write:
 * only while it has none, so that it is written once (-ECANCELED: another
 * host recorded it first). */
int fleet_batch_dead_holder(struct fleet_batch *b, const struct dead_holder *d);

/* Promotes the canaries of the current trigger (by: "operator" or
 * "auto (HOST)").  With expect_trigger > 0, only if current_version's mod
 * revision is still that, and only if no promotion is recorded (0 then when
 * lost).  Returns 1 and *ret_version (may be NULL) when written, 0 when
 * there is nothing to promote (no current_version), or a negative code. */
int fleet_promote(struct fleet *f, const char *by, int64_t expect_trigger, char **ret_version);

/* Clears a halt and the failure budget: deletes rollout/halted and every
 * rollout/failed/ record in one txn.  Returns 1 when there was a halt. */
int fleet_rollout_resume(struct fleet *f);

/* What `status` shows of the rollout of the current trigger. */
struct rollout_state {
	char *version;		/* current_version; NULL when unset */
	int64_t trigger;
	bool halted;
	bool reverted;		/* not halted: version is where a halt reverted to */
	struct rollout_record halt;	/* when halted or reverted */
	bool promoted;
	size_t failed;		/* failure records of the trigger */
	size_t canaries_done;	/* canary records of the trigger */
};
void rollout_state_release(struct rollout_state *s);
static inline void rollout_state_releasep(struct rollout_state *s) { rollout_state_release(s); }
/* Two reads (current_version, rollout/) at one revision. */
int fleet_rollout_state(struct fleet *f, struct rollout_state *ret);

#endif
