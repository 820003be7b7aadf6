/*
 * node_lease.c — the node's lease: granted at registration, kept alive at a
 * third of the TTL etcd granted, and granted again when etcd says it is gone,
 * after which every key the node holds under it is put again.
 *
 * A lease is lost only when etcd is really gone for its whole TTL.  The
 * keepalive is an asynchronous call (fleet_lease_keepalive_start) on its own
 * connection: it never waits behind the node's other requests, and the loop
 * serves everything else while it is out.  Its patience is the lease's own
 * time left, not the request timeout: when etcd is slower than the timeout (a
 * busy or recovering cluster) a keepalive that is abandoned and sent again
 * only adds to etcd's queue, and while none is answered the lease runs out;
 * one that waits is answered.  "Time left" is counted from when the last
 * answered keepalive was sent, since etcd may have renewed it any time after.
 * A failure that comes early (a refused connection, a 503) is retried with
 * backoff inside the TTL, so that the nodes that missed together do not come
 * back together.
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
#include "base/clock.h"
#include "base/log.h"
#include "config/config.h"
#include "fleet/fleet_lease.h"
#include "node_internal.h"

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata);

/*
 * A lease lost to a busy etcd asks for one twice as long.  etcd 3.4 renews
 * no lease while it is more than a second behind applying what it
 * committed, and refuses each renewal so ("waiting for the applied index
 * took too long"); a trigger's writes on an etcd short of CPU keep it that
 * far behind for longer than a 30 s lease has left, and the whole fleet
 * loses its leases together: every host's keys deleted (its catalog entries
 * with them, on every consumer), then a grant and all its keys again, the
 * load that keeps etcd behind (measured at 1,000 hosts on a tenth of a
 * core: 1.64 leases lost per host over two triggers at 30 s, 0.02 at 60 s;
 * README, "No splay on a slow etcd").  So when the lease went while etcd
 * was there and saying it was behind, the next lease asks for twice the
 * TTL, at most four times timing.lease_ttl, and is renewed half as often.
 * A lease lost while etcd was gone or silent (stopped, partitioned) is what
 * the TTL is for: it changes nothing.  The price is the one the log says: a
 * dead host is noticed that much later, until orchestrated restarts or a
 * reload changes timing.lease_ttl (node_lease_ttl_set).
 */
#define NODE_LEASE_DOUBLINGS_MAX 2

static long node_lease_ttl_asked(const struct node *n)
{
	return n->opt.config->lease_ttl << n->lease.doublings;
}

void node_lease_ttl_set(struct node *n)
{
	if (n->lease.doublings)
		log_info("reload: a new timing.lease_ttl, asked for as it is by the next lease");
	n->lease.doublings = 0;
}

/* etcd answered: what it said of its backlog so far is known. */
static void node_lease_answered(struct node *n)
{
	n->lease.backlog_seen = fleet_lease_backlog_answers(&n->fleet);
}

static uint64_t node_keepalive_interval(struct node *n)
{
	uint64_t usec = sec_to_usec((double)n->lease.ttl / 3.0);
	return usec < USEC_PER_SEC / 2 ? USEC_PER_SEC / 2 : usec;
}

/*
 * The first keepalive after a grant: at a random point of the interval's
 * last three quarters, not at its end.  A fleet that started together (a
 * site's power back, a package upgrade at the same minute) or lost its leases
 * together would otherwise keep them alive together for ever, since each
 * keepalive is due an interval after the last: 1,000 renewals in the same
 * second every TTL/3.  etcd renews a lease only once it has applied what it
 * committed, so when a trigger's writes keep its apply queue long past its
 * request timeout, an aligned fleet misses its renewals together and loses
 * every lease at once, which writes everything again.  Spread, the renewals
 * that fall in such a stretch are a few, and each has two more tries in its
 * TTL.  Costs one keepalive per grant.
 */
static uint64_t node_keepalive_first(struct node *n)
{
	uint64_t interval = node_keepalive_interval(n);
	return random_between(interval / 4, interval);
}

