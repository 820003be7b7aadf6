/*
 * node_run.c — the consistent configuration: one run of the hooks for the
 * desired version, and what each outcome writes.
 *
 *   start       one txn: puppet/running
 *   upgrade     (optional) then config hook; then the validate hook
 *   end         one txn with everything the outcome changes:
 *                 success        puppet/success, validation/success,
 *                                running_version/HOST {"version":V} (one key,
 *                                so the old version goes), alive at V,
 *                                its services healthy at V, its slot freed
 *                 validation     puppet/success, validation/failed, its
 *                 failed         services unhealthy
 *                 config failed  puppet/failed, its services unhealthy
 *
 * So a run costs etcd two writes (three with a rollout slot) whatever the
 * fleet's size.  puppet/running covers the validate hook too: the validation
 * state moves once, when it is known, rather than through validation/running.
 * A node that never published its services does so after its first config
 * run, whether or not it succeeded (one write, once), so that a node waiting
 * for it is not blocked until its validation ends; but only if that
 * validation has not ended EARLY_PUBLISH_USEC later: a quick one publishes
 * the entry once, healthy, in the end txn, rather than not healthy and then
 * healthy, two events to every node that renders the service.
 *
 * A failed run is retried with capped exponential backoff and full jitter.
 * A successful run whose end txn cannot be written is still a success here
 * (the local version file says so): the txn is owed and retried from idle.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "base/backoff.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "output/hiera.h"
#include "config/local.h"
#include "base/strv.h"
#include "base/utf8.h"
#include "fleet/fleet_lease.h"
#include "fleet/fleet_rollout.h"
#include "base/log.h"
#include "node_internal.h"
#include "fleet/schema.h"

/* How long a first run's validation may take before the node's services are
 * published, not healthy, ahead of its end (see above). */
#define EARLY_PUBLISH_USEC (2 * USEC_PER_SEC)

/* --- local version -------------------------------------------------------------------- */

void node_read_local(struct node *n)
{
	_cleanup_(freep) char *version = NULL;
	int r = local_version_read(n->opt.local_version_file, &version);

	free(n->run.local);
	n->run.local = NULL;
	if (r == -ENOENT)
		return;
	if (r == -EINVAL)
		log_warnx("local version file '%s' holds no valid version, taking none",
			  n->opt.local_version_file);
	else if (r < 0)
		log_warnx("cannot read local version file '%s': %s, taking none",
			  n->opt.local_version_file, strerror(-r));
	else
		n->run.local = TAKE_PTR(version);
}

static int node_write_local(struct node *n, const char *version)
{
	int r = local_version_write(n->opt.local_version_file, version);
	if (r < 0)
		return r;
	set_str(&n->run.local, version);
	return 0;
}

/* --- status ------------------------------------------------------------------------- */

/* The interrupted run's write ended. */
static void node_interrupted_written(struct node *n, int r)
{
	if (r < 0)
		log_warnx("cannot record the interrupted run: %s", node_etcd_error(n));
}

bool node_run_record_interrupted(struct node *n)
{
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_status(b, n->host, STATUS_PUPPET, STATE_FAILED, n->run.version, -1,
				    "interrupted")) < 0) {
		fleet_batch_free(b);
		node_interrupted_written(n, r);
		return false;
	}
	r = node_write_begin(n, b, "the interrupted run's status", node_interrupted_written);
	if (r < 0)
		node_interrupted_written(n, r);
	return r == 0;
}

/* --- hooks -------------------------------------------------------------------------- */

