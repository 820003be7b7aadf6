#!/bin/sh
#
# The node's own facts, read by the daemon as the command line reads them
# (local.h): the command line and the daemon share one reader of each fact,
# so they cannot disagree on what a file says.

test_description='orchestrated reads the local version file, the profile list and reports its version like orchestrate'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
start_etcd

# services_of HOST  — the services HOST publishes, sorted, one a line.
services_of () {
	etcdctl_keys /available_services/ | sed -n "s|^/available_services/\([^/]*\)/$1\$|\1|p" | sort
}

test_expect_success 'setup: a node whose config run writes a profile list with tricky lines' '
	node_setup w1 &&
	sed -i "s|echo \"profile-w1\" >\"\\\$d/profile_list.txt\"|printf \"glance # web\\\\\\\\nnova cinder\\\\\\\\n  keystone\\\\\\\\r\\\\\\\\n\" >\"\\\$d/profile_list.txt\"|" w1/hooks/config &&
	grep -q "glance # web" w1/hooks/config &&
	etcdctl_put /current_version v1 &&
	start_node w1 &&
	wait_for "node_at w1 v1" 20 &&
	printf "glance # web\nnova cinder\n  keystone\r\n" >expect.list &&
	test_cmp expect.list w1/profile_list.txt
'

test_expect_success 'the command line publishes the profile list by the one rule' '
	orchestrate --config w1/orchestrate.yaml --etcd "$ETCD_URL" --hostname cli-w1 \
		publish_service --address eth0=10.0.0.1 2>err &&
	grep -F "nova cinder" err &&
	printf "common\nglance\nkeystone\nsvc-w1\n" >expect &&
	services_of cli-w1 >actual &&
	test_cmp expect actual
'

test_expect_success 'the daemon publishes the same services as the command line' '
	services_of cli-w1 >expect &&
	services_of w1 >actual &&
	test_cmp expect actual
'

test_expect_success 'alive/HOST says the version the node runs, once its run succeeded' '
	orch status --json >status.json &&
	grep -F "\"host\":\"w1\"" status.json &&
	json_ok status.json &&
	etcdctl_get /alive/w1 | grep -F "\"version\":\"v1\""
'

test_expect_success 'a local version file holding " v2" is v2: no run at v2' '
	node_setup w2 &&
	printf " v2\n" >w2/current_version &&
	etcdctl_put /current_version v2 &&
	test "$(orchestrate --config w2/orchestrate.yaml --etcd "$ETCD_URL" --local-version-file w2/current_version pending_update)" = "up to date at v2" &&
	start_node w2 &&
	wait_for "grep -q \"state starting -> \" w2/log" 10 &&
	sleep 1 &&
	test ! -f w2/config.count &&
	grep -q "state starting -> idle" w2/log
'

stop_all_nodes
test_done
