/*
 * fleet.c — fleet operations (fleet.h): versions, statuses, registration,
 * services, pauses, the rollout policy and the whole-fleet view, as requests to etcd.
 *
 * Every key comes from schema.h's builders and every name is checked with
 * schema_name_valid() before the first request, so a hostile name can never
 * address another key.  Every change that touches several keys is one txn (the
 * invariants of orchestrate(1) "Key layout" hold at every revision), and every read of several
 * prefixes is pinned to one revision, so a reader never mixes two moments.
 *
 * Keys read back from etcd are split with key_split(), which refuses anything
 * that is not made of valid names: a key written by hand with a strange name is
 * skipped, never turned into a host, version or service.  Values are JSON built
 * and read with cJSON; a value that does not parse is treated as carrying no
 * fields rather than as an error, because one broken key must not hide the rest
 * of the fleet.
 *
 * The whole-fleet view (fleet_view_read) must stay fast at 10,000+ hosts: host
 * names are collected from every range, sorted and de-duplicated once, and each
 * key then finds its host by binary search — O(n log n) overall.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/address.h"
#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet_internal.h"
#include "fleet/fleet_rollout.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"
#include "base/strv.h"
#include "base/utf8.h"

/* How often trigger_update re-reads and retries when its compare lost a race
 * with another writer (not a failure of the request), with a short random pause
 * growing with each attempt so that racing writers spread out. */
#define TRIGGER_RETRIES 10
#define TRIGGER_BACKOFF_MS 10
/* etcd refuses txns with more operations than --max-txn-ops (default 128);
 * decommission splits its deletes into txns of at most this many. */
#define TXN_MAX_OPS 100
/* Pages of the whole-fleet view.  etcd 3.4 walks the whole range to count it for
 * every page, so at 10,000 hosts (30,000 status keys) small pages cost a walk
 * each; 50,000 keys is one page for most fleets and about 12 MB of reply at most. */
#define VIEW_PAGE_SIZE 50000


int64_t fleet_now(void)
{
	return clock_unix();
}

static bool name_ok(const char *name)
{
	return name && schema_name_valid(name);
}

/* NULL is fine (the field is optional); anything else must be a valid name. */
static bool optional_name_ok(const char *name)
{
	return !name || schema_name_valid(name);
}

/* A value is a plausible name only when it holds no NUL and is a valid name. */
static bool value_is_name(const char *value, size_t len)
{
	return value && strlen(value) == len && schema_name_valid(value);
}

/* The write helpers may answer with a count; these functions promise 0. */
static int written(int r)
{
	return r < 0 ? r : 0;
}

/* --- JSON values ------------------------------------------------------------- */

static int json_print(cJSON *obj, char **ret)
{
	*ret = cJSON_PrintUnformatted(obj);
	return *ret ? 0 : -ENOMEM;
}

static int json_add_time(cJSON *obj, const char *name, int64_t t)
{
	return cJSON_AddNumberToObject(obj, name, (double)t) ? 0 : -ENOMEM;
}

/* Parses a value read from etcd; NULL when it is not a JSON object. */
static cJSON *json_parse_object(const struct etcd_kv *kv)
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

static const char *json_get_string(const cJSON *obj, const char *name)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, name);
	return cJSON_IsString(s) ? s->valuestring : NULL;
}

/* What a status value says beyond its state (fleet_batch_status_extra()):
 * "attempts" and "first_failure" when plausible (else 0), "wait" when it is a
 * name (else NULL: a reader shows nothing rather than what it cannot trust). */
static int status_extra_decode(const cJSON *obj, long *ret_attempts, int64_t *ret_first,
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
static int status_value_extra(const char *version, int exit_code, const char *detail,
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
	if ((r = json_add_time(obj, "time", fleet_now())) < 0 ||
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
		     (r = json_add_time(obj, "first_failure", extra->first_failure)) < 0) ||
		    (extra->wait && (r = json_add_string_opt(obj, "wait", extra->wait)) < 0))
			return r < 0 ? r : -ENOMEM;
	}
	return json_print(obj, ret);
}

static int status_value(const char *version, int exit_code, const char *detail, char **ret)
{
	return status_value_extra(version, exit_code, detail, NULL, ret);
}

/* --- small helpers ------------------------------------------------------------- */

/* Hands out (v, n) sorted and without repeats, never NULL (an empty vector
 * when there is nothing). */
static int strv_finish_sorted(char ***v, size_t *n, char ***ret)
{
	strv_sort_unique(*v, n);
	if (!*v && !(*v = calloc(1, sizeof(char *))))
		return -ENOMEM;
	*ret = TAKE_PTR(*v);
	*n = 0;
	return 0;
}

/* Whether kv holds exactly key (a prefix range may return longer keys too). */
static bool kv_is(const struct etcd_kv *kv, const char *key)
{
	return kv->key_len == strlen(key) && memcmp(kv->key, key, kv->key_len) == 0;
}

/* --- versions ------------------------------------------------------------------ */

int fleet_current_version(struct fleet *f, char **ret_version, int64_t *ret_revision)
{
	_cleanup_(freep) char *key = key_current_version(fleet_prefix(f));
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	int r;

	if (!key)
		return -ENOMEM;
	r = etcd_get(f->etcd, key, &kv, ret_revision);
	if (r <= 0)
		return r;
	if (!value_is_name(kv.value, kv.value_len))
		return -EBADMSG;
	if (ret_version) {
		*ret_version = strdup(kv.value);
		if (!*ret_version)
			return -ENOMEM;
	}
	return 1;
}

/* Between two lost compares of one writer: the other writers lost too, and
 * the jitter keeps them from meeting again. */
static void backoff(int attempt)
{
	static const struct backoff b = { TRIGGER_BACKOFF_MS, 16 * TRIGGER_BACKOFF_MS, 0 };
	clock_sleep_ms(backoff_delay(&b, (unsigned)attempt));
}

/*
 * The one compare-and-swap of the two version keys, on what was just read of
 * them: current_version becomes version, guarded on cur as read (its
 * mod_revision, or its absence when !have_cur), and previous_version becomes
 * cur's value when that is a name.  With prev (rollback), the txn is guarded
 * on previous_version's mod_revision too, and previous_version is deleted
 * when cur was no name (it would name the version just made current).
 * *ret_succeeded says whether the compares held.
 */
static int versions_swap(struct fleet *f, const char *cur_key, const char *prev_key,
			 const struct etcd_kv *cur, bool have_cur, const struct etcd_kv *prev,
			 const char *version, bool *ret_succeeded)
{
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
	bool cur_ok = have_cur && value_is_name(cur->value, cur->value_len);
	int r;

	if (!t)
		return -ENOMEM;
	if (have_cur)
		r = etcd_txn_if_mod_revision(t, cur_key, ETCD_CMP_EQUAL, cur->mod_revision);
	else
		r = etcd_txn_if_version(t, cur_key, ETCD_CMP_EQUAL, 0);
	if (r < 0)
		return r;
	if (prev && (r = etcd_txn_if_mod_revision(t, prev_key, ETCD_CMP_EQUAL, prev->mod_revision)) < 0)
		return r;
	if ((r = etcd_txn_put(t, true, cur_key, version, 0)) < 0)
		return r;
	/* an implausible old value is not worth remembering as a version */
	if (cur_ok)
		r = etcd_txn_put(t, true, prev_key, cur->value, 0);
	else if (prev)
		r = etcd_txn_delete(t, true, prev_key);
	if (r < 0)
		return r;
	return etcd_txn_commit(f->etcd, t, ret_succeeded, NULL);
}

/*
 * Read, then a txn guarded by what was read: the compare on current_version's
 * mod_revision (or its absence) makes the previous_version written the one that
 * was really replaced.  A lost compare means another writer came between; the
 * read is repeated (and with if_current, re-checked) a few times.  Returns
 * -EAGAIN when every attempt lost.
 */
