#!/bin/bash
#
# Memory, with passwords: a daemon under valgrind's memcheck through what a
# token's loss costs the etcd client, on two etcds of this test.
#
# - Simple tokens (etcd "es"): etcd restarts and forgets the token; the
#   daemon's stream is refused, the login waits for its moment of
#   etcd.login_spread with the stream parked on it, and a trigger set right
#   after is run once the stream is back.
# - JSON Web Tokens (etcd "ej", 8 s tokens): the daemon logs in again before
#   each token expires (etcd.token_keep), and after a user is added, which
#   makes etcd refuse every token, its requests wait for the spread login.
#
# Each daemon must exit 0 with no memcheck error and no definite or indirect
# leak.  t0907 and t0908 test what these paths do; this test, that they free
# what they take.

test_description='orchestrated under valgrind with passwords: a lost token costs no leak'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrated
test_have_valgrind
test_have_jwt_keys 8

# node_auth NAME KEEP  — NAME's config with etcd.token_keep KEEP and a 2 s
# etcd.login_spread.
node_auth () {
	node_setup "$1" &&
	node_etcd_option "$1" token_keep "$2" &&
	node_etcd_option "$1" login_spread 2
}

# said NAME  — how many times NAME said when it logs in again after a refusal.
said () {
	grep -c "logging in again in" "$TRASH/$1/log" || :
}

# renewed NAME  — how many times NAME logged in again before its token expired.
renewed () {
	grep -c "before this host's token expires" "$TRASH/$1/log" || :
}

start_etcd es
auth_setup s1 s1pw

test_expect_success 'simple tokens: s1 at v1 under valgrind' '
	node_auth s1 60 &&
	start_node_valgrind s1 $AUTH &&
	wait_for "node_at s1 v1" 60
'

test_expect_success 'etcd restarts: s1 logs in at its moment, then runs v2' '
	restart_etcd es &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at s1 v2" 90 || { cat s1/log >&2; return 1; }
	test "$(said s1)" = 1
'

test_expect_success 'SIGTERM: s1 exits 0, memcheck reports no error and no leak' '
	stop_node_valgrind s1
'

# The second etcd is a fresh one: etcdctl stops logging in as root until
# auth_setup has made root there.
unset ETCDCTL_USER
ETCD_EXTRA_ARGS=$JWT_ETCD_ARGS
start_etcd ej
auth_setup j1 j1pw

test_expect_success 'JWTs: j1 at v1 under valgrind, and renews its token twice' '
	node_auth j1 6 &&
	start_node_valgrind j1 $AUTH &&
	wait_for "node_at j1 v1" 60 &&
	wait_for "test \$(renewed j1) -ge 2" 40
'

# Right after a renewal, so that the next (at least 5 s later) cannot take a
# token after the change before j1 writes.
test_expect_success 'a user added: j1 says its moment, then runs v2' '
	before=$(renewed j1) &&
	wait_for "test \$(renewed j1) -gt $before" 20 &&
	etcdctl_ user add zz:zzpw >/dev/null &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at j1 v2" 90 || { cat j1/log >&2; return 1; }
	test "$(said j1)" = 1
'

test_expect_success 'SIGTERM: j1 exits 0, memcheck reports no error and no leak' '
	stop_node_valgrind j1
'

stop_all_nodes
test_done
