/*
 * node_sync.c — the node's view of the fleet: one read, then one stream.
 *
 * A sync reads the fleet model (fleet_model.h) at one revision — desired
 * version, pauses, rollout, catalog — writes the hiera file, and opens ONE
 * watch stream from the next revision carrying every range the model follows.
 * From then on each event is applied to the model in memory, so a trigger or a
 * catalog change costs the node no read at all, and etcd holds one stream per
 * node (~90 KiB) instead of one per range.
 *
 * What an error means.  A failed or implausible read of current_version never
 * starts a run (the model's desired_known stays false); a failed read never
 * touches the hiera file.  A compaction of the resume revision, or any other
 * watch error, leads to a full resync: read everything again at one revision
 * and open a new stream from there; nothing else can say what was missed.  A
 * change of what the node watches (a reload changing node.consumes, depends
 * or the group) is a resync too: the new model is read whole, so no event of
 * the old or the new ranges is lost.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "base/backoff.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/exitcode.h"
#include "base/log.h"
#include "fleet/fleet_lease.h"
#include "fleet/fleet_stream.h"
#include "node_internal.h"

/* Retry of a failed registration or sync: a window doubling from 1 s up to
 * this, with full jitter, so that nodes that failed together (an etcd
 * restart) do not come back together. */
#define RESYNC_MAX_SEC 30
/* --once: tries to reach etcd this often (the backoff windows of 1 s and 2 s
 * between them) before exit 69. */
#define ONCE_SYNC_ATTEMPTS 3

uint64_t node_watch_idle_ms(struct node *n)
{
	long s = n->opt.config->watch_idle;
	return s > 0 ? (uint64_t)s * 1000 : 0;
}

void node_stop_watches(struct node *n)
{
	n->sync.stream = fleet_stream_stop(n->sync.stream);
	node_unwatch_stage(n);
	node_queue_unwatch(n);
}

void node_on_watch_error(struct etcd_watch *w, int error, int64_t compact, void *userdata)
{
	struct node *n = userdata;
	if (error == -ESTALE)
		log_warnx("watch revision compacted (compacted at %lld), reading everything again",
			  (long long)compact);
	else
		log_warnx("watch failed: %s, reading everything again", strerror(-error));
	/* Stopping the watches here would re-enter libcurl: leave it to the
	 * resync, which runs from the loop. */
	node_schedule_resync(n, error == -ESTALE ? 0 : USEC_PER_SEC);
}

/* Every event of the stream: applied to the model, then what changed decides
 * what runs next — an evaluation, a debounced hiera write, or both. */
static int node_on_stream_events(const struct etcd_event *ev, size_t count, int64_t revision,
				 void *userdata)
{
	struct node *n = userdata;
	_cleanup_(freep) char *was = n->sync.model.desired ? strdup(n->sync.model.desired) : NULL;
	bool was_known = n->sync.model.desired_known;
	unsigned changed = 0;
	int r;

	if (count == 0)
		return 0;
	r = fleet_model_apply(&n->sync.model, ev, count, &changed);
	if (r < 0) {
		log_warnx("cannot apply watch events: %s, reading everything again", strerror(-r));
		node_schedule_resync(n, 0);
		return 0;
	}
	if (changed & MODEL_VERSION) {
		if (!n->sync.model.desired_known)
			log_warnx("current_version holds an implausible value, ignoring it until it is valid");
		else if (!n->sync.model.desired)
			log_warnx("current_version was deleted: no desired version");
		else if (!streq_ptr(was, n->sync.model.desired) || !was_known)
			log_fields(LOG_INFO, n->sync.model.desired, NULL,
				   "desired version is now '%s' (was '%s')", n->sync.model.desired,
				   or_none(was));
	}
	/* Whatever refused a start has arrived, or is on its way: decide again. */
	node_run_model_moved(n);
	if (changed & MODEL_SELF_GONE)
		node_lease_key_deleted(n);
	if (changed & MODEL_CATALOG)
		node_catalog_changed(n);
	if (changed)
		node_schedule_evaluate(n);
	return 0;
}

static int node_start_stream(struct node *n)
{
	_cleanup_(freep) struct etcd_watch_range *ranges = NULL;
	size_t count;
	int r;

	if ((r = fleet_model_ranges(&n->sync.model, &ranges, &count)) < 0)
		return r;
	return fleet_stream_start(&n->fleet, ranges, count, node_watch_idle_ms(n),
				  node_on_stream_events, node_on_watch_error, n, &n->sync.stream);
}

/* The services this node follows: node.consumes and the services of
 * node.depends, or NULL (the whole catalog) without node.consumes. */
static int node_consumed(struct node *n, char ***ret)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(strv_freep) char **v = NULL;
	size_t k = 0, max = cfg->n_depends + 1;

	*ret = NULL;
	if (!cfg->consumes)
		return 0;
	for (size_t i = 0; cfg->consumes[i]; i++)
		max++;
	if (!(v = calloc(max, sizeof(char *))))
		return -ENOMEM;
	for (size_t i = 0; cfg->consumes[i]; i++)
		if (!(v[k++] = strdup(cfg->consumes[i])))
			return -ENOMEM;
	for (size_t i = 0; i < cfg->n_depends; i++)
		if (!(v[k++] = strdup(cfg->depends[i].service)))
			return -ENOMEM;
	*ret = TAKE_PTR(v);
	return 0;
}

static int node_on_resync(sd_event_source *s, uint64_t usec, void *userdata);

/* A failed registration or read: tried again after a backoff (--once gives
 * up after a few tries).  The model keeps what it held: a failed read is
 * never taken as an empty catalog or an unset version. */
