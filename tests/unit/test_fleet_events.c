/*
 * test_fleet_events.c — the events of `orchestrate events` derived from watch
 * events (fleet_events.h), all in memory: each revision is fed as etcd sends
 * it (a txn whole), and what comes out is compared as one line per event
 * ("KIND HOST VERSION [stage S] [attempt N] [wait W] [scope S]").  A state
 * change is an event, a rewrite of the same state is none; a txn's several
 * keys make the one event they mean (a success is "succeeded", not four);
 * a compaction's re-read is compared with the state the stream had.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/fleet_events.h"
#include "tap.h"

#define MAX_EVENTS 16

struct response {
	struct etcd_event ev[MAX_EVENTS];
	size_t n;
	int64_t rev;
};

static void add(struct response *r, enum etcd_event_type type, const char *key,
		const char *value)
{
	struct etcd_event *e = &r->ev[r->n++];
	*e = (struct etcd_event){ .type = type };
	e->kv.key = (char *)key;
	e->kv.key_len = strlen(key);
	e->kv.value = (char *)(value ? value : "");
	e->kv.value_len = value ? strlen(value) : 0;
	e->kv.mod_revision = r->rev;
	e->kv.create_revision = r->rev;
}

static void put(struct response *r, const char *key, const char *value)
{
	add(r, ETCD_EVENT_PUT, key, value);
}

static void del(struct response *r, const char *key)
{
	add(r, ETCD_EVENT_DELETE, key, NULL);
}

static char *describe(const struct fleet_event_list *l)
{
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < l->n; i++) {
		const struct fleet_event *e = &l->v[i];
		buf_printf(&b, "%s%s %s %s", i ? "; " : "", fleet_event_kind_name(e->kind),
			   e->host ? e->host : "-", e->version ? e->version : "-");
		if (e->from)
			buf_printf(&b, " from %s", e->from);
		if (e->stage)
			buf_printf(&b, " stage %s", e->stage);
		if (e->attempt)
			buf_printf(&b, " attempt %ld", e->attempt);
		if (e->wait)
			buf_printf(&b, " wait %s", e->wait);
		if (e->scope)
			buf_printf(&b, " scope %s", e->scope);
	}
	return buf_detach(&b) ?: strdup("");
}

/* Applies r (one revision) and returns what it said; r is emptied for the
 * next revision. */
static char *apply(struct fleet_events_state *s, struct response *r)
{
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list out = { 0 };
	if (fleet_events_state_apply(s, r->ev, r->n, &out) < 0) {
		printf("Bail out! cannot apply events\n");
		exit(1);
	}
	for (size_t i = 0; i < out.n; i++)
		if (out.v[i].revision != r->rev) {
			printf("Bail out! event at revision %lld, wanted %lld\n",
			       (long long)out.v[i].revision, (long long)r->rev);
			exit(1);
		}
	*r = (struct response){ .rev = r->rev + 1 };
	return describe(&out);
}

static const char *detail_of(struct fleet_events_state *s, struct response *r, size_t i)
{
	static char *kept;
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list out = { 0 };
	free(kept);
	kept = NULL;
	if (fleet_events_state_apply(s, r->ev, r->n, &out) < 0 || i >= out.n)
		return NULL;
	*r = (struct response){ .rev = r->rev + 1 };
	kept = out.v[i].detail ? strdup(out.v[i].detail) : NULL;
	return kept;
}

#define STEP(s, r, want, name)                          \
	do {                                            \
		char *_d = apply(s, r);                 \
		is_str(_d, want, name);                 \
		free(_d);                               \
	} while (0)

