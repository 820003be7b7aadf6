/*
 * fleet_queue.c — the slot queue, followed from a node (fleet_queue.h): a
 * look at the keys just ahead of the node's, and a stream over the key just
 * ahead or over the queue's releases.
 *
 * Fleet-layer code: it knows the key layout and neither logs nor exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "fleet_internal.h"
#include "fleet/fleet_queue.h"
#include "fleet/schema.h"

/* The host of a holder key: what follows its last '/', when a valid name. */
static char *holder_host(const struct etcd_kv *kv)
{
	const char *slash = kv->key ? memrchr(kv->key, '/', kv->key_len) : NULL;
	if (!slash)
		return NULL;
	size_t n = kv->key_len - (size_t)(slash + 1 - kv->key);
	char *host = strndup(slash + 1, n);
	if (host && (strlen(host) != n || !schema_name_valid(host))) {
		free(host);
		return NULL;
	}
	return host;
}

void queue_look_release(struct queue_look *l)
{
	free(l->next);
	free(l->host);
	*l = (struct queue_look){ 0 };
}

static void look_finish(struct queue_look *l, int r)
{
	l->fn(r < 0 ? r : 0, l, l->userdata);
}

/* The node's own key, as read with the rest of a look at revision. */
static void look_own(struct queue_look *l, const struct etcd_kv_list *own, int64_t revision)
{
	l->revision = revision;
	l->created = own->n == 1 ? own->kvs[0].create_revision : 0;
	l->moved = l->created != 0 && l->created != l->asked_created;
}

/* How many keys were ahead when the node's key was created: a count at the
 * revision before it (lists[i].revision). */
static int look_count(struct queue_look *l, const struct etcd_kv_list *count)
{
	if (count->count < 0 || count->count > INT_MAX)
		return -EPROTO;
	l->ahead = (size_t)count->count;
	l->exact = true;
	l->counted_at = count->revision;
	return 0;
}

static int look_next(struct queue_look *l, const struct etcd_kv *next)
{
	free(l->next);
	l->next = holder_host(next);
	l->next_created = next->create_revision;
	l->next_holds = holder_holds(next);
	return l->next ? 0 : -EPROTO;	/* not a holder's key: nothing to follow */
}

/* The scan's answer: the key just ahead, newest first, and a count, or the
 * keys ahead up to the limit (the count's revision was compacted). */
static void look_on_scan(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			 void *userdata)
{
	struct queue_look *l = userdata;
	int r = error;

	if (r >= 0 && n != (l->limit ? 2u : 3u))
		r = -EPROTO;
	if (r >= 0) {
		look_own(l, &lists[1], revision);
		if (l->limit) {
			l->ahead = lists[0].n;
			l->exact = lists[0].n < l->limit;
			l->counted_at = revision;
		} else
			r = look_count(l, &lists[2]);
		if (r >= 0 && lists[0].n > 0)
			r = look_next(l, &lists[0].kvs[0]);	/* the newest first */
	}
	look_finish(l, r);
}

/*
 * The scan: the queue read newest first from the key just before the
 * node's.  etcd 3.4 answers it by reading and sorting the whole queue, so
 * it is what the look falls back on: the revision before the node's key
 * was compacted (a limit), or the tail did not name the key just ahead.
 */
static int look_scan(struct queue_look *l)
{
	_cleanup_(freep) char *dir = key_rollout_holders_dir(fleet_prefix(l->f));
	_cleanup_(freep) char *own = key_rollout_holder(fleet_prefix(l->f), l->host);
	if (!dir || !own)
		return -ENOMEM;
	const struct etcd_range ranges[] = {
		{ .key = dir, .prefix = true, .flags = ETCD_NEWEST_FIRST | ETCD_SERIALIZABLE,
		  .limit = l->limit ? (long)l->limit : 1,
		  .max_create_revision = l->asked_created - 1 },
		{ .key = own, .flags = ETCD_SERIALIZABLE },
		{ .key = dir, .prefix = true, .flags = ETCD_COUNT_ONLY | ETCD_SERIALIZABLE,
		  .revision = l->asked_created - 1 },
	};
	l->scanned = true;
	return etcd_snapshot_start(l->f->etcd, ranges, l->limit ? 2 : 3, 0, l->patience_ms,
				   look_on_scan, l, l->call);
}

