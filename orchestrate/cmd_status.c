/*
 * cmd_status.c — the commands about build states: a host reporting its own
 * (update_own_status), looking at its own (local_health), and looking at the
 * fleet (get_failures, status), plus ping.
 *
 * The fleet-wide commands read everything at one revision with
 * fleet_view_read() and leave the layout of the output to render.c.  status
 * --watch redraws when etcd reports a change under the prefix, from the
 * revision it drew: a watch (fleet_wait_change()), never a timer.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "fleet.h"
#include "log.h"
#include "render.h"
#include "schema.h"

static const char *arg_detail;
static bool arg_hosts;
static bool arg_watch;

/* --- update_own_status -------------------------------------------------------------- */

static bool is_integer(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* The exit_code stored with a state given by name. */
static int state_exit_code(enum status_state s)
{
	switch (s) {
	case STATE_FAILED: return 1;
	case STATE_PENDING: return -1;
	default: return 0;
	}
}

static int cmd_update_own_status(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	const char *type_name = argv[0], *result = argv[1];
	struct fleet *f;
	int type, exit_code, r;
	enum status_state state;

	type = status_type_from_name(type_name);
	if (type < 0)
		return cli_error(EXIT_USAGE, "invalid status type '%s': expected puppet, "
				 "validation or provisioned", type_name);
	state = status_from_result((enum status_type)type, result);
	if (state == STATE_INVALID)
		return cli_error(EXIT_USAGE, "invalid result '%s' for %s: expected an exit code "
				 "or a state name", result, type_name);
	if (is_integer(result)) {
		long n = strtol(result, NULL, 10);
		exit_code = n < -255 ? -255 : n > 255 ? 255 : (int)n;
	} else {
		exit_code = state_exit_code(state);
	}
	r = cli_local_version(cli, &local);
	if (r > 1)
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_set_status(f, cli->opt->hostname, (enum status_type)type, state, local,
			     exit_code, arg_detail);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot set the status");
	log_debug("'%s' %s: %s", cli->opt->hostname, type_name, status_state_name(state));
	return 0;
}

static const struct cli_option update_own_status_options[] = {
	CLI_STRING("detail", "TEXT", &arg_detail,
		   "stored with the state (at most 4 KiB, the tail is kept)"),
	CLI_OPTIONS_END,
};

const struct command command_update_own_status = {
	.name = "update_own_status", .fn = cmd_update_own_status, .min_args = 2, .max_args = 2,
	.group = G_NODES, .options = update_own_status_options, .needs = "a TYPE and a RESULT",
	.synopsis = "update_own_status TYPE RESULT [--detail TEXT]",
	.description = "set this host's state of TYPE (puppet, validation, provisioned) from RESULT,\n"
		       "an exit code or a state name",
};

/* --- get_failures ---------------------------------------------------------------------- */

static int cmd_get_failures(struct cli *cli, int argc, char **argv)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(fleet_failures_releasep) struct fleet_failures fl = { 0 };
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_view_read(f, &v);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	if ((r = fleet_view_failures(&v, &fl)) < 0)
		return cli_error(1, "out of memory");
	if (cli->opt->json)
		r = render_json_failures(stdout, &fl);
	else
		r = render_failures(stdout, &fl, arg_hosts);
	if ((r = cli_output(r)))
		return r;
	return fl.n_puppet + fl.n_validation + fl.n_unaccounted ? 1 : 0;
}

static const struct cli_option get_failures_options[] = {
	CLI_FLAG("hosts", &arg_hosts,
		 "list them, one \"failed puppet HOST\", \"failed validation HOST\"\n"
		 "or \"unaccounted HOST\" a line"),
	CLI_OPTIONS_END,
};

const struct command command_get_failures = {
	.name = "get_failures", .fn = cmd_get_failures, .group = G_CI,
	.options = get_failures_options,
	.synopsis = "get_failures [--hosts]",
	.description = "count hosts failed in puppet or validation, and unaccounted hosts;\n"
		       "exit 0 when there are none, 1 otherwise",
};

