/*
 * test_local.c — the node's own facts (local.h), one expected answer each for
 * the inputs on which the command line and the daemon used to disagree:
 *
 *   - the profile list line "glance # web": skipped by publish_service,
 *     published as glance by the daemon; it is glance;
 *   - the local version file " v2": v2 on the command line, "no valid
 *     version" in the daemon (which then ran again); it is v2;
 *
 * and around them the rest of each rule: comments, blank lines, CRLF, NUL
 * bytes, invalid names (skipped and reported), node.services and
 * node.profile_dir, addresses (one IPv4/IPv6 validator) and the hostname.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/address.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/fileio.h"
#include "config/local.h"
#include "config/netif.h"
#include "base/strv.h"
#include "tap.h"

static char dir[] = "/tmp/test_local.XXXXXX";

static char *path_in(const char *name)
{
	char *p = NULL;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		abort();
	return p;
}

static void write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "we");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0)
		abort();
}

/* --- the local version file --------------------------------------------------- */

static void version_is(const char *data, size_t len, int want_r, const char *want,
		       const char *name)
{
	_cleanup_(freep) char *path = path_in("current_version");
	_cleanup_(freep) char *v = NULL;

	write_file(path, data, len);
	int r = local_version_read(path, &v);
	is_int(r, want_r, "version file %s: code", name);
	is_str(v, want, "version file %s: version", name);
}

static void test_version_read(void)
{
	/* the input the command line and the daemon disagreed on */
	version_is(" v2", 3, 0, "v2", "' v2' (leading space)");

	version_is("v2", 2, 0, "v2", "'v2'");
	version_is("v2\n", 3, 0, "v2", "'v2\\n'");
	version_is("v2\r\n", 4, 0, "v2", "'v2\\r\\n' (CRLF)");
	version_is("\tv2  \n\n", 7, 0, "v2", "tabs, spaces and blank lines around");
	version_is("\v\fv2\f", 5, 0, "v2", "vertical tab and form feed");
	version_is("2024.06.01-rc1+b7:x@y\n", 22, 0, "2024.06.01-rc1+b7:x@y", "every name character");
	version_is("", 0, -ENOENT, NULL, "empty: no version");
	version_is(" \n\t\r\n", 5, -ENOENT, NULL, "only whitespace: no version");
	version_is("v 2\n", 4, -EINVAL, NULL, "'v 2'");
	version_is("v2\nv3\n", 6, -EINVAL, NULL, "two lines");
	version_is("v2 # the good one\n", 18, -EINVAL, NULL, "a comment is not part of the rule");
	version_is("v2\0junk\n", 8, -EINVAL, NULL, "a NUL byte");
	version_is("v2\0", 3, -EINVAL, NULL, "a trailing NUL byte");
	version_is("../v2\n", 6, -EINVAL, NULL, "'../v2'");
	version_is("..\n", 3, -EINVAL, NULL, "'..'");
	version_is("v\xc3\xa9\n", 4, -EINVAL, NULL, "not ASCII");

	char big[300];
	memset(big, 'v', sizeof(big));

	_cleanup_(freep) char *v = NULL;
	_cleanup_(freep) char *none = path_in("no-such-file");
	is_int(local_version_read(none, &v), -ENOENT, "absent file: -ENOENT");
	ok(!v, "absent file: no version");
	is_int(local_version_read(dir, &v), -EISDIR, "a directory: -EISDIR");
	version_is(big, 254, -EINVAL, NULL, "254 bytes");

	_cleanup_(freep) char *huge = calloc(1, 8192);
	memset(huge, ' ', 8191);
	huge[100] = 'v';
	version_is(huge, 8191, -EINVAL, NULL, "a file of 8 KiB");
}

static void test_version_253(void)
{
	_cleanup_(freep) char *path = path_in("current_version");
	_cleanup_(freep) char *v = NULL;
	char big[254];

	memset(big, 'v', 253);
	big[253] = '\n';
	write_file(path, big, sizeof(big));
	is_int(local_version_read(path, &v), 0, "253-byte version reads");
	ok(v && strlen(v) == 253, "253-byte version is whole");
}

