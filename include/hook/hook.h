/*
 * hook.h — running one hook (orchestrated(8) "Hooks") as a child of the daemon's sd-event loop.
 *
 * A hook is an executable run with execve (never through a shell), with a clean
 * environment given by the caller, stdin from /dev/null, and stdout and stderr on
 * one pipe that the loop reads: every line goes to the journal with the field
 * ORCHESTRATE_HOOK=NAME, and the last HOOK_TAIL_MAX bytes are kept for the status
 * detail.  The child leads its own process group, so a timeout or a stop signals
 * the whole group (SIGTERM, then SIGKILL after a grace period), and whatever the
 * hook left running in its group is killed when it exits: no orphan survives.
 *
 * The caller learns the outcome once, through done(), after the child exited and
 * its output was read to the end; the hook must then be freed with hook_free().
 */
#ifndef ORCHESTRATE_HOOK_H
#define ORCHESTRATE_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sd_event sd_event;

#define HOOK_TAIL_MAX 4096
#define HOOK_KILL_GRACE_USEC (10ULL * 1000000ULL)

struct hook;

struct hook_result {
	int exit_code;		/* the exit status, or -1 when killed by a signal */
	int signal;		/* the signal that killed it, 0 when it exited */
	bool timed_out;		/* killed because it ran past its timeout */
	long timeout_sec;	/* the timeout it had, for the message */
	const char *output;	/* the tail of its output, NUL-terminated */
};

typedef void (*hook_done_fn)(struct hook *h, const struct hook_result *r, void *userdata);

/*
 * Starts path as hook name with env (NULL-terminated "K=V" strings, only read
 * during the call).  timeout_sec <= 0 means none.  version is only for the
 * journal's ORCHESTRATE_VERSION= field (may be NULL).  Returns 0 and *ret, or a
 * negative code: execve's failure comes back here, synchronously (-ENOENT or
 * -EACCES when path is not an executable, -ENOEXEC for an unknown format), and
 * done() is then never called.  done() is only ever called from the loop.
 */
int hook_spawn(sd_event *event, const char *name, const char *path, char *const *env,
	       long timeout_sec, const char *version, hook_done_fn done, void *userdata,
	       struct hook **ret);

/* Signals the hook's process group with sig; a SIGTERM arms the SIGKILL that
 * follows after HOOK_KILL_GRACE_USEC.  No effect once the hook has exited. */
void hook_kill(struct hook *h, int sig);

/* Frees the hook.  A hook still running is killed (SIGKILL to its group) and
 * reaped by the loop without calling done(). */
struct hook *hook_free(struct hook *h);
static inline void hook_freep(struct hook **h) { if (*h) hook_free(*h); }

const char *hook_name(const struct hook *h);
pid_t hook_pid(const struct hook *h);

/*
 * The hook runner (orchestrated(8) "HOOK RUNNER"): from the call on,
 * hook_spawn() does not start path itself but asks the runner listening on
 * socket_path to start the hook of that name, which the runner resolves from
 * its own config file; only env's ORCHESTRATE_* entries are sent (the runner
 * sets PATH).  Nothing else changes for the caller: output, timeout,
 * hook_kill(), hook_free() and done() behave as for a child of ours, pid is
 * the runner's child, and a runner that refuses or cannot start the hook makes
 * hook_spawn() fail with its code (-EPERM, -ENOENT, ...), as do -ECONNREFUSED
 * or -ENOENT for a runner that is not there.  A runner that goes away
 * mid-run ends the hook with exit_code -1 and signal 0 ("lost").  NULL or ""
 * spawns directly again.  Call it before hooks start; returns 0, -ENAMETOOLONG
 * or -ENOMEM.
 */
int hook_use_runner(const char *socket_path);

/*
 * For the runner only: the output the hook writes goes to fn, raw, as it is
 * read (userdata is hook_spawn()'s), instead of line by line to the journal.
 * Call it right after hook_spawn(): output is only read from the loop.
 */
typedef void (*hook_output_fn)(struct hook *h, const char *data, size_t n, void *userdata);
void hook_set_output(struct hook *h, hook_output_fn fn);

/* "exited with status 1", "killed by signal 9", "timed out after 30 s",
 * "lost: its hook runner went away". */
char *hook_result_describe(const struct hook_result *r);

/*
 * Fleet simulation (bench/fleet-sim only, never the daemon): from the call on,
 * hook_spawn() starts no process and checks no path.  Each hook "runs" for a
 * random time, uniform in [min_sec, max_sec], on a timer of the loop it was
 * spawned on, then ends with an exit code; done() sees that code and the output
 * "simulated".  The node code needs no special case: timeouts, hook_kill() and
 * hook_free() behave as for a process —
 *
 *   - a timeout, or hook_kill() with a signal whose default action terminates,
 *     ends the hook at once, from the loop: done() sees exit_code -1, signal sig
 *     (timed_out set when the timeout sent it), as for a hook that obeyed;
 *   - hook_free() of a running hook ends it without calling done();
 *   - hook_pid() is 0.
 *
 * The exit code is exit_code, or, when exit_code_for is not NULL, what it
 * returns for that run: it is called inside hook_spawn() on the spawning thread
 * with the hook's name ("upgrade", "config", "validate", "services"), the env
 * given to hook_spawn() (ORCHESTRATE_HOST=, ORCHESTRATE_VERSION=, ...) and
 * userdata, so it can fail one host's config run or draw a failure at random; it
 * must be safe to call from every thread that runs a loop.  It is called once
 * per hook_spawn().  0..255 is an exit code (more is taken modulo 256, as by
 * exit()); HOOK_SIM_HANG (any negative value) makes the run last until its
 * timeout or a kill.
 *
 * Call it once, before the threads that run loops start (thread creation
 * publishes it); it is read-only afterwards, and each thread draws its
 * durations from its own random state.  Hooks already running are unaffected.
 * Returns 0, or -EINVAL unless 0 <= min_sec <= max_sec (finite) and 0 <=
 * exit_code <= 255.
 */
#define HOOK_SIM_HANG (-1)
typedef int (*hook_sim_exit_fn)(const char *name, char *const *env, void *userdata);
int hook_simulate(double min_sec, double max_sec, int exit_code, hook_sim_exit_fn exit_code_for,
		  void *userdata);

#endif
