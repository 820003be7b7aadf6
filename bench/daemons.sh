#!/bin/bash
# daemons.sh — what a fleet of real daemons costs etcd and itself, and how fast
# a trigger reaches them.  Prints numbers; asserts nothing (the machine is
# shared and noisy).
#
#   bench/daemons.sh                   100 daemons on one etcd (DAEMONS=N to change)
#   SERVICES=1 bench/daemons.sh        every daemon offers the service `web`
#   CONSUMES=db bench/daemons.sh       ...and renders only `db` (node.consumes)
#   POLICY='{"max_parallel":50,"max_fail_percent":10}' bench/daemons.sh
#                                      the triggers run under that rollout policy
#   STAGES=2 bench/daemons.sh          the daemons split into groups g1, g2 (in
#                                      order), and the policy stages them:
#                                      "groups":["g1","g2"] added to POLICY
#   KEEP_LOGS=DIR bench/daemons.sh    keeps the daemons' logs (and etcd's) in DIR
#   TIMELINE=5 bench/daemons.sh        each trigger also as a table of 5 s
#                                      stretches: etcd's CPU, apply backlog,
#                                      requests, refused renewals, leases
#                                      (bench/lib-etcd-metrics.sh)
#   LEASE_TTL=60 bench/daemons.sh      the daemons' timing.lease_ttl (default 30)
#   ETCD_ARGS='--enable-pprof' ...     extra flags for etcd
#   ETCD_CPU=10 bench/daemons.sh       etcd held to 10 % of one core during the
#                                      triggers (a cpu cgroup, v1 or v2; root):
#                                      an etcd slower than the request timeout
#   ETCD_STOP=10 bench/daemons.sh      etcd stopped (SIGSTOP) for 10 s, 1 s into
#                                      each trigger (ETCD_STOP_AFTER)
#   START_CPU=10 bench/daemons.sh      etcd held to 10 % of one core while the
#                                      daemons start together (a site back from a
#                                      power loss on a busy etcd)
#   WARM=0 bench/daemons.sh            no warm-up trigger: the first measured one
#                                      is every daemon's first run (a first boot:
#                                      each publishes its services)
#   AUTH=1 bench/daemons.sh            etcd with auth on: every daemon logs in as
#                                      user node (a password etcd checks with
#                                      bcrypt at its default cost), at the start
#                                      and whenever its token is refused
#   AUTH=1 AUTH_CHANGE=1 bench/daemons.sh
#                                      an etcd user added right before each
#                                      trigger (a node_identity): etcd refuses
#                                      every token given before it
#   ETCD_RESTART=1 bench/daemons.sh    etcd restarted (SIGTERM, then started on
#                                      the same data) before the triggers: the
#                                      fleet's recovery measured (with AUTH=1,
#                                      every token is forgotten: one login each,
#                                      spread over LOGIN_SPREAD s, default 60)
#
# Measures:
#   - the start of all daemons at once: time until every one is registered and
#     until every one has read the fleet, etcd requests and CPU per daemon, and
#     the registrations and reads the daemons logged as failed;
#   - idle memory of one daemon: VmRSS, and its anonymous (private) part;
#   - etcd requests per idle daemon per minute, by method, from etcd's own
#     grpc_server_started_total counters over IDLE_SECONDS (default 60), and
#     etcd's CPU per idle daemon per minute;
#   - for TRIGGERS triggers (default 3; no rollout policy, splay SPLAY, default 0): trigger ->
#     config hook start over every daemon (p50, p99, max), trigger -> at the
#     version (the max is the time until all N are there), and etcd requests
#     and CPU per daemon per trigger (bench/lib-etcd-metrics.sh, bench_trigger),
#     and the daemons' own CPU per trigger and how often each was woken;
#   - the splay by orchestrate.conf(5)'s rule for this etcd: the cheapest
#     trigger's etcd CPU for the whole fleet over what etcd's share of a
#     core (ETCD_CPU) leaves once the idle fleet is served, and half as much
#     again;
#   - after them: watch streams and watchers per daemon (etcd's gauges) and
#     etcd's RSS growth per daemon.
# Everything runs on 127.0.0.1 in a temporary directory and stops by itself.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
daemons=${DAEMONS:-100}
idle_seconds=${IDLE_SECONDS:-60}
triggers=${TRIGGERS:-3}
services=${SERVICES:-0}
consumes=${CONSUMES-}
policy=${POLICY-}	# e.g. POLICY='{"max_parallel":50,"max_fail_percent":10}'
stages=${STAGES:-0}	# >0: that many groups, the policy rolls them out in order
if [ "$stages" -gt 0 ]; then
	policy=$(python3 -c 'import json, sys
p = json.loads(sys.argv[1] or "{}")
p["groups"] = ["g%d" % (k + 1) for k in range(int(sys.argv[2]))]
print(json.dumps(p, separators=(",", ":")))' "$policy" "$stages")
fi
etcd_cpu=${ETCD_CPU-}	# percent of one core etcd may use during the triggers
keep_logs=${KEEP_LOGS-}	# a directory: the daemons' logs are copied there at the end
warm=${WARM:-1}		# one trigger first, unmeasured and unconstrained

export SETTLE=${SETTLE:-3} SETTLE_TIMEOUT=${SETTLE_TIMEOUT:-120}
export TRIGGER_TIMEOUT=${TRIGGER_TIMEOUT:-120}
export PATH="$top/bin:$PATH"
[ -x "$top/bin/orchestrated" ] || { echo "daemons.sh: build first (make)" >&2; exit 1; }
for t in etcd etcdctl curl perl; do
	command -v "$t" >/dev/null || { echo "daemons.sh: needs $t" >&2; exit 1; }
done

. "$top/scripts/local-etcd.sh"
. "$top/bench/lib-etcd-metrics.sh"
local_scratch bench-daemons
# shellcheck disable=SC2086 # ETCD_ARGS: extra etcd flags, split on spaces
local_etcd_start "$work" bench --quota-backend-bytes 4294967296 ${ETCD_ARGS:-}
pids+=("$LOCAL_ETCD_PID")
ETCD_PIDS=("$LOCAL_ETCD_PID")
# AUTH=1: root for the benchmark's own etcdctl (ETCDCTL_USER), and the
# daemons' user node, which may read and write everything.
etcd_conf=
if [ "${AUTH:-0}" = 1 ]; then
	etcdctl_ user add root:bench-root >/dev/null
	etcdctl_ user grant-role root root >/dev/null
	etcdctl_ role add fleet >/dev/null
	etcdctl_ role grant-permission fleet --prefix=true readwrite / >/dev/null
	etcdctl_ user add node:bench-node >/dev/null
	etcdctl_ user grant-role node fleet >/dev/null
	etcdctl_ auth enable >/dev/null
	export ETCDCTL_USER=root:bench-root
	(umask 077 && printf 'bench-node\n' >"$work/password")
	etcd_conf="etcd: {user: node, password_file: $work/password${LOGIN_SPREAD:+, login_spread: $LOGIN_SPREAD}}"
	# The benchmark's own commands (bench_trigger) as root; the password
	# not exported, or the daemons would take it for theirs.
	orchestrate() { ORCHESTRATE_PASSWORD=bench-root command orchestrate --user root "$@"; }
fi
rss0=$(etcd_rss_kib "${ETCD_PIDS[@]}")
c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
s0=$(now_ms)
sleep 3
base_rate=$(awk -v c="$(($(etcd_cpu_ms "${ETCD_PIDS[@]}") - c0))" -v w="$(($(now_ms) - s0))" \
	'BEGIN { printf "%.3f", c / (w / 1000) }')

# The config hook's first act is to note the time; that is the "start".
mkdir -p "$work/starts"
cat >"$work/config" <<EOF
#!/bin/sh
echo "\$(date +%s%N) \$ORCHESTRATE_HOST" >>"$work/starts/\$ORCHESTRATE_VERSION"
EOF
chmod +x "$work/config"

svc=
[ "$services" = 1 ] && svc=", services: [web]"
# CONSUMES="db" (node.consumes, the large-fleet setting): each daemon renders
# only those services; unset, the whole catalog.
[ -n "$consumes" ] && svc="$svc, consumes: [$consumes]"
# etcd_cpu_limit PERCENT — moves etcd into a cpu cgroup of its own held to
# PERCENT of one core (cgroup v2's cpu.max, else v1's cfs quota); undone at exit.
cpu_cgroup=
etcd_cpu_limit() {
	local quota=$(($1 * 1000)) root
	if [ -w /sys/fs/cgroup/cgroup.subtree_control ] &&
		grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
		root=/sys/fs/cgroup
		echo +cpu >"$root/cgroup.subtree_control" 2>/dev/null || true
		cpu_cgroup=$root/orchestrate-bench-$$
		mkdir "$cpu_cgroup" && echo "$quota 100000" >"$cpu_cgroup/cpu.max"
	elif [ -d /sys/fs/cgroup/cpu ] && [ -w /sys/fs/cgroup/cpu ]; then
		root=/sys/fs/cgroup/cpu
		cpu_cgroup=$root/orchestrate-bench-$$
		mkdir "$cpu_cgroup" && echo 100000 >"$cpu_cgroup/cpu.cfs_period_us" &&
			echo "$quota" >"$cpu_cgroup/cpu.cfs_quota_us"
	else
		echo "daemons.sh: ETCD_CPU needs a writable cpu cgroup (run as root)" >&2
		exit 1
	fi
	echo "$LOCAL_ETCD_PID" >"$cpu_cgroup/cgroup.procs"
	trap 'etcd_cpu_unlimit; local_scratch_cleanup' EXIT
}
etcd_cpu_unlimit() {
	[ -n "$cpu_cgroup" ] || return 0
	local root=${cpu_cgroup%/*}
	echo "$LOCAL_ETCD_PID" >"$root/cgroup.procs" 2>/dev/null || true
	rmdir "$cpu_cgroup" 2>/dev/null || true
	cpu_cgroup=
}

echo "starting $daemons daemons on one etcd${svc:+ (each offers web)}..."
start_cpu=${START_CPU-}
if [ -n "$start_cpu" ]; then
	etcd_cpu_limit "$start_cpu"
	echo "  etcd is held to $start_cpu % of one core while they start"
fi
etcd_requests "$work/start0"
start_c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
start_t0=$(now_ms)
daemon_pids=()
for i in $(seq -w 1 "$daemons"); do
	d=$work/n$i
	mkdir -p "$d"
	grp=
	# STAGES: the first N/STAGES daemons in g1, the next in g2, ...
	[ "$stages" -gt 0 ] && grp=", group: g$(( (10#$i - 1) * stages / daemons + 1 ))"
	cat >"$d/o.yaml" <<EOF
node: {hostname: n$i, addresses: {eth0: 192.0.2.1}, profile_list: $d/pl.txt$svc$grp}
paths: {local_version: $d/cv, hiera_services: $d/s.yaml, state_dir: $d/st}
hooks: {config: $work/config, validate: /bin/true, services: /bin/true}
timing: {lease_ttl: ${LEASE_TTL:-30}, splay: ${SPLAY:-0}, quiet: 0.5, quiet_max: 2}
$etcd_conf
EOF
	orchestrated --config "$d/o.yaml" >"$d/log" 2>&1 &
	pids+=($!)
	daemon_pids+=($!)
done
DAEMON_PIDS=("${daemon_pids[@]}")	# bench_trigger: the daemons' own CPU
# Registered: alive/HOST is there; synced: the daemon logged its first view of
# the desired version (it does so once the read ended).
registered_ms= synced_ms=
for _ in $(seq "$(( ${START_TIMEOUT:-300} * 5 ))"); do
	if [ -z "$registered_ms" ] &&
		[ "$(etcdctl_ get --prefix /alive/ --keys-only 2>/dev/null | grep -c .)" -ge "$daemons" ]; then
		registered_ms=$(( $(now_ms) - start_t0 ))
	fi
	if [ -n "$registered_ms" ] &&
		[ "$(grep -l "desired version" "$work"/n*/log 2>/dev/null | wc -l)" -ge "$daemons" ]; then
		synced_ms=$(( $(now_ms) - start_t0 ))
		break
	fi
	sleep 0.2
done
etcd_requests "$work/start1"
start_c1=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
etcd_cpu_unlimit
echo "start: all registered after ${registered_ms:-(not all)} ms, all synced after ${synced_ms:-(not all)} ms"
echo "  etcd per daemon: $(etcd_requests_sum "$work/start0" "$work/start1" "LeaseRenewal|LeaseKeepAlive" |
	awk -v n="$daemons" '{ printf "%.2f", $1 / n }') requests, $(awk -v c="$((start_c1 - start_c0))" \
	-v n="$daemons" 'BEGIN { printf "%.2f", c / n }') ms CPU; by method:$(
	etcd_requests_diff "$work/start0" "$work/start1" "$daemons" 1 | awk '{ printf " %s %.2f", $1, $2 }')"
echo "  from the daemons' logs: registrations failed $(cat "$work"/n*/log | grep -c "registration failed" || true),"\
" syncs failed $(cat "$work"/n*/log | grep -c "sync failed" || true),"\
" leases lost $(cat "$work"/n*/log | grep -c "is gone, granting" || true)"
sleep 2

median_of() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
rss=$(for p in "${daemon_pids[@]}"; do awk '/^VmRSS/{print $2}' "/proc/$p/status"; done | median_of)
anon=$(for p in "${daemon_pids[@]}"; do awk '/^RssAnon/{print $2}' "/proc/$p/status"; done | median_of)
pss=$(for p in "${daemon_pids[@]}"; do awk '/^Pss:/{print $2}' "/proc/$p/smaps_rollup"; done | median_of)
echo
echo "idle memory of one daemon (median of $daemons): VmRSS ${rss} KiB, of which anonymous ${anon} KiB;"
echo "  PSS ${pss} KiB (shared library pages, mostly OpenSSL and libcurl, divided among the daemons)"

# A daemon opens its keepalive stream at its first renewal, a third of the
# TTL after its grant: that belongs to the start, not to the idle window.
sleep $(( ${LEASE_TTL:-30} / 3 ))
etcd_requests "$work/m1"
c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
s0=$(now_ms)
echo "counting etcd requests for ${idle_seconds} s of idleness..."
sleep "$idle_seconds"
etcd_requests "$work/m2"
c1=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
s1=$(now_ms)
echo "etcd requests per idle daemon per minute, by method:"
etcd_requests_diff "$work/m1" "$work/m2" "$daemons" "$(awk -v w="$((s1 - s0))" 'BEGIN { print w / 60000 }')" |
	awk '{ printf "  %-20s %.2f\n", $1, $2 }'
export BT_IDLE_CPU_RATE
BT_IDLE_CPU_RATE=$(awk -v c="$((c1 - c0))" -v w="$((s1 - s0))" 'BEGIN { printf "%.3f", c / (w / 1000) }')
awk -v r="$BT_IDLE_CPU_RATE" -v b="$base_rate" -v n="$daemons" 'BEGIN { c = r - b; if (c < 0) c = 0
	printf "etcd CPU per idle daemon per minute: %.2f ms (etcd alone: %.1f ms/s)\n", c * 60 / n, b }'
