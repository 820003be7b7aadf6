#!/bin/sh
test_description='orchestrated: the run history per host (history/HOST), history and status HOST'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
command -v python3 >/dev/null 2>&1 || skip_all "needs python3"
start_etcd

# Node h talks to etcd through a proxy that logs every request, so that the
# txns of one run can be counted; node b talks to etcd directly.
"$TEST_DIRECTORY/tools/slow-proxy" "$ETCD_PORT" "$TRASH/proxy.port" "$TRASH/delay" \
	"$TRASH/proxy.log" 2>"$TRASH/proxy.err" &
test_register_pid $!
wait_for "test -s '$TRASH/proxy.port'" 10 || skip_all "the proxy did not start"
PROXY_URL="http://127.0.0.1:$(cat "$TRASH/proxy.port")"

# requests PATH FROM  — requests for PATH the proxy passed to etcd since FROM.
requests () {
	awk -v p="$1" -v a="$2" '$2 == p && $1 >= a' "$TRASH/proxy.log" | wc -l | tr -d ' '
}

# runs HOST  — "VERSION RESULT ATTEMPT" a line, newest first, from history --json.
runs () {
	orch history "$1" --json | python3 -c '
import json, sys
for r in json.load(sys.stdin)["runs"]:
    print(r["version"], r["result"], r["attempt"])'
}

test_expect_success 'setup: two nodes at v1, one success each in the history' '
	node_setup h && node_setup b &&
	etcdctl_put /current_version v1 &&
	( ETCD_URL=$PROXY_URL && start_node h ) && start_node b &&
	wait_for "node_at h v1 && node_at b v1" 20 &&
	runs h >actual &&
	echo "v1 success 1" >expect &&
	test_cmp expect actual &&
	etcdctl_get /history/h | grep -q "\"start\":" &&
	runs b >actual &&
	test_cmp expect actual
'

test_expect_success 'a config failure, retried, then a success: entries in order with attempts' '
	echo 4 >h/config.exit &&
	c=$(count_lines h/config.count) &&
	etcdctl_put /current_version v2 &&
	wait_for "test \$(count_lines h/config.count) -ge \$((c + 2))" 20 &&
	wait_for "status_is h puppet failed" 5 &&
	echo 0 >h/config.exit &&
	wait_for "node_at h v2" 20 &&
	runs h >actual &&
	n=$(grep -c "^v2 failed" actual) &&
	test "$n" -ge 2 &&
	{
		echo "v2 success $((n + 1))" &&
		i=$n && while test $i -ge 1; do echo "v2 failed $i"; i=$((i - 1)); done &&
		echo "v1 success 1"
	} >expect &&
	test_cmp expect actual &&
	orch history h --json | python3 -c "
