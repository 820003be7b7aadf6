#!/bin/sh
test_description='orchestrated: a lease survives an etcd slower than the request timeout, and a stopped one'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# An etcd slower than the request timeout is the start of the spiral a fleet
# can make of a busy cluster: keepalives given up on and sent again, the lease
# lost although etcd was there all along, every key of the node deleted and
# written again.  tools/slow-proxy stands between one daemon and a real etcd
# and, on demand, holds every request back for longer than the daemon's
# request timeout (1 s here), dropping those whose caller hung up, as an etcd
# with a long queue does.  The lease's TTL is 9 s: keepalives every 3 s.

test_have_orchestrated
command -v python3 >/dev/null 2>&1 || skip_all "needs python3 for the slow proxy"
start_etcd

"$TEST_DIRECTORY/tools/slow-proxy" "$ETCD_PORT" "$TRASH/proxy.port" "$TRASH/delay" \
	"$TRASH/proxy.log" "$TRASH/lose" "$TRASH/drop" 2>"$TRASH/proxy.err" &
test_register_pid $!
wait_for "test -s '$TRASH/proxy.port'" 10 || skip_all "the slow proxy did not start"
PROXY_URL="http://127.0.0.1:$(cat "$TRASH/proxy.port")"

# lease_of HOST  — the lease alive/HOST is under, in decimal (empty when absent).
lease_of () {
	etcdctl_ get -w json "/alive/$1" | python3 -c '
import json, sys
kvs = json.load(sys.stdin).get("kvs") or []
print(kvs[0].get("lease", 0) if kvs else "")'
}

# requests PATH FROM [TO]  — requests for PATH (/v3/lease/keepalive,
# /v3/kv/range...) the proxy passed to etcd in [FROM, TO); PATH "renewal":
# the lease renewals, each an object on the node's keepalive stream.
requests () {
	awk -v p="$1" -v a="$2" -v b="${3:-9999999999}" '$2 == p && $1 >= a && $1 < b' \
		"$TRASH/proxy.log" | wc -l | tr -d ' '
}

now () {
	date +%s.%N
}

# field_of KEY FIELD  — one field of a JSON value (empty when absent).
field_of () {
	etcdctl_get "$1" | python3 -c '
import json, sys
try: print(json.load(sys.stdin).get(sys.argv[1], ""))
except Exception: print("")' "$2"
}

test_expect_success 'setup: a node through the proxy, at v1' '
	LEASE_TTL=9 node_setup s1 &&
	sed -i "s/^  timeout: 5$/  timeout: 1/" s1/orchestrate.yaml &&
	grep -q "^  timeout: 1$" s1/orchestrate.yaml &&
	etcdctl_put /current_version v1 &&
	( ETCD_URL=$PROXY_URL && start_node s1 ) &&
	wait_for "node_at s1 v1" 20 &&
	lease_of s1 >lease.before &&
	test -s lease.before
'

test_expect_success 'etcd 2.5 s behind for 20 s (twice the TTL): the lease is kept, keepalives are not resent' '
	cp s1/log s1/log.before &&
	from=$(now) &&
	echo 2.5 >delay &&
	sleep 20 &&
	rm -f delay &&
	to=$(now) &&
	sleep 3 &&
	sent=$(requests renewal "$from" "$to") &&
	streams=$(requests /v3/lease/keepalive "$from" "$to") &&
	failed=$(sed -n "$(( $(wc -l <s1/log.before) + 1 )),\$p" s1/log | grep -c "lease keepalive failed" || :) &&
	lost=$(grep -c "is gone" s1/log || :) &&
	echo "renewals that reached etcd in 20 s: $sent (about one per 3 s), on $streams new keepalive requests; failed: $failed; leases lost: $lost" >measured &&
	test "$(lease_of s1)" = "$(cat lease.before)" &&
	test "$lost" = 0 && test "$failed" = 0 &&
	test "$sent" -ge 3 && test "$sent" -le 8 &&
	test "$streams" -le 1
'
test -f measured && say_comment <measured

test_expect_success 'after the stretch the node converges as before' '
	etcdctl_put /current_version v2 &&
	wait_for "node_at s1 v2" 30 &&
	test "$(lease_of s1)" = "$(cat lease.before)"
'

test_expect_success 'etcd 2.5 s behind as the node reads the fleet again: one read, waited for, the lease kept' '
	grep -q "svc-s1" s1/services.yaml &&
	sed -i "s/^  group: g1$/  group: g1\n  consumes: [common]/" s1/orchestrate.yaml &&
	grep -q "^  consumes: \[common\]$" s1/orchestrate.yaml &&
	cp s1/log s1/log.before &&
	echo 2.5 >delay &&
	from=$(now) &&
	kill -HUP "$(node_pid s1)" &&
	wait_for "grep -q \"reading them again\" s1/log" 5 &&
	# the new ranges are read (only common in the hiera file) while every
	# request still takes 2.5 s, over twice the request timeout
	wait_for "! grep -q svc-s1 s1/services.yaml" 15 &&
	to=$(now) &&
	rm -f delay &&
	grep -q "common" s1/services.yaml &&
	sed -n "$(( $(wc -l <s1/log.before) + 1 )),\$p" s1/log >log.new &&
	! grep -q "sync failed" log.new &&
	test "$(requests /v3/kv/range "$from" "$to")" = 0 &&
	test "$(lease_of s1)" = "$(cat lease.before)"
