/*
 * node_rollout.c — what a node waits for before a run: its declared
 * dependencies and, under a rollout policy, its turn and a slot.
 *
 * Everything here is answered from the fleet model, at the revision of the
 * event being evaluated: the catalog for dependencies (so a trigger one second
 * after the only mysql host died does not run the nodes that need it), the
 * policy for slots.  Queueing for a slot is one write (the holder key, under
 * the node's lease); the node's place in the queue is not the model's: it is
 * followed apart (node_queue.c), from the few keys just ahead of its own, so
 * that a slot taken or freed does not reach every node.
 *
 * Three policies need more than the model, and ask the node's facts
 * (node_facts.c: read without blocking, the answer decides again):
 * max_percent (the alive count it is a percentage of), max_fail_percent (the
 * same, once a host failed) and groups (whether the earlier groups are done).
 *
 * A staged rollout's wait costs the fleet one watcher per stage, not every
 * host of it: the first host of a stage to wait claims its gate,
 * rollout/stages/GROUP (the stage after GROUP, under its lease), reads the
 * facts and watches running_version/ and alive/ on a second stream, the two
 * things that can end the wait; once every alive host of the earlier groups
 * runs the version it opens the gate.  The other hosts of the stage wait
 * for that one key, which comes on their own stream (rollout/): no read, no
 * second stream, one event.  A watcher that dies takes its claim with its
 * lease, and the next host to see that claims it again.
 *
 * What the node writes for the rollout's safety does not block the loop: a
 * halt is previous_version's read (only to revert) and a guarded write in
 * the node's queue, a dead holder's failure record a read pinned to the
 * holder's deletion and a guarded write.  Each is a small state kept in
 * struct node_rollout; while one is in flight the node starts no run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/log.h"
#include "node_internal.h"
#include "fleet/fleet_lease.h"
#include "fleet/fleet_stream.h"
#include "fleet/schema.h"

/*
 * The catalog the dependencies are checked against: the model's, when its
 * catalog watches have delivered everything up to the revision the node acts
 * on; else the dependencies' entries as the node's facts hold them (read at a
 * revision no older than the model's).  A txn that withdraws the only mysql
 * host and sets the desired version reaches the stream as two frames of one
 * revision (one per watch), and etcd marks no end of a revision: without this
 * a node could start a run between the two.  Only nodes with dependencies,
 * and only then, pay this one small read.  1 and *ret, or 0 while the read
 * is in flight.
 */
static int node_dependency_catalog(struct node *n, const struct catalog **ret)
{
	_cleanup_(freep) struct etcd_watch_range *ranges = NULL;
	const struct catalog *model = &n->sync.model.catalog;
	const struct fleet_model *sync_model = &n->sync.model;
	const struct fleet_facts *x;
	size_t count;
	int64_t low = INT64_MAX;
	int r;

	*ret = model;
	if (!n->sync.stream || fleet_model_ranges(&n->sync.model, &ranges, &count) < 0)
		return 1;
	for (size_t i = fleet_model_catalog_range(sync_model); i < count; i++) {
		int64_t rev = fleet_stream_range_revision(n->sync.stream, i);
		if (rev < low)
			low = rev;
	}
	if (low >= n->sync.model.revision)
		return 1;
	if ((r = node_facts_get(n, FACTS_SERVICES, 0, &x)) <= 0)
		return r;
	*ret = &x->catalog;
	return 1;
}

/* 1 when every dependency is met; 0 and what is missing in *ret_missing and
 * its short form for STATUS= in *ret_short (caller frees both) when one is
 * not, or when out of memory; -EAGAIN while the catalog to check them
 * against is read (its answer evaluates again). */
int node_check_dependencies(struct node *n, char **ret_missing, char **ret_short)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT, s = BUF_INIT;
	const struct catalog *cat;
	int r = 0;

	if (cfg->n_depends == 0)
		return 1;
	r = node_dependency_catalog(n, &cat);
	if (r == 0)
		return -EAGAIN;
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf why = BUF_INIT;
		(void)buf_printf(&why, "cannot check dependencies: %s", strerror(-r));
		*ret_short = strdup("dependencies (cannot check)");
		*ret_missing = buf_detach(&why);
		return 0;
	}
	r = 0;
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
		*ret_missing = strdup("cannot check dependencies: out of memory");
		return 0;
	}
	if (b.len == 0)
		return 1;
	*ret_short = buf_detach(&s);
	*ret_missing = buf_detach(&b);
	return 0;
}

static int node_halt(struct node *n, const char *reason, size_t failed);
static void node_halt_end(struct node *n);
static void node_dead_pop(struct node *n);

/* --- the slot -------------------------------------------------------------------------- */

bool node_slot_held(const struct node *n)
{
	return n->rollout.slot == SLOT_HELD || n->rollout.slot == SLOT_CANARY;
}

int node_slot_batch_release(struct node *n, struct fleet_batch *b)
{
	int r;

	if (n->rollout.slot == SLOT_NONE)
		return 0;
	if ((r = fleet_batch_release_holder(b, n->host)) < 0)
		return r;
	n->rollout.release_sent = true;
	return 0;
}

void node_slot_release_written(struct node *n, int error)
{
	if (!n->rollout.release_sent)
		return;
	n->rollout.release_sent = false;
	if (error == 0) {
		n->rollout.slot = SLOT_NONE;
		n->rollout.marked = false;
		node_queue_leave(n);
	}
}

void node_slot_lost(struct node *n)
{
	n->rollout.slot = SLOT_NONE;
	n->rollout.marked = false;
	node_queue_leave(n);
}

void node_slot_key_rewritten(struct node *n, int64_t revision)
{
	if (n->rollout.slot != SLOT_NONE && !n->rollout.marked)
		node_queue_enter(n, revision);
}

/*
 * The slot is taken from the node's place in the queue, which may be newer
 * than its model: a release reaches it on the queue's stream, the canary or
 * failure record written in the same txn on the model's.  So a slot is only
 * held for good once the run's start, whose guard refuses a start decided
 * on a model behind such a record, is written, and with it the mark; until
 * then each decision takes it again from the newest model, or gives it back
 * (node_slot_untake), and the queue goes on being followed.  Once marked it
 * is held through retries.
 */
