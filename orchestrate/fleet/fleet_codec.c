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
#include "fleet/fleet_queue.h"
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

int holder_value(const char *host, const char *version, const char *group, bool holds,
		 const struct queue_place *place, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *where;
	int r;

	if (!name_ok(host) || !optional_name_ok(version) || !optional_name_ok(group))
		return -EINVAL;
	if (place && (place->created <= 1 || place->at < place->created - 1 ||
		      place->ahead > (size_t)JSON_COUNT_MAX || place->at > JSON_COUNT_MAX))
		return -EINVAL;
	if (!obj)
		return -ENOMEM;
	if ((r = json_add_string_opt(obj, "version", version)) < 0 ||
	    (r = json_add_string_opt(obj, "group", group)) < 0)
		return r;
	if (holds && !cJSON_AddTrueToObject(obj, "holding"))
		return -ENOMEM;
	if (holds && place) {
		if (!(where = cJSON_AddObjectToObject(obj, "place")) ||
		    (r = json_add_int64(where, "created", place->created)) < 0 ||
		    (r = json_add_int64(where, "ahead", (int64_t)place->ahead)) < 0 ||
		    (r = json_add_int64(where, "at", place->at)) < 0)
			return r < 0 ? r : -ENOMEM;
	}
	return json_print(obj, ret);
}

bool holder_holds(const struct etcd_kv *kv)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "holding"));
}

int holder_place(const struct etcd_kv *kv, struct queue_place *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
	const cJSON *where = cJSON_GetObjectItemCaseSensitive(obj, "place");
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(where, "created");
	const cJSON *ahead = cJSON_GetObjectItemCaseSensitive(where, "ahead");
	const cJSON *at = cJSON_GetObjectItemCaseSensitive(where, "at");

	if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, "holding")) ||
	    !json_whole(created, 1, JSON_COUNT_MAX) || !json_whole(ahead, 0, JSON_COUNT_MAX) ||
	    !json_whole(at, 1, JSON_COUNT_MAX))
		return 0;
	*ret = (struct queue_place){ .created = (int64_t)created->valuedouble,
				     .ahead = (size_t)ahead->valuedouble,
				     .at = (int64_t)at->valuedouble };
	/* A count for this very key, taken once it was about to be created
	 * (the revision before it, at the earliest) and before the mark that
	 * carries it; anything else counts for nothing. */
	if (ret->created != kv->create_revision || ret->at < ret->created - 1 ||
	    (kv->mod_revision > 0 && ret->at >= kv->mod_revision))
		return 0;
	return 1;
}

int fleet_service_value(const char *service, const char *host,
			const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
			char **ret)
{
	return service_value(service, host, addresses, n_addresses, healthy, ret);
}

/* --- run history ------------------------------------------------------------------- */

static const char *const run_result_names[_RUN_RESULT_MAX] = {
	[RUN_SUCCESS] = "success",
	[RUN_FAILED] = "failed",
	[RUN_VALIDATION] = "validation",
	[RUN_DEADLINE] = "deadline",
	[RUN_INTERRUPTED] = "interrupted",
};

const char *run_result_name(enum run_result r)
{
	if ((int)r < 0 || r >= _RUN_RESULT_MAX)
		return NULL;
	return run_result_names[r];
}

int run_result_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < _RUN_RESULT_MAX; i++)
		if (strcmp(name, run_result_names[i]) == 0)
			return i;
	return -1;
}

static void run_entry_release(struct run_entry *e)
{
	free(e->version);
	free(e->error);
	memset(e, 0, sizeof(*e));
}

void run_history_release(struct run_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n && i < FLEET_HISTORY_MAX; i++)
		run_entry_release(&h->runs[i]);
	memset(h, 0, sizeof(*h));
}

/*
 * One line of at most FLEET_HISTORY_ERROR_MAX bytes of valid UTF-8 from the
 * len bytes at s: stops at the first newline, turns every other control
 * character (and every invalid byte) into a space, never cuts a sequence.
 * NULL in *ret when nothing but blanks is left.
 */
static int error_line_clean(const char *s, size_t len, char **ret)
{
	char buf[FLEET_HISTORY_ERROR_MAX + 1];
	size_t out = 0, i = 0;

	*ret = NULL;
	while (i < len && s[i] != '\n') {
		unsigned char c = (unsigned char)s[i];
		uint32_t cp;
		size_t k = c < 0x80 ? 1 : utf8_sequence((const unsigned char *)s + i, len - i, &cp);
		if (k == 0 || c < 0x20 || c == 0x7f || (k == 2 && cp >= 0x80 && cp < 0xa0)) {
			/* a control character or an invalid byte: one space */
			if (out + 1 > FLEET_HISTORY_ERROR_MAX)
				break;
			buf[out++] = ' ';
			i += k ? k : 1;
			continue;
		}
		if (out + k > FLEET_HISTORY_ERROR_MAX)
			break;
		memcpy(buf + out, s + i, k);
		out += k;
		i += k;
	}
	while (out > 0 && buf[out - 1] == ' ')
		out--;
	size_t lead = 0;
	while (lead < out && buf[lead] == ' ')
		lead++;
	if (lead == out)
		return 0;
	*ret = strndup(buf + lead, out - lead);
	return *ret ? 0 : -ENOMEM;
}