static void look_scan_or_finish(struct queue_look *l)
{
	int r = look_scan(l);
	if (r < 0)
		look_finish(l, r);
}

/*
 * How far back the tail's history is followed past hosts gone from the
 * queue before the look scans instead: each step is a small request, a scan
 * one that grows with the queue.
 */
#define LOOK_WALK_MAX 8

static void look_on_named(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			  void *userdata);

/* The host a tail (as it was at some revision) names: its key's name, when
 * a host other than this one, and the tail's mod revision. */
static char *tail_named(const struct queue_look *l, const struct etcd_kv_list *tail,
			int64_t *ret_written)
{
	if (tail->n != 1 || !tail->kvs[0].value || tail->kvs[0].mod_revision <= 1)
		return NULL;
	_cleanup_(freep) char *named = strndup(tail->kvs[0].value, tail->kvs[0].value_len);
	if (!named || strlen(named) != tail->kvs[0].value_len || !schema_name_valid(named) ||
	    strcmp(named, l->host) == 0)
		return NULL;
	*ret_written = tail->kvs[0].mod_revision;
	return key_rollout_holder(fleet_prefix(l->f), named);
}

/*
 * Whether a key entered the queue unnamed by the tail.  A host whose role
 * may not write the tail, or that runs an orchestrate from before it,
 * creates its key without naming itself there: the host queueing next is
 * told the host before it, and would count itself one place too far
 * forward (one more run than max_parallel).  Each such key is a creation
 * in the window between the revision the tail named a host at and the
 * one the look stepped back from: the count of the queue at each revision
 * of the window, from etcd's index, rises there and nowhere else (a
 * revision creates or deletes at most one key of the queue: each txn writes
 * one host's key, each lease revoked holds one).  A window wider than this
 * is read by the scan instead, which costs no more then
 * (bench/queue-look-cost.py: a count is about a tenth of a scan).
 */
#define LOOK_WINDOW_MAX 8

/* Reads the key of the host a tail named (key, the tail written at
 * written) with the node's own, the tail before that host's (the next step
 * back, should that host be gone), and the queue's count at each revision
 * from written to the one the look stepped back from (l->window_end): the
 * window where no key may have entered unnamed; count: the last of them is
 * also the count before the node's key.  All in one request. */
static int look_ask_named(struct queue_look *l, const char *key, int64_t written, bool count)
{
	int64_t width = l->window_end - written;	/* counts: written..window_end-1 */
	if (width < 1 || width > LOOK_WINDOW_MAX + 1)
		return look_scan(l);	/* not a tail before the node's key, or far */
	if (!count && width == 1)
		width = 0;	/* no revision between: nothing to count */

	_cleanup_(freep) char *own = key_rollout_holder(fleet_prefix(l->f), l->host);
	_cleanup_(freep) char *tail = key_rollout_tail(fleet_prefix(l->f));
	_cleanup_(freep) char *dir = key_rollout_holders_dir(fleet_prefix(l->f));
	if (!own || !tail || !dir)
		return -ENOMEM;
	struct etcd_range ranges[3 + LOOK_WINDOW_MAX + 1] = {
		{ .key = key, .flags = ETCD_SERIALIZABLE },
		{ .key = own, .flags = ETCD_SERIALIZABLE },
		{ .key = tail, .flags = ETCD_SERIALIZABLE, .revision = written - 1 },
	};
	for (int64_t i = 0; i < width; i++)
		ranges[3 + i] = (struct etcd_range){
			.key = dir, .prefix = true, .flags = ETCD_COUNT_ONLY | ETCD_SERIALIZABLE,
			.revision = written + i };
	l->tail_written = written;
	l->window_counts = (size_t)width;
	l->window_count_ahead = count;
	return etcd_snapshot_start(l->f->etcd, ranges, 3 + (size_t)width, 0, l->patience_ms,
				   look_on_named, l, l->call);
}

