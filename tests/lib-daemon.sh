# lib-daemon.sh — helpers for the daemon tests (t05NN-daemon-*.sh), sourced
# after test-lib.sh.
#
# Each node NAME lives in $TRASH/NAME: its config (orchestrate.yaml), local
# version file, hiera file, profile list, a log of the daemon's output and stub
# hooks.  The hooks are steered by files in the node's directory, so a test
# flips a node's behaviour by writing a file:
#
#   config.exit     exit code of the config hook (default 0)
#   config.sleep    seconds the config hook sleeps (default 0)
#   validate.exit   exit code of the validate hook (default 0)
#   services.exit   exit code of the services hook (default 0)
#
# and they leave traces: NAME/config.count, NAME/validate.count,
# NAME/services.count (one line per run), NAME/hook.env (the environment of the
# last config run), and one line per run in $TRASH/runs.log:
#   "config-start NAME VERSION MS" / "config-end NAME VERSION MS".

# node_setup NAME [EXTRA-YAML]  — writes the node's config and hooks.  EXTRA-YAML
# is appended at the top level (for node.depends, more timing keys…).
node_setup () {
	nd_="$TRASH/$1"
	mkdir -p "$nd_/hooks" "$nd_/state"
	for h_ in config validate services; do
		cat >"$nd_/hooks/$h_" <<EOF
#!/bin/sh
d="$nd_"
echo "$h_ \$ORCHESTRATE_VERSION" >>"\$d/$h_.count"
if test "$h_" = config; then
	echo \$\$ >"\$d/config.pid"
	env | sort >"\$d/hook.env"
	echo "config-start $1 \$ORCHESTRATE_VERSION \$(( \$(date +%s%N) / 1000000 ))" >>"$TRASH/runs.log"
fi
echo "$h_ hook on $1 for \$ORCHESTRATE_VERSION"
if test -f "\$d/$h_.sleep"; then sleep "\$(cat "\$d/$h_.sleep")"; fi
if test "$h_" = config; then
	echo "profile-$1" >"\$d/profile_list.txt"
	echo "config-end $1 \$ORCHESTRATE_VERSION \$(( \$(date +%s%N) / 1000000 ))" >>"$TRASH/runs.log"
fi
rc=0
if test -f "\$d/$h_.exit"; then rc=\$(cat "\$d/$h_.exit"); fi
if test "\$rc" != 0; then echo "$h_ failed on purpose with \$rc"; fi
exit "\$rc"
EOF
		chmod +x "$nd_/hooks/$h_"
	done
	cat >"$nd_/orchestrate.yaml" <<EOF
etcd:
  timeout: 5
node:
  hostname: $1
  group: g1
  services: [svc-$1, common]
  profile_list: $nd_/profile_list.txt
  addresses: {eth0: 10.0.0.$(( $(printf '%s' "$1" | cksum | cut -d' ' -f1) % 250 + 1 ))}
paths:
  local_version: $nd_/current_version
  hiera_services: $nd_/services.yaml
  state_dir: $nd_/state
hooks:
  config: $nd_/hooks/config
  validate: $nd_/hooks/validate
  services: $nd_/hooks/services
  timeout: ${HOOK_TIMEOUT:-60}
timing:
  lease_ttl: ${LEASE_TTL:-10}
  once_ttl: 30
  splay: 0
  quiet: 0.2
  quiet_max: 1
  retry_min: 1
  retry_max: 2
${2:-}
EOF
}

# start_node NAME [ARGS…]  — starts orchestrated for NAME in the background and
# waits until it registered (alive/NAME exists).
start_node () {
	node_valgrind_=
	node_start_ 15 "$@"
}

# node_etcd_option NAME KEY VALUE  — sets etcd.KEY to VALUE in the config that
# node_setup wrote for NAME.
node_etcd_option () {
	sed -i "s/^  timeout: 5\$/  timeout: 5\n  $2: $3/" "$TRASH/$1/orchestrate.yaml" &&
	grep -qx "  $2: $3" "$TRASH/$1/orchestrate.yaml"
}

