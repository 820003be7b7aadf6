/*
 * node_write.c — the writes every version change makes (queueing for a
 * rollout slot, what a waiting host waits for, a run's start and its end):
 * one at a time, without blocking the loop, and never applied twice.
 *
 * A run's txn used to be a blocking call bounded by the request timeout.
 * Under an etcd slower than that, the loop stalled (keepalives, the watchdog
 * and hook output waited behind it), the call gave up while etcd still worked
 * on it, and the run's retry sent it again: each slow answer became more work
 * for etcd.  Here the txn runs on the client's multi handle with the patience
 * of NODE_ETCD_PATIENCE_MS, well past etcd's own request timeout, so that the
 * answer is etcd's verdict rather than our impatience.
 *
 * A write that failed without a definite answer (a timeout, etcd's "request
 * timed out", a connection lost) may still have been applied, or may still be
 * in etcd's apply queue: etcd's "request timed out" means it could not apply
 * the write within its own timeout, not that it dropped it.  So after a
 * backoff (node_write_backoff) the node first asks whether it was applied
 * (fleet_batch_applied_start: a read of the write's witness key, which etcd
 * answers once it has applied what it committed before, and which costs it no
 * proposal), and sends the write again only when it was not.  A resend that
 * joined the queue behind the first would double the work of an etcd that is
 * behind already, and while etcd's apply lags every lease keepalive fails:
 * the first step of the spiral.  The resend is settled too
 * (fleet_batch_commit_start), so a first send applied after the read is not
 * written twice either.  A definite answer (written, a guard that failed, a
 * refusal, an unknown lease) ends the write and goes to its done function.
 * etcd's "too many requests" (-EBUSY) is definite too, but not an end: etcd
 * refused the write before proposing it, so unless an earlier send of it
 * went unanswered it is sent again after the backoff, with no question.
 *
 * While etcd is behind, a write's first send and every later question wait
 * for the node's pace too (node_pace.c): a fleet whose writes failed together
 * sends fewer of them a second until etcd has caught up.
 *
 * Writes go out one at a time, in the order they were made (a first
 * publication, then the run's end, say): a later one never overtakes an
 * earlier one that is slow.  While one is in flight the node decides nothing
 * (node_evaluate waits): a decision must not race the write of the last one.
 * The end of each evaluates again.  The services a write publishes
 * (node_batch_services staged them, node_services_take_staged hands them over) travel with it and count as
 * published once it landed.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/backoff.h"
#include "base/cleanup.h"
#include "base/log.h"
#include "base/strv.h"
#include "fleet/fleet_lease.h"
#include "node_internal.h"

struct node_write {
	struct node_write *next;	/* the queue, n->write first */
	struct fleet_batch *batch;
	struct etcd_call *call;		/* the send, or the question, in flight */
	sd_event_source *resend;	/* the wait before the next send or question */
	unsigned failures;		/* sends or questions without a definite answer */
	unsigned sends;			/* sends so far */
	uint64_t sent;			/* when the last send or question went (node_pace) */
	const char *what;		/* for the log, a literal */
	int64_t lease;			/* the node's lease when it was made */
	node_write_fn done;
	struct node_services staged;	/* the services it publishes */
};

static void node_write_free(struct node_write *w)
{
	if (!w)
		return;
	fleet_call_cancel(w->call);
	sd_event_source_disable_unref(w->resend);
	fleet_batch_free(w->batch);
	node_services_release(&w->staged);
	free(w);
}

/* An answer that says what happened; anything else may have been applied. */
static bool node_write_definite(int error)
{
	return error == 0 || error == -ECANCELED || error == -EACCES || error == -EPERM ||
	       error == -EINVAL || error == -ENOMEM || error == -EPROTO || error == -EKEYEXPIRED;
}

static void node_on_write_answer(int error, int64_t revision, void *userdata);

/* Each send waits twice as long as the one before it, up to 8 times the first
 * patience: an etcd that did not answer in time is further behind than
 * thought, and a resend that gives up as early only queues behind the first. */
static long node_write_patience(const struct node_write *w)
{
	unsigned shift = w->failures < 3 ? w->failures : 3;
	return NODE_ETCD_PATIENCE_MS << shift;
}

