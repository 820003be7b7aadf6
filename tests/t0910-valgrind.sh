#!/bin/bash
#
# Memory: one daemon under valgrind's memcheck through a whole life: it
# registers, syncs, runs the config and validate hooks for a trigger, publishes,
# sees the catalog change (the services hook), reloads on SIGHUP, runs again,
# waits in a slot queue and runs in its turn, watches for its stage of a
# staged rollout and opens its gate, and stops on SIGTERM.  It must exit 0 with no memcheck error and no definite
# or indirect leak.  Hooks are fork+execve children (shell scripts): valgrind
# does not follow them (--trace-children=no).  valgrind makes the daemon some
# 20-50 times slower, so the waits here are generous but bounded.

test_description='orchestrated under valgrind: no errors, no leaks'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrated
test_have_valgrind
start_etcd

test_expect_success 'the daemon registers and syncs under valgrind' '
	node_setup n1 &&
	etcdctl_put /available_services/db/h9 "{\"addresses\":{\"eth0\":\"10.0.0.9\"},\"healthy\":true}" &&
	start_node_valgrind n1 &&
	wait_for "grep -q services::db::eth0 n1/services.yaml" 30
'

test_expect_success 'a trigger runs the config and validate hooks' '
	etcdctl_put /current_version v1 &&
	wait_for "node_at n1 v1" 40 &&
	status_is n1 validation success &&
	etcdctl_exists /available_services/svc-n1/n1
'

test_expect_success 'a catalog change runs the services hook' '
	before=$(count_lines n1/services.count) &&
	etcdctl_put /available_services/web/h8 "{\"addresses\":{\"eth0\":\"10.0.0.8\"},\"healthy\":false}" &&
	wait_for "grep -q services::web::eth0 n1/services.yaml" 30 &&
	wait_for "test \$(count_lines n1/services.count) -gt $before" 30 &&
	etcdctl_del /available_services/web/h8 &&
	wait_for "! grep -q services::web n1/services.yaml" 30
'

test_expect_success 'SIGHUP reloads; a failed run and a retry work after it' '
	kill -HUP "$(node_pid n1)" &&
	wait_for "grep -qi reload n1/log" 30 &&
	echo 1 >n1/validate.exit &&
	etcdctl_put /current_version v2 &&
	wait_for "status_is n1 validation failed" 40 &&
	rm n1/validate.exit &&
	wait_for "node_at n1 v2" 40
'

test_expect_success 'max_parallel 1: it follows the slot queue ahead of it, then runs' '
	# zz1 runs, zz2 waits: the daemon queues behind zz2 and watches its key;
	# zz2 starts (its mark), zz1 leaves, zz2 leaves: its turn
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	etcdctl_put /rollout/holders/zz1 "{\"version\":\"v3\",\"holding\":true}" &&
	etcdctl_put /rollout/holders/zz2 "{\"version\":\"v3\"}" &&
	etcdctl_put /current_version v3 &&
	wait_for "etcdctl_exists /rollout/holders/n1" 40 &&
	sleep 3 &&
	! node_at n1 v3 &&
	etcdctl_put /rollout/holders/zz2 "{\"version\":\"v3\",\"holding\":true}" &&
	etcdctl_del /rollout/holders/zz1 &&
	sleep 3 &&
	! node_at n1 v3 &&
	etcdctl_del /rollout/holders/zz2 &&
	wait_for "node_at n1 v3" 60 &&
	wait_for "test -z \"\$(etcdctl_keys /rollout/holders/)\"" 30
'

test_expect_success 'groups: it claims the gate of its stage, watches g0, opens the gate, then runs' '
	# zz0, alive in g0, is behind: n1 (g1) claims the gate of its stage,
	# watches the fleet, and opens the gate once zz0 runs v4
	etcdctl_put /rollout/policy "{\"groups\":[\"g0\",\"g1\"]}" &&
	etcdctl_put /groups/g0/zz0 "" &&
	etcdctl_put /alive/zz0 "{\"time\":1,\"version\":\"v3\",\"pid\":1}" &&
	etcdctl_put /current_version v4 &&
	wait_for "etcdctl_get /rollout/stages/g0 | grep -q \"\\\"stage\\\":\\\"watching\\\"\"" 60 &&
	sleep 2 &&
	! node_at n1 v4 &&
	etcdctl_put /running_version/zz0 "{\"version\":\"v4\",\"time\":1}" &&
	wait_for "node_at n1 v4" 60 &&
	etcdctl_get /rollout/stages/g0 | grep -q "\"stage\":\"open\"" &&
	etcdctl_del /alive/zz0 && etcdctl_del /groups/g0/zz0 && etcdctl_del /running_version/zz0
'

test_expect_success 'SIGTERM: exit 0, memcheck reports no error and no leak' '
	stop_node_valgrind n1
'

test_expect_success '--once under valgrind: a full cycle, no error, no leak' '
	valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=99 \
		--track-fds=no --trace-children=no --log-file=vg-once.log \
		orchestrated --once --config n1/orchestrate.yaml --etcd "$ETCD_URL" \
		--local-version-file n1/current_version >once.out 2>&1 &&
	grep -q "ERROR SUMMARY: 0 errors" vg-once.log &&
	grep -q "definitely lost: 0 bytes\|no leaks are possible" vg-once.log
'

stop_all_nodes
test_done
