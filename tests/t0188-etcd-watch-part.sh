#!/bin/bash
#
# A range added to a running watch stream and removed from it: the daemon's
# stream keeps its request body open, so that the slot queue's watch is one
# more create on it rather than a stream of its own (etcd_watch_add).  The
# cases are C, in tests/unit/test_etcd_watch_part.c, run here against a real
# etcd, which this script restarts when the driver asks (its last cases: a
# stream whose body is paused sees etcd hang up, and resumes every range).

test_description='a watch stream takes ranges added and removed while it runs'
. "$(dirname "$0")/test-lib.sh"
start_etcd

test_expect_success 'the watch-part driver passes against a real etcd, restarted under it' '
	test -x "$REPO_ROOT/tests/unit/test_etcd_watch_part" &&
	mkdir -p sig && rm -f sig/restart sig/restarted &&
	( ORCHESTRATE_TEST_ETCD=$ETCD_URL ORCHESTRATE_TEST_RESTART_DIR=$TRASH/sig \
		"$REPO_ROOT/tests/unit/test_etcd_watch_part" >out 2>&1; echo $? >rc ) &
	wait_for "test -f sig/restart || test -f rc" 60 &&
	if test -f sig/restart; then restart_etcd && touch sig/restarted; fi &&
	wait_for "test -f rc" 60 &&
	{ test "$(cat rc)" = 0 || { cat out; false; }; }
'

test_expect_success 'every case ran and none failed' '
	sed "s/^/# /" out &&
	! grep "^not ok" out &&
	test "$(grep -c "^ok" out)" -ge 14
'

test_done
