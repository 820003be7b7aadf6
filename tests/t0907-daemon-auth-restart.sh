#!/bin/bash
#
# After etcd forgot the tokens, a fleet logs in again spread out.  Simple
# tokens live in the etcd members' memory: when one restarts, every daemon's
# watch stream that comes back to it carries a token it refuses, within a
# second of each other.  etcd checks each password with bcrypt, all it was sent side by side;
# 1,000 daemons logging in at once starved its applies until a quarter of
# their leases were lost (README, "Logins after an etcd restart").  So a
# daemon asks for that login at a random moment of etcd.login_spread, says
# when, and logs in once.
#
# The daemons reach etcd through tools/slow-proxy, whose log shows each
# authentication; etcd restarts on the same ports and data, and a new version
# is set right after it, which a daemon can only see once its stream is back:
# so no run starts before the moment its daemon said.

test_description='orchestrated: after an etcd restart the logins are spread over etcd.login_spread'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrate
test_have_orchestrated
start_etcd
start_slow_proxy

auth_setup s1 s1pw

# node_with_spread NAME SECONDS  — NAME, logging in as s1 through the proxy,
# with etcd.login_spread SECONDS, at v1.
node_with_spread () {
	node_setup "$1" &&
	node_etcd_option "$1" login_spread "$2" &&
	( ETCD_URL=$PROXY_URL && start_node "$1" $AUTH ) &&
	wait_for "node_at $1 v1" 20 &&
	etcdctl_lease_of "/alive/$1" >"$1.lease" &&
	test -s "$1.lease"
}

test_expect_success 'setup: a1..a4 with a 4 s spread and c0 with none, at v1' '
	for n in a1 a2 a3 a4; do node_with_spread $n 4 || return 1; done &&
	node_with_spread c0 0
'

# said NAME  — the delay NAME said it would log in after, in ms; empty: none.
said () {
	sed -n "s/.*logging in again in \([0-9.]*\) s.*/\1/p" "$TRASH/$1/log" |
		awk "{ printf \"%d\n\", \$1 * 1000 }"
}

test_expect_success 'etcd restarted, then v2 set: each daemon says when it logs in again' '
	restarted=$(now_ms) &&
	restart_etcd &&
	echo "$restarted" >restarted &&
	etcdctl_put /current_version v2 &&
	for n in a1 a2 a3 a4 c0; do
		wait_for "node_at $n v2" 30 || { cat "$TRASH/$n/log" >&2; return 1; }
	done &&
	for n in a1 a2 a3 a4; do
		test "$(said $n | wc -l)" = 1 || { cat "$TRASH/$n/log" >&2; return 1; }
		echo "$n logs in again after $(said $n) ms"
		test "$(said $n)" -le 4000 || return 1
	done
'

test_expect_success 'no run starts before its daemon logged in again' '
	restarted=$(cat restarted) &&
	for n in a1 a2 a3 a4; do
		delay=$(said $n) &&
		test -n "$delay" &&
		start=$(awk -v n=$n "\$1 == \"config-start\" && \$2 == n && \$3 == \"v2\" { print \$4 }" \
			"$TRASH/runs.log") &&
		echo "$n: said $delay ms, its run started $((start - restarted)) ms after the restart began" &&
		test "$start" -ge $((restarted + delay - 100)) || return 1
	done
'

test_expect_success 'without a spread, c0 logs in at once and says nothing of it' '
	test -z "$(said c0)"
'

test_expect_success 'one login a daemon after the restart, no lease lost' '
	logins=$(awk -v t="$(cat restarted)" "\$1 * 1000 >= t" "$TRASH/proxy.log" |
		grep -c "/v3/auth/authenticate" || :) &&
	echo "logins through the proxy since the restart: $logins" &&
	test "$logins" = 5 &&
	for n in a1 a2 a3 a4 c0; do
		etcdctl_lease_of "/alive/$n" >lease.after &&
		test_cmp "$n.lease" lease.after || return 1
	done
'

test_done