int fleet_trigger_update(struct fleet *f, const char *version, const char *if_current)
{
	if (!name_ok(version) || !optional_name_ok(if_current))
		return -EINVAL;

	_cleanup_(freep) char *cur_key = key_current_version(fleet_prefix(f));
	_cleanup_(freep) char *prev_key = key_previous_version(fleet_prefix(f));
	if (!cur_key || !prev_key)
		return -ENOMEM;

	for (int attempt = 0; attempt < TRIGGER_RETRIES; attempt++) {
		_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
		bool exists, old_ok, succeeded = false;
		int r;

		if (attempt > 0)
			backoff(attempt);
		r = etcd_get(f->etcd, cur_key, &kv, NULL);
		if (r < 0)
			return r;
		exists = r > 0;
		old_ok = exists && value_is_name(kv.value, kv.value_len);
		if (if_current && (!old_ok || strcmp(kv.value, if_current) != 0))
			return 1;
		/* already set: writing it again would only wake every node */
		if (old_ok && strcmp(kv.value, version) == 0)
			return 0;

		r = versions_swap(f, cur_key, prev_key, &kv, exists, NULL, version, &succeeded);
		if (r < 0)
			return r;
		if (succeeded)
			return 0;
	}
	return -EAGAIN;
}

/*
 * Swaps current and previous in one txn guarded by both mod_revisions.  A lost
 * compare is not retried: someone changed the versions meanwhile, and rolling
 * back their change is not what was asked; -EBUSY says so.
 */
int fleet_rollback(struct fleet *f, char **ret_version)
{
	_cleanup_(freep) char *cur_key = key_current_version(fleet_prefix(f));
	_cleanup_(freep) char *prev_key = key_previous_version(fleet_prefix(f));
	_cleanup_(etcd_kv_releasep) struct etcd_kv cur = { 0 };
	_cleanup_(etcd_kv_releasep) struct etcd_kv prev = { 0 };
	bool have_cur, cur_ok, succeeded = false;
	int r;

	if (!cur_key || !prev_key)
		return -ENOMEM;
	r = etcd_get(f->etcd, cur_key, &cur, NULL);
	if (r < 0)
		return r;
	have_cur = r > 0;
	cur_ok = have_cur && value_is_name(cur.value, cur.value_len);
	r = etcd_get(f->etcd, prev_key, &prev, NULL);
	if (r < 0)
		return r;
	if (r == 0)
		return 1;
	if (!value_is_name(prev.value, prev.value_len))
		return -EBADMSG;
	if (cur_ok && strcmp(cur.value, prev.value) == 0)
		return 1;

	r = versions_swap(f, cur_key, prev_key, &cur, have_cur, &prev, prev.value, &succeeded);
	if (r < 0)
		return r;
	if (!succeeded)
		return -EBUSY;
	if (ret_version) {
		*ret_version = strdup(prev.value);
		if (!*ret_version)
			return -ENOMEM;
	}
	return 0;
}

/* {"version":"V","time":T}: running_version/HOST's value. */
static int running_value(const char *version, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!obj)
		return -ENOMEM;
	if ((r = json_add_string_opt(obj, "version", version)) < 0 ||
	    (r = json_add_time(obj, "time", fleet_now())) < 0)
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

/* The host of kv when it is running_version/HOST below dir (dir_len bytes)
 * with a valid host name, else NULL: a pointer into kv's key, which etcd.c
 * NUL-terminates. */
static const char *running_host(const struct etcd_kv *kv, size_t dir_len)
{
	if (kv->key_len <= dir_len)
		return NULL;
	const char *host = kv->key + dir_len;
	return schema_name_valid(host) ? host : NULL;
}

int fleet_set_running_version(struct fleet *f, const char *host, const char *version,
			      int64_t lease)
{
	if (!name_ok(host) || !name_ok(version))
		return -EINVAL;

	_cleanup_(freep) char *key = key_running_version(fleet_prefix(f), host);
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!key)
		return -ENOMEM;
	if ((r = running_value(version, &value)) < 0)
		return r;
	/* One key per host: the put replaces whatever version it said before. */
	return written(etcd_put(f->etcd, key, value, strlen(value), lease));
}

