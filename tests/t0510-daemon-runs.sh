#!/bin/sh
test_description='orchestrated: failing runs, retries, catalog changes, dependencies'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

test_expect_success 'setup: two nodes at v1' '
	node_setup a && node_setup b &&
	etcdctl_put /current_version v1 &&
	start_node a && start_node b &&
	wait_for "node_at a v1 && node_at b v1" 20
'

test_expect_success 'a failing config hook sets puppet/failed with the output tail and retries' '
	echo 4 >a/config.exit &&
	etcdctl_put /current_version v2 &&
	wait_for "status_is a puppet failed" 15 &&
	etcdctl_get /status/puppet/failed/a >detail &&
	grep -q "config failed on purpose with 4" detail &&
	grep -q "\"exit_code\":4" detail &&
	wait_for "test \$(count_lines a/config.count) -ge 4" 20 &&
	test "$(cat a/current_version)" = v1 &&
	running_at a v1 &&
	wait_for "node_at b v2" 10
'

test_expect_success 'services are published after a failed first run, not healthy' '
	etcdctl_get /available_services/svc-a/a | grep -q "\"healthy\":false"
'

test_expect_success 'fixing the hook converges the node' '
	echo 2 >a/config.exit &&
	wait_for "node_at a v2" 15 &&
	status_is a puppet success &&
	etcdctl_get /available_services/svc-a/a | grep -q "\"healthy\":true"
'

test_expect_success 'a failing validation reruns the config until it passes' '
	echo 1 >b/validate.exit &&
	etcdctl_put /current_version v3 &&
	wait_for "status_is b validation failed" 15 &&
	etcdctl_get /status/validation/failed/b | grep -q "validate failed on purpose" &&
	before=$(count_lines b/config.count) &&
	wait_for "test \$(count_lines b/config.count) -ge \$((before + 2))" 20 &&
	test "$(cat b/current_version)" = v2 &&
	echo 0 >b/validate.exit &&
	wait_for "node_at b v3" 15 &&
	status_is b validation success &&
	wait_for "node_at a v3" 10
'

test_expect_success 'a catalog change reaches every hiera file and runs only the services hook' '
	ca=$(count_lines a/config.count) && cb=$(count_lines b/config.count) &&
	sa=$(count_lines a/services.count) && sb=$(count_lines b/services.count) &&
	etcdctl_put /available_services/extra/elsewhere "{\"addresses\":{\"eth0\":\"10.9.9.9\"},\"healthy\":true}" &&
	wait_for "grep -q 10.9.9.9 a/services.yaml && grep -q 10.9.9.9 b/services.yaml" 10 &&
	wait_for "test \$(count_lines a/services.count) -gt $sa && test \$(count_lines b/services.count) -gt $sb" 10 &&
	sleep 1 &&
	test "$(count_lines a/config.count)" = "$ca" &&
	test "$(count_lines b/config.count)" = "$cb"
'

test_expect_success 'a burst of catalog changes runs the services hook once or twice, not per change' '
	sa=$(count_lines a/services.count) &&
	for i in 1 2 3 4 5 6 7 8; do
		etcdctl_put /available_services/burst/h$i "{\"addresses\":{\"eth0\":\"10.8.8.$i\"}}"
	done &&
	wait_for "grep -q 10.8.8.8 a/services.yaml" 10 &&
	sleep 1 &&
	test $(( $(count_lines a/services.count) - sa )) -le 3
'

test_expect_success 'an unchanged catalog rewrites nothing and runs no hook' '
	sa=$(count_lines a/services.count) &&
	etcdctl_put /available_services/extra/elsewhere "{\"addresses\":{\"eth0\":\"10.9.9.9\"},\"healthy\":true}" &&
	sleep 2 &&
	test "$(count_lines a/services.count)" = "$sa"
'

test_expect_success 'a dependency holds the run pending, then releases it' '
	node_setup c "
