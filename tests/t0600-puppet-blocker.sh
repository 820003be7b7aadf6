#!/bin/sh
test_description='puppet: orchestrate::service_blocker holds resources until a service is published'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
. "$TEST_DIRECTORY/lib-puppet.sh"
start_etcd

# blocker.pp TIMEOUT  — a file that requires a blocker on one host of mysql.
write_manifest () {
	cat >blocker.pp <<EOF2
orchestrate::service_blocker { 'mysql':
  count   => 1,
  timeout => $1,
  config  => '$ORCH_CONFIG',
  etcd    => '$ETCD_URL',
  binary  => '$REPO_ROOT/bin/orchestrate',
}
file { '$TRASH/after':
  content => "after mysql\n",
  require => Orchestrate::Service_blocker['mysql'],
}
EOF2
}

test_expect_success 'a timeout fails the blocker, names the service and the count, and skips the file' '
	write_manifest 2 &&
	{ puppet_apply blocker.pp >out 2>&1 || rc=$?; } &&
	cat out &&
	case "${rc:-0}" in 4|6) ;; *) echo "puppet exited ${rc:-0}, wanted 4 or 6"; false ;; esac &&
	grep "timed out waiting for 1 host of mysql" out | grep -q "saw 0" &&
	grep -q "Skipping because of failed dependencies" out &&
	test ! -e after
'

test_expect_success 'the blocker lets the file through once another process publishes mysql' '
	write_manifest 30 &&
	( sleep 2 && orch publish_service mysql --address eth0=10.0.0.9 ) &
	start=$(now_ms) &&
	{ puppet_apply blocker.pp >out 2>&1 || rc=$?; } &&
	end=$(now_ms) &&
	cat out &&
	wait &&
	test "${rc:-0}" = 2 &&
	test "$(cat after)" = "after mysql" &&
	test $((end - start)) -ge 2000 &&
	etcdctl_get /available_services/mysql/$(hostname) | grep -q 10.0.0.9
'

test_expect_success 'once mysql is there, a second run changes nothing (the unless check)' '
	rm -f after &&
	{ puppet_apply blocker.pp >out 2>&1 || rc=$?; } &&
	cat out &&
	test "${rc:-0}" = 2 && test -f after &&
	! grep -q "Exec\[orchestrate wait_for_service" out
'

test_done
