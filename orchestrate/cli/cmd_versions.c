/*
 * cmd_versions.c — the commands about versions: the desired version
 * (trigger_update, rollback, current_version), this host's own version
 * (local_version, pending_update, update_own_info) and where the fleet is
 * (running_versions, hosts_at_version, verify_hosts, check_single_version).
 *
 * Each command validates its names before it asks for the fleet, so an
 * invalid name never reaches a request, and leaves keys and request bodies to
 * schema.c and fleet.c, output to output/.  The CI gates (verify_hosts,
 * check_single_version) can block with --wait on fleet.h's watch-based waits,
 * never a polling loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "cli.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "fleet/fleet.h"
#include "fleet/fleet_lease.h"
#include "config/local.h"
#include "base/log.h"
#include "output/render.h"
#include "fleet/schema.h"
#include "base/strv.h"

/* update_own_info's default --interval: the seed's five-minute cron period,
 * which gives the same 610 s lease as the daemon's --once runs. */
#define DEFAULT_INTERVAL 300

/* The options of this file's commands (one command runs per process). */
static const char *arg_if_current;
static const char *arg_version;
static long arg_interval = DEFAULT_INTERVAL;
static double arg_wait = -1;

/* --wait SECONDS of the CI gates; without it they look once. */
static uint64_t wait_deadline(void)
{
	return arg_wait < 0 ? CLOCK_DEADLINE_NOW : clock_deadline_ms(arg_wait);
}

/* The progress line of a wait counts failed and waiting hosts and the halt
 * when someone sees it: a gate that waits, on a terminal.  Scripts and a look
 * without --wait read running_version/ alone, as before. */
static unsigned wait_flags(void)
{
	return arg_wait >= 0 && cli_progress_on_terminal() ? FLEET_WAIT_STATES : 0;
}

/*
 * A read of a version that gave no version: the gateway's reply made no sense
 * (-EPROTO, etcd's words say which), or etcd holds something that is not a
 * version (-EBADMSG).  Both are errors, never an answer: neither may look like
 * "none set" (exit 1) to a script.
 */
static int version_read_error(struct cli *cli, int r, const char *what)
{
	if (r == -EBADMSG)
		return cli_error(EXIT_UNAVAILABLE, "%s: etcd holds no valid version there", what);
	return cli_fleet_error(cli, r, what);
}

/* --- trigger_update ---------------------------------------------------------------- */

static int cmd_trigger_update(struct cli *cli, int argc, char **argv)
{
	const char *version = argv[0], *old = arg_if_current;
	struct fleet *f;
	int r;

	if ((r = cli_check_name("version", version)) ||
	    (old && (r = cli_check_name("version", old))) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_trigger_update(f, version, old);
	if (r == 1)
		return cli_error(1, "current_version is not '%s', not changed", old);
	if (r == -EAGAIN)
		return cli_error(EXIT_TEMPFAIL, "current_version kept changing, not changed; "
				 "try again");
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot set current_version");
	log_debug("current_version set to '%s'", version);
	return 0;
}

static const struct cli_option trigger_update_options[] = {
	CLI_STRING("if-current", "OLD", &arg_if_current,
		   "only if current_version is still OLD (compare-and-swap);\n"
		   "exit 1 when it is not"),
	CLI_OPTIONS_END,
};

const struct command command_trigger_update = {
	.name = "trigger_update", .fn = cmd_trigger_update, .min_args = 1, .max_args = 1,
	.group = G_OPERATORS, .options = trigger_update_options, .needs = "a VERSION",
	.synopsis = "trigger_update VERSION [--if-current OLD]",
	.description = "set the desired version (and previous_version) in one transaction",
};

/* --- rollback ---------------------------------------------------------------------- */

static int cmd_rollback(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_rollback(f, &version);
	if (r == 1)
		return cli_error(1, "nothing to roll back to: no previous_version, "
				 "or it is the current one");
	if (r == -EAGAIN)
		return cli_error(EXIT_TEMPFAIL, "current_version changed meanwhile, "
				 "not rolled back");
	if (r < 0)
		return version_read_error(cli, r, "cannot roll back");
	printf("rolled back to %s\n", version);
	return 0;
}

const struct command command_rollback = {
	.name = "rollback", .fn = cmd_rollback, .group = G_OPERATORS,
	.synopsis = "rollback",
	.description = "set the desired version back to previous_version; exit 1 when there is none",
};

/* --- current_version ---------------------------------------------------------------- */

static int cmd_current_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_current_version(f, &version, NULL);
	if (r < 0)
		return version_read_error(cli, r, "cannot read current_version");
	if (cli->opt->json && (r = cli_output(render_json_version(stdout, "current_version",
								 version))))
		return r;
	if (!cli->opt->json && version)
		printf("%s\n", version);
	if (!version)
		log_debug("no current_version set");
	return version ? 0 : 1;
}

