/*
 * cmd_services.c — service discovery from the command line: a host publishing
 * and withdrawing its services (publish_service, unpublish_service), Puppet
 * reading the catalog (get_services, cache_services) and waiting for it
 * (wait_for_service).
 *
 * What this host offers and at which addresses are local.h's facts, the same
 * for this command line and the daemon.  The catalog is decoded and rendered
 * by hiera.c, so get_services prints exactly the bytes cache_services would
 * write, and cache_services rewrites nothing when they did not change.
 * wait_for_service follows an etcd watch (fleet_wait_service()) and counts
 * hosts with hiera.c's own decoder, so a host counts here exactly when it
 * would appear in the hiera file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/address.h"
#include "base/cleanup.h"
#include "cli.h"
#include "base/clock.h"
#include "config/config.h"
#include "base/fileio.h"
#include "fleet/fleet.h"
#include "fleet/fleet_lease.h"
#include "output/hiera.h"
#include "config/local.h"
#include "base/log.h"
#include "config/netif.h"
#include "output/render.h"
#include "fleet/schema.h"
#include "base/strv.h"

/* publish_service --address IFACE=ADDR, repeatable. */
struct addresses {
	struct catalog_entry *v;
	size_t n;
};

static struct addresses arg_addresses;
static long arg_ttl = -1;
static const char *arg_output;
static long arg_count = 1;
static bool arg_healthy;
static double arg_timeout = -1;

/* --- publish_service ---------------------------------------------------------------- */

/* --address IFACE=ADDR: IFACE a valid name, ADDR an IPv4 or IPv6 address. */
static int parse_address(const char *name, const char *arg, void *value)
{
	struct addresses *a = value;
	const char *eq = strchr(arg, '=');

	if (!eq)
		return cli_error(EXIT_USAGE, "invalid --%s '%s' for 'publish_service': "
				 "expected IFACE=ADDR", name, arg);
	_cleanup_(freep) char *iface = strndup(arg, (size_t)(eq - arg));
	_cleanup_(freep) char *addr = strdup(eq + 1);
	if (!iface || !addr)
		return cli_error(1, "out of memory");
	if (!schema_name_valid(iface))
		return cli_error(EXIT_USAGE, "invalid interface '%s': %s", iface,
				 schema_name_problem(iface));
	if (!address_valid(addr))
		return cli_error(EXIT_USAGE, "invalid address '%s': not an IPv4 or IPv6 address",
				 addr);
	struct catalog_entry *v = realloc(a->v, (a->n + 1) * sizeof(*v));
	if (!v)
		return cli_error(1, "out of memory");
	a->v = v;
	v[a->n++] = (struct catalog_entry){ .iface = TAKE_PTR(iface), .address = TAKE_PTR(addr) };
	return 0;
}

static void addresses_releasep(struct addresses *a)
{
	netif_addresses_free(a->v, a->n);
	*a = (struct addresses){ 0 };
}

/* The services to publish: the arguments, else local_services() (whose
 * skipped lines are warned about: one bad line must not stop the others). */
static int services_to_publish(struct cli *cli, int argc, char **argv, char ***ret)
{
	_cleanup_(strv_freep) char **services = NULL;
	_cleanup_(strv_freep) char **skipped = NULL;
	size_t n = 0;
	int r;

	if (argc > 0) {
		for (int i = 0; i < argc; i++) {
			if ((r = cli_check_name("service", argv[i])))
				return r;
			if (!strv_contains(services, argv[i]) && strv_push(&services, &n, argv[i]) < 0)
				return cli_error(1, "out of memory");
		}
		*ret = TAKE_PTR(services);
		return 0;
	}
	r = local_services(cli->opt->config, &services, &skipped);
	if (r < 0)
		return cli_error(1, "cannot list this host's services: %s", strerror(-r));
	for (size_t i = 0; skipped && skipped[i]; i++)
		cli_warn("%s, ignoring", skipped[i]);
	*ret = TAKE_PTR(services);
	return 0;
}

