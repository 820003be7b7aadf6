#!/bin/bash
# fleet.sh — what one node costs etcd as the fleet grows: N simulated nodes
# (bench/fleet-sim: the daemon's own node code, many to a process) on a private
# etcd, for each N in SIZES.  Prints numbers; asserts nothing.
#
#   bench/fleet.sh                      SIZES="1000 3000 10000"
#   SIZES=100 bench/fleet.sh            a quick look
#   CLUSTER=3 SIZES=1000 bench/fleet.sh on a 3-member etcd cluster
#   CLUSTER=3 SPREAD=1 SIZES=10000 SPLAY=30 bench/fleet.sh   10,000 nodes on 3
#                                       members, their writes spread over 30 s
#
# For each N, on a fresh etcd: start the simulator, wait until every node has
# registered and synced, then measure
#   - idle: etcd requests per node per minute by method, over IDLE_SECONDS;
#   - TRIGGERS version changes (`orchestrate trigger_update`): etcd requests per
#     node by method, etcd CPU ms per node, trigger -> run start and trigger ->
#     at the version (p50/p99/max over the nodes; the max is the time until all
#     N are at the version);
#   - after them: watch streams and watchers per node (etcd's gauges), etcd's
#     RSS growth per node;
#   - a catalog change (one host publishes a service): requests and CPU per
#     node, and how long until the nodes' hiera files have it.
# bench/README.md says what each number means.  Everything runs on 127.0.0.1 in
# temporary directories, every wait is bounded, and all stops by itself.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
sizes=${SIZES:-1000 3000 10000}
threads=${THREADS:-8}
# PROCS=K splits the N nodes over at least K simulator processes (each --first,
# --nodes N/K).  A process may need up to FDS_PER_NODE descriptors a node
# (fleet-sim.c: its connections while a run's writes and the keepalive are in
# flight together), and a hard RLIMIT_NOFILE that cannot be raised (20,000 in
# a container) caps what one process holds: the script then uses as many more
# processes as that needs.  A simulator short of descriptors fails its nodes'
# requests ("Too many open files") and measures nothing worth reading.
procs=${PROCS:-1}
fds_per_node=9		# fleet-sim.c's FDS_PER_NODE: change both together
triggers=${TRIGGERS:-3}
idle_seconds=${IDLE_SECONDS:-30}
cluster=${CLUSTER:-1}
spread=${SPREAD:-0}
services=${SERVICES-web}
consumes=${CONSUMES:-}
hook_seconds=${HOOK_SECONDS:-0}
splay=${SPLAY:-0}
lease_ttl=${LEASE_TTL:-30}
quiet=${QUIET:-}
watch_idle=${WATCH_IDLE:-}
hiera=${HIERA:-1}
catalog_timeout=${CATALOG_TIMEOUT:-120}
export SETTLE=${SETTLE:-3} SETTLE_TIMEOUT=${SETTLE_TIMEOUT:-120}
export ORCHESTRATE_PREFIX=${PREFIX:-}
sim=${FLEET_SIM:-$top/bench/fleet-sim}
export PATH="$top/bin:$PATH"

[ -x "$top/bin/orchestrate" ] && [ -x "$sim" ] ||
	{ echo "fleet.sh: build first (make all bench/fleet-sim)" >&2; exit 1; }
for t in etcd etcdctl curl perl; do
	command -v "$t" >/dev/null || { echo "fleet.sh: needs $t" >&2; exit 1; }
done

