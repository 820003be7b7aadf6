/*
 * test_hiera.c — the service catalog, its hiera rendering and the atomic file
 * write of hiera.c, plus netif.c's address discovery.
 *
 * Rendering is compared byte for byte with golden documents (the first is the
 * shape orchestrate(1) get_services describes).  Hostile catalogs — values
 * that are not the JSON of orchestrate(1) "Key layout", addresses carrying
 * YAML, keys with bad names — must be skipped and counted,
 * never rendered, and the output must always parse back as YAML.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "output/hiera.h"
#include "config/netif.h"
#include "fleet/schema.h"
#include "tap.h"

#define DIR "/available_services/"

/* --- helpers --------------------------------------------------------------- */

static void kvs_add(struct etcd_kv_list *l, const char *key, const char *value, size_t value_len)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->kvs = realloc(l->kvs, l->cap * sizeof(*l->kvs));
	}
	struct etcd_kv *kv = &l->kvs[l->n++];
	memset(kv, 0, sizeof(*kv));
	kv->key = strdup(key);
	kv->key_len = strlen(key);
	kv->value = malloc(value_len + 1);
	memcpy(kv->value, value, value_len);
	kv->value[value_len] = '\0';
	kv->value_len = value_len;
}

static void kvs_adds(struct etcd_kv_list *l, const char *key, const char *value)
{
	kvs_add(l, key, value, strlen(value));
}

/* Written here rather than with etcd_kv_list_release(): this driver links
 * without the etcd client. */
static void kvs_release(struct etcd_kv_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->kvs[i].key);
		free(l->kvs[i].value);
	}
	free(l->kvs);
	memset(l, 0, sizeof(*l));
}

static void kvs_releasep(struct etcd_kv_list *l)
{
	kvs_release(l);
}

/* Renders kvs into a new string (NULL on failure); *skipped gets the count. */
static char *render_kvs(const struct etcd_kv_list *l, size_t *skipped)
{
	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	if (catalog_from_kvs(l, DIR, &c) < 0)
		return NULL;
	if (skipped)
		*skipped = c.skipped;
	if (hiera_render(&c, &out) < 0)
		return NULL;
	return buf_detach(&out);
}

/* Whether text parses as one YAML stream without error (libyaml's parser). */
static bool yaml_parses(const char *text)
{
	yaml_parser_t p;
	yaml_event_t ev;
	bool good = true;
	if (!yaml_parser_initialize(&p))
		return false;
	yaml_parser_set_input_string(&p, (const unsigned char *)text, strlen(text));
	for (;;) {
		if (!yaml_parser_parse(&p, &ev)) {
			good = false;
			break;
		}
		bool end = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
		if (end)
			break;
	}
	yaml_parser_delete(&p);
	return good;
}

/* --- rendering ------------------------------------------------------------- */

static const char spec_golden[] =
	"---\n"
	"services::glance::eth0:\n"
	"- 10.0.0.5\n"
	"- 10.0.0.6\n"
	"healthy_services::glance::eth0:\n"
	"- 10.0.0.5\n";

static void test_spec_example(void)
{
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	kvs_adds(&l, DIR "glance/web2",
		 "{\"addresses\":{\"eth0\":\"10.0.0.6\"},\"healthy\":false,\"version\":\"v1\"}");
	kvs_adds(&l, DIR "glance/web1",
		 "{\"addresses\":{\"eth0\":\"10.0.0.5\"},\"healthy\":true,\"version\":\"v1\"}");
	l.revision = 42;

	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	is_int(catalog_from_kvs(&l, DIR, &c), 0, "spec example decodes");
	is_int(c.n, 2, "  two entries");
	is_int(c.skipped, 0, "  none skipped");
	is_int(c.revision, 42, "  revision kept");
	if (c.n == 2) {
		is_str(c.entries[0].host, "web1", "  sorted by host");
		ok(c.entries[0].healthy && !c.entries[1].healthy, "  healthy flags");
		is_str(c.entries[1].iface, "eth0", "  iface");
	}
	is_int(catalog_count_hosts(&c, "glance", false), 2, "  two hosts publish glance");
	is_int(catalog_count_hosts(&c, "glance", true), 1, "  one of them healthy");
	is_int(catalog_count_hosts(&c, "mysql", false), 0, "  nobody publishes mysql");

	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	is_int(hiera_render(&c, &out), 0, "spec example renders");
	is_str(buf_str(&out), spec_golden, "  byte for byte as the golden document");
	ok(yaml_parses(buf_str(&out)), "  and parses back");

	/* Appends: a second render into the same buffer doubles it. */
	is_int(hiera_render(&c, &out), 0, "render appends");
	is_int(out.len, 2 * strlen(spec_golden), "  to what out held");
}

