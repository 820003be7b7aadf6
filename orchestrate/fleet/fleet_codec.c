/*
 * fleet_codec.c — the values orchestrate stores (fleet.h, fleet_internal.h):
 * statuses, running_version, alive, service entries, rollout holders and
 * the rollout policy, each built and read here with cJSON.
 *
 * What is written is checked first (names, addresses) and cut to what a
 * reader can use (a status detail keeps the tail of the output, as valid
 * UTF-8).  What is read is never trusted: a value that does not parse is
 * taken as carrying no fields rather than as an error, because one broken key
 * must not hide the rest of the fleet, and a field that is not plausible (a
 * version that is not a name) is left out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/address.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

int64_t fleet_now(void)
{
	return clock_unix();
}

/* --- JSON values ------------------------------------------------------------- */

/* Parses a value read from etcd; NULL when it is not a JSON object. */
cJSON *kv_json_object(const struct etcd_kv *kv)
{
	if (!kv->value || kv->value_len == 0)
		return NULL;
	cJSON *j = cJSON_ParseWithLength(kv->value, kv->value_len);
	if (j && !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return NULL;
	}
	return j;
}

/* What a status value says beyond its state (fleet_batch_status_extra()):
 * "attempts" and "first_failure" when plausible (else 0), "wait" when it is a
 * name (else NULL: a reader shows nothing rather than what it cannot trust). */
int status_extra_decode(const cJSON *obj, long *ret_attempts, int64_t *ret_first,
			       char **ret_wait)
{
	int64_t attempts = json_get_int(obj, "attempts");
	int64_t first = json_get_int(obj, "first_failure");
	const char *wait = json_get_string(obj, "wait");

	*ret_attempts = attempts > 0 && attempts <= 1000000000 ? (long)attempts : 0;
	*ret_first = first > 0 ? first : 0;
	*ret_wait = NULL;
	if (wait && strlen(wait) <= 32 && schema_name_valid(wait) && !(*ret_wait = strdup(wait)))
		return -ENOMEM;
	return 0;
}

/* {"time":N,"version":"…","exit_code":N,"detail":"…"}, and from extra
 * "attempts", "first_failure" and "wait" when set. */
int status_value_extra(const char *version, int exit_code, const char *detail,
			      const struct status_extra *extra, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	_cleanup_(freep) char *tail = NULL;
	int r;

	if (!obj)
		return -ENOMEM;
	if (detail) {
		r = utf8_tail(detail, SCHEMA_DETAIL_MAX, &tail);
		if (r < 0)
			return r;
	}
	if ((r = json_add_int64(obj, "time", fleet_now())) < 0 ||
	    (r = json_add_string_opt(obj, "version", version)) < 0)
		return r;
	if (!cJSON_AddNumberToObject(obj, "exit_code", exit_code))
		return -ENOMEM;
	if ((r = json_add_string_opt(obj, "detail", tail)) < 0)
		return r;
	if (extra) {
		if ((extra->attempts > 0 &&
		     !cJSON_AddNumberToObject(obj, "attempts", (double)extra->attempts)) ||
		    (extra->first_failure > 0 &&
		     (r = json_add_int64(obj, "first_failure", extra->first_failure)) < 0) ||
		    (extra->wait && (r = json_add_string_opt(obj, "wait", extra->wait)) < 0))
			return r < 0 ? r : -ENOMEM;
	}
	return json_print(obj, ret);
}

int status_value(const char *version, int exit_code, const char *detail, char **ret)
{
	return status_value_extra(version, exit_code, detail, NULL, ret);
}

/* {"version":"V","time":T}: running_version/HOST's value. */
int running_value(const char *version, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!obj)
		return -ENOMEM;
	if ((r = json_add_string_opt(obj, "version", version)) < 0 ||
	    (r = json_add_int64(obj, "time", fleet_now())) < 0)
		return r;
	return json_print(obj, ret);
}

int fleet_running_decode(const char *value, size_t len, char **ret_version)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = NULL;
	const char *v;

	*ret_version = NULL;
	if (!value || len == 0)
		return -EBADMSG;
	obj = cJSON_ParseWithLength(value, len);
	if (!obj || !cJSON_IsObject(obj))
		return -EBADMSG;
	v = json_get_string(obj, "version");
	if (!v || !schema_name_valid(v))
		return -EBADMSG;
	*ret_version = strdup(v);
	return *ret_version ? 0 : -ENOMEM;
}

/* alive/HOST's value: {"time","version","pid"} (no "version" when NULL). */
int alive_value(const char *version, long pid, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!obj)
		return -ENOMEM;
	if ((r = json_add_int64(obj, "time", fleet_now())) < 0 ||
	    (r = json_add_string_opt(obj, "version", version)) < 0)
		return r;
	if (!cJSON_AddNumberToObject(obj, "pid", (double)pid))
		return -ENOMEM;
	return json_print(obj, ret);
}

