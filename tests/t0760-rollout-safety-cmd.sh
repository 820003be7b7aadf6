#!/bin/bash
#
# The command-line side of rollouts that stop themselves: the safety keys of
# rollout_policy set (round trip, refusals that write nothing), promote (the
# record names the current trigger), rollout_policy resume (deletes the halt
# and the failure records), and what status and get_failures show of seeded
# records: a halt, a revert, canary progress, a retrying host's attempts and
# a pending host's wait reason.  The records are seeded with etcdctl, as a
# node would leave them.

test_description='orchestrate rollout safety: policy flags, promote, resume, status'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

policy () {
	etcdctl_get /rollout/policy
}

# mod_revision KEY  — the key's mod revision (0 when absent).
mod_revision () {
	etcdctl_ get -w json -- "$1" |
		python3 -c 'import json,sys; k=json.load(sys.stdin).get("kvs", []); print(k[0]["mod_revision"] if k else 0)'
}

# json_eq FILE PYTHON-EXPR  — the expression holds of d, FILE's JSON.
json_eq () {
	python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}

# host NAME VERSION PUPPET VALIDATION [PUPPET-EXTRA-JSON]  — a host as a daemon
# leaves it; the extra members go into the puppet state's value.
host () {
	now=$(date +%s)
	etcdctl_put "/alive/$1" "{\"time\":$now,\"version\":\"$2\",\"pid\":1}" &&
	etcdctl_put "/status/provisioned/success/$1" "{\"time\":$now}" &&
	etcdctl_put "/status/puppet/$3/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":0,\"detail\":\"${6:-}\"${5:+,$5}}" &&
	etcdctl_put "/status/validation/$4/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":0}" &&
	etcdctl_put "/running_version/$1" "{\"version\":\"$2\",\"time\":$now}"
}

# --- rollout_policy set: the safety keys --------------------------------------------

test_expect_success 'every safety flag round-trips: stored JSON, get, --json' '
	orch rollout_policy set --max-parallel 2 --max-failures 3 --max-fail-percent 12.5 \
		--healthy-deadline 600 --progress-deadline 1800 --min-healthy-time 60 \
		--auto-revert --canary 2 --auto-promote >out 2>err &&
	test_must_be_empty out && test_must_be_empty err &&
	policy >stored &&
	json_eq stored "d == {\"max_parallel\": 2, \"max_failures\": 3, \"max_fail_percent\": 12.5, \"healthy_deadline\": 600, \"progress_deadline\": 1800, \"min_healthy_time\": 60, \"auto_revert\": True, \"canary\": 2, \"auto_promote\": True}" &&
	orch rollout_policy get >out &&
	cat >expect <<-\EOF &&
	max_parallel: 2
	max_failures: 3
	max_fail_percent: 12.5
	healthy_deadline: 600
	progress_deadline: 1800
	min_healthy_time: 60
	auto_revert: yes
	canary: 2
	auto_promote: yes
	EOF
	test_cmp expect out &&
	orch rollout_policy >out2 && test_cmp expect out2 &&
	orch --json rollout_policy get >json && json_ok json &&
	python3 -c "import json; a=json.load(open(\"json\")); b=json.load(open(\"stored\")); exit(a != b)"
'

test_expect_success '--max-failures 0 is a budget of none (the first failure halts)' '
	orch rollout_policy set --max-failures 0 &&
	echo "{\"max_failures\":0}" >expect && policy >actual && test_cmp expect actual &&
	orch rollout_policy >out &&
	printf "max_parallel: unlimited\nmax_failures: 0\n" >expect && test_cmp expect out
'

test_expect_success 'the header of status shows the safety keys' '
	orch rollout_policy set --max-parallel 2 --max-fail-percent 10 --auto-revert &&
	etcdctl_put /current_version v1 &&
	orch status --summary >out &&
	grep -q "^policy: max_parallel 2, max_fail_percent 10, auto_revert\$" out
'

test_expect_success '--canary without a limit is written, with a warning' '
	orch rollout_policy set --canary 2 2>err &&
	echo "{\"canary\":2}" >expect && policy >actual && test_cmp expect actual &&
	test_one_line err && grep -q "without --max-parallel" err
'

