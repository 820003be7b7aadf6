#!/bin/bash
#
# The daemon's authentication does not stop its loop.  etcd checks a password
# with bcrypt, and after a restart (simple tokens live in its memory) every
# daemon of a fleet needs a new token at once: a member busy with a fleet's
# logins answers each one late.  A daemon that waited for its token inside
# the loop would renew no lease meanwhile, and one that authenticated for
# each request needing a token would add to that queue.  So the token is
# asked for once, asynchronously, and what needs it waits for it.
#
# tools/slow-proxy holds authentications (its "hold" file) while the test
# watches the daemon: its lease renewals go on, one authentication is asked
# for and waited for (past the request timeout: one given up on would be
# checked by etcd all the same), and once it passes the run goes on.  Tokens here live 2 s
# (--auth-token-ttl), so a daemon idle for 3 s needs a new one; its lease
# lives 6 s, renewed every 2 s.

test_description='orchestrated: authentication waits beside the loop, once for all requests'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrate
test_have_orchestrated
ETCD_EXTRA_ARGS="--auth-token-ttl 2"
start_etcd
start_slow_proxy

auth_setup s1 s1pw

# token_unused_for S  — true once no request that carries the token (all but
# lease renewals) went through the proxy for S seconds.  A fixed sleep is not
# enough: a watch stream whose creations the gateway partly dropped is opened
# again 2 s after the first (etcd_watch.c), and that fresh use keeps the token.
token_unused_for () {
	last=$(grep -v " renewal$\| /v3/lease/keepalive$" "$TRASH/proxy.log" | tail -n 1 | cut -d" " -f1)
	awk -v last="${last:-0}" -v s="$1" -v now="$(date +%s.%N)" 'BEGIN { exit !(now - last >= s) }'
}

test_expect_success 'setup: s1 with auth through the proxy, at v1' '
	LEASE_TTL=6 node_setup s1 &&
	( ETCD_URL=$PROXY_URL && start_node s1 $AUTH ) &&
	wait_for "node_at s1 v1" 20 &&
	etcdctl_lease_of /alive/s1 >lease.before &&
	test -s lease.before
'

test_expect_success 'a held authentication: the lease is renewed meanwhile, one is asked for' '
	wait_for "token_unused_for 3" 15 &&
	: >"$TRASH/hold" &&
	etcdctl_put /current_version v2 &&
	wait_for "grep -q \"held an authentication\" \"$TRASH/proxy.log\"" 10 &&
	t0=$(date +%s.%N) &&
	sleep 5 &&
	renewed=$(proxy_count "$t0" " renewal$") &&
	rm -f "$TRASH/hold" &&
	wait_for "node_at s1 v2" 20 &&
	held=$(proxy_count 0 "held an authentication") &&
	logins=$(proxy_count "$t0" "/v3/auth/authenticate") &&
	echo "renewals while held: $renewed; authentications held: $held, sent on: $logins" &&
	test "$renewed" -ge 2 &&
	test "$held" = 1 &&
	test "$logins" = 1 &&
	status_is s1 puppet success &&
	etcdctl_lease_of /alive/s1 >lease.after &&
	test_cmp lease.before lease.after
'

# A failure above must not hold every later login.
rm -f "$TRASH/hold"

test_expect_success 'a refused password: told in the log, asked again only after a backoff' '
	etcdctl_ user passwd s1 --interactive=false <<-EOF >/dev/null &&
	changed
	EOF
	t0=$(date +%s.%N) &&
	etcdctl_put /current_version v3 &&
	sleep 8 &&
	logins=$(proxy_count "$t0" "/v3/auth/authenticate") &&
	echo "authentications in 8 s: $logins" &&
	test "$logins" -ge 1 &&
	test "$logins" -le 10 &&
	grep -q "authentication failed" s1/log &&
	! node_at s1 v3
'

test_expect_success 'the password back: the run goes on, with the same lease' '
	etcdctl_ user passwd s1 --interactive=false <<-EOF >/dev/null &&
	s1pw
	EOF
	wait_for "node_at s1 v3" 30 &&
	etcdctl_lease_of /alive/s1 >lease.after &&
	test_cmp lease.before lease.after
'

# With the proxy holding each request back 3 s, a token is older than its
# TTL when etcd reads the request it came for: refused again after a fresh
# login.  That is a late etcd, not a permission denied (which would make the
# node give up its queue tail or the stage gate until restarted).
test_expect_success 'a fresh token refused too: said as late, not as denied, and the run goes on' '
	sleep 3 &&
	echo 3 >"$TRASH/delay" &&
	etcdctl_put /current_version v4 &&
	wait_for "grep -q \"the token of a fresh login too\" s1/log" 40 &&
	rm -f "$TRASH/delay" &&
	! grep -q "permission denied\|queueing without it\|refused the stage gate" s1/log &&
	wait_for "node_at s1 v4" 30 &&
	etcdctl_lease_of /alive/s1 >lease.after &&
	test_cmp lease.before lease.after
'

test_expect_success 'the daemon stops cleanly' '
	stop_node s1 &&
	test "$(node_exit s1)" = 0
'

# etcd.token_keep: an idle daemon reads the desired version (count only)
# once its token went unused for 3/4 to all of that many seconds, so that a
# trigger after a quiet spell finds it valid.  Here 1 s, under a TTL of 2.
test_expect_success 'a kept token: a trigger after 3 TTLs of quiet needs no login' '
	LEASE_TTL=6 node_setup s2 &&
	node_etcd_option s2 token_keep 1 &&
	( ETCD_URL=$PROXY_URL && start_node s2 $AUTH ) &&
	wait_for "node_at s2 v4" 20 &&
	sleep 1 &&
	t0=$(date +%s.%N) &&
	sleep 6 &&
	reads=$(proxy_count "$t0" "/v3/kv/range") &&
	etcdctl_put /current_version v5 &&
	wait_for "node_at s2 v5" 20 &&
	logins=$(proxy_count "$t0" "/v3/auth/authenticate") &&
	echo "reads in 6 s of quiet: $reads, logins from then to v5: $logins" &&
	test "$logins" = 0 &&
	test "$reads" -ge 4 &&
	test "$reads" -le 9
'

test_expect_success 'the second daemon stops cleanly' '
	stop_node s2 &&
	test "$(node_exit s2)" = 0
'

stop_all_nodes
test_done
