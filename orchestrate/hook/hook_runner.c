/*
 * hook_runner.c — main() of orchestrate-hook-runner, the root side of the
 * daemon's hooks (orchestrated(8) "HOOK RUNNER", hook_proto.h).
 *
 * The daemon runs in a tight sandbox without capabilities; the hooks (Puppet
 * as root) must not.  So the daemon does not start them: it connects to
 * orchestrate-hook.socket, and systemd starts one orchestrate-hook@.service
 * per connection (Accept=yes) running this program with the connection as
 * its one socket (sd_listen_fds).  It reads one request, resolves the hook's
 * path from its own config file (never from the request: whoever can connect
 * would otherwise choose what root runs), runs it with hook.c — its own
 * process group, stdin /dev/null, stdout and stderr captured — and streams
 * the output back, then the exit status.  A kill frame signals the hook's
 * group; the daemon going away (its timeout, its SIGTERM, a crash) is a
 * SIGTERM with the usual SIGKILL grace, so no run outlives its daemon.  The
 * daemon keeps the timeout: the runner has none of its own.
 *
 * --listen PATH serves without systemd, for the tests and for a machine
 * without it: it binds PATH (mode 0600) and forks one child per connection,
 * as systemd would start one instance.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
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
#include "config/config.h"
#include "hook/hook.h"
#include "hook/hook_proto.h"
#include "base/log.h"
#include "base/strv.h"
#include "base/version.h"

/* How long a client may take to send its request. */
#define RUNNER_REQUEST_MSEC 10000

struct run {
	int fd;			/* the connection */
	sd_event *event;
	sd_event_source *io, *term;
	struct hook *hook;
	struct buf in;		/* bytes of a partial K frame */
	bool gone;		/* the daemon closed or the socket broke */
	int exit;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: orchestrate-hook-runner [--config FILE] [--listen PATH]\n"
		"\n"
		"  --config FILE     configuration file (default " CONFIG_DEFAULT_PATH ")\n"
		"  --listen PATH     serve on PATH, one child per connection (without systemd)\n"
		"\n"
		"Started by orchestrate-hook.socket; see orchestrated(8).\n");
}

static void run_lost(struct run *run)
{
	if (run->gone)
		return;
	run->gone = true;
	run->io = sd_event_source_disable_unref(run->io);
	if (run->hook) {
		log_fields(LOG_WARNING, NULL, hook_name(run->hook),
			   "hook '%s': the daemon went away, stopping the hook", hook_name(run->hook));
		hook_kill(run->hook, SIGTERM);
	}
}

static void run_send(struct run *run, const struct buf *f)
{
	if (!run->gone && hook_proto_send(run->fd, f->data, f->len) < 0)
		run_lost(run);
}

static void on_output(struct hook *h, const char *data, size_t n, void *userdata)
{
	struct run *run = userdata;
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	if (hook_frame_add(&f, HOOK_FRAME_OUTPUT, data, n) == 0)
		run_send(run, &f);
}

static void on_done(struct hook *h, const struct hook_result *r, void *userdata)
{
	struct run *run = userdata;
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	_cleanup_(freep) char *what = hook_result_describe(r);

	log_fields(r->exit_code == 0 ? LOG_INFO : LOG_WARNING, NULL, hook_name(h), "hook '%s' %s",
		   hook_name(h), what ? what : "ended");
	if ((r->signal ? hook_frame_addf(&f, HOOK_FRAME_EXIT, "killed %d", r->signal)
		       : hook_frame_addf(&f, HOOK_FRAME_EXIT, "exited %d", r->exit_code & 0xff)) == 0)
		run_send(run, &f);
	run->exit = 0;
	(void)sd_event_exit(run->event, 0);
}

/* K frames from the daemon; EOF or garbage is the daemon going away. */
static int on_socket(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct run *run = userdata;
	char chunk[256];

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
	hook_kill(run->hook, SIGTERM);
	return 0;
}

/* Reads the request, at most RUNNER_REQUEST_MSEC for all of it. */
static int read_request(int fd, char **ret_name, char ***ret_env, char **ret_error)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	struct timespec ts;
	int64_t deadline;
	size_t used;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + RUNNER_REQUEST_MSEC;
	for (;;) {
		char chunk[4096];
		int r = hook_request_parse(b.data, b.len, ret_name, ret_env, &used, ret_error);
		if (r != 0)
			return r < 0 ? r : (used == b.len ? 0 : -EPROTO);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t left = deadline - ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (left <= 0 || (r = poll(&p, 1, (int)left)) == 0)
			return -ETIMEDOUT;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if ((r = buf_add(&b, chunk, (size_t)n)) < 0)
			return r;
	}
}

static void send_error(int fd, int code, const char *msg)
{
	_cleanup_(buf_releasep) struct buf f = BUF_INIT;
	if (hook_frame_addf(&f, HOOK_FRAME_ERROR, "%d %s", code, msg) == 0)
		(void)hook_proto_send(fd, f.data, f.len);
}

