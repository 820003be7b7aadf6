# lib-etcd-metrics.sh — sourced (bash) by bench/daemons.sh and bench/fleet.sh:
# what a fleet costs etcd, read from etcd's own /metrics and /proc, summed over
# every member of $ORCHESTRATE_ETCD (one URL, or a comma-separated cluster).
#
#   etcd_requests FILE            grpc_server_started_total by grpc_method,
#                                 "METHOD COUNT" a line, sorted, into FILE, and
#                                 "LeaseRenewal COUNT": the lease renewals
#                                 (LeaseKeepAlive's messages received: a
#                                 keepalive stream carries many)
#   etcd_requests_diff A B N K    per method: (B - A) / N / K, "METHOD VALUE"
#                                 lines for methods that moved (N nodes, K events)
#   etcd_requests_sum A B [SKIP]  total requests between A and B, without the
#                                 methods in the regex SKIP
#   etcd_gauge NAME               the sum of a metric over the members
#   etcd_member_requests URL      one member's requests, every method but
#                                 LeaseKeepAlive (for the spread over a cluster)
#   etcd_cpu_ms PID...            utime + stime of the processes, in ms (/proc)
#   etcd_rss_kib PID...           their VmRSS summed, in KiB
#   ms_stats                      stdin: one number a line; prints "COUNT P50 P99 MAX"
#   now_ms                        wall clock in ms, from bash's EPOCHREALTIME
#
# and the measurement of one version change, shared by both benchmarks:
#
#   bench_trigger VERSION N OUT   triggers VERSION and measures it (below)
#   bench_settle QUIET LIMIT OUT  waits until no request but keepalives reached
#                                 etcd for QUIET s (at most LIMIT s)
#   bench_watch KEY REV OUT       a timestamped watch of the prefix KEY from
#                                 revision REV: "MS KEY VALUE" per put, into OUT
#
#   TIMELINE=S                    bench_trigger also samples etcd every S
#                                 seconds through the trigger and prints a
#                                 table of each stretch (bench_timeline_print):
#                                 its CPU, apply backlog, requests, renewals
#                                 refused, leases granted and revoked, and the
#                                 nodes at the version; each scrape costs etcd
#                                 a few ms of CPU, so the figures above include
#                                 it
#
# They use etcdctl, perl (JSON::PP, MIME::Base64, Time::HiRes: all in Debian's
# perl) and orchestrate on PATH, ORCHESTRATE_PREFIX, $work and $pids of
# scripts/local-etcd.sh, and ETCD_PIDS (an array: etcd's processes).
#
# grpc_server_started_total counts every gRPC call etcd started: the v3 JSON
# gateway turns each HTTP request (and each watch stream) into one call, so it
# counts the nodes' requests exactly, by method (Range, Txn, Put, DeleteRange,
# LeaseGrant, LeaseKeepAlive, LeaseRevoke, Watch).  Scraping /metrics is plain
# HTTP and counts nothing.  A daemon renews its lease on one keepalive stream,
# so LeaseKeepAlive counts the streams it opened, and LeaseRenewal (from
# grpc_server_msg_received_total) the renewals, streamed or not.

etcd_metric_urls() {
	local IFS=,
	# shellcheck disable=SC2086
	printf '%s\n' ${ORCHESTRATE_ETCD:?}
}

etcd_scrape() {
	local u
	for u in $(etcd_metric_urls); do
		curl -s --max-time 60 "$u/metrics" || true
	done
}

etcd_requests() {
	etcd_scrape | awk '/^grpc_server_started_total/ {
		match($0, /grpc_method="[^"]*"/); m = substr($0, RSTART + 13, RLENGTH - 14); c[m] += $NF }
		/^grpc_server_msg_received_total.*"LeaseKeepAlive"/ { c["LeaseRenewal"] += $NF }
		END { for (m in c) print m, c[m] }' | sort >"$1"
}

