/*
 * cmd_admin.c — the operator's commands on the fleet's membership and on
 * config runs: provision and decommission a host, pause and resume runs
 * fleet-wide, for a group or for one host, the rollout policy that paces
 * the runs (how many at once, which group first) and stops a bad rollout
 * (failure budget, deadlines, canaries), and the two commands that let a
 * stopped rollout go on: rollout_policy resume and promote.
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

#include "base/buf.h"
#include "base/cleanup.h"
#include "cli.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "base/log.h"
#include "output/render.h"
#include "fleet/schema.h"
#include "base/strv.h"

static const char *arg_group;
static const char *arg_host;
static const char *arg_reason;
static bool arg_list;
static long arg_max_parallel = -1;
static long arg_max_percent = -1;
static const char *arg_groups;
static long arg_max_failures = -1;
static double arg_max_fail_percent = -1;
static long arg_healthy_deadline = -1;
static long arg_progress_deadline = -1;
static long arg_min_healthy_time = -1;
static bool arg_auto_revert;
static long arg_canary = -1;
static bool arg_auto_promote;

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

/* --max-fail-percent P: a number in (0, 100], fractions allowed ("2.5"). */
static int parse_percent(const char *name, const char *arg, void *value)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(arg, &end);
	if (errno || end == arg || *end || !(d > 0 && d <= 100))
		return cli_error(EXIT_USAGE, "invalid --%s '%s' for 'rollout_policy': expected a "
				 "percentage above 0 and at most 100", name, arg);
	*(double *)value = d;
	return 0;
}

/* Whether any option of 'set' was given. */
static bool policy_has_options(void)
{
	return arg_max_parallel >= 0 || arg_max_percent >= 0 || arg_groups ||
	       arg_max_failures >= 0 || arg_max_fail_percent >= 0 || arg_healthy_deadline >= 0 ||
	       arg_progress_deadline >= 0 || arg_min_healthy_time >= 0 || arg_auto_revert ||
	       arg_canary >= 0 || arg_auto_promote;
}

/* The policy 'set' writes, from the options; checked with
 * rollout_policy_problem() before anything is sent. */
static int policy_from_options(struct rollout_policy *p)
{
	int r;

	if (arg_max_parallel >= 0 && arg_max_percent >= 0)
		return cli_error(EXIT_USAGE, "'rollout_policy set' takes --max-parallel or "
				 "--max-percent, not both");
	if (!policy_has_options())
		return cli_error(EXIT_USAGE, "'rollout_policy set' needs at least one option "
				 "(--max-parallel, --max-percent, --groups, --max-failures, ...; see "
				 "'orchestrate rollout_policy -h'); 'clear' removes the policy");
	p->max_parallel = arg_max_parallel > 0 ? arg_max_parallel : 0;
	p->max_percent = arg_max_percent > 0 ? (double)arg_max_percent : 0;
	if (arg_groups && (r = policy_groups(arg_groups, p)))
		return r;
	p->has_max_failures = arg_max_failures >= 0;
	p->max_failures = arg_max_failures >= 0 ? arg_max_failures : 0;
	p->max_fail_percent = arg_max_fail_percent > 0 ? arg_max_fail_percent : 0;
	p->healthy_deadline = arg_healthy_deadline > 0 ? arg_healthy_deadline : 0;
	p->progress_deadline = arg_progress_deadline > 0 ? arg_progress_deadline : 0;
	p->min_healthy_time = arg_min_healthy_time > 0 ? arg_min_healthy_time : 0;
	p->auto_revert = arg_auto_revert;
	p->canary = arg_canary > 0 ? arg_canary : 0;
	p->auto_promote = arg_auto_promote;
	const char *problem = rollout_policy_problem(p);
	if (problem)
		return cli_error(EXIT_USAGE, "invalid rollout policy: %s", problem);
	/* Without a limit the nodes queue for the N canary slots, and after
	 * promote every host runs at once: valid (rollout_policy_problem()
	 * accepts it), but most often a forgotten option. */
	if (p->canary > 0 && p->max_parallel == 0 && p->max_percent == 0)
		cli_warn("warning: --canary without --max-parallel or --max-percent: after the "
			 "%ld canar%s, promote lets every host run at once", p->canary,
			 p->canary == 1 ? "y" : "ies");
	return 0;
}

