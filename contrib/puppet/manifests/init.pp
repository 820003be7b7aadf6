# @summary Configures and runs orchestrated, the orchestrate node daemon.
#
# Renders the config file (orchestrate.conf(5)) from the parameters, checks it
# with `orchestrated --check-config` before it replaces the old one (a bad
# value fails this resource and leaves the running daemon's file alone), and
# runs the daemon: as a systemd service restarted when the file changes
# (mode daemon), or from cron (mode cron: `orchestrate pending_update &&
# orchestrated --once` every few minutes, the daemon's service stopped), or
# not at all (mode none: only the file, e.g. in a container without systemd).
#
# Every parameter left undef (or empty) leaves the key out of the file, so the
# daemon's own default applies.
#
# @example A node of datacenter dc1 that waits for a healthy database
#   class { 'orchestrate':
#     endpoints => ['https://etcd1:2379', 'https://etcd2:2379'],
#     cacert    => '/etc/orchestrate/ca.pem',
#     group     => 'dc1',
#     depends   => [{ 'service' => 'mysql', 'count' => 1, 'healthy' => true }],
#   }
#
# @param endpoints etcd.endpoints: URLs of the etcd cluster.
# @param prefix etcd.prefix: the key prefix.
# @param cacert etcd.cacert.
# @param cert etcd.cert.
# @param key etcd.key.
# @param use_puppet_certs
#   Fill cacert, cert and key (those left undef) from the agent's own SSL
#   files: $settings::localcacert, $settings::hostcert and
#   $settings::hostprivkey, so the daemon connects to an etcd that serves a
#   certificate of the Puppet CA and asks for client certificates
#   (--client-cert-auth --trusted-ca-file = the Puppet CA).  Off by default.
#   The agent's certificate has the certname as CN, and with etcd auth enabled
#   etcd's JSON gateway refuses every request over a certificate with a CN:
#   use it with etcd auth off, or see the module README for per-host
#   identities.
# @param user etcd.user.
# @param password_file etcd.password_file.
# @param etcd_timeout etcd.timeout: seconds per request.
# @param token_keep etcd.token_keep: seconds an idle daemon lets its token go
#   unused (below etcd's --auth-token-ttl; a JWT is renewed before it
#   expires instead; 0 keeps nothing).
# @param login_spread etcd.login_spread: seconds over which the fleet logs in
#   again after an etcd member restarted (sized to the fleet; 0: at once).
# @param hostname node.hostname (default: the system's host name).
# @param group node.group: the rollout group (e.g. a datacenter).
# @param services node.services: services this node always offers.
# @param profile_list node.profile_list.
# @param profile_dir node.profile_dir, where orchestrate::profile declares services.
# @param addresses node.addresses: interface => address to publish.
# @param depends node.depends: services that must exist before a config run.
# @param hooks
#   The hooks section: upgrade, config, validate, services (paths of
#   executables; '' disables one), timeout (seconds) and daemon_user (the
#   user the daemon runs as, whom alone the hook runner serves; default
#   orchestrate).  The config file and its directory are made root's: the
#   runner runs nothing from a file anyone else may write.
# @param timing
#   The timing section: lease_ttl, once_ttl, splay, quiet, quiet_max,
#   retry_min, retry_max, watch_idle.
# @param paths
#   The paths section: local_version, hiera_services, state_dir, metrics_file.
#   The daemon runs as its own user and writes /var/lib/orchestrate alone
#   (the local version in current_version, the hiera file in
#   hiera/services.yaml): a path elsewhere needs its directory given to it.
# @param mode daemon, cron or none (see above).
# @param config_file Where the config file goes.
# @param manage_config_dir Create the directory of config_file.
# @param validate_config Check the file with `orchestrated --check-config` before installing it.
# @param manage_profile_dir Manage profile_dir (a directory).
# @param purge_profiles Remove from profile_dir the files no orchestrate::profile declares.
# @param manage_package Install the package (the binaries may come from elsewhere).
# @param package_name The package.
# @param package_ensure Its ensure.
# @param service_name The systemd unit.
# @param orchestrate_path
#   The orchestrate command; undef: where the fact orchestrate_paths found it
#   (/usr/local/bin before /usr/bin), else /usr/bin/orchestrate, where the
#   package (manage_package) puts it.
# @param orchestrated_path
#   The orchestrated command; undef: likewise, in /usr/local/sbin or
#   /usr/sbin, else /usr/sbin/orchestrated.
# @param cron_file The cron.d file of mode cron.
# @param cron_minute The minute field of that cron entry.
class orchestrate (
  Array[String[1]] $endpoints = [],
  Optional[String] $prefix = undef,
  Optional[String[1]] $cacert = undef,
  Optional[String[1]] $cert = undef,
  Optional[String[1]] $key = undef,
  Boolean $use_puppet_certs = false,
  Optional[String[1]] $user = undef,
  Optional[String[1]] $password_file = undef,
  Optional[Integer[1]] $etcd_timeout = undef,
  Optional[Integer[0]] $token_keep = undef,
  Optional[Integer[0]] $login_spread = undef,
  Optional[String[1]] $hostname = undef,
  Optional[String[1]] $group = undef,
  Array[String[1]] $services = [],
  Optional[String[1]] $profile_list = undef,
  String[1] $profile_dir = '/var/lib/puppet/orchestrate_profiles.d',
  Hash[String[1], String[1]] $addresses = {},
  Array[Struct[{
    service           => String[1],
    Optional[count]   => Integer[1],
    Optional[healthy] => Boolean,
  }]] $depends = [],
  Hash[Enum['upgrade', 'config', 'validate', 'services', 'timeout', 'daemon_user'], Variant[String, Integer[1]]] $hooks = {},
  Hash[Enum['lease_ttl', 'once_ttl', 'splay', 'quiet', 'quiet_max', 'retry_min', 'retry_max', 'watch_idle'], Numeric] $timing = {},
  Hash[Enum['local_version', 'hiera_services', 'state_dir', 'metrics_file'], String[1]] $paths = {},
  Enum['daemon', 'cron', 'none'] $mode = 'daemon',
  String[1] $config_file = '/etc/orchestrate/orchestrate.yaml',
  Boolean $manage_config_dir = true,
  Boolean $validate_config = true,
  Boolean $manage_profile_dir = true,
  Boolean $purge_profiles = true,
  Boolean $manage_package = false,
  String[1] $package_name = 'orchestrate',
  String[1] $package_ensure = 'installed',
  String[1] $service_name = 'orchestrated',
  Optional[String[1]] $orchestrate_path = undef,
  Optional[String[1]] $orchestrated_path = undef,
  String[1] $cron_file = '/etc/cron.d/orchestrate',
  String[1] $cron_minute = '*/5',
) {
  # The fact is read before the run: on the run that installs the package it
  # has nothing yet, and the package's paths are the right guess.
  $orchestrate_cmd = $orchestrate_path.lest || {
    $facts.dig('orchestrate_paths', 'orchestrate').lest || { '/usr/bin/orchestrate' }
  }
  $orchestrated_cmd = $orchestrated_path.lest || {
    $facts.dig('orchestrate_paths', 'orchestrated').lest || { '/usr/sbin/orchestrated' }
  }

  if $use_puppet_certs {
    $etcd_cacert = $cacert.lest || { $settings::localcacert }
    $etcd_cert = $cert.lest || { $settings::hostcert }
    $etcd_key = $key.lest || { $settings::hostprivkey }
  } else {
    $etcd_cacert = $cacert
    $etcd_cert = $cert
    $etcd_key = $key
  }

  $content = epp('orchestrate/orchestrate.yaml.epp', {
    'etcd'   => {
      'endpoints'     => $endpoints.empty ? { true => undef, default => $endpoints },
      'prefix'        => $prefix,
      'cacert'        => $etcd_cacert,
      'cert'          => $etcd_cert,
      'key'           => $etcd_key,
      'user'          => $user,
      'password_file' => $password_file,
      'timeout'       => $etcd_timeout,
      'token_keep'    => $token_keep,
      'login_spread'  => $login_spread,
    },
    'node'   => {
      'hostname'     => $hostname,
      'group'        => $group,
      'services'     => $services.empty ? { true => undef, default => $services },
      'profile_list' => $profile_list,
      'profile_dir'  => $profile_dir,
      'addresses'    => $addresses.empty ? { true => undef, default => $addresses },
      'depends'      => $depends.empty ? { true => undef, default => $depends },
    },
    'paths'  => $paths,
    'hooks'  => $hooks,
    'timing' => $timing,
  })

  if $manage_package {
    package { $package_name:
      ensure => $package_ensure,
      before => File[$config_file],
    }
  }

  if $manage_config_dir {
    $config_dir = $config_file.regsubst(/\/[^\/]*\z/, '')
    # Root's alone: the hook runner runs nothing from a file or directory
    # anyone else may write.
    file { $config_dir:
      ensure => directory,
      owner  => 'root',
      group  => 'root',
      mode   => '0755',
    }
  }

  file { $config_file:
    ensure       => file,
    content      => $content,
    owner        => 'root',
    group        => 'root',
    # It may hold the etcd user name and paths of secrets, not the secrets.
    mode         => '0644',
    validate_cmd => $validate_config ? {
      true    => "${orchestrated_cmd} --check-config --config %",
      default => undef,
    },
  }

  if $manage_profile_dir {
    file { $profile_dir:
      ensure  => directory,
      mode    => '0755',
      recurse => $purge_profiles,
      purge   => $purge_profiles,
      force   => $purge_profiles,
    }
  }

  case $mode {
    'daemon': {
      service { $service_name:
        ensure    => running,
        enable    => true,
        subscribe => File[$config_file],
      }
      file { $cron_file:
        ensure => absent,
      }
    }
    'cron': {
      service { $service_name:
        ensure => stopped,
        enable => false,
      }
      file { $cron_file:
        ensure  => file,
        mode    => '0644',
        content => @("CRON"),
          # Managed by Puppet (class orchestrate, mode cron).
          ${cron_minute} * * * * root ${orchestrate_cmd} --config ${config_file} pending_update >/dev/null && ${orchestrated_cmd} --once --config ${config_file}
          | CRON
        require => File[$config_file],
      }
    }
    default: {}
  }
}