import json, sys
runs = json.load(sys.stdin)[\"runs\"]
assert runs[1][\"error\"] == \"config failed on purpose with 4\", runs[1]
assert runs[0][\"error\"] is None
assert all(r[\"duration\"] is not None and r[\"duration\"] >= 0 for r in runs)
assert runs[0][\"start\"] >= runs[1][\"start\"] > 0
"
'

test_expect_success 'a validation failure, then a success' '
	echo 1 >h/validate.exit &&
	etcdctl_put /current_version v3 &&
	wait_for "status_is h validation failed" 15 &&
	echo 0 >h/validate.exit &&
	wait_for "node_at h v3" 20 &&
	runs h >actual &&
	head -1 actual | grep -x "v3 success [2-9]" &&
	sed -n 2p actual | grep -x "v3 validation 1" &&
	orch history h --json | python3 -c "
import json, sys
runs = json.load(sys.stdin)[\"runs\"]
v = [r for r in runs if r[\"result\"] == \"validation\"]
assert v and all(r[\"error\"] == \"validate failed on purpose with 1\" for r in v), v
"
'

test_expect_success 'history HOST and history --version V, as text and JSON' '
	orch history h >out &&
	head -1 out | grep -x "runs of h, newest first:" &&
	grep -E "^  [0-9-]{10} [0-9:]{8}  v2  failed .* attempt 1  config failed on purpose with 4\$" out &&
	orch history --version v2 >out &&
	head -1 out | grep "^HOST  *STARTED  *RESULT  *TOOK" &&
	grep -E "^h  .* success .* attempt [3-9]" out &&
	grep -E "^h  .* failed .* attempt 1  config failed on purpose with 4\$" out &&
	grep -E "^b  .* success .* attempt 1\$" out &&
	orch history --version v2 --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d[\"version\"] == \"v2\"
hosts = [r[\"host\"] for r in d[\"runs\"]]
assert hosts == sorted(hosts) and \"b\" in hosts and \"h\" in hosts, hosts
assert all(r[\"version\"] == \"v2\" for r in d[\"runs\"])
"
'

test_expect_success 'exit codes: no history 1, usage and invalid names 64, etcd unreachable 69' '
	test_expect_code 1 orch history nobody 2>err &&
	grep "no run history for host .nobody." err &&
	test_expect_code 1 orch history --version v99 >out &&
	grep -x "no run of v99 recorded" out &&
	test_expect_code 64 orch history &&
	test_expect_code 64 orch history h --version v1 &&
	test_expect_code 64 orch history ../current_version &&
	test_expect_code 64 orch history --version "a b" &&
	test_expect_code 69 orch --etcd http://127.0.0.1:1 --timeout 1 history h
'

test_expect_success 'status HOST shows the runs, and its JSON has them' '
	orch status h >out &&
	sed -n "/^runs:/,\$p" out >runs &&
	sed -n 2p runs | grep -E "^  [0-9-]{10} [0-9:]{8}  v3  success" &&
	orch status h --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d[\"runs\"][0][\"version\"] == \"v3\" and d[\"runs\"][0][\"result\"] == \"success\", d[\"runs\"]
"
'

test_expect_success 'the end of a run is still one txn: a version change costs two (start, end)' '
	sleep 1 &&
	from=$(date +%s.%N) &&
	etcdctl_put /current_version v4 &&
	wait_for "node_at h v4" 20 &&
	sleep 1 &&
	test "$(requests /v3/kv/txn "$from")" = 2 &&
	runs h | head -1 | grep -x "v4 success 1"
'

test_expect_success 'only the last 10 runs are kept' '
	for v in 5 6 7 8 9 10 11 12; do
		etcdctl_put /current_version v$v &&
		wait_for "node_at h v$v && node_at b v$v" 20 || return 1
	done &&
	runs h >actual &&
	test $(wc -l <actual) = 10 &&
	head -1 actual | grep -x "v12 success 1" &&
	tail -1 actual | grep "^v3 " &&
	runs b >actual &&
	test $(wc -l <actual) = 10 &&
	etcdctl_get /history/h | python3 -c "import json, sys; assert len(json.loads(sys.stdin.read())[\"runs\"]) == 10"
'

test_expect_success 'the history survives a restart: read back, new runs in front' '
	runs h >before &&
	stop_node h &&
	( ETCD_URL=$PROXY_URL && start_node h ) &&
	etcdctl_put /current_version v13 &&
	wait_for "node_at h v13" 20 &&
	runs h >actual &&
	head -1 actual | grep -x "v13 success 1" &&
	head -9 before >expect &&
	sed -n 2,10p actual >rest &&
	test_cmp expect rest
'

test_expect_success 'a run the daemon died in is recorded as interrupted' '
	echo 30 >h/config.sleep &&
	etcdctl_put /current_version v14 &&
	wait_for "status_is h puppet running" 15 &&
	wait_for "test -s h/config.pid" 5 &&
	stop_node h KILL &&
	kill "$(cat h/config.pid)" 2>/dev/null;
	rm -f h/config.sleep &&
	( ETCD_URL=$PROXY_URL && start_node h ) &&
	wait_for "node_at h v14" 20 &&
	runs h >actual &&
	head -2 actual >top &&
	printf "v14 success 1\nv14 interrupted 0\n" >expect &&
	test_cmp expect top
'

test_expect_success 'a hostile history value crashes nothing and is shown safely' '
	stop_node b &&
	python3 -c "
import json
runs = [{\"version\": \"v1\", \"result\": \"failed\", \"start\": 1, \"duration\": 1e300,
         \"attempt\": -5, \"error\": \"\\x1b[31mred\\x07 \\u00e9\" + \"x\" * 5000 + \"\\nsecond\"},
        {\"version\": \"../x\", \"result\": \"success\"}, 5, None, [],
        {\"version\": \"v1\", \"result\": \"bogus\"},
        {\"version\": \"v2\", \"result\": \"success\", \"start\": \"now\"}]
runs += [{\"version\": \"v%d\" % i, \"result\": \"success\"} for i in range(1000)]
print(json.dumps({\"runs\": runs}))" >hostile &&
	etcdctl_put /history/b "$(cat hostile)" &&
	orch history b >out &&
	! grep -q "$(printf "\033")" out &&
	! grep -q "$(printf "\007")" out &&
	test $(wc -l <out) = 11 &&
	sed -n 2p out | grep "failed" &&
	test $(sed -n 2p out | wc -c) -lt 400 &&
	! grep -q "second" out &&
	! grep -q "\.\./x" out &&
	orch history b --json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert len(d[\"runs\"]) == 10
r = d[\"runs\"][0]
assert r[\"attempt\"] == 0 and r[\"duration\"] is None and len(r[\"error\"].encode()) <= 200, r
assert \"\\x1b\" not in r[\"error\"]
" &&
	orch status b >out &&
	! grep -q "$(printf "\033")" out &&
	orch status b --json | python3 -c "import json, sys; json.load(sys.stdin)" &&
	orch history --version v1 >/dev/null &&
	for bad in "not json" "[1,2]" "{\"runs\":7}" "{\"runs\":[{\"version\":7}]}"; do
		etcdctl_put /history/b "$bad" &&
		test_expect_code 1 orch history b >out &&
		grep -x "  none" out &&
		orch status b >/dev/null &&
		test_expect_code 1 orch history --version v1 >/dev/null || return 1
	done &&
	etcdctl_put /history/b/extra "{\"runs\":[]}" &&
	etcdctl_put /history/b "$(cat hostile)" &&
	orch history --version v1 >out &&
	! grep -q "extra" out
'

test_expect_success 'a daemon reading a hostile history keeps its plausible runs' '
	start_node b &&
	etcdctl_put /current_version v15 &&
	wait_for "node_at b v15" 20 &&
	runs b >actual &&
	test $(wc -l <actual) = 10 &&
	head -1 actual | grep -x "v15 success 1" &&
	sed -n 2p actual | grep -x "v1 failed 0"
'

test_expect_success 'decommission removes the history key' '
	stop_node b &&
	orch decommission b &&
	test -z "$(etcdctl_get /history/b)"
'

stop_all_nodes
test_done
