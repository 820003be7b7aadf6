#!/usr/bin/env bash
# catalog-events.sh — what one daemon's CPU costs per catalog event, in the
# whole-catalog setting (no node.consumes), against what an operator would
# run instead (etcdctl watch) and the raw cost (curl on the watch gateway).
#
# Starts a private etcd on loopback and one orchestrated that renders the
# whole catalog, then puts N service entries of other hosts one by one
# (one txn each, as N hosts publishing on a first boot do: each a revision
# and an event to every node), waits until the daemon's hiera file holds
# all N, and prints the daemon's CPU (utime + stime, /proc) per event. The
# same events reach an `etcdctl watch --prefix` and a `curl -N` on
# /v3/watch, whose CPU is printed beside it.
#
#   bench/catalog-events.sh                 N=1000, 3 rounds
#   N=5000 ROUNDS=1 bench/catalog-events.sh
#   BATCH=100 bench/catalog-events.sh       100 entries a txn: events come
#                                           in frames of 100, the cost of
#                                           applying one without the wake-up
#   PERF=FILE bench/catalog-events.sh       perf record -g of the daemon
#   STRACE=FILE bench/catalog-events.sh     strace -c of the daemon
#   DAEMON_WRAP="valgrind --tool=callgrind --callgrind-out-file=F" \
#     bench/catalog-events.sh               the daemon run by that command
#
# Each round writes N new hosts' entries (the catalog grows by N a round).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/local-etcd.sh
. scripts/local-etcd.sh
export PATH=$PWD/bin:$PATH

n=${N:-1000}
rounds=${ROUNDS:-3}
batch=${BATCH:-1}	# entries a txn: 1, each its own revision and frame; up to 128
local_scratch bench-catalog-events
local_etcd_start "$work" bench
pids=("$LOCAL_ETCD_PID")
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; local_scratch_cleanup' EXIT
etcd_url=${ORCHESTRATE_ETCD%%,*}

cpu_us() {	# PID: the CPU time of its threads so far (schedstat: ns), in µs
	cat /proc/"$1"/task/*/schedstat | awk '{ t += $1 } END { printf "%d\n", t / 1000 }'
}

d=$work/node
mkdir -p "$d"
: >"$d/pl.txt"
printf '#!/bin/sh\nexit 0\n' >"$work/config" && chmod +x "$work/config"
cat >"$d/o.yaml" <<EOF
node: {hostname: me, addresses: {eth0: 192.0.2.1}, profile_list: $d/pl.txt, services: [web]}
paths: {local_version: $d/cv, hiera_services: $d/s.yaml, state_dir: $d/st}
hooks: {config: $work/config, validate: /bin/true, services: /bin/true}
timing: {quiet: 0.5, quiet_max: 2}
EOF
# shellcheck disable=SC2086 # DAEMON_WRAP: a command and its flags
${DAEMON_WRAP:-} orchestrated --config "$d/o.yaml" >"$d/log" 2>&1 &
daemon=$!
pids+=("$daemon")
etcdctl --endpoints="$etcd_url" watch --prefix /available_services/ >/dev/null 2>&1 &
watcher=$!
pids+=("$watcher")
key64=$(printf '/available_services/' | base64 -w0)
end64=$(printf '/available_services0' | base64 -w0)
curl -sN "$etcd_url/v3/watch" \
	-d "{\"create_request\":{\"key\":\"$key64\",\"range_end\":\"$end64\"}}" >/dev/null &
raw=$!
pids+=("$raw")

# The daemon is up once it rendered its first (empty) catalog.
for _ in $(seq 300); do
	grep -q "hiera file .* updated" "$d/log" && break
	sleep 0.1
done
grep -q "hiera file .* updated" "$d/log" || { echo "catalog-events.sh: the daemon did not start" >&2; cat "$d/log" >&2; exit 1; }
sleep 1

# N entries, one txn each, from one kept-alive connection.
put_entries() {	# FIRST COUNT
	python3 - "$etcd_url" "$1" "$2" "$batch" <<'EOF'
import base64, http.client, json, sys, urllib.parse
url, first, count, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlparse(url)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
b64 = lambda s: base64.b64encode(s.encode()).decode()
def put(i):
    value = json.dumps({"addresses": {"eth0": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"},
                        "healthy": True})
    return {"request_put": {"key": b64(f"/available_services/web/h{i:06d}"), "value": b64(value)}}
for i in range(first, first + count, batch):
    ops = [put(j) for j in range(i, min(i + batch, first + count))]
    conn.request("POST", "/v3/kv/txn", json.dumps({"success": ops}))
    reply = json.loads(conn.getresponse().read())
    if "error" in reply:
        sys.exit(f"etcd: {reply['error']}")
EOF
}

echo "one daemon rendering the whole catalog; $n entries a round, $batch a txn"
printf '%6s %8s %8s %14s %14s %14s %10s %10s\n' round catalog renders "daemon µs/ev" "etcdctl µs/ev" "curl µs/ev" daemon/ctl daemon/curl
perf_pid=
strace_pid=
if [ -n "${STRACE:-}" ]; then
	strace -c -f -o "$STRACE" -p "$daemon" 2>/dev/null &
	strace_pid=$!
	sleep 0.5
fi
if [ -n "${PERF:-}" ]; then
	perf record ${PERF_CALLGRAPH:--g} -o "$PERF" -p "$daemon" >/dev/null 2>&1 &
	perf_pid=$!
	sleep 0.5
fi
for r in $(seq "$rounds"); do
	total=$((r * n))
	d0=$(cpu_us "$daemon") w0=$(cpu_us "$watcher") c0=$(cpu_us "$raw")
	renders0=$(grep -c "hiera file .* updated" "$d/log" || true)
	put_entries $(((r - 1) * n)) "$n"
	# Every entry rendered: the hiera file lists the last host's address.
	last=$((r * n - 1))
	addr="10.$((last >> 16 & 255)).$((last >> 8 & 255)).$((last & 255))"
	for _ in $(seq 600); do
		grep -qF "$addr" "$d/s.yaml" 2>/dev/null && break
		sleep 0.1
	done
	grep -qF "$addr" "$d/s.yaml" || { echo "catalog-events.sh: the daemon never rendered $addr" >&2; exit 1; }
	sleep 1	# the watchers drain too
	d1=$(cpu_us "$daemon") w1=$(cpu_us "$watcher") c1=$(cpu_us "$raw")
	renders=$(($(grep -c "hiera file .* updated" "$d/log" || true) - renders0))
	awk -v r="$r" -v t="$total" -v h="$renders" -v n="$n" -v d="$((d1 - d0))" -v w="$((w1 - w0))" -v c="$((c1 - c0))" 'BEGIN {
		printf "%6d %8d %8d %14.1f %14.1f %14.1f %9.1fx %9.1fx\n", r, t, h, d / n, w / n, c / n, d / (w > 0 ? w : 1), d / (c > 0 ? c : 1) }'
done
if [ -n "$strace_pid" ]; then
	kill -INT "$strace_pid"
	wait "$strace_pid" 2>/dev/null || true
fi
if [ -n "$perf_pid" ]; then
	kill -INT "$perf_pid"
	wait "$perf_pid" 2>/dev/null || true
fi
echo "daemon RSS: $(awk '/^VmRSS/ { print $2, $3 }' "/proc/$daemon/status")"
