#!/bin/bash
#
# issue 20, item 4: the fleet's metrics.  `orchestrate status --prometheus`
# on a fleet seeded with etcdctl as daemons leave it, in turn converged, with
# a failed host under a budget and a waiting one, halted, with a host
# unaccounted and one that no daemon registered, and with hostile keys and
# values: the values of the series, `promtool check metrics` on each output
# (when promtool is installed), --output's atomic write, the refusals, and
# that the alert rules and their tests use only series the command writes
# (scripts/check-rules-series).

test_description='status --prometheus: the fleet as Prometheus metrics'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

RULES="$REPO_ROOT/contrib/prometheus/orchestrate.rules.yml"
RULES_TEST="$REPO_ROOT/contrib/prometheus/orchestrate.rules.test.yml"

# host NAME VERSION PUPPET VALIDATION GROUP [PUPPET-EXTRA-JSON [TIME]]  — a
# host as its daemon leaves it: alive, provisioned, its two states (the extra
# members go into the puppet state's value), its running version, its group.
host () {
	t=${7:-$(date +%s)}
	etcdctl_put "/alive/$1" "{\"time\":$t,\"version\":\"$2\",\"pid\":1}" &&
	etcdctl_put "/status/provisioned/success/$1" "{\"time\":$t}" &&
	etcdctl_put "/status/puppet/$3/$1" "{\"time\":$t,\"version\":\"$2\",\"exit_code\":0${6:+,$6}}" &&
	etcdctl_put "/status/validation/$4/$1" "{\"time\":$t,\"version\":\"$2\",\"exit_code\":0}" &&
	etcdctl_put "/running_version/$1" "{\"version\":\"$2\",\"time\":$t}" &&
	etcdctl_put "/groups/$5/$1" ""
}

# value SERIES  — the value of exactly SERIES (name and labels as written)
# in out.prom; fails when it is not there.
value () {
	awk -v s="$1" 'substr($0, 1, length(s) + 1) == s " " { print substr($0, length(s) + 2); found = 1 }
		END { exit !found }' out.prom
}

# is SERIES WANT  — SERIES has the value WANT.
is () {
	got_=$(value "$1") || { echo "no series $1" >&4; return 1; }
	test "$got_" = "$2" || { echo "$1 is $got_, wanted $2" >&4; return 1; }
}

# absent SERIES-NAME  — the family is documented but has no sample.
absent () {
	grep -q "^# TYPE $1 gauge\$" out.prom &&
	! grep -q "^$1[{ ]" out.prom
}

# prom  — runs the command into out.prom, and promtool check metrics on it
# when promtool is there (it reads the exposition format strictly and lints
# the names and HELP).
prom () {
	orch status --prometheus >out.prom 2>err &&
	test_must_be_empty err &&
	if command -v promtool >/dev/null; then
		promtool check metrics <out.prom >lint 2>&1 || { cat lint >&4; return 1; }
	fi
}

mod_revision () {
	etcdctl_ get -w json -- "$1" |
		python3 -c 'import json,sys; k=json.load(sys.stdin).get("kvs", []); print(k[0]["mod_revision"] if k else 0)'
}

if command -v promtool >/dev/null; then
	echo "# promtool: $(promtool --version 2>&1 | head -n 1)"
else
	echo "# promtool is not installed: the exposition is not linted (scripts/install-deps.sh installs it)"
fi

test_expect_success 'an empty fleet: documented families, zeros, no desired version' '
	prom &&
	cat out.prom &&
	grep -q "^# HELP orchestrate_fleet_hosts " out.prom &&
	grep -q "^# TYPE orchestrate_fleet_hosts gauge\$" out.prom &&
	is orchestrate_fleet_hosts_unversioned 0 &&
	is orchestrate_fleet_rollout_halted 0 &&
	is orchestrate_fleet_policy_valid 1 &&
	absent orchestrate_fleet_desired_version_info &&
	absent orchestrate_fleet_failure_budget &&
	absent orchestrate_fleet_last_progress_timestamp_seconds &&
	test "$(value orchestrate_fleet_read_revision)" -gt 0 &&
	now=$(date +%s) && t=$(value orchestrate_fleet_read_timestamp_seconds) &&
	test "$t" -le "$now" && test "$t" -ge $((now - 60))
