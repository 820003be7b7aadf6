#!/usr/bin/env bash
#
# auth.sh — what per-host identities (node_identity, README "Securing etcd")
# cost etcd: its CPU per request with auth on and 1,000 users and roles,
# against the same workload with auth off on a fresh etcd.
#
# 1. etcd on loopback with auth: root, then HOSTS users host0000… each with
#    its role orchestrate-node-hostNNNN granting its own keys (created in one
#    Python process through the gateway's /v3/auth endpoints, not HOSTS
#    node_identity runs), and a handful made by `orchestrate node_identity`
#    for the real grant set; auth enabled.  etcd runs with --bcrypt-cost 4 so
#    that 1,000 password users and logins take seconds: bcrypt is paid at user
#    add and authenticate, never per request (a request carries a token).
# 2. PUTS puts, each of one host's own status key with its own token, from
#    CLIENTS concurrent keep-alive connections; etcd's CPU (utime+stime of
#    /proc/PID/stat) over the puts, per request.
# 3. The same puts with auth off on a fresh etcd, without tokens.
# It prints both, their ratio (the goal: within 1.3x) and etcd's CPU per
# node_identity run.  Loopback only, every wait bounded, etcd killed on exit.
#
# Usage: bench/auth.sh    (from anywhere; needs python3, etcd, bin/orchestrate)
# Environment: HOSTS (1000), PUTS (3000), CLIENTS (8), IDENTITY_RUNS (5),
#              ORCHESTRATE (default ./bin/orchestrate), ETCD.

set -euo pipefail

cd "$(dirname "$0")/.."
ORCH=${ORCHESTRATE:-./bin/orchestrate}
HOSTS=${HOSTS:-1000}
PUTS=${PUTS:-3000}
CLIENTS=${CLIENTS:-8}
IDENTITY_RUNS=${IDENTITY_RUNS:-5}
ETCD=${ETCD:-etcd}
export ETCD

die() { echo "bench/auth: $*" >&2; exit 1; }
for tool in "$ETCD" python3 timeout; do
	command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found"
done
[[ -x $ORCH ]] || die "'$ORCH' not built (make)"

. scripts/local-etcd.sh
local_scratch auth-bench

# etcd_cpu_ms PID — utime+stime of PID in ms
etcd_cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / hz) }' "/proc/$1/stat"
}

# The load generator (also the user/role seeding): python3, stdlib only.
cat >"$work/load.py" <<'EOF'
import base64, http.client, json, sys, threading, time

url, mode, hosts, puts, clients = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
hostport = url.split("//", 1)[1]

def b64(s):
    return base64.b64encode(s.encode()).decode()

class Conn:
    def __init__(self):
        self.c = http.client.HTTPConnection(hostport, timeout=10)
    def call(self, path, body, token=None):
        h = {"Content-Type": "application/json"}
        if token:
            h["Authorization"] = token
        self.c.request("POST", path, json.dumps(body), h)
        r = self.c.getresponse()
        data = r.read()
        if r.status != 200:
            raise SystemExit("%s: HTTP %d %s" % (path, r.status, data[:200]))
        return json.loads(data)

def name(i):
    return "host%04d" % i

def parallel(fn, n):
    errs = []
    def run(k):
        try:
            fn(k)
        except BaseException as e:
            errs.append(e)
    ts = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in ts: t.start()
    for t in ts: t.join()
    if errs:
        raise SystemExit("load: %s" % errs[0])

if mode == "seed":
    # users and roles: each role READWRITE on the host's own keys (as
    # node_identity grants them, the states and alive/running_version/slot)
    def seed(k):
        c = Conn()
        for i in range(k, hosts, clients):
            h, role = name(i), "orchestrate-node-" + name(i)
            c.call("/v3/auth/role/add", {"name": role})
            for key in ("/status/puppet/success/" + h, "/status/puppet/failure/" + h,
                        "/alive/" + h, "/running_version/" + h, "/rollout/holders/" + h):
                c.call("/v3/auth/role/grant", {"name": role, "perm": {"permType": "READWRITE", "key": b64(key)}})
            c.call("/v3/auth/role/grant", {"name": role, "perm": {"permType": "READ", "key": b64("/rollout/"), "range_end": b64("/rollout0")}})
            c.call("/v3/auth/user/add", {"name": h, "password": "pw-" + h})
            c.call("/v3/auth/user/grant", {"user": h, "role": role})
    parallel(seed, clients)
    sys.exit(0)

# mode "auth" or "noauth": PUTS puts of host i's own status key, round robin
tokens = {}
if mode == "auth":
    def login(k):
        c = Conn()
        for i in range(k, hosts, clients):
            tokens[i] = c.call("/v3/auth/authenticate", {"name": name(i), "password": "pw-" + name(i)})["token"]
    parallel(login, clients)
