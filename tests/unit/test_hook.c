/*
 * test_hook.c — the hook runner of hook.c on its own sd-event loop.
 *
 * Real hooks: exit code and output tail; execve's errors returned by
 * hook_spawn() itself; what the child is given (its own process group, only
 * descriptors 0-2 with stdin on /dev/null and stdout and stderr on one pipe, an
 * empty signal mask, default signal actions, exactly the caller's environment),
 * also when the parent runs with its stdio closed; hook_kill(), the timeout and
 * hook_free() of a running hook.  The driver blocks and ignores signals as
 * orchestrated does, so a property that only held by luck would show.  For
 * what the child sees, the driver runs itself as the hook (TEST_HOOK_CHILD=1 in
 * its environment) and reports what it found.
 *
 * Simulated hooks (hook_simulate()): the drawn duration, the exit code and its
 * per-run callback, kill and timeout, hook_free(), and several threads each
 * running its own loop.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "hook/hook.h"
#include "base/log.h"
#include "tap.h"

extern char **environ;

/* --- the driver as its own hook ------------------------------------------- */

/* Prints what this process was given, one "key=value" line each. */
static int child_report(void)
{
	struct stat st0, st1, st2;
	struct buf fds = BUF_INIT;
	sigset_t mask;
	char link[256];
	ssize_t n;
	bool empty = true, none_ignored = true;
	DIR *d;
	struct dirent *e;

	printf("pid=%ld pgrp=%ld\n", (long)getpid(), (long)getpgrp());

	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		buf_printf(&fds, "%s%s", fds.len ? "," : "", e->d_name);
	}
	if (d)
		closedir(d);
	/* readdir's order is the kernel's: ascending for /proc/self/fd. */
	printf("fds=%s\n", buf_str(&fds));
	buf_release(&fds);

	n = readlink("/proc/self/fd/0", link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = '\0';
	printf("fd0=%s\n", link);
	printf("fd1=%s\n", fstat(0, &st0) == 0 && fstat(1, &st1) == 0 && fstat(2, &st2) == 0 &&
					   S_ISFIFO(st1.st_mode) && st1.st_ino == st2.st_ino &&
					   st1.st_dev == st2.st_dev
				   ? "fd2, a pipe"
				   : "not fd2's pipe");

	sigprocmask(SIG_SETMASK, NULL, &mask);
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&mask, sig) == 1)
			empty = false;
	printf("sigmask=%s\n", empty ? "empty" : "not empty");
	/* Only an ignored signal survives execve (a handler is reset), so only
	 * SIG_IGN can come from the parent; the sanitizers install handlers of
	 * their own.  glibc's sigaction() refuses its internal signals 32 and 33:
	 * SIGRTMIN is the first one it lets us see. */
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		if ((sig < 32 || sig >= SIGRTMIN) && sigaction(sig, NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			none_ignored = false;
	}
	printf("sigign=%s\n", none_ignored ? "none" : "some");

	printf("env=");
	for (char **v = environ; *v; v++)
		printf("%s%s", v == environ ? "" : ";", *v);
	printf("\n");
	return fflush(stdout) == 0 ? 0 : 1;
}

/* --- running one hook ------------------------------------------------------ */

struct run {
	struct hook *h;
	pid_t pid;
	int spawn_r;
	bool done, in_call;	/* in_call: inside hook_spawn()/hook_kill() */
	bool done_in_call;
	int exit_code, signal;
	bool timed_out;
	char *output;
	uint64_t started, ended;	/* µs, CLOCK_MONOTONIC */
	int kill_sig;
	uint64_t kill_after, free_after;	/* µs after the start; 0: never */
};

static uint64_t now_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

static void on_done(struct hook *h, const struct hook_result *r, void *userdata)
{
	struct run *run = userdata;

	run->done = true;
	run->done_in_call = run->in_call;
	run->ended = now_usec();
	run->exit_code = r->exit_code;
	run->signal = r->signal;
	run->timed_out = r->timed_out;
	run->output = strdup(r->output ? r->output : "(null)");
	run->h = hook_free(h);
}

