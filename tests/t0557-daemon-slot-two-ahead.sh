#!/bin/sh
test_description='orchestrated: a waiting node counts its place from the host two ahead'
#
# Under max_parallel a waiting node learns its place from the mark of the
# host just ahead, written when that host starts its run.  On a busy etcd
# that write takes seconds, and after a burst of releases the free slots
# went one host and one write at a time.  A node now also follows the host
# two ahead (named by the tail before the key just ahead): once that host
# marks, the one just ahead is first in line and this node counts the
# releases as well (node_queue.c), so it can take a slot freed for it while
# the host just ahead is still writing its mark.
#
# The queue here: hold1, hold2 (running), ahead (its requests through the
# slow proxy), behind.  With ahead's writes held 4 s, the two releases start
# behind well before ahead; counted from ahead's mark alone, behind started
# only after it.
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
start_slow_proxy
LEASE_TTL=20
export LEASE_TTL

# holder_order  — the queue's hosts, first first.
holder_order () {
	etcdctl_ get --prefix --keys-only --sort-by=CREATE --order=ASCEND /rollout/holders/ |
		sed -e '/^$/d' -e 's|.*/||' | tr "\n" " "
}

# queue_metric NODE NAME  — orchestrate_slot_queue_NAME_total of NODE.
queue_metric () {
	sed -n "s/^orchestrate_slot_queue_$2_total //p" "$TRASH/$1/metrics.prom"
}

# started NODE  — the time (ms) NODE's config run for v1 started.
started () {
	sed -n "s/^config-start $1 v1 //p" "$TRASH/runs.log"
}

most_at_once () {
	sort -n -k4 "$1" | awk '
		$1 == "config-start" { open++; if (open > most) most = open }
		$1 == "config-end" { open-- }
		END { print most + 0 }'
}

setup_node () {
	node_setup $1 &&
	sed -i "s|^paths:\$|paths:\n  metrics_file: $TRASH/$1/metrics.prom|" $1/orchestrate.yaml
}

test_expect_success 'setup: two hosts hold the slots of max_parallel 2, two wait' '
	etcdctl_put /rollout/policy "{\"max_parallel\":2}" &&
	etcdctl_put /current_version v1 &&
	for n in hold1 hold2 ahead behind; do setup_node $n || return 1; done &&
	echo 15 >hold1/config.sleep &&
	echo 15 >hold2/config.sleep &&
	start_node hold1 &&
	start_node hold2 &&
	wait_for "test -n \"\$(started hold1)\" && test -n \"\$(started hold2)\"" 20 &&
	( ETCD_URL=$PROXY_URL && start_node ahead ) &&
	wait_for "holder_order | grep -q \" ahead \$\"" 10 &&
	start_node behind &&
	wait_for "holder_order | grep -q \" ahead behind \$\"" 10 &&
	wait_for "test \"0\$(queue_metric behind two_ahead)\" -ge 1" 10 &&
	echo "queue: $(holder_order)" &&
	test -z "$(started ahead)" && test -z "$(started behind)"
'

test_expect_success 'the slots freed start the host behind while the one ahead writes its mark' '
	echo 4 >"$TRASH/delay" &&
	wait_for "test -n \"\$(started ahead)\" && test -n \"\$(started behind)\"" 40 &&
	rm -f "$TRASH/delay" &&
	a=$(started ahead) b=$(started behind) &&
	echo "behind started $(( a - b )) ms before ahead" &&
	test $(( b + 2000 )) -lt "$a" &&
	for n in hold1 hold2 ahead behind; do
		wait_for "node_at $n v1" 30 || return 1
	done &&
	test "$(most_at_once "$TRASH/runs.log")" -le 2 &&
	test "$(queue_metric behind reads)" = 1 &&
	test "$(queue_metric behind scans)" = 0 &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

stop_all_nodes
test_done
