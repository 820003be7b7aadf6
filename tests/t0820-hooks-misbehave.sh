#!/bin/sh
#
# Hooks that misbehave: killed by a signal, printing megabytes, leaving a child
# behind (in their process group, or escaped with setsid), ignoring SIGTERM past
# their timeout, not executable at all.  Each time the daemon stays responsive,
# records an honest state with the reason, and leaves no process of the hook's
# group behind.  Also what every hook starts with, whatever signals the daemon
# blocks or ignores.  (A plain hung hook past its timeout is in t0530.)

test_description='orchestrated: hooks killed by signals, flooding output, leaving children, ignoring SIGTERM, not executable'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
start_etcd
etcdctl_put /current_version v1

# group_alive PGID  — a living (not zombie) process is in the group.  Zombies
# are left out: in a container whose PID 1 does not reap, a killed hook's
# reparented children stay zombies, which is not our doing.
group_alive () {
	ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# config_hook NODE  — replaces NODE's config hook by a script made of stdin,
# with $d set to the node's directory.
config_hook () {
	{
		echo '#!/bin/sh'
		echo "d='$TRASH/$1'"
		cat
	} >"$TRASH/$1/hooks/config"
	chmod +x "$TRASH/$1/hooks/config"
}

# detail_of NODE TYPE STATE  — the detail of a status, exactly (to detail.NODE).
detail_of () {
	etcdctl_get "/status/$2/$3/$1" | python3 -c '
import json, sys
sys.stdout.write(json.load(sys.stdin)["detail"])' >"detail.$1"
}

# rss_kb PID  — the resident set of a process, in KiB.
rss_kb () {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# The sanitizers reserve and keep far more memory than the daemon uses: the RSS
# bound only means something for a plain build.
if grep -q __asan_init "$REPO_ROOT/bin/orchestrated" 2>/dev/null; then
	RSS_MAX_KB=1000000
else
	RSS_MAX_KB=51200
fi

test_expect_success 'a hook killed by a signal: puppet failed, the signal named in the detail' '
	node_setup k1 &&
	config_hook k1 <<-\EOF &&
	echo "about to be killed"
	kill -9 $$
	EOF
	start_node k1 &&
	wait_for "status_is k1 puppet failed" 15 &&
	detail_of k1 puppet failed &&
	cat detail.k1 &&
	grep -q "killed by signal 9" detail.k1 &&
	grep -q "about to be killed" detail.k1 &&
	test "$(etcdctl_json_field /status/puppet/failed/k1 exit_code)" = -1 &&
	test ! -f k1/current_version &&
	kill -0 $(node_pid k1) &&
	stop_node k1 && test "$(node_exit k1)" = 0
'

test_expect_success 'a hook printing 20 MB: the daemon keeps up, stays small, keeps the tail' '
	node_setup k2 &&
	config_hook k2 <<-\EOF &&
	echo $$ >"$d/config.pid"
	# 10 MB of lines, then 10 MB without a line break, then the last words
	yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 |
		head -n 100000
	head -c 10000000 /dev/zero | tr "\000" y
	echo
	echo "LAST-LINE-OF-THE-OUTPUT"
	date +%s >"$d/printed"
	sleep 1
	exit 1
	EOF
	start_node k2 &&
	pid=$(node_pid k2) &&
	before=$(rss_kb $pid) &&
	max=$before &&
	deadline=$(( $(date +%s) + 40 )) &&
	while ! status_is k2 puppet failed; do
		test $(date +%s) -le $deadline || { echo "no puppet/failed in time"; exit 1; }
		r=$(rss_kb $pid) && test "$r" -gt "$max" && max=$r
		sleep 0.2
	done &&
	after=$(rss_kb $pid) &&
	echo "daemon RSS: ${before} KiB before, ${max} KiB at most, ${after} KiB after" | tee rss.txt &&
	test "$max" -lt "$RSS_MAX_KB" &&
	test -s k2/printed &&
	# the state was recorded within a few seconds of the end of the output
	test $(( $(date +%s) - $(cat k2/printed) )) -le 10 &&
	detail_of k2 puppet failed &&
	size=$(wc -c <detail.k2) &&
	echo "detail: $size bytes" &&
	test "$size" -le 4096 &&
	test "$size" -ge 4000 &&
	head -n 1 detail.k2 | grep -qx "exited with status 1" &&
	tail -n 1 detail.k2 | grep -qx "LAST-LINE-OF-THE-OUTPUT" &&
	kill -0 $pid &&
	etcdctl_get /alive/k2 | grep -q pid &&
	stop_node k2 && test "$(node_exit k2)" = 0
'

test -f rss.txt && say_comment <rss.txt

test_expect_success 'a child left in the hook'"'"'s group is killed when the hook exits' '
	node_setup k3 &&
	config_hook k3 <<-\EOF &&
	echo $$ >"$d/config.pgid"
	sleep 300 &
	echo $! >"$d/child.pid"
	( sleep 300 ) &
	echo "left two children behind"
	EOF
	start_node k3 &&
	wait_for "node_at k3 v1" 15 &&
	pgid=$(cat k3/config.pgid) &&
	test -n "$pgid" &&
	wait_for "! group_alive $pgid" 5 &&
	! ps -o stat= -p $(cat k3/child.pid) | grep -qv "^Z" &&
	stop_node k3
'

test_expect_success 'a child escaped with setsid does not hold the run (its output is drained)' '
	node_setup k4 &&
	config_hook k4 <<-\EOF &&
	setsid sleep 300 &
	echo $! >"$d/escapee.pid"
	echo "escapee started"
	EOF
	start=$(now_ms) &&
	start_node k4 &&
	wait_for "test -s k4/escapee.pid" 10 &&
	escapee=$(cat k4/escapee.pid) &&
	test_register_pid $escapee &&
	wait_for "node_at k4 v1" 15 &&
	echo "run done in $(( $(now_ms) - start )) ms" &&
	grep -q "escapee started" k4/log &&
	{ kill $escapee 2>/dev/null || :; } &&
	stop_node k4
'

test_expect_success 'a hook ignoring SIGTERM past its timeout is killed; failed with "timed out"' '
	HOOK_TIMEOUT=1 node_setup k5 &&
	grep -q "^  timeout: 1$" k5/orchestrate.yaml &&
	config_hook k5 <<-\EOF &&
	trap "" TERM
	echo $$ >"$d/config.pgid"
	echo "ignoring SIGTERM"
	sleep 60
	EOF
	start_node k5 &&
	wait_for "test -s k5/config.pgid" 10 &&
	pgid=$(cat k5/config.pgid) &&
	wait_for "grep -q \"timed out after 1 s\" k5/log" 10 &&
	# in the grace period between SIGTERM and SIGKILL the daemon still
	# answers its lease and the hook still runs
	group_alive $pgid &&
	etcdctl_get /alive/k5 | grep -q pid &&
	wait_for "status_is k5 puppet failed" 20 &&
	etcdctl_get /status/puppet/failed/k5 | grep -q "timed out after 1 s" &&
	grep -q "ignored SIGTERM, killing it" k5/log &&
	! group_alive $pgid &&
	stop_node k5 && test "$(node_exit k5)" = 0
'

test_expect_success 'a config hook that is not executable: puppet failed with the reason, then converges once fixed' '
	node_setup k6 &&
	chmod -x k6/hooks/config &&
	start_node k6 &&
	wait_for "status_is k6 puppet failed" 15 &&
	detail_of k6 puppet failed &&
	cat detail.k6 &&
	grep -q "cannot run config hook .*k6/hooks/config.*: Permission denied" detail.k6 &&
	test ! -f k6/config.count &&
	kill -0 $(node_pid k6) &&
	chmod +x k6/hooks/config &&
	wait_for "node_at k6 v1" 20 &&
	stop_node k6 && test "$(node_exit k6)" = 0
'

test_expect_success 'a hook starts with no signal blocked or ignored, though the daemon blocks SIGTERM and ignores SIGPIPE' '
	node_setup k7 &&
	config_hook k7 <<-\EOF &&
	echo "$$ $(ps -o pgid= -p $$)" >"$d/pgid"
	# read by the process itself: dash blocks every signal while it vforks
	exec grep -E "^Sig(Blk|Ign):" /proc/self/status >"$d/signals"
	EOF
	start_node k7 &&
	wait_for "node_at k7 v1" 15 &&
	cat k7/signals &&
	blocked=$(awk "/^SigBlk:/ { print \$2 }" k7/signals) &&
	ignored=$(awk "/^SigIgn:/ { print \$2 }" k7/signals) &&
	test "$(( 0x$blocked ))" = 0 &&
	# but 32 and 33: the internal signals of glibc, which its posix_spawn leaves ignored
	test "$(( 0x$ignored & ~0x180000000 ))" = 0 &&
	read pid pgid <k7/pgid && test "$pid" = "$pgid" &&
	stop_node k7 && test "$(node_exit k7)" = 0
'

stop_all_nodes
test_done
