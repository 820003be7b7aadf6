#!/bin/bash
#
# issue 9, the command line: status filters, status HOST in full, the
# terminal's width, DETAIL preferring an error line, the policy and progress
# per group in the header; pause and resume saying what they matched, pause
# --list; the global --host refused after a command; verify_hosts --wait
# timing out with one line, and drawing progress only on a terminal.

test_description='status filters and header, pause --list, --host footgun, wait progress'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

# host NAME VERSION PUPPET VALIDATION GROUP [DETAIL]
host () {
	now=$(date +%s)
	etcdctl_put "/alive/$1" "{\"time\":$now,\"version\":\"$2\",\"pid\":1}" &&
	etcdctl_put "/status/provisioned/success/$1" "{\"time\":$now}" &&
	etcdctl_put "/status/puppet/$3/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":1,\"detail\":\"${6:-}\"}" &&
	etcdctl_put "/status/validation/$4/$1" "{\"time\":$now,\"version\":\"$2\",\"exit_code\":0}" &&
	etcdctl_put "/running_version/$1" "{\"version\":\"$2\",\"time\":$now}" &&
	etcdctl_put "/groups/$5/$1" ""
}

long_error="Error: Could not find class ::nosuch for web1 on node web1 and this message goes on well past eighty columns to the end"
test_expect_success 'setup' '
	etcdctl_put /current_version v2 &&
	host web1 v1 failed success dc1 "Notice: compiling\\n$long_error\\nNotice: Applied catalog in 1.2 seconds" &&
	host web2 v2 success success dc1 &&
	host db1 v1 pending success dc2 "waiting for mysql: 0 of 1 hosts" &&
	host db2 v1 success success dc2 &&
	host app1 v2 success success dc2 &&
	orch rollout_policy set --max-parallel 2 --groups dc1,dc2
'

test_expect_success 'failed first, then waiting, then behind, then the rest' '
	orch status >out &&
	cat out &&
	sed -n "/^HOST /,/^\$/p" out | sed -n "2,6p" | awk "{ print \$1 }" >order &&
	printf "%s\n" web1 db1 db2 app1 web2 >expect &&
	test_cmp expect order
'

test_expect_success 'the header: policy, progress per group, failed and waiting' '
	grep "^policy: max_parallel 2 per group, groups dc1 > dc2\$" out &&
	grep "^progress: dc1 1/2, dc2 1/3\$" out &&
	grep "^hosts: 5, behind 3, alive 5, unaccounted 0; failed 1, waiting 1\$" out
'

test_expect_success 'DETAIL prefers the error line over the last line' '
	grep "^web1 .*Error: Could not find" out &&
	! grep "^web1 .*Applied catalog" out
'

test_expect_success 'the width: $COLUMNS when not a terminal, 80 without' '
	COLUMNS=200 orch status >wide &&
	grep "^web1 .*to the end\$" wide &&
	awk "length(\$0) > 200 { bad = 1 } END { exit bad }" wide &&
	env -u COLUMNS orchestrate --config "$ORCH_CONFIG" status >narrow &&
	awk "length(\$0) > 80 { bad = 1 } END { exit bad }" narrow &&
	! grep "to the end" narrow
'

test_expect_success 'the width of a terminal (TIOCGWINSZ), under script' '
	command -v script >/dev/null || { echo "# skip: no script(1)"; exit 0; }
	script -qec "stty cols 250; orchestrate --config $ORCH_CONFIG status" /dev/null >width.out </dev/null &&
	cat -v width.out &&
	grep -q "to the end" width.out
'

test_expect_success 'filters: --failed, --behind, --group, --host, host names, --summary' '
	orch status --failed >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	echo web1 >expect && test_cmp expect got &&
	grep -q "(1 of 5 hosts shown)" f &&
	orch status --behind >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	printf "%s\n" web1 db1 db2 >expect && test_cmp expect got &&
	orch status --group dc1 >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	printf "%s\n" web1 web2 >expect && test_cmp expect got &&
	orch status --host db2 >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	echo db2 >expect && test_cmp expect got &&
	orch status db2 app1 >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	printf "%s\n" db2 app1 >expect && test_cmp expect got &&
	orch status --group dc2 --behind >f && sed -n "/^HOST /,/^\$/p" f | awk "NR > 1 && NF && !/shown/ { print \$1 }" >got &&
	printf "%s\n" db1 db2 >expect && test_cmp expect got &&
	orch status --summary >f && ! grep -q "^HOST " f && grep -q "^progress:" f && grep -q "^puppet:" f
'

