/*
 * fleet_wait.c — the waits of fleet.h: verify_hosts --wait,
 * check_single_version --wait, wait_for_service and status --watch.
 *
 * Each wait is the same loop over a directory of keys: read it at one
 * revision into a keyset, ask whether the answer is yes, and if not, follow an
 * etcd watch from the next revision, applying each event to the keyset and
 * asking again, until yes or the deadline.  A compacted revision (-ESTALE)
 * reads again.  No polling: an idle wait sends nothing.
 *
 * The keyset keeps its keys in an array (insertion order, for iteration) and an
 * open-addressing hash index over it, so that finding, adding and removing a key
 * cost O(1): verify_hosts checks 10,000 hosts against 10,000 keys, and again
 * after every watch event, so a linear scan would make it quadratic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"
#include "clock.h"
#include "etcd.h"
#include "fleet.h"
#include "hiera.h"
#include "schema.h"
#include "strv.h"

/* --- the keyset -------------------------------------------------------------------- */

/* The keys below a directory (suffixes, each `components` valid names joined
 * by '/': "web1" or "v2/web1"), with their values when wanted. */
struct keyset {
	char **keys;
	char **values;
	size_t n;
	size_t cap;
	size_t *index;			/* hash slots: position + 1, 0 empty */
	size_t index_cap;		/* a power of two */
};

static void keyset_release(struct keyset *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->keys[i]);
		if (s->values)
			free(s->values[i]);
	}
	free(s->keys);
	free(s->values);
	free(s->index);
	*s = (struct keyset){ 0 };
}

static size_t keyset_hash(const char *key)
{
	size_t h = 14695981039346656037ULL;	/* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

/* The slot of key in the index: where it is, or the empty slot it would take.
 * Slots hold position + 1 (0 is empty). */
static size_t keyset_slot(const struct keyset *s, const char *key)
{
	size_t mask = s->index_cap - 1;
	for (size_t i = keyset_hash(key) & mask;; i = (i + 1) & mask)
		if (s->index[i] == 0 || strcmp(s->keys[s->index[i] - 1], key) == 0)
			return i;
}

static int keyset_reindex(struct keyset *s, size_t cap)
{
	size_t *index = calloc(cap, sizeof(size_t));
	if (!index)
		return -ENOMEM;
	free(s->index);
	s->index = index;
	s->index_cap = cap;
	for (size_t i = 0; i < s->n; i++)
		s->index[keyset_slot(s, s->keys[i])] = i + 1;
	return 0;
}

/* Index of key in s, or -1. */
static long keyset_find(const struct keyset *s, const char *key)
{
	if (s->index_cap == 0)
		return -1;
	size_t slot = keyset_slot(s, key);
	return s->index[slot] ? (long)s->index[slot] - 1 : -1;
}

/* Adds key (value may be NULL) or replaces its value. */
static int keyset_put(struct keyset *s, const char *key, const char *value, size_t value_len)
{
	_cleanup_(freep) char *v = value ? strndup(value, value_len) : NULL;
	if (value && !v)
		return -ENOMEM;
	long i = keyset_find(s, key);
	if (i >= 0) {
		free(s->values[i]);
		s->values[i] = TAKE_PTR(v);
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **k = realloc(s->keys, cap * sizeof(char *));
		if (!k)
			return -ENOMEM;
		s->keys = k;
		char **vv = realloc(s->values, cap * sizeof(char *));
		if (!vv)
			return -ENOMEM;
		s->values = vv;
		s->cap = cap;
	}
	/* Keep the index at most half full so that probes stay short. */
	if (2 * (s->n + 1) > s->index_cap &&
	    keyset_reindex(s, s->index_cap ? 2 * s->index_cap : 32) < 0)
		return -ENOMEM;
	if (!(s->keys[s->n] = strdup(key)))
		return -ENOMEM;
	s->values[s->n] = TAKE_PTR(v);
	s->index[keyset_slot(s, key)] = ++s->n;
	return 0;
}

static void keyset_remove(struct keyset *s, const char *key)
{
	if (s->index_cap == 0)
		return;
	size_t mask = s->index_cap - 1;
	size_t slot = keyset_slot(s, key);
	if (!s->index[slot])
		return;
	size_t i = s->index[slot] - 1;

	/* Backward-shift deletion: pull later members of the probe run into the
	 * hole, so lookups never stop early at it. */
	s->index[slot] = 0;
	for (size_t j = (slot + 1) & mask; s->index[j]; j = (j + 1) & mask) {
		size_t home = keyset_hash(s->keys[s->index[j] - 1]) & mask;
		if (((j - home) & mask) >= ((j - slot) & mask)) {
			s->index[slot] = s->index[j];
			s->index[j] = 0;
			slot = j;
		}
	}

	/* Fill the array hole with the last key and point its slot at i. */
	free(s->keys[i]);
	free(s->values[i]);
	size_t last = --s->n;
	if (i != last) {
		s->keys[i] = s->keys[last];
		s->values[i] = s->values[last];
		s->index[keyset_slot(s, s->keys[i])] = i + 1;
	}
}

/* The suffix of key below dir as "a/b" when it has exactly components valid
 * names; NULL (and *ret_error 0) for a key to skip. */
static char *keyset_suffix(const char *key, size_t key_len, const char *dir, int components,
			   int *ret_error)
{
	char *parts[4];
	_cleanup_(freep) char *copy = NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;

	*ret_error = 0;
	int r = key_split(key, key_len, dir, parts, components, &copy);
	if (r == -ENOMEM)
		*ret_error = r;
	if (r != components)
		return NULL;
	for (int i = 0; i < components; i++)
		if ((i && buf_addc(&b, '/') < 0) || buf_adds(&b, parts[i]) < 0) {
			*ret_error = -ENOMEM;
			return NULL;
		}
	char *s = buf_detach(&b);
	if (!s)
		*ret_error = -ENOMEM;
	return s;
}

/* --- the wait ------------------------------------------------------------------------ */

/* Whether the keyset answers yes: 1 yes, 0 not yet, or a negative code. */
typedef int (*keyset_done_fn)(const struct keyset *s, void *userdata);

enum keyset_values {
	VALUES_NONE,			/* keys only */
	VALUES_RAW,			/* each key's value as stored */
	VALUES_VERSION,			/* running_version/HOST: the version it says;
					 * a key whose value is none is left out */
};

struct keyset_wait {
	struct keyset *set;
	const char *dir;
	int components;
	enum keyset_values values;
	keyset_done_fn done;
	void *userdata;
};

static int keyset_apply(struct keyset_wait *w, const struct etcd_kv *kv, bool deleted)
{
	int err;
	_cleanup_(freep) char *k = keyset_suffix(kv->key, kv->key_len, w->dir, w->components, &err);

	if (err || !k)
		return err;
	if (deleted) {
		keyset_remove(w->set, k);
		return 0;
	}
	if (w->values == VALUES_VERSION) {
		_cleanup_(freep) char *version = NULL;
		int r = fleet_running_decode(kv->value, kv->value_len, &version);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			keyset_remove(w->set, k);
			return 0;
		}
		return keyset_put(w->set, k, version, strlen(version));
	}
	return keyset_put(w->set, k, w->values == VALUES_RAW ? kv->value : NULL, kv->value_len);
}