void node_slot_start_written(struct node *n, int error)
{
	if (!node_slot_held(n) || error < 0 || n->rollout.marked)
		return;
	n->rollout.marked = true;
	node_queue_hold(n);
}

/* A decision took back a slot not marked yet: the node waits again. */
static void node_slot_untake(struct node *n)
{
	if (!node_slot_held(n) || n->rollout.marked)
		return;
	log_info("rollout slot given back before the run started: the rollout changed");
	n->rollout.slot = SLOT_QUEUED;
}

/* The mark carries where the node stood, when it knows it exactly: the host
 * behind counts itself from there, with no read (fleet_queue.h). */
int node_slot_batch_mark(struct node *n, struct fleet_batch *b)
{
	struct queue_place place;

	if (!node_slot_held(n) || n->lease.id == 0)
		return 0;
	return fleet_batch_holder(b, n->host, n->sync.model.desired, n->opt.config->group, true,
				  node_queue_counted(n, &place) ? &place : NULL, n->lease.id);
}

/* The release's own write ended (node_drop_holder). */
static void node_holder_dropped(struct node *n, int r)
{
	node_slot_release_written(n, r);
	if (r < 0) {
		/* The holder stays under the node's lease, which lives on:
		 * give it back again after the backoff. */
		log_warnx("cannot release the rollout slot: %s, will retry", node_etcd_error(n));
		node_retry_later(n);
		return;
	}
	log_debug("rollout slot released");
}

/* Gives the slot (or the place in the queue for one) back, in a write of its
 * own, queued behind any in flight. */
static void node_drop_holder(struct node *n)
{
	struct fleet_batch *b = NULL;
	int r;

	if (n->rollout.slot == SLOT_NONE || n->rollout.release_sent)
		return;
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 || (r = node_slot_batch_release(n, b)) < 0) {
		fleet_batch_free(b);
		node_holder_dropped(n, r);
		return;
	}
	if ((r = node_write_begin(n, b, "the rollout slot's release", node_holder_dropped)) < 0)
		node_holder_dropped(n, r);
}

void node_unwatch_stage(struct node *n)
{
	for (size_t i = 0; i < ELEMENTSOF(n->rollout.stage_watch); i++)
		n->rollout.stage_watch[i] = fleet_stream_part_remove(n->rollout.stage_watch[i]);
	n->rollout.stage_watch_failed = false;
	node_timer_cancel(&n->rollout.stage_timer);
}

/* Done with the rollout, or no policy: no slot, no waiting for a group. */
static void node_release_slot(struct node *n)
{
	node_drop_holder(n);
	node_unwatch_stage(n);
}

void node_rollout_idle(struct node *n)
{
	node_timer_cancel(&n->rollout.progress_timer);
	node_timer_cancel(&n->rollout.gate_timer);
	node_release_slot(n);
}

void node_progress_cancel(struct node *n)
{
	node_timer_cancel(&n->rollout.progress_timer);
}

void node_rollout_stop(struct node *n)
{
	struct node_rollout *ro = &n->rollout;

	node_timer_cancel(&ro->progress_timer);
	node_timer_cancel(&ro->gate_timer);
	node_unwatch_stage(n);
	node_queue_stop(n);
	node_facts_release(n);
	/* A read in flight is dropped with what it was for; a write in the
	 * queue is waited for like any other, and its end still logs. */
	if (ro->halt_read) {
		fleet_call_cancel(ro->halt_read);
		ro->halt_read = NULL;
		node_halt_end(n);
	}
	if (ro->dead_read) {
		fleet_call_cancel(ro->dead_read);
		ro->dead_read = NULL;
		ro->dead_busy = false;
		while (ro->n_dead > 0)
			node_dead_pop(n);
	}
}

void node_rollout_release(struct node *n)
{
	struct node_rollout *ro = &n->rollout;

	node_rollout_stop(n);
	node_queue_release(n);
	node_halt_end(n);
	ro->dead_busy = false;
	while (ro->n_dead > 0)
		node_dead_pop(n);
	free(ro->dead);
	free(ro->dead_written);
	ro->dead = NULL;
	ro->dead_written = NULL;
	ro->n_dead_written = 0;
}

/* The watcher reads the earlier groups again at most this often: each read
 * is the whole of alive/, running_version/ and the groups, and a stage of
 * 500 hosts reaching the version sends it 500 events (read after each, one
 * run of 1,000 daemons in two stages: some 460 reads).  The gate opens at
 * most this much later. */
#define STAGE_LOOK_USEC (1 * USEC_PER_SEC)

static int node_on_stage_look(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;

	node_timer_cancel(&n->rollout.stage_timer);
	node_facts_seen(n, n->rollout.stage_seen);	/* the facts read before are stale */
	node_schedule_evaluate(n);
	return 0;
}

static int node_on_stage_events(const struct etcd_event *ev, size_t count, int64_t revision,
				void *userdata)
{
	struct node *n = userdata;

	if (count == 0)
		return 0;
	if (revision > n->rollout.stage_seen)
		n->rollout.stage_seen = revision;
	if (!n->rollout.stage_timer &&
	    node_timer_arm(n, &n->rollout.stage_timer, STAGE_LOOK_USEC, node_on_stage_look) < 0)
		node_on_stage_look(NULL, 0, n);	/* no timer: at once */
	return 0;
}

/* A range of the stage watch ended (compacted, or the stream failed: then
 * the resync follows).  What it would have sent is not known: the facts are
 * read again, and the watch is added again from them. */
static void node_on_stage_error(struct etcd_watch *w, int error, int64_t compact,
				void *userdata)
{
	struct node *n = userdata;

	if (error == -ESTALE)
		log_debug("the stage watch started before etcd's compaction (at revision %lld); "
			  "reading the earlier groups again", (long long)compact);
	else
		log_debug("the stage watch ended: %s; reading the earlier groups again",
			  strerror(-error));
	/* Not removed here (that would re-enter libcurl): from the loop. */
	n->rollout.stage_watch_failed = true;
	node_facts_seen(n, compact > n->rollout.stage_seen ? compact : n->rollout.stage_seen);
	node_schedule_evaluate(n);
}