static void test_empty(void)
{
	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	is_int(hiera_render(&c, &out), 0, "empty catalog renders");
	is_str(buf_str(&out), "--- {}\n", "  as an empty mapping");
	ok(yaml_parses(buf_str(&out)), "  that parses");

	/* Only unhealthy publishers: no healthy_services key at all. */
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	kvs_adds(&l, DIR "db/h1", "{\"addresses\":{\"eth0\":\"10.1.0.1\"},\"healthy\":false}");
	kvs_adds(&l, DIR "db/h2", "{\"addresses\":{\"eth0\":\"10.1.0.2\"}}");
	_cleanup_(freep) char *s = render_kvs(&l, NULL);
	is_str(s, "---\nservices::db::eth0:\n- 10.1.0.1\n- 10.1.0.2\n",
	       "no healthy_services key without a healthy address");

	/* A host with no address publishes nothing renderable. */
	_cleanup_(kvs_releasep) struct etcd_kv_list l2 = ETCD_KV_LIST_INIT;
	kvs_adds(&l2, DIR "db/h1", "{\"addresses\":{},\"healthy\":true}");
	size_t skipped = 99;
	_cleanup_(freep) char *s2 = render_kvs(&l2, &skipped);
	is_str(s2, "--- {}\n", "a value with no addresses renders nothing");
	is_int(skipped, 0, "  and is not malformed");
}

static const char multi_golden[] =
	"---\n"
	"services::db::eth0:\n"
	"- 10.0.1.1\n"
	"services::glance::eth0:\n"
	"- 10.0.0.5\n"
	"- 10.0.0.9\n"
	"- 10.0.0.10\n"
	"services::glance::eth1:\n"
	"- 192.168.0.5\n"
	"services::glance::ib0:\n"
	"- '2001:db8::1'\n"
	"- '2001:db8::2'\n"
	"services::profile::web::eth0:\n"
	"- '::1'\n"
	"healthy_services::db::eth0:\n"
	"- 10.0.1.1\n"
	"healthy_services::glance::eth0:\n"
	"- 10.0.0.5\n"
	"- 10.0.0.10\n"
	"healthy_services::glance::eth1:\n"
	"- 192.168.0.5\n"
	"healthy_services::glance::ib0:\n"
	"- '2001:db8::1'\n";

static const char *const multi_kvs[][2] = {
	{ DIR "glance/web1",
	  "{\"addresses\":{\"eth0\":\"10.0.0.5\",\"eth1\":\"192.168.0.5\",\"ib0\":\"2001:DB8::1\"},"
	  "\"healthy\":true,\"version\":\"v2\"}" },
	{ DIR "glance/web2", "{\"addresses\":{\"eth0\":\"10.0.0.9\",\"ib0\":\"2001:db8:0::2\"}}" },
	{ DIR "glance/web3", "{\"addresses\":{\"eth0\":\"10.0.0.10\"},\"healthy\":true}" },
	/* web4 publishes an address web1 has too (a shared VIP): listed once. */
	{ DIR "glance/web4", "{\"addresses\":{\"eth0\":\"10.0.0.5\"},\"healthy\":false}" },
	{ DIR "db/db1", "  {\"healthy\":true,\"addresses\":{\"eth0\":\"10.0.1.1\"}}\n" },
	{ DIR "profile::web/h1", "{\"addresses\":{\"eth0\":\"0:0::1\"},\"healthy\":false}" },
};

