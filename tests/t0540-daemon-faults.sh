#!/bin/sh
test_description='orchestrated: etcd restarted under the daemons, compaction while disconnected'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
LEASE_TTL=30
export LEASE_TTL

test_expect_success 'setup: two nodes at v1' '
	node_setup f1 && node_setup f2 &&
	etcdctl_put /current_version v1 &&
	start_node f1 && start_node f2 &&
	wait_for "node_at f1 v1 && node_at f2 v1" 20
'

test_expect_success 'etcd restarted under the daemons: watches resume, a trigger still converges' '
	restart_etcd &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at f1 v2 && node_at f2 v2" 30 &&
	kill -0 $(node_pid f1) && kill -0 $(node_pid f2)
'

test_expect_success 'a compaction past the watch revision while disconnected: everything is read again' '
	kill -STOP $(node_pid f1) &&
	stop_etcd && restart_etcd &&
	etcdctl_put /current_version v3 &&
	etcdctl_put /available_services/late/x "{\"addresses\":{\"eth0\":\"10.7.7.7\"}}" &&
	etcdctl_put /filler a && etcdctl_put /filler b &&
	rev=$(etcdctl_ get /filler -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p") &&
	etcdctl_ compact "$rev" &&
	kill -CONT $(node_pid f1) &&
	wait_for "node_at f1 v3" 30 &&
	wait_for "grep -q 10.7.7.7 f1/services.yaml" 10 &&
	grep -q "compacted" f1/log &&
	wait_for "node_at f2 v3" 10
'

test_expect_success 'etcd down: the daemon keeps running and recovers when it is back' '
	stop_etcd &&
	sleep 3 &&
	kill -0 $(node_pid f1) &&
	restart_etcd &&
	etcdctl_put /current_version v4 &&
	wait_for "node_at f1 v4 && node_at f2 v4" 40
'

stop_all_nodes
test_done
