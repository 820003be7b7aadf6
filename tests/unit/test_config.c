/*
 * test_config.c — drives config_load() and config_parse() over the fixture files
 * in tests/fixtures/config/ and over inline YAML: a file with every key, the
 * example of orchestrate.conf(5) verbatim, empty files, one file per class of error (the
 * exact one-line message is compared), and hostile input: a billion-laughs file,
 * a truncated file, binary garbage and a megabyte of nested lists.
 *
 * Run from the top of the tree (as make check does); FIXTURES overrides where
 * the fixture files are.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "etcd/etcd.h"
#include "tap.h"

static const char *fixtures = "tests/fixtures/config";

static char *fixture(const char *name)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "%s/%s", fixtures, name);
	return buf_detach(&b);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t strv_len(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

static void check_defaults(const struct config *c, const char *what)
{
	is_int(strv_len(c->endpoints), 1, "%s: one endpoint", what);
	is_str(c->endpoints[0], "http://127.0.0.1:2379", "%s: endpoint", what);
	is_str(c->prefix, "", "%s: prefix", what);
	ok(!c->cacert && !c->cert && !c->key && !c->user && !c->password_file,
	   "%s: no TLS, no auth", what);
	is_int(c->timeout, 5, "%s: timeout", what);
	is_int(c->token_keep, 240, "%s: token_keep", what);
	is_int(c->login_spread, 60, "%s: login_spread", what);
	ok(!c->hostname && !c->group, "%s: no hostname, no group", what);
	ok(c->services && !c->services[0], "%s: services empty", what);
	is_str(c->profile_list, "/var/lib/puppet/profile_list.txt", "%s: profile_list", what);
	is_str(c->profile_dir, "/var/lib/puppet/orchestrate_profiles.d", "%s: profile_dir", what);
	ok(c->n_addresses == 0 && c->n_depends == 0, "%s: no addresses, no depends", what);
	is_str(c->local_version, "/var/lib/orchestrate/current_version", "%s: local_version", what);
	is_str(c->hiera_services, "/var/lib/orchestrate/hiera/services.yaml", "%s: hiera", what);
	is_str(c->state_dir, "/var/lib/orchestrate", "%s: state_dir", what);
	ok(!c->metrics_file, "%s: no metrics", what);
	ok(!c->hook_upgrade, "%s: no upgrade hook", what);
	is_str(c->hook_config, LIBEXECDIR "/hooks/config", "%s: config hook", what);
	is_str(c->hook_validate, LIBEXECDIR "/hooks/validate", "%s: validate hook", what);
	is_str(c->hook_services, LIBEXECDIR "/hooks/services", "%s: services hook", what);
	is_int(c->hook_timeout, 3600, "%s: hook timeout", what);
	is_str(c->hook_daemon_user, "orchestrate", "%s: hooks.daemon_user", what);
	is_int(c->lease_ttl, 30, "%s: lease_ttl", what);
	is_int(c->once_ttl, 610, "%s: once_ttl", what);
	is_int(c->splay, 0, "%s: splay", what);
	ok(c->quiet == 2.0 && c->quiet_max == 10.0, "%s: quiet, quiet_max", what);
	is_int(c->retry_min, 5, "%s: retry_min", what);
	is_int(c->retry_max, 300, "%s: retry_max", what);
	is_int(c->watch_idle, 900, "%s: watch_idle", what);
}

static void test_defaults(void)
{
	_cleanup_(config_freep) struct config *c = NULL;
	is_int(config_new_default(&c), 0, "config_new_default");
	ok(c && !c->path, "defaults have no path");
	check_defaults(c, "defaults");
}

static void test_full(void)
{
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(freep) char *err = NULL;
	_cleanup_(freep) char *path = fixture("full.yaml");

	is_int(config_load(path, false, &c, &err), 0, "full.yaml loads");
	if (!c) {
		printf("# %s\n", err);
		return;
	}
	is_str(c->path, path, "path");
	is_int(strv_len(c->endpoints), 2, "two endpoints");
	is_str(c->endpoints[0], "http://10.0.0.1:2379", "endpoint 0");
	is_str(c->endpoints[1], "https://etcd2.example.com:2379", "endpoint 1");
	is_str(c->prefix, "/fleet/prod", "prefix");
	is_str(c->cacert, "/etc/orchestrate/ca.pem", "cacert");
	is_str(c->cert, "/etc/orchestrate/cert.pem", "cert");
	is_str(c->key, "/etc/orchestrate/key.pem", "key");
	is_str(c->user, "node", "user");
	is_str(c->password_file, "/etc/orchestrate/password", "password_file");
	is_int(c->timeout, 7, "timeout");
	is_int(c->token_keep, 0, "token_keep 0: kept by nothing");
	is_int(c->login_spread, 5, "login_spread");
	is_str(c->hostname, "web1.example.com", "hostname");
	is_str(c->group, "dc1", "group");
	is_int(strv_len(c->services), 2, "two services");
	is_str(c->services[0], "glance", "service 0");
	is_str(c->services[1], "keystone", "service 1");
	is_str(c->profile_list, "/srv/profile_list.txt", "profile_list");
	is_str(c->profile_dir, "/srv/profiles.d", "profile_dir");
	is_int(c->n_addresses, 2, "two addresses");
	if (c->n_addresses == 2) {
		is_str(c->addresses[0].iface, "eth0", "iface 0");
		is_str(c->addresses[0].address, "10.0.0.5", "address 0");
		is_str(c->addresses[1].iface, "eth1", "iface 1");
		is_str(c->addresses[1].address, "fd00::5", "address 1 (IPv6)");
	}
	is_int(c->n_depends, 3, "three depends");
	if (c->n_depends == 3) {
		is_str(c->depends[0].service, "mysql", "depend 0 service");
		is_int(c->depends[0].count, 2, "depend 0 count");
		ok(c->depends[0].healthy, "depend 0 healthy");
		is_str(c->depends[1].service, "rabbitmq", "depend 1 service");
		is_int(c->depends[1].count, 1, "depend 1 count defaults to 1");
		ok(!c->depends[1].healthy, "depend 1 healthy defaults to false");
		is_str(c->depends[2].service, "memcached", "depend 2 service");
		is_int(c->depends[2].count, 3, "depend 2 count");
		ok(!c->depends[2].healthy, "depend 2 healthy false");
	}
	is_str(c->local_version, "/srv/current_version", "local_version");
	is_str(c->hiera_services, "/srv/hiera/services.yaml", "hiera_services");
	is_str(c->state_dir, "/srv/state", "state_dir");
	is_str(c->metrics_file, "/srv/metrics.prom", "metrics_file");
	is_str(c->hook_upgrade, "/srv/hooks/upgrade", "upgrade hook");
	is_str(c->hook_config, "/srv/hooks/config", "config hook");
	is_str(c->hook_validate, "/srv/hooks/validate", "validate hook");
	ok(!c->hook_services, "services hook \"\" means none");
	is_int(c->hook_timeout, 1800, "hook timeout");
	is_str(c->hook_daemon_user, "orch-node", "hooks.daemon_user");
	is_int(c->lease_ttl, 60, "lease_ttl");
	is_int(c->once_ttl, 1210, "once_ttl");
	is_int(c->splay, 30, "splay");
	ok(c->quiet == 0.5, "quiet 0.5");
	ok(c->quiet_max == 20.0, "quiet_max");
	is_int(c->retry_min, 10, "retry_min");
	is_int(c->retry_max, 600, "retry_max");
	is_int(c->watch_idle, 120, "watch_idle");
}

static void test_spec_example(void)
{
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(freep) char *err = NULL;
	_cleanup_(freep) char *path = fixture("spec_example.yaml");

	is_int(config_load(path, false, &c, &err), 0, "orchestrate.conf(5) example loads");
	if (!c) {
		printf("# %s\n", err);
		return;
	}
	is_int(strv_len(c->endpoints), 2, "example: two endpoints");
	is_str(c->endpoints[1], "http://10.0.0.2:2379", "example: endpoint 1");
	is_str(c->prefix, "", "example: prefix \"\"");
	is_str(c->cacert, "/etc/orchestrate/ca.pem", "example: cacert");
	is_str(c->user, "node", "example: user");
	is_str(c->hostname, "web1", "example: hostname");
	is_str(c->group, "dc1", "example: group");
	is_int(strv_len(c->services), 1, "example: one service");
	is_int(c->n_addresses, 1, "example: one address");
	is_int(c->n_depends, 1, "example: one depend");
	if (c->n_depends == 1)
		ok(strcmp(c->depends[0].service, "mysql") == 0 && c->depends[0].count == 1 &&
			   c->depends[0].healthy,
		   "example: depends mysql 1 healthy");
	ok(!c->hook_upgrade, "example: upgrade hook \"\" is none");
	is_str(c->hook_config, "/usr/lib/orchestrate/hooks/config", "example: config hook");
	is_int(c->lease_ttl, 30, "example: lease_ttl");
	is_int(c->retry_max, 300, "example: retry_max");
	is_int(c->watch_idle, 900, "example: watch_idle default");
}

static void test_empty(void)
{
	static const char *const files[] = { "empty.yaml", "doc_only.yaml" };
	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		_cleanup_(freep) char *path = fixture(files[i]);
		is_int(config_load(path, false, &c, &err), 0, "%s loads", files[i]);
		if (c)
			check_defaults(c, files[i]);
	}

	static const char *const texts[] = { "~\n", "# only a comment\n", "---\n...\n",
					     "etcd:\nnode: ~\ntiming: null\n" };
	for (size_t i = 0; i < ELEMENTSOF(texts); i++) {
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		is_int(config_parse(texts[i], strlen(texts[i]), "t", &c, &err), 0,
		       "defaults from text %zu", i);
		if (c)
			is_int(c->lease_ttl, 30, "text %zu: lease_ttl default", i);
	}
}

static void test_missing(void)
{
	struct config *c = NULL;
	char *err = NULL;

	is_int(config_load("/nonexistent/orchestrate.yaml", true, &c, &err), 0,
	       "missing file with missing_ok: defaults");
	ok(c && !c->path && !err, "missing_ok: no path, no error");
	if (c)
		check_defaults(c, "missing_ok");
	config_free(c);

	c = NULL;
	is_int(config_load("/nonexistent/orchestrate.yaml", false, &c, &err), -ENOENT,
	       "missing file without missing_ok: -ENOENT");
	ok(!c, "no config returned");
	is_str(err, "/nonexistent/orchestrate.yaml: No such file or directory",
	       "missing file message");
	free(err);

	err = NULL;
	ok(config_load("/", true, &c, &err) < 0, "a directory is refused");
	is_str(err, "/: Is a directory", "directory message");
	free(err);
}

/* Fixture files that must be refused, and the exact message (after "DIR/"). */
static const struct {
	const char *file;
	const char *message;
} bad_files[] = {
	{ "unknown_key.yaml", "unknown_key.yaml:3: etcd.endpiont: unknown key" },
	{ "unknown_section.yaml", "unknown_section.yaml:2: timings: unknown key" },
	{ "bad_integer.yaml",
	  "bad_integer.yaml:3: timing.splay: expected a non-negative integer, got 'soon'" },
	{ "negative.yaml",
	  "negative.yaml:2: timing.splay: expected a non-negative integer, got '-1'" },
	{ "zero_lease.yaml",
	  "zero_lease.yaml:2: timing.lease_ttl: expected an integer of at least 5, got '0'" },
	{ "small_lease.yaml",
	  "small_lease.yaml:4: timing.lease_ttl: expected an integer of at least 5, got '4'" },
	{ "quiet_max.yaml",
	  "quiet_max.yaml:3: timing.quiet_max: must not be less than timing.quiet (10 < 30)" },
	{ "retry_max.yaml", "retry_max.yaml:2: timing.retry_max: must not be less than "
			    "timing.retry_min (2 < 5)" },
	{ "string_for_list.yaml", "string_for_list.yaml:2: node.services: expected a list of "
				  "service names, got 'glance'" },
	{ "duplicate_key.yaml",
	  "duplicate_key.yaml:4: etcd.prefix: duplicate key (first on line 2)" },
	{ "duplicate_section.yaml",
	  "duplicate_section.yaml:3: node: duplicate key (first on line 1)" },
	{ "multi_doc.yaml", "multi_doc.yaml:3: more than one YAML document in the file" },
	{ "top_list.yaml", "top_list.yaml:1: expected a mapping at the top level, got a list" },
	{ "top_scalar.yaml",
	  "top_scalar.yaml:1: expected a mapping at the top level, got 'just a string'" },
	{ "bad_name.yaml", "bad_name.yaml:2: node.hostname: invalid name '../current_version': "
			   "contains '/'" },
	{ "bad_endpoint.yaml", "bad_endpoint.yaml:4: etcd.endpoints[1]: invalid endpoint "
			       "'ftp://10.0.0.2:2379': the scheme is not http:// or https://" },
	{ "bad_bool.yaml",
	  "bad_bool.yaml:4: node.depends[0].healthy: expected true or false, got 'yes'" },
	{ "alias.yaml", "alias.yaml:4: node.group: anchors and aliases are not allowed" },
	{ "billion_laughs.yaml",
	  "billion_laughs.yaml:3: node.services: anchors and aliases are not allowed" },
	{ "syntax_error.yaml", "syntax_error.yaml:3: YAML syntax error: did not find expected "
			       "key while parsing a block mapping (line 1)" },
	{ "truncated.yaml", "truncated.yaml:23: node.depends[0]: YAML syntax error: did not "
			    "find expected node content while parsing a flow node (line 24)" },
	{ "garbage.bin", NULL },
};