echo "watch streams per daemon: $(etcd_gauge etcd_debugging_mvcc_watch_stream_total | awk -v n="$daemons" \
	'{ printf "%.2f", $1 / n }'), watchers per daemon: $(etcd_gauge etcd_debugging_mvcc_watcher_total |
	awk -v n="$daemons" '{ printf "%.2f", $1 / n }')"

# log_counts — what the daemons logged so far: keepalives failed, leases lost,
# sync retries, full re-reads, run writes sent again, run writes without an
# answer that were read back (one line, six numbers).
log_counts() {
	local p
	for p in "lease keepalive failed" "is gone, granting" "sync failed" "reading everything again" \
		"sending it again (settled)" "(read back:"; do
		cat "$work"/n*/log | grep -c "$p" || true
	done | tr '\n' ' '
	echo
}
log_counts >"$work/logs0"

# etcd_wait_idle ROUNDS — until etcd's CPU over 2 s is back near its idle rate
# with the daemons (at most ROUNDS windows).
etcd_wait_idle() {
	local i a b
	for ((i = 0; i < $1; i++)); do
		a=$(etcd_cpu_ms "${ETCD_PIDS[@]}"); sleep 2; b=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
		awk -v d="$((b - a))" -v r="$BT_IDLE_CPU_RATE" 'BEGIN { exit !(d / 2 <= 2 * r + 50) }' && return 0
	done
	return 0
}

