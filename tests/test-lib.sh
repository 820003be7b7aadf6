# test-lib.sh — the shared library of orchestrate's integration tests (git's t/
# style).  A test script sets test_description, sources this file, runs
# test_expect_success blocks and ends with test_done.  Output is TAP, for prove.
#
# Each script gets its own trash directory, tests/trash.NAME, as its working
# directory (removed at the end unless ORCHESTRATE_TEST_DEBUG is set or a test
# failed and ORCHESTRATE_TEST_KEEP_FAILED is set), PATH with the repository root
# first (bin/, so `orchestrate` is the binary just built), and an environment that can
# never reach /etc: a config file and a local version file in the trash
# directory.  start_etcd runs a real etcd on free loopback ports with its data
# in a temporary directory; every etcd started is killed when the script exits,
# whatever the reason.
#
# A test body is evaluated in a subshell with `set -e`, so a failing command
# fails the test even when a && was forgotten; variables a test needs later
# are set at the top level of the script, outside test bodies.  Every wait is
# bounded: wait_for polls a condition (polling is fine in tests; the product
# itself must block on watches).

# --- where we are ---------------------------------------------------------------

TEST_DIRECTORY=$(cd "$(dirname "$0")" && pwd)
REPO_ROOT=$(cd "$TEST_DIRECTORY/.." && pwd)
TEST_NAME=$(basename "$0" .sh)
# TEST_OUTPUT_DIRECTORY moves the trash directories elsewhere (git's name for
# it), e.g. for two runs of the suite at once from one checkout.
TRASH_DIRECTORY="${TEST_OUTPUT_DIRECTORY:-$TEST_DIRECTORY}/trash.$TEST_NAME"
PATH="$REPO_ROOT/bin:$PATH"
export PATH TEST_DIRECTORY REPO_ROOT TRASH_DIRECTORY

# A clean, predictable environment: nothing inherited may change what the
# commands under test do.
unset ORCHESTRATE_ETCD ORCHESTRATE_PREFIX ORCHESTRATE_PASSWORD ETCDCTL_ENDPOINTS \
	ETCDCTL_USER ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY ETCD_URL
LC_ALL=C
LANG=C
TZ=UTC
ETCDCTL_API=3
export LC_ALL LANG TZ ETCDCTL_API

exec 4>&2
test_count=0
test_failed=0
test_passed=0

# --- trash directory and cleanup -------------------------------------------------

rm -rf "$TRASH_DIRECTORY"
mkdir -p "$TRASH_DIRECTORY" || {
	echo "Bail out! cannot create $TRASH_DIRECTORY"
	exit 1
}
cd "$TRASH_DIRECTORY" || exit 1
TRASH="$TRASH_DIRECTORY"

# What must be cleaned up (etcd pids, data dirs, helper pids) lives outside the
# trash directory, in a directory of this run only: another run of the same
# script that empties tests/trash.NAME cannot make us lose an etcd.
ETCD_STATE=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-test-state.XXXXXX") || {
	echo "Bail out! cannot create a state directory"
	exit 1
}

ORCHESTRATE_LOCAL_VERSION_FILE="$TRASH/current_version"
ORCH_CONFIG="$TRASH/orchestrate.yaml"
export ORCHESTRATE_LOCAL_VERSION_FILE ORCH_CONFIG
cat >"$ORCH_CONFIG" <<EOF
node:
  profile_list: $TRASH/profile_list.txt
paths:
  local_version: $TRASH/current_version
  hiera_services: $TRASH/services.yaml
  state_dir: $TRASH/state
EOF

# wait_gone_ PID  — waits until PID is gone, 5 s at most, then kills it.
wait_gone_ () {
	gone_i_=0
	while kill -0 "$1" 2>/dev/null && test $gone_i_ -lt 50; do
		sleep 0.1
		gone_i_=$((gone_i_ + 1))
	done
	kill -9 "$1" 2>/dev/null
	return 0
}

