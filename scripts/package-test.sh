#!/bin/sh
# package-test.sh — builds the Debian packages, checks them with lintian,
# installs them with dpkg -i on this machine, runs the installed programs (and
# promtool, when there is one, on the installed alert rules), then removes and
# purges them and checks that nothing is left.  CI runs it (a
# fresh Debian machine after scripts/install-deps.sh); it needs root for dpkg
# and runs itself through sudo when there is one.
#
# The install is an upgrade: the package of PREVIOUS (a git revision; default
# the last one whose package kept its files in /etc, before the daemon had a
# user of its own — not main, which is this very package once it lands) is
# built and installed first, with a local version in
# /etc/current_version and a hiera file in /etc/puppet/hiera/data, where it
# kept them; the new package must move both into /var/lib/orchestrate, the
# directory of the daemon's own user, without losing either, and leave links
# at the old paths.  PREVIOUS= (empty) tests a fresh install instead.
#
# The build happens in a copy of the tree in a temporary directory, so that
# neither the tree nor its parent directory (where dpkg-buildpackage puts the
# .deb files) gets anything new.  KEEP=1 keeps that directory.
set -eu

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo KEEP="${KEEP:-}" PREVIOUS="${PREVIOUS-8bd3bd996ebb041fa25dfdb80655037e79d8d299}" "$0" "$@"
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

previous=${PREVIOUS-8bd3bd996ebb041fa25dfdb80655037e79d8d299}
if [ -n "$previous" ] && ! git -C "$top" cat-file -e "$previous^{commit}" 2>/dev/null; then
	echo "package-test: revision $previous is not in this clone (a shallow one?): a fresh install is tested, not the upgrade" >&2
	previous=
fi
# What this test installs and makes, removed again: by the trap when the test
# ends or is interrupted, and at the next start when it was killed outright
# (SIGKILL, a machine shut down): the marker, written before the first dpkg -i
# and removed after the purge, tells that those leftovers are this test's own
# and not a real node's.
marker=/var/lib/orchestrate-package-test.installed
purge_ours () {
	# shellcheck disable=SC2086 # a list of package names
	dpkg -P $packages >/dev/null 2>&1 || :
	rm -f /etc/current_version /etc/puppet/hiera/data/services.yaml
	rmdir /etc/puppet/hiera/data /etc/puppet/hiera 2>/dev/null || :
	rm -f "$marker"
}
if [ -e "$marker" ]; then
	echo "package-test: an earlier run of this test was killed before it purged what it installed: purging that first" >&2
	purge_ours
fi

# The files of a node this test makes, and removes: none may be there before.
for f in /etc/current_version /etc/puppet/hiera/data/services.yaml; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		echo "package-test: $f exists on this machine: this test makes its own (move it away first)" >&2
		exit 1
	fi
done

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
		purge_ours
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

# --- the previous package, then the upgrade -------------------------------------

if [ -n "$previous" ]; then
	step "the package of $previous (git archive, dpkg-buildpackage, nocheck)"
	mkdir -p "$work/prev/src"
	git -C "$top" archive --format=tar "$previous" | tar -xf - -C "$work/prev/src" ||
		fail "git archive $previous"
	if ! (cd "$work/prev/src" && DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b) \
		>"$work/prev-build.log" 2>&1; then
		tail -n 40 "$work/prev-build.log"
		fail "dpkg-buildpackage of $previous"
	fi
	step "dpkg -i the package of $previous, with a node's files where it kept them"
	purge_on_exit=1
	: >"$marker"
	dpkg -i "$work"/prev/orchestrate_*.deb "$work"/prev/puppet-module-orchestrate_*.deb
	echo v41 >/etc/current_version
	mkdir -p /etc/puppet/hiera/data
	printf -- '---\nservices::db::eth0:\n- 10.0.0.5\n' >/etc/puppet/hiera/data/services.yaml
	cp /etc/puppet/hiera/data/services.yaml "$work/hiera.before"
	echo state >/var/lib/orchestrate/left-by-the-old-daemon
	[ "$(/usr/bin/orchestrate local_version)" = v41 ] ||
		fail "the package of $previous does not read /etc/current_version"
fi

# --- install ----------------------------------------------------------------

step "dpkg -i"
purge_on_exit=1
: >"$marker"
dpkg -i "$deb" "$module_deb"

step "the daemon's own user and directory"
id orchestrate || fail "the package made no user orchestrate"
[ "$(id -gn orchestrate)" = orchestrate ] || fail "the user orchestrate has no group orchestrate"
[ -f /usr/lib/sysusers.d/orchestrate.conf ] || fail "/usr/lib/sysusers.d/orchestrate.conf is missing"
for d in /var/lib/orchestrate /var/lib/orchestrate/hiera; do
	[ "$(stat -c '%U:%G %a' "$d")" = "orchestrate:orchestrate 755" ] ||
		fail "$d is $(stat -c '%U:%G %a' "$d"), wanted orchestrate:orchestrate 755"
