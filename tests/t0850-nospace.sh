#!/bin/sh
#
# etcd out of space: a small --quota-backend-bytes, filled until etcd raises
# its NOSPACE alarm.  Writes fail cleanly (one line naming the cause, the
# exit code of an unavailable etcd, nothing half-written), reads keep serving,
# the daemon keeps running; after delete + compact + defrag + alarm disarm,
# writes work again and the daemon converges on a new trigger.

test_description='etcd NOSPACE alarm: writes fail cleanly, reads serve, recovery after disarm'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
ETCD_EXTRA_ARGS="--quota-backend-bytes=$((4 * 1024 * 1024))"
start_etcd
unset ETCD_EXTRA_ARGS

# fill  — puts 256 KiB values through the gateway until etcd refuses one for
# lack of space (bounded: 200 puts).
fill () {
	python3 - "$ETCD_URL" <<-\PY
	import base64, json, sys, urllib.request, urllib.error
	url = sys.argv[1]
	value = base64.b64encode(b"x" * (256 * 1024)).decode()
	for i in range(200):
	    body = json.dumps({"key": base64.b64encode(b"/filler/%d" % i).decode(),
	                       "value": value}).encode()
	    req = urllib.request.Request(url + "/v3/kv/put", data=body,
	                                 headers={"Content-Type": "application/json"})
	    try:
	        urllib.request.urlopen(req, timeout=10).read()
	    except urllib.error.HTTPError as e:
	        msg = e.read().decode()
	        print("refused after %d puts: %s" % (i, msg))
	        sys.exit(0 if "space" in msg else 1)
	print("never refused")
	sys.exit(1)
	PY
}

test_expect_success 'setup: a node at v1' '
	node_setup q1 &&
	orch trigger_update v1 &&
	start_node q1 &&
	wait_for "node_at q1 v1" 15
'

test_expect_success 'etcd filled up raises the NOSPACE alarm' '
	fill &&
	etcdctl_ alarm list >alarms &&
	cat alarms &&
	grep -q NOSPACE alarms
'

test_expect_success 'trigger_update fails with one line about space, nothing written' '
	before=$(etcdctl_ get /current_version -w json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"header\"][\"revision\"])") &&
	test_expect_code 69 orch trigger_update v2 >out 2>err &&
	cat err &&
	test_one_line err &&
	grep -q "space" err &&
	grep -q "NOSPACE alarm" err &&
	test_must_be_empty out &&
	test "$(etcdctl_get /current_version)" = v1 &&
	test -z "$(etcdctl_get /previous_version)" &&
	test_expect_code 69 orch --hostname q1 update_own_status puppet 1 2>err &&
	test_one_line err && grep -q "space" err &&
	status_is q1 puppet success
'

test_expect_success 'reads keep serving during the alarm' '
	test "$(orch current_version)" = v1 &&
	orch status >st && grep -qw q1 st &&
	orch verify_hosts v1 q1 &&
	orch get_failures &&
	orch get_services >svc && grep -q "services::" svc
'

test_expect_success 'the daemon keeps running; a write it needs fails with the reason logged' '
	sed -i "s/^  services: \[svc-q1, common\]/  services: [svc-q1, common, roomsvc]/" q1/orchestrate.yaml &&
	kill -HUP $(node_pid q1) &&
	wait_for "grep -q \"configuration reloaded\" q1/log" 10 &&
	sleep 3 &&
	kill -0 $(node_pid q1) &&
	etcdctl_get /alive/q1 | grep -q pid &&
	test -z "$(etcdctl_get /available_services/roomsvc/q1)"
'

test_expect_success 'after delete, compact, defrag and disarm: writes work, the daemon converges' '
	etcdctl_ del --prefix /filler/ >/dev/null &&
	rev=$(etcdctl_ get /current_version -w json | python3 -c "import json,sys; print(json.load(sys.stdin)[\"header\"][\"revision\"])") &&
	etcdctl_ compact "$rev" >/dev/null &&
	etcdctl_ defrag >/dev/null &&
	etcdctl_ alarm disarm >/dev/null &&
	test -z "$(etcdctl_ alarm list)" &&
	orch trigger_update v2 &&
	wait_for "node_at q1 v2" 20 &&
	wait_for "etcdctl_get /available_services/roomsvc/q1 | grep -q addresses" 10 &&
	kill -0 $(node_pid q1)
'

stop_all_nodes
test_done
