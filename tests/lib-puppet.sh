# lib-puppet.sh — helpers for the Puppet module tests (t06NN-puppet-*.sh),
# sourced after test-lib.sh and before start_etcd (it may skip the script).
#
# The module in contrib/puppet is put on a private module path under its name
# (modules/orchestrate), and every Puppet directory (conf, var, code, ssl,
# logs, run, public) lives in the trash directory, so that no run reads or
# writes /etc/puppet or /var/lib/puppet.  Facter's complaints about a
# container (/proc/1/environ) may appear on stderr: the tests assert on what
# matters, not on a clean stderr.

command -v puppet >/dev/null 2>&1 ||
	skip_all "puppet is not installed (Debian: apt-get install puppet)"

PUPPET_HOME="$TRASH/puppet"
PUPPET_MODULES="$PUPPET_HOME/modules"
mkdir -p "$PUPPET_MODULES" "$PUPPET_HOME/conf" "$PUPPET_HOME/code"
ln -s "$REPO_ROOT/contrib/puppet" "$PUPPET_MODULES/orchestrate"
export PUPPET_HOME PUPPET_MODULES

# puppet_apply ARGS… MANIFEST  — a quiet puppet apply with --detailed-exitcodes
# (0 no change, 2 changes, 1/4/6 failures) on the private directories.
puppet_apply () {
	puppet apply --detailed-exitcodes --color=false \
		--modulepath "$PUPPET_MODULES" \
		--confdir "$PUPPET_HOME/conf" --codedir "$PUPPET_HOME/code" \
		--vardir "$PUPPET_HOME/var" --ssldir "$PUPPET_HOME/ssl" \
		--logdir "$PUPPET_HOME/log" --rundir "$PUPPET_HOME/run" \
		--publicdir "$PUPPET_HOME/public" \
		--hiera_config "${PUPPET_HIERA_CONFIG:-$PUPPET_HOME/conf/hiera.yaml}" \
		"$@"
}