if [ "$warm" = 1 ]; then
	# A daemon's first run publishes its services (a first boot); what a
	# trigger costs a fleet that runs is measured from the second.
	echo
	echo "warm-up trigger (each daemon's first run), not measured:"
	bench_trigger warm "$daemons" "$work/warm"
	echo "  at the version (count, p50, p99, max ms): $BT_AT"
	# In the default setting every first publication goes to every node:
	# N^2 events that etcd is still sending after the hosts are at the
	# version.  Wait until etcd is back to its idle rate (2 s windows, at
	# most 600 s), so that no measured trigger queues behind them.
	w0=$(now_ms)
	etcd_wait_idle 300
	echo "  etcd back to its idle rate $(( ($(now_ms) - w0) / 1000 )) s later"
	sleep "$SETTLE"
fi
if [ "${ETCD_RESTART:-0}" = 1 ]; then
	# etcd's counters start from nothing in the new process: the recovery's
	# requests are what it counted until every daemon's stream is back and
	# etcd is at its idle rate again (2 s windows), less the benchmark's own.
	echo
	echo "restarting etcd..."
	log_counts >"$work/logs-restart0"
	restart_t0=$(now_ms)
	local_etcd_restart || exit 1
	pids+=("$LOCAL_ETCD_PID")
	ETCD_PIDS=("$LOCAL_ETCD_PID")
	up_ms=$(( $(now_ms) - restart_t0 ))
	streams_ms=
	for ((i = 0; i < 600; i++)); do
		if [ "$(etcd_gauge etcd_debugging_mvcc_watch_stream_total)" -ge "$daemons" ]; then
			streams_ms=$(( $(now_ms) - restart_t0 ))
			break
		fi
		sleep 0.5
	done
	etcd_wait_idle 150
	settled_ms=$(( $(now_ms) - restart_t0 ))
	: >"$work/restart0"
	etcd_requests "$work/restart1"
	restart_cpu=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	log_counts >"$work/logs-restart1"
	echo "restart: etcd answering after $up_ms ms, every daemon's stream back after ${streams_ms:-(not all, 300 s)} ms,"
	echo "  etcd back to its idle rate after $settled_ms ms"
	echo "  etcd per daemon until then: $(etcd_requests_sum "$work/restart0" "$work/restart1" "LeaseRenewal|LeaseKeepAlive" |
		awk -v n="$daemons" '{ printf "%.2f", $1 / n }') requests, $(awk -v c="$restart_cpu" \
		-v n="$daemons" 'BEGIN { printf "%.2f", c / n }') ms CPU (its own start included); by method:$(
		etcd_requests_diff "$work/restart0" "$work/restart1" "$daemons" 1 | awk '{ printf " %s %.2f", $1, $2 }')"
	paste "$work/logs-restart0" "$work/logs-restart1" | awk -v n="$daemons" '{
		printf "  from the daemons\x27 logs, per daemon: keepalives failed %.2f, leases lost %.2f, sync retries %.2f, full re-reads %.2f\n",
			($7 - $1) / n, ($8 - $2) / n, ($9 - $3) / n, ($10 - $4) / n }'
	log_counts >"$work/logs0"	# the triggers' counts start here
	sleep "$SETTLE"