'

test_expect_success 'converged: three hosts at v2, every count where status puts it' '
	orch trigger_update v1 && orch trigger_update v2 &&
	t=$(( $(date +%s) - 300 )) && echo "$t" >t_converged &&
	host web1 v2 success success dc1 "" "$t" &&
	host web2 v2 success success dc1 "" "$t" &&
	host db1 v2 success success dc2 "" "$t" &&
	prom && cat out.prom &&
	is "orchestrate_fleet_desired_version_info{version=\"v2\",previous=\"v1\"}" 1 &&
	is "orchestrate_fleet_trigger_revision" "$(mod_revision /current_version)" &&
	is "orchestrate_fleet_hosts{group=\"dc1\"}" 2 &&
	is "orchestrate_fleet_hosts{group=\"dc2\"}" 1 &&
	is "orchestrate_fleet_hosts_alive{group=\"dc1\"}" 2 &&
	is "orchestrate_fleet_hosts_at_desired_version{group=\"dc1\"}" 2 &&
	is "orchestrate_fleet_hosts_at_desired_version{group=\"dc2\"}" 1 &&
	is "orchestrate_fleet_hosts_behind{group=\"dc1\"}" 0 &&
	is "orchestrate_fleet_hosts_failed{group=\"dc1\"}" 0 &&
	is "orchestrate_fleet_hosts_paused{group=\"dc1\"}" 0 &&
	is "orchestrate_fleet_hosts_unaccounted{group=\"dc2\"}" 0 &&
	is "orchestrate_fleet_hosts_not_alive{group=\"dc2\"}" 0 &&
	is "orchestrate_fleet_hosts_running_version{version=\"v2\"}" 3 &&
	is orchestrate_fleet_hosts_unversioned 0 &&
	is "orchestrate_fleet_hosts_state{type=\"puppet\",state=\"success\"}" 3 &&
	is "orchestrate_fleet_hosts_state{type=\"puppet\",state=\"failed\"}" 0 &&
	is "orchestrate_fleet_hosts_state{type=\"validation\",state=\"success\"}" 3 &&
	! grep -q "type=\"validation\",state=\"pending\"" out.prom &&
	is "orchestrate_fleet_hosts_waiting{reason=\"slot\"}" 0 &&
	is orchestrate_fleet_rollout_failures 0 &&
	is orchestrate_fleet_last_progress_timestamp_seconds "$t" &&
	is orchestrate_fleet_last_change_timestamp_seconds "$t" &&
	absent orchestrate_fleet_waiting_since_timestamp_seconds &&
	absent orchestrate_fleet_waiting_host_since_timestamp_seconds
'

test_expect_success 'the same counts as status --json' '
	orch --json status >json &&
	python3 - <<-\EOF
	import json, re
	d = json.load(open("json"))["totals"]
	prom = open("out.prom").read()
	def v(series):
	    m = re.search("^" + re.escape(series) + r" (\S+)$", prom, re.M)
	    return int(m.group(1))
	assert d["hosts"] == sum(int(x) for x in re.findall(r"^orchestrate_fleet_hosts\{[^}]*\} (\d+)$", prom, re.M))
	assert d["versions"]["v2"] == v("orchestrate_fleet_hosts_running_version{version=\"v2\"}")
	assert d["puppet"]["success"] == v("orchestrate_fleet_hosts_state{type=\"puppet\",state=\"success\"}")
	EOF
'

