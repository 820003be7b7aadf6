# @summary Declares that this node offers a service, so that orchestrated
#   publishes it in the catalog.
#
# One file per service in a directory, named after the service: the daemon and
# `orchestrate publish_service` publish every file name of node.profile_dir
# (beside node.services and the profile list file of orchestrate.conf(5)).  A file per
# profile needs no concat: each declaration owns its own resource, and a
# profile removed from the catalog disappears from the directory when the
# class `orchestrate` purges it (purge_profiles, the default), so the daemon
# withdraws the service after the next config run.
#
# The directory is managed by the class `orchestrate`; without the class, the
# first profile declared creates it.
#
# @example This node serves glance
#   orchestrate::profile { 'glance': }
#
# @param service
#   The service offered (a name as in orchestrate(1)); defaults to the title.
# @param ensure
#   absent removes the declaration.
# @param dir
#   node.profile_dir of the orchestrate config.
define orchestrate::profile (
  String[1] $service = $title,
  Enum['present', 'absent'] $ensure = 'present',
  Pattern[/\A\//] $dir = '/var/lib/puppet/orchestrate_profiles.d',
) {
  unless $service =~ /\A[A-Za-z0-9._:@+-]{1,253}\z/ and !($service in ['.', '..']) {
    fail("orchestrate::profile[${title}]: invalid service name '${service}'")
  }
  if !defined(File[$dir]) {
    file { $dir:
      ensure => directory,
      mode   => '0755',
    }
  }
  file { "${dir}/${service}":
    ensure  => $ensure ? { 'present' => file, default => absent },
    content => "# declared by orchestrate::profile[${title}] in Puppet\n",
    mode    => '0644',
    tag     => ['orchestrate_services'],
  }
}
