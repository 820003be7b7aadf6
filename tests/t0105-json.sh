#!/bin/bash
#
# --json: machine-readable output for every read command (orchestrate(1)), with the
# same exit codes as without it.

test_description='--json output of every read command'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

test_expect_success 'setup: a small fleet' '
	orch trigger_update v1 &&
	orch local_version v1 &&
	orch --hostname h1 update_own_info --version v1 --interval 10 &&
	orch --hostname h1 update_own_status puppet 0 &&
	orch --hostname h1 update_own_status validation 0 &&
	orch provision h1 &&
	orch --hostname h1 publish_service glance --address eth0=10.0.0.1
'

while IFS='|' read -r code cmdline; do
	test_expect_success "--json $cmdline: exit $code, valid JSON" "
		test_expect_code $code orch --hostname h1 --json $cmdline >out.json &&
		json_ok out.json &&
		test_one_line out.json
	"
done <<'EOF'
0|current_version
0|local_version
1|pending_update
0|ping
0|running_versions
0|hosts_at_version v1
0|verify_hosts v1 h1
1|verify_hosts v1 h1 h2
0|check_single_version v1
1|get_failures
1|get_failures --hosts
0|local_health
0|get_services
0|status
EOF

test_expect_success '--json verify_hosts names the missing host' '
	test_expect_code 1 orch --json verify_hosts v1 h1 h2 >out.json &&
	grep "\"h2\"" out.json
'

test_expect_success '--json pending_update says both versions' '
	orch trigger_update v2 &&
	test_expect_code 0 orch --json pending_update >out.json &&
	json_ok out.json &&
	grep "\"v1\"" out.json &&
	grep "\"v2\"" out.json
'

test_expect_success '--json errors still go to stderr, stdout stays parseable or empty' '
	test_expect_code 69 orch --json --etcd "$(dead_url)" current_version >out.json 2>err &&
	test -s err &&
	{ ! test -s out.json || json_ok out.json; }
'

test_done