/*
 * The id a grant asks for: drawn once, then asked again by each retry of
 * the grant until one is answered.  A grant that went unanswered (etcd's
 * "request timed out": its apply queue was longer than its timeout) is
 * usually applied later; asked with etcd's own choice of id, the retry made
 * a second lease, and the first one, renewed by nobody, cost etcd its expiry
 * too.  Asked by id, the retry finds it granted.
 */
static int64_t node_lease_ask(struct node *n)
{
	if (n->lease.asking <= 0) {
		n->lease.asking = (int64_t)random_between(1, INT64_MAX);
		n->lease.asks = 0;
	}
	n->lease.asks++;
	return n->lease.asking;
}

/* A grant answered: the next grant draws a new id.  When it was asked more
 * than once, an earlier send may be what etcd granted, and renewed by
 * nobody since: the first keepalive comes now, not a random part of an
 * interval later. */
static uint64_t node_lease_granted(struct node *n)
{
	bool again = n->lease.asks > 1;

	n->lease.asking = 0;
	n->lease.asks = 0;
	return again ? 0 : node_keepalive_first(n);
}

/*
 * A renewal falls on a whole second of the wall clock: the one before it is
 * due (less than a second early, at no cost to the lease), on an exact timer.
 * What a renewal costs etcd is mostly being woken for it: 0.55 ms of etcd's CPU
 * for a renewal that comes alone on its stream, 0.14 ms each when a hundred
 * come together (bench/keepalive-cost.py, etcd 3.4).  A fleet's clocks agree to well under a
 * millisecond (NTP), so its renewals arrive in batches, one per second, each
 * node in its own second of the interval (node_keepalive_first draws it):
 * with a 10 s interval, a tenth of the fleet at each whole second, never all
 * of it.  sd-event's default accuracy would move each timer by up to 250 ms,
 * differently on each machine, and undo the batches.
 */
static uint64_t node_on_second(uint64_t delay)
{
	uint64_t now = clock_usec(CLOCK_REALTIME);
	uint64_t at = (now + delay) / USEC_PER_SEC * USEC_PER_SEC;
	return at > now ? at - now : delay;
}

static void node_renewal_arm(struct node *n, uint64_t delay)
{
	if (node_timer_arm_exact(n, &n->lease.keepalive, node_on_second(delay),
				 node_on_keepalive) < 0)
		log_warnx("cannot arm the keepalive timer: the lease will expire");
}

/* The leased keys of a node that registered before (alive first), after
 * it lost its lease: one batch, see below.  In b. */
static int node_batch_leased_keys(struct node *n, struct fleet_batch *b)
{
	const struct config *cfg = n->opt.config;
	int r;

	if (n->lease.registered &&
	    (r = fleet_batch_alive(b, n->host, n->run.local, (long)getpid(), n->lease.id)) < 0)
		return r;
	if (n->catalog.published && (r = node_batch_services(n, b, n->catalog.services_healthy, true)) < 0)
		log_warnx("cannot publish this node's services: %s", strerror(-r));
	if (n->run.running_published &&
	    (r = fleet_batch_running_version(b, n->host, n->run.running_published, n->lease.id)) < 0)
		return r;
	/* Its key is created again: named the tail too, or the host queueing
	 * next would take the one named before it for the key just ahead. */
	if (n->rollout.slot != SLOT_NONE &&
	    ((r = fleet_batch_holder(b, n->host, n->run.version ? n->run.version : n->sync.model.desired,
				     cfg->group, node_slot_held(n), NULL, n->lease.id)) < 0 ||
	     (r = node_queue_batch_tail(n, b)) < 0))
		return r;
	return 0;
}

/* The first registration ended: done is told.  A failed one leaves its
 * lease to expire (the next try grants its own) and stops renewing it. */
static void node_register_end(struct node *n, int r)
{
	node_write_fn done = n->lease.register_done;

	if (!done)
		return;		/* stopped meanwhile (node_keepalive_stop) */
	n->lease.register_done = NULL;
	n->lease.reregistering = false;
	if (r >= 0) {
		n->lease.registered = true;
		log_info("registered as '%s' with lease %llx (ttl %ld s)", n->host,
			 (unsigned long long)n->lease.id, n->lease.ttl);
	} else {
		node_timer_cancel(&n->lease.keepalive);
		fleet_call_cancel(n->lease.keepalive_call);
		n->lease.keepalive_call = NULL;
		n->lease.expired = false;
	}
	done(n, r < 0 ? r : 0);
}

