#!/bin/sh
test_description='puppet: orchestrate::first_address and addresses read the services.yaml of cache_services'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
. "$TEST_DIRECTORY/lib-puppet.sh"
start_etcd

cat >"$PUPPET_HOME/conf/hiera.yaml" <<EOF
---
version: 5
defaults:
  datadir: $TRASH
  data_hash: yaml_data
hierarchy:
  - name: orchestrate services
    path: services.yaml
EOF

# The dotted names check that a dot is part of the key, not a dig into a hash.
cat >addresses.pp <<EOF
\$first = orchestrate::first_address('glance', 'eth0', '127.0.0.1')
\$all = orchestrate::addresses('glance', 'eth0', ['none']).join(',')
\$healthy = orchestrate::first_address('glance', 'eth0', 'nobody healthy', true)
\$dotted = orchestrate::first_address('db.main', 'eth0.100', 'no db')
file { '$TRASH/glance.conf':
  content => "first=\${first}\nall=\${all}\nhealthy=\${healthy}\ndb=\${dotted}\n",
}
EOF

test_expect_success 'the first address of two published glance hosts, and the others' '
	orch --hostname g2 publish_service glance --address eth0=10.0.0.7 &&
	orch --hostname g1 publish_service glance --address eth0=10.0.0.6 &&
	orch --hostname db1 publish_service db.main --address eth0.100=10.1.0.1 &&
	orch cache_services --output "$TRASH/services.yaml" &&
	cat services.yaml &&
	{ puppet_apply addresses.pp >out 2>&1 || rc=$?; } &&
	cat out glance.conf &&
	test "${rc:-0}" = 2 &&
	printf "first=10.0.0.6\nall=10.0.0.6,10.0.0.7\nhealthy=nobody healthy\ndb=10.1.0.1\n" >expect &&
	test_cmp expect glance.conf
'

test_expect_success 'an empty catalog compiles and gives the defaults' '
	orch --hostname g1 unpublish_service glance &&
	orch --hostname g2 unpublish_service glance &&
	orch --hostname db1 unpublish_service db.main &&
	orch cache_services --output "$TRASH/services.yaml" &&
	cat services.yaml &&
	! grep -q glance services.yaml &&
	{ puppet_apply addresses.pp >out 2>&1 || rc=$?; } &&
	cat out glance.conf &&
	test "${rc:-0}" = 2 &&
	printf "first=127.0.0.1\nall=none\nhealthy=nobody healthy\ndb=no db\n" >expect &&
	test_cmp expect glance.conf
'

test_done
