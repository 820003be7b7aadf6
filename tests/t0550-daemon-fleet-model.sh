#!/bin/sh
#
# The fleet model: a node follows the desired version, pauses, rollout and
# catalog from ONE watch stream, applies every event to memory, and never
# reads etcd on the trigger path.  What it renders must be exactly what a
# fresh read gives, through bursts, compaction, an etcd restart, and a reload
# that changes what it watches; its decisions are made at the revision of the
# event that triggered them.

test_description='orchestrated: one stream, an incremental catalog, node.consumes, decisions at the event revision'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
start_etcd

# metric NAME [LABEL-FILTER]  — the sum of etcd's metric NAME (lines matching
# the filter), from its own /metrics.
metric () {
	curl -s "$ETCD_URL/metrics" | awk -v m="$1" -v f="${2:-}" '
		$1 ~ "^" m "([{]|$)" && index($0, f) { s += $NF } END { printf "%d\n", s }'
}

# burst SEED COUNT  — COUNT random changes to available_services/ (puts of good
# and malformed values, deletes) through the gateway, in one process.
burst () {
	python3 - "$ETCD_URL" "$1" "$2" <<'PY'
import base64, json, random, sys, urllib.request
url, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
b64 = lambda s: base64.b64encode(s.encode()).decode()
def post(path, body):
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()
for i in range(count):
    key = "/available_services/s%d/h%d" % (rnd.randrange(5), rnd.randrange(40))
    op = rnd.random()
    if op < 0.25:
        post("/v3/kv/deleterange", {"key": b64(key)})
        continue
    if op < 0.30:
        value = rnd.choice(['not json', '{"addresses":"x"}', '{"addresses":{"eth0":"1.2.3"}}',
                            '{"addresses":{"eth0":"10.0.0.1"},"healthy":"yes"}'])
    else:
        addrs = {}
        for iface in rnd.sample(["eth0", "eth1", "bond0"], rnd.randrange(1, 3)):
            addrs[iface] = "10.%d.%d.%d" % (rnd.randrange(3), rnd.randrange(4), rnd.randrange(1, 250))
        if rnd.random() < 0.1:
            addrs["eth2"] = "fd00::%x" % rnd.randrange(1, 65535)
        value = json.dumps({"addresses": addrs, "healthy": rnd.random() < 0.6, "version": "v1"})
    post("/v3/kv/put", {"key": b64(key), "value": b64(value)})
PY
}

# same_as_fresh NODE  — NODE's hiera file holds exactly what cache_services
# renders from a fresh read of the whole catalog.
same_as_fresh () {
	orch cache_services --output "$TRASH/fresh.yaml" >/dev/null &&
	cmp -s "$TRASH/fresh.yaml" "$TRASH/$1/services.yaml"
}

test_expect_success 'setup: two nodes at v1' '
	node_setup a && node_setup b &&
	etcdctl_put /current_version v1 &&
	start_node a && start_node b &&
	wait_for "node_at a v1 && node_at b v1" 20
'

test_expect_success 'each node holds one watch stream carrying its six watches' '
	# version, pause, rollout/ below and above holders/ (the slot queue is
	# followed apart: node_queue.c), its own alive key, the catalog
	wait_for "test \"\$(metric etcd_debugging_mvcc_watcher_total)\" = 12" 10 &&
	test "$(metric etcd_debugging_mvcc_watch_stream_total)" = 2
'

test_expect_success 'after 1,000 random catalog changes, the hiera file is what a fresh read gives' '
	ranges=$(metric grpc_server_started_total "grpc_method=\"Range\"") &&
	burst 1 1000 &&
	wait_for "same_as_fresh a && same_as_fresh b" 20 &&
	grep -q "services::s" a/services.yaml &&
	! grep -q "reading everything again" a/log &&
	# the nodes followed the burst from their events: the reads here are
	# the ones cache_services made in wait_for (one each, a handful at most)
	test $(( $(metric grpc_server_started_total "grpc_method=\"Range\"") - ranges )) -lt 60
'

