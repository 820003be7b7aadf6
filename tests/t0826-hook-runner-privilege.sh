#!/bin/sh
#
# Least privilege (orchestrated(8) "HOOK RUNNER", "SECURITY"): the daemon runs
# as a user of its own and reaches root only through the hook runner, which
# serves that user (and root) alone, runs nothing unless its config file and
# the hook are root's alone, sets the hook's environment itself, and bounds
# the hook whatever its client does.  The daemon here runs as the test user
# orchtest (setpriv), the runner as root with --listen, as the socket unit
# would start it.

test_description='hook runner: the daemon as its own user, peer check, root-only files, its own environment, its own bounds'

# The daemon runs as another user here, so its files must be reachable by
# others: a checkout in a private directory (mktemp -d makes 0700) is not.
# Then the trash goes to a directory of its own that others may enter (root's,
# under /tmp: the runner trusts a root-owned sticky directory above it).
own_out_=
if test -z "${TEST_OUTPUT_DIRECTORY:-}" && command -v setpriv >/dev/null 2>&1 &&
	! setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$(cd "$(dirname "$0")" && pwd)"; then
	own_out_=$(mktemp -d /tmp/orchestrate-t0826.XXXXXX) && chmod 755 "$own_out_" &&
		TEST_OUTPUT_DIRECTORY=$own_out_ && export TEST_OUTPUT_DIRECTORY
fi
. "$(dirname "$0")/test-lib.sh"
test -z "$own_out_" || trap 'test_cleanup; rmdir "$own_out_" 2>/dev/null' EXIT
. "$TEST_DIRECTORY/lib-daemon.sh"

test "$(id -u)" = 0 || skip_all "needs root (a test user, setpriv, a root-owned runner)"
command -v setpriv >/dev/null 2>&1 || skip_all "setpriv is not installed"
# The clients run as other users too: a python3 they may run (not a shim in
# root's home).
PY=/usr/bin/python3
test -x "$PY" || skip_all "$PY is not installed"
test_have_orchestrate
test_have_orchestrated
test -x "$REPO_ROOT/bin/orchestrate-hook-runner" ||
	skip_all "orchestrate-hook-runner is not built (run make)"

# The daemon's user, as the package makes "orchestrate" (a system user with
# a group of its own); created once, kept for the next run.
USER_=orchtest
if ! id -u "$USER_" >/dev/null 2>&1; then
	useradd --system --user-group --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin "$USER_" 2>/dev/null ||
		id -u "$USER_" >/dev/null 2>&1 || skip_all "cannot create the test user $USER_"
fi
UID_=$(id -u "$USER_")
GID_=$(id -g "$USER_")
# Another uid that may connect (it has the daemon's group) but is not the
# daemon's user: what the runner itself must refuse.
OTHER=nobody
OTHER_UID=$(id -u "$OTHER")

start_etcd
etcdctl_put /current_version v1

# own_setup NAME  — node_setup, then the daemon's files (state, hiera file,
# local version) moved to NAME/own, the one directory its user owns; the
# config, the hooks and their directories stay root's.  The runner serves
# USER_ and listens on NAME/hook.sock.
own_setup () {
	node_setup "$1" &&
	mkdir -p "$TRASH/$1/own/state" &&
	chown -R "$USER_:$USER_" "$TRASH/$1/own" &&
	sed -i -e "s|^  local_version: .*|  local_version: $TRASH/$1/own/current_version|" \
		-e "s|^  hiera_services: .*|  hiera_services: $TRASH/$1/own/services.yaml|" \
		-e "s|^  state_dir: .*|  state_dir: $TRASH/$1/own/state|" \
		-e "s|^hooks:\$|hooks:\n  runner: $TRASH/$1/hook.sock\n  daemon_user: $USER_|" \
		"$TRASH/$1/orchestrate.yaml" &&
	grep -q "^  daemon_user: $USER_\$" "$TRASH/$1/orchestrate.yaml"
}