'

# A staged policy's turn needs the fleet beyond the model (the earlier
# groups' progress, the alive hosts max_percent is a share of).  Read with a
# request's patience, it never came while every request took longer than
# the request timeout: the node logged "cannot take a rollout slot" and
# retried into the same timeout for as long as etcd stayed slow.
test_expect_success 'etcd 2.5 s behind as a staged turn is decided: the fleet beyond the model is waited for, the run goes' '
	etcdctl_put /rollout/policy "{\"groups\":[\"g0\",\"g1\"],\"max_percent\":50}" &&
	cp s1/log s1/log.before &&
	echo 2.5 >delay &&
	from=$(now) &&
	etcdctl_put /current_version v2p &&
	wait_for "node_at s1 v2p" 60 &&
	to=$(now) &&
	rm -f delay &&
	sed -n "$(( $(wc -l <s1/log.before) + 1 )),\$p" s1/log >log.new &&
	! grep -q "cannot take a rollout slot" log.new &&
	! grep -q "cannot read the fleet" log.new &&
	grep -q "fleet state for the rollout read at revision" log.new &&
	test "$(requests /v3/kv/range "$from" "$to")" = 0 &&
	test "$(lease_of s1)" = "$(cat lease.before)" &&
	etcdctl_ del /rollout/policy
'

test_expect_success 'etcd stopped for 5 s (past the request timeout, inside the TTL) during a run: the lease is kept, the run recorded once' '
	echo 3 >s1/config.sleep &&
	etcdctl_put /current_version v3 &&
	wait_for "grep -q \"config v3\" s1/config.count" 20 &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	sleep 5 &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	wait_for "node_at s1 v3" 40 &&
	test "$(lease_of s1)" = "$(cat lease.before)" &&
	! grep -q "is gone" s1/log &&
	test "$(grep -c "config v3" s1/config.count)" = 1 &&
	status_is s1 puppet success
'

test_expect_success 'etcd stopped as the run ends: its record waits for etcd, sent once, and nothing is read again' '
	rm -f s1/config.sleep &&
	echo 2 >s1/validate.sleep &&
	etcdctl_put /current_version v4 &&
	wait_for "grep -q \"validate v4\" s1/validate.count" 20 &&
	from=$(now) &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	sleep 5 &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	wait_for "node_at s1 v4" 40 &&
	status_is s1 puppet success &&
	! grep -q "cannot record the run at .v4." s1/log &&
	test "$(requests /v3/kv/txn "$from")" = 1 &&
	test "$(requests /v3/kv/range "$from")" = 0 &&
	test "$(lease_of s1)" = "$(cat lease.before)"
'

test_expect_success 'the reply of the run'"'"'s end lost: read back, not sent again, written once' '
	rv=$(key_version /running_version/s1) &&
	echo 2 >s1/validate.sleep &&
	etcdctl_put /current_version v5 &&
	wait_for "grep -q \"validate v5\" s1/validate.count" 20 &&
	from=$(now) &&
	: >lose &&
	wait_for "grep -q \"cannot write the run.s success\" s1/log" 20 &&
	rm -f lose &&
	wait_for "grep -q \"the run.s success written at revision .* (read back\" s1/log" 30 &&
	wait_for "node_at s1 v5" 40 &&
	status_is s1 puppet success &&
	grep -q "lost a reply" proxy.log &&
	test "$(key_version /status/puppet/success/s1)" = 1 &&
	test "$(key_version /running_version/s1)" = $((rv + 1)) &&
	test "$(grep -c "validate v5" s1/validate.count)" = 1 &&
	# One send by the node.  When the proxy closes a reused connection
	# with no reply, libcurl itself replays the request on the next pooled
	# connection (each send is settled, so nothing is written twice): all
	# the txns reached etcd within a second of the first, none after the
	# node'"'"'s backoff, and the answer came from a read.
	awk -v a="$from" '"'"'$2 == "/v3/kv/txn" && $1 >= a { print $1 }'"'"' proxy.log >txns &&
	test -s txns &&
	awk "NR == 1 { t = \$1 } \$1 - t >= 1 { bad = 1 } END { exit bad }" txns &&
	test "$(requests /v3/kv/range "$from")" -ge 1 &&
	! grep -q "sending it again" s1/log
'

