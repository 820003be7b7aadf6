/*
 * node_queue.c — the node's place in the slot queue of a rollout policy,
 * followed at a cost that does not grow with the fleet (fleet_queue.h).
 *
 * Once its key is in the queue the node looks once: who is just ahead of
 * it, and how many keys the queue held at the revision before its key (all
 * created before it: etcd counts them from its index).  While it waits it
 * follows only what can move it: the key just ahead (that host starting its
 * run, or leaving), or, when that host already runs, the queue's releases
 * from the revision its count holds at, since then any freed slot may be
 * its own, and each release of a key ahead counts it down.  The mark of the
 * host just ahead carries where that host stood, and the node counts itself
 * from there: one more.  So it looks again only when the host just ahead
 * leaves unmarked, marks without a place, or its stream is lost; a look in
 * flight is one request, and the decision waits for it (node_take_slot).
 *
 * The first in line also sees every holder that went while running: those
 * are handed to the dead-holder checks of node_rollout.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "fleet/fleet_lease.h"
#include "node_internal.h"

static void node_queue_stop_stream(struct node *n)
{
	struct node_queue *q = &n->queue;

	q->stream = fleet_stream_part_remove(q->stream);
	free(q->following);
	q->following = NULL;
}

static void node_queue_forget_before(struct node_queue *q)
{
	free(q->before.host);
	q->before = (struct queue_tail){ 0 };
}

static void node_queue_moved(struct node *n, int64_t revision)
{
	if (revision > n->queue.moved)
		n->queue.moved = revision;
	node_schedule_evaluate(n);
}

/*
 * The host just ahead marked its key with where it stood: exactly p->ahead
 * keys created before it, at revision p->at.  Then this node has that many
 * ahead, and that host: one more, with no read.  Keys created between the
 * two were gone by the look that found that host just ahead, so they are
 * left out of the count and of its releases (counts_below); those created
 * before it can only go, and the releases stream from p->at on counts them
 * down.  The count is this node's own to pass on once the stream has passed
 * its look too (exact_from).  False when the look is not the one that
 * followed that key, or something else moved since: look again.
 */
static bool node_queue_count_from(struct node *n, const struct queue_place *p, int64_t marked)
{
	struct node_queue *q = &n->queue;
	struct queue_look *l = &q->look;

	if (!q->known || q->read || q->moved > l->revision || !l->next || l->next_holds ||
	    p->created != l->next_created)
		return false;
	q->exact_from = p->at > l->revision ? p->at : l->revision;
	q->counts_below = p->created + 1;
	q->count_basis = q->counted_at = p->at;	/* the releases stream from there */
	q->replayed_to = marked;
	q->moved = 0;
	l->ahead = p->ahead + 1;
	l->exact = true;
	l->next_holds = true;
	return true;
}

/* The key just ahead changed: it started its run, or it is gone. */
static int node_on_next_events(const struct etcd_event *ev, size_t count, int64_t revision,
			       void *userdata)
{
	struct node *n = userdata;
	struct queue_place p;

	if (count == 1 && fleet_queue_mark(&ev[0], &p) > 0 &&
	    node_queue_count_from(n, &p, ev[0].kv.mod_revision))
		node_schedule_evaluate(n);	/* a slot may be ours now */
	else if (count > 0)
		node_queue_moved(n, revision);
	return 0;
}

/* Releases: each slot freed (or place left) may be ours; a holder that was
 * running goes to the dead-holder checks. */
static int node_on_release_events(const struct etcd_event *ev, size_t count, int64_t revision,
				  void *userdata)
{
	struct node *n = userdata;
	struct node_queue *q = &n->queue;
	bool look_again = false;

	for (size_t i = 0; i < count; i++) {
		_cleanup_(queue_release_release) struct queue_release rel = { 0 };
		int r = fleet_queue_release(&ev[i], &rel);
		if (r == 0 && ev[i].type == ETCD_EVENT_DELETE)
			look_again = true;	/* etcd left out the key as it was */
		if (r <= 0)
			continue;
		bool replayed = rel.revision <= q->replayed_to;
		if (!replayed)
			q->releases++;
		if (rel.revision > q->counted_at)
			q->counted_at = rel.revision;	/* the count holds there too */
		if (rel.created >= q->counts_below)
			continue;	/* one behind us moves nothing */
		bool in_count = q->known && rel.revision <= q->count_basis;
		if (!in_count && q->known && q->look.exact && q->look.ahead > 0)
			q->look.ahead--;	/* counted down: no look needed */
		else if (!in_count)
			look_again = true;
		if (!rel.held || replayed)
			continue;
		struct rollout_holder *v = realloc(q->released, (q->n_released + 1) * sizeof(*v));
		if (!v)
			continue;
		q->released = v;
		q->released[q->n_released++] = (struct rollout_holder){
			.host = TAKE_PTR(rel.host), .create_revision = rel.revision };
	}
	if (look_again)
		node_queue_moved(n, revision);
	else
		node_schedule_evaluate(n);	/* a slot may be ours now */
	return 0;
}

