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
 * A wait for a version can count more for the person watching it
 * (FLEET_WAIT_STATES): the hosts failed or waiting at the version and the
 * rollout's halt.  Those are more ranges read at the same revision and
 * watched on the same stream (etcd_watch_ranges()), so a script, which does
 * not ask for them, pays nothing.
 *
 * The keyset keeps its keys in an array (insertion order, for iteration) and an
 * open-addressing hash index over it, so that finding, adding and removing a key
 * cost O(1): verify_hosts checks 10,000 hosts against 10,000 keys, and again
 * after every watch event, so a linear scan would make it quadratic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/backoff.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"
#include "base/strv.h"

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

/* Whether the keysets of a wait answer yes: 1 yes, 0 not yet, or a negative code. */
typedef int (*wait_done_fn)(void *userdata);

enum keyset_values {
	VALUES_NONE,			/* keys only */
	VALUES_RAW,			/* each key's value as stored */
	VALUES_VERSION,			/* a JSON value's "version" (running_version/HOST,
					 * status/…/HOST); a key without a valid one is
					 * left out */
};

/* One directory (or one key) that a wait reads and watches, into a keyset. */
struct wait_range {
	const char *key;		/* a directory ("…/"); with components 0, one key */
	int components;			/* names below the directory; 0: the key itself,
					 * kept in the set under "" */
	enum keyset_values values;
	bool optional;			/* a read etcd refuses (-EACCES) leaves the range
					 * out instead of failing the wait */
	struct keyset set;
	int64_t mod_revision;		/* components 0: the key's; 0 when absent */
	bool off;			/* left out: etcd refused the read */
};

/* The most ranges one wait watches (the waits for a version: six). */
#define WAIT_RANGES_MAX 8

struct ranges_wait {
	struct wait_range *ranges;
	size_t n;
	wait_done_fn done;
	void *userdata;
};

static bool range_has(const struct wait_range *wr, const struct etcd_kv *kv)
{
	size_t len = strlen(wr->key);

	if (wr->off)
		return false;
	if (wr->components == 0)
		return kv->key_len == len && memcmp(kv->key, wr->key, len) == 0;
	return kv->key_len > len && memcmp(kv->key, wr->key, len) == 0;
}

static int keyset_apply(struct wait_range *wr, const struct etcd_kv *kv, bool deleted)
{
	int err = 0;
	_cleanup_(freep) char *k = NULL;

	if (wr->components == 0) {
		if (!range_has(wr, kv))
			return 0;
		if (!(k = strdup("")))
			return -ENOMEM;
		wr->mod_revision = deleted ? 0 : kv->mod_revision;
	} else if (!(k = keyset_suffix(kv->key, kv->key_len, wr->key, wr->components, &err))) {
		return err;
	}
	if (deleted) {
		keyset_remove(&wr->set, k);
		return 0;
	}
	if (wr->values == VALUES_VERSION) {
		_cleanup_(freep) char *version = NULL;
		int r = fleet_running_decode(kv->value, kv->value_len, &version);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			keyset_remove(&wr->set, k);
			return 0;
		}
		return keyset_put(&wr->set, k, version, strlen(version));
	}
	return keyset_put(&wr->set, k, wr->values == VALUES_RAW ? kv->value : NULL, kv->value_len);
}

static int ranges_on_events(const struct etcd_event *events, size_t n, int64_t revision,
			    void *userdata)
{
	struct ranges_wait *w = userdata;
	int r;

	if (n == 0)
		return 0;	/* progress notification: nothing changed */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < w->n; j++)
			if (range_has(&w->ranges[j], &events[i].kv)) {
				r = keyset_apply(&w->ranges[j], &events[i].kv,
						 events[i].type == ETCD_EVENT_DELETE);
				if (r < 0)
					return r;
				break;
			}
	return w->done(w->userdata);
}

/* The deadline of etcd_watch(): 0 is none. */
static uint64_t watch_deadline(uint64_t deadline_ms)
{
	return deadline_ms == CLOCK_DEADLINE_NEVER ? 0 : deadline_ms;
}

/* Reads wr into its set at *revision, or, when that is 0, at the newest
 * revision, which it sets. */