fi
echo
if [ -n "$etcd_cpu" ]; then
	etcd_cpu_limit "$etcd_cpu"
	echo "etcd is held to $etcd_cpu % of one core from now on"
	# LIMITED_IDLE=S: S seconds of idleness under the limit before the
	# first trigger, with etcd's CPU over them (what it still had to do)
	if [ "${LIMITED_IDLE:-0}" -gt 0 ]; then
		printf '  etcd CPU over %s s idle under the limit, ms/s in 10 s windows:' "$LIMITED_IDLE"
		for ((i = 0; i < LIMITED_IDLE; i += 10)); do
			a=$(etcd_cpu_ms "${ETCD_PIDS[@]}"); sleep 10; b=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
			printf ' %d' $(( (b - a) / 10 ))
		done
		echo
	fi
fi
if [ -n "$policy" ]; then
	etcdctl_ put /rollout/policy "$policy" >/dev/null
	sleep "$SETTLE"
fi
echo "trigger -> config hook start, and -> at the version, $daemons daemons, policy ${policy:-none}, splay ${SPLAY:-0} s (ms):"
printf '  %-8s %8s %8s %8s %8s %8s %10s\n' version started p50 p99 max at all_at_ms
: >"$work/per-trigger"
for t in $(seq 1 "$triggers"); do
	v=bench$t
	# AUTH_CHANGE=1: a user added right before the trigger, as a
	# node_identity for a new host would: etcd then refuses every token
	# given before it ("revision of auth store is old")
	if [ "${AUTH_CHANGE:-0}" = 1 ]; then
		etcdctl_ user add "bench-change-$t:x" >/dev/null
	fi
	bench_trigger "$v" "$daemons" "$work/t$t"
	started=$(wc -l <"$work/starts/$v" 2>/dev/null || echo 0)
	read -r atn _ _ atmax <<<"$BT_AT"
	awk -v t0="$BT_T0" '{ print $1 / 1e6 - t0 }' "$work/starts/$v" 2>/dev/null | ms_stats |
		awk -v v="$v" -v n="$started" -v atn="$atn" -v atmax="$atmax" \
		'{ printf "  %-8s %8d %8s %8s %8s %8s %10s\n", v, n, $2, $3, $4, atn, atmax }'
	echo "$t $BT_REQ $BT_CPU $BT_KEEPALIVE $BT_DAEMON_CPU $BT_KA_STREAMS $BT_EVENTS $BT_DAEMON_WAKEUPS $BT_METHODS" >>"$work/per-trigger"
	if [ -n "${TIMELINE:-}" ]; then
		bench_timeline_print "$work/t$t.timeline" "${etcd_cpu:-100}"
		[ -z "$keep_logs" ] || { mkdir -p "$keep_logs" && cp "$work/t$t.timeline" "$keep_logs/"; }
	fi
