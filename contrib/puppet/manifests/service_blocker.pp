# @summary Blocks the resources that depend on it until enough hosts publish a
#   service in orchestrate's catalog.
#
# It is one exec of `orchestrate wait_for_service SERVICE --count N
# [--healthy] --timeout S`, which follows an etcd watch (no polling) and exits
# as soon as COUNT hosts publish SERVICE (healthy ones with healthy => true).
# When the catalog already holds them, the `unless` check (the same command
# with --timeout 0) succeeds and the exec does not run: a converged node
# reports no change.  When time runs out, the exec fails with the command's
# message on stderr, "timed out waiting for N hosts of SERVICE, saw M", which
# Puppet logs (logoutput => on_failure), and every resource that requires the
# blocker is skipped for this run.
#
# The orchestrated daemon usually makes the wait unnecessary (node.depends
# holds a config run back until the services exist); the blocker is for the
# resources of a run that must wait themselves.
#
# @example Start the application only when a database is up
#   orchestrate::service_blocker { 'mysql':
#     count   => 1,
#     healthy => true,
#     timeout => 600,
#   }
#   -> service { 'myapp': ensure => running }
#
# @param service
#   The service to wait for (a name as in orchestrate(1)); defaults to the title.
# @param count
#   How many hosts must publish it.
# @param healthy
#   Count only hosts whose validation succeeded.
# @param timeout
#   Seconds to wait before the resource fails.
# @param tries
#   How many times Puppet runs the wait before it gives up (exec's tries).
# @param try_sleep
#   Seconds between tries (exec's try_sleep).
# @param config
#   The orchestrate config file, for the etcd connection settings; undef: the
#   command's default, /etc/orchestrate/orchestrate.yaml, which may be absent
#   (an explicit --config must exist).
# @param etcd
#   etcd endpoints (URLs); undef: from the config file.
# @param prefix
#   The key prefix; undef: from the config file.
# @param cacert
#   CA certificate for https endpoints; undef: from the config file.
# @param cert
#   Client certificate; undef: from the config file.
# @param key
#   Client key; undef: from the config file.
# @param user
#   etcd user; undef: from the config file.
# @param password_file
#   File holding that user's password; undef: from the config file.
# @param binary
#   The orchestrate command: a name looked up in path, or an absolute path.
# @param path
#   Where exec looks for binary: /usr/local/bin (make install) before /usr/bin
#   (the Debian package), so the blocker works with either install, also in the
#   run that installs the package.
define orchestrate::service_blocker (
  String[1] $service = $title,
  Integer[1] $count = 1,
  Boolean $healthy = false,
  Integer[0] $timeout = 300,
  Integer[1] $tries = 1,
  Integer[0] $try_sleep = 0,
  Optional[String[1]] $config = undef,
  Optional[Variant[String[1], Array[String[1], 1]]] $etcd = undef,
  Optional[String] $prefix = undef,
  Optional[String[1]] $cacert = undef,
  Optional[String[1]] $cert = undef,
  Optional[String[1]] $key = undef,
  Optional[String[1]] $user = undef,
  Optional[String[1]] $password_file = undef,
  String[1] $binary = 'orchestrate',
  Array[String[1]] $path = ['/usr/local/bin', '/usr/bin', '/bin'],
) {
  unless $service =~ /\A[A-Za-z0-9._:@+-]{1,253}\z/ and !($service in ['.', '..']) {
    fail("orchestrate::service_blocker[${title}]: invalid service name '${service}'")
  }
  $global = orchestrate::connection_args({
    'config'        => $config,
    'etcd'          => $etcd,
    'prefix'        => $prefix,
    'cacert'        => $cacert,
    'cert'          => $cert,
    'key'           => $key,
    'user'          => $user,
    'password_file' => $password_file,
  })
  $what = ['wait_for_service', $service, '--count', String($count)] + ($healthy ? {
    true    => ['--healthy'],
    default => [],
  })

  exec { "orchestrate wait_for_service ${title}":
    command   => [$binary] + $global + $what + ['--timeout', String($timeout)],
    # An array of commands, each one an argument vector.
    unless    => [[$binary] + $global + $what + ['--timeout', '0']],
    # The wait blocks up to $timeout; Puppet must not cut it short.
    timeout   => $timeout + 30,
    tries     => $tries,
    try_sleep => $try_sleep,
    path      => $path,
    logoutput => 'on_failure',
  }
}
