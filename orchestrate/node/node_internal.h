/*
 * node_internal.h — what the files of the node share and nobody else sees.
 *
 * The node is one object on one sd-event loop, split by concern; each file
 * owns one part of struct node (below) and is the only one to write it:
 *
 *   node.c          the state machine: node_set_state(), node_evaluate() (the
 *                   one place decisions are made), idle, --once, stop, reload,
 *                   life cycle, metrics, what puppet/pending says
 *   node_lease.c    the lease: grant, keepalive at a third of the granted TTL,
 *                   registration, every leased key put again after a loss
 *   node_sync.c     the fleet model (fleet_model.h): one read at one revision,
 *                   then one watch stream whose events are applied to memory
 *   node_catalog.c  the eventually consistent side: hiera file, debounce,
 *                   services hook; and this node's own service entries
 *   node_rollout.c  dependencies and the rollout slot (policy, holders, stages,
 *                   the failure budget, halts, promote)
 *   node_queue.c    the node's place in the slot queue: a look at the keys just
 *                   ahead, and a stream over the one that decides its turn
 *   node_facts.c    what those decisions need beyond the model, read without
 *                   blocking and kept while it is as new as the model
 *   node_run.c      the consistent side: the run's hooks and what each outcome
 *                   writes (one txn at the start, one at the end), and the
 *                   recovery of a run the last life of the daemon left
 *   node_write.c    the writes of the node's decisions, one at a time,
 *                   asynchronous and settled
 *
 * Stream callbacks apply events to the model, note what changed (the
 * catalog's debounce, a refused start that may go again) and schedule an
 * evaluation; every decision runs from the deferred evaluate source, never
 * inside a callback of the etcd client.
 */
#ifndef ORCHESTRATE_NODE_INTERNAL_H
#define ORCHESTRATE_NODE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "base/backoff.h"
#include "base/strv.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_facts.h"
#include "fleet/fleet_model.h"
#include "fleet/fleet_queue.h"
#include "fleet/fleet_rollout.h"
#include "hook/hook.h"
#include "output/metrics.h"
#include "node/node.h"
#include "config/config.h"
#include "config/options.h"

#define USEC_PER_SEC 1000000ULL

/* This node's service entries as one write carries them: the names and the
 * value each gets (node_catalog.c makes them, node_write.c carries them). */
struct node_services {
	char **names;
	char **values;
};

/* One metrics slot per hook kind (config.h's CONFIG_HOOK_KINDS). */
#define NODE_HOOK_M(kind) HOOK_M_##kind,
enum { CONFIG_HOOK_KINDS(NODE_HOOK_M) _HOOK_M_MAX };
#undef NODE_HOOK_M

/*
 * The node's state, one part per file: each part is written by its own file
 * only (scripts/check-layers checks it); the others read it, or ask the
 * owner through a function of node_internal.h.  The loop, the options, the
 * client and the state machine (the fields at the top) are node.c's.
 */

/* node_lease.c */
struct node_lease {
	int64_t id;
	long ttl;			/* the TTL etcd granted */
	bool registered;
	bool keys_lost;			/* a new lease whose keys are not all put */
	bool expired;			/* ...and etcd no longer knows that lease */
	bool reregistering;		/* the leased keys' write is in flight */
	struct etcd_call *register_call; /* the first registration's txn in flight */
	/* the first registration is in flight: who waits for its end */
	void (*register_done)(struct node *n, int error);
	sd_event_source *keepalive;	/* the next keepalive's timer */
	struct etcd_call *keepalive_call; /* the keepalive in flight, or NULL */
	struct etcd_call *revoke_call;	/* the stop's revoke in flight, or NULL */
	struct etcd_call *regroup_call;	/* a reload's new group in flight, or NULL */
	bool revoke_sent;		/* the stop revoked it (or tried) */
	uint64_t keepalive_sent;	/* when it was sent (CLOCK_MONOTONIC usec) */
	uint64_t refreshed;		/* when the last one etcd answered was sent */
	unsigned keepalive_failures;	/* in a row, for the backoff */
	uint64_t regrants;
	bool gone;			/* etcd said so; the grant is not answered yet */
	int64_t asking;			/* the id the grant under way asks for */
	unsigned asks;			/* ...and how many times it was sent */
	/* Leases lost to a busy etcd: each doubles the TTL a new lease asks
	 * for (node_lease_ttl_asked), up to NODE_LEASE_DOUBLINGS_MAX. */
	unsigned doublings;
	uint64_t backlog_seen;		/* fleet_lease_backlog_answers() at the last answer */
	uint64_t backlog_sent;		/* ...when the keepalive in flight went */
	unsigned late_refusals;		/* past the lease's time, in a row */
};

