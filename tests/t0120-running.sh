#!/bin/bash
#
# Running versions: update_own_info (running_version/HOST {"version":V}, under
# a lease of 2N+10: one key, so one version per host), running_versions, hosts_at_version, verify_hosts (arguments, stdin,
# --wait on a watch) and check_single_version.

test_description='update_own_info, running_versions, hosts_at_version, verify_hosts'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

# keys of one host under running_version/, whatever the version
host_entries () {
	etcdctl_keys /running_version/ | grep "/$1\$"
}

test_expect_success 'update_own_info --version publishes the host under that version' '
	orch --hostname h1 update_own_info --version v1 --interval 10 &&
	running_at h1 v1 &&
	etcdctl_keys /running_version/ >keys &&
	echo /running_version/h1 >expect &&
	test_cmp expect keys &&
	etcdctl_json_field /running_version/h1 time >t &&
	grep "^[0-9][0-9]*$" t
'

test_expect_success 'the entry is under a lease of 2N+10 seconds' '
	etcdctl_ttl_of /running_version/h1 >ttl &&
	read remaining granted <ttl &&
	test "$granted" = 30 &&
	test "$remaining" -le 30 && test "$remaining" -gt 20
'

test_expect_success 'another --interval gives another lease TTL' '
	orch --hostname h9 update_own_info --version v1 --interval 100 &&
	etcdctl_ttl_of /running_version/h9 >ttl &&
	read remaining granted <ttl &&
	test "$granted" = 210 &&
	etcdctl_del /running_version/h9
'

test_expect_success 'update_own_info without --version uses the local version' '
	orch local_version v1 &&
	orch --hostname h2 update_own_info --interval 10 &&
	running_at h2 v1
'

test_expect_success 'update_own_info without any version writes nothing and exits 0' '
	rm -f "$ORCHESTRATE_LOCAL_VERSION_FILE" &&
	etcdctl_dump >before &&
	orch --hostname h3 update_own_info --interval 10 &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'moving to another version replaces the entry (one version per host)' '
	orch --hostname h1 update_own_info --version v2 --interval 10 &&
	running_at h1 v2 &&
	! running_at h1 v1 &&
	host_entries h1 >entries &&
	test_line_count = 1 entries
'

test_expect_success 'an entry written by hand under another version is replaced too' '
	running_put h1 v0 &&
	orch --hostname h1 update_own_info --version v2 --interval 10 &&
	host_entries h1 >entries &&
	echo /running_version/h1 >expect &&
	test_cmp expect entries &&
	running_at h1 v2
'

test_expect_success 'moving a host leaves the other hosts alone' '
	running_at h2 v1
'

test_expect_success 'a host name sharing a prefix is not touched by the move' '
	running_put h1x v1 &&
	orch --hostname h1 update_own_info --version v2 --interval 10 &&
	running_at h1x v1
'

test_expect_success 'setup: more hosts, some written by etcdctl' '
	orch --hostname h3 update_own_info --version v1 --interval 10 &&
	running_put h4 v1 &&
	running_put h5 v3
'

test_expect_success 'running_versions lists every version once' '
	printf "v1\nv2\nv3\n" >expect &&
	orch running_versions >actual &&
	sort actual >sorted &&
	test_cmp expect sorted
'

test_expect_success 'running_versions --json is valid JSON' '
	orch --json running_versions >out.json &&
	json_ok out.json &&
	grep "\"v3\"" out.json
'

test_expect_success 'hosts_at_version lists the hosts of one version' '
	printf "h1x\nh2\nh3\nh4\n" >expect &&
	orch hosts_at_version v1 >actual &&
	sort actual >sorted &&
	test_cmp expect sorted
'

test_expect_success 'hosts_at_version of an unknown version prints nothing, exits 0' '
	orch hosts_at_version v99 >actual &&
	test_must_be_empty actual
'

test_expect_success 'hosts_at_version --json is valid JSON' '
	orch --json hosts_at_version v1 >out.json &&
	json_ok out.json &&
	grep "\"h4\"" out.json
'

test_expect_success 'hosts_at_version skips keys that are not host names and values that are not versions' '
	etcdctl_put "/running_version/a b" "{\"version\":\"v1\"}" &&
	etcdctl_put "/running_version/x/y" "{\"version\":\"v1\"}" &&
	etcdctl_put /running_version/bad1 "{\"version\":\"../v1\"}" &&
	etcdctl_put /running_version/bad2 "v1" &&
	etcdctl_put /running_version/bad3 "{\"version\":1}" &&
	orch hosts_at_version v1 >actual &&
	sort actual >sorted &&
	printf "h1x\nh2\nh3\nh4\n" >expect &&
	test_cmp expect sorted &&
	orch running_versions >actual &&
	! grep -v "^v[0-9]*\$" actual &&
	for k in "a b" x/y bad1 bad2 bad3; do etcdctl_del "/running_version/$k" || return 1; done
