/*
 * test_fleet_model.c — the node's model of the fleet (fleet_model.h) fed with
 * watch events as etcd sends them, and the rollout's decision taken from it
 * (fleet_model_decide): whole revisions, the failure budget checked by
 * whoever would start, canaries that are used up by their failures, and how
 * far each watched range is known complete (what the start guard compares);
 * the stages and a host's rank in its own, and which safety records count
 * (only those of the rollout at hand).  All of it in memory: no etcd.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "fleet/fleet_model.h"
#include "fleet/fleet_queue.h"
#include "tap.h"

#define MAX_EVENTS 8

/* One watch response: the events of one revision of one range. */
struct response {
	struct etcd_event ev[MAX_EVENTS];
	size_t n;
	int64_t rev;
};

static void add(struct response *r, enum etcd_event_type type, const char *key,
		const char *value, int64_t create_revision)
{
	struct etcd_event *e = &r->ev[r->n++];
	*e = (struct etcd_event){ .type = type };
	e->kv.key = (char *)key;
	e->kv.key_len = strlen(key);
	e->kv.value = (char *)(value ? value : "");
	e->kv.value_len = value ? strlen(value) : 0;
	e->kv.mod_revision = r->rev;
	e->kv.create_revision = type == ETCD_EVENT_PUT ? (create_revision ? create_revision : r->rev) : 0;
}

static void put(struct response *r, const char *key, const char *value)
{
	add(r, ETCD_EVENT_PUT, key, value, 0);
}

static void del(struct response *r, const char *key)
{
	add(r, ETCD_EVENT_DELETE, key, NULL, 0);
}

static void apply(struct fleet_model *m, struct response *r)
{
	unsigned changed = 0;
	if (fleet_model_apply(m, r->ev, r->n, &changed) < 0) {
		printf("Bail out! cannot apply events\n");
		exit(1);
	}
	*r = (struct response){ .rev = r->rev + 1 };
}

static char *failed_record(int64_t trigger)
{
	char *s = NULL;
	if (asprintf(&s, "{\"version\":\"v2\",\"trigger\":%lld,\"time\":1,\"stage\":\"config\"}",
		     (long long)trigger) < 0)
		exit(1);
	return s;
}

static enum rollout_verdict decide(const struct fleet_model *m, long limit, bool queued,
				   struct rollout_decision *d)
{
	struct rollout_ask ask = { .limit = limit, .alive = -1, .queued = queued };
	free(d->halt_reason);
	*d = (struct rollout_decision){ 0 };
	if (fleet_model_decide(m, &ask, d) < 0)
		return (enum rollout_verdict)-1;
	return d->verdict;
}

/*
 * max_parallel 2, max_failures 1: h1 and h2 hold the slots, h3 is next.  h1
 * fails (within the budget) and gives its slot back: h3 may start.  Then h2
 * fails, and the one response of that revision both frees a slot and records
 * the failure that spends the budget: h3 must halt, not start.
 */
