/*
 * test_plan.c — `orchestrate plan` without etcd: fleet_plan_build() over a
 * fabricated fleet view and rollout keys, and how output/ shows the plan.
 *
 * The fleet: dc1 = a1..a4 (a3 queued already), a5 at v2 already, d1 dead
 * and provisioned; dc2 = b1, b2, and b3 paused (with a hostile reason); c1
 * in no group; e1 in dc1 waiting for a dependency (as it last published).
 * Policy: max_parallel 2, groups dc1 dc2, canary 1, max_failures 1.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "fleet/fleet_plan.h"
#include "output/render.h"
#include "tap.h"

struct fake {
	const char *host, *group, *running;
	bool alive, provisioned;
	const char *paused, *wait, *detail;
};

static const struct fake fleet[] = {
	{ "a1", "dc1", "v1", true, true, NULL, NULL, NULL },
	{ "a2", "dc1", "v1", true, true, NULL, NULL, NULL },
	{ "a3", "dc1", "v1", true, true, NULL, NULL, NULL },
	{ "a4", "dc1", "v1", true, true, NULL, NULL, NULL },
	{ "a5", "dc1", "v2", true, true, NULL, NULL, NULL },
	{ "b1", "dc2", "v1", true, true, NULL, NULL, NULL },
	{ "b2", "dc2", "v1", true, true, NULL, NULL, NULL },
	{ "b3", "dc2", "v1", true, true, "host b3: disk\x1b[31m swap\n", NULL, NULL },
	{ "c1", NULL, "v1", true, true, NULL, NULL, NULL },
	{ "d1", "dc1", NULL, false, true, NULL, NULL, NULL },
	{ "e1", "dc3", "v1", true, true, NULL, "dependency", "waiting for 1 mysql, have 0" },
};
#define N_FLEET (sizeof(fleet) / sizeof(fleet[0]))

static void view_make(struct fleet_view *v, bool e1_in_dc1)
{
	*v = (struct fleet_view){ .n = N_FLEET, .revision = 100 };
	v->hosts = calloc(N_FLEET, sizeof(*v->hosts));
	for (size_t i = 0; i < N_FLEET; i++) {
		const struct fake *f = &fleet[i];
		struct host_view *h = &v->hosts[i];
		h->host = strdup(f->host);
		h->group = f->group ? strdup(f->group) : NULL;
		if (e1_in_dc1 && strcmp(f->host, "e1") == 0) {
			free(h->group);
			h->group = strdup("dc1");
		}
		h->running_version = f->running ? strdup(f->running) : NULL;
		h->alive = f->alive;
		h->provisioned = f->provisioned ? STATE_SUCCESS : STATE_INVALID;
		h->puppet = f->wait ? STATE_PENDING : STATE_SUCCESS;
		h->validation = STATE_INVALID;
		h->paused = f->paused ? strdup(f->paused) : NULL;
		h->wait = f->wait ? strdup(f->wait) : NULL;
		h->detail = f->detail ? strdup(f->detail) : NULL;
	}
}

static void kv_add(struct etcd_kv_list *l, const char *key, const char *value, int64_t rev)
{
	l->kvs = realloc(l->kvs, (l->n + 1) * sizeof(*l->kvs));
	struct etcd_kv *kv = &l->kvs[l->n++];
	*kv = (struct etcd_kv){ 0 };
	kv->key = strdup(key);
	kv->key_len = strlen(key);
	kv->value = strdup(value);
	kv->value_len = strlen(value);
	kv->mod_revision = kv->create_revision = rev;
	l->cap = l->n;
}

static char *const hist_hosts[] = { "a1", "a2", "a3", "b1", NULL };
static const int64_t medians[] = { 30, 50, 40, 20 };

static int build(const char *version, struct fleet_view *v, struct etcd_kv_list *l,
		 struct fleet_plan *p)
{
	struct plan_input in = { .prefix = "", .version = version, .view = v, .rollout = l,
				 .history_hosts = hist_hosts, .medians = medians,
				 .n_histories = 4 };
	return fleet_plan_build(&in, p);
}

static const char *batch_hosts(const struct fleet_plan *p, size_t b, char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; b < p->n_batches && i < p->batches[b].n; i++) {
		strncat(buf, i ? " " : "", size - strlen(buf) - 1);
		strncat(buf, p->hosts[p->batches[b].hosts[i]].host, size - strlen(buf) - 1);
	}
	return buf;
}

static const struct plan_host *find(const struct fleet_plan *p, const char *host)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->hosts[i].host, host) == 0)
			return &p->hosts[i];
	return NULL;
}

static void test_staged_canary_plan(void)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	_cleanup_(fleet_plan_releasep) struct fleet_plan p = { 0 };
	char buf[256];

	view_make(&v, false);
	kv_add(&l, "/current_version", "v1", 5);
	kv_add(&l, "/rollout/policy",
	       "{\"max_parallel\":2,\"groups\":[\"dc1\",\"dc2\"],\"canary\":1,\"max_failures\":1}", 6);
	/* a3 queued already (a leftover of v1's rollout): it is first */
	kv_add(&l, "/rollout/holders/a3", "{\"version\":\"v1\",\"group\":\"dc1\"}", 7);
	ok(build("v2", &v, &l, &p) == 0, "the plan builds");
	is_str(p.version, "v2", "for v2");
	is_str(p.current, "v1", "current_version v1");
	ok(p.new_trigger, "a new trigger");
	is_int(p.n_batches, 4, "four batches");
	is_str(batch_hosts(&p, 0, buf, sizeof(buf)), "a3", "batch 1: the canary, the host queued first");
	ok(p.n_batches > 0 && p.batches[0].canary && !p.batches[0].promote_before, "batch 1 is the canary");
	is_str(batch_hosts(&p, 1, buf, sizeof(buf)), "a1 a2", "batch 2: two slots of dc1, by name");
	ok(p.n_batches > 1 && p.batches[1].promote_before && !p.batches[1].canary,
	   "batch 2 comes after the promote");
	is_str(batch_hosts(&p, 2, buf, sizeof(buf)), "a4", "batch 3: the rest of dc1");
	is_str(batch_hosts(&p, 3, buf, sizeof(buf)), "b1 b2", "batch 4: dc2 after dc1");
	ok(p.n_batches > 3 && p.batches[3].group && strcmp(p.batches[3].group, "dc2") == 0,
	   "batch 4 is dc2's");

	const struct plan_host *h = find(&p, "b3");
	ok(h && h->fate == PLAN_WAIT && h->wait == PLAN_WAIT_PAUSED, "b3 waits: paused");
	h = find(&p, "c1");
	ok(h && h->fate == PLAN_WAIT && h->wait == PLAN_WAIT_STAGE && h->why &&
	   strstr(h->why, "group dc2: 1 host will not reach v2 (b3: paused)"),
	   "c1 (no group: after every listed one) waits for dc2, which b3 holds back: %s",
	   h && h->why ? h->why : "(null)");
	h = find(&p, "e1");
	ok(h && h->fate == PLAN_WAIT && h->wait == PLAN_WAIT_DEPENDENCY, "e1 waits: dependency");
	h = find(&p, "d1");
	ok(h && h->fate == PLAN_DEAD && h->provisioned, "d1 is dead and unaccounted");
	h = find(&p, "a5");
	ok(h && h->fate == PLAN_AT_VERSION, "a5 runs v2 already");
	is_int(p.counts[PLAN_RUN], 6, "six would run");
	is_int(p.counts[PLAN_WAIT], 3, "three wait");
	is_int(p.unaccounted, 1, "one unaccounted");
	is_int(p.alive, 10, "ten alive");
	is_int(p.budget, 1, "the budget: one host may fail");
	ok(!p.budget_spent, "not spent");

	/* durations: dc1 40 (30 40 50), dc2 20, the fleet 30 (20 30 40 50) */
	is_int(p.median, 30, "the fleet's median run");
	is_int(p.batches[0].estimate, 40, "batch 1: a3's own median");
	is_int(p.batches[1].estimate, 50, "batch 2: its slowest host");
	is_int(p.batches[2].estimate, 40, "batch 3: a4 has no history, dc1's median");
	is_int(p.batches[3].estimate, 20, "batch 4: dc2's");
	is_int(p.estimate, 150, "the estimate: the batches summed");
	ok(p.manual_promote, "an operator's promote is left out of the estimate");

	/* the text: the hostile reason cannot draw or break the line */
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	ok(render_plan(out, &p) == 0, "render_plan");
	fclose(out);
	ok(!strchr(text, '\x1b'), "no escape byte reaches the terminal");
	ok(strstr(text, "batch 1  dc1  canary  1 host  ~40s  a3\n") != NULL, "batch 1's line");
	ok(strstr(text, "then the canaries are promoted (by an operator: orchestrate promote)") != NULL,
	   "the promote is said");
	ok(strstr(text, "b3  dc2  paused: host b3: disk\\x1b[31m swap\\n\n") != NULL,
	   "the pause's reason, escaped, on one line");
	ok(strstr(text, "failure budget: 1 host may fail (0 failed so far); failure 2 halts") != NULL,
	   "the budget line");
	printf("# %s", text);

	/* the JSON */
	_cleanup_(freep) char *json = NULL;
	out = open_memstream(&json, &len);
	ok(render_json_plan(out, &p) == 0, "render_json_plan");
	fclose(out);
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_Parse(json);
	ok(obj != NULL, "the JSON parses");
	cJSON *batches = cJSON_GetObjectItem(obj, "batches");
	is_int(cJSON_GetArraySize(batches), 4, "four batches in JSON");
	cJSON *b1 = cJSON_GetArrayItem(batches, 0);
	ok(cJSON_IsTrue(cJSON_GetObjectItem(b1, "canary")), "batch 1 canary in JSON");
	is_int(cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "budget"), "hosts")->valueint, 1,
	       "budget.hosts");
	is_int(cJSON_GetArraySize(cJSON_GetObjectItem(obj, "waiting")), 3, "three waiting in JSON");
	is_int(cJSON_GetObjectItem(cJSON_GetObjectItem(obj, "duration"), "estimate_seconds")->valueint,
	       150, "duration.estimate_seconds");
}