static int keyset_on_events(const struct etcd_event *events, size_t n, int64_t revision,
			    void *userdata)
{
	struct keyset_wait *w = userdata;
	int r;

	if (n == 0)
		return 0;	/* progress notification: nothing changed */
	for (size_t i = 0; i < n; i++)
		if ((r = keyset_apply(w, &events[i].kv, events[i].type == ETCD_EVENT_DELETE)) < 0)
			return r;
	return w->done(w->set, w->userdata);
}

/* The deadline of etcd_watch(): 0 is none. */
static uint64_t watch_deadline(uint64_t deadline_ms)
{
	return deadline_ms == CLOCK_DEADLINE_NEVER ? 0 : deadline_ms;
}

/*
 * Reads dir into s and waits until done() says yes (1), the deadline passes
 * (0), or something fails (negative).  *s holds the last state seen either way.
 */
static int wait_keyset(struct fleet *f, const char *dir, int components, enum keyset_values values,
		       uint64_t deadline_ms, keyset_done_fn done, void *userdata, struct keyset *s)
{
	for (;;) {
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
		struct keyset_wait w = { s, dir, components, values, done, userdata };
		int r;

		r = etcd_get_prefix(f->etcd, dir, values != VALUES_NONE ? 0 : ETCD_KEYS_ONLY, 0,
				    &kvs);
		if (r < 0)
			return r;
		keyset_release(s);
		for (size_t i = 0; i < kvs.n; i++)
			if ((r = keyset_apply(&w, &kvs.kvs[i], false)) < 0)
				return r;
		if ((r = done(s, userdata)) != 0)
			return r;
		if (deadline_ms == CLOCK_DEADLINE_NOW ||
		    (deadline_ms != CLOCK_DEADLINE_NEVER &&
		     clock_msec(CLOCK_MONOTONIC) >= deadline_ms))
			return 0;

		r = etcd_watch(f->etcd, dir, true, kvs.revision + 1, watch_deadline(deadline_ms),
			       keyset_on_events, &w, NULL);
		if (r == -ETIMEDOUT)
			return 0;
		if (r != -ESTALE)
			return r;	/* 1 (yes), 0 (the watch ended), or an error */
		/* the revision was compacted: read again */
	}
}

