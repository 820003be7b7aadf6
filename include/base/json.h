/*
 * json.h — the small cJSON helpers every layer shares: reading a number in a
 * range or a string, adding a number, printing, and adding a string member
 * that may be NULL, in the two ways the code needs (a stored value leaves the
 * member out; what the commands print writes null, so that a script sees
 * every field).
 *
 * The functions that allocate return 0 or -ENOMEM.
 */
#ifndef ORCHESTRATE_JSON_H
#define ORCHESTRATE_JSON_H

#include <stdint.h>
#include <cjson/cJSON.h>

/* The widest range json_get_int() reads: what a double holds that still fits
 * an int64_t. */
#define JSON_INT_MIN (-9200000000000000000LL)
#define JSON_INT_MAX 9200000000000000000LL
/* The largest count a double holds exactly (below 2^53). */
#define JSON_COUNT_MAX 9000000000000000LL

/* obj's number member name, truncated to an integer, when it is in
 * [min, max]; 0 when it is missing, not a number or out of the range. */
int64_t json_get_int_range(const cJSON *obj, const char *name, int64_t min, int64_t max);

static inline int64_t json_get_int(const cJSON *obj, const char *name)
{
	return json_get_int_range(obj, name, JSON_INT_MIN, JSON_INT_MAX);
}

/* obj's string member name; NULL when it is missing or not a string. */
const char *json_get_string(const cJSON *obj, const char *name);

/* Adds the number member name = v (a time, a count: what a double holds). */
int json_add_int64(cJSON *obj, const char *name, int64_t v);

/* Adds the string member name = s; when s is NULL, adds nothing (a stored
 * value's optional field). */
int json_add_string_opt(cJSON *obj, const char *name, const char *s);

/* Adds the string member name = s; when s is NULL, adds name = null (what
 * the commands print: every field present). */
int json_add_string_or_null(cJSON *obj, const char *name, const char *s);

/* obj as compact JSON text in *ret (caller frees). */
int json_print(cJSON *obj, char **ret);

#endif
