/*
 * fleet_events.c — the rollout as events (fleet_events.h): a state of the
 * fleet fed by one watch over the prefix, and what each revision changed.
 *
 * The state is the node's model of the rollout (fleet_model.c, fed every
 * event: it keeps what it knows and skips the rest) beside a table of hosts,
 * sorted by name, each with its state of each status type, alive, running
 * version and group.  A revision is applied whole: the hosts it touches and,
 * when it touches anything but host keys, the rollout are snapshot first,
 * the events applied, and each snapshot compared with its after — the same
 * comparison (host_diff, rollout_diff) that a re-read after a compaction
 * makes over every host.  So an event means "the state changed so", never
 * "a key was written": a node rewriting an unchanged value says nothing, and
 * what a compaction hid still comes out, once.
 *
 * The stream runs on the caller's sd-event loop: the client's asynchronous
 * watch (it resumes a lost stream from its revision by itself), and a timer
 * for the re-read after a compaction when etcd does not answer it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "fleet/fleet_events.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

static const char *const kind_names[_FLEET_EVENT_KIND_MAX] = {
	[FLEET_EVENT_TRIGGER] = "trigger",
	[FLEET_EVENT_ROLLBACK] = "rollback",
	[FLEET_EVENT_REVERTED] = "reverted",
	[FLEET_EVENT_HALTED] = "halted",
	[FLEET_EVENT_PROMOTED] = "promoted",
	[FLEET_EVENT_PAUSED] = "paused",
	[FLEET_EVENT_RESUMED] = "resumed",
	[FLEET_EVENT_POLICY] = "policy",
	[FLEET_EVENT_REGISTERED] = "registered",
	[FLEET_EVENT_DECOMMISSIONED] = "decommissioned",
	[FLEET_EVENT_ALIVE] = "alive",
	[FLEET_EVENT_DEAD] = "dead",
	[FLEET_EVENT_STARTED] = "started",
	[FLEET_EVENT_SUCCEEDED] = "succeeded",
	[FLEET_EVENT_FAILED] = "failed",
	[FLEET_EVENT_WAITING] = "waiting",
	[FLEET_EVENT_CANARY] = "canary",
	[FLEET_EVENT_COMPACTED] = "compacted",
};

const char *fleet_event_kind_name(enum fleet_event_kind k)
{
	return (int)k >= 0 && k < _FLEET_EVENT_KIND_MAX ? kind_names[k] : "?";
}

/* --- event lists ------------------------------------------------------------------------ */

static void event_release(struct fleet_event *e)
{
	free(e->host);
	free(e->version);
	free(e->from);
	free(e->stage);
	free(e->wait);
	free(e->scope);
	free(e->detail);
}

void fleet_event_list_release(struct fleet_event_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		event_release(&l->v[i]);
	free(l->v);
	*l = (struct fleet_event_list){ 0 };
}

/* What an event says, before it is copied into a list. */
struct event_spec {
	enum fleet_event_kind kind;
	int64_t time;
	const char *host, *version, *from, *stage, *wait, *scope, *detail;
	long attempt;
};