static void node_resync_failed(struct node *n)
{
	static const struct backoff b = { USEC_PER_SEC, RESYNC_MAX_SEC * USEC_PER_SEC, 0 };
	uint64_t delay;

	/* --once is run from cron: a run that cannot reach etcd gives up
	 * after a few tries, each bounded by etcd.timeout, rather than pile up
	 * behind the next one. */
	if (n->once && !n->sync.synced && n->sync.failures + 1 >= ONCE_SYNC_ATTEMPTS) {
		log_warnx("--once: cannot reach etcd after %u attempts: %s", ONCE_SYNC_ATTEMPTS,
			  node_etcd_error(n));
		n->sync.failures++;
		node_once_finish(n, EXIT_UNAVAILABLE);
		return;
	}
	/* The last error says why.  Not paced, unlike the other retries: a
	 * mass start whose failed registrations waited the pace (widened by
	 * their own failures) took 225 s to be ready instead of 72 s, 16.3
	 * requests a node instead of 11.6 (10,000 simulated nodes, one run
	 * each; README), and so did an earlier try with kept leases. */
	n->sync.failures++;
	delay = backoff_delay(&b, n->sync.failures);
	log_warnx("%s failed: %s, retrying in %.1f s", n->lease.registered ? "sync" : "registration",
		  node_etcd_error(n), (double)delay / (double)USEC_PER_SEC);
	if (!n->sync.synced)
		node_set_state(n, NODE_STARTING, "cannot reach etcd: %s", node_etcd_error(n));
	if (node_timer_arm(n, &n->sync.resync, delay, node_on_resync) < 0)
		log_warnx("cannot arm the resync timer");
}

/* The read ended: the new model in, the hiera file written, the stream opened
 * from the next revision; the first time, what the last life of the daemon
 * left (an interrupted run, a failed validation, services to offer again). */
static void node_on_model_read(int error, struct fleet_model *fresh, void *userdata)
{
	struct node *n = userdata;
	int r;

	n->sync.read = NULL;
	if (error < 0) {
		fleet_model_release(&n->sync.fresh);
		node_resync_failed(n);
		return;
	}
	if (!streq_ptr(fresh->desired, n->sync.model.desired) || !n->sync.model.desired_known)
		log_fields(LOG_INFO, fresh->desired, NULL, "desired version '%s', local version '%s'",
			   or_none(fresh->desired), or_none(n->run.local));
	fleet_model_release(&n->sync.model);
	n->sync.model = *fresh;
	*fresh = (struct fleet_model){ 0 };
	node_run_model_moved(n);
	node_write_hiera(n);

	if ((r = node_start_stream(n)) < 0) {
		node_stop_watches(n);
		node_resync_failed(n);
		return;
	}
	if (!n->sync.synced) {
		bool healthy = false;
		n->sync.synced = true;
		node_run_recover(n, &healthy);
		node_catalog_recover(n, healthy);
		if (!n->once)
			(void)sd_notify(false, "READY=1");
	}
	n->sync.failures = 0;
	node_schedule_evaluate(n);
}

/*
 * Reads the model at one revision, in one request that does not block the
 * loop: the keepalive, the watchdog, signals and hooks are served while a slow
 * etcd answers, and the read is given the patience of a write rather than
 * sent again at each request timeout (a fleet that lost its streams together
 * would otherwise read the whole catalog again and again).  A read in flight
 * is dropped for the new one (a reload that changed what the node follows).
 */
static int node_read_begin(struct node *n)
{
	_cleanup_(strv_freep) char **consumed = NULL;
	int r;

	fleet_call_cancel(n->sync.read);
	n->sync.read = NULL;
	fleet_model_release(&n->sync.fresh);
	node_stop_watches(n);
	if ((r = node_consumed(n, &consumed)) < 0 ||
	    (r = fleet_model_init(&n->sync.fresh, n->fleet.prefix, n->host,
				  n->opt.config->group, consumed)) < 0)
		return r;
	n->sync.fresh.queue_apart = true;	/* node_queue.c follows it */
	return fleet_model_read_start(&n->fleet, &n->sync.fresh, node_etcd_patience(n),
				      node_on_model_read, n, &n->sync.read);
}

/* The first registration ended: the read follows. */
static void node_on_registered(struct node *n, int r)
{
	if (n->stopping)
		return;
	if (r < 0 || node_read_begin(n) < 0)
		node_resync_failed(n);
}

/* Registers (once), then reads; neither blocks the loop. */
static int node_on_resync(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	int r;

	node_timer_cancel(&n->sync.resync);
	if (n->stopping)
		return 0;
	r = n->lease.registered ? node_read_begin(n) : node_register_begin(n, node_on_registered);
	if (r < 0)
		node_resync_failed(n);
	return 0;
}

void node_schedule_resync(struct node *n, uint64_t delay_usec)
{
	if (n->sync.resync || n->stopping)
		return;
	(void)node_timer_arm(n, &n->sync.resync, delay_usec, node_on_resync);
}

void node_sync_init(struct node *n)
{
	n->sync.model.catalog = (struct catalog)CATALOG_INIT;
}

void node_sync_client_changed(struct node *n)
{
	/* A read in flight is made again; a registration the lease part
	 * dropped is made again too (node_on_resync registers first). */
	if (n->sync.read || !n->sync.synced) {
		n->sync.read = NULL;
		node_schedule_resync(n, 0);
	}
}

void node_sync_stop(struct node *n)
{
	node_timer_cancel(&n->sync.resync);
	fleet_call_cancel(n->sync.read);
	n->sync.read = NULL;
}

void node_sync_release(struct node *n)
{
	node_sync_stop(n);
	node_stop_watches(n);
	fleet_model_release(&n->sync.fresh);
	fleet_model_release(&n->sync.model);
}