int fleet_running_read(struct fleet *f, int64_t revision, struct fleet_running *ret)
{
	_cleanup_(freep) char *dir = key_running_version_dir(fleet_prefix(f));
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	struct fleet_running out = { 0 };
	size_t dir_len;
	int r;

	*ret = (struct fleet_running){ 0 };
	if (!dir)
		return -ENOMEM;
	dir_len = strlen(dir);
	r = etcd_get_prefix(f->etcd, dir, 0, revision, &list);
	if (r < 0)
		return r;
	out.hosts = calloc(list.n ? list.n : 1, sizeof(char *));
	out.versions = calloc(list.n ? list.n : 1, sizeof(char *));
	if (!out.hosts || !out.versions) {
		fleet_running_release(&out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < list.n; i++) {
		const struct etcd_kv *kv = &list.kvs[i];
		const char *host = running_host(kv, dir_len);
		char *version;

		/* a value that is not a version is a host under none */
		if (!host || fleet_running_decode(kv->value, kv->value_len, &version) < 0)
			continue;
		if (!(out.hosts[out.n] = strdup(host))) {
			free(version);
			fleet_running_release(&out);
			return -ENOMEM;
		}
		out.versions[out.n++] = version;
	}
	out.revision = list.revision;
	*ret = out;
	return 0;
}

void fleet_running_release(struct fleet_running *rv)
{
	for (size_t i = 0; i < rv->n; i++) {
		free(rv->hosts[i]);
		free(rv->versions[i]);
	}
	free(rv->hosts);
	free(rv->versions);
	*rv = (struct fleet_running){ 0 };
}

int fleet_running_versions(struct fleet *f, char ***ret_versions)
{
	_cleanup_(fleet_running_releasep) struct fleet_running rv = { 0 };
	_cleanup_(strv_freep) char **v = NULL;
	size_t n = 0;
	int r;

	if ((r = fleet_running_read(f, 0, &rv)) < 0)
		return r;
	for (size_t i = 0; i < rv.n; i++)
		if ((r = strv_push(&v, &n, rv.versions[i])) < 0)
			return r;
	return strv_finish_sorted(&v, &n, ret_versions);
}

int fleet_hosts_at_version(struct fleet *f, const char *version, char ***ret_hosts,
			   int64_t *ret_revision)
{
	_cleanup_(fleet_running_releasep) struct fleet_running rv = { 0 };
	_cleanup_(strv_freep) char **v = NULL;
	size_t n = 0;
	int r;

	if (!name_ok(version))
		return -EINVAL;
	if ((r = fleet_running_read(f, 0, &rv)) < 0)
		return r;
	for (size_t i = 0; i < rv.n; i++)
		if (strcmp(rv.versions[i], version) == 0 &&
		    (r = strv_push(&v, &n, rv.hosts[i])) < 0)
			return r;
	if (ret_revision)
		*ret_revision = rv.revision;
	return strv_finish_sorted(&v, &n, ret_hosts);
}

/* --- statuses -------------------------------------------------------------------- */

/* Adds to t the deletes of host's key under every state of type but keep. */
static int txn_delete_other_states(struct etcd_txn *t, const char *P, const char *host,
				   enum status_type type, enum status_state keep)
{
	for (int s = 0; s < _STATE_MAX; s++) {
		if (s == (int)keep || !status_state_allowed(type, (enum status_state)s))
			continue;
		_cleanup_(freep) char *key = key_status(P, type, (enum status_state)s, host);
		if (!key)
			return -ENOMEM;
		int r = etcd_txn_delete(t, true, key);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool type_valid(enum status_type type)
{
	return (int)type >= 0 && type < _STATUS_TYPE_MAX;
}

int fleet_set_status(struct fleet *f, const char *host, enum status_type type,
		     enum status_state state, const char *version, int exit_code,
		     const char *detail)
{
	if (!name_ok(host) || !optional_name_ok(version) || !type_valid(type) ||
	    !status_state_allowed(type, state))
		return -EINVAL;

	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *key = key_status(P, type, state, host);
	_cleanup_(freep) char *value = NULL;
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = NULL;
	int r;

	if (!key)
		return -ENOMEM;
	r = status_value(version, exit_code, detail, &value);
	if (r < 0)
		return r;
	t = etcd_txn_new();
	if (!t)
		return -ENOMEM;
	if ((r = etcd_txn_put(t, true, key, value, 0)) < 0 ||
	    (r = txn_delete_other_states(t, P, host, type, state)) < 0)
		return r;
	return written(etcd_txn_commit(f->etcd, t, NULL, NULL));
}

/*
 * One small range per allowed state, all pinned to the revision of the first, so
 * a state change between them cannot show the host in two states or in none.  A
 * range on the exact key also matches longer keys ("web1" and "web10"), which are
 * filtered out.
 */
int fleet_get_status(struct fleet *f, const char *host, enum status_type type,
		     enum status_state *ret_state, char **ret_detail)
{
	if (!name_ok(host) || !type_valid(type))
		return -EINVAL;

	const char *P = fleet_prefix(f);
	enum status_state found = STATE_INVALID;
	int64_t found_time = -1, revision = 0;
	_cleanup_(freep) char *detail = NULL;
	int r;

	for (int s = 0; s < _STATE_MAX; s++) {
		if (!status_state_allowed(type, (enum status_state)s))
			continue;
		_cleanup_(freep) char *key = key_status(P, type, (enum status_state)s, host);
		_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
		int64_t at = 0;
		if (!key)
			return -ENOMEM;
		/* exactly the key: all a per-host identity may read of it */
		r = etcd_get_at(f->etcd, key, revision, &kv, &at);
		if (r < 0)
			return r;
		if (revision == 0)
			revision = at;
		if (r == 1) {
			_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(&kv);
			int64_t t = json_get_int(obj, "time");
			/* two states at once only happen by hand; the newest wins */
			if (t <= found_time)
				continue;
			found = (enum status_state)s;
			found_time = t;
			free(detail);
			detail = NULL;
			const char *d = json_get_string(obj, "detail");
			if (d && (r = utf8_tail(d, SCHEMA_DETAIL_MAX, &detail)) < 0)
				return r;
		}
	}
	if (ret_state)
		*ret_state = found;
	if (ret_detail)
		*ret_detail = TAKE_PTR(detail);
	return 0;
}

/* --- registration ---------------------------------------------------------------- */

/* alive/HOST's value: {"time","version","pid"} (no "version" when NULL). */
static int alive_value(const char *version, long pid, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!obj)
		return -ENOMEM;
	if ((r = json_add_time(obj, "time", fleet_now())) < 0 ||
	    (r = json_add_string_opt(obj, "version", version)) < 0)
		return r;
	if (!cJSON_AddNumberToObject(obj, "pid", (double)pid))
		return -ENOMEM;
	return json_print(obj, ret);
}

int fleet_register(struct fleet *f, const char *host, const char *group, const char *version,
		   long pid, int64_t lease)
{
	if (!name_ok(host) || !optional_name_ok(group) || !optional_name_ok(version))
		return -EINVAL;

	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *alive_key = key_alive(P, host);
	_cleanup_(freep) char *ok_key = key_status(P, STATUS_PROVISIONED, STATE_SUCCESS, host);
	_cleanup_(freep) char *group_key = group ? key_group_host(P, group, host) : NULL;
	_cleanup_(freep) char *alive = NULL, *ok_value = NULL;
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
	int r;

	if (!alive_key || !ok_key || (group && !group_key) || !t)
		return -ENOMEM;
	if ((r = alive_value(version, pid, &alive)) < 0 ||
	    (r = status_value(version, 0, NULL, &ok_value)) < 0)
		return r;

	/*
	 * When the host is already provisioned its key is left alone (the failure
	 * branch writes it): rewriting it at every start would make its "time" say
	 * nothing.  Both branches put alive and the group.
	 */
	r = etcd_txn_if_version(t, ok_key, ETCD_CMP_GREATER, 0);
	if (r < 0)
		return r;
	for (int branch = 0; branch < 2; branch++) {
		bool on = branch == 0;
		if ((r = etcd_txn_put(t, on, alive_key, alive, lease)) < 0)
			return r;
		if (group_key && (r = etcd_txn_put(t, on, group_key, "", 0)) < 0)
			return r;
	}
	if ((r = etcd_txn_put(t, false, ok_key, ok_value, 0)) < 0)
		return r;
	for (int s = 0; s < _STATE_MAX; s++) {
		if (s == STATE_SUCCESS || !status_state_allowed(STATUS_PROVISIONED, (enum status_state)s))
			continue;
		_cleanup_(freep) char *key = key_status(P, STATUS_PROVISIONED, (enum status_state)s, host);
		if (!key)
			return -ENOMEM;
		if ((r = etcd_txn_delete(t, false, key)) < 0)
			return r;
	}
	return written(etcd_txn_commit(f->etcd, t, NULL, NULL));
}

int fleet_provision(struct fleet *f, const char *host)
{
	return fleet_set_status(f, host, STATUS_PROVISIONED, STATE_SUCCESS, NULL, 0, NULL);
}

/* Collects the keys (rebuilt from their validated parts) below dir whose last
 * component is host; parts is the number of components below dir. */
static int collect_host_keys(const struct etcd_kv_list *list, const char *dir, int nparts,
			     const char *host, char ***keys, size_t *n_keys)
{
	for (size_t i = 0; i < list->n; i++) {
		_cleanup_(freep) char *copy = NULL;
		char *parts[3];

		if (key_split(list->kvs[i].key, list->kvs[i].key_len, dir, parts, nparts,
			      &copy) != nparts)
			continue;
		if (strcmp(parts[nparts - 1], host) != 0)
			continue;
		/* the key as read: key_split proved it is dir plus valid names */
		int r = strv_push(keys, n_keys, list->kvs[i].key);
		if (r < 0)
			return r;
	}
	return 0;
}

/*
 * Finds every key of host (ranges over the directories where a host appears
 * below some other name, keys only, at one revision; gets for its own keys) and
 * deletes them in one txn.  Returns the number of keys found, which is the
 * number deleted unless someone wrote or deleted one in between.  A host with
 * more keys than etcd allows in one txn (over a hundred services) is removed in
 * several.
 */
int fleet_decommission(struct fleet *f, const char *host)
{
	if (!name_ok(host))
		return -EINVAL;

	const char *P = fleet_prefix(f);
	struct {
		char *(*dir)(const char *prefix);
		int parts;
	} dirs[] = {
		{ key_status_dir, 3 },
		{ key_services_dir, 2 },
		{ key_groups_dir, 2 },
	};
	char *(*own[])(const char *prefix, const char *host) = {
		key_alive, key_running_version, key_rollout_holder, key_pause_host,
	};
	_cleanup_(strv_freep) char **keys = NULL;
	size_t n_keys = 0;
	int64_t revision = 0;
	int r;

	for (size_t d = 0; d < ELEMENTSOF(dirs); d++) {
		_cleanup_(freep) char *dir = dirs[d].dir(P);
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
		if (!dir)
			return -ENOMEM;
		r = etcd_get_prefix(f->etcd, dir, ETCD_KEYS_ONLY, revision, &list);
		if (r < 0)
			return r;
		if (revision == 0)
			revision = list.revision;
		r = collect_host_keys(&list, dir, dirs[d].parts, host, &keys, &n_keys);
		if (r < 0)
			return r;
	}
	for (size_t k = 0; k < ELEMENTSOF(own); k++) {
		_cleanup_(freep) char *key = own[k](P, host);
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
		if (!key)
			return -ENOMEM;
		r = etcd_get_prefix(f->etcd, key, ETCD_KEYS_ONLY, revision, &list);
		if (r < 0)
			return r;
		for (size_t i = 0; i < list.n; i++)
			if (kv_is(&list.kvs[i], key) && (r = strv_push(&keys, &n_keys, key)) < 0)
				return r;
	}

	for (size_t start = 0; start < n_keys; start += TXN_MAX_OPS) {
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
		if (!t)
			return -ENOMEM;
		for (size_t i = start; i < n_keys && i < start + TXN_MAX_OPS; i++)
			if ((r = etcd_txn_delete(t, true, keys[i])) < 0)
				return r;
		r = etcd_txn_commit(f->etcd, t, NULL, NULL);
		if (r < 0)
			return r;
	}
	return n_keys > INT32_MAX ? INT32_MAX : (int)n_keys;
}

/* --- services ---------------------------------------------------------------------- */

/*
 * The value of available_services/SERVICE/HOST: its addresses and its health,
 * nothing else.  The version a host runs is running_version/HOST's: were it
 * here too, every rollout would rewrite every entry and send each consumer an
 * event per host although no address and no health changed.  The value maps
 * each interface to one address; when an interface is given twice the first
 * address is kept, since the format has room for one.  -EINVAL for a bad name
 * or address.
 */
static int service_value(const char *service, const char *host,
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

int fleet_publish_service(struct fleet *f, const char *service, const char *host,
			  const struct catalog_entry *addresses, size_t n_addresses,
			  bool healthy, int64_t lease)
{
	_cleanup_(freep) char *key = NULL, *value = NULL;
	int r = service_value(service, host, addresses, n_addresses, healthy, &value);
	if (r < 0)
		return r;
	if (!(key = key_service(fleet_prefix(f), service, host)))
		return -ENOMEM;
	return written(etcd_put(f->etcd, key, value, strlen(value), lease));
}

int fleet_unpublish_service(struct fleet *f, const char *service, const char *host)
{
	if (!name_ok(service) || !name_ok(host))
		return -EINVAL;

	_cleanup_(freep) char *key = key_service(fleet_prefix(f), service, host);
	if (!key)
		return -ENOMEM;
	int r = etcd_delete(f->etcd, key);
	return r < 0 ? r : 0;
}

int fleet_read_catalog(struct fleet *f, int64_t revision, struct catalog *ret)
{
	_cleanup_(freep) char *dir = key_services_dir(fleet_prefix(f));
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	int r;

	if (!dir)
		return -ENOMEM;
	r = etcd_get_prefix(f->etcd, dir, 0, revision, &list);
	if (r < 0)
		return r;
	r = catalog_from_kvs(&list, dir, ret);
	if (r < 0)
		return r;
	ret->revision = list.revision;
	return 0;
}

/* --- pause --------------------------------------------------------------------------- */

static char *pause_key(const char *P, enum pause_scope scope, const char *name)
{
	switch (scope) {
	case PAUSE_GLOBAL:
		return key_pause_global(P);
	case PAUSE_GROUP:
		return key_pause_group(P, name);
	case PAUSE_HOST:
		return key_pause_host(P, name);
	}
	return NULL;
}

static bool pause_args_valid(enum pause_scope scope, const char *name)
{
	if (scope == PAUSE_GLOBAL)
		return true;
	return (scope == PAUSE_GROUP || scope == PAUSE_HOST) && name_ok(name);
}

int fleet_pause(struct fleet *f, enum pause_scope scope, const char *name, const char *reason)
{
	if (!pause_args_valid(scope, name))
		return -EINVAL;

	_cleanup_(freep) char *key = pause_key(fleet_prefix(f), scope, name);
	_cleanup_(freep) char *value = NULL, *why = NULL;
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	int r;

	if (!key || !obj)
		return -ENOMEM;
	if (reason && (r = utf8_tail(reason, SCHEMA_DETAIL_MAX, &why)) < 0)
		return r;
	if ((r = json_add_string_opt(obj, "reason", why ? why : "")) < 0 ||
	    (r = json_add_time(obj, "time", fleet_now())) < 0 ||
	    (r = json_print(obj, &value)) < 0)
		return r;
	return written(etcd_put(f->etcd, key, value, strlen(value), 0));
}

int fleet_resume(struct fleet *f, enum pause_scope scope, const char *name)
{
	if (!pause_args_valid(scope, name))
		return -EINVAL;

	_cleanup_(freep) char *key = pause_key(fleet_prefix(f), scope, name);
	if (!key)
		return -ENOMEM;
	return etcd_delete(f->etcd, key);
}

/* "global: kernel freeze", "group dc1: …", "host web1: …"; without a reason
 * just the scope. */
static int pause_reason(const struct etcd_kv *kv, const char *scope, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(kv);
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	_cleanup_(freep) char *why = NULL;
	const char *reason = json_get_string(obj, "reason");
	int r;

	if (reason && *reason && (r = utf8_tail(reason, SCHEMA_DETAIL_MAX, &why)) < 0)
		return r;
	r = why ? buf_printf(&b, "%s: %s", scope, why) : buf_adds(&b, scope);
	if (r < 0)
		return r;
	*ret = buf_detach(&b);
	return *ret ? 0 : -ENOMEM;
}

/*
 * Which pause of list (the keys of pause/) applies to host, in group (may be
 * NULL): the global one first, then the group's, then the host's.  Returns 1
 * and *ret_reason ("global: kernel freeze") when one does, 0 when none.  A
 * pause key whose value is not JSON still pauses: when in doubt, a node does
 * not start a run.  The daemon's model and the fleet view share it, so both
 * say the same.
 */
int fleet_pause_find(const struct etcd_kv_list *list, const char *P, const char *host,
		     const char *group, char **ret_reason)
{
	_cleanup_(freep) char *global = key_pause_global(P);
	_cleanup_(freep) char *group_key = group ? key_pause_group(P, group) : NULL;
	_cleanup_(freep) char *host_key = key_pause_host(P, host);
	_cleanup_(buf_releasep) struct buf group_scope = BUF_INIT, host_scope = BUF_INIT;
	int r;

	if (ret_reason)
		*ret_reason = NULL;
	if (list->n == 0)
		return 0;
	if (!global || (group && !group_key) || !host_key)
		return -ENOMEM;
	if ((r = buf_printf(&host_scope, "host %s", host)) < 0 ||
	    (group && (r = buf_printf(&group_scope, "group %s", group)) < 0))
		return r;

	const char *keys[] = { global, group_key, host_key };
	const char *scopes[] = { "global", buf_str(&group_scope), buf_str(&host_scope) };
	for (size_t k = 0; k < ELEMENTSOF(keys); k++) {
		if (!keys[k])
			continue;
		for (size_t i = 0; i < list->n; i++) {
			if (!kv_is(&list->kvs[i], keys[k]))
				continue;
			if (ret_reason && (r = pause_reason(&list->kvs[i], scopes[k], ret_reason)) < 0)
				return r;
			return 1;
		}
	}
	return 0;
}

/* --- pauses and names, as the command line lists and checks them ------------------- */

void pause_entries_free(struct pause_entry *p, size_t n)
{
	if (!p)
		return;
	for (size_t i = 0; i < n; i++) {
		free(p[i].name);
		free(p[i].reason);
	}
	free(p);
}

/* One kv below pause/ as an entry; 0 and nothing added for a key that is not
 * one of the three shapes (a hostile key never becomes a name). */
static int pause_entry_add(const struct etcd_kv *kv, const char *dir, const char *global,
			   struct pause_entry **v, size_t *n, size_t *cap)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(kv);
	_cleanup_(freep) char *copy = NULL;
	_cleanup_(freep) char *sub = NULL;
	enum pause_scope scope;
	char *parts[1];
	const char *name = NULL, *reason;

	if (kv_is(kv, global)) {
		scope = PAUSE_GLOBAL;
	} else {
		if (asprintf(&sub, "%sgroups/", dir) < 0)
			return -ENOMEM;
		scope = PAUSE_GROUP;
		if (key_split(kv->key, kv->key_len, sub, parts, 1, &copy) != 1) {
			free(sub);
			if (asprintf(&sub, "%shosts/", dir) < 0) {
				sub = NULL;
				return -ENOMEM;
			}
			scope = PAUSE_HOST;
			if (key_split(kv->key, kv->key_len, sub, parts, 1, &copy) != 1)
				return 0;
		}
		name = parts[0];
	}
	if (ARRAY_GROW(*v, *cap, *n + 1, 8) < 0)
		return -ENOMEM;
	reason = json_get_string(obj, "reason");
	struct pause_entry *e = &(*v)[*n];
	*e = (struct pause_entry){ .scope = scope, .time = json_get_int(obj, "time") };
	if ((name && !(e->name = strdup(name))) ||
	    (reason && *reason && utf8_tail(reason, SCHEMA_DETAIL_MAX, &e->reason) < 0)) {
		free(e->name);
		return -ENOMEM;
	}
	(*n)++;
	return 0;
}

int fleet_pauses_list(struct fleet *f, struct pause_entry **ret, size_t *ret_n)
{
	_cleanup_(freep) char *dir = key_pause_dir(fleet_prefix(f));
	_cleanup_(freep) char *global = key_pause_global(fleet_prefix(f));
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	struct pause_entry *v = NULL;
	size_t n = 0, cap = 0;
	int r;

	if (!dir || !global)
		return -ENOMEM;
	if ((r = etcd_get_prefix(f->etcd, dir, 0, 0, &list)) < 0)
		return r;
	/* the range is sorted by key: global, groups/..., hosts/... */
	for (size_t i = 0; i < list.n; i++)
		if ((r = pause_entry_add(&list.kvs[i], dir, global, &v, &n, &cap)) < 0) {
			pause_entries_free(v, n);
			return r;
		}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* The number of keys below dir (one count-only range). */
static int count_keys(struct fleet *f, const char *dir, size_t *ret)
{
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	int r;

	if (!dir)
		return -ENOMEM;
	if ((r = etcd_get_prefix(f->etcd, dir, ETCD_COUNT_ONLY, 0, &list)) < 0)
		return r;
	*ret = list.count > 0 ? (size_t)list.count : 0;
	return 0;
}

int fleet_alive_count(struct fleet *f, size_t *ret)
{
	_cleanup_(freep) char *dir = key_alive_dir(fleet_prefix(f));
	return count_keys(f, dir, ret);
}

int fleet_group_size(struct fleet *f, const char *group, size_t *ret)
{
	if (!name_ok(group))
		return -EINVAL;
	_cleanup_(freep) char *dir = key_group_members_dir(fleet_prefix(f), group);
	return count_keys(f, dir, ret);
}

int fleet_host_known(struct fleet *f, const char *host)
{
	if (!name_ok(host))
		return -EINVAL;
	_cleanup_(freep) char *alive = key_alive(fleet_prefix(f), host);
	int r;

	if (!alive)
		return -ENOMEM;
	if ((r = etcd_get(f->etcd, alive, NULL, NULL)) != 0)
		return r;
	for (int s = 0; s < _STATE_MAX; s++) {
		if (!status_state_allowed(STATUS_PROVISIONED, (enum status_state)s))
			continue;
		_cleanup_(freep) char *key = key_status(fleet_prefix(f), STATUS_PROVISIONED,
							(enum status_state)s, host);
		if (!key)
			return -ENOMEM;
		if ((r = etcd_get(f->etcd, key, NULL, NULL)) != 0)
			return r;
	}
	return 0;
}

void host_record_release(struct host_record *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n_states; i++) {
		free(h->states[i].version);
		free(h->states[i].detail);
		free(h->states[i].wait);
	}
	free(h->states);
	free(h->alive_version);
	memset(h, 0, sizeof(*h));
}

int fleet_host_record(struct fleet *f, const char *host, struct host_record *ret)
{
	_cleanup_(host_record_releasep) struct host_record h = { 0 };
	_cleanup_(freep) char *alive = NULL;
	int r;

	if (!name_ok(host))
		return -EINVAL;
	h.states = calloc((size_t)_STATUS_TYPE_MAX * _STATE_MAX, sizeof(*h.states));
	if (!h.states || !(alive = key_alive(fleet_prefix(f), host)))
		return -ENOMEM;
	for (int t = 0; t < _STATUS_TYPE_MAX; t++)
		for (int s = 0; s < _STATE_MAX; s++) {
			_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
			_cleanup_(cJSON_Deletep) cJSON *obj = NULL;
			_cleanup_(freep) char *key = NULL;
			const char *version, *detail;

			if (!status_state_allowed((enum status_type)t, (enum status_state)s))
				continue;
			key = key_status(fleet_prefix(f), (enum status_type)t, (enum status_state)s,
					 host);
			if (!key)
				return -ENOMEM;
			if ((r = etcd_get(f->etcd, key, &kv, NULL)) < 0)
				return r;
			if (r == 0)
				continue;
			obj = json_parse_object(&kv);
			version = json_get_string(obj, "version");
			detail = json_get_string(obj, "detail");
			struct host_state *st = &h.states[h.n_states++];
			*st = (struct host_state){
				.type = (enum status_type)t, .state = (enum status_state)s,
				.time = json_get_int(obj, "time"),
				.exit_code = (int)json_get_int(obj, "exit_code"),
			};
			if ((version && !(st->version = strdup(version))) ||
			    (detail && *detail && !(st->detail = strdup(detail))))
				return -ENOMEM;
			if ((r = status_extra_decode(obj, &st->attempts, &st->first_failure,
						     &st->wait)) < 0)
				return r;
		}

	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	if ((r = etcd_get(f->etcd, alive, &kv, NULL)) < 0)
		return r;
	if (r > 0) {
		_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(&kv);
		const char *version = json_get_string(obj, "version");
		h.alive = true;
		h.alive_time = json_get_int(obj, "time");
		h.alive_pid = (long)json_get_int(obj, "pid");
		h.lease = kv.lease;
		if (version && !(h.alive_version = strdup(version)))
			return -ENOMEM;
	}
	*ret = h;
	memset(&h, 0, sizeof(h));
	return 0;
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

int fleet_get_policy(struct fleet *f, struct rollout_policy *ret, char **ret_raw)
{
	_cleanup_(freep) char *key = key_rollout_policy(fleet_prefix(f));
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	int r;

	if (!key)
		return -ENOMEM;
	r = etcd_get(f->etcd, key, &kv, NULL);
	if (r <= 0)
		return r;
	r = rollout_policy_decode(kv.value, kv.value_len, ret);
	if (r == -EPROTO && ret_raw)
		*ret_raw = TAKE_PTR(kv.value);
	return r < 0 ? r : 1;
}

int fleet_set_policy(struct fleet *f, const struct rollout_policy *p)
{
	_cleanup_(freep) char *key = key_rollout_policy(fleet_prefix(f));
	_cleanup_(freep) char *value = NULL;
	int r;

	if (rollout_policy_problem(p))
		return -EINVAL;
	if (!key)
		return -ENOMEM;
	if ((r = rollout_policy_encode(p, &value)) < 0)
		return r;
	return written(etcd_put(f->etcd, key, value, strlen(value), 0));
}

int fleet_clear_policy(struct fleet *f)
{
	_cleanup_(freep) char *key = key_rollout_policy(fleet_prefix(f));
	if (!key)
		return -ENOMEM;
	return etcd_delete(f->etcd, key);
}

static int holder_value(const char *host, const char *version, const char *group, char **ret)
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

/* --- the fleet at a glance -------------------------------------------------------------- */

enum view_source {
	SOURCE_STATUS,
	SOURCE_RUNNING,
	SOURCE_ALIVE,
	SOURCE_GROUPS,
	_SOURCE_MAX,
};

struct view_read {
	char *dirs[_SOURCE_MAX];
	struct etcd_kv_list lists[_SOURCE_MAX];
	struct etcd_kv_list versions;	/* current_version and previous_version */
};

static const int source_parts[_SOURCE_MAX] = {
	[SOURCE_STATUS] = 3,
	[SOURCE_RUNNING] = 1,
	[SOURCE_ALIVE] = 1,
	[SOURCE_GROUPS] = 2,
};

static const unsigned source_flags[_SOURCE_MAX] = {
	[SOURCE_STATUS] = 0,
	[SOURCE_RUNNING] = 0,
	[SOURCE_ALIVE] = 0,
	[SOURCE_GROUPS] = ETCD_KEYS_ONLY,
};

static void view_read_release(struct view_read *vr)
{
	for (int s = 0; s < _SOURCE_MAX; s++) {
		free(vr->dirs[s]);
		vr->dirs[s] = NULL;
		etcd_kv_list_release(&vr->lists[s]);
	}
	etcd_kv_list_release(&vr->versions);
}

static void view_read_releasep(struct view_read *vr) { view_read_release(vr); }

/* The current_version and previous_version "ranges" (exact keys as prefix
 * ranges, because etcd_get cannot pin a revision), appended to vr->versions;
 * the first read fixes the revision every other range is pinned to. */
static int view_read_versions(struct fleet *f, struct view_read *vr, int64_t *revision)
{
	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *cur = key_current_version(P);
	_cleanup_(freep) char *prev = key_previous_version(P);
	int r;

	if (!cur || !prev)
		return -ENOMEM;
	r = etcd_get_prefix(f->etcd, cur, 0, *revision, &vr->versions);
	if (r < 0)
		return r;
	if (*revision == 0)
		*revision = vr->versions.revision;
	struct etcd_kv_list more = ETCD_KV_LIST_INIT;
	r = etcd_get_prefix(f->etcd, prev, 0, *revision, &more);
	if (r < 0) {
		etcd_kv_list_release(&more);
		return r;
	}
	for (size_t i = 0; i < more.n; i++) {
		if (ARRAY_GROW(vr->versions.kvs, vr->versions.cap, vr->versions.n + 1, 4) < 0) {
			etcd_kv_list_release(&more);
			return -ENOMEM;
		}
		vr->versions.kvs[vr->versions.n++] = more.kvs[i];
		memset(&more.kvs[i], 0, sizeof(more.kvs[i]));
	}
	etcd_kv_list_release(&more);
	return 0;
}

/* One lane of source ranges [from, to), on its own client. */
struct view_lane {
	struct etcd_client *etcd;
	struct view_read *vr;
	int from, to;
	int64_t revision;
	int r;
};

static void *view_lane_run(void *userdata)
{
	struct view_lane *l = userdata;
	l->r = 0;
	for (int s = l->from; s < l->to && l->r >= 0; s++)
		l->r = etcd_get_prefix_paged(l->etcd, l->vr->dirs[s], source_flags[s], l->revision,
					     VIEW_PAGE_SIZE, &l->vr->lists[s]);
	return NULL;
}

/*
 * The ranges, all pinned to the revision of the first read.  With
 * f->parallel, the status range (half the keys) is read here while a thread
 * reads the others on a second client; a failure to start the second lane
 * falls back to reading everything here.
 */
static int view_read_ranges(struct fleet *f, struct view_read *vr, int64_t *ret_revision)
{
	const char *P = fleet_prefix(f);
	char *(*dir_fn[_SOURCE_MAX])(const char *) = {
		[SOURCE_STATUS] = key_status_dir,
		[SOURCE_RUNNING] = key_running_version_dir,
		[SOURCE_ALIVE] = key_alive_dir,
		[SOURCE_GROUPS] = key_groups_dir,
	};
	_cleanup_(etcd_client_freep) struct etcd_client *second = NULL;
	struct view_lane here = { .etcd = f->etcd, .vr = vr, .from = 0, .to = _SOURCE_MAX };
	struct view_lane there = { .vr = vr, .from = 1, .to = _SOURCE_MAX };
	pthread_t thread;
	bool threaded = false;
	int64_t revision = 0;
	int r;

	for (int s = 0; s < _SOURCE_MAX; s++)
		if (!(vr->dirs[s] = dir_fn[s](P)))
			return -ENOMEM;
	if ((r = view_read_versions(f, vr, &revision)) < 0)
		return r;
	here.revision = there.revision = revision;
	if (f->parallel && etcd_client_new(f->parallel, &second) >= 0) {
		there.etcd = second;
		threaded = pthread_create(&thread, NULL, view_lane_run, &there) == 0;
		if (threaded)
			here.to = 1;
	}
	view_lane_run(&here);
	if (threaded) {
		pthread_join(thread, NULL);
		if (there.r < 0 && here.r >= 0) {
			/* say what failed through the client the caller asks */
			for (int s = 1; s < _SOURCE_MAX; s++)
				etcd_kv_list_release(&vr->lists[s]);
			here.from = 1;
			here.to = _SOURCE_MAX;
			view_lane_run(&here);
		}
	}
	if (here.r < 0)
		return here.r;
	*ret_revision = revision;
	return 0;
}

static int host_view_search(const void *key, const void *elem)
{
	return strcmp((const char *)key, ((const struct host_view *)elem)->host);
}

static struct host_view *view_find(struct fleet_view *v, const char *host)
{
	return bsearch(host, v->hosts, v->n, sizeof(*v->hosts), host_view_search);
}

/* Per host, while statuses are merged: the time of each type's state and its
 * detail, until the detail to show is chosen. */
struct status_seen {
	int64_t time[_STATUS_TYPE_MAX];
	char *detail[_STATUS_TYPE_MAX];
	long attempts[_STATUS_TYPE_MAX];
	int64_t first_failure[_STATUS_TYPE_MAX];
	char *wait[_STATUS_TYPE_MAX];
};

static int view_add_status(struct host_view *h, struct status_seen *seen, char **parts,
			   const struct etcd_kv *kv)
{
	int type = status_type_from_name(parts[0]);
	int state = status_state_from_name(parts[1]);
	if (type < 0 || state < 0 || !status_state_allowed(type, state))
		return 0;

	_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(kv);
	int64_t t = json_get_int(obj, "time");
	enum status_state *slot = type == STATUS_PUPPET ? &h->puppet :
				  type == STATUS_VALIDATION ? &h->validation : &h->provisioned;

	/* two states of one type only happen by hand; the newest wins */
	if (*slot != STATE_INVALID && t < seen->time[type])
		return 0;
	*slot = state;
	seen->time[type] = t;
	if (t > h->changed)
		h->changed = t;
	if (type == STATUS_PUPPET)
		h->puppet_exit_code = (int)json_get_int(obj, "exit_code");
	free(seen->detail[type]);
	seen->detail[type] = NULL;
	free(seen->wait[type]);
	int r = status_extra_decode(obj, &seen->attempts[type], &seen->first_failure[type],
				    &seen->wait[type]);
	if (r < 0)
		return r;
	const char *d = json_get_string(obj, "detail");
	if (d && *d)
		return utf8_tail(d, SCHEMA_DETAIL_MAX, &seen->detail[type]);
	return 0;
}

static int view_add(struct fleet_view *v, struct status_seen *seen, enum view_source s,
		    char **parts, const struct etcd_kv *kv)
{
	const char *host = parts[source_parts[s] - 1];
	struct host_view *h = view_find(v, host);
	if (!h)
		return 0;

	switch (s) {
	case SOURCE_STATUS:
		return view_add_status(h, &seen[h - v->hosts], parts, kv);
	case SOURCE_RUNNING: {
		char *version;
		int r = fleet_running_decode(kv->value, kv->value_len, &version);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			return 0;	/* not a version: the host runs none */
		free(h->running_version);
		h->running_version = version;
		return 0;
	}
	case SOURCE_GROUPS:
		if (!h->group && !(h->group = strdup(parts[0])))
			return -ENOMEM;
		return 0;
	case SOURCE_ALIVE: {
		_cleanup_(cJSON_Deletep) cJSON *obj = json_parse_object(kv);
		const char *ver = json_get_string(obj, "version");
		h->alive = true;
		if (ver && schema_name_valid(ver) && !(h->alive_version = strdup(ver)))
			return -ENOMEM;
		return 0;
	}
	default:
		return 0;
	}
}

/* Every host named anywhere, sorted and unique, as the view's host array. */
static int view_collect_hosts(struct view_read *vr, struct fleet_view *v)
{
	_cleanup_(strv_freep) char **all = NULL;
	_cleanup_(strv_freep) char **names = NULL;
	size_t n_all = 0, n = 0;
	int r;

	for (int s = 0; s < _SOURCE_MAX; s++) {
		for (size_t i = 0; i < vr->lists[s].n; i++) {
			_cleanup_(freep) char *copy = NULL;
			char *parts[3];
			const struct etcd_kv *kv = &vr->lists[s].kvs[i];

			if (key_split(kv->key, kv->key_len, vr->dirs[s], parts, source_parts[s],
				      &copy) != source_parts[s])
				continue;
			r = strv_push(&all, &n_all, parts[source_parts[s] - 1]);
			if (r < 0)
				return r;
		}
	}
	r = strv_finish_sorted(&all, &n_all, &names);
	if (r < 0)
		return r;
	n = strv_length(names);
	v->hosts = calloc(n ? n : 1, sizeof(*v->hosts));
	if (!v->hosts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct host_view *h = &v->hosts[i];
		h->host = TAKE_PTR(names[i]);
		h->puppet = h->validation = h->provisioned = STATE_INVALID;
		v->n = i + 1;
	}
	return 0;
}

static void status_seen_free(struct status_seen *seen, size_t n)
{
	if (!seen)
		return;
	for (size_t i = 0; i < n; i++)
		for (int t = 0; t < _STATUS_TYPE_MAX; t++) {
			free(seen[i].detail[t]);
			free(seen[i].wait[t]);
		}
	free(seen);
}

static int view_build(struct view_read *vr, const char *P, struct fleet_view *v)
{
	struct status_seen *seen;
	int r;

	r = view_collect_hosts(vr, v);
	if (r < 0)
		return r;
	seen = calloc(v->n ? v->n : 1, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (int s = 0; s < _SOURCE_MAX; s++) {
		for (size_t i = 0; i < vr->lists[s].n; i++) {
			_cleanup_(freep) char *copy = NULL;
			char *parts[3];
			const struct etcd_kv *kv = &vr->lists[s].kvs[i];

			if (key_split(kv->key, kv->key_len, vr->dirs[s], parts, source_parts[s],
				      &copy) != source_parts[s])
				continue;
			r = view_add(v, seen, (enum view_source)s, parts, kv);
			if (r < 0) {
				status_seen_free(seen, v->n);
				return r;
			}
		}
	}
	/* the detail worth a glance: why the config run failed or waits, else why
	 * validation failed */
	for (size_t i = 0; i < v->n; i++) {
		struct host_view *h = &v->hosts[i];
		int t = h->puppet == STATE_FAILED || h->puppet == STATE_PENDING ? STATUS_PUPPET :
			h->validation == STATE_FAILED ? STATUS_VALIDATION : -1;
		if (t < 0)
			continue;
		h->detail = TAKE_PTR(seen[i].detail[t]);
		h->attempts = seen[i].attempts[t];
		h->first_failure = seen[i].first_failure[t];
		/* a wait is said by a pending state only */
		if (h->puppet == STATE_PENDING)
			h->wait = TAKE_PTR(seen[i].wait[t]);
	}
	status_seen_free(seen, v->n);

	_cleanup_(freep) char *cur = key_current_version(P);
	_cleanup_(freep) char *prev = key_previous_version(P);
	if (!cur || !prev)
		return -ENOMEM;
	for (size_t i = 0; i < vr->versions.n; i++) {
		const struct etcd_kv *kv = &vr->versions.kvs[i];
		char **slot = kv_is(kv, cur) ? &v->current_version :
			      kv_is(kv, prev) ? &v->previous_version : NULL;
		if (!slot || *slot || !value_is_name(kv->value, kv->value_len))
			continue;
		*slot = strdup(kv->value);
		if (!*slot)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Reads everything at one revision.  The ranges after the first are pinned to its
 * revision; should a compaction overtake them (-ESTALE), the read starts over.
 */
/* Marks the hosts a pause applies to, read at the view's revision. */
static int view_add_pauses(struct fleet *f, struct fleet_view *v)
{
	_cleanup_(freep) char *dir = key_pause_dir(fleet_prefix(f));
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	if (!dir)
		return -ENOMEM;
	int r = etcd_get_prefix(f->etcd, dir, 0, v->revision, &list);
	if (r < 0)
		return r;
	for (size_t i = 0; i < v->n && list.n > 0; i++) {
		struct host_view *h = &v->hosts[i];
		r = fleet_pause_find(&list, fleet_prefix(f), h->host, h->group, &h->paused);
		if (r < 0)
			return r;
	}
	return 0;
}

int fleet_view_read(struct fleet *f, struct fleet_view *ret)
{
	int r = -ESTALE;

	for (int attempt = 0; attempt < 3 && r == -ESTALE; attempt++) {
		_cleanup_(view_read_releasep) struct view_read vr = { 0 };
		int64_t revision = 0;

		r = view_read_ranges(f, &vr, &revision);
		if (r < 0)
			continue;
		struct fleet_view v = { 0 };
		r = view_build(&vr, fleet_prefix(f), &v);
		if (r < 0) {
			fleet_view_release(&v);
			return r;
		}
		v.revision = revision;
		r = view_add_pauses(f, &v);
		if (r < 0) {
			fleet_view_release(&v);
			if (r == -ESTALE)
				continue;
			return r;
		}
		*ret = v;
		return 0;
	}
	return r;
}

void fleet_view_release(struct fleet_view *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		struct host_view *h = &v->hosts[i];
		free(h->host);
		free(h->running_version);
		free(h->alive_version);
		free(h->group);
		free(h->detail);
		free(h->paused);
		free(h->wait);
	}
	free(v->hosts);
	free(v->current_version);
	free(v->previous_version);
	memset(v, 0, sizeof(*v));
}

/* --- batches -------------------------------------------------------------------------- */

/*
 * A batch is one txn: every op is checked (names, values) as it is added, so a
 * batch either holds only valid ops or is dropped by its caller, and its
 * commit writes all of them at one revision or none.  It is how a node makes a
 * run cost etcd the writes it must make and no more: the end of a run (puppet
 * and validation states, running version, alive, its services, its rollout
 * slot) is one request.  A batch may also carry compares (a guard: see
 * fleet_model_guard_start()), which ride the same request.
 */
struct fleet_batch {
	struct fleet *f;
	struct etcd_txn *t;
	size_t ops;
	size_t compares;
	bool sent;		/* by fleet_batch_commit_start(), settled */
};

int fleet_batch_new(struct fleet *f, struct fleet_batch **ret)
{
	struct fleet_batch *b = calloc(1, sizeof(*b));
	if (!b || !(b->t = etcd_txn_new())) {
		free(b);
		return -ENOMEM;
	}
	b->f = f;
	*ret = b;
	return 0;
}

struct fleet_batch *fleet_batch_free(struct fleet_batch *b)
{
	if (b) {
		etcd_txn_free(b->t);
		free(b);
	}
	return NULL;
}

static int batch_put(struct fleet_batch *b, char *key, const char *value, int64_t lease)
{
	_cleanup_(freep) char *k = key;
	if (!k)
		return -ENOMEM;
	int r = etcd_txn_put(b->t, true, k, value, lease);
	if (r >= 0)
		b->ops++;
	return r;
}

static int batch_delete(struct fleet_batch *b, char *key)
{
	_cleanup_(freep) char *k = key;
	if (!k)
		return -ENOMEM;
	int r = etcd_txn_delete(b->t, true, k);
	if (r >= 0)
		b->ops++;
	return r;
}

int fleet_batch_status(struct fleet_batch *b, const char *host, enum status_type type,
		       enum status_state state, const char *version, int exit_code,
		       const char *detail)
{
	return fleet_batch_status_extra(b, host, type, state, version, exit_code, detail, NULL);
}

int fleet_batch_status_extra(struct fleet_batch *b, const char *host, enum status_type type,
			     enum status_state state, const char *version, int exit_code,
			     const char *detail, const struct status_extra *extra)
{
	_cleanup_(freep) char *value = NULL;
	const char *P = fleet_prefix(b->f);
	int r;

	if (!name_ok(host) || !optional_name_ok(version) || !type_valid(type) ||
	    !status_state_allowed(type, state))
		return -EINVAL;
	if ((r = status_value_extra(version, exit_code, detail, extra, &value)) < 0 ||
	    (r = batch_put(b, key_status(P, type, state, host), value, 0)) < 0 ||
	    (r = txn_delete_other_states(b->t, P, host, type, state)) < 0)
		return r;
	return 0;
}

int fleet_batch_running_version(struct fleet_batch *b, const char *host, const char *version,
				int64_t lease)
{
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(host) || !name_ok(version))
		return -EINVAL;
	if ((r = running_value(version, &value)) < 0)
		return r;
	return batch_put(b, key_running_version(fleet_prefix(b->f), host), value, lease);
}

int fleet_batch_alive(struct fleet_batch *b, const char *host, const char *version, long pid,
		      int64_t lease)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(host) || !optional_name_ok(version))
		return -EINVAL;
	if (!obj)
		return -ENOMEM;
	if ((r = json_add_time(obj, "time", fleet_now())) < 0 ||
	    (r = json_add_string_opt(obj, "version", version)) < 0)
		return r;
	if (!cJSON_AddNumberToObject(obj, "pid", (double)pid))
		return -ENOMEM;
	if ((r = json_print(obj, &value)) < 0)
		return r;
	return batch_put(b, key_alive(fleet_prefix(b->f), host), value, lease);
}

int fleet_batch_service(struct fleet_batch *b, const char *service, const char *host,
			const char *value, int64_t lease)
{
	if (!name_ok(service) || !name_ok(host) || !value)
		return -EINVAL;
	return batch_put(b, key_service(fleet_prefix(b->f), service, host), value, lease);
}

int fleet_batch_unpublish(struct fleet_batch *b, const char *service, const char *host)
{
	if (!name_ok(service) || !name_ok(host))
		return -EINVAL;
	return batch_delete(b, key_service(fleet_prefix(b->f), service, host));
}

int fleet_batch_holder(struct fleet_batch *b, const char *host, const char *version,
		       const char *group, int64_t lease)
{
	_cleanup_(freep) char *value = NULL;
	int r = holder_value(host, version, group, &value);
	if (r < 0)
		return r;
	return batch_put(b, key_rollout_holder(fleet_prefix(b->f), host), value, lease);
}

int fleet_batch_release_holder(struct fleet_batch *b, const char *host)
{
	if (!name_ok(host))
		return -EINVAL;
	return batch_delete(b, key_rollout_holder(fleet_prefix(b->f), host));
}

int fleet_batch_failure(struct fleet_batch *b, const char *host, const char *version,
			int64_t trigger, long attempts, const char *stage)
{
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
		.stage = (char *)stage, .attempts = attempts,
	};
	int r;

	if (!name_ok(host) || !name_ok(version))
		return -EINVAL;
	if ((r = rollout_record_encode(&rec, &value)) < 0)
		return r;
	return batch_put(b, key_rollout_failed(fleet_prefix(b->f), host), value, 0);
}

int fleet_batch_clear_failure(struct fleet_batch *b, const char *host)
{
	if (!name_ok(host))
		return -EINVAL;
	return batch_delete(b, key_rollout_failed(fleet_prefix(b->f), host));
}

int fleet_batch_canary(struct fleet_batch *b, const char *host, const char *version,
		       int64_t trigger)
{
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
	};
	int r;

	if (!name_ok(host) || !name_ok(version))
		return -EINVAL;
	if ((r = rollout_record_encode(&rec, &value)) < 0)
		return r;
	return batch_put(b, key_rollout_canary(fleet_prefix(b->f), host), value, 0);
}

