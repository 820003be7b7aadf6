#!/bin/sh
test_description='orchestrated: a staged rollout costs one watcher per stage, not every host of it'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# One host of a waiting stage claims the stage's gate, rollout/stages/G (G
# the group before it), under its lease; it alone reads the fleet and
# watches running_version/ and alive/ (two ranges added to its stream), and opens the gate once the earlier
# groups are done.  The others wait for that one key on their own stream.

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

metric () {
	curl -s "$ETCD_URL/metrics" | awk -v m="$1" '
		$1 ~ "^" m "([{]|$)" { s += $NF } END { printf "%d\n", s }'
}
streams () { metric etcd_debugging_mvcc_watch_stream_total; }
watchers () { metric etcd_debugging_mvcc_watcher_total; }

in_group () {
	sed -i "s/^  group: g1\$/  group: $2/" "$TRASH/$1/orchestrate.yaml"
}

gate () { etcdctl_json_field /rollout/stages/g1 "$1" 2>/dev/null; }
# gate_state  — "VERSION STAGE HOST" of the gate, from one read (a claim's
# lease may end between two)
gate_state () {
	etcdctl_get /rollout/stages/g1 | python3 -c '
import json, sys
try:
    v = json.load(sys.stdin)
    print(v["version"], v["stage"], v["host"])
except Exception:
    pass'
}

# slow_trigger VERSION SECONDS  — g1's runs take SECONDS; sets VERSION, waits
# until a host of g2 watches the earlier groups for it and prints that host.
slow_trigger () {
	: >"$TRASH/runs.log" &&
	echo "$2" >"$TRASH/a1/config.sleep" && echo "$2" >"$TRASH/a2/config.sleep" &&
	etcdctl_put /current_version "$1" &&
	wait_for "gate_state | grep -q \"^$1 watching b[123]\\\$\"" 10 &&
	gate_state | cut -d" " -f3
}

# others_than HOST  — the hosts of g2 but HOST.
others_than () {
	for n_ in b1 b2 b3; do test "$n_" = "$1" || printf "%s " "$n_"; done
}

all_at () {
	v_=$1
	shift
	for n_ in "$@"; do node_at "$n_" "$v_" || return 1; done
}

test_expect_success 'setup: g1 = a1 a2, g2 = b1 b2 b3' '
	for n in a1 a2 b1 b2 b3; do LEASE_TTL=5 node_setup $n || exit 1; done &&
	for n in b1 b2 b3; do in_group $n g2; done &&
	echo "a1 a2" >"$TRASH/members.g1" && echo "b1 b2 b3" >"$TRASH/members.g2" &&
	orch rollout_policy set --groups g1,g2 &&
	etcdctl_put /current_version v1 &&
	for n in a1 a2 b1 b2 b3; do start_node $n || exit 1; done &&
	wait_for "all_at v1 a1 a2 b1 b2 b3" 40 &&
	wait_for "test \"\$(streams)\" = 5" 10 &&
	watchers >watchers.idle && echo "watchers, idle: $(cat watchers.idle)"
'

test_expect_success 'v2: one host of g2 watches for its stage, the others wait with no stream of their own' '
	watcher=$(slow_trigger v2 5) && echo "watcher: $watcher" && echo "$watcher" >watcher &&
	grep -q "^b[123]\$" watcher &&
	etcdctl_lease_of /rollout/stages/g1 >/dev/null &&
	wait_for "grep -q \"this host watches the earlier groups for its stage of v2\" $watcher/log" 5 &&
	wait_for "grep -q \"waiting for group g1 (. hosts\{0,1\} behind)\" $watcher/log" 5 &&
	for n in b1 b2 b3; do
		test $n = "$watcher" && continue
		wait_for "grep -q \"waiting for group g1 (watched by $watcher)\" $n/log" 5 || exit 1
		! grep -q "this host watches the earlier groups for its stage of v2" $n/log || exit 1
	done &&
	# five nodes, one stream each: the watcher adds its two ranges
	# (running_version/ and alive/) to its own
	idle=$(cat watchers.idle) &&
	wait_for "test \"\$(watchers)\" = $((idle + 2))" 5 &&
	sleep 1 &&
	s=$(streams) && w=$(watchers) &&
	echo "while g2 waits, 1 s later: $s watch streams, $w watchers ($idle idle)" &&
	test "$s" = 5 && test "$w" = $((idle + 2))
'

test_expect_success 'the watcher opens the gate once g1 runs v2; g2 starts only then' '
	watcher=$(cat watcher) &&
	wait_for "all_at v2 a1 a2 b1 b2 b3" 40 &&
	test "$(gate stage)" = open && test "$(gate host)" = "$watcher" &&
	! etcdctl_lease_of /rollout/stages/g1 >/dev/null &&
	grep -q "every alive host of group g1 and the groups before it runs v2" $watcher/log &&
	g1_end=$(group_runs g1 v2 | last_end) && g2_start=$(group_runs g2 v2 | first_start) &&
	echo "g1 ends $g1_end, g2 starts $g2_start" &&
	test "$g1_end" -lt "$g2_start" &&
	test "$(streams)" = 5 &&
	wait_for "test \"\$(watchers)\" = $(cat watchers.idle)" 10
'

test_expect_success 'v3: the watcher killed while g1 runs; another host of g2 claims the gate and opens it' '
	first=$(slow_trigger v3 14) && echo "first watcher: $first" && echo "$first" >first &&
	stop_node "$first" KILL &&
	# its lease (5 s) goes with it, then a claim after a delay (2 s here)
	wait_for "gate_state | grep -v \" $first\\\$\" | grep -q \"^v3 watching b[123]\\\$\"" 15 &&
	second=$(gate_state | cut -d" " -f3) && echo "second watcher: $second" &&
	test "$second" != "$first" &&
	test -z "$(group_runs g2 v3)" &&
	wait_for "all_at v3 a1 a2 $(others_than "$first")" 40 &&
	test "$(gate stage)" = open && test "$(gate host)" = "$second" &&
	g1_end=$(group_runs g1 v3 | last_end) && g2_start=$(group_runs g2 v3 | first_start) &&
	echo "g1 ends $g1_end, g2 starts $g2_start" &&
	test "$g1_end" -lt "$g2_start"
'

test_expect_success 'the killed host, started again, finds its stage open and runs v3' '
	first=$(cat first) &&
	start_node "$first" &&
	wait_for "node_at $first v3" 20 &&
	test "$(gate host)" != "$first"
'

test_expect_success 'v4: the watcher paused while g1 runs still opens the gate for the others' '
	w=$(slow_trigger v4 6) && echo "watcher: $w" &&
	orch pause --host "$w" --reason "test" &&
	wait_for "all_at v4 a1 a2 $(others_than "$w")" 40 &&
	test "$(gate stage)" = open && test "$(gate host)" = "$w" &&
	test -z "$(grep " $w v4 " "$TRASH/runs.log")" &&
	orch resume --host "$w" &&
	wait_for "node_at $w v4" 20
'

test_expect_success 'v5: the groups reordered while g2 waits; its watcher gives its claim up, g2 goes first' '
	w=$(slow_trigger v5 8) && echo "watcher: $w" &&
	orch rollout_policy set --groups g2,g1 &&
	wait_for "! etcdctl_exists /rollout/stages/g1" 10 &&
	grep -q "giving up the watch of the stage after group g1" $w/log &&
	wait_for "all_at v5 b1 b2 b3" 20 &&
	test -n "$(group_runs g2 v5)" &&
	wait_for "all_at v5 a1 a2" 30 &&
	orch rollout_policy set --groups g1,g2
'

stop_all_nodes
test_done