int node_build_env(struct node *n, const char *version, char ***ret)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	size_t count = 0;
	int r;

	if ((r = strv_push(&env, &count, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")) < 0)
		return r;
#define ADD(name, value)                                                      \
	do {                                                                  \
		buf_reset(&b);                                                \
		if ((r = buf_printf(&b, "%s=%s", name, value ? value : "")) < 0 || \
		    (r = strv_push(&env, &count, buf_str(&b))) < 0)            \
			return r;                                             \
	} while (0)
	ADD("ORCHESTRATE_HOST", n->host);
	ADD("ORCHESTRATE_VERSION", version);
	ADD("ORCHESTRATE_PREVIOUS_VERSION", n->run.previous ? n->run.previous : n->run.local);
	ADD("ORCHESTRATE_SERVICES_FILE", n->opt.config->hiera_services);
	buf_reset(&b);
	if ((r = buf_adds(&b, "ORCHESTRATE_ETCD=")) < 0)
		return r;
	for (size_t i = 0; n->opt.etcd.endpoints && n->opt.etcd.endpoints[i]; i++)
		if ((i && (r = buf_addc(&b, ',')) < 0) ||
		    (r = buf_adds(&b, n->opt.etcd.endpoints[i])) < 0)
			return r;
	if ((r = strv_push(&env, &count, buf_str(&b))) < 0)
		return r;
	/* So that a hook calling `orchestrate` talks about the same fleet. */
	if (n->opt.prefix && *n->opt.prefix)
		ADD("ORCHESTRATE_PREFIX", n->opt.prefix);
	ADD("ORCHESTRATE_LOCAL_VERSION_FILE", n->opt.local_version_file);
#undef ADD
	*ret = TAKE_PTR(env);
	return 0;
}

static void node_on_run_hook(struct hook *h, const struct hook_result *res, void *userdata);

static const char *node_hook_path(struct node *n, enum node_state which)
{
	const struct config *cfg = n->opt.config;
	switch (which) {
	case NODE_RUN_UPGRADE: return cfg->hook_upgrade;
	case NODE_RUN_CONFIG: return cfg->hook_config;
	case NODE_RUN_VALIDATE: return cfg->hook_validate;
	default: return NULL;
	}
}

static const char *node_hook_name(enum node_state which)
{
	switch (which) {
	case NODE_RUN_UPGRADE: return "upgrade";
	case NODE_RUN_CONFIG: return "config";
	case NODE_RUN_VALIDATE: return "validate";
	default: return "services";
	}
}

static int node_on_run_timer(sd_event_source *s, uint64_t usec, void *userdata);
static void node_run_failed(struct node *n, const char *what);
static void node_config_done(struct node *n, const struct hook_result *res);
static void node_validate_done(struct node *n, const struct hook_result *res);
static void node_upgrade_done(struct node *n, const struct hook_result *res);
static int node_on_bake_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void node_hook_finished(struct node *n, enum node_state which, const struct hook_result *res)
{
	switch (which) {
	case NODE_RUN_UPGRADE: node_upgrade_done(n, res); break;
	case NODE_RUN_CONFIG: node_config_done(n, res); break;
	case NODE_RUN_VALIDATE: node_validate_done(n, res); break;
	default: break;
	}
}

/* Starts the hook of state which; a hook not configured counts as success. */
static void node_run_hook(struct node *n, enum node_state which)
{
	_cleanup_(freep) char *why = NULL;
	const char *path = node_hook_path(n, which);
	const char *name = node_hook_name(which);
	int r;

	node_set_state(n, which, "running %s for %s", name, n->run.version);
	if (which == NODE_RUN_CONFIG || which == NODE_RUN_UPGRADE)
		node_catalog_config_started(n);
	if (!path || !*path) {
		struct hook_result ok = { .output = "" };
		log_fields(LOG_INFO, n->run.version, name, "no %s hook configured, skipping", name);
		node_hook_finished(n, which, &ok);
		return;
	}
	r = node_hook_spawn(n, name, path, n->run.version, node_on_run_hook, &n->run.hook, &why);
	if (r < 0) {
		struct hook_result bad = { .exit_code = 127, .output = or_none(why) };
		node_hook_finished(n, which, &bad);
	}
}

static void node_on_run_hook(struct hook *h, const struct hook_result *res, void *userdata)
{
	struct node *n = userdata;
	enum node_state which = n->state;

	/* res points into the hook: free it only after the result was used. */
	_cleanup_(hook_freep) struct hook *done = TAKE_PTR(n->run.hook);

	node_hook_done(n, h, n->run.version, res);
	if (n->stopping) {
		node_finish_stop(n);
		return;
	}
	node_hook_finished(n, which, res);
	/* The services hook may have waited for the config hook. */
	node_try_services(n);
}

/* "exited with status 1" and the tail of the output, for the status detail. */
static char *node_detail(const struct hook_result *res)
{
	_cleanup_(freep) char *what = hook_result_describe(res);
	_cleanup_(freep) char *tail = NULL;
	struct buf b = BUF_INIT;
	size_t room;

	/* The detail keeps its last SCHEMA_DETAIL_MAX bytes: cut the output
	 * here so that the reason in front survives a hook that printed a lot
	 * (utf8_tail never cuts a UTF-8 sequence). */
	(void)buf_adds(&b, or_none(what));
	room = SCHEMA_DETAIL_MAX > b.len + 1 ? SCHEMA_DETAIL_MAX - b.len - 1 : 0;
	if (utf8_tail(res->output ? res->output : "", room, &tail) >= 0 && *tail) {
		(void)buf_addc(&b, '\n');
		(void)buf_adds(&b, tail);
	}
	return buf_detach(&b);
}

/* --- history ---------------------------------------------------------------------- */

/* etcd refuses history/HOST to this host (a role made before it existed):
 * no history is kept, and no end txn carries it any more. */
static void node_history_denied(struct node *n)
{
	if (n->run.history_denied)
		return;
	n->run.history_denied = true;
	log_warnx("etcd refuses this host its run history: keeping none; "
		  "grant it with 'orchestrate node_identity'");
}

/* An end txn failed: when for the history, the next one goes without it. */
static void node_history_check_denied(struct node *n, int r)
{
	if (r == -EACCES && fleet_denied_history(&n->fleet))
		node_history_denied(n);
}

/* history/HOST's read ended. */
static void node_on_history(int result, struct run_history *old, void *userdata)
{
	struct node *n = userdata;

	n->run.history_read = NULL;
	if (result == -EACCES) {
		node_history_denied(n);
		return;
	}
	if (result < 0) {
		log_warnx("cannot read this host's run history: %s", node_etcd_error(n));
		return;
	}
	if (result > 0) {
		/* Runs ended before the read (it failed at start) go in front. */
		for (size_t i = n->run.history.n; i-- > 0;)
			if (run_history_prepend(old, &n->run.history.runs[i]) < 0)
				return;
		run_history_release(&n->run.history);
		n->run.history = *old;
		*old = (struct run_history){ 0 };
	}
	n->run.history_known = true;
}

void node_run_client_changed(struct node *n)
{
	n->run.history_read = NULL;	/* read again at the next run's end */
}

/* Reads history/HOST (at the first sync, or at a run's end when that read
 * failed), without blocking: the runs kept before this life of the daemon.
 * Until it is read the end txns leave the key alone rather than overwrite
 * older runs. */
static void node_history_load(struct node *n)
{
	int r;

	if (n->run.history_known || n->run.history_denied || n->run.history_read)
		return;
	r = fleet_history_read_start(&n->fleet, n->host, node_etcd_patience(n), node_on_history,
				     n, &n->run.history_read);
	if (r < 0)
		log_warnx("cannot read this host's run history: %s", strerror(-r));
}

/* A run ended: its entry goes in front of the history in memory (the end
 * txn writes it). */
static void node_history_add(struct node *n, const char *version, enum run_result result,
			     long attempt, const char *detail)
{
	_cleanup_(freep) char *error = NULL;
	int64_t now = fleet_now();
	struct run_entry e = {
		.version = (char *)version,
		.start = n->run.started > 0 ? n->run.started : now,
		.duration = n->run.started > 0 && now >= n->run.started ? now - n->run.started : -1,
		.result = result,
		.attempt = attempt,
	};

	if (!version)
		return;
	if (result != RUN_SUCCESS && run_error_line(detail, &error) >= 0)
		e.error = error;
	if (run_history_prepend(&n->run.history, &e) < 0)
		log_warnx("cannot add the run to the history: out of memory");
	n->run.started = 0;
}

/* The history in the end txn b: the one write it costs. */
static int node_batch_history(struct node *n, struct fleet_batch *b)
{
	node_history_load(n);
	if (!n->run.history_known || n->run.history_denied)
		return 0;
	return fleet_batch_history(b, n->host, &n->run.history);
}

/* --- what an outcome writes ------------------------------------------------------------ */

/* One more failed attempt at the run's rollout (a new rollout starts the
 * count again); its status value says how many and since when. */
static void node_count_failure(struct node *n, struct status_extra *x)
{
	if (!streq_ptr(n->run.fail_version, n->run.version) || n->run.fail_trigger != n->run.trigger) {
		set_str(&n->run.fail_version, n->run.version);
		n->run.fail_trigger = n->run.trigger;
		n->run.attempts = 0;
		n->run.first_failure = fleet_now();
	}
	n->run.attempts++;
	*x = (struct status_extra){ .attempts = n->run.attempts, .first_failure = n->run.first_failure };
}

/* The failure record the budget counts (fleet_rollout.h): once per rollout,
 * so a host failing again and again costs the fleet one event. */
static int node_batch_failure(struct node *n, struct fleet_batch *b, const char *stage)
{
	const struct fleet_model *m = &n->sync.model;
	int r;

	bool current = n->run.trigger > 0 && n->run.trigger == m->trigger &&
		       streq_ptr(n->run.version, m->desired);
	bool recorded = fleet_model_failed_here(m, false);

	/* Under a failure budget a failed host gives its slot back, so that
	 * the rollout goes on until the budget is spent; without one it keeps
	 * it, and a failure stops the rollout where it is.  The failure that
	 * spends the budget keeps its slot too: no other host may start
	 * between it and the halt (node_check_budget, once this record is
	 * seen).  max_fail_percent counts the alive hosts as read since the
	 * rollout's trigger (node_facts_prefetch at the run's start); when
	 * there is no such count, the host keeps its slot, the careful way. */
	if (n->rollout.slot != SLOT_NONE && current && m->policy_state == 1 &&
	    rollout_policy_has_budget(&m->policy)) {
		_cleanup_(freep) char *reason = NULL;
		r = node_budget_exceeded(n, fleet_model_failures(m) + !recorded, n->run.trigger,
					 &reason);
		if (r == 0 && (r = node_slot_batch_release(n, b)) < 0)
			return r;
	}
	if (!current || recorded)
		return 0;
	return fleet_batch_failure(b, n->host, n->run.version, n->run.trigger, n->run.attempts, stage);
}

/* A failure's txn (config or validation) ended (node_write.c): the slot it
 * gave back is free, or the failure stays unrecorded (the next run's outcome
 * writes the status again). */
static void node_failure_written(struct node *n, int r)
{
	node_history_check_denied(n, r);
	if (r < 0) {
		log_warnx("cannot record the failed run: %s", node_etcd_error(n));
		node_slot_release_written(n, r);
		return;
	}
	node_slot_release_written(n, 0);
}

/* A failed config (or upgrade) run: puppet/failed, and the node's services
 * not healthy (published the first time; written only if they were healthy
 * before).  One txn, in flight when this returns. */
static void node_record_config_failure(struct node *n, int exit_code, const char *detail,
				       const char *stage)
{
	struct fleet_batch *b = NULL;
	struct status_extra x;
	int r;

	node_count_failure(n, &x);
	node_history_add(n, n->run.version,
			 streq_ptr(stage, "deadline") ? RUN_DEADLINE : RUN_FAILED, x.attempts, detail);
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_status_extra(b, n->host, STATUS_PUPPET, STATE_FAILED, n->run.version,
					  exit_code, detail, &x)) < 0 ||
	    (r = node_batch_failure(n, b, stage)) < 0 ||
	    (r = node_batch_history(n, b)) < 0 ||
	    (r = node_batch_services(n, b, false, false)) < 0) {
		fleet_batch_free(b);
		node_services_forget_pending(n);
		node_failure_written(n, r);
		return;
	}
	if ((r = node_write_begin(n, b, "puppet/failed", node_failure_written)) < 0)
		node_failure_written(n, r);
}

