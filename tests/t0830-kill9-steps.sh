#!/bin/sh
#
# The daemon killed -9 at every step of a run — during the splay (before it
# queues for a rollout slot, no hook yet), during the config hook, between config and
# validation (during the validate hook), during the services hook — the way a
# crash under systemd looks: the daemon dies, then its cgroup (here: the hook's
# process group) is killed.  Each time, once its lease expired nothing of it is
# held (alive, holder); its statuses stay one per type; and the restarted
# daemon finishes the run.

test_description='orchestrated killed -9 at every step of a run: consistent state, the run finishes'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
start_etcd
LEASE_TTL=5
export LEASE_TTL

# hook_pgid NODE HOOK  — the process group of NODE's running HOOK, if any.
hook_pgid () {
	ps -eo pgid=,args= | awk -v p="$TRASH/$1/hooks/$2" '
		index($0, p) && !/awk/ { print $1; exit }'
}

# crash NODE [HOOK]  — kill -9 of the daemon, then of HOOK's process group (what
# systemd does to the rest of a dead unit's cgroup).
crash () {
	pg_=
	if test -n "${2:-}"; then pg_=$(hook_pgid "$1" "$2"); fi
	pid_=$(node_pid "$1")
	kill -9 "$pid_" &&
	# (not NODE/exit: start_node's wrapper runs under the body's set -e and
	# writes no exit status for a daemon killed by a signal)
	wait_for "! kill -0 $pid_" 10 &&
	if test -n "$pg_"; then /bin/kill -KILL -- "-$pg_" 2>/dev/null || :; fi
}

# expired NODE  — its lease ran out: no alive key and no holder key left.
expired () {
	wait_for "test -z \"\$(etcdctl_get /alive/$1)\"" $((LEASE_TTL + 6)) &&
	test -z "$(etcdctl_keys /rollout/holders/)"
}

# consistent NODE  — one puppet state, at most one validation state, at most one
# running_version entry, at most one holder.
consistent () {
	etcdctl_keys / >all.keys
	for t_ in /status/puppet/ /status/validation/ /running_version/ /rollout/holders/; do
		c_=$(grep "^$t_" all.keys | grep -c "/$1\$" || :)
		case $t_ in
		/status/puppet/) test "$c_" = 1 ;;
		*) test "$c_" -le 1 ;;
		esac || {
			echo "consistent: $c_ keys for $1 under $t_" >&4
			grep "/$1\$" all.keys >&4
			return 1
		}
	done
}

# restart NODE VERSION  — starts it again and waits (bounded) until it runs VERSION.
restart () {
	start_node "$1" &&
	orch verify_hosts "$2" "$1" --wait 30 &&
	node_at "$1" "$2"
}

test_expect_success 'setup: one node at v1 under max_parallel 1' '
	node_setup w1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	etcdctl_put /current_version v1 &&
	start_node w1 &&
	orch verify_hosts v1 w1 --wait 20 &&
	consistent w1
'

# The splay is a random delay in [0, splay]: with splay 3 a delay under the
# ~0.2 s the test needs to see the splay and kill let the config hook start
# first (a flaky failure, about one run in ten); with 600 that is 1 in 3,000.
test_expect_success 'killed -9 during the splay (before it queues for a slot, before any hook)' '
	sed -i "s/^  splay: 0$/  splay: 600/" w1/orchestrate.yaml &&
	kill -HUP $(node_pid w1) &&
	wait_for "grep -q \"configuration reloaded\" w1/log" 10 &&
	n=$(count_lines w1/config.count) &&
	orch trigger_update v2 &&
	wait_for "grep -q \"before queueing for a rollout slot for v2\" w1/log" 10 &&
	# a splay writes nothing: no place in the queue yet (the splay
	# spreads the queue writes, and a slot held through it would sit
	# idle), and the status of the last run
	! etcdctl_exists /rollout/holders/w1 &&
	status_is w1 puppet success &&
	crash w1 &&
	test "$(count_lines w1/config.count)" = "$n" &&
	status_is w1 puppet success &&
	consistent w1 &&
	expired w1 &&
	sed -i "s/^  splay: 600$/  splay: 0/" w1/orchestrate.yaml &&
	restart w1 v2 &&
	consistent w1 &&
	test -z "$(etcdctl_keys /rollout/holders/)"