static void node_on_queue_error(struct etcd_watch *w, int error, int64_t compact,
				void *userdata)
{
	struct node *n = userdata;

	log_debug("the slot queue's watch ended: %s; looking again", strerror(-error));
	/* Not stopped here (that would re-enter libcurl): from the loop. */
	n->queue.stream_failed = true;
	node_schedule_evaluate(n);
}

static void node_on_look(int error, struct queue_look *l, void *userdata)
{
	struct node *n = userdata;
	struct node_queue *q = &n->queue;

	q->read = NULL;
	node_pace_answered(n, error, q->look_sent);
	if (l->scanned)
		q->scans++;
	if (l->unnamed)
		log_info("a key entered the slot queue just ahead of this host without naming "
			 "itself in rollout_tail (an orchestrate from before it, or a role that "
			 "may not write it): read the queue to find it");
	if (error == -ESTALE && l->limit == 0) {
		/* The revision before its key was compacted (a long wait):
		 * the keys just ahead are read instead, at most a limit. */
		log_info("the slot queue as it was before this host queued is compacted: "
			 "reading the keys ahead instead");
		q->count_compacted = true;
		node_schedule_evaluate(n);
		return;
	}
	if (error < 0) {
		log_warnx("cannot look at the slot queue: %s, will retry", node_etcd_error(n));
		node_retry_later(n);
		return;
	}
	if (l->revision < l->asked_created) {
		/* The member answered from before the node's own key (the client
		 * moved to one that lags): not an answer about the place. */
		log_debug("the slot queue was read at %lld, before this host's place: again",
			  (long long)l->revision);
		node_retry_later(n);
		return;
	}
	if (l->created == 0) {
		/* Our key went with its lease, or by hand.  While the lease is
		 * replaced, the leased keys' write puts it back and enters the
		 * queue at its revision (node_slot_key_rewritten); else the
		 * host queues again. */
		if (!node_lease_gone(n)) {
			log_info("the rollout slot queue lost this host's place: queueing again");
			node_slot_lost(n);
		}
	} else if (l->moved) {
		q->created = l->created;	/* it was there before the write: from there */
		node_queue_forget_before(q);
	} else {
		/* Counted before its key: the releases since stream from
		 * there, on a stream started anew (one still open from an
		 * earlier count is past some of them).  Those up to the look
		 * were another's to watch, or, first in line already, those
		 * its stream gave (counted_at, until now). */
		bool first = q->stream && !q->following;
		q->replayed_to = !first ? l->revision
			: q->counted_at > q->replayed_to ? q->counted_at : q->replayed_to;
		q->known = true;
		q->counts_below = q->created;
		q->count_basis = q->counted_at = q->exact_from = l->counted_at;
		if (first)
			node_queue_stop_stream(n);
	}
	node_schedule_evaluate(n);
}

int node_queue_batch_tail(struct node *n, struct fleet_batch *b)
{
	if (n->queue.no_tail)
		return 0;
	return fleet_batch_queue_tail(b, n->host);
}

bool node_queue_tail_refused(struct node *n, int error)
{
	if (error != -EACCES || n->queue.no_tail)
		return false;
	log_warnx("etcd refused a write with the slot queue's tail (%s): queueing without it "
		  "until orchestrated restarts; the hosts behind this one then read the whole "
		  "queue to find it (run node_identity again to grant the tail)",
		  node_etcd_error(n));
	n->queue.no_tail = true;
	return true;
}