static int node_write_send(struct node *n)
{
	struct node_write *w = n->write;
	int r = fleet_batch_commit_start(w->batch, node_write_patience(w), node_on_write_answer,
					 n, &w->call);
	if (r == 0) {
		w->sends++;
		w->sent = node_now(n);
	}
	return r > 0 ? -EINVAL : r;	/* an empty batch is a caller's bug */
}

static void node_on_write_applied(int error, int64_t revision, void *userdata);

/* After a send without an answer: was it applied?  (Else it goes again.) */
static int node_write_ask(struct node *n)
{
	struct node_write *w = n->write;
	int r = fleet_batch_applied_start(w->batch, node_write_patience(w), node_on_write_applied,
					  n, &w->call);
	if (r > 0)
		return node_write_send(n);	/* not sent yet, or cannot be asked about */
	if (r == 0)
		w->sent = node_now(n);
	return r;
}

static int node_on_write_resend(sd_event_source *s, uint64_t usec, void *userdata);

/* The first send of the first write: now, or after the node's pace
 * (node_pace.c) while etcd is behind; the timer's end sends it as a resend
 * would, and the node decides nothing until it ended. */
static int node_write_go(struct node *n)
{
	uint64_t delay = n->stopping ? 0 : node_pace_delay(n);

	if (delay == 0)
		return node_write_send(n);
	log_info("etcd is behind: sending %s in %.1f s", n->write->what,
		 (double)delay / (double)USEC_PER_SEC);
	return node_timer_arm(n, &n->write->resend, delay, node_on_write_resend);
}

/* Ends the first write: the services it carried count as published when it
 * was applied, its done function runs (node_write_revision() says where it
 * landed), and the next write goes out. */
static void node_write_end(struct node *n, int error, int64_t revision)
{
	struct node_write *w = n->write;
	node_write_fn done = w->done;
	int r;

	n->write = w->next;
	if (error == 0)
		node_services_committed(n, &w->staged);
	else if (fleet_lease_refused(&n->fleet, error))
		node_lease_refused(n, w->lease);
	w->call = NULL;
	node_write_free(w);
	n->write_revision = error == 0 ? revision : 0;
	done(n, error);
	n->write_revision = 0;
	if (n->write && !n->write->call && !n->write->resend &&
	    (r = node_write_go(n)) < 0) {
		node_write_end(n, r, 0);
		return;
	}
	if (n->write)
		return;		/* the last one's end goes on below */
	if (n->once_exit)
		node_once_finish(n, n->once_exit - 1);
	else if (n->stop_requested)
		node_finish_stop(n);
	node_schedule_evaluate(n);
}

/* The timer before a send: the first (paced), one after a refusal, or the
 * question after a send without an answer.  Only a send that may have been
 * applied is asked about. */
static int node_on_write_resend(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	int r;

	node_timer_cancel(&n->write->resend);
	r = n->write->failures ? node_write_ask(n) : node_write_send(n);
	if (r < 0)
		node_write_end(n, r, 0);
	return 0;
}

/* etcd refused the send before proposing it ("too many requests"), and no
 * earlier send of it went unanswered: nothing of it is applied, so it goes
 * again, with no question first, after a backoff and the node's pace (which
 * the refusal widened).  Every send so far was refused so (any other answer
 * ends the write or counts as a failure): the backoff counts the sends. */
static void node_write_refused(struct node *n)
{
	struct node_write *w = n->write;
	uint64_t delay = node_paced(n, backoff_delay(&node_write_backoff, w->sends));

	log_warnx("etcd refused %s unapplied: %s; sending it again in %.1f s", w->what,
		  node_etcd_error(n), (double)delay / (double)USEC_PER_SEC);
	if (node_timer_arm(n, &w->resend, delay, node_on_write_resend) < 0)
		node_write_end(n, -EBUSY, 0);
}

