/*
 * test_history.c — the run history's codec (history/HOST's value):
 * run_history_prepend/encode/decode, run_error_line, and how output/ shows
 * it (render_runs, render_json_history, render_history_version).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "output/render.h"
#include "tap.h"

static void test_prepend_encode_decode(void)
{
	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	_cleanup_(run_history_releasep) struct run_history d = { 0 };
	_cleanup_(freep) char *value = NULL, *again = NULL;
	char version[16];

	for (int i = 1; i <= 12; i++) {
		struct run_entry e = {
			.version = version, .start = 1700000000 + i, .duration = i,
			.result = i % 2 ? RUN_SUCCESS : RUN_FAILED, .attempt = i,
			.error = i % 2 ? NULL : "Error: it broke\nnext line",
		};
		snprintf(version, sizeof(version), "v%d", i);
		ok(run_history_prepend(&h, &e) == 0, "prepend v%d", i);
	}
	is_int((long)h.n, 10L, "10 runs kept");
	is_str(h.runs[0].version, "v12", "newest first");
	is_str(h.runs[9].version, "v3", "the oldest kept");
	is_str(h.runs[0].error, "Error: it broke", "an error is one line");
	struct run_entry bad = { .version = "../x", .result = RUN_SUCCESS };
	is_int(run_history_prepend(&h, &bad), -EINVAL, "an invalid version is refused");
	bad = (struct run_entry){ .version = "v1", .result = _RUN_RESULT_MAX };
	is_int(run_history_prepend(&h, &bad), -EINVAL, "an unknown result is refused");

	ok(run_history_encode(&h, &value) == 0, "encode");
	static const char head[] = "{\"runs\":[{\"version\":\"v12\",\"start\":1700000012,\"duration\":12,"
				   "\"result\":\"failed\",\"attempt\":12,\"error\":\"Error: it broke\"},";
	ok(strncmp(value, head, strlen(head)) == 0,
	   "the stored value: %s", value);
	ok(run_history_decode(value, strlen(value), &d) == 0, "decode");
	is_int((long)d.n, 10L, "10 decoded");
	ok(run_history_encode(&d, &again) == 0 && strcmp(value, again) == 0, "encode is stable");
}

static void test_decode_hostile(void)
{
	static const char *const broken[] = {
		"", "not json", "[]", "{}", "{\"runs\":7}", "{\"runs\":{}}", "null", "\"x\"",
	};
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		struct run_history h = { 0 };
		is_int(run_history_decode(broken[i], strlen(broken[i]), &h), -EBADMSG,
		       "'%s' is not a history", broken[i]);
		is_int((long)h.n, 0L, "...and has no runs");
	}

	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	const char *v = "{\"runs\":[5,null,[],{\"version\":\"../x\",\"result\":\"success\"},"
			"{\"version\":\"v1\",\"result\":\"bogus\"},{\"version\":7,\"result\":\"failed\"},"
			"{\"version\":\"v2\",\"result\":\"deadline\",\"start\":-4,\"duration\":1e300,"
			"\"attempt\":-1,\"error\":\"\\u001b[31mred\\u0007\\n2nd\"},"
			"{\"version\":\"v3\",\"result\":\"interrupted\",\"start\":\"now\",\"duration\":-7,"
			"\"attempt\":2.5,\"error\":7}]}";
	ok(run_history_decode(v, strlen(v), &h) == 0, "a hostile value decodes");
	is_int((long)h.n, 2L, "to its plausible runs only");
	is_str(h.runs[0].version, "v2", "v2");
	is_int(h.runs[0].result, RUN_DEADLINE, "deadline");
	is_int((long)h.runs[0].start, 0L, "a negative start is not known");
	is_int((long)h.runs[0].duration, -1L, "an absurd duration is not known");
	is_int(h.runs[0].attempt, 0L, "a negative attempt is not known");
	is_str(h.runs[0].error, "[31mred", "control characters gone, one line");
	is_int(h.runs[1].result, RUN_INTERRUPTED, "interrupted");
	is_int(h.runs[1].attempt, 2L, "an attempt is whole");
	ok(h.runs[1].error == NULL, "an error that is not a string is none");

	/* a thousand runs and a long, multibyte error: bounded */
	_cleanup_(freep) char *big = NULL;
	size_t len;
	FILE *f = open_memstream(&big, &len);
	fputs("{\"runs\":[{\"version\":\"v0\",\"result\":\"failed\",\"error\":\"", f);
	for (int i = 0; i < 300; i++)
		fputs("\xc3\xa9", f);
	fputs("\"}", f);
	for (int i = 1; i < 1000; i++)
		fprintf(f, ",{\"version\":\"v%d\",\"result\":\"success\"}", i);
	fputs("]}", f);
	fclose(f);
	_cleanup_(run_history_releasep) struct run_history b = { 0 };
	ok(run_history_decode(big, len, &b) == 0, "a big value decodes");
	is_int((long)b.n, (long)FLEET_HISTORY_MAX, "to at most 10 runs");
	ok(strlen(b.runs[0].error) <= FLEET_HISTORY_ERROR_MAX &&
	   strlen(b.runs[0].error) % 2 == 0, "an error is cut at 200 bytes, never inside a character");
}

