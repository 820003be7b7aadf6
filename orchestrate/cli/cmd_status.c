/*
 * cmd_status.c — the commands about build states: a host reporting its own
 * (update_own_status), looking at its own (local_health), and looking at the
 * fleet (get_failures, status), plus ping.
 *
 * The fleet-wide commands read everything at one revision with
 * fleet_view_read() and leave the layout of the output to render.c.  status
 * --watch redraws when etcd reports a change under the prefix, from the
 * revision it drew: a watch (fleet_wait_change_until()); on a terminal it also
 * redraws every few seconds so that AGE ticks, and it outlives an etcd outage.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>

#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/fileio.h"
#include "cli.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "base/log.h"
#include "output/metrics.h"
#include "output/render.h"
#include "fleet/schema.h"
#include "base/strv.h"

static const char *arg_detail;
static bool arg_hosts;
static bool arg_watch;

/* --- update_own_status -------------------------------------------------------------- */

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

static int cmd_update_own_status(struct cli *cli, int argc, char **argv)
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
			     exit_code, arg_detail);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot set the status");
	log_debug("'%s' %s: %s", cli->opt->hostname, type_name, status_state_name(state));
	return 0;
}

static const struct cli_option update_own_status_options[] = {
	CLI_STRING("detail", "TEXT", &arg_detail,
		   "stored with the state (at most 4 KiB, the tail is kept)"),
	CLI_OPTIONS_END,
};

const struct command command_update_own_status = {
	.name = "update_own_status", .fn = cmd_update_own_status, .min_args = 2, .max_args = 2,
	.group = G_NODES, .options = update_own_status_options, .needs = "a TYPE and a RESULT",
	.synopsis = "update_own_status TYPE RESULT [--detail TEXT]",
	.description = "set this host's state of TYPE (puppet, validation, provisioned) from RESULT,\n"
		       "an exit code or a state name",
};

/* --- get_failures ---------------------------------------------------------------------- */

/*
 * A host that retries a failed run keeps its failed state (the daemon writes
 * its attempts onto it), so it counts here until a run succeeds.  A halted
 * rollout is a failure too, even with no host failed (a progress_deadline):
 * one line on stderr says so, and the exit status is 1.
 */
static int cmd_get_failures(struct cli *cli, int argc, char **argv)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(fleet_failures_releasep) struct fleet_failures fl = { 0 };
	_cleanup_(rollout_state_releasep) struct rollout_state rs = { 0 };
	_cleanup_(buf_releasep) struct buf halt = BUF_INIT;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_view_read(f, &v);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	if ((r = fleet_rollout_state(f, &rs)) < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout's state");
	if ((r = fleet_view_failures(&v, &fl)) < 0)
		return cli_error(1, "out of memory");
	if (render_halt_text(&rs, fleet_now(), &halt) < 0)
		return cli_error(1, "out of memory");
	if (rs.halted)
		cli_warn("rollout of %s %s", rs.version, buf_str(&halt));
	else if (rs.reverted)
		cli_warn("rollout %s", buf_str(&halt));
	if (cli->opt->json)
		r = render_json_failures(stdout, &fl, &rs);
	else
		r = render_failures(stdout, &fl, arg_hosts);
	if ((r = cli_output(r)))
		return r;
	return fl.n_puppet + fl.n_validation + fl.n_unaccounted || rs.halted ? 1 : 0;
}

static const struct cli_option get_failures_options[] = {
	CLI_FLAG("hosts", &arg_hosts,
		 "list them, one \"failed puppet HOST\", \"failed validation HOST\"\n"
		 "or \"unaccounted HOST\" a line"),
	CLI_OPTIONS_END,
};

const struct command command_get_failures = {
	.name = "get_failures", .fn = cmd_get_failures, .group = G_CI,
	.options = get_failures_options,
	.synopsis = "get_failures [--hosts]",
	.description = "count hosts failed in puppet or validation (retrying ones too), and\n"
		       "unaccounted hosts; say so on stderr when the rollout is halted;\n"
		       "exit 0 when there are none and no halt, 1 otherwise",
};

/* --- local_health ---------------------------------------------------------------------- */

static int cmd_local_health(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *puppet_detail = NULL;
	_cleanup_(freep) char *validation_detail = NULL;
	struct render_health h = { .host = cli->opt->hostname };
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_get_status(f, h.host, STATUS_PUPPET, &h.puppet, &puppet_detail);
	if (r >= 0)
		r = fleet_get_status(f, h.host, STATUS_VALIDATION, &h.validation,
				     &validation_detail);
	if (r < 0)
		return cli_fleet_error(cli, r, "cannot read this host's status");
	h.puppet_detail = puppet_detail;
	h.validation_detail = validation_detail;
	if (cli->opt->json)
		r = render_json_health(stdout, &h);
	else
		r = render_health(stdout, &h, cli->opt->verbose > 0);
	if ((r = cli_output(r)))
		return r;
	return h.puppet == STATE_SUCCESS && h.validation == STATE_SUCCESS ? 0 : 1;
}

