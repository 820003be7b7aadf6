/*
 * cmd_admin.c — the operator's commands on the fleet's membership and on
 * config runs: provision and decommission a host, pause and resume runs
 * fleet-wide, for a group or for one host, and the rollout policy that paces
 * the runs (how many at once, which group first).
 *
 * decommission asks for no confirmation (it is scripted from the machine
 * lifecycle) but says how many keys it removed, so that a typo in a host name
 * shows as "removed 0 keys".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "fleet.h"
#include "log.h"
#include "render.h"
#include "schema.h"
#include "strv.h"

static const char *arg_group;
static const char *arg_host;
static const char *arg_reason;
static long arg_max_parallel = -1;
static long arg_max_percent = -1;
static const char *arg_groups;

/* --- provision, decommission ------------------------------------------------------- */

static int cmd_provision(struct cli *cli, int argc, char **argv)
{
	struct fleet *f;
	int r;

	if ((r = cli_check_name("host", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_provision(f, argv[0]);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot provision");
	log_debug("'%s' provisioned", argv[0]);
	return 0;
}

const struct command command_provision = {
	.name = "provision", .fn = cmd_provision, .min_args = 1, .max_args = 1,
	.group = G_OPERATORS, .needs = "a HOST",
	.synopsis = "provision HOST",
	.description = "mark HOST as expected (status/provisioned/success)",
};

static int cmd_decommission(struct cli *cli, int argc, char **argv)
{
	struct fleet *f;
	int r;

	if ((r = cli_check_name("host", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_decommission(f, argv[0]);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot decommission");
	printf("decommissioned %s: removed %d key%s\n", argv[0], r, r == 1 ? "" : "s");
	/* its etcd identity (node_identity), when there is one; only root may
	 * touch users, so a refusal leaves it for root to remove */
	r = fleet_identity_remove(f, argv[0]);
	if (r > 0)
		printf("removed the etcd user %s and its role\n", argv[0]);
	else if (r == -EACCES)
		cli_warn("cannot remove the etcd user '%s' and its role (needs etcd's root "
			 "role), leaving them", argv[0]);
	else if (r < 0)
		return cli_fleet_error(cli, r, "cannot remove the node identity");
	return 0;
}

const struct command command_decommission = {
	.name = "decommission", .fn = cmd_decommission, .min_args = 1, .max_args = 1,
	.group = G_OPERATORS, .needs = "a HOST",
	.synopsis = "decommission HOST",
	.description = "remove every key of HOST in one transaction, then its etcd user\n"
		       "and role (node_identity) when there are",
};

/* --- pause, resume -------------------------------------------------------------------- */

/* --group G | --host H | neither (global); both is a usage error. */
static int pause_scope(struct cli *cli, enum pause_scope *ret_scope, const char **ret_name)
{
	int r;

	if (arg_group && arg_host)
		return cli_error(EXIT_USAGE, "'%s' takes --group or --host, not both",
				 cli->name);
	if (arg_group) {
		if ((r = cli_check_name("group", arg_group)))
			return r;
		*ret_scope = PAUSE_GROUP;
		*ret_name = arg_group;
	} else if (arg_host) {
		if ((r = cli_check_name("host", arg_host)))
			return r;
		*ret_scope = PAUSE_HOST;
		*ret_name = arg_host;
	} else {
		*ret_scope = PAUSE_GLOBAL;
		*ret_name = NULL;
	}
	return 0;
}

static const char *scope_text(enum pause_scope scope)
{
	switch (scope) {
	case PAUSE_GROUP: return "group";
	case PAUSE_HOST: return "host";
	default: return "fleet";
	}
}

static int cmd_pause(struct cli *cli, int argc, char **argv)
{
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_pause(f, scope, name, arg_reason);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot pause");
	log_debug("paused %s%s%s", scope_text(scope), name ? " " : "", name ? name : "");
	return 0;
}

static const struct cli_option pause_options[] = {
	CLI_STRING("group", "GROUP", &arg_group, "pause only the hosts of GROUP"),
	CLI_STRING("host", "HOST", &arg_host, "pause only HOST"),
	CLI_STRING("reason", "TEXT", &arg_reason, "why, shown by status and in the nodes' logs"),
	CLI_OPTIONS_END,
};

const struct command command_pause = {
	.name = "pause", .fn = cmd_pause, .group = G_OPERATORS, .options = pause_options,
	.synopsis = "pause [--group GROUP | --host HOST] [--reason TEXT]",
	.description = "stop config runs fleet-wide, for a group or for a host",
};

static int cmd_resume(struct cli *cli, int argc, char **argv)
{
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_resume(f, scope, name);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot resume");
	if (r == 0)
		log_debug("%s%s%s was not paused", scope_text(scope), name ? " " : "",
			  name ? name : "");
	return 0;
}

static const struct cli_option resume_options[] = {
	CLI_STRING("group", "GROUP", &arg_group, "resume the hosts of GROUP"),
	CLI_STRING("host", "HOST", &arg_host, "resume HOST"),
	CLI_OPTIONS_END,
};

const struct command command_resume = {
	.name = "resume", .fn = cmd_resume, .group = G_OPERATORS, .options = resume_options,
	.synopsis = "resume [--group GROUP | --host HOST]",
	.description = "allow config runs again (fleet-wide, for a group or for a host)",
};

/* --- rollout_policy ---------------------------------------------------------------------- */

/* --groups "dc1,dc2": each a valid name, none twice, none empty. */
static int policy_groups(const char *list, struct rollout_policy *p)
{
	_cleanup_(freep) char *copy = strdup(list);
	int r;

	if (!copy)
		return cli_error(1, "out of memory");
	/* strtok would skip empty items: "dc1,,dc2" is a typo worth refusing */
	for (char *item = copy, *comma; item; item = comma ? comma + 1 : NULL) {
		comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if ((r = cli_check_name("group", item)))
			return r;
		if (strv_contains(p->groups, item))
			return cli_error(EXIT_USAGE, "group '%s' is listed twice in --groups", item);
		if (strv_push(&p->groups, &p->n_groups, item) < 0)
			return cli_error(1, "out of memory");
	}
	return 0;
}

static int policy_show(struct cli *cli, struct fleet *f)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	_cleanup_(freep) char *raw = NULL;
	int r = fleet_get_policy(f, &p, &raw);

	if (r == -EPROTO)
		return cli_error(1, "rollout/policy holds an invalid policy '%s' (nodes take "
				 "max_parallel 1); replace it with 'rollout_policy set'",
				 raw ? raw : "");
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout policy");
	if (cli->opt->json)
		return cli_output(render_json_policy(stdout, r ? &p : NULL));
	return cli_output(render_policy(stdout, r ? &p : NULL));
}

/*
 * rollout_policy [set [--max-parallel N | --max-percent P] [--groups …] | clear].
 * Everything is checked before etcd is asked (a refused set writes nothing),
 * and the value is built by fleet.c with cJSON, never by hand.
 */
static int cmd_rollout_policy(struct cli *cli, int argc, char **argv)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	const char *action = argc > 0 ? argv[0] : NULL;
	bool has_options = arg_max_parallel >= 0 || arg_max_percent >= 0 || arg_groups;
	struct fleet *f;
	int r;

	if (action && strcmp(action, "set") != 0 && strcmp(action, "clear") != 0)
		return cli_error(EXIT_USAGE, "unknown action '%s' for 'rollout_policy': expected "
				 "'set' or 'clear'", action);
	if (has_options && !(action && strcmp(action, "set") == 0))
		return cli_error(EXIT_USAGE, "--max-parallel, --max-percent and --groups go with "
				 "'rollout_policy set'");
	if (action && strcmp(action, "set") == 0) {
		if (arg_max_parallel >= 0 && arg_max_percent >= 0)
			return cli_error(EXIT_USAGE, "'rollout_policy set' takes --max-parallel or "
					 "--max-percent, not both");
		if (!has_options)
			return cli_error(EXIT_USAGE, "'rollout_policy set' needs --max-parallel, "
					 "--max-percent or --groups (use 'clear' to remove the policy)");
		p.max_parallel = arg_max_parallel > 0 ? arg_max_parallel : 0;
		p.max_percent = arg_max_percent > 0 ? (double)arg_max_percent : 0;
		if (arg_groups && (r = policy_groups(arg_groups, &p)))
			return r;
		const char *problem = rollout_policy_problem(&p);
		if (problem)
			return cli_error(EXIT_USAGE, "invalid rollout policy: %s", problem);
	}

	if ((r = cli_fleet(cli, &f)))
		return r;
	if (!action)
		return policy_show(cli, f);
	if (strcmp(action, "clear") == 0) {
		r = fleet_clear_policy(f);
		if (r < 0)
			return cli_fleet_error(cli, r, "cannot clear the rollout policy");
		log_debug(r ? "rollout policy cleared" : "there was no rollout policy");
		return 0;
	}
	r = fleet_set_policy(f, &p);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot set the rollout policy");
	log_debug("rollout policy set");
	return 0;
}

static const struct cli_option rollout_policy_options[] = {
	CLI_LONG("max-parallel", "N", &arg_max_parallel, 1, 1000000000,
		 "at most N hosts (of one group, with --groups) at a time"),
	CLI_LONG("max-percent", "P", &arg_max_percent, 1, 100,
		 "at most P% (1-100) of the alive hosts (of one group)"),
	CLI_STRING("groups", "G1,G2,...", &arg_groups,
		   "one group at a time, in this order; hosts of no listed\n"
		   "group go after the last one"),
	CLI_OPTIONS_END,
};

const struct command command_rollout_policy = {
	.name = "rollout_policy", .fn = cmd_rollout_policy, .max_args = 1, .group = G_OPERATORS,
	.options = rollout_policy_options,
	.synopsis = "rollout_policy [set [--max-parallel N | --max-percent P] [--groups G1,G2,...] | clear]",
	.description = "show, set or clear the rollout policy: how many hosts apply an update at once,\n"
		       "and the order of groups (a group starts when the earlier ones are done)",
	.help = "  set                replace the policy with the options given (validated)\n"
		"  clear              remove the policy: every host runs at once\n",
};