/* --- verify_hosts ---------------------------------------------------------------------- */

struct hosts_wait {
	const char *version;
	const struct keyset *wanted;
	fleet_progress_fn progress;
	void *userdata;
	size_t last;
};

static void report(fleet_progress_fn progress, void *userdata, size_t *last, size_t have,
		   size_t want)
{
	if (progress && have != *last)
		progress(have, want, userdata);
	*last = have;
}

/* Whether s (running_version/, decoded) has host at version. */
static bool host_at(const struct keyset *s, const char *host, const char *version)
{
	long i = keyset_find(s, host);
	return i >= 0 && s->values[i] && strcmp(s->values[i], version) == 0;
}

static int all_hosts_present(const struct keyset *s, void *userdata)
{
	struct hosts_wait *w = userdata;
	size_t have = 0;

	for (size_t i = 0; i < w->wanted->n; i++)
		have += host_at(s, w->wanted->keys[i], w->version);
	report(w->progress, w->userdata, &w->last, have, w->wanted->n);
	return have == w->wanted->n;
}

int fleet_wait_hosts_at_version(struct fleet *f, const char *version, char *const *hosts,
				uint64_t deadline_ms, fleet_progress_fn progress, void *userdata,
				char ***ret_missing)
{
	_cleanup_(keyset_release) struct keyset wanted = { 0 };
	_cleanup_(keyset_release) struct keyset set = { 0 };
	_cleanup_(freep) char *dir = NULL;
	_cleanup_(strv_freep) char **missing = NULL;
	size_t n_missing = 0;
	struct hosts_wait w = { version, &wanted, progress, userdata, (size_t)-1 };
	int r, answer;

	*ret_missing = NULL;
	if (!version || !schema_name_valid(version))
		return -EINVAL;
	for (size_t i = 0; hosts && hosts[i]; i++) {
		if (!schema_name_valid(hosts[i]))
			return -EINVAL;
		if ((r = keyset_put(&wanted, hosts[i], NULL, 0)) < 0)
			return r;
	}
	if (!(dir = key_running_version_dir(f->prefix)))
		return -ENOMEM;
	answer = wait_keyset(f, dir, 1, VALUES_VERSION, deadline_ms, all_hosts_present, &w, &set);
	if (answer < 0)
		return answer;
	for (size_t i = 0; i < wanted.n; i++)
		if (!host_at(&set, wanted.keys[i], version) &&
		    (r = strv_push(&missing, &n_missing, wanted.keys[i])) < 0)
			return r;
	if (!missing && !(missing = calloc(1, sizeof(char *))))
		return -ENOMEM;
	*ret_missing = TAKE_PTR(missing);
	return answer;
}

/* --- check_single_version ------------------------------------------------------------- */

struct single_wait {
	const char *version;
	fleet_progress_fn progress;
	void *userdata;
	size_t last;
};

/* The keyset holds the hosts below running_version/ with their versions. */
static int only_version_runs(const struct keyset *s, void *userdata)
{
	struct single_wait *w = userdata;
	size_t at = 0;

	for (size_t i = 0; i < s->n; i++)
		at += strcmp(s->values[i], w->version) == 0;
	report(w->progress, w->userdata, &w->last, at, s->n);
	return s->n > 0 && at == s->n;
}

void fleet_version_counts_free(struct fleet_version_count *counts, size_t n)
{
	for (size_t i = 0; counts && i < n; i++)
		free(counts[i].version);
	free(counts);
}

