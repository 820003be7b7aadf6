#!/bin/bash
#
# Errors: every bad-input class exits 64 with one line on stderr naming the
# value, before any request; a bad config file names file:line:key; and replies
# that a real etcd never sends (cut off, wrong types, huge, an HTML error page)
# from a tiny fake HTTP server end in a clean one-line error, never a crash.

test_description='usage errors, bad config files, malformed replies'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

long=$(printf "%0254d" 7)

# --- arity ----------------------------------------------------------------------

# The usage errors below must write nothing: one dump of etcd before them all,
# compared with one after them all (cheaper than a dump around each).
etcdctl_dump >dump.before

while IFS= read -r cmdline; do
	test -n "$cmdline" || continue
	test_expect_success "arity: '$cmdline' exits 64 with one line" "
		test_expect_code 64 orch --hostname h1 $cmdline >out 2>err &&
		test_one_line err
	"
done <<'EOF'
trigger_update
trigger_update v1 v2
rollback extra
current_version extra
local_version v1 v2
pending_update extra
ping extra
update_own_status
update_own_status puppet
update_own_status puppet 0 extra
update_own_info extra
running_versions extra
hosts_at_version
hosts_at_version v1 v2
verify_hosts
check_single_version
check_single_version v1 v2
get_failures extra
local_health extra
unpublish_service
get_services extra
cache_services extra
wait_for_service
wait_for_service s1 s2
provision
provision h1 h2
decommission
decommission h1 h2
pause extra
resume extra
trigger_update v1 --if-current
EOF

# --- invalid names, per command ---------------------------------------------------

# Each line: a command line whose single invalid name is the marker BAD, replaced
# by every invalid name in turn.
names_cmds='trigger_update BAD
trigger_update v1 --if-current BAD
local_version BAD
update_own_info --version BAD
hosts_at_version BAD
verify_hosts BAD h1
verify_hosts v1 h1 BAD
check_single_version BAD
publish_service BAD --address eth0=10.0.0.1
unpublish_service BAD
wait_for_service BAD --timeout 1
provision BAD
decommission BAD
pause --group BAD
pause --host BAD
resume --group BAD
resume --host BAD'