const struct command command_local_health = {
	.name = "local_health", .fn = cmd_local_health, .group = G_NODES,
	.synopsis = "local_health [-v]",
	.description = "print this host's puppet and validation states; exit 0 when both succeeded",
	.help = "  -v                 print the detail stored with each state too\n",
};

/* --- status ------------------------------------------------------------------------------ */

static bool arg_failed;
static bool arg_behind;
static bool arg_summary;
static const char *arg_status_group;
static const char *arg_status_host;
static bool arg_prometheus;
static const char *arg_status_output;

/* The width to draw in: the terminal's (TIOCGWINSZ on stdout), else $COLUMNS,
 * else 80. */
static size_t terminal_width(void)
{
	struct winsize ws;
	const char *env = getenv("COLUMNS");

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (env && *env) {
		char *end;
		long n = strtol(env, &end, 10);
		if (!*end && n > 0 && n < 10000)
			return (size_t)n;
	}
	return 80;
}

/* status HOST: the host in full. */
static int status_host(struct cli *cli, struct fleet *f, const char *host)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(host_record_releasep) struct host_record rec = { 0 };
	const struct host_view *h = NULL;
	int r;

	if ((r = fleet_view_read(f, &v)) < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	for (size_t i = 0; i < v.n && !h; i++)
		if (strcmp(v.hosts[i].host, host) == 0)
			h = &v.hosts[i];
	if (!h)
		return cli_error(1, "no host '%s' in the fleet (see 'orchestrate status')", host);
	if ((r = fleet_host_record(f, host, &rec)) < 0)
		return cli_fleet_error(cli, r, "cannot read the host");
	if (cli->opt->json)
		return cli_output(render_json_host(stdout, &v, h, &rec));
	return cli_output(render_host(stdout, &v, h, &rec, fleet_now()));
}

struct status_draw {
	bool tty, watch;
	char **hosts;			/* the filter's names; NULL: any */
	char heard[128];		/* "last heard from etcd: ..." */
	const char *banner;
};

static int status_draw(struct cli *cli, struct fleet *f, struct status_draw *d,
		       struct fleet_view *v)
{
	_cleanup_(rollout_policy_releasep) struct rollout_policy policy = { 0 };
	_cleanup_(rollout_state_releasep) struct rollout_state rs = { 0 };
	_cleanup_(freep) char *raw = NULL;
	struct render_status_options o = {
		.width = terminal_width(), .color = d->tty && !getenv("NO_COLOR"),
		.now = fleet_now(), .failed = arg_failed, .behind = arg_behind,
		.group = arg_status_group, .hosts = d->hosts, .summary = arg_summary,
		.show_policy = true,
		.heard = d->watch ? d->heard : NULL, .banner = d->banner,
	};
	int r;

	/* the rollout's halt, canaries and failures: a read of rollout/ */
	if ((r = fleet_rollout_state(f, &rs)) < 0) {
		if (!d->watch || r == -ENOMEM || r == -EACCES)
			return cli_fleet_error(cli, r, "cannot read the rollout's state");
		rollout_state_release(&rs);	/* --watch: drawn without it this time */
	}
	o.rollout = &rs;
	if (cli->opt->json) {
		r = render_status_json(v, &rs, stdout);
	} else {
		r = fleet_get_policy(f, &policy, &raw);
		if (r == -EPROTO)
			o.policy_problem = "rollout/policy holds no valid policy";
		else if (r < 0)
			return cli_fleet_error(cli, r, "cannot read the rollout policy");
		o.policy = r == 1 ? &policy : NULL;
		if (d->watch && d->tty)
			fputs("\033[H\033[2J", stdout);	/* home, clear screen */
		r = render_status_view(v, stdout, &o);
	}
	if (r >= 0 && fflush(stdout) != 0)
		r = -EIO;
	return cli_output(r);
}

static void heard_now(struct status_draw *d, int64_t revision)
{
	time_t t = time(NULL);
	struct tm tm;
	char when[32] = "?";

	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%H:%M:%S", &tm);
	snprintf(d->heard, sizeof(d->heard), "last heard from etcd: %s (revision %lld)", when,
		 (long long)revision);
}

