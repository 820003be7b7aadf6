/*
 * fleet_rollout.c — the rollout's safety records (fleet_rollout.h): their
 * JSON, the reads a node's halt and dead-holder records start from, and the
 * txns that promote and resume a rollout.
 *
 * Fleet-layer code: it knows the key layout and neither logs nor exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "base/cleanup.h"
#include "base/json.h"
#include "etcd/etcd.h"
#include "fleet_internal.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"


/* --- the records ---------------------------------------------------------------------- */

void rollout_record_release(struct rollout_record *r)
{
	free(r->version);
	free(r->host);
	free(r->reason);
	free(r->stage);
	free(r->reverted_to);
	*r = (struct rollout_record){ 0 };
}

static int dup_string(const cJSON *obj, const char *name, char **ret)
{
	const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!s)
		return 0;
	if (!cJSON_IsString(s))
		return -EPROTO;
	*ret = strdup(s->valuestring);
	return *ret ? 0 : -ENOMEM;
}

int rollout_record_decode(const char *value, size_t len, struct rollout_record *ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = value ? cJSON_ParseWithLength(value, len) : NULL;
	_cleanup_(rollout_record_releasep) struct rollout_record r = { 0 };
	int e;

	if (!cJSON_IsObject(obj))
		return -EPROTO;
	if ((e = dup_string(obj, "version", &r.version)) < 0 ||
	    (e = dup_string(obj, "host", &r.host)) < 0 ||
	    (e = dup_string(obj, "reason", &r.reason)) < 0 ||
	    (e = dup_string(obj, "stage", &r.stage)) < 0 ||
	    (e = dup_string(obj, "reverted_to", &r.reverted_to)) < 0)
		return e;
	if (!r.version || !schema_name_valid(r.version))
		return -EPROTO;
	if (r.reverted_to && !schema_name_valid(r.reverted_to))
		return -EPROTO;
	r.trigger = json_get_int_range(obj, "trigger", 0, JSON_COUNT_MAX);
	r.time = json_get_int_range(obj, "time", 0, JSON_COUNT_MAX);
	r.attempts = (long)json_get_int_range(obj, "attempts", 0, JSON_COUNT_MAX);
	r.failed = (long)json_get_int_range(obj, "failed", 0, JSON_COUNT_MAX);
	*ret = r;
	r = (struct rollout_record){ 0 };
	return 0;
}

static bool add_string(cJSON *obj, const char *name, const char *s)
{
	return !s || cJSON_AddStringToObject(obj, name, s);
}

static bool add_number(cJSON *obj, const char *name, int64_t n, bool always)
{
	return (!always && n == 0) || cJSON_AddNumberToObject(obj, name, (double)n);
}

int rollout_record_encode(const struct rollout_record *r, char **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	char *text;

	if (!r->version || !schema_name_valid(r->version))
		return -EINVAL;
	if (!obj || !add_string(obj, "version", r->version) ||
	    !add_number(obj, "trigger", r->trigger, true) ||
	    !add_number(obj, "time", r->time, true) || !add_string(obj, "host", r->host) ||
	    !add_string(obj, "reason", r->reason) || !add_string(obj, "stage", r->stage) ||
	    !add_string(obj, "reverted_to", r->reverted_to) ||
	    !add_number(obj, "attempts", r->attempts, false) ||
	    !add_number(obj, "failed", r->failed, false))
		return -ENOMEM;
	if (!(text = cJSON_PrintUnformatted(obj)))
		return -ENOMEM;
	*ret = text;
	return 0;
}

bool rollout_record_current(const struct rollout_record *r, const char *version, int64_t trigger)
{
	return version && r->version && strcmp(r->version, version) == 0 &&
	       r->trigger == trigger && trigger > 0;
}

/* --- halt ----------------------------------------------------------------------------- */