static void test_bad_files(void)
{
	for (size_t i = 0; i < ELEMENTSOF(bad_files); i++) {
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		_cleanup_(freep) char *path = fixture(bad_files[i].file);
		_cleanup_(freep) char *want = bad_files[i].message ? fixture(bad_files[i].message)
								   : NULL;
		double t0 = now();
		int r = config_load(path, false, &c, &err);
		double dt = now() - t0;

		is_int(r, -EINVAL, "%s refused", bad_files[i].file);
		ok(!c, "%s: no config", bad_files[i].file);
		if (want)
			is_str(err, want, "%s: message", bad_files[i].file);
		else
			ok(err && strncmp(err, path, strlen(path)) == 0 && err[strlen(path)] == ':',
			   "%s: message names the file: %s", bad_files[i].file, err);
		ok(err && !strchr(err, '\n'), "%s: message is one line", bad_files[i].file);
		ok(dt < 1.0, "%s: refused in %.3f s", bad_files[i].file, dt);
	}
}

/* Inline YAML that must be refused, and the exact message. */
static const struct {
	const char *yaml;
	const char *message;
} bad_texts[] = {
	{ "etcd:\n  timeout: \"5\"\n",
	  "t:2: etcd.timeout: expected a positive integer, got '5' (a quoted string)" },
	{ "etcd:\n  timeout: 0\n", "t:2: etcd.timeout: expected a positive integer, got '0'" },
	{ "etcd:\n  token_keep: -1\n",
	  "t:2: etcd.token_keep: expected a non-negative integer, got '-1'" },
	{ "etcd:\n  login_spread: 1.5\n",
	  "t:2: etcd.login_spread: expected a non-negative integer, got '1.5'" },
	{ "etcd:\n  timeout: 5.5\n",
	  "t:2: etcd.timeout: expected a positive integer, got '5.5'" },
	{ "etcd:\n  timeout: 0x10\n",
	  "t:2: etcd.timeout: expected a positive integer, got '0x10'" },
	{ "etcd:\n  timeout: 99999999999999999999999\n",
	  "t:2: etcd.timeout: expected a positive integer no greater than 31536000, got "
	  "'99999999999999999999999'" },
	{ "timing:\n  splay: 31536001\n", "t:2: timing.splay: expected a non-negative integer "
					  "no greater than 31536000, got '31536001'" },
	{ "timing:\n  quiet: 1e3\n",
	  "t:2: timing.quiet: expected a non-negative number of seconds, got '1e3'" },
	{ "timing:\n  quiet: .5\n",
	  "t:2: timing.quiet: expected a non-negative number of seconds, got '.5'" },
	{ "timing:\n  quiet: nan\n",
	  "t:2: timing.quiet: expected a non-negative number of seconds, got 'nan'" },
	{ "timing:\n  quiet: [1]\n",
	  "t:2: timing.quiet: expected a non-negative number of seconds, got a list" },
	{ "timing:\n  watch_idle: 0\n",
	  "t:2: timing.watch_idle: expected a positive integer, got '0'" },
	{ "timing:\n  retry_min: 0\n",
	  "t:2: timing.retry_min: expected a positive integer, got '0'" },
	{ "timing:\n  once_ttl: 3\n",
	  "t:2: timing.once_ttl: expected an integer of at least 5, got '3'" },
	{ "timing:\n  quiet_max: 1\n",
	  "t:2: timing.quiet_max: must not be less than timing.quiet (1 < 2)" },
	{ "timing:\n  retry_min: 400\n",
	  "t:2: timing.retry_max: must not be less than timing.retry_min (300 < 400)" },
	{ "hooks:\n  timeout: -5\n", "t:2: hooks.timeout: expected a positive integer, got '-5'" },
	{ "hooks:\n  config: [a, b]\n", "t:2: hooks.config: expected a string, got a list" },
	{ "hooks:\n  shell: /bin/sh\n", "t:2: hooks.shell: unknown key" },
	{ "etcd: [a]\n", "t:1: etcd: expected a mapping, got a list" },
	{ "etcd: http://a\n", "t:1: etcd: expected a mapping, got 'http://a'" },
	{ "etcd:\n  endpoints: []\n", "t:2: etcd.endpoints: expected at least one endpoint" },
	{ "etcd:\n  endpoints: http://a:2379,,http://b:2379\n",
	  "t:2: etcd.endpoints: invalid endpoint '': empty" },
	/* the command line's rule (etcd_endpoint_parse()): port 99999 is refused
	 * here as it is by --etcd, not left for curl to fail on */
	{ "etcd:\n  endpoints: http://10.0.0.1:99999\n",
	  "t:2: etcd.endpoints: invalid endpoint 'http://10.0.0.1:99999': the port is not 1-65535" },
	{ "etcd:\n  endpoints: [\"ftp://10.0.0.1:2379\"]\n",
	  "t:2: etcd.endpoints[0]: invalid endpoint 'ftp://10.0.0.1:2379': the scheme is not "
	  "http:// or https://" },
	{ "etcd:\n  endpoints: http://[::1:2379\n",
	  "t:2: etcd.endpoints: invalid endpoint 'http://[::1:2379': an IPv6 address in brackets "
	  "is not closed" },
	{ "etcd:\n  endpoints: http://\n",
	  "t:2: etcd.endpoints: invalid endpoint 'http://': no host" },
	{ "etcd:\n  endpoints: {a: b}\n",
	  "t:2: etcd.endpoints: expected a URL or a list of URLs, got a mapping" },
	{ "etcd:\n  endpoints:\n  - [http://a]\n",
	  "t:3: etcd.endpoints[0]: expected a URL or a list of URLs, got a list" },
	{ "etcd:\n  prefix: a//b\n",
	  "t:2: etcd.prefix: expected a key prefix of names separated by '/', got 'a//b'" },
	{ "etcd:\n  user: \"a\\0b\"\n",
	  "t:2: etcd.user: expected a string without control characters, got 'a\\x00b' (a "
	  "quoted string)" },
	{ "paths:\n  state_dir: \"\"\n",
	  "t:2: paths.state_dir: expected a non-empty path, got '' (a quoted string)" },
	{ "node:\n  group: \"\"\n", "t:2: node.group: invalid name '': empty" },
	{ "node:\n  services: [glance, \"a b\"]\n",
	  "t:2: node.services[1]: invalid service name 'a b': contains a space" },
	{ "node:\n  services: [glance, glance]\n",
	  "t:2: node.services[1]: service listed twice" },
	{ "node:\n  services:\n    - ~\n", "t:3: node.services[0]: expected a service name, got '~'" },
	{ "node:\n  depends:\n    - service:\n",
	  "t:3: node.depends[0].service: expected a service name, got ''" },
	{ "node:\n  addresses: [eth0]\n",
	  "t:2: node.addresses: expected a mapping of interface to address, got a list" },
	{ "node:\n  addresses: {eth0: 10.0.0.300}\n",
	  "t:2: node.addresses.eth0: expected an IPv4 or IPv6 address, got '10.0.0.300'" },
	{ "node:\n  addresses:\n    eth0: 10.0.0.1\n    eth0: 10.0.0.2\n",
	  "t:4: node.addresses.eth0: duplicate key" },
	{ "node:\n  addresses: {eth/0: 10.0.0.1}\n",
	  "t:2: node.addresses.eth/0: invalid interface name 'eth/0': contains '/'" },
	{ "node:\n  depends: [mysql]\n", "t:2: node.depends[0]: expected a mapping of service, "
					 "count and healthy, got 'mysql'" },
	{ "node:\n  depends:\n    - {count: 2}\n",
	  "t:3: node.depends[0]: missing key 'service'" },
	{ "node:\n  depends:\n    - {service: a}\n    - {service: a}\n",
	  "t:4: node.depends[1].service: service listed twice" },
	{ "node:\n  depends:\n    - {service: a, count: 0}\n",
	  "t:3: node.depends[0].count: expected a positive integer, got '0'" },
	{ "node:\n  depends:\n    - {service: a, healthy: \"true\"}\n",
	  "t:3: node.depends[0].healthy: expected true or false, got 'true' (a quoted string)" },
	{ "node:\n  depends:\n    - {service: a, healthy: True}\n",
	  "t:3: node.depends[0].healthy: expected true or false, got 'True'" },
	{ "node:\n  depends:\n    - {service: a, service: b}\n",
	  "t:3: node.depends[0].service: duplicate key (first on line 3)" },
	{ "node:\n  depends:\n    - {service: a, wait: 5}\n",
	  "t:3: node.depends[0].wait: unknown key" },
	{ "node:\n  hostname: *h\n", "t:2: node.hostname: anchors and aliases are not allowed" },
	{ "node: &n\n  hostname: a\n", "t:1: node: anchors and aliases are not allowed" },
	{ "node:\n  hostname: !!str a\n", "t:2: node.hostname: tags are not allowed" },
	{ "? [a]\n: b\n", "t:1: expected a key, got a list" },
	{ "etcd:\n  ? {a: b}\n  : c\n", "t:2: etcd: expected a key, got a mapping" },
	{ "etcd:\n  \"bad\\nkey\": 1\n", "t:2: etcd.bad\\x0akey: unknown key" },
	{ "etcd: {timeout: 5", "t:1: etcd: YAML syntax error: did not find expected ',' or '}' "
			       "while parsing a flow mapping (line 1)" },
	{ "a: b\n\xff\n", "t:2: YAML syntax error: invalid leading UTF-8 octet" },
};