/* node_sync.c: the fleet model and its stream */
struct node_sync {
	struct fleet_model model;
	bool synced;			/* the first sync is done (READY=1 sent) */
	struct etcd_watch *stream;	/* the one stream: version, pause, rollout, catalog */
	struct etcd_call *read;		/* the model's read in flight, or NULL, */
	struct fleet_model fresh;	/* ...into this, swapped in when it ends */
	sd_event_source *resync;
	unsigned failures;		/* syncs failed in a row, for the backoff */
};

/* node_catalog.c: the eventually consistent run */
struct node_catalog {
	sd_event_source *debounce;
	uint64_t debounce_first;
	unsigned hiera_gen;		/* bumped whenever the hiera file changed */
	unsigned services_gen;		/* hiera_gen the services hook last covered */
	unsigned services_running_gen;
	unsigned config_gen;		/* hiera_gen when the config hook started */
	struct hook *services_hook;
	char *hiera_error;		/* why the hiera file could not be written */
	char **published;		/* services published under the lease... */
	char **published_values;	/* ...and the value each holds, to write only changes */
	struct node_services staged;	/* what node_batch_services() added, until queued */
	bool services_healthy;
};

/* node_facts.c: what a decision needs beyond the model */
struct node_facts {
	struct fleet_facts have;	/* the newest read (revision 0: none) */
	struct etcd_call *read;		/* one at a time */
	int64_t seen;			/* the newest stage-watch event's revision */
	bool answered;			/* the last read answered, none started since */
};

/* node_queue.c: the node's place in the slot queue, followed without
 * every other holder's event (fleet_queue.h) */
struct node_queue {
	int64_t created;		/* our key's create revision; 0: not queued */
	struct queue_look look;		/* the last look, or the one in flight */
	struct queue_tail before;	/* who queued just before, when the write said */
	struct etcd_call *read;		/* the look in flight */
	bool known;			/* look answers for created, and nothing moved since */
	int64_t moved;			/* the newest event that may have moved us */
	/* look.ahead counts the keys created below counts_below (our own key's
	 * create revision, or, taken from the mark of the host just ahead, the
	 * keys up to its key's), as they were at count_basis, less the releases
	 * since: exactly at counted_at, the newest release the stream gave
	 * (whether counted or not); it is the place a mark may carry from
	 * exact_from on (fleet_queue.h).
	 * Releases up to replayed_to were another's to see: counted, not
	 * checked for a dead holder. */
	int64_t counts_below;
	int64_t count_basis;
	int64_t counted_at;
	int64_t exact_from;
	int64_t replayed_to;
	struct etcd_watch_part *stream;	/* the key just ahead, or every release, on n->sync.stream */
	char *following;		/* whose key it follows; NULL: the releases */
	bool stream_failed;		/* started again after the next look */
	bool count_compacted;		/* the count before its key is gone: read ahead */
	uint64_t releases;		/* releases seen while first (progress_deadline) */
	uint64_t reads;			/* looks sent (the metrics) */
	uint64_t scans;			/* ...that read the queue itself */
	bool no_tail;			/* etcd refused the tail: written no more */
	uint64_t look_sent;		/* when the last look went (node_pace.c) */
	/* Holders that were running when their key went (the first waiter's
	 * dead-holder checks): host, and the deletion's revision. */
	struct rollout_holder *released;
	size_t n_released;
};