/* While the node waits for an earlier group: what can end the wait is a host
 * reaching the version or a host dying or joining (fleet_stage_follow); a new
 * policy comes on the node's own ranges.  Watched from the revision the
 * decision was made at, on the node's stream: without one (a resync is on
 * its way) the resync decides again. */
static int node_watch_stage(struct node *n, int64_t from)
{
	struct node_rollout *ro = &n->rollout;

	if (ro->stage_watch_failed)
		node_unwatch_stage(n);
	if (ro->stage_watch[0] || !n->sync.stream)
		return 0;
	return fleet_stage_follow(&n->fleet, n->sync.stream, from, node_on_stage_events,
				  node_on_stage_error, n, ro->stage_watch);
}

/* The alive hosts max_fail_percent is a share of, from the node's facts: 1
 * and *ret, or 0 while they are read.  since as node_facts_get()'s. */
static int node_count_alive(struct node *n, int64_t since, long *ret)
{
	const struct fleet_facts *x;
	int r = node_facts_get(n, FACTS_ALIVE, since, &x);
	if (r <= 0)
		return r;
	*ret = (long)x->alive;
	return 1;
}

/* The queueing txn ended (node_write.c). */
static void node_queued(struct node *n, int r)
{
	if (node_queue_tail_refused(n, r)) {
		node_schedule_evaluate(n);	/* at once, without the tail */
		return;
	}
	if (r < 0) {
		log_warnx("cannot take a rollout slot: %s", node_etcd_error(n));
		node_pending_said(n, NULL);
		node_retry_later(n);
		return;
	}
	n->rollout.slot = SLOT_QUEUED;
	n->rollout.marked = false;
	node_queue_enter(n, node_write_revision(n));
	node_retry_reset(n);
}

/* Queues for a slot: the place is known once the key comes back on the
 * stream, so the host waits at least until then: it says so in the same txn
 * (node_wait then finds it said).  The txn is in flight when this returns 0;
 * node_queued() takes its answer. */
static int node_queue(struct node *n)
{
	struct fleet_batch *b = NULL;
	_cleanup_(freep) char *detail = node_slot_detail(n);
	_cleanup_(freep) char *said = NULL;
	struct status_extra x = { .wait = "slot" };
	bool say = !node_failed_here(n);
	int r;

	if (!detail || asprintf(&said, "slot: %s", detail) < 0)
		return -ENOMEM;
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_holder(b, n->host, n->sync.model.desired, n->opt.config->group,
				    false, NULL, n->lease.id)) < 0 ||
	    (r = node_queue_batch_tail(n, b)) < 0 ||
	    (say && (r = fleet_batch_status_extra(b, n->host, STATUS_PUPPET, STATE_PENDING,
						  n->sync.model.desired, -1, detail, &x)) < 0)) {
		fleet_batch_free(b);
		return r;
	}
	if ((r = node_write_begin(n, b, "a place in the slot queue", node_queued)) < 0)
		return r;
	if (say)
		node_pending_said(n, said);
	return 0;
}

/* Past the canaries, promote is what the host waits for first; under
 * auto_promote the first in the queue (nobody ahead of it) speaks for it (the
 * txn makes it once). */
/* The automatic promote's write ended: written, or a guard failed (an
 * operator, another host or a new trigger was first: nothing to do). */
static void node_promoted(struct node *n, int r)
{
	const struct fleet_model *m = &n->sync.model;

	if (r == -ECANCELED)
		return;
	if (r < 0) {
		log_warnx("cannot promote the rollout of %s: %s, will retry", or_none(m->desired),
			  node_etcd_error(n));
		n->rollout.promoted_trigger = 0;
		node_retry_later(n);
		return;
	}
	log_fields(LOG_NOTICE, m->desired, NULL,
		   "canaries of %s validated with no failure: promoted", m->desired);
}

int node_promote_if_due(struct node *n, const struct slot_wait *w)
{
	const struct fleet_model *m = &n->sync.model;
	const struct rollout_policy *policy = &m->policy;
	_cleanup_(freep) char *by = NULL;
	struct fleet_batch *b = NULL;
	int r;

	if (!w->canary || !policy->auto_promote || w->rank != 0 ||
	    w->canaries_done < (size_t)policy->canary || w->failed > 0 ||
	    !m->desired || m->trigger <= 0 || n->rollout.promoted_trigger == m->trigger)
		return 0;	/* not due, or sent and on its way to the model */
	if (asprintf(&by, "auto (%s)", n->host) < 0)
		return -ENOMEM;
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_promote(b, m->desired, m->trigger,
				     m->promoted.key ? m->promoted.mod_revision : 0, by)) < 0) {
		fleet_batch_free(b);
		return r;
	}
	if ((r = node_write_begin(n, b, "the automatic promote", node_promoted)) < 0)
		return r;
	n->rollout.promoted_trigger = m->trigger;
	return 0;
}

/*
 * How long the hosts of a stage spread their claims of its gate over: the
 * first claim must reach the others before most of them send theirs, and
 * it takes about what the node's last answer took (the pending status it
 * wrote just before, as the whole stage did), so the spread is that many
 * times over, at least 2 s.  The first of N claims still goes after about
 * spread / N: a large stage loses no time to it.  One run, 1,000 daemons,
 * two stages of 500 on one etcd: a fixed 2 s let 490 of 500 claims go.
 */
#define GATE_CLAIM_SPREAD_MIN_USEC (2 * USEC_PER_SEC)
#define GATE_CLAIM_SPREAD_MAX_USEC (60 * USEC_PER_SEC)
#define GATE_CLAIM_SPREAD_ANSWERS 8

static uint64_t node_gate_claim_spread(const struct node *n)
{
	uint64_t s = GATE_CLAIM_SPREAD_ANSWERS * node_pace_last_wait(n);
	if (s < GATE_CLAIM_SPREAD_MIN_USEC)
		return GATE_CLAIM_SPREAD_MIN_USEC;
	return s > GATE_CLAIM_SPREAD_MAX_USEC ? GATE_CLAIM_SPREAD_MAX_USEC : s;
}

/* The gate's key is in rollout/ above holders/: how far the model holds
 * that range. */
