/*
 * test_render.c — the status table and JSON output of render.c (and some of
 * render_commands.c's answers), driven with a
 * fabricated fleet_view and memory streams: row order (behind first, then by
 * name), column alignment, the 80-column fit, DETAIL truncation, totals, colour
 * only when asked, and JSON that cJSON parses back.
 */
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "output/render.h"
#include "tap.h"

#define NOW 1700000000

static struct host_view host(const char *name, const char *version, enum status_state puppet,
			     enum status_state validation, bool alive, const char *group,
			     int64_t age, const char *detail)
{
	struct host_view h = {
		.host = (char *)name,
		.running_version = (char *)version,
		.puppet = puppet,
		.validation = validation,
		.provisioned = STATE_SUCCESS,
		.alive = alive,
		.alive_version = (char *)version,
		.group = (char *)group,
		.changed = age < 0 ? 0 : NOW - age,
		.detail = (char *)detail,
		.puppet_exit_code = puppet == STATE_FAILED ? 1 : 0,
	};
	return h;
}

/* Renders into a string (caller frees). */
static char *table(const struct fleet_view *v, bool color, int *ret)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	*ret = render_status_table(v, f, color, NOW);
	fclose(f);
	return text;
}

static char *json(const struct fleet_view *v, int *ret)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	*ret = render_status_json(v, NULL, f);
	fclose(f);
	return text;
}

/* Splits text into at most max lines (in place); returns the count. */
static int split_lines(char *text, char **lines, int max)
{
	int n = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	return n;
}

/* Drops the header lines above the table's "HOST" row (status's header:
 * desired version, progress, counts); returns the lines left. */
static int from_table(char **lines, int n)
{
	int k = 0;
	while (k < n && strncmp(lines[k], "HOST", 4) != 0)
		k++;
	memmove(lines, lines + k, (size_t)(n - k) * sizeof(*lines));
	return n - k;
}

static const char *const columns[] = {
	"HOST", "VERSION", "PUPPET", "VALIDATION", "ALIVE", "GROUP", "AGE", "DETAIL",
};

/* Every cell of rows 1..n-1 starts where its header does, after a gap. */
static bool aligned(char **lines, int n_rows)
{
	for (size_t c = 1; c < ELEMENTSOF(columns); c++) {
		const char *at = strstr(lines[0], columns[c]);
		if (!at)
			return false;
		size_t col = (size_t)(at - lines[0]);
		for (int i = 1; i <= n_rows; i++) {
			size_t len = strlen(lines[i]);
			if (c == ELEMENTSOF(columns) - 1 && len <= col)
				continue;	/* no detail */
			if (len <= col || lines[i][col] == ' ' || lines[i][col - 1] != ' ' ||
			    lines[i][col - 2] != ' ') {
				printf("# column %s misaligned in '%s'\n", columns[c], lines[i]);
				return false;
			}
		}
	}
	return true;
}

