#!/bin/sh
#
# orchestrate plan: the plan of a trigger, then the trigger, and what the
# fleet of real daemons did under the same policy matches it: the batches'
# order (the canary first and alone, then the rest of g1 two at a time, then
# g2), the hosts it said would wait (a paused host, a host whose dependency
# is unmet) never start, the dead host never starts, and every host it put
# in a batch does.  Which host of a group is the canary is decided by the
# queue at the trigger, so the comparison is of groups in start order and of
# the batch sizes, not of names within a group.  Then: the rest of a
# rollout (no VERSION), the JSON, the errors and their exit codes.

test_description='orchestrate plan: the plan matches what the fleet then does'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
command -v python3 >/dev/null 2>&1 || skip_all "needs python3 to read the JSON"
start_etcd
LEASE_TTL=5
export LEASE_TTL

# in_group NAME GROUP  — moves a node set up by node_setup to GROUP.
in_group () {
	sed -i "s/^  group: g1\$/  group: $2/" "$TRASH/$1/orchestrate.yaml"
}

# pq FILE EXPR  — EXPR holds of p, the plan FILE holds as JSON, with
# batch(i) the hosts of batch i (0-based) and waiting(host) its reason.
pq () {
	python3 - "$1" "$2" <<-\EOF
	import json, sys
	p = json.load(open(sys.argv[1]))
	def batch(i):
	    return p["batches"][i]["hosts"]
	def waiting(host):
	    return [w["reason"] for w in p["waiting"] if w["host"] == host]
	ok = eval(sys.argv[2])
	if not ok:
	    print("not true of the plan: " + sys.argv[2], file=sys.stderr)
	sys.exit(0 if ok else 1)
	EOF
}

# starts VERSION  — the hosts whose config run of VERSION started, in the
# order they started (runs.log), one a line.
starts () {
	awk -v v="$1" '$1 == "config-start" && $3 == v { print $4, $2 }' "$TRASH/runs.log" |
		sort -n | awk '{ print $2 }'
}

test_expect_success 'setup: g1 = a1 a2 a3 x1, g2 = b1 b2 p1 d1 (d1 needs mysql) at v1' '
	for n in a1 a2 a3 x1 b1 b2 p1 d1; do node_setup $n; echo 0.3 >$n/config.sleep; done &&
	for n in b1 b2 p1 d1; do in_group $n g2; done &&
	sed -i "s/^  services: \[svc-d1, common\]$/  services: [svc-d1, common]\n  depends: [{service: mysql, count: 1}]/" d1/orchestrate.yaml &&
	grep -q "depends:" d1/orchestrate.yaml &&
	etcdctl_put /current_version v1 &&
	for n in a1 a2 a3 x1 b1 b2 p1 d1; do start_node $n || exit 1; done &&
	wait_for "node_at a1 v1 && node_at a2 v1 && node_at a3 v1 && node_at x1 v1 &&
		  node_at b1 v1 && node_at b2 v1 && node_at p1 v1" 40 &&
	wait_for "etcdctl_get /status/puppet/pending/d1 | grep -q dependency" 20
'

test_expect_success 'the policy, a paused host and a dead one' '
	orch rollout_policy set --groups g1,g2 --max-parallel 2 --canary 1 --auto-promote \
		--max-failures 1 &&
	orch pause --host p1 --reason "disk swap" &&
	kill -9 "$(node_pid x1)" &&
	wait_for "! etcdctl_exists /alive/x1" 20
'

test_expect_success 'plan v2: the canary, the rest of g1 by two, then g2; who waits and why' '
	orch plan v2 >plan.txt &&
	cat plan.txt &&
	orch --json plan v2 >plan.json &&
	json_ok plan.json &&
	pq plan.json "p[\"version\"] == \"v2\" and p[\"new_trigger\"] and p[\"current_version\"] == \"v1\"" &&
	pq plan.json "len(p[\"batches\"]) == 3" &&
	pq plan.json "p[\"batches\"][0][\"canary\"] and len(batch(0)) == 1 and p[\"batches\"][0][\"group\"] == \"g1\"" &&
	pq plan.json "p[\"batches\"][1][\"promote_before\"] and len(batch(1)) == 2 and p[\"batches\"][1][\"group\"] == \"g1\"" &&
	pq plan.json "sorted(batch(0) + batch(1)) == [\"a1\", \"a2\", \"a3\"]" &&
	pq plan.json "sorted(batch(2)) == [\"b1\", \"b2\"] and p[\"batches\"][2][\"group\"] == \"g2\"" &&
	pq plan.json "waiting(\"p1\") == [\"paused\"] and waiting(\"d1\") == [\"dependency\"]" &&
	pq plan.json "[d[\"host\"] for d in p[\"dead\"]] == [\"x1\"] and p[\"dead\"][0][\"unaccounted\"]" &&
	pq plan.json "p[\"budget\"][\"hosts\"] == 1 and p[\"alive\"] == 7 and p[\"hosts\"] == 8" &&
	pq plan.json "p[\"duration\"][\"estimate_seconds\"] is not None" &&
	grep -q "^batch 1  g1  canary  1 host  " plan.txt &&
	grep -q "then the canaries are promoted (auto_promote)" plan.txt &&
	grep -q "^  p1  g2  paused: host p1: disk swap" plan.txt &&
	grep -q "^  d1  g2  dependency: waiting for 1 mysql, have 0 (as last published)" plan.txt &&
	grep -q "^  x1  g1  unaccounted" plan.txt &&
	grep -q "^failure budget: 1 host may fail" plan.txt