static int dup_opt(const char *s, char **ret)
{
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

static int emit(struct fleet_event_list *out, int64_t revision, const struct event_spec *sp)
{
	struct fleet_event e = { .kind = sp->kind, .revision = revision, .time = sp->time,
				 .attempt = sp->attempt };

	if (ARRAY_GROW(out->v, out->cap, out->n + 1, 8) < 0)
		return -ENOMEM;
	if (dup_opt(sp->host, &e.host) < 0 || dup_opt(sp->version, &e.version) < 0 ||
	    dup_opt(sp->from, &e.from) < 0 || dup_opt(sp->stage, &e.stage) < 0 ||
	    dup_opt(sp->wait, &e.wait) < 0 || dup_opt(sp->scope, &e.scope) < 0 ||
	    dup_opt(sp->detail, &e.detail) < 0) {
		event_release(&e);
		return -ENOMEM;
	}
	out->v[out->n++] = e;
	return 0;
}

/* --- hosts ------------------------------------------------------------------------------- */

struct events_status {
	enum status_state state;	/* STATE_INVALID: none */
	char *version;
	long attempts;
	char *wait;
	char *detail;			/* the last line, cut */
	int64_t time;
	int64_t mod;			/* the key's mod revision (a delete's) */
};

struct events_host {
	char *name;
	char *group;
	char *running;			/* running_version/HOST's version */
	bool alive;
	int64_t alive_time;
	struct events_status st[_STATUS_TYPE_MAX];
};

static void status_clear(struct events_status *st)
{
	free(st->version);
	free(st->wait);
	free(st->detail);
	*st = (struct events_status){ .state = STATE_INVALID };
}

static void host_release(struct events_host *h)
{
	free(h->name);
	free(h->group);
	free(h->running);
	for (int t = 0; t < _STATUS_TYPE_MAX; t++)
		status_clear(&h->st[t]);
	*h = (struct events_host){ 0 };
}

static void host_init(struct events_host *h)
{
	*h = (struct events_host){ 0 };
	for (int t = 0; t < _STATUS_TYPE_MAX; t++)
		h->st[t] = (struct events_status){ .state = STATE_INVALID };
}

static bool host_empty(const struct events_host *h)
{
	if (h->group || h->running || h->alive)
		return false;
	for (int t = 0; t < _STATUS_TYPE_MAX; t++)
		if (h->st[t].state != STATE_INVALID)
			return false;
	return true;
}

static void host_releasep(struct events_host **h)
{
	if (*h)
		host_release(*h);
}

/* Copies from into to; on failure to holds nothing. */
static int host_copy(const struct events_host *from, struct events_host *to)
{
	_cleanup_(host_releasep) struct events_host *undo = to;

	host_init(to);
	to->alive = from->alive;
	to->alive_time = from->alive_time;
	if (dup_opt(from->name, &to->name) < 0 || dup_opt(from->group, &to->group) < 0 ||
	    dup_opt(from->running, &to->running) < 0)
		return -ENOMEM;
	for (int t = 0; t < _STATUS_TYPE_MAX; t++) {
		const struct events_status *a = &from->st[t];
		struct events_status *b = &to->st[t];
		*b = (struct events_status){ .state = a->state, .attempts = a->attempts,
					     .time = a->time, .mod = a->mod };
		if (dup_opt(a->version, &b->version) < 0 || dup_opt(a->wait, &b->wait) < 0 ||
		    dup_opt(a->detail, &b->detail) < 0)
			return -ENOMEM;
	}
	undo = NULL;
	return 0;
}

/* The index of name in s's hosts, or where it would go (*ret_found false). */
static size_t host_index(const struct fleet_events_state *s, const char *name, bool *ret_found)
{
	size_t lo = 0, hi = s->n_hosts;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(s->hosts[mid].name, name);
		if (c == 0) {
			*ret_found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret_found = false;
	return lo;
}

static struct events_host *host_find(const struct fleet_events_state *s, const char *name)
{
	bool found;
	size_t i = host_index(s, name, &found);
	return found ? &s->hosts[i] : NULL;
}

/* The host's record, made when create and it has none; NULL when it has
 * none (or out of memory: *ret_error). */
static struct events_host *host_get(struct fleet_events_state *s, const char *name, bool create,
				    int *ret_error)
{
	bool found;
	size_t i = host_index(s, name, &found);

	*ret_error = 0;
	if (found)
		return &s->hosts[i];
	if (!create)
		return NULL;
	if (ARRAY_GROW(s->hosts, s->cap_hosts, s->n_hosts + 1, 64) < 0) {
		*ret_error = -ENOMEM;
		return NULL;
	}
	struct events_host h;
	host_init(&h);
	if (!(h.name = strdup(name))) {
		*ret_error = -ENOMEM;
		return NULL;
	}
	memmove(&s->hosts[i + 1], &s->hosts[i], (s->n_hosts - i) * sizeof(*s->hosts));
	s->hosts[i] = h;
	s->n_hosts++;
	return &s->hosts[i];
}

/* Drops a host that holds nothing any more: the table stays as large as
 * the fleet, whatever was decommissioned. */
static void host_drop_if_empty(struct fleet_events_state *s, struct events_host *h)
{
	if (!host_empty(h))
		return;
	size_t i = (size_t)(h - s->hosts);
	host_release(h);
	memmove(&s->hosts[i], &s->hosts[i + 1], (s->n_hosts - i - 1) * sizeof(*s->hosts));
	s->n_hosts--;
}

/* The last non-empty line of a detail, its tail cut to FLEET_EVENT_DETAIL_MAX
 * bytes (UTF-8 safe); NULL when there is none. */
static int detail_line(const char *d, char **ret)
{
	*ret = NULL;
	if (!d)
		return 0;
	size_t end = strlen(d);
	while (end > 0 && (d[end - 1] == '\n' || d[end - 1] == '\r' || d[end - 1] == ' ' ||
			   d[end - 1] == '\t'))
		end--;
	if (end == 0)
		return 0;
	size_t start = end;
	while (start > 0 && d[start - 1] != '\n')
		start--;
	_cleanup_(freep) char *line = strndup(d + start, end - start);
	if (!line)
		return -ENOMEM;
	return utf8_tail(line, FLEET_EVENT_DETAIL_MAX, ret);
}

static int status_set(struct events_status *st, enum status_state state, const struct etcd_kv *kv)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
	const char *version = json_get_string(obj, "version");
	struct events_status n = { .state = state, .mod = kv->mod_revision,
				   .time = json_get_int(obj, "time") };
	int64_t first = 0;
	int r;

	if ((r = status_extra_decode(obj, &n.attempts, &first, &n.wait)) < 0 ||
	    (r = detail_line(json_get_string(obj, "detail"), &n.detail)) < 0 ||
	    (version && schema_name_valid(version) && !(n.version = strdup(version)))) {
		status_clear(&n);
		return r < 0 ? r : -ENOMEM;
	}
	status_clear(st);
	*st = n;
	return 0;
}

/* The part of a key below dir split into count names, or -EINVAL (not a
 * key of that shape: skipped, as every reader skips it). */
static int split(const struct etcd_kv *kv, const char *dir, int count, char **parts,
		 char **ret_copy)
{
	int r = key_split(kv->key, kv->key_len, dir, parts, count, ret_copy);
	if (r == -ENOMEM)
		return r;
	return r == count ? 0 : -EINVAL;
}

/* Applies one event to the host table (keys of hosts; others are skipped). */
static int hosts_apply(struct fleet_events_state *s, const struct etcd_kv *kv, bool deleted)
{
	_cleanup_(freep) char *copy = NULL;
	struct events_host *h;
	char *parts[3];
	int r;

	if ((r = split(kv, s->k_status_dir, 3, parts, &copy)) != -EINVAL) {
		if (r < 0)
			return r;
		int type = status_type_from_name(parts[0]);
		int state = status_state_from_name(parts[1]);
		if (type < 0 || state < 0 || !status_state_allowed(type, state))
			return 0;
		if (!(h = host_get(s, parts[2], !deleted, &r)))
			return r;
		if (deleted) {
			/* a state of the type that is not the host's (two by hand) */
			if (h->st[type].state == (enum status_state)state) {
				status_clear(&h->st[type]);
				h->st[type].mod = kv->mod_revision;
			}
			host_drop_if_empty(s, h);
			return 0;
		}
		return status_set(&h->st[type], state, kv);
	}
	if ((r = split(kv, s->k_running_dir, 1, parts, &copy)) != -EINVAL) {
		if (r < 0)
			return r;
		if (!(h = host_get(s, parts[0], !deleted, &r)))
			return r;
		free(h->running);
		h->running = NULL;
		if (!deleted) {
			r = fleet_running_decode(kv->value, kv->value_len, &h->running);
			if (r == -ENOMEM)
				return r;
		}
		host_drop_if_empty(s, h);
		return 0;
	}
	if ((r = split(kv, s->k_alive_dir, 1, parts, &copy)) != -EINVAL) {
		if (r < 0)
			return r;
		if (!(h = host_get(s, parts[0], !deleted, &r)))
			return r;
		h->alive = !deleted;
		if (!deleted) {
			_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
			h->alive_time = json_get_int(obj, "time");
		}
		host_drop_if_empty(s, h);
		return 0;
	}
	if ((r = split(kv, s->k_groups_dir, 2, parts, &copy)) != -EINVAL) {
		if (r < 0)
			return r;
		if (!(h = host_get(s, parts[1], !deleted, &r)))
			return r;
		if (deleted) {
			if (streq_ptr(h->group, parts[0])) {
				free(h->group);
				h->group = NULL;
			}
			host_drop_if_empty(s, h);
			return 0;
		}
		char *g = strdup(parts[0]);
		if (!g)
			return -ENOMEM;
		free(h->group);
		h->group = g;
		return 0;
	}
	return 0;
}

/* --- the state -------------------------------------------------------------------------- */

int fleet_events_state_init(struct fleet_events_state *s, const char *P)
{
	static char *const no_services[] = { NULL };
	int r;

	*s = (struct fleet_events_state){ 0 };
	/* the model follows no service: the catalog is no part of a rollout */
	if ((r = fleet_model_init(&s->model, P, "-", NULL, no_services)) < 0)
		return r;
	s->prefix = strdup(P);
	s->k_root = key_root(P);
	s->k_previous = key_previous_version(P);
	s->k_status_dir = key_status_dir(P);
	s->k_running_dir = key_running_version_dir(P);
	s->k_alive_dir = key_alive_dir(P);
	s->k_groups_dir = key_groups_dir(P);
	if (!s->prefix || !s->k_root || !s->k_previous || !s->k_status_dir || !s->k_running_dir ||
	    !s->k_alive_dir || !s->k_groups_dir) {
		fleet_events_state_release(s);
		return -ENOMEM;
	}
	return 0;
}

void fleet_events_state_release(struct fleet_events_state *s)
{
	if (!s)
		return;
	free(s->prefix);
	free(s->k_root);
	free(s->k_previous);
	free(s->k_status_dir);
	free(s->k_running_dir);
	free(s->k_alive_dir);
	free(s->k_groups_dir);
	free(s->previous);
	fleet_model_release(&s->model);
	for (size_t i = 0; i < s->n_hosts; i++)
		host_release(&s->hosts[i]);
	free(s->hosts);
	*s = (struct fleet_events_state){ 0 };
}

static void state_releasep(struct fleet_events_state *s)
{
	fleet_events_state_release(s);
}

static int previous_apply(struct fleet_events_state *s, const struct etcd_kv *kv, bool deleted)
{
	if (!kv_is(kv, s->k_previous))
		return 0;
	free(s->previous);
	s->previous = NULL;
	if (!deleted && value_is_name(kv->value, kv->value_len) && !(s->previous = strdup(kv->value)))
		return -ENOMEM;
	return 0;
}

/* --- snapshots and their comparison ------------------------------------------------------ */

/* A host as the comparison sees it: its record and the rollout's records of
 * it (failure, canary). */
struct host_snap {
	bool exists;
	struct events_host h;
	int64_t fail_mod;		/* rollout/failed/HOST's; 0: none */
	struct rollout_record fail;
	int64_t canary_mod;
	struct rollout_record canary;
};

static void host_snap_release(struct host_snap *sn)
{
	host_release(&sn->h);
	rollout_record_release(&sn->fail);
	rollout_record_release(&sn->canary);
	*sn = (struct host_snap){ 0 };
}

static int kv_key_cmp(const void *key, const void *elem)
{
	const struct etcd_kv *kv = elem;
	const char *k = key;
	size_t len = strlen(k), n = kv->key_len < len ? kv->key_len : len;
	int c = memcmp(k, kv->key, n);
	return c ? c : (len > kv->key_len) - (len < kv->key_len);
}

/* host's record in a list of the model (sorted by key) below dir. */
static int record_of(const struct etcd_kv_list *l, const char *dir, const char *host,
		     int64_t *ret_mod, struct rollout_record *ret)
{
	_cleanup_(freep) char *key = NULL;

	*ret_mod = 0;
	if (l->n == 0)
		return 0;
	if (asprintf(&key, "%s%s", dir, host) < 0)
		return -ENOMEM;
	const struct etcd_kv *kv = bsearch(key, l->kvs, l->n, sizeof(*l->kvs), kv_key_cmp);
	if (!kv)
		return 0;
	*ret_mod = kv->mod_revision;
	int r = rollout_record_decode(kv->value, kv->value_len, ret);
	return r == -ENOMEM ? r : 0;
}

static int host_snap_take(const struct fleet_events_state *s, const char *name,
			  struct host_snap *ret)
{
	const struct events_host *h = host_find(s, name);
	int r;

	*ret = (struct host_snap){ 0 };
	host_init(&ret->h);
	if (h) {
		ret->exists = true;
		if ((r = host_copy(h, &ret->h)) < 0)
			return r;
	}
	if ((r = record_of(&s->model.failed, s->model.k_failed_dir, name, &ret->fail_mod,
			   &ret->fail)) < 0 ||
	    (r = record_of(&s->model.canaries, s->model.k_canary_dir, name, &ret->canary_mod,
			   &ret->canary)) < 0) {
		host_snap_release(ret);
		return r;
	}
	return 0;
}

/* The detail of a dead host: whether it is unaccounted, and the run it died in. */
static int dead_detail(const struct events_host *h, struct buf *b)
{
	const struct events_status *p = &h->st[STATUS_PUPPET];
	int r = 0;

	if (h->st[STATUS_PROVISIONED].state == STATE_SUCCESS)
		r = buf_adds(b, "unaccounted: provisioned, not alive");
	else
		r = buf_adds(b, "alive key gone");
	if (r >= 0 && p->state == STATE_RUNNING)
		r = buf_printf(b, ", during a run of %s", p->version ? p->version : "?");
	return r < 0 ? -ENOMEM : 0;
}

/* The event of a host's puppet status, from bp before to ap after, if any;
 * *failed is set when it is a failure. */
static int puppet_diff(const char *name, const struct events_status *bp,
		       const struct events_status *ap, int64_t revision,
		       struct fleet_event_list *out, bool *failed)
{
	struct event_spec sp = { .host = name, .version = ap->version, .time = ap->time,
				 .detail = ap->detail };

	if (ap->mod == bp->mod || ap->state == STATE_INVALID)
		return 0;
	switch (ap->state) {
	case STATE_RUNNING:
		sp.kind = FLEET_EVENT_STARTED;
		sp.detail = NULL;
		break;
	case STATE_FAILED:
		sp.kind = FLEET_EVENT_FAILED;
		sp.stage = "config";
		sp.attempt = ap->attempts;
		*failed = true;
		break;
	case STATE_PENDING:
		/* a rewrite that says the same is no news */
		if (bp->state == STATE_PENDING && streq_ptr(bp->wait, ap->wait) &&
		    streq_ptr(bp->detail, ap->detail) && streq_ptr(bp->version, ap->version))
			return 0;
		sp.kind = FLEET_EVENT_WAITING;
		sp.wait = ap->wait;
		break;
	default:
		return 0;
	}
	return emit(out, revision, &sp);
}

/* What changed for one host, from its snapshot before to its snapshot after. */
static int host_diff(const char *name, const struct host_snap *b, const struct host_snap *a,
		     int64_t revision, struct fleet_event_list *out)
{
	const struct events_status *bp = &b->h.st[STATUS_PUPPET], *ap = &a->h.st[STATUS_PUPPET];
	const struct events_status *bv = &b->h.st[STATUS_VALIDATION];
	const struct events_status *av = &a->h.st[STATUS_VALIDATION];
	bool registered = false, failed = false;
	int r;

	if (b->exists && !a->exists)
		return emit(out, revision, &(struct event_spec){
			.kind = FLEET_EVENT_DECOMMISSIONED, .host = name,
			.detail = "every key removed" });

	if (a->h.st[STATUS_PROVISIONED].state == STATE_SUCCESS &&
	    b->h.st[STATUS_PROVISIONED].state != STATE_SUCCESS) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		registered = true;
		if ((a->h.group && buf_printf(&d, "group %s", a->h.group) < 0) ||
		    (a->h.alive && buf_adds(&d, a->h.group ? ", alive" : "alive") < 0))
			return -ENOMEM;
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_REGISTERED, .host = name,
				.time = a->h.st[STATUS_PROVISIONED].time,
				.detail = d.len ? buf_str(&d) : NULL })) < 0)
			return r;
	}
	if (b->h.alive && !a->h.alive) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		if ((r = dead_detail(&a->h, &d)) < 0 ||
		    (r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_DEAD, .host = name,
				/* its lease took running_version along */
				.version = a->h.running ? a->h.running : b->h.running,
				.detail = buf_str(&d) })) < 0)
			return r;
	} else if (!b->h.alive && a->h.alive && !registered) {
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_ALIVE, .host = name, .version = a->h.running,
				.time = a->h.alive_time })) < 0)
			return r;
	}

	if ((r = puppet_diff(name, bp, ap, revision, out, &failed)) < 0)
		return r;
	if (av->mod != bv->mod && (av->state == STATE_FAILED || av->state == STATE_SUCCESS)) {
		struct event_spec sp = { .host = name, .version = av->version, .time = av->time };
		if (av->state == STATE_FAILED) {
			sp.kind = FLEET_EVENT_FAILED;
			sp.stage = "validation";
			sp.attempt = av->attempts;
			sp.detail = av->detail;
			failed = true;
		} else {
			sp.kind = FLEET_EVENT_SUCCEEDED;
		}
		if ((r = emit(out, revision, &sp)) < 0)
			return r;
	}
	/* A failure only the rollout's record tells (a holder that died, a
	 * healthy deadline): the status failures carry their own. */
	if (a->fail_mod && a->fail_mod != b->fail_mod && !failed) {
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_FAILED, .host = name, .version = a->fail.version,
				.time = a->fail.time, .stage = a->fail.stage,
				.attempt = a->fail.attempts })) < 0)
			return r;
	}
	if (a->canary_mod && a->canary_mod != b->canary_mod) {
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_CANARY, .host = name, .version = a->canary.version,
				.time = a->canary.time, .detail = "validated as a canary" })) < 0)
			return r;
	}
	return 0;
}