/*
 * The value of available_services/SERVICE/HOST: its addresses and its health,
 * nothing else.  The version a host runs is running_version/HOST's: were it
 * here too, every rollout would rewrite every entry and send each consumer an
 * event per host although no address and no health changed.  The value maps
 * each interface to one address; when an interface is given twice the first
 * address is kept, since the format has room for one.  -EINVAL for a bad name
 * or address.
 */
int service_value(const char *service, const char *host,
			 const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
			 char **ret)
{
	if (!name_ok(service) || !name_ok(host) || (n_addresses && !addresses))
		return -EINVAL;
	for (size_t i = 0; i < n_addresses; i++)
		if (!name_ok(addresses[i].iface) || !address_valid(addresses[i].address))
			return -EINVAL;

	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *addrs;

	if (!obj)
		return -ENOMEM;
	addrs = cJSON_AddObjectToObject(obj, "addresses");
	if (!addrs)
		return -ENOMEM;
	for (size_t i = 0; i < n_addresses; i++) {
		if (cJSON_GetObjectItemCaseSensitive(addrs, addresses[i].iface))
			continue;
		if (!cJSON_AddStringToObject(addrs, addresses[i].iface, addresses[i].address))
			return -ENOMEM;
	}
	if (!cJSON_AddBoolToObject(obj, "healthy", healthy))
		return -ENOMEM;
	return json_print(obj, ret);
}

/* --- rollout policy ----------------------------------------------------------------- */

void rollout_policy_release(struct rollout_policy *p)
{
	if (!p)
		return;
	strv_free(p->groups);
	memset(p, 0, sizeof(*p));
}

const char *rollout_policy_problem(const struct rollout_policy *p)
{
	if (p->max_parallel < 0)
		return "max_parallel must be at least 1";
	if (p->max_percent < 0 || p->max_percent > 100 || p->max_percent != p->max_percent)
		return "max_percent must be between 1 and 100";
	if (p->max_parallel > 0 && p->max_percent > 0)
		return "max_parallel and max_percent are exclusive";
	if (p->has_max_failures && p->max_failures < 0)
		return "max_failures must be 0 or more";
	if (p->max_fail_percent < 0 || p->max_fail_percent > 100 ||
	    p->max_fail_percent != p->max_fail_percent)
		return "max_fail_percent must be between 0 and 100";
	if (p->healthy_deadline < 0 || p->progress_deadline < 0 || p->min_healthy_time < 0)
		return "a deadline or min_healthy_time is negative";
	if (p->canary < 0)
		return "canary must be 0 or more";
	if (p->auto_promote && p->canary == 0)
		return "auto_promote needs canary";
	if (p->auto_revert && !rollout_policy_has_budget(p) && p->progress_deadline == 0)
		return "auto_revert needs max_failures, max_fail_percent or progress_deadline";
	for (size_t i = 0; i < p->n_groups; i++) {
		if (!schema_name_valid(p->groups[i]))
			return "a group is not a valid name";
		for (size_t j = 0; j < i; j++)
			if (strcmp(p->groups[i], p->groups[j]) == 0)
				return "a group is listed twice";
	}
	return NULL;
}

/* A JSON number that is a whole number in [min, max]. */
static bool json_whole(const cJSON *item, double min, double max)
{
	return cJSON_IsNumber(item) && item->valuedouble >= min && item->valuedouble <= max &&
	       item->valuedouble == (double)(long)item->valuedouble;
}

/* The safety fields: whole seconds and counts, booleans; -EPROTO when one
 * has the wrong type or range. */
static int policy_decode_safety(const cJSON *obj, struct rollout_policy *p)
{
	static const struct {
		const char *name;
		size_t offset;
	} counts[] = {
		{ "healthy_deadline", offsetof(struct rollout_policy, healthy_deadline) },
		{ "progress_deadline", offsetof(struct rollout_policy, progress_deadline) },
		{ "min_healthy_time", offsetof(struct rollout_policy, min_healthy_time) },
		{ "canary", offsetof(struct rollout_policy, canary) },
	};
	const cJSON *mf = cJSON_GetObjectItemCaseSensitive(obj, "max_failures");
	const cJSON *fp = cJSON_GetObjectItemCaseSensitive(obj, "max_fail_percent");
	const cJSON *ar = cJSON_GetObjectItemCaseSensitive(obj, "auto_revert");
	const cJSON *ap = cJSON_GetObjectItemCaseSensitive(obj, "auto_promote");

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, counts[i].name);
		if (!c)
			continue;
		if (!json_whole(c, 0, 1e9))
			return -EPROTO;
		*(long *)((char *)p + counts[i].offset) = (long)c->valuedouble;
	}
	if (mf) {
		if (!json_whole(mf, 0, 1e9))
			return -EPROTO;
		p->has_max_failures = true;
		p->max_failures = (long)mf->valuedouble;
	}
	if (fp) {
		if (!cJSON_IsNumber(fp) || !(fp->valuedouble >= 0 && fp->valuedouble <= 100))
			return -EPROTO;
		p->max_fail_percent = fp->valuedouble;
	}
	if ((ar && !cJSON_IsBool(ar)) || (ap && !cJSON_IsBool(ap)))
		return -EPROTO;
	p->auto_revert = cJSON_IsTrue(ar);
	p->auto_promote = cJSON_IsTrue(ap);
	return 0;
}

