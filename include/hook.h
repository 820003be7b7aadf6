/*
 * hook.h — running one hook (SPEC §6) as a child of the daemon's sd-event loop.
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
 * Starts path as hook name with env (NULL-terminated "K=V" strings, copied before
 * the fork).  timeout_sec <= 0 means none.  version is only for the journal's
 * ORCHESTRATE_VERSION= field (may be NULL).  Returns 0 and *ret, or a negative
 * code (-ENOENT/-EACCES when path is not an executable).
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

/* "exited with status 1", "killed by signal 9", "timed out after 30 s". */
char *hook_result_describe(const struct hook_result *r);

#endif