/* Every leased key is in etcd: its services, its running_version, its
 * rollout holder and alive again. */
static void node_on_first_keys(struct node *n, int r)
{
	node_queue_tail_refused(n, r);	/* the retry goes without it */
	if (r >= 0)
		node_slot_key_rewritten(n, node_write_revision(n));
	node_register_end(n, r);
}

/* alive, the group and the provisioned status are in etcd: then every leased
 * key, in one write through the write queue (patient, settled). */
static void node_on_register_txn(int error, int64_t revision, void *userdata)
{
	struct node *n = userdata;
	struct fleet_batch *b = NULL;
	int r;

	n->lease.register_call = NULL;
	if (error < 0) {
		node_register_end(n, error);
		return;
	}
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 || (r = node_batch_leased_keys(n, b)) < 0) {
		fleet_batch_free(b);
		node_services_forget_pending(n);
		node_register_end(n, r);
		return;
	}
	r = node_write_begin(n, b, "the registration's keys", node_on_first_keys);
	if (r != 0)
		node_register_end(n, r < 0 ? r : 0);
}


static void node_on_first_grant(int error, int64_t lease, void *userdata)
{
	struct node *n = userdata;
	const struct config *cfg = n->opt.config;
	int r;

	n->lease.keepalive_call = NULL;
	if (error < 0) {
		node_register_end(n, error);
		return;
	}
	n->lease.id = lease;
	n->lease.ttl = n->once ? cfg->once_ttl : cfg->lease_ttl;
	n->lease.refreshed = n->lease.keepalive_sent;
	node_lease_answered(n);
	/* Kept alive from now on, while its keys are being put: a slow etcd
	 * may take longer than the TTL over them.  Its keys' write is in
	 * flight (reregistering): a renewal that finds the lease gone only
	 * marks it, and the write's failure starts the registration over. */
	n->lease.reregistering = true;
	uint64_t first = node_lease_granted(n);
	if (!n->once)
		node_renewal_arm(n, first);
	r = fleet_register_start(&n->fleet, n->host, cfg->group, n->run.local, (long)getpid(),
				 lease, node_etcd_patience(n), node_on_register_txn, n,
				 &n->lease.register_call);
	if (r < 0)
		node_register_end(n, r);
}

/*
 * The first registration, without blocking the loop: a lease; then one txn
 * with alive under it, the group and the provisioned status (those two are
 * not leased); then one batch with every leased key (its services, its
 * running_version, its rollout holder, alive again).  Each waits with a
 * write's patience rather than being given up at the request timeout and
 * sent again: a fleet started together must not multiply its first writes.
 */
int node_register_begin(struct node *n, node_write_fn done)
{
	long ttl = n->once ? n->opt.config->once_ttl : n->opt.config->lease_ttl;
	int r;

	if (n->lease.register_done)
		return 0;	/* in flight: its end tells the first caller */
	n->lease.keepalive_sent = node_now(n);
	r = fleet_lease_grant_start(&n->fleet, ttl, node_lease_ask(n), node_etcd_patience(n),
				    node_on_first_grant, n, &n->lease.keepalive_call);
	if (r < 0)
		return r;
	n->lease.register_done = done;
	return 0;
}

static void node_keepalive_arm(struct node *n, uint64_t delay)
{
	if (node_timer_arm(n, &n->lease.keepalive, delay, node_on_keepalive) < 0)
		log_warnx("cannot arm the keepalive timer: the lease will expire");
}