const struct command command_current_version = {
	.name = "current_version", .fn = cmd_current_version, .group = G_OPERATORS,
	.synopsis = "current_version",
	.description = "print the desired version; exit 1 when none is set",
};

/* --- local_version ------------------------------------------------------------------ */

static int cmd_local_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	const char *path = cli->opt->local_version_file;
	int r;

	if (argc == 1) {
		if ((r = cli_check_name("version", argv[0])))
			return r;
		r = local_version_write(path, argv[0]);
		if (r < 0)
			return cli_error(EXIT_IOERR, "cannot write local version file '%s': %s",
					 path, strerror(-r));
		log_debug("local version file '%s' %s", path, r ? "written" : "unchanged");
		return 0;
	}
	r = cli_local_version(cli, &version);
	if (r > 1)
		return r;
	if (cli->opt->json)
		return cli_output(render_json_version(stdout, "local_version", version));
	if (version)
		printf("%s\n", version);
	else
		log_debug("no local version in '%s'", path);
	return 0;
}

const struct command command_local_version = {
	.name = "local_version", .fn = cmd_local_version, .max_args = 1, .group = G_NODES,
	.synopsis = "local_version [VERSION]",
	.description = "print this host's local version file, or set it to VERSION",
};

/* --- pending_update ------------------------------------------------------------------ */

/*
 * pending_update's table (orchestrate(1) "EXIT STATUS"): 0 update pending; 1 up to date; 2 etcd
 * unreachable but the local version is known; 3 no desired version set, or etcd
 * unreachable and no local version.  An authentication failure is not
 * "unreachable": it exits 77 so that a misconfigured node is noticed.
 */
static int cmd_pending_update(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	_cleanup_(freep) char *desired = NULL;
	_cleanup_(buf_releasep) struct buf line = BUF_INIT;
	bool reachable = true;
	struct fleet *f;
	int r, status;

	r = cli_local_version(cli, &local);
	if (r > 1)
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_current_version(f, &desired, NULL);
	if (r == -EACCES)
		return cli_fleet_error(cli, r, "cannot read current_version");
	if (r == -ENOMEM)
		return cli_error(1, "out of memory");
	if (r < 0) {
		/* Unreachable, or an answer that is not a version: either way the
		 * desired version is unknown, which is never a reason to run. */
		const char *why = "etcd unreachable";
		if (r == -EBADMSG || r == -EPROTO) {
			cli_warn("current_version does not hold a valid version");
			why = "desired version unreadable";
		} else {
			log_debug("%s", fleet_last_error(f));
		}
		reachable = false;
		desired = NULL;
		status = local ? 2 : 3;
		r = local ? buf_printf(&line, "%s; local version %s", why, local)
			  : buf_printf(&line, "%s; no local version", why);
	} else if (!desired) {
		status = 3;
		r = buf_printf(&line, "no desired version set");
	} else if (local && strcmp(local, desired) == 0) {
		status = 1;
		r = buf_printf(&line, "up to date at %s", desired);
	} else {
		status = 0;
		r = buf_printf(&line, "update pending: local %s, desired %s",
			       local ? local : "none", desired);
	}
	if (r < 0)
		return cli_error(1, "out of memory");

	if (cli->opt->json)
		r = cli_output(render_json_pending(stdout, local, desired, status == 0, reachable,
						   buf_str(&line)));
	else
		printf("%s\n", buf_str(&line));
	return r ? r : status;
}

const struct command command_pending_update = {
	.name = "pending_update", .fn = cmd_pending_update, .group = G_NODES,
	.synopsis = "pending_update",
	.description = "compare the local and the desired version; exit 0 update pending, 1 up to date,\n"
		       "2 etcd unreachable (local version known), 3 no desired version or nothing known",
};