static void node_success_written(struct node *n, int r);

/* Which attempt a successful run was at its rollout: 1, or one past the
 * failures counted at that same version and trigger. */
static long node_attempt(struct node *n, const char *version)
{
	if (n->run.attempts > 0 && streq_ptr(n->run.fail_version, version) &&
	    n->run.fail_trigger == n->run.trigger)
		return n->run.attempts + 1;
	return 1;
}

/* The writes of a run's end (node_record_end), in *ret. */
static int node_end_batch(struct node *n, const char *version, bool validated, int validation_code,
			  const char *detail, const char *stage, bool owed, struct fleet_batch **ret)
{
	_cleanup_(fleet_batch_freep) struct fleet_batch *b = NULL;
	struct status_extra x = { 0 };
	int r;

	if (!validated)
		node_count_failure(n, &x);
	/* The run's entry, once: a success owed is written again as it was. */
	if (!owed)
		node_history_add(n, version,
				 validated ? RUN_SUCCESS
				 : streq_ptr(stage, "deadline") ? RUN_DEADLINE : RUN_VALIDATION,
				 validated ? node_attempt(n, version) : x.attempts, detail);
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = node_batch_history(n, b)) < 0 ||
	    (r = fleet_batch_status(b, n->host, STATUS_PUPPET, STATE_SUCCESS, version,
				    n->run.config_exit_code, NULL)) < 0 ||
	    (r = fleet_batch_status_extra(b, n->host, STATUS_VALIDATION,
					  validated ? STATE_SUCCESS : STATE_FAILED, version,
					  validation_code, detail, &x)) < 0 ||
	    (r = node_batch_services(n, b, validated, false)) < 0)
		return r;
	if (!validated && (r = node_batch_failure(n, b, stage)) < 0)
		return r;
	if (validated &&
	    ((r = fleet_batch_running_version(b, n->host, version, n->lease.id)) < 0 ||
	     (r = fleet_batch_alive(b, n->host, version, (long)getpid(), n->lease.id)) < 0 ||
	     (r = node_slot_batch_release(n, b)) < 0 ||
	     (fleet_model_failed_here(&n->sync.model, true) &&
	      (r = fleet_batch_clear_failure(b, n->host)) < 0) ||
	     (n->rollout.slot == SLOT_CANARY && n->run.trigger == n->sync.model.trigger &&
	      (r = fleet_batch_canary(b, n->host, version, n->run.trigger)) < 0)))
		return r;
	*ret = TAKE_PTR(b);
	return 0;
}

