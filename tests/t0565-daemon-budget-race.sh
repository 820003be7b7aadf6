#!/bin/sh
test_description='orchestrated: a spent failure budget starts no one, however close the failures come (30 daemons)'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

# The promise operators trigger on: with max_parallel P and max_failures F, a
# version that fails everywhere reaches at most P + F hosts.  Every count here
# comes from etcd's own history (each put of status/puppet/running/HOST since
# the trigger), not from the daemons' word.  Bad versions fail in one of two
# ways: all at the same moment (each run waits at a barrier the test lifts
# once the first batch runs: the usual case, a bad version fails at the same
# step everywhere), or after a random 0-300 ms.

test -x "$REPO_ROOT/bin/orchestrated" || skip_all "orchestrated is not built"
start_etcd

NODES=
for i in $(seq -w 1 30); do NODES="$NODES r$i"; done

# The config hook: logs each start, fails versions named bad*, succeeds others.
barrier_hook () {
	cat >"$TRASH/$1/hooks/config" <<EOF
#!/bin/sh
echo "config-start $1 \$ORCHESTRATE_VERSION" >>"$TRASH/runs.log"
case "\$ORCHESTRATE_VERSION" in
bad*)
	if test -f "$TRASH/random"; then
		sleep "\$(printf "0.%03d" \$(( \$(od -An -N2 -tu2 /dev/urandom) % 300 )))"
	else
		while ! test -f "$TRASH/go.\$ORCHESTRATE_VERSION"; do sleep 0.05; done
	fi
	echo "bad version"
	exit 1 ;;
esac
echo "profile-$1" >"$TRASH/$1/profile_list.txt"
exit 0
EOF
	chmod +x "$TRASH/$1/hooks/config"
}

# started VERSION FROM — distinct hosts that put status/puppet/running/HOST for
# VERSION at or after revision FROM, from etcd's history.
started () {
	timeout 5 etcdctl --endpoints="$ETCD_URL" watch -w json --rev="$2" --prefix \
		/status/puppet/running/ 2>/dev/null |
		python3 -c '
import base64, json, sys
hosts = set()
dec = json.JSONDecoder()
text = sys.stdin.read()
i = 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    for ev in obj.get("Events") or []:
        if ev.get("type", 0) not in (0, "PUT"):
            continue
        kv = ev["kv"]
        value = json.loads(base64.b64decode(kv["value"]))
        if value.get("version") == sys.argv[1]:
            hosts.add(base64.b64decode(kv["key"]).decode().rsplit("/", 1)[1])
print(len(hosts))' "$1"
}

# writes KEY — etcd's version counter of KEY (how many times it was written
# since it was created), 0 when absent.
writes () {
	etcdctl_ get -w json "$1" | python3 -c '
import json, sys
kvs = json.load(sys.stdin).get("kvs") or []
print(kvs[0].get("version", 0) if kvs else 0)'
}

revision () {
	etcdctl_ get -w json /current_version | python3 -c '
import json, sys; print(json.load(sys.stdin)["header"]["revision"])'
}

field () {
	etcdctl_get "$1" | python3 -c '
import json, sys
try: v = json.load(sys.stdin).get(sys.argv[1], "")
except Exception: v = ""
print(v)' "$2"
}

all_at () {
	for n in $NODES; do node_at $n "$1" || return 1; done
}

# bad_trigger VERSION POLICY FIRST — sets the policy, triggers VERSION and,
# without $TRASH/random, lifts the barrier once FIRST hosts run it.
bad_trigger () {
	etcdctl_put /rollout/policy "$2" &&
	from=$(( $(revision) + 1 )) && echo $from >from &&
	cv_before=$(writes /current_version) && echo $cv_before >cv_before &&
	halt_before=$(writes /rollout/halted) && echo $halt_before >halt_before &&
	orchestrate --etcd "$ETCD_URL" trigger_update "$1" &&
	if ! test -f random; then
		wait_for "test \$(grep -c \"config-start .* $1\$\" runs.log) -ge $3" 30 &&
		touch "go.$1"
	fi
}