. "$top/scripts/local-etcd.sh"
. "$top/bench/lib-etcd-metrics.sh"
local_scratch bench-fleet
# The nodes' files (a local version, a state directory and a hiera file each)
# go to memory: the disk is etcd's.
shm=/dev/shm
[ -w "$shm" ] || shm=$work
simdirs=()
simpids=()
fleet_cleanup() {
	# The simulators first, at once (their leases die with etcd anyway).
	[ ${#simpids[@]} -gt 0 ] && kill -9 "${simpids[@]}" 2>/dev/null
	local_scratch_cleanup
	rm -rf "${simdirs[@]}"
}
trap fleet_cleanup EXIT

max=0
for n in $sizes; do [ "$n" -gt "$max" ] && max=$n; done
# etcd and the simulator each hold ~4 descriptors a node (a connection for
# unary requests and one per watch stream).
need=$((max * 10 + 4096))
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$need" ]; then
	ulimit -Hn "$need" 2>/dev/null ||
		echo "warning: descriptors: hard limit $hard < $need; raise it (as root: ulimit -Hn $need)" >&2
fi
ulimit -n "$(ulimit -Hn)"

stats_field() {	# the last stats line of the simulators, field NAME: the largest, or with
		# sum as third argument the sum over the processes
	local f
	for f in "$1" "${1%.out}".[0-9]*.out; do
		[ -f "$f" ] || continue
		grep '^stats ' "$f" | tail -n 1 | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'
	done | awk -v sum="${3:-}" '{ s += $1; if ($1 > m) m = $1 } END { printf "%s\n", sum ? s : m }'
}

sim_usr1() {	# asks every simulator for a stats line and waits (1 s at most) for them
	local before i f
	for i in "${!simpids[@]}"; do
		f=$1
		[ "$i" -gt 0 ] && f=${1%.out}.$i.out
		before=$(grep -c '^stats ' "$f" || true)
		kill -USR1 "${simpids[$i]}" 2>/dev/null || continue
		for _ in $(seq 10); do
			[ "$(grep -c '^stats ' "$f" || true)" -gt "$before" ] && break
			sleep 0.1
		done
	done
}

all_ready() {	# every simulator said "ready"
	local i f
	for i in "${!simpids[@]}"; do
		f=$1
		[ "$i" -gt 0 ] && f=${1%.out}.$i.out
		grep -q '^ready' "$f" 2>/dev/null || return 1
	done
}

any_alive() {
	local p
	for p in "${simpids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
	return 1
}

results=$work/results
: >"$results"
methods_out=$work/methods
: >"$methods_out"

run_size() {
	local n=$1 d=$work/n$1 simdir out ready_timeout trigger_timeout dur t_start t_ready
	local rss0 rss1 c0 s0 c1 s1 idle_methods idle_req idle_cpu streams watchers
	local k v svc addr t0 cat_req cat_cpu cat_times cat_n cat_ok lag base_rate rp50 rp99 rmax atn atmax
	local -a args
	mkdir -p "$d"
	echo "== N=$n nodes (threads $threads, etcd members $cluster${services:+, services $services}${consumes:+, consumes $consumes}, splay $splay s, lease TTL $lease_ttl s)"

	if [ "$cluster" -gt 1 ]; then
		# Three members and the simulators share this machine's cores: at
		# etcd's default timing (a heartbeat every 100 ms, an election after
		# 1 s without one) a member starved of CPU for a second starts an
		# election, and a 10,000-node run saw 35 leaders in 12 minutes, which
		# measures the machine.  etcd's tuning guide counts a member's own
		# slowness with the network's when these are set; members on hosts
		# of their own would not need it.
		local_etcd_cluster_start "$d" m "$cluster" --quota-backend-bytes 4294967296 \
			--heartbeat-interval "${HEARTBEAT_MS:-250}" --election-timeout "${ELECTION_MS:-2500}"
		ETCD_PIDS=("${LOCAL_ETCD_PIDS[@]}")
	else
		local_etcd_start "$d" fleet --quota-backend-bytes 4294967296
		ETCD_PIDS=("$LOCAL_ETCD_PID")
	fi
	pids+=("${ETCD_PIDS[@]}")
	rss0=$(etcd_rss_kib "${ETCD_PIDS[@]}")
	# etcd's own idle CPU (raft ticks, its timers), taken out of the idle figure
	c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	s0=$(now_ms)
	sleep 5
	base_rate=$(awk -v c="$(($(etcd_cpu_ms "${ETCD_PIDS[@]}") - c0))" -v w="$(($(now_ms) - s0))" \
		'BEGIN { printf "%.3f", c / (w / 1000) }')

	ready_timeout=${READY_TIMEOUT:-$((60 + n / 10))}
	trigger_timeout=${TRIGGER_TIMEOUT:-$((60 + n / 20))}
	export TRIGGER_TIMEOUT=$trigger_timeout
	dur=$((ready_timeout + idle_seconds + 30 + triggers * (trigger_timeout + SETTLE_TIMEOUT + 30) +
		catalog_timeout + SETTLE_TIMEOUT + 120))
	simdir=$(mktemp -d "$shm/orchestrate-fleet-sim.XXXXXX")
	simdirs+=("$simdir")
	out=$d/sim.out
	args=(--threads "$threads" --lease-ttl "$lease_ttl" --splay "$splay"
	      --hook-seconds "$hook_seconds" --duration "$dur")
	[ -n "$services" ] && args+=(--services="$services")
	[ -n "$consumes" ] && args+=(--consumes "$consumes")
	[ -n "$quiet" ] && args+=(--quiet "$quiet")
	[ -n "$watch_idle" ] && args+=(--watch-idle "$watch_idle")
	[ "$hiera" = 1 ] || args+=(--no-hiera)
	[ "$spread" = 1 ] && args+=(--spread)
	etcd_requests "$d/start0"
	local start_c0
	start_c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	t_start=$(now_ms)
	local nprocs=$procs hard_fds
	hard_fds=$(ulimit -Hn)
	if [ "$hard_fds" != unlimited ]; then
		local fit=$(((hard_fds - 1024) / fds_per_node))
		[ $(((n + nprocs - 1) / nprocs)) -le "$fit" ] || nprocs=$(((n + fit - 1) / fit))
		[ "$nprocs" = "$procs" ] || echo "  $nprocs simulator processes: $fit nodes fit in" \
			"one under the hard limit of $hard_fds descriptors"
		# etcd holds ~3 connections a node (unary, watch stream, keepalive
		# stream), spread over the members only with SPREAD=1
		local members=1
		[ "$spread" = 1 ] && members=$cluster
		[ $((n * 3 / members + 1024)) -le "$hard_fds" ] ||
			echo "  warning: etcd may need $((n * 3 / members + 1024)) descriptors a member," \
				"over the hard limit of $hard_fds: connections will be refused" >&2
	fi
	local per=$(((n + nprocs - 1) / nprocs)) first=0 i=0 f
	simpids=()
	while [ "$first" -lt "$n" ]; do
		f=$out
		[ "$i" -gt 0 ] && f=${out%.out}.$i.out
		local cnt=$((n - first < per ? n - first : per))
		"$sim" "${args[@]}" --first "$first" --nodes "$cnt" --dir "$simdir/nodes$i" \
			>"$f" 2>>"$d/sim.err" &
		simpids+=($!)
		pids+=($!)
		first=$((first + cnt))
		i=$((i + 1))
	done
	t_ready=
	while [ $(($(now_ms) - t_start)) -lt $((ready_timeout * 1000)) ]; do
		all_ready "$out" && { t_ready=$(now_ms); break; }
		any_alive || break
		sleep 0.2
	done
	if [ -z "$t_ready" ]; then
		sim_usr1 "$out"
		echo "  not ready after ${ready_timeout} s: $(grep '^stats' "$out" | tail -n 1)" >&2
		tail -n 5 "$d/sim.err" >&2
		sim_stop
		return 0
	fi
	echo "  ready: $n nodes registered and synced in $(((t_ready - t_start) / 1000)) s"
	# A mass start: what it took etcd per node, against what a start needs
	# (a grant, the registration's txn, a read of the model, a watch and a
	# keepalive stream), and what the nodes were told on the way.
	etcd_requests "$d/start1"
	local start_cpu
	start_cpu=$(($(etcd_cpu_ms "${ETCD_PIDS[@]}") - start_c0))
	echo "  start, per node: $(etcd_requests_sum "$d/start0" "$d/start1" "LeaseRenewal|LeaseKeepAlive" |
		awk -v n="$n" '{ printf "%.2f", $1 / n }') requests ($(
		etcd_requests_diff "$d/start0" "$d/start1" "$n" 1 | grep -Ev '^Lease(KeepAlive|Renewal) ' |
		awk '{ printf "%s%s %.2f", sep, $1, $2; sep = ", " }')), etcd CPU $(awk -v c="$start_cpu" -v n="$n" \
		'BEGIN { printf "%.2f", c / n }') ms (all members: $((start_cpu / 1000)) s); failures the nodes logged:"
	sed -nE "s/^[^:]*: ((registration|sync|lease keepalive) failed): etcd '[^']*': (.*)/\1: \3/p" \
		"$d/sim.err" | sed -E 's/, retrying in [0-9.]+ s$//' | sort | uniq -c | sort -rn |
		head -n 6 | sed 's/^ */    /'

	# --- idle ---
	# A node opens its keepalive stream at its first renewal, a third of
	# the TTL after its grant: the last nodes' first renewals belong to the
	# start, not to the idle window (with LEASE_TTL=60 and the 30 s window
	# right after ready they were counted as ~2.4 streams a node a minute).
	sleep $((lease_ttl / 3 + 5))
	etcd_requests "$d/idle0"
	c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	s0=$(now_ms)
	sleep "$idle_seconds"
	etcd_requests "$d/idle1"
	c1=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	s1=$(now_ms)
	idle_methods=$(etcd_requests_diff "$d/idle0" "$d/idle1" "$n" "$(awk -v a="$s0" -v b="$s1" \
		'BEGIN { print (b - a) / 60000 }')" | tr '\n' ' ')
	idle_req=$(awk -v n="$n" -v w="$((s1 - s0))" -v s="$(etcd_requests_sum "$d/idle0" "$d/idle1")" \
		'BEGIN { printf "%.2f", s / n / (w / 60000) }')
	export BT_IDLE_CPU_RATE
	BT_IDLE_CPU_RATE=$(awk -v c="$((c1 - c0))" -v w="$((s1 - s0))" 'BEGIN { printf "%.3f", c / (w / 1000) }')
	idle_cpu=$(awk -v r="$BT_IDLE_CPU_RATE" -v b="$base_rate" -v n="$n" \
		'BEGIN { c = r - b; if (c < 0) c = 0; printf "%.3f", c * 60 / n }')
	echo "  idle ${idle_seconds} s: per node per minute: ${idle_methods:-nothing}(etcd CPU ${idle_cpu} ms" \
		"over etcd's own ${base_rate} ms/s); watch streams $(etcd_gauge etcd_debugging_mvcc_watch_stream_total)," \
		"watchers $(etcd_gauge etcd_debugging_mvcc_watcher_total)"
	echo "idle $n $idle_methods" >>"$methods_out"

	# --- version changes ---
	for k in $(seq 1 "$triggers"); do
		v=fleet$k
		sim_usr1 "$out"
		bench_trigger "$v" "$n" "$d/t$k"
		sim_usr1 "$out"
		lag=$(stats_field "$out" lag_ms_max)
		echo "  $v: at version $BT_AT_CLI/$n; per node: ${BT_METHODS}(total $BT_REQ; and" \
			"$BT_KEEPALIVE LeaseKeepAlive in the window), etcd CPU $BT_CPU ms"
		echo "        run start ms (n p50 p99 max) $BT_RUN; at version $BT_AT; window ${BT_WINDOW} s; simulator loop lag max ${lag} ms"
		echo "trigger $n $BT_METHODS" >>"$methods_out"
		read -r _ rp50 rp99 rmax <<<"$BT_RUN"
		read -r atn _ _ atmax <<<"$BT_AT"
		echo "$n $k $BT_REQ $BT_CPU $rp50 $rp99 $rmax $atn $atmax $lag" >>"$results.t"
	done

	sleep 1	# the benchmark's own watch streams close
	streams=$(etcd_gauge etcd_debugging_mvcc_watch_stream_total)
	watchers=$(etcd_gauge etcd_debugging_mvcc_watcher_total)
	rss1=$(etcd_rss_kib "${ETCD_PIDS[@]}")
	echo "  after: watch streams $streams, watchers $watchers; etcd RSS $((rss0 / 1024)) -> $((rss1 / 1024)) MiB;" \
		"simulator RSS $(($(stats_field "$out" rss_kib sum) / 1024)) MiB"
	if [ "$cluster" -gt 1 ]; then
		# a client starts at its first endpoint: without SPREAD=1, all at member 1
		echo "  requests by member so far (all but keepalives):$(for u in $(etcd_metric_urls); do
			printf ' %s' "$(etcd_member_requests "$u")"; done)"
	fi

	# --- a catalog change ---
	cat_req=- cat_cpu=- cat_times="- - -" cat_ok=-
	if [ "$hiera" = 1 ]; then
		svc=${consumes%%,*}
		svc=${svc:-probe}
		addr=198.51.100.$((n % 250 + 1))
		bench_settle "$SETTLE" "$SETTLE_TIMEOUT" "$d/cat.settle" || true
		touch "$d/cat.stamp"
		etcd_requests "$d/cat0"
		c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
		s0=$(now_ms)
		t0=$(now_ms)
		orchestrate --hostname fleet-probe publish_service "$svc" --address "eth0=$addr" --ttl 600 >/dev/null
		cat_n=0
		while [ $(($(now_ms) - t0)) -lt $((catalog_timeout * 1000)) ]; do
			cat_n=$(find "$simdir"/nodes* -name services.yaml -newer "$d/cat.stamp" | wc -l)
			[ "$cat_n" -ge "$n" ] && break
			sleep 0.2
		done
		bench_settle "$SETTLE" "$SETTLE_TIMEOUT" "$d/cat.settle" || true
		etcd_requests "$d/cat1"
		c1=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
		s1=$(now_ms)
		cat_req=$(awk -v n="$n" -v s="$(etcd_requests_sum "$d/cat0" "$d/cat1" '^Lease(KeepAlive|Renewal)$')" \
			'BEGIN { printf "%.2f", s / n }')
		cat_cpu=$(awk -v a="$c0" -v b="$c1" -v w="$((s1 - s0))" -v r="$BT_IDLE_CPU_RATE" -v n="$n" \
			'BEGIN { c = b - a - r * w / 1000; if (c < 0) c = 0; printf "%.2f", c / n }')
		# each file's own mtime, so no polling interval blurs the times
		cat_times=$(find "$simdir"/nodes* -name services.yaml -newer "$d/cat.stamp" -printf '%T@\n' |
			awk -v t0="$t0" '{ print $1 * 1000 - t0 }' | ms_stats | cut -d' ' -f2-)
		cat_ok=$(grep -rlF --include=services.yaml -- "$addr" "$simdir"/nodes* | wc -l)
		echo "  catalog change ($svc on fleet-probe): hiera files with it $cat_ok/$n; per node: $(
			etcd_requests_diff "$d/cat0" "$d/cat1" "$n" 1 | grep -Ev '^Lease(KeepAlive|Renewal) ' |
			tr '\n' ' ')(total $cat_req), etcd CPU $cat_cpu ms"
		echo "        hiera file rewritten after ms (p50 p99 max) $cat_times"
		echo "catalog $n $(etcd_requests_diff "$d/cat0" "$d/cat1" "$n" 1 | grep -Ev '^Lease(KeepAlive|Renewal) ' |
			tr '\n' ' ')" >>"$methods_out"
	fi

	echo "$n $((t_ready - t_start)) $idle_req $idle_cpu $streams $watchers $(((rss1 - rss0) * 1024 / n)) $cat_req $cat_cpu $cat_times" >>"$results"
	sim_stop
	# (one process has no numbered outputs: cat fails, and pipefail with it)
	sim_usr1_final=$(cat "$out" "${out%.out}".[0-9]*.out 2>/dev/null | grep '^final' | tail -n 1 || true)
	echo "  simulator: ${sim_usr1_final:-no final stats}"
	if [ -s "$d/sim.err" ]; then
		echo "  simulator stderr: $(wc -l <"$d/sim.err") lines, e.g.:"
		# sed reads to the end: head left sort a SIGPIPE, which pipefail
		# and set -e made the script's end (exit 141)
		{ grep -v "now at version" "$d/sim.err" || true; } | sort | uniq -c | sort -rn |
			sed -n 's/^/    /; 1,3p'
	fi
	for p in "${ETCD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${ETCD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$simdir"
}