done
etcd_cpu_unlimit
echo
echo "etcd per daemon per trigger: requests (all but keepalives), lease renewals and the keepalive"
echo "streams they took, CPU ms, watch events etcd sent (the benchmark's own watches take ~2), by method,"
echo "the floor of the trigger: the etcd CPU it took, on etcd's share of a core (${etcd_cpu:-100} %),"
echo "and the daemon's own CPU per trigger (its hooks' not counted) on how many wake-ups:"
awk -v share="${etcd_cpu:-100}" -v n="$daemons" '{
	printf "  trigger %d: %6.2f requests %5.2f renewals on %4.2f streams %7.2f ms  floor %6.1f s  daemon %5.2f ms on %.0f wake-ups  events %7.2f ",
		$1, $2, $4, $6, $3, $3 * n / 1000 / (share / 100), $5, $8, $7
	for (i = 9; i <= NF; i += 2) printf " %s %s", $i, $(i + 1); printf "\n" }' "$work/per-trigger"
# The splay by orchestrate.conf(5)'s rule for this etcd: the etcd CPU of the
# cheapest trigger (the one least inflated by lost leases) for the whole
# fleet, over what etcd's share of a core leaves once the idle fleet (its
# renewals, measured above, etcd's own rate included) is served, and half as
# much again.  A trigger whose CPU reads 0 (a counter that missed the
# window) is left out.
awk -v share="${etcd_cpu:-100}" -v n="$daemons" -v idle="$BT_IDLE_CPU_RATE" '
	$3 > 0 && (min == "" || $3 < min) { min = $3 }
	END {
		if (min == "") exit
		left = share * 10 - idle
		if (left <= 0)
			printf "the idle fleet alone takes etcd\x27s share (%.0f of %.0f ms/s): no splay is enough\n", idle, share * 10
		else
			printf "the splay by the rule (orchestrate.conf(5)): %.0f s, %.0f s before the half added: the cheapest trigger, %.2f ms a daemon, over the %.0f ms/s of the share\x27s %.0f that the idle fleet leaves\n",
				1.5 * min * n / left, min * n / left, min, left, share * 10 }' "$work/per-trigger"
