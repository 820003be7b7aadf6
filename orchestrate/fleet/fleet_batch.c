/*
 * fleet_batch.c — the daemon's writes, batched (fleet.h, "batches"): each
 * op of a node's run added to one txn, with the compares that guard it, and
 * committed at once, blocking or on the event loop.  Only the daemon
 * writes through it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "base/json.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

/* --- batches -------------------------------------------------------------------------- */

/*
 * A batch is one txn: every op is checked (names, values) as it is added, so a
 * batch either holds only valid ops or is dropped by its caller, and its
 * commit writes all of them at one revision or none.  It is how a node makes a
 * run cost etcd the writes it must make and no more: the end of a run (puppet
 * and validation states, running version, alive, its services, its rollout
 * slot) is one request.  A batch may also carry compares (a guard: see
 * fleet_model_guard_start()), which ride the same request.
 */
struct fleet_batch {
	struct fleet *f;
	struct etcd_txn *t;
	size_t ops;
	size_t compares;
	bool sent;		/* by fleet_batch_commit_start(), settled */
	bool refused;		/* an adder refused: its error is the one told */
};

int fleet_batch_new(struct fleet *f, struct fleet_batch **ret)
{
	struct fleet_batch *b = calloc(1, sizeof(*b));
	if (!b || !(b->t = etcd_txn_new())) {
		free(b);
		return -ENOMEM;
	}
	b->f = f;
	*ret = b;
	return 0;
}

struct fleet_batch *fleet_batch_free(struct fleet_batch *b)
{
	if (b) {
		etcd_txn_free(b->t);
		free(b);
	}
	return NULL;
}

/* A put of key (taken: freed here), and, replacing, etcd's answer keeps the
 * key as it was (etcd_txn_replaced). */
static int batch_put_op(struct fleet_batch *b, char *key, const char *value, int64_t lease,
			bool replacing)
{
	_cleanup_(freep) char *k = key;
	if (!k)
		return -ENOMEM;
	int r = replacing ? etcd_txn_put_replacing(b->t, k, value, lease)
			  : etcd_txn_put(b->t, true, k, value, lease);
	if (r >= 0)
		b->ops++;
	return r;
}

static int batch_put(struct fleet_batch *b, char *key, const char *value, int64_t lease)
{
	return batch_put_op(b, key, value, lease, false);
}

static int batch_delete(struct fleet_batch *b, char *key)
{
	_cleanup_(freep) char *k = key;
	if (!k)
		return -ENOMEM;
	int r = etcd_txn_delete(b->t, true, k);
	if (r >= 0)
		b->ops++;
	return r;
}

/*
 * A write this daemon could not build: a name or a value its own checks
 * refuse (a bug, or a hostile value passed on), or no memory.  Whoever made
 * the batch reports a failed write with the client's last error, which would
 * otherwise name an older etcd failure, or "no error", for a write that etcd
 * never saw.  The first refusal is the one told: a caller that goes on
 * adding after it (and checks once at the end) would otherwise report the
 * last.  Returns r.
 */
static int batch_refuse(struct fleet_batch *b, int r, const char *what)
{
	if (r >= 0 || !b->f->etcd || b->refused)
		return r;
	b->refused = true;
	if (r == -EINVAL)
		etcd_set_error(b->f->etcd, "not sent to etcd: %s did not pass this daemon's own "
			       "checks", what);
	else if (r == -ENOMEM)
		etcd_set_error(b->f->etcd, "not sent to etcd: no memory to build %s", what);
	return r;
}

int fleet_batch_status(struct fleet_batch *b, const char *host, enum status_type type,
		       enum status_state state, const char *version, int exit_code,
		       const char *detail)
{
	return fleet_batch_status_extra(b, host, type, state, version, exit_code, detail, NULL);
}

int fleet_batch_status_extra(struct fleet_batch *b, const char *host, enum status_type type,
			     enum status_state state, const char *version, int exit_code,
			     const char *detail, const struct status_extra *extra)
{
	_cleanup_(freep) char *value = NULL;
	const char *P = fleet_prefix(b->f);
	int r;

	if (!name_ok(host) || !optional_name_ok(version) || !type_valid(type) ||
	    !status_state_allowed(type, state))
		return batch_refuse(b, -EINVAL, "the run's status");
	if ((r = status_value_extra(version, exit_code, detail, extra, &value)) < 0 ||
	    (r = batch_put(b, key_status(P, type, state, host), value, 0)) < 0 ||
	    (r = txn_delete_other_states(b->t, P, host, type, state)) < 0)
		return batch_refuse(b, r, "the run's status");
	return 0;
}

