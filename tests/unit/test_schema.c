/*
 * test_schema.c — the key layout, name validation and status mapping of
 * schema.c, hostile names included: nothing invalid may ever become a key.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "fleet/schema.h"
#include "tap.h"

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void test_names(void)
{
	static const char *const good[] = {
		"web1", "a", "A-Z_0.9", "host.example.com", "v1.2.3+build@x:y", "a..",
		"a-", "0_", "2024-05-01_1", "9", "Z:@+-._",
	};
	for (size_t i = 0; i < ELEMENTSOF(good); i++) {
		ok(schema_name_valid(good[i]), "valid name '%s'", good[i]);
		is_str(schema_name_problem(good[i]), NULL, "no problem with '%s'", good[i]);
	}

	static const struct {
		const char *name, *why;
	} bad[] = {
		{ "", "empty" },
		{ ".", "is '.'" },
		{ "..", "is '..'" },
		{ "a/b", "contains '/'" },
		{ "../current_version", "contains '/'" },
		{ "/", "contains '/'" },
		{ "web 1", "contains a space" },
		{ "web1\n", "contains a control character" },
		{ "a\tb", "contains a control character" },
		{ "a\x7f", "contains a control character" },
		{ "h\xc3\xa9llo", "contains a non-ASCII byte" },
		{ "a*b", "contains a character outside [A-Za-z0-9._:@+-]" },
		{ "a\"b", "contains a character outside [A-Za-z0-9._:@+-]" },
		{ "{a: b}", "contains a character outside [A-Za-z0-9._:@+-]" },
		{ "a b", "contains a space" },
		{ "a,b", "contains a character outside [A-Za-z0-9._:@+-]" },
		{ "%s", "contains a character outside [A-Za-z0-9._:@+-]" },
		{ "a\\b", "contains a character outside [A-Za-z0-9._:@+-]" },
		/* Nothing that reads as an option, a hidden file or a path. */
		{ "-", "does not start with a letter or a digit" },
		{ "-rf", "does not start with a letter or a digit" },
		{ "--config", "does not start with a letter or a digit" },
		{ "..a", "does not start with a letter or a digit" },
		{ "...", "does not start with a letter or a digit" },
		{ ".hidden", "does not start with a letter or a digit" },
		{ "_", "does not start with a letter or a digit" },
		{ "::", "does not start with a letter or a digit" },
		{ "@v1", "does not start with a letter or a digit" },
		{ "+v1", "does not start with a letter or a digit" },
		{ "-/x", "contains '/'" },
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ok(!schema_name_valid(bad[i].name), "invalid name #%zu", i);
		is_str(schema_name_problem(bad[i].name), bad[i].why, "problem of name #%zu", i);
	}
	ok(!schema_name_valid(NULL), "NULL is not a name");
	is_str(schema_name_problem(NULL), "missing", "NULL: missing");

	_cleanup_(freep) char *n253 = repeat('a', 253);
	_cleanup_(freep) char *n254 = repeat('a', 254);
	_cleanup_(freep) char *huge = repeat('b', 1 << 20);
	ok(schema_name_valid(n253), "253 bytes is a name");
	ok(!schema_name_valid(n254), "254 bytes is not");
	is_str(schema_name_problem(n254), "longer than 253 bytes", "254 bytes: too long");
	ok(!schema_name_valid(huge), "1 MiB is not");
}

