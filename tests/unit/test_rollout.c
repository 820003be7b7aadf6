/*
 * test_rollout.c — the codecs of a rollout that stops itself: the safety keys
 * of the rollout policy (rollout_policy_decode/encode/problem), the records
 * under rollout/ (rollout_record_decode/encode/current), and how output/
 * shows them: the policy, the header's halt, canary and budget lines, a
 * failed host's attempts and a pending host's wait reason in DETAIL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "output/render.h"
#include "tap.h"

#define NOW 1700000000

/* --- the policy's safety keys ------------------------------------------------------ */

static void test_policy_codec(void)
{
	static const char *const valid[] = {
		"{\"max_parallel\":2,\"max_failures\":3,\"max_fail_percent\":12.5,"
		"\"healthy_deadline\":600,\"progress_deadline\":1800,\"min_healthy_time\":60,"
		"\"auto_revert\":true,\"canary\":2,\"auto_promote\":true}",
		"{\"max_failures\":0}",
		"{\"max_fail_percent\":100}",
		"{\"progress_deadline\":5,\"auto_revert\":true}",
		"{\"max_percent\":10,\"canary\":1}",
	};
	static const char *const invalid[] = {
		"{\"max_failures\":-1}", "{\"max_failures\":1.5}", "{\"max_failures\":\"3\"}",
		"{\"max_fail_percent\":101}", "{\"max_fail_percent\":-1}",
		"{\"max_fail_percent\":\"x\"}", "{\"healthy_deadline\":-5}",
		"{\"min_healthy_time\":0.5}", "{\"canary\":-1}", "{\"auto_revert\":1}",
		"{\"auto_promote\":\"yes\"}", "{\"auto_promote\":true}",
		"{\"auto_revert\":true}", "{\"max_parallel\":2,\"auto_revert\":true}",
		"{\"max_failures\":1e12}",
	};

	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
		_cleanup_(freep) char *text = NULL;
		int r = rollout_policy_decode(valid[i], strlen(valid[i]), &p);
		ok(r == 0, "valid policy decodes: %s", valid[i]);
		if (r == 0) {
			ok(rollout_policy_problem(&p) == NULL, "and has no problem: %s", valid[i]);
			ok(rollout_policy_encode(&p, &text) == 0, "and encodes: %s", valid[i]);
			is_str(text, valid[i], "the encoding is the input (key order kept)");
		}
	}
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
		_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
		is_int(rollout_policy_decode(invalid[i], strlen(invalid[i]), &p), -EPROTO,
		       "invalid policy refused: %s", invalid[i]);
	}

	struct rollout_policy p = { .auto_promote = true };
	is_str(rollout_policy_problem(&p), "auto_promote needs canary", "auto_promote alone");
	p = (struct rollout_policy){ .auto_revert = true };
	is_str(rollout_policy_problem(&p),
	       "auto_revert needs max_failures, max_fail_percent or progress_deadline",
	       "auto_revert alone");
	p = (struct rollout_policy){ .has_max_failures = true, .max_failures = 0 };
	ok(rollout_policy_problem(&p) == NULL && rollout_policy_has_budget(&p),
	   "max_failures 0 is a budget");
	p = (struct rollout_policy){ .canary = 2 };
	ok(!rollout_policy_has_budget(&p), "a canary is no budget");
}

/* --- the records -------------------------------------------------------------------- */