log_counts >"$work/logs1"
paste "$work/logs0" "$work/logs1" | awk -v n="$daemons" '{
	printf "from the daemons\x27 logs, per daemon over the triggers: keepalives failed %.2f, leases lost %.2f,\n", ($7 - $1) / n, ($8 - $2) / n
	printf "  sync retries %.2f, full re-reads of the catalog %.2f, run writes sent again %.2f,\n", ($9 - $3) / n, ($10 - $4) / n, ($11 - $5) / n
	printf "  run writes unanswered and found applied by a read %.2f\n", ($12 - $6) / n }'
# Under a policy: the window each queueing host's look counts, from the
# tail's history (each put replaced the tail of the host that queued just
# before): revisions between the two queueing txns.  0 costs no count; 1 to
# 8 cost that many counts and one more; beyond, a scan.
if [ -n "$policy" ]; then
	timeout 10 bash -c 'ETCDCTL_API=3 etcdctl --endpoints "$1" watch --rev=1 --prev-kv -w json \
		/rollout_tail' _ "$ORCHESTRATE_ETCD" 2>/dev/null | python3 -c '
import json, sys
w = []
for line in sys.stdin:
    for ev in json.loads(line).get("Events") or []:
        prev = ev.get("prev_kv")
        if prev:
            w.append(ev["kv"]["mod_revision"] - prev["mod_revision"] - 1)
