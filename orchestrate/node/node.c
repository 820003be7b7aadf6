/*
 * node.c — the node of node.h: its state machine and life cycle.  The other
 * concerns live beside it (node_internal.h lists them): the lease, the fleet
 * model and its one stream, the catalog side, dependencies and slots, and the
 * run.
 *
 * How the pieces meet.  Every wait is an event source: the lease keepalive,
 * the resync retry, the catalog debounce, splay and backoff are timers; hooks
 * are child, pipe and timer sources (hook.c); the watch stream is a curl
 * transfer driven by the etcd client.  Nothing polls etcd.  What a busy etcd
 * must not hold up runs beside the loop on the client's multi handle: the
 * keepalive (node_lease.c) and the writes every version change makes, the
 * slot's queueing, puppet/pending, a run's start and its end (node_write.c:
 * one at a time, patient, settled so that a resend never writes twice; the
 * node decides nothing while one is in flight), the holder's release, the
 * services' publication, the automatic promote, a halt and a dead holder's
 * failure record (each a read, then a queued write: node_rollout.c).  The
 * registration and the model's read do not block either (node_lease.c,
 * node_sync.c), nor do the reads a decision needs beyond the model
 * (node_facts.c: max_percent's and max_fail_percent's alive count, an
 * earlier group's progress, a dependency's entries), the run history's read
 * at start, a reload's new group, or the stop's last words (an interrupted
 * run, the lease's revoke, 5 s in all).  The one blocking request left is
 * the authentication of a user and password when its token expires.
 *
 * Decisions happen in one place, node_evaluate(), run from a deferred event
 * source: stream callbacks only apply events to the fleet model and schedule
 * an evaluation, so that a burst of events gives one decision, made from
 * memory at the revision of the newest event.  node_evaluate() looks at the
 * desired version, the local version, the last validation, pauses,
 * dependencies and the rollout slot, and moves the state machine with
 * node_set_state(), which also logs the change and tells systemd (STATUS=).
 * A run in progress is never interrupted by a change of the desired version:
 * it finishes, and the next evaluation starts a run for the new version.
 *
 * Decisions on whole revisions.  etcd sends all the events of one revision of
 * one watched range in one response; the node applies a response whole and
 * decides only after it (the stream's sockets are read at a higher priority
 * than the evaluation, so every frame that has arrived is applied before a
 * decision).  A txn that touches two ranges, though, reaches the node as one
 * response per range, and a decision may fall between them.  So the write
 * that starts a run is guarded in etcd as well (fleet_model_guard_start): it
 * holds only if no failure record, halt, canary record, policy or pause was
 * written, and current_version did not move, after the revision of the
 * model's view; otherwise nothing is written and the node decides again once
 * its stream has brought the change.  Whoever would start a run checks the
 * failure budget in the same model first (fleet_model_decide), so a spent
 * budget starts no one, whatever the timing between two hosts' views.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>

#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "base/clock.h"
#include "config/config.h"
#include "fleet/fleet_lease.h"
#include "fleet/fleet_stream.h"
#include "output/hiera.h"
#include "base/log.h"
#include "base/strv.h"
#include "node_internal.h"
#include "fleet/schema.h"

/* How long SIGTERM waits for running hooks before killing them. */
#define STOP_GRACE_USEC (HOOK_KILL_GRACE_USEC + 5 * USEC_PER_SEC)
/* How long the stop waits for etcd to take its last writes (an interrupted
 * run, the lease's revoke) when no hook was running. */
#define STOP_ETCD_USEC (5 * USEC_PER_SEC)
/* The first request to etcd waits at most this long, at random (node_start). */
#define START_SPREAD_USEC USEC_PER_SEC

static const char *const node_state_names[_NODE_STATE_MAX] = {
	[NODE_STARTING] = "starting",
	[NODE_IDLE] = "idle",
	[NODE_PAUSED] = "paused",
	[NODE_WAIT_DEPENDENCIES] = "wait-dependencies",
	[NODE_WAIT_GROUP] = "wait-group",
	[NODE_WAIT_SLOT] = "wait-slot",
	[NODE_WAIT_CANARY] = "wait-canary",
	[NODE_HALTED] = "halted",
	[NODE_SPLAY] = "splay",
	[NODE_RUN_START] = "run-start",
	[NODE_RUN_UPGRADE] = "run-upgrade",
	[NODE_RUN_CONFIG] = "run-config",
	[NODE_RUN_VALIDATE] = "run-validate",
	[NODE_BAKE] = "bake",
	[NODE_BACKOFF] = "backoff",
	[NODE_STOPPING] = "stopping",
};

