#!/bin/sh
test_description='the systemd unit: verify clean, hardening exposure, KillMode as documented'
. "$(dirname "$0")/test-lib.sh"

command -v systemd-analyze >/dev/null 2>&1 || skip_all "systemd-analyze is not installed"
test_have_orchestrated

# The unit as make install writes it, its daemon the one just built (verify
# checks that ExecStart= is an executable).
sed "s|@SBINDIR@|$REPO_ROOT/bin|g" "$REPO_ROOT/contrib/systemd/orchestrated.service.in" \
	>orchestrated.service

test_expect_success 'systemd-analyze verify is clean' '
	systemd-analyze verify --man=no ./orchestrated.service >out 2>&1 &&
	test_must_be_empty out
'

# 7.5 when written; hooks run Puppet as root, which is why it is not lower
# (the unit file says why for each setting left out).  A change that raises
# it fails here.
test_expect_success 'systemd-analyze security: exposure at most 7.5' '
	systemd-analyze security --offline=true --threshold=75 ./orchestrated.service >out 2>&1 ||
		{ tail -n 1 out >&4; false; } &&
	tail -n 1 out
'

test_expect_success 'every hardening setting left out is named with its reason' '
	for k in PrivateTmp ProtectHome ProtectSystem ProtectControlGroups \
		ProtectKernelLogs ProtectKernelTunables ProtectKernelModules PrivateDevices \
		PrivateMounts ProtectClock ProtectHostname ProtectProc RestrictSUIDSGID \
		MemoryDenyWriteExecute PrivateNetwork PrivateUsers UMask; do
		grep -q "^$k=" orchestrated.service ||
			grep -q "^# .*$k=" orchestrated.service ||
			{ echo "$k: neither set nor explained" >&4; exit 1; }
	done
'

test_expect_success 'KillMode: the unit and orchestrated(8) agree' '
	grep "^KillMode=" orchestrated.service >unit &&
	test_line_count = 1 unit &&
	mode=$(sed "s/^KillMode=//" unit) &&
	grep -q "^\.Ql KillMode=$mode\$" "$REPO_ROOT/man/orchestrated.8" &&
	! grep "KillMode=" "$REPO_ROOT/man/orchestrated.8" | grep -v "KillMode=$mode" | grep -q .
'

test_done
