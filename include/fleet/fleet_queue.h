/*
 * fleet_queue.h — the slot queue of a rollout policy, followed at a cost
 * that does not grow with the fleet.
 *
 * The queue is rollout/holders/HOST, one key per host under its lease, in
 * the order of their create revisions: the first max_parallel hold a slot.
 * A host whose run started marks its key ("holding").  Instead of every
 * holder reaching every node, each waiting node follows only what decides
 * its turn (etcd's lock recipe, counted):
 *
 *  - a look reads who is just ahead of the node's key and the key itself,
 *    and counts the keys ahead: how many the queue held at the revision
 *    before the node's key was created (all of them were created before
 *    it), which etcd counts from its index without reading a key, and
 *    which the releases since count down; when that revision was compacted,
 *    it reads the few keys just ahead instead (newest first, at most a
 *    limit: exact below it);
 *  - who is just ahead comes from the tail, P/rollout_tail: each host
 *    names itself there in the txn that creates its key, and etcd answers
 *    that put with the tail it replaced: the host that queued just before
 *    it.  That host's key, read with the count, is the one just ahead
 *    when it was created at the replaced tail's mod revision (the same
 *    txn).  One request of a few keys, where etcd would read and sort the
 *    whole queue to find the newest key created before the node's (the
 *    scan): 4.2 ms of etcd's CPU at 1,000 keys queued, 16 ms at 5,000,
 *    0.7 ms for a key.  A look that does not have that answer (the
 *    queueing txn was a resend found applied by a read) reads the tail as
 *    it was at the revision before the node's key first, a request more.  When that host left, the tail as it
 *    was before that host's key names the one before it, and so on back,
 *    a small request a step; the look scans only when the tail does not
 *    check out (a value that names no host, a host that queued again, the
 *    tail's history compacted, a role from before the tail, or more than a
 *    few steps back).  A host that does not write the tail (its role, or an
 *    older orchestrate) is missing from it, so the same request counts the
 *    queue at each revision between the tail named and the node's key: a
 *    rise is a key that entered unnamed, and the look scans;
 *  - a node that is not next watches the key just ahead of it alone: that
 *    host taking its slot (the mark) or leaving is the only thing that can
 *    move the node to the front.  The mark carries where that host stood
 *    (struct queue_place: exactly how many keys were ahead of it, at which
 *    revision), so the node behind counts itself from there with no read:
 *    one more than that, less the releases since;
 *  - the first waiting node (the one just ahead of it holds a slot) watches
 *    the queue's releases, with each key as it was, so it also sees a host
 *    that died holding a slot (for its failure record) and the rollout's
 *    progress (progress_deadline).
 *
 * So a slot freed reaches the one node it can start, a run started reaches
 * the one node behind it, and each node reads the queue once, when it
 * enters it.
 */
#ifndef ORCHESTRATE_FLEET_QUEUE_H
#define ORCHESTRATE_FLEET_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/fleet.h"
#include "fleet/fleet_stream.h"

/* Where a host stood in the queue: its key's create revision, and exactly
 * how many keys created before it were in the queue at revision at. */
struct queue_place {
	int64_t created;
	size_t ahead;
	int64_t at;
};

/* The host that queued just before, from the tail a queueing txn replaced:
 * its name, and the revision it queued at (the tail's mod revision then). */
struct queue_tail {
	char *host;
	int64_t written;
};
/* 1 and *ret (the caller frees ret->host) when the write txn applied at
 * revision replaced a tail naming a host (fleet_batch_queue_tail), and this
 * client read that txn's answer last; 0 when not known; -ENOMEM. */
int fleet_queue_tail_before(struct fleet *f, int64_t revision, struct queue_tail *ret);

/* What a look found; the caller's, alive while the look is in flight. */
struct queue_look;
typedef void (*fleet_queue_look_fn)(int error, struct queue_look *look, void *userdata);
struct queue_look {
	int64_t revision;	/* read at; below asked_created: a member behind */
	int64_t created;	/* the node's key's create revision; 0: no key */
	bool moved;		/* its key was created elsewhen than asked: look again */
	size_t ahead;		/* keys created before it, at most the limit... */
	bool exact;		/* ...and all of them (fewer than the limit, or counted) */
	int64_t counted_at;	/* ahead held at this revision; releases since count */
	char *next;		/* the host just ahead; NULL: none */
	int64_t next_created;	/* its key's create revision */
	bool next_holds;	/* it took its slot */
	bool scanned;		/* it read the queue itself (the tail did not do) */
	bool unnamed;		/* ...since a key entered it unnamed by the tail */
	/* The question, for the answer, and the steps between. */
	int64_t asked_created;
	size_t limit;
	fleet_queue_look_fn fn;
	void *userdata;
	struct fleet *f;
	char *host;
	long patience_ms;
	struct etcd_call **call;	/* the caller's: the step in flight */
	int64_t tail_written;		/* the mod revision of the tail followed */
	unsigned walked;		/* steps back along the tail's history */
	int64_t window_end;		/* no key may have entered unnamed before this... */
	size_t window_counts;		/* ...counted at this many revisions */
	bool window_count_ahead;	/* the last count is the one before the key */
};
void queue_look_release(struct queue_look *l);

/*
 * Looks at the queue from host's key, created at revision created: who is
 * just ahead of it, the key itself, and how many keys are ahead: with limit
 * 0, counted at the revision before the key was created (exact; -ESTALE
 * when that revision was compacted), else the keys created before it read
 * at the newest revision, at most limit.  Into *l (the caller's, reset
 * here, alive until fn runs).  fn runs from the loop with 0 and *l filled,
 * or an error; *ret is the read in flight, for fleet_call_cancel(), until
 * then.  before: who queued just before, as the node's queueing txn found
 * it (fleet_queue_tail_before), or NULL: the look then reads the tail as it
 * was first, a request more.
 */
int fleet_queue_look_start(struct fleet *f, const char *host, int64_t created, size_t limit,
			   const struct queue_tail *before, long patience_ms, struct queue_look *l,
			   fleet_queue_look_fn fn, void *userdata, struct etcd_call **ret);

/*
 * Follows the key of host next (its mark or its deletion), or, next NULL,
 * every release of the queue (deletions, each with the key as it was:
 * fleet_queue_release()), from revision from, as one range added to the
 * node's stream (fleet_stream_start()): a waiting host opens no stream of
 * its own.  *ret until fleet_stream_part_remove().
 */
int fleet_queue_follow(struct fleet *f, struct etcd_watch *stream, const char *next,
		       int64_t from, fleet_stream_fn on_events, fleet_stream_error_fn on_error,
		       void *userdata, struct etcd_watch_part **ret);

/* 1 and *ret when ev, on the stream over the key just ahead, is that host's
 * mark carrying where it stood (fleet_batch_holder()'s place), else 0. */
int fleet_queue_mark(const struct etcd_event *ev, struct queue_place *ret);

/* A key of the queue deleted: whose, when, and what it held. */
struct queue_release {
	char *host;
	int64_t revision;	/* of the deletion */
	int64_t created;	/* the key's create revision */
	char *version;		/* its version; NULL when it said none */
	bool held;		/* its run had started */
};
/* 1 and *ret (caller releases) when ev is a release of the queue stream
 * (with its key as it was), else 0; -ENOMEM. */
int fleet_queue_release(const struct etcd_event *ev, struct queue_release *ret);
void queue_release_release(struct queue_release *r);

#endif
