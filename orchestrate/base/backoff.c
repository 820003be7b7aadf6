/*
 * backoff.c — exponential backoff with full jitter (backoff.h).
 */
#include <stdlib.h>
#include <time.h>
#include <sys/random.h>

#include "base/backoff.h"

static uint64_t random_u64(void)
{
	uint64_t v;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ (uint64_t)time(NULL);
	return v;
}

uint64_t random_between(uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	if (hi - lo == UINT64_MAX)
		return random_u64();
	return lo + random_u64() % (hi - lo + 1);
}

uint64_t backoff_delay(const struct backoff *b, unsigned n)
{
	uint64_t window = b->first;

	for (unsigned i = 1; i < n && window < b->cap; i++)
		window = window > UINT64_MAX / 2 ? UINT64_MAX : window * 2;
	if (window > b->cap)
		window = b->cap;
	if (window < b->floor)
		window = b->floor;
	return random_between(b->floor, window);
}

uint64_t backoff_before(uint64_t left, uint64_t least, uint64_t most)
{
	uint64_t lo = left / 2, hi = left / 3 * 2;

	if (left == 0)
		return random_between(most / 2, most);
	if (hi > most)
		hi = most;
	if (hi < least)
		hi = least;
	if (lo > hi)
		lo = hi;
	if (lo < least)
		lo = least;
	return random_between(lo, hi);
}

bool pace_widen(struct pace *p, const struct backoff *b, uint64_t now, uint64_t waited)
{
	if (p->window && now < p->widened + p->window)
		return false;	/* the same backlog */
	p->window = p->window ? p->window * 2 : b->first;
	if (p->window < waited)
		p->window = waited;
	if (p->window > b->cap)
		p->window = b->cap;
	p->widened = now;
	return true;
}

bool pace_narrow(struct pace *p, const struct backoff *b)
{
	if (!p->window)
		return false;
	p->window /= 2;
	if (p->window >= b->first / 2)
		return false;
	p->window = 0;
	return true;
}

uint64_t pace_delay(const struct pace *p)
{
	return p->window ? random_between(0, p->window) : 0;
}