static int read_range(struct fleet *f, struct wait_range *wr, int64_t *revision)
{
	int r;

	keyset_release(&wr->set);
	wr->mod_revision = 0;
	if (wr->off)
		return 0;
	if (wr->components == 0) {
		_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
		r = etcd_get_at(f->etcd, wr->key, *revision, &kv, *revision ? NULL : revision);
		if (r == -EACCES && wr->optional) {
			wr->off = true;
			return 0;
		}
		return r <= 0 ? r : keyset_apply(wr, &kv, false);
	}

	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
	r = etcd_get_prefix(f->etcd, wr->key, wr->values != VALUES_NONE ? 0 : ETCD_KEYS_ONLY,
			    *revision, &kvs);
	if (r == -EACCES && wr->optional) {
		wr->off = true;
		return 0;
	}
	if (r < 0)
		return r;
	if (*revision == 0)
		*revision = kvs.revision;
	for (size_t i = 0; i < kvs.n; i++)
		if ((r = keyset_apply(wr, &kvs.kvs[i], false)) < 0)
			return r;
	return 0;
}

struct progress_report;
static int report_retry(struct progress_report *pr, const char *error);

/* Whether a failed read or watch may go better later: etcd unreachable, timed
 * out or overloaded (5xx) on every endpoint. */
static bool worth_retrying(int r)
{
	return r == -ECONNREFUSED;
}

/*
 * After a failed read or watch of wait_ranges(): r when it is not worth
 * retrying or the deadline has come, else 0 after the backoff's sleep (cut
 * to the deadline), the retry reported.
 */
static int wait_retry(struct fleet *f, int r, uint64_t deadline_ms, unsigned *failures,
		      struct progress_report *pr)
{
	static const struct backoff b = { 500, 10 * MSEC_PER_SEC, 250 };
	uint64_t now = clock_msec(CLOCK_MONOTONIC), delay;

	if (!worth_retrying(r) || deadline_ms == CLOCK_DEADLINE_NOW ||
	    (deadline_ms != CLOCK_DEADLINE_NEVER && now >= deadline_ms))
		return r;
	delay = backoff_delay(&b, ++*failures);
	if (deadline_ms != CLOCK_DEADLINE_NEVER && delay > deadline_ms - now)
		delay = deadline_ms - now;
	if ((r = report_retry(pr, fleet_last_error(f))) < 0)
		return r;
	clock_sleep_ms(delay);
	return 0;
}

/*
 * Reads the ranges at one revision (the first range's) and waits until done()
 * says yes (1), the deadline passes (0), or something fails (negative),
 * following one watch stream that carries every range.  The sets hold the
 * last state seen either way.  A read or a stream that fails because etcd is
 * unreachable or too slow is tried again, with backoff, until the deadline:
 * a wait waits (progress says so meanwhile, pr may be NULL).
 */
static int wait_ranges(struct fleet *f, struct wait_range *ranges, size_t n,
		       uint64_t deadline_ms, wait_done_fn done, void *userdata,
		       struct progress_report *pr)
{
	struct ranges_wait w = { ranges, n, done, userdata };
	unsigned failures = 0;

	if (n == 0 || n > WAIT_RANGES_MAX)
		return -EINVAL;
	for (;;) {
		struct etcd_watch_range watch[WAIT_RANGES_MAX];
		int64_t revision = 0;
		size_t n_watch = 0;
		int r = 0;

		for (size_t i = 0; i < n && r == 0; i++)
			r = read_range(f, &ranges[i], &revision);
		if (r == -ESTALE)
			continue;	/* compacted between the reads: read again */
		if (r < 0) {
			if ((r = wait_retry(f, r, deadline_ms, &failures, pr)) < 0)
				return r;
			continue;
		}
		if (failures > 0 && (r = report_retry(pr, NULL)) < 0)
			return r;
		failures = 0;
		if ((r = done(userdata)) != 0)
			return r;
		if (deadline_ms == CLOCK_DEADLINE_NOW ||
		    (deadline_ms != CLOCK_DEADLINE_NEVER &&
		     clock_msec(CLOCK_MONOTONIC) >= deadline_ms))
			return 0;

		for (size_t i = 0; i < n; i++)
			if (!ranges[i].off)
				watch[n_watch++] = (struct etcd_watch_range){
					.key = ranges[i].key, .prefix = ranges[i].components > 0,
					.start_revision = revision + 1
				};
		r = etcd_watch_ranges(f->etcd, watch, n_watch, watch_deadline(deadline_ms),
				      ranges_on_events, &w, NULL);
		if (r == -ETIMEDOUT)
			return 0;
		if (r == -ESTALE)
			continue;	/* the revision was compacted: read again */
		if (r >= 0)
			return r;	/* 1 (yes) or 0 (the watch ended) */
		if ((r = wait_retry(f, r, deadline_ms, &failures, pr)) < 0)
			return r;
	}
}

