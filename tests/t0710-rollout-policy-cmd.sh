#!/bin/bash
#
# rollout_policy: show, set, clear, --json, and validation that refuses bad
# input with exit 64 before anything is written (checked with etcdctl).

test_description='orchestrate rollout_policy'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

policy () {
	etcdctl_get /rollout/policy
}

test_expect_success 'no policy: "no policy", JSON null, exit 0' '
	orch rollout_policy >out 2>err &&
	echo "no policy" >expect && test_cmp expect out && test_must_be_empty err &&
	orch --json rollout_policy >out &&
	echo null >expect && test_cmp expect out
'

test_expect_success 'set --max-parallel writes JSON built by cJSON' '
	orch rollout_policy set --max-parallel 5 &&
	echo "{\"max_parallel\":5}" >expect && policy >actual && test_cmp expect actual &&
	orch rollout_policy >out &&
	echo "max_parallel: 5" >expect && test_cmp expect out
'

test_expect_success 'set --max-percent with --groups; show and --json' '
	orch rollout_policy set --max-percent 30 --groups dc1,dc2,dc-3 &&
	policy >actual &&
	echo "{\"max_percent\":30,\"groups\":[\"dc1\",\"dc2\",\"dc-3\"]}" >expect &&
	test_cmp expect actual &&
	orch rollout_policy >out &&
	printf "max_percent: 30\ngroups: dc1 dc2 dc-3\n" >expect && test_cmp expect out &&
	orch --json rollout_policy >out && json_ok out &&
	python3 -c "import json,sys; d=json.load(open(\"out\")); sys.exit(0 if d == {\"max_percent\": 30, \"groups\": [\"dc1\", \"dc2\", \"dc-3\"]} else 1)"
'

test_expect_success 'set replaces the whole policy (groups alone: no limit)' '
	orch rollout_policy set --groups a &&
	echo "{\"groups\":[\"a\"]}" >expect && policy >actual && test_cmp expect actual &&
	orch rollout_policy >out &&
	printf "max_parallel: unlimited\ngroups: a\n" >expect && test_cmp expect out
'

for bad in "set" \
	"set --max-parallel 0" "set --max-parallel -1" "set --max-parallel x" \
	"set --max-percent 0" "set --max-percent 101" "set --max-percent 5.5" \
	"set --max-parallel 2 --max-percent 20" \
	"set --groups dc1,dc1" "set --groups dc1,,dc2" "set --groups ../x" "set --groups ," \
	"--max-parallel 3" "clear --groups a" "frobnicate" "set extra"; do
	test_expect_success "refused with 64, nothing written: $bad" '
		etcdctl_ get /rollout/policy -w json >before &&
		rev_before=$(python3 -c "import json; print(json.load(open(\"before\"))[\"kvs\"][0][\"mod_revision\"])") &&
		test_expect_code 64 orch rollout_policy $bad >out 2>err &&
		test_must_be_empty out && test_one_line err &&
		etcdctl_ get /rollout/policy -w json >after &&
		rev_after=$(python3 -c "import json; print(json.load(open(\"after\"))[\"kvs\"][0][\"mod_revision\"])") &&
		test "$rev_before" = "$rev_after"
	'
done

test_expect_success 'an invalid stored policy is reported, exit 1' '
	etcdctl_put /rollout/policy "{\"max_parallel\":\"many\"}" &&
	test_expect_code 1 orch rollout_policy >out 2>err &&
	grep -q "invalid policy" err
'

test_expect_success 'clear removes it; clear again is fine' '
	orch rollout_policy clear &&
	test -z "$(policy)" &&
	orch rollout_policy clear &&
	orch rollout_policy >out && echo "no policy" >expect && test_cmp expect out
'

test_expect_success 'unreachable etcd exits 69' '
	test_expect_code 69 orch --etcd "$(dead_url)" --timeout 1 rollout_policy
'

test_done