'

test_expect_success 'killed -9 during the config hook' '
	echo 30 >w1/config.sleep &&
	orch trigger_update v3 &&
	wait_for "status_is w1 puppet running && test -n \"\$(hook_pgid w1 config)\"" 10 &&
	crash w1 config &&
	status_is w1 puppet running &&
	consistent w1 &&
	expired w1 &&
	echo 0 >w1/config.sleep &&
	restart w1 v3 &&
	grep -q "interrupted" w1/log &&
	status_is w1 puppet success && status_is w1 validation success &&
	consistent w1
'

test_expect_success 'killed -9 between config and validation (during the validate hook)' '
	echo 30 >w1/validate.sleep &&
	orch trigger_update v4 &&
	# puppet/running covers the validate hook: the validation state moves
	# once, when it is known
	wait_for "status_is w1 puppet running && test -n \"\$(hook_pgid w1 validate)\"" 10 &&
	crash w1 validate &&
	consistent w1 &&
	test "$(cat w1/current_version)" = v3 &&
	expired w1 &&
	echo 0 >w1/validate.sleep &&
	restart w1 v4 &&
	status_is w1 puppet success && status_is w1 validation success &&
	consistent w1 &&
	! running_at w1 v3
'

# services_settled NODE  — what the last run set off is over: the hiera file
# holds the node's own services as healthy (published once validation
# succeeded, a catalog change that timing.quiet debounces), and the services
# hook ran for the last rewrite of that file and is not running.
services_settled () {
	grep -q "^healthy_services::common::" "$TRASH/$1/services.yaml" &&
	test ! -e "$TRASH/$1/state/services-pending" &&
	grep -E "hiera file .* updated|hook .services. (started|exited)" "$TRASH/$1/log" |
		tail -n 1 | grep -q "hook .services. exited"
}

# The services hook killed must be the one this test's catalog change starts.
# The test before ends as soon as running_version/w1 says v4, and the
# node has then just published its services as healthy: the services run of
# that change starts timing.quiet (0.2 s) later.  When it started between the
# echo and the put below (etcdctl is slow under load), it slept 30 s too, the
# wait saw it at once, and the hiera file did not hold 10.9.9.9 yet (a flake:
# 2 runs in 4 in the report, and reproduced every time with a 0.4 s pause
# before the put).  So: wait until that is over, and wait for both.
test_expect_success 'killed -9 during the services hook: restarted at once, it runs it again' '
	wait_for "services_settled w1" 10 &&
	echo 30 >w1/services.sleep &&
	etcdctl_put /available_services/db/other "{\"addresses\":{\"eth0\":\"10.9.9.9\"},\"healthy\":true}" &&
	wait_for "grep -q 10.9.9.9 w1/services.yaml && test -n \"\$(hook_pgid w1 services)\"" 10 &&
	n=$(count_lines w1/services.count) &&
	crash w1 services &&
	consistent w1 &&
	echo 0 >w1/services.sleep &&
	# before the lease expired: the catalog, and so the hiera file, are
	# the same at the restart, yet the interrupted services run is owed
	start_node w1 &&
	wait_for "test \$(count_lines w1/services.count) -gt $n" 10 &&
	grep -q "services hook was interrupted" w1/log &&
	wait_for "test ! -e w1/state/services-pending" 10 &&
	node_at w1 v4 &&
	consistent w1
'

test_expect_success 'a restart after the lease expired, at the desired version: running_version is back' '
	crash w1 &&
	expired w1 &&
	test -z "$(etcdctl_keys /running_version/)" &&
	n=$(count_lines w1/config.count) &&
	restart w1 v4 &&
	test "$(count_lines w1/config.count)" = "$n" &&
	consistent w1 &&
	orch check_single_version v4
'

stop_all_nodes
test_done
