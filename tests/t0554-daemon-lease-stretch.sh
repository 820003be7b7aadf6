#!/bin/sh
test_description='orchestrated: a lease lost to a busy etcd is granted again twice as long; one lost to an etcd gone is not'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# etcd 3.4 renews no lease while it is over a second behind applying what it
# committed, and says so to each renewal ("waiting for the applied index took
# too long").  When that lasts longer than the lease has left, the lease goes
# although etcd is there: the node's next lease asks for twice the TTL (at
# most four times timing.lease_ttl), so that the next such stretch does not
# take it.  tools/slow-proxy refuses keepalive streams with the bytes etcd
# 3.4.23 sent (see t0551), and drops requests as a member gone would.  TTL 6:
# renewals every 2 s.

test_have_orchestrated
start_etcd
start_slow_proxy

# granted_ttl KEY  — the TTL etcd granted the lease KEY is under.
granted_ttl () {
	etcdctl_ttl_of "$1" | cut -d" " -f2
}

# lost_leases NODE  — how many times NODE said its lease was gone.
lost_leases () {
	grep -c "is gone, granting a new one" "$1/log" || true
}

test_expect_success 'setup: a node with a 6 s lease, through the proxy, with a metrics file' '
	LEASE_TTL=6 node_setup s1 &&
	sed -i "s|^paths:\$|paths:\n  metrics_file: $TRASH/s1/metrics.prom|" s1/orchestrate.yaml &&
	etcdctl_put /current_version v1 &&
	( ETCD_URL=$PROXY_URL && start_node s1 ) &&
	wait_for "node_at s1 v1" 20 &&
	test "$(granted_ttl /alive/s1)" = 6 &&
	wait_for "grep -qx \"orchestrate_lease_ttl_seconds 6\" s1/metrics.prom" 10
'

# While the proxy refuses every renewal the node learns nothing of its lease
# but the refusals; once they stop, the next renewal finds it gone.

# refuse_for SECONDS  — every keepalive stream refused for that long, from
# just after a renewal passed.  The node renews on a stream already open: the
# reply to the next renewal is lost, which ends that stream, so that every
# renewal after it opens a stream the proxy refuses (a loss still pending at
# the end would take the reply of whatever comes next: gone too).  That next
# renewal reaches etcd, a keepalive interval (a third of the TTL) in: etcd
# renews nothing for SECONDS less that interval.
refuse_for () {
	n_=$(grep -c " renewal\$" proxy.log || true) &&
	wait_for "test \$(grep -c \" renewal\$\" proxy.log) -gt $n_" 30 &&
	echo 1000 >refuse &&
	echo once >lose &&
	sleep "$1" &&
	rm -f refuse lose
}

# reregistered NODE N  — NODE said N times that it registered again.
reregistered () {
	test "$(grep -c "registered again with lease" "$1/log")" -ge "$2"
}

test_expect_success 'renewals refused past the TTL: the lease goes, the next asks for 12 s' '
	etcdctl_lease_of /alive/s1 >lease.first &&
	refuse_for 9 &&
	wait_for "test \$(lost_leases s1) -ge 1" 20 &&
	wait_for "reregistered s1 1" 30 &&
	grep "the next lease asks for 12 s, 2 times timing.lease_ttl" s1/log &&
	test "$(etcdctl_lease_of /alive/s1)" != "$(cat lease.first)" &&
	test "$(granted_ttl /alive/s1)" = 12 &&
	wait_for "grep -qx \"orchestrate_lease_ttl_seconds 12\" s1/metrics.prom" 10 &&
	grep -qx "orchestrate_lease_regrants_total 1" s1/metrics.prom
'

test_expect_success 'the same 9 s of refusals that took the 6 s lease: the 12 s lease stays' '
	etcdctl_lease_of /alive/s1 >lease.second &&
	mark=$(($(wc -l <s1/log) + 1)) &&
	refuse_for 9 &&
	n=$(grep -c " renewal\$" proxy.log) &&
	wait_for "test \$(grep -c \" renewal\$\" proxy.log) -gt $n" 20 &&
	tail -n +$mark s1/log | grep -q "waiting for the applied index took too long" &&
	test "$(lost_leases s1)" = 1 &&
	test "$(etcdctl_lease_of /alive/s1)" = "$(cat lease.second)"
'

test_expect_success 'a lease lost while etcd is gone (every request dropped) keeps its TTL' '
	touch drop &&
	sleep 15 &&
	rm -f drop &&
	wait_for "test \$(lost_leases s1) -ge 2" 30 &&
	wait_for "reregistered s1 2" 30 &&
	test "$(granted_ttl /alive/s1)" = 12 &&
	test "$(grep -c "the next lease asks for" s1/log)" = 1
'

test_expect_success 'refused past 12 s: 24 s; past 24 s: still 24 s, four times timing.lease_ttl at most' '
	refuse_for 20 &&
	wait_for "test \$(lost_leases s1) -ge 3" 30 &&
	wait_for "reregistered s1 3" 30 &&
	grep "the next lease asks for 24 s, 4 times timing.lease_ttl" s1/log &&
	test "$(granted_ttl /alive/s1)" = 24 &&
	refuse_for 36 &&
	wait_for "test \$(lost_leases s1) -ge 4" 40 &&
	wait_for "reregistered s1 4" 30 &&
	test "$(granted_ttl /alive/s1)" = 24 &&
	test "$(grep -c "the next lease asks for" s1/log)" = 2
'

test_expect_success 'a reload with a new timing.lease_ttl: the next lease lost to etcd asks for twice that' '
	sed -i "s/^  lease_ttl: 6\$/  lease_ttl: 7/" s1/orchestrate.yaml &&
	grep -qx "  lease_ttl: 7" s1/orchestrate.yaml &&
	kill -HUP "$(cat s1/pid)" &&
	wait_for "grep -q \"a new timing.lease_ttl, asked for as it is\" s1/log" 10 &&
	refuse_for 36 &&
	wait_for "test \$(lost_leases s1) -ge 5" 40 &&
	wait_for "reregistered s1 5" 30 &&
	grep "the next lease asks for 14 s, 2 times timing.lease_ttl" s1/log &&
	test "$(granted_ttl /alive/s1)" = 14
'

stop_all_nodes
test_done
