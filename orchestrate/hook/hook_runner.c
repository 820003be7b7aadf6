/*
 * hook_runner.c — main() of orchestrate-hook-runner, the root side of the
 * daemon's hooks (orchestrated(8) "HOOK RUNNER", hook_proto.h).
 *
 * The daemon runs as its own user, in a tight sandbox; the hooks (Puppet as
 * root) must not.  So the daemon does not start them: it connects to
 * orchestrate-hook.socket, and systemd starts one orchestrate-hook@.service
 * per connection (Accept=yes) running this program with the connection as
 * its one socket (sd_listen_fds).  It reads one request, resolves the hook's
 * path from its own config file (never from the request: whoever can connect
 * would otherwise choose what root runs), runs it with hook.c — its own
 * process group, stdin /dev/null, stdout and stderr captured — and streams
 * the output back, then the exit status.  A kill frame signals the hook's
 * group; the daemon going away (its timeout, its SIGTERM, a crash) is a
 * SIGTERM with the usual SIGKILL grace, so no run outlives its daemon.
 *
 * The split keeps a bug in the daemon, which parses what comes from etcd all
 * day, from becoming root.  So the runner trusts nothing the daemon could
 * have changed, and checks in this order, refusing the connection at the
 * first failure with one line in the journal:
 *
 *   1. who connected: SO_PEERCRED, which must work (fail closed), and name
 *      root or hooks.daemon_user, the daemon's own user;
 *   2. its config file, and later the hook it would run: owned by root and
 *      writable by nobody else, nor any directory above them (sshd's
 *      StrictModes), so that no file the daemon's user can change says what
 *      root runs;
 *   3. the request: one of the four hook names, and of the environment only
 *      the host and the two versions, each a valid name
 *      (hook_request_client_env()); the paths, etcd endpoints and prefix the
 *      hook sees come from the runner's own config.
 *
 * And the run is bounded by the runner itself: hooks.timeout from its own
 * config plus the kill grace (the daemon's own timeout fires first; this one
 * holds when the daemon does not), and output is queued without ever
 * blocking the loop: past RUNNER_QUEUE_MAX it is dropped and the drop noted,
 * so a client that stops reading cannot stop the runner from serving a kill
 * frame, its SIGTERM or its timeout.
 *
 * --listen PATH serves without systemd, for the tests and for a machine
 * without it: it binds PATH (mode 0660, group of hooks.daemon_user; it
 * replaces a socket left there, never another file) and forks one child per
 * connection, at most RUNNER_LISTEN_MAX at once, as the socket unit's
 * MaxConnections=.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "config/config.h"
#include "hook/hook.h"
#include "hook/hook_proto.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/version.h"

/* How long a client may take to send its request. */
#define RUNNER_REQUEST_MSEC 10000
/* Output waiting for the client beyond this is dropped (and the drop said):
 * the loop never blocks on a client that stops reading. */
#define RUNNER_QUEUE_MAX (256 * 1024)
/* How long the last frames may wait for a client that stopped reading once
 * the hook ended. */
#define RUNNER_FLUSH_USEC (10ULL * 1000000ULL)
/* --listen: runs at once, as MaxConnections= of orchestrate-hook.socket. */
#define RUNNER_LISTEN_MAX 8