static bool line_says_error(const char *p, size_t len)
{
	static const char *const words[] = { "error", "Error", "ERROR", "fail", "Fail", "FAIL" };
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		size_t wl = strlen(words[w]);
		for (size_t i = 0; i + wl <= len; i++)
			if (memcmp(p + i, words[w], wl) == 0)
				return true;
	}
	return false;
}

int run_error_line(const char *detail, char **ret)
{
	const char *p, *end, *last = NULL;
	size_t last_len = 0;

	*ret = NULL;
	if (!detail)
		return 0;
	/* The first line of a detail says how the hook ended ("exited with
	 * status 1"); the output follows it.  The first line of the output
	 * that says error or fail is the one to keep, else its last. */
	p = detail;
	end = detail + strlen(detail);
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	const char *head = p;
	size_t head_len = nl ? (size_t)(nl - p) : (size_t)(end - p);
	p = nl ? nl + 1 : end;
	while (p < end) {
		nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t blank = 0;
		while (blank < len && (p[blank] == ' ' || p[blank] == '\t' || p[blank] == '\r'))
			blank++;
		if (blank < len) {
			if (line_says_error(p, len))
				return error_line_clean(p, len, ret);
			last = p;
			last_len = len;
		}
		p = nl ? nl + 1 : end;
	}
	if (last)
		return error_line_clean(last, last_len, ret);
	return error_line_clean(head, head_len, ret);
}

static int run_entry_copy(const struct run_entry *e, struct run_entry *out)
{
	*out = (struct run_entry){
		.start = e->start > 0 ? e->start : 0,
		.duration = e->duration >= 0 ? e->duration : -1,
		.result = e->result,
		.attempt = e->attempt > 0 ? e->attempt : 0,
	};
	if (!(out->version = strdup(e->version)))
		return -ENOMEM;
	if (e->error && error_line_clean(e->error, strlen(e->error), &out->error) < 0) {
		run_entry_release(out);
		return -ENOMEM;
	}
	return 0;
}

int run_history_prepend(struct run_history *h, const struct run_entry *e)
{
	struct run_entry copy;
	int r;

	if (!e || !name_ok(e->version) || !run_result_name(e->result))
		return -EINVAL;
	if ((r = run_entry_copy(e, &copy)) < 0)
		return r;
	if (h->n == FLEET_HISTORY_MAX)
		run_entry_release(&h->runs[--h->n]);
	memmove(&h->runs[1], &h->runs[0], h->n * sizeof(h->runs[0]));
	h->runs[0] = copy;
	h->n++;
	return 0;
}

int run_history_encode(const struct run_history *h, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *runs;
	int r;

	if (!obj || !(runs = cJSON_AddArrayToObject(obj, "runs")))
		return -ENOMEM;
	for (size_t i = 0; i < h->n && i < FLEET_HISTORY_MAX; i++) {
		const struct run_entry *e = &h->runs[i];
		cJSON *o;
		if (!name_ok(e->version) || !run_result_name(e->result))
			continue;
		if (!(o = cJSON_CreateObject()) || !cJSON_AddItemToArray(runs, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
		if ((r = json_add_string_opt(o, "version", e->version)) < 0 ||
		    (r = json_add_int64(o, "start", e->start)) < 0 ||
		    (r = json_add_int64(o, "duration", e->duration)) < 0 ||
		    (r = json_add_string_opt(o, "result", run_result_name(e->result))) < 0 ||
		    (r = json_add_int64(o, "attempt", e->attempt)) < 0 ||
		    (r = json_add_string_opt(o, "error", e->error)) < 0)
			return r;
	}
	return json_print(obj, ret);
}

/* A stored duration: whole seconds up to a billion, else -1 (not known). */
static int64_t run_duration(const cJSON *d)
{
	if (!cJSON_IsNumber(d) || !(d->valuedouble >= 0 && d->valuedouble <= 1e9))
		return -1;
	return (int64_t)d->valuedouble;
}

int run_history_decode(const char *value, size_t len, struct run_history *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = NULL;
	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	const cJSON *runs, *item;

	memset(ret, 0, sizeof(*ret));
	if (!value || len == 0)
		return -EBADMSG;
	obj = cJSON_ParseWithLength(value, len);
	if (!cJSON_IsObject(obj))
		return -EBADMSG;
	runs = cJSON_GetObjectItemCaseSensitive(obj, "runs");
	if (!cJSON_IsArray(runs))
		return -EBADMSG;
	cJSON_ArrayForEach(item, runs) {
		const char *version, *error;
		int result;
		struct run_entry *e;

		if (h.n == FLEET_HISTORY_MAX)
			break;
		if (!cJSON_IsObject(item))
			continue;
		version = json_get_string(item, "version");
		result = run_result_from_name(json_get_string(item, "result"));
		if (!version || strlen(version) > SCHEMA_NAME_MAX || !schema_name_valid(version) ||
		    result < 0)
			continue;
		e = &h.runs[h.n];
		*e = (struct run_entry){
			.start = json_get_int_range(item, "start", 0, JSON_COUNT_MAX),
			.duration = run_duration(cJSON_GetObjectItemCaseSensitive(item, "duration")),
			.result = (enum run_result)result,
			.attempt = (long)json_get_int_range(item, "attempt", 0, 1000000000),
		};
		if (!(e->version = strdup(version)))
			return -ENOMEM;
		h.n++;
		error = json_get_string(item, "error");
		if (error && error_line_clean(error, strlen(error), &e->error) < 0)
			return -ENOMEM;
	}
	*ret = h;
	memset(&h, 0, sizeof(h));
	return 0;
}