test_expect_success 'the run'"'"'s end never reached etcd: found not applied, sent again once, written once' '
	rv=$(key_version /running_version/s1) &&
	mark=$(($(wc -l <s1/log) + 1)) &&
	etcdctl_put /current_version v6 &&
	wait_for "grep -q \"validate v6\" s1/validate.count" 20 &&
	: >drop &&
	wait_for "tail -n +$mark s1/log | grep -q \"cannot write the run.s success\"" 20 &&
	rm -f drop &&
	from=$(now) &&
	wait_for "grep -q \"the run.s success was not applied: sending it again\" s1/log" 30 &&
	wait_for "node_at s1 v6" 40 &&
	status_is s1 puppet success &&
	grep -q "dropped a request" proxy.log &&
	test "$(key_version /running_version/s1)" = $((rv + 1)) &&
	test "$(requests /v3/kv/txn "$from")" = 1 &&
	test "$(grep -c "validate v6" s1/validate.count)" = 1
'

test_expect_success 'etcd restarted: the keepalive stream is opened again, the lease kept' '
	mark=$(($(wc -l <s1/log) + 1)) &&
	cut=$(now) &&
	restart_etcd &&
	back=$(now) &&
	sleep 8 &&
	# the new stream may open before restart_etcd returns: count from the cut
	test "$(requests /v3/lease/keepalive "$cut")" -ge 1 &&
	test "$(requests renewal "$back")" -ge 2 &&
	test "$(lease_of s1)" = "$(cat lease.before)" &&
	! tail -n +$mark s1/log | grep -q "is gone"
'

test_expect_success 'etcd stopped past the TTL: the lease is gone, and every leased key is back in one txn' '
	rm -f s1/validate.sleep &&
	test -n "$(etcdctl_get /running_version/s1)" &&
	test -n "$(etcdctl_get /available_services/common/s1)" &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	sleep 12 &&
	from=$(now) &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	wait_for "grep -q \"registered again\" s1/log" 30 &&
	sleep 1 &&
	test "$(requests /v3/lease/grant "$from")" = 1 &&
	test "$(requests /v3/kv/txn "$from")" = 1 &&
	test "$(requests /v3/kv/range "$from")" = 0 &&
	test "$(lease_of s1)" != "$(cat lease.before)" &&
	lease=$(etcdctl_lease_of /alive/s1) &&
	test "$(etcdctl_lease_of /running_version/s1)" = "$lease" &&
	test "$(etcdctl_lease_of /available_services/common/s1)" = "$lease" &&
	etcdctl_get /alive/s1 | grep -q "\"version\":\"v6\""
'

# reload_ms  — how long s1 takes to answer a SIGHUP (its "configuration
# reloaded" line), in ms: a loop held by a blocking request answers late.
reload_ms () {
	rl_before=$(grep -c "configuration reloaded" s1/log)
	rl_from=$(now_ms)
	kill -HUP "$(node_pid s1)"
	while test "$(grep -c "configuration reloaded" s1/log)" -le "$rl_before" &&
		test $(( $(now_ms) - rl_from )) -lt 5000; do
		sleep 0.02
	done
	echo $(( $(now_ms) - rl_from ))
}

test_expect_success 'etcd 2.5 s behind as a failure crosses the budget: the loop keeps answering, the halt and its revert written once' '
	lease=$(lease_of s1) &&
	mark=$(($(wc -l <s1/log) + 1)) &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"max_failures\":0,\"auto_revert\":true}" &&
	echo 1 >s1/config.exit &&
	echo 2 >s1/config.sleep &&
	orchestrate --etcd "$ETCD_URL" trigger_update v7 &&
	wait_for "grep -q \"config v7\" s1/config.count" 20 &&
	# every request of the run'"'"'s end, the halt'"'"'s read and its write
	# now takes 2.5 s, past the request timeout (1 s): a blocking one would
	# hold the loop and give up
	echo 2.5 >delay &&
	from=$(now_ms) &&
	: >reloads &&
	while ! etcdctl_exists /rollout/halted && test $(( $(now_ms) - from )) -lt 25000; do
		reload_ms >>reloads && sleep 0.5 || exit 1
	done &&
	rm -f delay &&
	wait_for "etcdctl_exists /rollout/halted" 20 &&
	wait_for "test \"\$(etcdctl_get /current_version)\" = v6" 10 &&
	sleep 2 &&
	tail -n +$mark s1/log >log.new &&
	echo "SIGHUPs answered in (ms): $(tr "\n" " " <reloads)" >measured.halt &&
	test "$(wc -l <reloads)" -ge 5 &&
	awk "\$1 >= 500 { bad = 1 } END { exit bad }" reloads &&
	! grep -q "cannot halt" log.new &&
	test "$(grep -c "halted the rollout of v7: 1 host failed, more than max_failures 0; reverted to v6" log.new)" = 1 &&
	test "$(key_version /rollout/halted)" = 1 &&
	test "$(field_of /rollout/halted reverted_to)" = v6 &&
	test "$(etcdctl_get /previous_version)" = v7 &&
	test "$(grep -c "config v7" s1/config.count)" = 1 &&
	test "$(lease_of s1)" = "$lease"
'
test -f measured.halt && say_comment <measured.halt

stop_all_nodes
test_done
