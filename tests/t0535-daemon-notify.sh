#!/bin/sh
test_description='orchestrated and systemd: READY=1, STATUS=, WATCHDOG=1, RELOADING=1, STOPPING=1 on a NOTIFY_SOCKET of our own'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# The test plays systemd's part of Type=notify: it listens on an AF_UNIX
# datagram socket, starts the daemon with NOTIFY_SOCKET naming it, and with
# WATCHDOG_USEC and WATCHDOG_PID as systemd sets them for WatchdogSec=.  A
# small Python listener writes one line a notification, "MS ASSIGNMENT" (MS:
# its monotonic clock in milliseconds at receipt), and on READY=1 whether the
# node's hiera file exists at that moment.  MS is the kernel's time of
# arrival (SO_TIMESTAMP), not the listener's: under a loaded machine the
# listener may be scheduled late for one datagram and not the next, which
# would shorten or stretch the gaps the watchdog case measures.

test_have_orchestrated
command -v python3 >/dev/null 2>&1 || skip_all "python3 is not installed"

# 2 s: systemd would kill a daemon silent for that long; sd-event pings
# between a quarter and three quarters of it.
WATCHDOG_INTERVAL_USEC=2000000

cat >notify.py <<'EOF'
import os, socket, struct, sys, time
path, log, hiera = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
SO_TIMESTAMP = getattr(socket, "SO_TIMESTAMP", 29)   # Python names it not; 29 in asm-generic
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
s.bind(path)
s.settimeout(300)                        # bounded: gone when the test is
tv = struct.Struct("@ll")                # struct timeval
with open(log, "a", buffering=1) as f:
    f.write("%d LISTENING\n" % int(time.time() * 1000))
    while True:
        try:
            data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(tv.size))
        except socket.timeout:
            sys.exit(0)
        ms = int(time.time() * 1000)
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMP:
                sec, usec = tv.unpack(raw[:tv.size])
                ms = sec * 1000 + usec // 1000
        for line in data.decode("utf-8", "replace").split("\n"):
            if not line:
                continue
            f.write("%d %s\n" % (ms, line))
            if line == "READY=1":
                f.write("%d HIERA %s\n" % (ms, "present" if os.path.exists(hiera) else "absent"))
EOF

# listen NAME  — a listener for node NAME on $ETCD_STATE/NAME.sock (a short
# path: sun_path holds 108 bytes), writing NAME/notify.log.
listen () {
	rm -f "$ETCD_STATE/$1.sock"
	python3 notify.py "$ETCD_STATE/$1.sock" "$TRASH/$1/notify.log" "$TRASH/$1/services.yaml" &
	test_register_pid $!
	wait_for "grep -q LISTENING '$TRASH/$1/notify.log'" 10
}

# start_notify_node NAME [WATCHDOG_PID]  — orchestrated for NAME with systemd's
# variables; WATCHDOG_PID defaults to the daemon's own pid, as systemd sets
# it.  Does not wait for etcd.
start_notify_node () {
	rm -f "$TRASH/$1/exit" "$TRASH/$1/pid"
	(
		NOTIFY_SOCKET="$ETCD_STATE/$1.sock" WATCHDOG_USEC=$WATCHDOG_INTERVAL_USEC \
		WATCHDOG_PID_WANTED=${2:-} \
		sh -c 'WATCHDOG_PID=${WATCHDOG_PID_WANTED:-$$}; export WATCHDOG_PID
			unset WATCHDOG_PID_WANTED; exec "$@"' sh \
			orchestrated --config "$TRASH/$1/orchestrate.yaml" --etcd "$ETCD_URL" \
			--local-version-file "$TRASH/$1/current_version" -v \
			>>"$TRASH/$1/log" 2>&1 &
		echo $! >"$TRASH/$1/pid"
		wait $!
		echo $? >"$TRASH/$1/exit"
	) &
	wait_for "test -s '$TRASH/$1/pid'" 5 || return 1
	test_register_pid "$(node_pid "$1")"
}

# notes NAME  — the notifications so far, one a line, without the time.
notes () {
	cut -d' ' -f2- "$TRASH/$1/notify.log"
}

# line_of NAME PATTERN [after LINE]  — the number of the first line of
# notify.log matching the fixed string PATTERN exactly (after line LINE).
line_of () {
	awk -v p="$2" -v a="${3:-0}" 'NR > a { l = $0; sub(/^[0-9]+ /, "", l); if (l == p) { print NR; exit } }' \
		"$TRASH/$1/notify.log"
}