static void test_multi(void)
{
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	for (size_t i = 0; i < ELEMENTSOF(multi_kvs); i++)
		kvs_adds(&l, multi_kvs[i][0], multi_kvs[i][1]);
	size_t skipped = 99;
	_cleanup_(freep) char *s = render_kvs(&l, &skipped);
	is_str(s, multi_golden, "several services, ifaces, IPv6, shared address");
	is_int(skipped, 0, "  nothing skipped");
	ok(s && yaml_parses(s), "  parses back");

	/* Determinism: every rotation and the reversal give the same bytes. */
	size_t n = ELEMENTSOF(multi_kvs);
	bool same = true;
	for (size_t rot = 0; rot < 2 * n; rot++) {
		_cleanup_(kvs_releasep) struct etcd_kv_list m = ETCD_KV_LIST_INIT;
		for (size_t i = 0; i < n; i++) {
			size_t j = rot < n ? (i + rot) % n : n - 1 - (i + rot) % n;
			kvs_adds(&m, multi_kvs[j][0], multi_kvs[j][1]);
		}
		_cleanup_(freep) char *t = render_kvs(&m, NULL);
		if (!t || !s || strcmp(s, t) != 0)
			same = false;
	}
	ok(same, "shuffled input renders the same bytes");

	/* Rendering the same catalog twice gives the same bytes, and
	 * catalog_add_value() in any order gives the same document. */
	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	for (size_t i = n; i-- > 0;) {
		char *parts[2], *copy = NULL;
		key_split(multi_kvs[i][0], strlen(multi_kvs[i][0]), DIR, parts, 2, &copy);
		catalog_add_value(&c, parts[0], parts[1], multi_kvs[i][1], strlen(multi_kvs[i][1]));
		free(copy);
	}
	_cleanup_(buf_releasep) struct buf a = BUF_INIT;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	hiera_render(&c, &a);
	hiera_render(&c, &b);
	is_str(buf_str(&a), multi_golden, "catalog_add_value in reverse order: same document");
	is_str(buf_str(&a), buf_str(&b), "rendering twice: same bytes");

	is_int(catalog_count_hosts(&c, "glance", false), 4, "four hosts publish glance");
	is_int(catalog_count_hosts(&c, "glance", true), 2, "two healthy");
	is_int(catalog_count_hosts(&c, "db", true), 1, "one healthy db");
	is_int(catalog_count_hosts(&c, "profile::web", true), 0, "no healthy profile::web");
	is_int(catalog_count_hosts(&c, NULL, false), 0, "NULL service counts nothing");
	is_int(catalog_count_hosts(NULL, "glance", false), 0, "NULL catalog counts nothing");
}

/* Names may hold ':', so (a::b, c) and (a, b::c) render the same key: the
 * document must still hold it once, with both addresses. */
static void test_key_collision(void)
{
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	kvs_adds(&l, DIR "a::b/h1", "{\"addresses\":{\"c\":\"10.0.0.2\"},\"healthy\":true}");
	kvs_adds(&l, DIR "a/h2", "{\"addresses\":{\"b::c\":\"10.0.0.1\"},\"healthy\":true}");
	_cleanup_(freep) char *s = render_kvs(&l, NULL);
	is_str(s,
	       "---\nservices::a::b::c:\n- 10.0.0.1\n- 10.0.0.2\n"
	       "healthy_services::a::b::c:\n- 10.0.0.1\n- 10.0.0.2\n",
	       "colliding keys are merged, never duplicated");
}

/* --- hostile input --------------------------------------------------------- */

static void test_hostile_values(void)
{
	static const struct {
		const char *value;
		const char *why;
	} bad[] = {
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"}", "truncated JSON" },
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"}} trailing", "trailing bytes" },
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"}}{}", "two objects" },
		{ "", "empty value" },
		{ "null", "null" },
		{ "[]", "an array" },
		{ "\"10.0.0.1\"", "a string" },
		{ "{}", "no addresses" },
		{ "{\"addresses\":[]}", "addresses is an array" },
		{ "{\"addresses\":[\"10.0.0.1\"]}", "addresses is a list" },
		{ "{\"addresses\":\"10.0.0.1\"}", "addresses is a string" },
		{ "{\"addresses\":null}", "addresses is null" },
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"},\"healthy\":\"yes\"}", "healthy is a string" },
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"},\"healthy\":1}", "healthy is a number" },
		{ "{\"addresses\":{\"eth0\":\"10.0.0.1\"},\"healthy\":null}", "healthy is null" },
		{ "addresses: {eth0: 10.0.0.1}", "YAML, not JSON" },
		{ "\xff\xfe{}", "binary" },
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
		is_int(catalog_add_value(&c, "glance", "web1", bad[i].value, strlen(bad[i].value)),
		       -EPROTO, "malformed value refused: %s", bad[i].why);
		is_int(c.n, 0, "  adds nothing");
	}

	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	is_int(catalog_add_value(&c, "glance", "web1", NULL, 0), -EPROTO, "NULL value refused");
	is_int(catalog_add_value(&c, "../x", "web1", "{\"addresses\":{}}", 16), -EINVAL,
	       "invalid service refused");
	is_int(catalog_add_value(&c, "glance", "a b", "{\"addresses\":{}}", 16), -EINVAL,
	       "invalid host refused");
	/* value_len is authoritative: the bytes after it are not read. */
	const char *v = "{\"addresses\":{\"eth0\":\"10.0.0.1\"}}GARBAGE";
	is_int(catalog_add_value(&c, "glance", "web1", v, strlen(v) - 7), 0,
	       "value_len bounds the value");
	is_int(c.n, 1, "  one entry");
}

