# @summary The first address (in sorted order) of the hosts that publish a
#   service on one interface, or the default while nobody does.
#
# See orchestrate::addresses for where the data comes from.
#
# @example
#   $db_host = orchestrate::first_address('mysql', 'eth0', '127.0.0.1')
#
# @param service
#   The service.
# @param iface
#   The interface name under which hosts publish their address.
# @param default
#   Returned when nothing is published yet.
# @param healthy
#   Only hosts whose validation succeeded.
function orchestrate::first_address(
  String[1] $service,
  String[1] $iface,
  Optional[String] $default = undef,
  Boolean $healthy = false,
) >> Optional[String] {
  $found = orchestrate::addresses($service, $iface, [], $healthy)
  $found.empty ? {
    true    => $default,
    default => $found[0],
  }
}