static void test_bad_texts(void)
{
	for (size_t i = 0; i < ELEMENTSOF(bad_texts); i++) {
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		int r = config_parse(bad_texts[i].yaml, strlen(bad_texts[i].yaml), "t", &c, &err);
		ok(r == -EINVAL && !c, "text %zu refused", i);
		is_str(err, bad_texts[i].message, "text %zu: message", i);
	}

	/* A NUL byte in the middle of the input is not the end of it. */
	static const char nul[] = "etcd:\n  timeout: 5\0\n";
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(freep) char *err = NULL;
	ok(config_parse(nul, sizeof(nul) - 1, "t", &c, &err) == -EINVAL,
	   "NUL byte in input refused: %s", err ? err : "(none)");
}

static void test_good_texts(void)
{
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(freep) char *err = NULL;
	static const char text[] =
		"etcd:\n"
		"  endpoints: \"http://a:2379, https://b:2379 ,http://c:2379\"\n"
		"  prefix: /fleet/\n"
		"  cacert: \"\"\n"
		"  timeout: ~\n"
		"node:\n"
		"  hostname: 'web-1'\n"
		"  services:\n"
		"  addresses:\n"
		"  depends: []\n"
		"hooks:\n"
		"  upgrade:\n"
		"  config: \"\"\n"
		"timing:\n"
		"  quiet: 0\n"
		"  quiet_max: 0\n"
		"  retry_min: 300\n"
		"  splay: 007\n";

	is_int(config_parse(text, strlen(text), "t", &c, &err), 0, "good text parses");
	if (!c) {
		printf("# %s\n", err);
		return;
	}
	is_int(strv_len(c->endpoints), 3, "comma-separated endpoints: three");
	is_str(c->endpoints[0], "http://a:2379", "endpoint 0 trimmed");
	is_str(c->endpoints[1], "https://b:2379", "endpoint 1 trimmed");
	is_str(c->endpoints[2], "http://c:2379", "endpoint 2 trimmed");
	is_str(c->prefix, "/fleet/", "prefix kept as written");
	ok(!c->cacert, "cacert \"\" is none");
	is_int(c->timeout, 5, "timeout ~ keeps the default");
	is_str(c->hostname, "web-1", "single-quoted hostname");
	ok(c->services && !c->services[0], "empty services keeps the default");
	ok(!c->hook_upgrade, "upgrade: (empty) keeps the default");
	ok(!c->hook_config, "config: \"\" is none");
	ok(c->quiet == 0 && c->quiet_max == 0, "quiet 0");
	ok(c->retry_min == 300 && c->retry_max == 300, "retry_min == retry_max allowed");
	is_int(c->splay, 7, "leading zeros are decimal");
	is_str(c->path, "t", "path is the name");
}