sim_stop() {
	local i
	[ ${#simpids[@]} -gt 0 ] || return 0
	kill -TERM "${simpids[@]}" 2>/dev/null || true
	# each revokes every lease before it exits: bounded by its own 60 s
	for ((i = 0; i < 900; i++)); do
		any_alive || break
		sleep 0.1
	done
	kill -9 "${simpids[@]}" 2>/dev/null || true
	wait "${simpids[@]}" 2>/dev/null || true
	simpids=()
}

: >"$results.t"
for n in $sizes; do
	run_size "$n"
done

echo
echo "per node (mean over $triggers triggers; latencies in ms from the trigger, seen by an etcd watch):"
printf '%7s %9s %9s %8s %8s %8s %8s %9s %8s\n' N req/trig cpu_ms run_p50 run_p99 run_max at_n all_at_ms lag_max
awk '{ n[$1]++; for (i = 3; i <= 10; i++) s[$1, i] += $i }
	END { for (k in n) { printf "%7d", k
		for (i = 3; i <= 10; i++) printf (i <= 4) ? " %9.2f" : (i == 9) ? " %9.0f" : " %8.0f", s[k, i] / n[k]
		printf "\n" } }' \
	"$results.t" | sort -n
echo
echo "per node, idle and after the triggers:"
printf '%7s %8s %12s %11s %8s %9s %10s %10s %9s %9s %9s\n' N ready_ms idle_req/min idle_cpu_ms streams watchers rss_bytes cat_req cat_cpu_ms cat_p50 cat_max
awk '{ printf "%7d %8d %12s %11s %8.2f %9.2f %10d %10s %9s %9s %9s\n", $1, $2, $3, $4, $5 / $1, $6 / $1, $7, $8, $9, $10, $12 }' \
	"$results" | sort -n
echo
echo "requests per node by method (idle: per minute; trigger, catalog: per event):"
sed 's/^/  /' "$methods_out"
