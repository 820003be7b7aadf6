#!/bin/sh
test_description='orchestrated: a key in the slot queue that did not name itself in the tail'
#
# A host whose etcd role may not write rollout_tail (a per-host role from
# before the tail), or that runs an orchestrate from before it, queues
# without naming itself there.  The host that queues after it is told by
# its own txn that the tail named the host before: were it to take that
# host for the one just ahead, it would count itself from that host's mark
# as one more, leaving out the key between (one run more than max_parallel).
# The look counts the queue at each revision since the tail was written and
# finds the key that entered unnamed.  Here that key is made by hand (x,
# leased, no tail, never marked): with max_parallel 1, h3 waits while x is
# ahead of it, and starts once x is gone.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
LEASE_TTL=20
export LEASE_TTL
# queue  — the slot queue's hosts on one line, first first.
queue () { echo $(holder_order); }
started () { sed -n "s/^config-start $1 $2 //p" "$TRASH/runs.log"; }
ended () { sed -n "s/^config-end $1 $2 //p" "$TRASH/runs.log"; }
# queue_unnamed  — puts x in the queue under a lease of its own, without the tail.
queue_unnamed () {
	lease=$(etcdctl_ lease grant 120 | sed -n "s/^lease \([0-9a-f]*\) granted.*/\1/p") &&
	etcdctl_ put /rollout/holders/x "{\"version\":\"$1\",\"group\":\"g1\"}" --lease=$lease
}
unnamed_found () { grep -q "without naming itself in rollout_tail" "$1/log"; }

test_expect_success 'a host waits while a key that did not name itself in the tail is ahead of it' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	etcdctl_put /current_version v1 &&
	for n in h1 h2 h3; do node_setup $n || return 1; done &&
	echo 8 >h1/config.sleep && echo 1 >h2/config.sleep &&
	start_node h1 &&
	wait_for "test -n \"\$(started h1 v1)\"" 20 &&
	start_node h2 &&
	wait_for "test \"\$(queue)\" = \"h1 h2\"" 10 &&
	queue_unnamed v1 &&
	start_node h3 &&
	wait_for "test \"\$(queue)\" = \"h1 h2 x h3\"" 10 &&
	wait_for "test -n \"\$(ended h2 v1)\"" 30 &&
	sleep 6 &&
	echo "queue after h2: $(queue); h3 started: $(started h3 v1)" &&
	test -z "$(started h3 v1)" &&
	unnamed_found h3 &&
	etcdctl_ del /rollout/holders/x &&
	wait_for "test -n \"\$(started h3 v1)\"" 20 &&
	no_overlap "$TRASH/runs.log"
'

# The tail names h2, gone before h3 looks: the look steps back to h1 and
# must find x in the window between h1 and h2.
test_expect_success 'the same when the host the tail named is gone and the look steps back' '
	for n in h1 h2 h3; do stop_node $n || return 1; done &&
	etcdctl_ del --prefix /rollout/holders/ &&
	: >"$TRASH/runs.log" &&
	for n in h1 h3; do rm -f $n/log || return 1; done &&
	node_setup h0 && echo 10 >h0/config.sleep &&
	etcdctl_put /current_version v2 &&
	start_node h0 &&
	wait_for "test -n \"\$(started h0 v2)\"" 20 &&
	start_node h1 &&
	wait_for "test \"\$(queue)\" = \"h0 h1\"" 10 &&
	queue_unnamed v2 &&
	start_node h2 &&
	wait_for "test \"\$(queue)\" = \"h0 h1 x h2\"" 10 &&
	stop_node h2 &&
	wait_for "test \"\$(queue)\" = \"h0 h1 x\"" 10 &&
	start_node h3 &&
	wait_for "test \"\$(queue)\" = \"h0 h1 x h3\"" 10 &&
	wait_for "test -n \"\$(ended h1 v2)\"" 40 &&
	sleep 6 &&
	echo "queue after h1: $(queue); h3 started: $(started h3 v2)" &&
	test -z "$(started h3 v2)" &&
	unnamed_found h3 &&
	etcdctl_ del /rollout/holders/x &&
	wait_for "test -n \"\$(started h3 v2)\"" 20 &&
	no_overlap "$TRASH/runs.log"
'
stop_all_nodes
test_done
