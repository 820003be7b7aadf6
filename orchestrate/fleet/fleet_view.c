/*
 * fleet_view.c — the whole fleet at one revision (fleet_view_read, for
 * `orchestrate status` and the CLI's waits), and the failures it shows.
 *
 * The view must stay fast at 10,000+ hosts: its ranges are read on two
 * connections at once (a thread reads half of them when fleet.parallel is
 * set), host names are collected from every range, sorted and de-duplicated
 * once, and each key then finds its host by binary search — O(n log n)
 * overall.  Only the command line reads it.
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
#include "base/cleanup.h"
#include "base/json.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

/* Pages of the whole-fleet view.  etcd 3.4 walks the whole range to count it for
 * every page, so at 10,000 hosts (30,000 status keys) small pages cost a walk
 * each; 50,000 keys is one page for most fleets and about 12 MB of reply at most. */
#define VIEW_PAGE_SIZE 50000

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

	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
	int64_t t = json_get_int(obj, "time");
	enum status_state *slot = type == STATUS_PUPPET ? &h->puppet :
				  type == STATUS_VALIDATION ? &h->validation : &h->provisioned;

	/* two states of one type only happen by hand; the newest wins */
	if (*slot != STATE_INVALID && t < seen->time[type])
		return 0;
	*slot = state;
	seen->time[type] = t;
	h->state_time[type] = t;
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
		_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
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

/* Calls fn with every key of vr that splits into its source's names (the
 * host the last of them), stopping at the first error fn returns. */
static int view_each_key(struct view_read *vr,
			 int (*fn)(enum view_source s, char **parts, const struct etcd_kv *kv,
				   void *ctx),
			 void *ctx)
{
	for (int s = 0; s < _SOURCE_MAX; s++) {
		for (size_t i = 0; i < vr->lists[s].n; i++) {
			_cleanup_(freep) char *copy = NULL;
			char *parts[3];
			const struct etcd_kv *kv = &vr->lists[s].kvs[i];
			int r;

			if (key_split(kv->key, kv->key_len, vr->dirs[s], parts, source_parts[s],
				      &copy) != source_parts[s])
				continue;
			if ((r = fn((enum view_source)s, parts, kv, ctx)) < 0)
				return r;
		}
	}
	return 0;
}

struct host_names {
	char **v;
	size_t n;
};

static int host_name_push(enum view_source s, char **parts, const struct etcd_kv *kv, void *ctx)
{
	struct host_names *all = ctx;
	return strv_push(&all->v, &all->n, parts[source_parts[s] - 1]);
}

/* Every host named anywhere, sorted and unique, as the view's host array. */
static int view_collect_hosts(struct view_read *vr, struct fleet_view *v)
{
	_cleanup_(strv_freep) char **names = NULL;
	struct host_names all = { 0 };
	size_t n = 0;
	int r;

	r = view_each_key(vr, host_name_push, &all);
	if (r == 0)
		r = strv_finish_sorted(&all.v, &all.n, &names);
	strv_free(all.v);
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

struct view_adding {
	struct fleet_view *v;
	struct status_seen *seen;
};

static int view_add_key(enum view_source s, char **parts, const struct etcd_kv *kv, void *ctx)
{
	struct view_adding *a = ctx;
	return view_add(a->v, a->seen, s, parts, kv);
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
	r = view_each_key(vr, view_add_key, &(struct view_adding){ v, seen });
	if (r < 0) {
		status_seen_free(seen, v->n);
		return r;
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
