#!/bin/bash
#
# The desired version: trigger_update, --if-current, rollback, current_version,
# and the refusal of invalid version names before anything is written.

test_description='trigger_update, rollback, current_version'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
start_etcd

test_expect_success 'current_version exits 1 when none is set' '
	test_expect_code 1 orch current_version >out &&
	test_must_be_empty out
'

test_expect_success 'rollback exits 1 when there is nothing to roll back to' '
	etcdctl_dump >before &&
	test_expect_code 1 orch rollback &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_expect_success 'trigger_update sets current_version' '
	orch trigger_update v1 &&
	test "$(etcdctl_get /current_version)" = v1
'

test_expect_success 'current_version prints it' '
	echo v1 >expect &&
	orch current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'trigger_update moves the old version to previous_version' '
	orch trigger_update v2 &&
	test "$(etcdctl_get /current_version)" = v2 &&
	test "$(etcdctl_get /previous_version)" = v1
'

test_expect_success 'triggering the same version twice keeps previous_version' '
	orch trigger_update v2 &&
	test "$(etcdctl_get /current_version)" = v2 &&
	test "$(etcdctl_get /previous_version)" = v1
'

test_expect_success 'current_version and previous_version change in one revision' '
	orch trigger_update v3 &&
	etcdctl_ get -w json /current_version >cur.json &&
	etcdctl_ get -w json /previous_version >prev.json &&
	c=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])" <cur.json) &&
	p=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])" <prev.json) &&
	test "$c" = "$p" &&
	test "$(etcdctl_get /previous_version)" = v2
'

test_expect_success '--if-current that matches sets the version' '
	orch trigger_update v4 --if-current v3 &&
	test "$(etcdctl_get /current_version)" = v4 &&
	test "$(etcdctl_get /previous_version)" = v3
'

test_expect_success '--if-current that does not match exits 1 and writes nothing' '
	etcdctl_dump >before &&
	test_expect_code 1 orch trigger_update v5 --if-current v3 &&
	etcdctl_dump >after &&
	test_cmp before after &&
	test "$(etcdctl_get /current_version)" = v4
'

test_expect_success '--if-current sees a value written by someone else' '
	etcdctl_put /current_version v9 &&
	test_expect_code 1 orch trigger_update v10 --if-current v4 &&
	test "$(etcdctl_get /current_version)" = v9 &&
	orch trigger_update v10 --if-current v9 &&
	test "$(etcdctl_get /current_version)" = v10
'

test_expect_success 'concurrent --if-current: exactly one of eight wins' '
	orch trigger_update race0 &&
	for i in 1 2 3 4 5 6 7 8; do
		{ orch trigger_update race$i --if-current race0; echo $? >rc.$i; } &
	done &&
	wait &&
	cat rc.* | sort | uniq -c >counts &&
	cat counts &&
	test "$(cat rc.* | grep -c "^0\$")" = 1 &&
	test "$(cat rc.* | grep -c "^1\$")" = 7 &&
	test "$(etcdctl_get /previous_version)" = race0 &&
	winner=$(etcdctl_get /current_version) &&
	grep -l "^0\$" rc.* >won &&
	test "rc.${winner#race}" = "$(cat won)"
'

test_expect_success 'current_version reads a value written by etcdctl' '
	etcdctl_put /current_version 2024.06.01-r3 &&
	echo 2024.06.01-r3 >expect &&
	orch current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'rollback sets current_version to previous_version' '
	etcdctl_put /current_version v2 &&
	etcdctl_put /previous_version v1 &&
	orch rollback &&
	test "$(etcdctl_get /current_version)" = v1 &&
	echo v1 >expect &&
	orch current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'rollback writes current and previous in one revision' '
	etcdctl_put /current_version v7 &&
	etcdctl_put /previous_version v6 &&
	orch rollback &&
	etcdctl_ get -w json /current_version >cur.json &&
	etcdctl_ get -w json /previous_version >prev.json &&
	c=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])" <cur.json) &&
	p=$(python3 -c "import json,sys; print(json.load(sys.stdin)[\"kvs\"][0][\"mod_revision\"])" <prev.json) &&
	test "$c" = "$p" &&
	test "$(etcdctl_get /current_version)" = v6