/* True when the window's counts (lists, n of them, revision by revision)
 * rise anywhere: a key entered the queue there. */
static bool window_entered(const struct etcd_kv_list *lists, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (lists[i].count > lists[i - 1].count)
			return true;
	return false;
}

/* A step back along the tail to the host it named, or a scan. */
static void look_follow_tail(struct queue_look *l, const struct etcd_kv_list *tail)
{
	int64_t written = 0;
	_cleanup_(freep) char *key = l->walked < LOOK_WALK_MAX ? tail_named(l, tail, &written)
							       : NULL;
	int r;

	l->walked++;
	if (!key)
		r = look_scan(l);	/* no tail, not a host ahead, or far back */
	else {
		/* The host the tail named last is gone (its own creation is
		 * the window's end); the window before it is the next one. */
		if (l->tail_written > 0)
			l->window_end = l->tail_written;
		r = look_ask_named(l, key, written, false);
	}
	if (r < 0)
		look_finish(l, r);
}

/* The host the tail named: just ahead when its key is the one created with
 * that tail (the same txn, so at the tail's mod revision); when gone since,
 * or queued again, the host the tail named before it is next in line. */
static void look_on_named(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			  void *userdata)
{
	struct queue_look *l = userdata;
	int r;

	if (error == -ESTALE || error == -EACCES) {
		look_scan_or_finish(l);	/* the tail back then is compacted */
		return;
	}
	if (error < 0 || n != 3 + l->window_counts) {
		look_finish(l, error < 0 ? error : -EPROTO);
		return;
	}
	look_own(l, &lists[1], revision);
	if (l->window_count_ahead && (r = look_count(l, &lists[n - 1])) < 0) {
		look_finish(l, r);
		return;
	}
	if (l->created == 0 || l->moved || l->ahead == 0) {
		look_finish(l, 0);	/* the caller queues or looks again, or none ahead */
		return;
	}
	if (window_entered(&lists[3], l->window_counts)) {
		l->unnamed = true;	/* the key just ahead is not the tail's to say */
		look_scan_or_finish(l);
		return;
	}
	if (lists[0].n == 1 && lists[0].kvs[0].create_revision == l->tail_written) {
		look_finish(l, look_next(l, &lists[0].kvs[0]));
		return;
	}
	look_follow_tail(l, &lists[2]);
}

/* The first step: the node's own key, and, at the revision before it, the
 * tail and the count. */
static void look_on_tail(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			 void *userdata)
{
	struct queue_look *l = userdata;
	int r = error;

	if (r == -EACCES) {
		/* A role from before the tail: it may not read it. */
		look_scan_or_finish(l);
		return;
	}
	if (r >= 0 && n != 3)
		r = -EPROTO;
	if (r >= 0) {
		look_own(l, &lists[0], revision);
		r = look_count(l, &lists[2]);
	}
	if (r < 0 || l->created == 0 || l->moved || l->ahead == 0) {
		look_finish(l, r);	/* nobody ahead: nothing to follow */
		return;
	}
	look_follow_tail(l, &lists[1]);
}