static int on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct run *run = userdata;

	if (run->h) {
		run->in_call = true;
		hook_kill(run->h, run->kill_sig);
		run->in_call = false;
	}
	return 0;
}

static int on_free_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct run *run = userdata;

	run->h = hook_free(run->h);
	return 0;
}

/*
 * Spawns path as name on ev and runs the loop until done() (or, with
 * run->free_after, linger_usec past the free), at most 20 s.
 */
static void run_hook(sd_event *ev, struct run *run, const char *name, const char *path,
		     char *const *env, long timeout_sec, uint64_t linger_usec)
{
	sd_event_source *kill_timer = NULL, *free_timer = NULL;
	uint64_t deadline;

	run->started = now_usec();
	run->in_call = true;
	run->spawn_r = hook_spawn(ev, name, path, env, timeout_sec, "v1", on_done, run, &run->h);
	run->in_call = false;
	if (run->spawn_r < 0)
		return;
	run->pid = hook_pid(run->h);
	if (run->kill_after)
		sd_event_add_time_relative(ev, &kill_timer, CLOCK_MONOTONIC, run->kill_after, 1000,
					   on_kill_timer, run);
	if (run->free_after)
		sd_event_add_time_relative(ev, &free_timer, CLOCK_MONOTONIC, run->free_after, 1000,
					   on_free_timer, run);
	deadline = run->started + 20000000ULL;
	while (!run->done && (run->h || now_usec() < run->started + run->free_after + linger_usec) &&
	       now_usec() < deadline)
		sd_event_run(ev, 50000);
	sd_event_source_disable_unref(kill_timer);
	sd_event_source_disable_unref(free_timer);
	run->h = hook_free(run->h);
}

static void run_release(struct run *run)
{
	free(run->output);
	memset(run, 0, sizeof(*run));
}

static double elapsed_sec(const struct run *run)
{
	return (double)(run->ended - run->started) / 1e6;
}

/* --- fixtures -------------------------------------------------------------- */

static char dir[] = "/tmp/test_hook.XXXXXX";

static char *fixture(const char *name, const char *content, mode_t mode)
{
	struct buf path = BUF_INIT;
	FILE *f;

	buf_printf(&path, "%s/%s", dir, name);
	f = fopen(buf_str(&path), "w");
	if (!f || fputs(content, f) < 0 || fclose(f) != 0 || chmod(buf_str(&path), mode) < 0) {
		fprintf(stderr, "test_hook: cannot write '%s': %s\n", buf_str(&path), strerror(errno));
		exit(2);
	}
	return buf_detach(&path);
}

/* True when pid is gone or a zombie (a container's PID 1 may not reap). */
static bool process_gone(pid_t pid)
{
	char path[64], stat[512];
	FILE *f;
	bool gone = true;

	snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(stat, sizeof(stat), f)) {
		const char *p = strrchr(stat, ')');
		gone = p && p[1] == ' ' && p[2] == 'Z';
	}
	fclose(f);
	return gone;
}

/* The group was sent SIGKILL when the hook ended; the kernel takes a moment
 * to finish the process off: wait for that, at most 2 s. */
static bool process_gone_soon(pid_t pid)
{
	for (int i = 0; i < 200; i++) {
		if (process_gone(pid))
			return true;
		usleep(10000);
	}
	return false;
}

static char *const script_env[] = { "PATH=/usr/bin:/bin", NULL };

/* --- real hooks ------------------------------------------------------------ */

