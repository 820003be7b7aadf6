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

test_etcd_driver test_etcd_settle settle 40

test_done
