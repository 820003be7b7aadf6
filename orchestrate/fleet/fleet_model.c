/*
 * fleet_model.c — the model of fleet_model.h: one read at one revision, then
 * every watch event applied to memory.
 *
 * The parts are small except the catalog, which can hold an entry per host of
 * the fleet; it is kept sorted and changed in place (catalog_apply), so a
 * catalog event costs a node a binary search and a move, never a read.  The
 * holders of rollout slots are kept in queue order (create revision), so a
 * node's rank is one walk over them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/cleanup.h"
#include "fleet/fleet_model.h"
#include "fleet/schema.h"
#include "base/json.h"
#include "base/strv.h"
#include "fleet_internal.h"

/* --- small helpers --------------------------------------------------------------- */

static bool has_prefix(const struct etcd_kv *kv, const char *dir)
{
	size_t n = strlen(dir);
	return kv->key_len >= n && memcmp(kv->key, dir, n) == 0;
}

static bool is_key(const struct etcd_kv *kv, const char *key)
{
	return kv->key_len == strlen(key) && memcmp(kv->key, key, kv->key_len) == 0;
}

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static int kv_copy(const struct etcd_kv *from, struct etcd_kv *to)
{
	*to = *from;
	to->key = malloc(from->key_len + 1);
	to->value = malloc(from->value_len + 1);
	if (!to->key || !to->value) {
		free(to->key);
		free(to->value);
		return -ENOMEM;
	}
	memcpy(to->key, from->key, from->key_len);
	to->key[from->key_len] = '\0';
	if (from->value_len)
		memcpy(to->value, from->value, from->value_len);
	to->value[from->value_len] = '\0';
	return 0;
}

static int kv_cmp_key(const struct etcd_kv *a, const char *key, size_t len)
{
	size_t n = a->key_len < len ? a->key_len : len;
	int r = memcmp(a->key, key, n);
	return r ? r : (a->key_len > len) - (a->key_len < len);
}

