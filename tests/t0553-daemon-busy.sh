#!/bin/sh
test_description='orchestrated: etcd refusing writes as "too many requests" slows the node, and nothing is asked twice'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# etcd refuses a proposal at once, with "too many requests", while it has
# committed over 5,000 entries more than it applied.  Such a write was never
# applied: the node sends it again after its backoff without first asking
# whether it was (a read etcd would answer behind the same backlog), and
# the refusal widens the node's pace however fast it came (node_pace.c,
# node_write.c).  The slow proxy answers the next writes as etcd 3.4.23
# does then (its file busy: how many), and they never reach etcd.

test_have_orchestrated
start_etcd
start_slow_proxy

test_expect_success 'setup: p1 through the proxy, at v1' '
	start_node_through_proxy p1 10
'

test_expect_success 'a run whose writes are refused twice: sent again, not asked about, and paced' '
	echo 2 >busy &&
	etcdctl_put /current_version v2 &&
	wait_for "node_at p1 v2" 30 &&
	test ! -e busy &&
	test "$(grep -c "refused a write: too many requests" proxy.log)" = 2 &&
	test "$(grep -c "etcd refused .* unapplied: .*too many requests; sending it again in" p1/log)" = 2 &&
	grep -q "etcd is behind (it refused a write: too many requests)" p1/log &&
	! grep -q "asking etcd whether it was applied" p1/log &&
	! grep -q "was not applied: sending it again" p1/log
'

test_expect_success 'the run went once, and its writes landed once' '
	test "$(grep -c "config-start p1 v2" runs.log)" = 1 &&
	test "$(key_version /status/puppet/success/p1)" = 1
'

test_expect_success 'a registration whose txn is refused is tried again, and registers' '
	stop_node p1 &&
	echo 1 >busy &&
	( ETCD_URL=$PROXY_URL && start_node p1 ) &&
	test ! -e busy &&
	test "$(grep -c "refused a write: too many requests" proxy.log)" = 3 &&
	grep -q "registration failed: .*too many requests, retrying in" p1/log &&
	wait_for "node_at p1 v2" 20
'

test_expect_success 'orchestrate trigger_update refused so: exits 69, says what to do, nothing written' '
	echo 1 >busy &&
	test_expect_code 69 orch --etcd "$PROXY_URL" trigger_update v3 2>err &&
	cat err &&
	grep -q "too many requests (etcd is far behind applying writes and did not apply this one: try again in a while)" err &&
	test "$(etcdctl_get /current_version)" = v2
'

test_expect_success '...and with another member, it goes there' '
	echo 1 >busy &&
	orch --etcd "$PROXY_URL,$ETCD_URL" trigger_update v3 &&
	test ! -e busy &&
	test "$(etcdctl_get /current_version)" = v3
'

test_expect_success 'cleanup' '
	stop_all_nodes
'

test_done