static void test_record_codec(void)
{
	struct rollout_record in = {
		.version = "v42", .trigger = 1234, .time = NOW, .host = "web5",
		.reason = "3 hosts failed, budget 2", .reverted_to = "v41", .failed = 3,
	};
	_cleanup_(freep) char *text = NULL;
	_cleanup_(rollout_record_releasep) struct rollout_record out = { 0 };

	ok(rollout_record_encode(&in, &text) == 0, "a halt record encodes");
	is_str(text, "{\"version\":\"v42\",\"trigger\":1234,\"time\":1700000000,\"host\":\"web5\","
		     "\"reason\":\"3 hosts failed, budget 2\",\"reverted_to\":\"v41\",\"failed\":3}",
	       "its JSON");
	ok(rollout_record_decode(text, strlen(text), &out) == 0, "and decodes");
	is_str(out.version, "v42", "version");
	is_int(out.trigger, 1234, "trigger");
	is_int(out.time, NOW, "time");
	is_str(out.host, "web5", "host");
	is_str(out.reason, "3 hosts failed, budget 2", "reason");
	is_str(out.reverted_to, "v41", "reverted_to");
	is_int(out.failed, 3, "failed");
	ok(rollout_record_current(&out, "v42", 1234), "current for its version and trigger");
	ok(!rollout_record_current(&out, "v42", 1235), "not for another trigger");
	ok(!rollout_record_current(&out, "v43", 1234), "not for another version");
	ok(!rollout_record_current(&out, NULL, 1234), "not when no version is desired");

	/* a failure record: stage and attempts; no trigger is 0, never current */
	_cleanup_(freep) char *t2 = NULL;
	_cleanup_(rollout_record_releasep) struct rollout_record f = { 0 };
	struct rollout_record fin = { .version = "v2", .stage = "config", .attempts = 4 };
	ok(rollout_record_encode(&fin, &t2) == 0, "a failure record encodes");
	is_str(t2, "{\"version\":\"v2\",\"trigger\":0,\"time\":0,\"stage\":\"config\",\"attempts\":4}",
	       "its JSON (trigger and time always, zero counts left out)");
	ok(rollout_record_decode(t2, strlen(t2), &f) == 0 && f.attempts == 4 &&
	   f.stage && strcmp(f.stage, "config") == 0, "and decodes");
	ok(!rollout_record_current(&f, "v2", 0), "trigger 0 is never current");

	struct rollout_record bad_in = { .version = "../x" };
	_cleanup_(freep) char *t3 = NULL;
	is_int(rollout_record_encode(&bad_in, &t3), -EINVAL, "an invalid version is not encoded");

	static const char *const hostile[] = {
		"", "null", "[]", "{}", "{\"version\":5}", "{\"version\":\"a/b\"}",
		"{\"version\":\"v1\",\"reason\":7}", "{\"version\":\"v1\",\"reverted_to\":\"a b\"}",
		"{\"version\":\"v1\"", "\"v1\"",
	};
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		struct rollout_record r = { 0 };
		is_int(rollout_record_decode(hostile[i], strlen(hostile[i]), &r), -EPROTO,
		       "refused: '%s'", hostile[i]);
		rollout_record_release(&r);
	}
	/* numbers out of range read as unknown, not as garbage */
	const char *odd = "{\"version\":\"v1\",\"trigger\":-5,\"time\":\"x\",\"attempts\":1e30}";
	_cleanup_(rollout_record_releasep) struct rollout_record o = { 0 };
	ok(rollout_record_decode(odd, strlen(odd), &o) == 0 && o.trigger == 0 && o.time == 0 &&
	   o.attempts == 0, "implausible numbers read as 0");
}

/* --- rendering ------------------------------------------------------------------------ */

static char *render(const struct fleet_view *v, const struct render_status_options *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	int r = render_status_view(v, f, o);
	fclose(f);
	ok(r == 0, "render_status_view returns 0");
	return text;
}

static char *clock_text(int64_t t)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	render_clock(t, NOW, &b);
	return strdup(buf_str(&b));
}