struct run {
	int fd;			/* the connection, non-blocking once the hook runs */
	sd_event *event;
	sd_event_source *io, *term, *flush;
	struct hook *hook;
	struct buf in;		/* bytes of a partial K frame */
	struct buf out;		/* frames not sent yet */
	size_t dropped;		/* output bytes dropped since the last notice */
	bool gone;		/* the daemon closed or the socket broke */
	bool ended;		/* the hook ended: exit once out is sent */
	int exit;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: orchestrate-hook-runner [--config FILE] [--listen PATH]\n"
		"\n"
		"  --config FILE     configuration file (default " CONFIG_DEFAULT_PATH ");\n"
		"                    it, the hooks it names and every directory above\n"
		"                    them must be root's and writable by nobody else\n"
		"  --listen PATH     serve on PATH (mode 0660, group of hooks.daemon_user),\n"
		"                    one child per connection, at most 8 at once (without\n"
		"                    systemd); replaces a socket at PATH, never another file\n"
		"\n"
		"Serves root and hooks.daemon_user (default " CONFIG_DEFAULT_DAEMON_USER ") alone;\n"
		"a hook gets ORCHESTRATE_HOST, _VERSION and _PREVIOUS_VERSION from the\n"
		"client and the rest from the config file, and runs at most\n"
		"hooks.timeout plus 10 s.  Started by orchestrate-hook.socket; see\n"
		"orchestrated(8).\n");
}

static void run_lost(struct run *run)
{
	if (run->gone)
		return;
	run->gone = true;
	run->io = sd_event_source_disable_unref(run->io);
	buf_reset(&run->out);
	if (run->hook && !run->ended) {
		log_fields(LOG_WARNING, NULL, hook_name(run->hook),
			   "hook '%s': the daemon went away, stopping the hook", hook_name(run->hook));
		hook_kill(run->hook, SIGTERM);
	}
	if (run->ended)
		(void)sd_event_exit(run->event, 0);
}

/* Sends what the socket takes now; waits for EPOLLOUT for the rest. */
static void run_flush(struct run *run)
{
	while (!run->gone && run->out.len > 0) {
		ssize_t w = send(run->fd, run->out.data, run->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w <= 0) {
			run_lost(run);
			return;
		}
		buf_consume(&run->out, (size_t)w);
	}
	if (run->gone)
		return;
	if (run->io)
		(void)sd_event_source_set_io_events(run->io, EPOLLIN | EPOLLRDHUP |
						    (run->out.len > 0 ? EPOLLOUT : 0));
	if (run->ended && run->out.len == 0)
		(void)sd_event_exit(run->event, 0);
}

/* Queues a frame.  Output (O) past RUNNER_QUEUE_MAX is dropped and counted;
 * the frames that say how the run went (S, X) are always queued. */
static void run_queue(struct run *run, char type, const void *payload, size_t n)
{
	if (run->gone)
		return;
	if (type == HOOK_FRAME_OUTPUT) {
		if (run->out.len + HOOK_FRAME_HEADER + n > RUNNER_QUEUE_MAX) {
			run->dropped += n;
			return;
		}
		if (run->dropped > 0) {
			_cleanup_(buf_releasep) struct buf m = BUF_INIT;
			if (buf_printf(&m, "\n[orchestrate-hook-runner: %zu bytes of output dropped: "
					   "the daemon did not read them]\n", run->dropped) < 0 ||
			    hook_frame_add(&run->out, HOOK_FRAME_OUTPUT, m.data, m.len) < 0)
				return;
			run->dropped = 0;
		}
	}
	if (hook_frame_add(&run->out, type, payload, n) < 0) {
		run_lost(run);
		return;
	}
	run_flush(run);
}

static void on_output(struct hook *h, const char *data, size_t n, void *userdata)
{
	run_queue(userdata, HOOK_FRAME_OUTPUT, data, n);
}

static int on_flush_timeout(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct run *run = userdata;
	log_warnx("the daemon did not read the end of the run for %llu s, closing",
		  RUNNER_FLUSH_USEC / 1000000ULL);
	(void)sd_event_exit(run->event, 0);
	return 0;
}