# test_have_jwt_keys TTL  — (at the top level) makes an RSA key pair in the
# trash and sets JWT_ETCD_ARGS to the arguments of an etcd that issues JSON
# Web Tokens living TTL seconds (to put in ETCD_EXTRA_ARGS before start_etcd);
# skips the script without openssl.
test_have_jwt_keys () {
	command -v openssl >/dev/null 2>&1 || skip_all "needs openssl for the JWT keys"
	openssl genrsa -out "$TRASH/jwt.key" 2048 2>/dev/null &&
	openssl rsa -in "$TRASH/jwt.key" -pubout -out "$TRASH/jwt.pub" 2>/dev/null ||
		skip_all "openssl could not make an RSA key"
	JWT_ETCD_ARGS="--auth-token jwt,pub-key=$TRASH/jwt.pub,priv-key=$TRASH/jwt.key,sign-method=RS256,ttl=${1}s"
}

# test_have_valgrind  — (at the top level) skips the script without valgrind,
# or when orchestrated is built with AddressSanitizer (the sanitizer run of
# CI), which valgrind cannot host.
test_have_valgrind () {
	command -v valgrind >/dev/null 2>&1 || skip_all "valgrind is not installed"
	grep -qa __asan_init "$REPO_ROOT/bin/orchestrated" &&
		skip_all "orchestrated is built with AddressSanitizer; valgrind cannot run it"
	return 0
}

# start_node_valgrind NAME [ARGS…]  — like start_node, with the daemon under
# valgrind's memcheck (its report in NAME/valgrind.log; exit 99 on an error
# or a definite or indirect leak).  Hooks are fork+execve children, not
# followed.  valgrind makes the daemon 20-50 times slower: the wait for its
# registration is longer.
start_node_valgrind () {
	node_valgrind_=1
	node_start_ 40 "$@" || {
		cat "$TRASH/$1/valgrind.log" >&2
		return 1
	}
}

# stop_node_valgrind NAME  — stops NAME's daemon (SIGTERM): it exits 0 and
# memcheck found no error (a definite or indirect leak is one).
stop_node_valgrind () {
	stop_node "$1" &&
	test "$(node_exit "$1")" = 0 &&
	grep -q "ERROR SUMMARY: 0 errors" "$TRASH/$1/valgrind.log" || {
		cat "$TRASH/$1/valgrind.log" >&4
		return 1
	}
}

# node_start_ SECONDS NAME [ARGS…]  — runs the daemon for NAME (under valgrind
# when node_valgrind_ is set) in the background, and waits SECONDS at most
# until it registered.  POSIX sh: the command is built in "$@".
node_start_ () {
	wait_=$1
	n_=$2
	shift 2
	set -- --config "$TRASH/$n_/orchestrate.yaml" --etcd "$ETCD_URL" \
		--local-version-file "$TRASH/$n_/current_version" -v "$@"
	if test -n "$node_valgrind_"; then
		set -- valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect \
			--error-exitcode=99 --track-fds=no --trace-children=no \
			--log-file="$TRASH/$n_/valgrind.log" "$REPO_ROOT/bin/orchestrated" "$@"
	else
		set -- orchestrated "$@"
	fi
	rm -f "$TRASH/$n_/exit" "$TRASH/$n_/pid"
	(
		"$@" >>"$TRASH/$n_/log" 2>&1 &
		echo $! >"$TRASH/$n_/pid"
		# the test body runs under set -e: a daemon killed by a signal
		# must still leave its status
		rc_=0
		wait $! || rc_=$?
		echo $rc_ >"$TRASH/$n_/exit"
	) &
	# at exit the shell that waits goes first, so that it does not
	# write the status of the daemon killed after it into a trash
	# being removed
	test_register_pid $!
	wait_for "test -s '$TRASH/$n_/pid'" 5 || return 1
	test_register_pid "$(node_pid "$n_")"
	wait_for "etcdctl_get /alive/$n_ | grep -q pid" "$wait_" || {
		cat "$TRASH/$n_/log" >&2
		return 1
	}
}

