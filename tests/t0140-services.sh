#!/bin/bash
#
# Service discovery: publish_service / unpublish_service, the hiera YAML of
# get_services and cache_services (exact bytes, atomic, unchanged catalog never
# rewrites, mode kept, errors keep the old file), hostile catalog entries, and
# wait_for_service on a watch.

test_description='publish_service, get_services, cache_services, wait_for_service'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

svc () {
	printf '{"addresses":{"%s":"%s"},"healthy":%s,"version":"v1"}' "$1" "$2" "$3"
}

# inode, size and mtime (nanoseconds) of a file
file_id () {
	stat -c '%i %s %.9Y' "$1"
}

test_expect_success 'publish_service --address writes available_services/SERVICE/HOST' '
	orch --hostname h1 publish_service glance --address eth0=10.0.0.5 &&
	etcdctl_get /available_services/glance/h1 >value &&
	python3 -c "
import json
v = json.load(open(\"value\"))
assert v[\"addresses\"] == {\"eth0\": \"10.0.0.5\"}, v
assert \"healthy\" in v and isinstance(v[\"healthy\"], bool), v
"
'

test_expect_success 'publish_service with several --address options and services' '
	orch --hostname h2 publish_service glance keystone --address eth0=10.0.0.6 --address eth1=192.168.1.6 &&
	for s in glance keystone; do
		etcdctl_get /available_services/$s/h2 >value &&
		python3 -c "
import json
v = json.load(open(\"value\"))
assert v[\"addresses\"] == {\"eth0\": \"10.0.0.6\", \"eth1\": \"192.168.1.6\"}, v
" || exit 1
	done
'

test_expect_success 'publish_service accepts an IPv6 address' '
	orch --hostname h6 publish_service v6svc --address eth0=fd00::6 &&
	etcdctl_json_field /available_services/v6svc/h6 addresses | grep "fd00::6" &&
	orch --hostname h6 unpublish_service v6svc
'

test_expect_success 'publish_service --ttl puts the entry under a lease of that TTL' '
	orch --hostname h3 publish_service ttlsvc --address eth0=10.0.0.3 --ttl 60 &&
	etcdctl_ttl_of /available_services/ttlsvc/h3 >ttl &&
	read remaining granted <ttl &&
	test "$granted" = 60 &&
	test "$remaining" -gt 40
'

test_expect_success 'publish_service without services takes them from the profile list file' '
	printf "nova\ncinder\n" >profile_list.txt &&
	orch --hostname h4 publish_service --address eth0=10.0.0.4 &&
	etcdctl_exists /available_services/nova/h4 &&
	etcdctl_exists /available_services/cinder/h4
'

# The profile list's one rule (local.h): "#" starts a comment anywhere on a
# line.  publish_service used to skip "glance # web" as an invalid name while
# the daemon published it as glance.
test_expect_success 'publish_service: "glance # web" in the profile list is glance' '
	printf "glance # web\n# a comment\n\n  keystone\t\r\n" >profile_list.txt &&
	orch --hostname h5 publish_service --address eth0=10.0.0.5 2>err &&
	test_must_be_empty err &&
	etcdctl_exists /available_services/glance/h5 &&
	etcdctl_exists /available_services/keystone/h5 &&
	test -z "$(etcdctl_keys /available_services/ | grep -v -e /glance/ -e /keystone/ | grep /h5\$)"
'

test_expect_success 'publish_service: an invalid line is skipped with a one-line warning naming it' '
	printf "glance web\nnova\n" >profile_list.txt &&
	orch --hostname h6 publish_service --address eth0=10.0.0.6 2>err &&
	test_one_line err &&
	grep -F "glance web" err && grep -F "ignoring" err &&
	etcdctl_exists /available_services/nova/h6 &&
	test -z "$(etcdctl_keys /available_services/ | grep -v /nova/ | grep /h6\$)"
'

test_expect_success 'unpublish_service removes the entry, keeps the others' '
	orch --hostname h4 unpublish_service nova &&
	! etcdctl_exists /available_services/nova/h4 &&
	etcdctl_exists /available_services/cinder/h4 &&
	etcdctl_exists /available_services/glance/h1
'

test_expect_success 'unpublish_service of an unpublished service exits 0' '
	orch --hostname h4 unpublish_service nova
'

test_expect_success 'setup: a known catalog written with etcdctl' '
	etcdctl_ del --prefix /available_services/ >/dev/null &&
	etcdctl_put /available_services/glance/h1 "$(svc eth0 10.0.0.5 true)" &&
	etcdctl_put /available_services/glance/h2 "$(svc eth0 10.0.0.6 false)" &&
	cat >expect.yaml <<-\EOF2
	---
	services::glance::eth0:
	- 10.0.0.5
	- 10.0.0.6
	healthy_services::glance::eth0:
	- 10.0.0.5
	EOF2
'

test_expect_success 'get_services prints the hiera YAML of orchestrate(1), byte for byte' '
	orch get_services >actual.yaml &&
	test_cmp expect.yaml actual.yaml
'

test_expect_success 'the order of publication does not change the bytes' '
	etcdctl_ del --prefix /available_services/ >/dev/null &&
	etcdctl_put /available_services/glance/h2 "$(svc eth0 10.0.0.6 false)" &&
	etcdctl_put /available_services/glance/h1 "$(svc eth0 10.0.0.5 true)" &&
	orch get_services >actual.yaml &&
	test_cmp expect.yaml actual.yaml
'

test_expect_success 'a bigger catalog is valid YAML with the right lists' '
	etcdctl_put /available_services/keystone/h3 "{\"addresses\":{\"eth0\":\"10.0.1.3\",\"eth1\":\"192.168.0.3\"},\"healthy\":true}" &&
	etcdctl_put /available_services/keystone/h2 "$(svc eth0 10.0.1.2 true)" &&
	orch get_services >big.yaml &&
	python3 -c "
import yaml
d = yaml.safe_load(open(\"big.yaml\"))
want = {
  \"services::glance::eth0\": [\"10.0.0.5\", \"10.0.0.6\"],
  \"healthy_services::glance::eth0\": [\"10.0.0.5\"],
  \"services::keystone::eth0\": [\"10.0.1.2\", \"10.0.1.3\"],
  \"healthy_services::keystone::eth0\": [\"10.0.1.2\", \"10.0.1.3\"],
  \"services::keystone::eth1\": [\"192.168.0.3\"],
  \"healthy_services::keystone::eth1\": [\"192.168.0.3\"],
}
for k, v in want.items():
    assert d.get(k) == v, (k, d.get(k))
extra = [k for k in d if k not in want and d[k]]
assert not extra, extra
" &&
	etcdctl_ del --prefix /available_services/keystone/ >/dev/null
'

test_expect_success 'get_services --json is valid JSON' '
	orch --json get_services >out.json &&
	json_ok out.json &&
	grep 10.0.0.5 out.json
'

test_expect_success 'hostile catalog entries never reach the YAML, never crash' '
	etcdctl_put /available_services/glance/h7 "{\"addresses\":{\"eth0\":\"10.0.0.1\\n- evil\"},\"healthy\":true}" &&
	etcdctl_put "/available_services/x/../../current_version" "$(svc eth0 10.6.6.6 true)" &&
	etcdctl_put "/available_services/glance/../../current_version" "$(svc eth0 10.6.6.7 true)" &&
	etcdctl_put /available_services/glance/h8/extra "$(svc eth0 10.6.6.8 true)" &&
	etcdctl_put /available_services/glance/h9 "not json" &&
	etcdctl_put /available_services/glance/h10 "" &&
	etcdctl_put /available_services/glance/h11 "{\"addresses\":\"10.6.6.11\"}" &&
	etcdctl_put /available_services/glance/h12 "{\"addresses\":{\"eth0\":12}}" &&
	etcdctl_put /available_services/glance/h13 "$(svc eth0 999.6.6.13 true)" &&
	etcdctl_put /available_services/glance/h14 "$(svc eth0 "10.6.6.14: x" true)" &&
	etcdctl_put /available_services/glance/h15 "[1,2,3]" &&
	etcdctl_put "/available_services/gl ance/h16" "$(svc eth0 10.6.6.16 true)" &&
	etcdctl_put "/available_services/glance/h 17" "$(svc eth0 10.6.6.17 true)" &&
	etcdctl_put /available_services/glance/h18 "{\"addresses\":{\"eth0\":\"10.6.6.18\"},\"healthy\":true" &&
	orch get_services >actual.yaml 2>err &&
	test_cmp expect.yaml actual.yaml &&
	! grep -e evil -e 10.6.6 actual.yaml
'

test_expect_success 'cache_services --output writes the file (0644 when new)' '
	mkdir cache &&
	orch cache_services --output cache/services.yaml &&
	test_cmp expect.yaml cache/services.yaml &&
	test "$(stat -c %a cache/services.yaml)" = 644
'

test_expect_success 'an unchanged catalog does not rewrite the file' '
	file_id cache/services.yaml >id.before &&
	orch cache_services --output cache/services.yaml &&
	file_id cache/services.yaml >id.after &&
	test_cmp id.before id.after
'

test_expect_success 'no temporary file is left behind' '
	ls -A cache >actual &&
	echo services.yaml >expect &&
	test_cmp expect actual
'

test_expect_success 'a catalog change rewrites the file' '
	etcdctl_put /available_services/glance/h3 "$(svc eth0 10.0.0.7 true)" &&
	orch cache_services --output cache/services.yaml &&
	grep -x -e "- 10.0.0.7" cache/services.yaml &&
	orch get_services >expect2.yaml &&
	test_cmp expect2.yaml cache/services.yaml
'

test_expect_success 'the mode of an existing file is kept' '
	chmod 0600 cache/services.yaml &&
	etcdctl_del /available_services/glance/h3 &&
	orch cache_services --output cache/services.yaml &&
	test_cmp expect.yaml cache/services.yaml &&
	test "$(stat -c %a cache/services.yaml)" = 600
'

test_expect_success 'cache_services without --output writes paths.hiera_services' '
	orch cache_services &&
	test_cmp expect.yaml services.yaml
'

test_expect_success 'etcd unreachable: cache_services exits 69 and keeps the old file' '
	cp cache/services.yaml saved &&
	file_id cache/services.yaml >id.before &&
	test_expect_code 69 orch --etcd "$(dead_url)" cache_services --output cache/services.yaml 2>err &&
	test_one_line err &&
	test_cmp saved cache/services.yaml &&
	file_id cache/services.yaml >id.after &&
	test_cmp id.before id.after
'

test_expect_success 'etcd stopped: cache_services fails and keeps the old file' '
	cp cache/services.yaml saved &&
	stop_etcd &&
	test_must_fail orch --timeout 2 cache_services --output cache/services.yaml && rc=0 || rc=1
	restart_etcd &&
	test $rc = 0 &&
	test_cmp saved cache/services.yaml
'

test_expect_success 'cache_services into a missing directory fails cleanly' '
	test_must_fail orch cache_services --output nodir/services.yaml 2>err &&
	test -s err &&
	! test -e nodir
'

test_expect_success 'an empty catalog is written as a valid YAML document' '
	orch --prefix /nothing cache_services --output empty.yaml &&
	python3 -c "
import yaml
d = yaml.safe_load(open(\"empty.yaml\"))
assert not d, d
"
'

# --- wait_for_service ----------------------------------------------------------

test_expect_success 'wait_for_service returns 0 at once when enough hosts publish' '
	start=$(now_ms) &&
	orch wait_for_service glance --count 2 --timeout 10 &&
	end=$(now_ms) &&
	test $((end - start)) -lt 5000
'

test_expect_success 'wait_for_service --count 3 is released by a background publish' '
	( sleep 1; orch --hostname h20 publish_service glance --address eth0=10.0.0.20 ) &
	start=$(now_ms) &&
	orch wait_for_service glance --count 3 --timeout 10 &&
	end=$(now_ms) &&
	echo "took $((end - start)) ms" &&
	test $((end - start)) -lt 8000 &&
	wait
'

test_expect_success 'wait_for_service --healthy counts only healthy hosts' '
	orch wait_for_service glance --count 1 --healthy --timeout 5 &&
	etcdctl_put /available_services/glance/h20 "$(svc eth0 10.0.0.20 false)" &&
	test_expect_code 1 orch wait_for_service glance --count 2 --healthy --timeout 1
'

test_expect_success 'wait_for_service --healthy is released when a host becomes healthy' '
	( sleep 1; etcdctl_put /available_services/glance/h2 "$(svc eth0 10.0.0.6 true)" ) &
	start=$(now_ms) &&
	orch wait_for_service glance --count 2 --healthy --timeout 10 &&
	end=$(now_ms) &&
	test $((end - start)) -lt 8000 &&
	wait
'

test_expect_success 'wait_for_service times out with 1 and a message naming the service' '
	start=$(now_ms) &&
	test_expect_code 1 orch wait_for_service nosuchsvc --timeout 1 >out 2>err &&
	end=$(now_ms) &&
	test $((end - start)) -ge 900 &&
	test $((end - start)) -lt 6000 &&
	cat out err | grep nosuchsvc
'

test_expect_success 'hostile entries do not count as hosts' '
	test_expect_code 1 orch wait_for_service x --timeout 1 &&
	test_expect_code 1 orch wait_for_service glance --count 20 --timeout 1
'

test_done
