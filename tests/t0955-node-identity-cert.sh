#!/bin/bash
#
# Per-host identities with client certificates (README "Securing etcd").  etcd
# serves TLS with --client-cert-auth --trusted-ca-file.  node_identity without
# --password-file makes a user with no password, which etcd takes from a
# certificate's CN: over gRPC (etcdctl) host a's certificate (CN=a) may write
# a's keys and none of b's.  But with auth enabled etcd's JSON gateway, which
# orchestrate speaks, refuses every request over a certificate that has a CN
# (HTTP 400 "CommonName of client sending a request against gateway will be
# ignored", etcd's embed/serve.go): orchestrate says so in one line, exits 77
# and writes nothing.  What works through the gateway: a client certificate
# without a CN for the TLS handshake and the host's password for its identity
# (node_identity --password-file); as a, every write of b's keys (state,
# alive, running version, service entry, slot, group) is refused (77, one
# line naming the key class and the user, nothing written), a's own writes,
# publish_service web and a daemon run to convergence (etcd.cacert, cert, key,
# user, password_file in its config) work.  The checks are t0950's
# (lib-identity.sh).

test_description='node_identity: one etcd user and role per host, over TLS with client certificates'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
. "$TEST_DIRECTORY/lib-identity.sh"
test_have_orchestrate
test_have_orchestrated
command -v openssl >/dev/null 2>&1 || skip_all "openssl is not installed"

