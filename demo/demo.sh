#!/bin/bash
# demo.sh — orchestrate end to end on one machine, in about a minute.
#
# Starts a private etcd on a free 127.0.0.1 port, three nodes (db1 offers mysql;
# web1 and web2 offer web and depend on one healthy mysql), each an
# `orchestrated` with demo hooks that stand in for Puppet, then:
#   1. triggers v1 and shows the fleet converge (web waits for mysql first);
#   2. triggers v2 while web2's validation fails once, and shows it retry and
#      recover;
#   3. gates on the result the way CI would (verify_hosts --wait) and shows the
#      hiera file every node rendered from the service catalog.
# Everything lives in a temporary directory and is stopped on exit.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/bin
export PATH="$bin:$PATH"
for p in "$bin/orchestrate" "$bin/orchestrated"; do
	[ -x "$p" ] || { echo "demo: $p is not built; run 'make' first" >&2; exit 1; }
done
command -v etcd >/dev/null || { echo "demo: etcd is not installed; run scripts/install-deps.sh" >&2; exit 1; }

. "$top/scripts/local-etcd.sh"
local_scratch demo

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# --- etcd -------------------------------------------------------------------
local_etcd_start "$work" demo
pids+=("$LOCAL_ETCD_PID")
say "etcd is up"
orchestrate ping

# --- three nodes --------------------------------------------------------------
# The hooks stand in for Puppet: the config hook "applies" the version, the
# validate hook checks it, and a node fails validation once when its
# fail-validation-once file exists.
node() {
	local name=$1 service=$2 depends=$3 d=$work/$1
	mkdir -p "$d/hooks"
	cat >"$d/hooks/config" <<'EOF'
#!/bin/sh
echo "applying $ORCHESTRATE_VERSION on $ORCHESTRATE_HOST"
sleep 1
exit 2   # Puppet's "changes applied"
EOF
	cat >"$d/hooks/validate" <<EOF
#!/bin/sh
if [ -f "$d/fail-validation-once" ]; then
	rm -f "$d/fail-validation-once"
	echo "health check failed: service not answering on :80" >&2
	exit 1
fi
echo "\$ORCHESTRATE_HOST is healthy at \$ORCHESTRATE_VERSION"
EOF
	cat >"$d/hooks/services" <<'EOF'
#!/bin/sh
echo "services changed; the cheap run would reconfigure clients here"
EOF
	chmod +x "$d"/hooks/*
	cat >"$d/orchestrate.yaml" <<EOF
node:
  hostname: $name
  group: demo
  services: [$service]
  profile_list: $d/profile_list.txt
  addresses: {eth0: $4}
  depends: [$depends]
paths:
  local_version: $d/current_version
  hiera_services: $d/services.yaml
  state_dir: $d/state
hooks:
  config: $d/hooks/config
  validate: $d/hooks/validate
  services: $d/hooks/services
  timeout: 60
timing:
  lease_ttl: 10
  quiet: 0.3
  quiet_max: 2
  retry_min: 2
  retry_max: 4
EOF
	orchestrated --config "$d/orchestrate.yaml" >"$d/daemon.log" 2>&1 &
	pids+=($!)
}
node db1 mysql "" 192.0.2.10
node web1 web "{service: mysql, count: 1, healthy: true}" 192.0.2.21
node web2 web "{service: mysql, count: 1, healthy: true}" 192.0.2.22
for _ in $(seq 100); do
	[ "$(orchestrate status --json 2>/dev/null | grep -o '"alive":true' | wc -l)" -ge 3 ] && break
	sleep 0.1
done
say "three daemons registered"
orchestrate status

# --- v1 -----------------------------------------------------------------------
say "orchestrate trigger_update v1"
orchestrate trigger_update v1
orchestrate verify_hosts --wait 60 v1 web1 web2 db1 && echo "all three run v1"
orchestrate status

# --- v2, with a failing validation on web2 ---------------------------------------
say "orchestrate trigger_update v2 (web2's validation will fail once)"
touch "$work/web2/fail-validation-once"
orchestrate trigger_update v2 --if-current v1
sleep 2
orchestrate status || true
say "waiting for web2 to retry and recover"
orchestrate verify_hosts --wait 60 v2 web1 web2 db1 && echo "all three run v2"
orchestrate check_single_version v2 && echo "v2 is the only version running"
orchestrate get_failures && echo "no failures"
orchestrate status

say "what web1 discovered (its hiera file)"
cat "$work/web1/services.yaml"

say "web2's daemon log"
tail -n 15 "$work/web2/daemon.log"
say "done: stopping the fleet and etcd"
