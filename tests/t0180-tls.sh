#!/bin/bash
#
# TLS: --cacert, --cert and --key (and their config keys) against an etcd that
# serves https and asks for client certificates; a server the CA does not vouch
# for, or a missing client certificate, is refused and nothing is written.

test_description='etcd over TLS with client certificates'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
command -v openssl >/dev/null 2>&1 || skip_all "openssl is not installed"

# make_cert NAME CA USAGE  — an EC key and a certificate for 127.0.0.1 signed by CA
make_cert () {
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null &&
	printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=%s\n" "$3" >"$1.ext" &&
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
		-out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
}

make_ca () {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=$1" 2>/dev/null
}

{
	make_ca ca &&
	make_ca otherca &&
	make_cert server ca serverAuth,clientAuth &&
	make_cert client ca clientAuth &&
	make_cert stranger otherca clientAuth
} || skip_all "cannot make test certificates with openssl"
chmod 600 ./*.key

ETCD_SCHEME=https
ETCD_EXTRA_ARGS="--cert-file $TRASH/server.pem --key-file $TRASH/server.key --client-cert-auth --trusted-ca-file $TRASH/ca.pem"
ETCDCTL_CACERT=$TRASH/ca.pem
ETCDCTL_CERT=$TRASH/client.pem
ETCDCTL_KEY=$TRASH/client.key
export ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY
start_etcd

TLS="--cacert $TRASH/ca.pem --cert $TRASH/client.pem --key $TRASH/client.key"

test_expect_success 'sanity: etcd serves https' '
	case "$ETCD_URL" in https://*) ;; *) exit 1 ;; esac &&
	etcdctl_put /current_version v1 &&
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success '--cacert --cert --key: reads work' '
	echo v1 >expect &&
	orch $TLS current_version >actual &&
	test_cmp expect actual
'

test_expect_success '--cacert --cert --key: writes work' '
	orch $TLS trigger_update v2 &&
	test "$(etcdctl_get /current_version)" = v2
'

test_expect_success 'etcd.cacert, etcd.cert, etcd.key from the config file' '
	cat >conf.yaml <<-EOF2 &&
	etcd:
	  cacert: $TRASH/ca.pem
	  cert: $TRASH/client.pem
	  key: $TRASH/client.key
	EOF2
	echo v2 >expect &&
	orchestrate --config conf.yaml current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a watch over TLS (verify_hosts --wait)' '
	( sleep 1; running_put h1 v2 ) &
	orch $TLS verify_hosts v2 h1 --wait 10 &&
	wait
'

test_expect_success 'a lease over TLS (update_own_info)' '
	orch $TLS --hostname h2 update_own_info --version v2 --interval 10 &&
	etcdctl_ttl_of /running_version/h2 >ttl &&
	read remaining granted <ttl &&
	test "$granted" = 30
'

test_expect_success 'a server certificate from another CA is refused, nothing written' '
	etcdctl_dump >before &&
	test_must_fail orch --cacert "$TRASH/otherca.pem" --cert "$TRASH/client.pem" --key "$TRASH/client.key" trigger_update v9 2>err &&
	test_one_line err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'no client certificate: refused, nothing written' '
	etcdctl_dump >before &&
	test_must_fail orch --cacert "$TRASH/ca.pem" trigger_update v9 2>err &&
	test_one_line err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'a client certificate from another CA: refused' '
	test_must_fail orch --cacert "$TRASH/ca.pem" --cert "$TRASH/stranger.pem" --key "$TRASH/stranger.key" current_version 2>err &&
	test_one_line err
'

test_expect_success 'a missing --cacert file is an error naming it' '
	test_must_fail orch --cacert "$TRASH/nope.pem" --cert "$TRASH/client.pem" --key "$TRASH/client.key" current_version 2>err &&
	grep -F nope.pem err
'

test_expect_success 'plain http to a TLS etcd fails cleanly' '
	test_must_fail orch --etcd "http://127.0.0.1:$ETCD_PORT" current_version 2>err &&
	test_one_line err
'

test_expect_success 'failover over TLS (dead first endpoint)' '
	echo v2 >expect &&
	orch $TLS --etcd "https://127.0.0.1:$(free_port),$ETCD_URL" current_version >actual &&
	test_cmp expect actual
'

# The daemon over https: registration, lease keepalives, watches and
# hook-driven runs all on the client certificate.
if test -x "$REPO_ROOT/bin/orchestrated"; then
	. "$TEST_DIRECTORY/lib-daemon.sh"
	node_setup tls1

	test_expect_success 'the daemon registers over TLS with a client certificate' '
		start_node tls1 $TLS &&
		etcdctl_get /alive/tls1 | grep -q pid
	'

	test_expect_success 'the daemon converges over TLS (watch, hooks, running_version)' '
		orch $TLS trigger_update v3 &&
		wait_for "node_at tls1 v3" 30 &&
		status_is tls1 puppet success &&
		status_is tls1 validation success
	'

	test_expect_success 'the daemon with a certificate from another CA never registers' '
		node_setup tls2 &&
		(orchestrated --config "$TRASH/tls2/orchestrate.yaml" --etcd "$ETCD_URL" \
			--cacert "$TRASH/ca.pem" --cert "$TRASH/stranger.pem" --key "$TRASH/stranger.key" \
			--local-version-file "$TRASH/tls2/current_version" >"$TRASH/tls2/log" 2>&1 &
		 echo $! >"$TRASH/tls2/pid") &&
		test_register_pid "$(cat "$TRASH/tls2/pid")" &&
		sleep 3 &&
		! etcdctl_get /alive/tls2 | grep -q pid &&
		kill "$(cat "$TRASH/tls2/pid")" &&
		cat "$TRASH/tls2/log" >&2 &&
		grep -qi "certificate\|ssl\|tls\|alert" "$TRASH/tls2/log"
	'

	stop_all_nodes
fi

test_done