static int64_t node_gate_seen(const struct fleet_model *m)
{
	return m->queue_apart ? m->rollout_high_revision : m->rollout_revision;
}

/* A write of the gate ended (node_gate_write). */
static void node_gate_written(struct node *n, int r)
{
	struct node_rollout *ro = &n->rollout;

	if (r == -ECANCELED) {
		ro->gate_written = -1;	/* another host's claim or a new trigger, on its way */
		return;
	}
	if (r == -EACCES && !ro->gate_refused) {
		log_warnx("etcd refused the stage gate (%s): this host reads the earlier groups "
			  "itself until orchestrated restarts (run node_identity again, or grant "
			  "the node role rollout/stages/)", node_etcd_error(n));
		ro->gate_refused = true;
		ro->gate_trigger = 0;
		node_schedule_evaluate(n);
		return;
	}
	if (r < 0) {
		log_warnx("cannot write a stage gate: %s, will retry", node_etcd_error(n));
		ro->gate_trigger = 0;
		node_retry_later(n);
		return;
	}
	ro->gate_written = node_write_revision(n);
	if (ro->gate_claim)
		log_info("this host watches the earlier groups for its stage of %s",
			 or_none(n->sync.model.desired));
}

/* A claim's delay ended: the next decision claims, if the gate is still
 * unclaimed. */
static int node_on_gate_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;

	node_timer_cancel(&n->rollout.gate_timer);
	n->rollout.gate_due = true;
	node_schedule_evaluate(n);
	return 0;
}

/* Giving a claim up ended (node_stage_drop_stale). */
static void node_gate_dropped(struct node *n, int r)
{
	if (r < 0 && r != -ECANCELED) {
		log_warnx("cannot give up a stage gate: %s, will retry", node_etcd_error(n));
		n->rollout.gate_drop_mod = 0;
		node_retry_later(n);
	}
}

/*
 * A claim this host holds for a stage that is no longer its own (its group,
 * or the policy's order of groups, changed while it waited) is given up:
 * the hosts of that stage would otherwise wait for a watcher that no longer
 * watches.  keep is the gate of its stage now (NULL: none).  1 while such a
 * write is on its way, 0 when there is none, or a negative code.
 */
static int node_stage_drop_stale(struct node *n, const char *keep)
{
	const struct fleet_model *m = &n->sync.model;
	struct node_rollout *ro = &n->rollout;
	struct fleet_batch *b = NULL;
	const char *group;
	int64_t mod;
	int r;

	if (!(group = fleet_model_stage_claimed(m, n->host, keep, &mod)))
		return 0;
	if (ro->gate_drop_mod == mod)
		return 1;	/* sent: its deletion comes on the stream */
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_stage_drop(b, group, mod)) < 0) {
		fleet_batch_free(b);
		return r;
	}
	log_info("giving up the watch of the stage after group %s: this host's stage changed",
		 group);
	if ((r = node_write_begin(n, b, "a stage gate given up", node_gate_dropped)) < 0)
		return r;
	ro->gate_drop_mod = mod;
	return 1;
}

/* Claims the gate of the stage after group before (open false) or opens
 * it, over the key's mod revision mod: 0 once the write is in flight. */
static int node_gate_write(struct node *n, const char *before, int64_t mod, bool open)
{
	const struct fleet_model *m = &n->sync.model;
	struct node_rollout *ro = &n->rollout;
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_stage(b, before, m->desired, m->trigger, mod, n->host, open,
				   n->lease.id)) < 0) {
		fleet_batch_free(b);
		return r;
	}
	if ((r = node_write_begin(n, b, open ? "the opening of the next stage" :
				  "the watch of the earlier groups", node_gate_written)) < 0)
		return r;
	ro->gate_trigger = m->trigger;
	ro->gate_mod = mod;
	ro->gate_sent_seen = node_gate_seen(m);
	ro->gate_written = 0;
	ro->gate_claim = !open;
	if (open)
		log_fields(LOG_NOTICE, m->desired, NULL,
			   "every alive host of group %s and the groups before it runs %s: "
			   "the next stage may start", before, m->desired);
	return 0;
}

/*
 * A staged rollout (the policy's groups): 1 when the node's stage may start
 * (the first stage, or its gate open), 0 while it waits (ret_wait->group set,
 * or ->reading while a write or read of its own decides), or a negative
 * code.  The gate of a stage is rollout/stages/G, G the group before it in
 * the policy; being open it says that every earlier group was done.
 */
