/*
 * node_pace.c — how fast the node writes to etcd: as fast as etcd answers,
 * and slower while etcd is behind.
 *
 * etcd 3.4 renews a lease only once it has applied what it committed: a
 * renewal waits a second for that, then is refused.  So a write backlog of
 * more than a second stops every renewal of the fleet, and one as long as
 * the TTL loses every lease, whose rework (a grant, the leased keys, a new
 * place in a slot queue) is more backlog: the spiral.  A node cannot see
 * etcd's backlog, but it sees it in its own requests: answers that take more
 * than a second, writes that etcd timed out itself or that got no answer, a
 * renewal refused or unanswered.  Each such sign widens the node's pace: the
 * window over which its next writes are spread (each first waits a random
 * part of it) doubles, at most once per window (the signs of one backlog
 * come together), up to PACE_MAX.  Each prompt answer halves it.  So a fleet
 * whose etcd fell behind sends it fewer writes a second until it has caught
 * up, and is back at full speed as soon as answers are prompt, with no node
 * knowing of another.
 *
 * Retries are paced too (node_next_retry_delay: the larger of the backoff
 * and the pace), among them the slot queue's look, which etcd 3.4 answers
 * by reading the whole queue: held to a tenth of a core under 1,000 nodes,
 * looks given up on at their patience and sent again were what kept it
 * busy once the writes were spread.  The keepalive is never delayed: it is
 * what the pace protects.  --once is not paced: cron waits behind it, and it
 * writes once.
 */
#include <errno.h>

#include "base/backoff.h"
#include "base/log.h"
#include "node_internal.h"

/* An answer slower than this is a sign of a backlog: etcd refuses a renewal
 * after waiting this long for its apply. */
#define PACE_SLOW_USEC (1 * USEC_PER_SEC)
/* The first window, and the widest.  The window a fleet needs is about twice
 * its size over the writes a second etcd can apply: 1,000 nodes on an etcd
 * held to a tenth of a core (some 20 a second) need 100 s; a window of 64 s
 * left it a third above that, and its backlog never drained. */
#define PACE_FIRST_USEC (1 * USEC_PER_SEC)
#define PACE_MAX_USEC (256 * USEC_PER_SEC)

static uint64_t pace_now(struct node *n)
{
	uint64_t usec = 0;
	(void)sd_event_now(n->event, CLOCK_MONOTONIC, &usec);
	return usec;
}

/* An error that says etcd (or the way to it) did not keep up: no answer in
 * time, or etcd's own timeout.  A definite answer says etcd is there. */
static bool pace_error_is_strain(int error)
{
	return error == -ECONNREFUSED || error == -ETIMEDOUT || error == -ECONNRESET ||
	       error == -EAGAIN;
}

void node_pace_strained(struct node *n, const char *why)
{
	struct node_pace *p = &n->pace;
	uint64_t now = pace_now(n);

	if (n->once)
		return;
	if (p->window && now < p->widened + p->window)
		return;		/* the same backlog: once per window */
	if (!p->window)
		log_info("etcd is behind (%s): spreading this node's writes until it answers "
			 "promptly again", why);
	p->window = p->window ? p->window * 2 : PACE_FIRST_USEC;
	if (p->window > PACE_MAX_USEC)
		p->window = PACE_MAX_USEC;
	p->widened = now;
	p->strains++;
	node_metrics_changed(n);
}

void node_pace_answered(struct node *n, int error, uint64_t sent)
{
	struct node_pace *p = &n->pace;
	uint64_t took = sent ? pace_now(n) - sent : 0;

	if (pace_error_is_strain(error)) {
		node_pace_strained(n, "a request failed or got no answer in time");
		return;
	}
	if (took >= PACE_SLOW_USEC) {
		node_pace_strained(n, "an answer took more than a second");
		return;
	}
	if (error < 0 || !p->window)
		return;
	p->window /= 2;
	if (p->window < PACE_FIRST_USEC / 2) {
		p->window = 0;
		log_info("etcd answers promptly again: writing at full speed");
	}
	node_metrics_changed(n);
}

uint64_t node_pace_delay(struct node *n)
{
	return n->pace.window ? random_between(0, n->pace.window) : 0;
}

uint64_t node_pace_now(struct node *n)
{
	return pace_now(n);
}