const char *node_state_name(enum node_state s)
{
	if ((unsigned)s >= _NODE_STATE_MAX)
		return "invalid";
	return node_state_names[s];
}

/* --- small helpers --------------------------------------------------------------- */

uint64_t sec_to_usec(double s)
{
	return s <= 0 ? 0 : (uint64_t)(s * (double)USEC_PER_SEC);
}

void set_str(char **p, const char *s)
{
	char *copy = s ? strdup(s) : NULL;
	free(*p);
	*p = copy;
}

const char *node_etcd_error(struct node *n)
{
	const char *denied = fleet_denied_error(&n->fleet);

	if (!denied)
		return fleet_last_error(&n->fleet);
	(void)sd_notifyf(false, "STATUS=%s (still running, will retry)", denied);
	return denied;
}

const char *or_none(const char *s)
{
	return s ? s : "none";
}

/* (Re)arms *s as a one-shot monotonic timer delay_usec from now. */
int node_timer_arm(struct node *n, sd_event_source **s, uint64_t delay_usec,
		   sd_event_time_handler_t fn)
{
	*s = sd_event_source_disable_unref(*s);
	return sd_event_add_time_relative(n->event, s, CLOCK_MONOTONIC, delay_usec, 0, fn, n);
}

int node_timer_arm_exact(struct node *n, sd_event_source **s, uint64_t delay_usec,
			 sd_event_time_handler_t fn)
{
	*s = sd_event_source_disable_unref(*s);
	return sd_event_add_time_relative(n->event, s, CLOCK_MONOTONIC, delay_usec, 1, fn, n);
}

void node_timer_cancel(sd_event_source **s)
{
	*s = sd_event_source_disable_unref(*s);
}

static void node_write_metrics(struct node *n);

/* --- state -------------------------------------------------------------------------- */

/*
 * The one function that moves the state machine.  status is the human line for
 * STATUS= and the journal ("running config for v8"); a change of either is
 * logged once, so the journal tells the node's story without repeating it.
 */
void node_set_state(struct node *n, enum node_state state, const char *fmt, ...)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	(void)buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (state == n->state && streq_ptr(buf_str(&b), n->status))
		return;
	if (state != n->state)
		log_fields(LOG_INFO, n->run.version ? n->run.version : n->sync.model.desired, NULL,
			   "state %s -> %s: %s", node_state_name(n->state), node_state_name(state),
			   buf_str(&b));
	else
		log_debug("state %s: %s", node_state_name(state), buf_str(&b));
	n->state = state;
	set_str(&n->status, buf_str(&b));
	(void)sd_notifyf(false, "STATUS=%s", buf_str(&b));
	node_write_metrics(n);
}

enum node_state node_get_state(const struct node *n) { return n->state; }
int node_exit_code(const struct node *n) { return n->exit_code; }

/* --- metrics ------------------------------------------------------------------------ */

#define HOOK_M_NAME(kind) #kind,
static const char *const hook_metric_names[_HOOK_M_MAX] = { CONFIG_HOOK_KINDS(HOOK_M_NAME) };
#undef HOOK_M_NAME

static size_t hook_metric_index(const char *name)
{
	for (size_t i = 0; i < _HOOK_M_MAX; i++)
		if (strcmp(hook_metric_names[i], name) == 0)
			return i;
	return HOOK_M_services;
}

static double wall_now(void)
{
	return (double)clock_usec(CLOCK_REALTIME) / (double)USEC_PER_SEC;
}

uint64_t node_now(struct node *n)
{
	uint64_t usec = 0;
	(void)sd_event_now(n->event, CLOCK_MONOTONIC, &usec);
	return usec;
}

/*
 * Rewrites paths.metrics_file (when set): called on every change of state or
 * status line and at every hook's end — the moments its contents change — so
 * no timer is needed.  file_write_atomic() leaves an unchanged file alone.
 */