'

test_expect_success 'verify_hosts: 0 and no output when all are at the version' '
	orch verify_hosts v1 h2 h3 h4 >actual &&
	test_must_be_empty actual
'

test_expect_success 'verify_hosts: 1 and prints the hosts that are not' '
	test_expect_code 1 orch verify_hosts v1 h2 h1 h3 h7 >actual &&
	printf "h1\nh7\n" >expect &&
	sort actual >sorted &&
	test_cmp expect sorted
'

test_expect_success 'verify_hosts reads hosts from stdin, one a line' '
	printf "h2\nh3\nh4\n" | orch verify_hosts v1 >actual &&
	test_must_be_empty actual &&
	printf "h2\nh1\nh8\n" | test_expect_code 1 orch verify_hosts v1 >actual &&
	printf "h1\nh8\n" >expect &&
	sort actual >sorted &&
	test_cmp expect sorted
'

test_expect_success 'verify_hosts from stdin without a final newline' '
	printf "h2\nh3" | orch verify_hosts v1 >actual &&
	test_must_be_empty actual &&
	printf "h2\nh1" | test_expect_code 1 orch verify_hosts v1 >actual &&
	echo h1 >expect &&
	test_cmp expect actual
'

test_expect_success 'verify_hosts refuses an invalid host on stdin (64)' '
	printf "h2\n../x\n" | test_expect_code 64 orch verify_hosts v1 2>err &&
	grep -F "../x" err
'

test_expect_success 'verify_hosts: a host is not at a version it left' '
	test_expect_code 1 orch verify_hosts v1 h1 >actual &&
	echo h1 >expect &&
	test_cmp expect actual
'

test_expect_success 'check_single_version: 1 when other versions run' '
	test_expect_code 1 orch check_single_version v1
'

test_expect_success 'check_single_version: 1 for a version that runs nowhere' '
	test_expect_code 1 orch check_single_version v99
'

test_expect_success 'check_single_version: 0 once every host runs the version' '
	etcdctl_del /running_version/h5 &&
	orch --hostname h1 update_own_info --version v1 --interval 10 &&
	orch running_versions >actual &&
	echo v1 >expect &&
	test_cmp expect actual &&
	orch check_single_version v1 &&
	test_expect_code 1 orch check_single_version v2
'

test_expect_success 'verify_hosts --wait is woken by a write (watch, not timeout)' '
	( sleep 1; running_put h5 v1 ) &
	start=$(now_ms) &&
	orch verify_hosts v1 h2 h5 --wait 10 &&
	end=$(now_ms) &&
	echo "took $((end - start)) ms" &&
	test $((end - start)) -lt 8000 &&
	wait
'

test_expect_success 'verify_hosts --wait returns at once when already true' '
	start=$(now_ms) &&
	orch verify_hosts v1 h2 h5 --wait 10 &&
	end=$(now_ms) &&
	test $((end - start)) -lt 5000
'

test_expect_success 'verify_hosts --wait 1 times out with 1 and prints the missing host' '
	start=$(now_ms) &&
	test_expect_code 1 orch verify_hosts v1 h2 h6 --wait 1 >actual &&
	end=$(now_ms) &&
	echo "took $((end - start)) ms" &&
	test $((end - start)) -ge 900 &&
	test $((end - start)) -lt 6000 &&
	echo h6 >expect &&
	test_cmp expect actual
'

test_expect_success 'verify_hosts --wait with hosts from stdin' '
	( sleep 1; running_put h6 v1 ) &
	printf "h2\nh6\n" | orch verify_hosts v1 --wait 10 &&
	wait
'

test_expect_success 'check_single_version --wait is woken when the last other version goes' '
	running_put h7 v0 &&
	test_expect_code 1 orch check_single_version v1 &&
	( sleep 1; etcdctl_del /running_version/h7 ) &
	start=$(now_ms) &&
	orch check_single_version v1 --wait 10 &&
	end=$(now_ms) &&
	test $((end - start)) -lt 8000 &&
	wait
'

test_expect_success 'check_single_version --wait 1 times out with 1' '
	running_put h7 v0 &&
	test_expect_code 1 orch check_single_version v1 --wait 1
'

test_expect_success 'the entry disappears with its lease (host gone)' '
	orch --hostname h8 update_own_info --version v1 --interval 1 &&
	etcdctl_ttl_of /running_version/h8 >ttl &&
	read remaining granted <ttl &&
	test "$granted" = 12 &&
	etcdctl_ lease revoke "$(etcdctl_lease_of /running_version/h8)" &&
	! running_at h8 v1
'

test_done
