#!/bin/sh
test_description='orchestrated: rollouts that stop themselves (failure budget, auto_revert, canary, deadlines, honest states)'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd
NODES="s1 s2 s3 s4 s5"

# all_at VERSION  — every node runs VERSION.
all_at () {
	for n in $NODES; do node_at $n "$1" || return 1; done
}

# hosts_started VERSION  — how many distinct nodes started a config run for VERSION.
hosts_started () {
	awk -v v="$1" '$1 == "config-start" && $3 == v { print $2 }' "$TRASH/runs.log" | sort -u | wc -l
}

# trigger_of  — current_version's mod revision: the rollout's trigger.
trigger_of () {
	etcdctl_ get -w json /current_version |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["mod_revision"])'
}

# field KEY FIELD  — one field of a JSON value (empty when absent).
field () {
	etcdctl_get "$1" | python3 -c '
import json, sys
try: v = json.load(sys.stdin).get(sys.argv[1], "")
except Exception: v = ""
print(str(v).lower() if isinstance(v, bool) else v)' "$2"
}

# pending_wait HOST  — the wait reason of HOST's puppet/pending (empty when none).
pending_wait () {
	field "/status/puppet/pending/$1" wait
}

fail_all () {
	for n in $NODES; do echo "$1" >$n/config.exit; done
}

test_expect_success 'setup: five nodes at v1' '
	for n in $NODES; do node_setup $n; done &&
	etcdctl_put /current_version v1 &&
	for n in $NODES; do start_node $n || exit 1; done &&
	wait_for "all_at v1" 30
'

test_expect_success 'max_failures 1: the second failure halts the rollout, no third host starts' '
	: >"$TRASH/runs.log" &&
	fail_all 1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"max_failures\":1}" &&
	etcdctl_put /current_version v2 &&
	trigger=$(trigger_of) &&
	wait_for "etcdctl_exists /rollout/halted" 30 &&
	test "$(field /rollout/halted version)" = v2 &&
	test "$(field /rollout/halted trigger)" = "$trigger" &&
	test "$(field /rollout/halted failed)" = 2 &&
	field /rollout/halted reason | grep -q "more than max_failures 1" &&
	test "$(etcdctl_count /rollout/failed/)" = 2 &&
	test "$(hosts_started v2)" = 2 &&
	# every node sees it, and none starts a run: not even the failed ones retry
	for n in $NODES; do wait_for "grep -q \"state .* -> halted\" $n/log" 10 || exit 1; done &&
	runs=$(grep -c config-start "$TRASH/runs.log") &&
	sleep 4 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = "$runs" &&
	test "$(hosts_started v2)" = 2 &&
	test "$(current=$(etcdctl_get /current_version); echo $current)" = v2
'

test_expect_success 'halted: waiting hosts say why in puppet/pending, failed hosts stay failed' '
	for n in $NODES; do
		if grep -q "config-start $n v2" "$TRASH/runs.log"; then
			status_is $n puppet failed &&
			test "$(field /status/puppet/failed/$n attempts)" -ge 1 &&
			test -n "$(field /status/puppet/failed/$n first_failure)" || exit 1
		else
			wait_for "test \"\$(pending_wait $n)\" = halt" 10 &&
			field /status/puppet/pending/$n detail | grep -q "halted" || exit 1
		fi
	done &&
	test_expect_code 1 orchestrate --etcd "$ETCD_URL" get_failures
'

test_expect_success 'clearing the halt and the budget lets the fixed rollout finish; records go with success' '
	fail_all 0 &&
	# the budget first: a failed host seeing its record without a halt
	# would halt again (orchestrate rollout_policy resume does both in one txn)
	etcdctl_ del --prefix /rollout/failed/ >/dev/null &&
	etcdctl_ del /rollout/halted >/dev/null &&
	wait_for "all_at v2" 40 &&
	test -z "$(etcdctl_keys /rollout/failed/)" &&
	test -z "$(etcdctl_keys /rollout/holders/)" &&
	orchestrate --etcd "$ETCD_URL" get_failures
'