static void test_age(void)
{
	struct { int64_t s; const char *want; } cases[] = {
		{ -5, "0s" }, { 0, "0s" }, { 5, "5s" }, { 59, "59s" }, { 60, "1m" },
		{ 180, "3m" }, { 3599, "59m" }, { 7200, "2h" }, { 86399, "23h" },
		{ 4 * 86400 + 5, "4d" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		is_int(render_age(cases[i].s, &b), 0, "render_age(%lld) succeeds", (long long)cases[i].s);
		is_str(buf_str(&b), cases[i].want, "render_age(%lld)", (long long)cases[i].s);
	}
}

static void test_table(void)
{
	struct host_view hosts[] = {
		host("app3", "v2", STATE_SUCCESS, STATE_FAILED, true, NULL, 4 * 86400,
		     "validation: port 80 not answering"),
		host("db1", NULL, STATE_PENDING, STATE_INVALID, false, "dc2", 7200,
		     "waiting for mysql: 0 of 1 hosts"),
		host("web1", "v2", STATE_SUCCESS, STATE_SUCCESS, true, "dc1", 5, NULL),
		host("web2", "v1", STATE_FAILED, STATE_INVALID, true, "dc1", 200,
		     "Notice: compiling\nError: Could not find class ::nosuch for web2 on node "
		     "web2 with a message long enough to need truncation\n\n"),
	};
	struct fleet_view v = {
		.hosts = hosts, .n = ELEMENTSOF(hosts),
		.current_version = (char *)"v2", .previous_version = (char *)"v1",
		.revision = 42,
	};
	char *lines[64];
	int r;

	_cleanup_(freep) char *text = table(&v, false, &r);
	is_int(r, 0, "table renders");
	ok(text && !strchr(text, '\033'), "no escapes without colour");
	ok(strstr(text, "desired version: v2 (previous v1)") != NULL, "desired version line");
	ok(strstr(text, "hosts: 4, behind 2, alive 3, unaccounted 1") != NULL, "host totals");
	ok(strstr(text, "  v2      2  (desired)\n") != NULL, "v2 counted and marked desired");
	ok(strstr(text, "  v1      1\n") != NULL, "v1 counted");
	ok(strstr(text, "  (none)  1\n") != NULL, "hosts under no version counted");
	ok(strstr(text, "puppet:      failed 1, pending 1, success 2\n") != NULL, "puppet totals");
	ok(strstr(text, "validation:  failed 1, success 1, none 2\n") != NULL, "validation totals");
	/* the table as a reader sees it, for whoever reads the TAP output */
	for (char *p = text, *nl; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		printf("# %.*s\n", nl ? (int)(nl - p) : (int)strlen(p), p);
	}

	int n = from_table(lines, split_lines(text, lines, 64));
	ok(n > 5, "enough lines (%d)", n);
	ok(strncmp(lines[0], "HOST", 4) == 0, "header first");
	ok(strncmp(lines[1], "app3 ", 5) == 0, "failed host app3 first");
	ok(strncmp(lines[2], "web2 ", 5) == 0, "failed host web2 second");
	ok(strncmp(lines[3], "db1 ", 4) == 0, "then db1, waiting");
	ok(strncmp(lines[4], "web1 ", 5) == 0, "then web1");
	ok(aligned(lines, 4), "columns aligned");
	for (int i = 0; i < 5; i++)
		ok(strlen(lines[i]) <= 80, "row %d fits 80 columns (%zu)", i, strlen(lines[i]));
	ok(strstr(lines[2], "Error: Could not find") != NULL, "detail shows the last line");
	ok(strstr(lines[2], "...") != NULL && strstr(lines[2], "truncation") == NULL,
	   "long detail truncated");
	ok(strstr(lines[2], "Notice") == NULL, "earlier lines left out");
	ok(strstr(lines[3], " no ") != NULL, "db1 not alive");
	ok(strstr(lines[3], " 2h ") != NULL, "db1 age 2h");
	ok(strstr(lines[1], " 4d ") != NULL, "app3 age 4d");
	ok(lines[4][strlen(lines[4]) - 1] != ' ', "no trailing spaces without detail");
	ok(strstr(lines[4], " 5s") != NULL, "web1 age 5s");

	_cleanup_(freep) char *colored = table(&v, true, &r);
	is_int(r, 0, "coloured table renders");
	ok(colored && strstr(colored, "\033[31mfailed\033[0m") != NULL, "failed in red");

	/* a long name widens its column and keeps the rest aligned */
	struct host_view wide[] = {
		host("a-rather-long-hostname-0001.dc1.example.com", "2024.01.15-build.1234",
		     STATE_RUNNING, STATE_SUCCESS, true, "dc1", 30, NULL),
		host("b", "v2", STATE_FAILED, STATE_FAILED, false, NULL, -1, "x\ty\001z"),
	};
	struct fleet_view w = { .hosts = wide, .n = 2, .current_version = (char *)"v2" };
	_cleanup_(freep) char *wtext = table(&w, false, &r);
	is_int(r, 0, "wide table renders");
	n = from_table(lines, split_lines(wtext, lines, 64));
	/* too wide for DETAIL at the end of the row: it goes below, indented, and
	 * the header has no DETAIL column */
	ok(n >= 4 && strstr(lines[0], "DETAIL") == NULL, "wide table: no DETAIL column");
	ok(n >= 4 && strstr(lines[3], "2024.01.15-build.1234") - lines[3] ==
			     strstr(lines[0], "VERSION") - lines[0] &&
		     strstr(lines[1], "v2") - lines[1] == strstr(lines[0], "VERSION") - lines[0],
	   "wide columns aligned");
	ok(n >= 4 && strncmp(lines[3], "a-rather", 8) == 0, "failed host first, behind host next");
	ok(n >= 3 && strncmp(lines[2], "    x y z", 9) == 0, "control characters become spaces, detail below");
	/* names this long make the fixed columns alone wider than 80: they are
	 * never cut (a cut host name is a wrong host name) */
	ok(n >= 3 && strstr(lines[1], "  -  ") != NULL, "unknown age is '-'");

	struct fleet_view empty = { 0 };
	_cleanup_(freep) char *etext = table(&empty, false, &r);
	is_int(r, 0, "empty view renders");
	ok(etext && strstr(etext, "\nHOST") != NULL, "empty view has a header");
	ok(etext && strstr(etext, "desired version: none") != NULL, "no desired version");
}

static void test_json(void)
{
	struct host_view hosts[] = {
		host("app3", "v2", STATE_SUCCESS, STATE_FAILED, true, NULL, 10, "bad \"quote\"\n"),
		host("db1", NULL, STATE_PENDING, STATE_INVALID, false, "dc2", 7200, NULL),
	};
	struct fleet_view v = {
		.hosts = hosts, .n = 2, .current_version = (char *)"v2", .revision = 7,
	};
	int r;
	_cleanup_(freep) char *text = json(&v, &r);
	is_int(r, 0, "json renders");
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);
	ok(j != NULL, "json parses");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(j, "current_version")), "v2", "current_version");
	ok(cJSON_IsNull(cJSON_GetObjectItem(j, "previous_version")), "previous_version null");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(j, "revision")), 7, "revision");
	cJSON *hs = cJSON_GetObjectItem(j, "hosts");
	is_int(cJSON_GetArraySize(hs), 2, "two hosts");
	cJSON *h0 = cJSON_GetArrayItem(hs, 0), *h1 = cJSON_GetArrayItem(hs, 1);
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(h0, "host")), "app3", "first host");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(h0, "validation")), "failed", "validation");
	is_str(cJSON_GetStringValue(cJSON_GetObjectItem(h0, "detail")), "bad \"quote\"\n",
	       "detail round-trips");
	ok(cJSON_IsNull(cJSON_GetObjectItem(h1, "running_version")), "no running version is null");
	ok(cJSON_IsNull(cJSON_GetObjectItem(h1, "validation")), "no state is null");
	ok(cJSON_IsFalse(cJSON_GetObjectItem(h1, "alive")), "alive false");
	cJSON *t = cJSON_GetObjectItem(j, "totals");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "hosts")), 2, "totals.hosts");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "unaccounted")), 1, "totals.unaccounted");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "behind")), 1, "totals.behind");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(t, "unversioned")), 1, "totals.unversioned");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "versions"), "v2")),
	       1, "totals.versions.v2");
	is_int(cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(t, "puppet"), "pending")),
	       1, "totals.puppet.pending");

	struct fleet_view empty = { 0 };
	_cleanup_(freep) char *etext = json(&empty, &r);
	_cleanup_(cJSON_Deletep) cJSON *e = cJSON_Parse(etext);
	ok(r == 0 && e && cJSON_GetArraySize(cJSON_GetObjectItem(e, "hosts")) == 0,
	   "empty view is valid JSON with no hosts");
}