# bounded VERSION MAX — the halt and the revert happened once each, and no more
# than MAX hosts ever wrote running for VERSION.
bounded () {
	wait_for "test \"\$(field /rollout/halted version)\" = $1" 40 &&
	wait_for "test \"\$(etcdctl_get /current_version)\" = good" 10 &&
	wait_for "all_at good" 60 &&
	sleep 1 &&
	n=$(started "$1" "$(cat from)") &&
	echo "# $1: $n hosts started (at most $2)" >&4 &&
	test "$n" -ge 1 && test "$n" -le "$2" &&
	test $(( $(writes /current_version) - $(cat cv_before) )) = 2 &&
	test "$(cat $(for x in $NODES; do echo $x/log; done) | grep -c "halted the rollout of $1")" = 1
}

test_expect_success 'setup: 30 nodes at version good, 15 in group g1 and 15 in g2' '
	for n in $NODES; do node_setup $n && barrier_hook $n || exit 1; done &&
	for n in $(echo $NODES | tr " " "\n" | tail -15); do
		sed -i "s/^  group: g1/  group: g2/" $n/orchestrate.yaml || exit 1
	done &&
	etcdctl_put /current_version good &&
	for n in $NODES; do start_node $n || exit 1; done &&
	wait_for "all_at good" 60
'

test_expect_success 'max_parallel 5, max_failures 2, all fail at once: at most 7 hosts start it' '
	bad_trigger bad1 "{\"max_parallel\":5,\"max_failures\":2,\"auto_revert\":true}" 5 &&
	bounded bad1 7 &&
	field /rollout/halted reason | grep -q "more than max_failures 2"
'

test_expect_success 'the same with failures spread over 0-300 ms' '
	touch random &&
	bad_trigger bad2 "{\"max_parallel\":5,\"max_failures\":2,\"auto_revert\":true}" 5 &&
	bounded bad2 7 &&
	rm -f random
'

test_expect_success 'groups: the first group at most 7, the second never starts' '
	test "$(etcdctl_count /groups/g2/)" = 15 &&
	bad_trigger bad3 "{\"groups\":[\"g1\",\"g2\"],\"max_parallel\":5,\"max_failures\":2,\"auto_revert\":true}" 5 &&
	bounded bad3 7 &&
	for n in $(echo $NODES | tr " " "\n" | tail -15); do
		! grep -q "config-start $n bad3" runs.log || exit 1
	done
'

test_expect_success 'max_percent 20 of 30 hosts (6 slots), max_failures 2: at most 8' '
	bad_trigger bad4 "{\"max_percent\":20,\"max_failures\":2,\"auto_revert\":true}" 6 &&
	bounded bad4 8
'

test_expect_success 'two failing canaries under auto_promote: no other host starts' '
	etcdctl_put /rollout/policy "{\"max_parallel\":5,\"canary\":2,\"auto_promote\":true,\"max_failures\":5}" &&
	from=$(( $(revision) + 1 )) &&
	orchestrate --etcd "$ETCD_URL" trigger_update bad5 &&
	wait_for "test \$(grep -c \"config-start .* bad5\$\" runs.log) -ge 2" 30 &&
	touch go.bad5 &&
	wait_for "test \$(etcdctl_count /rollout/failed/) -ge 2" 30 &&
	sleep 3 &&
	test "$(started bad5 $from)" = 2 &&
	test "$(grep -c "config-start .* bad5$" runs.log)" -ge 2 &&
	test "$(grep "config-start .* bad5$" runs.log | cut -d" " -f2 | sort -u | wc -l)" = 2 &&
	! etcdctl_exists /rollout/promoted &&
	test "$(field /rollout/halted version)" != bad5 ||
	{ etcdctl_dump >&4; exit 1; }
'

stop_all_nodes
test_done
