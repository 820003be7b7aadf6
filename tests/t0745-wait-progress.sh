#!/bin/bash
#
# issue 9, point 7: on a terminal, the progress line of verify_hosts --wait
# and check_single_version --wait counts the hosts failed at the version
# (status/puppet/failed or status/validation/failed saying it) and those
# waiting for it (status/puppet/pending saying it), among the hosts the
# command waits for, and says when the rollout of the version is halted; it
# follows the watch live, and a script (no terminal) gets none of it.

test_description='wait progress: failed, waiting, halted'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
command -v script >/dev/null || skip_all "no script(1)"
start_etcd

# state HOST TYPE STATE VERSION [MORE JSON]  — a status key as a node writes it
state () {
	etcdctl_put "/status/$2/$3/$1" "{\"time\":1,\"version\":\"$4\",\"exit_code\":1${5:+,$5}}"
}

# lines NAME  — NAME.out (a terminal's output) as one line per redraw, in NAME.lines
lines () {
	tr '\r' '\n' <"$1.out" | sed -e 's/\x1b\[K//g' -e '/^$/d' >"$1.lines"
}

# on_tty NAME ARGS...  — orchestrate ARGS on a terminal (script(1)), 200
# columns wide; its exit code, its output in NAME.out and NAME.lines.  Its
# stdin is a FIFO opened read-write, which never ends: script(1) of
# util-linux kills the session a few seconds after its stdin ends, so
# </dev/null would cut a longer wait short.
on_tty () {
	name_=$1
	shift
	rc_=0
	test -p hold || mkfifo hold
	script -qec "stty cols 200; orchestrate --config $ORCH_CONFIG $*" /dev/null \
		>"$name_.out" <>hold || rc_=$?
	lines "$name_"
	cat "$name_.lines"
	return $rc_
}

halted='{"version":"v3","trigger":5,"time":1,"host":"n2","reason":"2 of 6 hosts failed","failed":2}'
set6="v3 n1 n2 n3 n4 n5 n6"

test_expect_success 'setup: hosts at, failed at, waiting for v3 and for other versions' '
	etcdctl_put /current_version v2 &&
	running_put n1 v3 &&
	running_put n2 v2 && state n2 puppet failed v3 "\"attempts\":2" &&
	running_put n3 v2 && state n3 validation failed v3 &&
	state n3 puppet pending v3 "\"wait\":\"slot\"" &&
	running_put n4 v2 && state n4 puppet pending v3 "\"wait\":\"slot\"" &&
	running_put n5 v2 && state n5 puppet failed v2 && state n5 validation failed v1 &&
	running_put n6 v2 && state n6 puppet pending v2 "\"wait\":\"group\"" &&
	running_put x1 v2 && state x1 puppet failed v3 &&
	state y1 puppet failed v3 && state y1 validation failed v3 &&
	etcdctl_put /rollout/halted "$halted"
'

test_expect_success 'verify_hosts --wait: the named hosts failed and waiting at v3, the halt' '
	test_expect_code 1 on_tty vh verify_hosts $set6 --wait 1 &&
	grep -qx "1/6 hosts at v3, 2 failed, 1 waiting, halted: 2 of 6 hosts failed" vh.lines &&
	grep -qx "orchestrate: timed out after 1 s: 5 hosts missing" vh.lines
'

test_expect_success 'check_single_version --wait: every host of running_version/' '
	test_expect_code 1 on_tty cs check_single_version v3 --wait 1 &&
	grep -qx "1/7 hosts at v3, 3 failed, 1 waiting, halted: 2 of 6 hosts failed" cs.lines &&
	grep -q "timed out after 1 s: 1 host at v3, 6 hosts at other versions" cs.lines
'

test_expect_success 'in a pipe nothing is drawn and the states are not read' '
	test_expect_code 1 orch -v verify_hosts $set6 --wait 1 >out 2>err &&
	cat err &&
	grep -q "1/6 hosts at v3\$" err &&
	! grep -q "failed,\|waiting\|halted" err &&
	! grep -q "$(printf "\r")" err
'

test_expect_success 'without --wait the line has no counts either' '
	test_expect_code 1 on_tty nw verify_hosts $set6 &&
	! grep -q "failed,\|halted" nw.lines
'

