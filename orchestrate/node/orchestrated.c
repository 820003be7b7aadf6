/*
 * orchestrated.c — main() of the node daemon (orchestrated(8)): argv,
 * --check-config, --once, the signals and the one sd-event loop.
 *
 * Signals are blocked before anything else so that none is delivered the old
 * way; sd-event then takes SIGTERM, SIGINT and SIGHUP through signalfd, and
 * SIGCHLD (blocked too) through its child sources, which reap the hooks.  The
 * watchdog is sd-event's own: when the unit sets WatchdogSec=, the loop sends
 * WATCHDOG=1 while it turns, so a stuck loop is restarted by systemd.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "base/cleanup.h"
#include "config/config.h"
#include "hook/hook.h"
#include "base/log.h"
#include "node/node.h"
#include "config/options.h"
#include "base/version.h"

enum {
	OPT_ONCE = 0x200,
	OPT_CHECK_CONFIG,
	OPT_HOOK_RUNNER,
};

static const struct option own_options[] = {
	{ "once", no_argument, NULL, OPT_ONCE },
	{ "check-config", no_argument, NULL, OPT_CHECK_CONFIG },
	{ "hook-runner", required_argument, NULL, OPT_HOOK_RUNNER },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: orchestrated [--once] [--check-config] [--config FILE] [--hook-runner SOCKET]\n"
		"                    [GLOBAL OPTIONS]\n"
		"\n"
		"  --once            run one cycle and exit: 0 at the desired version, 1 not,\n"
		"                    69 when etcd stays unreachable after 3 tries\n"
		"  --check-config    check the configuration, print \"configuration OK\" and exit\n"
		"  --config FILE     configuration file (default " CONFIG_DEFAULT_PATH ")\n"
		"  --hook-runner SOCKET  run the hooks through the hook runner listening on\n"
		"                    SOCKET (default: hooks.runner, or start them directly)\n"
		"  --etcd URLS, --prefix P, --hostname H, --timeout S, --cacert/--cert/--key FILE,\n"
		"  --user NAME, --password-file FILE, --local-version-file FILE, -v, -h, --version\n"
		"\n"
		"See orchestrated(8).\n");
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct node *n = userdata;

	switch (si->ssi_signo) {
	case SIGHUP:
		(void)sd_notify(false, "RELOADING=1");
		log_info("SIGHUP: reloading the configuration");
		(void)node_reload(n);
		(void)sd_notify(false, "READY=1");
		break;
	default:
		log_info("%s: stopping", strsignal((int)si->ssi_signo));
		node_stop(n);
		break;
	}
	return 0;
}

/*
 * --check-config's warnings about the hooks: a path the daemon would fail to
 * run at its first config run.  Warnings, not errors: the config is valid,
 * and the Puppet module installs the hooks after the file in one run.
 */
static void check_hooks(const struct config *cfg)
{
#define HOOK_ENTRY(kind) { #kind, cfg->hook_##kind },
	const struct { const char *name, *path; } hooks[] = { CONFIG_HOOK_KINDS(HOOK_ENTRY) };
#undef HOOK_ENTRY
	for (size_t i = 0; i < sizeof(hooks) / sizeof(hooks[0]); i++) {
		struct stat st;
		const char *path = hooks[i].path;
		if (!path || !*path)
			continue;
		if (stat(path, &st) < 0)
			fprintf(stderr, "orchestrated: warning: %s hook '%s': %s\n", hooks[i].name,
				path, strerror(errno));
		else if (!S_ISREG(st.st_mode))
			fprintf(stderr, "orchestrated: warning: %s hook '%s' is not a regular file\n",
				hooks[i].name, path);
		else if (access(path, X_OK) < 0)
			fprintf(stderr, "orchestrated: warning: %s hook '%s' is not executable\n",
				hooks[i].name, path);
	}
}

int main(int argc, char **argv)
{
	_cleanup_(freep) struct option *longopts = options_merge_long(own_options, options_global_long);
	_cleanup_(options_resolved_releasep) struct options_resolved res = { 0 };
	_cleanup_(freep) char *error = NULL;
	_cleanup_(node_freep) struct node *node = NULL;
	sd_event *event = NULL;
	struct global_options global;
	bool once = false, check = false;
	const char *runner = NULL;
	sigset_t mask;
	int c, r;

	log_init("orchestrated", LOG_TO_AUTO);
	if (!longopts) {
		fprintf(stderr, "orchestrated: out of memory\n");
		return 1;
	}
	global_options_init(&global);
	while ((c = getopt_long(argc, argv, OPTIONS_GLOBAL_SHORT, longopts, NULL)) != -1) {
		switch (c) {
		case OPT_ONCE:
			once = true;
			break;
		case OPT_CHECK_CONFIG:
			check = true;
			break;
		case OPT_HOOK_RUNNER:
			runner = optarg;
			break;
		case '?':
			usage(stderr);
			return EXIT_USAGE;
		default:
			r = options_handle(&global, c, optarg, &error);
			if (r < 0) {
				fprintf(stderr, "orchestrated: %s\n", error ? error : strerror(-r));
				return EXIT_USAGE;
			}
			if (r == 0) {
				usage(stderr);
				return EXIT_USAGE;
			}
		}
	}
	if (global.help) {
		usage(stdout);
		return 0;
	}
	if (global.version) {
		printf("orchestrated %s\n", ORCHESTRATE_VERSION);
		return 0;
	}
	if (optind < argc) {
		fprintf(stderr, "orchestrated: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	log_set_verbose(global.verbose);

	r = options_resolve(&global, &res, &error);
	if (r < 0) {
		fprintf(stderr, "orchestrated: %s\n", error ? error : strerror(-r));
		return EXIT_USAGE;
	}
	/* Read at start only: the unit's sandbox and the runner go together, so
	 * a reload does not switch between them (orchestrated(8)). */
	if (!runner)
		runner = res.config->hook_runner;
	r = hook_use_runner(runner);
	if (r < 0) {
		fprintf(stderr, "orchestrated: hook runner '%s': %s\n", runner, strerror(-r));
		return EXIT_USAGE;
	}
	if (check) {
		check_hooks(res.config);
		printf("configuration OK\n");
		return 0;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		fatal("sigprocmask");
	/* A hook's closed pipe or a dropped etcd stream is an error code, not a
	 * death. */
	signal(SIGPIPE, SIG_IGN);

	r = sd_event_default(&event);
	if (r < 0)
		fatalx("cannot create the event loop: %s", strerror(-r));
	r = node_new(event, &res, &global, once, &node);
	if (r < 0)
		fatalx("cannot set up the node: %s", strerror(-r));
	if ((r = sd_event_add_signal(event, NULL, SIGTERM, on_signal, node)) < 0 ||
	    (r = sd_event_add_signal(event, NULL, SIGINT, on_signal, node)) < 0 ||
	    (!once && (r = sd_event_add_signal(event, NULL, SIGHUP, on_signal, node)) < 0) ||
	    (r = sd_event_set_watchdog(event, true)) < 0)
		fatalx("cannot set up the event loop: %s", strerror(-r));
	r = node_start(node);
	if (r < 0)
		fatalx("cannot start: %s", strerror(-r));

	r = sd_event_loop(event);
	if (r < 0) {
		log_warnx("event loop failed: %s", strerror(-r));
		r = 1;
	} else {
		r = node_exit_code(node);
	}
	node = node_free(node);
	sd_event_unref(event);
	return r;
}