/*
 * The end of a run whose config succeeded: puppet/success and the validation
 * state, with (on success) the running version, alive and the slot.  One txn,
 * in flight when this returns 0; its end goes to node_success_written() or
 * node_failure_written().  An error: nothing was sent.
 */
static int node_record_end(struct node *n, const char *version, bool validated,
			   int validation_code, const char *detail, const char *stage, bool owed)
{
	struct fleet_batch *b = NULL;
	int r;

	r = node_end_batch(n, version, validated, validation_code, detail, stage, owed, &b);
	if (r >= 0)	/* takes b whatever happens */
		r = node_write_begin(n, b, validated ? "the run's success" : "validation/failed",
				     validated ? node_success_written : node_failure_written);
	if (r < 0) {
		node_services_forget_pending(n);
		node_slot_release_written(n, r);
		return r;
	}
	return 0;
}

/* The success's txn ended: recorded, or owed (retried from idle after a
 * backoff: a refused write, or a lease etcd no longer knows, which
 * re-registration replaces first). */
static void node_success_written(struct node *n, int r)
{
	node_history_check_denied(n, r);
	if (r < 0) {
		log_fields(LOG_WARNING, n->run.local, NULL, "cannot record the run at '%s': %s, will retry",
			   or_none(n->run.local), node_etcd_error(n));
		node_slot_release_written(n, r);
		n->run.success_owed = true;
		node_retry_later(n);
		return;
	}
	if (n->run.success_owed)
		log_info("run at '%s' recorded", or_none(n->run.local));
	n->run.success_owed = false;
	node_retry_reset(n);
	node_slot_release_written(n, 0);
	n->run.attempts = 0;
	set_str(&n->run.fail_version, NULL);
}

