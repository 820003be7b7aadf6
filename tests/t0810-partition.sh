#!/bin/sh
#
# A partition: a daemon in its own network namespace, reaching etcd over a veth
# pair (addresses from the 198.18.0.0/15 benchmark range, on that pair only),
# is cut off by taking the link down.  It keeps running and keeps its hiera
# file untouched; after its lease TTL it is unaccounted for the others; a
# trigger, a new service and a deletion compacted away happen meanwhile.  When
# the link comes back it registers again, resyncs (the deletion included) and
# converges.  Needs root and iproute2; everything is removed at exit.

test_description='orchestrated cut off from etcd in a network namespace, then reconnected'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
test "$(id -u)" = 0 || skip_all "needs root for ip netns"
command -v ip >/dev/null 2>&1 || skip_all "needs iproute2 (ip)"

NS="orch810-$$"
VH="o8h$$"
VN="o8n$$"
NET="198.18.$(( $$ % 250 + 1 ))"
cleanup_ns () {
	ip netns del "$NS" 2>/dev/null
	ip link del "$VH" 2>/dev/null
}
trap 'stop_all_nodes >/dev/null 2>&1; cleanup_ns; test_cleanup' EXIT
ip netns add "$NS" 2>/dev/null || skip_all "cannot create a network namespace (ip netns add)"
ip link add "$VH" type veth peer name "$VN" &&
	ip link set "$VN" netns "$NS" &&
	ip addr add "$NET.1/30" dev "$VH" &&
	ip link set "$VH" up &&
	ip netns exec "$NS" ip addr add "$NET.2/30" dev "$VN" &&
	ip netns exec "$NS" ip link set "$VN" up &&
	ip netns exec "$NS" ip link set lo up ||
	skip_all "cannot set up a veth pair into the namespace"

# A dedicated etcd listening on loopback and on the host side of the pair
# (the last --listen-client-urls wins, so the extra one replaces test-lib's).
mkdir -p "$ETCD_STATE/etcd"
free_port >"$ETCD_STATE/etcd/client_port" && free_port >"$ETCD_STATE/etcd/peer_port" || exit 1
P=$(cat "$ETCD_STATE/etcd/client_port")
echo http >"$ETCD_STATE/etcd/scheme"
echo "--listen-client-urls http://127.0.0.1:$P,http://$NET.1:$P" >"$ETCD_STATE/etcd/extra_args"
mktemp -d "${TMPDIR:-/tmp}/orchestrate-test-etcd.XXXXXX" >"$ETCD_STATE/etcd/datadir" || exit 1
etcd_launch_ etcd || { echo "Bail out! cannot start etcd"; tail "$TRASH/etcd.etcd.log" | say_comment; exit 1; }
etcd_export_ etcd
NS_URL="http://$NET.1:$P"
LEASE_TTL=5
export LEASE_TTL

# start_ns_node NAME  — start_node, inside the namespace, on the veth address.
start_ns_node () {
	rm -f "$TRASH/$1/exit" "$TRASH/$1/pid"
	(
		ip netns exec "$NS" orchestrated --config "$TRASH/$1/orchestrate.yaml" \
			--etcd "$NS_URL" --local-version-file "$TRASH/$1/current_version" -v \
			>>"$TRASH/$1/log" 2>&1 &
		echo $! >"$TRASH/$1/pid"
		wait $!
		echo $? >"$TRASH/$1/exit"
	) &
	wait_for "test -s '$TRASH/$1/pid'" 5 || return 1
	test_register_pid "$(node_pid "$1")"
	wait_for "etcdctl_get /alive/$1 | grep -q pid" 15
}

fingerprint () {
	echo "$(stat -c '%i %.9Y %s' "$1") $(md5sum <"$1")"
}

test_expect_success 'setup: the namespace reaches etcd only through the veth pair' '
	ip netns exec "$NS" curl -s -m 2 "$NS_URL/version" | grep -q etcdserver &&
	! ip netns exec "$NS" curl -s -m 2 "$ETCD_URL/version" &&
	node_setup p1 && node_setup p2 &&
	# a silent stream is reopened after 5 s rather than 300
	sed -i "s/^  retry_max: 2$/  retry_max: 2\n  watch_idle: 5/" p1/orchestrate.yaml &&
	grep -q "watch_idle: 5" p1/orchestrate.yaml &&
	etcdctl_put /available_services/gone/x "{\"addresses\":{\"eth0\":\"10.66.0.1\"}}" &&
	etcdctl_put /current_version v1 &&
	start_ns_node p1 && start_node p2 &&
	wait_for "node_at p1 v1 && node_at p2 v1" 20 &&
	# the catalog settles after the runs end (p1 writes its hiera file once
	# the debounce is over): take the fingerprint after that
	wait_for "grep -q \"^healthy_services::svc-p1\" p1/services.yaml &&
		grep -q \"^healthy_services::svc-p2\" p1/services.yaml" 15 &&
	grep -q 10.66.0.1 p1/services.yaml &&
	orch get_failures
'

test_expect_success 'cut off: the daemon runs on, its hiera file untouched, unaccounted after the TTL' '
	before=$(fingerprint p1/services.yaml) &&
	echo "$before" >fp.before &&
	ip link set "$VH" down &&
	! ip netns exec "$NS" curl -s -m 1 "$NS_URL/version" &&
	orch trigger_update v2 &&
	etcdctl_put /available_services/new/x "{\"addresses\":{\"eth0\":\"10.66.0.2\"}}" &&
	etcdctl_del /available_services/gone/x &&
	wait_for "node_at p2 v2" 15 &&
	wait_for "test -z \"\$(etcdctl_get /alive/p1)\"" 15 &&
	test_expect_code 1 orch get_failures >gf &&
	cat gf &&
	grep -i "unaccounted" gf | grep -q 1 &&
	{ orch get_failures --hosts >gfh || :; } &&
	cat gfh &&
	grep -qw p1 gfh &&
	kill -0 $(node_pid p1) &&
	test "$(fingerprint p1/services.yaml)" = "$before" &&
	test "$(cat p1/current_version)" = v1
'

test_expect_success 'the gap is compacted away while it is cut off' '
	etcdctl_put /filler a && etcdctl_put /filler b &&
	rev=$(etcdctl_ get /filler -w json | sed -n "s/.*\"revision\":\([0-9]*\).*/\1/p") &&
	etcdctl_ compact "$rev" >/dev/null &&
	sleep 1 &&
	kill -0 $(node_pid p1) &&
	test "$(fingerprint p1/services.yaml)" = "$(cat fp.before)"
'

test_expect_success 'reconnected: registers again, resyncs (the deletion too) and converges' '
	ip link set "$VH" up &&
	wait_for "etcdctl_get /alive/p1 | grep -q pid" 30 &&
	wait_for "node_at p1 v2" 30 &&
	wait_for "grep -q 10.66.0.2 p1/services.yaml" 10 &&
	! grep -q 10.66.0.1 p1/services.yaml &&
	orch get_failures &&
	orch verify_hosts v2 p1 p2 &&
	kill -0 $(node_pid p1)
'

stop_all_nodes
test_done
