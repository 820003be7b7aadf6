#!/bin/sh
# package-test.sh — builds the Debian packages, checks them with lintian,
# installs them with dpkg -i on this machine, runs the installed programs, then
# removes and purges them and checks that nothing is left.  CI runs it (a
# fresh Debian machine after scripts/install-deps.sh); it needs root for dpkg
# and runs itself through sudo when there is one.
#
# The build happens in a copy of the tree in a temporary directory, so that
# neither the tree nor its parent directory (where dpkg-buildpackage puts the
# .deb files) gets anything new.  KEEP=1 keeps that directory.
set -eu

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo KEEP="${KEEP:-}" "$0" "$@"
	fi
	echo "package-test: dpkg -i needs root" >&2
	exit 1
fi

cd "$(dirname "$0")/.."
top=$(pwd)
packages="orchestrate puppet-module-orchestrate"

installed () {
	dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qv '^not-installed$'
}

for p in $packages; do
	if installed "$p"; then
		echo "package-test: $p is already on this machine ($(dpkg-query -W -f='${Version} ${db:Status-Status}' "$p")):" \
			"remove it first (dpkg -P $p); this test installs and purges its own build" >&2
		exit 1
	fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/orchestrate-package.XXXXXX")
purge_on_exit=
cleanup () {
	rc=$?
	if [ -n "$purge_on_exit" ]; then
		# shellcheck disable=SC2086 # a list of package names
		dpkg -P $packages >/dev/null 2>&1 || :
	fi
	if [ -z "${KEEP:-}" ]; then
		rm -rf "$work"
	else
		echo "package-test: kept $work"
	fi
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail () {
	echo "package-test: FAILED: $*" >&2
	exit 1
}

step () {
	echo "-- $*"
}

# --- build ------------------------------------------------------------------

step "copy of the tree in $work/src"
mkdir "$work/src"
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	# What git would commit: tracked and new files, nothing ignored.
	git -C "$top" ls-files -z --cached --others --exclude-standard |
		(cd "$top" && xargs -0 tar -cf - --no-recursion) | tar -xf - -C "$work/src"
else
	tar -C "$top" --exclude=./bin --exclude='*.o' --exclude='*.a' -cf - . | tar -xf - -C "$work/src"
fi

step "dpkg-buildpackage -us -uc -b"
if ! (cd "$work/src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	tail -n 60 "$work/build.log"
	fail "dpkg-buildpackage (log above; KEEP=1 keeps $work/build.log)"
fi
grep -E '^dpkg-deb: building package' "$work/build.log" || :
changes=$(ls "$work"/orchestrate_*.changes)
deb=$(ls "$work"/orchestrate_*.deb)
module_deb=$(ls "$work"/puppet-module-orchestrate_*.deb)

step "contents"
dpkg-deb -c "$deb" | awk '{ print $1, $2, $6 }'
dpkg-deb -c "$module_deb" | awk '{ print $1, $2, $6 }'

# --- lintian ----------------------------------------------------------------

step "lintian (errors and warnings fail; each override says why)"
if command -v lintian >/dev/null 2>&1; then
	lintian --fail-on error,warning --show-overrides --display-info "$changes" ||
		fail "lintian"
else
	fail "lintian is not installed (scripts/install-deps.sh installs it)"
fi

# --- install ----------------------------------------------------------------

step "dpkg -i"
purge_on_exit=1
dpkg -i "$deb" "$module_deb"

step "installed paths"
[ -x /usr/bin/orchestrate ] || fail "/usr/bin/orchestrate is missing"
[ -x /usr/sbin/orchestrated ] || fail "/usr/sbin/orchestrated is missing"
/usr/bin/orchestrate --version
/usr/bin/orchestrate --help >/dev/null
out=$(/usr/sbin/orchestrated --check-config) || fail "orchestrated --check-config: $out"
echo "$out"
[ "$out" = "configuration OK" ] || fail "orchestrated --check-config printed '$out'"
/usr/sbin/orchestrated --version

for f in /usr/lib/orchestrate/hooks/config /usr/lib/orchestrate/hooks/validate \
	/usr/lib/orchestrate/hooks/services; do
	[ -x "$f" ] || fail "$f is not an installed executable"
done
[ -d /usr/lib/orchestrate/validation.d ] || fail "/usr/lib/orchestrate/validation.d is missing"
grep -q '^VALIDATION_DIR=/usr/lib/orchestrate/validation.d$' /usr/lib/orchestrate/hooks/validate ||
	fail "the validate hook does not name /usr/lib/orchestrate/validation.d"
out=$(env -i PATH=/usr/bin:/bin /usr/lib/orchestrate/hooks/validate) ||
	fail "the validate hook fails with an empty validation.d: $out"
echo "$out" | grep -q 'warning: no check in /usr/lib/orchestrate/validation.d' ||
	fail "the validate hook does not warn about an empty validation.d: $out"
for m in man1/orchestrate.1 man5/orchestrate.conf.5 man8/orchestrated.8; do
	[ -f "/usr/share/man/$m.gz" ] || fail "/usr/share/man/$m.gz is missing"
done
unit=/lib/systemd/system/orchestrated.service
socket=/lib/systemd/system/orchestrate-hook.socket
runner_unit=/lib/systemd/system/orchestrate-hook@.service
runner=/usr/lib/orchestrate/orchestrate-hook-runner
for f in "$unit" "$socket" "$runner_unit"; do
	[ -f "$f" ] || fail "$f is missing"
done
[ -x "$runner" ] || fail "$runner is not an installed executable"
grep -q '^ExecStart=/usr/sbin/orchestrated --hook-runner /run/orchestrate/hook.sock$' "$unit" ||
	fail "$unit does not run /usr/sbin/orchestrated with the hook runner"
grep -q "^ExecStart=$runner\$" "$runner_unit" || fail "$runner_unit does not run $runner"
# Started by hand, without its socket, the runner refuses (usage, 64).
code=0
"$runner" 2>/dev/null || code=$?
[ "$code" = 64 ] || fail "$runner without a socket exited $code, wanted 64"
if command -v systemd-analyze >/dev/null 2>&1; then
	systemd-analyze verify "$unit" "$socket" "$runner_unit" ||
		fail "systemd-analyze verify $unit $socket $runner_unit"
	systemd-analyze security --offline=true "$unit" | tail -n 1
fi
# Installed, but neither enabled nor started: the node has no etcd yet.
[ ! -e /etc/systemd/system/multi-user.target.wants/orchestrated.service ] ||
	fail "the package enabled orchestrated.service"
[ ! -e /etc/systemd/system/sockets.target.wants/orchestrate-hook.socket ] ||
	fail "the package enabled orchestrate-hook.socket"

dpkg-query -W -f='${Conffiles}\n' orchestrate | grep -q ' /etc/orchestrate/orchestrate.yaml ' ||
	fail "/etc/orchestrate/orchestrate.yaml is not a conffile"
[ "$(stat -c '%U:%G %a' /var/lib/orchestrate)" = "root:root 755" ] ||
	fail "/var/lib/orchestrate is $(stat -c '%U:%G %a' /var/lib/orchestrate), wanted root:root 755"
[ "$(stat -c '%U:%G %a' /etc/orchestrate/orchestrate.yaml)" = "root:root 644" ] ||
	fail "/etc/orchestrate/orchestrate.yaml is $(stat -c '%U:%G %a' /etc/orchestrate/orchestrate.yaml)"

module=/usr/share/puppet/modules/orchestrate
for f in metadata.json LICENSE manifests/init.pp manifests/service_blocker.pp \
	lib/facter/orchestrate_paths.rb; do
	[ -f "$module/$f" ] || fail "$module/$f is missing"
done
if command -v puppet >/dev/null 2>&1; then
	step "the Puppet module from Debian's module path"
	pdir="$work/puppet"
	mkdir -p "$pdir"
	# The default module path (/usr/share/puppet/modules), private state.
	out=$(puppet apply --color=false --confdir "$pdir/conf" --codedir "$pdir/code" \
		--vardir "$pdir/var" --ssldir "$pdir/ssl" --logdir "$pdir/log" \
		--rundir "$pdir/run" --publicdir "$pdir/public" \
		--modulepath /usr/share/puppet/modules -e '
notice("orchestrated: ${facts["orchestrate_paths"]["orchestrated"]}")
class { "orchestrate":
  mode               => "none",
  config_file        => "'"$pdir"'/etc/orchestrate.yaml",
  manage_profile_dir => false,
  endpoints          => ["http://127.0.0.1:2379"],
}' 2>&1) || fail "puppet apply with the installed module: $out"
	echo "$out" | grep -v 'Facter\|environ' || :
	echo "$out" | grep -q 'orchestrated: /usr/sbin/orchestrated' ||
		fail "the fact orchestrate_paths did not find /usr/sbin/orchestrated"
	grep -q 'http://127.0.0.1:2379' "$pdir/etc/orchestrate.yaml" ||
		fail "the class did not write its config file"
fi

# --- remove and purge ---------------------------------------------------------

step "dpkg -r"
# An operator's change to the conffile survives a removal.
echo "# local change" >>/etc/orchestrate/orchestrate.yaml
# shellcheck disable=SC2086 # a list of package names
dpkg -r $packages
[ ! -e /usr/bin/orchestrate ] && [ ! -e /usr/sbin/orchestrated ] ||
	fail "the programs are still there after dpkg -r"
[ ! -e "$module" ] || fail "$module is still there after dpkg -r"
grep -q '^# local change$' /etc/orchestrate/orchestrate.yaml ||
	fail "dpkg -r did not keep the changed conffile"

step "dpkg -P"
# The module has no conffile: dpkg -r removed it whole.  orchestrate is in
# state config-files, with the daemon's state beside it.
mkdir -p /var/lib/orchestrate && echo state >/var/lib/orchestrate/left-by-the-daemon
dpkg -P orchestrate
purge_on_exit=
for p in $packages; do
	! installed "$p" || fail "$p is still known to dpkg after dpkg -P"
done
for f in /etc/orchestrate /var/lib/orchestrate /usr/lib/orchestrate "$unit" "$socket" \
	"$runner_unit" "$module"; do
	[ ! -e "$f" ] || fail "$f is still there after dpkg -P"
done

echo "package-test: ok"