/* From idle: writes again what a successful run could not. */
void node_retry_owed(struct node *n)
{
	if (!n->run.success_owed || !n->run.local || n->retry_timer || n->write)
		return;		/* nothing owed, its retry is not due yet, or in flight */
	if (node_record_end(n, n->run.local, true, 0, NULL, NULL, true) < 0) {
		log_warnx("cannot record the run at '%s': %s, will retry", n->run.local,
			  node_etcd_error(n));
		node_retry_later(n);
	}
}

/* The detail of a failed hook; past healthy_deadline, says so first. */
static char *node_failure_detail(struct node *n, const struct hook_result *res,
				 const char **ret_stage, const char *stage)
{
	_cleanup_(freep) char *detail = node_detail(res);
	char *out = NULL;

	*ret_stage = stage;
	if (!n->run.deadline_passed)
		return TAKE_PTR(detail);
	*ret_stage = "deadline";
	if (asprintf(&out, "healthy_deadline of %ld s passed, hook killed: %s",
		     n->sync.model.policy.healthy_deadline, or_none(detail)) < 0)
		return TAKE_PTR(detail);
	return out;
}

static void node_upgrade_done(struct node *n, const struct hook_result *res)
{
	if (res->exit_code != 0 || n->run.deadline_passed) {
		const char *stage;
		_cleanup_(freep) char *detail = node_failure_detail(n, res, &stage, "config");
		node_record_config_failure(n, res->exit_code, detail, stage);
		node_run_failed(n, n->run.deadline_passed ? "healthy_deadline" : "upgrade");
		return;
	}
	node_run_hook(n, NODE_RUN_CONFIG);
}

/* A first run's validation is still going: publish ahead of its end. */
static int node_on_publish_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	node_timer_cancel(&n->run.publish_timer);
	if (!n->catalog.published)
		(void)node_publish_services(n, false, false);
	return 0;
}

static void node_config_done(struct node *n, const struct hook_result *res)
{
	enum status_state st;
	char code[16];

	snprintf(code, sizeof(code), "%d", res->exit_code);
	st = res->signal || res->timed_out ? STATE_FAILED
					   : status_from_result(STATUS_PUPPET, code);
	/* The config hook saw the hiera file as it was when it started: a
	 * services run for that same file would only repeat it. */
	node_catalog_config_ended(n);
	if (st != STATE_SUCCESS || n->run.deadline_passed) {
		const char *stage;
		_cleanup_(freep) char *detail = node_failure_detail(n, res, &stage, "config");
		node_record_config_failure(n, res->exit_code, detail, stage);
		node_run_failed(n, n->run.deadline_passed ? "healthy_deadline" : "config");
		return;
	}
	n->run.config_exit_code = res->exit_code;
	/* After the first config run the node's services are published (not
	 * healthy until validation succeeds): this breaks the circular wait
	 * of two nodes depending on each other.  Later runs change them only
	 * at the end, and only if their value changed. */
	if (!n->catalog.published &&
	    node_timer_arm(n, &n->run.publish_timer, EARLY_PUBLISH_USEC, node_on_publish_timer) < 0)
		(void)node_publish_services(n, false, false);
	node_run_hook(n, NODE_RUN_VALIDATE);
}