static int policy_encode_safety(cJSON *obj, const struct rollout_policy *p)
{
	if ((p->has_max_failures &&
	     !cJSON_AddNumberToObject(obj, "max_failures", (double)p->max_failures)) ||
	    (p->max_fail_percent > 0 &&
	     !cJSON_AddNumberToObject(obj, "max_fail_percent", p->max_fail_percent)) ||
	    (p->healthy_deadline > 0 &&
	     !cJSON_AddNumberToObject(obj, "healthy_deadline", (double)p->healthy_deadline)) ||
	    (p->progress_deadline > 0 &&
	     !cJSON_AddNumberToObject(obj, "progress_deadline", (double)p->progress_deadline)) ||
	    (p->min_healthy_time > 0 &&
	     !cJSON_AddNumberToObject(obj, "min_healthy_time", (double)p->min_healthy_time)) ||
	    (p->auto_revert && !cJSON_AddTrueToObject(obj, "auto_revert")) ||
	    (p->canary > 0 && !cJSON_AddNumberToObject(obj, "canary", (double)p->canary)) ||
	    (p->auto_promote && !cJSON_AddTrueToObject(obj, "auto_promote")))
		return -ENOMEM;
	return 0;
}

/*
 * Strict: an object whose known fields have the right types and ranges.  Unknown
 * fields are ignored (a newer writer may add some); anything else is -EPROTO, and
 * the node then takes the most careful policy rather than guess.
 */
int rollout_policy_decode(const char *value, size_t len, struct rollout_policy *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = value ? cJSON_ParseWithLength(value, len) : NULL;
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	const cJSON *mp, *pc, *groups, *g;

	if (!cJSON_IsObject(obj))
		return -EPROTO;
	mp = cJSON_GetObjectItemCaseSensitive(obj, "max_parallel");
	pc = cJSON_GetObjectItemCaseSensitive(obj, "max_percent");
	groups = cJSON_GetObjectItemCaseSensitive(obj, "groups");
	if (mp && !json_whole(mp, 1, 1e9))
		return -EPROTO;
	if (pc && !(cJSON_IsNumber(pc) && pc->valuedouble > 0 && pc->valuedouble <= 100))
		return -EPROTO;
	if (groups && !cJSON_IsArray(groups))
		return -EPROTO;
	p.max_parallel = mp ? (long)mp->valuedouble : 0;
	p.max_percent = pc ? pc->valuedouble : 0;
	cJSON_ArrayForEach(g, groups) {
		if (!cJSON_IsString(g))
			return -EPROTO;
		if (strv_push(&p.groups, &p.n_groups, g->valuestring) < 0)
			return -ENOMEM;
	}
	if (policy_decode_safety(obj, &p) < 0)
		return -EPROTO;
	if (rollout_policy_problem(&p))
		return -EPROTO;
	*ret = p;
	memset(&p, 0, sizeof(p));
	return 0;
}

int rollout_policy_encode(const struct rollout_policy *p, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (rollout_policy_problem(p))
		return -EINVAL;
	if (!obj)
		return -ENOMEM;
	if (p->max_parallel > 0 &&
	    !cJSON_AddNumberToObject(obj, "max_parallel", (double)p->max_parallel))
		return -ENOMEM;
	if (p->max_percent > 0 && !cJSON_AddNumberToObject(obj, "max_percent", p->max_percent))
		return -ENOMEM;
	if (policy_encode_safety(obj, p) < 0)
		return -ENOMEM;
	if (p->n_groups > 0) {
		cJSON *a = cJSON_AddArrayToObject(obj, "groups");
		if (!a)
			return -ENOMEM;
		for (size_t i = 0; i < p->n_groups; i++) {
			cJSON *s = cJSON_CreateString(p->groups[i]);
			if (!s || !cJSON_AddItemToArray(a, s)) {
				cJSON_Delete(s);
				return -ENOMEM;
			}
		}
	}
	return json_print(obj, ret);
}

int holder_value(const char *host, const char *version, const char *group, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!name_ok(host) || !optional_name_ok(version) || !optional_name_ok(group))
		return -EINVAL;
	if (!obj)
		return -ENOMEM;
	if ((r = json_add_string_opt(obj, "version", version)) < 0 ||
	    (r = json_add_string_opt(obj, "group", group)) < 0)
		return r;
	return json_print(obj, ret);
}

int fleet_service_value(const char *service, const char *host,
			const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
			char **ret)
{
	return service_value(service, host, addresses, n_addresses, healthy, ret);
}
