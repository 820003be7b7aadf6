/*
 * node_pace.c — how fast the node writes to etcd: as fast as etcd answers,
 * and slower while etcd is behind.
 *
 * etcd 3.4 renews a lease only once it has applied what it committed: a
 * renewal waits a second for that, then is refused.  So a write backlog of
 * more than a second stops every renewal of the fleet, and one as long as
 * the TTL loses every lease, whose rework (a grant, the leased keys, a new
 * place in a slot queue) is more backlog: the spiral.  A node cannot see
 * etcd's backlog, but it sees it in its own requests: ones that failed after
 * waiting seconds (etcd's "request timed out", a renewal refused once it
 * had waited that long) or got no answer within their patience.  Each such
 * sign widens the node's pace (struct pace, base/backoff.h): the window over
 * which its next writes are spread, each first waiting a random part of it.
 * The window doubles at most once per window, is at least as long as the
 * failed request waited, and stops at node_pace_window's cap; each prompt
 * answer halves it.  So a fleet whose etcd fell behind sends it fewer writes
 * a second until it has caught up, and is back at full speed as soon as
 * answers are prompt, with no node knowing of another.
 *
 * A slow answer alone is not a sign: an etcd far away, or one that answers
 * every request in two seconds, has no backlog to drain, and a fleet paced
 * for ever by its latency would crawl.  Nor is a failure that came at once:
 * etcd, or its absence, answered.  But for one: etcd's "too many requests"
 * (-EBUSY), which comes at once and says that etcd has committed over 5,000
 * entries more than it applied.  That is the backlog itself, in etcd's own
 * words (10,000 simulated nodes starting together on 3 members met it 4,000
 * to 9,900 times, bench/fleet.sh).
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

/* An answer within this is prompt: etcd refuses a renewal after waiting this
 * long for its apply. */
#define PACE_PROMPT_USEC (1 * USEC_PER_SEC)
/* A failure that came sooner than this is not a sign: etcd was there to
 * answer.  A renewal refused after etcd's one second of waiting for its apply
 * says the backlog was a second long, which an etcd at a full core under a
 * trigger of 1,000 nodes has for moments; counted, it slowed such a trigger
 * by half for no gain (one run: 33.7 s instead of 15.8 s, the CPU floor
 * 18.7 s).  One that waited longer, or got no answer at all, is the backlog
 * that loses leases. */
#define PACE_SIGN_USEC (2 * USEC_PER_SEC)
/* The first window, and the widest.  The window a fleet needs is about twice
 * its size over the writes a second etcd can apply: 1,000 nodes on an etcd
 * held to a tenth of a core (some 20 a second) need 100 s; a window of 64 s
 * left it a third above that, and its backlog never drained. */
static const struct backoff node_pace_window = {
	.first = USEC_PER_SEC, .cap = 256 * USEC_PER_SEC,
};

/* An error that may say etcd did not keep up: its own timeout (a write it
 * could not apply in time, a renewal refused for its apply's lag), no answer
 * within the request's patience, or no etcd at all; how long the request
 * waited tells them apart (PACE_SIGN_USEC).  The etcd client gives all of
 * them as -ECONNREFUSED (etcd.h), since each is worth another member. */
static bool pace_error_is_strain(int error)
{
	return error == -ECONNREFUSED || error == -ETIMEDOUT;
}

void node_pace_strained(struct node *n, const char *why, uint64_t waited)
{
	bool began = !n->pace.window;

	if (n->once || !pace_widen(&n->pace, &node_pace_window, node_now(n), waited))
		return;
	if (began)
		log_info("etcd is behind (%s): spreading this node's writes until it answers "
			 "promptly again", why);
	n->pace_strains++;
	node_metrics_changed(n);
}

void node_pace_answered(struct node *n, int error, uint64_t sent)
{
	uint64_t waited = sent ? node_now(n) - sent : 0;

	if (error == 0 && sent)
		n->pace_last_wait = waited;
	if (error == -EBUSY) {
		node_pace_strained(n, "it refused a write: too many requests", waited);
		return;
	}
	if (pace_error_is_strain(error)) {
		if (waited >= PACE_SIGN_USEC)
			node_pace_strained(n, "a request failed or got no answer in time", waited);
		return;
	}
	if (error < 0 || !sent || waited >= PACE_PROMPT_USEC)
		return;		/* slow, not a sign either way */
	if (!n->pace.window)
		return;
	if (pace_narrow(&n->pace, &node_pace_window))
		log_info("etcd answers promptly again: writing at full speed");
	node_metrics_changed(n);
}

uint64_t node_pace_last_wait(const struct node *n)
{
	return n->pace_last_wait;
}

uint64_t node_pace_delay(struct node *n)
{
	return pace_delay(&n->pace);
}

uint64_t node_paced(struct node *n, uint64_t delay)
{
	uint64_t paced = pace_delay(&n->pace);
	return paced > delay ? paced : delay;
}