/*
 * After a keepalive that failed early, the next try comes a half to two
 * thirds of the lease's time left later (at least a second, at most an
 * interval): a few tries, most of them late.  The failure that matters is
 * etcd's own "waiting for the applied index took too long": etcd 3.4 renews a
 * lease only once it has applied everything it committed, and gives up after
 * a second.  While a trigger's writes keep its apply queue longer than that,
 * no renewal can succeed, and each try costs etcd the CPU its apply queue
 * needs (a refusal ends the keepalive stream: the next try opens another); a
 * thousand nodes retrying every second or two were most of the load that
 * kept the queue long until every lease ran out.  Tries that each leave a
 * third to a half of the time left give etcd that CPU, and the late tries
 * are the ones likely to find the queue drained (README, "Fewer tries", has
 * the runs that compare it with a third to a half).
 *
 * Past the lease's time, once an interval: etcd's revocation waits in the
 * same queue, and only its answer says the lease is gone.  A refused
 * connection (etcd restarting) is tried the same way: the lease cannot be
 * renewed sooner than etcd is back, and a member that comes back extends
 * its leases by a TTL, which a try every interval meets.  But a renewal
 * that etcd refused past the lease's time, for its backlog again, is one
 * that etcd answered, and its lessor holds the lease expired: no restart
 * will extend it, and the tries only tell the node when the revocation
 * went through.  Those come an interval apart, then two, four and at most
 * eight (NODE_LEASE_LATE_DOUBLINGS).  Held to a tenth of a core under
 * 1,000 whole-catalog hosts at a 20 s splay, etcd refused 43 to 54
 * renewals a second for five minutes, each a keepalive stream opened and
 * closed (about 0.6 ms of its CPU: a quarter of its share), while its apply
 * backlog grew from 300 entries to 5,000 and no txn of the fleet went
 * through (README, "A spiral of refused renewals").
 */
#define NODE_LEASE_LATE_DOUBLINGS 3

static uint64_t node_keepalive_retry(struct node *n)
{
	uint64_t now = node_now(n), ttl = (uint64_t)n->lease.ttl * USEC_PER_SEC;
	uint64_t expiry = n->lease.refreshed + ttl;
	uint64_t interval = node_keepalive_interval(n);
	bool refused_for_backlog = fleet_lease_backlog_answers(&n->fleet) > n->lease.backlog_sent;

	unsigned late = 0;

	n->lease.keepalive_failures++;
	if (expiry <= now && refused_for_backlog)
		late = n->lease.late_refusals++;	/* see above */
	else
		n->lease.late_refusals = 0;
	if (late > NODE_LEASE_LATE_DOUBLINGS)
		late = NODE_LEASE_LATE_DOUBLINGS;
	return backoff_before(expiry > now ? expiry - now : 0, USEC_PER_SEC, interval << late);
}

/* After a failed grant or registration the lease is gone and no deadline is
 * left to meet: the node backs off as after any failed write.  A fleet whose
 * leases went together (an etcd that stalled past the TTL) must not come back
 * at a write every 2 s per node: that is what keeps a busy etcd busy. */
static uint64_t node_register_retry(struct node *n)
{
	return node_paced(n, backoff_delay(&node_write_backoff, ++n->lease.keepalive_failures));
}

/* The leased keys' txn ended (node_write.c). */
static void node_reregistered(struct node *n, int r)
{
	n->lease.reregistering = false;
	node_queue_tail_refused(n, r);	/* the retry goes without it */
	if (r < 0) {
		/* When etcd's queue outlasted the new lease too, etcd says it
		 * is not found (NotFound, -EINVAL): the next try needs a lease
		 * of its own, or it would put under the dead one forever. */
		log_warnx("cannot register again: %s", node_etcd_error(n));
		if (r == -EINVAL)
			n->lease.expired = true;
		node_keepalive_arm(n, node_register_retry(n));
		return;
	}
	n->lease.keys_lost = false;
	n->lease.keepalive_failures = 0;
	log_info("registered again with lease %llx", (unsigned long long)n->lease.id);
	node_slot_key_rewritten(n, node_write_revision(n));
	node_renewal_arm(n, node_keepalive_interval(n));
}

/* Every leased key again under the new lease: one write, in turn. */
static void node_put_leased_keys_again(struct node *n)
{
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 || (r = node_batch_leased_keys(n, b)) < 0) {
		fleet_batch_free(b);
		node_services_forget_pending(n);
		node_reregistered(n, r);
		return;
	}
	n->lease.reregistering = true;
	if ((r = node_write_begin(n, b, "the leased keys", node_reregistered)) < 0)
		node_reregistered(n, r);
}