/* node_rollout.c: dependencies and the rollout slot */
enum node_slot {
	SLOT_NONE,		/* no rollout/holders/HOST of ours */
	SLOT_QUEUED,		/* ours, waiting for its turn */
	SLOT_HELD,		/* one of the slots: the run may start */
	SLOT_CANARY,		/* ...taken as one of the canaries */
};
struct node_rollout {
	enum node_slot slot;
	bool marked;			/* the start that marks the slot's key was written */
	bool release_sent;		/* a write in flight gives the slot back */
	/* Only while an earlier group is behind: running_version/ and alive/,
	 * two ranges on the node's stream (fleet_stage_follow). */
	struct etcd_watch_part *stage_watch[2];
	bool stage_watch_failed;	/* a range ended: added again from the loop */
	sd_event_source *stage_timer;	/* the next look at the earlier groups */
	int64_t stage_seen;		/* the newest revision the stage watch sent */
	sd_event_source *progress_timer;	/* progress_deadline, first waiting */
	uint64_t progress_releases;	/* queue.releases when it was armed */
	int64_t halt_revision;		/* of the halt this node wrote (node_halt_pending) */
	/* A halt in the making (node_halt): previous_version's read, when it
	 * reverts, then its write.  While either is in flight the node starts
	 * no run and sends no second halt. */
	bool halting;
	bool revert_refused;		/* etcd refused the revert: sent again without it */
	struct rollout_halt halt;	/* what it writes */
	struct etcd_call *halt_read;	/* previous_version's read in flight */
	/* Holders deleted since this node, first waiting, last looked
	 * (node_check_released): looked at one at a time, a read at the
	 * deletion's revision and maybe the dead host's record. */
	struct dead_holder **dead;
	size_t n_dead;
	bool dead_busy;			/* the first's read or record write in flight */
	struct etcd_call *dead_read;	/* the first's read in flight */
	int64_t *dead_written;		/* revisions of the records written here that... */
	size_t n_dead_written;		/* ...the model may not hold yet */
	int64_t promoted_trigger;	/* the trigger its automatic promote was sent for */
	/* The stage gate this node last wrote (node_stage_turn): for which
	 * trigger, over which mod revision of the key, how far the model held
	 * the gates when it went, and the revision it landed at (0: not
	 * answered yet; -1: its guard refused it, and what refused it, a
	 * change to the key or the trigger, is on its way). */
	int64_t gate_trigger, gate_mod, gate_sent_seen, gate_written;
	bool gate_claim;		/* that write claimed (else it opened) */
	int64_t gate_drop_mod;		/* a stale claim given up, at that mod revision */
	/* etcd refused this host the gates (a role made before they
	 * existed): it reads the earlier groups itself, as --once does */
	bool gate_refused;
	/* Its claim waits a random delay (node_stage_turn), for this trigger
	 * and this state of the key; due once the timer fired. */
	sd_event_source *gate_timer;
	int64_t gate_due_trigger, gate_due_mod;
	bool gate_armed;		/* the delay runs or ran, for those */
	bool gate_due;
	int64_t budget_trigger;		/* the failure count last checked against... */
	size_t budget_count;		/* ...the budget, so it is checked once */
};

/* node_run.c: the consistent run */
struct node_run {
	sd_event_source *timer;		/* splay, backoff or min_healthy_time */
	struct hook *hook;
	char *version;
	char *previous;
	char *target;			/* the desired version failures counts for */
	int config_exit_code;		/* of this run's config hook */
	char *local;			/* the local version, NULL when none */
	bool validation_failed;
	bool rerun;			/* an interrupted run must be repeated */
	bool splay_done;
	bool start_refused;		/* the start's guard failed: wait for the stream */
	bool start_retry;		/* the start in flight retries a failed run */
	unsigned failures;		/* consecutive, for the backoff */
	/* Honest states: the failures at one rollout (version and trigger). */
	char *fail_version;
	int64_t fail_trigger;
	long attempts;			/* failed attempts at fail_version */
	int64_t first_failure;		/* unix time of the first */
	int64_t trigger;		/* the trigger the run started at */
	sd_event_source *deadline_timer;	/* healthy_deadline of this run */
	sd_event_source *refused_timer;	/* a start refused: decide again after it */
	sd_event_source *publish_timer;	/* a first run's early publication */
	bool deadline_passed;
	bool baked;			/* min_healthy_time is over (or not needed) */
	char *running_published;	/* version of running_version/HOST we put (or owe) */
	bool success_owed;		/* the end-of-run txn failed: retried when idle */
	/* history/HOST: this host's last runs, newest first, read back once at
	 * the first sync and rewritten whole by each run's end txn. */
	struct run_history history;
	bool history_known;		/* read (or found absent): safe to rewrite */
	struct etcd_call *history_read;	/* its read, in flight */
	bool history_denied;		/* etcd refuses it to this host: none kept */
	int64_t started;		/* unix time the run's hooks started; 0: none */
};