int fleet_batch_if_written_at(struct fleet_batch *b, const char *key, int64_t revision)
{
	int r = etcd_txn_if_mod_revision(b->t, key, ETCD_CMP_EQUAL, revision);
	if (r >= 0)
		b->compares++;
	return r;
}

int fleet_batch_if_unchanged_since(struct fleet_batch *b, const char *key, bool prefix,
				   int64_t revision)
{
	int r = prefix ? etcd_txn_if_prefix_mod_revision(b->t, key, ETCD_CMP_LESS, revision + 1)
		       : etcd_txn_if_mod_revision(b->t, key, ETCD_CMP_LESS, revision + 1);
	if (r >= 0)
		b->compares++;
	return r;
}

int fleet_batch_commit(struct fleet_batch *b, int64_t *ret_revision)
{
	bool held = true;
	int r;

	if (b->ops == 0 && b->compares == 0)
		return 0;
	r = etcd_txn_commit(b->f->etcd, b->t, b->compares ? &held : NULL, ret_revision);
	if (r < 0)
		return r;
	return held ? 0 : -ECANCELED;
}

bool fleet_batch_empty(const struct fleet_batch *b)
{
	return b->ops == 0 && b->compares == 0;
}

int fleet_batch_commit_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			     void *userdata, struct etcd_call **ret)
{
	int r;

	if (b->ops == 0 && b->compares == 0)
		return 1;
	/* Settled from the first send, not only on our resend: libcurl itself
	 * sends a request again, blindly, when a reused connection closes
	 * before any reply (a member that died after applying it). */
	if (!b->sent) {
		b->sent = true;
		if ((r = etcd_txn_settle(b->t, etcd_client_revision(b->f->etcd))) < 0)
			return r;
	}
	r = etcd_txn_commit_start(b->f->etcd, b->t, patience_ms, fn, userdata, ret);
	return r < 0 ? r : 0;
}

