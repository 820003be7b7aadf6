/*
 * fleet_lease.h — leases: a node's, which keeps its alive key, its catalog
 * entries, its running version and its rollout holder in etcd while it lives,
 * and the ones a command takes for keys it puts on a host's behalf
 * (update_own_info, publish_service --ttl).  The node reaches etcd's lease
 * calls through here, as it reaches every key through fleet.h.
 */
#ifndef ORCHESTRATE_FLEET_LEASE_H
#define ORCHESTRATE_FLEET_LEASE_H

#include <stdint.h>

#include "fleet/fleet.h"

/* Grants a lease of ttl seconds (> 0); *ret_id is its id. */
int fleet_lease_grant(struct fleet *f, int64_t ttl, int64_t *ret_id);
/* Revokes the lease: every key under it is deleted in one revision. */
int fleet_lease_revoke(struct fleet *f, int64_t id);

/*
 * One keepalive, asynchronous (the fleet's client attached to an event loop):
 * fn gets 0 and the TTL etcd left the lease, 0 when it is gone, or an error.
 * patience_ms bounds the whole call (see etcd_lease_keepalive_start()).
 * *ret is the call in flight, for fleet_call_cancel(), until fn runs.
 */
typedef void (*fleet_lease_fn)(int error, int64_t ttl, void *userdata);
int fleet_lease_keepalive_start(struct fleet *f, int64_t id, long patience_ms,
				fleet_lease_fn fn, void *userdata, struct etcd_call **ret);
/* A grant, asynchronous: fn gets 0 and the new lease's id, or an error.
 * id > 0 asks for that id, so that the grant can be sent again after one
 * that went unanswered without leaving a second lease (etcd_lease_grant_start). */
int fleet_lease_grant_start(struct fleet *f, int64_t ttl, int64_t id, long patience_ms,
			    fleet_lease_fn fn, void *userdata, struct etcd_call **ret);
/* A revoke, asynchronous (the daemon's, at its stop): fn gets 0 (a lease
 * that expired already counts as revoked) or an error. */
int fleet_lease_revoke_start(struct fleet *f, int64_t id, long patience_ms, fleet_lease_fn fn,
			     void *userdata, struct etcd_call **ret);
/* Whether error, a write's that just ended, is etcd refusing a lease it no
 * longer knows: the write carried a lease that is gone. */
bool fleet_lease_refused(const struct fleet *f, int error);
/* How many times etcd answered this client as a member over a second behind
 * applying writes, refusing renewals so (etcd_client_backlog_answers()):
 * a lease lost after such an answer was lost to a busy etcd, not to one gone. */
uint64_t fleet_lease_backlog_answers(const struct fleet *f);
/* Stops a call that has not called back yet (NULL: nothing); fn never runs. */
void fleet_call_cancel(struct etcd_call *call);

#endif