struct node {
	sd_event *event;
	struct options_resolved opt;	/* owns the config, endpoints, hostname */
	const struct global_options *global;
	bool once;
	int once_exit;			/* --once ends with this - 1 after the write */
	int exit_code;

	struct fleet fleet;		/* the client and the prefix (fleet_connect) */
	const char *host;

	enum node_state state;
	char *status;			/* the STATUS= text last sent */
	sd_event_source *evaluate;
	sd_event_source *retry_timer;	/* node_retry_later() */
	unsigned retry_failures;	/* writes failed in a row, for its backoff */
	sd_event_source *once_deadline;
	bool paused;
	char *pause_reason;
	char *pending_detail;		/* what puppet/pending says now ("wait: detail") */

	struct node_lease lease;
	struct node_sync sync;
	struct node_catalog catalog;
	struct node_rollout rollout;
	struct node_queue queue;
	struct node_facts facts;
	struct node_run run;
	struct node_write *write;	/* writes in flight, first first (node_write.c) */
	struct pace pace;		/* how fast it writes (node_pace.c), µs */
	uint64_t pace_strains;		/* signs of a backlog it widened for */
	uint64_t pace_last_wait;	/* how long its last answered request waited */
	int64_t write_revision;		/* where the write whose done runs landed (node_write.c) */

	/* metrics (paths.metrics_file) */
	struct metrics_hook hook_metrics[_HOOK_M_MAX];
	uint64_t hook_started[_HOOK_M_MAX];	/* CLOCK_MONOTONIC µs, 0: not running */

	/* stop */
	bool stopping;			/* no new work: stopping or --once ending */
	bool stop_requested;		/* node_stop() was called */
	bool stop_recorded;		/* the stop queued what etcd should know */
	bool stop_final;		/* the stop's grace is over: exit now */
	sd_event_source *stop_timer;
};

