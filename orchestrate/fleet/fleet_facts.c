/*
 * fleet_facts.c — what a decision needs beyond the model (fleet_facts.h): one
 * snapshot read of the ranges asked for, and the answers computed from it.
 *
 * Fleet-layer code: it knows the key layout and neither logs nor exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "fleet/fleet_facts.h"
#include "fleet/fleet_model.h"
#include "fleet/schema.h"
#include "fleet_internal.h"

static void hosts_release(struct fleet_hosts *h)
{
	strv_free(h->names);
	*h = (struct fleet_hosts){ 0 };
}

void fleet_facts_release(struct fleet_facts *x)
{
	hosts_release(&x->alive_hosts);
	fleet_running_release(&x->running);
	for (size_t i = 0; i < x->n_groups && x->members; i++)
		hosts_release(&x->members[i]);
	free(x->members);
	strv_free(x->groups);
	strv_free(x->services);
	catalog_release(&x->catalog);
	*x = (struct fleet_facts){ 0 };
}

static bool strv_covers(char *const *have, char *const *want, size_t n_want)
{
	for (size_t i = 0; i < n_want; i++)
		if (!strv_contains(have, want[i]))
			return false;
	return true;
}

bool fleet_facts_cover(const struct fleet_facts *x, const struct fleet_facts_ask *ask)
{
	unsigned what = ask->what;

	/* The stages' read counts the alive hosts as well. */
	if ((what & FACTS_ALIVE) && (x->what & FACTS_STAGES))
		what &= ~FACTS_ALIVE;
	if (x->revision <= 0 || (x->what & what) != what)
		return false;
	if ((what & FACTS_STAGES) && !strv_covers(x->groups, ask->groups, ask->n_groups))
		return false;
	if ((what & FACTS_SERVICES) && !strv_covers(x->services, ask->services, ask->n_services))
		return false;
	return true;
}

void fleet_facts_ask_policy(const struct rollout_policy *p, struct fleet_facts_ask *ask)
{
	if (p->n_groups) {
		ask->what |= FACTS_STAGES;
		ask->groups = p->groups;
		ask->n_groups = p->n_groups;
	} else {
		ask->what |= FACTS_ALIVE;
	}
}

/* --- the read --------------------------------------------------------------------------- */

struct facts_read {
	struct fleet_facts x;		/* what was asked, filled by the answer */
	char *prefix;
	fleet_facts_fn fn;
	void *userdata;
};

static void facts_read_free(struct facts_read *rd)
{
	if (!rd)
		return;
	fleet_facts_release(&rd->x);
	free(rd->prefix);
	free(rd);
}

/* The names below dir of a keys-only range, sorted (etcd's key order is
 * strcmp's); a key that is not a name is left out. */
static int hosts_from_kvs(const struct etcd_kv_list *l, const char *dir, struct fleet_hosts *ret)
{
	size_t dir_len = strlen(dir);
	if (!(ret->names = calloc(l->n + 1, sizeof(char *))))
		return -ENOMEM;
	for (size_t i = 0; i < l->n; i++) {
		const struct etcd_kv *kv = &l->kvs[i];
		const char *name = kv->key_len > dir_len ? kv->key + dir_len : "";
		if (!schema_name_valid(name))
			continue;
		if (!(ret->names[ret->n] = strdup(name)))
			return -ENOMEM;
		ret->n++;
	}
	return 0;
}

/* The lists, in the order facts_ranges() asked for them. */
static int facts_decode(struct facts_read *rd, struct etcd_kv_list *lists, size_t n,
			int64_t revision)
{
	struct fleet_facts *x = &rd->x;
	const char *P = rd->prefix;
	size_t k = 0;
	int r;

	if (x->what & FACTS_STAGES) {
		_cleanup_(freep) char *adir = key_alive_dir(P);
		_cleanup_(freep) char *rdir = key_running_version_dir(P);
		if (!adir || !rdir || n < k + 2 + x->n_groups)
			return -ENOMEM;
		if ((r = hosts_from_kvs(&lists[k++], adir, &x->alive_hosts)) < 0 ||
		    (r = fleet_running_from_kvs(&lists[k++], strlen(rdir), &x->running)) < 0)
			return r;
		x->alive = x->alive_hosts.n;
		if (!(x->members = calloc(x->n_groups ? x->n_groups : 1, sizeof(*x->members))))
			return -ENOMEM;
		for (size_t g = 0; g < x->n_groups; g++) {
			_cleanup_(freep) char *gdir = key_group_members_dir(P, x->groups[g]);
			if (!gdir)
				return -ENOMEM;
			if ((r = hosts_from_kvs(&lists[k++], gdir, &x->members[g])) < 0)
				return r;
		}
	} else if (x->what & FACTS_ALIVE) {
		if (n < k + 1)
			return -ENOMEM;
		x->alive = lists[k].count > 0 ? (size_t)lists[k].count : 0;
		k++;
	}
	if (x->what & FACTS_SERVICES) {
		_cleanup_(freep) char *sdir = key_services_dir(P);
		if (!sdir)
			return -ENOMEM;
		for (; k < n; k++)
			if ((r = catalog_from_kvs(&lists[k], sdir, &x->catalog)) < 0)
				return r;
		catalog_sort(&x->catalog);
	}
	x->revision = revision;
	return 0;
}

