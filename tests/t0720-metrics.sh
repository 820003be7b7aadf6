#!/bin/sh
test_description='orchestrated: the Prometheus textfile (paths.metrics_file)'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

# check_exposition FILE  — every line is a HELP or TYPE comment or a sample of
# the text exposition format (name, optional {label="escaped value",...}, a
# float), each sample of a family whose TYPE came before it, no family twice.
check_exposition () {
	python3 - "$1" <<'PY'
import re, sys
name = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
label = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r'^(%s)(\{%s(?:,%s)*\})? (-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|NaN|[+-]Inf)$'
                    % (name, label, label))
typed, helped, bad = {}, set(), 0
lines = open(sys.argv[1]).read().split('\n')
if lines[-1] != '':
    print('no newline at the end'); sys.exit(1)
for i, line in enumerate(lines[:-1], 1):
    m = re.match(r'^# (HELP|TYPE) (%s) (.+)$' % name, line)
    if m:
        kind, fam, rest = m.groups()
        if kind == 'TYPE':
            if fam in typed or rest not in ('gauge', 'counter', 'untyped'):
                print('line %d: bad or repeated TYPE: %s' % (i, line)); bad = 1
            typed[fam] = rest
        else:
            helped.add(fam)
        continue
    m = sample.match(line)
    if not m or m.group(1) not in typed:
        print('line %d: not a sample of a typed family: %r' % (i, line)); bad = 1
sys.exit(bad)
PY
}

# has_line FILE LINE  — FILE holds exactly LINE.
has_line () {
	grep -qxF -- "$2" "$1"
}

test_expect_success 'setup: a node with a metrics file, at v1' '
	node_setup m1 &&
	sed -i "s|^paths:\$|paths:\n  metrics_file: $TRASH/m1/metrics.prom|" m1/orchestrate.yaml &&
	orchestrated --check-config --config m1/orchestrate.yaml &&
	etcdctl_put /current_version v1 &&
	start_node m1 &&
	wait_for "node_at m1 v1" 20 &&
	wait_for "has_line m1/metrics.prom '"'"'orchestrate_state{state=\"idle\"} 1'"'"'" 10
'

test_expect_success 'the file parses as the exposition format, line by line' '
	cat m1/metrics.prom &&
	check_exposition m1/metrics.prom
'

test_expect_success 'desired and local version info, config hook exit code 0' '
	grep -qx "orchestrate_desired_version_info{version=\"v1\"} 1" m1/metrics.prom &&
	grep -qx "orchestrate_local_version_info{version=\"v1\"} 1" m1/metrics.prom &&
	grep -qx "orchestrate_hook_last_exit_code{hook=\"config\"} 0" m1/metrics.prom &&
	grep -qx "orchestrate_hook_last_exit_code{hook=\"validate\"} 0" m1/metrics.prom &&
	grep -q "^orchestrate_hook_last_duration_seconds{hook=\"config\"} [0-9.]*\$" m1/metrics.prom &&
	ts=$(sed -n "s/^orchestrate_hook_last_run_timestamp_seconds{hook=\"config\"} \([0-9]*\)\..*/\1/p" m1/metrics.prom) &&
	now=$(date +%s) && test "$ts" -le "$now" && test "$ts" -gt $((now - 60)) &&
	grep -q "^orchestrate_catalog_entries [0-9]*\$" m1/metrics.prom &&
	grep -q "^orchestrate_etcd_reconnects_total [0-9]*\$" m1/metrics.prom &&
	grep -qx "orchestrate_lease_regrants_total 0" m1/metrics.prom &&
	test "$(grep -c "^orchestrate_state{" m1/metrics.prom)" -ge 10 &&
	test "$(grep -c "^orchestrate_state{.*} 1\$" m1/metrics.prom)" = 1
'

test_expect_success 'a failed config run: its exit code and the new desired version' '
	echo 4 >m1/config.exit &&
	etcdctl_put /current_version v2 &&
	wait_for "has_line m1/metrics.prom '"'"'orchestrate_hook_last_exit_code{hook=\"config\"} 4'"'"'" 20 &&
	grep -qx "orchestrate_desired_version_info{version=\"v2\"} 1" m1/metrics.prom &&
	grep -qx "orchestrate_local_version_info{version=\"v1\"} 1" m1/metrics.prom &&
	check_exposition m1/metrics.prom &&
	rm m1/config.exit &&
	wait_for "node_at m1 v2" 20 &&
	wait_for "has_line m1/metrics.prom '"'"'orchestrate_local_version_info{version=\"v2\"} 1'"'"'" 10
'

test_expect_success 'a lost lease shows as a re-grant' '
	lease=$(etcdctl_lease_of /alive/m1) &&
	etcdctl_ lease revoke "$lease" &&
	wait_for "has_line m1/metrics.prom '"'"'orchestrate_lease_regrants_total 1'"'"'" 15
'

test_expect_success 'the file is replaced by rename: no temporary file left' '
	ls -a m1 >files && ! grep -q "metrics.prom." files
'

stop_all_nodes
test_done
