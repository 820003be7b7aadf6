#!/bin/bash
# daemons.sh — what a fleet of idle daemons costs, and how fast a trigger reaches
# them.  Prints numbers; asserts nothing (the machine is shared and noisy).
#
#   bench/daemons.sh            100 daemons on one etcd (DAEMONS=N to change)
#
# Measures:
#   - idle memory of one daemon: VmRSS, and its anonymous (private) part;
#   - etcd requests per idle daemon per minute, by method, from etcd's own
#     grpc_server_started_total counters over IDLE_SECONDS (default 60);
#   - trigger → config hook start latency over every daemon: p50, p99, max
#     (no rollout policy, splay 0), for TRIGGERS triggers (default 3).
# Everything runs on 127.0.0.1 in a temporary directory and stops by itself.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
daemons=${DAEMONS:-100}
idle_seconds=${IDLE_SECONDS:-60}
triggers=${TRIGGERS:-3}
export PATH="$top/bin:$PATH"
[ -x "$top/bin/orchestrated" ] || { echo "daemons.sh: build first (make)" >&2; exit 1; }

. "$top/scripts/local-etcd.sh"
local_scratch bench-daemons
local_etcd_start "$work" bench --quota-backend-bytes 4294967296
pids+=("$LOCAL_ETCD_PID")

# The config hook's first act is to note the time; that is the "start".
mkdir -p "$work/starts"
cat >"$work/config" <<EOF
#!/bin/sh
echo "\$(date +%s%N) \$ORCHESTRATE_HOST" >>"$work/starts/\$ORCHESTRATE_VERSION"
EOF
chmod +x "$work/config"

echo "starting $daemons daemons on one etcd..."
for i in $(seq -w 1 "$daemons"); do
	d=$work/n$i
	mkdir -p "$d"
	cat >"$d/o.yaml" <<EOF
node: {hostname: n$i, addresses: {eth0: 192.0.2.1}, profile_list: $d/pl.txt}
paths: {local_version: $d/cv, hiera_services: $d/s.yaml, state_dir: $d/st}
hooks: {config: $work/config, validate: /bin/true, services: /bin/true}
timing: {lease_ttl: 30, splay: 0, quiet: 0.5, quiet_max: 2}
EOF
	orchestrated --config "$d/o.yaml" >"$d/log" 2>&1 &
	pids+=($!)
done
for _ in $(seq 300); do
	[ "$(ETCDCTL_API=3 etcdctl --endpoints "$ORCHESTRATE_ETCD" get --prefix /alive/ --keys-only | grep -c .)" -ge "$daemons" ] && break
	sleep 0.2
done
sleep 2

median_of() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
rss=$(for p in "${pids[@]:1}"; do awk '/^VmRSS/{print $2}' "/proc/$p/status"; done | median_of)
anon=$(for p in "${pids[@]:1}"; do awk '/^RssAnon/{print $2}' "/proc/$p/status"; done | median_of)
pss=$(for p in "${pids[@]:1}"; do awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup"; done | median_of)
echo
echo "idle memory of one daemon (median of $daemons): VmRSS ${rss} KiB, of which anonymous ${anon} KiB;"
echo "  PSS ${pss} KiB (shared library pages, mostly OpenSSL and libcurl, divided among the daemons)"

counters() {
	curl -s "$ORCHESTRATE_ETCD/metrics" | awk '/^grpc_server_started_total/ {
		match($0, /grpc_method="[^"]*"/); m = substr($0, RSTART + 13, RLENGTH - 14); c[m] += $NF }
		END { for (m in c) print m, c[m] }' | sort
}
counters >"$work/m1"
echo "counting etcd requests for ${idle_seconds} s of idleness..."
sleep "$idle_seconds"
counters >"$work/m2"
echo "etcd requests per idle daemon per minute, by method:"
join -a 2 -e 0 -o 0,1.2,2.2 "$work/m1" "$work/m2" | awk -v d="$daemons" -v s="$idle_seconds" \
	'$3 - $2 > 0 { printf "  %-20s %.2f\n", $1, ($3 - $2) / d * 60 / s }'

echo
echo "trigger -> config hook start, $daemons daemons, no policy, splay 0:"
printf '  %-8s %8s %8s %8s %8s\n' version started p50_ms p99_ms max_ms
for t in $(seq 1 "$triggers"); do
	v=bench$t
	t0=$(date +%s%N)
	orchestrate trigger_update "$v" >/dev/null
	for _ in $(seq 600); do
		[ -f "$work/starts/$v" ] && [ "$(wc -l <"$work/starts/$v")" -ge "$daemons" ] && break
		sleep 0.1
	done
	started=$(wc -l <"$work/starts/$v" 2>/dev/null || echo 0)
	awk -v t0="$t0" '{ print ($1 - t0) / 1e6 }' "$work/starts/$v" | sort -n | awk -v v="$v" -v n="$started" '
		{ a[NR] = $1 }
		END { p50 = a[int(NR * 0.50 + 0.5)]; p99 = a[int(NR * 0.99 + 0.5)]; if (!p50) p50 = a[1]; if (!p99) p99 = a[NR];
		      printf "  %-8s %8d %8.1f %8.1f %8.1f\n", v, n, p50, p99, a[NR] }'
	# let every node finish its validation before the next trigger
	orchestrate verify_hosts --wait 120 "$v" < <(seq -f "n%0${#daemons}g" 1 "$daemons") >/dev/null || true
done