static const char *hook_path(const struct config *cfg, const char *name)
{
	if (strcmp(name, "upgrade") == 0)
		return cfg->hook_upgrade;
	if (strcmp(name, "config") == 0)
		return cfg->hook_config;
	if (strcmp(name, "validate") == 0)
		return cfg->hook_validate;
	return cfg->hook_services;
}

static const char *env_get(char *const *env, const char *key)
{
	size_t k = strlen(key);
	for (size_t i = 0; env && env[i]; i++)
		if (strncmp(env[i], key, k) == 0 && env[i][k] == '=')
			return env[i] + k + 1;
	return NULL;
}

/* Serves one connection: returns the process's exit code. */
static int serve(int fd, const char *config_path)
{
	_cleanup_(config_freep) struct config *cfg = NULL;
	_cleanup_(strv_freep) char **req_env = NULL, **env = NULL;
	_cleanup_(freep) char *name = NULL, *error = NULL;
	struct run run = { .fd = fd, .exit = 1 };
	struct ucred cred = { 0 };
	socklen_t cl = sizeof(cred);
	const char *path;
	size_t count = 0;
	sigset_t mask;
	int r;

	(void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl);
	r = config_load(config_path, true, &cfg, &error);
	if (r < 0) {
		log_warnx("%s", error ? error : strerror(-r));
		send_error(fd, EINVAL, error ? error : "the runner's config file is invalid");
		return 1;
	}
	r = read_request(fd, &name, &req_env, &error);
	if (r < 0) {
		log_warnx("request from pid %ld uid %ld refused: %s", (long)cred.pid, (long)cred.uid,
			  error ? error : strerror(-r));
		send_error(fd, -r, error ? error : strerror(-r));
		return 1;
	}
	path = hook_path(cfg, name);
	if (!path || !*path) {
		log_warnx("request from pid %ld uid %ld: no %s hook configured in '%s'", (long)cred.pid,
			  (long)cred.uid, name, config_path);
		send_error(fd, ENOENT, "hook not configured in the runner's config file");
		return 1;
	}
	/* The environment of a hook the daemon starts itself (node_build_env). */
	if (strv_push(&env, &count, "PATH=/usr/sbin:/usr/bin:/sbin:/bin") < 0)
		return 1;
	for (size_t i = 0; req_env[i]; i++)
		if (strv_push(&env, &count, req_env[i]) < 0)
			return 1;
	log_fields(LOG_INFO, env_get(env, "ORCHESTRATE_VERSION"), name,
		   "request from pid %ld uid %ld: hook '%s' (%s)", (long)cred.pid, (long)cred.uid, name,
		   path);

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 || (r = sd_event_new(&run.event)) < 0) {
		send_error(fd, ENOMEM, "cannot set up the event loop");
		return 1;
	}
	r = hook_spawn(run.event, name, path, env, 0, env_get(env, "ORCHESTRATE_VERSION"), on_done,
		       &run, &run.hook);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf m = BUF_INIT;
		(void)buf_printf(&m, "cannot run %s hook '%s': %s", name, path, strerror(-r));
		log_warnx("%s", buf_str(&m));
		send_error(fd, -r, buf_str(&m));
		sd_event_unref(run.event);
		return 1;
	}
	hook_set_output(run.hook, on_output);
	{
		_cleanup_(buf_releasep) struct buf f = BUF_INIT;
		if (hook_frame_addf(&f, HOOK_FRAME_STARTED, "%ld", (long)hook_pid(run.hook)) == 0)
			run_send(&run, &f);
	}
	if (!run.gone &&
	    (r = sd_event_add_io(run.event, &run.io, fd, EPOLLIN | EPOLLRDHUP, on_socket, &run)) < 0)
		run_lost(&run);
	(void)sd_event_add_signal(run.event, &run.term, SIGTERM, on_term, &run);
	r = sd_event_loop(run.event);
	if (r < 0)
		log_warnx("event loop failed: %s", strerror(-r));
	run.hook = hook_free(run.hook);
	sd_event_source_disable_unref(run.io);
	sd_event_source_disable_unref(run.term);
	buf_release(&run.in);
	sd_event_unref(run.event);
	return run.exit;
}

static volatile sig_atomic_t listen_stop;
static void on_listen_signal(int sig) { listen_stop = 1; }

/* --listen: one forked child per connection, as systemd's Accept=yes. */
static int listen_on(const char *path, const char *config_path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sigaction act = { .sa_handler = on_listen_signal };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		fatalx("--listen '%s': path too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		fatal("socket");
	(void)unlink(path);
	mode_t old = umask(0077);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fatal("bind '%s'", path);
	umask(old);
	if (listen(fd, 16) < 0)
		fatal("listen '%s'", path);
	/* The children are reaped by the kernel; each child resets this. */
	signal(SIGCHLD, SIG_IGN);
	sigaction(SIGTERM, &act, NULL);
	sigaction(SIGINT, &act, NULL);
	log_info("listening on '%s'", path);
	while (!listen_stop) {
		int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fatal("accept '%s'", path);
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