if w:
    n = len(w)
    print("slot queue windows (the tail\x27s history, %d hosts queued): 0 revisions %.0f %%, 1 to 8 %.0f %%, more (a scan) %.0f %%, counts per look %.2f"
          % (n, 100 * sum(x == 0 for x in w) / n, 100 * sum(0 < x <= 8 for x in w) / n,
             100 * sum(x > 8 for x in w) / n, sum(x + 1 for x in w if 0 < x <= 8) / n))' || true
fi
if [ -n "$keep_logs" ]; then
	mkdir -p "$keep_logs"
	for d in "$work"/n*/; do cp "$d/log" "$keep_logs/$(basename "$d").log"; done
	# etcd's own (ETCD_ARGS='--log-level warn' says why a lease went)
	cp "$work/etcd.log" "$keep_logs/etcd.log" 2>/dev/null || true
fi
sleep 1	# the benchmark's own watch streams close
rss1=$(etcd_rss_kib "${ETCD_PIDS[@]}")
echo "after the triggers: watch streams per daemon $(etcd_gauge etcd_debugging_mvcc_watch_stream_total |
	awk -v n="$daemons" '{ printf "%.2f", $1 / n }'), watchers per daemon $(
	etcd_gauge etcd_debugging_mvcc_watcher_total | awk -v n="$daemons" '{ printf "%.2f", $1 / n }');"
echo "  etcd RSS $((rss0 / 1024)) -> $((rss1 / 1024)) MiB, $(((rss1 - rss0) / daemons)) KiB per daemon"