static int cmd_publish_service(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **services = NULL;
	_cleanup_(freep) char *local = NULL;
	_cleanup_(addresses_releasep) struct addresses found = { 0 };
	const struct config *cfg = cli->opt->config;
	const struct addresses *addrs = &arg_addresses;
	enum status_state validation = STATE_INVALID;
	int64_t lease = 0;
	struct fleet *f;
	int r;

	if ((r = services_to_publish(cli, argc, argv, &services)))
		return r;
	if (!services[0]) {
		log_info("no services to publish (profile list '%s')",
			 cfg->profile_list ? cfg->profile_list : "none");
		return 0;
	}

	/* Addresses: --address, else this host's (node.addresses, else the
	 * interfaces). */
	if (addrs->n == 0) {
		r = local_addresses(cfg, &found.v, &found.n);
		if (r == -EINVAL)
			return cli_error(EXIT_USAGE, "invalid node.addresses in '%s'",
					 cfg->path ? cfg->path : "the config");
		if (r < 0)
			return cli_error(1, "cannot list the network interfaces: %s", strerror(-r));
		addrs = &found;
	}
	if (addrs->n == 0)
		return cli_error(1, "no address to publish: no IPv4 interface but loopback; "
				 "use --address IFACE=ADDR");

	r = cli_local_version(cli, &local);
	if (r > 1)
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_get_status(f, cli->opt->hostname, STATUS_VALIDATION, &validation, NULL);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read this host's validation state");
	if (arg_ttl > 0 && (r = fleet_lease_grant(f, arg_ttl, &lease)) < 0)
		return cli_fleet_error(cli, r, "cannot grant a lease");
	for (size_t i = 0; services[i]; i++) {
		r = fleet_publish_service(f, services[i], cli->opt->hostname, addrs->v, addrs->n,
					  validation == STATE_SUCCESS, lease);
		if (r < 0) {
			_cleanup_(freep) char *what = NULL;
			if (asprintf(&what, "cannot publish '%s'", services[i]) < 0)
				what = NULL;
			return cli_fleet_error(cli, r, what);
		}
		log_debug("published '%s' (%s)", services[i],
			  validation == STATE_SUCCESS ? "healthy" : "not healthy");
	}
	return 0;
}

static const struct cli_option publish_service_options[] = {
	CLI_CALLBACK("address", "IFACE=ADDR", parse_address, &arg_addresses,
		     "an address to publish (repeatable; default: node.addresses\n"
		     "of the config, else every IPv4 interface but loopback)"),
	CLI_LONG("ttl", "SECONDS", &arg_ttl, 1, 100000000,
		 "attach a lease of that TTL (default: no lease)"),
	CLI_OPTIONS_END,
};

const struct command command_publish_service = {
	.name = "publish_service", .fn = cmd_publish_service, .max_args = -1, .group = G_NODES,
	.options = publish_service_options,
	.synopsis = "publish_service [SERVICE ...] [--address IFACE=ADDR]... [--ttl SECONDS]",
	.description = "publish this host's services (default: node.services, the profile list\n"
		       "and node.profile_dir) with its addresses",
};

/* --- unpublish_service ---------------------------------------------------------------- */

static int cmd_unpublish_service(struct cli *cli, int argc, char **argv)
{
	struct fleet *f;
	int r;

	for (int i = 0; i < argc; i++)
		if ((r = cli_check_name("service", argv[i])))
			return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	for (int i = 0; i < argc; i++) {
		r = fleet_unpublish_service(f, argv[i], cli->opt->hostname);
		if (r < 0)
			return cli_fleet_error(cli, r, "cannot unpublish");
	}
	return 0;
}

const struct command command_unpublish_service = {
	.name = "unpublish_service", .fn = cmd_unpublish_service, .min_args = 1, .max_args = -1,
	.group = G_NODES, .needs = "a SERVICE",
	.synopsis = "unpublish_service SERVICE ...",
	.description = "withdraw this host's entry for each SERVICE",
};

/* --- get_services, cache_services ----------------------------------------------------------- */

/* Reads the catalog and renders it (when out is not NULL); 0 or an exit status. */
static int read_and_render(struct cli *cli, struct catalog *cat, struct buf *out)
{
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_read_catalog(f, 0, cat);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the service catalog");
	if (cat->skipped)
		cli_warn("%zu malformed service entr%s in etcd, ignoring", cat->skipped,
			 cat->skipped == 1 ? "y" : "ies");
	if (out && (r = hiera_render(cat, out)) < 0)
		return cli_error(1, "cannot render the service catalog: %s", strerror(-r));
	return 0;
}