static void test_render(void)
{
	struct host_view hosts[] = {
		{ .host = "web1", .running_version = "v41", .puppet = STATE_FAILED,
		  .validation = STATE_SUCCESS, .provisioned = STATE_SUCCESS, .alive = true,
		  .changed = NOW - 5, .attempts = 3, .first_failure = NOW - 600,
		  .detail = "Notice: a\nError: Could not find class web\nNotice: Applied catalog" },
		{ .host = "web2", .running_version = "v41", .puppet = STATE_PENDING,
		  .validation = STATE_SUCCESS, .provisioned = STATE_SUCCESS, .alive = true,
		  .changed = NOW - 5, .wait = "slot", .detail = "2 of 2 slots held" },
		{ .host = "web3", .running_version = "v41", .puppet = STATE_PENDING,
		  .validation = STATE_SUCCESS, .provisioned = STATE_SUCCESS, .alive = true,
		  .changed = NOW - 5, .wait = "halt" },
		{ .host = "web4", .running_version = "v42", .puppet = STATE_SUCCESS,
		  .validation = STATE_SUCCESS, .provisioned = STATE_SUCCESS, .alive = true,
		  .changed = NOW - 5 },
	};
	struct fleet_view v = { .hosts = hosts, .n = 4, .current_version = "v42",
				.previous_version = "v41" };
	struct rollout_policy p = { .max_parallel = 2, .max_fail_percent = 50, .canary = 2,
				    .auto_promote = true, .auto_revert = true };
	struct rollout_state s = {
		.version = "v42", .trigger = 99, .halted = true, .failed = 1, .canaries_done = 1,
		.halt = { .version = "v42", .trigger = 99, .time = NOW - 60, .host = "web1",
			  .reason = "deadline\n\033[2Jpassed" },
	};
	struct render_status_options o = { .width = 120, .now = NOW, .show_policy = true,
					   .policy = &p, .rollout = &s };
	_cleanup_(freep) char *since = clock_text(NOW - 600);
	_cleanup_(freep) char *at = clock_text(NOW - 60);
	_cleanup_(freep) char *text = render(&v, &o);
	_cleanup_(freep) char *want = NULL;

	ok(strstr(text, "policy: max_parallel 2, max_fail_percent 50, auto_revert, canary 2, "
			"auto_promote\n") != NULL, "the policy line names every safety key");
	ok(asprintf(&want, "rollout: HALTED: deadline\\n\\x1b[2Jpassed (by web1 at %s)\n", at) > 0 &&
	   strstr(text, want), "the halt: reason sanitised, by whom, when");
	ok(strstr(text, "canary: 1/2 done, waiting for the canaries\n") != NULL, "canary progress");
	ok(strstr(text, "failures: 1 failed of budget 2 (max_fail_percent 50 of 4 alive)\n") != NULL,
	   "failures against the budget");
	free(want);
	ok(asprintf(&want, "attempt 3 since %s: Error: Could not find class web\n", since) > 0 &&
	   strstr(text, want), "a failed host: attempts, since when, the error line");
	ok(strstr(text, "wait slot: 2 of 2 slots held\n") != NULL, "a pending host: the wait and detail");
	ok(strstr(text, "wait halt\n") != NULL, "a wait with no detail");
	if (tap_failed)
		printf("# %s", text);

	/* reverted; canaries all done */
	struct rollout_state rv = {
		.version = "v41", .trigger = 120, .reverted = true, .canaries_done = 2,
		.halt = { .version = "v42", .trigger = 99, .time = NOW - 60, .host = "web1",
			  .reason = "2 hosts failed", .reverted_to = "v41" },
	};
	v.current_version = "v41";
	p.auto_promote = false;
	o.rollout = &rv;
	_cleanup_(freep) char *t2 = render(&v, &o);
	free(want);
	ok(asprintf(&want, "rollout: reverted to v41 after v42 halted: 2 hosts failed (by web1 at %s)\n",
		    at) > 0 && strstr(t2, want), "a revert");
	ok(strstr(t2, "canary: 2/2 done, waiting for promote\n") != NULL, "waiting for promote");
	rv.promoted = true;
	_cleanup_(freep) char *t3 = render(&v, &o);
	ok(strstr(t3, "canary: 2/2 done, promoted\n") != NULL, "promoted");

	/* no budget, no canary, nothing halted: no rollout lines at all */
	struct rollout_policy plain = { .max_parallel = 1 };
	struct rollout_state quiet = { .version = "v41", .trigger = 120 };
	o.policy = &plain;
	o.rollout = &quiet;
	_cleanup_(freep) char *t4 = render(&v, &o);
	ok(!strstr(t4, "rollout:") && !strstr(t4, "canary:") && !strstr(t4, "failures:"),
	   "nothing to say, no line");

	/* render_clock: the time of day within a day, else the date */
	_cleanup_(freep) char *old = clock_text(NOW - 3 * 86400);
	ok(strlen(old) == strlen("2023-11-11 22:13") && old[4] == '-', "an older time has its date");
	_cleanup_(freep) char *none = clock_text(0);
	is_str(none, "?", "an unknown time");

	/* JSON: the host extras and the rollout object */
	char *js = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&js, &len);
	ok(render_status_json(&v, &s, f) == 0, "render_status_json with a rollout");
	fclose(f);
	ok(strstr(js, "\"attempts\":3,\"first_failure\":1699999400,\"wait\":null") != NULL,
	   "a host's attempts and first failure");
	ok(strstr(js, "\"wait\":\"slot\"") != NULL, "a host's wait");
	ok(strstr(js, "\"rollout\":{\"version\":\"v42\",\"trigger\":99,\"halted\":true,"
		      "\"reverted\":false,\"halt\":{") != NULL, "the rollout object");
	free(js);
}

int main(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
	test_policy_codec();
	test_record_codec();
	test_render();
	return done_testing();
}
