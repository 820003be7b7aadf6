#!/bin/sh
test_description='orchestrated: rollout policy, dead holders, lease expiry'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
LEASE_TTL=5
export LEASE_TTL

test_expect_success 'setup: three nodes at v1, max_parallel 1' '
	for n in r1 r2 r3; do node_setup $n; echo 0.5 >$n/config.sleep; done &&
	etcdctl_put /current_version v1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	start_node r1 && start_node r2 && start_node r3 &&
	wait_for "node_at r1 v1 && node_at r2 v1 && node_at r3 v1" 30 &&
	no_overlap "$TRASH/runs.log"
'

test_expect_success 'max_parallel 1 never overlaps two config runs' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at r1 v2 && node_at r2 v2 && node_at r3 v2" 30 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 3 &&
	no_overlap "$TRASH/runs.log" &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

test_expect_success 'kill -9 of a holder frees its slot when its lease expires' '
	: >"$TRASH/runs.log" &&
	echo 30 >r1/config.sleep && echo 30 >r2/config.sleep && echo 30 >r3/config.sleep &&
	etcdctl_put /current_version v3 &&
	wait_for "test \$(grep -c config-start \"$TRASH/runs.log\") -ge 1" 10 &&
	holder=$(awk "/config-start/ { print \$2; exit }" "$TRASH/runs.log") &&
	for n in r1 r2 r3; do test $n = $holder || echo 0 >$n/config.sleep; done &&
	etcdctl_keys /rollout/holders/ | grep -q "/rollout/holders/$holder" &&
	sleep 1 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 1 &&
	pgid=$(cat $holder/config.pid) &&
	test -n "$pgid" &&
	kill -9 $(node_pid $holder) &&
	# What systemd does to the rest of the unit cgroup of a dead daemon.
	/bin/kill -KILL -- -"$pgid" &&
	wait_for "test -z \"\$(etcdctl_get /alive/$holder)\"" 15 &&
	for n in r1 r2 r3; do
		test $n = $holder || wait_for "node_at $n v3" 20 || exit 1
	done &&
	echo "$holder" >"$TRASH/dead"
'

test_expect_success 'the killed node restarts, records the interrupted run and converges' '
	holder=$(cat "$TRASH/dead") &&
	status_is $holder puppet running &&
	echo 0 >$holder/config.sleep &&
	start_node $holder &&
	wait_for "node_at $holder v3" 20 &&
	grep -q "interrupted" $holder/log
'

test_expect_success 'max_percent admits a share of the alive hosts' '
	: >"$TRASH/runs.log" &&
	for n in r1 r2 r3; do echo 1 >$n/config.sleep; done &&
	etcdctl_put /rollout/policy "{\"max_percent\":34}" &&
	etcdctl_put /current_version v4 &&
	wait_for "node_at r1 v4 && node_at r2 v4 && node_at r3 v4" 30 &&
	no_overlap "$TRASH/runs.log"
'

test_expect_success 'a lost lease is granted again and every leased key rewritten' '
	lease=$(etcdctl_ get /alive/r2 -w json | sed -n "s/.*\"lease\":\([0-9]*\).*/\1/p") &&
	test -n "$lease" &&
	etcdctl_ lease revoke $(printf "%x" "$lease") &&
	wait_for "etcdctl_get /alive/r2 | grep -q pid" 10 &&
	wait_for "running_at r2 v4" 10 &&
	etcdctl_get /available_services/svc-r2/r2 >svc && cat svc && grep -q "\"healthy\":true" svc
'

# A write refused for its lease (revoked, or expired while etcd was slow) is
# etcd saying the lease is gone: the node takes it as lost at once, writes
# nothing more under it, and grants a new one within a keepalive interval
# (20 s with a 60 s lease).  Before, it sent each retry under the dead lease
# until its next keepalive found out, and etcd makes each refused write a
# proposal first.  The revocation would delete alive/r3 too, and the node,
# which watches that key, would ask about its lease before it writes
# (t0556): put again without a lease, the key stays, and the write is what
# tells the node.
test_expect_success 'a write refused for a dead lease: no retry under it, a new lease' '
	sed -i "s/^  lease_ttl: .*/  lease_ttl: 60/" r3/orchestrate.yaml &&
	stop_node r3 && start_node r3 &&
	lease=$(etcdctl_ get /alive/r3 -w json | sed -n "s/.*\"lease\":\([0-9]*\).*/\1/p") &&
	test -n "$lease" &&
	refused0=$(grep -c "requested lease not found" r3/log || :) &&
	etcdctl_put /alive/r3 "$(etcdctl_get /alive/r3)" &&
	etcdctl_ lease revoke $(printf "%x" "$lease") &&
	etcdctl_put /current_version v5 &&
	wait_for "node_at r3 v5" 40 &&
	grep -q "is gone, granting a new one" r3/log &&
	refused=$(( $(grep -c "requested lease not found" r3/log) - refused0 )) &&
	echo "writes refused for the dead lease: $refused" &&
	test "$refused" -ge 1 && test "$refused" -le 2 &&
	wait_for "node_at r1 v5 && node_at r2 v5" 30 &&
	wait_for "test -z \"\$(etcdctl_keys /rollout/holders/)\"" 10
'

stop_all_nodes
test_done
