/*
 * cmd_services.c — service discovery from the command line: a host publishing
 * and withdrawing its services (publish_service, unpublish_service), Puppet
 * reading the catalog (get_services, cache_services) and waiting for it
 * (wait_for_service).
 *
 * The catalog is decoded and rendered by hiera.c, so get_services prints
 * exactly the bytes cache_services would write, and cache_services rewrites
 * nothing when they did not change.  wait_for_service follows an etcd watch on
 * available_services/SERVICE/ and counts hosts with hiera.c's own decoder, so
 * a host counts here exactly when it would appear in the hiera file.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "fleet.h"
#include "hiera.h"
#include "log.h"
#include "netif.h"
#include "options.h"
#include "schema.h"

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void entries_free(struct catalog_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(e[i].iface);
		free(e[i].address);
	}
	free(e);
}

/* Adds a service named in a file: invalid names are skipped with a warning,
 * since one bad line must not stop the others from being published. */
static int add_service_from(const char *source, const char *name, char ***list, size_t *n)
{
	if (!schema_name_valid(name)) {
		cli_warn("invalid service '%s' in '%s': %s, ignoring", name, source,
			  schema_name_problem(name));
		return 0;
	}
	if (cli_strv_contains(*list, name))
		return 0;
	return cli_strv_push(list, n, name);
}

/* The default services: the profile list file, node.services of the config
 * and the file names in node.profile_dir (each may be absent). */
static int default_services(const struct config *cfg, char ***list, size_t *n)
{
	int r;

	if (cfg->profile_list && *cfg->profile_list) {
		_cleanup_(fclosep) FILE *f = fopen(cfg->profile_list, "re");
		if (!f && errno != ENOENT)
			return cli_error(EXIT_USAGE, "cannot read profile list '%s': %m",
					 cfg->profile_list);
		if (f) {
			_cleanup_(strv_freep) char **lines = NULL;
			size_t nl = 0;
			if ((r = cli_read_lines(f, &lines, &nl)) < 0)
				return cli_error(EXIT_USAGE, "cannot read profile list '%s': %s",
						 cfg->profile_list, strerror(-r));
			for (size_t i = 0; i < nl; i++)
				if (add_service_from(cfg->profile_list, lines[i], list, n) < 0)
					return cli_error(1, "out of memory");
		}
	}
	for (size_t i = 0; cfg->services && cfg->services[i]; i++)
		if (add_service_from(cfg->path ? cfg->path : "the config", cfg->services[i], list,
				     n) < 0)
			return cli_error(1, "out of memory");
	if (cfg->profile_dir && *cfg->profile_dir) {
		DIR *d = opendir(cfg->profile_dir);
		/* As the daemon does: an unreadable directory (Puppet's own
		 * /var/lib/puppet is 0750 for non-root users) is not a reason to
		 * publish nothing of what the other sources name. */
		if (!d && errno != ENOENT)
			log_warnx("cannot read profile directory '%s': %m, ignoring",
				  cfg->profile_dir);
		if (d) {
			_cleanup_(strv_freep) char **names = NULL;
			size_t nn = 0;
			struct dirent *de;
			while ((de = readdir(d)))
				if (de->d_name[0] != '.' && cli_strv_push(&names, &nn, de->d_name) < 0) {
					closedir(d);
					return cli_error(1, "out of memory");
				}
			closedir(d);
			/* readdir's order is the file system's: sort for stable output. */
			if (nn)
				qsort(names, nn, sizeof(char *), compare_strings);
			for (size_t i = 0; i < nn; i++)
				if (add_service_from(cfg->profile_dir, names[i], list, n) < 0)
					return cli_error(1, "out of memory");
		}
	}
	return 0;
}