static void facts_on_snapshot(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			      void *userdata)
{
	struct facts_read *rd = userdata;
	int r = error;

	if (r >= 0)
		r = facts_decode(rd, lists, n, revision);
	if (r < 0)
		fleet_facts_release(&rd->x);
	rd->fn(r, r < 0 ? NULL : &rd->x, rd->userdata);
	facts_read_free(rd);
}

/*
 * Facts are read serializable: served from what the member has applied, with
 * no wait for its apply queue.  A linearizable read waits for that queue, and
 * under a busy etcd (a trigger's burst of writes on a small CPU share) the
 * queue outlasts any patience: the reads timed out and were asked again.  A
 * node needs facts no older than what its own watches delivered, which the
 * same member has applied, and checks their revision (node_facts.c).
 */
#define SERIAL ETCD_SERIALIZABLE

/* The keys the ranges are over: freed by the caller (keys[i] for ranges[i]). */
static int facts_ranges(const struct facts_read *rd, char ***ret_keys, struct etcd_range **ret,
			size_t *ret_n)
{
	const struct fleet_facts *x = &rd->x;
	size_t n = 0, cap = 2 + x->n_groups + strv_length(x->services);
	_cleanup_(strv_freep) char **keys = calloc(cap + 1, sizeof(char *));
	_cleanup_(freep) struct etcd_range *ranges = calloc(cap, sizeof(*ranges));
	const char *P = rd->prefix;

	if (!keys || !ranges)
		return -ENOMEM;
	if (x->what & FACTS_STAGES) {
		ranges[n] = (struct etcd_range){ .key = keys[n] = key_alive_dir(P), .prefix = true,
						 .flags = ETCD_KEYS_ONLY | SERIAL };
		n++;
		ranges[n] = (struct etcd_range){ .key = keys[n] = key_running_version_dir(P),
						 .prefix = true, .flags = SERIAL };
		n++;
		for (size_t g = 0; g < x->n_groups; g++, n++)
			ranges[n] = (struct etcd_range){
				.key = keys[n] = key_group_members_dir(P, x->groups[g]), .prefix = true,
				.flags = ETCD_KEYS_ONLY | SERIAL };
	} else if (x->what & FACTS_ALIVE) {
		ranges[n] = (struct etcd_range){ .key = keys[n] = key_alive_dir(P), .prefix = true,
						 .flags = ETCD_COUNT_ONLY | SERIAL };
		n++;
	}
	for (size_t i = 0; (x->what & FACTS_SERVICES) && x->services[i]; i++, n++)
		ranges[n] = (struct etcd_range){ .key = keys[n] = key_service_dir(P, x->services[i]),
						 .prefix = true, .flags = SERIAL };
	for (size_t i = 0; i < n; i++)
		if (!keys[i])
			return -ENOMEM;
	if (n == 0)
		return -EINVAL;
	*ret_keys = TAKE_PTR(keys);
	*ret = TAKE_PTR(ranges);
	*ret_n = n;
	return 0;
}

static int strv_copy(char *const *v, size_t n, char ***ret)
{
	_cleanup_(strv_freep) char **copy = calloc(n + 1, sizeof(char *));
	if (!copy)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(copy[i] = strdup(v[i])))
			return -ENOMEM;
	*ret = TAKE_PTR(copy);
	return 0;
}