static int node_stage_turn(struct node *n, struct slot_wait *ret_wait)
{
	const struct fleet_model *m = &n->sync.model;
	const struct rollout_policy *policy = &m->policy;
	struct node_rollout *ro = &n->rollout;
	size_t stage = rollout_policy_stage(policy, n->opt.config->group);
	_cleanup_(freep) char *watcher = NULL;
	const struct fleet_facts *x;
	enum stage_gate gate;
	int64_t mod;
	int r;

	const char *before = stage > 0 ? policy->groups[stage - 1] : NULL;
	if ((r = node_stage_drop_stale(n, before)) != 0) {
		ret_wait->reading = r > 0;	/* decided again once it is gone */
		return r < 0 ? r : 0;
	}
	if (stage == 0)
		return 1;
	gate = fleet_model_stage_gate(m, before, &mod, &watcher);
	if (gate != STAGE_GATE_NONE) {
		/* an unclaimed gate seen later is claimed after a delay anew */
		node_timer_cancel(&ro->gate_timer);
		ro->gate_due_trigger = 0;
	}
	if (gate == STAGE_GATE_OPEN) {
		node_unwatch_stage(n);
		return 1;
	}
	if (ro->gate_trigger == m->trigger && ro->gate_mod == mod &&
	    (ro->gate_written == 0 ||
	     (ro->gate_written < 0 && node_gate_seen(m) == ro->gate_sent_seen) ||
	     node_gate_seen(m) < ro->gate_written)) {
		/* Its write, or what refused it, comes next: a key that
		 * looks as it did may have changed and changed back (a claim
		 * whose host died), so any newer event of the gates' range
		 * lets it decide again. */
		ret_wait->reading = true;
		return 0;
	}
	if (gate == STAGE_GATE_WATCHED && strcmp(watcher, n->host) != 0) {
		/* Another host of the stage watches: wait for the gate alone. */
		node_unwatch_stage(n);
		if (!(ret_wait->group = strdup(before)))
			return -ENOMEM;
		ret_wait->watcher = TAKE_PTR(watcher);
		return 0;
	}
	bool alone = n->once || ro->gate_refused;	/* reads the earlier groups itself */
	if (gate == STAGE_GATE_NONE && !alone && (!n->lease.registered || n->lease.id <= 0)) {
		/* A claim is under the host's lease, or it would outlive it. */
		ret_wait->reading = true;	/* the registration decides again */
		return 0;
	}
	if (gate == STAGE_GATE_NONE && !alone) {
		/* Unclaimed (--once looks for itself: it will not stay to watch
		 * for others).  Every host of the stage sees that at once, at
		 * the trigger or when the watcher's lease went: each claims
		 * after a random delay, so that the first claim reaches most
		 * of the others before they send theirs. */
		if (ro->gate_due_trigger != m->trigger || ro->gate_due_mod != mod) {
			/* First, the pending status every host of the stage
			 * writes now: the delay is measured on its answer,
			 * and starts after it (the next decision). */
			node_timer_cancel(&ro->gate_timer);
			ro->gate_due = ro->gate_armed = false;
			ro->gate_due_trigger = m->trigger;
			ro->gate_due_mod = mod;
			node_schedule_evaluate(n);
		} else if (!ro->gate_armed) {
			ro->gate_armed = true;
			if (node_timer_arm(n, &ro->gate_timer,
					   random_between(0, node_gate_claim_spread(n)),
					   node_on_gate_timer) < 0)
				return -ENOMEM;
		}
		if (!ro->gate_due) {
			if (!(ret_wait->group = strdup(before)))
				return -ENOMEM;
			return 0;
		}
		ro->gate_due = false;
		ro->gate_due_trigger = 0;
		if ((r = node_gate_write(n, before, mod, false)) < 0)
			return r;
		ret_wait->reading = true;
		return 0;
	}
	/* This host watches for its stage. */
	if ((r = node_facts_get(n, FACTS_STAGES, 0, &x)) <= 0) {
		ret_wait->reading = r == 0;
		return r;
	}
	r = fleet_facts_stage_ready(x, policy, n->opt.config->group, n->host, m->desired,
				    &ret_wait->group, &ret_wait->behind);
	if (r <= 0)
		return r < 0 ? r : node_watch_stage(n, x->revision + 1);
	node_unwatch_stage(n);
	if (alone)
		return 1;
	if ((r = node_gate_write(n, before, mod, true)) < 0)
		return r;
	ret_wait->reading = true;
	return 0;
}

void node_stage_duty(struct node *n)
{
	const struct fleet_model *m = &n->sync.model;
	struct slot_wait w = { 0 };
	int64_t mod;

	if (n->once || m->policy_state != 1 || !m->policy.n_groups || !m->desired ||
	    !fleet_model_stage_claimed(m, n->host, NULL, &mod))
		return;	/* the usual case: it watches for no stage */
	/* its own stage's gate, being claimed, is watched, never claimed here;
	 * another's is given up */
	if (node_stage_turn(n, &w) < 0)
		log_warnx("cannot watch the earlier groups: %s", node_etcd_error(n));
	free(w.group);
	free(w.watcher);
}

/*
 * Asks the rollout whether the node may run (fleet_model_decide(), from the
 * model at the revision being evaluated).  Returns 1 when it may (no policy,
 * or its stage's turn and a slot held), 0 when it must wait — for an earlier
 * group (ret_wait->group set), a slot, promote, or a halt it has just written
 * (ret_wait->halting) — or a negative code.
 *
 * Slots are counted over every key ahead of the node's in the queue
 * (node_queue.c), whatever its group: the first max_parallel by create
 * revision hold one, and a host of an earlier group still there is one
 * still running (a retry).  A host that would start checks the failure
 * budget in the same model first, and halts the rollout instead when it is
 * spent.
 */
