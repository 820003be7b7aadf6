/*
 * cmd_plan.c — plan: what a trigger of VERSION would do now.
 *
 *   plan [VERSION]   the fleet at one revision (as status reads it), rollout/
 *                    and history/ at the same revision; nothing is written
 *
 * The plan is computed in the fleet layer from the nodes' own model and
 * decision (fleet_plan.h); this command only chooses the version and prints.
 * Without VERSION it plans the rollout of current_version from now on: what
 * the fleet still has to do, with the failures and canaries it counted so far.
 */
#include <stdio.h>

#include "base/cleanup.h"
#include "base/exitcode.h"
#include "cli.h"
#include "fleet/fleet_plan.h"
#include "output/render.h"

static int cmd_plan(struct cli *cli, int argc, char **argv)
{
	_cleanup_(fleet_plan_releasep) struct fleet_plan p = { 0 };
	const char *version = argc > 0 ? argv[0] : NULL;
	struct fleet *f;
	int r;

	if (version && (r = cli_check_name("version", version)))
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_plan_read(f, version, &p);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	if (!p.version)
		return cli_error(1, "no VERSION given and no current_version set: nothing to plan");
	return cli_output(cli->opt->json ? render_json_plan(stdout, &p) : render_plan(stdout, &p));
}

const struct command command_plan = {
	.name = "plan", .fn = cmd_plan, .max_args = 1, .group = G_HUMANS,
	.synopsis = "plan [VERSION] [--json]",
	.description = "what a trigger of VERSION would do now, from the nodes' own rollout\n"
		       "model: the batches in order (canaries, groups, slots), the hosts that\n"
		       "would wait and why, the dead, the failure budget in hosts and an\n"
		       "estimated duration from the run history.  VERSION defaults to\n"
		       "current_version (the rest of the current rollout); exit 1 when none",
};