/* One pause key of a snapshot. */
struct pause_snap {
	char *key;
	char *scope;			/* "global", "group", "host" */
	char *name;			/* the group or host; NULL: global */
	char *reason;
	int64_t time;
	int64_t mod;
};

/* The rollout as the comparison sees it. */
struct rollout_snap {
	bool known;
	char *desired;
	int64_t trigger;
	char *previous;
	int64_t halted_mod;
	struct rollout_record halt;
	int64_t promoted_mod;
	struct rollout_record promo;
	char *policy;			/* encoded; NULL: none */
	bool policy_bad;
	struct pause_snap *pauses;
	size_t n_pauses;
};

static void rollout_snap_release(struct rollout_snap *r)
{
	free(r->desired);
	free(r->previous);
	rollout_record_release(&r->halt);
	rollout_record_release(&r->promo);
	free(r->policy);
	for (size_t i = 0; i < r->n_pauses; i++) {
		free(r->pauses[i].key);
		free(r->pauses[i].scope);
		free(r->pauses[i].name);
		free(r->pauses[i].reason);
	}
	free(r->pauses);
	*r = (struct rollout_snap){ 0 };
}

static void rollout_snap_releasep(struct rollout_snap **r)
{
	if (*r)
		rollout_snap_release(*r);
}

