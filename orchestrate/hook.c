/*
 * hook.c — the hook runner of hook.h: fork, execve, capture, timeout, reap.
 *
 * Everything the child needs (argv, envp) is built before fork(), because
 * between fork() and execve() only async-signal-safe calls are allowed.  The
 * child resets the signal mask the daemon blocked for sd-event (a blocked
 * SIGTERM would otherwise survive execve and make the hook unkillable by
 * timeout), makes itself a process-group leader, and closes every descriptor
 * but its stdio.  The parent calls setpgid() too, so that a kill() sent right
 * after the fork never misses the group.
 *
 * Three event sources drive a hook: the pipe (output lines), the child (its
 * exit; sd-event reaps it after our handler returns, so the group id cannot be
 * reused while we signal it there), and a timer (the timeout, then the SIGKILL
 * grace).  done() runs when both the child exited and the pipe reached EOF —
 * or a short while after the exit, should an escaped grandchild keep the pipe
 * open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "buf.h"
#include "cleanup.h"
#include "hook.h"
#include "log.h"

#define HOOK_DRAIN_USEC (2ULL * 1000000ULL)

struct hook {
	sd_event *event;
	char *name;
	char *version;
	pid_t pid;
	int fd;
	sd_event_source *io, *child, *timer;
	struct buf line;	/* a partial output line */
	struct buf tail;	/* the last HOOK_TAIL_MAX bytes */
	long timeout_sec;
	bool exited, eof, timed_out, killing, done_called;
	siginfo_t info;
	hook_done_fn done;
	void *userdata;
};

const char *hook_name(const struct hook *h) { return h->name; }
pid_t hook_pid(const struct hook *h) { return h->pid; }

static void hook_log_line(struct hook *h, const char *s, size_t len)
{
	/* Strip a carriage return so progress bars do not mangle the journal. */
	while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == '\n'))
		len--;
	log_fields(LOG_INFO, h->version, h->name, "%s: %.*s", h->name, (int)len, s);
}

static void hook_flush_line(struct hook *h)
{
	if (h->line.len > 0)
		hook_log_line(h, h->line.data, h->line.len);
	buf_reset(&h->line);
}

static void hook_consume(struct hook *h, const char *data, size_t n)
{
	(void)buf_add(&h->tail, data, n);
	buf_keep_tail(&h->tail, HOOK_TAIL_MAX);
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n') {
			hook_flush_line(h);
			continue;
		}
		/* A line without end must not grow without bound. */
		if (h->line.len >= 8192)
			hook_flush_line(h);
		(void)buf_addc(&h->line, data[i]);
	}
}

static void hook_maybe_done(struct hook *h)
{
	struct hook_result r = { 0 };
	if (!h->exited || !h->eof || h->done_called)
		return;
	h->done_called = true;
	h->timer = sd_event_source_disable_unref(h->timer);
	if (h->info.si_code == CLD_EXITED) {
		r.exit_code = h->info.si_status;
	} else {
		r.exit_code = -1;
		r.signal = h->info.si_status;
	}
	r.timed_out = h->timed_out;
	r.timeout_sec = h->timeout_sec;
	r.output = buf_str(&h->tail);
	if (h->done)
		h->done(h, &r, h->userdata);
}

static void hook_close_pipe(struct hook *h)
{
	hook_flush_line(h);
	h->io = sd_event_source_disable_unref(h->io);
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	h->eof = true;
}

/* Reads what is there; returns true at EOF or on a hard error. */
static bool hook_read(struct hook *h)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = read(h->fd, chunk, sizeof(chunk));
		if (n > 0) {
			hook_consume(h, chunk, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return false;
		return true;
	}
}

static int hook_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct hook *h = userdata;
	if (hook_read(h)) {
		hook_close_pipe(h);
		hook_maybe_done(h);
	}
	return 0;
}

static int hook_on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct hook *h = userdata;
	h->timer = sd_event_source_disable_unref(h->timer);
	if (h->exited) {
		/* The pipe is still open after the exit: something escaped the
		 * group.  Stop waiting for its output. */
		(void)hook_read(h);
		hook_close_pipe(h);
		hook_maybe_done(h);
		return 0;
	}
	if (!h->killing) {
		h->timed_out = true;
		log_fields(LOG_WARNING, h->version, h->name, "hook '%s' timed out after %ld s, stopping it",
			   h->name, h->timeout_sec);
		hook_kill(h, SIGTERM);
	} else {
		log_fields(LOG_WARNING, h->version, h->name, "hook '%s' ignored SIGTERM, killing it",
			   h->name);
		hook_kill(h, SIGKILL);
	}
	return 0;
}