int fleet_batch_running_version(struct fleet_batch *b, const char *host, const char *version,
				int64_t lease)
{
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(host) || !name_ok(version))
		return batch_refuse(b, -EINVAL, "running_version");
	if ((r = running_value(version, &value)) < 0)
		return batch_refuse(b, r, "running_version");
	return batch_refuse(b, batch_put(b, key_running_version(fleet_prefix(b->f), host), value, lease),
			    "running_version");
}

int fleet_batch_alive(struct fleet_batch *b, const char *host, const char *version, long pid,
		      int64_t lease)
{
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(host) || !optional_name_ok(version))
		return batch_refuse(b, -EINVAL, "the alive entry");
	if ((r = alive_value(version, pid, &value)) < 0)
		return batch_refuse(b, r, "the alive entry");
	return batch_refuse(b, batch_put(b, key_alive(fleet_prefix(b->f), host), value, lease),
			    "the alive entry");
}

int fleet_batch_service(struct fleet_batch *b, const char *service, const char *host,
			const char *value, int64_t lease)
{
	if (!name_ok(service) || !name_ok(host) || !value)
		return batch_refuse(b, -EINVAL, "a service entry");
	return batch_refuse(b, batch_put(b, key_service(fleet_prefix(b->f), service, host), value, lease),
			    "a service entry");
}

int fleet_batch_unpublish(struct fleet_batch *b, const char *service, const char *host)
{
	if (!name_ok(service) || !name_ok(host))
		return batch_refuse(b, -EINVAL, "a service entry");
	return batch_refuse(b, batch_delete(b, key_service(fleet_prefix(b->f), service, host)),
			    "a service entry");
}

int fleet_batch_holder(struct fleet_batch *b, const char *host, const char *version,
		       const char *group, bool holds, const struct queue_place *place,
		       int64_t lease)
{
	_cleanup_(freep) char *value = NULL;
	int r = holder_value(host, version, group, holds, place, &value);
	if (r < 0)
		return batch_refuse(b, r, "the slot holder key");
	return batch_refuse(b, batch_put(b, key_rollout_holder(fleet_prefix(b->f), host), value, lease),
			    "the slot holder key");
}

int fleet_batch_release_holder(struct fleet_batch *b, const char *host)
{
	if (!name_ok(host))
		return batch_refuse(b, -EINVAL, "the slot holder key");
	return batch_refuse(b, batch_delete(b, key_rollout_holder(fleet_prefix(b->f), host)),
			    "the slot holder key");
}

int fleet_batch_queue_tail(struct fleet_batch *b, const char *host)
{
	if (!name_ok(host))
		return batch_refuse(b, -EINVAL, "the slot queue's tail");
	/* No lease: a tail that outlives its host names a key that is gone,
	 * which the look finds out.  The tail it replaces is the host that
	 * queued just before (fleet_queue_tail_before). */
	return batch_refuse(b, batch_put_op(b, key_rollout_tail(fleet_prefix(b->f)), host, 0, true),
			    "the slot queue's tail");
}

int fleet_batch_failure(struct fleet_batch *b, const char *host, const char *version,
			int64_t trigger, long attempts, const char *stage)
{
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
		.stage = (char *)stage, .attempts = attempts,
	};
	int r;

	if (!name_ok(host) || !name_ok(version))
		return batch_refuse(b, -EINVAL, "the failed run's record");
	if ((r = rollout_record_encode(&rec, &value)) < 0)
		return batch_refuse(b, r, "the failed run's record");
	return batch_refuse(b, batch_put(b, key_rollout_failed(fleet_prefix(b->f), host), value, 0),
			    "the failed run's record");
}

int fleet_batch_clear_failure(struct fleet_batch *b, const char *host)
{
	if (!name_ok(host))
		return batch_refuse(b, -EINVAL, "the failed run's record");
	return batch_refuse(b, batch_delete(b, key_rollout_failed(fleet_prefix(b->f), host)),
			    "the failed run's record");
}

