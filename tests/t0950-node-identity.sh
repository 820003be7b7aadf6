#!/bin/bash
#
# Per-host identities (node_identity, README "Securing etcd"): on an etcd with
# auth enabled, host a's password credentials may write a's keys and no other
# host's.  Every write of b's keys (state, alive, running version, service
# entry, rollout slot, group) is refused by etcd, exits 77 with one line
# naming the key class and the user, and leaves nothing behind; a's own
# writes, a daemon run to convergence and publish_service of its granted
# services work.  node_identity twice gives the same grants; decommission
# removes them.

test_description='node_identity: one etcd user and role per host (password)'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
. "$TEST_DIRECTORY/lib-identity.sh"
test_have_orchestrate
test_have_orchestrated
start_etcd

ROOT="--user root --password-file $TRASH/root.pw"
printf "rootpw\n" >root.pw
printf "apw\n" >a.pw
printf "bpw\n" >b.pw
chmod 600 root.pw a.pw b.pw
A="--user a --password-file $TRASH/a.pw"

test_expect_success 'setup: root, node identities for a and b, auth on' '
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&
	orch node_identity a --services svc-a,common,profile-a --group g1 --password-file "$TRASH/a.pw" >out &&
	grep "node identity a:" out &&
	orch node_identity b --services svc-b,common,profile-b --group g1 --password-file "$TRASH/b.pw" &&
	etcdctl_ auth enable >/dev/null
'
ETCDCTL_USER=root:rootpw
export ETCDCTL_USER

test_expect_success 'node_identity --dry-run prints the grants and changes nothing' '
	etcdctl_ role get orchestrate-node-a >before &&
	orch $ROOT node_identity a --services svc-a,common,profile-a --group g1 --dry-run >grants &&
	grep -x "READWRITE /running_version/a" grants &&
	grep -x "READWRITE /history/a" grants &&
	grep -x "READWRITE /available_services/svc-a/a" grants &&
	grep -x "READWRITE /groups/g1/a" grants &&
	grep -x "READWRITE /rollout/failed/ (prefix)" grants &&
	grep -x "READWRITE /rollout/canary/a" grants &&
	grep -x "READWRITE /rollout/halted" grants &&
	grep -x "READWRITE /rollout/promoted" grants &&
	grep -x "READWRITE /rollout/stages/ (prefix)" grants &&
	grep -x "READWRITE /rollout_tail" grants &&
	! grep "/current_version\$" grants | grep -q WRITE &&
	grep -x "READ      /pause/ (prefix)" grants &&
	! grep "/b\$" grants &&
	etcdctl_ role get orchestrate-node-a >after &&
	test_cmp before after
'

test_expect_success 'node_identity twice: no change, the same grants' '
	etcdctl_ role get orchestrate-node-a >before &&
	orch $ROOT node_identity a --services svc-a,common,profile-a --group g1 --password-file "$TRASH/a.pw" >out &&
	grep -x "node identity a: 0 changes" out &&
	etcdctl_ role get orchestrate-node-a >after &&
	test_cmp before after
'

test_expect_success 'node_identity with fewer services revokes the extra grant, and back' '
	orch $ROOT node_identity a --services svc-a --group g1 >out &&
	grep -x "node identity a: 2 changes" out &&
	! etcdctl_ role get orchestrate-node-a | grep -q "available_services/common/a" &&
	orch $ROOT node_identity a --services svc-a,common,profile-a --group g1 --password-file "$TRASH/a.pw" &&
	etcdctl_ role get orchestrate-node-a | grep -q "available_services/common/a"
'

test_expect_success 'setup: b has keys of its own (as b)' '
	orch --user b --password-file "$TRASH/b.pw" --hostname b update_own_status puppet 0 &&
	orch --user b --password-file "$TRASH/b.pw" --hostname b update_own_info --version v0 --interval 600 &&
	orch --user b --password-file "$TRASH/b.pw" --hostname b publish_service svc-b --address eth0=10.0.0.2 &&
	status_is b puppet success &&
	running_at b v0
'

# as a: its password (lib-identity.sh)
AS_A=$A
A_IS="as user .a."
etcdctl_as_a () {
	ETCDCTL_USER=a:apw etcdctl_ "$@"
}