int node_take_slot(struct node *n, struct slot_wait *ret_wait)
{
	const struct rollout_policy *policy = &n->sync.model.policy;
	const struct config *cfg = n->opt.config;
	/* A slot is kept once the start that marks it was written; until then
	 * it is taken again at every decision (node_slot_start_written). */
	bool holds = node_slot_held(n) && n->rollout.marked;
	struct rollout_ask ask = { .alive = -1, .has_slot = holds };
	struct rollout_decision d = { 0 };
	const struct fleet_facts *x = NULL;
	int r;

	if (n->sync.model.policy_state == 0) {
		node_release_slot(n);
		return 1;
	}
	if (policy->n_groups && !holds && (r = node_stage_turn(n, ret_wait)) <= 0) {
		if (ret_wait->group)
			node_drop_holder(n);
		return r;
	}
	if (policy->max_percent > 0 && policy->max_parallel <= 0 && !holds) {
		/* The limit is a share of the stage's alive hosts: wait for the facts. */
		if ((r = node_facts_get(n, policy->n_groups ? FACTS_STAGES : FACTS_ALIVE, 0,
					&x)) <= 0) {
			ret_wait->reading = r == 0;
			return r;
		}
	}
	if (!holds) {
		if (policy->max_parallel > 0)
			ask.limit = policy->max_parallel;
		else if (policy->max_percent > 0 &&
			 (r = fleet_facts_percent_limit(x, policy, cfg->group, &ask.limit)) < 0)
			return r;
	}
	if (n->rollout.slot != SLOT_NONE && !holds) {
		/* Its place: how many are ahead, as far as any cap can reach
		 * (the slots, or the canaries before a promote). */
		long reach = ask.limit > policy->canary ? ask.limit : policy->canary;
		if ((r = node_queue_place(n, (size_t)(reach > 0 ? reach : 0) + 1, &ask.ahead)) <= 0) {
			ret_wait->reading = r == 0;
			return r;
		}
		ask.placed = true;
	}
	for (;;) {
		ask.queued = n->rollout.slot != SLOT_NONE;
		free(d.halt_reason);
		d.halt_reason = NULL;
		if ((r = fleet_model_decide(&n->sync.model, &ask, &d)) < 0)
			return r;
		if (d.verdict == ROLLOUT_QUEUE) {
			/* The splay comes before the host's first write for
			 * the version, here its place in the queue: a fleet
			 * queueing at once is the burst the splay spreads, and
			 * a slot held through a splay would sit idle. */
			if (node_run_splay(n, "queueing for a rollout slot")) {
				free(d.halt_reason);
				ret_wait->splaying = true;
				return 0;
			}
			/* Its place is known once its key is back on the
			 * stream: until then it waits (the switch below). */
			if ((r = node_queue(n)) < 0)
				return r;
			break;
		} else if (d.verdict == ROLLOUT_COUNT_ALIVE && ask.alive < 0) {
			if ((r = node_count_alive(n, 0, &ask.alive)) <= 0) {
				free(d.halt_reason);
				ret_wait->reading = r == 0;
				return r;
			}
		} else
			break;
	}
	_cleanup_(freep) char *halt_reason = d.halt_reason;

	ret_wait->limit = ask.limit;
	ret_wait->canaries_done = d.canaries_done;
	ret_wait->ranked = d.ranked;
	ret_wait->rank = d.rank;
	ret_wait->failed = d.failed;
	switch (d.verdict) {
	case ROLLOUT_START:
		if (holds)
			return 1;
		if (!d.ranked) {
			node_release_slot(n);	/* groups alone: the whole group at once */
			return 1;
		}
		bool again = node_slot_held(n);
		n->rollout.slot = d.canary ? SLOT_CANARY : SLOT_HELD;
		if (again)
			return 1;	/* taken again, still to be marked */
		if (d.canary)
			log_info("rollout slot taken as canary %zu of %ld",
				 d.canaries_done + d.failed + d.rank + 1, policy->canary);
		else
			log_info("rollout slot taken (%zu of %ld)", d.rank + 1, ask.limit);
		return 1;
	case ROLLOUT_HALT:
		/* The budget is spent: this host starts no one, itself included. */
		ret_wait->halting = true;
		(void)node_halt(n, halt_reason, d.failed);
		return 0;
	case ROLLOUT_WAIT_CANARY:
		ret_wait->canary = true;
		node_slot_untake(n);
		node_queue_follow(n);
		return 0;
	default:
		if (d.ranked) {
			node_slot_untake(n);
			node_queue_follow(n);
		}
		return 0;
	}
}

char *node_slot_detail(struct node *n)
{
	char *s = NULL;
	return asprintf(&s, "waiting for a rollout slot for %s", or_none(n->sync.model.desired)) < 0 ? NULL
												: s;
}

/* --- halting ---------------------------------------------------------------------------- */

bool node_halt_pending(const struct node *n)
{
	return n->rollout.halting ||
	       (n->rollout.halt_revision > 0 && n->sync.model.revision < n->rollout.halt_revision);
}

bool node_failed_here(const struct node *n)
{
	return n->run.attempts > 0 && streq_ptr(n->run.fail_version, n->sync.model.desired) &&
	       n->run.fail_trigger == n->sync.model.trigger;
}

/* The halt failed: the budget is checked again after the backoff. */
static void node_halt_failed(struct node *n)
{
	log_warnx("cannot halt the rollout of %s (%s): %s, will retry", n->rollout.halt.rec.version,
		  or_none(n->rollout.halt.rec.reason), node_etcd_error(n));
	n->rollout.budget_trigger = 0;
	node_retry_later(n);
}

/* The halt is over, written or not: the next may go. */
static void node_halt_end(struct node *n)
{
	n->rollout.halting = false;
	n->rollout.revert_refused = false;
	rollout_halt_release(&n->rollout.halt);
}

static int node_halt_send(struct node *n);

/* The halt's write ended: written (the stream brings it to the model at its
 * revision, node_halt_pending() waits for that), a guard that failed
 * (another node was first, or a new trigger came: nothing to say), or
 * refused with the revert, which goes again without it. */
static void node_halt_written(struct node *n, int r)
{
	const struct rollout_record *rec = &n->rollout.halt.rec;

	if (r == -EACCES && rec->reverted_to && !n->stopping) {
		/* The node's role may not write current_version: halt anyway. */
		rollout_halt_drop_revert(&n->rollout.halt);
		n->rollout.revert_refused = true;
		if ((r = node_halt_send(n)) >= 0)
			return;
	}
	if (r == 0) {
		n->rollout.halt_revision = node_write_revision(n);
		if (n->rollout.revert_refused)
			log_fields(LOG_ERR, rec->version, NULL,
				   "halted the rollout of %s (%s), but etcd refused the automatic revert: "
				   "this host may not write current_version", rec->version, rec->reason);
		else if (rec->reverted_to)
			log_fields(LOG_ERR, rec->version, NULL, "halted the rollout of %s: %s; reverted to %s",
				   rec->version, rec->reason, rec->reverted_to);
		else
			log_fields(LOG_ERR, rec->version, NULL, "halted the rollout of %s: %s",
				   rec->version, rec->reason);
	} else if (r != -ECANCELED)
		node_halt_failed(n);
	node_halt_end(n);
}

/* The halt as one guarded write in the node's queue (fleet_batch_halt). */
static int node_halt_send(struct node *n)
{
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_halt(b, &n->rollout.halt)) < 0) {
		fleet_batch_free(b);
		return r;
	}
	return node_write_begin(n, b, "the halt", node_halt_written);
}

/* previous_version was read: the halt, reverting when there is somewhere to
 * go back to, is written next. */
static void node_on_halt_read(int error, struct rollout_halt *h, void *userdata)
{
	struct node *n = userdata;

	n->rollout.halt_read = NULL;
	if (error >= 0 && (error = node_halt_send(n)) >= 0)
		return;
	node_halt_failed(n);
	node_halt_end(n);
}

/*
 * Halts the rollout of the desired version, with auto_revert when the policy
 * says so, without blocking the loop: previous_version's read first (only
 * to revert), then one guarded write (fleet_batch_halt); their ends log what
 * happened.  Returns 1 when this node has a halt in flight or written that
 * its model has not caught up with (node_halt_pending): the caller must not
 * start a run meanwhile, and no second halt is sent.
 */
