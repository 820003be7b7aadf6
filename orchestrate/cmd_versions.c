/*
 * cmd_versions.c — the commands about versions: the desired version
 * (trigger_update, rollback, current_version), this host's own version
 * (local_version, pending_update, update_own_info) and where the fleet is
 * (running_versions, hosts_at_version, verify_hosts, check_single_version).
 *
 * Each command validates its names before it asks for the fleet, so an
 * invalid name never reaches a request, and leaves keys and request bodies to
 * schema.c and fleet.c.  The CI gates (verify_hosts, check_single_version) can
 * block with --wait: they read the running_version directory at one revision
 * and follow an etcd watch from the next (cli_wait_keyset), never a polling
 * loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "cli.h"
#include "fleet.h"
#include "hiera.h"
#include "log.h"
#include "options.h"
#include "render.h"
#include "schema.h"

/* EX_TEMPFAIL: another writer changed the versions meanwhile; try again. */
#define EXIT_TEMPFAIL 75

/* update_own_info's default --interval: the seed's five-minute cron period,
 * which gives the same 610 s lease as the daemon's --once runs. */
#define DEFAULT_INTERVAL 300

/*
 * An -EPROTO from fleet.c is either a reply the gateway never sends or a
 * value that is not a version: both are an error, never an answer, so
 * neither may look like "none set" (exit 1) to a script.
 */
static int version_read_error(struct cli *cli, int r, const char *what)
{
	if (r != -EPROTO)
		return cli_etcd_error(cli, r, what);
	const char *e = cli->etcd ? etcd_last_error(cli->etcd) : NULL;
	if (e && strcmp(e, "etcd: no error") != 0)
		return cli_etcd_error(cli, r, what);
	return cli_error(etcd_error_exit_code(r), "%s: etcd holds no valid version there", what);
}

int cmd_trigger_update(struct cli *cli, int argc, char **argv)
{
	const char *version = argv[0], *old = cli->args.if_current;
	struct fleet *f;
	int r;

	if ((r = cli_check_name("version", version)) ||
	    (old && (r = cli_check_name("version", old))) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_trigger_update(f, version, old);
	if (r == 1)
		return cli_error(1, "current_version is not '%s', not changed", old);
	if (r == -EAGAIN)
		return cli_error(EXIT_TEMPFAIL, "current_version kept changing, not changed; "
				 "try again");
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot set current_version");
	log_debug("current_version set to '%s'", version);
	return 0;
}

int cmd_rollback(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_rollback(f, &version);
	if (r == 1)
		return cli_error(1, "nothing to roll back to: no previous_version, "
				 "or it is the current one");
	if (r == -EBUSY)
		return cli_error(EXIT_TEMPFAIL, "current_version changed meanwhile, "
				 "not rolled back");
	if (r < 0)
		return version_read_error(cli, r, "cannot roll back");
	printf("rolled back to %s\n", version);
	return 0;
}

int cmd_current_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_current_version(f, &version, NULL);
	if (r < 0)
		return version_read_error(cli, r, "cannot read current_version");
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cli_json_string_or_null(doc, "current_version", version)) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		if ((r = cli_print_json(doc)))
			return r;
	} else if (version) {
		printf("%s\n", version);
	}
	if (!version) {
		if (!cli->opt->json)
			log_debug("no current_version set");
		return 1;
	}
	return 0;
}

int cmd_local_version(struct cli *cli, int argc, char **argv)
{
	const char *path = cli->opt->local_version_file;
	int r;

	if (argc == 1) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		bool changed = false;

		if ((r = cli_check_name("version", argv[0])))
			return r;
		if (buf_printf(&b, "%s\n", argv[0]) < 0)
			return cli_error(1, "out of memory");
		r = file_write_atomic(path, b.data, b.len, 0644, &changed);
		if (r < 0)
			return cli_error(EXIT_IOERR, "cannot write local version file '%s': %s",
					 path, strerror(-r));
		log_debug("local version file '%s' %s", path, changed ? "written" : "unchanged");
		return 0;
	}

	_cleanup_(freep) char *version = NULL;
	r = cli_local_version(cli, &version);
	if (r > 1)
		return r;
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cli_json_string_or_null(doc, "local_version", version)) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		return cli_print_json(doc);
	}
	if (version)
		printf("%s\n", version);
	else
		log_debug("no local version in '%s'", path);
	return 0;
}

/*
 * pending_update's table (SPEC §3): 0 update pending; 1 up to date; 2 etcd
 * unreachable but the local version is known; 3 no desired version set, or etcd
 * unreachable and no local version.  An authentication failure is not
 * "unreachable": it exits 77 so that a misconfigured node is noticed.
 */