static void node_write_metrics(struct node *n)
{
	const char *path = n->opt.config->metrics_file;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	bool changed;
	int r;

	if (!path || !*path)
		return;
	struct metrics m = {
		.desired_version = n->sync.model.desired_known ? n->sync.model.desired : NULL,
		.local_version = n->run.local,
		.hooks = n->hook_metrics,
		.n_hooks = _HOOK_M_MAX,
		.catalog_entries = n->sync.model.catalog.n,
		.etcd_reconnects = fleet_client_reconnects(&n->fleet),
		.watch_events = fleet_client_events(&n->fleet),
		.lease_regrants = n->lease.regrants,
		.lease_ttl = n->lease.id ? n->lease.ttl : 0,
		.slot_queue_reads = n->queue.reads,
		.slot_queue_scans = n->queue.scans,
		.etcd_strains = n->pace_strains,
		.pace_usec = n->pace.window,
		.states = node_state_names,
		.n_states = _NODE_STATE_MAX,
		.state = (size_t)n->state,
	};
	r = metrics_render(&m, &out);
	if (r >= 0)
		r = file_write_atomic(path, out.data, out.len, 0644, &changed);
	if (r < 0)
		log_warnx("cannot write metrics file '%s': %s", path, strerror(-r));
}

void node_metrics_changed(struct node *n)
{
	node_write_metrics(n);
}

static void node_hook_started(struct node *n, const char *name)
{
	n->hook_started[hook_metric_index(name)] = node_now(n);
}

/* Records a hook's end for the metrics (and writes them). */
static void node_hook_ended(struct node *n, const char *name, const struct hook_result *res)
{
	size_t i = hook_metric_index(name);
	struct metrics_hook *h = &n->hook_metrics[i];
	uint64_t now = node_now(n);

	h->ran = true;
	h->exit_code = res->signal || res->timed_out ? -1 : res->exit_code;
	h->duration = n->hook_started[i] && now >= n->hook_started[i]
			      ? (double)(now - n->hook_started[i]) / (double)USEC_PER_SEC : 0;
	h->time = wall_now();
	n->hook_started[i] = 0;
	node_write_metrics(n);
}

int node_hook_spawn(struct node *n, const char *kind, const char *path, const char *version,
		    hook_done_fn fn, struct hook **ret, char **ret_why)
{
	_cleanup_(strv_freep) char **env = NULL;
	int r;

	*ret_why = NULL;
	r = node_build_env(n, version, &env);
	if (r >= 0)
		node_hook_started(n, kind);
	if (r >= 0)
		r = hook_spawn(n->event, kind, path, env, n->opt.config->hook_timeout, version, fn, n,
			       ret);
	if (r < 0) {
		struct hook_result bad = { .exit_code = 127 };
		if (asprintf(ret_why, "cannot run %s hook '%s': %s", kind, path, strerror(-r)) < 0)
			*ret_why = NULL;
		log_fields(LOG_ERR, version, kind, "%s", or_none(*ret_why));
		bad.output = *ret_why ? *ret_why : "";
		node_hook_ended(n, kind, &bad);
	}
	return r;
}

void node_hook_done(struct node *n, struct hook *h, const char *version,
		    const struct hook_result *res)
{
	_cleanup_(freep) char *what = hook_result_describe(res);

	log_fields(res->exit_code == 0 ? LOG_INFO : LOG_WARNING, version, hook_name(h),
		   "hook '%s' %s", hook_name(h), or_none(what));
	node_hook_ended(n, hook_name(h), res);
}

/* --- the decision ------------------------------------------------------------------- */

static bool node_need_run(const struct node *n)
{
	if (!n->sync.model.desired_known || !n->sync.model.desired)
		return false;
	return !streq_ptr(n->run.local, n->sync.model.desired) || n->run.validation_failed || n->run.rerun;
}

static void node_idle(struct node *n)
{
	node_run_idle(n);
	node_rollout_idle(n);
	node_retry_owed(n);
	if (!n->sync.model.desired_known)
		node_set_state(n, NODE_IDLE, "idle at %s, desired version unknown", or_none(n->run.local));
	else if (!n->sync.model.desired)
		node_set_state(n, NODE_IDLE, "idle at %s, no desired version", or_none(n->run.local));
	else
		node_set_state(n, NODE_IDLE, "idle at %s", or_none(n->run.local));
}

