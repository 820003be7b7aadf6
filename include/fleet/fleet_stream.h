/*
 * fleet_stream.h — the daemon's connection and its watch streams: a client
 * attached to the daemon's sd-event loop (where its streams and asynchronous
 * calls run), and streams over several ranges of the fleet, such as the
 * ranges of the node's model (fleet_model_ranges()).  The node reaches
 * etcd's client and watch calls through here, as it reaches its lease through
 * fleet_lease.h and every key through fleet.h.
 */
#ifndef ORCHESTRATE_FLEET_STREAM_H
#define ORCHESTRATE_FLEET_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "fleet/fleet.h"

/*
 * The daemon's fleet (fleet_open()'s, for a loop): *f gets a new client
 * attached to event, and prefix (NULL: none; kept, not copied).  -EINVAL when
 * there is no endpoint or one is not valid, or what attaching it returned;
 * nothing is left behind on failure.
 */
int fleet_connect(struct fleet *f, const struct etcd_options *opts, const char *prefix,
		  sd_event *event);
/* Frees the client of fleet_connect() and empties *f; stop its streams and
 * cancel its calls first. */
void fleet_disconnect(struct fleet *f);
/* How many times the fleet's client reconnected its streams (for metrics). */
uint64_t fleet_client_reconnects(const struct fleet *f);
/* How many watch events its streams delivered (for metrics). */
uint64_t fleet_client_events(const struct fleet *f);

/*
 * One stream over n_ranges ranges, on the fleet's client (fleet_connect()),
 * each range from its own revision: see etcd_watch_start_ranges() for how it
 * resumes, when it is reopened (silent for idle_ms) and when on_error runs.
 * *ret is the stream until fleet_stream_stop().
 */
typedef etcd_watch_fn fleet_stream_fn;
typedef etcd_watch_error_fn fleet_stream_error_fn;
int fleet_stream_start(struct fleet *f, const struct etcd_watch_range *ranges, size_t n_ranges,
		       uint64_t idle_ms, fleet_stream_fn on_events, fleet_stream_error_fn on_error,
		       void *userdata, struct etcd_watch **ret);
/* Stops the stream (NULL: nothing); on_error never runs after.  Returns NULL. */
struct etcd_watch *fleet_stream_stop(struct etcd_watch *w);
/* The revision range i of the stream has been delivered up to. */
int64_t fleet_stream_range_revision(const struct etcd_watch *w, size_t i);
/* Removes a range added to a stream (fleet_queue_follow(), fleet_stage_follow(); see
 * etcd_watch_add() for when its callbacks run).  NULL: nothing.  Returns
 * NULL. */
struct etcd_watch_part *fleet_stream_part_remove(struct etcd_watch_part *p);

/*
 * Follows what can end a host's wait for an earlier group of a staged
 * rollout: a host reaching a version (running_version/) and a host dying or
 * joining (alive/), from revision from, as two ranges added to the node's
 * stream (fleet_stream_start()): the watcher of a stage opens no stream of
 * its own.  The policy itself comes on the node's own ranges.  ret[0] and
 * ret[1] until fleet_stream_part_remove(); on failure neither is added.
 */
int fleet_stage_follow(struct fleet *f, struct etcd_watch *stream, int64_t from,
		       fleet_stream_fn on_events, fleet_stream_error_fn on_error, void *userdata,
		       struct etcd_watch_part *ret[2]);

#endif
