#!/bin/sh
#
# A 3-member etcd cluster under a rollout: the leader is killed -9 while config
# hooks run.  The daemons and the CLI fail over to the other members, the
# rollout completes, and nothing is lost or duplicated: one status key per host
# and type, one running_version entry per host, no holder left.  The killed
# member then rejoins, catches up, and serves orchestrate on its own.

test_description='orchestrated on a 3-member etcd cluster: the leader killed mid-rollout'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
start_etcd_cluster 3
LEASE_TTL=5
export LEASE_TTL
NODES="c1 c2 c3 c4"

# The endpoint list with the leader first: the daemons' requests and watch
# streams start on the member that will be killed, so failing over is not
# optional for them (nor for the CLI below).
LEADER=$(etcd_cluster_leader) || { echo "Bail out! the cluster has no leader"; exit 1; }
LEADER_FIRST=$(etcd_member_url "$LEADER")
for i in 1 2 3; do
	test "$i" = "$LEADER" || LEADER_FIRST="$LEADER_FIRST,$(etcd_member_url $i)"
done

# one_key_per_host PREFIX  — every node has exactly one key under PREFIX*/NODE
# (PREFIX is a status type or running_version/).
one_key_per_host () {
	etcdctl_keys "$1" >keys.$$ || return 1
	for n in $NODES; do
		c=$(grep -c "/$n\$" keys.$$ || :)
		if test "$c" != 1; then
			echo "$n has $c keys under $1:" >&4
			cat keys.$$ >&4
			return 1
		fi
	done
}

# At most two config runs at once (max_parallel 2), across the failover.
no_overlap_max2 () {
	sort -n -k4 "$TRASH/runs.log" | awk '
		$1 == "config-start" { open++; if (open > 2) { print "3 runs at " $0; bad = 1 } }
		$1 == "config-end" { open-- }
		END { exit bad }'
}

test_expect_success 'setup: four daemons on the three endpoints reach v1' '
	for n in $NODES; do node_setup $n; done &&
	etcdctl_put /current_version v1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":2}" &&
	ETCD_URL=$LEADER_FIRST &&
	for n in $NODES; do start_node $n || exit 1; done &&
	wait_for "node_at c1 v1 && node_at c2 v1 && node_at c3 v1 && node_at c4 v1" 30 &&
	grep -q "^etcd:" c1/orchestrate.yaml &&
	test "$(echo "$ETCD_URLS" | tr , "\n" | wc -l)" = 3
'

test_expect_success 'the leader killed -9 while config hooks run: the rollout completes' '
	for n in $NODES; do echo 3 >$n/config.sleep; done &&
	: >"$TRASH/runs.log" &&
	orch trigger_update v2 &&
	wait_for "test \$(grep -c \"config-start .* v2\" \"$TRASH/runs.log\") -ge 2" 15 &&
	test "$(grep -c "config-end .* v2" "$TRASH/runs.log")" -lt 2 &&
	leader=$(etcd_cluster_leader) &&
	test "$leader" = "$LEADER" &&
	echo "killing leader m$leader" &&
	kill_etcd_member $leader &&
	echo $leader >"$TRASH/leader" &&
	wait_for "node_at c1 v2 && node_at c2 v2 && node_at c3 v2 && node_at c4 v2" 45 &&
	no_overlap_max2 &&
	for n in $NODES; do kill -0 $(node_pid $n) || exit 1; done
'

test_expect_success 'the CLI works on the endpoint list while the leader is down' '
	leader=$(cat "$TRASH/leader") &&
	! etcd_member_healthy $leader &&
	ORCHESTRATE_ETCD=$LEADER_FIRST &&
	test "$(orch current_version)" = v2 &&
	orch status >status.out &&
	for n in $NODES; do grep -qw "$n" status.out || exit 1; done &&
	orch get_failures &&
	orch verify_hosts v2 $NODES &&
	orch check_single_version v2 &&
	orch --hostname c1 local_health
'

test_expect_success 'nothing lost or duplicated: one state per type, one running_version, no holder' '
	one_key_per_host /status/puppet/ &&
	one_key_per_host /status/validation/ &&
	one_key_per_host /status/provisioned/ &&
	one_key_per_host /running_version/ &&
	for n in $NODES; do running_at $n v2 || exit 1; done &&
	for n in $NODES; do status_is $n puppet success && status_is $n validation success || exit 1; done &&
	test -z "$(etcdctl_keys /rollout/holders/)" &&
	test "$(etcdctl_count /alive/)" = 4
'

test_expect_success 'the killed member restarts, rejoins and serves orchestrate' '
	leader=$(cat "$TRASH/leader") &&
	url=$(etcd_member_url $leader) &&
	restart_etcd_member $leader &&
	etcdctl --endpoints "$url" endpoint health &&
	orchestrate --config "$ORCH_CONFIG" --etcd "$url" ping >ping.out &&
	cat ping.out &&
	wait_for "test \"\$(etcdctl --endpoints $url get --consistency=s --print-value-only /current_version)\" = v2" 10 &&
	test "$(orchestrate --config "$ORCH_CONFIG" --etcd "$url" current_version)" = v2 &&
	etcdctl_ member list -w json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert len(d[\"members\"]) == 3, d
"
'

test_expect_success 'a trigger after the rejoin converges through the whole cluster' '
	for n in $NODES; do echo 0 >$n/config.sleep; done &&
	orch trigger_update v3 &&
	wait_for "node_at c1 v3 && node_at c2 v3 && node_at c3 v3 && node_at c4 v3" 30 &&
	one_key_per_host /running_version/ &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

stop_all_nodes
test_done
