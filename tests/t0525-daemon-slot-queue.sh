#!/bin/sh
test_description='orchestrated: the slot queue costs each node the same at any fleet size'
#
# Under max_parallel a node follows only what decides its turn (node_queue.c):
# the key just ahead of its own, or, first in line, the queue's releases.  So
# a rollout sends each node a few events whatever the fleet's size, where
# following every holder sent each node two per host.  Each node counts the
# events its streams delivered (orchestrate_watch_events_total), and the
# reads of its place (orchestrate_slot_queue_reads_total).
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
LEASE_TTL=5
export LEASE_TTL
NODES="q01 q02 q03 q04 q05 q06 q07 q08 q09 q10 q11 q12"

# events  — the sum of every node's orchestrate_watch_events_total.
events () {
	for n in $NODES; do
		sed -n "s/^orchestrate_watch_events_total //p" $n/metrics.prom
	done | awk '{ s += $1 } END { print s + 0 }'
}

# reads  — the sum of every node's orchestrate_slot_queue_reads_total.
reads () {
	for n in $NODES; do
		sed -n "s/^orchestrate_slot_queue_reads_total //p" $n/metrics.prom
	done | awk '{ s += $1 } END { print s + 0 }'
}

# metric NAME [FILTER]  — the sum of etcd's metric NAME (lines containing FILTER).
metric () {
	curl -s "$ETCD_URL/metrics" | awk -v m="$1" -v f="${2:-}" '
		$1 ~ "^" m "([{]|$)" && index($0, f) { s += $NF } END { printf "%d\n", s }'
}
watch_streams_opened () { metric grpc_server_started_total 'grpc_method="Watch"'; }
watchers () { metric etcd_debugging_mvcc_watcher_total; }

# most_at_once FILE  — the most config runs of runs.log under way at once.
most_at_once () {
	sort -n -k4 "$1" | awk '
		$1 == "config-start" { open++; if (open > most) most = open }
		$1 == "config-end" { open-- }
		END { print most + 0 }'
}

all_at () {
	for n in $NODES; do node_at $n "$1" || return 1; done
}

# scans  — the sum of every node's orchestrate_slot_queue_scans_total: looks
# that had etcd read the whole queue, since the tail named nobody ahead.
scans () {
	for n in $NODES; do
		sed -n "s/^orchestrate_slot_queue_scans_total //p" $n/metrics.prom
	done | awk '{ s += $1 } END { print s + 0 }'
}

test_expect_success 'setup: twelve nodes at v1, max_parallel 2' '
	for n in $NODES; do
		node_setup $n &&
		sed -i "s|^paths:\$|paths:\n  metrics_file: $TRASH/$n/metrics.prom|" $n/orchestrate.yaml &&
		echo 0.3 >$n/config.sleep || return 1
	done &&
	etcdctl_put /current_version v1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":2}" &&
	for n in $NODES; do start_node $n || return 1; done &&
	wait_for "all_at v1" 60
'

test_expect_success 'a rollout: never more than 2 at once, a few events per node' '
	: >"$TRASH/runs.log" &&
	sleep 1 &&
	e0=$(events) && r0=$(reads) && s0=$(scans) &&
	w0=$(watch_streams_opened) && n0=$(watchers) &&
	etcdctl_put /current_version v2 &&
	wait_for "all_at v2" 60 &&
	sleep 1 &&
	e1=$(events) && r1=$(reads) && s1=$(scans) &&
	w1=$(watch_streams_opened) &&
	echo "events in all: $(( e1 - e0 )), per node: $(( (e1 - e0) / 12 ));" \
		"reads of the queue: $(( r1 - r0 )); watch streams opened: $(( w1 - w0 ))" \
		>"$TRASH/events.txt" &&
	# the queue is followed on each node'"'"'s one stream: a waiting node
	# opens none (each opened one or two of its own before)
	test $(( w1 - w0 )) -le 2 &&
	# and each range it added is cancelled once it has its slot: etcd
	# holds the watchers it held before the trigger
	wait_for "test \$(watchers) = $n0" 10 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 12 &&
	test "$(most_at_once "$TRASH/runs.log")" -le 2 &&
	test -z "$(etcdctl_keys /rollout/holders/)" &&
	# following every holder: at least a put and a delete of each of the
	# 12 keys at each node, 24 per node; the queue: the trigger, the key
	# ahead starting and leaving, the releases the first in line sees
	test $(( e1 - e0 )) -lt $(( 12 * 8 )) &&
	# one read each, when it queues: the mark of the host just ahead says
	# where it stood (a read again on each mark made 22)
	test $(( r1 - r0 )) -le 15 &&
	# and none of them read the whole queue: the tail named the host
	# just ahead each time
	test $(( s1 - s0 )) = 0 &&
	echo "$NODES" | grep -qw "$(etcdctl_get /rollout_tail)"
