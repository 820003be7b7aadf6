#!/bin/sh
test_description='puppet: a daemon whose config hook is a real puppet apply converges to a version'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
test_have_orchestrated
. "$TEST_DIRECTORY/lib-puppet.sh"
. "$TEST_DIRECTORY/lib-daemon.sh"
start_etcd

# n1 is a stub node of lib-daemon.sh whose config hook is replaced by a real
# Puppet run of site.pp (what hooks/config does, on the private directories),
# and whose profiles come from orchestrate::profile files.
node_setup n1
sed -i "s|^node:\$|node:\n  profile_dir: $TRASH/n1/profiles.d|" n1/orchestrate.yaml

cat >site.pp <<EOF
orchestrate::profile { 'web': dir => '$TRASH/n1/profiles.d' }
file { '$TRASH/n1/motd':
  content => "configured by puppet for version \${facts['orchestrate_version']}\n",
}
EOF

# The hook runs in the daemon's clean environment: everything it needs is
# written in here.
cat >n1/hooks/config <<EOF
#!/bin/sh
FACTER_orchestrate_version=\${ORCHESTRATE_VERSION:-}
HOME="$PUPPET_HOME"
export FACTER_orchestrate_version HOME
echo "config \$ORCHESTRATE_VERSION" >>"$TRASH/n1/config.count"
exec puppet apply --detailed-exitcodes --color=false \\
	--modulepath "$PUPPET_MODULES" \\
	--confdir "$PUPPET_HOME/conf" --codedir "$PUPPET_HOME/code" \\
	--vardir "$PUPPET_HOME/var" --ssldir "$PUPPET_HOME/ssl" \\
	--logdir "$PUPPET_HOME/log" --rundir "$PUPPET_HOME/run" \\
	--publicdir "$PUPPET_HOME/public" \\
	--hiera_config "$PUPPET_HOME/conf/hiera.yaml" \\
	"$TRASH/site.pp"
EOF

test_expect_success 'the node registers and runs nothing before a version is wanted' '
	orchestrated --check-config --config n1/orchestrate.yaml &&
	start_node n1 &&
	test ! -e n1/motd
'

test_expect_success 'trigger_update v1: puppet applies the manifest and the node reaches v1' '
	orch trigger_update v1 &&
	orch verify_hosts --wait 60 v1 n1 &&
	cat n1/log &&
	test "$(cat n1/motd)" = "configured by puppet for version v1" &&
	test "$(cat n1/current_version)" = v1 &&
	status_is n1 puppet success && status_is n1 validation success &&
	test "$(count_lines n1/config.count)" = 1
'

test_expect_success 'the profile declared in the manifest is published by the daemon' '
	test -f n1/profiles.d/web &&
	wait_for "etcdctl_get /available_services/web/n1 | grep -q \"\\\"healthy\\\":true\"" 10
'

stop_all_nodes
test_done
