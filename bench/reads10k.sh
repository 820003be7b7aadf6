#!/usr/bin/env bash
#
# reads10k.sh — what the commands that read the whole fleet cost on N hosts
# (default 10,000), each against one raw range of the same keys.  Starts its
# own etcd on free loopback ports and seeds every host as a daemon would
# leave it (alive, puppet/validation/provisioned states, running_version,
# group, and a run history of 10 runs), 1 in 50 hosts dead (no alive key),
# 1 in 200 paused, 1 in 500 waiting for a dependency, under a policy of
# three groups with max_parallel 50, a canary and a failure budget; no
# daemon runs.  Then times, RUNS times each: the median wall time, peak RSS
# and own CPU (/usr/bin/time), and the ratios command/raw:
#
#   plan v3 (text and --json)   against one range of the whole prefix
#   history --version v1 (text and --json), and v9 (no run: the read and
#   decoding alone)             against one range of history/ (and, beside
#                               it, the two pages of 5000 the command asks)
#   history HOST                against one range of that one key
#   status --prometheus, status against the ranges of every key but history/
#                               (one curl process, one connection: history/
#                               sits inside the prefix, so they are two)
#
# with curl for the raw reads (what the command cannot do with less than
# reading; the reply thrown away).
#
# Usage: bench/reads10k.sh  (from the repository root; starts etcd, so run it
# under the machine's heavy-work lock where there is one)
# Environment: N (hosts, default 10000), RUNS (default 5), ORCHESTRATE.

set -euo pipefail
cd "$(dirname "$0")/.."
ORCH=${ORCHESTRATE:-./bin/orchestrate}
N=${N:-10000}
RUNS=${RUNS:-5}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-reads10k.XXXXXX")
ETCD_PID=
cleanup() {
	if [[ -n $ETCD_PID ]]; then
		kill "$ETCD_PID" 2>/dev/null || true
		wait "$ETCD_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT

. scripts/local-etcd.sh
local_etcd_start "$TMP" reads10k --quota-backend-bytes=4294967296
ETCD_PID=$LOCAL_ETCD_PID
URL=$ORCHESTRATE_ETCD

# One txn body of 100 puts a line (base64 keys and values).
python3 - "$N" >"$TMP/bodies" <<'PY'
import base64, json, sys, time
n = int(sys.argv[1]); now = int(time.time())
b = lambda s: base64.b64encode(s.encode()).decode()
puts = [("current_version", "v2"), ("previous_version", "v1"),
        ("rollout/policy", json.dumps({"max_parallel": 50, "groups": ["dc1", "dc2", "dc3"],
                                       "canary": 5, "auto_promote": True, "max_failures": 20}))]
for i in range(n):
    h = "host%05d.example.org" % i
    ver = "v1" if i % 10 == 0 else "v2"
    st = lambda: json.dumps({"time": now - i, "version": ver, "exit_code": 0, "detail": ""})
    if i % 50 != 3:
        puts.append(("alive/" + h, json.dumps({"time": now, "version": ver, "pid": 1000 + i})))
    if i % 500 == 11:
        puts.append(("status/puppet/pending/" + h,
                     json.dumps({"time": now, "version": "v2", "exit_code": -1,
                                 "detail": "waiting for 1 mysql, have 0", "wait": "dependency"})))
    else:
        puts.append(("status/puppet/success/" + h, st()))
    if i % 200 == 17:
        puts.append(("pause/hosts/" + h, json.dumps({"reason": "disk swap", "time": now})))
    runs = [{"version": "v%d" % (k % 3), "start": now - 3600 * k, "duration": 40 + (i + k) % 30,
             "result": "success", "attempt": 1} for k in range(10)]
    puts += [
        ("status/validation/success/" + h, st()),
        ("status/provisioned/success/" + h, st()),
        ("running_version/" + h, json.dumps({"version": ver, "time": now})),
        ("groups/dc%d/%s" % (i % 3 + 1, h), ""),
        ("history/" + h, json.dumps({"runs": runs})),
    ]
for k in range(0, len(puts), 100):
    print(json.dumps({"success": [{"requestPut": {"key": b("/" + key), "value": b(val)}}
                                  for key, val in puts[k:k + 100]]}))
PY
while IFS= read -r body; do
	curl -sf -X POST "$URL/v3/kv/txn" -d "$body" >/dev/null
done <"$TMP/bodies"
KEYS=$(curl -sf -X POST "$URL/v3/kv/range" -d "{\"key\":\"$(printf / | base64)\",\"range_end\":\"$(printf 0 | base64)\",\"count_only\":true}" |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["count"])')
echo "seeded $N hosts: $KEYS keys ($(wc -l <"$TMP/bodies") txns) at $URL"

b64() { printf %s "$1" | base64 -w0; }
# range FROM END: a range request's body (END empty: the one key FROM)
range() {
	if [[ -n $2 ]]; then
		printf '{"key":"%s","range_end":"%s"}' "$(b64 "$1")" "$(b64 "$2")"
	else
		printf '{"key":"%s"}' "$(b64 "$1")"
	fi
}
RAW=(curl -sf -X POST "$URL/v3/kv/range" -o /dev/null -d)
# The raw reads.  The plan's ranges are all of the prefix but
# available_services/, which is not seeded.  history --version reads
# history/ alone, history HOST one key.  status and status --prometheus
# read current_version, previous_version, status/, running_version/,
# alive/, groups/ (keys only), pause/ and rollout/: every key but history/,
# which sorts between groups/ and pause/, so two ranges on one connection.
HOST=host00042.example.org
ALL=$(range / 0)
HIST=$(range /history/ /history0)
ONE=$(range "/history/$HOST" "")
BEFORE=$(range / /history/)
AFTER=$(range /history0 0)
# count FROM END: how many keys a range holds
count() {
	curl -sf -X POST "$URL/v3/kv/range" -d "$(range "$1" "$2" | sed 's/}$/,"count_only":true}/')" |
		python3 -c 'import json,sys; print(json.load(sys.stdin).get("count", 0))'
}
echo "history/: $(count /history/ /history0) keys; history/$HOST: $(count "/history/$HOST" "")" \
	"key; status's: $(count / /history/) + $(count /history0 0) keys"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# measure LABEL CMD...  — sets MS, KB and CPU (medians of RUNS runs after a
# warm-up: wall time, peak RSS, and the command's own user + system CPU, so
# that the rest of the wall time is waiting, mostly for etcd)
measure() {
	local label=$1; shift
	local t=() m=() c=()
	"$@" >/dev/null
	for ((r = 0; r < RUNS; r++)); do
		local s e
		s=$(date +%s%N)
		/usr/bin/time -f '%M %U %S' -o "$TMP/rss" "$@" >/dev/null
		e=$(date +%s%N)
		t+=($(( (e - s) / 1000000 )))
		read -r kb u sy < <(tail -n 1 "$TMP/rss")
		m+=("$kb")
		c+=("$(awk -v u="$u" -v s="$sy" 'BEGIN { printf "%d", (u + s) * 1000 }')")
	done
	MS=$(printf '%s\n' "${t[@]}" | median)
	KB=$(printf '%s\n' "${m[@]}" | median)
	CPU=$(printf '%s\n' "${c[@]}" | median)
	printf '%-30s %6s ms  %7s KiB peak RSS  %5s ms CPU  (runs: %s ms)\n' \
		"$label" "$MS" "$KB" "$CPU" "${t[*]}"
}
# ratio LABEL — the last measure() against the raw read of REF_MS and REF_KB
ratio() {
	awk -v l="$1" -v c="$MS" -v ck="$KB" -v r="$REF_MS" -v rk="$REF_KB" 'BEGIN {
		if (r < 1) r = 1
		printf "  ratio %s: %.2fx wall, %.2fx peak RSS\n", l, c / r, ck / rk
	}'
}
O=("$ORCH" --etcd "$URL")

