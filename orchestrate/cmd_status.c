/*
 * cmd_status.c — the commands about build states: a host reporting its own
 * (update_own_status), looking at its own (local_health), and looking at the
 * fleet (get_failures, status), plus ping.
 *
 * The fleet-wide commands read everything at one revision with
 * fleet_view_read() and leave the layout of the output to render.c.  status
 * --watch redraws when etcd reports a change under the prefix, from the
 * revision it drew: a watch, never a timer.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "fleet.h"
#include "log.h"
#include "options.h"
#include "render.h"
#include "schema.h"

static bool is_integer(const char *s)
{
	if (*s == '-' || *s == '+')
		s++;
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* The exit_code stored with a state given by name. */
static int state_exit_code(enum status_state s)
{
	switch (s) {
	case STATE_FAILED: return 1;
	case STATE_PENDING: return -1;
	default: return 0;
	}
}

int cmd_update_own_status(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *local = NULL;
	const char *type_name = argv[0], *result = argv[1];
	struct fleet *f;
	int type, exit_code, r;
	enum status_state state;

	type = status_type_from_name(type_name);
	if (type < 0)
		return cli_error(EXIT_USAGE, "invalid status type '%s': expected puppet, "
				 "validation or provisioned", type_name);
	state = status_from_result((enum status_type)type, result);
	if (state == STATE_INVALID)
		return cli_error(EXIT_USAGE, "invalid result '%s' for %s: expected an exit code "
				 "or a state name", result, type_name);
	if (is_integer(result)) {
		long n = strtol(result, NULL, 10);
		exit_code = n < -255 ? -255 : n > 255 ? 255 : (int)n;
	} else {
		exit_code = state_exit_code(state);
	}
	r = cli_local_version(cli, &local);
	if (r > 1)
		return r;
	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_set_status(f, cli->opt->hostname, (enum status_type)type, state, local,
			     exit_code, cli->args.detail);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot set the status");
	log_debug("'%s' %s: %s", cli->opt->hostname, type_name, status_state_name(state));
	return 0;
}

/* --- get_failures ---------------------------------------------------------------------- */

int cmd_get_failures(struct cli *cli, int argc, char **argv)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(strv_freep) char **puppet = NULL;
	_cleanup_(strv_freep) char **validation = NULL;
	_cleanup_(strv_freep) char **unaccounted = NULL;
	size_t np = 0, nv = 0, nu = 0;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_view_read(f, &v);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read the fleet");
	for (size_t i = 0; i < v.n; i++) {
		const struct host_view *h = &v.hosts[i];
		if ((h->puppet == STATE_FAILED && cli_strv_push(&puppet, &np, h->host) < 0) ||
		    (h->validation == STATE_FAILED &&
		     cli_strv_push(&validation, &nv, h->host) < 0) ||
		    (h->provisioned == STATE_SUCCESS && !h->alive &&
		     cli_strv_push(&unaccounted, &nu, h->host) < 0))
			return cli_error(1, "out of memory");
	}

	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		cJSON *a = cli_json_strv(puppet), *b = cli_json_strv(validation),
		      *c = cli_json_strv(unaccounted);
		if (!doc || !a || !b || !c) {
			cJSON_Delete(doc);
			cJSON_Delete(a);
			cJSON_Delete(b);
			cJSON_Delete(c);
			return cli_error(1, "out of memory");
		}
		cJSON_AddItemToObject(doc, "failed_puppet", a);
		cJSON_AddItemToObject(doc, "failed_validation", b);
		cJSON_AddItemToObject(doc, "unaccounted", c);
		if ((r = cli_print_json(doc)))
			return r;
	} else if (cli->args.hosts) {
		for (size_t i = 0; i < np; i++)
			printf("failed puppet %s\n", puppet[i]);
		for (size_t i = 0; i < nv; i++)
			printf("failed validation %s\n", validation[i]);
		for (size_t i = 0; i < nu; i++)
			printf("unaccounted %s\n", unaccounted[i]);
	} else {
		printf("failed puppet: %zu\nfailed validation: %zu\nunaccounted: %zu\n", np, nv,
		       nu);
	}
	return np + nv + nu ? 1 : 0;
}

/* --- local_health ---------------------------------------------------------------------- */

static const char *state_or_none(enum status_state s)
{
	return s == STATE_INVALID ? NULL : status_state_name(s);
}