/*
 * status --watch: redraw on a change under the prefix (a watch), and at
 * least every few seconds so that AGE keeps ticking; when etcd cannot be
 * reached, keep the last picture with a banner saying since when, and try
 * again with a backoff instead of exiting.
 */
static int status_watch(struct cli *cli, struct fleet *f, struct status_draw *d)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(freep) char *banner = NULL;
	static const struct backoff b = { MSEC_PER_SEC, 30 * MSEC_PER_SEC, MSEC_PER_SEC / 2 };
	int64_t revision = 0;
	unsigned failures = 0;
	int r;

	for (;;) {
		struct fleet_view fresh = { 0 };
		r = fleet_view_read(f, &fresh);
		if (r < 0) {
			if (r == -ENOMEM || r == -EACCES || r == -EINVAL)
				return cli_fleet_error(cli, r, "cannot read the fleet");
			if (!banner) {
				time_t t = time(NULL);
				struct tm tm;
				char when[32] = "?";
				if (localtime_r(&t, &tm))
					strftime(when, sizeof(when), "%H:%M:%S", &tm);
				if (asprintf(&banner, "etcd unreachable since %s: %s; "
					     "reconnecting", when,
					     fleet_last_error(f) ? fleet_last_error(f) : "?") < 0)
					return cli_error(1, "out of memory");
			}
			d->banner = banner;
			if (!d->tty)
				cli_warn("%s", banner);
			else if ((r = status_draw(cli, f, d, &v)))
				return r;
			clock_sleep_ms(backoff_delay(&b, ++failures));
			continue;
		}
		fleet_view_release(&v);
		v = fresh;
		if (banner)
			cli_warn("etcd answers again");
		free(banner);
		banner = NULL;
		d->banner = NULL;
		failures = 0;
		revision = v.revision;
		heard_now(d, revision);
		if ((r = status_draw(cli, f, d, &v)))
			return r;
		/* A change (or a compacted revision) reads everything again; on a
		 * terminal, so does a tick, for AGE and "last heard". */
		for (;;) {
			r = fleet_wait_change_until(f, revision, d->tty ? clock_deadline_ms(5)
									: CLOCK_DEADLINE_NEVER);
			if (r != 0)
				break;
			heard_now(d, revision);
			if ((r = status_draw(cli, f, d, &v)))
				return r;
		}
		if (r < 0 && (r == -ENOMEM || r == -EACCES))
			return cli_fleet_error(cli, r, "watch");
	}
}

/*
 * status --prometheus: the fleet as a Prometheus text exposition
 * (metrics_fleet.c), from the reads status makes — the view, the rollout's
 * records, the policy — and no other.  With --output, written atomically
 * (file_write_atomic(): what the textfile collector reads is always a whole
 * file); else on stdout.
 */
static int status_prometheus(struct cli *cli, int argc)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	_cleanup_(rollout_policy_releasep) struct rollout_policy policy = { 0 };
	_cleanup_(rollout_state_releasep) struct rollout_state rs = { 0 };
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	struct metrics_fleet m = { .view = &v, .rollout = &rs };
	struct fleet *f;
	int r;

	if (argc > 0 || arg_status_host || arg_failed || arg_behind || arg_status_group ||
	    arg_summary || arg_watch || cli->opt->json)
		return cli_error(EXIT_USAGE, "--prometheus counts the whole fleet: it takes no "
				 "HOST, --host, --group, --failed, --behind, --summary, --watch "
				 "or --json");
	if (arg_status_output && !*arg_status_output)
		return cli_error(EXIT_USAGE, "--output: an empty file name");
	if ((r = cli_fleet(cli, &f)))
		return r;
	if ((r = fleet_view_read(f, &v)) < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	if ((r = fleet_rollout_state(f, &rs)) < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout's state");
	r = fleet_get_policy(f, &policy, NULL);
	if (r == -EPROTO)
		m.policy_invalid = true;
	else if (r < 0)
		return cli_fleet_error(cli, r, "cannot read the rollout policy");
	m.policy = r == 1 ? &policy : NULL;
	m.now = fleet_now();
	if ((r = metrics_fleet_render(&m, &out)) < 0)
		return cli_error(1, "out of memory");
	if (!arg_status_output) {
		if (fwrite(out.data, 1, out.len, stdout) != out.len)
			return cli_output(-EIO);
		return 0;
	}
	r = file_write_atomic(arg_status_output, out.data, out.len, 0644, NULL);
	if (r < 0)
		return cli_error(EXIT_IOERR, "cannot write '%s': %s; the old file is kept",
				 arg_status_output, strerror(-r));
	return 0;
}

static int cmd_status(struct cli *cli, int argc, char **argv)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	struct status_draw d = { .tty = isatty(STDOUT_FILENO), .watch = arg_watch };
	size_t n = 0;
	struct fleet *f;
	int r;

	if (arg_status_group && (r = cli_check_name("group", arg_status_group)))
		return r;
	for (int i = 0; i < argc; i++)
		if ((r = cli_check_name("host", argv[i])))
			return r;
	if (arg_status_host && (r = cli_check_name("host", arg_status_host)))
		return r;
	if (arg_prometheus)
		return status_prometheus(cli, argc);
	if (arg_status_output)
		return cli_error(EXIT_USAGE, "--output goes with --prometheus");
	/* one HOST and nothing else: that host in full */
	if (argc == 1 && !arg_status_host && !arg_failed && !arg_behind && !arg_status_group &&
	    !arg_summary && !arg_watch) {
		if ((r = cli_fleet(cli, &f)))
			return r;
		return status_host(cli, f, argv[0]);
	}
	for (int i = 0; i < argc; i++)
		if (strv_push(&hosts, &n, argv[i]) < 0)
			return cli_error(1, "out of memory");
	if (arg_status_host && strv_push(&hosts, &n, arg_status_host) < 0)
		return cli_error(1, "out of memory");
	d.hosts = hosts;
	if ((r = cli_fleet(cli, &f)))
		return r;
	if (arg_watch)
		return status_watch(cli, f, &d);

	_cleanup_(fleet_view_releasep) struct fleet_view v = { 0 };
	if ((r = fleet_view_read(f, &v)) < 0)
		return cli_fleet_error(cli, r, "cannot read the fleet");
	return status_draw(cli, f, &d, &v);
}