test_cleanup_done=
test_cleanup () {
	test -n "$test_cleanup_done" && return
	test_cleanup_done=1
	# background helpers the tests registered (daemons among them, which
	# say goodbye to etcd while it is there); they are gone
	# before the trash goes, so that none writes into it while it is
	# removed
	if test -f "$ETCD_STATE/.pids"; then
		while read -r pid; do
			kill "$pid" 2>/dev/null
		done <"$ETCD_STATE/.pids"
		while read -r pid; do
			wait_gone_ "$pid"
		done <"$ETCD_STATE/.pids"
	fi
	# every etcd this script started
	for d in "$ETCD_STATE"/*/; do
		test -d "$d" || continue
		if test -f "$d/pid"; then
			pid=$(cat "$d/pid")
			kill "$pid" 2>/dev/null
			wait_gone_ "$pid"
		fi
		test -f "$d/datadir" && rm -rf "$(cat "$d/datadir")"
	done
	rm -rf "$ETCD_STATE"
	cd "$TEST_DIRECTORY" || return
	if test -z "$ORCHESTRATE_TEST_DEBUG"; then
		if test "$test_failed" -eq 0 || test -z "$ORCHESTRATE_TEST_KEEP_FAILED"; then
			rm -rf "$TRASH_DIRECTORY"
		fi
	fi
}
trap 'test_cleanup' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Remembers a background process to kill at exit.
test_register_pid () {
	echo "$1" >>"$ETCD_STATE/.pids"
}

# --- TAP ---------------------------------------------------------------------------

skip_all () {
	echo "1..0 # SKIP $*"
	exit 0
}

say_comment () {
	sed -e 's/^/# /'
}

test_ok_ () {
	test_count=$((test_count + 1))
	test_passed=$((test_passed + 1))
	echo "ok $test_count - $1"
}

test_failure_ () {
	test_count=$((test_count + 1))
	test_failed=$((test_failed + 1))
	echo "not ok $test_count - $1"
	shift
	printf '%s\n' "$*" | say_comment
	echo "# --- output ---"
	say_comment <"$TRASH/.test-output"
}

# test_run_ FUNCTION NAME BODY  — checks the arguments of FUNCTION, runs BODY
# in a subshell with `set -e` and leaves its exit code in test_rc_.  fd 4
# stays on the test's output even where a body redirects stderr, so the
# helpers' complaints are seen (git's trick).
test_run_ () {
	if test $# -ne 3; then
		echo "Bail out! bug in the test script: $1 needs 2 arguments"
		exit 1
	fi
	(
		set -e
		eval "$3"
	) >"$TRASH/.test-output" 2>&1 4>&1 </dev/null
	test_rc_=$?
}

# test_expect_success 'name' 'commands'
# Runs the commands in a subshell with `set -e`; the test passes when they exit 0.
test_expect_success () {
	test_run_ test_expect_success "$@"
	if test $test_rc_ -eq 0; then
		test_ok_ "$1"
	else
		test_failure_ "$1" "exit code $test_rc_ from:
$2"
	fi
}

# test_expect_failure 'name' 'commands'  — a known breakage (git's): a test
# of behaviour that is wanted but not there yet, e.g. a daemon-side fix that
# waits for another change.  It runs like test_expect_success; its failure is
# reported as TAP "not ok ... # TODO known breakage", which prove does not
# count as a failure, and its success as "ok ... # TODO known breakage
# vanished", the sign to turn it into a test_expect_success.
test_expect_failure () {
	test_run_ test_expect_failure "$@"
	test_count=$((test_count + 1))
	if test $test_rc_ -eq 0; then
		echo "ok $test_count - $1 # TODO known breakage vanished"
	else
		echo "not ok $test_count - $1 # TODO known breakage"
	fi
}

# test_expect_code CODE cmd args...  — the command must exit with exactly CODE.
test_expect_code () {
	want_=$1
	shift
	"$@" && got_=0 || got_=$?
	if test "$got_" = "$want_"; then
		return 0
	fi
	echo "test_expect_code: command exited $got_, wanted $want_: $*" >&4
	return 1
}

# test_must_fail cmd args...  — a clean failure: non-zero, and not a crash
# (a signal gives 128+N).
test_must_fail () {
	"$@" && got_=0 || got_=$?
	if test "$got_" -eq 0; then
		echo "test_must_fail: command succeeded: $*" >&4
		return 1
	elif test "$got_" -ge 128; then
		echo "test_must_fail: command died (exit $got_): $*" >&4
		return 1
	fi
	return 0
}

# test_cmp expected actual
test_cmp () {
	diff -u "$1" "$2" >&4
}

test_must_be_empty () {
	if test -s "$1"; then
		echo "'$1' is not empty, it contains:" >&4
		cat "$1" >&4
		return 1
	fi
}

# test_line_count = N file
test_line_count () {
	n_=$(wc -l <"$3")
	if ! test "$n_" "$1" "$2"; then
		echo "test_line_count: line count of '$3' is $n_, wanted $1 $2" >&4
		cat "$3" >&4
		return 1
	fi
}

# A one-line message on stderr (the contract for usage errors).
test_one_line () {
	n_=$(wc -l <"$1")
	if test "$n_" -ne 1; then
		echo "test_one_line: '$1' has $n_ lines, wanted 1:" >&4
		cat "$1" >&4
		return 1
	fi
}

# wait_for 'condition' SECONDS  — polls every 0.1 s; fails after SECONDS.
wait_for () {
	deadline_=$(( $(date +%s%N) / 1000000 + ${2:-10} * 1000 ))
	while :; do
		if eval "$1" >/dev/null 2>&1; then
			return 0
		fi
		if test $(( $(date +%s%N) / 1000000 )) -ge $deadline_; then
			echo "wait_for: timed out after ${2:-10}s waiting for: $1" >&2
			return 1
		fi
		sleep 0.1
	done
}

# Milliseconds since the epoch, for measuring how long a command took.
now_ms () {
	echo $(( $(date +%s%N) / 1000000 ))
}

test_done () {
	echo "1..$test_count"
	if test "$test_failed" -ne 0; then
		echo "# failed $test_failed among $test_count test(s)"
		exit 1
	fi
	echo "# passed all $test_count test(s)"
	exit 0
}

# --- the programs under test --------------------------------------------------------

# orch ARGS...  — orchestrate with the trash directory's config file.  Global
# options go before the command (orchestrate(1) SYNOPSIS: orchestrate [GLOBAL OPTIONS] COMMAND).
orch () {
	orchestrate --config "$ORCH_CONFIG" "$@"
}

test_have_orchestrate () {
	test -f "$REPO_ROOT/bin/orchestrate" && test -x "$REPO_ROOT/bin/orchestrate" ||
		skip_all "the orchestrate binary is not built (run make)"
}

test_have_orchestrated () {
	test -f "$REPO_ROOT/bin/orchestrated" && test -x "$REPO_ROOT/bin/orchestrated" ||
		skip_all "the orchestrated binary is not built (run make)"
}

# --- ports ------------------------------------------------------------------------

port_in_use () {
	ss -ltnH "sport = :$1" 2>/dev/null | grep -q .
}

# Prints a free TCP port on 127.0.0.1, tried at random in 20000–60000.
free_port () {
	# Below the kernel's ephemeral range: a port in it may be handed to any
	# outgoing connection (a daemon's, etcdctl's) while an etcd the test
	# stopped is down, and the restart then fails with "address already in
	# use" (t0800 did, once).  Above it when that leaves too little room.
	lo_=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	if test "${lo_:-0}" -gt 15000; then
		base_=10000 span_=$((lo_ - 10000))
	else
		base_=20000 span_=40000
	fi
	i_=0
	while test $i_ -lt 200; do
		p_=$(( base_ + ( $(od -An -N4 -tu4 /dev/urandom | tr -d ' ') % span_ ) ))
		if ! port_in_use "$p_" && ! grep -qx "$p_" "$ETCD_STATE/ports" 2>/dev/null; then
			echo "$p_" >>"$ETCD_STATE/ports"
			echo "$p_"
			return 0
		fi
		i_=$((i_ + 1))
	done
	echo "free_port: no free port found" >&2
	return 1
}

# --- etcd -------------------------------------------------------------------------

command -v etcd >/dev/null 2>&1 || skip_all "etcd is not installed"
command -v etcdctl >/dev/null 2>&1 || skip_all "etcdctl is not installed"

# Launches the etcd described by $ETCD_STATE/NAME and waits until it is healthy.
etcd_launch_ () {
	d_="$ETCD_STATE/$1"
	cport_=$(cat "$d_/client_port")
	pport_=$(cat "$d_/peer_port")
	datadir_=$(cat "$d_/datadir")
	scheme_=$(cat "$d_/scheme")
	# etcd reads ETCD_* variables as flags: keep ours away from it.
	# shellcheck disable=SC2086 # extra arguments are words on purpose
	env -u ETCD_URL -u ETCD_PORT -u ETCD_SCHEME -u ETCD_EXTRA_ARGS \
		etcd --name "$1" --data-dir "$datadir_" \
		--listen-client-urls "$scheme_://127.0.0.1:$cport_" \
		--advertise-client-urls "$scheme_://127.0.0.1:$cport_" \
		--listen-peer-urls "http://127.0.0.1:$pport_" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pport_" \
		--initial-cluster "$1=http://127.0.0.1:$pport_" \
		--initial-cluster-token "orchestrate-test-$1" \
		--auto-compaction-retention 0 \
		$(cat "$d_/extra_args") \
		>>"$TRASH/etcd.$1.log" 2>&1 &
	echo $! >"$d_/pid"
	pid_=$!
	deadline_=$(( $(date +%s) + 20 ))
	while test "$(date +%s)" -le $deadline_; do
		if ! kill -0 "$pid_" 2>/dev/null; then
			return 1
		fi
		if etcdctl --endpoints "$scheme_://127.0.0.1:$cport_" --dial-timeout=1s \
			--command-timeout=2s endpoint health >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	kill -9 "$pid_" 2>/dev/null || :
	return 1
}

etcd_export_ () {
	test_etcd_name=$1
	ETCD_PORT=$(cat "$ETCD_STATE/$1/client_port")
	ETCD_URL="$(cat "$ETCD_STATE/$1/scheme")://127.0.0.1:$ETCD_PORT"
	ORCHESTRATE_ETCD=$ETCD_URL
	export ETCD_PORT ETCD_URL ORCHESTRATE_ETCD
}

# start_etcd [NAME]  — starts an etcd and exports ETCD_URL, ETCD_PORT and
# ORCHESTRATE_ETCD for it.  Bails out the whole script when etcd cannot start.
# ETCD_SCHEME=https and ETCD_EXTRA_ARGS (words: --cert-file ... for TLS) are
# remembered for restart_etcd; the health check's etcdctl takes ETCDCTL_CACERT,
# ETCDCTL_CERT and ETCDCTL_KEY from the environment.
start_etcd () {
	name_=${1:-etcd}
	d_="$ETCD_STATE/$name_"
	mkdir -p "$d_"
	echo "${ETCD_SCHEME:-http}" >"$d_/scheme"
	echo "${ETCD_EXTRA_ARGS:-}" >"$d_/extra_args"
	mktemp -d "${TMPDIR:-/tmp}/orchestrate-test-etcd.XXXXXX" >"$d_/datadir" || exit 1
	tries_=0
	while test $tries_ -lt 3; do
		free_port >"$d_/client_port" && free_port >"$d_/peer_port" || exit 1
		if etcd_launch_ "$name_"; then
			etcd_export_ "$name_"
			return 0
		fi
		# Most likely a port taken between the check and the bind: retry
		# with fresh ports and a fresh data dir.
		rm -rf "$(cat "$d_/datadir")"
		mkdir -p "$(cat "$d_/datadir")"
		tries_=$((tries_ + 1))
	done
	echo "Bail out! cannot start etcd (see $TRASH/etcd.$name_.log)"
	tail -n 20 "$TRASH/etcd.$name_.log" | say_comment
	ORCHESTRATE_TEST_DEBUG=1
	exit 1
}

# stop_etcd [NAME]  — stops it (SIGTERM, then SIGKILL after 5 s), keeping data and ports.
stop_etcd () {
	d_="$ETCD_STATE/${1:-${test_etcd_name:-etcd}}"
	test -f "$d_/pid" || return 0
	pid_=$(cat "$d_/pid")
	kill "$pid_" 2>/dev/null || :
	wait_gone_ "$pid_"
	wait "$pid_" 2>/dev/null || :
	rm -f "$d_/pid"
	return 0
}

# restart_etcd [NAME]  — stops it and starts it again on the same ports and data.
restart_etcd () {
	name_=${1:-${test_etcd_name:-etcd}}
	stop_etcd "$name_"
	etcd_launch_ "$name_" || {
		echo "restart_etcd: etcd '$name_' did not come back" >&2
		return 1
	}
	etcd_export_ "$name_"
}

etcdctl_ () {
	etcdctl --endpoints "$ETCD_URL" --dial-timeout=2s --command-timeout=10s "$@"
}

# etcdctl_get KEY  — prints the value only (nothing when absent).
etcdctl_get () {
	etcdctl_ get --print-value-only "$1"
}

# etcdctl_put KEY VALUE
etcdctl_put () {
	etcdctl_ put -- "$1" "$2" >/dev/null
}

etcdctl_del () {
	etcdctl_ del -- "$1" >/dev/null
}

# etcdctl_keys PREFIX  — every key under PREFIX, one a line.
etcdctl_keys () {
	etcdctl_ get --prefix --keys-only -- "$1" | sed -e '/^$/d'
}

# running_at HOST VERSION  — running_version/HOST says VERSION (P: $PREFIX_RV,
# default none, is put before the key).
running_at () {
	test "$(etcdctl_get "${PREFIX_RV:-}/running_version/$1" |
		python3 -c 'import json,sys
try: print(json.load(sys.stdin).get("version", ""))
except Exception: pass')" = "$2"
}

# running_put HOST VERSION  — writes running_version/HOST as a node would.
running_put () {
	etcdctl_put "${PREFIX_RV:-}/running_version/$1" "{\"version\":\"$2\",\"time\":1}"
}

# etcdctl_count PREFIX  — how many keys under PREFIX.
etcdctl_count () {
	etcdctl_ get --prefix --keys-only -w json -- "$1" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))'
}

# etcdctl_exists KEY
etcdctl_exists () {
	etcdctl_ get --keys-only -w json -- "$1" |
		python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin).get("count", 0) else 1)'
}

# etcdctl_dump  — every key and value, for before/after comparisons.
etcdctl_dump () {
	etcdctl_ get --prefix "" -w json |
		python3 -c '
import base64, json, sys
d = json.load(sys.stdin)
for kv in d.get("kvs", []):
    k = base64.b64decode(kv["key"]).decode("utf-8", "replace")
    v = base64.b64decode(kv.get("value", "")).decode("utf-8", "replace")
    print(repr(k), repr(v), kv.get("mod_revision"))
'
}

# etcdctl_json_field KEY FIELD  — one field of the JSON value at KEY.
etcdctl_json_field () {
	etcdctl_get "$1" | python3 -c '
import json, sys
v = json.load(sys.stdin)
f = v[sys.argv[1]]
print(json.dumps(f) if isinstance(f, (dict, list, bool)) or f is None else f)
' "$2"
}

# The lease a key is attached to, in hex (as etcdctl lease commands want it).
etcdctl_lease_of () {
	etcdctl_ get -w json -- "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
kvs = d.get("kvs", [])
if not kvs or not kvs[0].get("lease"):
    sys.exit(1)
print("%x" % kvs[0]["lease"])
'
}

# The remaining TTL (seconds) and the granted TTL of the lease holding KEY:
# prints "REMAINING GRANTED".
etcdctl_ttl_of () {
	lease_=$(etcdctl_lease_of "$1") || return 1
	etcdctl_ lease timetolive -w json "$lease_" | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["ttl"], d["granted-ttl"])
'
}

# test_etcd_driver NAME WHAT MIN  — runs tests/unit/NAME, a C driver of
# cases against a real etcd, against this script's (ORCHESTRATE_TEST_ETCD),
# as two tests: it passes (its output shown when not), and at least MIN of
# its cases ran, none failed.
test_etcd_driver () {
	test_expect_success "the $2 driver passes against a real etcd" "
		test -x \"\$REPO_ROOT/tests/unit/$1\" &&
		ORCHESTRATE_TEST_ETCD=\$ETCD_URL \"\$REPO_ROOT/tests/unit/$1\" >out 2>&1 ||
		{ cat out; false; }
	"
	test_expect_success 'every case ran and none failed' "
		cat out &&
		! grep \"^not ok\" out &&
		test \"\$(grep -c \"^ok\" out)\" -ge $3
	"
}

# A URL on which nothing listens.
dead_url () {
	echo "http://127.0.0.1:$(free_port)"
}

# json_ok FILE  — the file is valid JSON.
json_ok () {
	python3 -c 'import json,sys; json.load(sys.stdin)' <"$1"
}

# --- a multi-member etcd cluster ----------------------------------------------------

# A cluster's members are ordinary entries of $ETCD_STATE (named NAME1..NAMEn,
# default m1..mN), so test_cleanup stops them like any etcd.  Every member is
# launched before any is waited for: a member answers health only once the
# cluster has a quorum.

# Launches member NAME of a cluster in the background (no wait).
etcd_member_launch_ () {
	cd_="$ETCD_STATE/$1"
	# shellcheck disable=SC2086 # extra arguments are words on purpose
	env -u ETCD_URL -u ETCD_URLS -u ETCD_PORT -u ETCD_SCHEME -u ETCD_EXTRA_ARGS \
		etcd --name "$1" --data-dir "$(cat "$cd_/datadir")" \
		--listen-client-urls "http://127.0.0.1:$(cat "$cd_/client_port")" \
		--advertise-client-urls "http://127.0.0.1:$(cat "$cd_/client_port")" \
		--listen-peer-urls "http://127.0.0.1:$(cat "$cd_/peer_port")" \
		--initial-advertise-peer-urls "http://127.0.0.1:$(cat "$cd_/peer_port")" \
		--initial-cluster "$(cat "$cd_/initial_cluster")" \
		--initial-cluster-token "$(cat "$cd_/token")" \
		--initial-cluster-state new \
		--auto-compaction-retention 0 \
		$(cat "$cd_/extra_args") \
		>>"$TRASH/etcd.$1.log" 2>&1 &
	echo $! >"$cd_/pid"
}

# etcd_member_url NAME|INDEX  — the client URL of a member.
etcd_member_url () {
	case $1 in
	[0-9]*) cm_="${test_cluster_prefix:-m}$1" ;;
	*) cm_=$1 ;;
	esac
	echo "http://127.0.0.1:$(cat "$ETCD_STATE/$cm_/client_port")"
}

# etcd_member_healthy NAME|INDEX  — the member answers a health check itself.
etcd_member_healthy () {
	etcdctl --endpoints "$(etcd_member_url "$1")" --dial-timeout=1s \
		--command-timeout=2s endpoint health >/dev/null 2>&1
}

# start_etcd_cluster N [PREFIX]  — starts an N-member cluster on loopback
# (members PREFIX1..PREFIXN, default m1..mN) and exports ETCD_URLS, the client
# URLs comma-separated, and ETCD_URL and ORCHESTRATE_ETCD set to that same list
# (so etcdctl_* and orch talk to the whole cluster).  Bails out when the
# cluster does not become healthy within 30 s.
start_etcd_cluster () {
	cn_=$1
	test_cluster_prefix=${2:-m}
	test_cluster_size=$cn_
	cinitial_=
	curls_=
	ctoken_="orchestrate-test-cluster-$$"
	ci_=1
	while test "$ci_" -le "$cn_"; do
		cm_="$test_cluster_prefix$ci_"
		cd_="$ETCD_STATE/$cm_"
		mkdir -p "$cd_"
		echo http >"$cd_/scheme"
		echo "${ETCD_EXTRA_ARGS:-}" >"$cd_/extra_args"
		echo "$ctoken_" >"$cd_/token"
		mktemp -d "${TMPDIR:-/tmp}/orchestrate-test-etcd.XXXXXX" >"$cd_/datadir" || exit 1
		free_port >"$cd_/client_port" && free_port >"$cd_/peer_port" || exit 1
		cinitial_="$cinitial_${cinitial_:+,}$cm_=http://127.0.0.1:$(cat "$cd_/peer_port")"
		curls_="$curls_${curls_:+,}http://127.0.0.1:$(cat "$cd_/client_port")"
		ci_=$((ci_ + 1))
	done
	ci_=1
	while test "$ci_" -le "$cn_"; do
		echo "$cinitial_" >"$ETCD_STATE/$test_cluster_prefix$ci_/initial_cluster"
		etcd_member_launch_ "$test_cluster_prefix$ci_"
		ci_=$((ci_ + 1))
	done
	ci_=1
	while test "$ci_" -le "$cn_"; do
		if ! wait_for "etcd_member_healthy $ci_" 30; then
			echo "Bail out! etcd cluster member $test_cluster_prefix$ci_ did not become healthy"
			tail -n 20 "$TRASH/etcd.$test_cluster_prefix$ci_.log" | say_comment
			ORCHESTRATE_TEST_DEBUG=1
			exit 1
		fi
		ci_=$((ci_ + 1))
	done
	ETCD_URLS=$curls_
	ETCD_URL=$curls_
	ORCHESTRATE_ETCD=$curls_
	test_etcd_name=
	export ETCD_URLS ETCD_URL ORCHESTRATE_ETCD
}

# etcd_cluster_leader  — prints the index (1..N) of the member that is the
# leader (its status says leader == its own member_id); fails when no member
# that answers is the leader.
etcd_cluster_leader () {
	ci_=1
	while test "$ci_" -le "$test_cluster_size"; do
		if etcdctl --endpoints "$(etcd_member_url "$ci_")" --dial-timeout=1s \
			--command-timeout=2s endpoint status -w json 2>/dev/null |
			python3 -c '
import json, sys
d = json.load(sys.stdin)
h = d[0]["Status"]["header"]
sys.exit(0 if d[0]["Status"]["leader"] == h["member_id"] else 1)'; then
			echo "$ci_"
			return 0
		fi
		ci_=$((ci_ + 1))
	done
	return 1
}

# kill_etcd_member INDEX [SIGNAL]  — kills a member (default SIGKILL: a crash)
# and waits until it is gone; its data and ports are kept for restart.
kill_etcd_member () {
	cd_="$ETCD_STATE/$test_cluster_prefix$1"
	test -f "$cd_/pid" || return 0
	cpid_=$(cat "$cd_/pid")
	kill -"${2:-KILL}" "$cpid_" 2>/dev/null || :
	wait_for "! kill -0 $cpid_" 10 || return 1
	wait "$cpid_" 2>/dev/null || :
	rm -f "$cd_/pid"
}

# restart_etcd_member INDEX  — starts a killed member again on its data and
# ports and waits (bounded) until it answers health itself.
restart_etcd_member () {
	etcd_member_launch_ "$test_cluster_prefix$1"
	wait_for "etcd_member_healthy $1" 30 || {
		echo "restart_etcd_member: member $1 did not come back" >&2
		tail -n 20 "$TRASH/etcd.$test_cluster_prefix$1.log" >&2
		return 1
	}
}