/* Puts (or, with deleted, removes) kv in a list kept sorted by key. */
static int kv_list_apply(struct etcd_kv_list *l, const struct etcd_kv *kv, bool deleted)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (kv_cmp_key(&l->kvs[mid], kv->key, kv->key_len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	bool found = lo < l->n && kv_cmp_key(&l->kvs[lo], kv->key, kv->key_len) == 0;
	if (deleted) {
		if (found) {
			etcd_kv_release(&l->kvs[lo]);
			memmove(&l->kvs[lo], &l->kvs[lo + 1], (l->n - lo - 1) * sizeof(*l->kvs));
			l->n--;
		}
		return 0;
	}
	struct etcd_kv copy;
	if (kv_copy(kv, &copy) < 0)
		return -ENOMEM;
	if (found) {
		etcd_kv_release(&l->kvs[lo]);
		l->kvs[lo] = copy;
		return 0;
	}
	if (ARRAY_GROW(l->kvs, l->cap, l->n + 1, 8) < 0) {
		etcd_kv_release(&copy);
		return -ENOMEM;
	}
	memmove(&l->kvs[lo + 1], &l->kvs[lo], (l->n - lo) * sizeof(*l->kvs));
	l->kvs[lo] = copy;
	l->n++;
	return 0;
}

/* --- life cycle --------------------------------------------------------------------- */

/* The key just after every key starting with dir (dir ends in '/'). */
static char *prefix_end(const char *dir)
{
	size_t n = strlen(dir);
	char *end = calloc(n + 1, 1);
	if (end)
		end[etcd_prefix_end(dir, n, end)] = '\0';
	return end;
}

/* The copies and keys of fleet_model_init(); -ENOMEM leaves m for the caller
 * to release. */
static int model_fill(struct fleet_model *m, const char *P, const char *host, const char *group,
		      char *const *consumed)
{
	size_t n = 0;

	m->prefix = strdup(P);
	m->host = strdup(host);
	m->group = group ? strdup(group) : NULL;
	m->k_version = key_current_version(P);
	m->k_pause_dir = key_pause_dir(P);
	m->k_policy = key_rollout_policy(P);
	m->k_holders_dir = key_rollout_holders_dir(P);
	m->k_services_dir = key_services_dir(P);
	m->k_failed_dir = key_rollout_failed_dir(P);
	m->k_canary_dir = key_rollout_canary_dir(P);
	m->k_halted = key_rollout_halted(P);
	m->k_promoted = key_rollout_promoted(P);
	m->k_stages_dir = key_rollout_stages_dir(P);
	/* fleet_events' model stands for no host ("-"): no alive key. */
	if (schema_name_valid(host) && !(m->k_alive = key_alive(P, host)))
		return -ENOMEM;
	if (!m->k_failed_dir || !m->k_canary_dir || !m->k_halted || !m->k_promoted ||
	    !m->k_stages_dir)
		return -ENOMEM;
	if (!m->prefix || !m->host || (group && !m->group) || !m->k_version || !m->k_pause_dir || !m->k_policy ||
	    !m->k_holders_dir || !m->k_services_dir)
		return -ENOMEM;
	/* rollout/ is the directory of the policy key. */
	m->k_rollout_dir = strdup(m->k_policy);
	if (!m->k_rollout_dir)
		return -ENOMEM;
	m->k_rollout_dir[strlen(m->k_rollout_dir) - strlen("policy")] = '\0';
	if (!(m->k_holders_end = prefix_end(m->k_holders_dir)) ||
	    !(m->k_rollout_end = prefix_end(m->k_rollout_dir)))
		return -ENOMEM;
	if (consumed) {
		for (n = 0; consumed[n]; n++)
			;
		m->consumed = calloc(n + 1, sizeof(char *));
		m->k_service_dirs = calloc(n + 1, sizeof(char *));
		if (!m->consumed || !m->k_service_dirs)
			return -ENOMEM;
		for (size_t i = 0, k = 0; i < n; i++) {
			if (strv_has(m->consumed, consumed[i]))
				continue;
			m->consumed[k] = strdup(consumed[i]);
			m->k_service_dirs[k] = key_service_dir(P, consumed[i]);
			if (!m->consumed[k] || !m->k_service_dirs[k++])
				return -ENOMEM;
		}
	}
	return 0;
}

int fleet_model_init(struct fleet_model *m, const char *P, const char *host, const char *group,
		     char *const *consumed)
{
	int r;

	*m = (struct fleet_model){ .catalog = CATALOG_INIT, .own_puppet = STATE_INVALID,
				   .own_validation = STATE_INVALID };
	if ((r = model_fill(m, P, host, group, consumed)) < 0)
		fleet_model_release(m);
	return r;
}

static void safety_clear(struct fleet_model *m)
{
	etcd_kv_list_release(&m->failed);
	etcd_kv_list_release(&m->canaries);
	etcd_kv_list_release(&m->stages);
	etcd_kv_release(&m->halted);
	etcd_kv_release(&m->promoted);
	m->halted = (struct etcd_kv){ 0 };
	m->promoted = (struct etcd_kv){ 0 };
}

static void holders_clear(struct fleet_model *m)
{
	for (size_t i = 0; i < m->n_holders; i++) {
		free(m->holders[i].host);
		free(m->holders[i].group);
	}
	m->n_holders = 0;
}

void fleet_model_release(struct fleet_model *m)
{
	if (!m)
		return;
	free(m->prefix);
	free(m->host);
	free(m->group);
	strv_free(m->consumed);
	strv_free(m->k_service_dirs);
	free(m->k_version);
	free(m->k_pause_dir);
	free(m->k_rollout_dir);
	free(m->k_policy);
	free(m->k_holders_dir);
	free(m->k_holders_end);
	free(m->k_rollout_end);
	free(m->k_services_dir);
	free(m->k_alive);
	free(m->desired);
	etcd_kv_list_release(&m->pauses);
	rollout_policy_release(&m->policy);
	holders_clear(m);
	free(m->holders);
	rollout_holders_free(m->released, m->n_released);
	free(m->released);
	safety_clear(m);
	free(m->k_failed_dir);
	free(m->k_canary_dir);
	free(m->k_halted);
	free(m->k_promoted);
	free(m->k_stages_dir);
	catalog_release(&m->catalog);
	*m = (struct fleet_model){ .catalog = CATALOG_INIT };
}

/* --- the parts ------------------------------------------------------------------------ */

static void set_desired(struct fleet_model *m, const struct etcd_kv *kv, bool deleted,
			unsigned *changed)
{
	bool known = true;
	char *want = NULL;

	if (!deleted) {
		/* An implausible value is not an answer: no run starts on it. */
		if (kv->value && strlen(kv->value) == kv->value_len && schema_name_valid(kv->value))
			want = kv->value;
		else
			known = false;
	}
	/* The same version set again is a new rollout (a new trigger) all
	 * the same: the records of the old one no longer count. */
	if (m->trigger != (deleted ? 0 : kv->mod_revision)) {
		m->trigger = deleted ? 0 : kv->mod_revision;
		*changed |= MODEL_ROLLOUT;
	}
	if (known == m->desired_known &&
	    ((!want && !m->desired) || (want && m->desired && strcmp(want, m->desired) == 0)))
		return;
	char *copy = want ? strdup(want) : NULL;
	if (want && !copy) {
		known = false;	/* out of memory is not an answer either */
	}
	free(m->desired);
	m->desired = copy;
	m->desired_known = known;
	*changed |= MODEL_VERSION;
}

static int set_policy(struct fleet_model *m, const struct etcd_kv *kv, bool deleted)
{
	rollout_policy_release(&m->policy);
	m->policy_state = 0;
	if (deleted)
		return 0;
	int r = rollout_policy_decode(kv->value, kv->value_len, &m->policy);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		/* An unreadable policy is taken as the most careful one. */
		rollout_policy_release(&m->policy);
		m->policy.max_parallel = 1;
		m->policy_state = -EPROTO;
		return 0;
	}
	m->policy_state = 1;
	return 0;
}

