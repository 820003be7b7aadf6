/*
 * test_base.c — the small shared helpers of base/ that came from copies in
 * several files: streq_ptr (strv.h), utf8_tail (utf8.h), ARRAY_GROW
 * (array.h) and the JSON helpers (json.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "tap.h"

static void test_streq_ptr(void)
{
	ok(streq_ptr(NULL, NULL), "NULL equals NULL");
	ok(!streq_ptr("a", NULL) && !streq_ptr(NULL, "a"), "a string is not NULL");
	ok(streq_ptr("v1", "v1") && !streq_ptr("v1", "v2"), "strings by their bytes");
}

static void tail_is(const char *s, size_t max, const char *want, const char *what)
{
	_cleanup_(freep) char *got = NULL;
	ok(utf8_tail(s, max, &got) == 0, "%s: no error", what);
	is_str(got, want, "%s", what);
}

static void test_utf8_tail(void)
{
	tail_is("short", 10, "short", "shorter than max: whole");
	tail_is("0123456789", 4, "6789", "the last max bytes");
	/* "é" is c3 a9: a cut through it drops its continuation byte */
	tail_is("ab\xc3\xa9xy", 3, "xy", "never half a sequence");
	tail_is("ab\xc3\xa9xy", 4, "\xc3\xa9xy", "a whole sequence kept");
	tail_is("a\xff" "b", 10, "a\xef\xbf\xbd" "b", "an invalid byte becomes U+FFFD");
	tail_is("\xff\xff", 4, "\xef\xbf\xbd", "replacements cut again at a boundary");
}

static void test_array_grow(void)
{
	int *v = NULL;
	size_t cap = 0;

	ok(ARRAY_GROW(v, cap, 1, 8) == 0 && v && cap == 8, "from nothing to min");
	ok(ARRAY_GROW(v, cap, 8, 8) == 0 && cap == 8, "enough already: unchanged");
	ok(ARRAY_GROW(v, cap, 9, 8) == 0 && cap == 16, "one more: doubled");
	ok(ARRAY_GROW(v, cap, 100, 8) == 0 && cap == 128, "far more: doubled until enough");
	for (int i = 0; i < 100; i++)
		v[i] = i;
	is_int(v[99], 99, "the room is there");
	ok(ARRAY_GROW(v, cap, SIZE_MAX, 8) == -ENOMEM && cap == 128, "too much: -ENOMEM, unchanged");
	free(v);
}

static void test_json(void)
{
	_cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse("{\"n\":12,\"neg\":-3,\"big\":1e19,\"s\":\"x\"}");
	_cleanup_(cJSON_Deletep) cJSON *out = cJSON_CreateObject();
	_cleanup_(freep) char *text = NULL;

	is_int(json_get_int(o, "n"), 12, "a number");
	is_int(json_get_int(o, "neg"), -3, "a negative number in the full range");
	is_int(json_get_int(o, "big"), 0, "past int64: 0");
	is_int(json_get_int(o, "s"), 0, "not a number: 0");
	is_int(json_get_int(o, "missing"), 0, "missing: 0");
	is_int(json_get_int_range(o, "neg", 0, JSON_COUNT_MAX), 0, "below the range: 0");
	is_int(json_get_int_range(o, "n", 0, 12), 12, "the range is inclusive");

	ok(json_add_string_opt(out, "a", NULL) == 0 && json_add_string_opt(out, "b", "x") == 0 &&
	   json_add_string_or_null(out, "c", NULL) == 0 && json_add_string_or_null(out, "d", "y") == 0,
	   "adding members");
	text = cJSON_PrintUnformatted(out);
	is_str(text, "{\"b\":\"x\",\"c\":null,\"d\":\"y\"}", "_opt leaves NULL out, _or_null writes null");
}

int main(void)
{
	test_streq_ptr();
	test_utf8_tail();
	test_array_grow();
	test_json();
	return done_testing();
}
