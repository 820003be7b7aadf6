/*
 * hook.c — the hook runner of hook.h: spawn, capture, timeout, reap.
 *
 * The child is started with posix_spawn(), not fork().  glibc implements it
 * with clone(CLONE_VM | CLONE_VFORK): the child borrows the parent's memory
 * until it calls execve, so nothing of the daemon is copied — fork() copied the
 * page tables of the whole resident set and left every private page
 * copy-on-write, which the daemon then paid for again in write faults.  That
 * was most of a node's CPU per run with hundreds of daemons on a host (Fleet
 * scale, item 5; `make bench-spawn` measures it: at 64 MiB resident, about
 * 1.7 ms of parent CPU per fork+execve against 0.09 ms per posix_spawn).
 *
 * The spawn attributes give the child its own process group
 * (POSIX_SPAWN_SETPGROUP, 0); an empty signal mask (the daemon blocks SIGTERM,
 * SIGHUP and SIGCHLD for sd-event, and a blocked SIGTERM would survive execve
 * and make the hook unkillable by timeout); every signal at its default action
 * (an ignored signal survives execve too: the daemon ignores SIGPIPE, which the
 * fork-based child kept; only glibc's two internal signals, 32 and 33, stay
 * ignored, as its posix_spawn sets them so and nothing sends them to a hook);
 * stdout and stderr on the pipe, stdin from /dev/null and every other
 * descriptor closed.  The parent sleeps until the child called execve, so the
 * group exists before posix_spawn() returns (a kill() right after it never
 * misses), and execve's error comes back from posix_spawn() itself:
 * hook_spawn() reports a missing or non-executable path synchronously, and
 * glibc has already reaped that child.
 *
 * Three event sources drive a hook: the pipe (output lines), the child (its
 * exit; sd-event reaps it after our handler returns, so the group id cannot be
 * reused while we signal it there), and a timer (the timeout, then the SIGKILL
 * grace).  done() runs when both the child exited and the pipe reached EOF —
 * or a short while after the exit, should an escaped grandchild keep the pipe
 * open.
 *
 * With a hook runner (hook_use_runner(), orchestrated(8) "HOOK RUNNER") the
 * process is the root runner's child, not ours: the pipe becomes the runner's
 * socket (hook_proto.h), its frames carry the output, the pid and the exit
 * status, and a kill is a frame the runner turns into kill(2) on the group.
 * The timeout, the SIGKILL grace and done() are ours as before; what the
 * child source and the group kill after the exit do here, the runner does
 * there (it runs this very file, with hook_set_output()).
 *
 * In fleet simulation (hook_simulate()) there is neither process nor pipe: a
 * timer (or, once killed, a defer source) stands for the child's exit and the
 * pipe is at EOF from the start, so the same done() path and timeout timer
 * serve both.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "hook/hook.h"
#include "hook/hook_proto.h"
#include "base/log.h"

#define HOOK_DRAIN_USEC (2ULL * 1000000ULL)
/* How long hook_spawn() waits for the runner's S or E frame: socket
 * activation starts a service first. */
#define HOOK_RUNNER_START_MSEC 10000

/* hook_use_runner()'s socket: set at start, read-only afterwards. */
static char *hook_runner;

/* The simulation switch of hook_simulate(): written before the loops' threads
 * start, only read afterwards. */
static struct {
	bool on;
	double min_sec, max_sec;
	int exit_code;
	hook_sim_exit_fn exit_code_for;
	void *userdata;
} hook_sim;

