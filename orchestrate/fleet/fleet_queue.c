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
	*l = (struct queue_look){ 0 };
}

static void look_on_read(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			 void *userdata)
{
	struct queue_look *l = userdata;
	int r = error;

	if (r >= 0 && n != (l->limit ? 2u : 3u))
		r = -EPROTO;
	if (r >= 0) {
		l->revision = revision;
		if (lists[1].n == 1) {
			l->created = lists[1].kvs[0].create_revision;
			l->moved = l->created != l->asked_created;
		}
		if (l->limit) {
			l->ahead = lists[0].n;
			l->exact = lists[0].n < l->limit;
			l->counted_at = revision;
		} else if (lists[2].count < 0 || lists[2].count > INT_MAX) {
			r = -EPROTO;
		} else {
			l->ahead = (size_t)lists[2].count;
			l->exact = true;
			l->counted_at = lists[2].revision;
		}
		if (r >= 0 && lists[0].n > 0) {
			const struct etcd_kv *next = &lists[0].kvs[0];	/* the newest first */
			l->next = holder_host(next);
			l->next_created = next->create_revision;
			l->next_holds = holder_holds(next);
			if (!l->next)
				r = -EPROTO;	/* not a holder's key: nothing to follow */
		}
	}
	l->fn(r < 0 ? r : 0, l, l->userdata);
}

int fleet_queue_look_start(struct fleet *f, const char *host, int64_t created, size_t limit,
			   long patience_ms, struct queue_look *l, fleet_queue_look_fn fn,
			   void *userdata, struct etcd_call **ret)
{
	_cleanup_(freep) char *dir = key_rollout_holders_dir(fleet_prefix(f));
	_cleanup_(freep) char *own = schema_name_valid(host)
					     ? key_rollout_holder(fleet_prefix(f), host) : NULL;

	if (created <= 1 || limit > LONG_MAX || !schema_name_valid(host))
		return -EINVAL;
	if (!dir || !own)
		return -ENOMEM;
	/* Serializable: from what the member applied, with no wait for its
	 * apply queue (a trigger's burst of queue writes fills it).  A look is
	 * exact at its own revision whatever its age, since the stream that
	 * follows resumes from there; one older than the node's own key is
	 * asked again by the caller (queue_look.revision).  etcd 3.4 answers
	 * the newest-first range by reading and sorting the whole queue, so
	 * it asks for one key when it can: the count that says how many, at
	 * the revision before the node's key, comes from etcd's index. */
	const struct etcd_range ranges[] = {
		{ .key = dir, .prefix = true, .flags = ETCD_NEWEST_FIRST | ETCD_SERIALIZABLE,
		  .limit = limit ? (long)limit : 1, .max_create_revision = created - 1 },
		{ .key = own, .flags = ETCD_SERIALIZABLE },
		{ .key = dir, .prefix = true, .flags = ETCD_COUNT_ONLY | ETCD_SERIALIZABLE,
		  .revision = created - 1 },
	};
	queue_look_release(l);
	*l = (struct queue_look){ .asked_created = created, .limit = limit, .fn = fn,
				  .userdata = userdata };
	return etcd_snapshot_start(f->etcd, ranges, limit ? 2 : 3, 0, patience_ms, look_on_read,
				   l, ret);
}

int fleet_queue_stream_start(struct fleet *f, const char *next, int64_t from, uint64_t idle_ms,
			     fleet_stream_fn on_events, fleet_stream_error_fn on_error,
			     void *userdata, struct etcd_watch **ret)
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
	return etcd_watch_start_ranges(f->etcd, &range, 1, idle_ms, on_events, on_error, userdata,
				       ret);
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