node_pid () {
	cat "$TRASH/$1/pid"
}

# stop_node NAME [SIGNAL]  — signals it (default TERM) and waits (bounded) until
# it exited; its exit status is then in NAME/exit.
stop_node () {
	kill -"${2:-TERM}" "$(node_pid "$1")" 2>/dev/null
	wait_for "test -s '$TRASH/$1/exit'" 30
}

# node_exit NAME  — the exit status of the node's daemon.
node_exit () {
	cat "$TRASH/$1/exit"
}

# node_at NAME VERSION  — the node's local version file and running_version say VERSION.
node_at () {
	test "$(cat "$TRASH/$1/current_version" 2>/dev/null)" = "$2" &&
		running_at "$1" "$2"
}

# status_is NAME TYPE STATE  — status/TYPE/STATE/NAME exists.
status_is () {
	etcdctl_get "/status/$2/$3/$1" | grep -q time
}

count_lines () {
	if test -f "$1"; then wc -l <"$1" | tr -d ' '; else echo 0; fi
}

# no_overlap FILE  — the config-start/config-end lines of runs.log never overlap:
# every start follows the previous end.
no_overlap () {
	sort -n -k4 "$1" | awk '
		$1 == "config-start" { if (open) { print "overlap at " $0; bad = 1 } open = 1 }
		$1 == "config-end" { open = 0 }
		END { exit bad }'
}

# group_runs GROUP VERSION  — the config-start/-end lines in runs.log of the
# nodes listed in $TRASH/members.GROUP (a test that stages a rollout writes it).
group_runs () {
	for n_ in $(cat "$TRASH/members.$1"); do
		grep " $n_ $2 " "$TRASH/runs.log" || :	# set -e: a host with no run goes on
	done
}

# first_start / last_end  — the first config-start, the last config-end time
# (ms) of the runs.log lines on stdin.
first_start () { awk '$1 == "config-start" { print $4 }' | sort -n | head -n 1; }
last_end () { awk '$1 == "config-end" { print $4 }' | sort -n | tail -n 1; }

# holder_order  — the hosts in the rollout's slot queue, first first, one a line.
holder_order () {
	etcdctl_ get --prefix --keys-only --sort-by=CREATE --order=ASCEND /rollout/holders/ |
		sed -e '/^$/d' -e 's|.*/||'
}

# stop_all_nodes  — stops every daemon still running (call before test_done, so
# that none writes into the trash directory while it is removed).
stop_all_nodes () {
	for pf_ in "$TRASH"/*/pid; do
		test -f "$pf_" || continue
		d_=$(dirname "$pf_")
		test -s "$d_/exit" && continue
		kill "$(cat "$pf_")" 2>/dev/null
	done
	for pf_ in "$TRASH"/*/pid; do
		test -f "$pf_" || continue
		d_=$(dirname "$pf_")
		wait_for "test -s '$d_/exit' || ! kill -0 $(cat "$pf_")" 30 >/dev/null 2>&1
	done
}

# key_version KEY  — how many times KEY was written since it was created, from
# etcd's own counter (0: absent).
key_version () {
	etcdctl_ get -w json "$1" | python3 -c '
import json, sys
kvs = json.load(sys.stdin).get("kvs") or []
print(kvs[0].get("version", 0) if kvs else 0)'
}

