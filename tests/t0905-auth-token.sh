#!/bin/bash
#
# Expiring tokens.  etcd's simple tokens live --auth-token-ttl seconds past
# their last use; a client that keeps one past that gets "invalid auth token":
# as HTTP 401 with gRPC code 16 on unary calls, and on a watch as a frame that
# is created and canceled at once, with cancel_reason "rpc error: code =
# Unauthenticated desc = etcdserver: invalid auth token" (etcd 3.4.23 through
# the gateway).  Lease keepalives are not checked at all.  A token refused
# either way must be renewed without the caller noticing.
#
# The TTL here is 2 s.  A daemon whose watches are reopened every 3 s (as a
# quiet daemon's are after timing.watch_idle, 900 s by default) and whose
# unary calls come after several TTLs of silence must keep its lease and
# converge; a blocking watch started before expiry must still wake.

test_description='etcd auth tokens that expire are renewed, also for watches'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrate
test_have_orchestrated
ETCD_EXTRA_ARGS="--auth-token-ttl 2"
start_etcd

auth_setup n1 n1pw

# A token, straight from the gateway, and a range made with it.
gw_token () {
	curl -s -XPOST "$ETCD_URL/v3/auth/authenticate" -d '{"name":"n1","password":"n1pw"}' |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
gw_range () {
	curl -s -w '\n%{http_code}\n' -XPOST -H "Authorization: $1" "$ETCD_URL/v3/kv/range" \
		-d '{"key":"L2N1cnJlbnRfdmVyc2lvbg=="}'
}

test_expect_success 'sanity: a token unused for longer than the TTL is refused' '
	tok=$(gw_token) &&
	gw_range "$tok" | tail -n 1 | grep -qx 200 &&
	sleep 3.5 &&
	gw_range "$tok" >out &&
	grep -q "invalid auth token" out &&
	tail -n 1 out | grep -qx 401
'

test_expect_success 'the command line works after the TTL' '
	echo v1 >expect &&
	orch $AUTH current_version >actual &&
	test_cmp expect actual &&
	sleep 3 &&
	orch $AUTH current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a blocking watch started before expiry wakes on a write after 3 TTLs' '
	( orch $AUTH verify_hosts v1 h1 --wait 20 >vh.out 2>vh.err; echo $? >vh.rc ) &
	sleep 7 &&
	test ! -s vh.rc &&
	running_put h1 v1 &&
	wait_for "test -s vh.rc" 10 &&
	test "$(cat vh.rc)" = 0
'

test_expect_success 'a daemon with auth registers and converges' '
	node_setup n1 &&
	sed -i -e "s/^timing:\$/timing:\n  watch_idle: 3/" n1/orchestrate.yaml &&
	grep -qx "  watch_idle: 3" n1/orchestrate.yaml &&
	orchestrated --check-config --config n1/orchestrate.yaml >/dev/null &&
	start_node n1 $AUTH &&
	wait_for "node_at n1 v1" 20 &&
	etcdctl_lease_of /alive/n1 >lease.before
'

test_expect_success 'after 4 TTLs of silence (watches reopened meanwhile) a trigger converges' '
	sleep 8 &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at n1 v2" 20 &&
	status_is n1 puppet success
'

test_expect_success 'the daemon kept its lease throughout' '
	etcdctl_lease_of /alive/n1 >lease.after &&
	test_cmp lease.before lease.after &&
	etcdctl_ttl_of /alive/n1 >ttl &&
	read remaining granted <ttl &&
	test "$remaining" -gt 0
'

test_expect_success 'after 4 more TTLs, a catalog change reaches the hiera file' '
	sleep 8 &&
	etcdctl_put /available_services/late/h7 "{\"addresses\":{\"eth0\":\"10.7.7.7\"},\"healthy\":true}" &&
	wait_for "grep -q services::late::eth0 n1/services.yaml" 15
'

test_expect_success 'the daemon stops cleanly' '
	stop_node n1 &&
	test "$(node_exit n1)" = 0
'

stop_all_nodes
test_done