test_expect_success 'as a: writing b'"'"'s state is refused (77), nothing written' '
	identity_refused status/puppet --hostname b update_own_status puppet 1 &&
	identity_refused status/validation --hostname b update_own_status validation 0 &&
	identity_refused status/provisioned provision b
'

test_expect_success 'as a: b'"'"'s running version is refused' '
	identity_refused running_version --hostname b update_own_info --version v9
'

test_expect_success 'as a: b'"'"'s service entry is refused' '
	identity_refused - --hostname b publish_service svc-b --address eth0=10.6.6.6 &&
	identity_refused available_services --hostname b unpublish_service svc-b
'

test_expect_success 'as a: b'"'"'s running version is still v0' '
	running_at b v0
'

test_expect_success 'as a: b'"'"'s alive, slot and group keys are refused by etcd' '
	identity_etcdctl_refused
'

test_expect_success 'as a: its own writes work' '
	orch $A --hostname a update_own_status puppet 0 &&
	status_is a puppet success &&
	orch $A --hostname a update_own_info --version v0 --interval 600 &&
	running_at a v0 &&
	orch $A --hostname a publish_service svc-a --address eth0=10.0.0.1 &&
	etcdctl_exists /available_services/svc-a/a &&
	orch $A --hostname a unpublish_service svc-a &&
	identity_refused available_services --hostname a publish_service other --address eth0=10.0.0.1
'

test_expect_success 'as a: its rollout records, the shared halt and promotion, the stage gates' '
	for k in /rollout/failed/a /rollout/canary/a /rollout/halted /rollout/promoted \
		 /rollout/stages/g0 /rollout_tail; do
		etcdctl_as_a put "$k" "{\"version\":\"v0\",\"trigger\":1}" >/dev/null ||
			{ echo "put $k was refused" >&4; exit 1; }
		etcdctl_as_a del "$k" >/dev/null || exit 1
	done
'

test_expect_success 'as a: reads work (current_version, hosts_at_version)' '
	orch $ROOT trigger_update v1 &&
	test "$(orch $A current_version)" = v1 &&
	orch $A hosts_at_version v0 >out &&
	grep -x b out
'

test_expect_success 'a daemon running as a converges and publishes its services' '
	node_setup a &&
	start_node a $A &&
	wait_for "node_at a v1" 20 &&
	status_is a validation success &&
	etcdctl_get /available_services/svc-a/a | grep -q "\"healthy\":true" &&
	etcdctl_exists /groups/g1/a &&
	! grep -qi "permission denied" a/log
'

test_expect_success 'the daemon follows a new trigger under a rollout policy' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	orch $ROOT trigger_update v2 &&
	wait_for "node_at a v2" 20 &&
	test -z "$(etcdctl_keys /rollout/holders/)" &&
	! grep -qi "permission denied" a/log
'

test_expect_success 'a daemon whose identity lacks a service keeps running and says so' '
	orch $ROOT node_identity a --group g1 --password-file "$TRASH/a.pw" &&
	etcdctl_put /available_services/svc-b/b "{\"addresses\":{\"eth0\":\"10.0.0.9\"},\"healthy\":true}" &&
	# a trigger leaves service entries alone (they hold no version): a
	# restart publishes them again, under the new lease, and is refused
	stop_node a && start_node a $A &&
	orch $ROOT trigger_update v3 &&
	wait_for "grep -q \"permission denied writing [a-z_/]* as user .a.\" a/log" 20 &&
	kill -0 $(node_pid a) &&
	orch $ROOT node_identity a --services svc-a,common,profile-a --group g1 &&
	wait_for "node_at a v3" 30 &&
	kill -0 $(node_pid a)
'

test_expect_success 'decommission removes the keys, the user and the role' '
	stop_node a &&
	orch $ROOT decommission a >out &&
	grep -q "removed the etcd user a and its role" out &&
	! etcdctl_ user get a >/dev/null 2>&1 &&
	! etcdctl_ role get orchestrate-node-a >/dev/null 2>&1 &&
	test -z "$(etcdctl_keys / | grep "/a\$")" &&
	etcdctl_ user get b >/dev/null
'

stop_all_nodes
test_done