/*
 * --etcd 127.0.0.1:2379 was accepted on the command line (http:// added) and
 * refused here; both now take every endpoint through etcd_endpoint_parse(),
 * so the same text means the same endpoint.
 */
static void test_endpoints_like_the_command_line(void)
{
	static const struct {
		const char *in, *out;
	} same[] = {
		{ "127.0.0.1:2379", "http://127.0.0.1:2379" },
		{ "HTTPS://etcd.example.com:2379/", "https://etcd.example.com:2379" },
		{ "[::1]:2379", "http://[::1]:2379" },
		{ "http://h", "http://h" },
	};

	for (size_t i = 0; i < ELEMENTSOF(same); i++) {
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		_cleanup_(freep) char *text = NULL;
		_cleanup_(freep) char *parsed = NULL;
		const char *problem = NULL;

		ok(asprintf(&text, "etcd:\n  endpoints: \"%s\"\n", same[i].in) > 0, "text");
		is_int(config_parse(text, strlen(text), "t", &c, &err), 0, "'%s' in the config",
		       same[i].in);
		is_str(c ? c->endpoints[0] : NULL, same[i].out, "'%s' in the config", same[i].in);
		is_int(etcd_endpoint_parse(same[i].in, strlen(same[i].in), &parsed, &problem), 0,
		       "'%s' as --etcd", same[i].in);
		is_str(parsed, same[i].out, "'%s' as --etcd", same[i].in);
	}
}

