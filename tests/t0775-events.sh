#!/bin/sh
#
# orchestrate events: a rollout of real daemons under a policy as a stream of
# events (trigger, waiting for a slot, started, succeeded per host; a failure
# with its attempt and the halt it causes; pause, resume and the halt
# cleared; a host dead when its daemon is killed), the same stream as JSON
# lines, --since resuming without losing or repeating an event, a compaction
# at the start and in the middle of a stream (said, and the stream goes on),
# hostile text printed safely, and the exit statuses.

test_description='orchestrate events: the rollout as a stream of events'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
command -v python3 >/dev/null 2>&1 || skip_all "needs python3 to read the JSON lines"
start_etcd
LEASE_TTL=5
export LEASE_TTL

# events_start NAME ARGS...  — `orchestrate -v events ARGS` in the background:
# NAME.out, NAME.err, NAME.pid and, once it exited, NAME.exit; returns once
# the stream follows (it said so on stderr).
events_start () {
	en_=$1
	shift
	rm -f "$TRASH/$en_.exit" "$TRASH/$en_.pid"
	(
		orchestrate --config "$ORCH_CONFIG" -v events "$@" \
			>"$TRASH/$en_.out" 2>"$TRASH/$en_.err" &
		echo $! >"$TRASH/$en_.pid"
		wait $!
		echo $? >"$TRASH/$en_.exit"
	) &
	wait_for "test -s '$TRASH/$en_.pid'" 5 || return 1
	test_register_pid "$(cat "$TRASH/$en_.pid")"
	wait_for "grep -q 'following the fleet' '$TRASH/$en_.err'" 15 || {
		cat "$TRASH/$en_.err" >&2
		return 1
	}
}

# events_stop NAME  — SIGTERM, then its exit status must be 0.
events_stop () {
	kill -TERM "$(cat "$TRASH/$1.pid")" &&
	wait_for "test -s '$TRASH/$1.exit'" 10 &&
	test "$(cat "$TRASH/$1.exit")" = 0
}

# evq FILE EXPR  — EXPR holds of ev, the list of FILE's JSON lines (each must
# parse), with helpers: kinds(**match) lists the events that match, first(...)
# the index of the first one (-1: none).
evq () {
	python3 - "$1" "$2" <<-\EOF
	import json, sys
	ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
	def match(e, m):
	    return all(e.get(k) == v for k, v in m.items())
	def kinds(**m):
	    return [e for e in ev if match(e, m)]
	def first(**m):
	    for i, e in enumerate(ev):
	        if match(e, m):
	            return i
	    return -1
	sys.exit(0 if eval(sys.argv[2]) else 1)
	EOF
}

# revision_now  — etcd's current revision.
revision_now () {
	etcdctl_ endpoint status -w json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'
}

test_expect_success 'setup: three nodes at v1 under max_parallel 1; two streams follow' '
	for n in r1 r2 r3; do node_setup $n; echo 0.3 >$n/config.sleep; done &&
	etcdctl_put /current_version v1 &&
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	start_node r1 && start_node r2 && start_node r3 &&
	wait_for "node_at r1 v1 && node_at r2 v1 && node_at r3 v1" 30 &&
	events_start main --json --for 600 &&
	events_start text --for 600
'

test_expect_success 'a trigger: trigger, then per host waiting for a slot, started, succeeded' '
	orch trigger_update v2 &&
	wait_for "node_at r1 v2 && node_at r2 v2 && node_at r3 v2" 40 &&
	wait_for "evq main.out \"len(kinds(kind=\\\"succeeded\\\", version=\\\"v2\\\")) == 3\"" 10 &&
	cat main.out &&
	evq main.out "kinds(kind=\"trigger\", version=\"v2\", **{\"from\": \"v1\"})" &&
	evq main.out "first(kind=\"trigger\", version=\"v2\") == 0" &&
	for n in r1 r2 r3; do
		evq main.out "0 < first(kind=\"started\", host=\"$n\", version=\"v2\") < first(kind=\"succeeded\", host=\"$n\", version=\"v2\")" ||
		exit 1
	done &&
	evq main.out "len(kinds(kind=\"started\")) == 3" &&
	evq main.out "kinds(kind=\"waiting\", wait=\"slot\", version=\"v2\")" &&
	evq main.out "all(a[\"revision\"] <= b[\"revision\"] for a, b in zip(ev, ev[1:]))" &&
	evq main.out "all(e[\"host\"] is None or e[\"host\"] in (\"r1\", \"r2\", \"r3\") for e in ev)"