test_expect_success 'max_fail_percent with auto_revert: halts and reverts exactly once' '
	: >"$TRASH/runs.log" &&
	fail_all 1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"max_fail_percent\":40,\"auto_revert\":true}" &&
	before=$(etcdctl_ get -w json /current_version |
		python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"version\"])") &&
	orchestrate --etcd "$ETCD_URL" trigger_update v3 &&
	wait_for "test \"\$(etcdctl_get /current_version)\" = v2" 40 &&
	test "$(etcdctl_get /previous_version)" = v3 &&
	test "$(field /rollout/halted version)" = v3 &&
	test "$(field /rollout/halted reverted_to)" = v2 &&
	# 5 alive hosts, 40 %: two failures are within it, the third halts
	test "$(field /rollout/halted failed)" = 3 &&
	field /rollout/halted reason | grep -q "3 of 5 hosts failed" &&
	wait_for "all_at v2" 30 &&
	sleep 2 &&
	after=$(etcdctl_ get -w json /current_version |
		python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"version\"])") &&
	# one trigger and one revert: current_version written exactly twice
	test $((after - before)) = 2 &&
	test "$(cat $(for n in $NODES; do echo $n/log; done) | grep -c "halted the rollout of v3")" = 1 &&
	test "$(etcdctl_get /current_version)" = v2
'

test_expect_success 'canary 1: one host runs, the others wait for promote' '
	: >"$TRASH/runs.log" &&
	fail_all 0 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":3,\"canary\":1}" &&
	etcdctl_put /current_version v4 &&
	wait_for "test \$(etcdctl_count /rollout/canary/) = 1" 30 &&
	canary=$(etcdctl_keys /rollout/canary/ | sed "s|.*/||") &&
	node_at $canary v4 &&
	test "$(field /rollout/canary/$canary trigger)" = "$(trigger_of)" &&
	for n in $NODES; do
		test $n = $canary && continue
		wait_for "test \"\$(pending_wait $n)\" = canary" 10 || exit 1
	done &&
	sleep 3 &&
	test "$(hosts_started v4)" = 1
'

test_expect_success 'promote: the rest run' '
	etcdctl_put /rollout/promoted "{\"version\":\"v4\",\"trigger\":$(trigger_of),\"time\":1,\"reason\":\"test\"}" &&
	wait_for "all_at v4" 40 &&
	test "$(hosts_started v4)" = 5
'

test_expect_success 'a promotion of an earlier trigger does not count' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /rollout/policy "{\"max_parallel\":3,\"canary\":2}" &&
	etcdctl_put /current_version v5 &&
	wait_for "test \$(etcdctl_count /rollout/canary/) -ge 2 && test \"\$(hosts_started v5)\" = 2" 30 &&
	sleep 3 &&
	test "$(hosts_started v5)" = 2
'

# promotes_of VERSION  — how many times rollout/promoted was written for
# VERSION since the current trigger (a watch from its revision, bounded).
promotes_of () {
	timeout 3 etcdctl --endpoints "$ETCD_URL" watch --rev="$(trigger_of)" /rollout/promoted |
		grep -c "\"version\":\"$1\"" || :
}

test_expect_success 'auto_promote: canaries validated with no failure promote by themselves, once' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /rollout/policy "{\"max_parallel\":3,\"canary\":1,\"auto_promote\":true}" &&
	etcdctl_put /current_version v6 &&
	wait_for "all_at v6" 40 &&
	test "$(field /rollout/promoted version)" = v6 &&
	field /rollout/promoted reason | grep -q "^auto (s[1-5])$" &&
	test "$(promotes_of v6)" = 1
'

test_expect_success 'healthy_deadline: a run past it is failed and its hook killed' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /rollout/policy "{\"healthy_deadline\":2}" &&
	echo 60 >s1/config.sleep &&
	start=$(now_ms) &&
	etcdctl_put /current_version v7 &&
	wait_for "status_is s1 puppet failed" 20 &&
	test $(( $(now_ms) - start )) -lt 15000 &&
	field /status/puppet/failed/s1 detail | grep -q "healthy_deadline of 2 s passed" &&
	test "$(field /rollout/failed/s1 stage)" = deadline &&
	pid=$(cat s1/config.pid) &&
	wait_for "! kill -0 $pid" 10 &&
	for n in s2 s3 s4 s5; do wait_for "node_at $n v7" 20 || exit 1; done
'

test_expect_success 'a retrying host stays failed, with its attempts, until a run succeeds' '
	echo 0 >s1/config.sleep &&
	echo 1 >s1/config.exit &&
	etcdctl_del /rollout/policy &&
	wait_for "test \"\$(field /status/puppet/failed/s1 attempts)\" -ge 3" 30 &&
	first=$(field /status/puppet/failed/s1 first_failure) &&
	for i in 1 2 3 4 5 6 7 8 9 10; do
		status_is s1 puppet failed || exit 1
		test_expect_code 1 orchestrate --etcd "$ETCD_URL" get_failures >/dev/null || exit 1
		sleep 0.3
	done &&
	test "$(field /status/puppet/failed/s1 first_failure)" = "$first" &&
	echo 0 >s1/config.exit &&
	wait_for "node_at s1 v7" 20 &&
	! status_is s1 puppet failed &&
	test -z "$(etcdctl_keys /rollout/failed/)"