int fleet_facts_read_start(struct fleet *f, const struct fleet_facts_ask *ask, long patience_ms,
			   fleet_facts_fn fn, void *userdata, struct etcd_call **ret)
{
	struct facts_read *rd = calloc(1, sizeof(*rd));
	_cleanup_(strv_freep) char **keys = NULL;
	_cleanup_(freep) struct etcd_range *ranges = NULL;
	size_t n = 0;
	int r;

	if (!rd)
		return -ENOMEM;
	rd->x.what = ask->what;
	if (rd->x.what & FACTS_STAGES)
		rd->x.what &= ~FACTS_ALIVE;	/* counted from the keys */
	rd->fn = fn;
	rd->userdata = userdata;
	if (!(rd->prefix = strdup(fleet_prefix(f))) ||
	    ((rd->x.what & FACTS_STAGES) &&
	     (r = strv_copy(ask->groups, ask->n_groups, &rd->x.groups)) < 0) ||
	    ((rd->x.what & FACTS_SERVICES) &&
	     (r = strv_copy(ask->services, ask->n_services, &rd->x.services)) < 0)) {
		facts_read_free(rd);
		return -ENOMEM;
	}
	rd->x.n_groups = strv_length(rd->x.groups);
	if ((r = facts_ranges(rd, &keys, &ranges, &n)) < 0 ||
	    (r = etcd_snapshot_start(f->etcd, ranges, n, 0, patience_ms, facts_on_snapshot, rd,
				     ret)) < 0) {
		facts_read_free(rd);
		return r;
	}
	return 0;
}

/* --- the answers -------------------------------------------------------------------------- */

static int name_cmp(const void *key, const void *elem)
{
	return strcmp(key, *(char *const *)elem);
}

static bool hosts_have(const struct fleet_hosts *h, const char *name)
{
	return h->n > 0 && bsearch(name, h->names, h->n, sizeof(char *), name_cmp) != NULL;
}

/* The facts' members of group, NULL when they were not read. */
static const struct fleet_hosts *facts_members(const struct fleet_facts *x, const char *group)
{
	for (size_t g = 0; g < x->n_groups; g++)
		if (strcmp(x->groups[g], group) == 0)
			return &x->members[g];
	return NULL;
}

/* The running version of host, NULL when none (running is sorted by host). */
static const char *facts_running(const struct fleet_facts *x, const char *host)
{
	const struct fleet_running *rv = &x->running;
	char **at = rv->n ? bsearch(host, rv->hosts, rv->n, sizeof(char *), name_cmp) : NULL;
	return at ? rv->versions[at - rv->hosts] : NULL;
}

/* How many alive members of group there are, skip aside (may be NULL), and of
 * those, with desired (not NULL), only the ones not running it. */
static size_t facts_count(const struct fleet_facts *x, const struct fleet_hosts *members,
			  const char *skip, const char *desired)
{
	size_t count = 0;
	for (size_t i = 0; i < members->n; i++) {
		const char *host = members->names[i];
		const char *runs;
		if ((skip && strcmp(host, skip) == 0) || !hosts_have(&x->alive_hosts, host))
			continue;
		runs = desired ? facts_running(x, host) : NULL;
		if (!desired || !runs || strcmp(runs, desired) != 0)
			count++;
	}
	return count;
}

int fleet_facts_stage_ready(const struct fleet_facts *x, const struct rollout_policy *p,
			    const char *group, const char *host, const char *desired,
			    char **ret_group, size_t *ret_behind)
{
	size_t stage = rollout_policy_stage(p, group);

	if (stage == 0)
		return 1;
	if (!(x->what & FACTS_STAGES) || !desired)
		return -EAGAIN;
	for (size_t g = 0; g < stage; g++) {
		const struct fleet_hosts *members = facts_members(x, p->groups[g]);
		size_t behind;
		if (!members)
			return -EAGAIN;
		behind = facts_count(x, members, host, desired);
		if (behind > 0) {
			if (!(*ret_group = strdup(p->groups[g])))
				return -ENOMEM;
			*ret_behind = behind;
			return 0;
		}
	}
	return 1;
}

int fleet_facts_percent_limit(const struct fleet_facts *x, const struct rollout_policy *p,
			      const char *group, long *ret)
{
	size_t stage = rollout_policy_stage(p, group), total;

	if (!p->n_groups) {
		if (!(x->what & (FACTS_ALIVE | FACTS_STAGES)))
			return -EAGAIN;
		*ret = rollout_percent_limit(p, x->alive);
		return 0;
	}
	if (!(x->what & FACTS_STAGES))
		return -EAGAIN;
	if (stage < p->n_groups) {
		const struct fleet_hosts *members = facts_members(x, p->groups[stage]);
		if (!members)
			return -EAGAIN;
		total = facts_count(x, members, NULL, NULL);
	} else {
		/* the unlisted: the alive hosts of no listed group */
		total = x->alive;
		for (size_t g = 0; g < p->n_groups; g++) {
			const struct fleet_hosts *members = facts_members(x, p->groups[g]);
			size_t in;
			if (!members)
				return -EAGAIN;
			in = facts_count(x, members, NULL, NULL);
			total -= in < total ? in : total;
		}
	}
	*ret = rollout_percent_limit(p, total);
	return 0;
}