done
if [ -n "$previous" ]; then
	step "upgraded from $previous: the local version and the hiera file moved, links left"
	[ "$(cat /var/lib/orchestrate/current_version)" = v41 ] ||
		fail "the local version did not move to /var/lib/orchestrate/current_version"
	[ "$(stat -c %U /var/lib/orchestrate/current_version)" = orchestrate ] ||
		fail "/var/lib/orchestrate/current_version is not the daemon user's"
	[ "$(readlink /etc/current_version)" = /var/lib/orchestrate/current_version ] ||
		fail "/etc/current_version is not a link to the new place"
	[ "$(cat /etc/current_version)" = v41 ] || fail "/etc/current_version does not read v41"
	[ "$(/usr/bin/orchestrate local_version)" = v41 ] ||
		fail "orchestrate local_version does not read the moved file"
	cmp "$work/hiera.before" /var/lib/orchestrate/hiera/services.yaml ||
		fail "the hiera file did not move whole to /var/lib/orchestrate/hiera/services.yaml"
	[ "$(readlink /etc/puppet/hiera/data/services.yaml)" = /var/lib/orchestrate/hiera/services.yaml ] ||
		fail "/etc/puppet/hiera/data/services.yaml is not a link to the new place"
	[ -f /var/lib/orchestrate/left-by-the-old-daemon ] || fail "the daemon's state was lost"
	# The old daemon, still running as root after the upgrade, writes the
	# old path again; the next start of the new one (ExecStartPre=+) takes
	# it over.
	rm -f /etc/current_version && echo v42 >/etc/current_version
	touch -d '+1 second' /etc/current_version
	/usr/lib/orchestrate/orchestrate-migrate-paths
	[ "$(cat /var/lib/orchestrate/current_version)" = v42 ] && [ -L /etc/current_version ] ||
		fail "orchestrate-migrate-paths did not take over a newer /etc/current_version"
	# Nothing to do: nothing changes.
	out=$(/usr/lib/orchestrate/orchestrate-migrate-paths 2>&1)
	[ -z "$out" ] || fail "orchestrate-migrate-paths with nothing to move said: $out"
	# A link the daemon's user planted in its own directory cannot make the
	# migration write through it as root.
	rm -f /etc/current_version && echo v43 >/etc/current_version
	touch -d '+2 seconds' /etc/current_version
	rm -f /var/lib/orchestrate/current_version
	ln -s /etc/planted-by-the-daemon /var/lib/orchestrate/current_version
	chown -h orchestrate:orchestrate /var/lib/orchestrate/current_version
	/usr/lib/orchestrate/orchestrate-migrate-paths
	[ ! -e /etc/planted-by-the-daemon ] || fail "the migration wrote through a link as root"
	[ "$(cat /var/lib/orchestrate/current_version)" = v43 ] && [ ! -L /var/lib/orchestrate/current_version ] ||
		fail "the migration did not replace the planted link with the file"
fi

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
step "the alert rules, uncompressed, where a Prometheus server's rule_files names them"
rules_dir=/usr/share/orchestrate/prometheus
for f in orchestrate.rules.yml orchestrate.rules.test.yml; do
	[ -f "$rules_dir/$f" ] || fail "$rules_dir/$f is missing"
	cmp "$rules_dir/$f" "$top/contrib/prometheus/$f" ||
		fail "$rules_dir/$f is not contrib/prometheus/$f"
done
[ "$(readlink -f /usr/share/doc/orchestrate/examples/prometheus)" = "$rules_dir" ] ||
	fail "/usr/share/doc/orchestrate/examples/prometheus does not lead to $rules_dir"
if command -v promtool >/dev/null 2>&1; then
	promtool check rules "$rules_dir/orchestrate.rules.yml" ||
		fail "promtool check rules $rules_dir/orchestrate.rules.yml"
	promtool test rules "$rules_dir/orchestrate.rules.test.yml" ||
		fail "promtool test rules $rules_dir/orchestrate.rules.test.yml"
else
	echo "package-test: SKIPPED promtool check/test rules: promtool is not installed"
fi
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
grep -q '^ExecStartPre=+/usr/lib/orchestrate/orchestrate-migrate-paths$' "$unit" ||
	fail "$unit does not migrate the old paths before it starts"
step "the units: the daemon as orchestrate, the socket its group's"
grep -qx 'User=orchestrate' "$unit" && grep -qx 'Group=orchestrate' "$unit" ||
	fail "$unit does not run the daemon as orchestrate"