void node_queue_enter(struct node *n, int64_t created)
{
	struct node_queue *q = &n->queue;

	fleet_call_cancel(q->read);
	q->read = NULL;
	node_queue_stop_stream(n);
	node_queue_forget_before(q);
	/* Called as the write that put the key ends: its answer, read last,
	 * may say who queued just before (the tail it replaced). */
	if (created > 0 && fleet_queue_tail_before(&n->fleet, created, &q->before) < 0)
		node_queue_forget_before(q);
	q->created = created;
	q->known = false;
	q->moved = 0;
	q->count_compacted = false;
}

void node_queue_leave(struct node *n)
{
	node_queue_enter(n, 0);
	queue_look_release(&n->queue.look);
}

int node_queue_place(struct node *n, size_t limit, size_t *ret_ahead)
{
	struct node_queue *q = &n->queue;
	const struct queue_look *l = &q->look;
	int r;

	if (q->created <= 0)
		return -EINVAL;
	if (q->stream_failed) {
		q->stream_failed = false;
		node_queue_stop_stream(n);
		q->known = false;
	}
	if (q->known && (l->revision < q->moved || (!l->exact && limit > l->limit)))
		q->known = false;	/* something moved since, or it asks further */
	if (q->known) {
		*ret_ahead = l->ahead;
		return 1;
	}
	if (q->read)
		return 0;
	r = fleet_queue_look_start(&n->fleet, n->host, q->created, q->count_compacted ? limit : 0,
				   &q->before, node_etcd_patience(n), &q->look, node_on_look, n,
				   &q->read);
	if (r < 0)
		return r;
	q->reads++;
	q->look_sent = node_now(n);
	return 0;
}

void node_queue_follow(struct node *n)
{
	struct node_queue *q = &n->queue;
	const struct queue_look *l = &q->look;
	const char *next = l->next && !l->next_holds ? l->next : NULL;
	int r;

	if (!q->known)
		return;
	if (q->stream && streq_ptr(q->following, next))
		return;		/* it follows that already, without a gap */
	node_queue_stop_stream(n);
	if (!n->sync.stream)
		return;		/* a resync opens it, and evaluates again then */
	if (next && !(q->following = strdup(next)))
		return;
	/* The key just ahead from the look on; the releases from the
	 * revision the count holds at: one range more on the node's stream. */
	r = fleet_queue_follow(&n->fleet, n->sync.stream, next,
			       (next ? l->revision : q->counted_at) + 1,
			       next ? node_on_next_events : node_on_release_events,
			       node_on_queue_error, n, &q->stream);
	if (r < 0) {
		log_warnx("cannot follow the slot queue: %s, will retry", strerror(-r));
		node_queue_stop_stream(n);
		q->known = false;
		node_retry_later(n);
	}
}

bool node_queue_counted(const struct node *n, struct queue_place *ret)
{
	const struct node_queue *q = &n->queue;

	if (!q->known || !q->look.exact || q->created <= 0 || q->counted_at < q->exact_from)
		return false;
	*ret = (struct queue_place){ .created = q->created, .ahead = q->look.ahead,
				     .at = q->counted_at };
	return true;
}

void node_queue_hold(struct node *n)
{
	node_queue_stop_stream(n);
	n->queue.known = false;	/* counted down by a stream now gone */
}

bool node_queue_first(const struct node *n)
{
	return n->queue.stream && !n->queue.following;
}

size_t node_queue_take_released(struct node *n, struct rollout_holder **ret)
{
	size_t k = n->queue.n_released;

	*ret = n->queue.released;
	n->queue.released = NULL;
	n->queue.n_released = 0;
	return k;
}

void node_queue_unwatch(struct node *n)
{
	node_queue_stop_stream(n);
	n->queue.known = false;
}

void node_queue_stop(struct node *n)
{
	node_queue_unwatch(n);
	fleet_call_cancel(n->queue.read);
	n->queue.read = NULL;
}

void node_queue_client_changed(struct node *n)
{
	struct node_queue *q = &n->queue;

	if (q->read) {
		q->read = NULL;		/* freed with the old client */
		node_schedule_evaluate(n);
	}
}

void node_queue_release(struct node *n)
{
	struct node_queue *q = &n->queue;

	node_queue_leave(n);	/* forgets who queued before, too */
	rollout_holders_free(q->released, q->n_released);
	free(q->released);
	q->released = NULL;
	q->n_released = 0;
}