/*
 * rollout_policy resume: clears a halt and the failure budget (every
 * rollout/failed/ record) in one txn.  What it says comes from the state read
 * just before, so it can name the version and the reason of the halt.
 */
static int policy_resume(struct cli *cli, struct fleet *f)
{
	_cleanup_(rollout_state_releasep) struct rollout_state s = { 0 };
	_cleanup_(buf_releasep) struct buf reason = BUF_INIT;
	int r;

	if ((r = fleet_rollout_state(f, &s)) < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout's state");
	if ((r = fleet_rollout_resume(f)) < 0)
		return cli_fleet_error(cli, r, "cannot resume the rollout");
	if (s.halted) {
		const char *why = s.halt.reason && *s.halt.reason ? s.halt.reason : "no reason recorded";
		if (render_sanitize(why, strlen(why), RENDER_LINE, &reason) < 0)
			return cli_error(1, "out of memory");
		printf("rollout of %s resumed (was halted: %s)", s.version, buf_str(&reason));
		if (s.failed > 0)
			printf("; %zu failure record%s cleared", s.failed, s.failed == 1 ? "" : "s");
		putchar('\n');
		return 0;
	}
	/* not an error: nothing stops the rollout; but say so */
	if (r > 0)
		printf("no halted rollout%s%s; removed the halt record of an earlier rollout\n",
		       s.version ? " of " : "", s.version ? s.version : "");
	else if (s.failed > 0)
		printf("no halted rollout; %zu failure record%s of %s cleared\n", s.failed,
		       s.failed == 1 ? "" : "s", s.version);
	else
		printf("no halted rollout\n");
	return 0;
}

/*
 * rollout_policy [get | set OPTIONS | clear | resume].  Everything is checked
 * before etcd is asked (a refused set writes nothing), and the value is built
 * by fleet_codec.c with cJSON, never by hand.
 */
static int cmd_rollout_policy(struct cli *cli, int argc, char **argv)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	const char *action = argc > 0 ? argv[0] : "get";
	bool set = strcmp(action, "set") == 0;
	struct fleet *f;
	int r;

	if (!set && strcmp(action, "get") != 0 && strcmp(action, "clear") != 0 &&
	    strcmp(action, "resume") != 0)
		return cli_error(EXIT_USAGE, "unknown action '%s' for 'rollout_policy': expected "
				 "'get', 'set', 'clear' or 'resume'", action);
	if (policy_has_options() && !set)
		return cli_error(EXIT_USAGE, "the policy's options (--max-parallel, --max-failures, "
				 "...) go with 'rollout_policy set', not '%s'", action);
	if (set && (r = policy_from_options(&p)))
		return r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	if (strcmp(action, "get") == 0)
		return policy_show(cli, f);
	if (strcmp(action, "resume") == 0)
		return policy_resume(cli, f);
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
	CLI_LONG("max-failures", "N", &arg_max_failures, 0, 1000000000,
		 "halt the rollout when more than N hosts failed at the\n"
		 "version (0: the first failure halts)"),
	CLI_CALLBACK("max-fail-percent", "P", parse_percent, &arg_max_fail_percent,
		     "halt when more than P% (0-100] of the alive hosts failed"),
	CLI_LONG("healthy-deadline", "SECONDS", &arg_healthy_deadline, 1, 1000000000,
		 "a run not validated that long after it started fails\n"
		 "(its hook is killed)"),
	CLI_LONG("progress-deadline", "SECONDS", &arg_progress_deadline, 1, 1000000000,
		 "halt when hosts queue for a slot and none was freed for\n"
		 "that long"),
	CLI_LONG("min-healthy-time", "SECONDS", &arg_min_healthy_time, 1, 1000000000,
		 "a validated host keeps its slot that long, validates\n"
		 "again, and only then counts as done"),
	CLI_FLAG("auto-revert", &arg_auto_revert,
		 "a halt sets current_version back to previous_version\n"
		 "(needs a budget or --progress-deadline, and a node role\n"
		 "that may write the versions)"),
	CLI_LONG("canary", "N", &arg_canary, 1, 1000000000,
		 "the first N hosts to take a slot run, then the rollout\n"
		 "waits for 'orchestrate promote' (with --max-parallel or\n"
		 "--max-percent: it works on the slot queue)"),
	CLI_FLAG("auto-promote", &arg_auto_promote,
		 "promote by itself once the canaries are done (after\n"
		 "--min-healthy-time) with no failure (needs --canary)"),
	CLI_OPTIONS_END,
};