# in_order NAME NOTE...  — the notes appear in this order (others may come between).
in_order () {
	io_name_=$1
	shift
	io_at_=0
	for io_p_ in "$@"; do
		io_next_=$(line_of "$io_name_" "$io_p_" "$io_at_")
		if test -z "$io_next_"; then
			echo "in_order: '$io_p_' not found after line $io_at_ of $io_name_/notify.log:" >&4
			cat -n "$TRASH/$io_name_/notify.log" >&4
			return 1
		fi
		io_at_=$io_next_
	done
}

count_note () {
	notes "$1" | grep -cxF "$2" || :
}

# pings_after NAME LINE  — WATCHDOG=1 notes after line LINE of NAME's log.
pings_after () {
	awk -v r="$2" "NR > r" "$TRASH/$1/notify.log" | grep -c " WATCHDOG=1\$" || :
}

start_etcd
# A peer's service, so that the first sync writes a hiera file with content.
etcdctl_put /available_services/web/peer1 '{"addresses":{"eth0":"10.0.0.99"},"healthy":true,"version":"v0"}'
# The daemon starts while etcd is down (same ports, same data later).
stop_etcd

node_setup n1
listen n1

test_expect_success 'etcd unreachable: STATUS= says so and there is no READY=1' '
	start_notify_node n1 &&
	wait_for "notes n1 | grep -q \"^STATUS=cannot reach etcd\"" 15 &&
	in_order n1 "STATUS=connecting to etcd" &&
	sleep 1 &&
	test "$(count_note n1 READY=1)" = 0 &&
	test ! -f n1/services.yaml
'

test_expect_success 'READY=1 once the first sync is done: registered, hiera file written' '
	restart_etcd &&
	wait_for "test \$(count_note n1 READY=1) = 1" 40 &&
	notes n1 | grep -qx "HIERA present" &&
	grep -q "10.0.0.99" n1/services.yaml &&
	etcdctl_get /alive/n1 | grep -q pid &&
	last_unreachable=$(grep -n " STATUS=cannot reach etcd" n1/notify.log | tail -n 1 | cut -d: -f1) &&
	test "$(line_of n1 READY=1)" -gt "$last_unreachable"
'