{
	make_ca ca &&
	make_cert server ca serverAuth,clientAuth &&
	make_cert root ca clientAuth &&
	make_cert a ca clientAuth &&
	make_cert b ca clientAuth &&
	make_cert_no_cn node ca clientAuth
} || skip_all "cannot make test certificates with openssl"
chmod 600 ./*.key

ETCD_SCHEME=https
ETCD_EXTRA_ARGS="--cert-file $TRASH/server.pem --key-file $TRASH/server.key --client-cert-auth --trusted-ca-file $TRASH/ca.pem"
# etcdctl_ (gRPC) is root by its certificate's CN
ETCDCTL_CACERT=$TRASH/ca.pem
ETCDCTL_CERT=$TRASH/root.pem
ETCDCTL_KEY=$TRASH/root.key
export ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY
start_etcd

printf "rootpw\n" >root.pw
printf "apw\n" >a.pw
printf "bpw\n" >b.pw
chmod 600 root.pw a.pw b.pw

# cert NAME: orchestrate's TLS options with NAME's certificate and key
cert () {
	echo "--cacert $TRASH/ca.pem --cert $TRASH/$1.pem --key $TRASH/$1.key"
}
# through the gateway once auth is on: the certificate without a CN, and a password
ROOT="$(cert node) --user root --password-file $TRASH/root.pw"
A="$(cert node) --user a --password-file $TRASH/a.pw"
B="$(cert node) --user b --password-file $TRASH/b.pw"

test_expect_success 'setup: root, certificate-only identities for a and b, auth on' '
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&
	orch $(cert root) node_identity a --services web --group g1 >out &&
	grep -x "node identity a: [0-9]* changes" out &&
	orch $(cert root) node_identity b --services web,svc-b --group g1 &&
	orch $(cert root) node_identity a --services web --group g1 --dry-run >grants &&
	grep -x "user a, role orchestrate-node-a, no password (client certificate)" grants &&
	etcdctl_ auth enable >/dev/null &&
	! etcdctl_ --user a:guess get /current_version >/dev/null 2>&1
'

# etcdctl speaks gRPC, where etcd takes the user from the certificate's CN
etcdctl_as_a () {
	ETCDCTL_CERT=$TRASH/a.pem ETCDCTL_KEY=$TRASH/a.key etcdctl_ "$@"
}

test_expect_success 'gRPC, certificate CN=a: a'"'"'s own keys are writable' '
	etcdctl_as_a put /running_version/a "{\"version\":\"v0\",\"time\":1}" >/dev/null &&
	etcdctl_as_a put /available_services/web/a "{}" >/dev/null &&
	etcdctl_as_a put /groups/g1/a "{}" >/dev/null &&
	etcdctl_as_a get /current_version >/dev/null &&
	etcdctl_as_a del /available_services/web/a >/dev/null &&
	etcdctl_as_a del /groups/g1/a >/dev/null &&
	running_at a v0
'

test_expect_success 'gRPC, certificate CN=a: b'"'"'s keys are refused by etcd, nothing written' '
	identity_etcdctl_refused
'

test_expect_success 'the gateway refuses a certificate with a CN once auth is on: 77, one line, nothing written' '
	etcdctl_dump >before &&
	test_expect_code 77 orch $(cert a) --hostname a update_own_status puppet 0 2>err &&
	test_one_line err &&
	grep -q "refuses a client certificate that has a Common Name" err &&
	test_expect_code 77 orch $(cert root) trigger_update v9 2>err &&
	test_one_line err &&
	test_expect_code 77 orch $(cert a) --user a --password-file "$TRASH/a.pw" current_version 2>err &&
	test_one_line err &&
	etcdctl_dump >after &&
	test_cmp before after
'

# etcd keeps a user made without a password password-less through a later
# changepw ("password was given for no password user"): node_identity sees
# that the login fails and makes the user again, with the password, same role.
test_expect_success 'setup: a and b move to passwords (node_identity --password-file), same grants' '
	etcdctl_ role get orchestrate-node-a >before &&
	orch $ROOT node_identity a --services web --group g1 --password-file "$TRASH/a.pw" >out &&
	cat out &&
	grep -x "node identity a: 2 changes" out &&
	orch $ROOT node_identity b --services web,svc-b --group g1 --password-file "$TRASH/b.pw" &&
	etcdctl_ role get orchestrate-node-a >after &&
	test_cmp before after &&
	orch $A hosts_at_version v0 | grep -x a
'

# for lib-identity.sh: a through the gateway
AS_A=$A
A_IS="as user .a."

test_expect_success 'setup: b has keys of its own (as b)' '
	orch $B --hostname b update_own_status puppet 0 &&
	orch $B --hostname b update_own_info --version v0 --interval 600 &&
	orch $B --hostname b publish_service web --address eth0=10.0.0.2 &&
	status_is b puppet success &&
	running_at b v0 &&
	etcdctl_exists /available_services/web/b
'

test_expect_success 'as a: writing b'"'"'s state is refused (77), nothing written' '
	identity_refused status/puppet --hostname b update_own_status puppet 1 &&
	identity_refused status/validation --hostname b update_own_status validation 0 &&
	identity_refused status/provisioned provision b
'

test_expect_success 'as a: b'"'"'s running version is refused' '
	identity_refused running_version --hostname b update_own_info --version v9 &&
	running_at b v0
'

test_expect_success 'as a: b'"'"'s service entry is refused' '
	identity_refused - --hostname b publish_service web --address eth0=10.6.6.6 &&
	identity_refused available_services --hostname b unpublish_service web &&
	etcdctl_get /available_services/web/b | grep -q 10.0.0.2
'

test_expect_success 'as a: b'"'"'s alive, slot and group keys are refused by etcd' '
	identity_etcdctl_refused
'

test_expect_success 'as a: its own writes work, publish_service web included' '
	orch $A --hostname a update_own_status puppet 0 &&
	status_is a puppet success &&
	orch $A --hostname a update_own_info --version v0 --interval 600 &&
	running_at a v0 &&
	orch $A --hostname a publish_service web --address eth0=10.0.0.1 &&
	etcdctl_get /available_services/web/a | grep -q 10.0.0.1 &&
	orch $A --hostname a unpublish_service web &&
	! etcdctl_exists /available_services/web/a &&
	identity_refused available_services --hostname a publish_service other --address eth0=10.0.0.1
'

test_expect_success 'as a: etcd.cacert, cert, key, user, password_file from a config file' '
	cat >a.yaml <<-EOF &&
	etcd:
	  cacert: $TRASH/ca.pem
	  cert: $TRASH/node.pem
	  key: $TRASH/node.key
	  user: a
	  password_file: $TRASH/a.pw
	node:
	  hostname: a
	paths:
	  local_version: $TRASH/current_version
	  state_dir: $TRASH/state
	EOF
	orchestrate --config a.yaml update_own_status puppet 0 &&
	status_is a puppet success &&
	etcdctl_dump >before &&
	test_expect_code 77 orchestrate --config a.yaml --hostname b update_own_status puppet 1 2>err &&
	test_one_line err &&
	grep -q "permission denied writing status/puppet as user .a." err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'as a: reads work (current_version, hosts_at_version)' '
	orch $ROOT trigger_update v1 &&
	test "$(orch $A current_version)" = v1 &&
	orch $A hosts_at_version v0 >out &&
	grep -x b out
'

# The daemon as a: the certificate without a CN and a's password in its config, as
# the Puppet module writes it; it publishes web (its profile list says web).
test_expect_success 'a daemon running as a (etcd.cert, user… in its config) converges and publishes web' '
	node_setup a &&
	sed -i -e "s|^etcd:\$|etcd:\n  cacert: $TRASH/ca.pem\n  cert: $TRASH/node.pem\n  key: $TRASH/node.key\n  user: a\n  password_file: $TRASH/a.pw|" \
		-e "s|^  services: \\[.*|  services: [web]|" a/orchestrate.yaml &&
	sed -i -e "s|\"profile-a\"|\"web\"|" a/hooks/config &&
	grep -q "cert: $TRASH/node.pem" a/orchestrate.yaml &&
	start_node a &&
	wait_for "node_at a v1" 20 &&
	status_is a validation success &&
	etcdctl_get /available_services/web/a | grep -q "\"healthy\":true" &&
	etcdctl_exists /groups/g1/a &&
	! grep -qi "permission denied" a/log
'

test_expect_success 'the daemon follows a new trigger under a rollout policy' '
	etcdctl_put /rollout/policy "{\"max_parallel\":1}" &&
	orch $ROOT trigger_update v2 &&
	wait_for "node_at a v2" 20 &&
	test -z "$(etcdctl_keys /rollout/holders/)" &&
	! grep -qi "permission denied" a/log
'

test_expect_success 'a daemon with --cacert/--cert/--key as a, after a restart' '
	stop_node a &&
	node_setup a &&
	sed -i -e "s|^  services: \\[.*|  services: [web]|" a/orchestrate.yaml &&
	sed -i -e "s|\"profile-a\"|\"web\"|" a/hooks/config &&
	start_node a $A &&
	orch $ROOT trigger_update v3 &&
	wait_for "node_at a v3" 20 &&
	! grep -qi "permission denied" a/log
'

test_expect_success 'b'"'"'s keys are untouched by all of a'"'"'s runs' '
	running_at b v0 &&
	etcdctl_get /available_services/web/b | grep -q 10.0.0.2 &&
	status_is b puppet success
'

stop_all_nodes
test_done