static int strcmp_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hosts per version of a keyset of hosts and their versions, sorted by version. */
static int count_versions(const struct keyset *s, struct fleet_version_count **ret,
			  size_t *ret_n)
{
	_cleanup_(strv_freep) char **versions = NULL;
	struct fleet_version_count *counts;
	size_t n = 0, nc = 0;
	int r;

	for (size_t i = 0; i < s->n; i++)
		if ((r = strv_push(&versions, &n, s->values[i])) < 0)
			return r;
	if (n > 1)
		qsort(versions, n, sizeof(char *), strcmp_ptr);
	counts = calloc(n ? n : 1, sizeof(*counts));
	if (!counts)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (nc > 0 && strcmp(counts[nc - 1].version, versions[i]) == 0) {
			counts[nc - 1].hosts++;
			continue;
		}
		counts[nc].version = strdup(versions[i]);
		counts[nc++].hosts = 1;
		if (!counts[nc - 1].version) {
			fleet_version_counts_free(counts, nc);
			return -ENOMEM;
		}
	}
	*ret = counts;
	*ret_n = nc;
	return 0;
}

int fleet_wait_single_version(struct fleet *f, const char *version, uint64_t deadline_ms,
			      fleet_progress_fn progress, void *userdata,
			      struct fleet_version_count **ret_counts, size_t *ret_n)
{
	_cleanup_(keyset_release) struct keyset set = { 0 };
	_cleanup_(freep) char *dir = NULL;
	struct single_wait w = { version, progress, userdata, (size_t)-1 };
	int r, answer;

	*ret_counts = NULL;
	*ret_n = 0;
	if (!version || !schema_name_valid(version))
		return -EINVAL;
	if (!(dir = key_running_version_dir(f->prefix)))
		return -ENOMEM;
	answer = wait_keyset(f, dir, 1, VALUES_VERSION, deadline_ms, only_version_runs, &w, &set);
	if (answer < 0)
		return answer;
	if ((r = count_versions(&set, ret_counts, ret_n)) < 0)
		return r;
	return answer;
}

/* --- wait_for_service ----------------------------------------------------------------- */

struct service_wait {
	const char *service;
	size_t count;
	bool healthy;
	size_t seen;
	fleet_progress_fn progress;
	void *userdata;
	size_t last;
};

/* Counts the hosts whose value hiera.c would render (healthy ones when asked):
 * the catalog's own decoder, so a host counts here exactly when it would
 * appear in the hiera file. */
static int enough_hosts(const struct keyset *s, void *userdata)
{
	struct service_wait *w = userdata;
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;

	for (size_t i = 0; i < s->n; i++) {
		const char *v = s->values[i] ? s->values[i] : "";
		int r = catalog_add_value(&cat, w->service, s->keys[i], v, strlen(v));
		/* only running out of memory is an error: a malformed value is a
		 * host that does not count */
		if (r == -ENOMEM)
			return r;
	}
	w->seen = catalog_count_hosts(&cat, w->service, w->healthy);
	report(w->progress, w->userdata, &w->last, w->seen, w->count);
	return w->seen >= w->count;
}

int fleet_wait_service(struct fleet *f, const char *service, size_t count, bool healthy,
		       uint64_t deadline_ms, fleet_progress_fn progress, void *userdata,
		       size_t *ret_seen)
{
	_cleanup_(keyset_release) struct keyset set = { 0 };
	_cleanup_(freep) char *dir = NULL;
	struct service_wait w = { service, count, healthy, 0, progress, userdata, (size_t)-1 };
	int answer;

	*ret_seen = 0;
	if (!service || !schema_name_valid(service))
		return -EINVAL;
	if (!(dir = key_service_dir(f->prefix, service)))
		return -ENOMEM;
	answer = wait_keyset(f, dir, 1, VALUES_RAW, deadline_ms, enough_hosts, &w, &set);
	*ret_seen = w.seen;
	return answer;
}

/* --- status --watch -------------------------------------------------------------------- */

static int any_event(const struct etcd_event *events, size_t n, int64_t revision,
		     void *userdata)
{
	return n > 0 ? 1 : 0;
}

int fleet_wait_change(struct fleet *f, int64_t revision)
{
	_cleanup_(freep) char *root = key_root(f->prefix);
	int r;

	if (!root)
		return -ENOMEM;
	r = etcd_watch(f->etcd, root, true, revision + 1, 0, any_event, NULL, NULL);
	return r < 0 && r != -ESTALE ? r : 0;
}

int fleet_wait_change_until(struct fleet *f, int64_t revision, uint64_t deadline_ms)
{
	_cleanup_(freep) char *root = key_root(f->prefix);
	int r;

	if (!root)
		return -ENOMEM;
	r = etcd_watch(f->etcd, root, true, revision + 1, deadline_ms, any_event, NULL, NULL);
	if (r == -ETIMEDOUT)
		return 0;
	return r < 0 && r != -ESTALE ? r : 1;
}