test_expect_success 'v3 rolling out: one failed under a budget of 1, one waiting for a slot' '
	orch rollout_policy set --max-parallel 1 --max-failures 1 --progress-deadline 1800 &&
	orch trigger_update v3 &&
	T=$(mod_revision /current_version) && echo "$T" >trigger &&
	now=$(date +%s) && echo "$now" >t_v3 &&
	host web1 v3 success success dc1 "" "$now" &&
	host web2 v2 failed success dc1 "\"attempts\":2" "$now" &&
	etcdctl_put /rollout/failed/web2 "{\"version\":\"v3\",\"trigger\":$T,\"time\":$now,\"stage\":\"config\",\"attempts\":2}" &&
	etcdctl_put /rollout/failed/old "{\"version\":\"v2\",\"trigger\":1,\"time\":1}" &&
	host db1 v2 pending success dc2 "\"wait\":\"slot\"" $((now - 120)) &&
	prom && cat out.prom &&
	is "orchestrate_fleet_desired_version_info{version=\"v3\",previous=\"v2\"}" 1 &&
	is orchestrate_fleet_trigger_revision "$T" &&
	is "orchestrate_fleet_hosts_failed{group=\"dc1\"}" 1 &&
	is "orchestrate_fleet_hosts_failed{group=\"dc2\"}" 0 &&
	is "orchestrate_fleet_hosts_state{type=\"puppet\",state=\"failed\"}" 1 &&
	is "orchestrate_fleet_hosts_state{type=\"puppet\",state=\"pending\"}" 1 &&
	is "orchestrate_fleet_hosts_at_desired_version{group=\"dc1\"}" 1 &&
	is "orchestrate_fleet_hosts_behind{group=\"dc1\"}" 1 &&
	is "orchestrate_fleet_hosts_behind{group=\"dc2\"}" 1 &&
	is "orchestrate_fleet_hosts_running_version{version=\"v2\"}" 2 &&
	is "orchestrate_fleet_hosts_running_version{version=\"v3\"}" 1 &&
	is orchestrate_fleet_rollout_failures 1 &&
	is orchestrate_fleet_failure_budget 1 &&
	is orchestrate_fleet_failure_budget_left 0 &&
	is orchestrate_fleet_policy_progress_deadline_seconds 1800 &&
	is orchestrate_fleet_rollout_halted 0 &&
	is orchestrate_fleet_last_progress_timestamp_seconds "$now" &&
	is "orchestrate_fleet_hosts_waiting{reason=\"slot\"}" 1 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"dependency\"}" 0 &&
	is "orchestrate_fleet_waiting_since_timestamp_seconds{reason=\"slot\"}" $((now - 120)) &&
	is "orchestrate_fleet_waiting_host_since_timestamp_seconds{host=\"db1\",group=\"dc2\",reason=\"slot\"}" $((now - 120))
'

test_expect_success 'a second failure: above the budget (left -1)' '
	T=$(cat trigger) && now=$(cat t_v3) &&
	etcdctl_put /rollout/failed/web1 "{\"version\":\"v3\",\"trigger\":$T,\"time\":$now,\"stage\":\"validation\"}" &&
	prom &&
	is orchestrate_fleet_rollout_failures 2 &&
	is orchestrate_fleet_failure_budget_left -1 &&
	etcdctl_del /rollout/failed/web1
'

test_expect_success 'halted: the flag and its time' '
	T=$(cat trigger) && now=$(date +%s) &&
	etcdctl_put /rollout/halted "{\"version\":\"v3\",\"trigger\":$T,\"time\":$now,\"host\":\"web2\",\"reason\":\"2 hosts failed, budget 1\",\"failed\":2}" &&
	prom &&
	is orchestrate_fleet_rollout_halted 1 &&
	is orchestrate_fleet_rollout_reverted 0 &&
	is orchestrate_fleet_rollout_halt_timestamp_seconds "$now" &&
	orch rollout_policy resume >/dev/null &&
	prom &&
	is orchestrate_fleet_rollout_halted 0 &&
	is orchestrate_fleet_rollout_failures 0 &&
	absent orchestrate_fleet_rollout_halt_timestamp_seconds
'

test_expect_success 'a halt of an earlier trigger does not count' '
	etcdctl_put /rollout/halted "{\"version\":\"v2\",\"trigger\":1,\"time\":1,\"reason\":\"old\"}" &&
	prom &&
	is orchestrate_fleet_rollout_halted 0 &&
	etcdctl_del /rollout/halted
'