static void test_version_write(void)
{
	_cleanup_(freep) char *path = path_in("written_version");
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	_cleanup_(freep) char *v = NULL;

	is_int(local_version_write(path, "v7"), 1, "first write writes");
	is_int(file_read_all(path, &b), 0, "file is there");
	is_str(buf_str(&b), "v7\n", "VERSION and a newline");
	is_int(local_version_write(path, "v7"), 0, "same version: unchanged");
	is_int(local_version_write(path, "bad version"), -EINVAL, "invalid: refused");
	is_int(local_version_write(path, "../x"), -EINVAL, "'../x': refused");
	is_int(local_version_read(path, &v), 0, "reads back");
	is_str(v, "v7", "the refused writes left it alone");
	_cleanup_(freep) char *nodir = path_in("no-such-dir/current_version");
	is_int(local_version_write(nodir, "v8"), -ENOENT, "no directory: -ENOENT");
}

/* --- services ------------------------------------------------------------------ */

static struct config *config_with(const char *list, const char *profile_dir, char **services)
{
	struct config *c = NULL;
	if (config_new_default(&c) < 0)
		abort();
	free(c->profile_list);
	free(c->profile_dir);
	c->profile_list = list ? strdup(list) : NULL;
	c->profile_dir = profile_dir ? strdup(profile_dir) : NULL;
	if (services) {
		strv_free(c->services);
		c->services = services;
	}
	return c;
}

static char *joined(char **v)
{
	struct buf b = BUF_INIT;
	for (size_t i = 0; v && v[i]; i++)
		if ((i && buf_addc(&b, ' ') < 0) || buf_adds(&b, v[i]) < 0)
			abort();
	return buf_detach(&b);
}

static void services_are(const char *list_text, size_t len, const char *want,
			 size_t want_skipped, const char *name)
{
	_cleanup_(freep) char *list = path_in("profile_list.txt");
	_cleanup_(freep) char *nodir = path_in("no-such-dir");
	_cleanup_(config_freep) struct config *c = config_with(list, nodir, NULL);
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(strv_freep) char **skipped = NULL;

	write_file(list, list_text, len);
	is_int(local_services(c, &v, &skipped), 0, "%s: read", name);
	_cleanup_(freep) char *got = joined(v);
	is_str(got, want, "%s: services", name);
	is_int(strv_length(skipped), want_skipped, "%s: lines reported as skipped", name);
	for (size_t i = 0; skipped && skipped[i]; i++)
		printf("#   skipped: %s\n", skipped[i]);
}

static void test_services_list(void)
{
	/* the input the command line and the daemon disagreed on */
	services_are("glance # web\n", 13, "glance", 0, "'glance # web'");

	services_are("glance\n", 7, "glance", 0, "one name");
	services_are("glance", 6, "glance", 0, "no final newline");
	services_are("  glance  \n\tnova\r\n", 18, "glance nova", 0, "spaces, tabs, CRLF");
	services_are("# the web tier\n\nglance\n\n   \n#nova\n", 34, "glance", 0,
		     "comments and blank lines");
	services_are("glance#web\n", 11, "glance", 0, "'#' right after the name");
	services_are("glance\nglance # again\n", 22, "glance", 0, "a repeat counts once");
	services_are("glance web\nnova\n", 16, "nova", 1, "two words: invalid, reported");
	services_are("../etc\nnova\n", 12, "nova", 1, "'../etc': invalid, reported");
	services_are("gl\0ance\nnova\n", 13, "nova", 1, "a NUL byte: invalid, reported");
	services_are("", 0, "", 0, "empty file");
}

