#!/bin/sh
#
# Disk trouble under the hiera file: its directory missing, read-only, or the
# disk full (a tiny tmpfs of our own).  No partial file ever replaces a good
# one (same inode, mtime and bytes; no temporary file left), the error is in
# the daemon's log and in the puppet status detail of a run that could not
# start, the daemon keeps running, and it recovers by itself when the disk
# does.  cache_services likewise fails and keeps the old file.  Needs root
# (mount).

test_description='hiera file on a missing, read-only or full disk'
. "$(dirname "$0")/test-lib.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"

test_have_orchestrate
test_have_orchestrated
test "$(id -u)" = 0 || skip_all "needs root to mount a small tmpfs"
DISK="$TRASH/disk"
mkdir -p "$DISK"
mount -t tmpfs -o size=64k,mode=0755 orchestrate-test "$DISK" 2>/dev/null ||
	skip_all "cannot mount a tmpfs (not allowed in this container?)"
# unmounted before test-lib empties the trash directory
trap 'umount -l "$DISK" 2>/dev/null; test_cleanup' EXIT
start_etcd
LEASE_TTL=10
export LEASE_TTL

HIERA="$DISK/hiera/services.yaml"

# fingerprint FILE  — inode, mtime (ns), size and checksum.
fingerprint () {
	echo "$(stat -c '%i %.9Y %s' "$1") $(md5sum <"$1")"
}

# only_the_file  — the hiera directory holds nothing but services.yaml.
only_the_file () {
	ls -A "$DISK/hiera" >ls.out
	echo services.yaml >ls.expect
	test_cmp ls.expect ls.out
}

publish () {
	etcdctl_put "/available_services/$1/other" "{\"addresses\":{\"eth0\":\"$2\"},\"healthy\":true}"
}

test_expect_success 'setup' '
	node_setup h1 &&
	sed -i "s|^  hiera_services: .*|  hiera_services: $HIERA|" h1/orchestrate.yaml &&
	grep -q "hiera_services: $HIERA" h1/orchestrate.yaml &&
	etcdctl_put /current_version v1
'

test_expect_success 'directory missing: the run fails with the reason in its detail; then it recovers' '
	start_node h1 &&
	wait_for "status_is h1 puppet failed" 15 &&
	etcdctl_get /status/puppet/failed/h1 >st &&
	cat st &&
	grep -q "cannot write hiera file" st &&
	grep -qF "$HIERA" st &&
	grep -q "No such file or directory" st &&
	test "$(count_lines h1/config.count)" = 0 &&
	grep -q "cannot write hiera file" h1/log &&
	kill -0 $(node_pid h1) &&
	mkdir "$DISK/hiera" &&
	wait_for "node_at h1 v1" 20 &&
	test -s "$HIERA" &&
	only_the_file
'

test_expect_success 'read-only: the old file stays as it was; recovers when writable' '
	publish ro1 10.1.1.1 &&
	wait_for "grep -q 10.1.1.1 \"$HIERA\"" 10 &&
	before=$(fingerprint "$HIERA") &&
	mount -o remount,ro "$DISK" &&
	publish ro2 10.1.1.2 &&
	wait_for "test \$(grep -c \"cannot write hiera file.*Read-only\" h1/log) -ge 1" 10 &&
	sleep 2 &&
	test "$(fingerprint "$HIERA")" = "$before" &&
	kill -0 $(node_pid h1) &&
	mount -o remount,rw "$DISK" &&
	wait_for "grep -q 10.1.1.2 \"$HIERA\"" 10 &&
	only_the_file
'

test_expect_success 'disk full: no partial file, no temporary file, recovers when space returns' '
	before=$(fingerprint "$HIERA") &&
	{ dd if=/dev/zero of="$DISK/filler" bs=4k 2>/dev/null || :; } &&
	test "$(df --output=avail "$DISK" | tail -n 1 | tr -d " ")" = 0 &&
	for i in 1 2 3 4 5 6 7 8 9; do publish full$i 10.2.2.$i || exit 1; done &&
	wait_for "grep -q \"cannot write hiera file.*No space left\" h1/log" 10 &&
	sleep 2 &&
	test "$(fingerprint "$HIERA")" = "$before" &&
	only_the_file &&
	kill -0 $(node_pid h1) &&
	cp "$HIERA" hiera.before
'

test_expect_success 'disk full: a run cannot start; the reason is in the puppet status detail' '
	orch trigger_update v2 &&
	wait_for "status_is h1 puppet failed" 10 &&
	etcdctl_get /status/puppet/failed/h1 | grep -q "No space left on device" &&
	test "$(cat h1/current_version)" = v1 &&
	only_the_file
'

test_expect_success 'disk full: cache_services exits non-zero and keeps the old file' '
	before=$(fingerprint "$HIERA") &&
	test_must_fail orch cache_services --output "$HIERA" 2>err &&
	cat err &&
	grep -qi "space" err &&
	test "$(fingerprint "$HIERA")" = "$before" &&
	only_the_file
'

test_expect_success 'space returns: the daemon writes the file and converges' '
	rm -f "$DISK/filler" &&
	wait_for "grep -q 10.2.2.9 \"$HIERA\"" 10 &&
	wait_for "node_at h1 v2" 20 &&
	only_the_file &&
	orch cache_services --output "$HIERA" &&
	grep -q 10.2.2.9 "$HIERA" &&
	grep -q "hiera file .* written again" h1/log
'

stop_all_nodes
test_done