const struct command command_rollout_policy = {
	.name = "rollout_policy", .fn = cmd_rollout_policy, .max_args = 1, .group = G_OPERATORS,
	.options = rollout_policy_options,
	.synopsis = "rollout_policy [get | set [--max-parallel N | --max-percent P] [--groups G1,G2,...] "
		    "[--max-failures N] [--max-fail-percent P] [--healthy-deadline S] "
		    "[--progress-deadline S] [--min-healthy-time S] [--auto-revert] [--canary N] "
		    "[--auto-promote] | clear | resume]",
	.description = "show, set or clear the rollout policy: how many hosts apply an update at once,\n"
		       "the order of groups (a group starts when the earlier ones are done), and\n"
		       "when a rollout stops itself (failure budget, deadlines, canaries);\n"
		       "resume a halted rollout",
	.help = "  get                print the policy (the default)\n"
		"  set                replace the policy with the options given (validated)\n"
		"  clear              remove the policy: every host runs at once\n"
		"  resume             clear a halt and the failure budget (rollout/halted and\n"
		"                     every rollout/failed/ record); says what it did\n",
};

/* --- promote --------------------------------------------------------------------------- */

/*
 * Accepts the canaries of the current rollout: one txn that writes
 * rollout/promoted for current_version's revision (fleet_promote()), so that
 * every other host may run.  It says which version, and warns when the
 * promotion cannot change anything yet (no canary in the policy, a halt).
 */
static int cmd_promote(struct cli *cli, int argc, char **argv)
{
	_cleanup_(rollout_state_releasep) struct rollout_state s = { 0 };
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	_cleanup_(freep) char *version = NULL;
	struct fleet *f;
	int r, has_policy;

	if ((r = cli_fleet(cli, &f)))
		return r;
	if ((r = fleet_rollout_state(f, &s)) < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout's state");
	if (!s.version)
		return cli_error(1, "no desired version is set: nothing to promote");
	if (s.promoted) {
		printf("the canaries of %s are promoted already\n", s.version);
		return 0;
	}
	has_policy = fleet_get_policy(f, &p, NULL);
	if (has_policy == -EPROTO)
		has_policy = 0;
	if (has_policy < 0)
		return cli_fleet_error(cli, has_policy, "cannot read the rollout policy");
	r = fleet_promote(f, "operator", 0, &version);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot promote");
	if (r == 0)
		return cli_error(1, "no desired version is set: nothing to promote");
	if (has_policy && p.canary > 0)
		printf("promoted the canaries of %s (%zu of %ld done)\n", version, s.canaries_done,
		       p.canary);
	else
		printf("promoted %s\n", version);
	if (!has_policy || p.canary == 0)
		cli_warn("warning: the rollout policy sets no canary; the promotion changes nothing "
			 "until one does");
	if (s.halted && version && strcmp(version, s.version) == 0)
		cli_warn("warning: the rollout of %s is halted; 'orchestrate rollout_policy resume' "
			 "lets it go on", version);
	return 0;
}

const struct command command_promote = {
	.name = "promote", .fn = cmd_promote, .group = G_OPERATORS,
	.synopsis = "promote",
	.description = "accept the canaries of the current rollout, so that every host may run\n"
		       "the desired version; exit 1 when no desired version is set",
};
