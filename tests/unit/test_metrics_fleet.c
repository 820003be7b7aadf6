/*
 * test_metrics_fleet.c — the fleet's exposition (metrics_fleet.c) from a
 * fabricated view: counts per group, version and state, the budget, and
 * label values that would break the text format if they were not escaped.
 * The fleet layer never hands out such names (key_split() refuses them),
 * but the renderer must not rely on it: here they come in raw.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "output/metrics.h"
#include "tap.h"

#define NOW 1700000000

static struct host_view host(const char *name, const char *version, enum status_state puppet,
			     enum status_state validation, bool alive, const char *group,
			     int64_t when)
{
	struct host_view h = {
		.host = (char *)name,
		.running_version = (char *)version,
		.puppet = puppet,
		.validation = validation,
		.provisioned = STATE_SUCCESS,
		.alive = alive,
		.group = (char *)group,
		.changed = when,
		.state_time = { when, when, when },
	};
	return h;
}

/* Whether text has the line line (whole). */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return true;
	return false;
}

static size_t count_prefix(const char *text, const char *prefix)
{
	size_t n = 0, len = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		n += strncmp(p, prefix, len) == 0;
	return n;
}

static void test_counts(void)
{
	struct host_view hosts[] = {
		host("db1", "v1", STATE_PENDING, STATE_SUCCESS, true, "dc2", NOW - 500),
		host("web1", "v2", STATE_SUCCESS, STATE_SUCCESS, true, "dc1", NOW - 100),
		host("web2", "v1", STATE_FAILED, STATE_SUCCESS, true, "dc1", NOW - 50),
		host("web3", NULL, STATE_INVALID, STATE_INVALID, false, "dc1", 0),
	};
	struct fleet_view v = { .hosts = hosts, .n = ELEMENTSOF(hosts), .current_version = "v2",
				.previous_version = "v1", .revision = 42 };
	struct rollout_state rs = { .version = "v2", .trigger = 40, .failed = 1 };
	struct rollout_policy p = { .max_parallel = 1, .has_max_failures = true, .max_failures = 3,
				    .progress_deadline = 900 };
	struct metrics_fleet m = { .view = &v, .rollout = &rs, .policy = &p, .now = NOW };
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;

	hosts[0].wait = "dependency";
	hosts[1].paused = "group dc1: power work";
	is_int(metrics_fleet_render(&m, &out), 0, "renders");
	const char *t = buf_str(&out);
	ok(has_line(t, "orchestrate_fleet_read_timestamp_seconds 1700000000"), "read time");
	ok(has_line(t, "orchestrate_fleet_read_revision 42"), "revision");
	ok(has_line(t, "orchestrate_fleet_hosts{group=\"dc1\"} 3"), "dc1 hosts");
	ok(has_line(t, "orchestrate_fleet_hosts_alive{group=\"dc1\"} 2"), "dc1 alive");
	ok(has_line(t, "orchestrate_fleet_hosts_unaccounted{group=\"dc1\"} 1"), "dc1 unaccounted");
	ok(has_line(t, "orchestrate_fleet_hosts_at_desired_version{group=\"dc1\"} 1"), "dc1 at v2");
	ok(has_line(t, "orchestrate_fleet_hosts_behind{group=\"dc1\"} 2"), "dc1 behind");
	ok(has_line(t, "orchestrate_fleet_hosts_failed{group=\"dc1\"} 1"), "dc1 failed");
	ok(has_line(t, "orchestrate_fleet_hosts_running_version{version=\"v1\"} 2"), "v1 hosts");
	ok(has_line(t, "orchestrate_fleet_hosts_unversioned 1"), "unversioned");
	ok(has_line(t, "orchestrate_fleet_hosts_state{type=\"puppet\",state=\"none\"} 1"), "state none");
	ok(has_line(t, "orchestrate_fleet_hosts_waiting{reason=\"dependency\"} 1"), "waiting");
	ok(has_line(t, "orchestrate_fleet_hosts_paused{group=\"dc1\"} 1"), "paused");
	ok(has_line(t, "orchestrate_fleet_hosts_waiting{reason=\"pause\"} 1"), "paused: waiting");
	ok(has_line(t, "orchestrate_fleet_waiting_host_since_timestamp_seconds{host=\"db1\",group=\"dc2\",reason=\"dependency\"} 1699999500"),
	   "the waiting host");
	ok(has_line(t, "orchestrate_fleet_desired_version_info{version=\"v2\",previous=\"v1\"} 1"),
	   "desired info");
	ok(has_line(t, "orchestrate_fleet_trigger_revision 40"), "trigger");
	ok(has_line(t, "orchestrate_fleet_failure_budget 3"), "budget");
	ok(has_line(t, "orchestrate_fleet_failure_budget_left 2"), "budget left");
	ok(has_line(t, "orchestrate_fleet_policy_progress_deadline_seconds 900"), "deadline");
	ok(has_line(t, "orchestrate_fleet_last_progress_timestamp_seconds 1699999900"), "progress");
	ok(has_line(t, "orchestrate_fleet_last_change_timestamp_seconds 1699999950"), "change");
	/* every family has its HELP and TYPE, once */
	is_int(count_prefix(t, "# HELP "), count_prefix(t, "# TYPE "), "a TYPE per HELP");
	ok(count_prefix(t, "# TYPE orchestrate_fleet_hosts gauge") == 1, "one TYPE per family");
}

