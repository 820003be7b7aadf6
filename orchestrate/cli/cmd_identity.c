/*
 * cmd_identity.c — node_identity: one etcd user and role per host, granting
 * exactly the keys that host writes (fleet_identity.c says which and why).
 *
 * Run with etcd's root role.  The identity's own password comes from the
 * command's --password-file (given after the command name: before it, the
 * global --password-file is the caller's own); without one, the user has no
 * password and authenticates with a client certificate whose CN is the host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "cli.h"
#include "base/fileio.h"
#include "fleet/fleet.h"
#include "base/log.h"
#include "base/strv.h"

static const char *arg_services;
static const char *arg_group;
static const char *arg_password_file;
static bool arg_dry_run;

/* The first line of path (as the global --password-file reads it). */
static int read_password(const char *path, char **ret)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r = file_read_max(path, 4096, &b);
	size_t len;

	if (r < 0) {
		explicit_bzero(b.data, b.cap);
		return cli_error(EXIT_NOINPUT, "cannot read password file '%s': %s", path,
				 r == -EFBIG ? "too large for a password file" : strerror(-r));
	}
	len = strcspn(buf_str(&b), "\r\n");
	if (len == 0) {
		explicit_bzero(b.data, b.cap);
		return cli_error(EXIT_USAGE, "password file '%s' is empty", path);
	}
	*ret = strndup(b.data, len);
	explicit_bzero(b.data, b.cap);
	return *ret ? 0 : cli_error(1, "out of memory");
}

static void print_grant(const struct fleet_grant *g)
{
	printf("%-9s %s%s\n", fleet_perm_name(g->perm), g->key,
	       g->range_end ? " (prefix)" : "");
}

static int cmd_node_identity(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **services = NULL;
	_cleanup_(freep) char *password = NULL;
	struct fleet_grant *grants = NULL;
	size_t n = 0, n_services = 0, changes = 0;
	const char *host = argv[0];
	struct fleet *f;
	int r;

	if ((r = cli_check_name("host", host)) || (arg_group && (r = cli_check_name("group", arg_group))))
		return r;
	if (arg_services) {
		_cleanup_(freep) char *copy = strdup(arg_services);
		char *save = NULL;
		if (!copy)
			return cli_error(1, "out of memory");
		for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
			if ((r = cli_check_name("service", s)))
				return r;
			if (strv_push(&services, &n_services, s) < 0)
				return cli_error(1, "out of memory");
		}
	}
	if (arg_password_file && (r = read_password(arg_password_file, &password)))
		return r;

	r = fleet_identity_grants(cli->opt->prefix, host, arg_group, services, &grants, &n);
	if (r < 0)
		return cli_error(r == -ENOMEM ? 1 : EXIT_USAGE, "cannot compute the grants of '%s'",
				 host);
	if (arg_dry_run) {
		_cleanup_(freep) char *role = fleet_identity_role(host);
		printf("user %s, role %s%s\n", host, role ? role : "?",
		       password ? ", with a password" : ", no password (client certificate)");
		for (size_t i = 0; i < n; i++)
			print_grant(&grants[i]);
		fleet_grants_free(grants, n);
		return 0;
	}
	if ((r = cli_fleet(cli, &f))) {
		fleet_grants_free(grants, n);
		return r;
	}
	r = fleet_identity_apply(f, host, password, grants, n, &changes);
	fleet_grants_free(grants, n);
	if (password)
		explicit_bzero(password, strlen(password));
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot set up the node identity");
	printf("node identity %s: %zu change%s\n", host, changes, changes == 1 ? "" : "s");
	return 0;
}

static const struct cli_option node_identity_options[] = {
	CLI_STRING("services", "S,...", &arg_services,
		   "the services HOST publishes (available_services/S/HOST)"),
	CLI_STRING("group", "G", &arg_group, "HOST's rollout group (groups/G/HOST)"),
	CLI_STRING("password-file", "FILE", &arg_password_file,
		   "the identity's password (first line); without: client certificate"),
	CLI_FLAG("dry-run", &arg_dry_run, "print the grants, change nothing"),
	CLI_OPTIONS_END,
};

const struct command command_node_identity = {
	.name = "node_identity", .fn = cmd_node_identity, .min_args = 1, .max_args = 1,
	.group = G_OPERATORS, .options = node_identity_options, .needs = "a HOST",
	.synopsis = "node_identity HOST [--services S,...] [--group G] [--password-file FILE] "
		    "[--dry-run]",
	.description = "create or update the etcd user HOST and its role, granting exactly\n"
		       "the keys HOST writes (needs etcd's root role)",
};
