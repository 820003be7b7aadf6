#!/bin/bash
#
# A snapshot read (etcd_snapshot_start: one txn of ranges, then pages pinned to
# its revision) is one revision, while another client keeps writing.  The
# cases are C, in tests/unit/test_etcd_snapshot.c, run here against a real
# etcd.

test_description='a snapshot read of many pages is one revision'
. "$(dirname "$0")/test-lib.sh"
start_etcd

test_etcd_driver test_etcd_snapshot snapshot 45

test_done