static void node_validate_done(struct node *n, const struct hook_result *res)
{
	_cleanup_(freep) char *detail = NULL;
	_cleanup_(freep) char *version = NULL;
	bool ok = res->exit_code == 0 && !res->signal && !res->timed_out && !n->run.deadline_passed;
	long bake = n->sync.model.policy_state == 1 ? n->sync.model.policy.min_healthy_time : 0;
	int r;

	node_timer_cancel(&n->run.publish_timer);	/* the end txn publishes */
	if (!ok) {
		const char *stage;
		detail = node_failure_detail(n, res, &stage, "validation");
		if ((r = node_record_end(n, n->run.version, false, res->exit_code, detail, stage,
				    false)) < 0)
			node_failure_written(n, r);
		n->run.validation_failed = true;
		node_run_failed(n, n->run.deadline_passed ? "healthy_deadline" : "validation");
		return;
	}
	node_timer_cancel(&n->run.deadline_timer);
	if (!n->run.baked && bake > 0 && node_slot_held(n)) {
		/* min_healthy_time: the host keeps its slot (so the rollout
		 * does not move on) and validates again at the end. */
		n->run.baked = true;
		if (!n->catalog.published)	/* the end is min_healthy_time away */
			(void)node_publish_services(n, false, false);
		node_set_state(n, NODE_BAKE, "validated %s, validating again in %ld s (min_healthy_time)",
			       n->run.version, bake);
		if (node_timer_arm(n, &n->run.timer, (uint64_t)bake * USEC_PER_SEC,
				   node_on_bake_timer) >= 0)
			return;
	}
	version = TAKE_PTR(n->run.version);
	r = node_write_local(n, version);
	if (r < 0) {
		log_fields(LOG_ERR, version, NULL, "cannot write local version file '%s': %s",
			   n->opt.local_version_file, strerror(-r));
		n->run.version = TAKE_PTR(version);
		node_run_failed(n, "local version file");
		return;
	}
	/* The run succeeded whatever etcd says now; a failed write is owed and
	 * retried from idle, or the fleet would never see this host at VERSION.
	 * What a passing validate hook printed (the shipped one warns when no
	 * check ran) goes into the detail too. */
	if (res->output && *res->output)
		detail = node_detail(res);
	set_str(&n->run.running_published, version);
	if ((r = node_record_end(n, version, true, 0, detail, NULL, false)) < 0)
		node_success_written(n, r);
	n->run.validation_failed = false;
	n->run.rerun = false;
	n->run.failures = 0;
	free(n->run.previous);
	n->run.previous = NULL;
	/* The end txn gives the slot back (node_success_written); only the
	 * wait for an earlier group ends here. */
	node_unwatch_stage(n);
	log_fields(LOG_NOTICE, version, NULL, "now at version '%s'", version);
	node_set_state(n, NODE_IDLE, "idle at %s", version);
	node_schedule_evaluate(n);
}

static int node_on_bake_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	node_timer_cancel(&n->run.timer);
	node_run_hook(n, NODE_RUN_VALIDATE);
	return 0;
}

/* healthy_deadline: the run has not validated in time.  Its hook is killed
 * (TERM, then KILL after the grace); its end counts as a failure. */
static int node_on_healthy_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	node_timer_cancel(&n->run.deadline_timer);
	if (!n->run.hook)
		return 0;
	n->run.deadline_passed = true;
	log_fields(LOG_WARNING, n->run.version, NULL,
		   "healthy_deadline of %ld s passed before validation: killing the hook",
		   n->sync.model.policy.healthy_deadline);
	hook_kill(n->run.hook, SIGTERM);
	return 0;
}

static int node_on_run_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	node_timer_cancel(&n->run.timer);
	if (n->state == NODE_SPLAY)
		n->run.splay_done = true;
	node_schedule_evaluate(n);
	return 0;
}

/* A failed run: capped exponential backoff with full jitter, then retry. */
static void node_run_failed(struct node *n, const char *what)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(freep) char *version = TAKE_PTR(n->run.version);
	const struct backoff b = { sec_to_usec((double)cfg->retry_min),
				   sec_to_usec((double)cfg->retry_max),
				   sec_to_usec((double)cfg->retry_min) };
	uint64_t delay;

	n->run.failures++;
	node_timer_cancel(&n->run.deadline_timer);
	n->run.deadline_passed = false;
	if (n->once) {
		log_fields(LOG_WARNING, version, NULL, "%s failed for '%s'", what, or_none(version));
		node_once_finish(n, 1);
		return;
	}
	delay = backoff_delay(&b, n->run.failures);
	node_set_state(n, NODE_BACKOFF, "%s failed for %s (%u\u00d7), retrying in %llu s", what,
		       or_none(version), n->run.failures,
		       (unsigned long long)((delay + USEC_PER_SEC / 2) / USEC_PER_SEC));
	if (node_timer_arm(n, &n->run.timer, delay, node_on_run_timer) < 0)
		node_schedule_evaluate(n);
}

/*
 * The txn that moves the host to running carries the start guard
 * (fleet_model_guard_start): it holds only while no failure record, halt,
 * canary record, policy or pause was written and current_version did not
 * move since the model's view.  Two hosts deciding on views a revision apart
 * can no longer both start past a spent budget: the later txn fails, and the
 * host decides again once its stream has brought what changed.  A retry
 * writes no status (it keeps its failed one) and sends the guard alone.
 */
static int node_start_batch(struct node *n, bool retry, struct fleet_batch **ret)
{
	_cleanup_(fleet_batch_freep) struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (!retry && (r = fleet_batch_status(b, n->host, STATUS_PUPPET, STATE_RUNNING,
					       n->run.version, 0, NULL)) < 0) ||
	    (r = fleet_model_guard_start(&n->sync.model, b)) < 0 ||
	    (r = node_slot_batch_mark(n, b)) < 0)
		return r;
	*ret = TAKE_PTR(b);
	return 0;
}

static void node_start_written(struct node *n, int r);

/*
 * Starts a run for the desired version: its first write, in flight when this
 * returns (NODE_RUN_START); node_start_written() goes on from its answer.
 * Returns false when no run starts (the last start's guard failed and the
 * change behind it is not in the model yet).
 */