/* No definite answer (to a send, or to the question): ask after a backoff. */
static void node_write_later(struct node *n, int error, bool was_question)
{
	struct node_write *w = n->write;
	uint64_t delay = node_paced(n, backoff_delay(&node_write_backoff, ++w->failures));

	log_warnx("cannot %s %s%s: %s; asking etcd whether it was applied in %.1f s",
		  was_question ? "ask whether" : "write", w->what,
		  was_question ? " was applied" : "", node_etcd_error(n),
		  (double)delay / (double)USEC_PER_SEC);
	if (node_timer_arm(n, &w->resend, delay, node_on_write_resend) < 0)
		node_write_end(n, error, 0);
}

static void node_on_write_answer(int error, int64_t revision, void *userdata)
{
	struct node *n = userdata;
	struct node_write *w = n->write;

	w->call = NULL;
	node_pace_answered(n, error, w->sent);
	if (error == 0 && w->failures > 0)
		log_info("%s written at revision %lld, after %u unanswered send%s", w->what,
			 (long long)revision, w->sends - 1, w->sends == 2 ? "" : "s");
	if (node_write_definite(error) || n->stopping) {
		node_write_end(n, error, revision);
		return;
	}
	if (error == -EBUSY && w->failures == 0) {
		node_write_refused(n);
		return;
	}
	node_write_later(n, error, false);
}

static void node_on_write_applied(int error, int64_t revision, void *userdata)
{
	struct node *n = userdata;
	struct node_write *w = n->write;
	int r;

	w->call = NULL;
	node_pace_answered(n, error, w->sent);
	if (error == 0 && revision > 0) {
		log_info("%s written at revision %lld (read back: %u send%s without an answer)",
			 w->what, (long long)revision, w->sends, w->sends == 1 ? "" : "s");
		node_write_end(n, 0, revision);
		return;
	}
	if (n->stopping) {
		node_write_end(n, error < 0 ? error : -ECONNREFUSED, 0);
		return;
	}
	if (error < 0 && !node_write_definite(error)) {
		node_write_later(n, error, true);
		return;
	}
	/* Not applied (or the read was refused: a settled resend is safe). */
	log_warnx("%s was not applied: sending it again (settled)", w->what);
	if ((r = node_write_send(n)) < 0)
		node_write_end(n, r, 0);
}

int node_write_begin(struct node *n, struct fleet_batch *batch, const char *what,
		     node_write_fn done)
{
	_cleanup_(fleet_batch_freep) struct fleet_batch *b = batch;
	struct node_write *w, **tail;
	int r;

	if (fleet_batch_empty(b)) {
		/* Nothing changed: what was staged is what etcd holds. */
		struct node_services same = node_services_take_staged(n);
		node_services_committed(n, &same);
		node_services_release(&same);
		return 1;
	}
	if (!(w = calloc(1, sizeof(*w))))
		return -ENOMEM;
	w->batch = TAKE_PTR(b);
	w->what = what;
	w->lease = n->lease.id;
	w->done = done;
	w->staged = node_services_take_staged(n);
	for (tail = &n->write; *tail; tail = &(*tail)->next)
		;
	*tail = w;
	if (n->write != w)
		return 0;	/* goes out when the ones before it ended */
	if ((r = node_write_go(n)) < 0) {
		n->write = NULL;
		node_write_free(w);
		return r;
	}
	return 0;
}

int64_t node_write_revision(const struct node *n)
{
	return n->write_revision;
}

void node_write_client_changed(struct node *n)
{
	struct node_write *w = n->write;

	if (!w || !w->call)
		return;		/* none, or waiting for its backoff: goes on as it is */
	w->call = NULL;
	log_info("the etcd connection changed while %s was in flight: asking whether it was "
		 "applied", w->what);
	if (node_write_ask(n) < 0)
		node_write_later(n, -ECONNRESET, true);
}

void node_write_abandon(struct node *n)
{
	while (n->write) {
		struct node_write *w = n->write;
		n->write = w->next;
		node_write_free(w);
	}
}

void node_write_stop(struct node *n)
{
	struct node_write *w = n->write;
	int r;

	if (!w || w->call)
		return;
	if (w->sends > 0) {
		node_write_abandon(n);	/* waiting to resend: not worth the stop's wait */
		return;
	}
	/* Never sent, waiting for its pace: it goes now, and the stop waits for
	 * it as for one in flight. */
	node_timer_cancel(&w->resend);
	if ((r = node_write_send(n)) < 0)
		node_write_end(n, r, 0);
}
