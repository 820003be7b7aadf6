/*
 * node.h — the node: what orchestrated does on its sd-event loop
 * (orchestrated(8) says it for operators).
 *
 * A node registers under a lease, reads the desired version and the service
 * catalog at one revision, watches them (and pause/) from there, and runs the
 * consistent configuration as an explicit state machine (node_set_state() is
 * the one place that moves it):
 *
 *   STARTING → IDLE → [PAUSED] → [WAIT_DEPENDENCIES]
 *            → [WAIT_GROUP] → [WAIT_SLOT] → [WAIT_CANARY] → [SPLAY]
 *            → RUN_START → [RUN_UPGRADE] → RUN_CONFIG → RUN_VALIDATE
 *            → [BAKE] → IDLE
 *
 *   a failed run → BACKOFF → (retry from the waits);  a spent failure
 *   budget or a halt → HALTED until a new trigger;  SIGTERM → STOPPING
 *
 * (bracketed states only under the condition they name: a pause, declared
 * dependencies, a rollout policy with groups, slots, canaries, a splay, an
 * upgrade hook, min_healthy_time).  Beside it runs the eventually consistent
 * side (catalog changes → debounced hiera rewrite → services hook, never
 * while the config hook runs).
 *
 * The caller (orchestrated.c) owns argv, the signals and the loop; it hands the
 * node its resolved options and calls node_reload()/node_stop() on SIGHUP and
 * SIGTERM.  The node ends the loop (sd_event_exit) when it has stopped, or, with
 * once, when its one cycle is over; node_exit_code() then says how it went.
 */
#ifndef ORCHESTRATE_NODE_H
#define ORCHESTRATE_NODE_H

#include <stdbool.h>

#include "config/options.h"

typedef struct sd_event sd_event;

enum node_state {
	NODE_STARTING,		/* not registered or not synced yet */
	NODE_IDLE,		/* at the desired version (or none is set) */
	NODE_PAUSED,		/* an update is due but a pause applies */
	NODE_WAIT_DEPENDENCIES,	/* puppet/pending: declared dependencies unmet */
	NODE_WAIT_GROUP,	/* staged rollout: an earlier group is not done */
	NODE_WAIT_SLOT,		/* waiting for a rollout slot */
	NODE_WAIT_CANARY,	/* the canaries ran: waiting for promote */
	NODE_HALTED,		/* the rollout of the desired version is halted */
	NODE_SPLAY,		/* random delay before the run */
	NODE_RUN_START,		/* writing puppet/running */
	NODE_RUN_UPGRADE,	/* the upgrade hook runs */
	NODE_RUN_CONFIG,	/* the config hook runs */
	NODE_RUN_VALIDATE,	/* the validate hook runs */
	NODE_BAKE,		/* validated, keeping the slot min_healthy_time */
	NODE_BACKOFF,		/* the last run failed; waiting to retry */
	NODE_STOPPING,		/* SIGTERM: waiting for hooks to end */
	_NODE_STATE_MAX,
};

const char *node_state_name(enum node_state s);

struct node;

/*
 * A new node on event.  It takes over *opts (emptied on success) and keeps
 * global (and the argv strings it points into) for reloads.  once selects the
 * --once cycle: a lease of timing.once_ttl that is not kept alive, no retries,
 * and the loop ends when the cycle is over.
 */
int node_new(sd_event *event, struct options_resolved *opts,
	     const struct global_options *global, bool once, struct node **ret);
struct node *node_free(struct node *n);
static inline void node_freep(struct node **n) { if (*n) node_free(*n); }

/* Starts registration and sync on the loop (they retry by themselves). */
int node_start(struct node *n);

/*
 * Reloads the configuration (SIGHUP): resolves the options again into a new
 * config and swaps it in only when it parsed; on error the running config is
 * kept and the reason logged.  Returns 0 or the error.
 */
int node_reload(struct node *n);

/* Stops cleanly (SIGTERM): signals running hooks, waits for them (bounded),
 * records an interrupted run, revokes the lease, ends the loop.  A second call
 * kills the hooks at once. */
void node_stop(struct node *n);

/* 0 normally; with once, 0 when the node ended at the desired version. */
int node_exit_code(const struct node *n);

enum node_state node_get_state(const struct node *n);

#endif