'

test_expect_success 'a failure with its attempt, and the halt it causes' '
	orch rollout_policy set --max-parallel 1 --max-failures 0 &&
	for n in r1 r2 r3; do echo 1 >$n/config.exit; echo 0 >$n/config.sleep; done &&
	orch trigger_update v3 &&
	wait_for "test -n \"\$(etcdctl_get /rollout/halted)\"" 30 &&
	wait_for "evq main.out \"kinds(kind=\\\"halted\\\", version=\\\"v3\\\")\"" 10 &&
	cat main.out &&
	evq main.out "kinds(kind=\"policy\")" &&
	evq main.out "kinds(kind=\"failed\", version=\"v3\", stage=\"config\", attempt=1)" &&
	evq main.out "first(kind=\"failed\", version=\"v3\") < first(kind=\"halted\", version=\"v3\")" &&
	evq main.out "\"config failed on purpose\" in kinds(kind=\"failed\", version=\"v3\")[0][\"detail\"]" &&
	wait_for "grep -q \" halted  *- v3 \" text.out" 10 &&
	grep " failed  *r[123] v3 config, attempt 1: " text.out
'

test_expect_success 'pause and resume, then the halt cleared: the fleet goes on to v3' '
	orch pause --reason "change freeze" &&
	orch pause --host r2 &&
	orch resume --host r2 &&
	orch resume &&
	for n in r1 r2 r3; do echo 0 >$n/config.exit; done &&
	orch rollout_policy resume &&
	wait_for "node_at r1 v3 && node_at r2 v3 && node_at r3 v3" 40 &&
	wait_for "evq main.out \"len(kinds(kind=\\\"succeeded\\\", version=\\\"v3\\\")) == 3\"" 10 &&
	evq main.out "kinds(kind=\"paused\", scope=\"global\", detail=\"global: change freeze\")" &&
	evq main.out "kinds(kind=\"paused\", scope=\"host\", host=\"r2\")" &&
	evq main.out "first(kind=\"paused\", scope=\"host\") < first(kind=\"resumed\", scope=\"host\", host=\"r2\")" &&
	evq main.out "first(kind=\"paused\", scope=\"global\") < first(kind=\"resumed\", scope=\"global\")" &&
	evq main.out "first(kind=\"halted\") < first(kind=\"resumed\", scope=\"rollout\", version=\"v3\")"
'

test_expect_success 'a killed daemon: its host is dead (unaccounted) once its lease expires' '
	kill -9 "$(node_pid r3)" &&
	wait_for "evq main.out \"kinds(kind=\\\"dead\\\", host=\\\"r3\\\")\"" 25 &&
	evq main.out "\"unaccounted\" in kinds(kind=\"dead\", host=\"r3\")[0][\"detail\"]" &&
	wait_for "grep -q \" dead  *r3 v3 unaccounted\" text.out" 10
'

test_expect_success 'hostile text is printed on one line, without escapes' '
	orch --hostname h9 update_own_status provisioned success &&
	orch --hostname h9 update_own_status puppet 1 \
		--detail "$(printf "first\nEvil: \033[2J\033]0;owned\007 gone\rfake")" &&
	wait_for "evq main.out \"kinds(kind=\\\"failed\\\", host=\\\"h9\\\")\"" 10 &&
	wait_for "grep -q \" failed  *h9 \" text.out" 10 &&
	grep " failed  *h9 " text.out >line &&
	test_line_count = 1 line &&
	grep -F "config: Evil: \x1b[2J\x1b]0;owned\x07 gone\x0dfake" line &&
	! grep -q "$(printf "\033")" text.out &&
	! grep -q "$(printf "\007")" text.out &&
	! grep -q "$(printf "\r")" text.out &&
	evq main.out "kinds(kind=\"failed\", host=\"h9\")[0][\"detail\"] == \"Evil: \\x1b[2J\\x1b]0;owned\\x07 gone\\rfake\""