'

test_expect_success 'wait reasons: slot and pause are published in puppet/pending' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	for n in $NODES; do echo 3 >$n/config.sleep; done &&
	etcdctl_put /current_version v8 &&
	wait_for "test \$(for n in $NODES; do pending_wait \$n; done | grep -c slot) -ge 3" 15 &&
	waiting=$(for n in $NODES; do test "$(pending_wait $n)" = slot && echo $n; done | tail -1) &&
	etcdctl_put /pause/hosts/$waiting "{\"reason\":\"disk swap\",\"time\":1}" &&
	wait_for "test \"\$(pending_wait $waiting)\" = pause" 15 &&
	field /status/puppet/pending/$waiting detail | grep -q "disk swap" &&
	etcdctl_del /pause/hosts/$waiting &&
	for n in $NODES; do echo 0 >$n/config.sleep; done &&
	wait_for "all_at v8" 60
'

test_expect_success 'a host that dies holding a slot counts against the budget' '
	: >"$TRASH/runs.log" &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"max_failures\":0}" &&
	for n in $NODES; do echo 30 >$n/config.sleep; done &&
	etcdctl_put /current_version v8a &&
	wait_for "test \$(grep -c config-start \"$TRASH/runs.log\") -ge 1" 10 &&
	holder=$(awk "/config-start/ { print \$2; exit }" "$TRASH/runs.log") &&
	echo $holder >dead &&
	pgid=$(cat $holder/config.pid) &&
	kill -9 $(node_pid $holder) &&
	/bin/kill -KILL -- -"$pgid" &&
	# its lease expires, its holder goes, the next in the queue looks
	wait_for "etcdctl_exists /rollout/halted && test \"\$(field /rollout/halted version)\" = v8a" 40
'

test_expect_success 'the dead host has a failure record, and no other host started' '
	holder=$(cat dead) &&
	etcdctl_get /rollout/failed/$holder >&4 &&
	test "$(field /rollout/failed/$holder stage)" = died &&
	etcdctl_get /rollout/halted >&4 &&
	field /rollout/halted reason | grep -q "1 host failed, more than max_failures 0" &&
	cat "$TRASH/runs.log" >&4 &&
	test "$(grep -c config-start "$TRASH/runs.log")" = 1
'

test_expect_success 'the dead host restarts; resumed, the rollout finishes' '
	holder=$(cat dead) &&
	for n in $NODES; do echo 0 >$n/config.sleep; done &&
	start_node $holder &&
	etcdctl_ del --prefix /rollout/failed/ >/dev/null &&
	etcdctl_ del /rollout/halted >/dev/null &&
	wait_for "all_at v8a" 60 &&
	grep -q "interrupted" $holder/log
'

test_expect_success 'min_healthy_time: a host keeps its slot and validates again before the next starts' '
	: >"$TRASH/runs.log" &&
	for n in $NODES; do rm -f $n/validate.count; done &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"min_healthy_time\":2}" &&
	etcdctl_put /current_version v9 &&
	wait_for "all_at v9" 60 &&
	no_overlap "$TRASH/runs.log" &&
	for n in $NODES; do test "$(grep -c v9 $n/validate.count)" = 2 || exit 1; done &&
	# each start at least the bake after the one before
	sort -n -k4 "$TRASH/runs.log" | awk "\$1 == \"config-start\" {
		if (prev && \$4 - prev < 2000) { print \"too soon: \" \$0; bad = 1 } prev = \$4 }
		END { exit bad }"
'

test_expect_success 'progress_deadline: no slot freed in time halts the rollout' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1,\"progress_deadline\":3}" &&
	for n in $NODES; do echo 60 >$n/config.sleep; done &&
	etcdctl_put /current_version v10 &&
	wait_for "etcdctl_exists /rollout/halted && test \"\$(field /rollout/halted version)\" = v10" 30 &&
	field /rollout/halted reason | grep -q "progress_deadline"
'

stop_all_nodes

test_expect_success '--once gives up with 69 when etcd cannot be reached' '
	port=$(free_port) &&
	start=$(now_ms) &&
	test_expect_code 69 orchestrated --once --config s1/orchestrate.yaml \
		--etcd "http://127.0.0.1:$port" --timeout 1 \
		--local-version-file s1/current_version 2>once.err &&
	test $(( $(now_ms) - start )) -lt 20000 &&
	grep -q "cannot reach etcd after 3 attempts" once.err
'

test_done