/* Copies n (iface, address) pairs, checking each: 64 on an invalid one. */
static int addresses_copy(const struct config_address *src, size_t n,
			  struct catalog_entry **ret, size_t *ret_n)
{
	struct catalog_entry *v = calloc(n ? n : 1, sizeof(*v));
	unsigned char bin[16];
	if (!v)
		return cli_error(1, "out of memory");
	for (size_t i = 0; i < n; i++) {
		if (!schema_name_valid(src[i].iface)) {
			entries_free(v, i);
			return cli_error(EXIT_USAGE, "invalid interface '%s' in node.addresses: %s",
					 src[i].iface, schema_name_problem(src[i].iface));
		}
		if (inet_pton(AF_INET, src[i].address, bin) != 1 &&
		    inet_pton(AF_INET6, src[i].address, bin) != 1) {
			entries_free(v, i);
			return cli_error(EXIT_USAGE, "invalid address '%s' in node.addresses",
					 src[i].address);
		}
		v[i].iface = strdup(src[i].iface);
		v[i].address = strdup(src[i].address);
		if (!v[i].iface || !v[i].address) {
			entries_free(v, i + 1);
			return cli_error(1, "out of memory");
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int cmd_publish_service(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **services = NULL;
	_cleanup_(freep) char *local = NULL;
	struct catalog_entry *addrs = NULL;
	const struct config *cfg = cli->opt->config;
	size_t n = 0, n_addrs = 0;
	enum status_state validation = STATE_INVALID;
	int64_t lease = 0;
	struct fleet *f;
	int r;

	for (int i = 0; i < argc; i++) {
		if ((r = cli_check_name("service", argv[i])))
			return r;
		if (!cli_strv_contains(services, argv[i]) && cli_strv_push(&services, &n, argv[i]) < 0)
			return cli_error(1, "out of memory");
	}
	if (argc == 0 && (r = default_services(cfg, &services, &n)))
		return r;
	if (n == 0) {
		log_info("no services to publish (profile list '%s')",
			 cfg->profile_list ? cfg->profile_list : "none");
		return 0;
	}

	/* Addresses: --address, else node.addresses, else the interfaces. */
	const struct cli_args *a = &cli->args;
	if (a->n_addresses) {
		addrs = a->addresses;
		n_addrs = a->n_addresses;
	} else if (cfg->n_addresses) {
		if ((r = addresses_copy(cfg->addresses, cfg->n_addresses, &addrs, &n_addrs)))
			return r;
	} else {
		r = netif_ipv4_addresses(&addrs, &n_addrs);
		if (r < 0)
			return cli_error(1, "cannot list the network interfaces: %s", strerror(-r));
	}
	bool own = addrs != a->addresses;
	if (n_addrs == 0) {
		if (own)
			entries_free(addrs, n_addrs);
		return cli_error(1, "no address to publish: no IPv4 interface but loopback; "
				 "use --address IFACE=ADDR");
	}

	r = cli_local_version(cli, &local);
	if (r <= 1)
		r = cli_fleet(cli, &f);
	if (r == 0 && (r = fleet_get_status(f, cli->opt->hostname, STATUS_VALIDATION,
					     &validation, NULL)) < 0)
		r = cli_etcd_error(cli, r, "cannot read this host's validation state");
	if (r == 0 && a->ttl > 0 && (r = etcd_lease_grant(f->etcd, a->ttl, &lease)) < 0)
		r = cli_etcd_error(cli, r, "cannot grant a lease");
	for (size_t i = 0; r == 0 && i < n; i++) {
		r = fleet_publish_service(f, services[i], cli->opt->hostname, addrs, n_addrs,
					  validation == STATE_SUCCESS, local, lease);
		if (r < 0) {
			_cleanup_(freep) char *what = NULL;
			if (asprintf(&what, "cannot publish '%s'", services[i]) < 0)
				what = NULL;
			r = cli_etcd_error(cli, r, what);
		} else {
			log_debug("published '%s' (%s)", services[i],
				  validation == STATE_SUCCESS ? "healthy" : "not healthy");
		}
	}
	if (own)
		entries_free(addrs, n_addrs);
	return r;
}

int cmd_unpublish_service(struct cli *cli, int argc, char **argv)
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
			return cli_etcd_error(cli, r, "cannot unpublish");
	}
	return 0;
}

/* Reads the catalog and renders it; 0 or an exit status. */
static int read_and_render(struct cli *cli, struct catalog *cat, struct buf *out)
{
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_read_catalog(f, 0, cat);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read the service catalog");
	if (cat->skipped)
		cli_warn("%zu malformed service entr%s in etcd, ignoring", cat->skipped,
			  cat->skipped == 1 ? "y" : "ies");
	if (out && (r = hiera_render(cat, out)) < 0)
		return cli_error(1, "cannot render the service catalog: %s", strerror(-r));
	return 0;
}

static cJSON *catalog_json(const struct catalog *cat)
{
	cJSON *doc = cJSON_CreateObject();
	cJSON *entries = cJSON_AddArrayToObject(doc, "entries");
	if (!entries || !cJSON_AddNumberToObject(doc, "revision", (double)cat->revision) ||
	    !cJSON_AddNumberToObject(doc, "skipped", (double)cat->skipped)) {
		cJSON_Delete(doc);
		return NULL;
	}
	for (size_t i = 0; i < cat->n; i++) {
		const struct catalog_entry *e = &cat->entries[i];
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddStringToObject(o, "service", e->service) ||
		    !cJSON_AddStringToObject(o, "host", e->host) ||
		    !cJSON_AddStringToObject(o, "iface", e->iface) ||
		    !cJSON_AddStringToObject(o, "address", e->address) ||
		    !cJSON_AddBoolToObject(o, "healthy", e->healthy)) {
			cJSON_Delete(o);
			cJSON_Delete(doc);
			return NULL;
		}
		cJSON_AddItemToArray(entries, o);
	}
	return doc;
}