static int pause_snap_fill(const struct fleet_model *m, const struct etcd_kv *kv,
			   struct pause_snap *p)
{
	_cleanup_(freep) char *copy = NULL;
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(kv);
	char *parts[2];
	const char *reason = json_get_string(obj, "reason");

	*p = (struct pause_snap){ .mod = kv->mod_revision, .time = json_get_int(obj, "time") };
	if (!(p->key = strndup(kv->key, kv->key_len)))
		return -ENOMEM;
	if (split(kv, m->k_pause_dir, 1, parts, &copy) == 0 && strcmp(parts[0], "global") == 0) {
		p->scope = strdup("global");
	} else {
		free(copy);
		copy = NULL;
		if (split(kv, m->k_pause_dir, 2, parts, &copy) != 0)
			return 0;	/* not a pause: left without a scope */
		p->scope = strdup(strcmp(parts[0], "groups") == 0 ? "group" :
				  strcmp(parts[0], "hosts") == 0 ? "host" : parts[0]);
		p->name = strdup(parts[1]);
		if (!p->name)
			return -ENOMEM;
	}
	if (!p->scope || (reason && *reason && !(p->reason = strdup(reason))))
		return -ENOMEM;
	return 0;
}

static int rollout_snap_take(const struct fleet_events_state *s, struct rollout_snap *ret)
{
	const struct fleet_model *m = &s->model;
	struct rollout_snap r = { .known = m->desired_known, .trigger = m->trigger,
				  .halted_mod = m->halted.key ? m->halted.mod_revision : 0,
				  .promoted_mod = m->promoted.key ? m->promoted.mod_revision : 0 };
	_cleanup_(rollout_snap_releasep) struct rollout_snap *undo = &r;
	int e = 0;

	if (dup_opt(m->desired, &r.desired) < 0 || dup_opt(s->previous, &r.previous) < 0)
		return -ENOMEM;
	if (m->halted.key &&
	    (e = rollout_record_decode(m->halted.value, m->halted.value_len, &r.halt)) == -ENOMEM)
		return -ENOMEM;
	if (m->promoted.key &&
	    (e = rollout_record_decode(m->promoted.value, m->promoted.value_len, &r.promo)) == -ENOMEM)
		return -ENOMEM;
	if (m->policy_state == 1) {
		if ((e = rollout_policy_encode(&m->policy, &r.policy)) == -ENOMEM)
			return -ENOMEM;
	} else if (m->policy_state < 0) {
		r.policy_bad = true;
	}
	if (m->pauses.n) {
		if (!(r.pauses = calloc(m->pauses.n, sizeof(*r.pauses))))
			return -ENOMEM;
		for (size_t i = 0; i < m->pauses.n; i++, r.n_pauses++)
			if (pause_snap_fill(m, &m->pauses.kvs[i], &r.pauses[i]) < 0) {
				r.n_pauses++;	/* the half-filled one is released too */
				return -ENOMEM;
			}
	}
	undo = NULL;
	*ret = r;
	return 0;
}