test_expect_success 'WATCHDOG=1 within WATCHDOG_USEC, never more often than a quarter of it' '
	# From READY=1 on: before it, etcd was starting up, and a request to
	# it may hold the loop for up to etcd.timeout (orchestrated(8): the
	# unit'"'"'s WatchdogSec= is well above it); a gap there is that wait,
	# not a missed ping.  (Counting every ping instead could be done with
	# all of them before READY=1, and none after it to look at.)
	ready=$(line_of n1 READY=1) &&
	test -n "$ready" &&
	wait_for "test \$(pings_after n1 $ready) -ge 8" 30 &&
	awk -v r="$ready" "NR > r" n1/notify.log | grep " WATCHDOG=1\$" | cut -d" " -f1 >pings &&
	test $(wc -l <pings) -ge 4 &&
	awk -v max=$((WATCHDOG_INTERVAL_USEC / 1000)) -v min=$((WATCHDOG_INTERVAL_USEC / 1000 / 4 - 100)) "
		NR > 1 { gap = \$1 - prev
			 if (gap >= max) { print \"gap \" gap \" ms >= \" max; bad = 1 }
			 if (gap < min) { print \"gap \" gap \" ms < \" min; bad = 1 } }
		{ prev = \$1 }
		END { exit bad }" pings
'

test_expect_success 'STATUS= follows a run: config, validate, idle; a failed run and its retry' '
	echo 1 >n1/config.sleep &&
	etcdctl_put /current_version v1 &&
	wait_for "node_at n1 v1" 20 &&
	wait_for "notes n1 | grep -qx \"STATUS=idle at v1\"" 10 &&
	in_order n1 READY=1 "STATUS=running config for v1" "STATUS=running validate for v1" \
		"STATUS=idle at v1" &&
	rm n1/config.sleep &&
	echo 1 >n1/validate.exit &&
	etcdctl_put /current_version v2 &&
	wait_for "notes n1 | grep -q \"^STATUS=validation failed for v2 (1×), retrying in\"" 20 &&
	rm n1/validate.exit &&
	wait_for "node_at n1 v2" 20 &&
	wait_for "notes n1 | grep -qx \"STATUS=idle at v2\"" 10 &&
	failed=$(notes n1 | grep "^STATUS=validation failed for v2 (1×)" | head -n 1) &&
	in_order n1 "STATUS=idle at v1" "STATUS=running config for v2" \
		"STATUS=running validate for v2" "$failed" "STATUS=running config for v2" \
		"STATUS=running validate for v2" "STATUS=idle at v2"
'

test_expect_success 'hooks do not inherit NOTIFY_SOCKET or the watchdog variables' '
	test -s n1/hook.env &&
	! grep -E "^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)=" n1/hook.env
'

test_expect_success 'SIGHUP: RELOADING=1, then READY=1 once the file is read again' '
	before=$(wc -l <n1/notify.log) &&
	kill -HUP "$(node_pid n1)" &&
	wait_for "test -n \"\$(line_of n1 READY=1 $before)\"" 10 &&
	reloading=$(line_of n1 RELOADING=1 "$before") &&
	test -n "$reloading" &&
	test "$(line_of n1 READY=1 "$before")" -gt "$reloading" &&
	test "$(line_of n1 READY=1 $before)" = "$(line_of n1 READY=1 "$reloading")" &&
	grep -q "configuration reloaded" n1/log
'

test_expect_success 'SIGHUP with a bad file: RELOADING=1, READY=1, the running config kept' '
	cp n1/orchestrate.yaml n1/good.yaml &&
	echo "bogus_section: 1" >>n1/orchestrate.yaml &&
	before=$(wc -l <n1/notify.log) &&
	kill -HUP "$(node_pid n1)" &&
	wait_for "test -n \"\$(line_of n1 READY=1 $before)\"" 10 &&
	in_order n1 RELOADING=1 READY=1 &&
	test "$(line_of n1 READY=1 $before)" -gt "$(line_of n1 RELOADING=1 $before)" &&
	grep -q "keeping the running configuration" n1/log &&
	cp n1/good.yaml n1/orchestrate.yaml &&
	kill -0 "$(node_pid n1)"
'

test_expect_success 'SIGTERM during a config hook: STOPPING=1 at once, the hook waited for, exit 0' '
	echo 30 >n1/config.sleep &&
	etcdctl_put /current_version v3 &&
	wait_for "notes n1 | grep -qx \"STATUS=running config for v3\"" 20 &&
	before=$(wc -l <n1/notify.log) &&
	kill -TERM "$(node_pid n1)" &&
	wait_for "test -s n1/exit" 30 &&
	test "$(node_exit n1)" = 0 &&
	stopping=$(line_of n1 STOPPING=1 "$before") &&
	test -n "$stopping" &&
	test "$(count_note n1 STOPPING=1)" = 1 &&
	test -n "$(line_of n1 "STATUS=stopping: waiting for hooks" "$stopping")" &&
	test -z "$(line_of n1 READY=1 "$stopping")" &&
	status_is n1 puppet failed
'

test_expect_success 'SIGTERM when idle: STOPPING=1, exit 0' '
	rm -f n1/config.sleep &&
	etcdctl_put /current_version v2 &&
	before=$(wc -l <n1/notify.log) &&
	start_notify_node n1 &&
	wait_for "test -n \"\$(line_of n1 \"STATUS=idle at v2\" $before)\"" 20 &&
	in_order n1 STOPPING=1 READY=1 "STATUS=idle at v2" &&
	kill -TERM "$(node_pid n1)" &&
	wait_for "test -s n1/exit" 30 &&
	test "$(node_exit n1)" = 0 &&
	test "$(count_note n1 STOPPING=1)" = 2 &&
	test -z "$(etcdctl_get /alive/n1)"
'

node_setup n2
listen n2

test_expect_success 'WATCHDOG_PID of another process: READY=1 but no WATCHDOG=1' '
	start_notify_node n2 1 &&
	wait_for "test \$(count_note n2 READY=1) = 1" 20 &&
	sleep 2 &&
	test "$(count_note n2 WATCHDOG=1)" = 0 &&
	stop_node n2 &&
	test "$(count_note n2 STOPPING=1)" = 1
'

stop_all_nodes
test_done