bool node_start_run(struct node *n)
{
	struct fleet_batch *b = NULL;
	int r;

	if (n->run.start_refused)
		return false;	/* the change that refused it is not in the model yet */
	/* A retry leaves the failed status in place, with its attempts: a
	 * failure stays visible (and counted by get_failures) until a run
	 * succeeds. */
	n->run.start_retry = node_failed_here(n);
	set_str(&n->run.version, n->sync.model.desired);
	n->run.trigger = n->sync.model.trigger;
	if ((r = node_start_batch(n, n->run.start_retry, &b)) >= 0)
		r = node_write_begin(n, b, "puppet/running", node_start_written);
	if (r < 0) {
		node_start_written(n, r);
		return true;
	}
	node_set_state(n, NODE_RUN_START, "starting the run for %s", n->run.version);
	return true;
}

static int node_on_refused_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;

	node_timer_cancel(&n->run.refused_timer);
	n->run.start_refused = false;
	node_schedule_evaluate(n);
	return 0;
}

static void node_start_written(struct node *n, int r)
{
	long deadline = n->sync.model.policy_state == 1 ? n->sync.model.policy.healthy_deadline : 0;

	node_slot_start_written(n, r);
	if (r == -ECANCELED) {
		/* Decided again when the change that refused it reaches the
		 * model (node_sync.c), and after a backoff in any case: the
		 * change may be one the model never shows, such as this host's
		 * own earlier start, given up on and applied late, which moved
		 * puppet/running after this send's settle point.  Waiting for
		 * the model alone left such a host idle until the next trigger. */
		n->run.start_refused = true;
		log_info("the rollout of %s changed as this host was about to start: deciding again",
			 n->run.version);
		node_set_state(n, NODE_IDLE, "the rollout of %s changed: deciding again",
			       n->run.version);
		set_str(&n->run.version, NULL);
		if (node_timer_arm(n, &n->run.refused_timer, node_next_retry_delay(n),
				   node_on_refused_timer) < 0)
			log_warnx("cannot arm the timer to decide again");
		return;
	}
	if (n->stopping) {
		/* Stopped while the write was in flight: no hook starts (the
		 * stop goes on after this).  A start that landed is found and
		 * recorded as interrupted by the next sync. */
		set_str(&n->run.version, NULL);
		return;
	}
	n->run.splay_done = false;
	n->run.baked = false;
	n->run.deadline_passed = false;
	set_str(&n->run.previous, n->run.local);
	node_pending_said(n, NULL);
	if (r < 0) {
		/* Without puppet/running the fleet could not see the run: retry. */
		log_warnx("cannot set puppet/running: %s", node_etcd_error(n));
		node_run_failed(n, "status update");
		return;
	}
	node_retry_reset(n);
	n->run.started = fleet_now();
	node_facts_prefetch(n);
	if (n->run.start_retry)
		log_fields(LOG_INFO, n->run.version, NULL,
			   "attempt %ld at %s (failed since %lld)", n->run.attempts + 1, n->run.version,
			   (long long)n->run.first_failure);
	if (n->catalog.hiera_error)
		node_write_hiera(n);
	if (n->catalog.hiera_error) {
		/* The config run would read a stale catalog: fail it, visibly. */
		node_record_config_failure(n, -1, n->catalog.hiera_error, "config");
		node_run_failed(n, "hiera file");
		return;
	}
	if (deadline > 0 &&
	    node_timer_arm(n, &n->run.deadline_timer, (uint64_t)deadline * USEC_PER_SEC,
			   node_on_healthy_deadline) < 0)
		log_warnx("cannot arm the healthy_deadline timer");
	node_run_hook(n, n->opt.config->hook_upgrade && *n->opt.config->hook_upgrade
				 ? NODE_RUN_UPGRADE : NODE_RUN_CONFIG);
}

/* --- the run's part of the node's life ---------------------------------------------- */

/* The interrupted run's records' write ended. */
static void node_interrupted_put(struct node *n, int r)
{
	if (r < 0)
		log_warnx("cannot record the interrupted run: %s", node_etcd_error(n));
}

/* At the first sync: a run this daemon was doing when it died is recorded as
 * failed and repeated; a failed validation is remembered across restarts.
 * The statuses are the ones the sync's read found (fleet_model.h: own_puppet,
 * own_validation), so this reads nothing; what it records goes in one write,
 * queued and patient as a run's end. */