static const struct pause_snap *pause_find(const struct rollout_snap *r, const char *key)
{
	for (size_t i = 0; i < r->n_pauses; i++)
		if (strcmp(r->pauses[i].key, key) == 0)
			return &r->pauses[i];
	return NULL;
}

static int pause_event(enum fleet_event_kind kind, const struct pause_snap *p, int64_t time,
		       int64_t revision, struct fleet_event_list *out)
{
	_cleanup_(buf_releasep) struct buf d = BUF_INIT;
	bool host = p->scope && strcmp(p->scope, "host") == 0;

	if (!p->scope)
		return 0;
	if (buf_adds(&d, p->scope) < 0 || (p->name && buf_printf(&d, " %s", p->name) < 0) ||
	    (kind == FLEET_EVENT_PAUSED && p->reason && buf_printf(&d, ": %s", p->reason) < 0))
		return -ENOMEM;
	return emit(out, revision, &(struct event_spec){
		.kind = kind, .host = host ? p->name : NULL, .scope = p->scope, .time = time,
		.detail = buf_str(&d) });
}

static int rollout_diff(const struct rollout_snap *b, const struct rollout_snap *a,
			int64_t revision, struct fleet_event_list *out)
{
	bool halted = a->halted_mod && a->halted_mod != b->halted_mod;
	int r;

	if (!streq_ptr(b->policy, a->policy) || b->policy_bad != a->policy_bad) {
		const char *d = a->policy ? a->policy :
				a->policy_bad ? "not a valid policy: taken as max_parallel 1" :
				"removed: no limit";
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_POLICY, .detail = d })) < 0)
			return r;
	}
	/* the halt first: a revert is its consequence, in the same txn */
	if (halted) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		const struct rollout_record *h = &a->halt;
		if (buf_adds(&d, h->reason && *h->reason ? h->reason : "no reason recorded") < 0 ||
		    (h->host && buf_printf(&d, " (by %s)", h->host) < 0))
			return -ENOMEM;
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_HALTED, .version = h->version, .time = h->time,
				.detail = buf_str(&d) })) < 0)
			return r;
	} else if (b->halted_mod && !a->halted_mod) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		if (buf_printf(&d, "halt of %s cleared", b->halt.version ? b->halt.version : "?") < 0)
			return -ENOMEM;
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_RESUMED, .scope = "rollout",
				.version = b->halt.version, .detail = buf_str(&d) })) < 0)
			return r;
	}
	if (a->trigger != b->trigger || a->known != b->known) {
		struct event_spec sp = { .kind = FLEET_EVENT_TRIGGER, .version = a->desired,
					 .from = b->desired };
		if (halted && a->halt.reverted_to && streq_ptr(a->halt.reverted_to, a->desired)) {
			sp.kind = FLEET_EVENT_REVERTED;
			sp.from = a->halt.version;
			sp.detail = "the halt set the previous version back";
		} else if (!a->known) {
			sp.detail = "current_version holds no valid version: no host runs it";
		} else if (!a->desired) {
			sp.detail = "current_version removed";
		} else if (b->desired && b->previous && streq_ptr(a->desired, b->previous) &&
			   !streq_ptr(a->desired, b->desired)) {
			sp.kind = FLEET_EVENT_ROLLBACK;
		}
		if ((r = emit(out, revision, &sp)) < 0)
			return r;
	}
	if (a->promoted_mod && a->promoted_mod != b->promoted_mod) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		if (a->promo.reason && buf_printf(&d, "by %s", a->promo.reason) < 0)
			return -ENOMEM;
		if ((r = emit(out, revision, &(struct event_spec){
				.kind = FLEET_EVENT_PROMOTED, .version = a->promo.version,
				.time = a->promo.time, .detail = d.len ? buf_str(&d) : NULL })) < 0)
			return r;
	}
	for (size_t i = 0; i < b->n_pauses; i++)
		if (!pause_find(a, b->pauses[i].key) &&
		    (r = pause_event(FLEET_EVENT_RESUMED, &b->pauses[i], 0, revision, out)) < 0)
			return r;
	for (size_t i = 0; i < a->n_pauses; i++) {
		const struct pause_snap *was = pause_find(b, a->pauses[i].key);
		if ((!was || was->mod != a->pauses[i].mod) &&
		    (r = pause_event(FLEET_EVENT_PAUSED, &a->pauses[i], a->pauses[i].time, revision,
				     out)) < 0)
			return r;
	}
	return 0;
}