test_expect_success 'a halt left from an earlier trigger of v3 is not shown' '
	etcdctl_put /current_version v3 &&
	test_expect_code 1 on_tty st verify_hosts $set6 --wait 1 &&
	grep -qx "1/6 hosts at v3, 2 failed, 1 waiting" st.lines &&
	trigger=$(etcdctl_ get -w json /current_version |
		python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])") &&
	etcdctl_put /rollout/halted "{\"version\":\"v3\",\"trigger\":$trigger,\"reason\":\"budget\",\"reverted_to\":\"v2\"}" &&
	test_expect_code 1 on_tty st2 verify_hosts $set6 --wait 1 &&
	grep -qx "1/6 hosts at v3, 2 failed, 1 waiting, halted: budget, reverted to v2" st2.lines
'

test_expect_success 'live: the counts follow the watch, and the wait ends 0 at v3' '
	( rc=0; on_tty live verify_hosts $set6 --wait 60 >/dev/null || rc=$?; echo $rc >live.rc ) &
	test_register_pid $! &&
	wait_for "lines live && grep -qx \"1/6 hosts at v3, 2 failed, 1 waiting, halted: budget, reverted to v2\" live.lines" 20 &&
	etcdctl_del /status/puppet/failed/n2 && running_put n2 v3 &&
	wait_for "lines live && grep -qx \"2/6 hosts at v3, 1 failed, 1 waiting, halted: budget, reverted to v2\" live.lines" 20 &&
	etcdctl_del /status/puppet/pending/n4 && state n4 puppet running v3 &&
	wait_for "lines live && grep -qx \"2/6 hosts at v3, 1 failed, 0 waiting, halted: budget, reverted to v2\" live.lines" 20 &&
	etcdctl_del /rollout/halted &&
	wait_for "lines live && grep -qx \"2/6 hosts at v3, 1 failed, 0 waiting\" live.lines" 20 &&
	state n6 puppet pending v3 "\"wait\":\"canary\"" &&
	wait_for "lines live && grep -qx \"2/6 hosts at v3, 1 failed, 1 waiting\" live.lines" 20 &&
	for h in n3 n4 n5 n6; do running_put $h v3; done &&
	wait_for "test -s live.rc" 20 &&
	lines live && cat live.lines &&
	test "$(cat live.rc)" = 0 &&
	! grep -q "timed out" live.lines
'

# Each stop of etcd is followed by its CONT whatever happens in between: the
# waits run in the background (not at the end of an && list, which would put
# the whole list there), and nothing but a sleep stands between STOP and CONT.
test_expect_success 'a wait waits through an etcd stopped past the request timeout' '
	cp "$ETCD_STATE/etcd/pid" etcd.pid &&
	kill -s STOP "$(cat etcd.pid)" || exit 1
	( rc=0; on_tty stopped --timeout 1 verify_hosts v5 n1 --wait 40 >/dev/null || rc=$?
	  echo $rc >stopped.rc ) &
	test_register_pid $!
	sleep 4
	kill -s CONT "$(cat etcd.pid)" &&
	test ! -s stopped.rc &&
	running_put n1 v5 &&
	wait_for "test -s stopped.rc" 30 &&
	lines stopped && cat stopped.lines >&4 &&
	test "$(cat stopped.rc)" = 0 &&
	grep -q "^0/1 hosts at v5; etcd: .*Timeout was reached, retrying$" stopped.lines &&
	grep -q "^1/1 hosts at v5" stopped.lines || exit 1
	# in a pipe, nothing but the outcome: the same wait through a stop, silent
	kill -s STOP "$(cat etcd.pid)" || exit 1
	( rc=0; orchestrate --timeout 1 verify_hosts v6 n1 --wait 40 >piped.out 2>piped.err ||
		rc=$?; echo $rc >piped.rc ) &
	test_register_pid $!
	sleep 3
	kill -s CONT "$(cat etcd.pid)" &&
	test ! -s piped.rc &&
	running_put n1 v6 &&
	wait_for "test -s piped.rc" 30 &&
	test "$(cat piped.rc)" = 0 &&
	test_must_be_empty piped.err
'

test_expect_success 'a user who may read running_version/ alone: the line without the counts' '
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&
	etcdctl_ user add ci:cipw >/dev/null &&
	etcdctl_ role add ci >/dev/null &&
	etcdctl_ role grant-permission ci --prefix=true read /running_version/ >/dev/null &&
	etcdctl_ user grant-role ci ci >/dev/null &&
	etcdctl_ auth enable >/dev/null &&
	ORCHESTRATE_PASSWORD=cipw test_expect_code 1 on_tty ci --user ci verify_hosts v4 n1 n2 --wait 1 &&
	grep -qx "0/2 hosts at v4" ci.lines &&
	grep -qx "orchestrate: timed out after 1 s: 2 hosts missing" ci.lines
'

test_done
