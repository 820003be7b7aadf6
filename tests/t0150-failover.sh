#!/bin/bash
#
# Endpoints: a list is a cluster (a dead member is skipped), all dead is 69,
# --host/--port compatibility, ORCHESTRATE_ETCD, etcd.endpoints in the config
# file; and ranges larger than one page (12,000 hosts).

test_description='endpoint failover, configuration of endpoints, large ranges'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

DEAD1=$(dead_url)
DEAD2=$(dead_url)

test_expect_success 'a dead first endpoint is skipped for writes' '
	orch --etcd "$DEAD1,$ETCD_URL" trigger_update v1 &&
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success 'a dead first endpoint is skipped for reads' '
	echo v1 >expect &&
	orch --etcd "$DEAD1,$DEAD2,$ETCD_URL" current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a dead last endpoint does not matter' '
	orch --etcd "$ETCD_URL,$DEAD1" current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a txn with --if-current goes through the failover too' '
	orch --etcd "$DEAD1,$ETCD_URL" trigger_update v2 --if-current v1 &&
	test "$(etcdctl_get /current_version)" = v2 &&
	test "$(etcdctl_get /previous_version)" = v1
'

test_expect_success 'all endpoints dead: reads exit 69 with one line on stderr' '
	start=$(now_ms) &&
	test_expect_code 69 orch --etcd "$DEAD1,$DEAD2" current_version >out 2>err &&
	end=$(now_ms) &&
	test_must_be_empty out &&
	test_one_line err &&
	test $((end - start)) -lt 15000
'

test_expect_success 'all endpoints dead: writes exit 69' '
	test_expect_code 69 orch --etcd "$DEAD1,$DEAD2" trigger_update v3 2>err &&
	test_one_line err &&
	test "$(etcdctl_get /current_version)" = v2
'

for cmd in 'rollback' 'running_versions' 'hosts_at_version v1' 'verify_hosts v1 h1' \
	'check_single_version v1' 'get_failures' 'local_health' 'get_services' 'status' \
	'provision h1' 'decommission h1' 'pause' 'resume' \
	'update_own_status puppet 0' 'publish_service s1 --address eth0=10.0.0.1' \
	'unpublish_service s1' 'wait_for_service s1 --timeout 2'; do
	test_expect_success "all endpoints dead: $cmd exits 69" "
		test_expect_code 69 orch --hostname h1 --etcd '$DEAD1' $cmd 2>err &&
		test_one_line err
	"
done

test_expect_success 'all endpoints dead: ping exits 1 (its own code in orchestrate(1))' '
	test_expect_code 1 orch --etcd "$DEAD1" ping >out 2>err &&
	test -s err
'

test_expect_success 'the error names the endpoint that failed' '
	test_expect_code 69 orch --etcd "$DEAD1" current_version 2>err &&
	grep -F "${DEAD1#http://}" err
'

test_expect_success 'ping answers 0 with a live etcd and names its version' '
	orch ping >out &&
	grep "3\.4" out
'

test_expect_success '--host and --port build the endpoint' '
	orch --host 127.0.0.1 --port "$ETCD_PORT" current_version >actual &&
	echo v2 >expect &&
	test_cmp expect actual &&
	ORCHESTRATE_ETCD=$DEAD1 orch --host 127.0.0.1 --port "$ETCD_PORT" current_version >actual &&
	test_cmp expect actual
'

test_expect_success '--host/--port pointing nowhere is 69' '
	test_expect_code 69 orch --host 127.0.0.1 --port "${DEAD1##*:}" current_version
'

test_expect_success 'ORCHESTRATE_ETCD is used when no option is given' '
	ORCHESTRATE_ETCD="$DEAD1,$ETCD_URL" orch current_version >actual &&
	test_cmp expect actual &&
	test_expect_code 69 env ORCHESTRATE_ETCD="$DEAD1" orchestrate --config "$ORCH_CONFIG" current_version
'

test_expect_success '--etcd wins over ORCHESTRATE_ETCD' '
	ORCHESTRATE_ETCD=$DEAD1 orch --etcd "$ETCD_URL" current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'etcd.endpoints from the config file' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  endpoints: [$DEAD1, $ETCD_URL]
	EOF2
	env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'etcd.endpoints as a block list' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  endpoints:
	    - $DEAD1
	    - $ETCD_URL
	  timeout: 3
	EOF2
	env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual
'

# One rule for an endpoint wherever it is written (etcd_endpoint_parse()):
# "127.0.0.1:PORT" used to be accepted by --etcd (http:// added) and refused in
# the config file; "ftp://..." and port 99999 used to get past the command
# line and fail in curl with exit 69.
test_expect_success 'an endpoint without a scheme is http://, in the config file as on the command line' '
	orch --etcd "127.0.0.1:$ETCD_PORT" current_version >actual &&
	test_cmp expect actual &&
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  endpoints: [127.0.0.1:$ETCD_PORT]
	EOF2
	env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual &&
	ORCHESTRATE_ETCD="127.0.0.1:$ETCD_PORT" orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual
'