/* --- progress ---------------------------------------------------------------------------- */

/* Calls progress when what it would say changed since the last call. */
struct progress_report {
	fleet_progress_fn fn;
	void *userdata;
	bool called;
	struct fleet_progress last;	/* its strings are the copies below */
	char *halted;
	char *reverted_to;
	char *retrying;
};

static void progress_report_release(struct progress_report *pr)
{
	free(pr->halted);
	free(pr->reverted_to);
	free(pr->retrying);
	pr->halted = pr->reverted_to = pr->retrying = NULL;
}

static int report(struct progress_report *pr, const struct fleet_progress *p)
{
	const struct fleet_progress *l = &pr->last;

	if (!pr->fn)
		return 0;
	if (pr->called && l->have == p->have && l->want == p->want && l->states == p->states &&
	    l->failed == p->failed && l->waiting == p->waiting &&
	    streq_ptr(l->halted, p->halted) && streq_ptr(l->reverted_to, p->reverted_to) &&
	    streq_ptr(l->retrying, p->retrying))
		return 0;
	pr->fn(p, pr->userdata);
	progress_report_release(pr);
	pr->last = *p;
	pr->called = true;
	pr->last.halted = pr->halted = p->halted ? strdup(p->halted) : NULL;
	pr->last.reverted_to = pr->reverted_to = p->reverted_to ? strdup(p->reverted_to) : NULL;
	pr->last.retrying = pr->retrying = p->retrying ? strdup(p->retrying) : NULL;
	if ((p->halted && !pr->halted) || (p->reverted_to && !pr->reverted_to) ||
	    (p->retrying && !pr->retrying))
		return -ENOMEM;
	return 0;
}

/* The wait's own retry: says so with the last progress seen, or, with error
 * NULL, that etcd answers again. */
static int report_retry(struct progress_report *pr, const char *error)
{
	struct fleet_progress p;

	if (!pr || !pr->fn || (!error && !pr->retrying))
		return 0;
	p = pr->last;
	p.retrying = error ? error : NULL;
	return report(pr, &p);
}

/* --- verify_hosts and check_single_version --------------------------------------------- */

enum fleet_host_state fleet_wait_host_state(const char *version, const char *running,
					    const char *puppet_failed,
					    const char *validation_failed, const char *pending)
{
	if (streq_ptr(running, version))
		return FLEET_HOST_AT;
	if (streq_ptr(puppet_failed, version) || streq_ptr(validation_failed, version))
		return FLEET_HOST_FAILED;
	if (streq_ptr(pending, version))
		return FLEET_HOST_WAITING;
	return FLEET_HOST_OTHER;
}

bool fleet_wait_halt_applies(const struct rollout_record *halt, const char *version,
			     const char *current, int64_t current_mod)
{
	if (!halt->version || !version || strcmp(halt->version, version) != 0)
		return false;
	if (current && strcmp(current, version) == 0)
		return rollout_record_current(halt, version, current_mod);
	return true;
}

/* What a wait for a version reads: running_version/, and with FLEET_WAIT_STATES
 * what the progress line counts besides. */
enum {
	R_RUNNING,
	R_PUPPET_FAILED,
	R_VALIDATION_FAILED,
	R_PENDING,
	R_HALTED,
	R_CURRENT,
	_R_MAX,
};

struct version_wait {
	const char *version;
	const struct keyset *wanted;	/* verify_hosts: the hosts; NULL: every host of
					 * running_version/ (check_single_version) */
	struct wait_range ranges[_R_MAX];
	char *keys[_R_MAX];
	size_t n_ranges;		/* 1, or _R_MAX with FLEET_WAIT_STATES */
	struct progress_report report;
};

static void version_wait_release(struct version_wait *w)
{
	for (size_t i = 0; i < _R_MAX; i++) {
		keyset_release(&w->ranges[i].set);
		free(w->keys[i]);
		w->keys[i] = NULL;
	}
	progress_report_release(&w->report);
}