/* --- applying a revision ---------------------------------------------------------------- */

/* The host a key is about, when it is a host's key the comparison follows
 * (its statuses, alive, running version, group, failure and canary
 * records); NULL (and *ret_error 0) otherwise. */
static char *host_of_key(const struct fleet_events_state *s, const struct etcd_kv *kv,
			 int *ret_error)
{
	const char *dirs[] = { s->k_status_dir, s->k_running_dir, s->k_alive_dir, s->k_groups_dir,
			       s->model.k_failed_dir, s->model.k_canary_dir };
	static const int parts_below[] = { 3, 1, 1, 2, 1, 1 };

	*ret_error = 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		_cleanup_(freep) char *copy = NULL;
		char *parts[3];
		int r = split(kv, dirs[i], parts_below[i], parts, &copy);
		if (r == -EINVAL)
			continue;
		if (r < 0) {
			*ret_error = r;
			return NULL;
		}
		char *host = strdup(parts[parts_below[i] - 1]);
		if (!host)
			*ret_error = -ENOMEM;
		return host;
	}
	return NULL;
}

/* Whether a key is one of the rollout's (anything but a host's and the catalog). */
static bool rollout_key(const struct fleet_events_state *s, const struct etcd_kv *kv)
{
	const struct fleet_model *m = &s->model;
	const char *dirs[] = { m->k_version, s->k_previous, m->k_pause_dir, m->k_rollout_dir };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		size_t n = strlen(dirs[i]);
		if (kv->key_len >= n && memcmp(kv->key, dirs[i], n) == 0)
			return true;
	}
	return false;
}

static int apply_kvs(struct fleet_events_state *s, const struct etcd_event *events, size_t n)
{
	unsigned changed = 0;
	int r;

	for (size_t i = 0; i < n; i++) {
		bool deleted = events[i].type == ETCD_EVENT_DELETE;
		if ((r = hosts_apply(s, &events[i].kv, deleted)) < 0 ||
		    (r = previous_apply(s, &events[i].kv, deleted)) < 0)
			return r;
	}
	if ((r = fleet_model_apply(&s->model, events, n, &changed)) < 0)
		return r;
	/* the holders the model let go: nobody takes them here */
	struct rollout_holder *released = NULL;
	size_t k = fleet_model_take_released(&s->model, &released);
	rollout_holders_free(released, k);
	free(released);
	return 0;
}

/* One revision's events: applied, and (out not NULL) what they changed. */
static int apply_revision(struct fleet_events_state *s, const struct etcd_event *events,
			  size_t n, int64_t revision, struct fleet_event_list *out)
{
	_cleanup_(strv_freep) char **hosts = NULL;
	struct host_snap *before = NULL;
	struct rollout_snap rb = { 0 }, ra = { 0 };
	bool rollout = false;
	size_t n_hosts = 0;
	int r = 0;

	if (!out)
		return apply_kvs(s, events, n);
	for (size_t i = 0; i < n; i++) {
		char *h = host_of_key(s, &events[i].kv, &r);
		if (r < 0)
			return r;
		if (h && (r = strv_consume(&hosts, &n_hosts, h)) < 0)
			return r;
		if (!h && rollout_key(s, &events[i].kv))
			rollout = true;
	}
	strv_sort_unique(hosts, &n_hosts);
	if (n_hosts && !(before = calloc(n_hosts, sizeof(*before))))
		return -ENOMEM;
	for (size_t i = 0; i < n_hosts && r >= 0; i++)
		r = host_snap_take(s, hosts[i], &before[i]);
	if (r >= 0 && rollout)
		r = rollout_snap_take(s, &rb);
	if (r >= 0)
		r = apply_kvs(s, events, n);
	if (r >= 0 && rollout && (r = rollout_snap_take(s, &ra)) >= 0)
		r = rollout_diff(&rb, &ra, revision, out);
	for (size_t i = 0; i < n_hosts && r >= 0; i++) {
		struct host_snap after;
		if ((r = host_snap_take(s, hosts[i], &after)) < 0)
			break;
		r = host_diff(hosts[i], &before[i], &after, revision, out);
		host_snap_release(&after);
	}
	for (size_t i = 0; i < n_hosts && before; i++)
		host_snap_release(&before[i]);
	free(before);
	rollout_snap_release(&rb);
	rollout_snap_release(&ra);
	return r;
}

