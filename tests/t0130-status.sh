#!/bin/bash
#
# Build states: update_own_status's mapping and one-state-per-type txn,
# get_failures, local_health, status, provision/decommission, pause/resume.

test_description='update_own_status, get_failures, local_health, status, provision, pause'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

# keys of one host under status/TYPE/, whatever the state
state_keys () {
	etcdctl_keys "/status/$1/" | grep "/$2\$"
}

# check_state TYPE HOST STATE: exactly one key, under STATE
check_state () {
	state_keys "$1" "$2" >keys &&
	echo "/status/$1/$3/$2" >expect.keys &&
	test_cmp expect.keys keys
}

for pair in 0:success 2:success 1:failed 4:failed 6:failed -1:pending 0:success \
	running:running failed:failed pending:pending success:success; do
	result=${pair%%:*} state=${pair#*:}
	test_expect_success "puppet result $result moves the host to $state, one key" '
		orch --hostname h1 update_own_status puppet "$result" &&
		check_state puppet h1 "$state"
	'
done

test_expect_success 'the value holds time, version, exit_code and detail' '
	orch local_version v5 &&
	orch --hostname h1 update_own_status puppet 4 --detail "compile error" &&
	check_state puppet h1 failed &&
	etcdctl_get /status/puppet/failed/h1 >value &&
	json_ok value &&
	test "$(etcdctl_json_field /status/puppet/failed/h1 exit_code)" = 4 &&
	test "$(etcdctl_json_field /status/puppet/failed/h1 detail)" = "compile error" &&
	etcdctl_json_field /status/puppet/failed/h1 time | grep "^[0-9][0-9]*$" &&
	test "$(etcdctl_json_field /status/puppet/failed/h1 version)" = v5 &&
	rm "$ORCHESTRATE_LOCAL_VERSION_FILE"
'

for pair in 0:success 1:failed 0:success 3:failed running:running 255:failed success:success; do
	result=${pair%%:*} state=${pair#*:}
	test_expect_success "validation result $result moves the host to $state, one key" '
		orch --hostname h1 update_own_status validation "$result" &&
		check_state validation h1 "$state"
	'
done

test_expect_success 'puppet and validation states are independent' '
	check_state puppet h1 failed &&
	check_state validation h1 success
'

test_expect_success 'a stale key written by hand under another state is removed' '
	etcdctl_put /status/puppet/running/h1 "{}" &&
	etcdctl_put /status/puppet/pending/h1 "{}" &&
	orch --hostname h1 update_own_status puppet 0 &&
	check_state puppet h1 success
'

test_expect_success 'the change is one revision (put and deletes together)' '
	orch --hostname h1 update_own_status puppet 1 &&
	etcdctl_ get -w json /status/puppet/failed/h1 >v.json &&
	rev=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])" <v.json) &&
	etcdctl_ get -w json /status/puppet/failed/h1 >h.json &&
	head=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"header\"][\"revision\"])" <h.json) &&
	test "$rev" = "$head"
'

test_expect_success 'concurrent changes of one host leave exactly one state' '
	for r in 0 1 -1 running 2 4 failed 6 0 1 pending 2; do
		orch --hostname hc update_own_status puppet "$r" &
	done 2>/dev/null;
	wait;
	state_keys puppet hc >keys &&
	cat keys &&
	test_line_count = 1 keys
'

test_expect_success 'other hosts are not touched by a change' '
	orch --hostname h2 update_own_status puppet 0 &&
	orch --hostname h1 update_own_status puppet 2 &&
	check_state puppet h2 success &&
	orch --hostname h1x update_own_status puppet 1 &&
	orch --hostname h1 update_own_status puppet 0 &&
	check_state puppet h1x failed
'

test_expect_success 'detail keeps quotes, newlines and tabs' '
	d=$(printf "line one\n\"quoted\"\ttab\\\\back") &&
	orch --hostname h1 update_own_status puppet 1 --detail "$d" &&
	etcdctl_get /status/puppet/failed/h1 >value &&
	python3 -c "