static int node_halt(struct node *n, const char *reason, size_t failed)
{
	const struct fleet_model *m = &n->sync.model;
	int r;

	if (node_halt_pending(n))
		return 1;
	if (n->stopping || !m->desired_known || !m->desired || m->trigger <= 0 ||
	    fleet_model_halted(m, NULL))
		return 0;
	r = rollout_halt_init(&n->rollout.halt, m->desired, m->trigger,
			      m->halted.key ? m->halted.mod_revision : 0, n->host, reason,
			      (long)failed);
	if (r < 0) {
		log_warnx("cannot halt the rollout of %s (%s): %s, will retry", m->desired, reason,
			  strerror(-r));
		n->rollout.budget_trigger = 0;
		node_retry_later(n);
		return 0;
	}
	n->rollout.halting = true;
	if (m->policy.auto_revert)
		r = fleet_halt_read_start(&n->fleet, &n->rollout.halt, NODE_ETCD_PATIENCE_MS,
					  node_on_halt_read, n, &n->rollout.halt_read);
	else
		r = node_halt_send(n);
	if (r < 0) {
		node_halt_failed(n);
		node_halt_end(n);
		return 0;
	}
	return 1;
}

/*
 * The failure budget, checked by the hosts that failed and by every host
 * about to start a run (fleet_model_decide, in node_take_slot).  A host
 * whose own failure record has reached its model sees every record written
 * before it, so the host whose failure crosses the budget is sure to see it
 * crossed, and halts the rollout even when nobody else would start.  Once
 * per count and trigger; max_fail_percent costs one count-only read of alive/.
 */
int node_check_budget(struct node *n)
{
	const struct fleet_model *m = &n->sync.model;
	_cleanup_(freep) char *reason = NULL;
	size_t failed;
	int r;

	if (m->policy_state != 1 || !rollout_policy_has_budget(&m->policy) ||
	    !fleet_model_failed_here(m, false) || fleet_model_halted(m, NULL))
		return 0;
	failed = fleet_model_failures(m);
	if (n->rollout.budget_trigger == m->trigger && n->rollout.budget_count == failed)
		return 0;
	n->rollout.budget_trigger = m->trigger;
	n->rollout.budget_count = failed;
	r = node_budget_exceeded(n, failed, 0, &reason);
	if (r == -EAGAIN) {
		n->rollout.budget_trigger = 0;	/* checked again with the answer */
		return 1;			/* nothing starts meanwhile */
	}
	if (r < 0) {
		n->rollout.budget_trigger = 0;
		node_retry_later(n);
		return 0;
	}
	return r > 0 ? node_halt(n, reason, failed) : 0;
}

/*
 * Hosts that died holding a slot count against the budget too.  An expired
 * lease deletes a holder, and so does every run's end; they differ in what
 * the holder's host left at that revision: a run's end deletes its
 * puppet/running in the same txn, a death does not.  One host looks, the
 * first waiting for a slot, which follows the queue's releases (one read
 * per slot freed by a running host, pinned to the deletion's revision), and writes the dead host's failure record, once (a guarded
 * write: only while it has none); it then checks the budget, since the dead
 * host cannot.  The holders are looked at one at a time, each a read and
 * maybe a write that do not block the loop; until the last is done the node
 * starts no run, as the budget may be spent.
 */
static void node_dead_next(struct node *n);

/* The first holder in the queue is done with. */
static void node_dead_pop(struct node *n)
{
	struct node_rollout *ro = &n->rollout;

	dead_holder_release(ro->dead[0]);
	free(ro->dead[0]);
	memmove(&ro->dead[0], &ro->dead[1], (ro->n_dead - 1) * sizeof(*ro->dead));
	ro->n_dead--;
}

/* The failure records this node wrote that its model has not caught up with
 * (their events may come after others): the budget counts them in. */
static size_t node_dead_unseen(struct node *n)
{
	struct node_rollout *ro = &n->rollout;
	size_t k = 0;

	for (size_t i = 0; i < ro->n_dead_written; i++)
		if (ro->dead_written[i] > n->sync.model.revision)
			ro->dead_written[k++] = ro->dead_written[i];
	ro->n_dead_written = k;
	return k;
}

/* A dead host's record was written at this rollout: the budget, counted
 * with it. */
static void node_dead_check_budget(struct node *n, const struct dead_holder *d)
{
	const struct fleet_model *m = &n->sync.model;
	_cleanup_(freep) char *reason = NULL;
	size_t failed;

	if (m->trigger != d->trigger || !streq_ptr(m->desired, d->version))
		return;		/* a new trigger came: the record does not count */
	failed = fleet_model_failures(m) + node_dead_unseen(n);
	/* While max_fail_percent's alive hosts are read (-EAGAIN), the record
	 * reaches the model of every host, and whoever would start next
	 * counts it (fleet_model_decide) and halts if the budget is spent. */
	if (node_budget_exceeded(n, failed, 0, &reason) > 0)
		(void)node_halt(n, reason, failed);
}

/* The first holder's look ended (nothing to write, or its record's write
 * ended): the next. */
static void node_dead_done(struct node *n)
{
	n->rollout.dead_busy = false;
	node_dead_pop(n);
	node_dead_next(n);
}

/* The record's write ended: written, or someone else recorded it first
 * (-ECANCELED), or it failed, as a read that failed does. */
static void node_dead_recorded(struct node *n, int r)
{
	struct node_rollout *ro = &n->rollout;
	const struct dead_holder *d = ro->dead[0];

	if (r == 0) {
		log_fields(LOG_WARNING, d->version, NULL,
			   "%s died holding a rollout slot for %s: counted as failed", d->host,
			   d->version);
		int64_t *v = realloc(ro->dead_written, (ro->n_dead_written + 1) * sizeof(*v));
		if (v) {
			ro->dead_written = v;
			ro->dead_written[ro->n_dead_written++] = node_write_revision(n);
		}
		node_dead_check_budget(n, d);
	} else if (r != -ECANCELED)
		log_warnx("cannot check whether %s died holding a slot: %s", d->host,
			  node_etcd_error(n));
	node_dead_done(n);
}