static void test_exit_and_output(sd_event *ev)
{
	_cleanup_(freep) char *path = fixture("exit3", "#!/bin/sh\n"
						       "echo \"line one\"\n"
						       "echo \"on stderr\" >&2\n"
						       "printf 'no newline at the end'\n"
						       "exit 3\n", 0755);
	_cleanup_(freep) char *flood = fixture("flood", "#!/bin/sh\n"
							"i=0\n"
							"while [ $i -lt 2000 ]; do echo \"line $i of the flood\"; i=$((i+1)); done\n"
							"echo LAST\n", 0755);
	struct run run = { 0 };

	run_hook(ev, &run, "config", path, script_env, 30, 0);
	is_int(run.spawn_r, 0, "a hook that exits 3 starts");
	ok(run.pid > 0, "hook_pid() is its pid (%ld)", (long)run.pid);
	ok(run.done && !run.done_in_call, "done() is called, from the loop");
	is_int(run.exit_code, 3, "exit code 3");
	is_int(run.signal, 0, "no signal");
	ok(!run.timed_out, "not timed out");
	is_str(run.output, "line one\non stderr\nno newline at the end", "stdout and stderr in the tail");
	ok(process_gone(run.pid), "the child was reaped");
	run_release(&run);

	run_hook(ev, &run, "config", flood, script_env, 30, 0);
	is_int(run.exit_code, 0, "a hook printing 2000 lines exits 0");
	is_int(run.output ? strlen(run.output) : 0, HOOK_TAIL_MAX, "the tail keeps HOOK_TAIL_MAX bytes");
	ok(run.output && strlen(run.output) >= 5 &&
		   strcmp(run.output + strlen(run.output) - 5, "LAST\n") == 0,
	   "the tail ends with the last line");
	run_release(&run);
}

/* Under valgrind, posix_spawn()'s clone(CLONE_VM | CLONE_VFORK) runs as a
 * plain fork: the child's execve error never reaches the parent, and the
 * child exits 127 instead (glibc's), or whatever valgrind dies with. */
static bool under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");
	return p && strstr(p, "vgpreload");
}

static void is_spawn_error(const struct run *run, int want, const char *what)
{
	if (under_valgrind() && run->spawn_r == 0) {
		ok(run->done && run->exit_code != 0, "%s: under valgrind, a failed run (exit %d)", what,
		   run->exit_code);
		return;
	}
	is_int(run->spawn_r, want, "%s: %s from hook_spawn()", what, strerrorname_np(-want));
	ok(!run->done && !run->h, "%s: no hook and no done()", what);
}

static void test_spawn_errors(sd_event *ev)
{
	_cleanup_(freep) char *missing = NULL;
	_cleanup_(freep) char *plain = fixture("not-executable", "#!/bin/sh\nexit 0\n", 0644);
	_cleanup_(freep) char *garbage = fixture("garbage", "\x01\x02 not a program\n", 0755);
	_cleanup_(freep) char *no_interp = fixture("no-interpreter", "#!/nonexistent/sh\nexit 0\n", 0755);
	struct buf b = BUF_INIT;
	struct run run = { 0 };

	buf_printf(&b, "%s/missing", dir);
	missing = buf_detach(&b);

	run_hook(ev, &run, "config", missing, script_env, 30, 0);
	is_spawn_error(&run, -ENOENT, "a missing path");
	run_release(&run);

	run_hook(ev, &run, "config", plain, script_env, 30, 0);
	is_spawn_error(&run, -EACCES, "a file without x bit");
	run_release(&run);

	run_hook(ev, &run, "config", dir, script_env, 30, 0);
	is_spawn_error(&run, -EACCES, "a directory");
	run_release(&run);

	run_hook(ev, &run, "config", garbage, script_env, 30, 0);
	is_spawn_error(&run, -ENOEXEC, "an executable of no known format");
	run_release(&run);

	run_hook(ev, &run, "config", no_interp, script_env, 30, 0);
	is_spawn_error(&run, -ENOENT, "a script whose interpreter is missing");
	run_release(&run);

	run_hook(ev, &run, "config", "", script_env, 30, 0);
	is_int(run.spawn_r, -EINVAL, "an empty path: -EINVAL");
	run_release(&run);

	errno = 0;
	ok(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD,
	   "no child left behind by the failed spawns");
}