static void test_services_sources(void)
{
	_cleanup_(freep) char *list = path_in("profile_list.txt");
	_cleanup_(freep) char *pdir = path_in("profiles.d");
	_cleanup_(freep) char *f1 = path_in("profiles.d/zookeeper");
	_cleanup_(freep) char *f2 = path_in("profiles.d/mysql");
	_cleanup_(freep) char *f3 = path_in("profiles.d/.hidden");
	_cleanup_(freep) char *f4 = path_in("profiles.d/bad name");
	_cleanup_(freep) char *f5 = path_in("profiles.d/glance");
	char **services = calloc(3, sizeof(char *));

	services[0] = strdup("haproxy");
	services[1] = strdup("glance");
	if (mkdir(pdir, 0755) < 0)
		abort();
	write_file(f1, "", 0);
	write_file(f2, "", 0);
	write_file(f3, "", 0);
	write_file(f4, "", 0);
	write_file(f5, "", 0);
	write_file(list, "nova\nglance # web\nhaproxy\n", 26);

	_cleanup_(config_freep) struct config *c = config_with(list, pdir, services);
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(strv_freep) char **skipped = NULL;
	is_int(local_services(c, &v, &skipped), 0, "three sources");
	_cleanup_(freep) char *got = joined(v);
	is_str(got, "haproxy glance nova mysql zookeeper", "node.services, list, directory (sorted)");
	is_int(strv_length(skipped), 1, "the directory's invalid name is reported");
	ok(skipped && strstr(skipped[0], "bad name") && strstr(skipped[0], pdir),
	   "the report names the name and the directory");

	/* without ret_skipped, the same services */
	_cleanup_(strv_freep) char **again = NULL;
	is_int(local_services(c, &again, NULL), 0, "skipped not wanted");
	_cleanup_(freep) char *got2 = joined(again);
	is_str(got2, got, "same answer");

	/* no source at all: an empty vector, never NULL */
	_cleanup_(config_freep) struct config *none = config_with(NULL, NULL, NULL);
	_cleanup_(strv_freep) char **empty = NULL;
	is_int(local_services(none, &empty, NULL), 0, "no sources");
	ok(empty && !empty[0], "empty vector");

	/* the list is a directory: reported, the others still count */
	_cleanup_(config_freep) struct config *odd = config_with(pdir, pdir, NULL);
	_cleanup_(strv_freep) char **w = NULL;
	_cleanup_(strv_freep) char **sk = NULL;
	is_int(local_services(odd, &w, &sk), 0, "an unreadable list is not an error");
	_cleanup_(freep) char *got3 = joined(w);
	is_str(got3, "glance mysql zookeeper", "the directory still counts");
	ok(strv_length(sk) == 2 && strstr(sk[0], "cannot read profile list"),
	   "the unreadable list is reported");

	unlink(f1);
	unlink(f2);
	unlink(f3);
	unlink(f4);
	unlink(f5);
	rmdir(pdir);
}

/* --- addresses and name --------------------------------------------------------- */