etcd_requests_diff() {
	join -a 2 -e 0 -o 0,1.2,2.2 "$1" "$2" | awk -v n="$3" -v k="$4" \
		'$3 - $2 > 0 { printf "%s %.3f\n", $1, ($3 - $2) / n / k }'
}

etcd_requests_sum() {
	join -a 2 -e 0 -o 0,1.2,2.2 "$1" "$2" | awk -v skip="${3:-^$}" \
		'$1 !~ skip { s += $3 - $2 } END { print s + 0 }'
}

etcd_gauge() {
	etcd_scrape | awk -v name="$1" '$1 == name { s += $2 } END { printf "%.0f\n", s }'
}

etcd_member_requests() {
	curl -s --max-time 60 "$1/metrics" | awk '/^grpc_server_started_total/ && !/LeaseKeepAlive/ {
		s += $NF } END { print s + 0 }'
}

etcd_cpu_ms() {
	local hz p
	hz=$(getconf CLK_TCK)
	for p in "$@"; do
		# fields after the ")" of comm: utime is the 12th, stime the 13th
		sed 's/.*) //' "/proc/$p/stat" 2>/dev/null
	done | awk -v hz="$hz" '{ t += $12 + $13 } END { printf "%.0f\n", t * 1000 / hz }'
}

# daemon_wakeups PID... — how many times these processes have been put on a
# CPU so far (/proc/PID/schedstat's third field): a daemon's loop wake-ups.
daemon_wakeups() {
	local p
	for p in "$@"; do
		cat "/proc/$p/schedstat" 2>/dev/null
	done | awk '{ t += $3 } END { printf "%.0f\n", t }'
}

etcd_rss_kib() {
	local p
	for p in "$@"; do
		awk '/^VmRSS/ { print $2 }' "/proc/$p/status" 2>/dev/null
	done | awk '{ s += $1 } END { print s + 0 }'
}

ms_stats() {
	sort -n | awk '{ a[NR] = $1 }
		END {
			if (NR == 0) { print 0, "-", "-", "-"; exit }
			i50 = int(NR * 0.50 + 0.5); if (i50 < 1) i50 = 1
			i99 = int(NR * 0.99 + 0.5); if (i99 < 1) i99 = 1; if (i99 > NR) i99 = NR
			printf "%d %.0f %.0f %.0f\n", NR, a[i50], a[i99], a[NR]
		}'
}

now_ms() {
	local t=${EPOCHREALTIME/[.,]/}
	echo $((t / 1000))
}

etcdctl_() {
	ETCDCTL_API=3 etcdctl --endpoints "$ORCHESTRATE_ETCD" --command-timeout=60s "$@"
}

etcd_revision() {
	etcdctl_ get /no-such-key -w json | grep -o '"revision":[0-9]*' | head -n 1 | cut -d: -f2
}