int fleet_batch_applied_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			      void *userdata, struct etcd_call **ret)
{
	if (!b->sent)
		return 1;
	int r = etcd_txn_applied_start(b->f->etcd, b->t, patience_ms, fn, userdata, ret);
	return r == -EINVAL ? 1 : r;
}

int fleet_service_value(const char *service, const char *host,
			const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
			char **ret)
{
	return service_value(service, host, addresses, n_addresses, healthy, ret);
}

/* --- the connection, for the command line ---------------------------------------- */

int fleet_open(struct fleet *f, const struct etcd_options *opts, const char *prefix)
{
	struct etcd_client *c = NULL;
	int r = etcd_client_new(opts, &c);

	if (r < 0)
		return r;
	*f = (struct fleet){ .etcd = c, .prefix = prefix ? prefix : "", .parallel = opts };
	return 0;
}

void fleet_close(struct fleet *f)
{
	if (!f)
		return;
	etcd_client_free(f->etcd);
	*f = (struct fleet){ 0 };
}

const char *fleet_last_error(const struct fleet *f)
{
	return f && f->etcd ? etcd_last_error(f->etcd) : NULL;
}

const char *fleet_denied_error(const struct fleet *f)
{
	static __thread char line[512];
	const char *key = f && f->etcd ? etcd_denied_key(f->etcd) : NULL;
	const char *user = key ? etcd_client_user(f->etcd) : NULL;

	if (!key)
		return NULL;
	if (user)
		snprintf(line, sizeof(line), "etcd: permission denied writing %s as user '%s'",
			 key_class(f->prefix, key), user);
	else
		snprintf(line, sizeof(line),
			 "etcd: permission denied writing %s as the client certificate's user",
			 key_class(f->prefix, key));
	return line;
}