static int hook_on_child(sd_event_source *s, const siginfo_t *si, void *userdata)
{
	struct hook *h = userdata;
	h->info = *si;
	h->exited = true;
	h->child = sd_event_source_unref(h->child);
	/* The leader is a zombie until we return, so the group id is still ours:
	 * kill whatever the hook left behind in it. */
	(void)kill(-h->pid, SIGKILL);
	h->timer = sd_event_source_disable_unref(h->timer);
	if (!h->eof) {
		if (hook_read(h)) {
			hook_close_pipe(h);
		} else {
			(void)sd_event_add_time_relative(h->event, &h->timer, CLOCK_MONOTONIC,
							 HOOK_DRAIN_USEC, 0, hook_on_timer, h);
		}
	}
	hook_maybe_done(h);
	return 0;
}

void hook_kill(struct hook *h, int sig)
{
	if (!h || h->exited)
		return;
	(void)kill(-h->pid, sig);
	if (sig == SIGTERM && !h->killing) {
		h->killing = true;
		h->timer = sd_event_source_disable_unref(h->timer);
		(void)sd_event_add_time_relative(h->event, &h->timer, CLOCK_MONOTONIC,
						 HOOK_KILL_GRACE_USEC, 0, hook_on_timer, h);
	}
}

struct hook *hook_free(struct hook *h)
{
	if (!h)
		return NULL;
	if (!h->exited && h->pid > 0) {
		/* Nobody waits for this one any more: end it now and reap it here
		 * rather than leave a zombie behind. */
		(void)kill(-h->pid, SIGKILL);
		h->child = sd_event_source_disable_unref(h->child);
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	sd_event_source_disable_unref(h->child);
	sd_event_source_disable_unref(h->io);
	sd_event_source_disable_unref(h->timer);
	if (h->fd >= 0)
		close(h->fd);
	buf_release(&h->line);
	buf_release(&h->tail);
	free(h->name);
	free(h->version);
	sd_event_unref(h->event);
	free(h);
	return NULL;
}

/* In the child, between fork and execve: async-signal-safe calls only. */
static __attribute__((noreturn)) void hook_exec_child(int out, const char *path,
						      char *const argv[], char *const envp[])
{
	sigset_t none;
	int null;

	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)setpgid(0, 0);
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(127);
	(void)close_range(3, ~0U, 0);
	execve(path, argv, envp);
	_exit(errno == ENOENT ? 127 : 126);
}

int hook_spawn(sd_event *event, const char *name, const char *path, char *const *env,
	       long timeout_sec, const char *version, hook_done_fn done, void *userdata,
	       struct hook **ret)
{
	_cleanup_(hook_freep) struct hook *h = NULL;
	char *argv[] = { (char *)path, NULL };
	int fds[2];
	pid_t pid;
	int r;

	if (!path || !*path)
		return -EINVAL;
	if (access(path, X_OK) < 0)
		return -errno;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->fd = -1;
	h->event = sd_event_ref(event);
	h->name = strdup(name);
	h->version = version ? strdup(version) : NULL;
	if (!h->name || (version && !h->version))
		return -ENOMEM;
	h->timeout_sec = timeout_sec;
	h->done = done;
	h->userdata = userdata;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0)
		hook_exec_child(fds[1], path, argv, env);

	close(fds[1]);
	h->pid = pid;
	h->fd = fds[0];
	(void)setpgid(pid, pid);
	if (fcntl(h->fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;

	r = sd_event_add_child(event, &h->child, pid, WEXITED, hook_on_child, h);
	if (r < 0)
		return r;
	r = sd_event_add_io(event, &h->io, h->fd, EPOLLIN, hook_on_io, h);
	if (r < 0)
		return r;
	if (timeout_sec > 0) {
		r = sd_event_add_time_relative(event, &h->timer, CLOCK_MONOTONIC,
					       (uint64_t)timeout_sec * 1000000ULL, 0,
					       hook_on_timer, h);
		if (r < 0)
			return r;
	}
	log_fields(LOG_INFO, version, name, "hook '%s' started: %s (pid %ld)", name, path,
		   (long)pid);
	*ret = TAKE_PTR(h);
	return 0;
}

char *hook_result_describe(const struct hook_result *r)
{
	struct buf b = BUF_INIT;
	int e;
	if (r->timed_out)
		e = buf_printf(&b, "timed out after %ld s", r->timeout_sec);
	else if (r->signal)
		e = buf_printf(&b, "killed by signal %d (%s)", r->signal, strsignal(r->signal));
	else
		e = buf_printf(&b, "exited with status %d", r->exit_code);
	if (e < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}
