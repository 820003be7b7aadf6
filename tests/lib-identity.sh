# lib-identity.sh — helpers for the per-host identity tests (t0950 with
# passwords, t0955 with client certificates), sourced after test-lib.sh.
#
# The test sets, at its top level:
#   AS_A       orchestrate's options that make it host a (--user a … or --cert …)
#   A_IS       what a refusal names as the identity, a grep pattern
#              ("as user .a." or "as the client certificate's user")
# and defines etcdctl_as_a (etcdctl_ with a's credentials).

# identity_refused CLASS CMD…  — as a, CMD exits 77 with one line naming CLASS
# and a's identity, and nothing is written.  CLASS "-": any refusal
# (publish_service for b is refused already at reading b's validation state,
# before it writes).
# shellcheck disable=SC2086 # AS_A is words on purpose
identity_refused () {
	class_=$1
	shift
	etcdctl_dump >before.$$ &&
	{ test_expect_code 77 orch $AS_A "$@" 2>err || { cat err >&4; return 1; }; } &&
	test_one_line err &&
	if test "$class_" = -; then grep -q "permission denied" err
	else grep -q "permission denied writing $class_ $A_IS" err; fi &&
	etcdctl_dump >after.$$ &&
	test_cmp before.$$ after.$$ || { cat err >&4; return 1; }
}

# identity_etcdctl_refused  — with a's credentials, etcd itself refuses every
# write of b's keys (alive, slot, canary record, group, state,
# running version) and of the keys no node writes (the versions: an automatic
# revert needs them granted by hand), and deletes under them; nothing changes.
identity_etcdctl_refused () {
	etcdctl_dump >before.$$ &&
	for k in /alive/b /rollout/holders/b /groups/g1/b /status/puppet/success/b /running_version/b \
		 /rollout/canary/b /rollout/other \
		 /groups/g2/a /available_services/other/a /current_version /previous_version \
		 /rollout/policy; do
		! etcdctl_as_a put "$k" "{}" >/dev/null 2>err || { echo "put $k was allowed" >&4; return 1; }
		grep -qi "permission denied" err || { cat err >&4; return 1; }
	done &&
	! etcdctl_as_a del /alive/b >/dev/null 2>&1 &&
	! etcdctl_as_a del --prefix /status/ >/dev/null 2>&1 &&
	etcdctl_dump >after.$$ &&
	test_cmp before.$$ after.$$
}

# --- certificates (as t0180 makes them) ---------------------------------------------

# make_ca NAME  — a self-signed EC CA, NAME.pem and NAME.key.
make_ca () {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=$1" 2>/dev/null
}

# make_cert NAME CA USAGE  — an EC key and a certificate with CN=NAME for
# 127.0.0.1, signed by CA.
make_cert () {
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.csr" -subj "/CN=$1" 2>/dev/null &&
	printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=%s\n" "$3" >"$1.ext" &&
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
		-out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
}

# make_cert_no_cn NAME CA USAGE  — the same with no CN in the subject: with
# auth enabled, etcd's JSON gateway refuses a client certificate that has one.
make_cert_no_cn () {
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$1.key" -out "$1.csr" -subj "/O=orchestrate/OU=$1" 2>/dev/null &&
	printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=%s\n" "$3" >"$1.ext" &&
	openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
		-out "$1.pem" -days 2 -extfile "$1.ext" 2>/dev/null
}
