/*
 * tap.h — a tiny TAP producer for the C unit drivers, read by prove(1).
 *
 *   ok(cond, "name %d", i);            one test point
 *   is_str(got, want, "name");         compares strings, prints both on failure
 *   is_int(got, want, "name");
 *   return done_testing();             prints the plan, exit status 1 on failure
 */
#ifndef ORCHESTRATE_TAP_H
#define ORCHESTRATE_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_run, tap_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	tap_run++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	return cond;
}

#define is_str(got, want, ...)                                                   \
	do {                                                                     \
		const char *_g = (got), *_w = (want);                            \
		if (!ok(_g && _w ? strcmp(_g, _w) == 0 : _g == _w, __VA_ARGS__)) \
			printf("#   got:  '%s'\n#   want: '%s'\n", _g ? _g : "(null)", \
			       _w ? _w : "(null)");                              \
	} while (0)

#define is_int(got, want, ...)                                                   \
	do {                                                                     \
		long long _g = (long long)(got), _w = (long long)(want);         \
		if (!ok(_g == _w, __VA_ARGS__))                                  \
			printf("#   got:  %lld\n#   want: %lld\n", _g, _w);         \
	} while (0)

static inline int done_testing(void)
{
	printf("1..%d\n", tap_run);
	if (tap_failed)
		printf("# failed %d of %d\n", tap_failed, tap_run);
	return tap_failed ? 1 : 0;
}

#endif