/* A megabyte of nested lists, in several spellings, is refused quickly. */
static void test_nested(void)
{
	static const struct {
		const char *head;
		const char *open, *close;
	} shapes[] = {
		{ "", "[", "]" },
		{ "node:\n  services: ", "[", "]" },
		{ "node:\n  depends: ", "[", "]" },
		{ "node:\n  depends: ", "{a: ", "}" },
		{ "node:\n  depends:\n", "- ", "" },
	};
	for (size_t s = 0; s < ELEMENTSOF(shapes); s++) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		_cleanup_(config_freep) struct config *c = NULL;
		_cleanup_(freep) char *err = NULL;
		size_t olen = strlen(shapes[s].open), clen = strlen(shapes[s].close);
		size_t depth = (1u << 20) / (olen + clen);

		buf_adds(&b, shapes[s].head);
		for (size_t i = 0; i < depth; i++)
			buf_add(&b, shapes[s].open, olen);
		buf_adds(&b, "x");
		for (size_t i = 0; i < depth; i++)
			buf_add(&b, shapes[s].close, clen);
		buf_addc(&b, '\n');

		double t0 = now();
		int r = config_parse(b.data, b.len, "nested", &c, &err);
		double dt = now() - t0;
		ok(r == -EINVAL && err, "nested shape %zu (%zu bytes) refused: %s", s, b.len,
		   err ? err : "(none)");
		ok(dt < 2.0, "nested shape %zu refused in %.3f s", s, dt);
	}

	/* The same through config_load, from a file. */
	char path[] = "/tmp/test_config.XXXXXX";
	int fd = mkstemp(path);
	ok(fd >= 0, "temporary file");
	if (fd < 0)
		return;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	for (size_t i = 0; i < 500000; i++)
		buf_addc(&b, '[');
	for (size_t i = 0; i < 500000; i++)
		buf_addc(&b, ']');
	ok(write(fd, b.data, b.len) == (ssize_t)b.len, "wrote 1 MB");
	close(fd);
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(freep) char *err = NULL;
	ok(config_load(path, false, &c, &err) == -EINVAL, "1 MB of nested lists refused");
	_cleanup_(freep) char *want = NULL;
	{
		struct buf w = BUF_INIT;
		buf_printf(&w, "%s:1: expected a mapping at the top level, got a list", path);
		want = buf_detach(&w);
	}
	is_str(err, want, "1 MB file: message");
	unlink(path);

	/* A megabyte of comments is harmless and parses. */
	_cleanup_(buf_releasep) struct buf com = BUF_INIT;
	while (com.len < (1u << 20))
		buf_adds(&com, "# a comment line, repeated to make a big but valid file\n");
	buf_adds(&com, "timing:\n  splay: 3\n");
	_cleanup_(config_freep) struct config *c2 = NULL;
	_cleanup_(freep) char *err2 = NULL;
	ok(config_parse(com.data, com.len, "big", &c2, &err2) == 0 && c2 && c2->splay == 3,
	   "1 MB of comments then a key parses");
}

int main(void)
{
	const char *env = getenv("FIXTURES");
	if (env && *env)
		fixtures = env;

	test_defaults();
	test_full();
	test_spec_example();
	test_empty();
	test_missing();
	test_bad_files();
	test_bad_texts();
	test_good_texts();
	test_endpoints_like_the_command_line();
	test_nested();
	return done_testing();
}
