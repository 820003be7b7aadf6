#!/bin/bash
#
# Least privilege with one shared node role (README's weaker option; t0950
# covers the per-host identities of node_identity).
# t0170 covers auth on/off, wrong passwords and a read-only user; this script
# sets up the two roles README.md ("Securing etcd") and orchestrate(1)
# (AUTHENTICATION) document, with exactly those etcdctl commands, and proves:
#
#   operator  may write current_version, previous_version, the rollout policy
#             and pauses, and read everything: trigger_update, rollback, pause
#             work; publish_service and update_own_status exit 77, nothing
#             written.
#   node      may write only the node-side prefixes (running_version, status,
#             available_services, alive, rollout/holders, groups) and read
#             current_version, previous_version, rollout/ and pause/: a daemon
#             running as node registers, converges and publishes; trigger_update
#             exits 77.
#
# The prefix is the default, empty one, so P/current_version is /current_version.

test_description='etcd roles: operator and node, each with its least privilege'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrate
test_have_orchestrated
start_etcd

P=
test_expect_success 'setup: root, the operator and node roles (as documented), auth on' '
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&

	etcdctl_ role add operator >/dev/null &&
	etcdctl_ role grant-permission operator --prefix=true read "$P/" >/dev/null &&
	etcdctl_ role grant-permission operator readwrite "$P/current_version" >/dev/null &&
	etcdctl_ role grant-permission operator readwrite "$P/previous_version" >/dev/null &&
	etcdctl_ role grant-permission operator readwrite "$P/rollout/policy" >/dev/null &&
	etcdctl_ role grant-permission operator --prefix=true readwrite "$P/pause/" >/dev/null &&

	etcdctl_ role add node >/dev/null &&
	for d in running_version status available_services alive rollout/holders groups; do
		etcdctl_ role grant-permission node --prefix=true readwrite "$P/$d/" >/dev/null ||
			exit 1
	done &&
	etcdctl_ role grant-permission node read "$P/current_version" >/dev/null &&
	etcdctl_ role grant-permission node read "$P/previous_version" >/dev/null &&
	etcdctl_ role grant-permission node --prefix=true read "$P/rollout/" >/dev/null &&
	etcdctl_ role grant-permission node --prefix=true read "$P/pause/" >/dev/null &&

	etcdctl_ user add ops:opspw >/dev/null &&
	etcdctl_ user grant-role ops operator >/dev/null &&
	etcdctl_ user add n1:n1pw >/dev/null &&
	etcdctl_ user grant-role n1 node >/dev/null &&
	etcdctl_ auth enable >/dev/null
'
ETCDCTL_USER=root:rootpw
export ETCDCTL_USER

printf "opspw\n" >ops.pw
printf "n1pw\n" >n1.pw
chmod 600 ops.pw n1.pw
OPS="--user ops --password-file $TRASH/ops.pw"
NODE="--user n1 --password-file $TRASH/n1.pw"

test_expect_success 'operator: trigger_update works' '
	orch $OPS trigger_update v1 &&
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success 'operator: a second trigger and a rollback work' '
	orch $OPS trigger_update v2 &&
	test "$(etcdctl_get /previous_version)" = v1 &&
	orch $OPS rollback &&
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success 'operator: pause and resume (global, group, host) work' '
	orch $OPS pause --reason "change freeze" &&
	etcdctl_exists /pause/global &&
	orch $OPS pause --group g1 &&
	orch $OPS pause --host n9 &&
	orch $OPS resume --host n9 &&
	orch $OPS resume --group g1 &&
	orch $OPS resume &&
	test -z "$(etcdctl_keys /pause/)"
'

test_expect_success 'operator: the rollout policy is writable' '
	ETCDCTL_USER=ops:opspw etcdctl_ put /rollout/policy "{\"max_parallel\":1}" >/dev/null &&
	test "$(etcdctl_json_field /rollout/policy max_parallel)" = 1 &&
	! ETCDCTL_USER=n1:n1pw etcdctl_ put /rollout/policy "{}" >/dev/null 2>&1 &&
	test "$(etcdctl_json_field /rollout/policy max_parallel)" = 1
'

test_expect_success 'operator: reads work (status, running_versions, get_failures)' '
	orch $OPS status >out &&
	orch $OPS running_versions >out &&
	test_expect_code 0 orch $OPS get_failures >out
'

test_expect_success 'operator: publish_service and update_own_status exit 77, nothing written' '
	etcdctl_dump >before &&
	test_expect_code 77 orch $OPS --hostname ops1 publish_service web --address eth0=10.9.9.9 2>err &&
	test_one_line err &&
	test_expect_code 77 orch $OPS --hostname ops1 update_own_status puppet 0 2>err &&
	test_one_line err &&
	test_expect_code 77 orch $OPS --hostname ops1 update_own_info --version v1 2>err &&
	test_expect_code 77 orch $OPS provision ops1 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'node: trigger_update and rollback exit 77, nothing written' '
	etcdctl_dump >before &&
	test_expect_code 77 orch $NODE trigger_update v9 2>err &&
	test_one_line err &&
	test_expect_code 77 orch $NODE rollback 2>err &&
	test_expect_code 77 orch $NODE pause 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'node: the CLI writes its own status and services' '
	orch $NODE --hostname cli1 update_own_status puppet 0 &&
	status_is cli1 puppet success &&
	orch $NODE --hostname cli1 publish_service web --address eth0=10.9.9.8 &&
	etcdctl_exists /available_services/web/cli1 &&
	orch $NODE --hostname cli1 unpublish_service web &&
	! etcdctl_exists /available_services/web/cli1
'

test_expect_success 'node: a daemon running as node registers' '
	node_setup n1 &&
	start_node n1 $NODE &&
	status_is n1 provisioned success &&
	etcdctl_exists /groups/g1/n1 &&
	grep -q "\"pid\"" <<<"$(etcdctl_get /alive/n1)"
'

test_expect_success 'node: the daemon converges on the desired version and publishes' '
	wait_for "node_at n1 v1" 20 &&
	status_is n1 puppet success &&
	status_is n1 validation success &&
	etcdctl_get /available_services/svc-n1/n1 | grep -q "\"healthy\":true" &&
	wait_for "grep -q services::svc-n1::eth0 n1/services.yaml" 10
'

test_expect_success 'node: the daemon takes a rollout slot and follows a new trigger' '
	orch $OPS trigger_update v3 &&
	wait_for "node_at n1 v3" 20 &&
	! running_at n1 v1 &&
	! grep -qi "permission denied" n1/log
'

test_expect_success 'node: the daemon honours a pause set by the operator' '
	orch $OPS pause --host n1 --reason "hold" &&
	sleep 0.5 &&
	orch $OPS trigger_update v4 &&
	sleep 2 &&
	node_at n1 v3 &&
	orch $OPS resume --host n1 &&
	wait_for "node_at n1 v4" 20
'

test_expect_success 'the daemon stops cleanly (its lease revoked as node)' '
	stop_node n1 &&
	test "$(node_exit n1)" = 0 &&
	! etcdctl_exists /alive/n1
'

stop_all_nodes
test_done