int cmd_pending_update(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	_cleanup_(freep) char *desired = NULL;
	_cleanup_(buf_releasep) struct buf line = BUF_INIT;
	bool reachable = true;
	struct fleet *f;
	int r, status;

	r = cli_local_version(cli, &local);
	if (r > 1)
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_current_version(f, &desired, NULL);
	if (r == -EACCES)
		return cli_etcd_error(cli, r, "cannot read current_version");
	if (r == -ENOMEM)
		return cli_error(1, "out of memory");
	if (r < 0) {
		/* Unreachable, or an answer that is not a version: either way the
		 * desired version is unknown, which is never a reason to run. */
		const char *why = "etcd unreachable";
		if (r == -EPROTO) {
			cli_warn("current_version does not hold a valid version");
			why = "desired version unreadable";
		} else {
			log_debug("%s", etcd_last_error(cli->etcd));
		}
		reachable = false;
		desired = NULL;
		status = local ? 2 : 3;
		r = local ? buf_printf(&line, "%s; local version %s", why, local)
			  : buf_printf(&line, "%s; no local version", why);
	} else if (!desired) {
		status = 3;
		r = buf_printf(&line, "no desired version set");
	} else if (local && strcmp(local, desired) == 0) {
		status = 1;
		r = buf_printf(&line, "up to date at %s", desired);
	} else {
		status = 0;
		r = buf_printf(&line, "update pending: local %s, desired %s",
			       local ? local : "none", desired);
	}
	if (r < 0)
		return cli_error(1, "out of memory");

	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cli_json_string_or_null(doc, "local", local) ||
		    !cli_json_string_or_null(doc, "desired", desired) ||
		    !cJSON_AddBoolToObject(doc, "pending", status == 0) ||
		    !cJSON_AddBoolToObject(doc, "reachable", reachable) ||
		    !cJSON_AddStringToObject(doc, "message", buf_str(&line))) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		if ((r = cli_print_json(doc)))
			return r;
	} else {
		printf("%s\n", buf_str(&line));
	}
	return status;
}

int cmd_update_own_info(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	const char *version = cli->args.version;
	long interval = cli->args.interval > 0 ? cli->args.interval : DEFAULT_INTERVAL;
	int64_t lease = 0;
	struct fleet *f;
	int r;

	if (version) {
		if ((r = cli_check_name("version", version)))
			return r;
	} else {
		r = cli_local_version(cli, &local);
		if (r > 1)
			return r;
		if (!local) {
			log_info("no local version in '%s', nothing to publish",
				 cli->opt->local_version_file);
			return 0;
		}
		version = local;
	}
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = etcd_lease_grant(f->etcd, 2 * (int64_t)interval + 10, &lease);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot grant a lease");
	r = fleet_set_running_version(f, cli->opt->hostname, version, lease);
	if (r < 0) {
		int status = cli_etcd_error(cli, r, "cannot publish the running version");
		/* Best effort: an unused lease would only expire later. */
		etcd_lease_revoke(f->etcd, lease);
		return status;
	}
	log_debug("'%s' published at '%s' for %ld s", cli->opt->hostname, version,
		  2 * interval + 10);
	return 0;
}

int cmd_running_versions(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **versions = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_running_versions(f, &versions);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read running versions");
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		cJSON *list = cli_json_strv(versions);
		if (!doc || !list || !cJSON_AddItemToObject(doc, "running_versions", list)) {
			cJSON_Delete(doc);
			cJSON_Delete(list);
			return cli_error(1, "out of memory");
		}
		return cli_print_json(doc);
	}
	if (render_lines(versions, stdout) < 0)
		return cli_error(EXIT_IOERR, "write failure on standard output");
	return 0;
}

int cmd_hosts_at_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_check_name("version", argv[0])) || (r = cli_fleet(cli, &f)))
		return r;
	r = fleet_hosts_at_version(f, argv[0], &hosts, NULL);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read hosts at version");
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		cJSON *list = cli_json_strv(hosts);
		if (!doc || !list || !cJSON_AddStringToObject(doc, "version", argv[0]) ||
		    !cJSON_AddItemToObject(doc, "hosts", list)) {
			cJSON_Delete(doc);
			cJSON_Delete(list);
			return cli_error(1, "out of memory");
		}
		return cli_print_json(doc);
	}
	if (render_lines(hosts, stdout) < 0)
		return cli_error(EXIT_IOERR, "write failure on standard output");
	return 0;
}

/* --- verify_hosts ------------------------------------------------------------------ */

static bool all_hosts_present(const struct keyset *s, void *userdata)
{
	const struct keyset *wanted = userdata;
	/* The set holds only hosts at the version: fewer than wanted can't do. */
	if (s->n < wanted->n)
		return false;
	for (size_t i = 0; i < wanted->n; i++)
		if (keyset_find(s, wanted->keys[i]) < 0)
			return false;
	return true;
}

/* Adds each name to the wanted set once, keeping the first spelling's order. */
static int want_hosts(struct keyset *wanted, char **names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = cli_check_name("host", names[i]);
		if (r)
			return r;
		if (keyset_put(wanted, names[i], NULL, 0) < 0)
			return cli_error(1, "out of memory");
	}
	return 0;
}

