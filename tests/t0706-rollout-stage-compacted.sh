#!/bin/sh
test_description='orchestrated: a stage watch compacted before etcd made it: the earlier groups are read again, and the gate still waits for them'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# b1, the only host of g2, claims the gate of its stage and watches
# running_version/ and alive/ from the revision its read of the earlier
# groups was at (node_rollout.c, node_watch_stage): two ranges added to its
# stream.  Here b1 reaches etcd through the slow proxy, so its request to add
# them arrives three seconds late, and a compaction in between removed the
# revision they start from: etcd ends each range with the compact revision.
# What happened meanwhile is not known, so b1 must read the earlier groups
# again and add the ranges from that read; until then, and after, its gate
# opens only once a1 (g1) runs the version.  b1 claims the gate after a
# random part of eight times its last answer's wait (node_rollout.c,
# node_gate_claim_spread): up to half a minute here, which a1's run outlasts.

test_have_orchestrated
start_etcd
start_slow_proxy

metric () {
	curl -s "$ETCD_URL/metrics" | awk -v m="$1" '
		$1 ~ "^" m "([{]|$)" { s += $NF } END { printf "%d\n", s }'
}
watchers () { metric etcd_debugging_mvcc_watcher_total; }

gate () { etcdctl_json_field /rollout/stages/g1 "$1" 2>/dev/null; }

# compact_while FILE  — while FILE exists (at most 120 times, a minute): a
# write, then a compaction at its revision, every half second.
compact_while () {
	i_=0
	while test -e "$1" && test $i_ -lt 120; do
		etcdctl_put /filler "$i_" >/dev/null 2>&1
		rev_=$(etcdctl_ get /filler -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p")
		test -n "$rev_" && etcdctl_ compact "$rev_" >/dev/null 2>&1
		i_=$((i_ + 1))
		sleep 0.5
	done
}

test_expect_success 'setup: g1 = a1 direct, g2 = b1 through the proxy' '
	HOOK_TIMEOUT=120 node_setup a1 &&
	LEASE_TTL=60 node_setup b1 &&
	sed -i "s/^  group: g1\$/  group: g2/" "$TRASH/b1/orchestrate.yaml" &&
	grep -q "^  group: g2\$" "$TRASH/b1/orchestrate.yaml" &&
	echo a1 >"$TRASH/members.g1" && echo b1 >"$TRASH/members.g2" &&
	etcdctl_put /current_version v1 &&
	start_node a1 &&
	( ETCD_URL=$PROXY_URL && start_node b1 ) &&
	wait_for "node_at a1 v1 && node_at b1 v1" 30 &&
	# the policy after v1: no stage was watched yet, so this is the
	# count with none
	orch rollout_policy set --groups g1,g2 &&
	watchers >watchers.idle && echo "watchers, idle: $(cat watchers.idle)"
'

test_expect_success 'v2: the ranges b1 adds are compacted on their way; it reads g1 again and watches from there' '
	: >"$TRASH/runs.log" &&
	echo 80 >a1/config.sleep &&
	echo 3 >delay &&
	touch compacting &&
	{ compact_while compacting & } &&
	etcdctl_put /current_version v2 &&
	wait_for "grep -q \"this host watches the earlier groups for its stage of v2\" b1/log" 50 &&
	wait_for "grep -q \"the stage watch started before etcd.s compaction (at revision [0-9]*); reading the earlier groups again\" b1/log" 30 &&
	rm -f compacting &&
	echo "compacted stage watches: $(grep -c "the stage watch started before" b1/log)" &&
	# the next read of g1, then its two ranges: made, not compacted
	idle=$(cat watchers.idle) &&
	wait_for "test \"\$(watchers)\" = $((idle + 2))" 25 &&
	test -z "$(group_runs g1 v2 | grep config-end)" &&
	test -z "$(group_runs g2 v2)" &&
	test "$(gate stage)" = watching && test "$(gate host)" = b1
'

test_expect_success 'the gate opens once a1 runs v2, and b1 runs it only then' '
	rm -f delay &&
	wait_for "node_at a1 v2 && node_at b1 v2" 90 &&
	test "$(gate stage)" = open &&
	grep -q "every alive host of group g1 and the groups before it runs v2" b1/log &&
	g1_end=$(group_runs g1 v2 | last_end) && g2_start=$(group_runs g2 v2 | first_start) &&
	echo "g1 ends $g1_end, g2 starts $g2_start" &&
	test "$g1_end" -lt "$g2_start" &&
	wait_for "test \"\$(watchers)\" = $(cat watchers.idle)" 10 ||
	{ echo "watchers: $(watchers), idle: $(cat watchers.idle)"; false; }
'

test_expect_success 'cleanup' '
	rm -f compacting delay &&
	stop_all_nodes
'

test_done
