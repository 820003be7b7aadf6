#!/bin/sh
test_description='orchestrated: SIGTERM during a hook, hook timeout, SIGHUP, --once'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

# group_alive PGID  — a living (not zombie) process is in the group.  Zombies
# are left out: in a container whose PID 1 does not reap, a killed hook's
# reparented children stay zombies, which is not our doing.
group_alive () {
	ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# hook_pgid NAME  — the process group of NAME's running config hook.
hook_pgid () {
	ps -eo pgid=,args= | awk "/$1\\/hooks\\/config/ && !/awk/ { print \$1; exit }"
}

test_expect_success 'SIGTERM during a config hook kills its group, records interrupted, exits 0' '
	node_setup s1 &&
	echo 60 >s1/config.sleep &&
	etcdctl_put /current_version v1 &&
	start_node s1 &&
	wait_for "status_is s1 puppet running && test -n \"\$(hook_pgid s1)\"" 10 &&
	pgid=$(hook_pgid s1) &&
	stop_node s1 &&
	test "$(node_exit s1)" = 0 &&
	! group_alive "$pgid" &&
	status_is s1 puppet failed &&
	etcdctl_get /status/puppet/failed/s1 | grep -q interrupted &&
	test -z "$(etcdctl_get /alive/s1)" &&
	test ! -f s1/current_version
'

test_expect_success 'a hook past its timeout is killed and the run fails' '
	node_setup s2 "" &&
	sed -i "s/^  timeout: 60$/  timeout: 1/" s2/orchestrate.yaml &&
	grep -q "timeout: 1$" s2/orchestrate.yaml &&
	echo 30 >s2/config.sleep &&
	start_node s2 &&
	wait_for "status_is s2 puppet failed" 10 &&
	etcdctl_get /status/puppet/failed/s2 | grep -q "timed out after 1 s" &&
	test -z "$(hook_pgid s2)" &&
	stop_node s2
'

test_expect_success 'SIGHUP with a good file applies it' '
	node_setup s3 &&
	start_node s3 &&
	wait_for "node_at s3 v1" 10 &&
	sed -i "s/^  services: \[svc-s3, common\]/  services: [svc-s3, common, newsvc]/" s3/orchestrate.yaml &&
	kill -HUP $(node_pid s3) &&
	wait_for "etcdctl_get /available_services/newsvc/s3 | grep -q addresses" 10 &&
	grep -q "configuration reloaded" s3/log
'

test_expect_success 'SIGHUP with a new group registers the node in it' '
	etcdctl_exists /groups/g1/s3 &&
	sed -i "s/^  group: g1$/  group: g2/" s3/orchestrate.yaml &&
	grep -q "^  group: g2$" s3/orchestrate.yaml &&
	kill -HUP $(node_pid s3) &&
	wait_for "grep -q \"registered in group g2\" s3/log" 10 &&
	etcdctl_exists /groups/g2/s3 &&
	etcdctl_ get -w json /alive/s3 | grep -q "\"lease\":" &&
	! grep -q "cannot register the new group" s3/log
'

test_expect_success 'SIGHUP with a bad file keeps the running configuration' '
	cp s3/orchestrate.yaml s3/good.yaml &&
	sed -i "s/^  splay: 0$/  splay: 0\n  bogus_key: 1/" s3/orchestrate.yaml &&
	kill -HUP $(node_pid s3) &&
	wait_for "grep -q \"keeping the running configuration\" s3/log" 10 &&
	grep "keeping the running" s3/log | grep -q "orchestrate.yaml:[0-9]*:.*bogus_key" &&
	kill -0 $(node_pid s3) &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at s3 v2" 10 &&
	cp s3/good.yaml s3/orchestrate.yaml &&
	stop_node s3 && test "$(node_exit s3)" = 0
'

test_expect_success '--once runs one cycle and exits 0 at the desired version' '
	node_setup o1 &&
	orchestrated --once --config o1/orchestrate.yaml --etcd "$ETCD_URL" \
		--local-version-file o1/current_version >o1/log 2>&1 &&
	test "$(cat o1/current_version)" = v2 &&
	running_at o1 v2 &&
	etcdctl_get /alive/o1 | grep -q pid &&
	etcdctl_ lease list | grep -q . &&
	orchestrated --once --config o1/orchestrate.yaml --etcd "$ETCD_URL" \
		--local-version-file o1/current_version >>o1/log 2>&1 &&
	test "$(count_lines o1/config.count)" = 1
'

test_expect_success '--once exits 1 when the run fails, without retrying' '
	echo 1 >o1/config.exit &&
	etcdctl_put /current_version v3 &&
	test_expect_code 1 orchestrated --once --config o1/orchestrate.yaml --etcd "$ETCD_URL" \
		--local-version-file o1/current_version >>o1/log 2>&1 &&
	test "$(count_lines o1/config.count)" = 2 &&
	test "$(cat o1/current_version)" = v2 &&
	status_is o1 puppet failed
'

test_expect_success 'SIGTERM while etcd has not answered the first registration: stops at once' '
	node_setup s5 &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	(
		orchestrated --config "$TRASH/s5/orchestrate.yaml" --etcd "$ETCD_URL" -v \
			>>"$TRASH/s5/log" 2>&1 &
		echo $! >"$TRASH/s5/pid"
		wait $!
		echo $? >"$TRASH/s5/exit"
	) &
	wait_for "test -s s5/pid" 5 &&
	test_register_pid "$(node_pid s5)" &&
	# past the first request'"'"'s spread: the grant waits on etcd
	wait_for "grep -q \"first request to etcd\" s5/log" 5 &&
	sleep 1.5 &&
	test ! -s s5/exit &&
	kill -TERM "$(node_pid s5)" &&
	# a loop blocked on the request would answer after etcd.timeout (5 s)
	wait_for "test -s s5/exit" 2 &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	test "$(node_exit s5)" = 0 &&
	! grep -q "registered as" s5/log
'
kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" 2>/dev/null

# The stop's last words to etcd (the interrupted run, the lease's revoke) are
# requests like any other: they do not hold the loop, and an etcd that does
# not answer holds the stop STOP_ETCD_USEC (5 s) in all, where the blocking
# calls took etcd.timeout (5 s) each.  What was not recorded is found by the
# next start (puppet/running left behind).
test_expect_success 'SIGTERM during a run while etcd is stopped: exits within 5 s of the hook, the next start runs it again' '
	node_setup s6 &&
	echo 60 >s6/config.sleep &&
	etcdctl_put /current_version v6 &&
	start_node s6 &&
	wait_for "status_is s6 puppet running && test -n \"\$(hook_pgid s6)\"" 15 &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	kill -TERM "$(node_pid s6)" &&
	wait_for "grep -q \"stopping: waiting\" s6/log" 5 &&
	wait_for "test -s s6/exit" 8 &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	grep -q "still running after the stop grace period" s6/log &&
	# the stop'"'"'s write may still land, once etcd takes the request it
	# was sent; else the next start finds puppet/running and records it
	echo 0 >s6/config.sleep &&
	start_node s6 &&
	wait_for "node_at s6 v6" 30 &&
	test "$(grep -c "config v6" s6/config.count)" = 2 &&
	stop_node s6
'
kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" 2>/dev/null

# A reload with new etcd settings (here the request timeout) makes a new
# client and frees the old one with every request in flight on it.  The run's
# end, sent while etcd is stopped, was one of them: the node forgot it was
# waiting and never decided again.  Now the write is asked about on the new
# client once etcd answers, and lands once.
test_expect_success 'SIGHUP with new etcd settings while the run'"'"'s end is in flight: asked again on the new client, recorded once' '
	node_setup s7 &&
	etcdctl_put /current_version v7 &&
	start_node s7 &&
	wait_for "node_at s7 v7" 20 &&
	echo 1 >s7/validate.sleep &&
	etcdctl_put /current_version v7b &&
	# the validate of v7b, the second in this log (the first is of v7):
	# etcd stopped any earlier stops the run before its start is written
	wait_for "test \$(grep -c \"hook .validate. started\" s7/log) = 2" 20 &&
	kill -STOP "$(cat "$ETCD_STATE/etcd/pid")" &&
	wait_for "test \$(grep -c \"hook .validate. exited\" s7/log) = 2" 10 &&
	sleep 0.5 &&
	sed -i "s/^  timeout: 5$/  timeout: 6/" s7/orchestrate.yaml &&
	grep -q "^  timeout: 6$" s7/orchestrate.yaml &&
	kill -HUP "$(node_pid s7)" &&
	wait_for "grep -q \"etcd connection changed while\" s7/log" 10 &&
	kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" &&
	wait_for "node_at s7 v7b" 40 &&
	test "$(grep -c "config v7b" s7/config.count)" = 1 &&
	status_is s7 puppet success &&
	stop_node s7
'
kill -CONT "$(cat "$ETCD_STATE/etcd/pid")" 2>/dev/null

test_expect_success 'usage errors exit 64' '
	test_expect_code 64 orchestrated --bogus 2>err &&
	test_expect_code 64 orchestrated extra-arg 2>err &&
	orchestrated -h >out && grep -q "usage: orchestrated" out
'

stop_all_nodes
test_done
