#!/usr/bin/env bash
#
# bench.sh — how fast is orchestrate against what an operator would otherwise
# write: etcdctl in a shell pipeline, and the floor, one curl request.
#
# It starts its own etcd on free 127.0.0.1 ports with a data dir under a temp
# directory, seeds N hosts (1,000 and 10,000) through the gateway's txn endpoint
# (128 puts a txn, etcd's default --max-txn-ops), times each job RUNS times after
# one warm-up and prints the median in milliseconds.  Every loop is bounded and
# etcd is killed on exit, whatever happens.
#
# Usage: bench/bench.sh            (from the repository root; `make bench`)
# Environment: ORCHESTRATE (the binary, default ./bin/orchestrate), RUNS (default 7),
#              BENCH_SIZES (default "1000 10000"), ETCD, ETCDCTL.
#
# A missing ./bin/orchestrate is not an error: its column reads "-" (handy while the
# binary does not link yet).  jq is optional: without it the etcdctl column of
# cache_services reads "-" with a note.  Nothing is installed.

set -euo pipefail

cd "$(dirname "$0")/.."
# The binary goes to bin/ (orchestrate/ is the source folder).
ORCH=${ORCHESTRATE:-./bin/orchestrate}
RUNS=${RUNS:-7}
SIZES=${BENCH_SIZES:-"1000 10000"}
ETCD=${ETCD:-etcd}
ETCDCTL=${ETCDCTL:-etcdctl}

die() { echo "bench: $*" >&2; exit 1; }

for tool in "$ETCD" "$ETCDCTL" curl awk sort comm sed base64; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found"
done
date +%N | grep -q '^[0-9]\{9\}$' || die "date +%N does not give nanoseconds"

have_orch=0
if [[ -f $ORCH && -x $ORCH ]]; then have_orch=1; else echo "bench: '$ORCH' not built; its column reads '-'" >&2; fi
have_jq=0
if command -v jq >/dev/null 2>&1; then have_jq=1; else echo "bench: jq not installed; the etcdctl row of cache_services is skipped" >&2; fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-bench.XXXXXX")
ETCD_PID=
cleanup() {
	if [[ -n $ETCD_PID ]]; then
		kill "$ETCD_PID" 2>/dev/null || true
		wait "$ETCD_PID" 2>/dev/null || true
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- etcd on free loopback ports ------------------------------------------------

. scripts/local-etcd.sh
local_etcd_start "$TMP" bench || die "etcd did not start"
ETCD_PID=$LOCAL_ETCD_PID
URL=$ORCHESTRATE_ETCD

export ETCDCTL_API=3
ECTL=("$ETCDCTL" --endpoints="$URL")

# --- seeding ------------------------------------------------------------------

# The gateway wants keys and values in base64; one base64(1) process per key
# would dominate the seeding, so awk encodes them.
AWK_B64='
function b64(s,    out, i, n, a, b, c) {
	out = ""; n = length(s)
	for (i = 1; i <= n; i += 3) {
		a = ORD[substr(s, i, 1)]
		b = (i + 1 <= n) ? ORD[substr(s, i + 1, 1)] : 0
		c = (i + 2 <= n) ? ORD[substr(s, i + 2, 1)] : 0
		out = out substr(B64, int(a / 4) + 1, 1)
		out = out substr(B64, (a % 4) * 16 + int(b / 16) + 1, 1)
		out = out ((i + 1 <= n) ? substr(B64, (b % 16) * 4 + int(c / 64) + 1, 1) : "=")
		out = out ((i + 2 <= n) ? substr(B64, c % 64 + 1, 1) : "=")
	}
	return out
}
BEGIN {
	B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for (i = 32; i < 127; i++) ORD[sprintf("%c", i)] = i
}'

b64() { printf '%s' "$1" | base64 -w0; }

# range_end for a prefix: the prefix with its last byte incremented.
prefix_end() {
	local p=$1 last
	last=$(printf '%d' "'${p: -1}")
	printf '%s' "${p%?}$(printf "\\$(printf '%03o' $((last + 1)))")"
}

# put_all FILE: FILE holds "key<TAB>value" lines; sends them 128 to a txn.
put_all() {
	local file=$1 body n=0
	rm -f "$TMP"/txn.*
	awk -F '\t' -v dir="$TMP" "$AWK_B64"'
	{
		if ((NR - 1) % 128 == 0) {
			if (out != "") { print "]}" > out; close(out) }
			out = sprintf("%s/txn.%06d", dir, (NR - 1) / 128)
			printf "{\"success\":[" > out
			sep = ""
		}
		printf "%s{\"requestPut\":{\"key\":\"%s\",\"value\":\"%s\"}}", sep, b64($1), b64($2) > out
		sep = ","
	}
	END { if (out != "") print "]}" > out }' "$file"
	for body in "$TMP"/txn.*; do
		[[ -e $body ]] || break
		curl -sf -X POST "$URL/v3/kv/txn" --data-binary "@$body" >"$TMP/txn.out" ||
			die "seeding txn $body failed"
		grep -q '"succeeded":true' "$TMP/txn.out" || die "seeding txn $body refused: $(head -c 300 "$TMP/txn.out")"
		n=$((n + 1))
	done
}

count_prefix() {
	curl -sf -X POST "$URL/v3/kv/range" -d "{\"key\":\"$(b64 "$1")\",\"range_end\":\"$(b64 "$(prefix_end "$1")")\",\"count_only\":true}" |
		sed -n 's/.*"count":"\([0-9]*\)".*/\1/p'
}

# seed N: N hosts at v1 (running_version/HOST) and publishing service "svc".
seed() {
	local n=$1
	curl -sf -X POST "$URL/v3/kv/deleterange" \
		-d "{\"key\":\"$(b64 /)\",\"range_end\":\"$(b64 0)\"}" >/dev/null || die "cannot clear etcd"
	awk -v n="$n" 'BEGIN {
		for (i = 1; i <= n; i++) printf "host-%05d\n", i
	}' >"$TMP/hosts.txt"
	awk -v t="$(date +%s)" '{
		printf "/running_version/%s\t{\"version\":\"v1\",\"time\":%s}\n", $1, t
		printf "/available_services/svc/%s\t{\"addresses\":{\"eth0\":\"10.%d.%d.%d\"},\"healthy\":true}\n",
			$1, int(NR / 65536) % 256, int(NR / 256) % 256, NR % 256
	}' "$TMP/hosts.txt" >"$TMP/seed.tsv"
	printf '/current_version\tv1\n/previous_version\tv0\n' >>"$TMP/seed.tsv"
	put_all "$TMP/seed.tsv"
	[[ $(count_prefix /running_version/) == "$n" ]] || die "seeded running_version count is wrong"
	[[ $(count_prefix /available_services/svc/) == "$n" ]] || die "seeded service count is wrong"
}

