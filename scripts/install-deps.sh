#!/bin/sh
# install-deps.sh — installs what orchestrate needs to build, test and demo on
# Debian 12 (bookworm) or later.  Run as root (or through sudo).  Idempotent.
set -eu

# debhelper and lintian: scripts/package-test.sh builds and checks the Debian
# package (debian/; `apt-get build-dep .` installs just its build dependencies).
# systemd: systemd-analyze and systemd-socket-activate for the unit and runner
# tests, and the package's Depends (systemd-sysusers makes its user); util-linux
# (setpriv) and passwd (useradd) for the tests that run the daemon as a user of
# its own.  prometheus: for promtool alone (make check-rules checks and tests
# contrib/prometheus/'s alert rules, t0770 lints status --prometheus); the
# server it ships is installed but never run by the tests.  python3-yaml:
# scripts/check-rules-series reads the rules.
packages="build-essential pkg-config libcurl4-openssl-dev libcjson-dev libyaml-dev
libsystemd-dev etcd-server etcd-client curl mandoc python3 python3-yaml iproute2 valgrind puppet
clang libclang-rt-14-dev openssl procps time jq debhelper lintian systemd util-linux passwd
prometheus"

missing=
for p in $packages; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	# A fresh Debian may have no sudo (root logins); a desktop has no root shell.
	if command -v sudo >/dev/null 2>&1; then
		exec sudo "$0" "$@"
	fi
	echo "install-deps: missing:$missing; run me as root" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# etcd-server's postinst would start a system etcd on 127.0.0.1:2379; the tests
# and the demo start their own on other ports, so that one is harmless.
apt-get install -y -qq --no-install-recommends $missing