/* The current rollout, halted: nobody runs; its records count. */
static void test_halted_and_spent(void)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	_cleanup_(fleet_plan_releasep) struct fleet_plan p = { 0 }, q = { 0 }, s = { 0 };

	view_make(&v, false);
	kv_add(&l, "/current_version", "v2", 50);
	kv_add(&l, "/rollout/policy", "{\"max_parallel\":2,\"max_failures\":1}", 6);
	kv_add(&l, "/rollout/failed/x1", "{\"version\":\"v2\",\"trigger\":50,\"stage\":\"config\"}", 51);
	kv_add(&l, "/rollout/failed/x2", "{\"version\":\"v2\",\"trigger\":50,\"stage\":\"config\"}", 52);
	ok(build(NULL, &v, &l, &p) == 0, "no version: current_version's rollout");
	is_str(p.version, "v2", "planned v2");
	ok(!p.new_trigger, "not a new trigger");
	is_int(p.failed, 2, "its two failures count");
	ok(p.budget_spent, "the budget is spent");
	is_int(p.n_batches, 0, "no batch");
	const struct plan_host *h = find(&p, "a1");
	ok(h && h->wait == PLAN_WAIT_BUDGET && h->why && strstr(h->why, "more than max_failures 1"),
	   "a1 would halt the rollout: %s", h && h->why ? h->why : "(null)");

	/* a1 runs now, holding its slot: first, and said */
	_cleanup_(fleet_plan_releasep) struct fleet_plan r = { 0 };
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list l2 = ETCD_KV_LIST_INIT;
	char buf[256];
	kv_add(&l2, "/current_version", "v2", 50);
	kv_add(&l2, "/rollout/policy", "{\"max_parallel\":2}", 6);
	kv_add(&l2, "/rollout/holders/c1", "{\"version\":\"v2\"}", 55);
	v.hosts[8].puppet = STATE_RUNNING;	/* c1 */
	ok(build(NULL, &v, &l2, &r) == 0, "plan the rest of v2 with c1 running");
	is_str(batch_hosts(&r, 0, buf, sizeof(buf)), "c1 a1", "c1 holds the first slot, a1 the other");
	h = find(&r, "c1");
	ok(h && h->in_progress, "c1 is in progress");
	v.hosts[8].puppet = STATE_SUCCESS;

	/* a new trigger of v3 leaves v2's records behind */
	ok(build("v3", &v, &l, &q) == 0, "plan v3");
	is_int(q.failed, 0, "v2's failures do not count for v3");
	ok(q.n_batches > 0, "v3 has batches");

	kv_add(&l, "/rollout/halted", "{\"version\":\"v2\",\"trigger\":50,\"reason\":\"bad\\u001b\"}", 53);
	ok(build("v2", &v, &l, &s) == 0, "plan v2, halted");
	is_str(s.halted, "bad\x1b", "halted, with the reason as stored");
	h = find(&s, "a1");
	ok(h && h->wait == PLAN_WAIT_HALTED, "a1 waits: halted");
}