/* puppet/running/HOST at the holder's deletion was read: a dead host's
 * record is written; a done one, or a revision compacted meanwhile (nobody
 * can tell), is let go. */
static void node_on_dead_read(int error, struct dead_holder *d, void *userdata)
{
	struct node *n = userdata;
	struct fleet_batch *b = NULL;
	int r = error;

	n->rollout.dead_read = NULL;
	if (r >= 0 && d->died) {
		if ((r = fleet_batch_new(&n->fleet, &b)) >= 0 &&
		    (r = fleet_batch_dead_holder(b, d)) >= 0 &&
		    (r = node_write_begin(n, TAKE_PTR(b), "a dead host's failure record",
					  node_dead_recorded)) >= 0)
			return;		/* still busy: node_dead_recorded() ends it */
		fleet_batch_free(b);
	}
	if (r < 0)
		log_warnx("cannot check whether %s died holding a slot: %s", d->host,
			  node_etcd_error(n));
	node_dead_done(n);
}

/* Looks at the first holder in the queue, unless one is being looked at;
 * once none is left, the node decides again. */
static void node_dead_next(struct node *n)
{
	struct node_rollout *ro = &n->rollout;

	if (ro->dead_busy)
		return;
	while (ro->n_dead > 0 && !n->stopping) {
		if (fleet_dead_holder_read_start(&n->fleet, ro->dead[0], NODE_ETCD_PATIENCE_MS,
						 node_on_dead_read, n, &ro->dead_read) >= 0) {
			ro->dead_busy = true;
			return;
		}
		log_warnx("cannot check whether %s died holding a slot: %s", ro->dead[0]->host,
			  node_etcd_error(n));
		node_dead_pop(n);
	}
	node_schedule_evaluate(n);
}

void node_rollout_client_changed(struct node *n)
{
	struct node_rollout *ro = &n->rollout;

	if (ro->halt_read) {
		/* The budget is checked again after the backoff, and halts. */
		ro->halt_read = NULL;
		node_halt_failed(n);
		node_halt_end(n);
	}
	if (ro->dead_read) {
		ro->dead_read = NULL;
		ro->dead_busy = false;
		node_dead_next(n);	/* the same holder, asked on the new client */
	}
	node_queue_client_changed(n);
}

/* Queues the holders that went running since the last look that this node
 * is to look at: under a budget, by the first in line (who sees the
 * releases), those of this rollout. */
static void node_dead_queue(struct node *n, const struct rollout_holder *gone, size_t n_gone)
{
	const struct fleet_model *m = &n->sync.model;
	struct node_rollout *ro = &n->rollout;

	if (m->policy_state != 1 || !rollout_policy_has_budget(&m->policy) || !m->desired_known ||
	    !m->desired || m->trigger <= 0 || fleet_model_halted(m, NULL))
		return;
	for (size_t i = 0; i < n_gone; i++) {
		if (strcmp(gone[i].host, n->host) == 0 || gone[i].create_revision <= m->trigger)
			continue;
		/* One allocation each: the first's read holds its address. */
		_cleanup_(freep) struct dead_holder *d = calloc(1, sizeof(*d));
		struct dead_holder **v = realloc(ro->dead, (ro->n_dead + 1) * sizeof(*v));
		if (v)
			ro->dead = v;
		if (!d || !v || dead_holder_init(d, gone[i].host, gone[i].create_revision,
						 m->desired, m->trigger) < 0)
			continue;
		ro->dead[ro->n_dead++] = TAKE_PTR(d);
	}
}

/* Returns 1 while dead holders are being looked at: no run starts until
 * their records, and the budget counted with them, are settled. */
int node_check_released(struct node *n)
{
	struct rollout_holder *gone = NULL;
	size_t n_gone = node_queue_take_released(n, &gone);

	if (n_gone > 0) {
		node_dead_queue(n, gone, n_gone);
		rollout_holders_free(gone, n_gone);
		free(gone);
		if (n->rollout.n_dead > 0)
			node_dead_next(n);
	}
	return n->rollout.n_dead > 0;
}

/* Whether failed hosts are more than the policy's budget
 * (rollout_budget_spent): 1 and *ret_reason, 0, -EAGAIN while the alive
 * hosts max_fail_percent is a share of are read (the answer evaluates
 * again), or another negative code.  since as node_facts_get()'s. */
int node_budget_exceeded(struct node *n, size_t failed, int64_t since, char **ret_reason)
{
	const struct rollout_policy *p = &n->sync.model.policy;
	long alive = -1;
	int r;

	if (n->sync.model.policy_state != 1)
		return 0;
	r = rollout_budget_spent(p, failed, alive, ret_reason);
	if (r == -EAGAIN) {
		if ((r = node_count_alive(n, since, &alive)) <= 0)
			return r == 0 ? -EAGAIN : r;
		r = rollout_budget_spent(p, failed, alive, ret_reason);
	}
	return r;
}

/* --- progress_deadline ------------------------------------------------------------------- */

static int node_on_progress_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	_cleanup_(freep) char *reason = NULL;

	node_timer_cancel(&n->rollout.progress_timer);
	if (n->state != NODE_WAIT_SLOT || n->rollout.progress_releases != n->queue.releases)
		return 0;
	if (asprintf(&reason, "no rollout slot freed for %ld s (progress_deadline)",
		     n->sync.model.policy.progress_deadline) >= 0)
		(void)node_halt(n, reason, fleet_model_failures(&n->sync.model));
	return 0;
}

/* The first host waiting for a slot watches the rollout's progress: every
 * slot freed starts the deadline again. */
void node_watch_progress(struct node *n, const struct slot_wait *w)
{
	long deadline = n->sync.model.policy.progress_deadline;

	if (deadline <= 0 || !w->ranked || w->canary || !node_queue_first(n)) {
		node_timer_cancel(&n->rollout.progress_timer);
		return;
	}
	if (n->rollout.progress_timer && n->rollout.progress_releases == n->queue.releases)
		return;
	n->rollout.progress_releases = n->queue.releases;
	if (node_timer_arm(n, &n->rollout.progress_timer, (uint64_t)deadline * USEC_PER_SEC,
			   node_on_progress_deadline) < 0)
		log_warnx("cannot arm the progress deadline timer");
}