static void node_update_pause(struct node *n)
{
	_cleanup_(freep) char *reason = NULL;
	int r = fleet_model_paused(&n->sync.model, &reason);

	if (r < 0) {
		/* Unknown is not "not paused": keep the last answer. */
		log_warnx("cannot tell whether a pause applies: %s", strerror(-r));
		return;
	}
	if ((r > 0) != n->paused || !streq_ptr(reason, n->pause_reason))
		log_info(r > 0 ? "paused: %s" : "resumed%s", r > 0 ? reason : "");
	n->paused = r > 0;
	set_str(&n->pause_reason, reason);
}

/*
 * Why the node waits, said twice: the state and its line (STATUS=, the
 * journal; status_line may change often, e.g. queue counts), and, when the
 * reason or its detail changed, puppet/pending with "wait" for `status`.  The
 * detail must not change with every event (no counts that move with the
 * queue), or each host would write on every other host's step.  A host that
 * failed at this rollout keeps its failed status instead: a failure stays
 * visible until a run succeeds.
 */
static void node_pending_written(struct node *n, int r)
{
	if (r < 0)
		log_warnx("cannot set status puppet/pending: %s", node_etcd_error(n));
}

static void node_wait(struct node *n, enum node_state state, const char *wait,
		      const char *detail, const char *status_line)
{
	_cleanup_(freep) char *key = NULL;

	node_set_state(n, state, "%s", status_line ? status_line : detail);
	if (node_failed_here(n) || asprintf(&key, "%s: %s", wait, detail) < 0 ||
	    streq_ptr(key, n->pending_detail))
		return;
	if (n->write)
		return;		/* its end decides, and says, again */
	struct fleet_batch *b = NULL;
	struct status_extra x = { .wait = wait };
	if (fleet_batch_new(&n->fleet, &b) < 0 ||
	    fleet_batch_status_extra(b, n->host, STATUS_PUPPET, STATE_PENDING, n->sync.model.desired, -1,
				     detail, &x) < 0 ||
	    node_write_begin(n, TAKE_PTR(b), "puppet/pending", node_pending_written) < 0) {
		fleet_batch_free(b);
		log_warnx("cannot set status puppet/pending: %s", node_etcd_error(n));
		return;
	}
	/* Said, as far as the node is concerned: what a host waits for is
	 * shown at best effort, and a failed write is not worth a retry that
	 * competes with the ones that matter. */
	set_str(&n->pending_detail, key);
}

/*
 * The decision: called whenever something the node depends on may have
 * changed.  A run in progress (or a splay or backoff timer) is left alone;
 * otherwise the node goes to the first state whose condition holds.
 */
