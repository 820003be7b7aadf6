/*
 * test_fleet_facts.c — the answers a node's decisions take from its facts
 * (fleet_facts.h), which are pure: whether the earlier groups of a staged
 * rollout are done, the slots max_percent gives a stage, and whether facts
 * read for one question answer another.  The read itself crosses the wire
 * and is tested against a real etcd (t0548, t0700).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "fleet/fleet.h"
#include "fleet/fleet_facts.h"
#include "tap.h"

/* Names from a space-separated list, sorted as etcd returns keys. */
static struct fleet_hosts hosts(const char *list)
{
	struct fleet_hosts h = { 0 };
	_cleanup_(freep) char *copy = strdup(list);
	char *save = NULL;

	for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
		if (strv_push(&h.names, &h.n, t) < 0)
			abort();
	if (!h.names && !(h.names = calloc(1, sizeof(char *))))
		abort();
	strv_sort_unique(h.names, &h.n);
	return h;
}

/* alive: "a b c"; running: "a=v2 b=v1" (sorted); groups: "dc1:a b,dc2:c d". */
static void facts(struct fleet_facts *x, const char *alive, const char *running,
		  const char *groups)
{
	_cleanup_(freep) char *rcopy = strdup(running), *gcopy = strdup(groups);
	char *save = NULL;

	*x = (struct fleet_facts){ .revision = 10, .what = FACTS_STAGES };
	x->alive_hosts = hosts(alive);
	x->alive = x->alive_hosts.n;
	x->running.hosts = calloc(16, sizeof(char *));
	x->running.versions = calloc(16, sizeof(char *));
	for (char *t = strtok_r(rcopy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');
		*eq = '\0';
		x->running.hosts[x->running.n] = strdup(t);
		x->running.versions[x->running.n++] = strdup(eq + 1);
	}
	x->members = calloc(8, sizeof(*x->members));
	save = NULL;
	for (char *g = strtok_r(gcopy, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(g, ':');
		*colon = '\0';
		if (strv_push(&x->groups, &x->n_groups, g) < 0)
			abort();
		x->members[x->n_groups - 1] = hosts(colon + 1);
	}
}

static void policy(struct rollout_policy *p, const char *json)
{
	if (rollout_policy_decode(json, strlen(json), p) < 0)
		abort();
}

static void test_stage_ready(void)
{
	_cleanup_(fleet_facts_releasep) struct fleet_facts x = { 0 };
	_cleanup_(rollout_policy_releasep) struct rollout_policy p = { 0 };
	_cleanup_(freep) char *group = NULL;
	size_t behind = 0;

	/* dc1: a (at v2), b (at v1), z (not alive); dc2: c, d; e is in none */
	facts(&x, "a b c d e", "a=v2 b=v1 c=v1", "dc1:a b z,dc2:c d");
	struct fleet_facts done = { 0 };
	policy(&p, "{\"groups\":[\"dc1\",\"dc2\"],\"max_parallel\":2}");

	is_int(fleet_facts_stage_ready(&x, &p, "dc1", "a", "v2", &group, &behind), 1,
	       "the first group waits for no one");
	is_int(fleet_facts_stage_ready(&x, &p, "dc2", "c", "v2", &group, &behind), 0,
	       "the second waits while an alive host of the first is behind");
	is_str(group, "dc1", "for dc1");
	is_int(behind, 1, "one behind: b (z is not alive)");
	free(group);
	group = NULL;
	is_int(fleet_facts_stage_ready(&x, &p, NULL, "e", "v2", &group, &behind), 0,
	       "a host of no group goes after the last listed one");
	is_str(group, "dc1", "which still waits for dc1");
	free(group);
	group = NULL;
	is_int(fleet_facts_stage_ready(&x, &p, "dc2", "c", "v1", &group, &behind), 0,
	       "at v1, the host behind is another one");
	is_int(behind, 1, "a, which runs v2");
	free(group);
	group = NULL;
	is_int(fleet_facts_stage_ready(&x, &p, "dc1", "b", "v2", &group, &behind), 1,
	       "a host never waits for itself");

	facts(&done, "a b c", "a=v2 b=v2", "dc1:a b,dc2:c");
	is_int(fleet_facts_stage_ready(&done, &p, "dc2", "c", "v2", &group, &behind), 1,
	       "every alive host of the first group at the version: the second goes");
	fleet_facts_release(&done);

	_cleanup_(rollout_policy_releasep) struct rollout_policy more = { 0 };
	policy(&more, "{\"groups\":[\"dc0\",\"dc1\",\"dc2\"],\"max_parallel\":2}");
	is_int(fleet_facts_stage_ready(&x, &more, "dc2", "c", "v2", &group, &behind), -EAGAIN,
	       "a group the facts did not read: read again");
}

static void test_percent_limit(void)
{
	_cleanup_(fleet_facts_releasep) struct fleet_facts x = { 0 };
	_cleanup_(rollout_policy_releasep) struct rollout_policy flat = { 0 }, staged = { 0 };
	long limit = 0;

	facts(&x, "a b c d e f g h i j", "", "dc1:a b c d z,dc2:e f");
	policy(&flat, "{\"max_percent\":30}");
	is_int(fleet_facts_percent_limit(&x, &flat, NULL, &limit), 0, "without groups");
	is_int(limit, 3, "30 %% of the 10 alive hosts");

	policy(&staged, "{\"groups\":[\"dc1\",\"dc2\"],\"max_percent\":50}");
	is_int(fleet_facts_percent_limit(&x, &staged, "dc1", &limit), 0, "a listed group");
	is_int(limit, 2, "50 %% of dc1's 4 alive hosts (z is not alive)");
	is_int(fleet_facts_percent_limit(&x, &staged, "dc2", &limit), 0, "the other");
	is_int(limit, 1, "50 %% of 2");
	is_int(fleet_facts_percent_limit(&x, &staged, "other", &limit), 0, "the unlisted");
	is_int(limit, 2, "50 %% of the 4 alive hosts in no listed group");

	struct fleet_facts counted = { .revision = 10, .what = FACTS_ALIVE, .alive = 1 };
	is_int(fleet_facts_percent_limit(&counted, &flat, NULL, &limit), 0, "from a count alone");
	is_int(limit, 1, "at least one slot");
	is_int(fleet_facts_percent_limit(&counted, &staged, "dc1", &limit), -EAGAIN,
	       "a count does not answer a staged policy");
}

static void test_cover(void)
{
	_cleanup_(fleet_facts_releasep) struct fleet_facts x = { 0 };
	char *two[] = { (char *)"dc1", (char *)"dc2", NULL };
	char *three[] = { (char *)"dc1", (char *)"dc2", (char *)"dc3", NULL };
	char *db[] = { (char *)"db", NULL };

	facts(&x, "a", "", "dc1:a,dc2:b");
	ok(fleet_facts_cover(&x, &(struct fleet_facts_ask){ .what = FACTS_ALIVE }),
	   "the stages' read counts the alive hosts");
	ok(fleet_facts_cover(&x, &(struct fleet_facts_ask){
		.what = FACTS_STAGES, .groups = two, .n_groups = 2 }), "the groups it read");
	ok(!fleet_facts_cover(&x, &(struct fleet_facts_ask){
		.what = FACTS_STAGES, .groups = three, .n_groups = 3 }), "not a group more");
	ok(!fleet_facts_cover(&x, &(struct fleet_facts_ask){
		.what = FACTS_SERVICES, .services = db, .n_services = 1 }), "nor services");
	x.revision = 0;
	ok(!fleet_facts_cover(&x, &(struct fleet_facts_ask){ .what = FACTS_ALIVE }),
	   "facts never read answer nothing");
}

int main(void)
{
	test_stage_ready();
	test_percent_limit();
	test_cover();
	return done_testing();
}