# --- the jobs -------------------------------------------------------------------
# Each job writes to $TMP/out and returns the status a correct answer gives.

RV_KEY=$(b64 /running_version/)
RV_END=$(b64 "$(prefix_end /running_version/)")
SV_KEY=$(b64 /available_services/)
SV_END=$(b64 "$(prefix_end /available_services/)")
CV_KEY=$(b64 /current_version)

orch() { "$ORCH" --etcd "$URL" "$@"; }

job_verify_orch() { orch verify_hosts v1 <"$TMP/hosts.txt" >"$TMP/out"; }
job_verify_etcdctl() {
	"${ECTL[@]}" get --prefix -w fields /running_version/ |
		# etcdctl quotes the value as a Go string: \"version\":\"v1\"
		PAT='\"version\":\"v1\"' awk -F' : ' '/^"Key"/ { k = $2 }
			/^"Value"/ && index($2, ENVIRON["PAT"]) { gsub(/"|\/running_version\//, "", k); print k }' |
		sort >"$TMP/have"
	sort "$TMP/hosts.txt" | comm -23 - "$TMP/have" >"$TMP/out"
	[[ ! -s $TMP/out ]]
}
job_verify_curl() {
	curl -sf -X POST "$URL/v3/kv/range" \
		-d "{\"key\":\"$RV_KEY\",\"range_end\":\"$RV_END\"}" >/dev/null
}

run_no=0
job_cache_orch() {
	run_no=$((run_no + 1))
	orch cache_services --output "$TMP/services.$run_no.yaml" >"$TMP/out"
}
# What an operator would write without orchestrate: decode, group, sort, and
# write the file atomically.
JQ_HIERA='
  [ .kvs[]? | { s: (.key | @base64d | split("/")[2]), v: (.value | @base64d | fromjson) } ] as $all
  | [ $all[] | . as $e | $e.v.addresses | to_entries[]
      | { k: "services::\($e.s)::\(.key)", a: .value } ]
    + [ $all[] | select(.v.healthy) | . as $e | $e.v.addresses | to_entries[]
      | { k: "healthy_services::\($e.s)::\(.key)", a: .value } ]
  | group_by(.k)
  | "---", (.[] | "\(.[0].k):", (map(.a) | sort[] | "- \(.)"))'
job_cache_etcdctl() {
	run_no=$((run_no + 1))
	"${ECTL[@]}" get --prefix -w json /available_services/ | jq -r "$JQ_HIERA" >"$TMP/services.tmp"
	mv "$TMP/services.tmp" "$TMP/services.$run_no.yaml"
}
job_cache_curl() {
	curl -sf -X POST "$URL/v3/kv/range" -d "{\"key\":\"$SV_KEY\",\"range_end\":\"$SV_END\"}" >/dev/null
}

job_cv_orch() { orch current_version >"$TMP/out"; }
job_cv_etcdctl() { "${ECTL[@]}" get --print-value-only /current_version >"$TMP/out"; }
job_cv_curl() { curl -sf -X POST "$URL/v3/kv/range" -d "{\"key\":\"$CV_KEY\"}" >/dev/null; }

# --- timing -------------------------------------------------------------------

# median_ms JOB: one warm-up, then RUNS timed runs; prints the median in ms with
# one decimal, or "err" when the warm-up run failed.
median_ms() {
	local job=$1 i t0 t1
	local -a ns=()
	if ! "$job" 2>"$TMP/err"; then
		echo "bench: $job failed: $(head -c 300 "$TMP/err")" >&2
		echo err
		return 0
	fi
	for ((i = 0; i < RUNS; i++)); do
		t0=$(date +%s%N)
		"$job" 2>/dev/null || true
		t1=$(date +%s%N)
		ns+=($((t1 - t0)))
	done
	printf '%s\n' "${ns[@]}" | sort -n |
		awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f\n", m / 1e6 }'
}

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {
		if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || b == 0) print "-"; else printf "%.2f\n", a / b
	}'
}

