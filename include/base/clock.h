/*
 * clock.h — the one reading of the clocks (systemd's now()).
 *
 * CLOCK_MONOTONIC measures waits and deadlines (it never jumps); CLOCK_REALTIME
 * gives the unix times stored in etcd ("time" fields) and shown to people.
 */
#ifndef ORCHESTRATE_CLOCK_H
#define ORCHESTRATE_CLOCK_H

#include <stdint.h>
#include <time.h>

#define USEC_PER_SEC 1000000ULL
#define USEC_PER_MSEC 1000ULL
#define MSEC_PER_SEC 1000ULL

/* The time of clock in microseconds (0 if the clock cannot be read, which
 * only an invalid clock id does). */
uint64_t clock_usec(clockid_t clock);

static inline uint64_t clock_msec(clockid_t clock)
{
	return clock_usec(clock) / USEC_PER_MSEC;
}

/* Unix time now, in seconds. */
static inline int64_t clock_unix(void)
{
	return (int64_t)(clock_usec(CLOCK_REALTIME) / USEC_PER_SEC);
}

/*
 * The CLOCK_MONOTONIC millisecond at which a wait of secs seconds from now
 * ends: secs < 0 is no end at all (CLOCK_DEADLINE_NEVER), secs 0 an end that
 * has passed already (CLOCK_DEADLINE_NOW: look once, do not wait).
 */
#define CLOCK_DEADLINE_NOW ((uint64_t)0)
#define CLOCK_DEADLINE_NEVER UINT64_MAX
uint64_t clock_deadline_ms(double secs);
/* Sleeps ms milliseconds (less when a signal arrives). */
void clock_sleep_ms(uint64_t ms);

#endif