static char *holder_group(const struct etcd_kv *kv)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_ParseWithLength(kv->value ? kv->value : "",
								    kv->value_len);
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(obj, "group");
	return cJSON_IsString(g) && schema_name_valid(g->valuestring) ? strdup(g->valuestring)
								     : NULL;
}

static int set_holder(struct fleet_model *m, const struct etcd_kv *kv, bool deleted)
{
	const char *host = kv->key + strlen(m->k_holders_dir);
	size_t i;

	if (strlen(kv->key) != kv->key_len || !schema_name_valid(host))
		return 0;	/* not a holder: a read skips it too */
	for (i = 0; i < m->n_holders; i++)
		if (strcmp(m->holders[i].host, host) == 0)
			break;
	if (i < m->n_holders) {
		struct rollout_holder gone = m->holders[i];
		memmove(&m->holders[i], &m->holders[i + 1],
			(m->n_holders - i - 1) * sizeof(*m->holders));
		m->n_holders--;
		if (deleted) {
			/* kept for a dead-holder check, with the deletion's revision */
			gone.create_revision = kv->mod_revision;
			if (m->n_released == FLEET_MODEL_RELEASED_MAX) {
				rollout_holders_free(m->released, 1);
				memmove(&m->released[0], &m->released[1],
					(m->n_released - 1) * sizeof(*m->released));
				m->n_released--;
			}
			if (!m->released &&
			    !(m->released = calloc(FLEET_MODEL_RELEASED_MAX, sizeof(*m->released)))) {
				free(gone.host);
				free(gone.group);
				return -ENOMEM;
			}
			m->released[m->n_released++] = gone;
		} else {
			free(gone.host);
			free(gone.group);
		}
	}
	if (deleted) {
		m->holder_releases++;
		return 0;
	}
	if (ARRAY_GROW(m->holders, m->cap_holders, m->n_holders + 1, 8) < 0)
		return -ENOMEM;
	struct rollout_holder h = { strdup(host), holder_group(kv), kv->create_revision };
	if (!h.host) {
		free(h.group);
		return -ENOMEM;
	}
	/* Queue order; a put of an existing key keeps its create revision. */
	for (i = m->n_holders; i > 0 && m->holders[i - 1].create_revision > h.create_revision; i--)
		;
	memmove(&m->holders[i + 1], &m->holders[i], (m->n_holders - i) * sizeof(*m->holders));
	m->holders[i] = h;
	m->n_holders++;
	return 0;
}

static int set_record(struct etcd_kv *slot, const struct etcd_kv *kv, bool deleted)
{
	struct etcd_kv copy = { 0 };
	if (!deleted && kv_copy(kv, &copy) < 0)
		return -ENOMEM;
	etcd_kv_release(slot);
	*slot = copy;
	return 0;
}

void rollout_holders_free(struct rollout_holder *h, size_t n)
{
	for (size_t i = 0; h && i < n; i++) {
		free(h[i].host);
		free(h[i].group);
		h[i] = (struct rollout_holder){ 0 };
	}
}