test_expect_success 'a host unaccounted, and one no daemon ever registered' '
	etcdctl_del /alive/db1 &&
	etcdctl_put /status/puppet/success/cron1 "{\"time\":$(date +%s),\"version\":\"v3\",\"exit_code\":0}" &&
	etcdctl_put /groups/dc2/cron1 "" &&
	prom && cat out.prom &&
	is "orchestrate_fleet_hosts{group=\"dc2\"}" 2 &&
	is "orchestrate_fleet_hosts_alive{group=\"dc2\"}" 0 &&
	is "orchestrate_fleet_hosts_not_alive{group=\"dc2\"}" 2 &&
	is "orchestrate_fleet_hosts_unaccounted{group=\"dc2\"}" 1 &&
	is "orchestrate_fleet_hosts_unaccounted{group=\"dc1\"}" 0 &&
	is "orchestrate_fleet_hosts_unversioned" 1 &&
	orch get_failures >gf || true &&
	grep -q "^unaccounted: 1\$" gf
'

test_expect_success 'waiting: a dependency, a pause, a reason of no kind we know, a hostile one' '
	now=$(date +%s) &&
	host app1 v2 pending success "" "\"wait\":\"dependency\"" $((now - 7200)) &&
	host app2 v2 pending success "" "\"wait\":\"bogus\"" $((now - 60)) &&
	host app3 v2 pending success "" "\"wait\":\"x\\\"}\\n{y=\\\"1\"" $((now - 30)) &&
	orch pause --host web1 >/dev/null &&
	prom && cat out.prom &&
	is "orchestrate_fleet_hosts{group=\"\"}" 3 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"dependency\"}" 1 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"other\"}" 1 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"unknown\"}" 1 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"pause\"}" 1 &&
	is "orchestrate_fleet_hosts_paused{group=\"dc1\"}" 1 &&
	is "orchestrate_fleet_hosts_paused{group=\"dc2\"}" 0 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"slot\"}" 1 &&
	is "orchestrate_fleet_waiting_since_timestamp_seconds{reason=\"dependency\"}" $((now - 7200)) &&
	is "orchestrate_fleet_waiting_host_since_timestamp_seconds{host=\"app1\",group=\"\",reason=\"dependency\"}" $((now - 7200)) &&
	! grep -q bogus out.prom &&
	grep "^orchestrate_fleet_waiting_host_since_timestamp_seconds{" out.prom | head -n 1 | grep -q "host=\"app1\"" &&
	orch resume --host web1 >/dev/null
'

