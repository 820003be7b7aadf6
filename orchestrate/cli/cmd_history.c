/*
 * cmd_history.c — history: a host's last runs (history/HOST), or every
 * host's runs of one version.
 *
 *   history HOST          one read of history/HOST
 *   history --version V   one range over history/
 *
 * Each host's daemon keeps its last runs (FLEET_HISTORY_MAX) in its own key
 * and rewrites it in the txn that ends each run; this command only reads.
 * What it prints comes from etcd, where anyone with write access may have
 * put anything: the codec keeps only plausible runs, and the error lines go
 * through render_sanitize().
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "cli.h"
#include "fleet/fleet.h"
#include "output/render.h"

static const char *arg_history_version;

static int history_version(struct cli *cli, struct fleet *f, const char *version)
{
	struct host_run *runs = NULL;
	size_t n = 0;
	int r;

	r = fleet_history_version(f, version, &runs, &n);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the run history");
	r = cli->opt->json ? render_json_history_version(stdout, version, runs, n)
			   : render_history_version(stdout, version, runs, n);
	host_runs_free(runs, n);
	if ((r = cli_output(r)))
		return r;
	return n > 0 ? 0 : 1;
}

static int cmd_history(struct cli *cli, int argc, char **argv)
{
	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	struct fleet *f;
	int r;

	if ((argc == 0) == !arg_history_version)
		return cli_error(EXIT_USAGE, "'history' needs HOST or --version V (not both); "
				 "usage: orchestrate %s", cli->cmd->synopsis);
	if (arg_history_version) {
		if ((r = cli_check_name("version", arg_history_version)))
			return r;
		if ((r = cli_fleet(cli, &f)))
			return r;
		return history_version(cli, f, arg_history_version);
	}
	if ((r = cli_check_name("host", argv[0])))
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_history_get(f, argv[0], &h);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the run history");
	if (r == 0 && !cli->opt->json)
		return cli_error(1, "no run history for host '%s'", argv[0]);
	if (cli->opt->json)
		r = cli_output(render_json_history(stdout, argv[0], &h));
	else
		r = cli_output(render_history(stdout, argv[0], &h));
	if (r)
		return r;
	return h.n > 0 ? 0 : 1;
}

static const struct cli_option history_options[] = {
	CLI_STRING("version", "V", &arg_history_version,
		   "every host's runs of V (one range over the history keys)"),
	CLI_OPTIONS_END,
};

const struct command command_history = {
	.name = "history", .fn = cmd_history, .max_args = 1, .group = G_HUMANS,
	.options = history_options,
	.synopsis = "history HOST | history --version V",
	.description = "a host's last runs, newest first: when, version, result (success,\n"
		       "failed, validation, deadline, interrupted), how long, attempt, first\n"
		       "error line; or with --version, every host's runs of V.  Exit 1 when\n"
		       "there is none",
};
