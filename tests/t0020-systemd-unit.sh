#!/bin/sh
test_description='the systemd units: verify clean, hardening exposure, every setting left out explained, KillMode as documented'
. "$(dirname "$0")/test-lib.sh"

command -v systemd-analyze >/dev/null 2>&1 || skip_all "systemd-analyze is not installed"
test_have_orchestrated

# The units as make install writes them, their programs the ones just built
# (verify checks that ExecStart= is an executable).
sed -e "s|@SBINDIR@|$REPO_ROOT/bin|g" -e "s|@LIBEXECDIR@|$REPO_ROOT/contrib|g" \
	"$REPO_ROOT/contrib/systemd/orchestrated.service.in" >orchestrated.service
sed "s|@LIBEXECDIR@|$REPO_ROOT/bin|g" "$REPO_ROOT/contrib/systemd/orchestrate-hook@.service.in" \
	>orchestrate-hook@.service
cp "$REPO_ROOT/contrib/systemd/orchestrate-hook.socket" .

test_expect_success 'systemd-analyze verify is clean (daemon, socket, runner)' '
	systemd-analyze verify --man=no ./orchestrated.service ./orchestrate-hook.socket \
		./orchestrate-hook@.service >out 2>&1 &&
	test_must_be_empty out
'

# 1.6 when written (it was 7.5 while the hooks ran inside this unit), 1.3
# as its own user.  --threshold is the exposure times ten.  A change that
# raises it past 1.3 fails here.
test_expect_success 'systemd-analyze security: the daemon at most 1.3' '
	systemd-analyze security --offline=true --threshold=13 ./orchestrated.service >out 2>&1 ||
		{ tail -n 1 out >&4; false; } &&
	tail -n 1 out
'

# The runner runs Puppet as root: it keeps what the daemon had (7.5).
test_expect_success 'systemd-analyze security: the hook runner at most 7.5' '
	systemd-analyze security --offline=true --threshold=75 ./orchestrate-hook@.service >out 2>&1 ||
		{ tail -n 1 out >&4; false; } &&
	tail -n 1 out
'

# set_or_explained UNIT SETTING...  — each SETTING is set in UNIT, or named
# in a comment of it (with its reason beside it).
set_or_explained () {
	u_=$1
	shift
	for k_; do
		grep -q "^$k_=" "$u_" || grep -q "^# .*$k_=" "$u_" ||
			{ echo "$u_: $k_: neither set nor explained" >&4; return 1; }
	done
}

HARDENING="PrivateTmp ProtectHome ProtectSystem ProtectControlGroups \
	ProtectKernelLogs ProtectKernelTunables ProtectKernelModules PrivateDevices \
	PrivateMounts ProtectClock ProtectHostname ProtectProc ProcSubset RestrictSUIDSGID \
	MemoryDenyWriteExecute PrivateNetwork IPAddressDeny PrivateUsers UMask User \
	DynamicUser CapabilityBoundingSet SystemCallFilter RestrictAddressFamilies \
	RestrictNamespaces NoNewPrivileges RootDirectory"

test_expect_success 'every hardening setting is applied or named with its reason' '
	set_or_explained orchestrated.service $HARDENING &&
	set_or_explained orchestrate-hook@.service $HARDENING
'

test_expect_success 'the daemon: its own user, no capability, read-only system, its hooks through the socket' '
	grep -qx "User=orchestrate" orchestrated.service &&
	grep -qx "Group=orchestrate" orchestrated.service &&
	grep -qx "CapabilityBoundingSet=" orchestrated.service &&
	grep -qx "ProtectSystem=strict" orchestrated.service &&
	grep -qx "StateDirectory=orchestrate orchestrate/hiera" orchestrated.service &&
	! grep "^ReadWritePaths=" orchestrated.service | grep -q "/etc" &&
	sock=$(sed -n "s/^ListenStream=//p" orchestrate-hook.socket) &&
	test -n "$sock" &&
	grep -q "^ExecStart=.*/orchestrated --hook-runner $sock\$" orchestrated.service &&
	grep -qx "Requires=orchestrate-hook.socket" orchestrated.service &&
	grep -qx "Accept=yes" orchestrate-hook.socket
'

# The socket is the daemon group's alone; the runner checks the uid too
# (t0826).  Neither world nor root only.
test_expect_success 'the socket: the daemon user'"'"'s group, mode 0660' '
	grep -qx "SocketUser=root" orchestrate-hook.socket &&
	grep -qx "SocketGroup=orchestrate" orchestrate-hook.socket &&
	grep -qx "SocketMode=0660" orchestrate-hook.socket
'

# The runner bounds its hook at hooks.timeout + 10 s; the unit bounds the
# runner above that, for hooks.timeout's default.
test_expect_success 'the runner unit: RuntimeMaxSec= above the default hook timeout and its grace' '
	max=$(sed -n "s/^RuntimeMaxSec=\([0-9]*\)s\$/\1/p" orchestrate-hook@.service) &&
	test -n "$max" &&
	test "$max" -gt $((3600 + 10)) &&
	grep -q "3600" "$REPO_ROOT/man/orchestrate.conf.5" &&
	grep -q "RuntimeMaxSec=$max" "$REPO_ROOT/man/orchestrated.8"
'

test_expect_success 'KillMode: the units and orchestrated(8) agree' '
	for u in orchestrated.service orchestrate-hook@.service; do
		grep "^KillMode=" $u >unit &&
		test_line_count = 1 unit &&
		mode=$(sed "s/^KillMode=//" unit) &&
		grep -q "^\.Ql KillMode=$mode\$" "$REPO_ROOT/man/orchestrated.8" || return 1
	done &&
	! grep "KillMode=" "$REPO_ROOT/man/orchestrated.8" | grep -v "KillMode=$mode" | grep -q .
'

test_done
