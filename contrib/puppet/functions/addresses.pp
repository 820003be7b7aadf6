# @summary The addresses of the hosts that publish a service, on one interface,
#   from the catalog that orchestrate renders for hiera.
#
# Reads the key `services::SERVICE::IFACE` (or `healthy_services::...` when
# healthy is true) of the services.yaml written by orchestrated or
# `orchestrate cache_services`: a sorted list of addresses.  Until some host
# publishes the service the key does not exist and the default is returned,
# so a manifest compiles before its peers exist (no compile-failure deadlock);
# the daemon runs Puppet again (the services hook) when the catalog changes.
#
# @example
#   $glance = orchestrate::addresses('glance', 'eth0')
#   $mysql  = orchestrate::addresses('mysql', 'eth0', ['127.0.0.1'], true)
#
# @param service
#   The service.
# @param iface
#   The interface name under which hosts publish their address.
# @param default
#   Returned when nothing is published yet.
# @param healthy
#   Only hosts whose validation succeeded.
function orchestrate::addresses(
  String[1] $service,
  String[1] $iface,
  Array[String] $default = [],
  Boolean $healthy = false,
) >> Array[String] {
  $base = $healthy ? {
    true    => 'healthy_services',
    default => 'services',
  }
  $key = "${base}::${service}::${iface}"
  # A dot in a lookup key means "dig into a hash": quote a key holding one,
  # since names may contain dots (eth0.100, db.example).
  $lookup_key = $key ? {
    /\./    => "\"${key}\"",
    default => $key,
  }
  lookup($lookup_key, Array[String], 'first', $default)
}