/* The driver itself as the hook: what does the child get? */
static void test_child_environment(sd_event *ev, const char *self, bool stdio_closed)
{
	char *const env[] = { "TEST_HOOK_CHILD=1", "ORCHESTRATE_HOST=h1",
			      "ORCHESTRATE_VERSION=v1", NULL };
	const char *how = stdio_closed ? " (parent's stdin and stdout closed)" : "";
	struct buf want = BUF_INIT;
	struct run run = { 0 };
	int saved_in = -1, saved_out = -1;

	if (stdio_closed) {
		/* The pipe then takes descriptors 0 and 1: the write end must
		 * still reach the child's stdout, and /dev/null its stdin.  Both
		 * are given back once the hook is freed (sd-event's pidfd may
		 * take descriptor 1 meanwhile): nothing is printed before. */
		fflush(stdout);
		saved_in = dup(0);
		saved_out = dup(1);
		close(0);
		close(1);
	}
	run.started = now_usec();
	run.spawn_r = hook_spawn(ev, "validate", self, env, 30, "v1", on_done, &run, &run.h);
	if (run.spawn_r == 0) {
		run.pid = hook_pid(run.h);
		while (!run.done && now_usec() < run.started + 20000000ULL)
			sd_event_run(ev, 50000);
		run.h = hook_free(run.h);
	}
	if (stdio_closed) {
		dup2(saved_in, 0);
		dup2(saved_out, 1);
		close(saved_in);
		close(saved_out);
	}
	is_int(run.spawn_r, 0, "the driver starts as its own hook%s", how);
	is_int(run.exit_code, 0, "it reported and exited 0%s", how);
	buf_printf(&want,
		   "pid=%ld pgrp=%ld\n"
		   "fds=0,1,2\n"
		   "fd0=/dev/null\n"
		   "fd1=fd2, a pipe\n"
		   "sigmask=empty\n"
		   "sigign=none\n"
		   "env=TEST_HOOK_CHILD=1;ORCHESTRATE_HOST=h1;ORCHESTRATE_VERSION=v1\n",
		   (long)run.pid, (long)run.pid);
	is_str(run.output, buf_str(&want),
	       "own process group, fds 0-2 only, /dev/null and one pipe, no blocked or ignored "
	       "signal, the caller's env only%s", how);
	buf_release(&want);
	run_release(&run);
}

static void test_kill_timeout_free(sd_event *ev)
{
	_cleanup_(freep) char *sleeper = NULL;
	_cleanup_(freep) char *pidfile = NULL;
	struct buf b = BUF_INIT;
	struct run run = { 0 };
	pid_t grandchild = 0;
	FILE *f;

	buf_printf(&b, "%s/sleep.pid", dir);
	pidfile = buf_detach(&b);
	buf_printf(&b, "#!/bin/sh\nsleep 30 &\necho $! >'%s'\necho started\nwait\n", pidfile);
	sleeper = fixture("sleeper", buf_str(&b), 0755);
	buf_release(&b);

	/* The driver blocks SIGTERM, as the daemon does: the child must not. */
	run.kill_sig = SIGTERM;
	run.kill_after = 300000;
	run_hook(ev, &run, "config", sleeper, script_env, 30, 0);
	ok(run.done && !run.done_in_call, "hook_kill(SIGTERM): done() from the loop");
	is_int(run.signal, SIGTERM, "killed by SIGTERM, though the parent blocks it");
	is_int(run.exit_code, -1, "exit code -1");
	ok(!run.timed_out, "not marked timed out");
	ok(elapsed_sec(&run) < 5, "at once, not after the SIGKILL grace (%.2f s)", elapsed_sec(&run));
	is_str(run.output, "started\n", "the output so far");
	f = fopen(pidfile, "r");
	if (f) {
		long p = 0;
		if (fscanf(f, "%ld", &p) == 1)
			grandchild = (pid_t)p;
		fclose(f);
	}
	ok(grandchild > 0 && process_gone_soon(grandchild), "the hook's child in its group is gone too");
	run_release(&run);

	run_hook(ev, &run, "config", sleeper, script_env, 1, 0);
	ok(run.timed_out, "a 1 s timeout: timed out");
	is_int(run.signal, SIGTERM, "stopped with SIGTERM");
	ok(elapsed_sec(&run) >= 0.9 && elapsed_sec(&run) < 5, "after about 1 s (%.2f s)",
	   elapsed_sec(&run));
	run_release(&run);

	run.free_after = 200000;
	run_hook(ev, &run, "config", sleeper, script_env, 30, 300000);
	ok(!run.done, "hook_free() of a running hook: no done()");
	ok(run.pid > 0 && process_gone_soon(run.pid), "and the process is killed and reaped");
	run_release(&run);
}

