#!/bin/sh
#
# The hook runner (orchestrated(8) "HOOK RUNNER"): a daemon with hooks.runner
# (or --hook-runner) does not start its hooks: orchestrate-hook-runner does,
# here with --listen instead of systemd's socket, one child per connection as
# systemd's Accept=yes.  The hooks run in the runner's process tree with the
# runner's PATH and only ORCHESTRATE_* from the daemon; their output, exit
# status, timeout and the daemon's SIGTERM work as when the daemon runs them
# itself; the daemon going away kills the hook; and a request naming no known
# hook or carrying another variable is refused without running anything.

test_description='orchestrate-hook-runner: hooks outside the daemon, output, status, timeout, SIGTERM, refusals'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
test -x "$REPO_ROOT/bin/orchestrate-hook-runner" ||
	skip_all "orchestrate-hook-runner is not built (run make)"
start_etcd
etcdctl_put /current_version v1

# use_runner NAME  — hooks.runner in NAME's config.
use_runner () {
	sed -i "s|^hooks:\$|hooks:\n  runner: $TRASH/$1/hook.sock|" "$TRASH/$1/orchestrate.yaml" &&
	grep -q "^  runner: $TRASH/$1/hook.sock\$" "$TRASH/$1/orchestrate.yaml"
}

# trace_hooks NAME  — the config and validate hooks also write their parent and
# grandparent pids to NAME/HOOK.tree (after the shebang line).
trace_hooks () {
	for h in config validate; do
		sed -i "2a echo \"\$PPID \$(awk '{ print \$4 }' /proc/\$PPID/stat)\" >\"$TRASH/$1/$h.tree\"" \
			"$TRASH/$1/hooks/$h" || return 1
	done
}

# detail_of NODE TYPE STATE  — the detail of a status (to detail.NODE).
detail_of () {
	etcdctl_get "/status/$2/$3/$1" | python3 -c '
import json, sys
sys.stdout.write(json.load(sys.stdin)["detail"])' >"detail.$1"
}

# alive PID  — a living, not zombie, process.
alive () {
	test -r "/proc/$1/stat" && ! awk '{ exit $3 != "Z" }' "/proc/$1/stat"
}

test_expect_success 'config and validate run in the runner, output and status as before' '
	node_setup r1 &&
	use_runner r1 &&
	trace_hooks r1 &&
	start_runner r1 &&
	start_node r1 &&
	wait_for "node_at r1 v1" 15 &&
	runner=$(cat r1/runner.pid) && daemon=$(node_pid r1) &&
	read parent grand <r1/config.tree &&
	test "$grand" = "$runner" && test "$parent" != "$daemon" &&
	read parent grand <r1/validate.tree &&
	test "$grand" = "$runner" &&
	grep -q "config hook on r1 for v1" r1/log &&
	grep -q "hook .config. started by the hook runner" r1/log &&
	grep -q "request from pid $daemon uid $(id -u): hook .config." r1/runner.log &&
	grep -qx "PATH=/usr/sbin:/usr/bin:/sbin:/bin" r1/hook.env &&
	grep -qx "ORCHESTRATE_HOST=r1" r1/hook.env &&
	! grep -v "^ORCHESTRATE_\|^PATH=\|^PWD=\|^SHLVL=\|^_=" r1/hook.env
'

test_expect_success 'a failing hook: its exit code and output reach the status' '
	echo 4 >r1/config.exit &&
	etcdctl_put /current_version v2 &&
	wait_for "status_is r1 puppet failed" 15 &&
	detail_of r1 puppet failed &&
	cat detail.r1 &&
	grep -q "exited with status 4" detail.r1 &&
	grep -q "config hook on r1 for v2" detail.r1 &&
	grep -q "config failed on purpose with 4" detail.r1 &&
	test "$(etcdctl_json_field /status/puppet/failed/r1 exit_code)" = 4 &&
	test "$(cat r1/current_version)" = v1
'

test_expect_success 'a request for no known hook, or with PATH or LD_PRELOAD, is refused' '
	cat >req.py <<-\EOF &&
	import socket, struct, sys
	s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	s.connect(sys.argv[1])
	fields = [b"orchestrate-hook 1", sys.argv[2].encode()] + [a.encode() for a in sys.argv[3:]]
	s.sendall(b"".join(f + b"\0" for f in fields) + b"\0")
	data = b""
	while True:
	    chunk = s.recv(4096)
	    if not chunk:
	        break
	    data += chunk
	t, n = data[0:1], struct.unpack(">I", data[1:5])[0]
	print(t.decode(), data[5:5 + n].decode())
	EOF
	v=ORCHESTRATE_VERSION=refused &&
	python3 req.py r1/hook.sock deploy $v >out.unknown &&
	python3 req.py r1/hook.sock /bin/sh $v >out.path &&
	python3 req.py r1/hook.sock config $v PATH=/tmp >out.PATH &&
	python3 req.py r1/hook.sock config LD_PRELOAD=/tmp/x.so $v >out.ld &&
	cat out.unknown out.path out.PATH out.ld &&
	grep -qx "E 1 unknown hook .deploy." out.unknown &&
	grep -qx "E 1 unknown hook ./bin/sh." out.path &&
	grep -qx "E 1 environment variable .PATH. refused" out.PATH &&
	grep -qx "E 1 environment variable .LD_PRELOAD. refused" out.ld &&
	sleep 1 &&
	! grep -q refused r1/config.count &&
	grep -q "refused: environment variable .LD_PRELOAD. refused" r1/runner.log