/* --- local_health ---------------------------------------------------------------------- */

static int cmd_local_health(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *puppet_detail = NULL;
	_cleanup_(freep) char *validation_detail = NULL;
	struct render_health h = { .host = cli->opt->hostname };
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_get_status(f, h.host, STATUS_PUPPET, &h.puppet, &puppet_detail);
	if (r >= 0)
		r = fleet_get_status(f, h.host, STATUS_VALIDATION, &h.validation,
				     &validation_detail);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read this host's status");
	h.puppet_detail = puppet_detail;
	h.validation_detail = validation_detail;
	if (cli->opt->json)
		r = render_json_health(stdout, &h);
	else
		r = render_health(stdout, &h, cli->opt->verbose > 0);
	if ((r = cli_output(r)))
		return r;
	return h.puppet == STATE_SUCCESS && h.validation == STATE_SUCCESS ? 0 : 1;
}

const struct command command_local_health = {
	.name = "local_health", .fn = cmd_local_health, .group = G_NODES,
	.synopsis = "local_health [-v]",
	.description = "print this host's puppet and validation states; exit 0 when both succeeded",
	.help = "  -v                 print the detail stored with each state too\n",
};

/* --- status ------------------------------------------------------------------------------ */

static int status_draw(struct cli *cli, struct fleet *f, bool tty, int64_t *ret_revision)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	int r = fleet_view_read(f, &v);

	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	if (arg_watch && tty)
		fputs("\033[H\033[2J", stdout);	/* home, clear screen */
	if (cli->opt->json)
		r = render_status_json(&v, stdout);
	else
		r = render_status_table(&v, stdout, tty && !getenv("NO_COLOR"), fleet_now());
	if (r >= 0 && fflush(stdout) != 0)
		r = -EIO;
	if ((r = cli_output(r)))
		return r;
	*ret_revision = v.revision;
	return 0;
}

static int cmd_status(struct cli *cli, int argc, char **argv)
{
	bool tty = isatty(STDOUT_FILENO);
	int64_t revision = 0;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)) || (r = status_draw(cli, f, tty, &revision)))
		return r;
	while (arg_watch) {
		/* A change (or a compacted revision): read everything again. */
		if ((r = fleet_wait_change(f, revision)) < 0)
			return cli_fleet_error(cli, r, "watch");
		if ((r = status_draw(cli, f, tty, &revision)))
			return r;
	}
	return 0;
}

static const struct cli_option status_options[] = {
	CLI_FLAG("watch", &arg_watch, "redraw on every change (an etcd watch, not a timer)"),
	CLI_OPTIONS_END,
};

const struct command command_status = {
	.name = "status", .fn = cmd_status, .group = G_HUMANS, .options = status_options,
	.synopsis = "status [--watch]",
	.description = "one row a host (version, puppet, validation, alive, group, age, and why it\n"
		       "failed, waits or is paused), hosts behind the desired version first; then totals",
};

/* --- ping -------------------------------------------------------------------------------- */

static int cmd_ping(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	_cleanup_(freep) char *endpoint = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_ping(f, &version, &endpoint);
	if (r < 0) {
		/* SPEC §3 gives ping its own code: 1, whatever failed */
		cli_fleet_error(cli, r, NULL);
		if (cli->opt->json && (r = cli_output(render_json_ping(stdout, NULL, NULL,
									fleet_last_error(f)))))
			return r;
		return 1;
	}
	if (cli->opt->json)
		return cli_output(render_json_ping(stdout, endpoint, version, NULL));
	return cli_output(render_ping(stdout, endpoint, version));
}

const struct command command_ping = {
	.name = "ping", .fn = cmd_ping, .group = G_HUMANS,
	.synopsis = "ping",
	.description = "check that etcd answers; print the member and its version; exit 1 when not",
};
