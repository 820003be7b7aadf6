/*
 * hook_proto.h — the wire format between the daemon and the root hook runner
 * (orchestrate-hook-runner, orchestrated(8) "HOOK RUNNER").  Pure encoding and
 * decoding: no I/O, so that the unit tests can drive it.
 *
 * One connection runs one hook.  The daemon sends the request first:
 *
 *   "orchestrate-hook 1\0" NAME "\0" "ORCHESTRATE_HOST=web1\0" ... "\0"
 *
 * a magic string, the hook's name (upgrade, config, validate or services:
 * never a path, which the runner takes from its own config file), and the
 * hook's environment as NUL-terminated "K=V" strings ended by an empty one.
 * Only ORCHESTRATE_* variables pass: PATH, LD_PRELOAD or any other name
 * refuses the whole request, since whoever can connect must get no more than
 * a run of a configured hook with values the hooks treat as data.  Of those,
 * the runner keeps the host and the versions, checked as names, and sets the
 * rest itself (hook_request_client_env()).
 *
 * Then both sides speak in frames: one type byte, a 32-bit big-endian payload
 * length (at most HOOK_FRAME_MAX), the payload.  The runner sends
 *
 *   'S' "PID"                 the hook started (S or E comes first)
 *   'E' "ERRNO message"       refused or not started; the runner then closes
 *   'O' bytes                 the hook's output (stdout and stderr)
 *   'X' "exited N"|"killed N" the end; the runner then closes
 *
 * and the daemon sends 'K' "SIG" (SIGTERM or SIGKILL) to signal the hook's
 * process group.  The daemon closing its end means 'K' SIGTERM, followed by
 * SIGKILL after HOOK_KILL_GRACE_USEC.
 */
#ifndef ORCHESTRATE_HOOK_PROTO_H
#define ORCHESTRATE_HOOK_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

#define HOOK_PROTO_MAGIC "orchestrate-hook 1"
#define HOOK_REQUEST_MAX (64 * 1024)
#define HOOK_REQUEST_ENV_MAX 64
#define HOOK_FRAME_HEADER 5
#define HOOK_FRAME_MAX (64 * 1024)

enum {
	HOOK_FRAME_STARTED = 'S',
	HOOK_FRAME_ERROR = 'E',
	HOOK_FRAME_OUTPUT = 'O',
	HOOK_FRAME_EXIT = 'X',
	HOOK_FRAME_KILL = 'K',
};

/* Whether name is one of the hook kinds (config.h, orchestrated(8) "Hooks"). */
bool hook_proto_name_valid(const char *name);
/* Whether "K=V" may pass to a hook through the runner: K is ORCHESTRATE_
 * followed by at least one of [A-Z0-9_]. */
bool hook_proto_env_allowed(const char *kv);

/*
 * Appends the request for hook name with env to b.  Entries of env that
 * hook_proto_env_allowed() refuses (the daemon's PATH) are left out: the
 * runner sets its own.  Returns 0, -EINVAL for an invalid name, -E2BIG when
 * the request would exceed HOOK_REQUEST_MAX or HOOK_REQUEST_ENV_MAX, -ENOMEM.
 */
int hook_request_encode(struct buf *b, const char *name, char *const *env);

/*
 * Parses a request from the first len bytes of data.  Returns 0 when more
 * bytes are needed; 1 with *ret_name, *ret_env (NULL-terminated; caller frees
 * both) and *ret_consumed; or a negative code with *ret_error (caller frees):
 * -EPROTO for a wrong magic, -EPERM for an unknown hook or a refused or
 * repeated variable, -E2BIG when it exceeds the limits, -ENOMEM.
 */
int hook_request_parse(const char *data, size_t len, char **ret_name, char ***ret_env,
		       size_t *ret_consumed, char **ret_error);

/*
 * The runner's share of a request's variables (orchestrated(8) "HOOK
 * RUNNER"): the runner sets the environment it owns.  From the client it takes
 * ORCHESTRATE_HOST (a valid name), ORCHESTRATE_VERSION and
 * ORCHESTRATE_PREVIOUS_VERSION (a name, or empty: a node with no version yet),
 * checked with the one name rule, so no value with a newline, a '/' or a
 * leading '-' passes.  The paths, the etcd endpoints and the prefix
 * (ORCHESTRATE_SERVICES_FILE, ORCHESTRATE_LOCAL_VERSION_FILE, ORCHESTRATE_ETCD,
 * ORCHESTRATE_PREFIX) come from the runner's own config file: a client's are
 * dropped, counted in *ret_ignored (a daemon of an older release sends them).
 * Any other variable (ORCHESTRATE_PASSWORD included) refuses the request.
 *
 * Returns 0 with *ret_env (NULL-terminated, caller frees), or -EPERM with
 * *ret_error naming the variable and what is wrong, never its value (it
 * goes to the journal), or -ENOMEM.
 */
int hook_request_client_env(char *const *req_env, char ***ret_env, size_t *ret_ignored,
			    char **ret_error);

/* Appends a frame; -E2BIG when n > HOOK_FRAME_MAX. */
int hook_frame_add(struct buf *b, char type, const void *payload, size_t n);
/* Sends all n bytes on the socket fd (no SIGPIPE); -errno on failure. */
int hook_proto_send(int fd, const char *p, size_t n);
/*
 * Waits until deadline_ms (a CLOCK_MONOTONIC millisecond, clock_msec()) for
 * the socket fd to have bytes, and appends what one read gives to b: 0,
 * -ETIMEDOUT when the deadline passes first, -ECONNRESET at the end of the
 * stream, -ENOMEM or -errno.  The two waits for a message (the runner's for
 * the request, the daemon's for the runner's first frame) parse b after each
 * call.
 */
int hook_proto_read_until(int fd, struct buf *b, uint64_t deadline_ms);
/* printf-style payload, for S, E, X and K. */
int hook_frame_addf(struct buf *b, char type, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Parses one frame at the front of data.  Returns 0 when incomplete, 1 with
 * the type, the payload (pointing into data) and the bytes it took, or
 * -EBADMSG for an unknown type or a length over HOOK_FRAME_MAX.
 */
int hook_frame_parse(const char *data, size_t len, char *ret_type, const char **ret_payload,
		     size_t *ret_n, size_t *ret_consumed);

/* The decimal integer at the front of a payload ("123", or "2 message" for an
 * E frame), in [min, max]; -EBADMSG when there is none. */
int hook_frame_int(const char *payload, size_t n, long min, long max, long *ret);
/* Parses an X payload into exit status (or -1) and signal (or 0). */
int hook_frame_exit(const char *payload, size_t n, int *ret_exit_code, int *ret_signal);

#endif
