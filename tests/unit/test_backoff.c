/*
 * test_backoff.c — the one retry delay (base/backoff.h): every draw inside its
 * window, the window doubling up to the cap, never below the floor, and
 * spread (full jitter: clients that failed together do not retry together);
 * and the retry before a deadline, a half to two thirds of the time left.
 */
#include <stdint.h>

#include "base/backoff.h"
#include "tap.h"

#define DRAWS 2000

/* The least and the most of DRAWS delays after the n-th failure. */
static void range_of(const struct backoff *b, unsigned n, uint64_t *lo, uint64_t *hi)
{
	*lo = UINT64_MAX;
	*hi = 0;
	for (int i = 0; i < DRAWS; i++) {
		uint64_t d = backoff_delay(b, n);
		if (d < *lo)
			*lo = d;
		if (d > *hi)
			*hi = d;
	}
}

/* The pace: widened once per backlog, up to its cap, halved by each prompt
 * answer, gone below half its first window. */
static void test_pace(void)
{
	const struct backoff b = { 100, 1000, 0 };
	struct pace p = { 0 };
	uint64_t most = 0;

	ok(pace_delay(&p) == 0, "no pace: no delay");
	ok(!pace_narrow(&p, &b), "a prompt answer without a pace ends nothing");
	ok(pace_widen(&p, &b, 5000, 10) && p.window == 100, "a first sign: the first window");
	ok(!pace_widen(&p, &b, 5050, 10) && p.window == 100,
	   "the same backlog's next sign, within the window: no wider");
	ok(pace_widen(&p, &b, 5100, 10) && p.window == 200, "a sign a window later: twice as wide");
	for (uint64_t t = 6000; t < 20000; t += 1000)
		(void)pace_widen(&p, &b, t, 10);
	ok(p.window == 1000, "never wider than the cap (%llu)", (unsigned long long)p.window);
	for (int i = 0; i < 200; i++) {
		uint64_t d = pace_delay(&p);
		if (d > most)
			most = d;
	}
	ok(most <= 1000 && most > 500, "a delay is a random part of the window (max %llu)",
	   (unsigned long long)most);
	ok(!pace_narrow(&p, &b) && p.window == 500, "a prompt answer halves it");
	ok(!pace_narrow(&p, &b) && !pace_narrow(&p, &b) && p.window == 125, "and again");
	ok(!pace_narrow(&p, &b) && p.window == 62, "half the first window is still a pace");
	ok(pace_narrow(&p, &b) && p.window == 0, "below it the pace ends");
	ok(pace_delay(&p) == 0, "and a request goes at once");
	ok(pace_widen(&p, &b, 30000, 700) && p.window == 700,
	   "a request that waited longer than the first window: as wide as its wait");
	ok(!pace_widen(&p, &b, 30500, 5000) && p.window == 700, "once per window still");
	ok(pace_widen(&p, &b, 31000, 5000) && p.window == 1000, "and never past the cap");
}

int main(void)
{
	test_pace();
	const struct backoff full = { 100, 1000, 0 };
	const struct backoff floored = { 100, 1000, 100 };
	uint64_t lo, hi;

	range_of(&full, 1, &lo, &hi);
	ok(hi <= 100, "first failure: within the first window (max %llu)", (unsigned long long)hi);
	ok(lo < 20 && hi > 80, "full jitter spreads over the window (%llu..%llu)",
	   (unsigned long long)lo, (unsigned long long)hi);
	range_of(&full, 3, &lo, &hi);
	ok(hi <= 400 && hi > 300, "third failure: the window has doubled twice (max %llu)",
	   (unsigned long long)hi);
	range_of(&full, 30, &lo, &hi);
	ok(hi <= 1000 && hi > 900, "many failures: capped (max %llu)", (unsigned long long)hi);
	range_of(&full, 0, &lo, &hi);
	ok(hi <= 100, "n 0 is taken as the first failure");
	range_of(&floored, 1, &lo, &hi);
	ok(lo == 100 && hi == 100, "a floor as wide as the first window: exactly it");
	range_of(&floored, 4, &lo, &hi);
	ok(lo >= 100 && hi <= 800 && hi > 700, "never below the floor (%llu..%llu)",
	   (unsigned long long)lo, (unsigned long long)hi);
	/* before a deadline: a half to two thirds of what is left, within bounds */
	uint64_t blo = UINT64_MAX, bhi = 0, plo = UINT64_MAX, phi = 0, slo = UINT64_MAX;
	for (int i = 0; i < DRAWS; i++) {
		uint64_t d = backoff_before(3000, 100, 10000), p = backoff_before(0, 100, 1000);
		uint64_t s = backoff_before(150, 100, 10000);
		blo = d < blo ? d : blo, bhi = d > bhi ? d : bhi;
		plo = p < plo ? p : plo, phi = p > phi ? p : phi;
		slo = s < slo ? s : slo;
	}
	ok(blo >= 1500 && bhi <= 2000 && blo < 1600 && bhi > 1900,
	   "before a deadline: a half to two thirds of the time left (%llu..%llu)",
	   (unsigned long long)blo, (unsigned long long)bhi);
	ok(backoff_before(30000, 100, 1000) <= 1000, "before a deadline: never above most");
	ok(slo == 100, "before a deadline: never below least (%llu)", (unsigned long long)slo);
	ok(plo >= 500 && phi <= 1000, "past the deadline: half to all of most (%llu..%llu)",
	   (unsigned long long)plo, (unsigned long long)phi);
	ok(random_between(7, 7) == 7 && random_between(9, 3) == 9, "an empty range gives its low end");
	return done_testing();
}