/* node.c */
/* The event loop's monotonic time, µs: the clock of every node timer. */
uint64_t node_now(struct node *n);
void node_set_state(struct node *n, enum node_state state, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void node_schedule_evaluate(struct node *n);
/* A write the decision needs (a slot, a halt, a run's record) failed: decide
 * again after a backoff, from the model the stream keeps current — never a
 * re-read, which would turn every failed write into a read of the whole
 * model and a new stream. */
void node_retry_later(struct node *n);
/* The backoff of a failed write the node must make again (a slot, a halt, a
 * run's record, a registration after a lost lease): 1 s at first, doubling up
 * to 30 s, full jitter above half a second, so that nodes whose writes failed
 * together (a slow etcd) come back apart. */
extern const struct backoff node_write_backoff;
/* The decision's writes went through: the next failure starts the backoff
 * afresh. */
void node_retry_reset(struct node *n);
/* The next delay of that backoff, counting one more failure (a refused start
 * waits by it too). */
uint64_t node_next_retry_delay(struct node *n);
/* What puppet/pending says now ("wait: detail"), so that it is written once
 * per change; NULL: nothing said (the next wait writes it). */
void node_pending_said(struct node *n, const char *key);
/* Starts the hook of kind (one of CONFIG_HOOK_KINDS) at path for version,
 * its end to fn, *ret the hook: with the environment of every hook
 * (node_build_env) and its start in the metrics.  On failure it says why in
 * the journal and *ret_why (caller frees), counts an exit 127 in the
 * metrics, and returns the error.  The run and the services hook both start
 * theirs here, and end them with node_hook_done(). */
int node_hook_spawn(struct node *n, const char *kind, const char *path, const char *version,
		    hook_done_fn fn, struct hook **ret, char **ret_why);
/* A hook ended: its journal line and the metrics. */
void node_hook_done(struct node *n, struct hook *h, const char *version,
		    const struct hook_result *res);
void node_once_finish(struct node *n, int code);
void node_finish_stop(struct node *n);
/* node_timer_arm_exact: fires at the delay itself, not within sd-event's default
 * accuracy (250 ms, placed differently on each machine). */
int node_timer_arm_exact(struct node *n, sd_event_source **s, uint64_t delay_usec,
			 sd_event_time_handler_t fn);
int node_timer_arm(struct node *n, sd_event_source **s, uint64_t delay_usec,
		   sd_event_time_handler_t fn);
void node_timer_cancel(sd_event_source **s);
/* A counter of the metrics file changed outside a state change or a hook's
 * end (a lease granted again): the file is written now. */
void node_metrics_changed(struct node *n);
uint64_t sec_to_usec(double s);
void set_str(char **p, const char *s);
const char *or_none(const char *s);
/* What the last etcd request failed on, for a log line: etcd's words, or when
 * etcd refused a write, "etcd: permission denied writing CLASS as user 'U'"
 * (which also goes to STATUS=, so that a host whose identity lacks a grant
 * shows it while it keeps running and retrying).  Static storage. */
const char *node_etcd_error(struct node *n);

/* How long a write (node_write.c) or a lease grant waits for etcd's answer:
 * past etcd's own request timeout (about 7 s), so that a slow etcd answers
 * rather than the node giving up on a request etcd is still working on. */
#define NODE_ETCD_PATIENCE_MS 30000L
/* The patience of a read the node waits for (the model's, its facts, the
 * registration): --once gives etcd its request timeout alone (0), since
 * cron waits behind it. */
static inline long node_etcd_patience(const struct node *n)
{
	return n->once ? 0 : NODE_ETCD_PATIENCE_MS;
}

/* node_write.c: the writes of a version change, one at a time in order,
 * asynchronous, settled.  done gets 0 (written), -ECANCELED (a guard failed,
 * nothing written) or a definite error; the node evaluates again after the
 * last write ended. */
typedef void (*node_write_fn)(struct node *n, int error);
/* Takes batch (freed whatever happens) and queues it behind any write in
 * flight: 0, or the error of its first send (done never runs then); 1 when
 * the batch is empty (nothing to write, done never runs). */
int node_write_begin(struct node *n, struct fleet_batch *batch, const char *what,
		     node_write_fn done);
/* In a write's done function: the revision it was written at (0 when it was
 * not), e.g. to know when the stream has brought it to the model. */
int64_t node_write_revision(const struct node *n);
/* Forgets the write in flight (a stop past its grace): done never runs. */
void node_write_abandon(struct node *n);
/* Stopping: a write waiting to be sent again is forgotten; one whose send is
 * in flight is waited for (within the stop's grace). */
void node_write_stop(struct node *n);

/* node_pace.c */
/* A sign that etcd is behind (why, for the log), from a request that waited
 * waited µs: widens the pace. */
void node_pace_strained(struct node *n, const char *why, uint64_t waited);
/* An answer to a request sent at sent (node_now(); 0: unknown), or
 * its error: a slow one or a timeout widens the pace, a prompt one narrows
 * it. */
void node_pace_answered(struct node *n, int error, uint64_t sent);
/* How long the node's next write waits first: 0 at full speed. */
uint64_t node_pace_delay(struct node *n);
/* How long the node's last answered request waited (0: none yet): what
 * etcd's answers take now. */
uint64_t node_pace_last_wait(const struct node *n);
/* A retry's delay: the larger of its backoff delay and the pace's. */
uint64_t node_paced(struct node *n, uint64_t delay);

/* node_lease.c */
/* The first registration, asynchronous: done(n, 0 or the error) at its end. */
int node_register_begin(struct node *n, node_write_fn done);
/* Stops the keepalive (its timer and any call in flight). */
void node_keepalive_stop(struct node *n);
/* Sends a keepalive now on the node's current client (after a reconnect). */
void node_keepalive_restart(struct node *n);
/* A reload changed timing.lease_ttl: the next lease asks for it as it is,
 * however many leases a busy etcd took before (the operator chose). */
void node_lease_ttl_set(struct node *n);
/* A reload changed the node's group: registers it again (alive/ and
 * groups/), without blocking; a reload before the answer sends it again. */
void node_lease_regroup(struct node *n);
/*
 * etcd refused a write that carried lease (node_write.c): the lease is gone.
 * When it is the node's current one, the node takes it as lost now (a new
 * lease after a short random delay) rather than at the next keepalive:
 * meanwhile each retried write would carry the dead lease, and etcd makes
 * each a proposal before it refuses it.
 */
void node_lease_refused(struct node *n, int64_t lease);
/* etcd deleted this host's alive key (the stream's MODEL_SELF_GONE): past
 * the lease's time, the lease is taken as lost now, unless etcd refused a
 * renewal for its backlog since the last it answered; within it, a renewal
 * asks. */
void node_lease_key_deleted(struct node *n);
/* The lease is known gone and its successor not granted yet, or its keys
 * not all put again under it: a write now would carry the dead lease, or
 * overtake the keys (the holder among them), so the node decides nothing
 * until the keys are back. */
bool node_lease_gone(const struct node *n);
/* At the stop: revokes the lease, so that alive/ and the services go now
 * rather than at its expiry.  true while the revoke is in flight (its end
 * calls node_finish_stop() again); once per life. */
bool node_lease_revoke_begin(struct node *n);

/* node_sync.c */
void node_schedule_resync(struct node *n, uint64_t delay_usec);
/* A new node's empty model; stopping: no resync any more (the stream runs
 * until the stop ends); releasing: the streams and the model. */
void node_sync_init(struct node *n);
void node_sync_stop(struct node *n);
void node_sync_release(struct node *n);
void node_stop_watches(struct node *n);
uint64_t node_watch_idle_ms(struct node *n);
void node_on_watch_error(struct etcd_watch *w, int error, int64_t compact, void *userdata);

/* node_catalog.c */
void node_write_hiera(struct node *n);
void node_catalog_changed(struct node *n);
void node_try_services(struct node *n);
/* Adds this node's service entries to b: those whose value changed (every one
 * with force), with healthy, and the withdrawal of those no longer listed.
 * node_services_committed() records them once b was written. */
int node_batch_services(struct node *n, struct fleet_batch *b, bool healthy, bool force);
/* Takes what node_batch_services() staged (the write that carries it calls
 * node_services_committed() once it landed). */
struct node_services node_services_take_staged(struct node *n);
void node_services_committed(struct node *n, struct node_services *s);
void node_services_release(struct node_services *s);
void node_services_forget_pending(struct node *n);
int node_publish_services(struct node *n, bool healthy, bool force);
/* The config (or upgrade) hook starts, and ended: the hiera file it read
 * needs no services run of its own. */
void node_catalog_config_started(struct node *n);
void node_catalog_config_ended(struct node *n);
/* At the first sync: the services offered again (healthy as the last
 * validation left them), an interrupted services hook run again. */
void node_catalog_recover(struct node *n, bool healthy);
/* Stopping: no debounce; abandoning (past the grace): the services hook is
 * left to itself; releasing: everything the part holds. */
void node_catalog_stop(struct node *n);
void node_catalog_abandon(struct node *n);
void node_catalog_release(struct node *n);

/* A reload's new etcd client (node_reconnect): the old one was freed with
 * every request in flight on it, without calling back.  Each part forgets
 * its own and goes on on the new client: a write is asked about (it may have
 * been applied), a read is made again. */
void node_write_client_changed(struct node *n);
void node_sync_client_changed(struct node *n);
void node_facts_client_changed(struct node *n);
void node_run_client_changed(struct node *n);
void node_rollout_client_changed(struct node *n);

/* node_facts.c */
/*
 * The facts need names (FACTS_* of fleet_facts.h; the groups are the
 * policy's, the services those the node depends on): 1 and *ret when the
 * node holds them new enough (node_facts.c says what that is for each), or
 * with since > 0 as new as that revision.  Else 0:
 * a read is in flight, whose answer evaluates again (a failed one retries
 * after the backoff).  The read asks for everything the policy may need as
 * well, so that one read serves a whole decision.
 */
int node_facts_get(struct node *n, unsigned need, int64_t since, const struct fleet_facts **ret);
/* A run's start under max_fail_percent reads the alive hosts, so that the
 * run's end can count its failure against them without waiting. */
void node_facts_prefetch(struct node *n);
/* A stage-watch event of revision: facts older than it are stale. */
void node_facts_seen(struct node *n, int64_t revision);
void node_facts_release(struct node *n);

/* node_rollout.c */
int node_check_dependencies(struct node *n, char **ret_missing, char **ret_short);
struct slot_wait {
	char *group;		/* an earlier group still behind, or NULL */
	size_t behind;		/* how many of its alive hosts (0: not counted here) */
	char *watcher;		/* else the host of the stage that watches them */
	long limit;		/* else: the slots of the node's stage */
	bool ranked;		/* the node's place in the queue is known: */
	size_t rank;		/* hosts ahead of it (0-based place) */
	bool canary;		/* the canaries took every slot: wait for promote */
	size_t canaries_done;
	size_t failed;		/* hosts failed at this rollout */
	bool halting;		/* it would start, but the budget is spent: halted */
	bool reading;		/* the fleet beyond the model is read: its answer decides */
	bool splaying;		/* the splay before queueing runs: its timer decides */
};
int node_take_slot(struct node *n, struct slot_wait *ret_wait);
/* Under auto_promote, the first host waiting for promote writes it when the
 * canaries validated with no failure: a queued write (node_write.c) whose
 * guards make it once per trigger (fleet_batch_promote). */
int node_promote_if_due(struct node *n, const struct slot_wait *w);
void node_unwatch_stage(struct node *n);
/* The host that watches the earlier groups for its stage keeps doing so
 * while it cannot start a run itself (paused, a dependency missing): the
 * rest of its stage waits for it. */
void node_stage_duty(struct node *n);
/* Idle: no progress deadline, no slot, no stage watch. */
void node_rollout_idle(struct node *n);
/* Stopping: the progress timer, the stage watch and a halt's or dead
 * holder's read in flight go (the lease's revoke takes the holder);
 * releasing: everything the part holds. */
void node_rollout_stop(struct node *n);
void node_rollout_release(struct node *n);
/* The rollout is halted: nobody waits for a freed slot. */
void node_progress_cancel(struct node *n);
/* Whether the node holds a slot (a canary's or not): its run may start. */
bool node_slot_held(const struct node *n);
/* Adds the release of the node's holder to b (nothing when it has none);
 * node_slot_release_written() takes the write's end. */
int node_slot_batch_release(struct node *n, struct fleet_batch *b);
void node_slot_release_written(struct node *n, int error);
/* Adds to b (a run's start) the mark of the node's key: its run started, which
 * the host behind it in the queue waits for (nothing without a slot). */
int node_slot_batch_mark(struct node *n, struct fleet_batch *b);
/* The node's key went from the queue (its look found it gone): not queued. */
void node_slot_lost(struct node *n);
/* The node's key was put again, at revision, with a new lease's keys: a new
 * key, so a place behind whoever queued meanwhile (a slot already marked
 * keeps no place to follow). */
void node_slot_key_rewritten(struct node *n, int64_t revision);
/* The run's start (which marks the slot) ended: written, or refused by its
 * guard, which returns a slot not marked yet to the queue. */
void node_slot_start_written(struct node *n, int error);

/* The failure budget: halts when the host's own failure crossed it. */
int node_check_budget(struct node *n);
int node_budget_exceeded(struct node *n, size_t failed, int64_t since, char **ret_reason);
/* Counts hosts that died holding a slot (fleet_dead_holder_read_start,
 * fleet_batch_dead_holder): 1 while their records are being settled. */
int node_check_released(struct node *n);
/* puppet/pending's detail while the host waits for a slot. */
char *node_slot_detail(struct node *n);
/* progress_deadline: armed by the first host waiting for a slot. */
void node_watch_progress(struct node *n, const struct slot_wait *w);
/* Whether this node wrote a halt its model has not caught up with yet. */
bool node_halt_pending(const struct node *n);
/* Whether the host failed at the desired version's rollout and has not
 * succeeded since: its failed status stays until a run succeeds. */
bool node_failed_here(const struct node *n);

/* node_queue.c.  The node's key is in the queue since revision created (the
 * queue write's, or the registration's that put it again): it is looked at
 * from there. */
void node_queue_enter(struct node *n, int64_t created);
/* The txn that creates the node's key names it the queue's tail too, after
 * the key (fleet_queue.h), unless etcd refused that: node_queue_tail_refused()
 * takes the failure of such a txn, and true says it is worth sending again
 * without the tail (a role from before it, logged once). */
int node_queue_batch_tail(struct node *n, struct fleet_batch *b);
bool node_queue_tail_refused(struct node *n, int error);
/* Its key is gone (released, or never written): nothing more to follow. */
void node_queue_leave(struct node *n);
/* How many holders are ahead of the node's key: 1 and *ret_ahead (exact
 * when below limit, else at least limit), or 0 while a look is in flight
 * (its answer evaluates again), or a negative code.  Only when queued. */
int node_queue_place(struct node *n, size_t limit, size_t *ret_ahead);
/* Waiting: follows what can end the wait (the key just ahead, or, first
 * in line, the releases), from the last look on. */
void node_queue_follow(struct node *n);
/* Where the node stands, exact, for the mark in its start to carry to the
 * host behind it: true and *ret, or false when it knows no exact count. */
bool node_queue_counted(const struct node *n, struct queue_place *ret);
/* It took its slot: it follows nothing more (the mark is in its start). */
void node_queue_hold(struct node *n);
/* First in line: it watches the releases (dead holders, the deadline). */
bool node_queue_first(const struct node *n);
/* Holders that died running, seen since the last call (rollout_holders_free). */
size_t node_queue_take_released(struct node *n, struct rollout_holder **ret);
/* The stream goes with the node's others (a resync or a reconnect): the next
 * place looks again and follows from there. */
void node_queue_unwatch(struct node *n);
void node_queue_client_changed(struct node *n);
/* Stopping: the stream and a look in flight go (the lease's revoke takes the key). */
void node_queue_stop(struct node *n);
void node_queue_release(struct node *n);

/* node_run.c */
void node_read_local(struct node *n);
/* At the stop, a run in progress is recorded as interrupted (puppet/failed)
 * in a queued write: true when it is in flight (its end calls
 * node_finish_stop() again).  One that does not land is found by the next
 * start's sync (puppet/running left behind) and recorded then. */
bool node_run_record_interrupted(struct node *n);
int node_build_env(struct node *n, const char *version, char ***ret);
/* Starts the run the evaluation decided on; false when etcd refused the start
 * because the fleet changed since the model's view (the guard): the node
 * decides again once the stream has brought the change. */
bool node_start_run(struct node *n);
/* At the first sync: a run this daemon was doing when it died is recorded as
 * failed and repeated, a failed validation and a failure at this rollout
 * are remembered, and running_version is put again under the new lease.
 * *ret_healthy: whether the last validation succeeded. */
void node_run_recover(struct node *n, bool *ret_healthy);
/* The model moved (an event, a resync): a start its guard refused may go. */
void node_run_model_moved(struct node *n);
/* From the evaluation: a new desired version is a new target, retried at
 * once from the start of the backoff. */
void node_run_check_target(struct node *n);
/* The splay before the host's first write for a version: its place in the
 * slot queue under a rollout policy with slots, else its run's start
 * (before names which, for the state line).  True while it runs (the
 * timer's end decides again), false once it is over or not configured. */
bool node_run_splay(struct node *n, const char *before);
/* Idle: no splay or backoff, failures forgotten. */
void node_run_idle(struct node *n);
/* Stopping: the run's timers; abandoning: its hook is left to itself;
 * releasing: everything the part holds. */
void node_run_stop(struct node *n);
void node_run_abandon(struct node *n);
void node_run_release(struct node *n);
void node_retry_owed(struct node *n);

#endif