ROWS=()
row() {
	local name=$1 n=$2 o=$3 e=$4 c=$5
	ROWS+=("$(printf '%-16s %6s %12s %12s %10s %13s %10s' "$name" "$n" "$o" "$e" "$c" \
		"$(ratio "$o" "$e")" "$(ratio "$o" "$c")")")
}

bench_job() {
	local name=$1 n=$2 base=$3 o=- e=- c
	((have_orch)) && o=$(median_ms "job_${base}_orch")
	if [[ $base != cache ]] || ((have_jq)); then e=$(median_ms "job_${base}_etcdctl"); fi
	c=$(median_ms "job_${base}_curl")
	row "$name" "$n" "$o" "$e" "$c"
}

START=$(date +%s%N)
RSS=
for n in $SIZES; do
	echo "bench: seeding $n hosts" >&2
	seed "$n"
	bench_job verify_hosts "$n" verify
	bench_job cache_services "$n" cache
	if [[ $n == "${SIZES##* }" ]]; then
		bench_job current_version 1 cv
		if ((have_orch)) && [[ -x /usr/bin/time ]]; then
			if /usr/bin/time -f %M -o "$TMP/rss" "$ORCH" --etcd "$URL" verify_hosts v1 \
				<"$TMP/hosts.txt" >/dev/null 2>&1; then
				RSS="$(tail -n 1 "$TMP/rss") KiB peak RSS: orchestrate verify_hosts, $n hosts on stdin"
			fi
		fi
	fi
	rm -f "$TMP"/services.*.yaml
done
END=$(date +%s%N)

echo
echo "median of $RUNS runs, milliseconds; etcd $("$ETCD" --version | sed -n 's/^etcd Version: //p') on loopback"
printf '%-16s %6s %12s %12s %10s %13s %10s\n' job N orchestrate etcdctl curl orch/etcdctl orch/curl
printf '%s\n' "${ROWS[@]}"
echo
((have_jq)) || echo "note: jq not installed; cache_services has no etcdctl pipeline"
((have_orch)) || echo "note: $ORCH not built; build it with 'make' first"
[[ -n $RSS ]] && echo "$RSS"
[[ -x /usr/bin/time ]] || echo "note: /usr/bin/time not installed; peak RSS not measured"
echo "total $(((END - START) / 1000000)) ms"