static void test_addresses(void)
{
	static const struct {
		const char *text;
		int family;
	} cases[] = {
		{ "10.0.0.5", 4 }, { "255.255.255.255", 4 }, { "::1", 6 },
		{ "2001:db8::1", 6 }, { "::ffff:10.0.0.5", 6 }, { "010.0.0.5", 0 },
		{ "10.0.0.256", 0 }, { "10.0.0", 0 }, { " 10.0.0.5", 0 }, { "10.0.0.5\n", 0 },
		{ "fe80::1%eth0", 0 }, { "[::1]", 0 }, { "10.0.0.0/8", 0 }, { "localhost", 0 },
		{ "", 0 },
	};
	char canon[ADDRESS_TEXT_MAX];

	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		is_int(address_family(cases[i].text, NULL), cases[i].family, "address '%s'",
		       cases[i].text);
	ok(!address_valid(NULL), "NULL is no address");
	is_int(address_canonical("2001:DB8:0::0:1", canon), 0, "canonical IPv6");
	is_str(canon, "2001:db8::1", "lower case, :: compressed");
	is_int(address_canonical("x", canon), -EINVAL, "no canonical form of a non-address");
	/* IPv4 has one spelling a value (no leading zero): what inet_ntop writes. */
	const char *v4[] = { "0.0.0.0", "10.0.0.5", "192.168.100.200", "255.255.255.255" };
	for (size_t i = 0; i < ELEMENTSOF(v4); i++) {
		unsigned char bytes[16];
		char ntop[ADDRESS_TEXT_MAX];
		ok(address_canonical(v4[i], canon) == 0 && address_family(v4[i], bytes) == 4 &&
		   inet_ntop(AF_INET, bytes, ntop, sizeof(ntop)) && strcmp(canon, ntop) == 0,
		   "canonical IPv4 '%s' is inet_ntop's", v4[i]);
	}
	is_int(address_canonical("010.0.0.5", canon), -EINVAL, "no IPv4 with a leading zero");
	is_int(address_canonical("10.0.0.5 ", canon), -EINVAL, "no IPv4 with a trailing space");
	ok(address_compare("10.0.0.9", "10.0.0.10") < 0, "numeric order");
	ok(address_compare("255.0.0.1", "::1") < 0, "IPv4 before IPv6");
	ok(address_compare("::1", "junk") < 0, "addresses before non-addresses");
	ok(address_compare("a", "b") < 0 && address_compare("b", "b") == 0, "non-addresses by text");

	struct config_address two[] = { { (char *)"eth0", (char *)"10.0.0.5" },
					{ (char *)"eth1", (char *)"2001:db8::5" } };
	struct config_address bad[] = { { (char *)"eth0", (char *)"10.0.0.500" } };
	_cleanup_(config_freep) struct config *c = config_with(NULL, NULL, NULL);
	struct catalog_entry *e = NULL;
	size_t n = 0;

	c->addresses = two;
	c->n_addresses = 2;
	is_int(local_addresses(c, &e, &n), 2, "node.addresses: two");
	ok(n == 2 && strcmp(e[0].iface, "eth0") == 0 && strcmp(e[1].address, "2001:db8::5") == 0,
	   "as configured");
	netif_addresses_free(e, n);
	c->addresses = bad;
	c->n_addresses = 1;
	is_int(local_addresses(c, &e, &n), -EINVAL, "an invalid configured address: -EINVAL");
	ok(!e && n == 0, "nothing handed out");
	c->addresses = NULL;
	c->n_addresses = 0;
	int r = local_addresses(c, &e, &n);
	ok(r >= 0 && (size_t)r == n, "no node.addresses: the interfaces (%d)", r);
	for (size_t i = 0; i < n; i++)
		ok(address_family(e[i].address, NULL) == 4, "interface address %s is IPv4",
		   e[i].address);
	netif_addresses_free(e, n);
}

static void test_hostname(void)
{
	_cleanup_(freep) char *a = NULL;
	_cleanup_(freep) char *b = NULL;
	_cleanup_(freep) char *sys = NULL;

	is_int(local_hostname("web1", &a), 0, "configured name");
	is_str(a, "web1", "is the name");
	is_int(local_hostname("web 1", &b), -EINVAL, "an invalid configured name");
	is_str(b, "web 1", "is handed back for the message");
	int r = local_hostname(NULL, &sys);
	ok(r == 0 || r == -EINVAL, "the system's name (%s)", sys ? sys : "none");
}

/* --- the list rule ----------------------------------------------------------------- */

static void test_lines(void)
{
	_cleanup_(strv_freep) char **v = NULL;
	size_t n = 0;
	static const char text[] = "a\n  b # c\n#d\n\n e\\f \r\nnul\0x\n";

	is_int(strv_push_lines(&v, &n, text, sizeof(text) - 1), 0, "lines");
	is_int(n, 4, "four items");
	_cleanup_(freep) char *got = joined(v);
	is_str(got, "a b e\\f nul\\x00x", "trimmed, comments gone, NUL spelled out");
}

int main(void)
{
	if (!mkdtemp(dir))
		abort();
	test_version_read();
	test_version_253();
	test_version_write();
	test_services_list();
	test_services_sources();
	test_addresses();
	test_hostname();
	test_lines();

	_cleanup_(freep) char *p1 = path_in("current_version");
	_cleanup_(freep) char *p2 = path_in("written_version");
	_cleanup_(freep) char *p3 = path_in("profile_list.txt");
	unlink(p1);
	unlink(p2);
	unlink(p3);
	rmdir(dir);
	return done_testing();
}