test_expect_success 'status HOST shows one host in full' '
	orch status web1 >h &&
	cat h &&
	grep "^host: *web1\$" h &&
	grep "^version: *v1 (desired v2: behind)\$" h &&
	grep "^alive: *yes, heard .*pid 1" h &&
	grep "^puppet: *failed, .*exit 1, at v1" h &&
	grep "^  | Notice: Applied catalog" h &&
	grep "^  | Error: Could not find class .* to the end\$" h &&
	grep "^validation: *success" h &&
	grep "^provisioned: *success" h &&
	orch --json status web1 >h.json && json_ok h.json &&
	test_expect_code 1 orch status nosuchhost 2>err &&
	test_one_line err &&
	grep -q "no host .nosuchhost." err &&
	test_expect_code 64 orch status ../x 2>err && test_one_line err
'

test_expect_success 'pause --group with nobody in it warns and still sets it' '
	orch pause --group nosuchgroup --reason typo >out 2>err &&
	grep -q "warning: no host is registered in group .nosuchgroup." err &&
	orch pause --list >list &&
	grep "^group  *nosuchgroup .* typo\$" list
'

test_expect_success 'pause says what it matched' '
	orch pause --group dc2 >out 2>err &&
	grep -q "pausing group .dc2.: 3 hosts registered" out &&
	test_must_be_empty err &&
	orch pause --host web1 >out 2>err &&
	grep -q "pausing host .web1." out && test_must_be_empty err &&
	orch pause --host nobody >out 2>err &&
	grep -q "warning: host .nobody. is not registered" err
'

test_expect_success 'pause --list, pauses and --json list them all' '
	orch pauses >list &&
	cat list &&
	test_line_count = 5 list &&
	orch --json pause --list >pl.json && json_ok pl.json &&
	python3 -c "
import json
d = json.load(open(\"pl.json\"))
got = sorted((p[\"scope\"], p[\"name\"]) for p in d[\"pauses\"])
assert got == [(\"group\", \"dc2\"), (\"group\", \"nosuchgroup\"), (\"host\", \"nobody\"), (\"host\", \"web1\")], got
" &&
	test_expect_code 64 orch pause --list --group dc1
'

test_expect_success 'resume of something not paused says so and exits 0' '
	orch resume --host nobody >out 2>err &&
	grep -q "resumed host .nobody." out &&
	orch resume --host nobody >out 2>err &&
	grep -q "host .nobody. was not paused" err &&
	orch resume --group nosuchgroup && orch resume --group dc2 && orch resume --host web1 &&
	orch pauses >list && grep -q "^no pause set\$" list
'

test_expect_success 'the global --host after a command is refused (64)' '
	test_expect_code 64 orch get_failures --host web1 2>err &&
	test_one_line err &&
	grep -q "etcd.s host" err && grep -q "before the command" err &&
	test_expect_code 64 orch current_version --port 2379 2>err &&
	grep -q "etcd.s port" err
'

test_expect_success 'verify_hosts --wait times out with one line, no progress in a pipe' '
	test_expect_code 1 orch verify_hosts v2 web1 web2 --wait 1 >out 2>err &&
	echo web1 >expect && test_cmp expect out &&
	echo "orchestrate: timed out after 1 s: 1 host missing" >expect &&
	test_cmp expect err
'

test_expect_success 'check_single_version --wait times out with one line' '
	test_expect_code 1 orch check_single_version v2 --wait 1 2>err &&
	test_one_line err &&
	grep -q "timed out after 1 s: 2 hosts at v2, 3 hosts at other versions" err
'

test_expect_success 'progress on a terminal (script)' '
	command -v script >/dev/null || { echo "# skip: no script(1)"; exit 0; }
	script -qec "orchestrate --config $ORCH_CONFIG verify_hosts v2 web1 web2 --wait 1" /dev/null >tty.out </dev/null || :
	cat -v tty.out &&
	grep -q "1/2 hosts at v2" tty.out &&
	grep -q "timed out after 1 s: 1 host missing" tty.out
'

test_expect_success 'orchestrated --check-config warns about a missing or non-executable hook' '
	test -x "$REPO_ROOT/bin/orchestrated" || { echo "# skip: no orchestrated"; exit 0; }
	printf "#!/bin/sh\nexit 0\n" >ok-hook && chmod +x ok-hook &&
	printf "#!/bin/sh\nexit 0\n" >noexec-hook && chmod -x noexec-hook &&
	cat >hooks.yaml <<-EOF &&
	hooks:
	  config: $TRASH/ok-hook
	  validate: $TRASH/noexec-hook
	  services: $TRASH/missing-hook
	EOF
	orchestrated --check-config --config hooks.yaml >out 2>err &&
	grep -q "configuration OK" out &&
	grep -q "validate hook .*noexec-hook. is not executable" err &&
	grep -q "services hook .*missing-hook.: No such file" err &&
	! grep -q "config hook" err
'

test_done