static void test_rollout(void)
{
	struct fleet_events_state s;
	struct response r = { .rev = 2 };

	if (fleet_events_state_init(&s, "/p") < 0) {
		printf("Bail out! init\n");
		exit(1);
	}
	put(&r, "/p/current_version", "v1");
	STEP(&s, &r, "trigger - v1", "a first current_version is a trigger");

	put(&r, "/p/current_version", "v2");
	put(&r, "/p/previous_version", "v1");
	STEP(&s, &r, "trigger - v2 from v1", "trigger_update's txn is one trigger");

	put(&r, "/p/current_version", "v2");
	put(&r, "/p/previous_version", "v2");
	STEP(&s, &r, "trigger - v2 from v2", "the same version set again is a new rollout");

	put(&r, "/p/current_version", "v3");
	put(&r, "/p/previous_version", "v2");
	STEP(&s, &r, "trigger - v3 from v2", "v3");
	put(&r, "/p/current_version", "v2");
	put(&r, "/p/previous_version", "v3");
	STEP(&s, &r, "rollback - v2 from v3", "back to previous_version is a rollback");

	put(&r, "/p/current_version", "../etc");
	STEP(&s, &r, "trigger - - from v2", "an implausible current_version is said, without a version");
	put(&r, "/p/current_version", "v4");
	put(&r, "/p/previous_version", "v2");
	STEP(&s, &r, "trigger - v4", "a valid one after it");

	/* a halt that reverts, in one txn: the halt first, then the revert */
	put(&r, "/p/rollout/halted",
	    "{\"version\":\"v4\",\"trigger\":9,\"time\":5,\"host\":\"web1\",\"reason\":\"2 hosts failed\","
	    "\"reverted_to\":\"v2\",\"failed\":2}");
	put(&r, "/p/current_version", "v2");
	put(&r, "/p/previous_version", "v4");
	STEP(&s, &r, "halted - v4; reverted - v2 from v4", "a halt with auto_revert");

	del(&r, "/p/rollout/halted");
	STEP(&s, &r, "resumed - v4 scope rollout", "rollout_policy resume clears the halt");

	put(&r, "/p/rollout/policy", "{\"max_parallel\":2}");
	STEP(&s, &r, "policy - -", "a policy set");
	put(&r, "/p/rollout/policy", "{\"max_parallel\":2}");
	STEP(&s, &r, "", "the same policy written again says nothing");
	put(&r, "/p/rollout/holders/web1", "{\"version\":\"v2\"}");
	STEP(&s, &r, "", "a holder key alone says nothing");

	put(&r, "/p/rollout/promoted", "{\"version\":\"v2\",\"trigger\":12,\"reason\":\"operator\"}");
	STEP(&s, &r, "promoted - v2", "promote");

	put(&r, "/p/pause/global", "{\"reason\":\"freeze\",\"time\":7}");
	is_str(detail_of(&s, &r, 0), "global: freeze", "a global pause says its reason");
	put(&r, "/p/pause/groups/dc1", "{\"time\":7}");
	put(&r, "/p/pause/hosts/web2", "{\"time\":7}");
	STEP(&s, &r, "paused - - scope group; paused web2 - scope host", "group and host pauses");
	del(&r, "/p/pause/global");
	del(&r, "/p/pause/hosts/web2");
	STEP(&s, &r, "resumed - - scope global; resumed web2 - scope host", "resume");

	put(&r, "/p/available_services/glance/web1", "{\"addresses\":{},\"healthy\":true}");
	STEP(&s, &r, "", "the catalog is no part of the rollout");

	fleet_events_state_release(&s);
}

#define PENDING(w) "{\"time\":1,\"version\":\"v2\",\"exit_code\":-1,\"detail\":\"waiting\",\"wait\":\"" w "\"}"