# etcdctl writes each watch response as one JSON line as soon as it arrives;
# perl stamps it with the time it read it and prints one line per put event.
# Arrival at this watcher is the moment the whole fleet could see the write.
bench_watch() {
	local key=$1 rev=$2 out=$3 fifo
	fifo=$(mktemp -u "$work/fifo.XXXXXX")
	mkfifo "$fifo"
	perl -MJSON::PP -MMIME::Base64 -MTime::HiRes=time -ne '
		BEGIN { $| = 1 }
		my $t = sprintf "%.1f", time * 1000;
		my $j = eval { JSON::PP->new->allow_bignum->decode($_) } or next;
		for my $e (@{ $j->{Events} || [] }) {
			next if $e->{type};	# a DELETE
			my $k = decode_base64($e->{kv}{key});
			my $v = decode_base64($e->{kv}{value} // "");
			$v =~ tr/\n/ /;
			print "$t $k $v\n";
		}' <"$fifo" >"$out" &
	pids+=($!)
	# a simple command, so that $! is etcdctl itself
	ETCDCTL_API=3 etcdctl --endpoints "$ORCHESTRATE_ETCD" watch --prefix --rev "$rev" "$key" \
		-w json >"$fifo" 2>/dev/null &
	BENCH_WATCH_PID=$!
	pids+=($!)
}

bench_settle() {
	# Bounded in seconds, not in rounds: a round's read of /metrics can
	# itself take seconds from an etcd held to a small CPU share.
	local quiet=$1 limit=$2 out=$3 last=-1 now same=0 end=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$end" ]; do
		etcd_requests "$out"
		now=$(awk '$1 != "LeaseKeepAlive" && $1 != "LeaseRenewal" { s += $2 } END { print s + 0 }' "$out")
		if [ "$now" = "$last" ]; then
			same=$((same + 1))
			[ "$same" -ge "$quiet" ] && return 0
		else
			same=0
		fi
		last=$now
		sleep 1
	done
	return 1
}

# bench_timeline_sample OUT AT VERSION — one line into OUT: ms since BT_T0,
# etcd's CPU ms, then the counters bench_timeline_print reads, summed over the
# members, and the nodes at VERSION (from the watch file AT).
bench_timeline_sample() {
	local t cpu at
	t=$(($(now_ms) - BT_T0))
	cpu=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	at=$({ grep -F "\"version\":\"$3\"" "$2" 2>/dev/null || true; } | awk '{ print $2 }' | sort -u | wc -l)
	etcd_scrape | awk -v t="$t" -v cpu="$cpu" -v at="$at" '
		/^etcd_server_proposals_committed_total / { committed += $2 }
		/^etcd_server_proposals_applied_total / { applied += $2 }
		/^grpc_server_started_total.*grpc_method="Txn"/ { txn += $NF }
		/^grpc_server_started_total.*grpc_method="Range"/ { range += $NF }
		/^grpc_server_started_total.*grpc_method="LeaseGrant"/ { grant += $NF }
		/^grpc_server_started_total.*grpc_method="LeaseKeepAlive"/ { streams += $NF }
		/^grpc_server_msg_received_total.*grpc_method="LeaseKeepAlive"/ { renew += $NF }
		/^grpc_server_handled_total.*grpc_code="Unavailable".*grpc_method="LeaseKeepAlive"/ { refused += $NF }
		/^etcd_debugging_lease_revoked_total / { revoked += $2 }
		END { printf "%d %d %d %d %d %d %d %d %d %d %d %d\n", t, cpu, committed, applied,
			txn, range, grant, streams, renew, refused, revoked, at }' >>"$1"
}

# bench_timeline_print FILE SHARE — the samples as a table, one row a stretch:
# etcd's CPU in % of a core (SHARE: the % it may use, for the reader), its
# apply backlog (entries committed and not yet applied, at the stretch's end),
# Txn and Range a second, renewals a second, keepalive streams opened and
# renewals refused (etcd's "waiting for the applied index", which ends the
# stream), leases granted and revoked in the stretch, and the nodes at the
# version at its end.
bench_timeline_print() {
	echo "  timeline (etcd may use ${2} % of a core; the backlog is raft entries committed, not applied):"
	awk 'BEGIN { printf "  %7s %5s %7s %7s %7s %8s %7s %7s %6s %7s %6s\n", "t s", "cpu%", "backlog",
			"Txn/s", "Range/s", "renew/s", "streams", "refused", "grants", "revoked", "at" }
		NR > 1 { d = ($1 - p[1]) / 1000; if (d <= 0) next
			printf "  %7.0f %5.1f %7d %7.1f %7.1f %8.1f %7d %7d %6d %7d %6d\n", $1 / 1000,
				($2 - p[2]) / 10 / d, $3 - $4, ($5 - p[5]) / d, ($6 - p[6]) / d,
				($9 - p[9]) / d, $8 - p[8], $10 - p[10], $7 - p[7], $11 - p[11], $12 }
		{ for (i = 1; i <= NF; i++) p[i] = $i }' "$1"
}