'

# the text stream as "REVISION KIND HOST VERSION" lines, and the JSON's
text_is_json () {
	python3 -c "
import json
for l in open(\"main.out\"):
    e = json.loads(l)
    print(e[\"revision\"], e[\"kind\"], e[\"host\"] or \"-\", e[\"version\"] or \"-\")
" >from-json &&
	awk "{ print \$2, \$3, \$4, \$5 }" text.out >from-text &&
	cmp -s from-json from-text
}

test_expect_success 'the text stream says what the JSON stream says, a line each' '
	wait_for text_is_json 10 || test_cmp from-json from-text &&
	test_line_count -gt 20 from-text &&
	grep -Ev "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z [0-9]+ [a-z]+ +[^ ]+ [^ ]+( .*)?$" text.out >bad || :
	test_must_be_empty bad
'

test_expect_success '--since REV gives the events from REV on: none lost, none repeated' '
	rev=$(python3 -c "import json; print([json.loads(l) for l in open(\"main.out\")][0][\"revision\"])") &&
	mid=$(python3 -c "
import json
ev = [json.loads(l) for l in open(\"main.out\")]
print(ev[len(ev) // 2][\"revision\"])") &&
	for since in $rev $mid; do
		n=$(python3 -c "
import json
print(sum(1 for l in open(\"main.out\") if json.loads(l)[\"revision\"] >= $since))") &&
		orch events --json --since $since --count $n --for 60 >since.out &&
		python3 - $since <<-\EOF || exit 1
		import json, sys
		since = int(sys.argv[1])
		key = lambda e: {k: v for k, v in e.items() if k != "time"}
		main = [key(json.loads(l)) for l in open("main.out")]
		got = [key(json.loads(l)) for l in open("since.out")]
		want = [e for e in main if e["revision"] >= since]
		if got != want:
		    print("since %d: got %d events, wanted %d" % (since, len(got), len(want)))
		    for a, b in zip(got, want):
		        if a != b:
		            print("got  ", a)
		            print("want ", b)
		            break
		    sys.exit(1)
		EOF
	done
'

test_expect_success '--count N stops after the revision of the N-th event, printed whole' '
	rev=$(python3 -c "import json; print([json.loads(l) for l in open(\"main.out\")][0][\"revision\"])") &&
	orch events --json --since $rev --count 2 --for 10 >count.out &&
	python3 - <<-\EOF
	import json, sys
	main = [json.loads(l) for l in open("main.out")]
	got = [json.loads(l) for l in open("count.out")]
	assert len(got) >= 2, got
	last = got[-1]["revision"]
	want = [e for e in main if e["revision"] <= last]
	strip = lambda l: [{k: v for k, v in e.items() if k != "time"} for e in l]
	assert strip(got) == strip(want), (got, want)
	EOF
'

test_expect_success 'a compacted --since: said first, the events after the compaction, and on' '
	python3 -c "
import json
ev = [json.loads(l) for l in open(\"main.out\")]
print(ev[0][\"revision\"], ev[len(ev) // 2][\"revision\"])" >revs &&
	read rev mid <revs &&
	test $rev -lt $mid &&
	etcdctl_ compact $mid &&
	n=$(python3 -c "
import json
print(sum(1 for l in open(\"main.out\") if json.loads(l)[\"revision\"] > $mid))") &&
	events_start late --json --since $rev --for 60 &&
	wait_for "test \$(wc -l <late.out) -gt $n" 10 &&
	python3 - $mid <<-\EOF &&
	import json, sys
	mid = int(sys.argv[1])
	key = lambda e: {k: v for k, v in e.items() if k != "time"}
	main = [key(json.loads(l)) for l in open("main.out")]
	got = [key(json.loads(l)) for l in open("late.out")]
	assert got[0]["kind"] == "compacted" and got[0]["revision"] == mid, got[0]
	assert got[1:] == [e for e in main if e["revision"] > mid], got
	EOF
	orch pause --group g1 --reason maintenance &&
	wait_for "evq late.out \"kinds(kind=\\\"paused\\\", scope=\\\"group\\\")\"" 10 &&
	orch resume --group g1 &&
	wait_for "evq late.out \"kinds(kind=\\\"resumed\\\", scope=\\\"group\\\")\"" 10 &&
	events_stop late &&
	orch events --json --since $mid --count 1 --for 30 >at.out &&
	evq at.out "ev[0][\"kind\"] == \"compacted\" and ev[0][\"revision\"] == $mid" &&
	evq at.out "ev[1:] == [] or ev[1][\"revision\"] > $mid"
'

stop_all_nodes

test_expect_success 'a compaction in the middle of a stream: said, the difference, and on' '
	events_start mid --json --for 120 &&
	kill -STOP "$(cat mid.pid)" &&
	restart_etcd &&
	etcdctl_put /pause/hosts/r1 "{\"reason\":\"disk swap\",\"time\":1}" &&
	etcdctl_put /status/puppet/running/r2 "{\"time\":2,\"version\":\"v3\",\"exit_code\":0}" &&
	etcdctl_del /status/puppet/success/r2 &&
	etcdctl_ compact "$(revision_now)" &&
	compacted=$(revision_now) &&
	kill -CONT "$(cat mid.pid)" &&
	wait_for "evq mid.out \"kinds(kind=\\\"compacted\\\")\"" 20 &&
	wait_for "evq mid.out \"kinds(kind=\\\"started\\\", host=\\\"r2\\\")\"" 10 &&
	cat mid.out &&
	evq mid.out "first(kind=\"compacted\") < first(kind=\"paused\", host=\"r1\", detail=\"host r1: disk swap\")" &&
	evq mid.out "kinds(kind=\"paused\", host=\"r1\")[0][\"revision\"] >= $compacted" &&
	evq mid.out "first(kind=\"compacted\") < first(kind=\"started\", host=\"r2\", version=\"v3\")" &&
	orch resume --host r1 &&
	wait_for "evq mid.out \"kinds(kind=\\\"resumed\\\", host=\\\"r1\\\")\"" 10 &&
	evq mid.out "len(kinds(kind=\"paused\", host=\"r1\")) == 1" &&
	events_stop mid
'

test_expect_success 'SIGTERM and SIGINT stop a stream with status 0, its last line whole' '
	events_stop main &&
	events_stop text &&
	test "$(tail -c 1 main.out | od -An -c | tr -d " ")" = "\\n" &&
	python3 -c "
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_DFL)
p = subprocess.Popen([\"orchestrate\", \"--config\", os.environ[\"ORCH_CONFIG\"], \"-v\", \"events\", \"--for\", \"30\"],
                     stderr=subprocess.PIPE, restore_signals=True)
for line in p.stderr:
    if b\"following\" in line:
        break
else:
    sys.exit(\"no following line\")
p.send_signal(signal.SIGINT)
sys.exit(p.wait(timeout=10))
"
'

test_expect_success 'events is documented: its man page section, its help' '
	grep -q "^\.It Cm events" "$REPO_ROOT/man/orchestrate.1" &&
	orch events -h >out &&
	grep -q -- "--since REV" out && grep -q -- "--count N" out && grep -q -- "--for SECONDS" out
'

test_expect_success 'exit statuses: bad arguments 64, etcd unreachable 69' '
	test_expect_code 64 orch events --since 0 &&
	test_expect_code 64 orch events --since x &&
	test_expect_code 64 orch events --count 0 &&
	test_expect_code 64 orch events extra &&
	test_expect_code 64 orch events --since 999999999 &&
	test_expect_code 69 orch --etcd "$(dead_url)" --timeout 1 events --for 5 2>err &&
	test_one_line err
'

test_done
