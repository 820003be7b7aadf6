#!/bin/bash
# soak.sh — a bounded soak: many daemons on one etcd, hundreds of triggers and
# catalog changes, and each daemon's memory before and after.  Not part of
# `make check` (tests/t0920-soak-short.sh runs a short one).
#
#   bench/soak.sh                          24 daemons for 180 s
#   DAEMONS=48 SOAK_SECONDS=600 bench/soak.sh
#
# What it does: starts DAEMONS daemons (hooks are /bin/true), makes them
# converge on a first version, samples each one's VmRSS (the "start", taken
# warm: after the first sync and the first run), then for SOAK_SECONDS loops:
# a trigger_update to a new version, a publish_service and an unpublish_service
# from the command line (the catalog churns under every daemon's watch), and
# every PAUSE_EVERY rounds a pause and a resume.  At the end it waits until
# every daemon reached the last version, samples VmRSS again and prints the
# growth per daemon (min / median / max KiB).
#
# Fails (exit 1) when a daemon died, when the fleet does not converge on the
# last version, or when a daemon grew more than MAX_GROWTH_KIB (default: no
# limit).  SOAK_ETCD=URL uses that etcd instead of starting one (the test
# does).  Everything runs on 127.0.0.1 in a temporary directory and stops by
# itself.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
daemons=${DAEMONS:-24}
soak_seconds=${SOAK_SECONDS:-180}
max_growth=${MAX_GROWTH_KIB:-}
pause_every=${PAUSE_EVERY:-25}
export PATH="$top/bin:$PATH"
export ETCDCTL_API=3
[ -x "$top/bin/orchestrated" ] || { echo "soak.sh: build first (make)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-soak.XXXXXX")
pids=()
etcd_pid=
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

. "$top/scripts/local-etcd.sh"
if [ -n "${SOAK_ETCD:-}" ]; then
	export ORCHESTRATE_ETCD=$SOAK_ETCD
else
	local_etcd_start "$work" soak --auto-compaction-mode revision --auto-compaction-retention 1000
	etcd_pid=$LOCAL_ETCD_PID
fi
for _ in $(seq 200); do orchestrate ping >/dev/null 2>&1 && break; sleep 0.1; done
orchestrate ping >/dev/null || { echo "soak.sh: etcd does not answer" >&2; exit 1; }

hosts=()
echo "starting $daemons daemons..."
for i in $(seq -w 1 "$daemons"); do
	d=$work/n$i
	mkdir -p "$d"
	cat >"$d/o.yaml" <<EOF
node: {hostname: n$i, group: g$((10#$i % 3)), services: [soak], addresses: {eth0: 192.0.2.$((10#$i % 250 + 1))}, profile_list: $d/pl.txt}
paths: {local_version: $d/cv, hiera_services: $d/s.yaml, state_dir: $d/st}
hooks: {config: /bin/true, validate: /bin/true, services: /bin/true}
timing: {lease_ttl: 10, splay: 0, quiet: 0.2, quiet_max: 1, retry_min: 1, retry_max: 2}
EOF
	orchestrated --config "$d/o.yaml" --local-version-file "$d/cv" >"$d/log" 2>&1 &
	pids+=($!)
	hosts+=("n$i")
done

converge() {
	printf '%s\n' "${hosts[@]}" | orchestrate verify_hosts --wait "$2" "$1" >/dev/null
}

orchestrate trigger_update soak0 >/dev/null
converge soak0 120 || { echo "soak.sh: the fleet did not converge on soak0" >&2; exit 1; }
sleep 2

rss_of() { awk '/^VmRSS/{print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
for k in "${!pids[@]}"; do rss_of "${pids[$k]}"; done >"$work/rss.start"

echo "soaking for $soak_seconds s..."
t_end=$(( $(date +%s) + soak_seconds ))
rounds=0 triggers=0 changes=0 pauses=0
while [ "$(date +%s)" -lt "$t_end" ]; do
	rounds=$((rounds + 1))
	orchestrate trigger_update "soak$rounds" >/dev/null && triggers=$((triggers + 1))
	orchestrate --hostname "ext$((rounds % 16))" publish_service "churn$((rounds % 5))" \
		--address "eth0=198.51.100.$((rounds % 200 + 1))" >/dev/null && changes=$((changes + 1))
	orchestrate --hostname "ext$(((rounds + 8) % 16))" unpublish_service \
		"churn$(((rounds + 2) % 5))" >/dev/null && changes=$((changes + 1))
	if [ $((rounds % pause_every)) = 0 ]; then
		orchestrate pause --group g1 --reason soak >/dev/null &&
			orchestrate resume --group g1 >/dev/null && pauses=$((pauses + 1))
	fi
	sleep 0.2
done
last="soak$rounds"
echo "$triggers triggers, $changes catalog changes, $pauses pause/resume pairs; waiting for $last..."
converged=yes
converge "$last" 120 || converged=no
sleep 2

dead=0
for k in "${!pids[@]}"; do
	if ! kill -0 "${pids[$k]}" 2>/dev/null; then
		dead=$((dead + 1))
		echo "soak.sh: daemon ${hosts[$k]} died; its log ends with:" >&2
		tail -n 5 "$work/${hosts[$k]}/log" >&2
	fi
	rss_of "${pids[$k]}"
done >"$work/rss.end"

paste "$work/rss.start" "$work/rss.end" | awk '{ print $2 - $1 }' >"$work/growth"
median_of() { sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
gmin=$(sort -n "$work/growth" | head -n 1)
gmax=$(sort -n "$work/growth" | tail -n 1)
gmed=$(median_of <"$work/growth")
smed=$(median_of <"$work/rss.start")
emed=$(median_of <"$work/rss.end")
echo
echo "daemons: $daemons, soak: $soak_seconds s, dead: $dead, converged on $last: $converged"
echo "VmRSS median: start ${smed} KiB, end ${emed} KiB"
echo "VmRSS growth per daemon (KiB): min $gmin, median $gmed, max $gmax"

fail=0
[ "$dead" = 0 ] || fail=1
[ "$converged" = yes ] || { echo "soak.sh: the fleet did not converge on $last" >&2; fail=1; }
if [ -n "$max_growth" ] && [ "$gmax" -gt "$max_growth" ]; then
	echo "soak.sh: a daemon grew by $gmax KiB (limit $max_growth KiB)" >&2
	fail=1
fi
exit $fail
