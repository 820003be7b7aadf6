/*
 * fleet_internal.h — what the files of the fleet layer share and nobody else
 * needs: the checks every operation makes, and the value codecs of
 * fleet_codec.c that the operations, the view and the batches use.
 */
#ifndef ORCHESTRATE_FLEET_INTERNAL_H
#define ORCHESTRATE_FLEET_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/catalog.h"
#include "fleet/schema.h"

/* The key prefix of f, "" for none: what every key builder takes. */
static inline const char *fleet_prefix(const struct fleet *f)
{
	return f->prefix ? f->prefix : "";
}

/* --- checks and small helpers (every file) ------------------------------------- */

static inline bool name_ok(const char *name)
{
	return name && schema_name_valid(name);
}

/* NULL is fine (the field is optional); anything else must be a valid name. */
static inline bool optional_name_ok(const char *name)
{
	return !name || schema_name_valid(name);
}

/* A value is a plausible name only when it holds no NUL and is a valid name. */
static inline bool value_is_name(const char *value, size_t len)
{
	return value && strlen(value) == len && schema_name_valid(value);
}

/* The write helpers may answer with a count; these functions promise 0. */
static inline int written(int r)
{
	return r < 0 ? r : 0;
}

/* Hands out (v, n) sorted and without repeats, never NULL (an empty vector
 * when there is nothing). */
static inline int strv_finish_sorted(char ***v, size_t *n, char ***ret)
{
	strv_sort_unique(*v, n);
	if (!*v && !(*v = calloc(1, sizeof(char *))))
		return -ENOMEM;
	*ret = TAKE_PTR(*v);
	*n = 0;
	return 0;
}

/* Whether kv holds exactly key (a prefix range may return longer keys too). */
static inline bool kv_is(const struct etcd_kv *kv, const char *key)
{
	return kv->key_len == strlen(key) && memcmp(kv->key, key, kv->key_len) == 0;
}

static inline bool type_valid(enum status_type type)
{
	return (int)type >= 0 && type < _STATUS_TYPE_MAX;
}

/* --- fleet_codec.c: the values --------------------------------------------------- */

/* Parses a value read from etcd; NULL when it is not a JSON object. */
cJSON *kv_json_object(const struct etcd_kv *kv);
/* What a status value says beyond its state (fleet_batch_status_extra()):
 * "attempts" and "first_failure" when plausible (else 0), "wait" when it is a
 * name (else NULL: a reader shows nothing rather than what it cannot trust). */
int status_extra_decode(const cJSON *obj, long *ret_attempts, int64_t *ret_first,
			char **ret_wait);
/* {"time":N,"version":"…","exit_code":N,"detail":"…"}, and from extra
 * "attempts", "first_failure" and "wait" when set. */
int status_value_extra(const char *version, int exit_code, const char *detail,
		       const struct status_extra *extra, char **ret);
int status_value(const char *version, int exit_code, const char *detail, char **ret);
/* {"version":"V","time":T}: running_version/HOST's value. */
int running_value(const char *version, char **ret);
/* alive/HOST's value: {"time","version","pid"} (no "version" when NULL). */
int alive_value(const char *version, long pid, char **ret);
/* available_services/SERVICE/HOST's value: its addresses and its health;
 * -EINVAL for a bad name or address. */
int service_value(const char *service, const char *host,
		  const struct catalog_entry *addresses, size_t n_addresses, bool healthy,
		  char **ret);
/* rollout/holders/HOST's value, {"version","group"}; holds: its run started
 * (the queue's mark, "holding"), and place, when not NULL, where it stood
 * then ({"place":{"created","ahead","at"}}, fleet_queue.h). */
struct queue_place;
int holder_value(const char *host, const char *version, const char *group, bool holds,
		 const struct queue_place *place, char **ret);
bool holder_holds(const struct etcd_kv *kv);
/* 1 and *ret when kv is a mark that carries a place counted for this very
 * key (created at its create revision, counted before its mod revision),
 * else 0. */
int holder_place(const struct etcd_kv *kv, struct queue_place *ret);

/* --- fleet.c: the operations ----------------------------------------------------- */

/* Adds to t the deletes of host's key under every state of type but keep. */
int txn_delete_other_states(struct etcd_txn *t, const char *P, const char *host,
			    enum status_type type, enum status_state keep);

/* fleet_running_read()'s decoding of a range of running_version/ (dir_len:
 * the length of that directory's key): the same, from a list read already. */
int fleet_running_from_kvs(const struct etcd_kv_list *list, size_t dir_len,
			   struct fleet_running *ret);

#endif
