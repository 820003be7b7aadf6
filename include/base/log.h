/*
 * log.h — the one logging facility (OpenBSD ntpd's log.c).
 *
 * Under systemd (JOURNAL_STREAM set, or log_init(..., LOG_TO_JOURNAL)) messages go
 * to the journal with structured fields; otherwise to stderr as "prog: message".
 * Library code never logs: it returns an error code and leaves the words to the
 * command or daemon that chooses what to do about it.
 *
 * log_warn() appends ": strerror(errno)"; the x variants do not.
 */
#ifndef ORCHESTRATE_LOG_H
#define ORCHESTRATE_LOG_H

#include <stdarg.h>

enum log_target { LOG_TO_STDERR, LOG_TO_JOURNAL, LOG_TO_AUTO };

void log_init(const char *progname, enum log_target target);
void log_set_verbose(int level);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((noreturn)) void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Logs at syslog priority prio with the journal fields ORCHESTRATE_VERSION= and
 * ORCHESTRATE_HOOK= (either may be NULL).  On stderr the fields are left out.
 */
void log_fields(int prio, const char *version, const char *hook, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
