/*
 * clock.c — clock readings and deadlines (clock.h).
 */
#include "base/clock.h"

uint64_t clock_usec(clockid_t clock)
{
	struct timespec ts;

	if (clock_gettime(clock, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t clock_deadline_ms(double secs)
{
	if (secs < 0 || secs != secs)
		return CLOCK_DEADLINE_NEVER;
	if (secs == 0)
		return CLOCK_DEADLINE_NOW;
	if (secs > 1e12)
		return CLOCK_DEADLINE_NEVER;
	return clock_msec(CLOCK_MONOTONIC) + (uint64_t)(secs * 1000.0) + 1;
}

void clock_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / MSEC_PER_SEC), (long)(ms % MSEC_PER_SEC) * 1000000L };
	nanosleep(&ts, NULL);
}
