#!/bin/sh
test_description='puppet: class orchestrate renders a config file that orchestrated accepts; profiles'
. "$(dirname "$0")/test-lib.sh"
test_have_orchestrate
test_have_orchestrated
. "$TEST_DIRECTORY/lib-puppet.sh"
start_etcd

# class.pp GROUP  — the class with odd values, in mode none (no systemd here),
# and two profiles.
write_manifest () {
	cat >class.pp <<EOF
class { 'orchestrate':
  mode              => 'none',
  config_file       => '$TRASH/etc/orchestrate.yaml',
  orchestrated_path => '$REPO_ROOT/bin/orchestrated',
  orchestrate_path  => '$REPO_ROOT/bin/orchestrate',
  endpoints         => ['$ETCD_URL', 'http://127.0.0.1:1'],
  prefix            => '',
  etcd_timeout      => 3,
  token_keep        => 120,
  login_spread      => 0,
  hostname          => 'web1',
  group             => '$1',
  services          => ['always'],
  profile_list      => '$TRASH/profile_list.txt',
  profile_dir       => '$TRASH/profiles.d',
  addresses         => { 'eth0' => '10.0.0.5' },
  depends           => [
    { 'service' => 'mysql', 'count' => 2, 'healthy' => true },
    { 'service' => 'rabbit' },
  ],
  hooks             => {
    'config'   => '$TRASH/hooks/it\'s a "config" hook #1',
    'upgrade'  => '',
    'validate' => 'C:\\\\odd\\\\path: yes',
    'timeout'  => 600,
  },
  timing            => { 'splay' => 3, 'quiet' => 0.5, 'retry_max' => 60 },
  paths             => { 'state_dir' => '$TRASH/state', 'local_version' => '$TRASH/current_version' },
}
orchestrate::profile { 'glance': dir => '$TRASH/profiles.d' }
orchestrate::profile { 'nova-api': dir => '$TRASH/profiles.d' }
EOF
}

test_expect_success 'the class writes a config that orchestrated --check-config accepts' '
	write_manifest dc1 &&
	mkdir -p profiles.d && echo stale >profiles.d/retired &&
	{ puppet_apply class.pp >out 2>&1 || rc=$?; } &&
	cat out etc/orchestrate.yaml &&
	test "${rc:-0}" = 2 &&
	orchestrated --check-config --config etc/orchestrate.yaml >check &&
	grep -qx "configuration OK" check &&
	grep -qx "  group: \"dc1\"" etc/orchestrate.yaml &&
	grep -qx "  endpoints: \[\"$ETCD_URL\", \"http://127.0.0.1:1\"\]" etc/orchestrate.yaml &&
	grep -qx "    - {service: \"mysql\", count: 2, healthy: true}" etc/orchestrate.yaml &&
	grep -qx "  quiet: 0.5" etc/orchestrate.yaml &&
	grep -qx "  token_keep: 120" etc/orchestrate.yaml &&
	grep -qx "  login_spread: 0" etc/orchestrate.yaml &&
	grep -qx "  timeout: 600" etc/orchestrate.yaml &&
	grep -qxF "  config: \"$TRASH/hooks/it'"'"'s a \\\"config\\\" hook #1\"" etc/orchestrate.yaml &&
	grep -qxF "  validate: \"C:\\\\odd\\\\path: yes\"" etc/orchestrate.yaml
'

test_expect_success 'use_puppet_certs: the agent'"'"'s CA, certificate and key in etcd.cacert, cert, key' '
	cat >certs.pp <<-EOF &&
	class { "orchestrate":
	  mode              => "none",
	  config_file       => "$TRASH/etc-certs/orchestrate.yaml",
	  validate_config   => false,
	  manage_profile_dir => false,
	  orchestrated_path => "$REPO_ROOT/bin/orchestrated",
	  orchestrate_path  => "$REPO_ROOT/bin/orchestrate",
	  use_puppet_certs  => true,
	  key               => "$TRASH/explicit.key",
	}
	EOF
	{ puppet_apply --certname web1.example.com certs.pp >out 2>&1 || rc=$?; } &&
	cat out etc-certs/orchestrate.yaml &&
	test "${rc:-0}" = 2 &&
	grep -qx "  cacert: \"$PUPPET_HOME/ssl/certs/ca.pem\"" etc-certs/orchestrate.yaml &&
	grep -qx "  cert: \"$PUPPET_HOME/ssl/certs/web1.example.com.pem\"" etc-certs/orchestrate.yaml &&
	grep -qx "  key: \"$TRASH/explicit.key\"" etc-certs/orchestrate.yaml &&
	sed -i -e "/use_puppet_certs/d" -e "/explicit.key/d" certs.pp &&
	{ puppet_apply --certname web1.example.com certs.pp >out 2>&1 || rc=$?; } &&
	! grep -q "cert" etc-certs/orchestrate.yaml
'

test_expect_success 'each profile is a file named after its service; undeclared ones are purged' '
	ls profiles.d >names &&
	printf "glance\nnova-api\n" >expect &&
	test_cmp expect names
'

test_expect_success 'publish_service with the rendered config publishes the profiles' '
	orchestrate --config etc/orchestrate.yaml publish_service &&
	for s in always glance nova-api; do
		etcdctl_get /available_services/$s/web1 | grep -q "10.0.0.5" || exit 1
	done
'

test_expect_success 'a value orchestrated refuses fails the file resource and keeps the old file' '
	cp etc/orchestrate.yaml before &&
	write_manifest "bad/group" &&
	{ puppet_apply class.pp >out 2>&1 || rc=$?; } &&
	cat out &&
	case "${rc:-0}" in 4|6) ;; *) echo "puppet exited ${rc:-0}, wanted 4 or 6"; false ;; esac &&
	grep -q "node.group" out &&
	test_cmp before etc/orchestrate.yaml
'

test_done