static void test_hostile_addresses(void)
{
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	/* One good address among hostile ones: the good one stays. */
	kvs_adds(&l, DIR "glance/web1",
		 "{\"addresses\":{"
		 "\"eth0\":\"10.0.0.1\\n- evil: x\","
		 "\"eth1\":\"{a: b}\","
		 "\"eth2\":\"10.0.0.2\","
		 "\"eth3\":\"010.0.0.3\","
		 "\"eth4\":\" 10.0.0.4\","
		 "\"eth5\":\"10.0.0.5 \","
		 "\"eth6\":\"fe80::1%eth0\","
		 "\"eth7\":\"web1.example.com\","
		 "\"eth8\":42,"
		 "\"eth9\":null,"
		 "\"eth 10\":\"10.0.0.10\","
		 "\"../x\":\"10.0.0.11\","
		 "\"\":\"10.0.0.12\","
		 "\"eth13\":{\"a\":\"b\"},"
		 "\"eth14\":\"10.0.0.256\","
		 "\"eth15\":\"*\","
		 "\"eth16\":\"- 10.0.0.16\","
		 "\"e\\nth18\":\"10.0.0.18\""
		 "},\"healthy\":true}");
	/* Keys that are not SERVICE/HOST below the directory. */
	kvs_adds(&l, DIR "glance", "{\"addresses\":{\"eth0\":\"10.9.0.1\"}}");
	kvs_adds(&l, DIR "glance/web2/x", "{\"addresses\":{\"eth0\":\"10.9.0.2\"}}");
	kvs_adds(&l, DIR "../web3", "{\"addresses\":{\"eth0\":\"10.9.0.3\"}}");
	kvs_adds(&l, DIR "glance/..", "{\"addresses\":{\"eth0\":\"10.9.0.4\"}}");
	kvs_adds(&l, DIR "gl ance/web5", "{\"addresses\":{\"eth0\":\"10.9.0.5\"}}");
	kvs_adds(&l, DIR "glance/web6\n- evil", "{\"addresses\":{\"eth0\":\"10.9.0.6\"}}");
	kvs_adds(&l, "/elsewhere/glance/web7", "{\"addresses\":{\"eth0\":\"10.9.0.7\"}}");
	static const char nul_value[] = "{\"addresses\":{\"eth0\":\"10.9.0.8\"}}\0x";
	kvs_add(&l, DIR "glance/web8", nul_value, sizeof(nul_value) - 1);
	/* Malformed values. */
	kvs_adds(&l, DIR "glance/web9", "{\"addresses\":[]}");
	kvs_adds(&l, DIR "glance/web10", "{\"addresses\":{\"eth0\":\"10.9.0.10\"},\"healthy\":\"yes\"}");
	kvs_adds(&l, DIR "glance/web11", "{\"addresses\":{\"eth0\":\"10.9.0.11\"");
	/* A NUL inside a string would cut it short in C: the value is refused. */
	kvs_adds(&l, DIR "glance/web12", "{\"addresses\":{\"eth0\":\"10.9.0.12\\u0000\\n- x\"}}");
	static const char raw_nul[] = "{\"addresses\":{\"eth0\":\"10.9.0.13\0\"}}";
	kvs_add(&l, DIR "glance/web13", raw_nul, sizeof(raw_nul) - 1);

	size_t skipped = 0;
	_cleanup_(freep) char *s = render_kvs(&l, &skipped);
	is_str(s, "---\nservices::glance::eth2:\n- 10.0.0.2\nhealthy_services::glance::eth2:\n- 10.0.0.2\n",
	       "only the one valid address of the hostile catalog is rendered");
	/* 17 bad addresses of web1, 7 bad keys, 6 bad values. */
	is_int(skipped, 17 + 7 + 6, "every bad key, value and address counted");
	ok(s && !strstr(s, "evil") && !strstr(s, "10.9."), "nothing hostile in the document");
	ok(s && yaml_parses(s), "the document parses");
}

