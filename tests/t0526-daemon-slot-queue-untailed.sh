#!/bin/sh
test_description='orchestrated: a key in the slot queue that did not name itself in the tail'
#
# A known breakage, found 2026-12-07.  A host whose etcd role may not write
# rollout_tail (a per-host role from before the tail) queues without naming
# itself there (node_queue_tail_refused).  The host that queues after it is
# told by its own txn that the tail named the host before: it takes that
# host for the one just ahead, and counts itself from that host's mark as
# one more, leaving out the key between.  Here the key between is made by
# hand (x, leased, no tail): with max_parallel 1, h3 must wait while x is
# ahead of it, and it starts as soon as h2 is done.  A real host in x's
# place would start then too: two runs at once.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
LEASE_TTL=20
export LEASE_TTL
# queue  — the slot queue's hosts on one line, first first.
queue () { echo $(holder_order); }
started () { sed -n "s/^config-start $1 v1 //p" "$TRASH/runs.log"; }
test_expect_failure 'a host waits while a key that did not name itself in the tail is ahead of it' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	etcdctl_put /current_version v1 &&
	for n in h1 h2 h3; do node_setup $n || return 1; done &&
	echo 8 >h1/config.sleep && echo 1 >h2/config.sleep &&
	start_node h1 &&
	wait_for "test -n \"\$(started h1)\"" 20 &&
	start_node h2 &&
	wait_for "test \"\$(queue)\" = \"h1 h2\"" 10 &&
	lease=$(etcdctl_ lease grant 120 | sed -n "s/^lease \([0-9a-f]*\) granted.*/\1/p") &&
	etcdctl_ put /rollout/holders/x "{\"version\":\"v1\",\"group\":\"g1\"}" --lease=$lease &&
	start_node h3 &&
	wait_for "test \"\$(queue)\" = \"h1 h2 x h3\"" 10 &&
	echo "queue: $(queue)" &&
	wait_for "test -n \"\$(started h2)\"" 30 &&
	sleep 6 &&
	echo "queue after h2: $(queue); h3 started: $(started h3)" &&
	test -z "$(started h3)"
'
stop_all_nodes
test_done
