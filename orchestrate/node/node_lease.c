/*
 * node_lease.c — the node's lease: granted at registration, kept alive at a
 * third of the TTL etcd granted, and granted again when etcd says it is gone,
 * after which every key the node holds under it is put again.
 *
 * The keepalive interval follows the granted TTL, not the configured one: a
 * reload that changes timing.lease_ttl takes effect at the next grant, and
 * until then the keys stay alive under the lease they have.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/log.h"
#include "node_internal.h"

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata);

static uint64_t node_keepalive_interval(struct node *n)
{
	uint64_t usec = sec_to_usec((double)n->lease_ttl / 3.0);
	return usec < USEC_PER_SEC / 2 ? USEC_PER_SEC / 2 : usec;
}

/*
 * Puts every leased key this node owns: alive, provisioned and group (one txn
 * in fleet_register), then one batch with its services, its running_version and
 * its rollout holder.  Used at start and when the lease was lost.
 */
int node_put_leased_keys(struct node *n)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(fleet_batch_freep) struct fleet_batch *b = NULL;
	int r;

	r = fleet_register(&n->fleet, n->host, cfg->group, n->local, (long)getpid(), n->lease);
	if (r < 0)
		return r;
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0)
		return r;
	if (n->published && (r = node_batch_services(n, b, n->services_healthy, true)) < 0)
		log_warnx("cannot publish this node's services: %s", strerror(-r));
	if (n->running_published &&
	    (r = fleet_batch_running_version(b, n->host, n->running_published, n->lease)) < 0)
		return r;
	if (n->holding &&
	    (r = fleet_batch_holder(b, n->host, n->run_version ? n->run_version : n->model.desired,
				    cfg->group, n->lease)) < 0)
		return r;
	r = fleet_batch_commit(b, NULL);
	if (r < 0) {
		node_services_forget_pending(n);
		return r;
	}
	node_services_committed(n);
	return 0;
}

int node_register(struct node *n)
{
	long ttl = n->once ? n->opt.config->once_ttl : n->opt.config->lease_ttl;
	int64_t lease;
	int r;

	r = etcd_lease_grant(n->etcd, ttl, &lease);
	if (r < 0)
		return r;
	n->lease = lease;
	n->lease_ttl = ttl;
	r = node_put_leased_keys(n);
	if (r < 0)
		return r;
	n->registered = true;
	log_info("registered as '%s' with lease %llx (ttl %ld s)", n->host,
		 (unsigned long long)lease, ttl);
	if (!n->once)
		return node_timer_arm(n, &n->keepalive, node_keepalive_interval(n),
				      node_on_keepalive);
	return 0;
}

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	uint64_t next;
	int64_t ttl = 0;
	int r;

	r = etcd_lease_keepalive(n->etcd, n->lease, &ttl);
	if (r >= 0 && ttl > 0)
		n->lease_ttl = (long)ttl;
	next = node_keepalive_interval(n);
	if (r < 0) {
		/* Try again sooner: two more misses still fit in the TTL.
		 * Jittered, so that nodes that missed together (a slow etcd)
		 * do not all come back in the same instant. */
		log_warnx("lease keepalive failed: %s", node_etcd_error(n));
		next = next / 3 < USEC_PER_SEC ? next / 3 : USEC_PER_SEC;
		next = random_between(USEC_PER_SEC / 4, next > USEC_PER_SEC / 4 ? next : USEC_PER_SEC / 4);
	} else if (ttl <= 0) {
		int64_t lease;
		long want = n->opt.config->lease_ttl;
		log_warnx("lease %llx is gone, granting a new one and registering again",
			  (unsigned long long)n->lease);
		r = etcd_lease_grant(n->etcd, want, &lease);
		if (r < 0) {
			log_warnx("cannot grant a lease: %s", node_etcd_error(n));
			next = random_between(USEC_PER_SEC / 2, 3 * USEC_PER_SEC / 2);
		} else {
			n->lease = lease;
			n->lease_ttl = want;
			n->keys_lost = true;
			n->lease_regrants++;
			next = node_keepalive_interval(n);
		}
	}
	if (n->keys_lost && r >= 0) {
		/* Until every leased key is back under the new lease, try again
		 * at each tick. */
		if (node_put_leased_keys(n) < 0) {
			log_warnx("cannot register again: %s", node_etcd_error(n));
			next = random_between(USEC_PER_SEC / 2, 3 * USEC_PER_SEC / 2);
		} else {
			n->keys_lost = false;
			log_info("registered again with lease %llx", (unsigned long long)n->lease);
		}
	}
	if (node_timer_arm(n, &n->keepalive, next, node_on_keepalive) < 0)
		log_warnx("cannot arm the keepalive timer: the lease will expire");
	return 0;
}
