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
#include "options.h"
#include "schema.h"

int cmd_provision(struct cli *cli, int argc, char **argv)
{
	struct fleet *f;
	int r;

	if ((r = cli_check_name("host", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_provision(f, argv[0]);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot provision");
	log_debug("'%s' provisioned", argv[0]);
	return 0;
}

int cmd_decommission(struct cli *cli, int argc, char **argv)
{
	struct fleet *f;
	int r;

	if ((r = cli_check_name("host", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_decommission(f, argv[0]);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot decommission");
	printf("decommissioned %s: removed %d key%s\n", argv[0], r, r == 1 ? "" : "s");
	return 0;
}

/* --group G | --host H | neither (global); both is a usage error. */
static int pause_scope(struct cli *cli, enum pause_scope *ret_scope, const char **ret_name)
{
	const struct cli_args *a = &cli->args;
	int r;

	if (a->group && a->host)
		return cli_error(EXIT_USAGE, "'%s' takes --group or --host, not both",
				 cli->name);
	if (a->group) {
		if ((r = cli_check_name("group", a->group)))
			return r;
		*ret_scope = PAUSE_GROUP;
		*ret_name = a->group;
	} else if (a->host) {
		if ((r = cli_check_name("host", a->host)))
			return r;
		*ret_scope = PAUSE_HOST;
		*ret_name = a->host;
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

int cmd_pause(struct cli *cli, int argc, char **argv)
{
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_pause(f, scope, name, cli->args.reason);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot pause");
	log_debug("paused %s%s%s", scope_text(scope), name ? " " : "", name ? name : "");
	return 0;
}

int cmd_resume(struct cli *cli, int argc, char **argv)
{
	enum pause_scope scope = PAUSE_GLOBAL;
	const char *name = NULL;
	struct fleet *f;
	int r;

	if ((r = pause_scope(cli, &scope, &name)) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_resume(f, scope, name);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot resume");
	if (r == 0)
		log_debug("%s%s%s was not paused", scope_text(scope), name ? " " : "",
			  name ? name : "");
	return 0;
}

/* --- rollout_policy ---------------------------------------------------------------------- */

/* --groups "dc1,dc2": each a valid name, none twice, none empty. */
static int policy_groups(const char *list, struct rollout_policy *p)
{
	_cleanup_(freep) char *copy = strdup(list);
	size_t n = 1;
	int r;

	if (!copy)
		return cli_error(1, "out of memory");
	for (const char *c = list; *c; c++)
		n += *c == ',';
	p->groups = calloc(n + 1, sizeof(char *));
	if (!p->groups)
		return cli_error(1, "out of memory");
	/* strtok would skip empty items: "dc1,,dc2" is a typo worth refusing */
	for (char *item = copy, *comma; item; item = comma ? comma + 1 : NULL) {
		comma = strchr(item, ',');
		if (comma)
			*comma = '\0';
		if ((r = cli_check_name("group", item)))
			return r;
		for (size_t i = 0; i < p->n_groups; i++)
			if (strcmp(p->groups[i], item) == 0)
				return cli_error(EXIT_USAGE, "group '%s' is listed twice in --groups",
						 item);
		if (!(p->groups[p->n_groups++] = strdup(item)))
			return cli_error(1, "out of memory");
	}
	return 0;
}

static int policy_print(const struct rollout_policy *p)
{
	if (p->max_parallel > 0)
		printf("max_parallel: %ld\n", p->max_parallel);
	else if (p->max_percent > 0)
		printf("max_percent: %g\n", p->max_percent);
	else
		printf("max_parallel: unlimited\n");
	if (p->n_groups > 0) {
		fputs("groups:", stdout);
		for (size_t i = 0; i < p->n_groups; i++)
			printf(" %s", p->groups[i]);
		fputc('\n', stdout);
	}
	return 0;
}

static int policy_show(struct cli *cli, struct fleet *f)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	_cleanup_(freep) char *raw = NULL, *text = NULL;
	int r = fleet_get_policy(f, &p, &raw);

	if (r == -EPROTO)
		return cli_error(1, "rollout/policy holds an invalid policy '%s' (nodes take "
				 "max_parallel 1); replace it with 'rollout_policy set'",
				 raw ? raw : "");
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read the rollout policy");
	if (cli->opt->json) {
		if (r == 0) {
			puts("null");
			return 0;
		}
		if (rollout_policy_encode(&p, &text) < 0)
			return cli_error(1, "out of memory");
		puts(text);
		return 0;
	}
	if (r == 0) {
		puts("no policy");
		return 0;
	}
	return policy_print(&p);
}

/*
 * rollout_policy [set [--max-parallel N | --max-percent P] [--groups …] | clear].
 * Everything is checked before etcd is asked (a refused set writes nothing),
 * and the value is built by fleet.c with cJSON, never by hand.
 */
int cmd_rollout_policy(struct cli *cli, int argc, char **argv)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	const struct cli_args *a = &cli->args;
	const char *action = argc > 0 ? argv[0] : NULL;
	bool has_options = a->max_parallel >= 0 || a->max_percent >= 0 || a->groups;
	struct fleet *f;
	int r;

	if (action && strcmp(action, "set") != 0 && strcmp(action, "clear") != 0)
		return cli_error(EXIT_USAGE, "unknown action '%s' for 'rollout_policy': expected "
				 "'set' or 'clear'", action);
	if (has_options && !(action && strcmp(action, "set") == 0))
		return cli_error(EXIT_USAGE, "--max-parallel, --max-percent and --groups go with "
				 "'rollout_policy set'");
	if (action && strcmp(action, "set") == 0) {
		if (a->max_parallel >= 0 && a->max_percent >= 0)
			return cli_error(EXIT_USAGE, "'rollout_policy set' takes --max-parallel or "
					 "--max-percent, not both");
		if (!has_options)
			return cli_error(EXIT_USAGE, "'rollout_policy set' needs --max-parallel, "
					 "--max-percent or --groups (use 'clear' to remove the policy)");
		p.max_parallel = a->max_parallel > 0 ? a->max_parallel : 0;
		p.max_percent = a->max_percent > 0 ? (double)a->max_percent : 0;
		if (a->groups && (r = policy_groups(a->groups, &p)))
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
			return cli_etcd_error(cli, r, "cannot clear the rollout policy");
		log_debug(r ? "rollout policy cleared" : "there was no rollout policy");
		return 0;
	}
	r = fleet_set_policy(f, &p);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot set the rollout policy");
	log_debug("rollout policy set");
	return 0;
}
