# local-etcd.sh — sourced (bash) by the demo and the benchmarks: a scratch
# directory cleaned up on exit, and one private etcd on free 127.0.0.1 ports.
# (The tests have their own, richer helpers in tests/test-lib.sh.)
#
#   . scripts/local-etcd.sh
#   local_scratch NAME
#       sets $work to a new temporary directory and $pids to an empty array;
#       on exit every pid in $pids is killed and $work removed
#   local_etcd_start DIR NAME [EXTRA ETCD ARGS...]
#       starts etcd with its data and log in DIR, waits until it answers,
#       exports ORCHESTRATE_ETCD and sets LOCAL_ETCD_PID
#   local_etcd_stop
#   local_etcd_restart
#       stops the etcd of local_etcd_start (SIGTERM, as an operator's restart
#       does) and starts it again on the same data, ports and flags; waits
#       until it answers and sets LOCAL_ETCD_PID to the new process
#   local_etcd_cluster_start DIR NAME SIZE [EXTRA ETCD ARGS...]
#       starts SIZE members NAME1..NAMESIZE on loopback (data and logs in
#       DIR/NAMEi), waits until every member answers, exports ORCHESTRATE_ETCD
#       as the client URLs comma-separated, and sets LOCAL_ETCD_PIDS (an array)
#       and LOCAL_ETCD_PID (the first member)

local_scratch() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-$1.XXXXXX")
	pids=()
	trap local_scratch_cleanup EXIT
}

local_scratch_cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}

# A free port: nothing accepts a connection on it (and it is none of the
# arguments: ports chosen already but not listening yet).
# Chosen below the kernel's ephemeral range when there is room: a port that is
# the local end of some outgoing connection accepts nothing, yet cannot be bound.
local_etcd_free_port() {
	local i p lo=20000 span=30000 eph
	read -r eph _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || eph=
	if [[ $eph =~ ^[0-9]+$ ]] && ((eph > 15000)); then
		lo=10000 span=$((eph - 10000))
	fi
	for ((i = 0; i < 50; i++)); do
		p=$((lo + RANDOM % span))
		[[ " $* " == *" $p "* ]] && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
	done
	return 1
}

local_etcd_start() {
	local dir=$1 name=$2 client peer try
	shift 2
	# A port taken between the check and etcd's bind (another test starting)
	# makes etcd exit at once: try again on other ports.
	for ((try = 1; try <= 3; try++)); do
		client=$(local_etcd_free_port) && peer=$(local_etcd_free_port "$client") || {
			echo "no free port on 127.0.0.1 for etcd" >&2
			return 1
		}
		export ORCHESTRATE_ETCD=http://127.0.0.1:$client
		((try == 1)) || rm -rf "$dir/etcd"
		LOCAL_ETCD_CMD=(etcd --name "$name" --data-dir "$dir/etcd"
			--listen-client-urls "$ORCHESTRATE_ETCD" --advertise-client-urls "$ORCHESTRATE_ETCD"
			--listen-peer-urls "http://127.0.0.1:$peer"
			--initial-advertise-peer-urls "http://127.0.0.1:$peer"
			--initial-cluster "$name=http://127.0.0.1:$peer"
			--log-level error "$@")
		LOCAL_ETCD_LOG=$dir/etcd.log
		"${LOCAL_ETCD_CMD[@]}" >"$LOCAL_ETCD_LOG" 2>&1 &
		LOCAL_ETCD_PID=$!
		local_etcd_wait_healthy && return 0
		kill -0 "$LOCAL_ETCD_PID" 2>/dev/null && break	# alive but not healthy: give up
		wait "$LOCAL_ETCD_PID" 2>/dev/null || true
	done
	echo "etcd did not start on $ORCHESTRATE_ETCD; see $dir/etcd.log" >&2
	return 1
}

# Until the etcd of LOCAL_ETCD_PID answers healthy (15 s at most).
local_etcd_wait_healthy() {
	local i
	for ((i = 0; i < 150; i++)); do
		curl -sf "$ORCHESTRATE_ETCD/health" 2>/dev/null | grep -q '"health":"true"' && return 0
		kill -0 "$LOCAL_ETCD_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

local_etcd_restart() {
	local_etcd_stop
	"${LOCAL_ETCD_CMD[@]}" >>"$LOCAL_ETCD_LOG" 2>&1 &
	LOCAL_ETCD_PID=$!
	local_etcd_wait_healthy || {
		echo "etcd did not start again on $ORCHESTRATE_ETCD; see $LOCAL_ETCD_LOG" >&2
		return 1
	}
}

local_etcd_stop() {
	if [ -n "${LOCAL_ETCD_PID:-}" ]; then
		kill "$LOCAL_ETCD_PID" 2>/dev/null || true
		wait "$LOCAL_ETCD_PID" 2>/dev/null || true
		LOCAL_ETCD_PID=
	fi
}

local_etcd_cluster_start() {
	local try
	for ((try = 1; try <= 3; try++)); do
		local_etcd_cluster_try "$@" && return 0
		# a member that could not bind its ports: all again, on other ports
		[ "${LOCAL_ETCD_RETRY:-}" = 1 ] || break
	done
	echo "etcd cluster did not start on $ORCHESTRATE_ETCD; see $1/$2*/etcd.log" >&2
	return 1
}

local_etcd_cluster_try() {
	local dir=$1 name=$2 size=$3 i j p taken=() initial='' urls='' up
	shift 3
	LOCAL_ETCD_RETRY=
	for ((i = 1; i <= size; i++)); do
		p=$(local_etcd_free_port "${taken[@]}") && taken+=("$p") &&
			p=$(local_etcd_free_port "${taken[@]}") && taken+=("$p") || {
			echo "no free port on 127.0.0.1 for etcd" >&2
			return 1
		}
		initial+="${initial:+,}$name$i=http://127.0.0.1:${taken[2 * i - 1]}"
		urls+="${urls:+,}http://127.0.0.1:${taken[2 * i - 2]}"
	done
	LOCAL_ETCD_PIDS=()
	for ((i = 1; i <= size; i++)); do
		rm -rf "${dir:?}/$name$i"
		mkdir -p "$dir/$name$i"
		etcd --name "$name$i" --data-dir "$dir/$name$i/etcd" \
			--listen-client-urls "http://127.0.0.1:${taken[2 * i - 2]}" \
			--advertise-client-urls "http://127.0.0.1:${taken[2 * i - 2]}" \
			--listen-peer-urls "http://127.0.0.1:${taken[2 * i - 1]}" \
			--initial-advertise-peer-urls "http://127.0.0.1:${taken[2 * i - 1]}" \
			--initial-cluster "$initial" --initial-cluster-token "$name-$$" \
			--initial-cluster-state new \
			--log-level error "$@" >"$dir/$name$i/etcd.log" 2>&1 &
		LOCAL_ETCD_PIDS+=($!)
	done
	LOCAL_ETCD_PID=${LOCAL_ETCD_PIDS[0]}
	export ORCHESTRATE_ETCD=$urls
	for ((j = 0; j < 300; j++)); do
		up=0
		for ((i = 1; i <= size; i++)); do
			curl -sf "http://127.0.0.1:${taken[2 * i - 2]}/health" 2>/dev/null |
				grep -q '"health":"true"' && up=$((up + 1))
		done
		[ "$up" -eq "$size" ] && return 0
		for p in "${LOCAL_ETCD_PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null || { LOCAL_ETCD_RETRY=1; break 2; }
		done
		sleep 0.1
	done
	for p in "${LOCAL_ETCD_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${LOCAL_ETCD_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	return 1
}