static bool node_evaluate_run(struct node *n)
{
	_cleanup_(freep) char *missing = NULL, *missing_short = NULL;
	_cleanup_(freep) char *waiting_group = NULL, *group_watcher = NULL;
	_cleanup_(rollout_record_releasep) struct rollout_record halt = { 0 };
	struct slot_wait wait = { 0 };
	int r;

	if (n->stopping || !n->sync.synced || n->run.hook || n->state == NODE_BAKE)
		return false;
	node_update_pause(n);
	node_run_check_target(n);

	if (!node_need_run(n)) {
		node_idle(n);
		if (n->once)
			node_once_finish(n, n->sync.model.desired_known ? 0 : 1);
		return false;
	}
	if (fleet_model_halted(&n->sync.model, &halt)) {
		_cleanup_(freep) char *line = NULL;
		node_progress_cancel(n);
		if (asprintf(&line, "rollout of %s halted: %s", n->sync.model.desired,
			     or_none(halt.reason)) < 0)
			return false;
		node_wait(n, NODE_HALTED, "halt", line, NULL);
		if (n->once) {
			log_warnx("--once: %s", line);
			node_once_finish(n, 1);
		}
		return false;
	}
	if (n->run.timer)
		return false;	/* splay or backoff still running */
	if (n->paused) {
		_cleanup_(freep) char *line = NULL;
		if (asprintf(&line, "paused: %s", or_none(n->pause_reason)) < 0)
			return false;
		node_wait(n, NODE_PAUSED, "pause", line, NULL);
		node_stage_duty(n);
		return false;
	}

	r = node_check_dependencies(n, &missing, &missing_short);
	if (r == -EAGAIN)
		return false;	/* the catalog is read: its answer decides */
	if (r == 0) {
		_cleanup_(freep) char *line = NULL;
		if (asprintf(&line, "waiting for %s", or_none(missing_short)) < 0)
			return false;
		node_wait(n, NODE_WAIT_DEPENDENCIES, "dependency", missing, line);
		node_stage_duty(n);
		return false;
	}

	r = node_take_slot(n, &wait);
	waiting_group = wait.group;
	group_watcher = wait.watcher;
	if (r < 0) {
		log_warnx("cannot take a rollout slot: %s", node_etcd_error(n));
		node_set_state(n, NODE_WAIT_SLOT, "cannot take a rollout slot: %s",
			       node_etcd_error(n));
		node_retry_later(n);
		return false;
	}
	if (wait.reading || wait.splaying)
		return false;	/* a read's answer or the splay's timer decides */
	node_retry_reset(n);
	if (wait.halting)
		return false;	/* the halt reaches the model next */
	node_watch_progress(n, &wait);
	if (r == 0) {
		_cleanup_(freep) char *detail = NULL, *line = NULL;
		enum node_state st;
		const char *why;
		int k;
		if (waiting_group) {
			st = NODE_WAIT_GROUP, why = "group";
			k = asprintf(&detail, "waiting for group %s", waiting_group);
			if (k >= 0 && group_watcher)
				k = asprintf(&line, "%s (watched by %s)", detail, group_watcher);
			else if (k >= 0 && wait.behind > 0)
				k = asprintf(&line, "%s (%zu host%s behind)", detail, wait.behind,
					     wait.behind == 1 ? "" : "s");
		} else if (wait.canary) {
			st = NODE_WAIT_CANARY, why = "canary";
			k = asprintf(&detail, "waiting for promote: the canaries of %s run first",
				     n->sync.model.desired);
			if (k >= 0)
				k = asprintf(&line, "waiting for promote of %s (%zu of %ld canaries validated)",
					     n->sync.model.desired, wait.canaries_done,
					     n->sync.model.policy.canary);
		} else {
			st = NODE_WAIT_SLOT, why = "slot";
			k = (detail = node_slot_detail(n)) ? 0 : -1;
			if (k >= 0)
				k = asprintf(&line, "%s (%zu ahead, max %ld)", detail, wait.rank,
					     wait.limit);
		}
		if (k >= 0)
			node_wait(n, st, why, detail, line);
		if (node_promote_if_due(n, &wait) < 0) {
			log_warnx("cannot promote the rollout of %s: %s", n->sync.model.desired,
				  node_etcd_error(n));
			node_retry_later(n);
		}
		return false;
	}

	if (node_run_splay(n, "config"))
		return false;	/* its timer decides again */
	/* Two Puppet runs at once would fight over Puppet's lock: a running
	 * services hook ends first (its end evaluates again). */
	if (n->catalog.services_hook)
		return false;
	return node_start_run(n);
}

static void node_evaluate(struct node *n)
{
	/* The last decision's write is in flight: its end evaluates again.  A
	 * write that failed waits for its retry (node_retry_later) before the
	 * node decides anything that writes: deciding again at once would
	 * only send the next write into the same failure. */
	if (n->write)
		return;
	/* The lease is gone and its keys not back under a new one: whatever
	 * the node decided would be written under the dead lease (refused), or
	 * ahead of its keys.  The leased keys' write evaluates again. */
	if (node_lease_gone(n))
		return;
	if (n->retry_timer) {
		node_try_services(n);
		return;
	}
	/* A halt this node just wrote reaches its model later (events of
	 * earlier revisions, such as the dead host's other keys, may come
	 * first): until then, no run starts. */
	if (n->sync.synced && !n->stopping &&
	    (node_check_released(n) || node_check_budget(n) || node_halt_pending(n))) {
		node_try_services(n);
		return;
	}
	if (!node_evaluate_run(n))
		node_try_services(n);
}

static int node_on_evaluate(sd_event_source *s, void *userdata)
{
	node_evaluate(userdata);
	return 0;
}