static int version_wait_init(struct version_wait *w, struct fleet *f, const char *version,
			     const struct keyset *wanted, unsigned flags,
			     fleet_progress_fn progress, void *userdata)
{
	const char *P = f->prefix;

	w->version = version;
	w->wanted = wanted;
	w->report.fn = progress;
	w->report.userdata = userdata;
	w->keys[R_RUNNING] = key_running_version_dir(P);
	w->ranges[R_RUNNING] = (struct wait_range){ .components = 1, .values = VALUES_VERSION };
	w->n_ranges = 1;
	if (flags & FLEET_WAIT_STATES) {
		w->keys[R_PUPPET_FAILED] = key_status_state_dir(P, STATUS_PUPPET, STATE_FAILED);
		w->keys[R_VALIDATION_FAILED] = key_status_state_dir(P, STATUS_VALIDATION,
								    STATE_FAILED);
		w->keys[R_PENDING] = key_status_state_dir(P, STATUS_PUPPET, STATE_PENDING);
		w->keys[R_HALTED] = key_rollout_halted(P);
		w->keys[R_CURRENT] = key_current_version(P);
		for (size_t i = R_PUPPET_FAILED; i <= R_PENDING; i++)
			w->ranges[i] = (struct wait_range){ .components = 1,
							    .values = VALUES_VERSION,
							    .optional = true };
		for (size_t i = R_HALTED; i <= R_CURRENT; i++)
			w->ranges[i] = (struct wait_range){ .components = 0, .values = VALUES_RAW,
							    .optional = true };
		w->n_ranges = _R_MAX;
	}
	for (size_t i = 0; i < w->n_ranges; i++) {
		if (!w->keys[i])
			return -ENOMEM;
		w->ranges[i].key = w->keys[i];
	}
	return 0;
}

/* The value of key in s, or NULL. */
static const char *keyset_value(const struct keyset *s, const char *key)
{
	long i = keyset_find(s, key);
	return i >= 0 ? s->values[i] : NULL;
}

/* A range's set when it was read, else NULL. */
static const struct keyset *range_set(const struct version_wait *w, size_t i)
{
	return i < w->n_ranges && !w->ranges[i].off ? &w->ranges[i].set : NULL;
}

/* Counts the hosts of the wait into *p; the halt's strings point into *halt. */
static int version_progress(const struct version_wait *w, struct rollout_record *halt,
			    struct fleet_progress *p)
{
	const struct keyset *running = &w->ranges[R_RUNNING].set;
	const struct keyset *hosts = w->wanted ? w->wanted : running;
	const struct keyset *pf = range_set(w, R_PUPPET_FAILED);
	const struct keyset *vf = range_set(w, R_VALIDATION_FAILED);
	const struct keyset *pending = range_set(w, R_PENDING);
	const struct keyset *halted = range_set(w, R_HALTED);
	const struct keyset *current = range_set(w, R_CURRENT);

	*p = (struct fleet_progress){ .want = hosts->n, .states = pf && vf && pending };
	for (size_t i = 0; i < hosts->n; i++) {
		const char *h = hosts->keys[i];
		switch (fleet_wait_host_state(w->version, keyset_value(running, h),
					      p->states ? keyset_value(pf, h) : NULL,
					      p->states ? keyset_value(vf, h) : NULL,
					      p->states ? keyset_value(pending, h) : NULL)) {
		case FLEET_HOST_AT:
			p->have++;
			break;
		case FLEET_HOST_FAILED:
			p->failed++;
			break;
		case FLEET_HOST_WAITING:
			p->waiting++;
			break;
		case FLEET_HOST_OTHER:
			break;
		}
	}

	const char *record = halted && current ? keyset_value(halted, "") : NULL;
	if (record) {
		int r = rollout_record_decode(record, strlen(record), halt);
		if (r == -ENOMEM)
			return r;
		if (r == 0 && fleet_wait_halt_applies(halt, w->version,
						      keyset_value(current, ""),
						      w->ranges[R_CURRENT].mod_revision)) {
			p->halted = halt->reason ? halt->reason : "";
			p->reverted_to = halt->reverted_to;
		}
	}
	return 0;
}

/* Every host of the wait at the version (check_single_version: and at least one). */
static int version_reached(void *userdata)
{
	struct version_wait *w = userdata;
	_cleanup_(rollout_record_releasep) struct rollout_record halt = { 0 };
	struct fleet_progress p;
	int r;

	if ((r = version_progress(w, &halt, &p)) < 0 || (r = report(&w->report, &p)) < 0)
		return r;
	return p.have == p.want && (w->wanted || p.want > 0);
}

/* Whether s (running_version/, decoded) has host at version. */
static bool host_at(const struct keyset *s, const char *host, const char *version)
{
	return streq_ptr(keyset_value(s, host), version);
}