# start_node_as NAME  — start_node, with the daemon as USER_ (no other group).
start_node_as () {
	rm -f "$TRASH/$1/exit" "$TRASH/$1/pid"
	(
		setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
			orchestrated --config "$TRASH/$1/orchestrate.yaml" --etcd "$ETCD_URL" -v \
			--local-version-file "$TRASH/$1/own/current_version" \
			>>"$TRASH/$1/log" 2>&1 &
		echo $! >"$TRASH/$1/pid"
		wait $!
		echo $? >"$TRASH/$1/exit"
	) &
	wait_for "test -s '$TRASH/$1/pid'" 5 || return 1
	test_register_pid "$(node_pid "$1")"
	wait_for "etcdctl_get /alive/$1 | grep -q pid" 15 || {
		cat "$TRASH/$1/log" >&2
		return 1
	}
}

alive () {
	test -r "/proc/$1/stat" && ! awk '{ exit $3 != "Z" }' "/proc/$1/stat"
}

# A client of the protocol (hook_proto.h).  req.py SOCKET HOOK [VAR=VALUE...]
# prints the first frame's type and payload ("S 1234", "E 1 ...") and, with
# HOLD=SECONDS, then keeps the connection open that long without reading;
# KILL_AFTER=SECONDS sends a K frame (SIGTERM) after that long, still not
# reading; DRAIN=1 reads to the end and prints the X frame.
cat >req.py <<\EOF
import os, socket, struct, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.connect(sys.argv[1])
fields = [b"orchestrate-hook 1", sys.argv[2].encode()] + \
    [a.encode().replace(b"\\n", b"\n") for a in sys.argv[3:]]
s.sendall(b"".join(f + b"\0" for f in fields) + b"\0")
def frame():
    h = b""
    while len(h) < 5:
        c = s.recv(5 - len(h))
        if not c:
            return None, b""
        h += c
    n = struct.unpack(">I", h[1:5])[0]
    p = b""
    while len(p) < n:
        c = s.recv(n - len(p))
        if not c:
            break
        p += c
    return h[0:1].decode(), p
t, p = frame()
print(t, p.decode(errors="replace"), flush=True)
if os.environ.get("KILL_AFTER"):
    time.sleep(float(os.environ["KILL_AFTER"]))
    s.sendall(b"K" + struct.pack(">I", 2) + b"15")
if os.environ.get("HOLD"):
    time.sleep(float(os.environ["HOLD"]))
if os.environ.get("DRAIN"):
    while t is not None and t != "X":
        t, p = frame()
    print(t, p.decode(errors="replace"), flush=True)
EOF

# --- the daemon as its own user ---------------------------------------------------

test_expect_success 'the daemon converges as its own user, the hooks run as root through the runner' '
	own_setup p1 &&
	sed -i "2a id -u >\"$TRASH/p1/config.uid\"" p1/hooks/config &&
	start_runner p1 &&
	test "$(stat -c "%U:%G %a" p1/hook.sock)" = "root:$USER_ 660" &&
	start_node_as p1 &&
	daemon=$(node_pid p1) &&
	test "$(awk "/^Uid:/ { print \$2 }" /proc/$daemon/status)" = "$UID_" &&
	wait_for "test \"\$(cat p1/own/current_version 2>/dev/null)\" = v1 && running_at p1 v1" 20 &&
	test "$(cat p1/config.uid)" = 0 &&
	test "$(stat -c %U p1/own/current_version)" = "$USER_" &&
	test "$(stat -c %U p1/own/services.yaml)" = "$USER_" &&
	grep -q "request from pid $daemon uid $UID_: hook .config." p1/runner.log &&
	grep -qx "ORCHESTRATE_SERVICES_FILE=$TRASH/p1/own/services.yaml" p1/hook.env &&
	grep -qx "ORCHESTRATE_LOCAL_VERSION_FILE=$TRASH/p1/own/current_version" p1/hook.env &&
	grep -qx "ORCHESTRATE_HOST=p1" p1/hook.env &&
	grep -qx "ORCHESTRATE_VERSION=v1" p1/hook.env
'

test_expect_success 'as its own user the daemon cannot write the config or the hooks' '
	! setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		sh -c "echo x >>\"$TRASH/p1/orchestrate.yaml\"" 2>/dev/null &&
	! setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		sh -c "echo x >>\"$TRASH/p1/hooks/config\"" 2>/dev/null &&
	! grep -qx x p1/orchestrate.yaml
'

# --- who may connect ---------------------------------------------------------------

