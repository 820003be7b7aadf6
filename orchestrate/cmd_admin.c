/*
 * cmd_admin.c — the operator's commands on the fleet's membership and on
 * config runs: provision and decommission a host, pause and resume runs
 * fleet-wide, for a group or for one host.
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