static void test_error_line(void)
{
	static const struct { const char *detail, *want; } cases[] = {
		{ "exited with status 1\nnotice: applying\nError: could not fetch\nmore",
		  "Error: could not fetch" },
		{ "exited with status 4\nstep one\nstep two\n\n", "step two" },
		{ "exited with status 4", "exited with status 4" },
		{ "exited with status 1\n  \n", "exited with status 1" },
		{ "killed by signal 9\nThe check FAILED\tbadly", "The check FAILED badly" },
		{ "", NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		_cleanup_(freep) char *line = NULL;
		ok(run_error_line(cases[i].detail, &line) == 0, "run_error_line %zu", i);
		if (cases[i].want)
			is_str(line, cases[i].want, "...is '%s'", cases[i].want);
		else
			ok(line == NULL, "...is none");
	}
}

static void test_render(void)
{
	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	struct run_entry a = { .version = "v1", .start = 1700000000, .duration = 65,
			       .result = RUN_SUCCESS, .attempt = 2 };
	struct run_entry b = { .version = "v1", .start = 1699999000, .duration = -1,
			       .result = RUN_VALIDATION, .attempt = 1, .error = "check \x1b failed" };
	_cleanup_(freep) char *text = NULL, *js = NULL, *ver = NULL;
	size_t len;
	FILE *f;

	ok(run_history_prepend(&h, &b) == 0 && run_history_prepend(&h, &a) == 0, "two runs");
	f = open_memstream(&text, &len);
	ok(render_runs(f, &h) == 0, "render_runs");
	fclose(f);
	is_str(text, "  2023-11-14 22:13:20  v1  success       1m05s  attempt 2\n"
		     "  2023-11-14 21:56:40  v1  validation        ?  attempt 1  check   failed\n",
	       "the runs, newest first");
	f = open_memstream(&js, &len);
	ok(render_json_history(f, "web1", &h) == 0, "render_json_history");
	fclose(f);
	ok(strstr(js, "{\"host\":\"web1\",\"runs\":[{\"version\":\"v1\",\"start\":1700000000,"
		      "\"duration\":65,\"result\":\"success\",\"attempt\":2,\"error\":null}") != NULL,
	   "the JSON: %s", js);
	ok(strstr(js, "\"duration\":null") != NULL, "a duration not known is null");

	struct host_run runs[] = { { .host = "web1", .run = a } };
	f = open_memstream(&ver, &len);
	ok(render_history_version(f, "v1", runs, 1) == 0, "render_history_version");
	fclose(f);
	is_str(ver, "HOST  STARTED              RESULT         TOOK\n"
		    "web1  2023-11-14 22:13:20  success       1m05s  attempt 2\n",
	       "one line a run");
}

int main(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
	test_prepend_encode_decode();
	test_decode_hostile();
	test_error_line();
	test_render();
	return done_testing();
}