struct hook {
	sd_event *event;
	char *name;
	char *version;
	pid_t pid;		/* 0 when simulated */
	int fd;
	sd_event_source *io, *child, *timer;
	sd_event_source *sim;	/* simulated: the end of the run (timer, or defer once killed) */
	bool simulated;
	bool remote;		/* run by the hook runner; fd is its socket */
	struct buf in;		/* remote: bytes of a partial frame */
	hook_output_fn output;	/* the runner's sink (hook_set_output()) */
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
	if (h->output) {
		/* The runner: the daemon logs the lines, not us. */
		h->output(h, data, n, h->userdata);
		return;
	}
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
	} else if (h->info.si_code == 0) {
		/* The runner went away without telling how the hook ended. */
		r.exit_code = -1;
	} else {
		r.exit_code = -1;
		r.signal = h->info.si_status;
	}
	r.timed_out = h->timed_out;
	r.timeout_sec = h->timeout_sec;
	r.output = h->simulated ? "simulated" : buf_str(&h->tail);
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

static bool hook_remote_input(struct hook *h, const char *data, size_t n);

/* Reads what is there; returns true at EOF or on a hard error. */
static bool hook_read(struct hook *h)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = read(h->fd, chunk, sizeof(chunk));
		if (n > 0 && h->remote) {
			if (!hook_remote_input(h, chunk, (size_t)n))
				return true;
			continue;
		}
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
	/* Frames that came with S, read by hook_spawn(): taken here, from the
	 * loop, so that done() never runs before hook_spawn() returned. */
	bool broken = h->remote && h->in.len > 0 && !hook_remote_input(h, NULL, 0);
	if (broken || hook_read(h)) {
		hook_close_pipe(h);
		if (h->remote && !h->exited) {
			/* No X frame: info stays zero, done() says "lost". */
			h->exited = true;
			h->timer = sd_event_source_disable_unref(h->timer);
		}
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

static void hook_sim_kill(struct hook *h, int sig);
static void hook_remote_kill(struct hook *h, int sig);

void hook_kill(struct hook *h, int sig)
{
	if (!h || h->exited)
		return;
	if (h->simulated) {
		hook_sim_kill(h, sig);
		return;
	}
	if (h->remote)
		hook_remote_kill(h, sig);
	else
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
	if (!h->exited && h->remote && h->fd >= 0) {
		/* Closing the socket alone would give the hook the SIGTERM grace. */
		hook_remote_kill(h, SIGKILL);
	} else if (!h->exited && h->pid > 0) {
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
	sd_event_source_disable_unref(h->sim);
	if (h->fd >= 0)
		close(h->fd);
	buf_release(&h->in);
	buf_release(&h->line);
	buf_release(&h->tail);
	free(h->name);
	free(h->version);
	sd_event_unref(h->event);
	free(h);
	return NULL;
}

/* --- the process ---------------------------------------------------------- */

/*
 * Starts path with the pipe's write end out as its stdout and stderr, as the
 * top of the file says; returns 0 and *ret_pid, or a negative code, execve's
 * own included.
 */
static int hook_start_process(const char *path, char *const *env, int out, pid_t *ret_pid)
{
	char *argv[] = { (char *)path, NULL };
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;
	int r;

	sigemptyset(&none);
	sigfillset(&all);
	r = posix_spawn_file_actions_init(&fa);
	if (r != 0)
		return -r;
	r = posix_spawnattr_init(&attr);
	if (r != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return -r;
	}
	/* The pipe first: in a daemon started with its stdio closed, out may be
	 * 0, 1 or 2 (a dup2 onto itself clears FD_CLOEXEC, as POSIX asks), and
	 * /dev/null must not replace it before it was duplicated. */
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_adddup2(&fa, out, STDERR_FILENO);
	if (r == 0)
		r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	if (r == 0)
		r = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
	if (r == 0)
		r = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
							    POSIX_SPAWN_SETSIGDEF);
	if (r == 0)
		r = posix_spawnattr_setpgroup(&attr, 0);
	if (r == 0)
		r = posix_spawnattr_setsigmask(&attr, &none);
	if (r == 0)
		r = posix_spawnattr_setsigdefault(&attr, &all);
	if (r == 0)
		r = posix_spawn(ret_pid, path, &fa, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return -r;
}

static int hook_spawn_process(struct hook *h, const char *path, char *const *env)
{
	int fds[2];
	int r;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	r = hook_start_process(path, env, fds[1], &h->pid);
	close(fds[1]);
	if (r < 0) {
		h->pid = 0;
		close(fds[0]);
		return r;
	}
	h->fd = fds[0];
	if (fcntl(h->fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_child(h->event, &h->child, h->pid, WEXITED, hook_on_child, h);
	if (r < 0)
		return r;
	return sd_event_add_io(h->event, &h->io, h->fd, EPOLLIN, hook_on_io, h);
}

/* --- the hook runner ------------------------------------------------------ */

int hook_use_runner(const char *socket_path)
{
	char *p = NULL;
	if (socket_path && *socket_path) {
		if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
			return -ENAMETOOLONG;
		if (!(p = strdup(socket_path)))
			return -ENOMEM;
	}
	free(hook_runner);
	hook_runner = p;
	return 0;
}

void hook_set_output(struct hook *h, hook_output_fn fn)
{
	h->output = fn;
}

/* A kill frame; the socket is non-blocking by now and the frame is tiny, so
 * it is either sent whole or the runner is gone (which kills the hook too). */
static void hook_remote_kill(struct hook *h, int sig)
{
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	if (h->fd < 0 || hook_frame_addf(&f, HOOK_FRAME_KILL, "%d", sig) < 0)
		return;
	(void)send(h->fd, f.data, f.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Takes the frames of what the runner sent after S; returns false when the
 * stream is broken (an unknown or malformed frame) and must be closed. */
static bool hook_remote_input(struct hook *h, const char *data, size_t n)
{
	if (n > 0 && buf_add(&h->in, data, n) < 0)
		return false;
	for (;;) {
		const char *payload;
		size_t len, used;
		char type;
		int code, sig;
		int r = hook_frame_parse(h->in.data, h->in.len, &type, &payload, &len, &used);
		if (r == 0)
			return true;
		if (r < 0)
			return false;
		if (type == HOOK_FRAME_OUTPUT && !h->exited) {
			hook_consume(h, payload, len);
		} else if (type == HOOK_FRAME_EXIT && !h->exited &&
			   hook_frame_exit(payload, len, &code, &sig) == 0) {
			h->exited = true;
			h->info.si_code = sig ? CLD_KILLED : CLD_EXITED;
			h->info.si_status = sig ? sig : code;
			/* The runner closes right after X; should it not, stop
			 * waiting as for a local pipe held open. */
			h->timer = sd_event_source_disable_unref(h->timer);
			(void)sd_event_add_time_relative(h->event, &h->timer, CLOCK_MONOTONIC,
							 HOOK_DRAIN_USEC, 0, hook_on_timer, h);
		} else {
			log_fields(LOG_WARNING, h->version, h->name,
				   "hook '%s': unexpected frame '%c' from the hook runner", h->name, type);
			return false;
		}
		buf_consume(&h->in, used);
	}
}

/* Reads the runner's first frame, waiting at most HOOK_RUNNER_START_MSEC. */
static int hook_remote_wait_start(struct hook *h)
{
	uint64_t deadline = clock_msec(CLOCK_MONOTONIC) + HOOK_RUNNER_START_MSEC;

	for (;;) {
		const char *payload;
		size_t len, used;
		char type;
		long v;
		int r = hook_frame_parse(h->in.data, h->in.len, &type, &payload, &len, &used);
		if (r < 0)
			return -EPROTO;
		if (r > 0 && type == HOOK_FRAME_STARTED) {
			if (hook_frame_int(payload, len, 1, INT32_MAX, &v) < 0 || memchr(payload, ' ', len))
				return -EPROTO;
			h->pid = (pid_t)v;
			buf_consume(&h->in, used);
			return 0;
		}
		if (r > 0 && type == HOOK_FRAME_ERROR) {
			const char *sp = memchr(payload, ' ', len);
			if (hook_frame_int(payload, len, 1, 4095, &v) < 0)
				return -EPROTO;
			log_fields(LOG_WARNING, h->version, h->name, "hook runner '%s': %.*s", hook_runner,
				   sp ? (int)(len - (size_t)(sp + 1 - payload)) : 0, sp ? sp + 1 : "");
			return -(int)v;
		}
		if (r > 0)
			return -EPROTO;

		if ((r = hook_proto_read_until(h->fd, &h->in, deadline)) < 0)
			return r;
	}
}

/*
 * Asks the runner to start hook name: connects, sends the request and waits
 * for S or E, so that a refusal or execve's failure in the runner comes back
 * from hook_spawn() as it does for a local process.  Blocks the loop for
 * that long (socket activation plus the runner's start, milliseconds).
 */
static int hook_spawn_remote(struct hook *h, char *const *env)
{
	_cleanup_(buf_releasep) struct buf req = BUF_INIT;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int r;

	if ((r = hook_request_encode(&req, h->name, env)) < 0)
		return r;
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0)
		return -errno;
	h->remote = true;
	memcpy(sa.sun_path, hook_runner, strlen(hook_runner) + 1);
	if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		log_fields(LOG_WARNING, h->version, h->name, "hook runner '%s': %s", hook_runner,
			   strerror(-r));
		return r;
	}
	if ((r = hook_proto_send(h->fd, req.data, req.len)) < 0 ||
	    (r = hook_remote_wait_start(h)) < 0) {
		if (r == -EPROTO || r == -ETIMEDOUT || r == -ECONNRESET || r == -EPIPE)
			log_fields(LOG_WARNING, h->version, h->name, "hook runner '%s': %s",
				   hook_runner, strerror(-r));
		return r;
	}
	if (fcntl(h->fd, F_SETFL, O_NONBLOCK) < 0)
		return -errno;
	if ((r = sd_event_add_io(h->event, &h->io, h->fd, EPOLLIN, hook_on_io, h)) < 0)
		return r;
	/* Frames that came with S stay in h->in for hook_on_io(): the runner
	 * closes after X, so the socket becomes readable again. */
	return 0;
}

/* --- fleet simulation ----------------------------------------------------- */

/* A simulated run ends within a millisecond of its drawn time. */
#define HOOK_SIM_ACCURACY_USEC 1000ULL

int hook_simulate(double min_sec, double max_sec, int exit_code, hook_sim_exit_fn exit_code_for,
		  void *userdata)
{
	if (!isfinite(min_sec) || !isfinite(max_sec) || min_sec < 0 || max_sec < min_sec ||
	    exit_code < 0 || exit_code > 255)
		return -EINVAL;
	hook_sim.min_sec = min_sec;
	hook_sim.max_sec = max_sec;
	hook_sim.exit_code = exit_code;
	hook_sim.exit_code_for = exit_code_for;
	hook_sim.userdata = userdata;
	hook_sim.on = true;
	return 0;
}

/* Uniform in [0, 1), from this thread's own splitmix64 state: the threads of a
 * simulator never share one, so no lock. */
static double hook_sim_random(void)
{
	static _Thread_local uint64_t state;
	static _Thread_local bool seeded;
	uint64_t z;

	if (!seeded) {
		if (getrandom(&state, sizeof(state), GRND_NONBLOCK) != (ssize_t)sizeof(state)) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			state = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
				(uint64_t)(uintptr_t)&state;
		}
		seeded = true;
	}
	z = (state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-53;
}

/* What stands for the child's exit: the timer at the drawn time, or the defer
 * source of a kill.  h->info already says how it ended. */
static void hook_sim_end(struct hook *h)
{
	h->sim = sd_event_source_disable_unref(h->sim);
	h->exited = true;
	hook_maybe_done(h);
}

static int hook_sim_on_time(sd_event_source *s, uint64_t usec, void *userdata)
{
	hook_sim_end(userdata);
	return 0;
}

static int hook_sim_on_kill(sd_event_source *s, void *userdata)
{
	hook_sim_end(userdata);
	return 0;
}

/* Whether a process left at the default action would die of sig. */
static bool hook_signal_terminates(int sig)
{
	switch (sig) {
	case SIGCHLD: case SIGCONT: case SIGURG: case SIGWINCH:
	case SIGSTOP: case SIGTSTP: case SIGTTIN: case SIGTTOU:
		return false;
	default:
		return sig > 0 && sig < NSIG;
	}
}

/* A simulated hook obeys the first deadly signal at once; done() follows from
 * the loop, never from inside the caller's hook_kill(). */
static void hook_sim_kill(struct hook *h, int sig)
{
	sd_event_source *end = NULL;

	if (h->killing || !hook_signal_terminates(sig))
		return;
	if (sd_event_add_defer(h->event, &end, hook_sim_on_kill, h) < 0)
		return;		/* no memory: as if the signal were lost */
	h->sim = sd_event_source_disable_unref(h->sim);
	h->sim = end;
	h->timer = sd_event_source_disable_unref(h->timer);
	h->killing = true;
	h->info.si_code = CLD_KILLED;
	h->info.si_status = sig;
}

static int hook_spawn_simulated(struct hook *h, char *const *env)
{
	int code = hook_sim.exit_code_for ? hook_sim.exit_code_for(h->name, env, hook_sim.userdata)
					  : hook_sim.exit_code;
	double sec;

	h->simulated = true;
	h->eof = true;		/* no pipe */
	if (code < 0) {
		log_fields(LOG_DEBUG, h->version, h->name, "hook '%s' simulated: runs until stopped",
			   h->name);
		return 0;
	}
	sec = hook_sim.min_sec + (hook_sim.max_sec - hook_sim.min_sec) * hook_sim_random();
	h->info.si_code = CLD_EXITED;
	h->info.si_status = code & 0xff;
	log_fields(LOG_DEBUG, h->version, h->name, "hook '%s' simulated: exits %d after %.3f s",
		   h->name, code & 0xff, sec);
	return sd_event_add_time_relative(h->event, &h->sim, CLOCK_MONOTONIC,
					  (uint64_t)(sec * 1e6 + 0.5), HOOK_SIM_ACCURACY_USEC,
					  hook_sim_on_time, h);
}

/* --- the API -------------------------------------------------------------- */

int hook_spawn(sd_event *event, const char *name, const char *path, char *const *env,
	       long timeout_sec, const char *version, hook_done_fn done, void *userdata,
	       struct hook **ret)
{
	_cleanup_(hook_freep) struct hook *h = NULL;
	int r;

	if (!path || !*path)
		return -EINVAL;

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

	r = hook_sim.on ? hook_spawn_simulated(h, env)
	    : hook_runner ? hook_spawn_remote(h, env)
	    : hook_spawn_process(h, path, env);
	if (r < 0)
		return r;
	if (timeout_sec > 0) {
		r = sd_event_add_time_relative(event, &h->timer, CLOCK_MONOTONIC,
					       (uint64_t)timeout_sec * 1000000ULL, 0,
					       hook_on_timer, h);
		if (r < 0)
			return r;
	}
	if (h->remote)
		log_fields(LOG_INFO, version, name, "hook '%s' started by the hook runner '%s' (pid %ld)",
			   name, hook_runner, (long)h->pid);
	else if (!h->simulated)
		log_fields(LOG_INFO, version, name, "hook '%s' started: %s (pid %ld)", name, path,
			   (long)h->pid);
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
	else if (r->exit_code < 0)
		e = buf_printf(&b, "lost: its hook runner went away");
	else
		e = buf_printf(&b, "exited with status %d", r->exit_code);
	if (e < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}
