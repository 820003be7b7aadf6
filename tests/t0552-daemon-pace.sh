#!/bin/sh
test_description='orchestrated: while etcd is behind a node spreads its writes, and says so'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# A request that failed after waiting two seconds or more is a sign of a
# backlog in etcd: it widens the node's pace, and each of its next writes
# first waits a random part of the window, saying so; each prompt answer
# halves the window, down to none (node_pace.c).  Here p1 reaches etcd
# through the slow proxy: its drop, after a delay of three seconds, makes
# p1's renewals fail late, and its delay alone keeps answers slow (neither
# a sign nor prompt).  h1, direct, holds the only rollout slot first.  A
# lease of 60 s: a renewal through the proxy takes six seconds (its
# request, then its body), and the retries after the failures must still
# come in time.

test_have_orchestrated
start_etcd
start_slow_proxy

test_expect_success 'setup: h1 direct, p1 through the proxy, both at v1' '
	node_setup h1 &&
	start_node_through_proxy p1 60 &&
	start_node h1 &&
	wait_for "node_at h1 v1" 20
'

test_expect_success 'requests that fail after three seconds widen the pace of p1' '
	echo 3 >delay &&
	touch drop &&
	wait_for "grep -q \"etcd is behind (\" p1/log" 45 &&
	rm -f drop &&
	! grep -q "etcd answers promptly again" p1/log
'

test_expect_success 'a rollout under max_parallel 1: the queueing write of p1 waits, and says so' '
	: >"$TRASH/runs.log" &&
	echo 12 >h1/config.sleep &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	etcdctl_put /current_version v2 &&
	wait_for "grep -q \"etcd is behind: sending a place in the slot queue in\" p1/log" 20 &&
	in=$(sed -n "s/.*etcd is behind: sending a place in the slot queue in \([0-9.]*\) s.*/\1/p" p1/log) &&
	echo "the write waits $in s" &&
	# a random part of the window: that is at least the 3 s the failed
	# requests waited, and far below its cap after a few widenings (the
	# wait is printed to a tenth of a second: under 0.05 s, as 0.0)
	awk -v s="$in" "BEGIN { exit !(s >= 0 && s <= 30) }" &&
	! grep -q "etcd answers promptly again" p1/log &&
	# sent, then through the proxy: answers are prompt from then on
	sleep $(awk -v s="$in" "BEGIN { print int(s) + 4 }") &&
	rm -f delay &&
	wait_for "node_at p1 v2" 90 &&
	wait_for "node_at h1 v2" 30 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 2 &&
	no_overlap "$TRASH/runs.log"
'

test_expect_success 'prompt answers narrow the pace until the node writes at full speed' '
	wait_for "grep -q \"etcd answers promptly again: writing at full speed\" p1/log" 90 &&
	test "$(etcdctl_lease_of /alive/p1)" = "$(cat lease.before)"
'

test_expect_success 'cleanup' '
	rm -f delay &&
	stop_all_nodes
'

test_done