int fleet_events_state_apply(struct fleet_events_state *s, const struct etcd_event *events,
			     size_t n, struct fleet_event_list *out)
{
	for (size_t i = 0; i < n;) {
		int64_t rev = events[i].kv.mod_revision;
		size_t j = i;
		while (j < n && events[j].kv.mod_revision == rev)
			j++;
		int r = apply_revision(s, events + i, j - i, rev, out);
		if (r < 0)
			return r;
		if (rev > s->revision)
			s->revision = rev;
		i = j;
	}
	return 0;
}

int fleet_events_state_diff(const struct fleet_events_state *before,
			    const struct fleet_events_state *after, int64_t revision,
			    struct fleet_event_list *out)
{
	struct rollout_snap rb = { 0 }, ra = { 0 };
	size_t i = 0, j = 0;
	int r;

	if ((r = rollout_snap_take(before, &rb)) >= 0 && (r = rollout_snap_take(after, &ra)) >= 0)
		r = rollout_diff(&rb, &ra, revision, out);
	rollout_snap_release(&rb);
	rollout_snap_release(&ra);
	if (r < 0)
		return r;
	/* every host of either, in name order; the records of hosts in
	 * neither table (a failure record alone) are left out */
	while (r >= 0 && (i < before->n_hosts || j < after->n_hosts)) {
		const char *name;
		int c = i == before->n_hosts ? 1 : j == after->n_hosts ? -1 :
			strcmp(before->hosts[i].name, after->hosts[j].name);
		name = c <= 0 ? before->hosts[i].name : after->hosts[j].name;
		struct host_snap b, a;
		if ((r = host_snap_take(before, name, &b)) < 0)
			break;
		if ((r = host_snap_take(after, name, &a)) < 0) {
			host_snap_release(&b);
			break;
		}
		r = host_diff(name, &b, &a, revision, out);
		host_snap_release(&b);
		host_snap_release(&a);
		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
	}
	return r;
}