for bad in "set --auto-promote" "set --max-parallel 2 --auto-promote" \
	"set --auto-revert" "set --max-parallel 2 --auto-revert" \
	"set --max-failures -1" "set --max-failures x" \
	"set --max-fail-percent 0" "set --max-fail-percent 101" "set --max-fail-percent x" \
	"set --healthy-deadline 0" "set --progress-deadline -5" "set --min-healthy-time 1.5" \
	"set --canary 0" "set --canary -1" \
	"get --canary 2" "resume --max-failures 1" "clear --auto-revert" "--max-failures 2"; do
	test_expect_success "refused with 64 and one line, nothing written: $bad" '
		rev_before=$(mod_revision /rollout/policy) &&
		test_expect_code 64 orch rollout_policy $bad >out 2>err &&
		test_must_be_empty out && test_one_line err &&
		test "$(mod_revision /rollout/policy)" = "$rev_before"
	'
done

test_expect_success 'the refusals say what is wrong' '
	test_expect_code 64 orch rollout_policy set --auto-promote 2>err &&
	grep -q "auto_promote needs canary" err &&
	test_expect_code 64 orch rollout_policy set --auto-revert 2>err &&
	grep -q "auto_revert needs max_failures, max_fail_percent or progress_deadline" err &&
	test_expect_code 64 orch rollout_policy set --max-fail-percent 101 2>err &&
	grep -q "invalid --max-fail-percent" err
'

# --- promote ------------------------------------------------------------------------

test_expect_success 'promote with no desired version: exit 1, nothing written' '
	etcdctl_del /current_version &&
	test_expect_code 1 orch promote >out 2>err &&
	test_must_be_empty out && test_one_line err && grep -q "no desired version" err &&
	! etcdctl_exists /rollout/promoted
'

test_expect_success 'promote writes rollout/promoted for the current trigger' '
	orch rollout_policy set --max-parallel 1 --canary 2 &&
	orch trigger_update v2 &&
	trigger=$(mod_revision /current_version) &&
	orch promote >out 2>err &&
	echo "promoted the canaries of v2 (0 of 2 done)" >expect && test_cmp expect out &&
	test_must_be_empty err &&
	test "$(etcdctl_json_field /rollout/promoted version)" = v2 &&
	test "$(etcdctl_json_field /rollout/promoted trigger)" = "$trigger" &&
	test "$(etcdctl_json_field /rollout/promoted reason)" = operator
'

test_expect_success 'promote again: says so, writes nothing' '
	rev=$(mod_revision /rollout/promoted) &&
	orch promote >out &&
	echo "the canaries of v2 are promoted already" >expect && test_cmp expect out &&
	test "$(mod_revision /rollout/promoted)" = "$rev"
'

test_expect_success 'a new trigger leaves the old promotion without effect' '
	orch trigger_update v3 &&
	orch status --summary >out &&
	grep -q "^canary: 0/2 done, waiting for the canaries\$" out &&
	orch promote >out &&
	test "$(etcdctl_json_field /rollout/promoted version)" = v3 &&
	test "$(etcdctl_json_field /rollout/promoted trigger)" = "$(mod_revision /current_version)"
'

test_expect_success 'promote with no canary in the policy warns' '
	orch rollout_policy set --max-parallel 1 &&
	orch trigger_update v4 &&
	orch promote >out 2>err &&
	echo "promoted v4" >expect && test_cmp expect out &&
	test_one_line err && grep -q "sets no canary" err
'

test_expect_success 'unreachable etcd: promote exits 69' '
	test_expect_code 69 orch --etcd "$(dead_url)" --timeout 1 promote
'

# --- status and get_failures of seeded records --------------------------------------

test_expect_success 'setup: v42 rolling out over five hosts, a policy with a budget' '
	etcdctl_ del --prefix /rollout/ >/dev/null &&
	orch rollout_policy set --max-parallel 2 --max-failures 1 --canary 3 &&
	orch trigger_update v41 && orch trigger_update v42 &&
	T=$(mod_revision /current_version) && echo "$T" >trigger &&
	first=$(( $(date +%s) - 120 )) && echo "$first" >first &&
	host web1 v41 failed success "\"attempts\":3,\"first_failure\":$first" \
		"Notice: compiling\nError: Could not find class web\nNotice: Applied catalog" &&
	host web2 v41 pending success "\"wait\":\"slot\"" "2 of 2 slots held" &&
	host web3 v41 pending success "\"wait\":\"canary\"" &&
	host web4 v42 success success &&
	host web5 v41 success failed &&
	etcdctl_put /rollout/failed/web1 "{\"version\":\"v42\",\"trigger\":$T,\"time\":$first,\"stage\":\"config\",\"attempts\":3}" &&
	etcdctl_put /rollout/failed/web5 "{\"version\":\"v42\",\"trigger\":$T,\"time\":$first,\"stage\":\"validation\"}" &&
	etcdctl_put /rollout/failed/old "{\"version\":\"v41\",\"trigger\":1,\"time\":1}" &&
	etcdctl_put /rollout/canary/web4 "{\"version\":\"v42\",\"trigger\":$T,\"time\":$first}"