int rollout_budget_spent(const struct rollout_policy *p, size_t failed, long alive,
			 char **ret_reason)
{
	*ret_reason = NULL;
	if (p->has_max_failures && (long)failed > p->max_failures)
		return asprintf(ret_reason, "%zu host%s failed, more than max_failures %ld", failed,
				failed == 1 ? "" : "s", p->max_failures) < 0 ? -ENOMEM : 1;
	if (p->max_fail_percent > 0 && failed > 0) {
		if (alive < 0)
			return -EAGAIN;
		if ((double)failed * 100.0 <= p->max_fail_percent * (double)alive)
			return 0;
		return asprintf(ret_reason, "%zu of %ld hosts failed, more than max_fail_percent %g",
				failed, alive, p->max_fail_percent) < 0 ? -ENOMEM : 1;
	}
	return 0;
}

/* The revert a read of previous_version allows: somewhere else to go. */
static bool revert_target(const struct etcd_kv *prev, const char *version)
{
	return prev->value && strlen(prev->value) == prev->value_len &&
	       schema_name_valid(prev->value) && strcmp(prev->value, version) != 0;
}

int rollout_halt_init(struct rollout_halt *h, const char *version, int64_t trigger,
		      int64_t halted_mod, const char *host, const char *reason, long failed)
{
	*h = (struct rollout_halt){ 0 };
	if (!version || !schema_name_valid(version) || trigger <= 0 || halted_mod < 0)
		return -EINVAL;
	h->rec = (struct rollout_record){ .trigger = trigger, .time = fleet_now(), .failed = failed };
	h->halted_mod = halted_mod;
	if (!(h->rec.version = strdup(version)) || (host && !(h->rec.host = strdup(host))) ||
	    (reason && !(h->rec.reason = strdup(reason)))) {
		rollout_halt_release(h);
		return -ENOMEM;
	}
	return 0;
}

void rollout_halt_release(struct rollout_halt *h)
{
	rollout_record_release(&h->rec);
	*h = (struct rollout_halt){ 0 };
}

void rollout_halt_drop_revert(struct rollout_halt *h)
{
	free(h->rec.reverted_to);
	h->rec.reverted_to = NULL;
	h->previous_mod = 0;
}

static void halt_on_read(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			 void *userdata)
{
	struct rollout_halt *h = userdata;
	int r = error;

	if (r >= 0 && n == 1 && lists[0].n == 1 && revert_target(&lists[0].kvs[0], h->rec.version)) {
		rollout_halt_drop_revert(h);
		h->rec.reverted_to = lists[0].kvs[0].value;
		lists[0].kvs[0].value = NULL;
		h->previous_mod = lists[0].kvs[0].mod_revision;
	}
	h->read_fn(r < 0 ? r : 0, h, h->read_userdata);
}

int fleet_halt_read_start(struct fleet *f, struct rollout_halt *h, long patience_ms,
			  fleet_halt_read_fn fn, void *userdata, struct etcd_call **ret)
{
	_cleanup_(freep) char *k_prev = key_previous_version(fleet_prefix(f));
	if (!k_prev)
		return -ENOMEM;
	const struct etcd_range range = { .key = k_prev, .prefix = false, .flags = 0 };
	h->read_fn = fn;
	h->read_userdata = userdata;
	return etcd_snapshot_start(f->etcd, &range, 1, 0, patience_ms, halt_on_read, h, ret);
}

/* --- dead holders ---------------------------------------------------------------------- */

int dead_holder_init(struct dead_holder *d, const char *host, int64_t revision,
		     const char *version, int64_t trigger)
{
	*d = (struct dead_holder){ .revision = revision, .trigger = trigger };
	if (!host || !schema_name_valid(host) || !version || !schema_name_valid(version) ||
	    revision <= 0 || trigger <= 0)
		return -EINVAL;
	if (!(d->host = strdup(host)) || !(d->version = strdup(version))) {
		dead_holder_release(d);
		return -ENOMEM;
	}
	return 0;
}