int fleet_events_read(struct fleet *f, int64_t revision, struct fleet_events_state *s)
{
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
	int r;

	r = etcd_get_prefix(f->etcd, s->k_root, 0, revision, &kvs);
	if (r < 0)
		return r;
	/* the keys as puts, in one batch: the model and the table are built
	 * by the code that follows the watch */
	struct etcd_event *ev = calloc(kvs.n ? kvs.n : 1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (size_t i = 0; i < kvs.n; i++)
		ev[i] = (struct etcd_event){ .type = ETCD_EVENT_PUT, .kv = kvs.kvs[i] };
	r = apply_kvs(s, ev, kvs.n);
	free(ev);
	if (r < 0)
		return r;
	s->revision = s->model.revision = s->model.pause_revision = s->model.rollout_revision =
		kvs.revision;
	return 0;
}

/* --- the stream ------------------------------------------------------------------------- */

struct fleet_events {
	struct fleet *f;
	sd_event *event;
	struct fleet_events_state state;
	struct etcd_watch *watch;
	sd_event_source *retry;		/* the re-read after a compaction, again */
	unsigned failures;
	/* A --since whose revision was compacted: the state is not the fleet at
	 * its revision (there is nothing to compare with), and the re-read is at
	 * resync_at, the oldest revision etcd keeps (0: the newest). */
	bool no_base;
	int64_t resync_at;
	bool stopped;			/* fn said stop, or end ran */
	fleet_events_fn fn;
	fleet_events_end_fn end;
	void *userdata;
};

/* A stream silent this long is opened again (from its revision: nothing is
 * lost): etcd sends a progress notification every 10 minutes by default, so
 * only a dead connection stays silent longer; the daemon's default too. */
#define FLEET_EVENTS_IDLE_MS (15 * 60 * 1000)

static int stream_watch(struct fleet_events *fe);

static void stream_end(struct fleet_events *fe, int error)
{
	if (fe->stopped)
		return;
	fe->stopped = true;
	fe->watch = etcd_watch_stop(fe->watch);
	if (fe->end)
		fe->end(error, fe->userdata);
}

/* Hands a list to fn a revision at a time; 1 when fn said stop. */
static int deliver(struct fleet_events *fe, const struct fleet_event_list *l)
{
	for (size_t i = 0; i < l->n;) {
		size_t j = i;
		while (j < l->n && l->v[j].revision == l->v[i].revision)
			j++;
		if (fe->fn(l->v + i, j - i, fe->userdata) != 0) {
			fe->stopped = true;
			return 1;
		}
		i = j;
	}
	return 0;
}

static int on_events(const struct etcd_event *events, size_t n, int64_t revision,
		     void *userdata)
{
	struct fleet_events *fe = userdata;
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list out = { 0 };
	int r;

	if (fe->stopped)
		return 1;
	if (n == 0)
		return 0;
	if ((r = fleet_events_state_apply(&fe->state, events, n, &out)) < 0)
		return r;
	return deliver(fe, &out);
}

/* Reads the state again at the newest revision, says what changed since
 * the one the stream had, and watches on from there.  Without a base (a
 * compacted --since), reads at the oldest revision etcd keeps and says
 * nothing: the events after it follow from the watch. */
static int stream_resync(struct fleet_events *fe)
{
	_cleanup_(state_releasep) struct fleet_events_state fresh = { 0 };
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list out = { 0 };
	int r;

	if ((r = fleet_events_state_init(&fresh, fe->state.prefix)) < 0)
		return r;
	r = fleet_events_read(fe->f, fe->no_base ? fe->resync_at : 0, &fresh);
	if (r == -ESTALE && fe->no_base)
		fe->resync_at = 0;	/* compacted again meanwhile: the newest */
	if (r < 0)
		return r;
	if (!fe->no_base &&
	    (r = fleet_events_state_diff(&fe->state, &fresh, fresh.revision, &out)) < 0)
		return r;
	fe->no_base = false;
	fleet_events_state_release(&fe->state);
	fe->state = fresh;
	fresh = (struct fleet_events_state){ 0 };
	if (deliver(fe, &out))
		return 0;
	return stream_watch(fe);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

/* The re-read, from the loop (never from inside the watch's callback), after
 * delay_ms. */
static void stream_resync_later(struct fleet_events *fe, uint64_t delay_ms)
{
	uint64_t now = 0;
	int r;

	fe->retry = sd_event_source_disable_unref(fe->retry);
	(void)sd_event_now(fe->event, CLOCK_MONOTONIC, &now);
	r = sd_event_add_time(fe->event, &fe->retry, CLOCK_MONOTONIC, now + delay_ms * 1000, 0,
			      on_retry, fe);
	if (r < 0)
		stream_end(fe, r);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata)
{
	static const struct backoff b = { 500, 10000, 250 };
	struct fleet_events *fe = userdata;
	int r;

	fe->retry = sd_event_source_disable_unref(fe->retry);
	if (fe->stopped)
		return 0;
	r = stream_resync(fe);
	if (r >= 0 || fe->stopped) {
		fe->failures = 0;
		return 0;
	}
	/* etcd does not answer, or compacted again meanwhile: later */
	if (r != -ECONNREFUSED && r != -ESTALE) {
		stream_end(fe, r);
		return 0;
	}
	stream_resync_later(fe, backoff_delay(&b, ++fe->failures));
	return 0;
}

/* What a compaction cost: one event, before the re-read.  from: the
 * revision the stream wanted; keeps: the oldest etcd keeps (0: not said);
 * after: the events after keeps follow (no differences). */
static int say_compacted(struct fleet_events *fe, int64_t from, int64_t compact, bool after)
{
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list l = { 0 };
	_cleanup_(buf_releasep) struct buf d = BUF_INIT;
	int r;

	if (buf_printf(&d, "events from revision %lld: compacted", (long long)from) < 0 ||
	    (compact > 0 && buf_printf(&d, ", etcd keeps %lld on", (long long)compact) < 0) ||
	    (after && buf_printf(&d, "; the events after %lld follow", (long long)compact) < 0) ||
	    (!after && buf_adds(&d, "; what changed meanwhile comes as differences at the "
			       "current revision") < 0))
		return -ENOMEM;
	if ((r = emit(&l, compact > 0 ? compact : from, &(struct event_spec){
			.kind = FLEET_EVENT_COMPACTED, .detail = buf_str(&d) })) < 0)
		return r;
	return deliver(fe, &l);
}

static void on_watch_error(struct etcd_watch *w, int error, int64_t compact, void *userdata)
{
	struct fleet_events *fe = userdata;
	int r;

	/* freed once this returns */
	fe->watch = etcd_watch_stop(fe->watch);
	if (fe->stopped)
		return;
	if (error != -ESTALE) {
		stream_end(fe, error);
		return;
	}
	if (fe->no_base && compact <= 0)
		fe->no_base = false;	/* where to start is not said: the newest, as a resync */
	fe->resync_at = fe->no_base ? compact : 0;
	r = say_compacted(fe, fe->state.revision + 1, compact, fe->no_base);
	if (r < 0)
		stream_end(fe, r);
	else if (r == 0)
		stream_resync_later(fe, 0);
}

static int stream_watch(struct fleet_events *fe)
{
	struct etcd_watch_range range = { .key = fe->state.k_root, .prefix = true, .start_revision = fe->state.revision + 1 };
	return etcd_watch_start_ranges(fe->f->etcd, &range, 1, FLEET_EVENTS_IDLE_MS, on_events,
				       on_watch_error, fe, &fe->watch);
}

int fleet_events_start(struct fleet *f, sd_event *event, int64_t since, fleet_events_fn fn,
		       fleet_events_end_fn end, void *userdata, struct fleet_events **ret)
{
	_cleanup_(fleet_events_stopp) struct fleet_events *fe = calloc(1, sizeof(*fe));
	int r;

	if (!fe)
		return -ENOMEM;
	fe->f = f;
	fe->event = sd_event_ref(event);
	fe->fn = fn;
	fe->end = end;
	fe->userdata = userdata;
	if ((r = fleet_events_state_init(&fe->state, fleet_prefix(f))) < 0 ||
	    (r = etcd_client_attach_event(f->etcd, event)) < 0)
		return r;
	if (since > 1) {
		r = fleet_events_read(f, since - 1, &fe->state);
		if (r == -ESTALE) {
			/* The state before since is gone: the earliest etcd keeps.
			 * When that is since itself, its own events are lost; else
			 * the watch from since says where etcd keeps on from, and
			 * the state is read there (on_watch_error). */
			fleet_events_state_release(&fe->state);
			if ((r = fleet_events_state_init(&fe->state, fleet_prefix(f))) < 0)
				return r;
			r = fleet_events_read(f, since, &fe->state);
			if (r == 0) {
				if ((r = say_compacted(fe, since, since, true)) < 0)
					return r;
			} else if (r == -ESTALE) {
				fleet_events_state_release(&fe->state);
				if ((r = fleet_events_state_init(&fe->state, fleet_prefix(f))) < 0)
					return r;
				fe->no_base = true;
				fe->state.revision = since - 1;
			}
		}
	} else if (since == 1) {
		r = 0;		/* nothing exists before revision 1 */
	} else {
		r = fleet_events_read(f, 0, &fe->state);
	}
	if (r < 0)
		return r;
	if (!fe->stopped && (r = stream_watch(fe)) < 0)
		return r;
	*ret = TAKE_PTR(fe);
	return 0;
}

int64_t fleet_events_revision(const struct fleet_events *fe)
{
	return fe->state.revision;
}

struct fleet_events *fleet_events_stop(struct fleet_events *fe)
{
	if (!fe)
		return NULL;
	fe->stopped = true;
	etcd_watch_stop(fe->watch);
	sd_event_source_disable_unref(fe->retry);
	fleet_events_state_release(&fe->state);
	sd_event_unref(fe->event);
	free(fe);
	return NULL;
}