/* No policy: every candidate at once.  max_percent: of the stage's alive. */
static void test_no_policy_and_percent(void)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT, l2 = ETCD_KV_LIST_INIT;
	_cleanup_(fleet_plan_releasep) struct fleet_plan p = { 0 }, q = { 0 };
	char buf[256];

	view_make(&v, true);
	ok(build("v2", &v, &l, &p) == 0, "no policy, no current_version");
	ok(p.new_trigger && !p.current, "a first trigger");
	is_int(p.n_batches, 1, "one batch");
	is_int(p.n_batches ? p.batches[0].n : 0, 7, "every candidate (not b3, e1, a5, d1)");
	is_int(p.budget, -1, "no budget");

	/* 50 % of dc1's 6 alive (a1-a5, e1) = 3 slots */
	kv_add(&l2, "/rollout/policy", "{\"max_percent\":50,\"groups\":[\"dc1\"]}", 6);
	ok(build("v2", &v, &l2, &q) == 0, "max_percent");
	is_str(batch_hosts(&q, 0, buf, sizeof(buf)), "a1 a2 a3", "3 of dc1's 6 alive");
	is_str(batch_hosts(&q, 1, buf, sizeof(buf)), "a4", "then the 4th");
	/* e1 (dc1, dependency) holds every later stage back */
	const struct plan_host *h = find(&q, "b1");
	ok(h && h->wait == PLAN_WAIT_STAGE && h->why && strstr(h->why, "(e1: dependency)"),
	   "b1 (unlisted dc2) waits for dc1: %s", h && h->why ? h->why : "(null)");
}

