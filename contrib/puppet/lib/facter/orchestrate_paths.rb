# orchestrate_paths — where this node's orchestrate commands are installed,
# so that the class orchestrate finds them whatever the install prefix:
# `make install` puts them in /usr/local/bin and /usr/local/sbin, the Debian
# package in /usr/bin and /usr/sbin.  Looked up in that order (the order of a
# PATH); a command found in neither is left out of the fact.
#
#   $facts['orchestrate_paths'] => {
#     'orchestrate'  => '/usr/bin/orchestrate',
#     'orchestrated' => '/usr/sbin/orchestrated',
#   }
Facter.add(:orchestrate_paths) do
  confine kernel: 'Linux'
  setcode do
    found = {}
    {
      'orchestrate' => ['/usr/local/bin', '/usr/bin'],
      'orchestrated' => ['/usr/local/sbin', '/usr/sbin'],
    }.each do |command, dirs|
      path = dirs.map { |d| File.join(d, command) }.find { |p| File.file?(p) && File.executable?(p) }
      found[command] = path if path
    end
    found.empty? ? nil : found
  end
end