print("ready", flush=True)
sys.stdin.readline()            # the caller reads etcd's CPU, then says go
t0 = time.monotonic()
def work(k):
    c = Conn()
    for n in range(k, puts, clients):
        i = n % hosts
        v = json.dumps({"time": n, "version": "v1"})
        c.call("/v3/kv/put", {"key": b64("/status/puppet/success/" + name(i)), "value": b64(v)}, tokens.get(i))
parallel(work, clients)
print("done %.3f" % (time.monotonic() - t0), flush=True)
EOF

# run_puts MODE PID — prints "CPU_MS SECONDS" of etcd over PUTS puts
run_puts() {
	local mode=$1 pid=$2 before after line secs
	coproc LOAD { timeout 120 python3 "$work/load.py" "$ORCHESTRATE_ETCD" "$mode" "$HOSTS" "$PUTS" "$CLIENTS"; }
	read -r -t 120 line <&"${LOAD[0]}" && [[ $line == ready ]] || die "the $mode load generator failed"
	before=$(etcd_cpu_ms "$pid")
	echo go >&"${LOAD[1]}"
	read -r -t 120 line <&"${LOAD[0]}" || die "the $mode puts did not finish"
	after=$(etcd_cpu_ms "$pid")
	secs=${line#done }
	wait "$LOAD_PID" 2>/dev/null || true
	echo "$((after - before)) $secs"
}

# --- auth on, HOSTS identities ------------------------------------------------------

mkdir -p "$work/on" "$work/off"
local_etcd_start "$work/on" auth-on --bcrypt-cost 4 || die "etcd did not start"
pids+=("$LOCAL_ETCD_PID")
ON_PID=$LOCAL_ETCD_PID
printf 'rootpw\n' >"$work/root.pw"
chmod 600 "$work/root.pw"
python3 - "$ORCHESTRATE_ETCD" <<'EOF'
import http.client, json, sys
c = http.client.HTTPConnection(sys.argv[1].split("//", 1)[1], timeout=10)
for path, body in (("/v3/auth/user/add", {"name": "root", "password": "rootpw"}),
                   ("/v3/auth/user/grant", {"user": "root", "role": "root"})):
    c.request("POST", path, json.dumps(body)); r = c.getresponse(); r.read()
    if r.status != 200: sys.exit("%s: HTTP %d" % (path, r.status))
EOF
t0=$(date +%s)
timeout 120 python3 "$work/load.py" "$ORCHESTRATE_ETCD" seed "$HOSTS" 0 "$CLIENTS" || die "seeding users and roles failed"
echo "seeded $HOSTS users and roles in $(( $(date +%s) - t0 )) s"

# a handful with the real grant set, timed on etcd's CPU
before=$(etcd_cpu_ms "$ON_PID")
for ((i = 0; i < IDENTITY_RUNS; i++)); do
	"$ORCH" node_identity "node$i" --services web,common --group g1 --password-file "$work/root.pw" >/dev/null ||
		die "node_identity node$i failed"
done
after=$(etcd_cpu_ms "$ON_PID")
identity_ms=$(awk -v d=$((after - before)) -v n="$IDENTITY_RUNS" 'BEGIN { printf "%.1f", d / n }')
grants=$("$ORCH" node_identity node0 --services web,common --group g1 --dry-run | grep -c '^READ')
python3 - "$ORCHESTRATE_ETCD" <<'EOF'
import http.client, json, sys
c = http.client.HTTPConnection(sys.argv[1].split("//", 1)[1], timeout=10)
c.request("POST", "/v3/auth/enable", "{}"); r = c.getresponse(); r.read()
if r.status != 200: sys.exit("auth enable: HTTP %d" % r.status)
EOF

read -r on_ms on_s < <(run_puts auth "$ON_PID")
local_etcd_stop
pids=()

# --- auth off, a fresh etcd -----------------------------------------------------------

local_etcd_start "$work/off" auth-off --bcrypt-cost 4 || die "etcd did not start"
pids+=("$LOCAL_ETCD_PID")
read -r off_ms off_s < <(run_puts noauth "$LOCAL_ETCD_PID")
local_etcd_stop
pids=()

awk -v on="$on_ms" -v off="$off_ms" -v n="$PUTS" -v hosts="$HOSTS" -v c="$CLIENTS" \
    -v ons="$on_s" -v offs="$off_s" -v idms="$identity_ms" -v idn="$IDENTITY_RUNS" -v g="$grants" 'BEGIN {
	printf "etcd CPU per put, %d puts of each host'"'"'s own status key, %d clients, %d hosts:\n", n, c, hosts
	printf "  auth on  (%d users and roles, own token): %.3f ms/put  (%d ms CPU, %.2f s wall)\n", hosts, on / n, on, ons
	printf "  auth off (fresh etcd, no token):            %.3f ms/put  (%d ms CPU, %.2f s wall)\n", off / n, off, offs
	if (off > 0) printf "  ratio on/off: %.2fx  (goal: within 1.3x)\n", on / off
	printf "etcd CPU per node_identity run (%d grants, %d runs): %s ms\n", g, idn, idms
}'