# bench_trigger VERSION N OUT
#
# Starts two timestamped watches (status/puppet/running/ and
# running_version/, each host's {"version":…}), waits until etcd has both, reads etcd's request
# counters and CPU, runs `orchestrate trigger_update VERSION`, waits until N
# hosts are at VERSION (at most TRIGGER_TIMEOUT s, default 120) and until no
# request but keepalives reached etcd for SETTLE s (default 3; at most
# SETTLE_TIMEOUT s, default 120), then reads the counters and CPU again.  The
# watches opened before the first reading: they count in no figure.  Sets
#
#   BT_T0          the trigger's wall clock, ms
#   BT_RUN         "COUNT P50 P99 MAX": trigger -> puppet/running at VERSION
#                  seen by the watch, ms, one sample per host (its first)
#   BT_AT          the same for running_version/HOST at VERSION; its MAX is the
#                  time until all N were at the version
#   BT_AT_CLI      `orchestrate hosts_at_version VERSION | wc -l` at the end
#   BT_METHODS     "Range 2.000 Txn 5.000 ...": requests per node by method,
#                  LeaseKeepAlive and LeaseRenewal left out (they count
#                  time, not the trigger)
#   BT_REQ         requests per node, every method but those two
#   BT_KEEPALIVE   lease renewals per node over the window (time, not trigger)
#   BT_KA_STREAMS  keepalive streams opened per node over the window
#   BT_CPU         etcd CPU ms per node, less the idle rate BT_IDLE_CPU_RATE
#                  (ms/s for the whole etcd, 0 when unset) over the window
#   BT_WINDOW      the window, s
#   BT_EVENTS      watch events etcd sent per node over the window
#                  (etcd_debugging_mvcc_events_total; the two watches above
#                  take about 2 per node of them)
#   BT_DAEMON_CPU  with DAEMON_PIDS set: the daemons' own CPU ms per node
#   BT_DAEMON_WAKEUPS  and how often each was put on a CPU (schedstat)
#
# The counters include the trigger_update command's own requests (a Range and
# a Txn or so: 2/N per node).
bench_trigger() {
	local v=$1 n=$2 out=$3 P=${ORCHESTRATE_PREFIX:-} rev w0 c0 c1 d0 d1 k0 k1 s0 s1 i at=0 wr wa e0 e1
	local deadline
	rev=$(etcd_revision)
	w0=$(etcd_gauge etcd_debugging_mvcc_watcher_total)
	bench_watch "$P/status/puppet/running/" $((rev + 1)) "$out.run.raw"
	wr=$BENCH_WATCH_PID
	bench_watch "$P/running_version/" $((rev + 1)) "$out.at.raw"
	wa=$BENCH_WATCH_PID
	for ((i = 0; i < 50; i++)); do
		[ "$(etcd_gauge etcd_debugging_mvcc_watcher_total)" -ge $((w0 + 2)) ] && break
		sleep 0.1
	done

	etcd_requests "$out.req0"
	e0=$(etcd_gauge etcd_debugging_mvcc_events_total)
	c0=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	d0=$(etcd_cpu_ms "${DAEMON_PIDS[@]:-}")
	k0=$(daemon_wakeups "${DAEMON_PIDS[@]:-}")
	s0=$(now_ms)
	BT_T0=$(now_ms)
	local tl=
	if [ -n "${TIMELINE:-}" ]; then
		: >"$out.timeline"
		bench_timeline_sample "$out.timeline" "$out.at.raw" "$v"
		(while sleep "$TIMELINE"; do bench_timeline_sample "$out.timeline" "$out.at.raw" "$v"; done) &
		tl=$!
	fi
	# patient: under a slow etcd (ETCD_CPU) the default 5 s would give up
	orchestrate --timeout 60 trigger_update "$v" >/dev/null
	# ETCD_STOP=S: etcd stopped (SIGSTOP) for S seconds, ETCD_STOP_AFTER (1)
	# seconds into the trigger, while the nodes' writes are out: longer than
	# the request timeout, shorter than a lease
	if [ -n "${ETCD_STOP:-}" ]; then
		sleep "${ETCD_STOP_AFTER:-1}"
		kill -STOP "${ETCD_PIDS[@]}"
		sleep "$ETCD_STOP"
		kill -CONT "${ETCD_PIDS[@]}"
	fi
	deadline=$((BT_T0 + ${TRIGGER_TIMEOUT:-120} * 1000))
	while [ "$(now_ms)" -lt "$deadline" ]; do
		at=$({ grep -F "\"version\":\"$v\"" "$out.at.raw" || true; } | awk '{ print $2 }' | sort -u | wc -l)
		[ "$at" -ge "$n" ] && break
		sleep 0.2
	done
	bench_settle "${SETTLE:-3}" "${SETTLE_TIMEOUT:-120}" "$out.settle" ||
		echo "  (requests still moving after ${SETTLE_TIMEOUT:-120} s)" >&2
	if [ -n "$tl" ]; then
		kill "$tl" 2>/dev/null || true
		wait "$tl" 2>/dev/null || true
		bench_timeline_sample "$out.timeline" "$out.at.raw" "$v"
	fi
	etcd_requests "$out.req1"
	e1=$(etcd_gauge etcd_debugging_mvcc_events_total)
	c1=$(etcd_cpu_ms "${ETCD_PIDS[@]}")
	d1=$(etcd_cpu_ms "${DAEMON_PIDS[@]:-}")
	k1=$(daemon_wakeups "${DAEMON_PIDS[@]:-}")
	s1=$(now_ms)
	kill "$wr" "$wa" 2>/dev/null || true
	wait "$wr" "$wa" 2>/dev/null || true

	BT_WINDOW=$(awk -v a="$s0" -v b="$s1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
	BT_EVENTS=$(awk -v a="$e0" -v b="$e1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')
	BT_METHODS=$(etcd_requests_diff "$out.req0" "$out.req1" "$n" 1 |
		grep -Ev '^Lease(KeepAlive|Renewal) ' | tr '\n' ' ')
	BT_REQ=$(awk -v n="$n" \
		-v s="$(etcd_requests_sum "$out.req0" "$out.req1" '^Lease(KeepAlive|Renewal)$')" \
		'BEGIN { printf "%.2f", s / n }')
	BT_KEEPALIVE=$(etcd_requests_diff "$out.req0" "$out.req1" "$n" 1 |
		awk '$1 == "LeaseRenewal" { v = $2 } END { printf "%.2f", v }')
	BT_KA_STREAMS=$(etcd_requests_diff "$out.req0" "$out.req1" "$n" 1 |
		awk '$1 == "LeaseKeepAlive" { v = $2 } END { printf "%.2f", v }')
	BT_CPU=$(awk -v a="$c0" -v b="$c1" -v w="$BT_WINDOW" -v r="${BT_IDLE_CPU_RATE:-0}" -v n="$n" \
		'BEGIN { c = b - a - r * w; if (c < 0) c = 0; printf "%.2f", c / n }')
	# the daemons' own CPU (not their hooks'), when DAEMON_PIDS is set
	BT_DAEMON_CPU=$(awk -v a="$d0" -v b="$d1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }')
	# and how many times each was woken (put on a CPU) for it
	BT_DAEMON_WAKEUPS=$(awk -v a="$k0" -v b="$k1" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }')
	BT_RUN=$(grep -F "\"version\":\"$v\"" "$out.run.raw" | awk -v t0="$BT_T0" \
		'!seen[$2]++ { print $1 - t0 }' | ms_stats)
	BT_AT=$({ grep -F "\"version\":\"$v\"" "$out.at.raw" || true; } | awk -v t0="$BT_T0" \
		'!seen[$2]++ { print $1 - t0 }' | ms_stats)
	BT_AT_CLI=$({ orchestrate hosts_at_version "$v" || true; } | wc -l)
}