int cmd_verify_hosts(struct cli *cli, int argc, char **argv)
{
	_cleanup_(keyset_release) struct keyset wanted = { 0 };
	_cleanup_(keyset_release) struct keyset set = { 0 };
	_cleanup_(freep) char *dir = NULL;
	int r;

	if ((r = cli_check_name("version", argv[0])))
		return r;
	if (argc > 1) {
		if ((r = want_hosts(&wanted, argv + 1, (size_t)argc - 1)))
			return r;
	} else {
		_cleanup_(strv_freep) char **lines = NULL;
		size_t nl = 0;
		r = cli_read_lines(stdin, &lines, &nl);
		if (r < 0)
			return cli_error(EXIT_USAGE, "cannot read hosts from standard input: %s",
					 strerror(-r));
		if ((r = want_hosts(&wanted, lines, nl)))
			return r;
	}
	if (wanted.n == 0)
		return cli_error(EXIT_USAGE, "'verify_hosts' needs at least one HOST "
				 "(arguments or one a line on stdin)");

	dir = key_running_version_version_dir(cli->opt->prefix, argv[0]);
	if (!dir)
		return cli_error(1, "out of memory");
	r = cli_wait_keyset(cli, dir, 1, false, cli_deadline(cli->args.wait), false,
			    all_hosts_present, &wanted, &set);
	if (r > 1)
		return r;

	_cleanup_(strv_freep) char **missing = NULL;
	size_t nm = 0;
	for (size_t i = 0; i < wanted.n; i++)
		if (keyset_find(&set, wanted.keys[i]) < 0 &&
		    cli_strv_push(&missing, &nm, wanted.keys[i]) < 0)
			return cli_error(1, "out of memory");

	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		cJSON *list = cli_json_strv(missing);
		if (!doc || !list || !cJSON_AddStringToObject(doc, "version", argv[0]) ||
		    !cJSON_AddItemToObject(doc, "missing", list)) {
			cJSON_Delete(doc);
			cJSON_Delete(list);
			return cli_error(1, "out of memory");
		}
		if ((r = cli_print_json(doc)))
			return r;
	} else if (render_lines(missing, stdout) < 0) {
		return cli_error(EXIT_IOERR, "write failure on standard output");
	}
	return nm ? 1 : 0;
}

/* --- check_single_version ------------------------------------------------------------ */

/* The keyset holds "VERSION/HOST" suffixes below running_version/. */
static bool only_version_runs(const struct keyset *s, void *userdata)
{
	const char *version = userdata;
	size_t len = strlen(version);
	if (s->n == 0)
		return false;
	for (size_t i = 0; i < s->n; i++)
		if (strncmp(s->keys[i], version, len) != 0 || s->keys[i][len] != '/')
			return false;
	return true;
}

struct version_count {
	char *version;
	long hosts;
};

static int compare_version_count(const void *a, const void *b)
{
	return strcmp(((const struct version_count *)a)->version,
		      ((const struct version_count *)b)->version);
}

int cmd_check_single_version(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *dir = NULL;
	_cleanup_(freep) struct version_count *counts = NULL;
	struct keyset set = { 0 };
	size_t nc = 0;
	bool ok;
	int r;

	if ((r = cli_check_name("version", argv[0])))
		return r;
	dir = key_running_version_dir(cli->opt->prefix);
	if (!dir)
		return cli_error(1, "out of memory");
	r = cli_wait_keyset(cli, dir, 2, false, cli_deadline(cli->args.wait), false,
			    only_version_runs, argv[0], &set);
	if (r > 1) {
		keyset_release(&set);
		return r;
	}
	ok = r == 1;

	/* Hosts per version, for -v and --json. */
	counts = calloc(set.n + 1, sizeof(*counts));
	if (!counts) {
		keyset_release(&set);
		return cli_error(1, "out of memory");
	}
	for (size_t i = 0; i < set.n; i++) {
		char *slash = strchr(set.keys[i], '/');
		if (slash)
			*slash = '\0';
		size_t j;
		for (j = 0; j < nc; j++)
			if (strcmp(counts[j].version, set.keys[i]) == 0)
				break;
		if (j == nc)
			counts[nc++].version = set.keys[i];
		counts[j].hosts++;
	}
	qsort(counts, nc, sizeof(*counts), compare_version_count);

	r = 0;
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		cJSON *running = cJSON_CreateObject();
		bool oom = !doc || !running || !cJSON_AddStringToObject(doc, "version", argv[0]) ||
			   !cJSON_AddBoolToObject(doc, "single", ok);
		for (size_t j = 0; !oom && j < nc; j++)
			oom = !cJSON_AddNumberToObject(running, counts[j].version,
						       (double)counts[j].hosts);
		if (oom || !cJSON_AddItemToObject(doc, "running_versions", running)) {
			cJSON_Delete(doc);
			cJSON_Delete(running);
			r = cli_error(1, "out of memory");
		} else {
			r = cli_print_json(doc);
		}
	} else if (cli->opt->verbose > 0) {
		for (size_t j = 0; j < nc; j++)
			printf("%s: %ld host%s\n", counts[j].version, counts[j].hosts,
			       counts[j].hosts == 1 ? "" : "s");
	}
	keyset_release(&set);
	if (r)
		return r;
	return ok ? 0 : 1;
}
