#!/bin/sh
test_description='orchestrated: staged rollout over groups (one group at a time)'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

# in_group NAME GROUP  — moves a node set up by node_setup to GROUP.
in_group () {
	sed -i "s/^  group: g1\$/  group: $2/" "$TRASH/$1/orchestrate.yaml"
}

test_expect_success 'setup: g1 = a1 a2, g2 = b1 b2, c1 in an unlisted group' '
	for n in a1 a2 b1 b2 c1; do node_setup $n; echo 0.5 >$n/config.sleep; done &&
	in_group b1 g2 && in_group b2 g2 && in_group c1 g3 &&
	echo "a1 a2" >"$TRASH/members.g1" && echo "b1 b2" >"$TRASH/members.g2" &&
	echo "c1" >"$TRASH/members.g3" &&
	orch rollout_policy set --groups g1,g2 --max-parallel 1 &&
	etcdctl_put /current_version v1 &&
	for n in c1 b2 b1 a2 a1; do start_node $n || exit 1; done &&
	wait_for "node_at a1 v1 && node_at a2 v1 && node_at b1 v1 && node_at b2 v1 && node_at c1 v1" 40
'

test_expect_success 'v2: every g1 run ended before any g2 run started; g3 last' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at a1 v2 && node_at a2 v2 && node_at b1 v2 && node_at b2 v2 && node_at c1 v2" 40 &&
	cat "$TRASH/runs.log" &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 5 &&
	g1_end=$(group_runs g1 v2 | last_end) && g2_start=$(group_runs g2 v2 | first_start) &&
	g2_end=$(group_runs g2 v2 | last_end) && g3_start=$(group_runs g3 v2 | first_start) &&
	echo "g1 ends $g1_end, g2 starts $g2_start, ends $g2_end, g3 starts $g3_start" &&
	test "$g1_end" -lt "$g2_start" &&
	test "$g2_end" -lt "$g3_start"
'

test_expect_success 'within a group, max_parallel 1: no overlap' '
	group_runs g1 v2 >g1.log && group_runs g2 v2 >g2.log &&
	test_line_count = 4 g1.log && test_line_count = 4 g2.log &&
	no_overlap g1.log && no_overlap g2.log
'

test_expect_success 'a waiting node says which group it waits for' '
	# (one host of g2 then watches g1 and counts what is behind, the other
	# says who watches: t0705, where g1 is slow enough to show both)
	grep -q "wait-group: waiting for group g1" b1/log &&
	grep -q "wait-group: waiting for group g1" b2/log &&
	grep -q "waiting for group g2" c1/log
'

test_expect_success 'a dead host of an earlier group does not block the later ones' '
	: >"$TRASH/runs.log" &&
	stop_node a2 &&
	wait_for "test -z \"\$(etcdctl_get /alive/a2)\"" 15 &&
	etcdctl_put /current_version v3 &&
	wait_for "node_at a1 v3 && node_at b1 v3 && node_at b2 v3 && node_at c1 v3" 40 &&
	test "$(group_runs g1 v3 | last_end)" -lt "$(group_runs g2 v3 | first_start)"
'

test_expect_success 'no holder is left behind' '
	test -z "$(etcdctl_keys /rollout/holders/)"
'

stop_all_nodes
test_done