test_expect_success 'at most ten hosts are named, the longest waits first' '
	now=$(date +%s) &&
	for i in $(seq 1 14); do
		etcdctl_put "/status/puppet/pending/q$i" "{\"time\":$((now - 1000 - i)),\"wait\":\"group\"}" || exit 1
	done &&
	prom &&
	test "$(grep -c "^orchestrate_fleet_waiting_host_since_timestamp_seconds{" out.prom)" = 10 &&
	is "orchestrate_fleet_hosts_waiting{reason=\"group\"}" 14 &&
	grep -q "host=\"q14\"" out.prom && ! grep -q "host=\"q1\"" out.prom &&
	grep -q "host=\"app1\"" out.prom &&
	for i in $(seq 1 14); do etcdctl_del "/status/puppet/pending/q$i" || exit 1; done
'

test_expect_success 'hostile keys never reach a label, and the format holds' '
	now=$(date +%s) &&
	etcdctl_put "/groups/d\"c\\\\x/web9" "" &&
	etcdctl_put "/running_version/web9" "{\"version\":\"v\\\"9\\n\",\"time\":$now}" &&
	etcdctl_put "/alive/we\"b{}" "{\"time\":$now}" &&
	etcdctl_put /current_version "bad\"version" &&
	prom && cat out.prom &&
	! grep -q "d\\\\\"c" out.prom &&
	! grep -q "we\\\\\"b" out.prom &&
	absent orchestrate_fleet_desired_version_info &&
	is "orchestrate_fleet_hosts_unversioned" 2 &&
	orch trigger_update v3 &&
	etcdctl_del /running_version/web9
'

test_expect_success 'an invalid policy is a 0, not an error' '
	etcdctl_put /rollout/policy "{\"max_parallel\":\"many\"}" &&
	prom &&
	is orchestrate_fleet_policy_valid 0 &&
	absent orchestrate_fleet_failure_budget &&
	orch rollout_policy set --max-parallel 1 --max-failures 1 --progress-deadline 1800
'

test_expect_success '--output FILE: written atomically, mode 0644, the same bytes' '
	orch status --prometheus --output fleet.prom 2>err &&
	test_must_be_empty err &&
	test "$(stat -c %a fleet.prom)" = 644 &&
	orch status --prometheus >stdout.prom &&
	grep -v "^orchestrate_fleet_read_timestamp_seconds " fleet.prom >a &&
	grep -v "^orchestrate_fleet_read_timestamp_seconds " stdout.prom >b &&
	test_cmp a b &&
	ls -a >files && ! grep -q "^\.fleet\.prom\." files
'

test_expect_success '--output: a failed write keeps the old file, exit 74' '
	cp fleet.prom before &&
	test_expect_code 74 orch status --prometheus --output nosuchdir/fleet.prom 2>err &&
	test_one_line err && grep -q "cannot write .nosuchdir/fleet.prom." err &&
	test_cmp before fleet.prom
'

test_expect_success 'etcd unreachable: exit 69, nothing written' '
	cp fleet.prom before &&
	test_expect_code 69 orchestrate --config "$ORCH_CONFIG" --etcd "$(dead_url)" --timeout 1 \
		status --prometheus --output fleet.prom 2>err &&
	test_cmp before fleet.prom
'

test_expect_success 'refusals: filters, --watch, --json; --output without --prometheus' '
	for args in "--prometheus web1" "--prometheus --failed" "--prometheus --group dc1" \
		    "--prometheus --watch" "--prometheus --summary"; do
		test_expect_code 64 orch status $args >out 2>err &&
		test_one_line err && test_must_be_empty out || exit 1
	done &&
	test_expect_code 64 orch --json status --prometheus 2>err && test_one_line err &&
	test_expect_code 64 orch status --output x.prom 2>err && test_one_line err &&
	grep -q "goes with --prometheus" err && ! test -e x.prom
'

test_expect_success 'the alert rules use only series the command writes' '
	prom &&
	"$REPO_ROOT/scripts/check-rules-series" "$RULES" "$RULES_TEST" out.prom
'

test_expect_success 'the check sees a rule that drifted from the exposition' '
	sed "s/orchestrate_fleet_rollout_halted == 1/orchestrate_fleet_rollout_is_halted == 1/" \
		"$RULES" >drifted.yml &&
	test_expect_code 1 "$REPO_ROOT/scripts/check-rules-series" drifted.yml "$RULES_TEST" out.prom >out &&
	grep -q "orchestrate_fleet_rollout_is_halted is not in" out &&
	sed "s/{host=\"db1\",group=\"dc2\",reason=\"dependency\"}/{hostname=\"db1\",reason=\"dependency\"}/" \
		"$RULES_TEST" >drifted.test.yml &&
	test_expect_code 1 "$REPO_ROOT/scripts/check-rules-series" "$RULES" drifted.test.yml out.prom >out &&
	grep -q "has labels hostname" out
'

test_expect_success 'orchestrate(1) lists every family the command writes' '
	prom &&
	sed -n "s/^# TYPE \([a-z_]*\) .*/\1/p" out.prom >families &&
	test "$(wc -l <families)" -ge 20 &&
	sed -n "/^\.Sh FLEET METRICS/,/^\.Sh /p" "$REPO_ROOT/man/orchestrate.1" >section &&
	while read -r f; do
		grep -q "Va $f\({\| \|\$\)" section || { echo "man page lacks $f" >&4; exit 1; }
	done <families
'

test_expect_success 'promtool: the rules check and their tests pass (when installed)' '
	command -v promtool >/dev/null || { echo "# skip: no promtool"; exit 0; }
	promtool check rules "$RULES" &&
	(cd "$REPO_ROOT/contrib/prometheus" && promtool test rules orchestrate.rules.test.yml)
'

test_done