void node_schedule_evaluate(struct node *n)
{
	if (n->evaluate)
		(void)sd_event_source_set_enabled(n->evaluate, SD_EVENT_ONESHOT);
}

const struct backoff node_write_backoff = {
	.first = USEC_PER_SEC, .cap = 30 * USEC_PER_SEC, .floor = USEC_PER_SEC / 2,
};

static int node_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	node_timer_cancel(&n->retry_timer);
	node_schedule_evaluate(n);
	return 0;
}

uint64_t node_next_retry_delay(struct node *n)
{
	n->retry_failures++;
	return node_paced(n, backoff_delay(&node_write_backoff, n->retry_failures));
}

void node_retry_later(struct node *n)
{
	if (n->retry_timer || n->stopping)
		return;
	if (node_timer_arm(n, &n->retry_timer, node_next_retry_delay(n), node_on_retry_timer) < 0)
		log_warnx("cannot arm the retry timer");
}

void node_pending_said(struct node *n, const char *key)
{
	set_str(&n->pending_detail, key);
}

void node_retry_reset(struct node *n)
{
	n->retry_failures = 0;
}

/* --- once --------------------------------------------------------------------------- */

void node_once_finish(struct node *n, int code)
{
	if (!n->once || n->stopping)
		return;
	if (code == 0 && (n->catalog.services_hook || n->catalog.services_gen < n->catalog.hiera_gen))
		return;		/* the services hook finishes first */
	if (n->write) {
		n->once_exit = code + 1;	/* the write's end finishes */
		return;
	}
	n->exit_code = code;
	n->stopping = true;
	node_stop_watches(n);
	log_info("--once: %s", code == 0 ? "at the desired version" : "not at the desired version");
	(void)sd_event_exit(n->event, code);
}

static int node_on_once_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	log_warnx("--once: gave up after %ld s in state %s (%s)", n->opt.config->hook_timeout,
		  node_state_name(n->state), or_none(n->status));
	if (n->run.hook || n->catalog.services_hook) {
		node_stop(n);
		n->exit_code = 1;
		return 0;
	}
	node_once_finish(n, 1);
	return 0;
}

/* --- stop ------------------------------------------------------------------------------ */

static int node_on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	log_warnx("hooks or a request to etcd still running after the stop grace period, "
		  "leaving them");
	n->stop_final = true;
	node_run_abandon(n);
	node_catalog_abandon(n);
	node_write_abandon(n);
	node_keepalive_stop(n);
	node_finish_stop(n);
	return 0;
}

/* Runs when no hook is left: records an interrupted run, revokes the lease,
 * each without blocking the loop (the end of each calls again), then exits.
 * What the stop still tells etcd has STOP_ETCD_USEC in all. */
void node_finish_stop(struct node *n)
{
	if (n->run.hook || n->catalog.services_hook || n->write || n->lease.revoke_call)
		return;	/* the last of them calls again */
	if (!n->stop_final && !n->stop_recorded) {
		n->stop_recorded = true;
		node_timer_cancel(&n->stop_timer);
		(void)node_timer_arm(n, &n->stop_timer, STOP_ETCD_USEC, node_on_stop_timer);
		if (n->sync.synced && n->run.version &&
		    (n->state == NODE_RUN_CONFIG || n->state == NODE_RUN_UPGRADE ||
		     n->state == NODE_RUN_VALIDATE || n->state == NODE_BAKE) &&
		    node_run_record_interrupted(n))
			return;
	}
	node_stop_watches(n);
	if (!n->stop_final && node_lease_revoke_begin(n))
		return;
	node_timer_cancel(&n->stop_timer);
	node_set_state(n, NODE_STOPPING, "stopped");
	(void)sd_event_exit(n->event, n->exit_code);
}