test_expect_success 'a trigger costs each node no read and two txns (no policy)' '
	# what the trigger itself costs, measured on a prefix nobody watches
	t0=$(metric grpc_server_started_total "grpc_method=\"Txn\"") &&
	r0=$(metric grpc_server_started_total "grpc_method=\"Range\"") &&
	orch --prefix /elsewhere trigger_update v9 &&
	t1=$(metric grpc_server_started_total "grpc_method=\"Txn\"") &&
	r1=$(metric grpc_server_started_total "grpc_method=\"Range\"") &&
	orch trigger_update v2 &&
	wait_for "test \"\$(cat a/current_version)\" = v2 && test \"\$(cat b/current_version)\" = v2" 20 &&
	sleep 0.5 &&
	t2=$(metric grpc_server_started_total "grpc_method=\"Txn\"") &&
	r2=$(metric grpc_server_started_total "grpc_method=\"Range\"") &&
	echo "node txns: $(( (t2 - t1) - (t1 - t0) )), node ranges: $(( (r2 - r1) - (r1 - r0) ))" &&
	test $(( (t2 - t1) - (t1 - t0) )) -eq 4 &&
	test $(( (r2 - r1) - (r1 - r0) )) -eq 0 &&
	node_at a v2 && node_at b v2
'

test_expect_success 'a dependency is checked at the revision of the triggering event' '
	node_setup d "
  depends: [{service: mysql, count: 1}]" &&
	sed -i "/^  depends:/d" d/orchestrate.yaml &&
	sed -i "s/^  services: \[svc-d, common\]$/  services: [svc-d, common]\n  depends: [{service: mysql, count: 1}]/" d/orchestrate.yaml &&
	grep -q "depends:" d/orchestrate.yaml &&
	etcdctl_put /available_services/mysql/m1 "{\"addresses\":{\"eth0\":\"10.3.3.3\"}}" &&
	start_node d &&
	wait_for "node_at d v2" 20 &&
	n=$(count_lines d/config.count) &&
	# the only mysql host goes away in the same txn as the trigger
	printf "\\ndel /available_services/mysql/m1\\nput /current_version v3\\n\\n\\n" |
		etcdctl_ txn | grep -q SUCCESS &&
	wait_for "status_is d puppet pending" 10 &&
	etcdctl_get /status/puppet/pending/d | grep -q "waiting for 1 mysql, have 0" &&
	test "$(count_lines d/config.count)" = "$n" &&
	etcdctl_put /available_services/mysql/m1 "{\"addresses\":{\"eth0\":\"10.3.3.3\"}}" &&
	wait_for "node_at d v3" 20
'

test_expect_success 'node.consumes: only those services (and depends) are watched and rendered' '
	node_setup c "" &&
	sed -i "s/^  services: \[svc-c, common\]$/  services: [svc-c]\n  consumes: [s1]\n  depends: [{service: mysql, count: 1}]/" c/orchestrate.yaml &&
	grep -q "consumes: \[s1\]" c/orchestrate.yaml &&
	s0=$(metric etcd_debugging_mvcc_watcher_total) &&
	start_node c &&
	wait_for "node_at c v3" 20 &&
	# version, pause, rollout (two), its alive key, s1 and mysql; the etcd 3.4 gateway drops
	# the later create requests of a stream at times, and the node then opens it
	# again after 2 s: wait for that, not for the first attempt
	wait_for "test \$(( \$(metric etcd_debugging_mvcc_watcher_total) - $s0 )) = 7" 10 &&
	grep -q "^services::s1::" c/services.yaml &&
	grep -q "^services::mysql::" c/services.yaml &&
	! grep -q "^services::s0::" c/services.yaml &&
	! grep -q "^services::svc-a::" c/services.yaml &&
	h=$(count_lines c/services.count) &&
	before=$(md5sum <c/services.yaml) &&
	etcdctl_put /available_services/s0/zz "{\"addresses\":{\"eth0\":\"10.9.0.1\"}}" &&
	etcdctl_put /available_services/s1/zz "{\"addresses\":{\"eth0\":\"10.9.0.2\"}}" &&
	wait_for "grep -q 10.9.0.2 c/services.yaml" 10 &&
	! grep -q 10.9.0.1 c/services.yaml &&
	wait_for "test \$(count_lines c/services.count) -gt $h" 10
