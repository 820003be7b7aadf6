/*
 * json.c — shared cJSON helpers (json.h).
 */
#include <errno.h>

#include "base/json.h"

int64_t json_get_int_range(const cJSON *obj, const char *name, int64_t min, int64_t max)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!cJSON_IsNumber(n) || n->valuedouble < (double)min || n->valuedouble > (double)max)
		return 0;
	return (int64_t)n->valuedouble;
}

int json_add_string_opt(cJSON *obj, const char *name, const char *s)
{
	if (!s)
		return 0;
	return cJSON_AddStringToObject(obj, name, s) ? 0 : -ENOMEM;
}

int json_add_string_or_null(cJSON *obj, const char *name, const char *s)
{
	if (!s)
		return cJSON_AddNullToObject(obj, name) ? 0 : -ENOMEM;
	return cJSON_AddStringToObject(obj, name, s) ? 0 : -ENOMEM;
}