'

# the plan, for whoever reads the TAP output
test -f "$TRASH/plan.txt" && say_comment <"$TRASH/plan.txt"

test_expect_success 'trigger v2: the fleet runs the plan' '
	: >"$TRASH/runs.log" &&
	orch trigger_update v2 &&
	wait_for "node_at a1 v2 && node_at a2 v2 && node_at a3 v2 && node_at b1 v2 && node_at b2 v2" 60 &&
	starts v2 >started &&
	cat "$TRASH/runs.log" &&
	echo "started: $(cat started | tr "\n" " ")" &&
	test_line_count = 5 started &&
	sort started >started.sorted &&
	printf "a1\na2\na3\nb1\nb2\n" >expect.sorted &&
	test_cmp expect.sorted started.sorted &&
	# the group of each start, in order, is that of the plan flattened
	python3 -c "
import json
p = json.load(open(\"plan.json\"))
print(\"\n\".join(b[\"group\"] for b in p[\"batches\"] for h in b[\"hosts\"]))" >expect.groups &&
	sed "s/^a.*/g1/; s/^b.*/g2/" started >actual.groups &&
	test_cmp expect.groups actual.groups
'

test -f "$TRASH/started" && echo "started in order: $(tr '\n' ' ' <"$TRASH/started")" | say_comment

test_expect_success 'the canary ran alone: its run ended before the next one started' '
	canary=$(head -n 1 started) &&
	end=$(awk -v h="$canary" "\$1 == \"config-end\" && \$2 == h && \$3 == \"v2\" { print \$4 }" "$TRASH/runs.log") &&
	second=$(awk -v h="$(sed -n 2p started)" "\$1 == \"config-start\" && \$2 == h && \$3 == \"v2\" { print \$4 }" "$TRASH/runs.log") &&
	echo "canary $canary ended at $end, the next started at $second" &&
	test "$end" -lt "$second" &&
	etcdctl_exists /rollout/canary/$canary
'

test_expect_success 'the hosts the plan said would wait did, for the reason it gave' '
	! grep -q "config-start p1 v2" "$TRASH/runs.log" &&
	! grep -q "config-start d1 v2" "$TRASH/runs.log" &&
	! grep -q "config-start x1 v2" "$TRASH/runs.log" &&
	wait_for "etcdctl_get /status/puppet/pending/p1 | grep -q \"\\\"wait\\\":\\\"pause\\\"\"" 10 &&
	etcdctl_get /status/puppet/pending/d1 | grep -q "\"wait\":\"dependency\""
'

test_expect_success 'plan without VERSION: the rest of the current rollout' '
	orch --json plan >rest.json &&
	pq rest.json "p[\"version\"] == \"v2\" and not p[\"new_trigger\"]" &&
	pq rest.json "p[\"batches\"] == [] and sorted(p[\"at_version\"]) == [\"a1\", \"a2\", \"a3\", \"b1\", \"b2\"]" &&
	pq rest.json "p[\"promoted\"] and p[\"canaries_done\"] == 1" &&
	pq rest.json "sorted(w[\"host\"] for w in p[\"waiting\"]) == [\"d1\", \"p1\"]" &&
	orch plan >rest.txt &&
	grep -q "^plan for v2: the current rollout, from now on" rest.txt
'

test_expect_success 'a hostile pause reason is printed safely' '
	orch pause --host p1 --reason "$(printf "bad\033[31mred\nline")" &&
	orch plan v3 >hostile.txt &&
	! grep -q "$(printf "\033")" hostile.txt &&
	grep -q "^  p1  g2  paused: host p1: bad\\\\x1b\[31mred\\\\nline$" hostile.txt &&
	orch --json plan v3 >hostile.json &&
	json_ok hostile.json
'

test_expect_success 'errors: an invalid VERSION (64), nothing to plan (1), etcd unreachable (69)' '
	test_expect_code 64 orch plan "../v2" 2>err &&
	test_one_line err &&
	test_expect_code 64 orch plan v2 v3 2>err &&
	test_expect_code 1 orch --prefix /empty plan 2>err &&
	test_one_line err &&
	grep -q "no VERSION given and no current_version set" err &&
	test_expect_code 69 orch --etcd "$(dead_url)" --timeout 1 plan v2 2>err &&
	test_one_line err
'

stop_all_nodes
test_done