int fleet_batch_canary(struct fleet_batch *b, const char *host, const char *version,
		       int64_t trigger)
{
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
	};
	int r;

	if (!name_ok(host) || !name_ok(version))
		return batch_refuse(b, -EINVAL, "the canary record");
	if ((r = rollout_record_encode(&rec, &value)) < 0)
		return batch_refuse(b, r, "the canary record");
	return batch_refuse(b, batch_put(b, key_rollout_canary(fleet_prefix(b->f), host), value, 0),
			    "the canary record");
}

int fleet_batch_promote(struct fleet_batch *b, const char *version, int64_t trigger,
			int64_t promoted_mod, const char *by)
{
	const char *P = fleet_prefix(b->f);
	_cleanup_(freep) char *k_cur = key_current_version(P);
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
		.reason = (char *)by,
	};
	int r;

	if (!name_ok(version) || trigger <= 0 || promoted_mod < 0)
		return batch_refuse(b, -EINVAL, "the promotion");
	if (!k_cur)
		return -ENOMEM;
	if ((r = rollout_record_encode(&rec, &value)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_cur, trigger)) < 0)
		return batch_refuse(b, r, "the promotion");
	_cleanup_(freep) char *k_prom = key_rollout_promoted(P);
	if (!k_prom)
		return -ENOMEM;
	if ((r = fleet_batch_if_written_at(b, k_prom, promoted_mod)) < 0)
		return batch_refuse(b, r, "the promotion");
	return batch_refuse(b, batch_put(b, TAKE_PTR(k_prom), value, 0),
			    "the promotion");
}

int fleet_batch_stage(struct fleet_batch *b, const char *group, const char *version,
		      int64_t trigger, int64_t stage_mod, const char *host, bool open, int64_t lease)
{
	const char *P = fleet_prefix(b->f);
	_cleanup_(freep) char *k_cur = key_current_version(P);
	_cleanup_(freep) char *k_stage = key_rollout_stage(P, group);
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = (char *)version, .trigger = trigger, .time = fleet_now(),
		.host = (char *)host, .stage = open ? "open" : "watching",
	};
	int r;

	if (!name_ok(group) || !name_ok(version) || !name_ok(host) || trigger <= 0 ||
	    stage_mod < 0)
		return batch_refuse(b, -EINVAL, "the stage gate");
	if (!k_cur || !k_stage)
		return -ENOMEM;
	if ((r = rollout_record_encode(&rec, &value)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_cur, trigger)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_stage, stage_mod)) < 0)
		return batch_refuse(b, r, "the stage gate");
	/* watching: under the watcher's lease, so that its death hands the
	 * watch on; open: for good (the trigger names what it opens) */
	return batch_refuse(b, batch_put(b, TAKE_PTR(k_stage), value, open ? 0 : lease),
			    "the stage gate");
}

int fleet_batch_stage_drop(struct fleet_batch *b, const char *group, int64_t stage_mod)
{
	_cleanup_(freep) char *k_stage = key_rollout_stage(fleet_prefix(b->f), group);
	int r;

	if (!name_ok(group) || stage_mod <= 0)
		return batch_refuse(b, -EINVAL, "the stage gate");
	if (!k_stage)
		return -ENOMEM;
	if ((r = fleet_batch_if_written_at(b, k_stage, stage_mod)) < 0)
		return batch_refuse(b, r, "the stage gate");
	return batch_refuse(b, batch_delete(b, TAKE_PTR(k_stage)), "the stage gate");
}

int fleet_batch_halt(struct fleet_batch *b, const struct rollout_halt *h)
{
	const char *P = fleet_prefix(b->f);
	const char *to = h->rec.reverted_to;
	_cleanup_(freep) char *k_cur = key_current_version(P);
	_cleanup_(freep) char *k_halt = key_rollout_halted(P);
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(h->rec.version) || h->rec.trigger <= 0 || h->halted_mod < 0 ||
	    !optional_name_ok(to))
		return batch_refuse(b, -EINVAL, "the halt");
	if (!k_cur || !k_halt)
		return -ENOMEM;
	if ((r = rollout_record_encode(&h->rec, &value)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_cur, h->rec.trigger)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_halt, h->halted_mod)) < 0 ||
	    (r = batch_put(b, TAKE_PTR(k_halt), value, 0)) < 0)
		return batch_refuse(b, r, "the halt");
	if (!to)
		return 0;
	_cleanup_(freep) char *k_prev = key_previous_version(P);
	if (!k_prev)
		return -ENOMEM;
	if ((r = fleet_batch_if_written_at(b, k_prev, h->previous_mod)) < 0 ||
	    (r = batch_put(b, TAKE_PTR(k_cur), to, 0)) < 0)
		return batch_refuse(b, r, "the halt");
	return batch_refuse(b, batch_put(b, TAKE_PTR(k_prev), h->rec.version, 0),
			    "the halt");
}

