#!/bin/bash
#
# pending_update's four answers (orchestrate(1) "EXIT STATUS") and local_version.

test_description='pending_update and local_version'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

LV="$ORCHESTRATE_LOCAL_VERSION_FILE"

test_expect_success 'local_version sets the local version file' '
	orch local_version v1 &&
	test "$(cat "$LV")" = v1
'

test_expect_success 'local_version prints it' '
	echo v1 >expect &&
	orch local_version >actual &&
	test_cmp expect actual
'

test_expect_success 'local_version reads a file written by hand (trailing newline, no newline)' '
	printf "v2\n" >"$LV" &&
	echo v2 >expect &&
	orch local_version >actual &&
	test_cmp expect actual &&
	printf "v3" >"$LV" &&
	echo v3 >expect &&
	orch local_version >actual &&
	test_cmp expect actual
'

test_expect_success 'local_version needs no etcd' '
	ORCHESTRATE_ETCD=$(dead_url) orch local_version v4 &&
	test "$(cat "$LV")" = v4 &&
	ORCHESTRATE_ETCD=$(dead_url) orch local_version >actual &&
	echo v4 >expect &&
	test_cmp expect actual
'

test_expect_success 'local_version refuses an invalid version (64) and keeps the file' '
	cp "$LV" saved &&
	test_expect_code 64 orch local_version "../x" 2>err &&
	test_one_line err &&
	test_cmp saved "$LV"
'

test_expect_success '--local-version-file wins over ORCHESTRATE_LOCAL_VERSION_FILE' '
	orch --local-version-file other local_version w1 &&
	test "$(cat other)" = w1 &&
	test "$(cat "$LV")" = v4
'

test_expect_success 'paths.local_version of the config file is used without the env' '
	cat >conf.yaml <<-EOF2 &&
	paths:
	  local_version: $TRASH/from-config
	EOF2
	env -u ORCHESTRATE_LOCAL_VERSION_FILE orchestrate --config conf.yaml local_version c1 &&
	test "$(cat from-config)" = c1
'

test_expect_success 'local_version writes the file atomically (no temporary file left)' '
	mkdir lvdir &&
	orch --local-version-file lvdir/current_version local_version a1 &&
	orch --local-version-file lvdir/current_version local_version a2 &&
	ls -A lvdir >actual &&
	echo current_version >expect &&
	test_cmp expect actual
'

test_expect_success 'pending_update: 3 when no desired version is set' '
	orch local_version v1 &&
	test_expect_code 3 orch pending_update >out &&
	test_line_count -le 1 out
'

test_expect_success 'pending_update: 3 when neither desired nor local version exists' '
	rm -f "$LV" &&
	test_expect_code 3 orch pending_update
'

test_expect_success 'pending_update: 0 when the desired version differs, one line' '
	orch local_version v1 &&
	etcdctl_put /current_version v2 &&
	test_expect_code 0 orch pending_update >out &&
	test_line_count = 1 out
'

test_expect_success 'pending_update: 1 when up to date, one line' '
	orch local_version v2 &&
	test_expect_code 1 orch pending_update >out &&
	test_line_count = 1 out
'

test_expect_success 'pending_update: 0 when there is no local version yet' '
	rm -f "$LV" &&
	test_expect_code 0 orch pending_update
'

test_expect_success 'pending_update follows a change made by trigger_update' '
	orch local_version v2 &&
	orch trigger_update v3 &&
	test_expect_code 0 orch pending_update &&
	orch local_version v3 &&
	test_expect_code 1 orch pending_update
'

test_expect_success 'pending_update: 2 when etcd is unreachable and the local version is known' '
	orch local_version v3 &&
	test_expect_code 2 orch --etcd "$(dead_url)" pending_update
'

test_expect_success 'pending_update: 3 when etcd is unreachable and there is no local version' '
	rm -f "$LV" &&
	test_expect_code 3 orch --etcd "$(dead_url)" pending_update
'

test_expect_success 'pending_update: 2 with etcd stopped (unreachable, local known)' '
	orch local_version v3 &&
	stop_etcd &&
	test_expect_code 2 orch pending_update && rc=0 || rc=1
	restart_etcd &&
	test $rc = 0
'

test_expect_success 'pending_update works again after etcd restarts' '
	test_expect_code 1 orch pending_update
'

test_expect_success 'pending_update: an implausible desired version is not an update' '
	etcdctl_put /current_version "../../x" &&
	orch local_version v3 &&
	orch pending_update >out 2>err && rc=0 || rc=$?
	echo "exit $rc" &&
	test $rc -ne 0 && test $rc -lt 128
'

test_expect_success 'pending_update with an invalid local version file does not say "up to date"' '
	etcdctl_put /current_version v3 &&
	printf "../v3\n" >"$LV" &&
	orch pending_update >out 2>err && rc=0 || rc=$?
	echo "exit $rc" &&
	test $rc -ne 1 && test $rc -lt 128
'

test_done