test_expect_success 'another uid with the group is refused by the runner, nothing runs, one line names it' '
	runs=$(count_lines p1/validate.count) &&
	setpriv --reuid="$OTHER" --regid="$GID_" --clear-groups \
		"$PY" req.py p1/hook.sock validate ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v9 >out.other &&
	cat out.other &&
	grep -qx "E 1 permission denied" out.other &&
	grep "refused uid $OTHER_UID" p1/runner.log >refusals &&
	test_line_count = 1 refusals &&
	grep -q "only root and .$USER_. (uid $UID_) may ask for hooks" refusals &&
	sleep 1 &&
	test "$(count_lines p1/validate.count)" = "$runs" &&
	! grep -q v9 p1/validate.count
'

test_expect_success 'another uid without the group cannot even connect (socket 0660)' '
	! setpriv --reuid="$OTHER" --regid=nogroup --clear-groups \
		"$PY" req.py p1/hook.sock validate ORCHESTRATE_HOST=p1 2>err &&
	grep -q "Permission denied" err
'

test_expect_success 'the daemon user and root are served' '
	DRAIN=1 setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		"$PY" req.py p1/hook.sock validate ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v7 >out.user &&
	grep -q "^S [0-9][0-9]*$" out.user &&
	grep -qx "X exited 0" out.user &&
	DRAIN=1 "$PY" req.py p1/hook.sock validate ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v8 >out.root &&
	grep -q "^S [0-9][0-9]*$" out.root &&
	grep -qx "X exited 0" out.root &&
	wait_for "grep -q \"validate v7\" p1/validate.count && grep -q \"validate v8\" p1/validate.count" 5
'

# --- root's files only ---------------------------------------------------------------

# refused_for WHAT  — a request as the daemon user is refused, the runner's
# log names WHAT, and the config hook did not run.
refused_for () {
	runs_=$(count_lines p1/config.count)
	lines_=$(grep -c "refusing to run" p1/runner.log)
	setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v5 >out.refused &&
	cat out.refused &&
	grep -q "^E 1 " out.refused &&
	test "$(grep -c "refusing to run" p1/runner.log)" = $((lines_ + 1)) &&
	grep "refusing to run" p1/runner.log | tail -n 1 >last.refusal &&
	cat last.refusal &&
	grep -qF "$1" last.refusal &&
	sleep 0.5 &&
	test "$(count_lines p1/config.count)" = "$runs_"
}

test_expect_success 'a config file writable by its group: nothing runs, the path named' '
	stop_node p1 &&
	chmod g+w p1/orchestrate.yaml &&
	refused_for "config file: '"'"'$TRASH/p1/orchestrate.yaml'"'"' is writable by its group (mode 0664)" &&
	chmod g-w p1/orchestrate.yaml
'

test_expect_success 'a config file owned by the daemon user: nothing runs' '
	chown "$USER_" p1/orchestrate.yaml &&
	refused_for "'"'"'$TRASH/p1/orchestrate.yaml'"'"' is owned by uid $UID_, not root" &&
	chown root p1/orchestrate.yaml
'

test_expect_success 'a world-writable hook: nothing runs, the hook named' '
	chmod o+w p1/hooks/config &&
	refused_for "config hook: '"'"'$TRASH/p1/hooks/config'"'"' is writable by everyone (mode 0757)" &&
	chmod o-w p1/hooks/config
'

test_expect_success 'a directory above the hook owned by the daemon user: nothing runs' '
	chown "$USER_" p1/hooks &&
	refused_for "'"'"'$TRASH/p1/hooks'"'"' is owned by uid $UID_, not root" &&
	chown root p1/hooks
'

test_expect_success 'a world-writable directory above the hook: nothing runs, the directory named' '
	chmod o+w p1/hooks &&
	refused_for "'"'"'$TRASH/p1/hooks'"'"' is writable by everyone (mode 0757)" &&
	chmod o-w p1/hooks
'

test_expect_success 'a root-owned sticky directory above the hook (as /tmp): the hook runs' '
	chmod 1777 p1/hooks &&
	runs=$(count_lines p1/config.count) &&
	DRAIN=1 setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v5 >out.sticky &&
	chmod 755 p1/hooks &&
	grep -qx "X exited 0" out.sticky &&
	wait_for "test \$(count_lines p1/config.count) -gt $runs" 5
'