static void test_lists(void)
{
	char *items[] = { (char *)"v1", (char *)"v\"2", NULL };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	is_int(render_lines(items, f), 0, "render_lines");
	fclose(f);
	is_str(text, "v1\nv\"2\n", "one item a line");
	free(text);

	text = NULL;
	f = open_memstream(&text, &len);
	is_int(render_json_names(f, "v9", "hosts", items), 0, "render_json_names");
	fclose(f);
	is_str(text, "{\"version\":\"v9\",\"hosts\":[\"v1\",\"v\\\"2\"]}\n", "JSON object");
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);
	ok(cJSON_IsArray(cJSON_GetObjectItem(j, "hosts")) &&
	   cJSON_GetArraySize(cJSON_GetObjectItem(j, "hosts")) == 2, "object parses back");
	free(text);

	char *none[] = { NULL };
	text = NULL;
	f = open_memstream(&text, &len);
	render_json_names(f, NULL, "running_versions", none);
	fclose(f);
	is_str(text, "{\"running_versions\":[]}\n", "empty list is [], no version");
	free(text);
}

/* render_sanitize() over text in one mode, as a string (caller frees). */
static char *clean(const char *text, size_t len, enum render_text mode)
{
	struct buf b = BUF_INIT;
	if (render_sanitize(text, len, mode, &b) < 0)
		return NULL;
	return buf_detach(&b);
}

