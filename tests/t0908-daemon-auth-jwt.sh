#!/bin/bash
#
# JSON Web Tokens (etcd --auth-token jwt).  Unlike a simple token, a JWT
# expires at the time it carries ("exp") however much it is used, so the
# keep's read (etcd.token_keep) keeps nothing: the daemon logs in again before
# that time instead, at a random moment between 2/3 and 5/6 of the token's
# life.  So a trigger after a quiet spell never meets an expired token (a
# fleet's logins at once), and a JWT, signed rather than remembered, outlives
# an etcd restart: nothing to log in again for.  But a JWT carries the
# revision of etcd's users and roles it was given at, so any change to them
# (a node_identity for a new host) makes etcd refuse every host's token at
# once: that login is spread over etcd.login_spread, as after a restart.
#
# etcd logs each token it refuses, the token with it; the username inside
# tells whose it was.  k1 keeps its token (token_keep 6 s, so that the old
# read keep would have read and met refusals within the quiet spell),
# spreads a fleet's logins over 4 s (etcd.login_spread), and
# reaches etcd through tools/slow-proxy, whose log shows its logins and
# reads; z0 keeps nothing (token_keep 0), the control.

test_description='orchestrated: a JWT is renewed before it expires, never refused'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
test_have_orchestrate
test_have_orchestrated
TTL=8
test_have_jwt_keys $TTL
ETCD_EXTRA_ARGS=$JWT_ETCD_ARGS
start_etcd
start_slow_proxy

auth_setup kk kkpw
KK_AUTH=$AUTH

# refused USER  — how many of USER's tokens etcd refused ("invalid auth
# token: TOKEN" in its log; the user is in the token's payload).
refused () {
	python3 - "$TRASH/etcd.etcd.log" "$1" <<-'EOF'
	import base64, json, re, sys
	n = 0
	for line in open(sys.argv[1], errors="replace"):
	    m = re.search(r"invalid auth token: [^.\s]+\.([^.\s]+)\.", line)
	    if not m:
	        continue
	    p = m.group(1)
	    claims = json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4)))
	    n += claims.get("username") == sys.argv[2]
	print(n)
	EOF
}

# node_keeping NAME SECONDS  — NAME's config with etcd.token_keep SECONDS.
node_keeping () {
	node_setup "$1" &&
	node_etcd_option "$1" token_keep "$2"
}

test_expect_success 'setup: user zz too; k1 (through the proxy, keep 6 s) and z0 (keep 0) at v1' '
	etcdctl_ user add zz:zzpw >/dev/null &&
	etcdctl_ user grant-role zz rw >/dev/null &&
	printf "zzpw\n" >"$TRASH/zz.pw" && chmod 600 "$TRASH/zz.pw" &&
	node_keeping k1 6 &&
	node_etcd_option k1 login_spread 4 &&
	( ETCD_URL=$PROXY_URL && start_node k1 $KK_AUTH ) &&
	node_keeping z0 0 &&
	start_node z0 --user zz --password-file "$TRASH/zz.pw" &&
	wait_for "node_at k1 v1" 20 &&
	wait_for "node_at z0 v1" 20
'

test_expect_success 'quiet for 2.5 token lives: k1 logs in again before each expiry, reads nothing' '
	quiet=$(now_ms) &&
	echo "$quiet" >quiet &&
	sleep $((TTL * 5 / 2)) &&
	awk -v t="$quiet" "\$1 * 1000 >= t" "$TRASH/proxy.log" >since &&
	logins=$(grep -c "/v3/auth/authenticate" since || :) &&
	reads=$(grep -c "/v3/kv/range" since || :) &&
	echo "k1 over $((TTL * 5 / 2)) s: $logins logins, $reads reads" &&
	test "$logins" -ge 2 && test "$logins" -le 5 &&
	test "$reads" = 0 &&
	test "$(refused kk)" = 0
'

test_expect_success 'a trigger after it: no token of k1 refused; z0 (keeping nothing) met a refusal' '
	etcdctl_put /current_version v2 &&
	wait_for "node_at k1 v2" 20 &&
	wait_for "node_at z0 v2" 20 &&
	echo "refused: kk $(refused kk), zz $(refused zz)" &&
	test "$(refused kk)" = 0 &&
	test "$(refused zz)" -ge 1
'

# Right after a renewal, so that the token outlives etcd's time down: one
# that expires meanwhile (its renewal failing against the stopped etcd) is
# refused after the restart, as any expired token is.
test_expect_success 'etcd restarted: k1 has nothing to log in again for, and is at v3 at once' '
	n=$(grep -c "/v3/auth/authenticate" "$TRASH/proxy.log") &&
	wait_for "test \$(grep -c /v3/auth/authenticate \"$TRASH/proxy.log\") -gt $n" $TTL &&
	sleep 0.5 &&
	restart_etcd &&
	etcdctl_put /current_version v3 &&
	wait_for "node_at k1 v3" 15 &&
	! grep "logging in again in" "$TRASH/k1/log" &&
	test "$(refused kk)" = 0
'

test_expect_success 'a user added: k1 says when it logs in again, runs v4 only then, logs in once' '
	etcdctl_ user add other:x >/dev/null &&
	changed=$(now_ms) &&
	etcdctl_put /current_version v4 &&
	wait_for "node_at k1 v4" 20 &&
	grep "users or roles changed" "$TRASH/k1/log" >said &&
	test_line_count = 1 said &&
	delay=$(sed -n "s/.*logging in again in \([0-9.]*\) s.*/\1/p" said |
		awk "{ printf \"%d\", \$1 * 1000 }") &&
	start=$(awk "\$1 == \"config-start\" && \$2 == \"k1\" && \$3 == \"v4\" { print \$4 }" \
		"$TRASH/runs.log") &&
	logins=$(awk -v t="$changed" "\$1 * 1000 >= t" "$TRASH/proxy.log" |
		grep -c "/v3/auth/authenticate" || :) &&
	echo "k1: logs in again after $delay ms, its run started $((start - changed)) ms after the change; $logins login(s)" &&
	test -n "$delay" && test "$delay" -le 4000 &&
	test "$start" -ge $((changed + delay - 100)) &&
	test "$logins" = 1
'

test_done
