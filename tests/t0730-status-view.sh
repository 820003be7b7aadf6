#!/bin/bash
#
# status as an operator reads it: failed hosts first, then behind the desired version, 80
# columns with long-ish names, colour only on a terminal and never with
# NO_COLOR, --json totals, and --watch redrawing on a change (a watch).

test_description='orchestrate status: order, width, colour, JSON totals, --watch'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

# host NAME VERSION PUPPET VALIDATION GROUP [DETAIL]  — a host as a daemon leaves it
host () {
	now=$(date +%s)
	etcdctl_put "/alive/$1" "{\"time\":$now,\"version\":\"$2\",\"pid\":1}" &&
	etcdctl_put "/status/provisioned/success/$1" "{\"time\":$now}" &&
	etcdctl_put "/status/puppet/$3/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":0,\"detail\":\"${6:-}\"}" &&
	etcdctl_put "/status/validation/$4/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":0}" &&
	etcdctl_put "/running_version/$1" "{\"version\":\"$2\",\"time\":$now}" &&
	etcdctl_put "/groups/$5/$1" ""
}

test_expect_success 'setup: six hosts with long-ish names, two behind' '
	etcdctl_put /current_version 2024.06.02 &&
	etcdctl_put /previous_version 2024.06.01 &&
	host aaa-frontend-01.dc1.corp 2024.06.02 success success dc-1 &&
	host bbb-frontend-02.dc1.corp 2024.06.02 success success dc-1 &&
	host zzz-database-01.dc2.corp 2024.06.01 failed success dc-2 \
		"Error: Could not apply catalog: a very long message that goes on and on past any terminal" &&
	host mmm-cache-01.dc2.corp 2024.06.02 success success dc-2 &&
	host yyy-worker-09.dc3.corp 2024.06.01 running running dc-3 &&
	host ccc-worker-10.dc3.corp 2024.06.02 success success dc-3 &&
	etcdctl_put /status/provisioned/success/gone-host-99.dc9.corp "{\"time\":1}"
'

test_expect_success 'failed hosts first, then those behind the desired version, by name' '
	orch status >out &&
	cat out &&
	sed -n "/^HOST /,/^\$/p" out | grep -v "^ " | sed -n "2,4p" | awk "{ print \$1 }" >first &&
	printf "%s\n" zzz-database-01.dc2.corp gone-host-99.dc9.corp yyy-worker-09.dc3.corp >expect &&
	test_cmp expect first &&
	grep -q "^aaa-frontend-01.dc1.corp " out
'

test_expect_success 'every line fits 80 columns; the failure detail is shown' '
	awk "length(\$0) > 80 { print \"too wide: \" length(\$0) \": \" \$0; bad = 1 } END { exit bad }" out &&
	grep -q "^    Error: Could not apply catalog" out &&
	grep -q "^hosts: 7, behind 3, alive 6, unaccounted 1; failed 1, waiting 0" out
'

test_expect_success 'no colour into a pipe' '
	! grep -q "$(printf "\033")" out
'

test_expect_success 'colour on a terminal, none with NO_COLOR' '
	script -qec "orchestrate --config $ORCH_CONFIG status" /dev/null >tty.out </dev/null &&
	grep -q "$(printf "\033")\[" tty.out &&
	NO_COLOR=1 script -qec "orchestrate --config $ORCH_CONFIG status" /dev/null >tty.out </dev/null &&
	grep -q "aaa-frontend-01" tty.out &&
	! grep -q "$(printf "\033")" tty.out
'

test_expect_success '--json totals' '
	orch --json status >out.json &&
	json_ok out.json &&
	python3 - <<-\PY
	import json
	d = json.load(open("out.json"))
	t = d["totals"]
	assert d["current_version"] == "2024.06.02", d["current_version"]
	assert t["hosts"] == 7 and t["behind"] == 3 and t["alive"] == 6, t
	assert t["unaccounted"] == 1, t
	assert t["versions"] == {"2024.06.01": 2, "2024.06.02": 4}, t["versions"]
	assert t["unversioned"] == 1, t
	assert t["puppet"] == {"failed": 1, "running": 1, "success": 4, "none": 1}, t["puppet"]
	assert len(d["hosts"]) == 7
	PY
'

test_expect_success '--watch redraws on a change, from a watch' '
	# orchestrate itself in the background (not the orch function, whose
	# subshell a kill would leave the command running behind)
	orchestrate --config "$ORCH_CONFIG" status --watch >watch.out 2>&1 &
	echo $! >watch.pid &&
	test_register_pid "$(cat watch.pid)" &&
	wait_for "grep -q \"^desired version\" watch.out" 10 &&
	sleep 1 &&
	test "$(grep -c "^desired version" watch.out)" = 1 &&
	etcdctl_put /current_version 2024.06.03 &&
	wait_for "test \$(grep -c \"^desired version\" watch.out) -ge 2" 10 &&
	grep -q "^desired version: 2024.06.03" watch.out &&
	kill "$(cat watch.pid)"
'

test_done
