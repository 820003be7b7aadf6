#!/bin/bash
#
# A snapshot read (etcd_snapshot_start: one txn of ranges, then pages pinned to
# its revision) is one revision, while another client keeps writing.  The
# cases are C, in tests/unit/test_etcd_snapshot.c, run here against a real
# etcd.

test_description='a snapshot read of many pages is one revision'
. "$(dirname "$0")/test-lib.sh"
start_etcd

DRIVER=$REPO_ROOT/tests/unit/test_etcd_snapshot

test_expect_success 'the snapshot driver passes against a real etcd' '
	test -x "$DRIVER" &&
	ORCHESTRATE_TEST_ETCD=$ETCD_URL "$DRIVER" >out 2>&1 ||
	{ cat out; false; }
'

test_expect_success 'every case ran and none failed' '
	cat out &&
	! grep "^not ok" out &&
	test "$(grep -c "^ok" out)" -ge 45
'

test_done