static void on_done(struct hook *h, const struct hook_result *r, void *userdata)
{
	struct run *run = userdata;
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	_cleanup_(freep) char *what = hook_result_describe(r);

	log_fields(r->exit_code == 0 ? LOG_INFO : LOG_WARNING, NULL, hook_name(h), "hook '%s' %s",
		   hook_name(h), what ? what : "ended");
	run->exit = 0;
	run->ended = true;
	if (run->gone) {
		(void)sd_event_exit(run->event, 0);
		return;
	}
	if (run->dropped > 0) {
		log_fields(LOG_WARNING, NULL, hook_name(h),
			   "hook '%s': %zu bytes of its output dropped: the daemon did not read them",
			   hook_name(h), run->dropped);
		run_queue(run, HOOK_FRAME_OUTPUT, "", 0);	/* the notice, if it fits */
	}
	if ((r->signal ? buf_printf(&f, "killed %d", r->signal)
		       : buf_printf(&f, "exited %d", r->exit_code & 0xff)) == 0)
		run_queue(run, HOOK_FRAME_EXIT, f.data, f.len);
	if (!run->gone && run->out.len > 0)
		(void)sd_event_add_time_relative(run->event, &run->flush, CLOCK_MONOTONIC,
						 RUNNER_FLUSH_USEC, 0, on_flush_timeout, run);
	run_flush(run);
}

/* K frames from the daemon; EOF or garbage is the daemon going away. */
static int on_socket(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct run *run = userdata;
	char chunk[256];

	if (revents & EPOLLOUT) {
		run_flush(run);
		if (run->gone)
			return 0;
	}
	if (!(revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return 0;
	for (;;) {
		ssize_t n = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0 || buf_add(&run->in, chunk, (size_t)n) < 0) {
			run_lost(run);
			return 0;
		}
		for (;;) {
			const char *payload;
			size_t len, used;
			char type;
			long sig;
			int r = hook_frame_parse(run->in.data, run->in.len, &type, &payload, &len, &used);
			if (r == 0)
				break;
			if (r < 0 || type != HOOK_FRAME_KILL ||
			    hook_frame_int(payload, len, 1, NSIG - 1, &sig) < 0 ||
			    (sig != SIGTERM && sig != SIGKILL)) {
				log_warnx("hook runner: unexpected message from the daemon, stopping the hook");
				run_lost(run);
				return 0;
			}
			log_fields(LOG_INFO, NULL, hook_name(run->hook), "hook '%s': %s from the daemon",
				   hook_name(run->hook), sig == SIGTERM ? "SIGTERM" : "SIGKILL");
			if (!run->ended)
				hook_kill(run->hook, (int)sig);
			buf_consume(&run->in, used);
		}
	}
}

/* systemctl stop of the instance: stop the hook as the daemon would. */
static int on_term(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct run *run = userdata;
	log_info("SIGTERM: stopping the hook");
	if (run->ended)
		(void)sd_event_exit(run->event, 0);
	else
		hook_kill(run->hook, SIGTERM);
	return 0;
}

/* Reads the request, at most RUNNER_REQUEST_MSEC for all of it. */
static int read_request(int fd, char **ret_name, char ***ret_env, char **ret_error)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	uint64_t deadline = clock_msec(CLOCK_MONOTONIC) + RUNNER_REQUEST_MSEC;
	size_t used;

	for (;;) {
		int r = hook_request_parse(b.data, b.len, ret_name, ret_env, &used, ret_error);
		if (r != 0)
			return r < 0 ? r : (used == b.len ? 0 : -EPROTO);
		if ((r = hook_proto_read_until(fd, &b, deadline)) < 0)
			return r;
	}
}

/* Before the hook runs the socket is blocking: an error frame is tiny. */
static void send_error(int fd, int code, const char *msg)
{
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	if (hook_frame_addf(&f, HOOK_FRAME_ERROR, "%d %s", code, msg) == 0)
		(void)hook_proto_send(fd, f.data, f.len);
}

/*
 * A refusal before the request was read: the error frame, then the rest of
 * what the client sends, until it closes (at most REFUSE_DRAIN_MSEC and
 * 64 KiB).  Closing at once, with the client's request still on its way or
 * unread, made the client's write fail with EPIPE before it could read why it
 * was refused: the daemon logged a broken pipe instead of the reason, and
 * under load the test that checks the reason failed.
 */