static void test_hostile_labels(void)
{
	struct host_view hosts[] = {
		host("h\"1", "v\\1", STATE_PENDING, STATE_SUCCESS, true, "dc\n1", NOW - 10),
	};
	struct fleet_view v = { .hosts = hosts, .n = 1, .current_version = "v\"2\n",
				.previous_version = "a\\b" };
	struct rollout_state rs = { 0 };
	struct metrics_fleet m = { .view = &v, .rollout = &rs, .now = NOW };
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;

	hosts[0].wait = "slot";
	is_int(metrics_fleet_render(&m, &out), 0, "renders hostile names");
	const char *t = buf_str(&out);
	ok(has_line(t, "orchestrate_fleet_hosts{group=\"dc\\n1\"} 1"), "newline escaped");
	ok(has_line(t, "orchestrate_fleet_hosts_running_version{version=\"v\\\\1\"} 1"),
	   "backslash escaped");
	ok(has_line(t, "orchestrate_fleet_desired_version_info{version=\"v\\\"2\\n\",previous=\"a\\\\b\"} 1"),
	   "quote escaped");
	ok(has_line(t, "orchestrate_fleet_waiting_host_since_timestamp_seconds{host=\"h\\\"1\",group=\"dc\\n1\",reason=\"slot\"} 1699999990"),
	   "host escaped");
	/* no line of the file starts with anything but a family's name or '#' */
	bool clean = true;
	for (const char *p = t; *p; p = strchr(p, '\n') + 1) {
		clean &= strncmp(p, "orchestrate_fleet_", 18) == 0 || *p == '#';
		if (!strchr(p, '\n'))
			break;
	}
	ok(clean, "every line a sample or a comment");
	is_int(count_prefix(t, "orchestrate_fleet_failure_budget "), 0, "no budget without a policy");
	is_int(count_prefix(t, "orchestrate_fleet_failure_budget_left "), 0, "no budget left either");
	ok(count_prefix(t, "# TYPE orchestrate_fleet_failure_budget gauge") == 1,
	   "but the family is documented");
}

static void test_bounded_hosts(void)
{
	struct host_view hosts[15];
	char names[15][8];
	struct fleet_view v = { .hosts = hosts, .n = 15 };
	struct metrics_fleet m = { .view = &v, .now = NOW };
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;

	for (int i = 0; i < 15; i++) {
		snprintf(names[i], sizeof(names[i]), "h%02d", i);
		hosts[i] = host(names[i], "v1", STATE_PENDING, STATE_SUCCESS, true, NULL,
				NOW - 1000 + i);
		hosts[i].wait = "group";
	}
	is_int(metrics_fleet_render(&m, &out), 0, "renders 15 waiting hosts");
	const char *t = buf_str(&out);
	is_int(count_prefix(t, "orchestrate_fleet_waiting_host_since_timestamp_seconds{"), 10,
	       "ten hosts named");
	ok(strstr(t, "host=\"h00\"") && strstr(t, "host=\"h09\"") && !strstr(t, "host=\"h10\""),
	   "the ten longest waits");
	ok(has_line(t, "orchestrate_fleet_hosts_waiting{reason=\"group\"} 15"), "all counted");
	ok(has_line(t, "orchestrate_fleet_waiting_since_timestamp_seconds{reason=\"group\"} 1699999000"),
	   "the oldest wait");
	ok(has_line(t, "orchestrate_fleet_rollout_halted 0"), "no rollout read: not halted");
}

int main(void)
{
	test_counts();
	test_hostile_labels();
	test_bounded_hosts();
	return done_testing();
}
