/*
 * fleet.c — fleet operations (fleet.h), each one request or one txn:
 * versions, statuses, registration, services, pauses and the rollout policy.
 *
 * Every key comes from schema.h's builders and every name is checked with
 * schema_name_valid() before the first request, so a hostile name can never
 * address another key.  Every change that touches several keys is one txn (the
 * invariants of orchestrate(1) "Key layout" hold at every revision), and every read of several
 * prefixes is pinned to one revision, so a reader never mixes two moments.
 *
 * Keys read back from etcd are split with key_split(), which refuses anything
 * that is not made of valid names: a key written by hand with a strange name is
 * skipped, never turned into a host, version or service.  The values are
 * fleet_codec.c's.
 *
 * The rest of the layer's fleet.h lives beside it, one file a concern:
 * fleet_codec.c (the values), fleet_view.c (the whole-fleet view),
 * fleet_batch.c (the daemon's batches), fleet_cli.c (what only the command
 * line asks).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/backoff.h"
#include "base/buf.h"
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

/* How often trigger_update re-reads and retries when its compare lost a race
 * with another writer (not a failure of the request), with a short random pause
 * growing with each attempt so that racing writers spread out. */
#define TRIGGER_RETRIES 10
#define TRIGGER_BACKOFF_MS 10
/* etcd refuses txns with more operations than --max-txn-ops (default 128);
 * decommission splits its deletes into txns of at most this many. */
#define TXN_MAX_OPS 100

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
 * back their change is not what was asked; -EAGAIN says so.
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
		return -EAGAIN;
	if (ret_version) {
		*ret_version = strdup(prev.value);
		if (!*ret_version)
			return -ENOMEM;
	}
	return 0;
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
	int r;

	*ret = (struct fleet_running){ 0 };
	if (!dir)
		return -ENOMEM;
	if ((r = etcd_get_prefix(f->etcd, dir, 0, revision, &list)) < 0)
		return r;
	return fleet_running_from_kvs(&list, strlen(dir), ret);
}

int fleet_running_from_kvs(const struct etcd_kv_list *list, size_t dir_len,
			   struct fleet_running *ret)
{
	struct fleet_running out = { 0 };

	*ret = (struct fleet_running){ 0 };
	out.hosts = calloc(list->n ? list->n : 1, sizeof(char *));
	out.versions = calloc(list->n ? list->n : 1, sizeof(char *));
	if (!out.hosts || !out.versions) {
		fleet_running_release(&out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < list->n; i++) {
		const struct etcd_kv *kv = &list->kvs[i];
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
	out.revision = list->revision;
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
int txn_delete_other_states(struct etcd_txn *t, const char *P, const char *host,
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
			_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(&kv);
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

/*
 * The registration's txn.  When the host is already provisioned its key is
 * left alone (the failure branch writes it): rewriting it at every start would
 * make its "time" say nothing.  Both branches put alive and the group, so that
 * either is a success and a resend writes the same again.
 */
static int register_txn(struct fleet *f, const char *host, const char *group, const char *version,
			long pid, int64_t lease, struct etcd_txn **ret)
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
	etcd_txn_either_branch(t);
	*ret = TAKE_PTR(t);
	return 0;
}

int fleet_register_start(struct fleet *f, const char *host, const char *group,
			 const char *version, long pid, int64_t lease, long patience_ms,
			 fleet_commit_fn fn, void *userdata, struct etcd_call **ret)
{
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = NULL;
	int r = register_txn(f, host, group, version, pid, lease, &t);
	if (r < 0)
		return r;
	return etcd_txn_commit_start(f->etcd, t, patience_ms, fn, userdata, ret);
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
		key_alive, key_running_version, key_rollout_holder, key_pause_host, key_history,
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

/* --- the run history, read by the daemon ------------------------------------------------ */

struct history_read {
	fleet_history_fn fn;
	void *userdata;
};

static void history_on_snapshot(int error, struct etcd_kv_list *lists, size_t n,
				int64_t revision, void *userdata)
{
	_cleanup_(freep) struct history_read *rd = userdata;
	_cleanup_(run_history_releasep) struct run_history h = { 0 };
	int r = error;

	if (r >= 0 && (n != 1 || lists[0].n == 0))
		r = 0;		/* no history yet */
	else if (r >= 0) {
		/* an undecodable value: a key with no runs */
		r = run_history_decode(lists[0].kvs[0].value, lists[0].kvs[0].value_len, &h);
		r = r == -ENOMEM ? r : 1;
	}
	rd->fn(r, r > 0 ? &h : NULL, rd->userdata);
}

int fleet_history_read_start(struct fleet *f, const char *host, long patience_ms,
			     fleet_history_fn fn, void *userdata, struct etcd_call **ret)
{
	_cleanup_(freep) char *key = NULL;
	_cleanup_(freep) struct history_read *rd = NULL;
	int r;

	if (!name_ok(host))
		return -EINVAL;
	if (!(key = key_history(fleet_prefix(f), host)) || !(rd = calloc(1, sizeof(*rd))))
		return -ENOMEM;
	rd->fn = fn;
	rd->userdata = userdata;
	const struct etcd_range range = { .key = key, .prefix = false, .flags = 0 };
	r = etcd_snapshot_start(f->etcd, &range, 1, 0, patience_ms, history_on_snapshot, rd, ret);
	if (r >= 0)
		rd = NULL;	/* the call owns it */
	return r;
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
	    (r = json_add_int64(obj, "time", fleet_now())) < 0 ||
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
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
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

int fleet_group_size(struct fleet *f, const char *group, size_t *ret)
{
	if (!name_ok(group))
		return -EINVAL;
	_cleanup_(freep) char *dir = key_group_members_dir(fleet_prefix(f), group);
	return count_keys(f, dir, ret);
}

/* --- rollout policy ----------------------------------------------------------------- */

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
