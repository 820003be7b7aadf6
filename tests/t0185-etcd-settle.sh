#!/bin/bash
#
# A write whose reply was lost is sent again settled (etcd_txn_settle): written
# once when the first send went through, written when it did not, refused when
# somebody else wrote its witness meanwhile; and asked about without writing
# (etcd_txn_applied_start) before it is sent again.  The cases are C, in
# tests/unit/test_etcd_settle.c, run here against a real etcd.

test_description='a resent txn is written once'
. "$(dirname "$0")/test-lib.sh"
start_etcd

DRIVER=$REPO_ROOT/tests/unit/test_etcd_settle

test_expect_success 'the settle driver passes against a real etcd' '
	test -x "$DRIVER" &&
	ORCHESTRATE_TEST_ETCD=$ETCD_URL "$DRIVER" >out 2>&1 ||
	{ cat out; false; }
'

test_expect_success 'every case ran and none failed' '
	cat out &&
	! grep "^not ok" out &&
	test "$(grep -c "^ok" out)" -ge 40
'

test_done