int fleet_wait_hosts_at_version(struct fleet *f, const char *version, char *const *hosts,
				uint64_t deadline_ms, unsigned flags, fleet_progress_fn progress,
				void *userdata, char ***ret_missing)
{
	_cleanup_(keyset_release) struct keyset wanted = { 0 };
	_cleanup_(version_wait_release) struct version_wait w = { 0 };
	_cleanup_(strv_freep) char **missing = NULL;
	size_t n_missing = 0;
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
	if ((r = version_wait_init(&w, f, version, &wanted, flags, progress, userdata)) < 0)
		return r;
	w.report.last.want = wanted.n;	/* known before any read, for a retry's line */
	answer = wait_ranges(f, w.ranges, w.n_ranges, deadline_ms, version_reached, &w,
			     &w.report);
	if (answer < 0)
		return answer;
	for (size_t i = 0; i < wanted.n; i++)
		if (!host_at(&w.ranges[R_RUNNING].set, wanted.keys[i], version) &&
		    (r = strv_push(&missing, &n_missing, wanted.keys[i])) < 0)
			return r;
	if (!missing && !(missing = calloc(1, sizeof(char *))))
		return -ENOMEM;
	*ret_missing = TAKE_PTR(missing);
	return answer;
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
			      unsigned flags, fleet_progress_fn progress, void *userdata,
			      struct fleet_version_count **ret_counts, size_t *ret_n)
{
	_cleanup_(version_wait_release) struct version_wait w = { 0 };
	int r, answer;

	*ret_counts = NULL;
	*ret_n = 0;
	if (!version || !schema_name_valid(version))
		return -EINVAL;
	if ((r = version_wait_init(&w, f, version, NULL, flags, progress, userdata)) < 0)
		return r;
	answer = wait_ranges(f, w.ranges, w.n_ranges, deadline_ms, version_reached, &w,
			     &w.report);
	if (answer < 0)
		return answer;
	if ((r = count_versions(&w.ranges[R_RUNNING].set, ret_counts, ret_n)) < 0)
		return r;
	return answer;
}

/* --- wait_for_service ----------------------------------------------------------------- */

struct service_wait {
	const char *service;
	size_t count;
	bool healthy;
	size_t seen;
	const struct keyset *set;
	struct progress_report report;
};

/* Counts the hosts whose value hiera.c would render (healthy ones when asked):
 * the catalog's own decoder, so a host counts here exactly when it would
 * appear in the hiera file. */
static int enough_hosts(void *userdata)
{
	struct service_wait *w = userdata;
	const struct keyset *s = w->set;
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	int r;

	for (size_t i = 0; i < s->n; i++) {
		const char *v = s->values[i] ? s->values[i] : "";
		r = catalog_add_value(&cat, w->service, s->keys[i], v, strlen(v));
		/* only running out of memory is an error: a malformed value is a
		 * host that does not count */
		if (r == -ENOMEM)
			return r;
	}
	w->seen = catalog_count_hosts(&cat, w->service, w->healthy);
	if ((r = report(&w->report, &(struct fleet_progress){ .have = w->seen,
							       .want = w->count })) < 0)
		return r;
	return w->seen >= w->count;
}

int fleet_wait_service(struct fleet *f, const char *service, size_t count, bool healthy,
		       uint64_t deadline_ms, fleet_progress_fn progress, void *userdata,
		       size_t *ret_seen)
{
	_cleanup_(freep) char *dir = NULL;
	struct wait_range range = { .components = 1, .values = VALUES_RAW };
	struct service_wait w = { .service = service, .count = count, .healthy = healthy,
				  .set = &range.set,
				  .report = { .fn = progress, .userdata = userdata } };
	int answer;

	*ret_seen = 0;
	if (!service || !schema_name_valid(service))
		return -EINVAL;
	if (!(dir = key_service_dir(f->prefix, service)))
		return -ENOMEM;
	range.key = dir;
	answer = wait_ranges(f, &range, 1, deadline_ms, enough_hosts, &w, &w.report);
	*ret_seen = w.seen;
	keyset_release(&range.set);
	progress_report_release(&w.report);
	return answer;
}

/* --- status --watch -------------------------------------------------------------------- */

static int any_event(const struct etcd_event *events, size_t n, int64_t revision,
		     void *userdata)
{
	return n > 0 ? 1 : 0;
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