test_expect_success 'a hook reached through a link into a directory the daemon user owns: refused' '
	cp p1/hooks/config p1/own/evil &&
	chown "$USER_" p1/own/evil && chmod 755 p1/own/evil &&
	mv p1/hooks/config p1/hooks/config.real &&
	ln -s "$TRASH/p1/own/evil" p1/hooks/config &&
	refused_for "'"'"'$TRASH/p1/own'"'"' is owned by uid $UID_, not root" &&
	rm p1/hooks/config && mv p1/hooks/config.real p1/hooks/config
'

test_expect_success 'all root'"'"'s again: the same request runs' '
	DRAIN=1 setpriv --reuid="$USER_" --regid="$USER_" --clear-groups \
		"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v5 >out.ok &&
	grep -qx "X exited 0" out.ok &&
	grep -q "^S [0-9][0-9]*$" out.ok &&
	wait_for "grep -q \"config v5\" p1/config.count" 5
'

# --- the environment is the runner's -----------------------------------------------

test_expect_success 'a value with a newline from the client: refused, nothing runs' '
	runs=$(count_lines p1/config.count) &&
	"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 \
		"ORCHESTRATE_VERSION=v6\\nLD_PRELOAD=/tmp/x.so" >out.nl &&
	cat out.nl &&
	grep -qx "E 1 environment variable .ORCHESTRATE_VERSION. refused: its value is not a name (contains a control character)" out.nl &&
	"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=-rf >out.dash &&
	grep -q "^E 1 .*does not start with a letter or a digit" out.dash &&
	"$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_PASSWORD=x >out.pw &&
	grep -q "^E 1 environment variable .ORCHESTRATE_PASSWORD. refused" out.pw &&
	sleep 0.5 &&
	test "$(count_lines p1/config.count)" = "$runs" &&
	! grep -q LD_PRELOAD p1/hook.env
'

test_expect_success 'paths, endpoints and prefix from the client never reach the hook' '
	DRAIN=1 "$PY" req.py p1/hook.sock config ORCHESTRATE_HOST=p1 ORCHESTRATE_VERSION=v6 \
		ORCHESTRATE_SERVICES_FILE=/tmp/evil.yaml ORCHESTRATE_LOCAL_VERSION_FILE=/tmp/evil \
		ORCHESTRATE_ETCD=http://evil.example:2379 ORCHESTRATE_PREFIX=/evil >out.paths &&
	grep -q "^S [0-9][0-9]*$" out.paths &&
	grep -qx "X exited 0" out.paths &&
	wait_for "grep -q \"config v6\" p1/config.count" 5 &&
	wait_for "grep -qx ORCHESTRATE_VERSION=v6 p1/hook.env" 5 &&
	cat p1/hook.env &&
	! grep -q evil p1/hook.env &&
	grep -qx "ORCHESTRATE_SERVICES_FILE=$TRASH/p1/own/services.yaml" p1/hook.env &&
	grep -qx "ORCHESTRATE_LOCAL_VERSION_FILE=$TRASH/p1/own/current_version" p1/hook.env &&
	grep -qx "ORCHESTRATE_ETCD=http://127.0.0.1:2379" p1/hook.env &&
	! grep -q "^ORCHESTRATE_PREFIX=" p1/hook.env &&
	grep -q "the client.s paths, endpoints and prefix ignored" p1/runner.log
'

# --- the runner bounds its hook ------------------------------------------------------

# p2: a services hook that floods its output until stopped, under a runner
# whose hooks.timeout is 1 s (so 11 s with the kill grace).
test_expect_success 'setup: a hook that floods its output' '
	own_setup p2 &&
	sed -i "s|^  timeout: .*|  timeout: 1|" p2/orchestrate.yaml &&
	cat >p2/hooks/services <<-EOF &&
	#!/bin/sh
	echo \$\$ >"$TRASH/p2/flood.pid.\$ORCHESTRATE_HOST"
	exec python3 -c "
	import sys
	line = \"x\" * 1023 + \"\\\\n\"
	while True:
	    sys.stdout.write(line)
	"
	EOF
	chmod 755 p2/hooks/services &&
	start_runner p2
'