'

test_expect_success 'current_version --json is valid JSON holding the version' '
	etcdctl_put /current_version v8 &&
	orch --json current_version >out.json &&
	json_ok out.json &&
	grep "\"v8\"" out.json
'

test_expect_success 'current_version --json when none is set: exit 1, still JSON' '
	etcdctl_del /current_version &&
	test_expect_code 1 orch --json current_version >out.json &&
	json_ok out.json
'

test_expect_success 'a 253-byte version is accepted' '
	v=$(printf "%0253d" 7) &&
	orch trigger_update "$v" &&
	test "$(etcdctl_get /current_version)" = "$v"
'

test_expect_success 'every allowed character is accepted in a version' '
	orch trigger_update "Az09._:@+-x" &&
	test "$(etcdctl_get /current_version)" = "Az09._:@+-x"
'

long=$(printf "%0254d" 7)
for bad in '../x' '' "$long" 'a b' '.' '..' 'a/b' '/x' 'v1
v2' 'caf€' 'x*' 'a,b'; do
	show=$(printf '%s' "$bad" | head -c 20 | tr '\n' '|')
	test_expect_success "trigger_update refuses the invalid version '$show' with 64" '
		etcdctl_dump >before &&
		test_expect_code 64 orch trigger_update "$bad" >out 2>err &&
		test_one_line err &&
		etcdctl_dump >after &&
		test_cmp before after
	'
	test_expect_success "--if-current refuses the invalid version '$show' with 64" '
		etcdctl_dump >before &&
		test_expect_code 64 orch trigger_update v1 --if-current "$bad" 2>err &&
		test_one_line err &&
		etcdctl_dump >after &&
		test_cmp before after
	'
done

test_expect_success 'the message names the invalid version' '
	test_expect_code 64 orch trigger_update "../x" 2>err &&
	grep -F "../x" err
'

test_expect_success 'an invalid version is refused before any request (etcd down: 64 not 69)' '
	test_expect_code 64 orch --etcd "$(dead_url)" trigger_update "../x"
'

test_expect_success 'trigger_update with a prefix writes under it' '
	etcdctl_dump >before &&
	orch --prefix /fleet trigger_update p1 &&
	test "$(etcdctl_get /fleet/current_version)" = p1 &&
	echo p1 >expect &&
	orch --prefix /fleet current_version >actual &&
	test_cmp expect actual &&
	ORCHESTRATE_PREFIX=/fleet orch current_version >actual &&
	test_cmp expect actual
'

test_expect_success 'a prefix leaves the root keys alone' '
	v=$(etcdctl_get /current_version) &&
	orch --prefix /fleet trigger_update p2 &&
	test "$(etcdctl_get /current_version)" = "$v" &&
	test "$(etcdctl_get /fleet/previous_version)" = p1
'

test_expect_success 'current_version with an implausible value in etcd is an error, not an answer' '
	etcdctl_put /current_version "../../etc/passwd" &&
	test_must_fail orch current_version >out 2>err &&
	! grep -F "passwd" out
'

# The message came from comparing etcd's last error with "etcd: no error":
# after a failover that text was the dead member's, and the command said
# "connection refused" about an etcd that had answered.  fleet.c now says
# -EBADMSG for a value that is not a version, and the command says so.
test_expect_success 'an implausible current_version is named as such, also after a failover' '
	etcdctl_put /current_version "not a version" &&
	test_expect_code 69 orch --etcd "$(dead_url),$ETCD_URL" current_version >out 2>err &&
	test_must_be_empty out &&
	test_one_line err &&
	grep -F "holds no valid version" err &&
	! grep -i -e refused -e "connect" err &&
	test_expect_code 69 orch --etcd "$(dead_url),$ETCD_URL" current_version --json >out 2>err &&
	test_must_be_empty out &&
	grep -F "holds no valid version" err
'

test_expect_success 'rollback to an implausible previous_version is refused, nothing written' '
	etcdctl_put /current_version v1 &&
	etcdctl_put /previous_version "../x" &&
	etcdctl_dump >before &&
	test_must_fail orch rollback 2>err &&
	etcdctl_dump >after &&
	test_cmp before after
'

test_done