static void test_host(void)
{
	struct fleet_events_state s;
	struct response r = { .rev = 2 };

	fleet_events_state_init(&s, "");
	put(&r, "/alive/web1", "{\"time\":1,\"pid\":3}");
	put(&r, "/status/provisioned/success/web1", "{\"time\":1}");
	put(&r, "/groups/g1/web1", "");
	is_str(detail_of(&s, &r, 0), "group g1, alive", "registration says the group");
	is_int(s.n_hosts, 1, "one host");

	put(&r, "/status/puppet/pending/web1", PENDING("slot"));
	STEP(&s, &r, "waiting web1 v2 wait slot", "queued for a slot");
	put(&r, "/status/puppet/pending/web1", PENDING("slot"));
	STEP(&s, &r, "", "the same wait written again says nothing");
	put(&r, "/status/puppet/pending/web1", PENDING("canary"));
	STEP(&s, &r, "waiting web1 v2 wait canary", "another reason is news");

	put(&r, "/status/puppet/running/web1", "{\"time\":2,\"version\":\"v2\",\"exit_code\":0}");
	del(&r, "/status/puppet/pending/web1");
	del(&r, "/status/puppet/success/web1");
	del(&r, "/status/puppet/failed/web1");
	STEP(&s, &r, "started web1 v2", "a status move to running");

	put(&r, "/status/puppet/failed/web1",
	    "{\"time\":3,\"version\":\"v2\",\"exit_code\":1,\"detail\":\"out\\nError: no\\n\",\"attempts\":1}");
	del(&r, "/status/puppet/running/web1");
	put(&r, "/rollout/failed/web1", "{\"version\":\"v2\",\"trigger\":2,\"stage\":\"config\",\"attempts\":1}");
	STEP(&s, &r, "failed web1 v2 stage config attempt 1",
	     "a failure with its record is one event");
	put(&r, "/status/puppet/failed/web1",
	    "{\"time\":4,\"version\":\"v2\",\"exit_code\":1,\"detail\":\"a\\nError: again\",\"attempts\":2}");
	is_str(detail_of(&s, &r, 0), "Error: again", "a retry's failure, its last line");

	put(&r, "/status/puppet/success/web1", "{\"time\":5,\"version\":\"v2\",\"exit_code\":2}");
	del(&r, "/status/puppet/failed/web1");
	put(&r, "/status/validation/failed/web1",
	    "{\"time\":5,\"version\":\"v2\",\"exit_code\":1,\"attempts\":3}");
	STEP(&s, &r, "failed web1 v2 stage validation attempt 3", "validation failed");

	put(&r, "/status/puppet/success/web1", "{\"time\":6,\"version\":\"v2\",\"exit_code\":0}");
	put(&r, "/status/validation/success/web1", "{\"time\":6,\"version\":\"v2\",\"exit_code\":0}");
	del(&r, "/status/validation/failed/web1");
	put(&r, "/running_version/web1", "{\"version\":\"v2\",\"time\":6}");
	put(&r, "/alive/web1", "{\"time\":6,\"pid\":3,\"version\":\"v2\"}");
	del(&r, "/rollout/holders/web1");
	del(&r, "/rollout/failed/web1");
	put(&r, "/rollout/canary/web1", "{\"version\":\"v2\",\"trigger\":2}");
	STEP(&s, &r, "succeeded web1 v2; canary web1 v2", "a success's txn is one success");

	put(&r, "/rollout/failed/web1", "{\"version\":\"v2\",\"trigger\":2,\"stage\":\"died\",\"attempts\":1}");
	STEP(&s, &r, "failed web1 v2 stage died attempt 1", "a failure only a record tells");

	/* the lease expires: alive and running_version go together */
	del(&r, "/alive/web1");
	del(&r, "/running_version/web1");
	STEP(&s, &r, "dead web1 v2", "a host whose lease expired is dead");
	put(&r, "/alive/web1", "{\"time\":8,\"pid\":4}");
	STEP(&s, &r, "alive web1 -", "and alive again");

	put(&r, "/status/puppet/bogus/web1", "{}");
	put(&r, "/status/puppet/running/../alive/web1", "{}");
	put(&r, "/status/provisioned/pending/web1", "{}");
	put(&r, "/alivex/web1", "{}");
	STEP(&s, &r, "", "keys outside the layout say nothing");

	/* decommission: every key of the host in one txn */
	del(&r, "/alive/web1");
	del(&r, "/status/provisioned/success/web1");
	del(&r, "/status/puppet/success/web1");
	del(&r, "/status/validation/success/web1");
	del(&r, "/groups/g1/web1");
	del(&r, "/rollout/failed/web1");
	del(&r, "/rollout/canary/web1");
	STEP(&s, &r, "decommissioned web1 -", "decommission");
	is_int(s.n_hosts, 0, "nothing kept of a decommissioned host");

	fleet_events_state_release(&s);
}

/* After a compaction the stream compares its state with a fresh read. */
static void test_diff(void)
{
	struct fleet_events_state a, b;
	struct response r = { .rev = 2 };
	_cleanup_(fleet_event_list_releasep) struct fleet_event_list out = { 0 };

	fleet_events_state_init(&a, "");
	fleet_events_state_init(&b, "");
	put(&r, "/current_version", "v1");
	put(&r, "/alive/web1", "{\"time\":1}");
	put(&r, "/status/provisioned/success/web1", "{\"time\":1}");
	put(&r, "/alive/web2", "{\"time\":1}");
	put(&r, "/status/provisioned/success/web2", "{\"time\":1}");
	put(&r, "/status/puppet/pending/web2", PENDING("slot"));
	fleet_events_state_apply(&a, r.ev, r.n, NULL);
	fleet_events_state_apply(&b, r.ev, r.n, NULL);
	r = (struct response){ .rev = 9 };
	put(&r, "/current_version", "v2");
	put(&r, "/pause/global", "{}");
	put(&r, "/status/puppet/failed/web2", "{\"time\":9,\"version\":\"v2\",\"attempts\":4}");
	del(&r, "/status/puppet/pending/web2");
	del(&r, "/alive/web1");
	put(&r, "/alive/web3", "{\"time\":9}");
	put(&r, "/status/provisioned/success/web3", "{\"time\":9}");
	fleet_events_state_apply(&b, r.ev, r.n, NULL);

	if (fleet_events_state_diff(&a, &b, 9, &out) < 0) {
		printf("Bail out! diff\n");
		exit(1);
	}
	char *d = describe(&out);
	is_str(d, "trigger - v2 from v1; paused - - scope global; dead web1 -; "
		  "failed web2 v2 stage config attempt 4; registered web3 -",
	       "the differences between two states are the events");
	free(d);
	fleet_event_list_release(&out);
	fleet_events_state_diff(&b, &b, 9, &out);
	is_int(out.n, 0, "a state compared with itself says nothing");
	fleet_events_state_release(&a);
	fleet_events_state_release(&b);
}

int main(void)
{
	test_rollout();
	test_host();
	test_diff();
	return done_testing();
}
