#!/bin/sh
test_description='orchestrated: a revoked lease is seen on the node'"'"'s own stream (its alive key deleted), not at its next renewal'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# When etcd revokes a lease it deletes the keys under it, alive/HOST among
# them, and the node's stream carries that delete.  Past the lease's time the
# delete is the revocation: the node takes the lease as lost at once, unless
# etcd refused its renewals for its backlog (then its late tries decide, as
# before).  Within it (a lease revoked by hand) the node asks with a renewal
# now.  Before, it learned either only at its next try, an interval later.
# tools/slow-proxy drops requests, or refuses keepalive streams with the
# bytes etcd 3.4.23 sent (see t0551); the open watch stream passes.

test_have_orchestrated
start_etcd
start_slow_proxy

# ttl_left NODE  — the whole seconds etcd says NODE's lease has left.
ttl_left () {
	etcdctl_ttl_of "/alive/$1" | cut -d" " -f1
}

test_expect_success 'setup: s1 with a 30 s lease (renewed every 10 s), s2 with 6 s through the proxy' '
	LEASE_TTL=30 node_setup s1 &&
	start_node_through_proxy s2 6 &&
	start_node s1 &&
	wait_for "node_at s1 v1" 20
'

test_expect_success 'a lease revoked by hand just after a renewal: asked about and granted again within seconds' '
	# just renewed: the next renewal is 8 s or more away
	wait_for "test \$(ttl_left s1) -ge 29" 15 &&
	lease=$(etcdctl_lease_of /alive/s1) &&
	etcdctl_ lease revoke "$lease" &&
	wait_for "grep -q \"etcd deleted the alive key of s1 within the lease.s time: asking whether lease $lease lives\" s1/log" 3 &&
	wait_for "grep -q \"lease $lease is gone, granting a new one\" s1/log" 3 &&
	wait_for "etcdctl_lease_of /alive/s1 >lease.s1 && test \"\$(cat lease.s1)\" != $lease" 20 &&
	wait_for "node_at s1 v1" 10 &&
	! grep -q "past the lease.s time" s1/log
'

test_expect_success 'renewals dropped past the TTL: the revocation itself tells s2, while they are still dropped' '
	n_=$(grep -c " renewal\$" proxy.log || true) &&
	wait_for "test \$(grep -c \" renewal\$\" proxy.log) -gt $n_" 10 &&
	lease=$(cat lease.before) &&
	touch drop &&
	# etcd revokes the 6 s lease about 6 s after the renewal that passed;
	# s2 says so then, its requests still dropped (the stream, open
	# before, goes on: it sends nothing)
	wait_for "grep -q \"etcd deleted the alive key of s2, [0-9.]* s past the lease.s time: lease $lease was revoked\" s2/log" 12 &&
	test -e drop &&
	grep -q "lease $lease is gone, granting a new one" s2/log &&
	rm -f drop &&
	wait_for "etcdctl_lease_of /alive/s2 >lease.s2 && test \"\$(cat lease.s2)\" != $lease" 20 &&
	wait_for "node_at s2 v1" 10
'

# etcd refusing renewals for its backlog: the fleet's grants would join that
# backlog, so the delete is left to the late tries (README, "The first
# trigger at a tenth of a core").
test_expect_success 'renewals refused for the backlog past the TTL: the delete is seen, the late tries decide' '
	n_=$(grep -c " renewal\$" proxy.log || true) &&
	wait_for "test \$(grep -c \" renewal\$\" proxy.log) -gt $n_" 15 &&
	lease=$(cat lease.s2) &&
	mark=$(($(wc -l <s2/log) + 1)) &&
	echo 1000 >refuse &&
	echo once >lose &&
	wait_for "tail -n +$mark s2/log | grep -q \"etcd revoked lease $lease while refusing renewals for its backlog\"" 30 &&
	sleep 1 &&
	! tail -n +$mark s2/log | grep -q "lease $lease is gone" &&
	rm -f refuse lose &&
	wait_for "tail -n +$mark s2/log | grep -q \"lease $lease is gone, granting a new one\"" 60 &&
	wait_for "etcdctl_lease_of /alive/s2 >lease.s2b && test \"\$(cat lease.s2b)\" != $lease" 30 &&
	wait_for "node_at s2 v1" 10
'

test_expect_success 'a stop revokes its own lease: no lease is asked for after it' '
	stop_node s1 &&
	! grep -q "etcd deleted the alive key of s1, " s1/log &&
	test "$(grep -c "granting a new one" s1/log)" = 1
'

test_expect_success 'cleanup' '
	rm -f refuse lose drop &&
	stop_all_nodes
'

test_done
