#!/usr/bin/env bash
#
# plan10k.sh — what `orchestrate plan` costs on a fleet of N hosts (default
# 10,000), against one raw range of the same keys.  Starts its own etcd on
# free loopback ports and seeds every host as a daemon would leave it
# (alive, puppet/validation/provisioned states, running_version, group, and
# a run history of 10 runs), 1 in 50 hosts dead (no alive key), 1 in 200
# paused, 1 in 500 waiting for a dependency, under a policy of three groups
# with max_parallel 50, a canary and a failure budget; no daemon runs.  Then
# times `plan v3` (text and --json) and, for the same keys, one raw range
# of the whole prefix with curl (what the plan cannot do with less than
# reading), RUNS times each: the median wall time and the peak RSS
# (/usr/bin/time), and the ratios plan/raw.
#
# Usage: bench/plan10k.sh  (from the repository root; starts etcd, so run it
# under the machine's heavy-work lock where there is one)
# Environment: N (hosts, default 10000), RUNS (default 5), ORCHESTRATE.

set -euo pipefail
cd "$(dirname "$0")/.."
ORCH=${ORCHESTRATE:-./bin/orchestrate}
N=${N:-10000}
RUNS=${RUNS:-5}

TMP=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-plan10k.XXXXXX")
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
local_etcd_start "$TMP" plan10k --quota-backend-bytes=4294967296
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

# The raw range: every key of the prefix (the plan's ranges are all of it
# but available_services/, which is not seeded), one request, the reply
# thrown away.
RAW_BODY="{\"key\":\"$(printf / | base64)\",\"range_end\":\"$(printf 0 | base64)\"}"

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# measure LABEL CMD...  — sets MS and KB (medians of RUNS runs after a warm-up)
measure() {
	local label=$1; shift
	local t=() m=()
	"$@" >/dev/null
	for ((r = 0; r < RUNS; r++)); do
		local s e
		s=$(date +%s%N)
		/usr/bin/time -f %M -o "$TMP/rss" "$@" >/dev/null
		e=$(date +%s%N)
		t+=($(( (e - s) / 1000000 )))
		m+=($(tail -n 1 "$TMP/rss"))
	done
	MS=$(printf '%s\n' "${t[@]}" | median)
	KB=$(printf '%s\n' "${m[@]}" | median)
	printf '%-22s %6s ms  %7s KiB peak RSS  (runs: %s ms)\n' "$label" "$MS" "$KB" "${t[*]}"
}

measure "raw range (curl)" curl -sf -X POST "$URL/v3/kv/range" -d "$RAW_BODY" -o /dev/null
RAW_MS=$MS RAW_KB=$KB
measure "plan v3" "$ORCH" --etcd "$URL" plan v3
PLAN_MS=$MS PLAN_KB=$KB
measure "plan v3 --json" "$ORCH" --etcd "$URL" --json plan v3
JSON_MS=$MS JSON_KB=$KB
measure "status (same view)" "$ORCH" --etcd "$URL" status
awk -v p="$PLAN_MS" -v j="$JSON_MS" -v r="$RAW_MS" -v pk="$PLAN_KB" -v jk="$JSON_KB" -v rk="$RAW_KB" 'BEGIN {
	if (r < 1) r = 1
	printf "ratio plan/raw: %.2fx wall, %.2fx peak RSS; plan --json/raw: %.2fx wall, %.2fx peak RSS\n",
		p / r, pk / rk, j / r, jk / rk
}'
"$ORCH" --etcd "$URL" plan v3 | sed -n '1,8p'