int cmd_local_health(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *puppet_detail = NULL;
	_cleanup_(freep) char *validation_detail = NULL;
	enum status_state puppet, validation;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_get_status(f, cli->opt->hostname, STATUS_PUPPET, &puppet, &puppet_detail);
	if (r >= 0)
		r = fleet_get_status(f, cli->opt->hostname, STATUS_VALIDATION, &validation,
				     &validation_detail);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read this host's status");

	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cJSON_AddStringToObject(doc, "host", cli->opt->hostname) ||
		    !cli_json_string_or_null(doc, "puppet", state_or_none(puppet)) ||
		    !cli_json_string_or_null(doc, "validation", state_or_none(validation)) ||
		    !cli_json_string_or_null(doc, "puppet_detail", puppet_detail) ||
		    !cli_json_string_or_null(doc, "validation_detail", validation_detail)) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		if ((r = cli_print_json(doc)))
			return r;
	} else {
		const char *p = state_or_none(puppet), *v = state_or_none(validation);
		printf("puppet: %s\nvalidation: %s\n", p ? p : "none", v ? v : "none");
		if (cli->opt->verbose > 0) {
			if (puppet_detail && *puppet_detail)
				printf("puppet detail:\n%s\n", puppet_detail);
			if (validation_detail && *validation_detail)
				printf("validation detail:\n%s\n", validation_detail);
		}
	}
	return puppet == STATE_SUCCESS && validation == STATE_SUCCESS ? 0 : 1;
}

/* --- status ------------------------------------------------------------------------------ */

static int status_draw(struct cli *cli, struct fleet *f, bool tty, int64_t *ret_revision)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	int r = fleet_view_read(f, &v);
	if (r < 0)
		return cli_etcd_error(cli, r, "cannot read the fleet");
	if (cli->args.watch && tty)
		fputs("\033[H\033[2J", stdout);	/* home, clear screen */
	if (cli->opt->json)
		r = render_status_json(&v, stdout);
	else
		r = render_status_table(&v, stdout, tty && !getenv("NO_COLOR"), fleet_now());
	if (r == -ENOMEM)
		return cli_error(1, "out of memory");
	if (r < 0 || fflush(stdout) != 0)
		return cli_error(EXIT_IOERR, "write failure on standard output");
	*ret_revision = v.revision;
	return 0;
}

static int status_on_events(const struct etcd_event *events, size_t n, int64_t revision,
			    void *userdata)
{
	return n > 0 ? 1 : 0;
}

/* The directory every key of the layout lives in: "P/" ("" without prefix),
 * taken from schema.c's own spelling of P/current_version. */
static char *prefix_root(const char *prefix)
{
	char *key = key_current_version(prefix);
	if (!key)
		return NULL;
	size_t len = strlen(key), tail = strlen("current_version");
	if (len >= tail && strcmp(key + len - tail, "current_version") == 0)
		key[len - tail] = '\0';
	return key;
}

int cmd_status(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *root = NULL;
	bool tty = isatty(STDOUT_FILENO);
	int64_t revision = 0;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)) || (r = status_draw(cli, f, tty, &revision)))
		return r;
	if (!cli->args.watch)
		return 0;
	if (!(root = prefix_root(cli->opt->prefix)))
		return cli_error(1, "out of memory");
	for (;;) {
		r = etcd_watch(f->etcd, root, true, revision + 1, 0, status_on_events, NULL, NULL);
		if (r < 0 && r != -ESTALE)
			return cli_etcd_error(cli, r, "watch");
		/* A change (or a compacted revision): read everything again. */
		if ((r = status_draw(cli, f, tty, &revision)))
			return r;
	}
}

/* --- ping -------------------------------------------------------------------------------- */

int cmd_ping(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	_cleanup_(freep) char *endpoint = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = etcd_status(f->etcd, &version, &endpoint);
	if (r < 0) {
		cli_etcd_error(cli, r, NULL);
		if (cli->opt->json) {
			cJSON *doc = cJSON_CreateObject();
			if (doc && cJSON_AddNullToObject(doc, "endpoint") &&
			    cJSON_AddNullToObject(doc, "version") &&
			    cJSON_AddStringToObject(doc, "error", etcd_last_error(f->etcd)))
				cli_print_json(doc);
			else
				cJSON_Delete(doc);
		}
		return 1;
	}
	if (cli->opt->json) {
		cJSON *doc = cJSON_CreateObject();
		if (!doc || !cJSON_AddStringToObject(doc, "endpoint", endpoint) ||
		    !cJSON_AddStringToObject(doc, "version", version)) {
			cJSON_Delete(doc);
			return cli_error(1, "out of memory");
		}
		return cli_print_json(doc);
	}
	printf("%s: etcd %s\n", endpoint, version);
	return 0;
}