/* --- simulated hooks ------------------------------------------------------- */

static int sim_exit_code_for(const char *name, char *const *env, void *userdata)
{
	int *calls = userdata;

	__atomic_add_fetch(calls, 1, __ATOMIC_RELAXED);
	if (strcmp(name, "hang") == 0)
		return HOOK_SIM_HANG;
	for (; env && *env; env++)
		if (strcmp(*env, "ORCHESTRATE_HOST=h2") == 0 && strcmp(name, "validate") == 0)
			return 1;
	return 0;
}

static void test_simulated(sd_event *ev)
{
	char *const env_h1[] = { "ORCHESTRATE_HOST=h1", NULL };
	char *const env_h2[] = { "ORCHESTRATE_HOST=h2", NULL };
	struct run run = { 0 };
	static int calls;

	is_int(hook_simulate(-1, 1, 0, NULL, NULL), -EINVAL, "hook_simulate: min < 0 is refused");
	is_int(hook_simulate(2, 1, 0, NULL, NULL), -EINVAL, "max < min is refused");
	is_int(hook_simulate(0, NAN, 0, NULL, NULL), -EINVAL, "NaN is refused");
	is_int(hook_simulate(0, 1, 256, NULL, NULL), -EINVAL, "exit code 256 is refused");

	is_int(hook_simulate(0.2, 0.4, 4, NULL, NULL), 0, "simulate 0.2-0.4 s, exit 4");
	run_hook(ev, &run, "config", "/nonexistent/config", NULL, 30, 0);
	is_int(run.spawn_r, 0, "no path is checked");
	is_int(run.pid, 0, "hook_pid() is 0");
	ok(run.done && !run.done_in_call, "done() from the loop, not inside hook_spawn()");
	is_int(run.exit_code, 4, "exit code 4");
	is_int(run.signal, 0, "no signal");
	is_str(run.output, "simulated", "output \"simulated\"");
	ok(elapsed_sec(&run) >= 0.2 && elapsed_sec(&run) < 0.5, "after 0.2-0.4 s (%.3f s)",
	   elapsed_sec(&run));
	run_release(&run);

	hook_simulate(0, 0, 0, NULL, NULL);
	run_hook(ev, &run, "services", "/x", NULL, 0, 0);
	ok(run.done && !run.done_in_call && run.exit_code == 0,
	   "a zero duration still ends from the loop");
	run_release(&run);

	hook_simulate(0.2, 0.2, 0, NULL, NULL);
	run.kill_sig = SIGWINCH;
	run.kill_after = 50000;
	run_hook(ev, &run, "config", "/x", NULL, 30, 0);
	ok(run.exit_code == 0 && run.signal == 0 && elapsed_sec(&run) >= 0.2,
	   "a signal a process ignores by default changes nothing");
	run_release(&run);

	hook_simulate(5, 5, 0, NULL, NULL);
	run.kill_sig = SIGTERM;
	run.kill_after = 100000;
	run_hook(ev, &run, "config", "/x", NULL, 30, 0);
	ok(run.done && !run.done_in_call, "hook_kill(SIGTERM): done() from the loop, not inside hook_kill()");
	is_int(run.signal, SIGTERM, "killed by SIGTERM");
	is_int(run.exit_code, -1, "exit code -1");
	ok(!run.timed_out && elapsed_sec(&run) < 1, "at once, not timed out (%.3f s)", elapsed_sec(&run));
	run_release(&run);

	run.free_after = 100000;
	hook_simulate(0.2, 0.2, 0, NULL, NULL);
	run_hook(ev, &run, "config", "/x", NULL, 30, 400000);
	ok(!run.done, "hook_free() of a running simulated hook: no done()");
	run_release(&run);

	is_int(hook_simulate(0.05, 0.1, 0, sim_exit_code_for, &calls), 0, "simulate with a callback");
	run_hook(ev, &run, "validate", "/x", env_h2, 30, 0);
	is_int(run.exit_code, 1, "the callback fails validate on h2 (it sees name and env)");
	run_release(&run);
	run_hook(ev, &run, "validate", "/x", env_h1, 30, 0);
	is_int(run.exit_code, 0, "and not on h1");
	run_release(&run);
	run_hook(ev, &run, "hang", "/x", env_h1, 1, 0);
	ok(run.timed_out && run.signal == SIGTERM && run.exit_code == -1,
	   "HOOK_SIM_HANG runs into its timeout: timed out, SIGTERM");
	ok(elapsed_sec(&run) >= 0.9 && elapsed_sec(&run) < 3, "after about 1 s (%.2f s)",
	   elapsed_sec(&run));
	run_release(&run);
	is_int(calls, 3, "the callback was called once per run");
}