int fleet_batch_dead_holder(struct fleet_batch *b, const struct dead_holder *d)
{
	_cleanup_(freep) char *k_failed = NULL;
	_cleanup_(freep) char *value = NULL;
	struct rollout_record rec = {
		.version = d->version, .trigger = d->trigger, .time = fleet_now(),
		.stage = (char *)"died", .attempts = 1,
	};
	int r;

	if (!name_ok(d->host) || !name_ok(d->version) || d->trigger <= 0)
		return batch_refuse(b, -EINVAL, "the dead holder's record");
	if (!(k_failed = key_rollout_failed(fleet_prefix(b->f), d->host)))
		return -ENOMEM;
	if ((r = rollout_record_encode(&rec, &value)) < 0 ||
	    (r = fleet_batch_if_written_at(b, k_failed, 0)) < 0)
		return batch_refuse(b, r, "the dead holder's record");
	return batch_refuse(b, batch_put(b, TAKE_PTR(k_failed), value, 0),
			    "the dead holder's record");
}

int fleet_batch_if_written_at(struct fleet_batch *b, const char *key, int64_t revision)
{
	int r = etcd_txn_if_mod_revision(b->t, key, ETCD_CMP_EQUAL, revision);
	if (r >= 0)
		b->compares++;
	return r;
}

int fleet_batch_if_unchanged_since(struct fleet_batch *b, const char *key, bool prefix,
				   int64_t revision)
{
	int r = prefix ? etcd_txn_if_prefix_mod_revision(b->t, key, ETCD_CMP_LESS, revision + 1)
		       : etcd_txn_if_mod_revision(b->t, key, ETCD_CMP_LESS, revision + 1);
	if (r >= 0)
		b->compares++;
	return r;
}

int fleet_batch_commit(struct fleet_batch *b, int64_t *ret_revision)
{
	bool held = true;
	int r;

	if (b->ops == 0 && b->compares == 0)
		return 0;
	r = etcd_txn_commit(b->f->etcd, b->t, b->compares ? &held : NULL, ret_revision);
	if (r < 0)
		return r;
	return held ? 0 : -ECANCELED;
}

bool fleet_batch_empty(const struct fleet_batch *b)
{
	return b->ops == 0 && b->compares == 0;
}

int fleet_batch_commit_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			     void *userdata, struct etcd_call **ret)
{
	int r;

	if (b->ops == 0 && b->compares == 0)
		return 1;
	/* Settled from the first send, not only on our resend: libcurl itself
	 * sends a request again, blindly, when a reused connection closes
	 * before any reply (a member that died after applying it). */
	if (!b->sent) {
		b->sent = true;
		if ((r = etcd_txn_settle(b->t, etcd_client_revision(b->f->etcd))) < 0)
			return r;
	}
	r = etcd_txn_commit_start(b->f->etcd, b->t, patience_ms, fn, userdata, ret);
	return r < 0 ? r : 0;
}

int fleet_batch_applied_start(struct fleet_batch *b, long patience_ms, fleet_commit_fn fn,
			      void *userdata, struct etcd_call **ret)
{
	if (!b->sent)
		return 1;
	int r = etcd_txn_applied_start(b->f->etcd, b->t, patience_ms, fn, userdata, ret);
	return r == -EINVAL ? 1 : r;
}

int fleet_batch_history(struct fleet_batch *b, const char *host, const struct run_history *h)
{
	_cleanup_(freep) char *value = NULL;
	int r;

	if (!name_ok(host) || !h)
		return batch_refuse(b, -EINVAL, "the run history");
	if ((r = run_history_encode(h, &value)) < 0)
		return batch_refuse(b, r, "the run history");
	return batch_refuse(b, batch_put(b, key_history(fleet_prefix(b->f), host), value, 0),
			    "the run history");
}
