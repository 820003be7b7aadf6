#!/bin/sh
test_description='orchestrated: a keepalive stream etcd hung up on is noticed at once, not when a renewal gives up'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# A node renews its lease on one long keepalive request (etcd_keepalive.c).
# Once a renewal is sent the upload is paused, and libcurl does not end such
# a transfer when the server hangs up: it stops reading and lets go of the
# socket.  Unnoticed, the renewal waiting for its answer waits out its whole
# patience (here about 19 s: a TTL of 30 s, renewed every 10 s) before it
# goes as a request of its own; with a shorter TTL, or a slower cluster, the
# lease is lost meanwhile.  tools/slow-proxy stands between the node and a
# real etcd and cuts a reply off on demand.  (etcd restarted between two
# renewals is t0548's: the next renewal's write fails at once.)

test_have_orchestrated
start_etcd
start_slow_proxy

now () {
	date +%s.%N
}

# ttl_left  — the seconds etcd itself says s1's lease has left.
ttl_left () {
	etcdctl_ lease timetolive "$(cat lease.before)" |
		sed -n "s/.*remaining(\([0-9-]*\)s).*/\1/p"
}

# renewed_since T  — a renewal passed the proxy after T (seconds since the epoch).
renewed_since () {
	awk -v a="$1" '$2 == "renewal" && $1 > a { f = 1 } END { exit !f }' proxy.log
}

# first_after PATTERN T  — the time of the first proxy log line after T whose
# second field is PATTERN (empty when none).
first_after () {
	awk -v p="$1" -v a="$2" '$2 == p && $1 > a { print $1; exit }' proxy.log
}

test_expect_success 'setup: a node renewing every 10 s through the proxy' '
	start_node_through_proxy s1 30
'

test_expect_success 'a renewal whose reply is cut off: sent again as a request of its own within seconds' '
	mark=$(($(wc -l <s1/log) + 1)) &&
	t=$(now) &&
	wait_for "renewed_since $t" 15 &&
	# the next renewal is due 10 s after that one: cut its reply only
	sleep 8 &&
	echo once >lose &&
	wait_for "! test -e lose" 10 &&
	cut=$(first_after lost "$t") &&
	wait_for "test -n \"\$(first_after /v3/lease/keepalive $cut)\"" 25 &&
	again=$(first_after /v3/lease/keepalive "$cut") &&
	gap=$(awk -v a="$cut" -v b="$again" "BEGIN { printf \"%.1f\", b - a }") &&
	echo "the renewal went again $gap s after its reply was cut (its patience: about 19 s)" >measured &&
	awk -v g="$gap" "BEGIN { exit !(g < 5) }" &&
	sleep 1 &&
	test "$(etcdctl_lease_of /alive/s1)" = "$(cat lease.before)" &&
	! tail -n +$mark s1/log | grep -q "lease keepalive failed" &&
	! tail -n +$mark s1/log | grep -q "is gone"
'
test -f measured && say_comment <measured

test_expect_success 'the next renewal goes on a new stream, answered' '
	t=$(now) &&
	wait_for "renewed_since $t" 15 &&
	sleep 1 &&
	left=$(ttl_left) &&
	test "$left" -ge 27
'

stop_all_nodes
test_done