import json, sys
v = json.load(open(\"value\"))
assert v[\"detail\"] == sys.argv[1], repr(v[\"detail\"])
" "$d"
'

test_expect_success 'detail is cut to 4096 bytes, keeping the tail' '
	python3 -c "
import sys
sys.stdout.write(\"\".join(\"line %05d of the output\\n\" % i for i in range(400)) + \"END\")
" >big &&
	test $(wc -c <big) -gt 9000 &&
	orch --hostname h1 update_own_status puppet 1 --detail "$(cat big)" &&
	etcdctl_get /status/puppet/failed/h1 >value &&
	python3 -c "
import json
v = json.load(open(\"value\"))[\"detail\"].encode()
big = open(\"big\", \"rb\").read()
assert 0 < len(v) <= 4096, len(v)
assert len(v) >= 3000, len(v)
assert big.endswith(v), v[-60:]
"
'

test_expect_success 'update_own_status refuses a state the type does not have (64)' '
	etcdctl_dump >before &&
	test_expect_code 64 orch --hostname h1 update_own_status validation pending 2>err &&
	test_one_line err &&
	test_expect_code 64 orch --hostname h1 update_own_status puppet banana 2>err &&
	grep banana err &&
	test_expect_code 64 orch --hostname h1 update_own_status nosuchtype 0 2>err &&
	grep nosuchtype err &&
	etcdctl_dump >after &&
	test_cmp before after
'

# --- get_failures ----------------------------------------------------------

test_expect_success 'setup: a fleet with failures and unaccounted hosts' '
	etcdctl_ del --prefix "" >/dev/null &&
	for h in ok1 f1 g1 g2 u1 u2 u3 p1; do
		orch provision $h || exit 1
	done &&
	for h in ok1 f1 g1 g2 p1; do
		etcdctl_put /alive/$h "{\"time\":1,\"version\":\"v1\",\"pid\":1}" || exit 1
	done &&
	orch --hostname ok1 update_own_status puppet 0 &&
	orch --hostname ok1 update_own_status validation 0 &&
	orch --hostname f1 update_own_status puppet 1 &&
	orch --hostname f1 update_own_status validation 0 &&
	orch --hostname g1 update_own_status puppet 2 &&
	orch --hostname g1 update_own_status validation 1 &&
	orch --hostname g2 update_own_status puppet 0 &&
	etcdctl_put /status/validation/failed/g2 "{\"time\":1,\"version\":\"v1\",\"exit_code\":1,\"detail\":\"\"}" &&
	orch --hostname p1 update_own_status puppet -1 &&
	check_state puppet p1 pending
'

test_expect_success 'provision writes status/provisioned/success/HOST' '
	etcdctl_exists /status/provisioned/success/u1
'

test_expect_success 'get_failures counts puppet failures, validation failures, unaccounted hosts' '
	test_expect_code 1 orch get_failures >out &&
	cat out &&
	grep -w 1 out &&
	grep -w 2 out &&
	grep -w 3 out
'

test_expect_success 'get_failures --hosts lists exactly the failed and unaccounted hosts' '
	test_expect_code 1 orch get_failures --hosts >out &&
	cat out &&
	for h in f1 g1 g2 u1 u2 u3; do
		grep -w "$h" out || { echo "missing $h"; exit 1; }
	done &&
	! grep -w ok1 out &&
	! grep -w p1 out
'

test_expect_success 'get_failures --json is valid JSON' '
	test_expect_code 1 orch --json get_failures >out.json &&
	json_ok out.json &&
	test_expect_code 1 orch --json get_failures --hosts >out.json &&
	json_ok out.json &&
	grep "\"u3\"" out.json
'

test_expect_success 'a host that comes alive is no longer unaccounted' '
	etcdctl_put /alive/u1 "{\"time\":1,\"version\":\"v1\",\"pid\":1}" &&
	test_expect_code 1 orch get_failures --hosts >out &&
	! grep -w u1 out &&
	grep -w u2 out
'

test_expect_success 'get_failures: 0 when nothing failed (pending is not a failure)' '
	etcdctl_ del --prefix /status/puppet/failed/ >/dev/null &&
	etcdctl_ del --prefix /status/validation/failed/ >/dev/null &&
	for h in u2 u3; do
		etcdctl_put /alive/$h "{\"time\":1,\"version\":\"v1\",\"pid\":1}" || exit 1
	done &&
	orch get_failures >out &&
	cat out &&
	orch get_failures --hosts >out &&
	test_must_be_empty out
'

# --- local_health ---------------------------------------------------------------

test_expect_success 'local_health: 0 when puppet and validation succeeded' '
	orch --hostname ok1 local_health
'

test_expect_success 'local_health: 1 when puppet failed' '
	orch --hostname f1 update_own_status puppet 6 &&
	test_expect_code 1 orch --hostname f1 local_health
'

test_expect_success 'local_health: 1 when validation failed' '
	orch --hostname ok1 update_own_status validation 1 &&
	test_expect_code 1 orch --hostname ok1 local_health &&
	orch --hostname ok1 update_own_status validation 0 &&
	orch --hostname ok1 local_health
'

test_expect_success 'local_health: 1 when pending, and 1 for a host with no state' '
	test_expect_code 1 orch --hostname p1 local_health &&
	test_expect_code 1 orch --hostname nobody local_health
'

# One sanitiser for every human output (render_sanitize()): status always
# cleaned a detail, local_health -v printed its bytes raw, so a hook's output
# could clear the operator's screen or retitle the terminal.
test_expect_success 'local_health -v shows a detail'"'"'s control bytes, never sends them' '
	detail=$(printf "line one\nboom \033[2J\033]0;owned\007 \302\233""31m done") &&
	orch --hostname esc1 update_own_status puppet 1 --detail "$detail" &&
	test_expect_code 1 orch --hostname esc1 -v local_health >out &&
	! grep -q "$(printf "\033")" out &&
	! grep -q "$(printf "\007")" out &&
	! grep -q "$(printf "\302\233")" out &&
	grep -F "line one" out &&
	grep -F "boom \x1b[2J\x1b]0;owned\x07 \xc2\x9b31m done" out &&
	test_expect_code 1 orch --hostname esc1 local_health --json >json &&
	grep -F "owned" json
'

test_expect_success 'local_health uses the host name from the config file' '
	cat >conf.yaml <<-EOF2 &&
	node:
	  hostname: ok1
	EOF2
	orchestrate --config conf.yaml local_health &&
	cat >conf.yaml <<-EOF2 &&
	node:
	  hostname: f1
	EOF2
	test_expect_code 1 orchestrate --config conf.yaml local_health
'

# --- status -----------------------------------------------------------------

test_expect_success 'status prints a row for every host' '
	running_put ok1 v1 &&
	orch status >out &&
	cat out &&
	for h in ok1 f1 g1 g2 u1 u2 u3 p1; do
		grep -w "$h" out || { echo "missing $h"; exit 1; }
	done &&
	grep -w v1 out
'

test_expect_success 'status --json parses and names every host' '
	orch --json status >out.json &&
	json_ok out.json &&
	for h in ok1 f1 g1 g2 u1 u2 u3 p1; do
		grep "\"$h\"" out.json || { echo "missing $h"; exit 1; }
	done
'

test_expect_success 'status on an empty etcd exits 0' '
	orch --prefix /empty status >out &&
	orch --prefix /empty --json status >out.json &&
	json_ok out.json
'

# --- provision / decommission -------------------------------------------------

test_expect_success 'provision moves a host out of provisioned/failed' '
	etcdctl_put /status/provisioned/failed/n1 "{}" &&
	orch provision n1 &&
	check_state provisioned n1 success
'

test_expect_success 'setup: every kind of key for d1, and for d2 and d1x' '
	for h in d1 d2 d1x; do
		orch provision $h &&
		orch --hostname $h update_own_status puppet 0 &&
		orch --hostname $h update_own_status validation 1 &&
		orch --hostname $h update_own_info --version v1 --interval 60 &&
		etcdctl_put /alive/$h "{\"time\":1}" &&
		etcdctl_put /available_services/glance/$h "{\"addresses\":{\"eth0\":\"10.0.0.1\"},\"healthy\":true}" &&
		etcdctl_put /groups/dc1/$h "" &&
		etcdctl_put /rollout/holders/$h "{\"version\":\"v1\"}" &&
		orch pause --host $h || exit 1
	done &&
	etcdctl_keys "" | grep "/d1\$" >d1.keys &&
	test_line_count -ge 9 d1.keys
'

test_expect_success 'decommission removes every key of the host and nothing else' '
	etcdctl_dump | grep -v "/d1'"'"'" >others.before &&
	orch decommission d1 &&
	etcdctl_keys "" >keys &&
	! grep "/d1\$" keys &&
	etcdctl_dump >after &&
	test_cmp others.before after
'

test_expect_success 'decommission of an unknown host exits 0 and changes nothing' '
	etcdctl_dump >before &&
	orch decommission nosuchhost &&
	etcdctl_dump >after &&
	test_cmp before after
'

# --- pause / resume ------------------------------------------------------------

test_expect_success 'pause --reason writes pause/global' '
	orch pause --reason "kernel freeze" &&
	etcdctl_exists /pause/global &&
	test "$(etcdctl_json_field /pause/global reason)" = "kernel freeze"
'

test_expect_success 'pause --group writes pause/groups/GROUP' '
	orch pause --group dc1 --reason "dc1 maintenance" &&
	test "$(etcdctl_json_field /pause/groups/dc1 reason)" = "dc1 maintenance"
'

test_expect_success 'pause --host writes pause/hosts/HOST' '
	orch pause --host web1 &&
	etcdctl_exists /pause/hosts/web1
'

test_expect_success 'resume --group removes only that pause' '
	orch resume --group dc1 &&
	! etcdctl_exists /pause/groups/dc1 &&
	etcdctl_exists /pause/global &&
	etcdctl_exists /pause/hosts/web1
'

test_expect_success 'resume removes only the global pause' '
	orch resume &&
	! etcdctl_exists /pause/global &&
	etcdctl_exists /pause/hosts/web1
'

test_expect_success 'resume --host removes that host pause' '
	orch resume --host web1 &&
	! etcdctl_exists /pause/hosts/web1
'

test_expect_success 'resume when nothing is paused exits 0' '
	orch resume --host web1 &&
	orch resume
'

test_expect_success 'pause refuses invalid names with 64 and writes nothing' '
	etcdctl_dump >before &&
	test_expect_code 64 orch pause --group "a b" 2>err &&
	test_one_line err &&
	test_expect_code 64 orch pause --host "../global" 2>err &&
	test_expect_code 64 orch resume --host "x/y" 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'status says which hosts are paused and why' '
	orch update_own_status --hostname pz1 puppet 0 &&
	orch update_own_status --hostname pz2 puppet 0 &&
	etcdctl_put /groups/dcp/pz1 "" >/dev/null &&
	orch pause --group dcp --reason "power work" &&
	orch status >out &&
	grep "^pz1 .*paused: group dcp" out &&
	! grep "^pz2 .*paused" out &&
	orch --json status >json &&
	python3 -c "
import json
d = json.load(open(\"json\"))
hosts = {h[\"host\"]: h for h in d[\"hosts\"]}
assert hosts[\"pz1\"][\"paused\"] == \"group dcp: power work\", hosts[\"pz1\"]
assert hosts[\"pz2\"][\"paused\"] is None
assert d[\"totals\"][\"paused\"] == sum(1 for h in d[\"hosts\"] if h[\"paused\"])
" &&
	orch pause --reason freeze &&
	orch status >out &&
	grep "^pz2 .*paused: global: freeze" out &&
	orch resume && orch resume --group dcp &&
	orch --json status >json &&
	python3 -c "
import json
d = json.load(open(\"json\"))
hosts = {h[\"host\"]: h for h in d[\"hosts\"]}
assert hosts[\"pz1\"][\"paused\"] is None and hosts[\"pz2\"][\"paused\"] is None
"
'

test_done