#define REFUSE_DRAIN_MSEC 1000
static void refuse_early(int fd, int code, const char *msg)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	uint64_t deadline = clock_msec(CLOCK_MONOTONIC) + REFUSE_DRAIN_MSEC;

	send_error(fd, code, msg);
	(void)shutdown(fd, SHUT_WR);
	while (b.len < 64 * 1024 && hook_proto_read_until(fd, &b, deadline) == 0)
		;
}

static const char *env_get(char *const *env, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], key, k) == 0 && env[i][k] == '=')
			return env[i] + k + 1;
	return NULL;
}

/* --- trust ---------------------------------------------------------------- */

/* One path, not followed if a link: root's, and (a link's mode means
 * nothing) writable by no group and no other user.  A directory above the
 * path (ancestor) may be writable by others when it is root's and sticky, as
 * /tmp is: there nobody but root may remove or rename an entry of root's,
 * so the root-owned directory below it stays what it is. */
static int trust_one(const char *p, bool ancestor, struct buf *why)
{
	struct stat st;

	if (lstat(p, &st) < 0) {
		int e = errno;
		(void)buf_printf(why, "cannot check '%s': %s", p, strerror(e));
		return -e;
	}
	if (st.st_uid != 0) {
		(void)buf_printf(why, "'%s' is owned by uid %ld, not root", p, (long)st.st_uid);
		return -EPERM;
	}
	if (ancestor && S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX))
		return 0;
	if (!S_ISLNK(st.st_mode) && (st.st_mode & (S_IWGRP | S_IWOTH))) {
		(void)buf_printf(why, "'%s' is writable by %s (mode %04o)", p,
				 (st.st_mode & S_IWOTH) ? "everyone" : "its group",
				 (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* Every prefix of the absolute path p, "/" first, then p itself. */
static int trust_walk(const char *p, struct buf *why)
{
	_cleanup_(freep) char *copy = NULL;
	int r;

	if (p[0] != '/') {
		(void)buf_printf(why, "'%s' is not an absolute path", p);
		return -EINVAL;
	}
	if (!(copy = strdup(p)))
		return -ENOMEM;
	if ((r = trust_one("/", true, why)) < 0)
		return r;
	for (char *q = copy + 1; *q; q++) {
		if (*q != '/')
			continue;
		*q = '\0';
		r = q > copy + 1 && q[-1] != '/' ? trust_one(copy, true, why) : 0;
		*q = '/';
		if (r < 0)
			return r;
	}
	return trust_one(copy, false, why);
}

/*
 * Whether root alone can change what path says (sshd's StrictModes): path,
 * every directory above it, and the same for the file it resolves to when a
 * link is on the way, must be owned by root and writable by neither group nor
 * others.  0, or a negative code with the offending path in *why.
 */
static int trust_path(const char *path, struct buf *why)
{
	_cleanup_(freep) char *real = NULL;
	int r;

	if ((r = trust_walk(path, why)) < 0)
		return r;
	if (!(real = realpath(path, NULL))) {
		int e = errno;
		(void)buf_printf(why, "cannot resolve '%s': %s", path, strerror(e));
		return -e;
	}
	return strcmp(real, path) == 0 ? 0 : trust_walk(real, why);
}

/* The uid and gid of hooks.daemon_user; -ENOENT when there is no such user. */
static int daemon_user(const struct config *cfg, uid_t *ret_uid, gid_t *ret_gid)
{
	struct passwd *pw;

	errno = 0;
	pw = cfg->hook_daemon_user ? getpwnam(cfg->hook_daemon_user) : NULL;
	if (!pw)
		return errno ? -errno : -ENOENT;
	*ret_uid = pw->pw_uid;
	*ret_gid = pw->pw_gid;
	return 0;
}

/* --- one connection --------------------------------------------------------- */

/* The environment the runner owns: PATH, the client's host and versions, and
 * from its own config the paths, endpoints and prefix (node_build_env()'s
 * variables, the same names). */
static int build_env(const struct config *cfg, char *const *client, char ***ret)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	size_t count = 0;
	int r;

	if ((r = strv_push(&env, &count, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")) < 0)
		return r;
	for (size_t i = 0; client && client[i]; i++)
		if ((r = strv_push(&env, &count, client[i])) < 0)
			return r;
	if ((r = buf_printf(&b, "ORCHESTRATE_SERVICES_FILE=%s", cfg->hiera_services)) < 0 ||
	    (r = strv_push(&env, &count, buf_str(&b))) < 0)
		return r;
	buf_reset(&b);
	if ((r = buf_printf(&b, "ORCHESTRATE_LOCAL_VERSION_FILE=%s", cfg->local_version)) < 0 ||
	    (r = strv_push(&env, &count, buf_str(&b))) < 0)
		return r;
	buf_reset(&b);
	if ((r = buf_adds(&b, "ORCHESTRATE_ETCD=")) < 0)
		return r;
	for (size_t i = 0; cfg->endpoints && cfg->endpoints[i]; i++)
		if ((i && (r = buf_addc(&b, ',')) < 0) || (r = buf_adds(&b, cfg->endpoints[i])) < 0)
			return r;
	if ((r = strv_push(&env, &count, buf_str(&b))) < 0)
		return r;
	if (cfg->prefix && *cfg->prefix) {
		buf_reset(&b);
		if ((r = buf_printf(&b, "ORCHESTRATE_PREFIX=%s", cfg->prefix)) < 0 ||
		    (r = strv_push(&env, &count, buf_str(&b))) < 0)
			return r;
	}
	/* Paths of the config come from root's own file; still, no newline
	 * reaches a hook's environment from anywhere. */
	for (size_t i = 0; env[i]; i++)
		if (strchr(env[i], '\n'))
			return -EINVAL;
	*ret = TAKE_PTR(env);
	return 0;
}

/* Serves one connection: returns the process's exit code. */
static int serve(int fd, const char *config_path)
{
	_cleanup_(config_freep) struct config *cfg = NULL;
	_cleanup_(strv_freep) char **req_env = NULL, **client = NULL, **env = NULL;
	_cleanup_(freep) char *name = NULL, *error = NULL;
	_cleanup_(buf_releasep) struct buf why = BUF_INIT;
	struct run run = { .fd = fd, .exit = 1 };
	struct ucred cred = { 0 };
	socklen_t cl = sizeof(cred);
	uid_t daemon_uid = 0;
	gid_t daemon_gid = 0;
	const char *path;
	size_t ignored = 0;
	sigset_t mask;
	int r;

	/* 1. Who connected.  No answer is no entry. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cl != sizeof(cred)) {
		log_warn("cannot read the credentials of the connecting process, refusing it");
		refuse_early(fd, EPERM, "permission denied");
		return 1;
	}
	/* 2. The config file says what root runs: root's alone, or nothing. */
	if ((r = trust_path(config_path, &why)) < 0) {
		log_warnx("refusing to run hooks: config file: %s", buf_str(&why));
		refuse_early(fd, EPERM, "the hook runner's config file is not root's alone (see its journal)");
		return 1;
	}
	r = config_load(config_path, false, &cfg, &error);
	if (r < 0) {
		log_warnx("%s", error ? error : strerror(-r));
		refuse_early(fd, EINVAL, error ? error : "the runner's config file is invalid");
		return 1;
	}
	r = daemon_user(cfg, &daemon_uid, &daemon_gid);
	if (cred.uid != 0 && (r < 0 || cred.uid != daemon_uid)) {
		if (r < 0)
			log_warnx("refused uid %ld (pid %ld): only root may ask for hooks, "
				  "hooks.daemon_user '%s' does not exist",
				  (long)cred.uid, (long)cred.pid, cfg->hook_daemon_user);
		else
			log_warnx("refused uid %ld (pid %ld): only root and '%s' (uid %ld) may ask for hooks",
				  (long)cred.uid, (long)cred.pid, cfg->hook_daemon_user, (long)daemon_uid);
		refuse_early(fd, EPERM, "permission denied");
		return 1;
	}
	/* 3. The request, and of its environment only the host and versions. */
	r = read_request(fd, &name, &req_env, &error);
	if (r == 1 || r == 0)
		r = hook_request_client_env(req_env, &client, &ignored, &error);
	if (r < 0) {
		log_warnx("request from pid %ld uid %ld refused: %s", (long)cred.pid, (long)cred.uid,
			  error ? error : strerror(-r));
		send_error(fd, -r, error ? error : strerror(-r));
		return 1;
	}
	path = config_hook_path(cfg, name);
	if (!path || !*path) {
		log_warnx("request from pid %ld uid %ld: no %s hook configured in '%s'", (long)cred.pid,
			  (long)cred.uid, name, config_path);
		send_error(fd, ENOENT, "hook not configured in the runner's config file");
		return 1;
	}
	buf_reset(&why);
	if ((r = trust_path(path, &why)) < 0) {
		log_warnx("refusing to run the %s hook: %s", name, buf_str(&why));
		send_error(fd, EPERM, "the hook is not root's alone (see the hook runner's journal)");
		return 1;
	}
	if ((r = build_env(cfg, client, &env)) < 0) {
		log_warnx("cannot build the hook's environment from '%s': %s", config_path,
			  r == -EINVAL ? "a value with a newline" : strerror(-r));
		send_error(fd, -r, "cannot build the hook's environment");
		return 1;
	}
	log_fields(LOG_INFO, env_get(env, "ORCHESTRATE_VERSION"), name,
		   "request from pid %ld uid %ld: hook '%s' (%s)%s", (long)cred.pid, (long)cred.uid,
		   name, path, ignored ? "; the client's paths, endpoints and prefix ignored" : "");

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (r = sd_event_new(&run.event)) < 0) {
		send_error(fd, ENOMEM, "cannot set up the event loop");
		return 1;
	}
	/* Its own bound: the daemon's timeout, with its SIGTERM grace, comes
	 * first; this one holds when the daemon does not end the run. */
	r = hook_spawn(run.event, name, path, env,
		       cfg->hook_timeout + (long)(HOOK_KILL_GRACE_USEC / 1000000ULL),
		       env_get(env, "ORCHESTRATE_VERSION"), on_done, &run, &run.hook);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf m = BUF_INIT;
		(void)buf_printf(&m, "cannot run %s hook '%s': %s", name, path, strerror(-r));
		log_warnx("%s", buf_str(&m));
		send_error(fd, -r, buf_str(&m));
		sd_event_unref(run.event);
		return 1;
	}
	hook_set_output(run.hook, on_output);
	/* From here on nothing blocks on the client: frames are queued. */
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		run_lost(&run);
	if (!run.gone &&
	    (r = sd_event_add_io(run.event, &run.io, fd, EPOLLIN | EPOLLRDHUP, on_socket, &run)) < 0)
		run_lost(&run);
	{
		char pid[32];
		int n = snprintf(pid, sizeof(pid), "%ld", (long)hook_pid(run.hook));
		run_queue(&run, HOOK_FRAME_STARTED, pid, (size_t)n);
	}
	(void)sd_event_add_signal(run.event, &run.term, SIGTERM, on_term, &run);
	r = sd_event_loop(run.event);
	if (r < 0)
		log_warnx("event loop failed: %s", strerror(-r));
	run.hook = hook_free(run.hook);
	sd_event_source_disable_unref(run.io);
	sd_event_source_disable_unref(run.term);
	sd_event_source_disable_unref(run.flush);
	buf_release(&run.in);
	buf_release(&run.out);
	sd_event_unref(run.event);
	return run.exit;
}

/* --- --listen ------------------------------------------------------------------ */

static volatile sig_atomic_t listen_stop;
static void on_listen_signal(int sig) { listen_stop = 1; }
static void on_listen_child(int sig) { }

/* Binds path, replacing a socket left there (a runner that died) but never
 * any other file; mode 0660, group of hooks.daemon_user when it exists. */
static int listen_bind(const char *path, const char *config_path)
{
	_cleanup_(config_freep) struct config *cfg = NULL;
	_cleanup_(freep) char *error = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	uid_t uid;
	gid_t gid = 0;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		fatalx("--listen '%s': path too long", path);
	r = config_load(config_path, false, &cfg, &error);
	if (r < 0)
		fatalx("%s", error ? error : strerror(-r));
	if (daemon_user(cfg, &uid, &gid) < 0) {
		log_warnx("hooks.daemon_user '%s' does not exist: '%s' is for root alone",
			  cfg->hook_daemon_user, path);
		gid = 0;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			fatalx("--listen '%s': exists and is not a socket, refusing to replace it", path);
		if (unlink(path) < 0)
			fatal("--listen '%s': cannot remove the old socket", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket");
	mode_t old = umask(0177);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fatal("bind '%s'", path);
	umask(old);
	if (gid != 0 && (chown(path, 0, gid) < 0 || chmod(path, 0660) < 0))
		fatal("--listen '%s': cannot give it to group %ld", path, (long)gid);
	if (listen(fd, 16) < 0)
		fatal("listen '%s'", path);
	return fd;
}

/* --listen: one forked child per connection, as systemd's Accept=yes, at
 * most RUNNER_LISTEN_MAX at once (MaxConnections=). */
static int listen_on(const char *path, const char *config_path)
{
	struct sigaction act = { .sa_handler = on_listen_signal };
	struct sigaction chld = { .sa_handler = on_listen_child, .sa_flags = SA_NOCLDSTOP };
	unsigned children = 0;
	int fd = listen_bind(path, config_path);

	/* No SA_RESTART: a signal ends accept() with EINTR, and the loop reaps. */
	sigaction(SIGCHLD, &chld, NULL);
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	log_info("listening on '%s'", path);
	while (!listen_stop) {
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		while (children > 0 && waitpid(-1, NULL, WNOHANG) > 0)
			children--;
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fatal("accept '%s'", path);
		}
		if (children >= RUNNER_LISTEN_MAX) {
			log_warnx("%u hook runs at once already, refusing a connection", children);
			send_error(c, EBUSY, "too many hook runs at once");
			close(c);
			continue;
		}
		pid_t pid = fork();
		if (pid == 0) {
			close(fd);
			signal(SIGCHLD, SIG_DFL);
			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			_exit(serve(c, config_path));
		}
		if (pid < 0)
			log_warn("fork");
		else
			children++;
		close(c);
	}
	(void)unlink(path);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "listen", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = CONFIG_DEFAULT_PATH, *listen_path = NULL;
	int c, n;

	log_init("orchestrate-hook-runner", LOG_TO_AUTO);
	while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config_path = optarg; break;
		case 'l': listen_path = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("orchestrate-hook-runner %s\n", ORCHESTRATE_VERSION); return 0;
		default: usage(stderr); return 64;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "orchestrate-hook-runner: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 64;
	}
	/* What the trust check walks from "/" (trust_path()). */
	if (config_path[0] != '/') {
		fprintf(stderr, "orchestrate-hook-runner: --config '%s': not an absolute path\n",
			config_path);
		return 64;
	}
	/* A closed socket is an error code, not a death. */
	signal(SIGPIPE, SIG_IGN);
	if (listen_path)
		return listen_on(listen_path, config_path);
	n = sd_listen_fds(true);
	if (n != 1) {
		fprintf(stderr, "orchestrate-hook-runner: expected one connection from "
				"orchestrate-hook.socket (got %d); see orchestrated(8)\n", n < 0 ? 0 : n);
		return 64;
	}
	return serve(SD_LISTEN_FDS_START, config_path);
}