'

test_expect_success 'status: attempts and first failure in DETAIL, the error line kept' '
	COLUMNS=200 orch status >out && cat out &&
	since=$(date -d "@$(cat first)" +%H:%M) &&
	grep "^web1 " out >row &&
	grep -q "attempt 3 since $since: Error: Could not find class web\$" row
'

test_expect_success 'status: the wait reason of pending hosts, with or without detail' '
	grep "^web2 " out | grep -q "wait slot: 2 of 2 slots held\$" &&
	grep "^web3 " out | grep -q "pending .* wait canary\$"
'

test_expect_success 'status: canary progress and failures against the budget' '
	grep -q "^canary: 1/3 done, waiting for the canaries\$" out &&
	grep -q "^failures: 2 failed of budget 1\$" out &&
	! grep -q "^rollout:" out
'

test_expect_success 'status --json: the host extras and the rollout object' '
	orch --json status >json && json_ok json &&
	json_eq json "[h for h in d[\"hosts\"] if h[\"host\"] == \"web1\"][0][\"attempts\"] == 3" &&
	json_eq json "[h for h in d[\"hosts\"] if h[\"host\"] == \"web1\"][0][\"first_failure\"] == $(cat first)" &&
	json_eq json "[h for h in d[\"hosts\"] if h[\"host\"] == \"web2\"][0][\"wait\"] == \"slot\"" &&
	json_eq json "[h for h in d[\"hosts\"] if h[\"host\"] == \"web4\"][0][\"wait\"] is None" &&
	json_eq json "d[\"rollout\"][\"version\"] == \"v42\" and d[\"rollout\"][\"trigger\"] == $(cat trigger)" &&
	json_eq json "d[\"rollout\"][\"failed\"] == 2 and d[\"rollout\"][\"canaries_done\"] == 1" &&
	json_eq json "d[\"rollout\"][\"halted\"] is False and d[\"rollout\"][\"halt\"] is None"
'

test_expect_success 'status HOST: attempts, first failure and the wait' '
	orch status web1 >out &&
	grep -q "^puppet: *failed, .*, attempt 3 since $(date -d "@$(cat first)" +%H:%M)\$" out &&
	orch status web2 >out &&
	grep -q "^waits: *slot\$" out &&
	grep -q "^puppet: *pending, .*, wait slot\$" out &&
	orch --json status web1 >json && json_ok json &&
	json_eq json "[s for s in d[\"states\"] if s[\"type\"] == \"puppet\"][0][\"attempts\"] == 3" &&
	orch --json status web2 >json &&
	json_eq json "d[\"wait\"] == \"slot\""
'

test_expect_success 'get_failures counts the retrying host as failed; no halt yet' '
	test_expect_code 1 orch get_failures --hosts >out 2>err &&
	printf "failed puppet web1\nfailed validation web5\n" >expect && test_cmp expect out &&
	test_must_be_empty err
'

test_expect_success 'a seeded halt: status says HALTED, by whom and when' '
	now=$(date +%s) && echo "$now" >halt_time &&
	etcdctl_put /rollout/halted "{\"version\":\"v42\",\"trigger\":$(cat trigger),\"time\":$now,\"host\":\"web5\",\"reason\":\"2 hosts failed, budget 1\",\"failed\":2}" &&
	orch status --summary >out && cat out &&
	at=$(date -d "@$now" +%H:%M) &&
	grep -q "^rollout: HALTED: 2 hosts failed, budget 1 (by web5 at $at)\$" out
'