void dead_holder_release(struct dead_holder *d)
{
	free(d->host);
	free(d->version);
	*d = (struct dead_holder){ 0 };
}

static void dead_holder_on_read(int error, struct etcd_kv_list *lists, size_t n,
				int64_t revision, void *userdata)
{
	struct dead_holder *d = userdata;

	if (error >= 0 && n == 1 && lists[0].n == 1) {
		_cleanup_(cJSON_Deletep) cJSON *obj = kv_json_object(&lists[0].kvs[0]);
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "version");
		d->died = cJSON_IsString(v) && strcmp(v->valuestring, d->version) == 0;
	}
	d->read_fn(error < 0 ? error : 0, d, d->read_userdata);
}

int fleet_dead_holder_read_start(struct fleet *f, struct dead_holder *d, long patience_ms,
				 fleet_dead_holder_fn fn, void *userdata, struct etcd_call **ret)
{
	_cleanup_(freep) char *k_run = key_status(fleet_prefix(f), STATUS_PUPPET, STATE_RUNNING,
						  d->host);
	if (!k_run)
		return -ENOMEM;
	const struct etcd_range range = { .key = k_run, .prefix = false, .flags = 0 };
	d->died = false;
	d->read_fn = fn;
	d->read_userdata = userdata;
	return etcd_snapshot_start(f->etcd, &range, 1, d->revision, patience_ms,
				   dead_holder_on_read, d, ret);
}

/* --- promote and resume --------------------------------------------------------------- */

int fleet_promote(struct fleet *f, const char *by, int64_t expect_trigger, char **ret_version)
{
	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *k_cur = key_current_version(P);
	_cleanup_(freep) char *k_prom = key_rollout_promoted(P);
	_cleanup_(freep) char *value = NULL;
	_cleanup_(etcd_kv_releasep) struct etcd_kv cur = { 0 };
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
	bool ok = false;
	int r;

	if (!k_cur || !k_prom || !t)
		return -ENOMEM;
	r = etcd_get(f->etcd, k_cur, &cur, NULL);
	if (r < 0)
		return r;
	if (r == 0 || !cur.value || strlen(cur.value) != cur.value_len ||
	    !schema_name_valid(cur.value))
		return 0;
	if (expect_trigger > 0 && cur.mod_revision != expect_trigger)
		return 0;
	struct rollout_record rec = {
		.version = cur.value, .trigger = cur.mod_revision, .time = fleet_now(),
		.reason = (char *)by,
	};
	if ((r = rollout_record_encode(&rec, &value)) < 0 ||
	    (r = etcd_txn_if_mod_revision(t, k_cur, ETCD_CMP_EQUAL, cur.mod_revision)) < 0)
		return r;
	if (expect_trigger > 0) {
		/* automatic: once, and never over an operator's */
		_cleanup_(etcd_kv_releasep) struct etcd_kv old = { 0 };
		_cleanup_(rollout_record_releasep) struct rollout_record o = { 0 };
		int64_t old_mod = 0;
		if ((r = etcd_get(f->etcd, k_prom, &old, NULL)) < 0)
			return r;
		if (r > 0) {
			if (rollout_record_decode(old.value, old.value_len, &o) == 0 &&
			    rollout_record_current(&o, cur.value, cur.mod_revision))
				return 0;
			old_mod = old.mod_revision;
		}
		if ((r = etcd_txn_if_mod_revision(t, k_prom, ETCD_CMP_EQUAL, old_mod)) < 0)
			return r;
	}
	if ((r = etcd_txn_put(t, true, k_prom, value, 0)) < 0 ||
	    (r = etcd_txn_commit(f->etcd, t, &ok, NULL)) < 0)
		return r;
	if (!ok)
		return 0;
	if (ret_version && !(*ret_version = strdup(cur.value)))
		return -ENOMEM;
	return 1;
}