for bad in '../x' 'a b' 'a/b' '..' "$long" '' '.hidden' '_v1'; do
	show=$(printf '%s' "$bad" | head -c 12)
	while IFS= read -r cmdline; do
		pre=${cmdline%%BAD*} post=${cmdline#*BAD}
		test_expect_success "invalid name '$show': $cmdline exits 64" '
			test_expect_code 64 orch --hostname h1 $pre "$bad" $post >out 2>err &&
			test_one_line err &&
			{ test -z "$bad" || grep -F -e "$bad" err; }
		'
	done <<-EOF
	$names_cmds
	EOF
done

test_expect_success 'none of the usage errors above wrote anything' '
	etcdctl_dump >dump.after &&
	test_cmp dump.before dump.after
'

test_expect_success 'invalid names are refused before any request (etcd down: 64, not 69)' '
	dead=$(dead_url) &&
	while IFS= read -r cmdline; do
		pre=${cmdline%%BAD*} post=${cmdline#*BAD}
		orch --etcd "$dead" --hostname h1 $pre "../x" $post 2>err && rc=0 || rc=$?
		test $rc = 64 || { echo "$cmdline: exit $rc"; cat err; exit 1; }
	done <<-EOF
	$names_cmds
	EOF
'

# A name that starts like an option would be one to a hook or script that
# passes it as an argument ($ORCHESTRATE_VERSION, a host in a loop).
test_expect_success 'a name starting with "-" is refused (64), the rule named' '
	dead=$(dead_url) &&
	test_expect_code 64 orch --etcd "$dead" trigger_update -- -v1 2>err &&
	test_one_line err &&
	grep -Fx "orchestrate: invalid version '"'"'-v1'"'"': does not start with a letter or a digit" err &&
	test_expect_code 64 orch --etcd "$dead" --hostname=-rf update_own_status puppet 0 2>err &&
	grep -F "invalid hostname '"'"'-rf'"'"': does not start with a letter or a digit" err &&
	test_expect_code 64 orch --etcd "$dead" pause --group=--all 2>err &&
	grep -F "invalid group '"'"'--all'"'"'" err &&
	test_expect_code 64 orch --etcd "$dead" wait_for_service --timeout 1 -- -svc 2>err &&
	grep -F "'"'"'-svc'"'"': does not start with a letter or a digit" err
'

test_expect_success 'an invalid stdin host for verify_hosts is refused (64)' '
	printf "h1\nbad host\n" | test_expect_code 64 orch verify_hosts v1 2>err &&
	test_one_line err &&
	grep -F "bad host" err
'

for bad in '../x' 'a b' 'a/b' "$long"; do
	show=$(printf '%s' "$bad" | head -c 12)
	test_expect_success "invalid --hostname '$show' exits 64 and writes nothing" '
		etcdctl_dump >before &&
		test_expect_code 64 orch --hostname "$bad" update_own_status puppet 0 2>err &&
		test_one_line err &&
		test_expect_code 64 orch --hostname "$bad" update_own_info --version v1 2>err &&
		test_expect_code 64 orch --hostname "$bad" publish_service s1 --address eth0=10.0.0.1 2>err &&
		test_expect_code 64 orch --hostname "$bad" local_health 2>err &&
		etcdctl_dump >after &&
		test_cmp before after
	'
done

test_expect_success 'a host name from the config file is validated too' '
	printf "node:\n  hostname: \"../current_version\"\n" >conf.yaml &&
	etcdctl_dump >before &&
	test_expect_code 64 orchestrate --config conf.yaml update_own_status puppet 0 2>err &&
	test_one_line err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'an invalid prefix is refused (64)' '
	etcdctl_dump >before &&
	test_expect_code 64 orch --prefix "/a b" trigger_update v1 2>err &&
	test_one_line err &&
	test_expect_code 64 orch --prefix "/../x" trigger_update v1 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

# --- bad values -------------------------------------------------------------------

for addr in 'eth0' 'eth0=' '=10.0.0.1' 'eth0=999.0.0.1' 'eth0=10.0.0' 'eth0=not-an-ip' \
	'eth0=10.0.0.1 ' 'eth0=10.0.0.1
- evil' 'a/b=10.0.0.1'; do
	show=$(printf '%s' "$addr" | tr '\n' '|')
	test_expect_success "publish_service --address '$show' exits 64" '
		etcdctl_dump >before &&
		test_expect_code 64 orch --hostname h1 publish_service s1 --address "$addr" 2>err &&
		test_one_line err &&
		etcdctl_dump >after &&
		test_cmp before after
	'
done

while IFS= read -r cmdline; do
	test_expect_success "bad value: '$cmdline' exits 64 naming it" "
		etcdctl_dump >before &&
		test_expect_code 64 orch --hostname h1 $cmdline >out 2>err &&
		test_one_line err &&
		grep -e soon err &&
		etcdctl_dump >after &&
		test_cmp before after
	"
done <<'EOF'
update_own_status puppet soon
update_own_status validation soon
update_own_status soon 0
update_own_info --version v1 --interval soon
publish_service s1 --address eth0=10.0.0.1 --ttl soon
wait_for_service s1 --count soon
wait_for_service s1 --timeout soon
verify_hosts v1 h1 --wait soon
check_single_version v1 --wait soon
--timeout soon current_version
--port soon current_version
EOF

test_expect_success 'update_own_status validation pending is refused (not a validation state)' '
	test_expect_code 64 orch --hostname h1 update_own_status validation pending 2>err &&
	test_one_line err
'

test_expect_success 'update_own_status with an empty result is refused' '
	test_expect_code 64 orch --hostname h1 update_own_status puppet "" 2>err &&
	test_one_line err
'

test_expect_success 'a negative --interval or --count is refused' '
	test_expect_code 64 orch --hostname h1 update_own_info --version v1 --interval -5 2>err &&
	test_expect_code 64 orch wait_for_service s1 --count -2 2>err
'

test_expect_success '--user without a password is refused (64)' '
	test_expect_code 64 orch --user alice current_version 2>err &&
	test_one_line err
'

# --- config files ------------------------------------------------------------------

test_expect_success 'an unknown config key: 64 naming file, line and key' '
	printf "etcd:\n  timeout: 3\n  endpointz: [http://127.0.0.1:1]\n" >bad.yaml &&
	test_expect_code 64 orchestrate --config bad.yaml current_version >out 2>err &&
	test_one_line err &&
	grep -F "bad.yaml" err &&
	grep -F ":3" err &&
	grep -F "endpointz" err
'

test_expect_success 'an unknown top-level section: 64 naming it' '
	printf "etcd:\n  timeout: 3\nbogus:\n  x: 1\n" >bad.yaml &&
	test_expect_code 64 orchestrate --config bad.yaml current_version 2>err &&
	grep -F "bad.yaml:3" err &&
	grep -F "bogus" err
'

test_expect_success 'a value of the wrong type: 64 naming file, line and key' '
	printf "node:\n  hostname: h1\ntiming:\n  splay: soon\n" >bad.yaml &&
	test_expect_code 64 orchestrate --config bad.yaml current_version 2>err &&
	test_one_line err &&
	grep -F "bad.yaml:4" err &&
	grep -F "splay" err
'

test_expect_success 'a file that does not parse: 64 naming the file' '
	printf "etcd:\n  endpoints: [http://127.0.0.1:1\n" >bad.yaml &&
	test_expect_code 64 orchestrate --config bad.yaml current_version 2>err &&
	test_one_line err &&
	grep -F "bad.yaml" err
'

test_expect_success 'a config file that is not a mapping: 64' '
	printf -- "- a\n- b\n" >bad.yaml &&
	test_expect_code 64 orchestrate --config bad.yaml current_version 2>err &&
	grep -F "bad.yaml" err
'

test_expect_success 'a YAML bomb (billion laughs) is refused quickly, no crash' '
	cat >bomb.yaml <<-\EOF2 &&
	a: &a ["x","x","x","x","x","x","x","x","x"]
	b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
	c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
	d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
	e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
	f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
	g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
	EOF2
	start=$(now_ms) &&
	test_must_fail orchestrate --config bomb.yaml current_version 2>err &&
	end=$(now_ms) &&
	test $((end - start)) -lt 5000
'

test_expect_success 'an explicit --config that does not exist is an error' '
	test_must_fail orchestrate --config does-not-exist.yaml current_version 2>err &&
	grep -F "does-not-exist.yaml" err
'

test_expect_success 'a bad config file stops writes too (nothing written)' '
	printf "etcd:\n  endpointz: x\n" >bad.yaml &&
	etcdctl_dump >before &&
	test_expect_code 64 orchestrate --config bad.yaml trigger_update v1 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

# --- malformed replies ---------------------------------------------------------------

# A fake etcd: answers every request with the reply MODE names.  It binds port
# 0 and writes the port it got to a file, so there is no race for the port.
cat >fake-etcd.py <<'PY'
import http.server, os, socketserver, sys, time

mode = sys.argv[1]
portfile = sys.argv[2]
KEY = b'"L2N1cnJlbnRfdmVyc2lvbg=="'   # /current_version

def body():
    if mode == "truncated":
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":[{"key":"L2N1cnJl'
    if mode == "kvs-string":
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":"x","count":"1"}'
    if mode == "kvs-objects-wrong":
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":[{"key":5,"value":[1]}],"count":"1"}'
    if mode == "not-base64":
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":[{"key":"!!!","value":"***"}],"count":"1"}'
    if mode == "implausible":
        # value "../x"
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":[{"key":' + KEY + b',"value":"Li4veA=="}],"count":"1"}'
    if mode == "huge":
        return 200, "application/json", b'{"header":{"revision":"5"},"kvs":[{"key":' + KEY + b',"value":"' + b"QUFB" * (10 * 1024 * 1024 // 4) + b'"}],"count":"1"}'
    if mode == "garbage":
        return 200, "application/json", b"\x00\xff" * (5 * 1024 * 1024)
    if mode == "html502":
        return 502, "text/html", b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>\n"
    if mode == "empty-body":
        return 200, "application/json", b""
    if mode == "json-array":
        return 200, "application/json", b"[1,2,3]"
    if mode == "grpc-error":
        return 503, "application/json", b'{"error":"etcdserver: request timed out","code":14,"message":"etcdserver: request timed out"}'
    if mode == "empty-range":
        return 200, "application/json", b'{"header":{"cluster_id":"1","member_id":"2","revision":"5","raft_term":"2"}}'
    raise SystemExit("unknown mode " + mode)

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if mode == "hang":
            time.sleep(30)
            return
        code, ctype, data = body()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            pass
    do_GET = do_POST = do_PUT = handle_any

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

srv = Server(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
PY

# start_fake MODE: starts the fake server, sets FAKE_URL.
start_fake () {
	rm -f fake.port
	python3 fake-etcd.py "$1" fake.port >fake.log 2>&1 &
	FAKE_PID=$!
	test_register_pid $FAKE_PID
	wait_for "test -s fake.port" 10 || return 1
	FAKE_URL="http://127.0.0.1:$(cat fake.port)"
}

stop_fake () {
	kill $FAKE_PID 2>/dev/null || :
	wait $FAKE_PID 2>/dev/null || :
	return 0
}

read_cmds='current_version
running_versions
hosts_at_version v1
verify_hosts v1 h1
get_services
get_failures
status
pending_update
trigger_update v2 --if-current v1
rollback'

for mode in truncated kvs-string kvs-objects-wrong not-base64 implausible huge garbage \
	html502 empty-body json-array grpc-error hang; do
	start_fake "$mode" || { echo "Bail out! fake server did not start"; exit 1; }
	cmds=$read_cmds
	# a server that never answers costs a timeout per command: try fewer
	test "$mode" = hang && cmds=$(printf 'current_version\npending_update\ntrigger_update v2 --if-current v1')
	while IFS= read -r cmdline; do
		# Where 0 and 1 are answers ("none set", "not at VERSION", "some
		# failed", "did not match"), an error must not pose as one: >= 2.
		case "$mode:$cmdline" in
		*:pending_update) min=2 max=2 ;;
		# A well-formed reply whose only key is /current_version with
		# an implausible (or 10 MB) value: for the list commands that
		# key is outside the range and is skipped, an empty answer.
		# A txn reply without "succeeded" is etcd's way of saying false.
		implausible:trigger_update*|huge:trigger_update*) min=1 max=127 ;;
		implausible:current_version|huge:current_version) min=2 max=127 ;;
		implausible:rollback|huge:rollback) min=2 max=127 ;;
		implausible:*|huge:*) min=0 max=127 ;;
		*:current_version|*:verify_hosts*|*:get_failures|*:trigger_update*|*:rollback) min=2 max=127 ;;
		*) min=1 max=127 ;;
		esac
		# pending_update prints its one line on stdout, errors or not
		case "$cmdline" in
		pending_update) msg=out ;;
		*) msg=err ;;
		esac
		test "$min" -eq 0 && msg=""
		test_expect_success "malformed reply '$mode': $cmdline fails cleanly (exit $min..$max)" '
			orch local_version v1 &&
			start=$(now_ms) &&
			orch --hostname h1 --timeout 2 --etcd "$FAKE_URL" $cmdline >out 2>err && rc=0 || rc=$?
			end=$(now_ms)
			echo "exit $rc in $((end - start)) ms" &&
			cat err &&
			test $rc -ge $min &&
			test $rc -le $max &&
			{ test -z "$msg" || test_one_line $msg; } &&
			test $((end - start)) -lt 15000 &&
			! grep -F "../x" out
		'
	done <<-EOF
	$cmds
	EOF
	stop_fake
done

test_expect_success 'a well-formed empty range (no kvs field) is "none", not an error' '
	start_fake empty-range &&
	test_expect_code 1 orch --etcd "$FAKE_URL" current_version >out &&
	test_must_be_empty out &&
	orch --etcd "$FAKE_URL" running_versions >out &&
	test_must_be_empty out &&
	orch --etcd "$FAKE_URL" hosts_at_version v1 >out &&
	test_must_be_empty out &&
	stop_fake
'

test_expect_success 'cache_services keeps the old file on a malformed reply' '
	printf -- "---\nservices::x::eth0:\n- 10.0.0.1\n" >services.yaml &&
	cp services.yaml saved &&
	for mode in truncated kvs-string html502 garbage; do
		start_fake $mode &&
		orch --timeout 2 --etcd "$FAKE_URL" cache_services --output services.yaml 2>err && rc=0 || rc=$?
		stop_fake
		test $rc -ne 0 && test $rc -lt 128 || { echo "$mode: exit $rc"; exit 1; }
		test_cmp saved services.yaml || exit 1
	done
'

test_expect_success 'sanity: the real etcd still answers' '
	orch trigger_update v1 &&
	echo v1 >expect &&
	orch current_version >actual &&
	test_cmp expect actual
'

test_done
