/*
 * backoff.h — the one retry delay of orchestrate: exponential, capped, with
 * full jitter.
 *
 * After the n-th failure in a row (n >= 1) the delay is a uniformly random
 * time in [floor, min(cap, first * 2^(n-1))].  The growth makes a failing
 * peer cost less and less; the cap bounds how late a recovered peer is noticed;
 * the jitter is what keeps a thousand clients that failed together (an etcd
 * restart, a site power cut) from retrying together: with full jitter
 * (floor 0) their retries spread over the whole window, so the load a
 * recovering etcd sees is flat rather than a wall of synchronized requests.
 * Every retry path — the node's runs, its resync, its lease, the watch
 * streams, the command line's compare-and-swap and waits — takes its delay
 * from here.
 */
#ifndef ORCHESTRATE_BACKOFF_H
#define ORCHESTRATE_BACKOFF_H

#include <stdbool.h>
#include <stdint.h>

struct backoff {
	uint64_t first;		/* the window after the first failure */
	uint64_t cap;		/* the widest window */
	uint64_t floor;		/* the least delay (0: full jitter) */
};

/* The delay after the n-th consecutive failure (n >= 1; 0 is taken as 1), in
 * the unit of b's fields. */
uint64_t backoff_delay(const struct backoff *b, unsigned n);

/*
 * A retry before a deadline (a lease keepalive): a random delay between a
 * half and two thirds of the time left, never below least nor above most.
 * Each retry leaves a third to a half of what was left, so that the tries are
 * a few and most of them late, when whatever made the first fail (a busy
 * etcd) has had time to pass.
 * Past the deadline (left 0), a random delay in [most / 2, most].  In the unit
 * of the arguments.
 */
uint64_t backoff_before(uint64_t left, uint64_t least, uint64_t most);

/*
 * A pace: the window a client spreads its requests over while its server is
 * behind (0: none, full speed).  Each sign of a backlog doubles it, from
 * first up to cap, but at most once per window, since the signs of one
 * backlog come together (every request that was waiting in it fails), and
 * makes it at least as long as the failed request waited: a request that
 * waited 30 s for nothing says the backlog is that long, and a client that
 * only doubled from a second would need as long again to learn it, one
 * failed request at a time.  Each prompt answer halves it, and below first /
 * 2 it is gone.  Additive recovery would be gentler, but a fleet whose server
 * caught up should not stay slow for minutes.  Times in one unit (µs, say),
 * now monotonic.
 */
struct pace {
	uint64_t window;
	uint64_t widened;	/* when it last grew */
};
/* A sign of a backlog at now, from a request that waited waited: true when
 * the window grew. */
bool pace_widen(struct pace *p, const struct backoff *b, uint64_t now, uint64_t waited);
/* A prompt answer: true when that ended the pace (the window is 0 again). */
bool pace_narrow(struct pace *p, const struct backoff *b);
/* The delay of the next request: a random part of the window. */
uint64_t pace_delay(const struct pace *p);

/* A uniformly random number in [lo, hi] (lo when hi <= lo), from getrandom(2). */
uint64_t random_between(uint64_t lo, uint64_t hi);

#endif