static void node_on_grant(int error, int64_t lease, void *userdata)
{
	struct node *n = userdata;

	n->lease.keepalive_call = NULL;
	node_pace_answered(n, error, n->lease.keepalive_sent);
	if (error < 0) {
		log_warnx("cannot grant a lease: %s", node_etcd_error(n));
		node_keepalive_arm(n, node_register_retry(n));
		return;
	}
	n->lease.gone = false;
	n->lease.id = lease;
	n->lease.ttl = node_lease_ttl_asked(n);
	n->lease.late_refusals = 0;
	n->lease.refreshed = n->lease.keepalive_sent;
	node_lease_answered(n);
	n->lease.keys_lost = true;
	n->lease.expired = false;
	n->lease.regrants++;
	/* Nothing else may write the file soon: when etcd's delete of the old
	 * lease's keys and their put under the new one fall in one catalog
	 * debounce, the hiera file does not change and no hook runs. */
	node_metrics_changed(n);
	/* The new lease is kept alive from now on, even while its keys wait
	 * for their turn in the write queue. */
	node_renewal_arm(n, node_lease_granted(n));
	node_put_leased_keys_again(n);
}

/*
 * The lease is gone: a new one after a random part of a keepalive interval
 * (a third of the TTL), then every leased key again under it.  A fleet
 * loses its leases together (an etcd stalled, or too busy to renew them,
 * for a TTL) and learns it together, in the second etcd answers again.
 * Each host asking then for a lease, its keys and a new place in a slot
 * queue is the burst that keeps etcd's apply queue long enough to lose the
 * next leases; spread over the interval, it is a third as dense as the
 * fleet's renewals, and over the node's pace (node_pace.c) when that is
 * wider.  Until the keys are back the node decides nothing
 * (node_lease_gone).
 */
static void node_lease_lost(struct node *n)
{
	uint64_t spread = node_keepalive_interval(n);
	uint64_t delay = random_between(0, n->pace.window > spread ? n->pace.window : spread);

	if (!n->once && fleet_lease_backlog_answers(&n->fleet) > n->lease.backlog_seen &&
	    n->lease.doublings < NODE_LEASE_DOUBLINGS_MAX) {
		n->lease.doublings++;
		log_warnx("lease %llx went while etcd refused its renewals for being over a "
			  "second behind applying writes: the next lease asks for %ld s, %u times "
			  "timing.lease_ttl, until orchestrated restarts or timing.lease_ttl "
			  "changes (a dead host is noticed "
			  "that much later; a longer timing.lease_ttl or a timing.splay keeps "
			  "leases on this etcd, see orchestrate.conf(5))",
			  (unsigned long long)n->lease.id, node_lease_ttl_asked(n),
			  1u << n->lease.doublings);
	}
	log_warnx("lease %llx is gone, granting a new one and registering again in %.1f s",
		  (unsigned long long)n->lease.id, (double)delay / (double)USEC_PER_SEC);
	n->lease.gone = true;
	node_keepalive_arm(n, delay);
}

/*
 * A new lease, and every leased key again under it.  Both asynchronous and
 * patient (NODE_ETCD_PATIENCE_MS), as the node's other writes: a fleet that
 * lost its leases to a stalled etcd comes back while that etcd is still
 * slow, and a grant given up on at the request timeout would be sent again
 * into the same queue.  The keepalive timer stays off while the grant is out
 * (its end arms it); the new lease is kept alive while its keys are being
 * put.
 */
static void node_lease_regrant(struct node *n)
{
	int r;

	if (n->lease.keys_lost && !n->lease.expired) {
		node_put_leased_keys_again(n);	/* the lease is new: the keys only */
		return;
	}
	if (!n->lease.gone) {
		node_lease_lost(n);	/* its timer comes back here */
		return;
	}
	n->lease.keepalive_sent = node_now(n);
	r = fleet_lease_grant_start(&n->fleet, node_lease_ttl_asked(n), node_lease_ask(n),
				    NODE_ETCD_PATIENCE_MS, node_on_grant, n, &n->lease.keepalive_call);
	if (r < 0) {
		log_warnx("cannot grant a lease: %s", strerror(-r));
		node_keepalive_arm(n, node_register_retry(n));
	}
}