int fleet_ping(struct fleet *f, char **ret_server_version, char **ret_endpoint)
{
	return etcd_status(f->etcd, ret_server_version, ret_endpoint);
}

/* --- failures ----------------------------------------------------------------------- */

void fleet_failures_release(struct fleet_failures *fl)
{
	if (!fl)
		return;
	strv_free(fl->puppet);
	strv_free(fl->validation);
	strv_free(fl->unaccounted);
	*fl = (struct fleet_failures){ 0 };
}

int fleet_view_failures(const struct fleet_view *v, struct fleet_failures *ret)
{
	_cleanup_(fleet_failures_releasep) struct fleet_failures fl = { 0 };
	int r;

	for (size_t i = 0; i < v->n; i++) {
		const struct host_view *h = &v->hosts[i];
		if ((h->puppet == STATE_FAILED &&
		     (r = strv_push(&fl.puppet, &fl.n_puppet, h->host)) < 0) ||
		    (h->validation == STATE_FAILED &&
		     (r = strv_push(&fl.validation, &fl.n_validation, h->host)) < 0) ||
		    (h->provisioned == STATE_SUCCESS && !h->alive &&
		     (r = strv_push(&fl.unaccounted, &fl.n_unaccounted, h->host)) < 0))
			return r;
	}
	/* the view's hosts are sorted already, so these are too; an empty list
	 * is an empty vector, never NULL */
	if ((!fl.puppet && !(fl.puppet = calloc(1, sizeof(char *)))) ||
	    (!fl.validation && !(fl.validation = calloc(1, sizeof(char *)))) ||
	    (!fl.unaccounted && !(fl.unaccounted = calloc(1, sizeof(char *)))))
		return -ENOMEM;
	*ret = fl;
	fl = (struct fleet_failures){ 0 };
	return 0;
}