int fleet_rollout_resume(struct fleet *f)
{
	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *k_halt = key_rollout_halted(P);
	_cleanup_(freep) char *k_failed = key_rollout_failed_dir(P);
	_cleanup_(etcd_kv_releasep) struct etcd_kv halt = { 0 };
	_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
	int r, had;

	if (!k_halt || !k_failed || !t)
		return -ENOMEM;
	if ((had = etcd_get(f->etcd, k_halt, &halt, NULL)) < 0)
		return had;
	if ((r = etcd_txn_delete(t, true, k_halt)) < 0 ||
	    (r = etcd_txn_delete_prefix(t, true, k_failed)) < 0 ||
	    (r = etcd_txn_commit(f->etcd, t, NULL, NULL)) < 0)
		return r;
	return had > 0 ? 1 : 0;
}

/* --- the state, for status ------------------------------------------------------------ */

void rollout_state_release(struct rollout_state *s)
{
	free(s->version);
	rollout_record_release(&s->halt);
	*s = (struct rollout_state){ 0 };
}

static bool kv_under(const struct etcd_kv *kv, const char *dir)
{
	size_t n = strlen(dir);
	return kv->key_len > n && strncmp(kv->key, dir, n) == 0;
}

int fleet_rollout_state(struct fleet *f, struct rollout_state *ret)
{
	const char *P = fleet_prefix(f);
	_cleanup_(freep) char *k_cur = key_current_version(P);
	_cleanup_(freep) char *k_dir = key_rollout_dir(P);
	_cleanup_(freep) char *k_failed = key_rollout_failed_dir(P);
	_cleanup_(freep) char *k_canary = key_rollout_canary_dir(P);
	_cleanup_(freep) char *k_halt = key_rollout_halted(P);
	_cleanup_(freep) char *k_prom = key_rollout_promoted(P);
	_cleanup_(etcd_kv_releasep) struct etcd_kv cur = { 0 };
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
	_cleanup_(rollout_state_releasep) struct rollout_state s = { 0 };
	int64_t revision = 0;
	int r;

	if (!k_cur || !k_dir || !k_failed || !k_canary || !k_halt || !k_prom)
		return -ENOMEM;
	if ((r = etcd_get(f->etcd, k_cur, &cur, &revision)) < 0)
		return r;
	if (r > 0 && cur.value && strlen(cur.value) == cur.value_len &&
	    schema_name_valid(cur.value)) {
		if (!(s.version = strdup(cur.value)))
			return -ENOMEM;
		s.trigger = cur.mod_revision;
	}
	if ((r = etcd_get_prefix(f->etcd, k_dir, 0, revision, &kvs)) < 0)
		return r;
	for (size_t i = 0; i < kvs.n && s.version; i++) {
		const struct etcd_kv *kv = &kvs.kvs[i];
		_cleanup_(rollout_record_releasep) struct rollout_record rec = { 0 };
		bool halt = kv_is(kv, k_halt), prom = kv_is(kv, k_prom);
		bool failed = kv_under(kv, k_failed), canary = kv_under(kv, k_canary);

		if (!(halt || prom || failed || canary))
			continue;
		if (rollout_record_decode(kv->value, kv->value_len, &rec) < 0)
			continue;
		if (halt && rec.reverted_to && strcmp(rec.reverted_to, s.version) == 0 &&
		    !rollout_record_current(&rec, s.version, s.trigger)) {
			/* the halt that brought the fleet back here */
			s.reverted = true;
			s.halt = rec;
			rec = (struct rollout_record){ 0 };
			continue;
		}
		if (!rollout_record_current(&rec, s.version, s.trigger))
			continue;
		if (halt) {
			s.halted = true;
			s.halt = rec;
			rec = (struct rollout_record){ 0 };
		}
		s.promoted |= prom;
		s.failed += failed;
		s.canaries_done += canary;
	}
	*ret = s;
	s = (struct rollout_state){ 0 };
	return 0;
}