/* Several threads, each with its own loop, share the switch. */
#define SIM_THREADS 4
#define SIM_HOOKS 200

struct sim_thread {
	int done, failed, wrong;
};

static void on_sim_done(struct hook *h, const struct hook_result *r, void *userdata)
{
	struct sim_thread *t = userdata;
	bool should_fail = strcmp(hook_name(h), "validate") == 0;

	t->done++;
	if (r->exit_code != (should_fail ? 1 : 0) || strcmp(r->output, "simulated") != 0)
		t->wrong++;
	hook_free(h);
}

static void *sim_thread_main(void *arg)
{
	struct sim_thread *t = arg;
	char *const env[] = { "ORCHESTRATE_HOST=h2", NULL };
	sd_event *ev = NULL;
	uint64_t deadline = now_usec() + 20000000ULL;

	if (sd_event_new(&ev) < 0) {
		t->failed = SIM_HOOKS;
		return NULL;
	}
	for (int i = 0; i < SIM_HOOKS; i++) {
		struct hook *h;
		if (hook_spawn(ev, i % 2 ? "validate" : "config", "/x", env, 30, NULL, on_sim_done, t,
			       &h) < 0)
			t->failed++;
	}
	while (t->done + t->failed < SIM_HOOKS && now_usec() < deadline)
		sd_event_run(ev, 50000);
	sd_event_unref(ev);
	return NULL;
}

static void test_simulated_threads(void)
{
	static int calls;
	pthread_t threads[SIM_THREADS];
	struct sim_thread t[SIM_THREADS] = { 0 };
	int done = 0, failed = 0, wrong = 0;

	hook_simulate(0, 0.05, 0, sim_exit_code_for, &calls);
	for (int i = 0; i < SIM_THREADS; i++)
		pthread_create(&threads[i], NULL, sim_thread_main, &t[i]);
	for (int i = 0; i < SIM_THREADS; i++) {
		pthread_join(threads[i], NULL);
		done += t[i].done;
		failed += t[i].failed;
		wrong += t[i].wrong;
	}
	is_int(done, SIM_THREADS * SIM_HOOKS, "%d threads x %d simulated hooks all ended", SIM_THREADS,
	       SIM_HOOKS);
	is_int(failed + wrong, 0, "with the exit code the callback chose");
}

int main(int argc, char **argv)
{
	sd_event *ev = NULL;
	sigset_t mask;
	char self[4096];
	ssize_t n;

	if (getenv("TEST_HOOK_CHILD"))
		return child_report();

	log_init("test_hook", LOG_TO_STDERR);
	log_set_verbose(-1);

	/* As orchestrated: SIGCHLD and the stop signals blocked for sd-event,
	 * SIGPIPE ignored.  The hooks must see none of it. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || !mkdtemp(dir) || sd_event_new(&ev) < 0) {
		fprintf(stderr, "test_hook: cannot set up: %s\n", strerror(errno));
		return 2;
	}
	self[n] = '\0';

	test_exit_and_output(ev);
	test_spawn_errors(ev);
	test_child_environment(ev, self, false);
	test_child_environment(ev, self, true);
	test_kill_timeout_free(ev);
	test_simulated(ev);
	test_simulated_threads();

	sd_event_unref(ev);
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "test_hook: cannot remove '%s'\n", dir);
	}
	return done_testing();
}