test_expect_success 'get_failures reports the halt on stderr and in --json' '
	test_expect_code 1 orch get_failures >out 2>err &&
	test_one_line err &&
	grep -q "rollout of v42 HALTED: 2 hosts failed, budget 1 (by web5 at" err &&
	test_expect_code 1 orch --json get_failures >json 2>/dev/null && json_ok json &&
	json_eq json "d[\"rollout\"][\"halted\"] is True and d[\"rollout\"][\"halt\"][\"reason\"] == \"2 hosts failed, budget 1\"" &&
	json_eq json "d[\"rollout\"][\"halt\"][\"host\"] == \"web5\" and d[\"failed_puppet\"] == [\"web1\"]"
'

test_expect_success 'a halt alone (no failed host) still makes get_failures exit 1' '
	etcdctl_ del --prefix /status/ >/dev/null &&
	test_expect_code 1 orch get_failures >out 2>err &&
	printf "failed puppet: 0\nfailed validation: 0\nunaccounted: 0\n" >expect && test_cmp expect out &&
	grep -q HALTED err
'

test_expect_success 'rollout_policy resume: deletes the halt and every failure record' '
	orch rollout_policy resume >out 2>err &&
	echo "rollout of v42 resumed (was halted: 2 hosts failed, budget 1); 2 failure records cleared" >expect &&
	test_cmp expect out && test_must_be_empty err &&
	! etcdctl_exists /rollout/halted &&
	test "$(etcdctl_count /rollout/failed/)" = 0 &&
	etcdctl_exists /rollout/canary/web4 &&
	orch get_failures 2>err && test_must_be_empty err
'

test_expect_success 'rollout_policy resume again: no halted rollout' '
	orch rollout_policy resume >out &&
	echo "no halted rollout" >expect && test_cmp expect out
'

test_expect_success 'a halt of another trigger has no effect' '
	etcdctl_put /rollout/halted "{\"version\":\"v42\",\"trigger\":1,\"time\":1,\"reason\":\"old\"}" &&
	orch status --summary >out && ! grep -q "^rollout:" out &&
	orch get_failures 2>err && test_must_be_empty err &&
	orch rollout_policy resume >out &&
	echo "no halted rollout of v42; removed the halt record of an earlier rollout" >expect &&
	test_cmp expect out
'

test_expect_success 'a seeded revert: status and get_failures say where it went back to' '
	orch rollout_policy set --max-parallel 2 --max-fail-percent 20 --auto-revert &&
	T=$(mod_revision /current_version) && now=$(date +%s) &&
	etcdctl_put /rollout/halted "{\"version\":\"v42\",\"trigger\":$T,\"time\":$now,\"host\":\"web1\",\"reason\":\"deadline\",\"reverted_to\":\"v41\"}" &&
	etcdctl_put /previous_version v42 &&
	etcdctl_put /current_version v41 &&
	test "$(etcdctl_get /current_version)" = v41 &&
	orch status --summary >out && cat out &&
	grep -q "^rollout: reverted to v41 after v42 halted: deadline (by web1 at $(date -d "@$now" +%H:%M))\$" out &&
	grep -q "^failures: 0 failed of budget 1 (max_fail_percent 20 of 5 alive)\$" out &&
	orch get_failures >out 2>err &&
	test_one_line err && grep -q "reverted to v41 after v42 halted: deadline" err &&
	orch --json status >json &&
	json_eq json "d[\"rollout\"][\"reverted\"] is True and d[\"rollout\"][\"halt\"][\"reverted_to\"] == \"v41\""
'

test_expect_success 'the canary line: done and waiting for promote, then promoted' '
	orch rollout_policy set --max-parallel 1 --canary 2 &&
	orch trigger_update v43 && T=$(mod_revision /current_version) &&
	etcdctl_put /rollout/canary/web1 "{\"version\":\"v43\",\"trigger\":$T,\"time\":1}" &&
	etcdctl_put /rollout/canary/web2 "{\"version\":\"v43\",\"trigger\":$T,\"time\":1}" &&
	orch status --summary >out &&
	grep -q "^canary: 2/2 done, waiting for promote\$" out &&
	orch promote >out &&
	echo "promoted the canaries of v43 (2 of 2 done)" >expect && test_cmp expect out &&
	orch status --summary >out &&
	grep -q "^canary: 2/2 done, promoted\$" out
'

test_expect_success 'unreachable etcd: rollout_policy resume exits 69' '
	test_expect_code 69 orch --etcd "$(dead_url)" --timeout 1 rollout_policy resume
'

test_done