static void test_sanitize(void)
{
	static const struct {
		const char *in;
		size_t len;
		const char *line, *block, *cell;
	} cases[] = {
		{ "plain text", 10, "plain text", "plain text", "plain text" },
		{ "caf\xc3\xa9 \xe2\x9c\x93", 9, "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93",
		  "caf\xc3\xa9 \xe2\x9c\x93" },
		{ "a\nb\tc", 5, "a\\nb\\tc", "a\nb\tc", "a b c" },
		{ "red \033[31mX\033[0m", 14, "red \\x1b[31mX\\x1b[0m", "red \\x1b[31mX\\x1b[0m",
		  "red  [31mX [0m" },
		/* U+009B, CSI in one (C1) character */
		{ "a\xc2\x9b" "2Jb", 6, "a\\xc2\\x9b2Jb", "a\\xc2\\x9b2Jb", "a 2Jb" },
		{ "bell\x07\x7f", 6, "bell\\x07\\x7f", "bell\\x07\\x7f", "bell  " },
		/* not UTF-8: a stray continuation byte, a cut sequence */
		{ "x\x80y\xe2\x9c", 5, "x\\x80y\\xe2\\x9c", "x\\x80y\\xe2\\x9c", "x?y??" },
		{ "nul\0end", 7, "nul\\x00end", "nul\\x00end", "nul end" },
		{ "cr\r\n", 4, "cr\\x0d\\n", "cr\\x0d\n", "cr  " },
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(freep) char *line = clean(cases[i].in, cases[i].len, RENDER_LINE);
		_cleanup_(freep) char *block = clean(cases[i].in, cases[i].len, RENDER_BLOCK);
		_cleanup_(freep) char *cell = clean(cases[i].in, cases[i].len, RENDER_CELL);
		is_str(line, cases[i].line, "sanitize %zu: one line", i);
		is_str(block, cases[i].block, "sanitize %zu: block", i);
		is_str(cell, cases[i].cell, "sanitize %zu: cell", i);
	}
}

/* local_health -v printed a detail's escape bytes raw; status cleaned them.
 * Both go through render_sanitize() now. */
static void test_health(void)
{
	struct render_health h = {
		.host = "web1",
		.puppet = STATE_FAILED,
		.validation = STATE_INVALID,
		.puppet_detail = "line 1\nboom \033]0;owned\007\033[2J",
	};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	is_int(render_health(f, &h, true), 0, "render_health");
	fclose(f);
	is_str(text, "puppet: failed\nvalidation: none\npuppet detail:\n"
		     "line 1\nboom \\x1b]0;owned\\x07\\x1b[2J\n", "a detail's escapes are shown, not sent");
	ok(text && !strchr(text, '\033'), "no escape byte reaches the terminal");
	free(text);

	struct host_view hosts[] = {
		host("web1", "v1", STATE_FAILED, STATE_SUCCESS, true, "g", 5,
		     "ok\nfailed \033[31mred\033[0m \xc2\x9b" "2J"),
	};
	struct fleet_view v = { .hosts = hosts, .n = 1, .current_version = (char *)"v1" };
	int r;
	_cleanup_(freep) char *t = table(&v, false, &r);
	ok(r == 0 && t && !strchr(t, '\033') && !strstr(t, "\xc2\x9b"),
	   "status's DETAIL holds no control character either");
}

static void test_commands(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct fleet_version_count counts[] = { { (char *)"v1", 1 }, { (char *)"v2", 3 } };

	is_int(render_json_single_version(f, "v2", false, counts, 2), 0, "single version JSON");
	is_int(render_version_counts(f, counts, 2), 0, "version counts");
	is_int(render_json_version(f, "current_version", NULL), 0, "null version");
	is_int(render_json_service_wait(f, "db", 2, true, 1, false), 0, "service wait");
	is_int(render_ping(f, "http://h:2379", "3.4\033[2J"), 0, "ping");
	fclose(f);
	is_str(text,
	       "{\"version\":\"v2\",\"single\":false,\"running_versions\":{\"v1\":1,\"v2\":3}}\n"
	       "v1: 1 host\nv2: 3 hosts\n"
	       "{\"current_version\":null}\n"
	       "{\"service\":\"db\",\"count\":2,\"healthy\":true,\"seen\":1,\"ok\":false}\n"
	       "http://h:2379: etcd 3.4\\x1b[2J\n",
	       "the commands' outputs");
	free(text);
}

int main(void)
{
	test_age();
	test_table();
	test_json();
	test_lists();
	test_sanitize();
	test_health();
	test_commands();
	return done_testing();
}