static void test_prefixes(void)
{
	static const char *const good[] = {
		"", "/", "/fleet", "/fleet/", "fleet", "fleet/", "/a/b", "a/b/c/", "/dc-1.x",
	};
	for (size_t i = 0; i < ELEMENTSOF(good); i++)
		ok(schema_prefix_valid(good[i]), "valid prefix '%s'", good[i]);
	static const char *const bad[] = {
		"//", "a//b", "/..", "/a/../b", "./a", "/a b", "/a/\n", "///a", "a//",
		"/\xc3\xa9", "/a/./b",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		ok(!schema_prefix_valid(bad[i]), "invalid prefix #%zu", i);
	ok(!schema_prefix_valid(NULL), "NULL prefix is invalid");
}

static void test_status_names(void)
{
	is_str(status_type_name(STATUS_PUPPET), "puppet", "type puppet");
	is_str(status_type_name(STATUS_VALIDATION), "validation", "type validation");
	is_str(status_type_name(STATUS_PROVISIONED), "provisioned", "type provisioned");
	is_str(status_type_name(_STATUS_TYPE_MAX), NULL, "type out of range");
	is_str(status_type_name((enum status_type)-1), NULL, "type negative");
	is_int(status_type_from_name("puppet"), STATUS_PUPPET, "from name puppet");
	is_int(status_type_from_name("validation"), STATUS_VALIDATION, "from name validation");
	is_int(status_type_from_name("provisioned"), STATUS_PROVISIONED, "from name provisioned");
	is_int(status_type_from_name("Puppet"), -1, "type names are case-sensitive");
	is_int(status_type_from_name(""), -1, "empty type");
	is_int(status_type_from_name(NULL), -1, "NULL type");

	static const char *const states[] = { "running", "success", "failed", "pending" };
	for (int i = 0; i < _STATE_MAX; i++) {
		is_str(status_state_name(i), states[i], "state name %d", i);
		is_int(status_state_from_name(states[i]), i, "state from name %s", states[i]);
	}
	is_str(status_state_name(STATE_INVALID), NULL, "invalid state has no name");
	is_str(status_state_name(_STATE_MAX), NULL, "state out of range");
	is_int(status_state_from_name("garbage"), STATE_INVALID, "unknown state");
	is_int(status_state_from_name("success "), STATE_INVALID, "state with a space");
	is_int(status_state_from_name(NULL), STATE_INVALID, "NULL state");

	ok(status_state_allowed(STATUS_PUPPET, STATE_PENDING), "puppet may be pending");
	ok(status_state_allowed(STATUS_PUPPET, STATE_RUNNING), "puppet may be running");
	ok(!status_state_allowed(STATUS_VALIDATION, STATE_PENDING), "validation is never pending");
	ok(status_state_allowed(STATUS_VALIDATION, STATE_RUNNING), "validation may be running");
	ok(!status_state_allowed(STATUS_PROVISIONED, STATE_RUNNING), "provisioned is never running");
	ok(!status_state_allowed(STATUS_PROVISIONED, STATE_PENDING), "provisioned is never pending");
	ok(status_state_allowed(STATUS_PROVISIONED, STATE_SUCCESS), "provisioned success");
	ok(!status_state_allowed(STATUS_PUPPET, STATE_INVALID), "invalid state not allowed");
	ok(!status_state_allowed(_STATUS_TYPE_MAX, STATE_SUCCESS), "invalid type allows nothing");
}

static void test_status_mapping(void)
{
	static const struct {
		enum status_type t;
		const char *result;
		enum status_state want;
	} cases[] = {
		{ STATUS_PUPPET, "0", STATE_SUCCESS },
		{ STATUS_PUPPET, "2", STATE_SUCCESS },
		{ STATUS_PUPPET, "1", STATE_FAILED },
		{ STATUS_PUPPET, "4", STATE_FAILED },
		{ STATUS_PUPPET, "6", STATE_FAILED },
		{ STATUS_PUPPET, "-1", STATE_PENDING },
		{ STATUS_PUPPET, "3", STATE_FAILED },
		{ STATUS_PUPPET, "255", STATE_FAILED },
		{ STATUS_PUPPET, "-2", STATE_FAILED },
		{ STATUS_PUPPET, "+2", STATE_SUCCESS },
		{ STATUS_PUPPET, "running", STATE_RUNNING },
		{ STATUS_PUPPET, "pending", STATE_PENDING },
		{ STATUS_PUPPET, "success", STATE_SUCCESS },
		{ STATUS_PUPPET, "failed", STATE_FAILED },
		{ STATUS_PUPPET, "garbage", STATE_INVALID },
		{ STATUS_PUPPET, "", STATE_INVALID },
		{ STATUS_PUPPET, " 0", STATE_INVALID },
		{ STATUS_PUPPET, "0 ", STATE_INVALID },
		{ STATUS_PUPPET, "0x2", STATE_INVALID },
		{ STATUS_PUPPET, "2.0", STATE_INVALID },
		{ STATUS_PUPPET, "-", STATE_INVALID },
		{ STATUS_PUPPET, "99999999999999999999", STATE_INVALID },
		{ STATUS_PUPPET, "SUCCESS", STATE_INVALID },
		{ STATUS_VALIDATION, "0", STATE_SUCCESS },
		{ STATUS_VALIDATION, "5", STATE_FAILED },
		{ STATUS_VALIDATION, "1", STATE_FAILED },
		{ STATUS_VALIDATION, "2", STATE_FAILED },
		{ STATUS_VALIDATION, "-1", STATE_FAILED },
		{ STATUS_VALIDATION, "running", STATE_RUNNING },
		{ STATUS_VALIDATION, "success", STATE_SUCCESS },
		{ STATUS_VALIDATION, "failed", STATE_FAILED },
		{ STATUS_VALIDATION, "pending", STATE_INVALID },
		{ STATUS_VALIDATION, "garbage", STATE_INVALID },
		{ STATUS_PROVISIONED, "success", STATE_SUCCESS },
		{ STATUS_PROVISIONED, "failed", STATE_FAILED },
		{ STATUS_PROVISIONED, "running", STATE_INVALID },
		{ STATUS_PROVISIONED, "0", STATE_SUCCESS },
		{ STATUS_PROVISIONED, "1", STATE_FAILED },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		is_int(status_from_result(cases[i].t, cases[i].result), cases[i].want,
		       "%s result '%s'", status_type_name(cases[i].t), cases[i].result);
	is_int(status_from_result(STATUS_PUPPET, NULL), STATE_INVALID, "NULL result");
	is_int(status_from_result(_STATUS_TYPE_MAX, "0"), STATE_INVALID, "invalid type");
}

/* Checks one builder's result and frees it. */
static void is_key(char *got, const char *want, const char *name)
{
	is_str(got, want, "%s", name);
	free(got);
}

static void test_keys(void)
{
	/* The root layout of the seed. */
	is_key(key_current_version(""), "/current_version", "current_version");
	is_key(key_current_version(NULL), "/current_version", "NULL prefix is the root");
	is_key(key_current_version("/"), "/current_version", "prefix / is the root");
	is_key(key_previous_version(""), "/previous_version", "previous_version");
	is_key(key_running_version_dir(""), "/running_version/", "running_version dir");
	is_key(key_running_version("", "web1"), "/running_version/web1", "running_version");
	is_key(key_status_dir(""), "/status/", "status dir");
	is_key(key_root(""), "/", "root");
	is_key(key_root("/fleet/"), "/fleet/", "root below a prefix");
	is_key(key_status("", STATUS_VALIDATION, STATE_SUCCESS, "web1"),
	       "/status/validation/success/web1", "status");
	is_key(key_status("", STATUS_PROVISIONED, STATE_SUCCESS, "web1"),
	       "/status/provisioned/success/web1", "status provisioned");
	is_key(key_status_state_dir("", STATUS_PUPPET, STATE_PENDING), "/status/puppet/pending/",
	       "status state dir");
	is_key(key_status_state_dir("x", STATUS_VALIDATION, STATE_FAILED),
	       "/x/status/validation/failed/", "status state dir under prefix");
	is_key(key_status_state_dir("", STATUS_VALIDATION, STATE_PENDING), NULL,
	       "validation/pending/ is not a dir");
	is_key(key_services_dir(""), "/available_services/", "services dir");
	is_key(key_service_dir("", "glance"), "/available_services/glance/", "service dir");
	is_key(key_service("", "glance", "web1"), "/available_services/glance/web1", "service");
	is_key(key_alive_dir(""), "/alive/", "alive dir");
	is_key(key_alive("", "web1"), "/alive/web1", "alive");
	is_key(key_rollout_policy(""), "/rollout/policy", "rollout policy");
	is_key(key_rollout_holders_dir(""), "/rollout/holders/", "holders dir");
	is_key(key_rollout_holder("", "web1"), "/rollout/holders/web1", "holder");
	is_key(key_groups_dir(""), "/groups/", "groups dir");
	is_key(key_group_members_dir("", "dc1"), "/groups/dc1/", "a group's dir");
	is_key(key_group_host("", "dc1", "web1"), "/groups/dc1/web1", "group host");
	is_key(key_pause_dir(""), "/pause/", "pause dir");
	is_key(key_pause_global(""), "/pause/global", "pause global");
	is_key(key_pause_group("", "dc1"), "/pause/groups/dc1", "pause group");
	is_key(key_pause_host("", "web1"), "/pause/hosts/web1", "pause host");

	/* Prefix spellings. */
	is_key(key_current_version("/fleet"), "/fleet/current_version", "prefix /fleet");
	is_key(key_current_version("/fleet/"), "/fleet/current_version", "prefix /fleet/");
	is_key(key_current_version("fleet"), "/fleet/current_version", "prefix fleet");
	is_key(key_current_version("a/b/"), "/a/b/current_version", "prefix a/b/");
	is_key(key_service("/fleet", "glance", "web1"), "/fleet/available_services/glance/web1",
	       "service under prefix");
	is_key(key_services_dir("/fleet"), "/fleet/available_services/", "services dir under prefix");
	is_key(key_status("x", STATUS_PUPPET, STATE_PENDING, "h"), "/x/status/puppet/pending/h",
	       "status under prefix");
	is_key(key_current_version("a//b"), NULL, "invalid prefix builds nothing");
	is_key(key_current_version("/.."), NULL, "prefix .. builds nothing");
	is_key(key_alive("/a b", "web1"), NULL, "prefix with space builds nothing");

	/* Hostile names build nothing. */
	is_key(key_alive("", "../current_version"), NULL, "host ../current_version");
	is_key(key_alive("", ".."), NULL, "host ..");
	is_key(key_alive("", "."), NULL, "host .");
	is_key(key_alive("", ""), NULL, "empty host");
	is_key(key_alive("", NULL), NULL, "NULL host");
	is_key(key_alive("", "a/b"), NULL, "host a/b");
	is_key(key_alive("", "web1\n"), NULL, "host with newline");
	is_key(key_running_version("", "../../x"), NULL, "hostile host in running_version");
	is_key(key_running_version("", ""), NULL, "empty host in running_version");
	is_key(key_service("", "glance/x", "web1"), NULL, "service with slash");
	is_key(key_service_dir("", ".."), NULL, "service ..");
	is_key(key_group_host("", "dc 1", "web1"), NULL, "group with space");
	is_key(key_group_members_dir("", "../x"), NULL, "a group's dir: invalid group");
	is_key(key_pause_group("", "../global"), NULL, "hostile group in pause");
	is_key(key_pause_host("", "h\xc3\xa9"), NULL, "non-ASCII host in pause");
	is_key(key_status("", STATUS_VALIDATION, STATE_PENDING, "web1"), NULL,
	       "validation/pending is not a key");
	is_key(key_status("", STATUS_PUPPET, STATE_INVALID, "web1"), NULL, "invalid state");
	is_key(key_status("", _STATUS_TYPE_MAX, STATE_SUCCESS, "web1"), NULL, "invalid type");
	is_key(key_status("", STATUS_PROVISIONED, STATE_RUNNING, "web1"), NULL,
	       "provisioned/running is not a key");

	_cleanup_(freep) char *n253 = repeat('h', 253);
	_cleanup_(freep) char *n254 = repeat('h', 254);
	char *k = key_alive("", n253);
	ok(k && strlen(k) == strlen("/alive/") + 253, "253-byte host builds a key");
	free(k);
	is_key(key_alive("", n254), NULL, "254-byte host builds nothing");
}

static void split_ok(const char *key, const char *dir, int max, const char *a, const char *b)
{
	char *parts[4] = { NULL };
	_cleanup_(freep) char *copy = NULL;
	int r = key_split(key, strlen(key), dir, parts, max, &copy);
	is_int(r, max, "split '%s' below '%s'", key, dir);
	if (r == max) {
		is_str(parts[0], a, "  first part");
		if (max > 1)
			is_str(parts[1], b, "  second part");
	}
}

static void split_bad(const char *key, size_t len, const char *dir, int max, const char *name)
{
	char *parts[4] = { NULL };
	char *copy = NULL;
	int r = key_split(key, len, dir, parts, max, &copy);
	is_int(r, -EINVAL, "split refuses %s", name);
	ok(copy == NULL, "  and hands out no copy");
	free(copy);
}

static void test_key_split(void)
{
	split_ok("/available_services/glance/web1", "/available_services/", 2, "glance", "web1");
	split_ok("/fleet/running_version/v1/web1", "/fleet/running_version/", 2, "v1", "web1");
	split_ok("/alive/web1", "/alive/", 1, "web1", NULL);
	split_ok("/status/puppet/failed/h.example.com", "/status/puppet/failed/", 1,
		 "h.example.com", NULL);

#define BAD(key, dir, max, name) split_bad(key, strlen(key), dir, max, name)
	BAD("/available_services/glance", "/available_services/", 2, "too few parts");
	BAD("/available_services/glance/web1/x", "/available_services/", 2, "too many parts");
	BAD("/available_services/glance/", "/available_services/", 2, "empty last part");
	BAD("/available_services//web1", "/available_services/", 2, "empty first part");
	BAD("/available_services/glance/web1/", "/available_services/", 2, "trailing slash");
	BAD("/available_services/../web1", "/available_services/", 2, "'..' part");
	BAD("/available_services/./web1", "/available_services/", 2, "'.' part");
	BAD("/available_services/glance/web 1", "/available_services/", 2, "space");
	BAD("/available_services/glance/web1\n", "/available_services/", 2, "newline");
	BAD("/available_services/gl\xc3\xa9nce/web1", "/available_services/", 2, "non-ASCII");
	BAD("/other/glance/web1", "/available_services/", 2, "key outside dir");
	BAD("/available_services", "/available_services/", 2, "the dir without slash");
	BAD("/available_services/", "/available_services/", 2, "the dir itself");
	BAD("/available_servicesX/a/b", "/available_services/", 2, "a sibling of dir");
	BAD("", "/alive/", 1, "empty key");
	BAD("/alive/web1", "/alive/", 0, "max 0");
	split_bad("/alive/web1\0/x", 14, "/alive/", 1, "an embedded NUL");
	split_bad("/alive/web1", 5, "/alive/", 1, "a key_len shorter than the dir");
	split_bad(NULL, 0, "/alive/", 1, "a NULL key");
#undef BAD

	/* key_len is authoritative: bytes past it are not part of the key. */
	char *parts[2];
	_cleanup_(freep) char *copy = NULL;
	is_int(key_split("/alive/web1GARBAGE", 11, "/alive/", parts, 1, &copy), 1,
	       "split honours key_len");
	if (copy)
		is_str(parts[0], "web1", "  giving web1");

	/* A 253-byte name splits; 254 does not. */
	_cleanup_(freep) char *n253 = repeat('h', 253);
	_cleanup_(freep) char *k253 = NULL;
	_cleanup_(freep) char *n254 = repeat('h', 254);
	_cleanup_(freep) char *k254 = NULL;
	k253 = key_alive("", n253);
	_cleanup_(freep) char *copy2 = NULL;
	is_int(key_split(k253, strlen(k253), "/alive/", parts, 1, &copy2), 1, "253-byte part");
	size_t l = strlen("/alive/") + 254;
	k254 = malloc(l + 1);
	strcpy(k254, "/alive/");
	strcat(k254, n254);
	split_bad(k254, l, "/alive/", 1, "a 254-byte part");
}

int main(void)
{
	test_names();
	test_prefixes();
	test_status_names();
	test_status_mapping();
	test_keys();
	test_key_split();
	return done_testing();
}
