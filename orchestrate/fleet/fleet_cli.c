/*
 * fleet_cli.c — what only the command line asks of the fleet (fleet.h):
 * the list of pauses, whether a host is known, one host's whole record
 * (`status HOST`), and the connection it opens, pings and names in its
 * errors.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

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
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
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
	run_history_release(&h->history);
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
			obj = kv_json_object(&kv);
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
		_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(&kv);
		const char *version = json_get_string(obj, "version");
		h.alive = true;
		h.alive_time = json_get_int(obj, "time");
		h.alive_pid = (long)json_get_int(obj, "pid");
		h.lease = kv.lease;
		if (version && !(h.alive_version = strdup(version)))
			return -ENOMEM;
	}
	if ((r = fleet_history_get(f, host, &h.history)) < 0)
		return r;
	*ret = h;
	memset(&h, 0, sizeof(h));
	return 0;
}

/* --- run history ------------------------------------------------------------------ */

int fleet_history_get(struct fleet *f, const char *host, struct run_history *ret)
{
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	_cleanup_(freep) char *key = NULL;
	int r;

	memset(ret, 0, sizeof(*ret));
	if (!name_ok(host))
		return -EINVAL;
	if (!(key = key_history(fleet_prefix(f), host)))
		return -ENOMEM;
	if ((r = etcd_get(f->etcd, key, &kv, NULL)) <= 0)
		return r;
	r = run_history_decode(kv.value, kv.value_len, ret);
	if (r == -ENOMEM)
		return r;
	return 1;	/* an undecodable value: a key with no runs */
}

bool fleet_denied_history(const struct fleet *f)
{
	const char *key = f && f->etcd ? etcd_denied_key(f->etcd) : NULL;
	_cleanup_(freep) char *dir = key ? key_history_dir(fleet_prefix(f)) : NULL;

	return dir && strncmp(key, dir, strlen(dir)) == 0;
}

void host_runs_free(struct host_run *runs, size_t n)
{
	for (size_t i = 0; runs && i < n; i++) {
		free(runs[i].host);
		free(runs[i].run.version);
		free(runs[i].run.error);
	}
	free(runs);
}

/* A growing array of runs, freed whole when it leaves scope. */
struct host_run_list {
	struct host_run *v;
	size_t n;
};

static void host_run_list_releasep(struct host_run_list *l)
{
	host_runs_free(l->v, l->n);
}

int fleet_history_version(struct fleet *f, const char *version, struct host_run **ret,
			  size_t *ret_n)
{
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	_cleanup_(host_run_list_releasep) struct host_run_list runs = { 0 };
	_cleanup_(freep) char *dir = NULL;
	int r;

	*ret = NULL;
	*ret_n = 0;
	if (!name_ok(version))
		return -EINVAL;
	if (!(dir = key_history_dir(fleet_prefix(f))))
		return -ENOMEM;
	if ((r = etcd_get_prefix(f->etcd, dir, 0, 0, &list)) < 0)
		return r;
	/* Keys come sorted, so hosts do. */
	for (size_t i = 0; i < list.n; i++) {
		_cleanup_(run_history_releasep) struct run_history h = { 0 };
		_cleanup_(freep) char *copy = NULL;
		char *host;

		if (key_split(list.kvs[i].key, list.kvs[i].key_len, dir, &host, 1, &copy) != 1)
			continue;	/* a key written by hand: not a host */
		r = run_history_decode(list.kvs[i].value, list.kvs[i].value_len, &h);
		if (r == -ENOMEM)
			return r;
		for (size_t k = 0; r >= 0 && k < h.n; k++) {
			if (strcmp(h.runs[k].version, version) != 0)
				continue;
			struct host_run *nv = realloc(runs.v, (runs.n + 1) * sizeof(*runs.v));
			if (!nv)
				return -ENOMEM;
			runs.v = nv;
			/* The run moves out of h, its strings with it. */
			runs.v[runs.n] = (struct host_run){ .run = h.runs[k] };
			h.runs[k].version = NULL;
			h.runs[k].error = NULL;
			runs.n++;
			if (!(runs.v[runs.n - 1].host = strdup(host)))
				return -ENOMEM;
		}
	}
	*ret_n = runs.n;
	*ret = TAKE_PTR(runs.v);
	return 0;
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