static void node_on_keepalive_reply(int error, int64_t ttl, void *userdata)
{
	struct node *n = userdata;
	uint64_t now = node_now(n), due;

	n->lease.keepalive_call = NULL;
	node_pace_answered(n, error, n->lease.keepalive_sent);
	if (error < 0) {
		log_warnx("lease keepalive failed: %s", node_etcd_error(n));
		node_keepalive_arm(n, node_keepalive_retry(n));
		return;
	}
	if (ttl <= 0) {
		if (n->lease.reregistering)
			n->lease.expired = true;	/* the keys' write fails, and says */
		else
			node_lease_regrant(n);
		return;
	}
	n->lease.ttl = (long)ttl;
	n->lease.refreshed = n->lease.keepalive_sent;
	n->lease.keepalive_failures = 0;
	n->lease.late_refusals = 0;
	node_lease_answered(n);
	/* the next one an interval after this one left, however long it took */
	due = n->lease.keepalive_sent + node_keepalive_interval(n);
	node_renewal_arm(n, due > now ? due - now : 0);
}

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	uint64_t now = node_now(n);
	uint64_t ttl = (uint64_t)n->lease.ttl * USEC_PER_SEC;
	uint64_t margin = ttl / 10 < USEC_PER_SEC ? ttl / 10 : USEC_PER_SEC;
	uint64_t expiry = n->lease.refreshed + ttl - margin;
	long patience_ms = expiry > now ? (long)((expiry - now) / 1000) : 0;
	int r;

	if (n->lease.keepalive_call)
		return 0;	/* its end arms the next */
	if ((n->lease.keys_lost || n->lease.gone) && !n->lease.reregistering) {
		node_lease_regrant(n);	/* the keys, or a grant that failed */
		return 0;
	}
	/* Past the time the lease surely had, etcd may still not have
	 * expired it (a stalled etcd's lessor stalls too): only its answer
	 * says, so wait a whole TTL for it rather than ask again every
	 * request timeout into the same queue. */
	if (patience_ms < n->opt.etcd.timeout_ms)
		patience_ms = (long)(ttl / 1000);
	if (patience_ms < n->opt.etcd.timeout_ms)
		patience_ms = n->opt.etcd.timeout_ms;
	r = fleet_lease_keepalive_start(&n->fleet, n->lease.id, patience_ms, node_on_keepalive_reply,
					n, &n->lease.keepalive_call);
	if (r < 0) {
		log_warnx("cannot send a lease keepalive: %s", strerror(-r));
		node_keepalive_arm(n, node_keepalive_retry(n));
		return 0;
	}
	n->lease.keepalive_sent = now;
	n->lease.backlog_sent = fleet_lease_backlog_answers(&n->fleet);
	return 0;
}

void node_lease_refused(struct node *n, int64_t lease)
{
	struct node_lease *l = &n->lease;

	/* An older lease's write, the first registration's, or one made while
	 * the keys go again under a new lease (node_reregistered sees it). */
	if (lease != l->id || !l->registered || l->gone || l->keys_lost || l->reregistering ||
	    n->once || n->stopping)
		return;
	fleet_call_cancel(l->keepalive_call);
	l->keepalive_call = NULL;
	node_lease_lost(n);	/* its timer replaces the keepalive's */
}

/*
 * etcd deleted this host's alive key (the node's own stream says so).
 * Within the lease's time that was a hand, or the clocks disagree: a
 * renewal now asks whether the lease lives.  Past it, the delete is the
 * revocation, and the node takes the lease as lost at once, where it used
 * to learn it only when etcd answered its next try (an interval later):
 * after a partition healed, a lease revoked by hand, an etcd stopped past
 * the TTL (tests/t0556-daemon-lease-revoked-seen.sh).
 *
 * But not while etcd is behind: when it refused a renewal for its apply
 * backlog since the last one it answered, the late tries above decide, as
 * before.  Measured at 1,000 hosts on a tenth of a core, acting on every
 * such delete sent the fleet's grants into the backlog that had cost the
 * leases (1.67 grants a host against 1.02, the backlog up to 1,418 entries
 * against 977): learning late throttles a fleet whose etcd is behind
 * (README, "The first trigger at a tenth of a core").
 */