static void test_huge(void)
{
	/* A 4 MiB string where the address should be. */
	size_t big = 4u << 20;
	_cleanup_(buf_releasep) struct buf v = BUF_INIT;
	buf_adds(&v, "{\"addresses\":{\"eth0\":\"");
	for (size_t i = 0; i < big; i++)
		buf_addc(&v, '1');
	buf_adds(&v, "\"},\"healthy\":true}");
	_cleanup_(catalog_releasep) struct catalog c = CATALOG_INIT;
	is_int(catalog_add_value(&c, "glance", "web1", v.data, v.len), 0, "huge address: value parses");
	is_int(c.n, 0, "  but the address is skipped");
	is_int(c.skipped, 1, "  and counted");

	/* Nesting far beyond cJSON's limit. */
	buf_reset(&v);
	buf_adds(&v, "{\"addresses\":");
	for (size_t i = 0; i < 100000; i++)
		buf_addc(&v, '[');
	is_int(catalog_add_value(&c, "glance", "web1", v.data, v.len), -EPROTO,
	       "deeply nested value refused");

	/* Many addresses from many hosts: all rendered, sorted, once. */
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	for (int h = 0; h < 2000; h++) {
		_cleanup_(buf_releasep) struct buf key = BUF_INIT, val = BUF_INIT;
		buf_printf(&key, DIR "svc%d/host%04d", h % 3, h);
		buf_printf(&val, "{\"addresses\":{\"eth0\":\"10.%d.%d.1\",\"eth1\":\"fd00::%x\"},"
				 "\"healthy\":%s}",
			   h / 256, h % 256, h, h % 2 ? "true" : "false");
		kvs_adds(&l, key.data, val.data);
	}
	_cleanup_(catalog_releasep) struct catalog c2 = CATALOG_INIT;
	is_int(catalog_from_kvs(&l, DIR, &c2), 0, "2000 hosts decode");
	is_int(c2.n, 4000, "  into 4000 entries");
	is_int(catalog_count_hosts(&c2, "svc0", false), 667, "  667 hosts publish svc0");
	is_int(catalog_count_hosts(&c2, "svc0", true), 333, "  333 of them healthy");
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	is_int(hiera_render(&c2, &out), 0, "  and render");
	ok(yaml_parses(buf_str(&out)), "  to a document that parses");
	/* Six services keys and six healthy ones, each once. */
	size_t keys = 0;
	for (const char *p = buf_str(&out); (p = strstr(p, "services::")); p++)
		keys++;
	is_int(keys, 12, "  with twelve keys");
}

/* A long name makes a key longer than libyaml's simple-key limit: the document
 * must still be valid YAML. */
static void test_long_names(void)
{
	char name[254];
	memset(name, 's', 253);
	name[253] = '\0';
	_cleanup_(buf_releasep) struct buf key = BUF_INIT, val = BUF_INIT;
	buf_printf(&key, DIR "%s/web1", name);
	buf_printf(&val, "{\"addresses\":{\"%s\":\"10.0.0.1\"},\"healthy\":true}", name);
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	kvs_adds(&l, key.data, val.data);
	_cleanup_(freep) char *s = render_kvs(&l, NULL);
	ok(s && strstr(s, name) && strstr(s, "10.0.0.1"), "253-byte names render");
	ok(s && yaml_parses(s), "  as valid YAML");
}

/* --- files ----------------------------------------------------------------- */

static char tmpdir[64];

static char *tmp_path(const char *name)
{
	struct buf b = BUF_INIT;
	buf_printf(&b, "%s/%s", tmpdir, name);
	return buf_detach(&b);
}

static size_t dir_entries(const char *dir)
{
	_cleanup_(buf_releasep) struct buf cmd = BUF_INIT;
	buf_printf(&cmd, "ls -A '%s' | wc -l", dir);
	FILE *f = popen(cmd.data, "r");
	size_t n = 0;
	if (f) {
		if (fscanf(f, "%zu", &n) != 1)
			n = SIZE_MAX;
		pclose(f);
	}
	return n;
}