static void node_run_check_interrupted(struct node *n, bool *ret_healthy)
{
	const struct fleet_model *m = &n->sync.model;
	const char *desired = m->desired;
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0) {
		node_interrupted_put(n, r);
		return;
	}
	if (m->own_puppet == STATE_RUNNING) {
		log_warnx("found this host's puppet/running from an earlier run: it was interrupted");
		/* puppet/failed and the run's entry in the history (when and
		 * how long it ran is not known: found now). */
		if (desired)
			node_history_add(n, desired, RUN_INTERRUPTED, 0, "interrupted");
		if ((r = fleet_batch_status(b, n->host, STATUS_PUPPET, STATE_FAILED, desired, -1,
					    "interrupted")) < 0 ||
		    (r = node_batch_history(n, b)) < 0)
			log_warnx("cannot record the interrupted run: %s", strerror(-r));
		n->run.rerun = true;
	}
	if (m->own_validation == STATE_RUNNING) {
		if ((r = fleet_batch_status(b, n->host, STATUS_VALIDATION, STATE_FAILED, desired, -1,
					    "interrupted")) < 0)
			log_warnx("cannot record the interrupted validation: %s", strerror(-r));
		n->run.validation_failed = true;
	} else if (m->own_validation == STATE_FAILED) {
		n->run.validation_failed = true;
	}
	*ret_healthy = m->own_validation == STATE_SUCCESS;
	if (fleet_batch_empty(b))
		fleet_batch_free(b);	/* nothing was interrupted */
	else if ((r = node_write_begin(n, b, "the interrupted run's records",
				       node_interrupted_put)) < 0)
		node_interrupted_put(n, r);
	/* A host that failed at this rollout before the restart is still
	 * failed: its retry keeps the failed status, and the count goes on. */
	_cleanup_(rollout_record_releasep) struct rollout_record rec = { 0 };
	if (fleet_model_own_failure(m, &rec)) {
		set_str(&n->run.fail_version, rec.version);
		n->run.fail_trigger = rec.trigger;
		n->run.attempts = rec.attempts > 0 ? rec.attempts : 1;
		n->run.first_failure = rec.time;
	}
}

/* running_version/HOST's write at the first sync ended. */
static void node_running_put(struct node *n, int r)
{
	if (r >= 0)
		return;
	n->run.success_owed = true;
	log_warnx("cannot put running_version %s: %s, will retry", or_none(n->run.local),
		  node_etcd_error(n));
	node_retry_later(n);
}

void node_run_recover(struct node *n, bool *ret_healthy)
{
	struct fleet_batch *b = NULL;
	int r;

	*ret_healthy = false;
	node_history_load(n);
	node_run_check_interrupted(n, ret_healthy);
	/* The local version is the one whose run and validation last
	 * succeeded here, and the host runs it until a new run ends: put
	 * running_version again under the new lease (the old one may have
	 * expired while the daemon was down), unless the last run was
	 * interrupted or its validation failed.  A write like the run's end:
	 * queued, settled, owed when it fails. */
	if (!n->run.local || n->run.running_published || n->run.rerun || n->run.validation_failed)
		return;
	set_str(&n->run.running_published, n->run.local);
	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = fleet_batch_running_version(b, n->host, n->run.local, n->lease.id)) < 0) {
		fleet_batch_free(b);
		node_running_put(n, r);
		return;
	}
	if ((r = node_write_begin(n, b, "running_version", node_running_put)) < 0)
		node_running_put(n, r);
}

void node_run_model_moved(struct node *n)
{
	n->run.start_refused = false;
}

void node_run_check_target(struct node *n)
{
	const char *desired = n->sync.model.desired_known ? n->sync.model.desired : NULL;

	if (!desired || streq_ptr(desired, n->run.target))
		return;
	set_str(&n->run.target, desired);
	/* A new version is a new target: retry at once, from the start of
	 * the backoff. */
	n->run.failures = 0;
	if (n->state == NODE_BACKOFF || n->state == NODE_HALTED)
		node_timer_cancel(&n->run.timer);
}

bool node_run_splay(struct node *n, const char *before)
{
	uint64_t delay;

	if (n->opt.config->splay <= 0 || n->run.splay_done)
		return false;
	/* The splay is said to the journal and to systemd, not to etcd: it
	 * exists to spread the fleet's writes over timing.splay, and a
	 * puppet/pending written by every host the moment the trigger comes
	 * would be the very burst it spreads, and a third write per run. */
	delay = random_between(0, sec_to_usec((double)n->opt.config->splay));
	node_set_state(n, NODE_SPLAY, "splay %.1f s before %s for %s",
		       (double)delay / (double)USEC_PER_SEC, before, n->sync.model.desired);
	if (node_timer_arm(n, &n->run.timer, delay, node_on_run_timer) < 0) {
		n->run.splay_done = true;
		return false;
	}
	return true;
}

void node_run_idle(struct node *n)
{
	node_timer_cancel(&n->run.timer);
	n->run.failures = 0;
	n->run.splay_done = false;
}

void node_run_stop(struct node *n)
{
	node_timer_cancel(&n->run.timer);
	node_timer_cancel(&n->run.deadline_timer);
	node_timer_cancel(&n->run.refused_timer);
	node_timer_cancel(&n->run.publish_timer);
}

void node_run_abandon(struct node *n)
{
	n->run.hook = hook_free(n->run.hook);
}

void node_run_release(struct node *n)
{
	node_run_stop(n);
	node_run_abandon(n);
	free(n->run.version);
	free(n->run.previous);
	free(n->run.target);
	free(n->run.local);
	free(n->run.fail_version);
	free(n->run.running_published);
	fleet_call_cancel(n->run.history_read);
	n->run.history_read = NULL;
	run_history_release(&n->run.history);
	n->run = (struct node_run){ 0 };
}
