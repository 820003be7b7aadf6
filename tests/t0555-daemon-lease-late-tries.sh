#!/bin/sh
test_description='orchestrated: renewals refused for etcd'"'"'s backlog past the lease'"'"'s time are tried less and less often'

. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# Past its lease's time, a node renews once a keepalive interval until etcd
# answers: only that answer says whether the lease is gone, and a member
# that comes back from a restart extends its leases by a TTL, which a try
# every interval meets.  But when etcd itself refuses the renewals for its
# apply backlog ("waiting for the applied index took too long"), its lessor
# holds the lease expired, and each try is a keepalive stream opened on an
# etcd short of CPU for nothing: those are tried an interval, then two,
# four and at most eight intervals apart (node_keepalive_retry).
# tools/slow-proxy refuses keepalive streams with the bytes etcd 3.4.23
# sent, and drops requests as a member gone would.  TTL 6: renewals every
# 2 s, the lease's time over some 6 s after the last renewal that passed.

test_have_orchestrated
start_etcd
start_slow_proxy

lost_leases () {
	grep -c "is gone, granting a new one" "$1/log" || true
}

test_expect_success 'setup: a node with a 6 s lease, through the proxy' '
	start_node_through_proxy s1 6
'

# The renewal on the stream already open has its reply lost (which ends
# that stream), so that every renewal after it opens a stream the proxy
# refuses.
test_expect_success 'refused for 40 s: a few tries past the lease'"'"'s time, not one every 1-2 s' '
	n=$(grep -c " renewal\$" proxy.log) &&
	wait_for "test \$(grep -c \" renewal\$\" proxy.log) -gt $n" 10 &&
	t0=$(date +%s.%N) &&
	echo 1000 >refuse &&
	echo once >lose &&
	sleep 40 &&
	rm -f refuse lose &&
	refused=$(proxy_count "$t0" " refused a renewal\$") &&
	echo "renewals refused in 40 s: $refused" &&
	test "$refused" -ge 4 &&
	test "$refused" -le 12
'

test_expect_success 'once etcd answers, the node learns its lease is gone and registers again' '
	wait_for "test \$(lost_leases s1) -ge 1" 25 &&
	wait_for "grep -q \"registered again with lease\" s1/log" 30 &&
	test "$(etcdctl_lease_of /alive/s1)" != "$(cat lease.before)" &&
	test "$(etcdctl_ttl_of /alive/s1 | cut -d" " -f2)" = 12 &&
	wait_for "node_at s1 v1" 10
'

# An etcd gone (every request dropped) may come back with the lease alive:
# the node keeps trying once an interval (12 s lease: every 2-4 s).
test_expect_success 'every request dropped for 30 s: tried once an interval all along' '
	t0=$(date +%s.%N) &&
	touch drop &&
	sleep 30 &&
	rm -f drop &&
	dropped=$(proxy_count "$t0" " dropped a request\$") &&
	echo "requests dropped in 30 s: $dropped" &&
	test "$dropped" -ge 8 &&
	wait_for "test \$(lost_leases s1) -ge 2" 30 &&
	wait_for "test \$(grep -c \"registered again with lease\" s1/log) -ge 2" 30
'

stop_all_nodes
test_done
