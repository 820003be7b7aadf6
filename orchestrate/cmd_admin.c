/*
 * cmd_admin.c — the operator's commands on the fleet's membership and on
 * config runs: provision and decommission a host, pause and resume runs
 * fleet-wide, for a group or for one host, and the rollout policy that paces
 * the runs (how many at once, which group first).
 *
 * decommission asks for no confirmation (it is scripted from the machine
 * lifecycle) but says how many keys it removed, so that a typo in a host name
 * shows as "removed 0 keys".  pause and resume likewise say what they
 * matched, and warn when that is nothing.
 */
#define _GNU_SOURCE
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
static bool arg_list;
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

/* pause's and resume's subject, for what they say: "the fleet", "group 'dc1'",
 * "host 'web1'". */
static int subject(enum pause_scope scope, const char *name, char **ret)
{
	int r = scope == PAUSE_GLOBAL ? asprintf(ret, "the fleet")
				      : asprintf(ret, "%s '%s'", scope_text(scope), name);
	return r < 0 ? -ENOMEM : 0;
}

/*
 * What a pause matches, said before it is set: a group with no registered host
 * or a host etcd has never heard of is most often a typo, so it warns — and
 * still sets the pause, since a host may register later (a new machine of the
 * group) and must then find it.
 */
static int pause_matches(struct cli *cli, struct fleet *f, enum pause_scope scope,
			 const char *name, const char *what)
{
	size_t n = 0;
	int r;

	switch (scope) {
	case PAUSE_GLOBAL:
		printf("pausing %s: every host\n", what);
		return 0;
	case PAUSE_GROUP:
		if ((r = fleet_group_size(f, name, &n)) < 0)
			return cli_fleet_error(cli, r, "cannot read the group");
		if (n == 0)
			cli_warn("warning: no host is registered in group '%s'; pausing it anyway",
				 name);
		else
			printf("pausing %s: %zu host%s registered\n", what, n, n == 1 ? "" : "s");
		return 0;
	case PAUSE_HOST:
		if ((r = fleet_host_known(f, name)) < 0)
			return cli_fleet_error(cli, r, "cannot read the host");
		if (r == 0)
			cli_warn("warning: host '%s' is not registered (neither alive nor "
				 "provisioned); pausing it anyway", name);
		else
			printf("pausing %s\n", what);
		return 0;
	}
	return 0;
}

static int pause_list(struct cli *cli)
{
	struct pause_entry *p = NULL;
	size_t n = 0;
	struct fleet *f;
	int r;

	if (arg_group || arg_host || arg_reason)
		return cli_error(EXIT_USAGE, "'%s --list' takes no --group, --host or --reason",
				 cli->name);
	if ((r = cli_fleet(cli, &f)))
		return r;
	if ((r = fleet_pauses_list(f, &p, &n)) < 0)
		return cli_fleet_error(cli, r, "cannot read the pauses");
	if (cli->opt->json)
		r = render_json_pauses(stdout, p, n);
	else
		r = render_pauses(stdout, p, n, fleet_now());
	pause_entries_free(p, n);
	return cli_output(r);
}

static int cmd_pause(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *what = NULL;
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if (arg_list)
		return pause_list(cli);
	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	if (subject(scope, name, &what) < 0)
		return cli_error(1, "out of memory");
	if ((r = pause_matches(cli, f, scope, name, what)))
		return r;
	r = fleet_pause(f, scope, name, arg_reason);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot pause");
	log_debug("paused %s", what);
	return 0;
}

static int cmd_pauses(struct cli *cli, int argc, char **argv)
{
	return pause_list(cli);
}

static const struct cli_option pause_options[] = {
	CLI_STRING("group", "GROUP", &arg_group, "pause only the hosts of GROUP (warns when\n"
		   "no host is registered in it, and sets it anyway)"),
	CLI_STRING("host", "HOST", &arg_host, "pause only HOST (warns when etcd has never\n"
		   "heard of it, and sets it anyway)"),
	CLI_STRING("reason", "TEXT", &arg_reason, "why, shown by status and in the nodes' logs"),
	CLI_FLAG("list", &arg_list, "list the pauses set (scope, name, since, reason);\n"
		 "with --json as {\"pauses\":[...]}"),
	CLI_OPTIONS_END,
};

const struct command command_pause = {
	.name = "pause", .fn = cmd_pause, .group = G_OPERATORS, .options = pause_options,
	.synopsis = "pause [--group GROUP | --host HOST] [--reason TEXT] | pause --list",
	.description = "stop config runs fleet-wide, for a group or for a host, saying what\n"
		       "it matched; --list lists the pauses set",
};

const struct command command_pauses = {
	.name = "pauses", .fn = cmd_pauses, .group = G_OPERATORS,
	.synopsis = "pauses",
	.description = "list the pauses set (the same as pause --list)",
};

static int cmd_resume(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *what = NULL;
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	if (subject(scope, name, &what) < 0)
		return cli_error(1, "out of memory");
	r = fleet_resume(f, scope, name);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot resume");
	if (r == 0) {
		/* not an error: the state asked for holds; but a typo must show */
		cli_warn("%s was not paused; nothing to resume (see 'orchestrate pause --list')",
			 what);
		return 0;
	}
	printf("resumed %s\n", what);
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
	.description = "allow config runs again (fleet-wide, for a group or for a host); says\n"
		       "what it resumed, or that it was not paused (exit 0 either way)",
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
