#!/bin/bash
#
# Least privilege with one shared node role (README's weaker option; t0950
# covers the per-host identities of node_identity).
# t0170 covers auth on/off, wrong passwords and a read-only user; this script
# sets up the two roles README.md ("Securing etcd") and orchestrate(1)
# (AUTHENTICATION) document, with exactly those etcdctl commands, and proves:
#
#   operator  may write current_version, previous_version, the rollout policy,
#             the halt, promotion and failure records, and pauses, and read
#             everything: trigger_update, rollback, pause, promote and
#             rollout_policy resume work; publish_service and update_own_status
#             exit 77, nothing written.
#   node      may write only the node-side prefixes (running_version, status,
#             available_services, alive, rollout/holders, rollout/failed,
#             rollout/canary, groups) and the shared rollout/halted and
#             rollout/promoted (not history/, rollout_tail nor rollout/stages/: a role made
#             before they existed, which the daemon runs with), and read
#             current_version, previous_version,
#             rollout/ and pause/: a daemon running as node registers, converges
#             and publishes; trigger_update exits 77, and so does the write of
#             current_version an automatic revert would make (not granted by
#             default; orchestrate(1), ROLLOUT SAFETY).
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
	etcdctl_ role grant-permission operator readwrite "$P/rollout/halted" >/dev/null &&
	etcdctl_ role grant-permission operator readwrite "$P/rollout/promoted" >/dev/null &&
	etcdctl_ role grant-permission operator --prefix=true readwrite "$P/rollout/failed/" >/dev/null &&
	etcdctl_ role grant-permission operator --prefix=true readwrite "$P/pause/" >/dev/null &&

	etcdctl_ role add node >/dev/null &&
	for d in running_version status available_services alive rollout/holders \
		 rollout/failed rollout/canary groups; do
		etcdctl_ role grant-permission node --prefix=true readwrite "$P/$d/" >/dev/null ||
			exit 1
	done &&
	etcdctl_ role grant-permission node readwrite "$P/rollout/halted" >/dev/null &&
	etcdctl_ role grant-permission node readwrite "$P/rollout/promoted" >/dev/null &&
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

test_expect_success 'operator: the safety flags of rollout_policy set are writable' '
	orch $OPS rollout_policy set --max-parallel 1 --max-failures 2 --canary 1 &&
	test "$(etcdctl_json_field /rollout/policy max_failures)" = 2
'

test_expect_success 'operator: promote and rollout_policy resume work' '
	orch $OPS promote >out &&
	grep -q "^promoted the canaries of v1" out &&
	test "$(etcdctl_json_field /rollout/promoted version)" = v1 &&
	T=$(etcdctl_ get -w json /current_version | python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])") &&
	etcdctl_put /rollout/halted "{\"version\":\"v1\",\"trigger\":$T,\"reason\":\"test\"}" &&
	etcdctl_put /rollout/failed/x1 "{\"version\":\"v1\",\"trigger\":$T}" &&
	orch $OPS rollout_policy resume >out &&
	grep -q "^rollout of v1 resumed (was halted: test)" out &&
	! etcdctl_exists /rollout/halted &&
	! etcdctl_exists /rollout/failed/x1 &&
	orch $OPS rollout_policy set --max-parallel 1
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

test_expect_success 'node: the rollout records a node writes are writable' '
	for k in /rollout/failed/n1 /rollout/canary/n1 /rollout/halted /rollout/promoted; do
		ETCDCTL_USER=n1:n1pw etcdctl_ put "$k" "{\"version\":\"v1\",\"trigger\":1}" >/dev/null ||
			{ echo "put $k was refused" >&4; exit 1; }
	done &&
	ETCDCTL_USER=n1:n1pw etcdctl_ del /rollout/failed/n1 >/dev/null &&
	ETCDCTL_USER=n1:n1pw etcdctl_ del /rollout/canary/n1 >/dev/null &&
	ETCDCTL_USER=n1:n1pw etcdctl_ del /rollout/halted >/dev/null &&
	ETCDCTL_USER=n1:n1pw etcdctl_ del /rollout/promoted >/dev/null
'

test_expect_success 'node: not the policy, other rollout keys, nor the versions (no auto_revert grant)' '
	etcdctl_dump >before &&
	for k in /rollout/policy /rollout/other /rollout/haltedx /current_version /previous_version; do
		! ETCDCTL_USER=n1:n1pw etcdctl_ put "$k" "{}" >/dev/null 2>err ||
			{ echo "put $k was allowed" >&4; exit 1; }
		grep -qi "permission denied" err || { cat err >&4; exit 1; }
	done &&
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

test_expect_success 'node: a role without history/ (made before it existed) keeps no history, and runs' '
	grep -q "etcd refuses this host its run history" n1/log &&
	! etcdctl_exists /history/n1
'

test_expect_success 'node: the daemon takes a rollout slot and follows a new trigger' '
	orch $OPS trigger_update v3 &&
	wait_for "node_at n1 v3" 20 &&
	! running_at n1 v1 &&
	! grep -i "permission denied" n1/log | grep -v "the slot queue.s tail"
'

# The role is README's but for P/rollout_tail, as a role made before the
# tail existed: the queueing write that names the host there is refused
# once, and the host queues without it from then on.
test_expect_success 'node: a role without rollout_tail (made before it existed) queues without it, and runs' '
	test "$(grep -c "refused a write with the slot queue.s tail" n1/log)" = 1 &&
	! etcdctl_exists /rollout_tail
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

# Nor has the role rollout/stages/: the host's claim of its stage's gate is
# refused once, and it reads the earlier groups itself from then on.
test_expect_success 'node: a role without rollout/stages/ (made before it existed) waits for its stage alone, and runs' '
	etcdctl_put /groups/g0/x "" &&
	etcdctl_put /rollout/policy "{\"groups\":[\"g0\",\"g1\"]}" &&
	orch $OPS trigger_update v4s &&
	wait_for "node_at n1 v4s" 20 &&
	test "$(grep -c "etcd refused the stage gate" n1/log)" = 1 &&
	! etcdctl_exists /rollout/stages/g0 &&
	etcdctl_ del /groups/g0/x >/dev/null
'

test_expect_success 'node: a spent budget with auto_revert halts without the revert its role may not write' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"max_failures\":0,\"auto_revert\":true}" &&
	echo 1 >n1/config.exit &&
	orch $OPS trigger_update v5 &&
	wait_for "etcdctl_exists /rollout/halted" 30 &&
	wait_for "grep -q \"halted the rollout of v5\" n1/log" 10 &&
	sleep 1 &&
	etcdctl_get /rollout/halted | grep -q "\"version\":\"v5\"" &&
	! etcdctl_get /rollout/halted | grep -q reverted_to &&
	test "$(etcdctl_get /current_version)" = v5 &&
	test "$(etcdctl_get /previous_version)" = v4s &&
	test "$(grep -c "halted the rollout of v5 (.*), but etcd refused the automatic revert" n1/log)" = 1 &&
	test "$(grep -c "halted the rollout of v5" n1/log)" = 1 &&
	! grep -q "cannot halt" n1/log
'

test_expect_success 'the daemon stops cleanly (its lease revoked as node)' '
	stop_node n1 &&
	test "$(node_exit n1)" = 0 &&
	! etcdctl_exists /alive/n1
'

stop_all_nodes
test_done
