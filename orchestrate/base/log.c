/*
 * log.c — logging for both programs (ntpd's log.c, with systemd's journal).
 *
 * The target is chosen once at start: the journal when the daemon runs under
 * systemd (JOURNAL_STREAM names our stderr), stderr otherwise.  The command line
 * always logs to stderr.  Journal entries carry structured fields so that
 * `journalctl ORCHESTRATE_HOOK=config` finds every config run.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "base/buf.h"
#include "base/log.h"

static const char *log_progname = "orchestrate";
static bool log_journal;
static int log_verbose;

/* True when stderr is the stream systemd gave us (JOURNAL_STREAM=dev:ino). */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) < 0)
		return false;
	return st.st_dev == dev && st.st_ino == ino;
}

void log_init(const char *progname, enum log_target target)
{
	log_progname = progname;
	if (target == LOG_TO_AUTO)
		log_journal = stderr_is_journal();
	else
		log_journal = target == LOG_TO_JOURNAL;
}

void log_set_verbose(int level) { log_verbose = level; }

static void log_emit(int prio, const char *version, const char *hook, const char *msg)
{
	if (prio == LOG_DEBUG && log_verbose < 1)
		return;
	if (prio == LOG_INFO && log_verbose < 0)
		return;
	if (log_journal) {
		sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%i", prio,
				"SYSLOG_IDENTIFIER=%s", log_progname,
				version ? "ORCHESTRATE_VERSION=%s" : NULL, version,
				hook ? "ORCHESTRATE_HOOK=%s" : NULL, hook, NULL);
		return;
	}
	fprintf(stderr, "%s: %s\n", log_progname, msg);
}

static void log_vmsg(int prio, const char *version, const char *hook, int errnum,
		     const char *fmt, va_list ap)
{
	struct buf b = BUF_INIT;
	if (buf_vprintf(&b, fmt, ap) == 0) {
		if (errnum)
			buf_printf(&b, ": %s", strerror(errnum));
		log_emit(prio, version, hook, buf_str(&b));
	}
	buf_release(&b);
}

#define LOG_FN(name, prio, with_errno)                        \
	void name(const char *fmt, ...)                       \
	{                                                     \
		int e = errno;                                \
		va_list ap;                                   \
		va_start(ap, fmt);                            \
		log_vmsg(prio, NULL, NULL, with_errno ? e : 0, fmt, ap); \
		va_end(ap);                                   \
		errno = e;                                    \
	}

LOG_FN(log_warn, LOG_WARNING, 1)
LOG_FN(log_warnx, LOG_WARNING, 0)
LOG_FN(log_info, LOG_INFO, 0)
LOG_FN(log_debug, LOG_DEBUG, 0)

void fatal(const char *fmt, ...)
{
	int e = errno;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, NULL, NULL, e, fmt, ap);
	va_end(ap);
	exit(1);
}

void fatalx(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, NULL, NULL, 0, fmt, ap);
	va_end(ap);
	exit(1);
}

void log_fields(int prio, const char *version, const char *hook, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(prio, version, hook, 0, fmt, ap);
	va_end(ap);
}