static int cmd_get_services(struct cli *cli, int argc, char **argv)
{
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	int r;

	if ((r = read_and_render(cli, &cat, cli->opt->json ? NULL : &out)))
		return r;
	if (cli->opt->json)
		return cli_output(render_json_catalog(stdout, &cat));
	if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
		return cli_output(-EIO);
	return 0;
}

const struct command command_get_services = {
	.name = "get_services", .fn = cmd_get_services, .group = G_PUPPET,
	.synopsis = "get_services",
	.description = "print the service catalog as hiera YAML",
};

static int cmd_cache_services(struct cli *cli, int argc, char **argv)
{
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	const char *path = arg_output ? arg_output : cli->opt->config->hiera_services;
	bool changed = false;
	int r;

	if (!path || !*path)
		return cli_error(EXIT_USAGE, "no output file: give --output FILE or "
				 "paths.hiera_services");
	if ((r = read_and_render(cli, &cat, &out)))
		return r;
	r = file_write_atomic(path, out.data, out.len, 0644, &changed);
	if (r < 0)
		return cli_error(EXIT_IOERR, "cannot write '%s': %s; the old file is kept", path,
				 strerror(-r));
	log_debug("'%s' %s", path, changed ? "written" : "unchanged");
	return 0;
}

static const struct cli_option cache_services_options[] = {
	CLI_STRING("output", "FILE", &arg_output,
		   "the file (default: paths.hiera_services of the config,\n"
		   CONFIG_DEFAULT_HIERA_SERVICES ")"),
	CLI_OPTIONS_END,
};

const struct command command_cache_services = {
	.name = "cache_services", .fn = cmd_cache_services, .group = G_PUPPET,
	.options = cache_services_options,
	.synopsis = "cache_services [--output FILE]",
	.description = "write the service catalog as hiera YAML, atomically, only when it changed",
};

/* --- wait_for_service -------------------------------------------------------------- */

static int cmd_wait_for_service(struct cli *cli, int argc, char **argv)
{
	const char *service = argv[0];
	size_t count = (size_t)arg_count, seen = 0;
	struct fleet *f;
	int r, answer;

	if ((r = cli_check_name("service", service)) || (r = cli_fleet(cli, &f)))
		return r;
	answer = fleet_wait_service(f, service, count, arg_healthy, clock_deadline_ms(arg_timeout),
				    cli_progress, (void *)(arg_healthy ? "healthy hosts" : "hosts"),
				    &seen);
	cli_progress_end();
	if (answer < 0)
		return cli_fleet_error(cli, answer, "cannot read the service catalog");
	if (cli->opt->json &&
	    (r = cli_output(render_json_service_wait(stdout, service, count, arg_healthy, seen,
						     answer == 1))))
		return r;
	if (answer == 1) {
		log_debug("%zu host%s of '%s' published", seen, seen == 1 ? "" : "s", service);
		return 0;
	}
	/* the words before "saw" are what the Puppet module's users grep for */
	return cli_error(1, "timed out waiting for %zu host%s of %s%s, saw %zu (after %g s, "
			 "%zu missing)", count, count == 1 ? "" : "s", service,
			 arg_healthy ? " (healthy)" : "", seen, arg_timeout,
			 seen < count ? count - seen : 0);
}

static const struct cli_option wait_for_service_options[] = {
	CLI_LONG("count", "N", &arg_count, 1, 1000000, "how many hosts (default 1)"),
	CLI_FLAG("healthy", &arg_healthy, "count only hosts whose validation succeeded"),
	CLI_SECONDS("timeout", &arg_timeout,
		    "give up after this long (default: wait forever;\n0: check once)"),
	CLI_SECONDS("wait", &arg_timeout, "the same as --timeout"),
	CLI_OPTIONS_END,
};

const struct command command_wait_for_service = {
	.name = "wait_for_service", .fn = cmd_wait_for_service, .min_args = 1, .max_args = 1,
	.group = G_PUPPET, .options = wait_for_service_options, .needs = "a SERVICE",
	.synopsis = "wait_for_service SERVICE [--count N] [--healthy] [--timeout SECONDS]",
	.description = "block on an etcd watch until N hosts publish SERVICE; exit 1 on timeout",
};