/* auto_promote waits for canaries without a failure: with one, the promote
 * is an operator's; the failed canary used the only canary place. */
static void test_failed_canary(void)
{
	_cleanup_(fleet_view_releasep) struct fleet_view v;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	_cleanup_(fleet_plan_releasep) struct fleet_plan p = { 0 };

	view_make(&v, false);
	kv_add(&l, "/current_version", "v2", 50);
	kv_add(&l, "/rollout/policy",
	       "{\"max_parallel\":3,\"canary\":1,\"auto_promote\":true,\"max_failures\":5}", 6);
	kv_add(&l, "/rollout/failed/x1", "{\"version\":\"v2\",\"trigger\":50,\"stage\":\"config\"}", 51);
	ok(build(NULL, &v, &l, &p) == 0, "plan v2 after its canary failed");
	ok(p.n_batches > 0 && !p.batches[0].canary && p.batches[0].promote_before,
	   "no canary left: the first batch waits for the promote");
	ok(p.manual_promote, "auto_promote does not promote after a failure: an operator does");
	is_int(p.n_batches ? p.batches[0].n : 0, 3, "then max_parallel 3");
}

static void test_median(void)
{
	int64_t v[] = { 5, 1, 3, 2 };
	is_int(plan_median(v, 4), 2, "even count: the lower middle");
	is_int(plan_median(v, 0), -1, "none");
	struct run_history h = { .n = 3 };
	h.runs[0] = (struct run_entry){ .duration = 9, .result = RUN_FAILED };
	h.runs[1] = (struct run_entry){ .duration = 4, .result = RUN_SUCCESS };
	h.runs[2] = (struct run_entry){ .duration = 6, .result = RUN_SUCCESS };
	is_int(run_history_median(&h), 4, "successful runs only");
}

int main(void)
{
	test_staged_canary_plan();
	test_halted_and_spent();
	test_no_policy_and_percent();
	test_failed_canary();
	test_median();
	return done_testing();
}