node_deps_placeholder: 1" &&
	sed -i "/node_deps_placeholder/d; s/^  services: \[svc-c, common\]/  services: [svc-c]\n  depends:\n    - {service: mysql, count: 2, healthy: true}/" c/orchestrate.yaml &&
	orchestrated --check-config --config c/orchestrate.yaml &&
	start_node c &&
	wait_for "status_is c puppet pending" 10 &&
	etcdctl_get /status/puppet/pending/c | grep -q "waiting for 2 healthy mysql, have 0" &&
	test ! -f c/config.count &&
	etcdctl_put /available_services/mysql/db1 "{\"addresses\":{\"eth0\":\"10.1.0.1\"},\"healthy\":true}" &&
	wait_for "etcdctl_get /status/puppet/pending/c | grep -q \"have 1\"" 10 &&
	etcdctl_put /available_services/mysql/db2 "{\"addresses\":{\"eth0\":\"10.1.0.2\"},\"healthy\":false}" &&
	sleep 1 && test ! -f c/config.count &&
	etcdctl_put /available_services/mysql/db2 "{\"addresses\":{\"eth0\":\"10.1.0.2\"},\"healthy\":true}" &&
	wait_for "node_at c v3" 15
'

test_expect_success 'a pause stops new runs and resume lets them go' '
	etcdctl_put /pause/global "{\"reason\":\"freeze\",\"time\":1}" &&
	sleep 1 &&
	ca=$(count_lines a/config.count) &&
	etcdctl_put /current_version v4 &&
	sleep 2 &&
	test "$(count_lines a/config.count)" = "$ca" &&
	grep -q "paused: global" a/log &&
	etcdctl_del /pause/global &&
	wait_for "node_at a v4 && node_at b v4" 15
'

test_expect_success 'a host pause covers only that host' '
	etcdctl_put /pause/hosts/b "{\"reason\":\"disk\",\"time\":1}" &&
	sleep 1 &&
	etcdctl_put /current_version v5 &&
	wait_for "node_at a v5" 15 &&
	test "$(cat b/current_version)" = v4 &&
	etcdctl_del /pause/hosts/b &&
	wait_for "node_at b v5" 15
'

test_expect_success 'a first run whose validation is quick publishes its entry once, healthy' '
	etcdctl_put /current_version v6 &&
	node_setup q &&
	start_node q &&
	wait_for "node_at q v6" 20 &&
	etcdctl_get /available_services/svc-q/q | grep -q "\"healthy\":true" &&
	test "$(key_version /available_services/svc-q/q)" = 1
'

test_expect_success 'a first run whose validation is slow publishes its entry ahead, not healthy' '
	node_setup s &&
	echo 5 >s/validate.sleep &&
	start_node s &&
	wait_for "grep -q \"validate v6\" s/validate.count" 20 &&
	wait_for "etcdctl_get /available_services/svc-s/s | grep -q \"\\\"healthy\\\":false\"" 5 &&
	wait_for "node_at s v6" 20 &&
	etcdctl_get /available_services/svc-s/s | grep -q "\"healthy\":true" &&
	test "$(key_version /available_services/svc-s/s)" = 2
'

# A splay spreads the fleet's writes: a host in its splay writes nothing, so
# that a trigger does not bring every host's puppet/pending at once.  From the
# trigger's revision on, the only writes to status/puppet/ of the host are the
# run's start and its outcome.
test_expect_success 'a splay writes nothing to etcd before the run' '
	sed -i "s/^  splay: 0$/  splay: 2/" a/orchestrate.yaml &&
	kill -HUP $(node_pid a) &&
	wait_for "grep -q \"configuration reloaded\" a/log" 10 &&
	rev=$(etcdctl_ get /current_version -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p") &&
	etcdctl_put /current_version v7 &&
	wait_for "node_at a v7" 20 &&
	grep -q "state idle -> splay" a/log &&
	{ timeout 3 etcdctl --endpoints "$ETCD_URL" watch --rev=$((rev + 1)) \
		--prefix /status/puppet/ >w.out 2>&1 || true; } &&
	grep -A1 "^PUT" w.out | grep "/a\$" >puts &&
	test_line_count = 2 puts &&
	grep -q "/status/puppet/running/a" puts &&
	grep -q "/status/puppet/success/a" puts
'

stop_all_nodes
test_done