static const struct cli_option status_options[] = {
	CLI_FLAG("failed", &arg_failed, "only hosts failed in puppet or validation"),
	CLI_FLAG("behind", &arg_behind, "only hosts not at the desired version"),
	CLI_STRING("group", "GROUP", &arg_status_group, "only the hosts of GROUP"),
	CLI_STRING("host", "HOST", &arg_status_host,
		   "only HOST (as a row; 'status HOST' shows it in full)"),
	CLI_FLAG("summary", &arg_summary, "the header and totals, no rows"),
	CLI_FLAG("watch", &arg_watch,
		 "redraw on every change (an etcd watch), and every 5 s on a\n"
		 "terminal so that AGE ticks; survives an etcd outage"),
	CLI_FLAG("prometheus", &arg_prometheus,
		 "the fleet as Prometheus metrics (orchestrate_fleet_*) for\n"
		 "node_exporter's textfile collector; no filter, no --watch"),
	CLI_STRING("output", "FILE", &arg_status_output,
		   "with --prometheus: write FILE atomically instead of stdout"),
	CLI_OPTIONS_END,
};

const struct command command_status = {
	.name = "status", .fn = cmd_status, .max_args = -1, .group = G_HUMANS,
	.options = status_options,
	.synopsis = "status [HOST ...] [--failed] [--behind] [--group G] [--host H] [--summary] [--watch]\n"
		    "       [--prometheus [--output FILE]]",
	.description = "the desired version, policy and progress per group; then one row a host\n"
		       "(version, puppet, validation, alive, group, age, and why it failed,\n"
		       "waits or is paused), failed hosts first, then waiting, then behind;\n"
		       "then totals.  'status HOST' shows one host in full; --prometheus prints\n"
		       "the fleet's metrics instead (orchestrate(1), FLEET METRICS)",
};

/* --- ping -------------------------------------------------------------------------------- */

static int cmd_ping(struct cli *cli, int argc, char **argv)
{
	_cleanup_(freep) char *version = NULL;
	_cleanup_(freep) char *endpoint = NULL;
	struct fleet *f;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	r = fleet_ping(f, &version, &endpoint);
	if (r < 0) {
		/* orchestrate(1) gives ping its own code: 1, whatever failed */
		cli_fleet_error(cli, r, NULL);
		if (cli->opt->json && (r = cli_output(render_json_ping(stdout, NULL, NULL,
									fleet_last_error(f)))))
			return r;
		return 1;
	}
	if (cli->opt->json)
		return cli_output(render_json_ping(stdout, endpoint, version, NULL));
	return cli_output(render_ping(stdout, endpoint, version));
}

const struct command command_ping = {
	.name = "ping", .fn = cmd_ping, .group = G_HUMANS,
	.synopsis = "ping",
	.description = "check that etcd answers; print the member and its version; exit 1 when not",
};
