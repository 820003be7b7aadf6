/*
 * fleet_stream.c — the daemon's client on its event loop and its watch
 * streams, through the fleet layer (fleet_stream.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "fleet_internal.h"
#include "fleet/fleet_stream.h"
#include "fleet/schema.h"

int fleet_connect(struct fleet *f, const struct etcd_options *opts, const char *prefix,
		  sd_event *event)
{
	struct etcd_client *c = NULL;
	int r;

	if ((r = etcd_client_new(opts, &c)) < 0)
		return r;
	if ((r = etcd_client_attach_event(c, event)) < 0) {
		etcd_client_free(c);
		return r;
	}
	/* The desired version: every host may read it. */
	_cleanup_(freep) char *key = key_current_version(prefix ? prefix : "");
	if (!key || (r = etcd_client_keep_token(c, key)) < 0) {
		etcd_client_free(c);
		return key ? r : -ENOMEM;
	}
	/* A daemon spreads the logins its fleet makes at once; a command's
	 * user waits for it (fleet_open). */
	etcd_client_spread_logins(c, opts->login_spread_ms);
	*f = (struct fleet){ .etcd = c, .prefix = prefix ? prefix : "" };
	return 0;
}

void fleet_disconnect(struct fleet *f)
{
	etcd_client_free(f->etcd);
	*f = (struct fleet){ 0 };
}

uint64_t fleet_client_reconnects(const struct fleet *f)
{
	return etcd_client_reconnects(f->etcd);
}

uint64_t fleet_client_events(const struct fleet *f)
{
	return etcd_client_events(f->etcd);
}

int fleet_stream_start(struct fleet *f, const struct etcd_watch_range *ranges, size_t n_ranges,
		       uint64_t idle_ms, fleet_stream_fn on_events, fleet_stream_error_fn on_error,
		       void *userdata, struct etcd_watch **ret)
{
	return etcd_watch_start_ranges(f->etcd, ranges, n_ranges, idle_ms, on_events, on_error,
				       userdata, ret);
}

struct etcd_watch *fleet_stream_stop(struct etcd_watch *w)
{
	return etcd_watch_stop(w);
}

int64_t fleet_stream_range_revision(const struct etcd_watch *w, size_t i)
{
	return etcd_watch_range_revision(w, i);
}

struct etcd_watch_part *fleet_stream_part_remove(struct etcd_watch_part *p)
{
	return etcd_watch_remove(p);
}

int fleet_stage_follow(struct fleet *f, struct etcd_watch *stream, int64_t from,
		       fleet_stream_fn on_events, fleet_stream_error_fn on_error, void *userdata,
		       struct etcd_watch_part *ret[2])
{
	_cleanup_(freep) char *kr = key_running_version_dir(fleet_prefix(f));
	_cleanup_(freep) char *ka = key_alive_dir(fleet_prefix(f));
	int r;

	ret[0] = ret[1] = NULL;
	if (!kr || !ka)
		return -ENOMEM;
	struct etcd_watch_range running = { .key = kr, .prefix = true, .start_revision = from };
	struct etcd_watch_range alive = { .key = ka, .prefix = true, .start_revision = from };
	if ((r = etcd_watch_add(stream, &running, on_events, on_error, userdata, &ret[0])) < 0)
		return r;
	if ((r = etcd_watch_add(stream, &alive, on_events, on_error, userdata, &ret[1])) < 0)
		ret[0] = etcd_watch_remove(ret[0]);
	return r;
}