for bad in "ftp://127.0.0.1:$ETCD_PORT" "http://127.0.0.1:99999" "http://127.0.0.1:0" \
	"http://user@127.0.0.1:$ETCD_PORT" "http://::1:$ETCD_PORT" "http://[::1:$ETCD_PORT" \
	"http://" "http://127.0.0.1:$ETCD_PORT/?x"; do
	test_expect_success "--etcd '$bad' exits 64 at parse time with one line naming it" '
		test_expect_code 64 orch --etcd "$bad" current_version >out 2>err &&
		test_must_be_empty out &&
		test_one_line err &&
		grep -F -e "$bad" err &&
		! grep -i curl err &&
		test_expect_code 64 env ORCHESTRATE_ETCD="$bad" orchestrate --config "$ORCH_CONFIG" current_version 2>err &&
		test_one_line err &&
		printf "etcd:\n  endpoints: [\"%s\"]\n" "$bad" >conf.yaml &&
		test_expect_code 64 env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml current_version 2>err &&
		test_one_line err &&
		grep -F "conf.yaml:2" err
	'
done

test_expect_success '--port 99999 is refused at parse time too (64)' '
	test_expect_code 64 orch --host 127.0.0.1 --port 99999 current_version 2>err &&
	test_one_line err
'

test_expect_success 'the command line wins over the config file' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  endpoints: [$DEAD1]
	EOF2
	env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml --etcd "$ETCD_URL" current_version >actual &&
	test_cmp expect actual &&
	test_expect_code 69 env -u ORCHESTRATE_ETCD orchestrate --config conf.yaml current_version
'

test_expect_success 'etcd.prefix from the config file' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  prefix: /cfgprefix
	EOF2
	orchestrate --config conf.yaml trigger_update c1 &&
	test "$(etcdctl_get /cfgprefix/current_version)" = c1 &&
	test "$(etcdctl_get /current_version)" = v2
'

test_expect_success 'a stopped etcd is 69; after a restart it answers again' '
	stop_etcd &&
	test_expect_code 69 orch --timeout 2 current_version && rc=0 || rc=1
	restart_etcd &&
	test $rc = 0 &&
	orch current_version >actual &&
	test_cmp expect actual
'

# --- large ranges -----------------------------------------------------------------

# seed_hosts VERSION COUNT: puts running_version/hostNNNNN at VERSION in txns of 100,
# straight through the gateway (one process, a few seconds).
seed_hosts () {
	python3 - "$ETCD_URL" "$1" "$2" <<-\PY
	import base64, json, sys, urllib.request
	url, version, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
	b = lambda s: base64.b64encode(s.encode()).decode()
	for start in range(0, count, 100):
	    ops = [{"request_put": {"key": b("/running_version/host%05d" % i),
	                            "value": b('{"version":"%s","time":1}' % version)}}
	           for i in range(start, min(start + 100, count))]
	    req = urllib.request.Request(url + "/v3/kv/txn",
	                                 data=json.dumps({"success": ops}).encode(),
	                                 headers={"Content-Type": "application/json"})
	    with urllib.request.urlopen(req, timeout=10) as r:
	        d = json.load(r)
	        assert d.get("succeeded"), d
	PY
}

test_expect_success 'setup: 12,000 hosts at v1' '
	start=$(now_ms) &&
	seed_hosts big1 12000 &&
	end=$(now_ms) &&
	echo "seeded in $((end - start)) ms" &&
	test "$(etcdctl_count /running_version/host)" = 12000 &&
	for i in $(seq 0 11999); do printf "host%05d\n" $i; done >all-hosts
'

test_expect_success 'hosts_at_version returns all 12,000' '
	orch hosts_at_version big1 >actual &&
	test_line_count = 12000 actual &&
	sort actual >sorted &&
	test_cmp all-hosts sorted
'

test_expect_success 'verify_hosts with all 12,000 from stdin: 0' '
	orch verify_hosts big1 <all-hosts >out &&
	test_must_be_empty out
'

test_expect_success 'verify_hosts with one more host: 1 and only that one is printed' '
	{ cat all-hosts; echo host99999; } >more-hosts &&
	test_expect_code 1 orch verify_hosts big1 <more-hosts >out &&
	echo host99999 >expect &&
	test_cmp expect out
'

test_expect_success 'running_versions and check_single_version over a large range' '
	etcdctl_keys /running_version/ | grep -v "^/running_version/host[0-9]*\$" |
		while read -r k; do etcdctl_del "$k"; done;
	echo big1 >expect &&
	orch running_versions >actual &&
	sort actual >sorted &&
	test_cmp expect sorted &&
	orch check_single_version big1
'

test_expect_success 'the large range through a failover list' '
	orch --etcd "$DEAD1,$ETCD_URL" hosts_at_version big1 >actual &&
	test_line_count = 12000 actual
'

test_expect_success 'status over 12,000 hosts' '
	orch status >out &&
	grep -c "host[0-9][0-9][0-9][0-9][0-9]" out >n &&
	test "$(cat n)" -ge 12000
'

test_done