/* --- update_own_info ------------------------------------------------------------------ */

static int cmd_update_own_info(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	const char *version = arg_version;
	int64_t ttl = 2 * (int64_t)arg_interval + 10, lease = 0;
	struct fleet *f;
	int r;

	if (version) {
		if ((r = cli_check_name("version", version)))
			return r;
	} else {
		r = cli_local_version(cli, &local);
		if (r > 1)
			return r;
		if (!local) {
			log_info("no local version in '%s', nothing to publish",
				 cli->opt->local_version_file);
			return 0;
		}
		version = local;
	}
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_lease_grant(f, ttl, &lease);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot grant a lease");
	r = fleet_set_running_version(f, cli->opt->hostname, version, lease);
	if (r < 0) {
		int status = cli_fleet_error(cli, r, "cannot publish the running version");
		/* Best effort: an unused lease would only expire later. */
		if (fleet_lease_revoke(f, lease) < 0)
			log_debug("cannot revoke lease %lld, it expires by itself: %s",
				  (long long)lease, fleet_last_error(f));
		return status;
	}
	log_debug("'%s' published at '%s' for %lld s", cli->opt->hostname, version,
		  (long long)ttl);
	return 0;
}

static const struct cli_option update_own_info_options[] = {
	CLI_STRING("version", "V", &arg_version,
		   "the version to publish (default: the local version)"),
	CLI_LONG("interval", "N", &arg_interval, 1, 10000000,
		 "seconds between runs (default 300: lease 610 s)"),
	CLI_OPTIONS_END,
};

const struct command command_update_own_info = {
	.name = "update_own_info", .fn = cmd_update_own_info, .group = G_NODES,
	.options = update_own_info_options,
	.synopsis = "update_own_info [--version V] [--interval N]",
	.description = "publish this host under running_version/V with a lease of 2N+10 seconds",
};

/* --- running_versions, hosts_at_version ------------------------------------------------- */

static int cmd_running_versions(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **versions = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_running_versions(f, &versions);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read running versions");
	if (cli->opt->json)
		return cli_output(render_json_names(stdout, NULL, "running_versions", versions));
	return cli_output(render_lines(versions, stdout));
}

const struct command command_running_versions = {
	.name = "running_versions", .fn = cmd_running_versions, .group = G_CI,
	.synopsis = "running_versions",
	.description = "print every version some host runs, one a line",
};

static int cmd_hosts_at_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_check_name("version", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_hosts_at_version(f, argv[0], &hosts, NULL);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read hosts at version");
	if (cli->opt->json)
		return cli_output(render_json_names(stdout, argv[0], "hosts", hosts));
	return cli_output(render_lines(hosts, stdout));
}

const struct command command_hosts_at_version = {
	.name = "hosts_at_version", .fn = cmd_hosts_at_version, .min_args = 1, .max_args = 1,
	.group = G_CI, .needs = "a VERSION",
	.synopsis = "hosts_at_version VERSION",
	.description = "print the hosts running VERSION, one a line",
};

/* --- verify_hosts ------------------------------------------------------------------------ */

/* The hosts to check: the arguments, or one a line on stdin (the list-file
 * rule of strv_push_lines(): '#' comments, blank lines skipped). */
static int wanted_hosts(int argc, char **argv, char ***ret)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	size_t n = 0;
	int r;

	if (argc > 0) {
		for (int i = 0; i < argc; i++)
			if (strv_push(&hosts, &n, argv[i]) < 0)
				return cli_error(1, "out of memory");
	} else {
		_cleanup_(buf_releasep) struct buf text = BUF_INIT;
		r = fd_read_all(STDIN_FILENO, FILE_READ_MAX, &text);
		if (r == 0)
			r = strv_push_lines(&hosts, &n, text.data, text.len);
		if (r == -ENOMEM)
			return cli_error(1, "out of memory");
		if (r < 0)
			return cli_error(EXIT_USAGE, "cannot read hosts from standard input: %s",
					 strerror(-r));
	}
	for (size_t i = 0; i < n; i++)
		if ((r = cli_check_name("host", hosts[i])))
			return r;
	if (n == 0)
		return cli_error(EXIT_USAGE, "'verify_hosts' needs at least one HOST "
				 "(arguments or one a line on stdin)");
	*ret = TAKE_PTR(hosts);
	return 0;
}

