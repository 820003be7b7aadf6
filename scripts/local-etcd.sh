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

# A free port: nothing accepts a connection on it (and it is not $1).
local_etcd_free_port() {
	local i p
	for ((i = 0; i < 50; i++)); do
		p=$((20000 + RANDOM % 30000))
		[[ $p == "${1:-}" ]] && continue
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
	done
	return 1
}

local_etcd_start() {
	local dir=$1 name=$2 client peer i
	shift 2
	client=$(local_etcd_free_port) && peer=$(local_etcd_free_port "$client") || {
		echo "no free port on 127.0.0.1 for etcd" >&2
		return 1
	}
	export ORCHESTRATE_ETCD=http://127.0.0.1:$client
	etcd --name "$name" --data-dir "$dir/etcd" \
		--listen-client-urls "$ORCHESTRATE_ETCD" --advertise-client-urls "$ORCHESTRATE_ETCD" \
		--listen-peer-urls "http://127.0.0.1:$peer" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "$name=http://127.0.0.1:$peer" \
		--log-level error "$@" >"$dir/etcd.log" 2>&1 &
	LOCAL_ETCD_PID=$!
	for ((i = 0; i < 150; i++)); do
		curl -sf "$ORCHESTRATE_ETCD/health" 2>/dev/null | grep -q '"health":"true"' && return 0
		kill -0 "$LOCAL_ETCD_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "etcd did not start on $ORCHESTRATE_ETCD; see $dir/etcd.log" >&2
	return 1
}

local_etcd_stop() {
	if [ -n "${LOCAL_ETCD_PID:-}" ]; then
		kill "$LOCAL_ETCD_PID" 2>/dev/null || true
		wait "$LOCAL_ETCD_PID" 2>/dev/null || true
		LOCAL_ETCD_PID=
	fi
}
