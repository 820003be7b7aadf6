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

const char *json_get_string(const cJSON *obj, const char *name)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, name);
	return cJSON_IsString(s) ? s->valuestring : NULL;
}

int json_add_int64(cJSON *obj, const char *name, int64_t v)
{
	return cJSON_AddNumberToObject(obj, name, (double)v) ? 0 : -ENOMEM;
}

int json_print(cJSON *obj, char **ret)
{
	*ret = cJSON_PrintUnformatted(obj);
	return *ret ? 0 : -ENOMEM;
}