size_t fleet_model_take_released(struct fleet_model *m, struct rollout_holder **ret)
{
	size_t n = m->n_released;
	*ret = NULL;
	if (n == 0)
		return 0;
	*ret = malloc(n * sizeof(**ret));
	if (!*ret) {
		rollout_holders_free(m->released, n);
		m->n_released = 0;
		return 0;
	}
	memcpy(*ret, m->released, n * sizeof(**ret));
	m->n_released = 0;
	return n;
}

static bool catalog_wanted(const struct fleet_model *m, const struct etcd_kv *kv)
{
	if (!has_prefix(kv, m->k_services_dir))
		return false;
	if (!m->consumed)
		return true;
	for (size_t i = 0; m->k_service_dirs[i]; i++)
		if (has_prefix(kv, m->k_service_dirs[i]))
			return true;
	return false;
}

static int apply_one(struct fleet_model *m, const struct etcd_kv *kv, bool deleted,
		     unsigned *changed)
{
	int r = 0;

	if (is_key(kv, m->k_version)) {
		set_desired(m, kv, deleted, changed);
	} else if (has_prefix(kv, m->k_pause_dir)) {
		r = kv_list_apply(&m->pauses, kv, deleted);
		*changed |= MODEL_PAUSE;
	} else if (is_key(kv, m->k_policy)) {
		r = set_policy(m, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (has_prefix(kv, m->k_holders_dir)) {
		if (m->queue_apart)
			return 0;	/* a read holds them: they are not the model's */
		r = set_holder(m, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (has_prefix(kv, m->k_failed_dir)) {
		r = kv_list_apply(&m->failed, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (has_prefix(kv, m->k_canary_dir)) {
		r = kv_list_apply(&m->canaries, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (is_key(kv, m->k_halted)) {
		r = set_record(&m->halted, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (is_key(kv, m->k_promoted)) {
		r = set_record(&m->promoted, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (has_prefix(kv, m->k_stages_dir)) {
		r = kv_list_apply(&m->stages, kv, deleted);
		*changed |= MODEL_ROLLOUT;
	} else if (m->k_alive && is_key(kv, m->k_alive)) {
		/* Only its delete matters: the node's own lease went (etcd
		 * revoked it and deleted its keys), or somebody deleted the
		 * key.  Its puts are the node's own registrations. */
		if (deleted)
			*changed |= MODEL_SELF_GONE;
	} else if (catalog_wanted(m, kv)) {
		r = catalog_apply_kv(&m->catalog, m->k_services_dir, kv, deleted);
		*changed |= MODEL_CATALOG;
	}
	return r;
}

/* A key of rollout/ after holders/ (policy, promoted): queue_apart watches
 * them in a range of their own, complete up to its own revision. */
static bool above_holders(const struct fleet_model *m, const struct etcd_kv *kv)
{
	size_t n = strlen(m->k_holders_dir);
	return has_prefix(kv, m->k_rollout_dir) && !has_prefix(kv, m->k_holders_dir) &&
	       memcmp(kv->key, m->k_holders_dir, kv->key_len < n ? kv->key_len : n) > 0;
}

int fleet_model_apply(struct fleet_model *m, const struct etcd_event *events, size_t n,
		      unsigned *ret_changed)
{
	for (size_t i = 0; i < n; i++) {
		int r = apply_one(m, &events[i].kv, events[i].type == ETCD_EVENT_DELETE, ret_changed);
		if (r < 0)
			return r;
		int64_t rev = events[i].kv.mod_revision;
		if (rev > m->revision)
			m->revision = rev;
		if (m->queue_apart && above_holders(m, &events[i].kv)) {
			if (rev > m->rollout_high_revision)
				m->rollout_high_revision = rev;
		} else if (has_prefix(&events[i].kv, m->k_rollout_dir) && rev > m->rollout_revision)
			m->rollout_revision = rev;
		else if (has_prefix(&events[i].kv, m->k_pause_dir) && rev > m->pause_revision)
			m->pause_revision = rev;
	}
	if (m->catalog.revision < m->revision)
		m->catalog.revision = m->revision;
	return 0;
}

/* --- reading ------------------------------------------------------------------------- */

/* Everything was read at revision: swapped in, replacing what m held.  Takes
 * the contents of version (key NULL: no desired version), pauses, rollout and
 * cat, which the caller leaves empty. */
static int model_load(struct fleet_model *m, struct etcd_kv *version, struct etcd_kv_list *pauses,
		      struct etcd_kv_list *rollout, struct catalog *cat, int64_t revision)
{
	unsigned ignored = 0;
	int r;

	cat->revision = revision;
	free(m->desired);
	m->desired = NULL;
	m->desired_known = true;
	m->trigger = 0;
	if (version->key)
		set_desired(m, version, false, &ignored);
	etcd_kv_list_release(&m->pauses);
	m->pauses = *pauses;
	*pauses = (struct etcd_kv_list)ETCD_KV_LIST_INIT;
	catalog_release(&m->catalog);
	m->catalog = *cat;
	*cat = (struct catalog)CATALOG_INIT;
	rollout_policy_release(&m->policy);
	m->policy_state = 0;
	holders_clear(m);
	safety_clear(m);
	for (size_t i = 0; i < rollout->n; i++)
		if ((r = apply_one(m, &rollout->kvs[i], false, &ignored)) < 0)
			return r;
	m->revision = m->pause_revision = m->rollout_revision = m->rollout_high_revision = revision;
	return 0;
}

/*
 * The snapshot's ranges, in this order: current_version, pause/, rollout/,
 * this host's own status keys (one per allowed state of puppet, then of
 * validation: exactly the keys, all a per-host identity may read of them),
 * then the catalog (whole, or one range per consumed service).
 */
enum { READ_VERSION, READ_PAUSES, READ_ROLLOUT, READ_STATUS };
static const enum status_type own_types[] = { STATUS_PUPPET, STATUS_VALIDATION };

static size_t own_status_keys(void)
{
	size_t n = 0;
	for (size_t t = 0; t < ELEMENTSOF(own_types); t++)
		for (int s = 0; s < _STATE_MAX; s++)
			n += status_state_allowed(own_types[t], (enum status_state)s);
	return n;
}

/* The state of one type among its keys' lists from *next on (advanced past
 * them): the one set, or the newest by its "time" when several are (only by
 * hand); STATE_INVALID when none is. */
static enum status_state own_status_of(enum status_type type, const struct etcd_kv_list *lists,
				       size_t *next)
{
	enum status_state found = STATE_INVALID;
	int64_t found_time = -1;

	for (int s = 0; s < _STATE_MAX; s++) {
		if (!status_state_allowed(type, (enum status_state)s))
			continue;
		const struct etcd_kv_list *l = &lists[(*next)++];
		if (l->n != 1)
			continue;
		_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(&l->kvs[0]);
		int64_t t = obj ? json_get_int(obj, "time") : 0;
		if (t > found_time) {
			found = (enum status_state)s;
			found_time = t;
		}
	}
	return found;
}

static void model_on_snapshot(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			      void *userdata)
{
	struct fleet_model *m = userdata;
	_cleanup_(etcd_kv_releasep) struct etcd_kv version = { 0 };
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	size_t next = READ_STATUS;
	enum status_state own[ELEMENTSOF(own_types)] = { STATE_INVALID, STATE_INVALID };
	int r = error;

	if (r >= 0) {
		if (lists[READ_VERSION].n == 1) {
			version = lists[READ_VERSION].kvs[0];
			lists[READ_VERSION].kvs[0] = (struct etcd_kv){ 0 };
		}
		for (size_t t = 0; t < ELEMENTSOF(own_types); t++)
			own[t] = own_status_of(own_types[t], lists, &next);
	}
	for (size_t i = next; r >= 0 && i < n; i++)
		r = catalog_from_kvs(&lists[i], m->k_services_dir, &cat);
	if (r >= 0) {
		catalog_sort(&cat);
		r = model_load(m, &version, &lists[READ_PAUSES], &lists[READ_ROLLOUT], &cat,
			       revision);
	}
	if (r >= 0) {
		m->own_puppet = own[0];
		m->own_validation = own[1];
	}
	m->read_fn(r < 0 ? r : 0, m, m->read_userdata);
}

int fleet_model_read_start(struct fleet *f, struct fleet_model *m, long patience_ms,
			   fleet_model_read_fn fn, void *userdata, struct etcd_call **ret)
{
	size_t catalog = READ_STATUS + own_status_keys(), n = catalog + 1, k = READ_STATUS;
	if (m->consumed)
		n = catalog + strv_length(m->k_service_dirs);	/* 0: no catalog range */

	_cleanup_(freep) struct etcd_range *ranges = calloc(n, sizeof(*ranges));
	_cleanup_(strv_freep) char **status_keys = calloc(catalog - READ_STATUS + 1, sizeof(char *));
	if (!ranges || !status_keys)
		return -ENOMEM;
	ranges[READ_VERSION] = (struct etcd_range){ .key = m->k_version, .prefix = false, .flags = 0 };
	ranges[READ_PAUSES] = (struct etcd_range){ .key = m->k_pause_dir, .prefix = true, .flags = 0 };
	ranges[READ_ROLLOUT] = (struct etcd_range){ .key = m->k_rollout_dir, .prefix = true, .flags = 0 };
	for (size_t t = 0; t < ELEMENTSOF(own_types); t++)
		for (int s = 0; s < _STATE_MAX; s++) {
			if (!status_state_allowed(own_types[t], (enum status_state)s))
				continue;
			char *key = key_status(m->prefix, own_types[t], (enum status_state)s, m->host);
			if (!key)
				return -ENOMEM;
			status_keys[k - READ_STATUS] = key;
			ranges[k++] = (struct etcd_range){ .key = key, .prefix = false, .flags = 0 };
		}
	for (size_t i = catalog; i < n; i++)
		ranges[i] = (struct etcd_range){
			.key = m->consumed ? m->k_service_dirs[i - catalog] : m->k_services_dir,
			.prefix = true };
	m->read_fn = fn;
	m->read_userdata = userdata;
	return etcd_snapshot_start(f->etcd, ranges, n, 0, patience_ms, model_on_snapshot, m, ret);
}

int fleet_model_ranges(const struct fleet_model *m, struct etcd_watch_range **ret, size_t *ret_n)
{
	size_t n = 5, k = 0;
	int64_t from = m->revision + 1;

	for (size_t i = 0; m->consumed && m->consumed[i]; i++)
		n++;
	if (!m->consumed)
		n++;
	struct etcd_watch_range *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v[k++] = (struct etcd_watch_range){ .key = m->k_version, .start_revision = from };
	v[k++] = (struct etcd_watch_range){ .key = m->k_pause_dir, .prefix = true,
					    .start_revision = from };
	if (m->queue_apart) {
		/* rollout/ but holders/: [rollout/, holders/) and
		 * [the end of holders/, the end of rollout/); the range ends
		 * live in m, as the keys do. */
		v[k++] = (struct etcd_watch_range){ .key = m->k_rollout_dir,
						    .range_end = m->k_holders_dir,
						    .start_revision = from };
		v[k++] = (struct etcd_watch_range){ .key = m->k_holders_end,
						    .range_end = m->k_rollout_end,
						    .start_revision = from };
	} else
		v[k++] = (struct etcd_watch_range){ .key = m->k_rollout_dir, .prefix = true,
						    .start_revision = from };
	/* This host's own alive/ key, on the same stream: its delete says
	 * that etcd revoked the node's lease (node_lease_key_deleted), which
	 * a node whose renewals went unanswered would learn only at its next
	 * try.  Its deletes only: the node puts it at every version (its
	 * value names the local one), and each would be an event to itself.
	 * Before the catalog, whose ranges come last. */
	if (m->k_alive)
		v[k++] = (struct etcd_watch_range){ .key = m->k_alive, .start_revision = from,
						    .flags = ETCD_WATCH_NO_PUT };
	if (!m->consumed)
		v[k++] = (struct etcd_watch_range){ .key = m->k_services_dir, .prefix = true,
						    .start_revision = from };
	for (size_t i = 0; m->consumed && m->consumed[i]; i++)
		v[k++] = (struct etcd_watch_range){ .key = m->k_service_dirs[i], .prefix = true,
						    .start_revision = from };
	*ret = v;
	*ret_n = k;
	return 0;
}

size_t fleet_model_catalog_range(const struct fleet_model *m)
{
	return (m->queue_apart ? 4 : 3) + (m->k_alive ? 1 : 0);
}

/* --- questions ------------------------------------------------------------------------ */

int fleet_model_paused(const struct fleet_model *m, char **ret_reason)
{
	return fleet_pause_find(&m->pauses, m->prefix, m->host, m->group, ret_reason);
}

/* --- the rollout's safety records ------------------------------------------------------ */

/* Whether kv is a record of the rollout the model is at; *ret (when not NULL)
 * gets it decoded. */
static bool record_current(const struct fleet_model *m, const struct etcd_kv *kv,
			   struct rollout_record *ret)
{
	_cleanup_(rollout_record_releasep) struct rollout_record rec = { 0 };

	if (!kv->key || !m->desired_known || !m->desired ||
	    rollout_record_decode(kv->value, kv->value_len, &rec) < 0 ||
	    !rollout_record_current(&rec, m->desired, m->trigger))
		return false;
	if (ret) {
		*ret = rec;
		rec = (struct rollout_record){ 0 };
	}
	return true;
}

bool fleet_model_halted(const struct fleet_model *m, struct rollout_record *ret_halt)
{
	return record_current(m, &m->halted, ret_halt);
}

bool fleet_model_promoted(const struct fleet_model *m)
{
	return record_current(m, &m->promoted, NULL);
}

static size_t count_current(const struct fleet_model *m, const struct etcd_kv_list *l)
{
	size_t n = 0;
	for (size_t i = 0; i < l->n; i++)
		n += record_current(m, &l->kvs[i], NULL);
	return n;
}

enum stage_gate fleet_model_stage_gate(const struct fleet_model *m, const char *group,
				       int64_t *ret_mod, char **ret_host)
{
	_cleanup_(rollout_record_releasep) struct rollout_record rec = { 0 };
	size_t n = strlen(m->k_stages_dir);
	const struct etcd_kv *kv = NULL;

	*ret_mod = 0;
	if (ret_host)
		*ret_host = NULL;
	for (size_t i = 0; group && i < m->stages.n && !kv; i++)
		if (m->stages.kvs[i].key_len > n && strcmp(m->stages.kvs[i].key + n, group) == 0)
			kv = &m->stages.kvs[i];
	if (!kv)
		return STAGE_GATE_NONE;
	*ret_mod = kv->mod_revision;
	if (!record_current(m, kv, &rec) || !rec.stage)
		return STAGE_GATE_NONE;	/* another trigger's, or not ours to read */
	if (strcmp(rec.stage, "open") == 0)
		return STAGE_GATE_OPEN;
	if (strcmp(rec.stage, "watching") != 0 || !rec.host || !schema_name_valid(rec.host))
		return STAGE_GATE_NONE;
	if (ret_host)
		*ret_host = TAKE_PTR(rec.host);
	return STAGE_GATE_WATCHED;
}

const char *fleet_model_stage_claimed(const struct fleet_model *m, const char *host,
				      const char *keep, int64_t *ret_mod)
{
	size_t n = strlen(m->k_stages_dir);

	for (size_t i = 0; i < m->stages.n; i++) {
		const char *group = m->stages.kvs[i].key + n;
		_cleanup_(freep) char *watcher = NULL;
		int64_t mod;
		/* a key below a gate's, or not a name, is no gate to give up */
		if (m->stages.kvs[i].key_len <= n || !schema_name_valid(group) ||
		    (keep && strcmp(group, keep) == 0))
			continue;
		if (fleet_model_stage_gate(m, group, &mod, &watcher) == STAGE_GATE_WATCHED &&
		    strcmp(watcher, host) == 0) {
			*ret_mod = mod;
			return group;
		}
	}
	return NULL;
}

size_t fleet_model_failures(const struct fleet_model *m)
{
	return count_current(m, &m->failed);
}

size_t fleet_model_canaries(const struct fleet_model *m)
{
	return count_current(m, &m->canaries);
}

static const struct etcd_kv *own_record(const struct fleet_model *m, const struct etcd_kv_list *l,
					const char *dir)
{
	size_t n = strlen(dir);
	for (size_t i = 0; i < l->n; i++)
		if (l->kvs[i].key_len > n && strcmp(l->kvs[i].key + n, m->host) == 0)
			return &l->kvs[i];
	return NULL;
}

bool fleet_model_failed_here(const struct fleet_model *m, bool any_trigger)
{
	const struct etcd_kv *kv = own_record(m, &m->failed, m->k_failed_dir);
	return kv && (any_trigger || record_current(m, kv, NULL));
}

bool fleet_model_own_failure(const struct fleet_model *m, struct rollout_record *ret)
{
	const struct etcd_kv *kv = own_record(m, &m->failed, m->k_failed_dir);
	return kv && record_current(m, kv, ret);
}


size_t rollout_policy_stage(const struct rollout_policy *p, const char *group)
{
	for (size_t i = 0; group && i < p->n_groups; i++)
		if (strcmp(p->groups[i], group) == 0)
			return i;
	return p->n_groups;
}

int fleet_model_holder_rank(const struct fleet_model *m, size_t *ret_rank, size_t *ret_in_stage)
{
	size_t stage = rollout_policy_stage(&m->policy, m->group), in_stage = 0, rank = 0;
	bool found = false;

	for (size_t i = 0; i < m->n_holders; i++) {
		const struct rollout_holder *h = &m->holders[i];
		if (m->policy.n_groups && rollout_policy_stage(&m->policy, h->group) != stage)
			continue;
		if (strcmp(h->host, m->host) == 0) {
			found = true;
			rank = in_stage;
		}
		in_stage++;
	}
	*ret_rank = rank;
	*ret_in_stage = in_stage;
	return found;
}

/* --- the decision ---------------------------------------------------------------------- */

int fleet_model_decide(const struct fleet_model *m, const struct rollout_ask *ask,
		       struct rollout_decision *ret)
{
	const struct rollout_policy *p = &m->policy;
	bool canary;
	long cap;
	int r;

	*ret = (struct rollout_decision){ .verdict = ROLLOUT_START };
	if (m->policy_state == 0)
		return 0;
	ret->failed = fleet_model_failures(m);
	ret->canaries_done = fleet_model_canaries(m);
	/* Until promoted, the canaries are the first hosts to hold a slot: the
	 * ones running now (holders), those that validated (canary/) and those
	 * that failed (failed/: a failed canary is a verdict, and no other
	 * host takes its place). */
	canary = p->canary > 0 && !fleet_model_promoted(m);
	cap = ask->limit;
	if (canary) {
		size_t used = ret->canaries_done + ret->failed;
		long left = p->canary > (long)used ? p->canary - (long)used : 0;
		if (cap <= 0 || left < cap)
			cap = left;
	}
	ret->cap = cap;
	if (!ask->has_slot && (ask->limit > 0 || canary)) {
		if (!ask->queued) {
			ret->verdict = ROLLOUT_QUEUE;
			return 0;
		}
		if (m->queue_apart) {
			/* Every holder ahead counts, of any stage: one of an
			 * earlier group still running (a retry) is running. */
			ret->ranked = ask->placed;
			ret->rank = ask->ahead;
			ret->in_stage = ask->ahead + 1;
		} else
			ret->ranked = fleet_model_holder_rank(m, &ret->rank, &ret->in_stage) == 1;
		if (!ret->ranked) {
			ret->verdict = ROLLOUT_WAIT;	/* our key is not back yet */
			return 0;
		}
		if ((long)ret->rank >= cap) {
			ret->canary = canary;
			ret->verdict = canary ? ROLLOUT_WAIT_CANARY : ROLLOUT_WAIT;
			return 0;
		}
		ret->canary = canary;
	}
	/* It would start: not when the failures it can see spend the budget. */
	if (rollout_policy_has_budget(p)) {
		r = rollout_budget_spent(p, ret->failed, ask->alive, &ret->halt_reason);
		if (r == -EAGAIN) {
			ret->verdict = ROLLOUT_COUNT_ALIVE;
			return 0;
		}
		if (r < 0)
			return r;
		if (r > 0)
			ret->verdict = ROLLOUT_HALT;
	}
	return 0;
}

int fleet_model_guard_start(const struct fleet_model *m, struct fleet_batch *b)
{
	int r;

	if ((r = fleet_batch_if_written_at(b, m->k_version, m->trigger)) < 0 ||
	    (r = fleet_batch_if_unchanged_since(b, m->k_pause_dir, true, m->pause_revision)) < 0 ||
	    (r = fleet_batch_if_unchanged_since(b, m->k_failed_dir, true, m->rollout_revision)) < 0 ||
	    (r = fleet_batch_if_unchanged_since(b, m->k_canary_dir, true, m->rollout_revision)) < 0 ||
	    (r = fleet_batch_if_unchanged_since(b, m->k_halted, false, m->rollout_revision)) < 0 ||
	    (r = fleet_batch_if_unchanged_since(b, m->k_policy, false,
						m->queue_apart ? m->rollout_high_revision
							       : m->rollout_revision)) < 0)
		return r;
	return 0;
}

long rollout_percent_limit(const struct rollout_policy *p, size_t alive)
{
	long limit = (long)((double)alive * p->max_percent / 100.0);
	return limit < 1 ? 1 : limit;
}