test_expect_success 'a client that stops reading: a kill frame still stops the hook at once' '
	KILL_AFTER=2 HOLD=30 "$PY" req.py p2/hook.sock services ORCHESTRATE_HOST=k1 >out.k &
	client=$! &&
	wait_for "test -s p2/flood.pid.k1" 5 &&
	pid=$(cat p2/flood.pid.k1) &&
	sleep 1 && alive $pid &&
	wait_for "! alive $pid" 4 &&
	grep -q "hook .services.: SIGTERM from the daemon" p2/runner.log &&
	kill $client
'

test_expect_success 'a client that stops reading: SIGTERM to the runner still stops the hook' '
	HOLD=30 "$PY" req.py p2/hook.sock services ORCHESTRATE_HOST=t1 >out.t &
	client=$! &&
	wait_for "test -s p2/flood.pid.t1" 5 &&
	pid=$(cat p2/flood.pid.t1) &&

	runner=$(awk "{ print \$4 }" /proc/$pid/stat) &&
	sleep 2 && alive $pid &&
	kill -TERM $runner &&
	wait_for "! alive $pid" 4 &&
	wait_for "! alive $runner" 15 &&
	kill $client
'

test_expect_success 'a client that stops reading cannot keep the hook past the runner timeout' '
	HOLD=40 "$PY" req.py p2/hook.sock services ORCHESTRATE_HOST=h1 >out.hold &
	client=$! &&
	wait_for "test -s p2/flood.pid.h1" 5 &&
	pid=$(cat p2/flood.pid.h1) &&
	runner=$(awk "{ print \$4 }" /proc/$pid/stat) &&
	start=$(now_ms) &&
	sleep 5 && alive $pid &&
	wait_for "! alive $pid" 15 &&
	took=$(( $(now_ms) - start )) &&
	echo "hook gone after ~$took ms (hooks.timeout 1 s + 10 s of grace)" &&
	test $took -ge 9000 && test $took -lt 16000 &&
	alive $client &&
	grep -q "hook .services. timed out after 11 s" p2/runner.log &&
	grep -q "bytes of its output dropped: the daemon did not read them" p2/runner.log &&
	wait_for "! alive $runner" 15 &&
	kill $client
'

# --- --listen ---------------------------------------------------------------------------

test_expect_success '--listen replaces a socket but never another file' '
	echo precious >p2/not-a-socket &&
	test_expect_code 1 orchestrate-hook-runner --config "$TRASH/p2/orchestrate.yaml" \
		--listen "$TRASH/p2/not-a-socket" 2>err &&
	cat err &&
	grep -q "exists and is not a socket, refusing to replace it" err &&
	test "$(cat p2/not-a-socket)" = precious
'

test_expect_success '--listen runs at most 8 hooks at once, refuses the 9th' '
	own_setup p3 &&
	cat >p3/hooks/services <<-EOF &&
	#!/bin/sh
	echo \$\$ >>"$TRASH/p3/sleep.pids"
	exec sleep 30
	EOF
	start_runner p3 &&
	cat >many.py <<-\EOF &&
	import socket, sys, time
	socks, firsts = [], []
	for i in range(9):
	    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
	    s.connect(sys.argv[1])
	    try:
	        s.sendall(b"orchestrate-hook 1\0services\0ORCHESTRATE_HOST=p3\0\0")
	    except (BrokenPipeError, ConnectionResetError):
	        pass  # the 9th: refused before its request was read
	    firsts.append(s.recv(5 + 64)[0:1].decode())
	    socks.append(s)
	print("".join(firsts), flush=True)
	# Hold the 8 runs until each hook wrote its pid: closing sooner stops
	# them (the daemon went away), maybe before they wrote it.
	for _ in range(100):
	    try:
	        if len(open(sys.argv[2]).read().split()) >= 8:
	            break
	    except OSError:
	        pass
	    time.sleep(0.1)
	EOF
	"$PY" many.py p3/hook.sock p3/sleep.pids >out.many &&
	cat out.many &&
	test "$(cat out.many)" = SSSSSSSSE &&
	grep -q "8 hook runs at once already, refusing a connection" p3/runner.log &&
	test_line_count = 8 p3/sleep.pids &&
	for pid in $(cat p3/sleep.pids); do
		wait_for "! alive $pid" 15 || exit 1
	done
'

test_expect_success 'a runner started with a relative --config: a usage error' '
	test_expect_code 64 orchestrate-hook-runner --config orchestrate.yaml --listen x.sock 2>err &&
	grep -q "not an absolute path" err
'

stop_all_nodes
test_done