void node_stop(struct node *n)
{
	if (n->stop_requested) {
		/* A second SIGTERM: do not wait any longer. */
		n->stop_final = true;
		node_run_abandon(n);
		node_catalog_abandon(n);
		node_write_abandon(n);
		node_keepalive_stop(n);
		node_finish_stop(n);
		return;
	}
	(void)sd_notify(false, "STOPPING=1");
	n->stop_requested = true;
	n->stopping = true;
	if (n->once)
		n->exit_code = 1;
	node_timer_cancel(&n->retry_timer);
	node_timer_cancel(&n->once_deadline);
	node_run_stop(n);
	node_sync_stop(n);
	node_catalog_stop(n);
	node_rollout_stop(n);
	node_keepalive_stop(n);
	node_write_stop(n);
	if (!n->run.hook && !n->catalog.services_hook && !n->write) {
		node_finish_stop(n);
		return;
	}
	log_info("stopping: waiting for running hooks and the write in flight");
	hook_kill(n->run.hook, SIGTERM);
	hook_kill(n->catalog.services_hook, SIGTERM);
	(void)node_timer_arm(n, &n->stop_timer, STOP_GRACE_USEC, node_on_stop_timer);
	(void)sd_notifyf(false, "STATUS=stopping: waiting for hooks");
}

/* --- reload ------------------------------------------------------------------------------ */

/* Whether the etcd connection settings differ: endpoints, TLS files, user,
 * password, timeout. */
static bool etcd_options_differ(const struct etcd_options *a, const struct etcd_options *b)
{
	return !strv_equal(a->endpoints, b->endpoints) || !streq_ptr(a->cacert, b->cacert) ||
	       !streq_ptr(a->cert, b->cert) || !streq_ptr(a->key, b->key) || !streq_ptr(a->user, b->user) ||
	       !streq_ptr(a->password, b->password) || a->timeout_ms != b->timeout_ms;
}

/*
 * A new etcd client for new connection settings: the stream and the stage
 * watch belong to the old one and go with it; the lease lives in etcd and is
 * kept alive by the new client; a resync reads everything again and opens
 * the stream on the new client.
 */
static int node_reconnect(struct node *n, struct etcd_options *fresh)
{
	struct fleet f;
	struct etcd_options t;
	int r;

	if ((r = fleet_connect(&f, fresh, n->opt.prefix, n->event)) < 0)
		return r;
	node_stop_watches(n);
	node_keepalive_stop(n);
	/* Frees every request in flight on the old client, without calling
	 * back: each part forgets its own below and goes on on the new one. */
	fleet_disconnect(&n->fleet);
	n->fleet = f;
	/* the options' strings are owned by the resolved options: swap them so
	 * the old ones are released with the fresh struct */
	t = n->opt.etcd;
	n->opt.etcd = *fresh;
	*fresh = t;
	node_write_client_changed(n);
	node_sync_client_changed(n);
	node_facts_client_changed(n);
	node_run_client_changed(n);
	node_rollout_client_changed(n);
	node_keepalive_restart(n);
	return 0;
}

/* Whether what the node watches changes with the new config. */
static bool node_watch_set_changed(const struct config *a, const struct config *b)
{
	if (!streq_ptr(a->group, b->group) || !strv_equal(a->consumes, b->consumes) ||
	    a->n_depends != b->n_depends)
		return true;
	for (size_t i = 0; i < a->n_depends; i++)
		if (strcmp(a->depends[i].service, b->depends[i].service) != 0)
			return true;
	return false;
}