int cmd_get_services(struct cli *cli, int argc, char **argv)
{
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	int r;

	if ((r = read_and_render(cli, &cat, cli->opt->json ? NULL : &out)))
		return r;
	if (cli->opt->json) {
		cJSON *doc = catalog_json(&cat);
		if (!doc)
			return cli_error(1, "out of memory");
		return cli_print_json(doc);
	}
	if (out.len && fwrite(out.data, 1, out.len, stdout) != out.len)
		return cli_error(EXIT_IOERR, "write failure on standard output");
	return 0;
}

int cmd_cache_services(struct cli *cli, int argc, char **argv)
{
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	const char *path = cli->args.output ? cli->args.output : cli->opt->config->hiera_services;
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

/* --- wait_for_service -------------------------------------------------------------- */

struct service_wait {
	const char *service;
	size_t count;
	bool healthy;
	size_t seen;
	int error;
};

/* Counts the hosts whose value hiera.c would render (healthy ones when asked). */
static bool enough_hosts(const struct keyset *s, void *userdata)
{
	struct service_wait *w = userdata;
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;

	for (size_t i = 0; i < s->n; i++) {
		const char *v = s->values[i] ? s->values[i] : "";
		int r = catalog_add_value(&cat, w->service, s->keys[i], v, strlen(v));
		if (r == -ENOMEM)
			w->error = r;
	}
	w->seen = catalog_count_hosts(&cat, w->service, w->healthy);
	return w->seen >= w->count;
}

int cmd_wait_for_service(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *dir = NULL;
	struct keyset set = { 0 };
	struct service_wait w = {
		.service = argv[0],
		.count = (size_t)cli->args.count,
		.healthy = cli->args.healthy,
	};
	double secs = cli->args.wait;
	int r;

	if ((r = cli_check_name("service", argv[0])))
		return r;
	if (!(dir = key_service_dir(cli->opt->prefix, argv[0])))
		return cli_error(1, "out of memory");
	r = cli_wait_keyset(cli, dir, 1, true, cli_deadline(secs), secs < 0, enough_hosts, &w,
			    &set);
	keyset_release(&set);
	if (w.error)
		return cli_error(1, "out of memory");
	if (r > 1)
		return r;
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cJSON_AddStringToObject(doc, "service", w.service) ||
		    !cJSON_AddNumberToObject(doc, "count", (double)w.count) ||
		    !cJSON_AddBoolToObject(doc, "healthy", w.healthy) ||
		    !cJSON_AddNumberToObject(doc, "seen", (double)w.seen) ||
		    !cJSON_AddBoolToObject(doc, "ok", r == 1)) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		int k = cli_print_json(doc);
		if (k)
			return k;
	}
	if (r == 1) {
		log_debug("%zu host%s of '%s' published", w.seen, w.seen == 1 ? "" : "s", w.service);
		return 0;
	}
	return cli_error(1, "timed out waiting for %zu host%s of %s%s, saw %zu", w.count,
			 w.count == 1 ? "" : "s", w.service, w.healthy ? " (healthy)" : "", w.seen);
}
