#!/bin/sh
test_description='orchestrated: etcd refusing the renewal that opens a keepalive stream is an answer, not a broken stream'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# etcd 3.4 renews a lease only once it has applied what it committed, and
# refuses the renewal after a second of waiting.  On a running keepalive
# stream the refusal is a line of the 200 reply; on the renewal that opens a
# stream, the gateway answers with 503 and the same error object, and curl
# does not end that transfer (its upload is paused).  The node read nothing
# in a reply that was not a 200: the refused renewal waited out its
# patience, the lease's whole time left, and the lease could go with it
# (README, "A refusal is an answer").  tools/slow-proxy refuses the next N keepalive requests with the
# bytes etcd 3.4.23 sent.  TTL 30: renewals every 10 s, retries after a
# failure at a half to two thirds of the time left.

test_have_orchestrated
start_etcd
start_slow_proxy

test_expect_success 'setup: a node renewing every 10 s through the proxy' '
	start_node_through_proxy s1 30
'

test_expect_success 'renewals refused, one on a new stream: each an answer, none sent again at once' '
	mark=$(($(wc -l <s1/log) + 1)) &&
	t=$(date +%s.%N) &&
	# the node renews on a stream already open: cut it at the next renewal
	# (its reply lost, the renewal sent again as a request of its own, the
	# first refused), so that the next try opens a stream
	echo 2 >refuse &&
	echo once >lose &&
	wait_for "! test -e refuse" 45 &&
	wait_for "test \$(tail -n +$mark s1/log | grep -c \"waiting for the applied index took too long\") -ge 2" 5 &&
	# each refusal closed its stream; what followed within a second would
	# be the renewal sent again
	awk -v a="$t" "\$2 == \"refused\" && \$1 > a { print \$1 }" proxy.log >refused.at &&
	test $(wc -l <refused.at) = 2 &&
	while read -r at; do
		next=$(awk -v a="$at" "\$2 == \"/v3/lease/keepalive\" && \$1 > a { print \$1; exit }" proxy.log) &&
		if test -n "$next" && awk -v a="$at" -v b="$next" "BEGIN { exit !(b - a < 1) }"; then
			echo "a refused renewal went again $(awk -v a="$at" -v b="$next" "BEGIN { print b - a }") s later" &&
			exit 1
		fi
	done <refused.at
'

test_expect_success 'then the renewals ride one stream again, and the lease was never lost' '
	t=$(tail -n 1 refused.at) &&
	wait_for "test \$(proxy_count $t \" renewal\$\") -ge 2" 40 &&
	streams=$(proxy_count "$t" " /v3/lease/keepalive\$") &&
	echo "streams opened for the next two renewals: $streams" &&
	test "$streams" = 1 &&
	test "$(etcdctl_lease_of /alive/s1)" = "$(cat lease.before)" &&
	! grep -q "is gone" s1/log &&
	left=$(etcdctl_ttl_of /alive/s1 | cut -d" " -f1) &&
	test "$left" -ge 20
'

stop_all_nodes
test_done
