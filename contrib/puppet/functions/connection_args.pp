# @summary The global options of the orchestrate command line that select the
#   etcd cluster, as an argument vector (no shell, so no quoting is needed).
#
# @api private
#
# Options left undef are not passed: the command then takes them from its
# config file (--config), whose defaults are those of orchestrate(1).
#
# @param options
#   A hash with any of the keys config, etcd, prefix, cacert, cert, key, user,
#   password_file, hostname, timeout.
function orchestrate::connection_args(Hash[String, Any] $options) >> Array[String] {
  $flags = {
    'config'        => '--config',
    'etcd'          => '--etcd',
    'prefix'        => '--prefix',
    'cacert'        => '--cacert',
    'cert'          => '--cert',
    'key'           => '--key',
    'user'          => '--user',
    'password_file' => '--password-file',
    'hostname'      => '--hostname',
    'timeout'       => '--timeout',
  }
  $flags.map |$name, $flag| {
    $value = $options[$name]
    $value ? {
      Undef   => [],
      Array   => [$flag, $value.join(',')],
      default => [$flag, String($value)],
    }
  }.flatten
}