static void test_budget_on_whole_revisions(void)
{
	struct fleet_model m;
	struct response r = { .rev = 10 };
	struct rollout_decision d = { 0 };
	_cleanup_(freep) char *rec1 = failed_record(10), *rec2 = failed_record(10);
	_cleanup_(freep) char *old = failed_record(3);

	ok(fleet_model_init(&m, "", "h3", NULL, NULL) == 0, "init");
	m.desired_known = true;
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	is_int(m.trigger, 10, "the trigger is current_version's mod revision");
	put(&r, "/rollout/policy", "{\"max_parallel\":2,\"max_failures\":1}");
	put(&r, "/rollout/failed/h9", old);	/* of an earlier trigger: never counts */
	apply(&m, &r);
	is_int(decide(&m, 2, false, &d), ROLLOUT_QUEUE, "not queued: queue first");
	put(&r, "/rollout/holders/h1", "{\"version\":\"v2\"}");
	apply(&m, &r);
	put(&r, "/rollout/holders/h2", "{\"version\":\"v2\"}");
	apply(&m, &r);
	is_int(decide(&m, 2, true, &d), ROLLOUT_WAIT, "queued, own key not back yet: wait");
	put(&r, "/rollout/holders/h3", "{\"version\":\"v2\"}");
	apply(&m, &r);
	is_int(decide(&m, 2, true, &d), ROLLOUT_WAIT, "third in the queue of 2 slots: wait");
	is_int(d.rank, 2, "rank 2");

	/* h1 fails: its record and the freed slot come as one revision */
	put(&r, "/rollout/failed/h1", rec1);
	del(&r, "/rollout/holders/h1");
	apply(&m, &r);
	is_int(decide(&m, 2, true, &d), ROLLOUT_START, "one failure, within max_failures 1: start");
	is_int(d.failed, 1, "one failure counted");

	/* h2 fails: the slot it frees and the failure that spends the budget */
	put(&r, "/rollout/failed/h2", rec2);
	del(&r, "/rollout/holders/h2");
	apply(&m, &r);
	is_int(decide(&m, 2, true, &d), ROLLOUT_HALT, "the revision that spends the budget: halt, not start");
	ok(d.halt_reason && strstr(d.halt_reason, "2 hosts failed, more than max_failures 1"),
	   "the halt says why: %s", d.halt_reason ? d.halt_reason : "(null)");
	is_int(decide(&m, 0, true, &d), ROLLOUT_HALT, "the same without a slot limit");

	/* a host that took its slot earlier (splay) is held back the same */
	struct rollout_ask held = { .limit = 2, .alive = -1, .queued = true, .has_slot = true };
	free(d.halt_reason);
	d = (struct rollout_decision){ 0 };
	ok(fleet_model_decide(&m, &held, &d) == 0 && d.verdict == ROLLOUT_HALT,
	   "a slot taken before the budget was spent starts no run after");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* max_fail_percent needs the alive count, asked for only by a host that
 * would start and only once a host failed. */
static void test_percent_budget(void)
{
	struct fleet_model m;
	struct response r = { .rev = 20 };
	struct rollout_decision d = { 0 };
	_cleanup_(freep) char *rec = failed_record(20);
	struct rollout_ask ask = { .limit = 0, .alive = -1 };

	ok(fleet_model_init(&m, "", "h1", NULL, NULL) == 0, "init");
	m.desired_known = true;
	put(&r, "/current_version", "v2");
	put(&r, "/rollout/policy", "{\"max_fail_percent\":10}");
	apply(&m, &r);
	is_int(decide(&m, 0, false, &d), ROLLOUT_START, "no failure: no count needed, start");
	put(&r, "/rollout/failed/h7", rec);
	apply(&m, &r);
	is_int(decide(&m, 0, false, &d), ROLLOUT_COUNT_ALIVE, "a failure: count the alive hosts first");
	ask.alive = 10;
	ok(fleet_model_decide(&m, &ask, &d) == 0 && d.verdict == ROLLOUT_START,
	   "1 of 10 is not more than 10 %%: start");
	ask.alive = 9;
	free(d.halt_reason);
	ok(fleet_model_decide(&m, &ask, &d) == 0 && d.verdict == ROLLOUT_HALT,
	   "1 of 9 is more than 10 %%: halt");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* canary 2: a failed canary is a verdict, and no other host takes its place. */
static void test_canaries_used_by_failures(void)
{
	struct fleet_model m;
	struct response r = { .rev = 30 };
	struct rollout_decision d = { 0 };
	_cleanup_(freep) char *rec = failed_record(30);

	ok(fleet_model_init(&m, "", "h3", NULL, NULL) == 0, "init");
	m.desired_known = true;
	put(&r, "/current_version", "v2");
	put(&r, "/rollout/policy", "{\"max_parallel\":5,\"canary\":2,\"auto_promote\":true,\"max_failures\":5}");
	apply(&m, &r);
	put(&r, "/rollout/holders/h1", "{}");
	put(&r, "/rollout/holders/h2", "{}");
	put(&r, "/rollout/holders/h3", "{}");
	apply(&m, &r);
	is_int(decide(&m, 5, true, &d), ROLLOUT_WAIT_CANARY, "third of two canaries: wait for promote");
	put(&r, "/rollout/failed/h1", rec);
	del(&r, "/rollout/holders/h1");
	apply(&m, &r);
	is_int(decide(&m, 5, true, &d), ROLLOUT_WAIT_CANARY,
	   "a canary failed and gave its slot back: still no third canary");
	is_int(d.cap, 1, "one canary place left (the running one)");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* Each range is complete as far as its own events go: what the start guard
 * compares. */
static void test_range_revisions(void)
{
	struct fleet_model m;
	struct response r = { .rev = 40 };

	ok(fleet_model_init(&m, "", "h1", NULL, NULL) == 0, "init");
	m.revision = m.pause_revision = m.rollout_revision = 39;
	put(&r, "/rollout/holders/h2", "{}");
	apply(&m, &r);
	put(&r, "/pause/global", "{}");
	apply(&m, &r);
	r.rev = 45;
	put(&r, "/available_services/web/h2", "{\"addresses\":{},\"healthy\":true}");
	apply(&m, &r);
	is_int(m.rollout_revision, 40, "rollout/ complete to its last event");
	is_int(m.pause_revision, 41, "pause/ complete to its last event");
	is_int(m.revision, 45, "the model's revision is the newest event");
	fleet_model_release(&m);
}

/* A record of v2 under trigger (what failed/, canary/, halted and promoted
 * hold). */
static char *record(const char *host, int64_t trigger)
{
	char *s = NULL;
	if (asprintf(&s, "{\"version\":\"v2\",\"host\":\"%s\",\"trigger\":%lld,\"time\":1}",
		     host, (long long)trigger) < 0)
		exit(1);
	return s;
}

/* No policy: every host starts at once, whatever it asks. */
static void test_no_policy(void)
{
	struct fleet_model m;
	struct response r = { .rev = 50 };
	struct rollout_decision d = { 0 };

	ok(fleet_model_init(&m, "", "h1", NULL, NULL) == 0, "init");
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	is_int(m.policy_state, 0, "no rollout/policy: no policy");
	is_int(decide(&m, 3, false, &d), ROLLOUT_START, "no policy: start, not queued");
	is_int(d.failed, 0, "no policy: nothing counted");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* The stages of policy.groups: a group's index, the unlisted after them all;
 * a host ranks among the holders of its own stage only. */
static void test_stages_and_rank(void)
{
	struct fleet_model m;
	struct response r = { .rev = 60 };
	struct rollout_decision d = { 0 };
	size_t rank = 99, in_stage = 99;

	ok(fleet_model_init(&m, "", "h3", "dc2", NULL) == 0, "init");
	put(&r, "/current_version", "v2");
	put(&r, "/rollout/policy", "{\"max_parallel\":1,\"groups\":[\"dc1\",\"dc2\"]}");
	apply(&m, &r);
	is_int(m.policy_state, 1, "the policy decodes");
	is_int(rollout_policy_stage(&m.policy, "dc1"), 0, "dc1 is stage 0");
	is_int(rollout_policy_stage(&m.policy, "dc2"), 1, "dc2 is stage 1");
	is_int(rollout_policy_stage(&m.policy, "dc9"), 2, "an unlisted group comes after them");
	is_int(rollout_policy_stage(&m.policy, NULL), 2, "no group comes after them too");

	is_int(fleet_model_holder_rank(&m, &rank, &in_stage), 0, "no holder key: not ranked");
	is_int(in_stage, 0, "an empty stage");
	put(&r, "/rollout/holders/h1", "{\"group\":\"dc1\"}");
	apply(&m, &r);
	put(&r, "/rollout/holders/h2", "{\"group\":\"dc2\"}");
	apply(&m, &r);
	put(&r, "/rollout/holders/h4", "{}");
	apply(&m, &r);
	put(&r, "/rollout/holders/h3", "{\"group\":\"dc2\"}");
	apply(&m, &r);
	is_int(fleet_model_holder_rank(&m, &rank, &in_stage), 1, "its key is back: ranked");
	is_int(rank, 1, "second of dc2, h1 (dc1) and h4 (no group) not counted");
	is_int(in_stage, 2, "two holders in dc2's stage");

	is_int(decide(&m, 1, true, &d), ROLLOUT_WAIT, "one slot, second in the stage: wait");
	ok(d.ranked && d.rank == 1 && d.in_stage == 2, "the decision carries the rank");
	is_int(decide(&m, 2, true, &d), ROLLOUT_START, "two slots: start");

	/* h2 is done: h3 moves up */
	del(&r, "/rollout/holders/h2");
	apply(&m, &r);
	is_int(decide(&m, 1, true, &d), ROLLOUT_START, "first in its stage: start");
	is_int(d.rank, 0, "rank 0");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* The safety records count only for the rollout the model is at: the desired
 * version at its trigger (current_version's mod revision). */
static void test_records_of_this_trigger(void)
{
	struct fleet_model m;
	struct response r = { .rev = 70 };
	struct rollout_record halt = { 0 };
	_cleanup_(freep) char *c1 = record("h1", 70), *c2 = record("h2", 70);
	_cleanup_(freep) char *stale = record("h3", 5), *mine = record("h9", 70);
	_cleanup_(freep) char *halted = record("h2", 70), *promoted = record("op", 70);

	ok(fleet_model_init(&m, "", "h9", NULL, NULL) == 0, "init");
	m.desired_known = true;
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	put(&r, "/rollout/canary/h1", c1);
	put(&r, "/rollout/canary/h2", c2);
	put(&r, "/rollout/canary/h3", stale);
	put(&r, "/rollout/failed/h3", stale);
	apply(&m, &r);
	is_int(fleet_model_canaries(&m), 2, "two canaries of this trigger, one of an old one");
	is_int(fleet_model_failures(&m), 0, "a failure of an old trigger counts not");
	ok(!fleet_model_failed_here(&m, true), "no record of this host");
	ok(!fleet_model_promoted(&m), "not promoted");
	ok(!fleet_model_halted(&m, NULL), "not halted");

	put(&r, "/rollout/failed/h9", mine);
	apply(&m, &r);
	is_int(fleet_model_failures(&m), 1, "this host's failure counts");
	ok(fleet_model_failed_here(&m, false), "and is this host's");

	put(&r, "/rollout/promoted", promoted);
	put(&r, "/rollout/halted", halted);
	apply(&m, &r);
	ok(fleet_model_promoted(&m), "promoted");
	ok(fleet_model_halted(&m, &halt) && halt.host && strcmp(halt.host, "h2") == 0,
	   "halted, by h2");
	rollout_record_release(&halt);

	/* a new trigger starts clean */
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	is_int(fleet_model_canaries(&m), 0, "a new trigger: no canary counts");
	is_int(fleet_model_failures(&m), 0, "a new trigger: no failure counts");
	ok(!fleet_model_promoted(&m) && !fleet_model_halted(&m, NULL),
	   "a new trigger: neither promoted nor halted");
	ok(fleet_model_failed_here(&m, true) && !fleet_model_failed_here(&m, false),
	   "this host's old record is there, but not of this trigger");
	fleet_model_release(&m);
}

/* A stage's gate, rollout/stages/GROUP: watched by a host, then open; only
 * the current trigger's counts, and a value that does not decode, or names
 * no valid host, is no gate (the next host claims it over its revision). */
static char *gate(const char *stage, const char *host, int64_t trigger)
{
	char *s = NULL;
	if (asprintf(&s, "{\"version\":\"v2\",\"host\":\"%s\",\"trigger\":%lld,\"time\":1,"
		     "\"stage\":\"%s\"}", host, (long long)trigger, stage) < 0)
		exit(1);
	return s;
}

static void test_stage_gates(void)
{
	struct fleet_model m;
	struct response r = { .rev = 90 };
	_cleanup_(freep) char *w = gate("watching", "b2", 90), *o = gate("open", "b2", 90);
	_cleanup_(freep) char *stale = gate("open", "b2", 7), *bad = gate("watching", "../x", 90);
	_cleanup_(freep) char *mine = gate("watching", "h9", 90);
	_cleanup_(freep) char *host = NULL;
	int64_t mod = -1;

	ok(fleet_model_init(&m, "", "h9", "g3", NULL) == 0, "init");
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g1", &mod, &host), STAGE_GATE_NONE, "no gate: none");
	ok(mod == 0 && !host, "absent: mod 0, no host");

	put(&r, "/rollout/stages/g1", stale);
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g1", &mod, NULL), STAGE_GATE_NONE,
	       "an old trigger's open gate: none");
	ok(mod == 91, "with its mod revision, to claim it over");

	put(&r, "/rollout/stages/g1", w);
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g1", &mod, &host), STAGE_GATE_WATCHED, "watched");
	ok(host && strcmp(host, "b2") == 0 && mod == 92, "by b2, at its revision");
	free(host);
	host = NULL;
	ok(!fleet_model_stage_claimed(&m, "h9", NULL, &mod), "not this host's claim");
	ok(fleet_model_stage_claimed(&m, "b2", NULL, &mod) != NULL, "b2's claim");
	ok(!fleet_model_stage_claimed(&m, "b2", "g1", &mod), "b2's, but the one it keeps");

	put(&r, "/rollout/stages/g1", o);
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g1", &mod, NULL), STAGE_GATE_OPEN, "open");
	is_int(fleet_model_stage_gate(&m, "g2", &mod, NULL), STAGE_GATE_NONE,
	       "another group's gate: none");

	put(&r, "/rollout/stages/g2", bad);
	put(&r, "/rollout/stages/g0", "not json");
	put(&r, "/rollout/stages/g4", mine);
	put(&r, "/rollout/stages/a/b", mine);	/* not a gate: its group is no name */
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g2", &mod, &host), STAGE_GATE_NONE,
	       "a claim naming no valid host: none");
	ok(!host, "and no host returned");
	is_int(fleet_model_stage_gate(&m, "g0", &mod, NULL), STAGE_GATE_NONE, "not JSON: none");
	ok(mod == 94, "its revision all the same");
	ok(strcmp(fleet_model_stage_claimed(&m, "h9", "g3", &mod), "g4") == 0 && mod == 94,
	   "this host's claim of g4, found when it keeps g3");
	ok(!fleet_model_stage_claimed(&m, "h9", "g4", &mod),
	   "and none else: a/b names no group");

	del(&r, "/rollout/stages/g1");
	apply(&m, &r);
	is_int(fleet_model_stage_gate(&m, "g1", &mod, NULL), STAGE_GATE_NONE, "deleted: none");
	ok(mod == 0, "deleted: mod 0");

	/* a new trigger closes every gate */
	put(&r, "/current_version", "v2");
	apply(&m, &r);
	ok(!fleet_model_stage_claimed(&m, "h9", NULL, &mod), "a new trigger: the claim is stale");
	fleet_model_release(&m);
}

/* Canaries first: until promoted, the canaries are the only slots; a
 * promotion opens the stage to its limit. */
static void test_canary_then_promote(void)
{
	struct fleet_model m;
	struct response r = { .rev = 80 };
	struct rollout_decision d = { 0 };
	_cleanup_(freep) char *done1 = record("h1", 80), *promoted = record("op", 80);

	ok(fleet_model_init(&m, "", "h2", NULL, NULL) == 0, "init");
	m.desired_known = true;
	put(&r, "/current_version", "v2");
	put(&r, "/rollout/policy", "{\"canary\":1}");
	apply(&m, &r);
	is_int(decide(&m, 0, false, &d), ROLLOUT_QUEUE, "a canary policy queues even without a limit");
	put(&r, "/rollout/holders/h2", "{}");
	apply(&m, &r);
	is_int(decide(&m, 0, true, &d), ROLLOUT_START, "the first holder is the canary");
	ok(d.canary, "and starts as one");
	put(&r, "/rollout/canary/h1", done1);
	apply(&m, &r);
	is_int(decide(&m, 0, true, &d), ROLLOUT_WAIT_CANARY, "the canary place is used: wait for promote");
	is_int(d.canaries_done, 1, "one canary done");
	put(&r, "/rollout/promoted", promoted);
	apply(&m, &r);
	is_int(decide(&m, 0, true, &d), ROLLOUT_START, "promoted: start, no limit left");
	ok(!d.canary, "not as a canary");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/*
 * The daemon's model (queue_apart): the slot queue is followed apart, so the
 * model neither keeps holder keys nor watches them (rollout/ as two ranges
 * around holders/), the decision takes the host's place from the caller,
 * and the policy above holders/ is complete up to a revision of its own.
 */
static void test_queue_apart(void)
{
	struct fleet_model m;
	struct response r = { .rev = 90 };
	struct rollout_decision d = { 0 };
	_cleanup_(freep) struct etcd_watch_range *ranges = NULL;
	size_t n = 0;
	unsigned changed = 0;

	ok(fleet_model_init(&m, "/p", "h3", NULL, NULL) == 0, "init");
	m.queue_apart = true;
	ok(fleet_model_ranges(&m, &ranges, &n) == 0, "ranges");
	is_int(n, 6, "version, pause, rollout below and above holders/, own alive/, the catalog");
	is_int(fleet_model_catalog_range(&m), 5, "the catalog's range comes after them");
	ok(strcmp(ranges[4].key, "/p/alive/h3") == 0 && !ranges[4].prefix && !ranges[4].range_end,
	   "this host's own alive/ key, alone");
	is_int(ranges[4].flags, ETCD_WATCH_NO_PUT, "its deletes only");
	ok(strcmp(ranges[2].key, "/p/rollout/") == 0 && ranges[2].range_end &&
	   strcmp(ranges[2].range_end, "/p/rollout/holders/") == 0,
	   "[rollout/, holders/): canary/, failed/, halted");
	ok(strcmp(ranges[3].key, "/p/rollout/holders0") == 0 && ranges[3].range_end &&
	   strcmp(ranges[3].range_end, "/p/rollout0") == 0, "[holders0, rollout0): policy, promoted");
	ok(strcmp("/p/rollout/policy", ranges[3].key) > 0 &&
	   strcmp("/p/rollout/promoted", ranges[3].key) > 0 &&
	   strcmp("/p/rollout/halted", ranges[2].range_end) < 0 &&
	   strcmp("/p/rollout/failed/h1", ranges[2].range_end) < 0, "each key in its range");

	put(&r, "/p/current_version", "v2");
	apply(&m, &r);
	put(&r, "/p/rollout/policy", "{\"max_parallel\":2}");
	apply(&m, &r);
	int64_t policy_rev = r.rev - 1;
	put(&r, "/p/rollout/holders/h1", "{}");
	if (fleet_model_apply(&m, r.ev, r.n, &changed) < 0)
		exit(1);
	is_int(m.n_holders, 0, "a holder key is not kept");
	is_int(changed, 0, "and changes nothing");
	r = (struct response){ .rev = r.rev + 1 };
	put(&r, "/p/rollout/failed/h9", "{}");
	apply(&m, &r);
	is_int(m.rollout_high_revision, policy_rev, "the policy's range is complete up to its own event");
	is_int(m.rollout_revision, r.rev - 1, "the rest of rollout/ up to the failure");

	struct rollout_ask ask = { .limit = 2, .alive = -1, .queued = true };
	ok(fleet_model_decide(&m, &ask, &d) == 0 && d.verdict == ROLLOUT_WAIT && !d.ranked,
	   "queued, its place not known yet: wait");
	ask.placed = true;
	ask.ahead = 2;
	ok(fleet_model_decide(&m, &ask, &d) == 0 && d.verdict == ROLLOUT_WAIT && d.ranked &&
	   d.rank == 2, "two ahead of it, two slots: wait, third");
	ask.ahead = 1;
	ok(fleet_model_decide(&m, &ask, &d) == 0 && d.verdict == ROLLOUT_START && d.rank == 1,
	   "one ahead of it: start");
	free(d.halt_reason);
	fleet_model_release(&m);
}

/* A release on the first waiter's stream: whose key went, when, and whether
 * its run had started; anything else is not one. */
static void test_queue_release(void)
{
	struct etcd_event ev = { .type = ETCD_EVENT_DELETE };
	struct queue_release rel = { 0 };
	char key[] = "/p/rollout/holders/h1";
	char was[] = "{\"version\":\"v2\",\"group\":\"g\",\"holding\":true}";
	char bad_key[] = "/p/rollout/holders/h 1";

	ev.kv = (struct etcd_kv){ .key = key, .key_len = strlen(key), .mod_revision = 9 };
	is_int(fleet_queue_release(&ev, &rel), 0, "a deletion without the key as it was: none");
	ev.prev_kv = (struct etcd_kv){ .key = key, .key_len = strlen(key), .value = was,
				       .value_len = strlen(was), .create_revision = 5 };
	is_int(fleet_queue_release(&ev, &rel), 1, "a holder's deletion is a release");
	ok(rel.host && strcmp(rel.host, "h1") == 0 && rel.held && rel.created == 5 &&
	   rel.revision == 9 && rel.version && strcmp(rel.version, "v2") == 0,
	   "h1, running, created at 5, gone at 9, at v2");
	queue_release_release(&rel);
	ev.prev_kv.value = (char *)"{\"version\":\"v2\"}";
	ev.prev_kv.value_len = strlen(ev.prev_kv.value);
	ok(fleet_queue_release(&ev, &rel) == 1 && !rel.held, "a waiting host's: not running");
	queue_release_release(&rel);
	ev.prev_kv.key = bad_key;
	ev.prev_kv.key_len = strlen(bad_key);
	is_int(fleet_queue_release(&ev, &rel), 0, "a key that names no host: none");
	ev.type = ETCD_EVENT_PUT;
	ev.prev_kv.key = key;
	ev.prev_kv.key_len = strlen(key);
	is_int(fleet_queue_release(&ev, &rel), 0, "a put: none");
}

/* The host's own alive/ key: its delete (the lease revoked) is said to the
 * node, its put (the node's own registration) is not, and nobody else's
 * alive/ key is the model's. */
static void test_own_alive_key(void)
{
	struct fleet_model m;
	struct response r = { .rev = 40 };
	unsigned changed = 0;

	ok(fleet_model_init(&m, "/p", "h3", NULL, NULL) == 0, "init");
	put(&r, "/p/alive/h3", "{}");
	if (fleet_model_apply(&m, r.ev, r.n, &changed) < 0)
		exit(1);
	is_int(changed, 0, "its own registration changes nothing");
	r = (struct response){ .rev = r.rev + 1 };
	del(&r, "/p/alive/h4");
	if (fleet_model_apply(&m, r.ev, r.n, &changed) < 0)
		exit(1);
	is_int(changed, 0, "another host's alive/ key is not the model's");
	r = (struct response){ .rev = r.rev + 1 };
	del(&r, "/p/alive/h3");
	if (fleet_model_apply(&m, r.ev, r.n, &changed) < 0)
		exit(1);
	is_int(changed, MODEL_SELF_GONE, "its delete: the lease is gone");
	is_int(m.revision, r.rev, "and the model is at its revision");
	fleet_model_release(&m);
}

int main(void)
{
	test_queue_release();
	test_queue_apart();
	test_own_alive_key();
	test_budget_on_whole_revisions();
	test_percent_budget();
	test_canaries_used_by_failures();
	test_range_revisions();
	test_no_policy();
	test_stages_and_rank();
	test_records_of_this_trigger();
	test_canary_then_promote();
	test_stage_gates();
	return done_testing();
}