int node_reload(struct node *n)
{
	_cleanup_(options_resolved_releasep) struct options_resolved fresh = { 0 };
	_cleanup_(freep) char *error = NULL;
	struct config *old;
	bool regroup, rewatch = false;
	int r;

	(void)sd_notify(false, "RELOADING=1");
	r = options_resolve(n->global, &fresh, &error);
	if (r < 0) {
		log_warnx("reload: %s, keeping the running configuration", error ? error : strerror(-r));
		(void)sd_notify(false, "READY=1");
		return r;
	}
	if (!streq_ptr(fresh.hostname, n->opt.hostname) || !streq_ptr(fresh.prefix, n->opt.prefix))
		log_warnx("reload: a new hostname or prefix needs a restart, ignoring them");
	if (etcd_options_differ(&fresh.etcd, &n->opt.etcd)) {
		r = node_reconnect(n, &fresh.etcd);
		if (r < 0) {
			log_warnx("reload: cannot use the new etcd settings: %s, keeping the running configuration",
				  strerror(-r));
			(void)sd_notify(false, "READY=1");
			return r;
		}
		log_info("reload: new etcd settings (endpoints, TLS, user or timeout): reconnecting");
		rewatch = true;
	}
	old = n->opt.config;
	regroup = !streq_ptr(old->group, fresh.config->group);
	bool new_ttl = old->lease_ttl != fresh.config->lease_ttl;
	rewatch = rewatch || node_watch_set_changed(old, fresh.config);
	n->opt.config = TAKE_PTR(fresh.config);
	config_free(old);
	if (!streq_ptr(fresh.local_version_file, n->opt.local_version_file)) {
		char *t = n->opt.local_version_file;
		n->opt.local_version_file = fresh.local_version_file;
		fresh.local_version_file = t;
		node_read_local(n);
	}
	log_info("configuration reloaded from '%s'", or_none(n->opt.config->path));
	if (regroup)
		node_lease_regroup(n);
	if (new_ttl)
		node_lease_ttl_set(n);
	if (n->catalog.published)
		(void)node_publish_services(n, n->catalog.services_healthy, false);
	/* A new set of watched ranges: read it whole on a new stream. */
	if (rewatch && n->sync.synced) {
		log_info("reload: the watched services or group changed, reading them again");
		node_schedule_resync(n, 0);
	}
	set_str(&n->pending_detail, NULL);
	node_schedule_evaluate(n);
	(void)sd_notify(false, "READY=1");
	return 0;
}

/* --- life cycle -------------------------------------------------------------------------- */

int node_new(sd_event *event, struct options_resolved *opts,
	     const struct global_options *global, bool once, struct node **ret)
{
	struct node *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	n->event = sd_event_ref(event);
	n->global = global;
	n->once = once;
	node_sync_init(n);
	n->state = NODE_STARTING;
	for (size_t i = 0; i < _HOOK_M_MAX; i++)
		n->hook_metrics[i].name = hook_metric_names[i];
	r = fleet_connect(&n->fleet, &opts->etcd, opts->prefix, event);
	if (r < 0) {
		node_free(n);
		return r;
	}
	n->opt = *opts;
	*opts = (struct options_resolved){ 0 };
	n->host = n->opt.hostname;
	if ((r = sd_event_add_defer(event, &n->evaluate, node_on_evaluate, n)) < 0 ||
	    (r = sd_event_source_set_enabled(n->evaluate, SD_EVENT_OFF)) < 0) {
		node_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

int node_start(struct node *n)
{
	node_read_local(n);
	log_fields(LOG_INFO, n->run.local, NULL, "starting as '%s', local version '%s'%s", n->host,
		   or_none(n->run.local), n->once ? ", once" : "");
	node_set_state(n, NODE_STARTING, "connecting to etcd");
	if (n->once && n->opt.config->hook_timeout > 0) {
		int r = node_timer_arm(n, &n->once_deadline,
				       (uint64_t)n->opt.config->hook_timeout * USEC_PER_SEC,
				       node_on_once_deadline);
		if (r < 0)
			return r;
	}
	/* The first request waits a random part of a second: daemons started
	 * together (a site back from a power loss, a package upgrade pushed to
	 * every host at once) then reach etcd spread out rather than in one
	 * burst that outlasts the request timeout and comes back as retries.
	 * A failed start is spread further by the resync's jittered backoff. */
	uint64_t spread = random_between(0, START_SPREAD_USEC);
	log_debug("first request to etcd in %.3f s", (double)spread / (double)USEC_PER_SEC);
	node_schedule_resync(n, spread);
	return n->sync.resync ? 0 : -ENOMEM;
}

struct node *node_free(struct node *n)
{
	if (!n)
		return NULL;
	node_write_abandon(n);
	node_run_release(n);
	node_catalog_release(n);
	node_rollout_release(n);
	node_sync_release(n);
	node_keepalive_stop(n);
	sd_event_source_disable_unref(n->evaluate);
	sd_event_source_disable_unref(n->retry_timer);
	sd_event_source_disable_unref(n->once_deadline);
	sd_event_source_disable_unref(n->stop_timer);
	if (n->fleet.etcd)
		fleet_disconnect(&n->fleet);
	options_resolved_release(&n->opt);
	free(n->status);
	free(n->pause_reason);
	free(n->pending_detail);
	sd_event_unref(n->event);
	free(n);
	return NULL;
}