# start_runner NAME  — a hook runner for node NAME, reading NAME's config
# (where it finds the hooks' paths), listening on NAME/hook.sock (--listen);
# its pid in NAME/runner.pid, its log in NAME/runner.log.
start_runner () {
	rm -f "$TRASH/$1/hook.sock"
	orchestrate-hook-runner --config "$TRASH/$1/orchestrate.yaml" \
		--listen "$TRASH/$1/hook.sock" >>"$TRASH/$1/runner.log" 2>&1 &
	echo $! >"$TRASH/$1/runner.pid"
	test_register_pid $!
	wait_for "test -S '$TRASH/$1/hook.sock'" 5
}

# start_slow_proxy  — starts tools/slow-proxy in front of the test's etcd, its
# files in $TRASH (delay, lose, drop, refuse, busy, hold: what it does while
# each exists; proxy.log: what it passed), and sets PROXY_URL; skips the test
# without it.
start_slow_proxy () {
	command -v python3 >/dev/null 2>&1 || skip_all "needs python3 for the slow proxy"
	"$TEST_DIRECTORY/tools/slow-proxy" "$ETCD_PORT" "$TRASH/proxy.port" "$TRASH/delay" \
		"$TRASH/proxy.log" "$TRASH/lose" "$TRASH/drop" "$TRASH/refuse" "$TRASH/busy" \
		"$TRASH/hold" 2>"$TRASH/proxy.err" &
	test_register_pid $!
	wait_for "test -s '$TRASH/proxy.port'" 10 || skip_all "the slow proxy did not start"
	PROXY_URL="http://127.0.0.1:$(cat "$TRASH/proxy.port")"
}

# proxy_count T PATTERN  — how many lines of the slow proxy's log after time
# T (seconds since the epoch, as date +%s.%N prints it; 0: all) match
# PATTERN (grep).
proxy_count () {
	awk -v t="$1" '$1 > t' "$TRASH/proxy.log" | grep -c -- "$2" || :
}

# start_node_through_proxy NODE TTL  — NODE, with a lease of TTL seconds, at
# v1 through the slow proxy (start_slow_proxy first); its lease saved in
# lease.before, and back once its first renewal passed the proxy.
start_node_through_proxy () {
	LEASE_TTL=$2 node_setup "$1" &&
	etcdctl_put /current_version v1 &&
	( ETCD_URL=$PROXY_URL && start_node "$1" ) &&
	wait_for "node_at $1 v1" 20 &&
	etcdctl_lease_of "/alive/$1" >lease.before &&
	test -s lease.before &&
	wait_for "grep -q \" renewal\$\" '$TRASH/proxy.log'" $(($2 + 5))
}

# auth_enable USER PASSWORD  — (in a test body) users root (password rootpw)
# and USER, whose role rw may read and write every key; auth on.
auth_enable () {
	etcdctl_ user add root:rootpw >/dev/null &&
	etcdctl_ user grant-role root root >/dev/null &&
	etcdctl_ role add rw >/dev/null &&
	etcdctl_ role grant-permission rw --prefix=true readwrite / >/dev/null &&
	etcdctl_ user add "$1:$2" >/dev/null &&
	etcdctl_ user grant-role "$1" rw >/dev/null &&
	etcdctl_ auth enable >/dev/null
}

# auth_use USER PASSWORD  — (at the top level, after auth_enable) the test's
# etcdctl runs as root from now on; USER's password is in $TRASH/USER.pw
# (mode 600) and AUTH holds the flags that log a daemon or a command in as
# USER.
auth_use () {
	ETCDCTL_USER=root:rootpw
	export ETCDCTL_USER
	printf "%s\n" "$2" >"$TRASH/$1.pw"
	chmod 600 "$TRASH/$1.pw"
	AUTH="--user $1 --password-file $TRASH/$1.pw"
}

# auth_setup USER PASSWORD  — (at the top level) a test that sets
# current_version to v1 and turns auth on (auth_enable), then auth_use.
auth_setup () {
	test_expect_success "setup: users root and $1, auth on" "
		etcdctl_ put /current_version v1 >/dev/null &&
		auth_enable $1 $2
	"
	auth_use "$1" "$2"
}