'
test -f "$TRASH/events.txt" && sed "s/^/# /" "$TRASH/events.txt"

test_expect_success 'a waiting node whose predecessor dies follows the one ahead of it' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	for n in $NODES; do echo 5 >$n/config.sleep; done &&
	etcdctl_put /current_version v3 &&
	wait_for "test \$(holder_order | wc -l) -ge 4" 20 &&
	set -- $(holder_order) &&
	middle=$3 last=$4 &&
	echo "queue: $*; killing $middle, watched by $last" &&
	# compacted past every place: the next look cannot count the queue
	# as it was before the host queued, and reads the keys ahead instead
	etcdctl_put /filler x &&
	rev=$(etcdctl_ get /filler -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p") &&
	etcdctl_ compact "$rev" >/dev/null &&
	kill -9 $(node_pid $middle) &&
	echo $middle >"$TRASH/dead" &&
	for n in $NODES; do
		test $n = $middle && continue
		echo 0.2 >$n/config.sleep
	done &&
	for n in $NODES; do
		test $n = $middle && continue
		wait_for "node_at $n v3" 90 || return 1
	done &&
	test "$(most_at_once "$TRASH/runs.log")" -le 1 &&
	grep -q "config-start $last v3" "$TRASH/runs.log" &&
	grep -q "before this host queued is compacted" $last/log &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

test_expect_success 'the dead node restarts and converges too' '
	dead=$(cat "$TRASH/dead") &&
	echo 0 >$dead/config.sleep &&
	start_node $dead &&
	wait_for "node_at $dead v3" 30 &&
	test "$(most_at_once "$TRASH/runs.log")" -le 1
'

# all_queued VERSION  — every node of NODES has its key in the queue, or
# started its run at VERSION: none of them queues any more.
all_queued () {
	{ holder_order; sed -n "s/^config-start \([^ ]*\) $1 .*/\1/p" "$TRASH/runs.log"; } |
		sort -u | grep -cxF "$(echo $NODES | tr " " "\n")" | grep -qx 12
}

# late_metric NODE NAME  — orchestrate_slot_queue_NAME_total of NODE.
late_metric () {
	sed -n "s/^orchestrate_slot_queue_$2_total //p" $1/metrics.prom
}

# A tail that does not check out: late1 finds a value that names no host,
# and reads the whole queue instead (a scan); late2 finds a host with no key
# (as when the host that queued just before it left), and steps back along
# the tail's history to the host before it: late1, no scan.
test_expect_success 'a tail that names no host ahead costs a scan or a step back, not a place' '
	: >"$TRASH/runs.log" &&
	for n in $NODES; do echo 1 >$n/config.sleep; done &&
	s0=$(scans) &&
	etcdctl_put /current_version v4 &&
	wait_for "all_queued v4" 30 &&
	for late in late1 late2; do
		if test $late = late1
		then etcdctl_put /rollout_tail "../holders/q01"
		else etcdctl_put /rollout_tail ghost
		fi &&
		node_setup $late &&
		sed -i "s|^paths:\$|paths:\n  metrics_file: $TRASH/$late/metrics.prom|" \
			$late/orchestrate.yaml &&
		start_node $late &&
		wait_for "test \"0\$(late_metric $late reads)\" -ge 1" 30 || return 1
	done &&
	test "$(late_metric late1 scans)" -ge 1 &&
	test "$(late_metric late2 scans)" = 0 &&
	for n in $NODES late1 late2; do
		wait_for "node_at $n v4" 90 || return 1
	done &&
	test "$(most_at_once "$TRASH/runs.log")" -le 1 &&
	test "$(sed -n "s/^config-start \(late[12]\) v4 .*/\1/p" "$TRASH/runs.log" | tr "\n" " ")" = "late1 late2 " &&
	# the tail was whole while the others queued: none of them scanned
	test "$(scans)" = "$s0" &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

stop_all_nodes
test_done
