/*
 * fleet_lease.c — a node's lease, through the fleet layer (fleet_lease.h).
 */
#include <errno.h>

#include "etcd/etcd.h"
#include "fleet/fleet_lease.h"

int fleet_lease_grant(struct fleet *f, int64_t ttl, int64_t *ret_id)
{
	if (ttl <= 0)
		return -EINVAL;
	return etcd_lease_grant(f->etcd, ttl, ret_id);
}

bool fleet_lease_refused(const struct fleet *f, int error)
{
	return etcd_lease_was_gone(f->etcd, error);
}

uint64_t fleet_lease_backlog_answers(const struct fleet *f)
{
	return f->etcd ? etcd_client_backlog_answers(f->etcd) : 0;
}

int fleet_lease_revoke(struct fleet *f, int64_t id)
{
	return etcd_lease_revoke(f->etcd, id);
}

int fleet_lease_revoke_start(struct fleet *f, int64_t id, long patience_ms, fleet_lease_fn fn,
			     void *userdata, struct etcd_call **ret)
{
	return etcd_lease_revoke_start(f->etcd, id, patience_ms, fn, userdata, ret);
}

int fleet_lease_keepalive_start(struct fleet *f, int64_t id, long patience_ms,
				fleet_lease_fn fn, void *userdata, struct etcd_call **ret)
{
	return etcd_lease_keepalive_start(f->etcd, id, patience_ms, fn, userdata, ret);
}

int fleet_lease_grant_start(struct fleet *f, int64_t ttl, int64_t id, long patience_ms,
			    fleet_lease_fn fn, void *userdata, struct etcd_call **ret)
{
	if (ttl <= 0 || id < 0)
		return -EINVAL;
	return etcd_lease_grant_start(f->etcd, ttl, id, patience_ms, fn, userdata, ret);
}

void fleet_call_cancel(struct etcd_call *call)
{
	etcd_call_cancel(call);
}