static void test_files(void)
{
	strcpy(tmpdir, "/tmp/test_hiera.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		ok(0, "mkdtemp");
		return;
	}
	mode_t old_umask = umask(027);

	_cleanup_(freep) char *p = tmp_path("services.yaml");
	bool changed = false;
	struct stat st1, st2;

	is_int(file_write_atomic(p, "a\n", 2, 0644, &changed), 0, "new file written");
	ok(changed, "  changed");
	ok(stat(p, &st1) == 0 && (st1.st_mode & 07777) == 0644, "  with mode 0644 despite umask");
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	is_int(file_read_all(p, &b), 0, "  reads back");
	is_str(buf_str(&b), "a\n", "  same bytes");
	is_int(dir_entries(tmpdir), 1, "  no temporary file left");

	/* Same bytes: nothing written, same inode, same mtime. */
	changed = true;
	is_int(file_write_atomic(p, "a\n", 2, 0644, &changed), 0, "unchanged bytes");
	ok(!changed, "  not changed");
	ok(stat(p, &st2) == 0 && st2.st_ino == st1.st_ino &&
		   st2.st_mtim.tv_sec == st1.st_mtim.tv_sec &&
		   st2.st_mtim.tv_nsec == st1.st_mtim.tv_nsec,
	   "  inode and mtime untouched");

	/* An existing 0600 file keeps 0600. */
	chmod(p, 0600);
	is_int(file_write_atomic(p, "b\nc\n", 4, 0644, &changed), 0, "changed bytes");
	ok(changed, "  changed");
	ok(stat(p, &st2) == 0 && (st2.st_mode & 07777) == 0600, "  keeps the old mode 0600");
	ok(st2.st_ino != st1.st_ino, "  a new inode (renamed over)");
	buf_reset(&b);
	file_read_all(p, &b);
	is_str(buf_str(&b), "b\nc\n", "  new bytes");

	/* A shorter content is not a prefix match. */
	is_int(file_write_atomic(p, "b\n", 2, 0644, &changed), 0, "shorter content");
	ok(changed, "  changed");
	buf_reset(&b);
	file_read_all(p, &b);
	is_str(buf_str(&b), "b\n", "  new bytes");

	/* Empty content. */
	is_int(file_write_atomic(p, "", 0, 0644, &changed), 0, "empty content");
	ok(changed && stat(p, &st2) == 0 && st2.st_size == 0, "  empty file");
	is_int(file_write_atomic(p, NULL, 0, 0644, &changed), 0, "empty again (NULL data)");
	ok(!changed, "  unchanged");

	/* Binary data with NULs compares by length, not as a string. */
	is_int(file_write_atomic(p, "x\0y", 3, 0644, &changed), 0, "binary content");
	is_int(file_write_atomic(p, "x\0z", 3, 0644, &changed), 0, "binary content, one byte differs");
	ok(changed, "  changed");
	buf_reset(&b);
	file_read_all(p, &b);
	ok(b.len == 3 && memcmp(b.data, "x\0z", 3) == 0, "  read back with the NUL");

	/* Errors leave nothing behind. */
	_cleanup_(freep) char *missing = tmp_path("no/such/dir/f.yaml");
	changed = true;
	is_int(file_write_atomic(missing, "a", 1, 0644, &changed), -ENOENT, "missing directory");
	ok(!changed, "  not changed");
	ok(access(missing, F_OK) < 0, "  nothing created");
	is_int(file_write_atomic("/etc/passwd/x", "a", 1, 0644, &changed), -ENOTDIR,
	       "a path under a regular file fails");
	is_int(file_write_atomic(tmpdir, "a", 1, 0644, &changed), -EISDIR, "a directory is refused");
	_cleanup_(freep) char *slash = tmp_path("dir/");
	is_int(file_write_atomic(slash, "a", 1, 0644, &changed), -EISDIR, "a trailing slash is refused");
	is_int(file_write_atomic("/dev/null", "a", 1, 0644, &changed), -EINVAL,
	       "a device is never replaced");
	is_int(file_write_atomic("", "a", 1, 0644, &changed), -EINVAL, "empty path");
	is_int(dir_entries(tmpdir), 1, "still only the one file");

	/* A read-only directory (only when permissions apply to us). */
	if (geteuid() != 0) {
		_cleanup_(freep) char *ro = tmp_path("ro");
		_cleanup_(freep) char *rof = tmp_path("ro/f");
		mkdir(ro, 0755);
		file_write_atomic(rof, "old", 3, 0644, NULL);
		chmod(ro, 0555);
		is_int(file_write_atomic(rof, "new", 3, 0644, &changed), -EACCES, "read-only directory");
		buf_reset(&b);
		file_read_all(rof, &b);
		is_str(buf_str(&b), "old", "  old file intact");
		is_int(dir_entries(ro), 1, "  no temporary file");
		chmod(ro, 0755);
		unlink(rof);
		rmdir(ro);
	} else {
		printf("# skipping the read-only directory case: root ignores permissions\n");
	}

	/* file_read_all */
	_cleanup_(freep) char *nf = tmp_path("nope");
	buf_reset(&b);
	is_int(file_read_all(nf, &b), -ENOENT, "read: absent file is -ENOENT");
	is_int(file_read_all(tmpdir, &b), -EISDIR, "read: a directory is -EISDIR");
	is_int(b.len, 0, "  buffer untouched");
	buf_adds(&b, "head:");
	is_int(file_read_all(p, &b), 0, "read appends");
	ok(b.len == 8 && memcmp(b.data, "head:x\0z", 8) == 0, "  after what the buffer held");

	/* A big file reads whole. */
	_cleanup_(freep) char *bigp = tmp_path("big");
	_cleanup_(buf_releasep) struct buf big = BUF_INIT;
	for (int i = 0; i < 100000; i++)
		buf_printf(&big, "%d\n", i);
	is_int(file_write_atomic(bigp, big.data, big.len, 0600, &changed), 0, "big file written");
	ok(stat(bigp, &st2) == 0 && (st2.st_mode & 07777) == 0600, "  new file takes default_mode");
	buf_reset(&b);
	is_int(file_read_all(bigp, &b), 0, "big file read");
	ok(b.len == big.len && memcmp(b.data, big.data, big.len) == 0, "  same bytes");

	unlink(bigp);
	unlink(p);
	rmdir(tmpdir);
	umask(old_umask);
}