'

test_expect_success 'a reload that changes node.consumes replaces the stream and reads the new services' '
	sed -i "s/^  consumes: \[s1\]$/  consumes: [s0]/" c/orchestrate.yaml &&
	streams=$(metric etcd_debugging_mvcc_watch_stream_total) &&
	kill -HUP $(node_pid c) &&
	wait_for "grep -q 10.9.0.1 c/services.yaml" 10 &&
	! grep -q 10.9.0.2 c/services.yaml &&
	wait_for "test \"\$(metric etcd_debugging_mvcc_watch_stream_total)\" = $streams" 10 &&
	etcdctl_put /available_services/s0/zz2 "{\"addresses\":{\"eth0\":\"10.9.0.3\"}}" &&
	wait_for "grep -q 10.9.0.3 c/services.yaml" 10
'

test_expect_success 'a reload with new etcd settings reconnects on a new client, keeping its lease' '
	lease=$(etcdctl_lease_of /alive/c) &&
	streams=$(metric etcd_debugging_mvcc_watch_stream_total) &&
	sed -i "s/^  timeout: 5$/  timeout: 4/" c/orchestrate.yaml &&
	grep -q "^  timeout: 4$" c/orchestrate.yaml &&
	kill -HUP $(node_pid c) &&
	wait_for "grep -q \"new etcd settings\" c/log" 10 &&
	etcdctl_put /available_services/s0/zz4 "{\"addresses\":{\"eth0\":\"10.9.0.4\"}}" &&
	wait_for "grep -q 10.9.0.4 c/services.yaml" 10 &&
	test "$(etcdctl_lease_of /alive/c)" = "$lease" &&
	wait_for "test \"\$(metric etcd_debugging_mvcc_watch_stream_total)\" = $streams" 10
'

test_expect_success 'a burst while etcd restarts: no event lost, the stream resumed' '
	burst 2 300 2>/dev/null &
	bpid=$! &&
	sleep 0.3 &&
	{ restart_etcd || { echo "etcd did not restart"; false; }; } &&
	{ wait $bpid || :; } &&
	{ burst 3 200 || { echo "burst 3 failed"; false; }; } &&
	wait_for "same_as_fresh a && same_as_fresh b" 30 &&
	orch trigger_update v4 &&
	wait_for "node_at a v4 && node_at b v4" 20
'

test_expect_success 'compaction of the resume revision during a burst: read again, the same file' '
	kill -STOP $(node_pid a) &&
	{ burst 4 300 || { echo "burst 4 failed"; false; }; } &&
	rev=$(etcdctl_ get /current_version -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p") &&
	echo "compacting at $rev" &&
	etcdctl_ compact "$rev" >/dev/null &&
	{ restart_etcd || { echo "etcd did not restart"; false; }; } &&
	kill -CONT $(node_pid a) &&
	wait_for "grep -q \"compacted\" a/log" 20 &&
	wait_for "same_as_fresh a && same_as_fresh b" 30 &&
	orch trigger_update v5 &&
	wait_for "node_at a v5 && node_at b v5" 20
'

# streams_and_watchers  — etcd's gauges of watch streams and watchers, as "S W".
streams_and_watchers () {
	echo "$(metric etcd_debugging_mvcc_watch_stream_total) $(metric etcd_debugging_mvcc_watcher_total)"
}

test_expect_success 'still one stream per node' '
	# Right after the restart a stream may have only some of its watches
	# created (the 3.4 gateway drops the rest at times), and its node opens
	# it again 2 s later: so what is asserted is the steady state, every
	# watch created (a, b and d six each, c seven), one stream per node, and
	# that it stays so, not the first moment the count is four.
	wait_for "test \"\$(streams_and_watchers)\" = \"4 25\"" 20 &&
	sleep 3 &&
	now=$(streams_and_watchers) &&
	echo "streams and watchers 3 s later: $now" &&
	test "$now" = "4 25"
'

test_done