int fleet_queue_look_start(struct fleet *f, const char *host, int64_t created, size_t limit,
			   const struct queue_tail *before, long patience_ms, struct queue_look *l,
			   fleet_queue_look_fn fn, void *userdata, struct etcd_call **ret)
{
	if (created <= 1 || limit > LONG_MAX || !schema_name_valid(host))
		return -EINVAL;
	queue_look_release(l);
	*l = (struct queue_look){ .asked_created = created, .limit = limit, .fn = fn,
				  .userdata = userdata, .f = f, .host = strdup(host),
				  .patience_ms = patience_ms, .call = ret, .window_end = created };
	if (!l->host)
		return -ENOMEM;
	if (limit)
		return look_scan(l);
	if (before && before->host && schema_name_valid(before->host) &&
	    strcmp(before->host, host) != 0 && before->written > 1 && before->written < created) {
		/* The queueing txn said who queued just before: one request. */
		_cleanup_(freep) char *key = key_rollout_holder(fleet_prefix(f), before->host);
		return key ? look_ask_named(l, key, before->written, true) : -ENOMEM;
	}

	/* Serializable: from what the member applied, with no wait for its
	 * apply queue (a trigger's burst of queue writes fills it).  A look is
	 * exact at its own revision whatever its age, since the stream that
	 * follows resumes from there; one older than the node's own key is
	 * asked again by the caller (queue_look.revision).  The count, at the
	 * revision before the node's key, and the tail then, which names the
	 * host that queued just before it, come from etcd's index and one
	 * key: no read of the queue. */
	_cleanup_(freep) char *dir = key_rollout_holders_dir(fleet_prefix(f));
	_cleanup_(freep) char *own = key_rollout_holder(fleet_prefix(f), host);
	_cleanup_(freep) char *tail = key_rollout_tail(fleet_prefix(f));
	if (!dir || !own || !tail)
		return -ENOMEM;
	const struct etcd_range ranges[] = {
		{ .key = own, .flags = ETCD_SERIALIZABLE },
		{ .key = tail, .flags = ETCD_SERIALIZABLE, .revision = created - 1 },
		{ .key = dir, .prefix = true, .flags = ETCD_COUNT_ONLY | ETCD_SERIALIZABLE,
		  .revision = created - 1 },
	};
	return etcd_snapshot_start(f->etcd, ranges, 3, 0, patience_ms, look_on_tail, l, ret);
}

int fleet_queue_tail_before(struct fleet *f, int64_t revision, struct queue_tail *ret)
{
	const struct etcd_kv *was = etcd_txn_replaced(f->etcd, revision);

	*ret = (struct queue_tail){ 0 };
	if (!was || !was->key || !was->value || was->mod_revision <= 1)
		return 0;	/* not known, or no tail before */
	if (!(ret->host = strndup(was->value, was->value_len)))
		return -ENOMEM;
	if (strlen(ret->host) != was->value_len || !schema_name_valid(ret->host)) {
		free(ret->host);
		ret->host = NULL;
		return 0;
	}
	ret->written = was->mod_revision;
	return 1;
}

int fleet_queue_follow(struct fleet *f, struct etcd_watch *stream, const char *next,
		       int64_t from, fleet_stream_fn on_events, fleet_stream_error_fn on_error,
		       void *userdata, struct etcd_watch_part **ret)
{
	_cleanup_(freep) char *key = next ? (schema_name_valid(next)
						     ? key_rollout_holder(fleet_prefix(f), next)
						     : NULL)
					  : key_rollout_holders_dir(fleet_prefix(f));
	if (!key)
		return next && !schema_name_valid(next) ? -EINVAL : -ENOMEM;
	struct etcd_watch_range range = { .key = key, .start_revision = from };
	if (!next) {
		range.prefix = true;
		range.flags = ETCD_WATCH_NO_PUT | ETCD_WATCH_PREV_KV;
	}
	return etcd_watch_add(stream, &range, on_events, on_error, userdata, ret);
}

int fleet_queue_mark(const struct etcd_event *ev, struct queue_place *ret)
{
	if (ev->type != ETCD_EVENT_PUT)
		return 0;
	return holder_place(&ev->kv, ret);
}

void queue_release_release(struct queue_release *r)
{
	free(r->host);
	free(r->version);
	*r = (struct queue_release){ 0 };
}

int fleet_queue_release(const struct etcd_event *ev, struct queue_release *ret)
{
	const struct etcd_kv *was = &ev->prev_kv;

	*ret = (struct queue_release){ 0 };
	if (ev->type != ETCD_EVENT_DELETE || !was->key)
		return 0;
	if (!(ret->host = holder_host(was)))
		return 0;	/* not a holder: nobody to account for */
	ret->revision = ev->kv.mod_revision;
	ret->created = was->create_revision;
	ret->held = holder_holds(was);
	_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(was);
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "version");
	if (cJSON_IsString(v) && schema_name_valid(v->valuestring) &&
	    !(ret->version = strdup(v->valuestring))) {
		queue_release_release(ret);
		return -ENOMEM;
	}
	return 1;
}