/* The whole path of the daemon: render, write, render again, nothing written. */
static void test_render_write(void)
{
	strcpy(tmpdir, "/tmp/test_hiera.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		ok(0, "mkdtemp");
		return;
	}
	_cleanup_(freep) char *p = tmp_path("services.yaml");
	_cleanup_(kvs_releasep) struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	for (size_t i = 0; i < ELEMENTSOF(multi_kvs); i++)
		kvs_adds(&l, multi_kvs[i][0], multi_kvs[i][1]);
	bool changed;
	_cleanup_(freep) char *s1 = render_kvs(&l, NULL);
	is_int(file_write_atomic(p, s1, strlen(s1), 0644, &changed), 0, "catalog written");
	ok(changed, "  changed");
	_cleanup_(freep) char *s2 = render_kvs(&l, NULL);
	is_int(file_write_atomic(p, s2, strlen(s2), 0644, &changed), 0, "same catalog again");
	ok(!changed, "  nothing rewritten");
	unlink(p);
	rmdir(tmpdir);
}

/* --- netif ----------------------------------------------------------------- */

static void test_netif(void)
{
	struct catalog_entry *e = NULL;
	size_t n = 0;
	int r = netif_ipv4_addresses(&e, &n);
	ok(r >= 0, "netif: getifaddrs works (%d addresses)", r);
	is_int(r, n, "  returns the count");
	bool clean = true, sorted = true;
	for (size_t i = 0; i < n; i++) {
		if (!e[i].iface || !e[i].address || e[i].service || e[i].host ||
		    strncmp(e[i].address, "127.", 4) == 0 || strcmp(e[i].iface, "lo") == 0 ||
		    !schema_name_valid(e[i].iface))
			clean = false;
		if (i > 0 && strcmp(e[i - 1].iface, e[i].iface) > 0)
			sorted = false;
		printf("#   %s %s\n", e[i].iface ? e[i].iface : "?", e[i].address ? e[i].address : "?");
	}
	ok(clean, "  no loopback, only iface and address set");
	ok(sorted, "  sorted by iface");
	netif_addresses_free(e, n);
	is_int(netif_ipv4_addresses(NULL, &n), -EINVAL, "  NULL ret refused");
}

int main(void)
{
	test_spec_example();
	test_empty();
	test_multi();
	test_key_collision();
	test_hostile_values();
	test_hostile_addresses();
	test_huge();
	test_long_names();
	test_files();
	test_render_write();
	test_netif();
	return done_testing();
}