measure "raw range, every key (curl)" "${RAW[@]}" "$ALL"
REF_MS=$MS REF_KB=$KB
measure "plan v3" "${O[@]}" plan v3
ratio "plan/raw"
measure "plan v3 --json" "${O[@]}" --json plan v3
ratio "plan --json/raw"

measure "raw range, history/ (curl)" "${RAW[@]}" "$HIST"
REF_MS=$MS REF_KB=$KB
# What history --version asks of etcd: its range in pages of 5000 keys
# (etcd.c's DEFAULT_PAGE_SIZE), the second from just after the first's last
# key (host04999 when N >= 5000); here on one connection, not pinned to the
# first page's revision (nothing writes meanwhile).
PAGE1=$(printf '{"key":"%s","range_end":"%s","limit":5000}' "$(b64 /history/)" "$(b64 /history0)")
PAGE2=$(printf '{"key":"%s","range_end":"%s","limit":5000}' \
	"$(printf '/history/host04999.example.org\0' | base64 -w0)" "$(b64 /history0)")
measure "raw history/, 2 pages of 5000" "${RAW[@]}" "$PAGE1" --next "${RAW[@]:1}" "$PAGE2"
measure "history --version v1" "${O[@]}" history --version v1
ratio "history --version/raw"
measure "history --version v1 --json" "${O[@]}" --json history --version v1
ratio "history --version --json/raw"
# A version no run has: the same read and decoding, nothing kept or printed
# (exit 1: no runs).
measure "history --version v9 (no run)" sh -c '"$@"; [ $? -eq 1 ]' - "${O[@]}" history --version v9
ratio "history --version v9/raw"

measure "raw range, history/HOST" "${RAW[@]}" "$ONE"
REF_MS=$MS REF_KB=$KB
measure "history HOST" "${O[@]}" history "$HOST"
ratio "history HOST/raw"

measure "raw ranges, status's keys" "${RAW[@]}" "$BEFORE" --next "${RAW[@]:1}" "$AFTER"
REF_MS=$MS REF_KB=$KB
measure "status --prometheus" "${O[@]}" status --prometheus
ratio "status --prometheus/raw"
measure "status" "${O[@]}" status
ratio "status/raw"

"${O[@]}" plan v3 | sed -n '1,8p'
"${O[@]}" history --version v1 | sed -n '1,3p'
"${O[@]}" status --prometheus | grep -c '^orchestrate_' | sed 's/$/ samples in the exposition/'
