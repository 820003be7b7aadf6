#!/usr/bin/env bash
#
# status10k.sh — how long `orchestrate status` takes on a fleet of N hosts
# (default 10,000).  Starts its own etcd on free loopback ports, seeds every
# host as a daemon would leave it (alive under a lease-less key, puppet,
# validation and provisioned states, running_version, group; 1 in 10 behind
# the desired version, 1 in 100 failed with a detail) through the gateway's
# txn endpoint, 100 puts a txn, then times `status`, `status --json` and
# `get_failures` RUNS times each and prints every time and the median.
#
# Usage: bench/status10k.sh  (from the repository root)
# Environment: N (hosts, default 10000), RUNS (default 5), ORCHESTRATE.
# With KEEP=1 it leaves etcd running and prints its URL (for perf/callgrind).

set -euo pipefail
cd "$(dirname "$0")/.."
ORCH=${ORCHESTRATE:-./bin/orchestrate}
N=${N:-10000}
RUNS=${RUNS:-5}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-status10k.XXXXXX")
ETCD_PID=
cleanup() {
	if [[ -z ${KEEP:-} && -n $ETCD_PID ]]; then
		kill "$ETCD_PID" 2>/dev/null || true
		wait "$ETCD_PID" 2>/dev/null || true
		rm -rf "$TMP"
	fi
}
trap cleanup EXIT

. scripts/local-etcd.sh
local_etcd_start "$TMP" s10k
ETCD_PID=$LOCAL_ETCD_PID
URL=$ORCHESTRATE_ETCD

# One txn body of 100 puts a line, written by python (base64 keys and values).
python3 - "$N" >"$TMP/bodies" <<'PY'
import base64, json, sys, time
n = int(sys.argv[1]); now = int(time.time())
b = lambda s: base64.b64encode(s.encode()).decode()
puts = [("current_version", "v2"), ("previous_version", "v1")]
for i in range(n):
    h = "host%05d.example.org" % i
    ver = "v1" if i % 10 == 0 else "v2"
    failed = i % 100 == 7
    puts += [
        ("alive/" + h, json.dumps({"time": now, "version": ver, "pid": 1000 + i})),
        ("status/puppet/%s/%s" % ("failed" if failed else "success", h),
         json.dumps({"time": now - i, "version": ver, "exit_code": 1 if failed else 0,
                     "detail": "Error: could not apply catalog\nline two" if failed else ""})),
        ("status/validation/success/" + h, json.dumps({"time": now - i, "version": ver, "exit_code": 0, "detail": ""})),
        ("status/provisioned/success/" + h, json.dumps({"time": now - i, "version": None, "exit_code": 0, "detail": ""})),
        ("running_version/" + h, json.dumps({"version": ver, "time": now})),
        ("groups/dc%d/%s" % (i % 3 + 1, h), ""),
    ]
for k in range(0, len(puts), 100):
    print(json.dumps({"success": [{"requestPut": {"key": b("/" + key), "value": b(val)}}
                                  for key, val in puts[k:k + 100]]}))
PY
while IFS= read -r body; do
	curl -sf -X POST "$URL/v3/kv/txn" -d "$body" >/dev/null
done <"$TMP/bodies"
echo "seeded $N hosts ($(wc -l <"$TMP/bodies") txns) at $URL"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timeit() {
	local label=$1; shift
	local t=()
	"$@" >/dev/null || true	# warm-up (get_failures exits 1 with failures)
	for ((r = 0; r < RUNS; r++)); do
		local s e
		s=$(date +%s%N); "$@" >/dev/null || true; e=$(date +%s%N)
		t+=($(( (e - s) / 1000000 )))
	done
	printf '%-28s %s ms (runs: %s)\n' "$label" "$(printf '%s\n' "${t[@]}" | median)" "${t[*]}"
}
timeit "status" "$ORCH" --etcd "$URL" status
timeit "status --json" "$ORCH" --etcd "$URL" --json status
timeit "get_failures" "$ORCH" --etcd "$URL" get_failures
if [[ -n ${KEEP:-} ]]; then echo "etcd left running: pid $ETCD_PID url $URL dir $TMP"; fi
