/*
 * fleet_events.h — the rollout as a stream of events (`orchestrate events`),
 * derived from one watch over the whole prefix.
 *
 * One mechanism: a state of the fleet (struct fleet_events_state) holds the
 * node's model of the rollout (fleet_model.h: desired version, pauses,
 * policy, holders, the safety records) and a small record per host (its
 * state of each status type, alive, running version, group).  Every watch
 * event is applied to it, a revision at a time; what a revision changed is
 * found by comparing a snapshot of the rollout and of each host it touched
 * before and after, and each difference is one event.  A read of the whole
 * prefix is the same thing: its keys applied as puts to an empty state; so
 * after a compaction the old state and a fresh read are compared the same
 * way, and what changed meanwhile comes out as events too.
 *
 * Memory: a record per host (its names and a detail cut to
 * FLEET_EVENT_DETAIL_MAX bytes), the model's rollout records, and the keys
 * of one revision: bounded by the fleet, not by the stream's length.
 *
 * This is fleet-layer code: it knows the key layout, talks to etcd only in
 * fleet_events_read() and the stream, and neither logs, prints nor exits.
 */
#ifndef ORCHESTRATE_FLEET_EVENTS_H
#define ORCHESTRATE_FLEET_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_model.h"

/* The longest detail an event carries (the tail of a status's detail, its
 * last non-empty line). */
#define FLEET_EVENT_DETAIL_MAX 240

enum fleet_event_kind {
	FLEET_EVENT_TRIGGER,		/* current_version set: a new rollout */
	FLEET_EVENT_ROLLBACK,		/* current_version set back to previous_version */
	FLEET_EVENT_REVERTED,		/* a halt set current_version back (auto_revert) */
	FLEET_EVENT_HALTED,		/* the rollout stopped itself (rollout/halted) */
	FLEET_EVENT_PROMOTED,		/* the canaries were accepted */
	FLEET_EVENT_PAUSED,		/* a pause was set (global, group or host) */
	FLEET_EVENT_RESUMED,		/* a pause or a halt was lifted */
	FLEET_EVENT_POLICY,		/* the rollout policy was set, changed or removed */
	FLEET_EVENT_REGISTERED,		/* a host new to the fleet (provisioned) */
	FLEET_EVENT_DECOMMISSIONED,	/* every key of a host removed */
	FLEET_EVENT_ALIVE,		/* a host's alive key is back */
	FLEET_EVENT_DEAD,		/* a host's alive key (its lease) is gone */
	FLEET_EVENT_STARTED,		/* a host started a config run (puppet/running) */
	FLEET_EVENT_SUCCEEDED,		/* a host validated a version */
	FLEET_EVENT_FAILED,		/* a host failed a run (config, validation, ...) */
	FLEET_EVENT_WAITING,		/* a host waits (puppet/pending): for what */
	FLEET_EVENT_CANARY,		/* a host validated the version as a canary */
	FLEET_EVENT_COMPACTED,		/* the watch's revision was compacted */
	_FLEET_EVENT_KIND_MAX,
};

/* "trigger", "rollback", ... as printed and in JSON. */
const char *fleet_event_kind_name(enum fleet_event_kind k);

struct fleet_event {
	enum fleet_event_kind kind;
	int64_t revision;	/* the etcd revision it happened at */
	int64_t time;		/* unix seconds from the value ("time"); 0: not said */
	char *host;		/* NULL: about the rollout */
	char *version;		/* the version it is about; NULL: none */
	char *from;		/* trigger, rollback, reverted: the version before */
	char *stage;		/* failed: "config", "validation", "deadline", "died" */
	long attempt;		/* failed: the attempt; 0: not recorded */
	char *wait;		/* waiting: "slot", "dependency", "group", ... */
	char *scope;		/* paused, resumed: "global", "group", "host", "rollout" */
	char *detail;		/* raw text from etcd (sanitise before printing); NULL: none */
};

struct fleet_event_list {
	struct fleet_event *v;
	size_t n, cap;
};
void fleet_event_list_release(struct fleet_event_list *l);
static inline void fleet_event_list_releasep(struct fleet_event_list *l)
{
	fleet_event_list_release(l);
}

/* --- the state and the derivation (pure) ------------------------------------------ */

struct events_host;
struct fleet_events_state {
	char *prefix;
	char *k_root, *k_previous, *k_status_dir, *k_running_dir, *k_alive_dir, *k_groups_dir;
	char *previous;			/* previous_version; NULL: none */
	struct fleet_model model;	/* the rollout (no catalog) */
	struct events_host *hosts;	/* sorted by name */
	size_t n_hosts, cap_hosts;
	int64_t revision;		/* the newest revision applied (or read) */
};

int fleet_events_state_init(struct fleet_events_state *s, const char *P);
void fleet_events_state_release(struct fleet_events_state *s);

/*
 * Applies watch events (in revision order, as the watch delivers them) and
 * appends to *out what each revision changed, in revision order.  With out
 * NULL, only applies (a read).  Only -ENOMEM fails; the state must then be
 * read again.
 */
int fleet_events_state_apply(struct fleet_events_state *s, const struct etcd_event *events,
			     size_t n, struct fleet_event_list *out);

/* Appends to *out, at revision, what differs from before to after (a state
 * kept by the stream and a fresh read of the same prefix). */
int fleet_events_state_diff(const struct fleet_events_state *before,
			    const struct fleet_events_state *after, int64_t revision,
			    struct fleet_event_list *out);

/* Reads the whole prefix at revision (0: the newest) into a fresh s (already
 * initialised): one range.  -ESTALE when revision was compacted. */
int fleet_events_read(struct fleet *f, int64_t revision, struct fleet_events_state *s);

/* --- the stream -------------------------------------------------------------------- */

/*
 * Follows the fleet on event (the fleet's client is attached to it): reads
 * the state at since - 1 (since 0: at the newest revision, printing nothing
 * of the past) and watches the prefix from the next revision.  fn gets the
 * events of each revision at once (n > 0) and returns 0 to go on or non-zero
 * to stop (the stream then does nothing more; the caller ends its loop).
 *
 * When since - 1 was compacted, fn gets one FLEET_EVENT_COMPACTED event at
 * the oldest revision etcd keeps, C (the watch from since says it), the
 * state is read at C and the events after C follow.  When the revision to
 * watch from is compacted later (a stream cut while etcd compacted), fn
 * gets one FLEET_EVENT_COMPACTED event (at the compaction's revision when
 * etcd said it), the state is read again at the newest revision, and what
 * changed meanwhile comes out as events at that revision; then the watch
 * goes on from there.  A lost
 * stream resumes by itself from its revision (nothing lost, nothing twice);
 * a read that fails because etcd is unreachable is tried again with backoff.
 *
 * end gets the error that stops the stream (a refused permission, no
 * memory, ...); it is not called after fleet_events_stop().  The first read
 * is made before this returns: its error is returned (nothing started).
 */
typedef int (*fleet_events_fn)(const struct fleet_event *events, size_t n, void *userdata);
typedef void (*fleet_events_end_fn)(int error, void *userdata);
struct fleet_events;
int fleet_events_start(struct fleet *f, sd_event *event, int64_t since, fleet_events_fn fn,
		       fleet_events_end_fn end, void *userdata, struct fleet_events **ret);
/* The revision the stream has applied up to. */
int64_t fleet_events_revision(const struct fleet_events *fe);
struct fleet_events *fleet_events_stop(struct fleet_events *fe);
static inline void fleet_events_stopp(struct fleet_events **fe)
{
	if (*fe)
		fleet_events_stop(*fe);
}

#endif
