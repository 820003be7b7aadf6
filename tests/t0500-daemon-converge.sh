#!/bin/sh
test_description='orchestrated: registration, sync, a trigger converges three nodes'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

test_expect_success 'check-config accepts a good file and refuses a bad one' '
	node_setup n1 &&
	orchestrated --check-config --config "$TRASH/n1/orchestrate.yaml" >out &&
	grep -qx "configuration OK" out &&
	printf "timing:\n  splay: soon\n" >bad.yaml &&
	test_expect_code 64 orchestrated --check-config --config bad.yaml 2>err &&
	grep -q "bad.yaml:2" err && grep -q splay err
'

test_expect_success 'three daemons register and stay idle without a desired version' '
	node_setup n2 && node_setup n3 &&
	start_node n1 && start_node n2 && start_node n3 &&
	for n in n1 n2 n3; do
		status_is $n provisioned success &&
		etcdctl_keys /groups/g1/ | grep -qx "/groups/g1/$n" || exit 1
	done &&
	test ! -f n1/config.count
'

test_expect_success 'each daemon waits a random part of a second before its first request' '
	for n in n1 n2 n3; do
		sed -n "s/.*first request to etcd in \([0-9.]*\) s.*/\1/p" "$TRASH/$n/log" | head -1
	done >spread &&
	test $(wc -l <spread) = 3 &&
	awk "\$1 < 0 || \$1 > 1 { exit 1 }" spread &&
	# three draws from a millisecond-fine second: all equal only if not random
	test $(sort -u spread | wc -l) -gt 1
'

test_expect_success 'a trigger converges every node' '
	etcdctl_put /current_version v1 &&
	wait_for "node_at n1 v1 && node_at n2 v1 && node_at n3 v1" 20 &&
	for n in n1 n2 n3; do
		status_is $n puppet success && status_is $n validation success &&
		test "$(count_lines $n/config.count)" = 1 || exit 1
	done
'

test_expect_success 'hooks get a clean environment with the ORCHESTRATE_ variables' '
	grep -qx "ORCHESTRATE_HOST=n1" n1/hook.env &&
	grep -qx "ORCHESTRATE_VERSION=v1" n1/hook.env &&
	grep -qx "ORCHESTRATE_SERVICES_FILE=$TRASH/n1/services.yaml" n1/hook.env &&
	grep -qx "ORCHESTRATE_ETCD=$ETCD_URL" n1/hook.env &&
	grep -qx "PATH=/usr/sbin:/usr/bin:/sbin:/bin" n1/hook.env &&
	! grep -q "^TRASH\|^ETCD_URL\|^HOME" n1/hook.env
'

test_expect_success 'services are published, healthy, and reach every hiera file' '
	# in etcd with the run that reached the version (one txn); in each
	# hiera file once its node saw the catalog quiet (timing.quiet), so
	# waited for, each file on its own
	etcdctl_get /available_services/svc-n2/n2 | grep -q "\"healthy\":true" &&
	etcdctl_get /available_services/profile-n3/n3 | grep -q addresses &&
	wait_for "grep -q services::svc-n3::eth0 n1/services.yaml" 10 &&
	wait_for "grep -q healthy_services::common::eth0 n2/services.yaml" 10
'

# newest_write PREFIX — the highest mod revision of the keys below PREFIX.
newest_write () {
	etcdctl_ get --prefix "$1" -w json | python3 -c '
import json, sys
kvs = json.load(sys.stdin).get("kvs") or []
print(max([int(kv["mod_revision"]) for kv in kvs] or [0]))'
}

test_expect_success 'a second version runs again with the previous version set' '
	test -n "$(etcdctl_keys /available_services/)" &&
	before=$(newest_write /) &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at n1 v2 && node_at n2 v2 && node_at n3 v2" 20 &&
	grep -qx "ORCHESTRATE_PREVIOUS_VERSION=v1" n2/hook.env &&
	! running_at n1 v1 && ! running_at n2 v1 && ! running_at n3 v1 &&
	# a successful rollout leaves the catalog alone: no address and no
	# health changed, so no entry is written and no consumer gets an event
	test "$(newest_write /available_services/)" -le "$before" &&
	! etcdctl_get /available_services/svc-n1/n1 | grep -q version
'

test_expect_success 'an implausible current_version starts no run' '
	before=$(count_lines n1/config.count) &&
	etcdctl_put /current_version "../bad version" &&
	sleep 1 &&
	test "$(count_lines n1/config.count)" = "$before" &&
	kill -0 $(node_pid n1)
'

test_expect_success 'SIGTERM stops cleanly and revokes the lease' '
	stop_node n3 && test "$(node_exit n3)" = 0 &&
	test -z "$(etcdctl_get /alive/n3)" &&
	test -z "$(etcdctl_get /running_version/n3)" &&
	status_is n3 puppet success
'

stop_all_nodes
test_done
