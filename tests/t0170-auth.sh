#!/bin/bash
#
# Authentication: --user with ORCHESTRATE_PASSWORD or --password-file against an
# etcd with auth enabled; refused credentials or permissions exit 77 and write
# nothing (orchestrate(1) "EXIT STATUS").

test_description='etcd authentication and permissions'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

test_expect_success 'setup: users root and node, a read-only user, auth enabled' '
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user add node:nodepw >/dev/null &&
	etcdctl_ user add reader:readpw >/dev/null &&
	etcdctl_ role add rw >/dev/null &&
	etcdctl_ role add ro >/dev/null &&
	etcdctl_ role grant-permission rw --prefix=true readwrite / >/dev/null &&
	etcdctl_ role grant-permission ro --prefix=true read / >/dev/null &&
	etcdctl_ user grant-role node rw >/dev/null &&
	etcdctl_ user grant-role reader ro >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&
	etcdctl_ put /current_version v1 >/dev/null &&
	etcdctl_ auth enable >/dev/null
'
ETCDCTL_USER=root:rootpw
export ETCDCTL_USER

test_expect_success 'etcdctl as root still works (sanity)' '
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success 'no credentials: refused with 77' '
	test_expect_code 77 orch current_version >out 2>err &&
	test_one_line err
'

test_expect_success 'a wrong password: 77, and the password is not printed' '
	ORCHESTRATE_PASSWORD=wrongpw test_expect_code 77 orch --user node current_version 2>err &&
	test_one_line err &&
	! grep wrongpw err
'

test_expect_success 'an unknown user: 77' '
	ORCHESTRATE_PASSWORD=x test_expect_code 77 orch --user nobody current_version 2>err
'

test_expect_success 'ORCHESTRATE_PASSWORD: reads work' '
	echo v1 >expect &&
	ORCHESTRATE_PASSWORD=nodepw orch --user node current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'ORCHESTRATE_PASSWORD: writes work' '
	ORCHESTRATE_PASSWORD=nodepw orch --user node trigger_update v2 &&
	test "$(etcdctl_get /current_version)" = v2 &&
	test "$(etcdctl_get /previous_version)" = v1
'

test_expect_success '--password-file (first line is the password)' '
	printf "nodepw\n" >pw &&
	chmod 600 pw &&
	orch --user node --password-file pw trigger_update v3 &&
	test "$(etcdctl_get /current_version)" = v3
'

test_expect_success 'etcd.user and etcd.password_file from the config file' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  user: node
	  password_file: $TRASH/pw
	EOF2
	echo v3 >expect &&
	orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a lease-using write works with auth (update_own_info)' '
	ORCHESTRATE_PASSWORD=nodepw orch --user node --hostname h1 update_own_info --version v3 --interval 10 &&
	running_at h1 v3
'

test_expect_success 'a watch works with auth (verify_hosts --wait)' '
	( sleep 1; running_put h2 v3 ) &
	ORCHESTRATE_PASSWORD=nodepw orch --user node verify_hosts v3 h1 h2 --wait 10 &&
	wait
'

test_expect_success 'a read-only user can read' '
	echo v3 >expect &&
	ORCHESTRATE_PASSWORD=readpw orch --user reader current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a read-only user is refused writes with 77, nothing written' '
	etcdctl_dump >before &&
	ORCHESTRATE_PASSWORD=readpw test_expect_code 77 orch --user reader trigger_update v4 2>err &&
	test_one_line err &&
	ORCHESTRATE_PASSWORD=readpw test_expect_code 77 orch --user reader --hostname h1 update_own_status puppet 0 2>err &&
	ORCHESTRATE_PASSWORD=readpw test_expect_code 77 orch --user reader provision h9 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'failover still works with auth (dead first endpoint)' '
	ORCHESTRATE_PASSWORD=nodepw orch --user node --etcd "$(dead_url),$ETCD_URL" current_version >actual &&
	test_cmp expect actual
'

test_done