void node_lease_key_deleted(struct node *n)
{
	struct node_lease *l = &n->lease;
	uint64_t now = node_now(n), expiry = l->refreshed + (uint64_t)l->ttl * USEC_PER_SEC;

	if (!l->registered || n->once || n->stopping || l->gone || l->keys_lost ||
	    l->reregistering || l->register_done)
		return;
	if (now < expiry) {
		log_info("etcd deleted the alive key of %s within the lease's time: asking whether "
			 "lease %llx lives", n->host, (unsigned long long)l->id);
		if (l->keepalive_call)
			return;		/* its answer says */
		node_timer_cancel(&l->keepalive);
		(void)node_on_keepalive(NULL, 0, n);
		return;
	}
	if (fleet_lease_backlog_answers(&n->fleet) > l->backlog_seen) {
		log_info("etcd revoked lease %llx while refusing renewals for its backlog: granting "
			 "again once it answers one", (unsigned long long)l->id);
		return;
	}
	log_warnx("etcd deleted the alive key of %s, %.1f s past the lease's time: lease %llx was "
		  "revoked", n->host, (double)(now - expiry) / (double)USEC_PER_SEC,
		  (unsigned long long)l->id);
	fleet_call_cancel(l->keepalive_call);
	l->keepalive_call = NULL;
	node_lease_lost(n);	/* its timer replaces the keepalive's */
}

bool node_lease_gone(const struct node *n)
{
	return n->lease.gone || n->lease.keys_lost;
}

static void node_on_regrouped(int error, int64_t revision, void *userdata)
{
	struct node *n = userdata;

	n->lease.regroup_call = NULL;
	if (error < 0)
		log_warnx("cannot register the new group: %s", node_etcd_error(n));
	else
		log_info("registered in group %s", or_none(n->opt.config->group));
}

void node_lease_regroup(struct node *n)
{
	const struct config *cfg = n->opt.config;
	int r;

	if (!n->lease.registered)
		return;		/* the registration to come names the group */
	fleet_call_cancel(n->lease.regroup_call);
	n->lease.regroup_call = NULL;
	r = fleet_register_start(&n->fleet, n->host, cfg->group, n->run.local, (long)getpid(),
				 n->lease.id, node_etcd_patience(n), node_on_regrouped, n,
				 &n->lease.regroup_call);
	if (r < 0)
		log_warnx("cannot register the new group: %s", strerror(-r));
}

static void node_on_revoked(int error, int64_t ttl, void *userdata)
{
	struct node *n = userdata;

	n->lease.revoke_call = NULL;
	if (error < 0)
		log_warnx("cannot revoke lease: %s", node_etcd_error(n));
	node_finish_stop(n);
}

bool node_lease_revoke_begin(struct node *n)
{
	int r;

	if (n->lease.revoke_sent || !n->lease.registered || n->once)
		return false;
	n->lease.revoke_sent = true;
	r = fleet_lease_revoke_start(&n->fleet, n->lease.id, 0, node_on_revoked, n,
				     &n->lease.revoke_call);
	if (r < 0) {
		log_warnx("cannot revoke lease: %s", strerror(-r));
		return false;
	}
	return true;
}

void node_keepalive_stop(struct node *n)
{
	node_timer_cancel(&n->lease.keepalive);
	fleet_call_cancel(n->lease.keepalive_call);
	n->lease.keepalive_call = NULL;
	fleet_call_cancel(n->lease.register_call);
	n->lease.register_call = NULL;
	n->lease.register_done = NULL;
	fleet_call_cancel(n->lease.revoke_call);
	n->lease.revoke_call = NULL;
	fleet_call_cancel(n->lease.regroup_call);
	n->lease.regroup_call = NULL;
}

void node_keepalive_restart(struct node *n)
{
	node_keepalive_stop(n);
	if (n->lease.registered && !n->once)
		node_keepalive_arm(n, 0);
}