grep -qx 'SocketGroup=orchestrate' "$socket" && grep -qx 'SocketMode=0660' "$socket" ||
	fail "$socket is not the group orchestrate's, mode 0660"
grep -q '^RuntimeMaxSec=' "$runner_unit" || fail "$runner_unit has no RuntimeMaxSec="
as_daemon () {
	setpriv --reuid=orchestrate --regid=orchestrate --init-groups "$@"
}
out=$(as_daemon /usr/sbin/orchestrated --check-config) ||
	fail "orchestrated --check-config as orchestrate: $out"
[ "$out" = "configuration OK" ] || fail "orchestrated --check-config as orchestrate printed '$out'"
! as_daemon sh -c 'echo x >>/etc/orchestrate/orchestrate.yaml' 2>/dev/null ||
	fail "the daemon's user can write /etc/orchestrate/orchestrate.yaml"
as_daemon sh -c 'echo v9 >/var/lib/orchestrate/hiera/probe && rm /var/lib/orchestrate/hiera/probe' ||
	fail "the daemon's user cannot write /var/lib/orchestrate/hiera"
step "the installed runner serves orchestrate and runs the installed validate hook as root"
rsock="$work/hook.sock"
"$runner" --listen "$rsock" >"$work/runner.log" 2>&1 &
rpid=$!
i=0
while [ ! -S "$rsock" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
[ "$(stat -c '%G %a' "$rsock")" = "orchestrate 660" ] || fail "--listen made $(stat -c '%G %a' "$rsock")"
chmod 0755 "$work"
out=$(as_daemon /usr/bin/python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"orchestrate-hook 1\0validate\0ORCHESTRATE_HOST=pkg\0ORCHESTRATE_VERSION=v1\0\0")
data = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    data += c
types = []
while data:
    n = struct.unpack(">I", data[1:5])[0]
    types.append(data[0:1].decode() + ("" if data[0:1] == b"O" else " " + data[5:5 + n].decode()))
    data = data[5 + n:]
print("|".join(types))
' "$rsock" 2>&1) || fail "a request as orchestrate: $out"
kill "$rpid" 2>/dev/null || :
wait "$rpid" 2>/dev/null || :
echo "$out"
case $out in
"S "*"|X exited 0") ;;
*) cat "$work/runner.log"; fail "the installed runner did not run the validate hook for orchestrate: $out" ;;
esac
# Started by hand, without its socket, the runner refuses (usage, 64).
code=0
"$runner" 2>/dev/null || code=$?
[ "$code" = 64 ] || fail "$runner without a socket exited $code, wanted 64"
if command -v systemd-analyze >/dev/null 2>&1; then
	systemd-analyze verify "$unit" "$socket" "$runner_unit" ||
		fail "systemd-analyze verify $unit $socket $runner_unit"
	systemd-analyze security --offline=true "$unit" | tail -n 1
	systemd-analyze security --offline=true "$runner_unit" | tail -n 1
fi
# Installed, but neither enabled nor started: the node has no etcd yet.
[ ! -e /etc/systemd/system/multi-user.target.wants/orchestrated.service ] ||
	fail "the package enabled orchestrated.service"
[ ! -e /etc/systemd/system/sockets.target.wants/orchestrate-hook.socket ] ||
	fail "the package enabled orchestrate-hook.socket"

dpkg-query -W -f='${Conffiles}\n' orchestrate | grep -q ' /etc/orchestrate/orchestrate.yaml ' ||
	fail "/etc/orchestrate/orchestrate.yaml is not a conffile"
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
if [ -n "$previous" ]; then
	# The local version outlives the package, in /etc as before; the link
	# to the hiera file goes.
	[ -f /etc/current_version ] && [ ! -L /etc/current_version ] &&
		[ "$(cat /etc/current_version)" = v43 ] ||
		fail "dpkg -P did not leave the local version in /etc/current_version"
	[ ! -e /etc/puppet/hiera/data/services.yaml ] && [ ! -L /etc/puppet/hiera/data/services.yaml ] ||
		fail "dpkg -P left the link /etc/puppet/hiera/data/services.yaml"
	rm -f /etc/current_version
	rmdir /etc/puppet/hiera/data /etc/puppet/hiera 2>/dev/null || :
fi
rm -f "$marker"
for f in /etc/orchestrate /var/lib/orchestrate /usr/lib/orchestrate "$unit" "$socket" \
	"$runner_unit" "$module" /usr/share/orchestrate /usr/share/doc/orchestrate; do
	[ ! -e "$f" ] || fail "$f is still there after dpkg -P"
done

echo "package-test: ok"