'

test_expect_success 'the same request with ORCHESTRATE_* only runs the configured hook' '
	python3 req.py r1/hook.sock validate ORCHESTRATE_HOST=r1 ORCHESTRATE_VERSION=v9 >out.ok &&
	grep -q "^S [0-9][0-9]*$" out.ok &&
	wait_for "grep -q \"validate v9\" r1/validate.count" 5 &&
	stop_node r1 && test "$(node_exit r1)" = 0
'

test_expect_success 'a hook past the daemon timeout is killed through the runner' '
	HOOK_TIMEOUT=2 node_setup r2 &&
	use_runner r2 &&
	start_runner r2 &&
	echo 60 >r2/config.sleep &&
	start_node r2 &&
	wait_for "test -s r2/config.pid" 10 &&
	pid=$(cat r2/config.pid) &&
	wait_for "status_is r2 puppet failed" 15 &&
	detail_of r2 puppet failed &&
	grep -q "timed out after 2 s" detail.r2 &&
	wait_for "! alive $pid" 5 &&
	stop_node r2
'

test_expect_success 'the daemon SIGTERMed during a hook: the hook is killed, the run interrupted' '
	node_setup r3 &&
	start_runner r3 &&
	echo 60 >r3/config.sleep &&
	start_node r3 --hook-runner "$TRASH/r3/hook.sock" &&
	wait_for "test -s r3/config.pid" 10 &&
	pid=$(cat r3/config.pid) &&
	alive $pid &&
	stop_node r3 &&
	test "$(node_exit r3)" = 0 &&
	! alive $pid &&
	grep -q "SIGTERM from the daemon" r3/runner.log &&
	etcdctl_get /status/puppet/failed/r3 | grep -q interrupted
'

# (not NODE/exit: start_node's wrapper writes no exit status for a daemon
# killed by a signal)
test_expect_success 'the daemon killed with SIGKILL: the runner stops the hook' '
	rm -f r3/config.pid &&
	start_node r3 --hook-runner "$TRASH/r3/hook.sock" &&
	wait_for "test -s r3/config.pid" 10 &&
	pid=$(cat r3/config.pid) &&
	daemon=$(node_pid r3) &&
	kill -9 $daemon &&
	wait_for "! kill -0 $daemon" 10 &&
	wait_for "! alive $pid" 5 &&
	grep -q "the daemon went away, stopping the hook" r3/runner.log
'

test_expect_success 'no runner listening: the run fails and says why' '
	node_setup r4 &&
	start_node r4 --hook-runner "$TRASH/r4/none.sock" &&
	wait_for "status_is r4 puppet failed" 15 &&
	detail_of r4 puppet failed &&
	grep -q "cannot run config hook" detail.r4 &&
	test ! -e r4/config.count &&
	stop_node r4
'

# The systemd way (sd_listen_fds, one process per connection) without
# systemd: systemd-socket-activate --accept does what the socket unit does.
if command -v systemd-socket-activate >/dev/null 2>&1; then
	have_activate=yes
fi
if test -n "${have_activate:-}"; then
test_expect_success 'socket-activated (sd_listen_fds): a version applied through it' '
	node_setup r5 &&
	trace_hooks r5 &&
	systemd-socket-activate --accept -l "$TRASH/r5/hook.sock" \
		"$REPO_ROOT/bin/orchestrate-hook-runner" --config "$TRASH/r5/orchestrate.yaml" \
		>>r5/runner.log 2>&1 &
	activate=$! &&
	test_register_pid $activate &&
	wait_for "test -S r5/hook.sock" 5 &&
	start_node r5 --hook-runner "$TRASH/r5/hook.sock" &&
	wait_for "node_at r5 v2" 15 &&
	read parent grand <r5/config.tree &&
	test "$grand" = "$activate" &&
	grep -q "request from pid $(node_pid r5)" r5/runner.log &&
	stop_node r5 && test "$(node_exit r5)" = 0
'
fi

test_expect_success 'the runner started by hand, without a socket: a usage error' '
	test_expect_code 64 orchestrate-hook-runner 2>err &&
	grep -q "expected one connection from orchestrate-hook.socket" err
'

stop_all_nodes
test_done