static int cmd_verify_hosts(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	_cleanup_(strv_freep) char **missing = NULL;
	_cleanup_(freep) char *what = NULL;
	struct fleet *f;
	int r, answer;

	if ((r = cli_check_name("version", argv[0])) ||
	    (r = wanted_hosts(argc - 1, argv + 1, &hosts)) || (r = cli_fleet(cli, &f)))
		return r;
	if (asprintf(&what, "hosts at %s", argv[0]) < 0)
		return cli_error(1, "out of memory");
	answer = fleet_wait_hosts_at_version(f, argv[0], hosts, wait_deadline(), wait_flags(),
					     cli_progress, what, &missing);
	cli_progress_end();
	if (answer < 0)
		return cli_fleet_error(cli, answer, "cannot read hosts at version");
	if (answer == 0 && arg_wait >= 0) {
		size_t n = 0;
		while (missing[n])
			n++;
		cli_warn("timed out after %g s: %zu host%s missing", arg_wait, n,
			 n == 1 ? "" : "s");
	}
	if (cli->opt->json)
		r = cli_output(render_json_names(stdout, argv[0], "missing", missing));
	else
		r = cli_output(render_lines(missing, stdout));
	return r ? r : answer == 1 ? 0 : 1;
}

static const struct cli_option verify_hosts_options[] = {
	CLI_SECONDS("wait", &arg_wait,
		    "block on an etcd watch until all are at VERSION or time runs out"),
	CLI_OPTIONS_END,
};

const struct command command_verify_hosts = {
	.name = "verify_hosts", .fn = cmd_verify_hosts, .min_args = 1, .max_args = -1,
	.group = G_CI, .options = verify_hosts_options, .needs = "a VERSION",
	.synopsis = "verify_hosts VERSION [HOST ...] [--wait SECONDS]",
	.description = "print the hosts (arguments, or one a line on stdin) not at VERSION;\n"
		       "exit 0 when all are at VERSION, 1 otherwise",
};

/* --- check_single_version ------------------------------------------------------------------ */

static int cmd_check_single_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *what = NULL;
	struct fleet_version_count *counts = NULL;
	size_t n = 0;
	struct fleet *f;
	int r, answer;

	if ((r = cli_check_name("version", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	if (asprintf(&what, "hosts at %s", argv[0]) < 0)
		return cli_error(1, "out of memory");
	answer = fleet_wait_single_version(f, argv[0], wait_deadline(), wait_flags(),
					   cli_progress, what, &counts, &n);
	cli_progress_end();
	if (answer < 0)
		return cli_fleet_error(cli, answer, "cannot read running versions");
	if (answer == 0 && arg_wait >= 0) {
		size_t at = 0, other = 0;
		for (size_t i = 0; i < n; i++) {
			if (strcmp(counts[i].version, argv[0]) == 0)
				at += counts[i].hosts;
			else
				other += counts[i].hosts;
		}
		cli_warn("timed out after %g s: %zu host%s at %s, %zu host%s at other versions",
			 arg_wait, at, at == 1 ? "" : "s", argv[0], other, other == 1 ? "" : "s");
	}
	r = 0;
	if (cli->opt->json)
		r = cli_output(render_json_single_version(stdout, argv[0], answer == 1, counts, n));
	else if (cli->opt->verbose > 0)
		r = cli_output(render_version_counts(stdout, counts, n));
	fleet_version_counts_free(counts, n);
	return r ? r : answer == 1 ? 0 : 1;
}

static const struct cli_option check_single_version_options[] = {
	CLI_SECONDS("wait", &arg_wait, "block on an etcd watch until it holds or time runs out"),
	CLI_OPTIONS_END,
};

const struct command command_check_single_version = {
	.name = "check_single_version", .fn = cmd_check_single_version, .min_args = 1,
	.max_args = 1, .group = G_CI, .options = check_single_version_options,
	.needs = "a VERSION",
	.synopsis = "check_single_version VERSION [-v] [--wait SECONDS]",
	.description = "exit 0 when VERSION runs somewhere and no other version runs anywhere",
	.help = "  -v                 print every running version with its number of hosts\n",
};
