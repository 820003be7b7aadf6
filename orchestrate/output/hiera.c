/*
 * hiera.c — the service catalog (what available_services/ holds) and its
 * rendering as the hiera YAML file of SPEC §4 (fileio.c's file_write_atomic()
 * installs it).
 *
 * Decoding.  A catalog is built from the kvs of one range read, so it is one
 * consistent snapshot.  Everything that comes from etcd is checked before it can
 * reach the file Puppet reads: the SERVICE and HOST of the key must be valid
 * names (key_split), the value must be the JSON object of SPEC §2, each IFACE
 * must be a valid name and each address must parse as an IPv4 or IPv6 address
 * (address.h).  Addresses are stored in inet_ntop's canonical spelling, so
 * "2001:DB8::1" and "2001:db8::1" from two hosts are one address.  What fails a
 * check is left out and counted in catalog->skipped: a whole value when it is
 * not the expected object, a single address when only that address is bad (the
 * host's other addresses still count).  A hand-written value such as
 * {"addresses":{"eth0":"10.0.0.1\n- evil: x"}} therefore never reaches YAML.
 *
 * Rendering.  The document goes through libyaml's emitter, never printf.  It is
 * one block mapping, in this order:
 *
 *   1. every services::SERVICE::IFACE key, sorted bytewise, each mapped to the
 *      sorted, de-duplicated addresses of every host that publishes SERVICE
 *      (in numeric order, IPv4 before IPv6: 10.0.0.9 before 10.0.0.10);
 *   2. then every healthy_services::SERVICE::IFACE key, sorted the same way,
 *      with the addresses of the hosts whose value says "healthy":true.  A
 *      healthy_services key appears only when it has at least one address.
 *
 * Keys are grouped by their rendered text, not by (SERVICE, IFACE): names may
 * hold ':', and service "a::b" on "c" and service "a" on "b::c" would otherwise
 * give one key twice.  Such a collision merges the two address lists, so the
 * mapping never holds a duplicate key.  The bytes depend only on the catalog's
 * contents, never on the order etcd or the caller gave them in: an unchanged
 * catalog never rewrites the file and never triggers the services hook.  An
 * empty catalog is the valid empty document "--- {}".  IPv6 addresses are
 * single-quoted (see address_style()).  A key longer than 128 bytes (long
 * names) is written by libyaml as an explicit "? key" / ": value" pair, which
 * is the same mapping to any YAML reader.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include <yaml.h>

#include "base/address.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "output/hiera.h"
#include "fleet/schema.h"

/* --- the catalog ----------------------------------------------------------- */

static void entry_release(struct catalog_entry *e)
{
	free(e->service);
	free(e->host);
	free(e->iface);
	free(e->address);
}

void catalog_release(struct catalog *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		entry_release(&c->entries[i]);
	free(c->entries);
	*c = (struct catalog)CATALOG_INIT;
}

static int catalog_append(struct catalog *c, const char *service, const char *host,
			  const char *iface, const char *address, bool healthy)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		if (cap > SIZE_MAX / sizeof(*c->entries))
			return -ENOMEM;
		struct catalog_entry *p = realloc(c->entries, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		c->entries = p;
		c->cap = cap;
	}
	struct catalog_entry e = {
		.service = strdup(service),
		.host = strdup(host),
		.iface = strdup(iface),
		.address = strdup(address),
		.healthy = healthy,
	};
	if (!e.service || !e.host || !e.iface || !e.address) {
		entry_release(&e);
		return -ENOMEM;
	}
	c->entries[c->n++] = e;
	return 0;
}

/*
 * Whether the JSON text holds a NUL: a raw byte or the escape \u0000.  cJSON
 * hands strings out as C strings, so "10.0.0.1\u0000junk" would reach us as a
 * valid "10.0.0.1"; such a value is refused instead.  A backslash always starts
 * a two-byte escape, so "\\u0000" (a backslash, then the text u0000) is not one.
 */
static bool json_has_nul(const char *v, size_t len)
{
	if (memchr(v, '\0', len))
		return true;
	for (size_t i = 0; i + 1 < len; i++) {
		if (v[i] != '\\')
			continue;
		if (v[i + 1] == 'u' && i + 5 < len && memcmp(v + i + 2, "0000", 4) == 0)
			return true;
		i++;
	}
	return false;
}

static bool only_whitespace(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
			return false;
	return true;
}

/*
 * A value that is not the object of SPEC §2 is -EPROTO and adds nothing; the
 * caller counts it.  Within a good value, an address whose IFACE is not a valid
 * name or whose text is not an IP address is left out and counted here, in
 * c->skipped.  "healthy" may be absent (false) but, when present, is a bool;
 * other members ("version") are not ours to check.
 */
int catalog_add_value(struct catalog *c, const char *service, const char *host,
		      const char *value, size_t value_len)
{
	if (!c || !schema_name_valid(service) || !schema_name_valid(host))
		return -EINVAL;
	if (!value || json_has_nul(value, value_len))
		return -EPROTO;

	/* The whole value must be one JSON object: trailing bytes make it as
	 * malformed as a truncated one. */
	const char *end = NULL;
	_cleanup_(cJSON_Deletep) cJSON *root = cJSON_ParseWithLengthOpts(value, value_len, &end, 0);
	if (!root || !end || end < value || !only_whitespace(end, value + value_len))
		return -EPROTO;
	if (!cJSON_IsObject(root))
		return -EPROTO;
	const cJSON *addresses = cJSON_GetObjectItemCaseSensitive(root, "addresses");
	if (!cJSON_IsObject(addresses))
		return -EPROTO;
	const cJSON *healthy = cJSON_GetObjectItemCaseSensitive(root, "healthy");
	if (healthy && !cJSON_IsBool(healthy))
		return -EPROTO;
	bool is_healthy = cJSON_IsTrue(healthy);

	size_t first = c->n, skipped = 0;
	const cJSON *a;
	cJSON_ArrayForEach(a, addresses) {
		char canon[ADDRESS_TEXT_MAX];
		if (!a->string || !schema_name_valid(a->string) || !cJSON_IsString(a) ||
		    address_canonical(a->valuestring, canon) < 0) {
			skipped++;
			continue;
		}
		int r = catalog_append(c, service, host, a->string, canon, is_healthy);
		if (r < 0) {
			/* All of this value or none of it. */
			while (c->n > first)
				entry_release(&c->entries[--c->n]);
			return r;
		}
	}
	c->skipped += skipped;
	return 0;
}

/*
 * Appends the decoded kvs to ret (CATALOG_INIT, or a catalog to add to) and
 * sorts it.  Only running out of memory fails; ret then holds what was decoded
 * so far, for the caller to release.
 */
int catalog_from_kvs(const struct etcd_kv_list *kvs, const char *services_dir,
		     struct catalog *ret)
{
	if (!kvs || !services_dir || !ret)
		return -EINVAL;
	for (size_t i = 0; i < kvs->n; i++) {
		const struct etcd_kv *kv = &kvs->kvs[i];
		char *parts[2];
		_cleanup_(freep) char *copy = NULL;
		int r = key_split(kv->key, kv->key_len, services_dir, parts, 2, &copy);
		if (r == -ENOMEM)
			return r;
		if (r < 0) {
			ret->skipped++;
			continue;
		}
		r = catalog_add_value(ret, parts[0], parts[1], kv->value, kv->value_len);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			ret->skipped++;
	}
	ret->revision = kvs->revision;
	catalog_sort(ret);
	return 0;
}

/* The first entry of c (sorted) whose (service, host) is not below the given
 * pair. */
static size_t catalog_lower_bound(const struct catalog *c, const char *service, const char *host)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct catalog_entry *e = &c->entries[mid];
		int r = strcmp(e->service, service);
		if (r == 0)
			r = strcmp(e->host, host);
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The entries of one (service, host) are contiguous in a sorted catalog: find
 * them, drop them, decode the new value on the side and move its entries (sorted
 * among themselves) into their place.  O(n) for the move, which at 10,000
 * entries is a few microseconds; a re-sort per event would be O(n log n).
 */
int catalog_apply(struct catalog *c, const char *service, const char *host, const char *value,
		  size_t value_len)
{
	_cleanup_(catalog_releasep) struct catalog add = CATALOG_INIT;
	size_t lo, hi;
	int r;

	if (!c || !schema_name_valid(service) || !schema_name_valid(host))
		return -EINVAL;
	if (value) {
		r = catalog_add_value(&add, service, host, value, value_len);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			c->skipped++;
		catalog_sort(&add);
	}
	lo = catalog_lower_bound(c, service, host);
	for (hi = lo; hi < c->n && strcmp(c->entries[hi].service, service) == 0 &&
		      strcmp(c->entries[hi].host, host) == 0; hi++)
		;
	if (c->n - (hi - lo) + add.n > c->cap) {
		size_t cap = c->n - (hi - lo) + add.n;
		cap = cap < 16 ? 16 : cap + cap / 2;
		struct catalog_entry *p = realloc(c->entries, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		c->entries = p;
		c->cap = cap;
	}
	for (size_t i = lo; i < hi; i++)
		entry_release(&c->entries[i]);
	memmove(&c->entries[lo + add.n], &c->entries[hi], (c->n - hi) * sizeof(*c->entries));
	if (add.n)
		memcpy(&c->entries[lo], add.entries, add.n * sizeof(*add.entries));
	c->n = c->n - (hi - lo) + add.n;
	c->skipped += add.skipped;
	add.n = 0;	/* the entries moved into c */
	return 0;
}

int catalog_apply_kv(struct catalog *c, const char *services_dir, const struct etcd_kv *kv,
		     bool deleted)
{
	char *parts[2];
	_cleanup_(freep) char *copy = NULL;
	int r = key_split(kv->key, kv->key_len, services_dir, parts, 2, &copy);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;	/* not an entry: a fresh read skips it too */
	if (kv->mod_revision > c->revision)
		c->revision = kv->mod_revision;
	return catalog_apply(c, parts[0], parts[1], deleted ? NULL : kv->value,
			     deleted ? 0 : kv->value_len);
}

/* strcmp that orders NULL first: entries built by hand may leave fields out. */
static int strcmp_null(const char *a, const char *b)
{
	if (!a || !b)
		return (a != NULL) - (b != NULL);
	return strcmp(a, b);
}

static int entry_compare(const void *x, const void *y)
{
	const struct catalog_entry *a = x, *b = y;
	int r;
	if ((r = strcmp_null(a->service, b->service)) ||
	    (r = strcmp_null(a->host, b->host)) ||
	    (r = strcmp_null(a->iface, b->iface)) ||
	    (r = (a->address && b->address ? address_compare(a->address, b->address)
					    : strcmp_null(a->address, b->address))))
		return r;
	return (int)a->healthy - (int)b->healthy;
}

void catalog_sort(struct catalog *c)
{
	if (c && c->n > 1)
		qsort(c->entries, c->n, sizeof(*c->entries), entry_compare);
}

static int ptr_strcmp(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

size_t catalog_count_hosts(const struct catalog *c, const char *service, bool healthy)
{
	if (!c || !service)
		return 0;

	/* The catalog may be unsorted (it is const here), so collect the hosts,
	 * sort them and count the distinct ones: O(n log n) for any fleet size. */
	size_t m = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct catalog_entry *e = &c->entries[i];
		if (e->service && e->host && strcmp(e->service, service) == 0 &&
		    (!healthy || e->healthy))
			m++;
	}
	if (m == 0)
		return 0;

	_cleanup_(freep) const char **hosts = calloc(m, sizeof(*hosts));
	size_t k = 0, distinct = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct catalog_entry *e = &c->entries[i];
		if (!e->service || !e->host || strcmp(e->service, service) != 0 ||
		    (healthy && !e->healthy))
			continue;
		if (hosts) {
			hosts[k++] = e->host;
			continue;
		}
		/* Out of memory: the same answer the slow way. */
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++) {
			const struct catalog_entry *p = &c->entries[j];
			seen = p->service && p->host && strcmp(p->service, service) == 0 &&
			       (!healthy || p->healthy) && strcmp(p->host, e->host) == 0;
		}
		if (!seen)
			distinct++;
	}
	if (!hosts)
		return distinct;
	qsort(hosts, k, sizeof(*hosts), ptr_strcmp);
	for (size_t i = 0; i < k; i++)
		if (i == 0 || strcmp(hosts[i - 1], hosts[i]) != 0)
			distinct++;
	return distinct;
}

/* --- rendering ------------------------------------------------------------- */

/* One (key, address) pair of the document; key is owned, address borrowed from
 * the catalog. */
struct item {
	char *key;
	const char *address;
};

struct items {
	struct item *v;
	size_t n;
};

static void items_release(struct items *it)
{
	for (size_t i = 0; i < it->n; i++)
		free(it->v[i].key);
	free(it->v);
	it->v = NULL;
	it->n = 0;
}

static int item_compare(const void *x, const void *y)
{
	const struct item *a = x, *b = y;
	int r = strcmp(a->key, b->key);
	return r ? r : address_compare(a->address, b->address);
}

/* The pairs of one block ("services" or "healthy_services"), sorted. */
static int items_collect(const struct catalog *c, const char *head, bool healthy_only,
			 struct items *ret)
{
	if (c->n == 0)
		return 0;
	ret->v = calloc(c->n, sizeof(*ret->v));
	if (!ret->v)
		return -ENOMEM;
	for (size_t i = 0; i < c->n; i++) {
		const struct catalog_entry *e = &c->entries[i];
		if (!e->service || !e->iface || !e->address || (healthy_only && !e->healthy))
			continue;
		_cleanup_(buf_releasep) struct buf key = BUF_INIT;
		if (buf_printf(&key, "%s::%s::%s", head, e->service, e->iface) < 0)
			return -ENOMEM;
		ret->v[ret->n].key = buf_detach(&key);
		ret->v[ret->n].address = e->address;
		ret->n++;
	}
	if (ret->n > 1)
		qsort(ret->v, ret->n, sizeof(*ret->v), item_compare);
	return 0;
}

static int emitter_output(void *data, unsigned char *buffer, size_t size)
{
	return buf_add(data, buffer, size) == 0;
}

static int scalar_event(yaml_event_t *ev, const char *s, yaml_scalar_style_t style)
{
	return yaml_scalar_event_initialize(ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s),
					    1, 1, style);
}

/*
 * Keys and IPv4 addresses are plain scalars, as in SPEC §4.  An IPv6 address is
 * single-quoted: plain, Ruby's YAML (Psych, which hiera uses) reads "::1" as the
 * Symbol :":1" and "1:2:3:4:5:6:7:8" as a base-60 integer, never as the string.
 */
static yaml_scalar_style_t address_style(const char *address)
{
	return strchr(address, ':') ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
}

/* Emits the pairs as key: [addresses], skipping repeated pairs. */
static int emit_items(yaml_emitter_t *em, const struct items *it)
{
	yaml_event_t ev;
	for (size_t i = 0; i < it->n;) {
		const char *key = it->v[i].key;
		if (!scalar_event(&ev, key, YAML_PLAIN_SCALAR_STYLE) || !yaml_emitter_emit(em, &ev))
			return -1;
		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  YAML_BLOCK_SEQUENCE_STYLE) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		const char *last = NULL;
		for (; i < it->n && strcmp(it->v[i].key, key) == 0; i++) {
			if (last && strcmp(last, it->v[i].address) == 0)
				continue;
			last = it->v[i].address;
			if (!scalar_event(&ev, last, address_style(last)) || !yaml_emitter_emit(em, &ev))
				return -1;
		}
		if (!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(em, &ev))
			return -1;
	}
	return 0;
}

static void yaml_emitter_deletep(yaml_emitter_t *em)
{
	yaml_emitter_delete(em);
}

static void items_releasep(struct items *it)
{
	items_release(it);
}

int hiera_render(struct catalog *c, struct buf *out)
{
	if (!c || !out)
		return -EINVAL;
	catalog_sort(c);

	_cleanup_(items_releasep) struct items all = { NULL, 0 };
	_cleanup_(items_releasep) struct items healthy = { NULL, 0 };
	int r = items_collect(c, "services", false, &all);
	if (r < 0)
		return r;
	r = items_collect(c, "healthy_services", true, &healthy);
	if (r < 0)
		return r;

	/* Into a buffer of our own, so that a failure leaves out untouched. */
	_cleanup_(buf_releasep) struct buf doc = BUF_INIT;
	_cleanup_(yaml_emitter_deletep) yaml_emitter_t em = { 0 };
	if (!yaml_emitter_initialize(&em))
		return -ENOMEM;
	yaml_emitter_set_output(&em, emitter_output, &doc);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);	/* never fold a line */
	yaml_emitter_set_break(&em, YAML_LN_BREAK);

	yaml_event_t ev;
	bool ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) &&
		  yaml_emitter_emit(&em, &ev) &&
		  yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 0) &&
		  yaml_emitter_emit(&em, &ev) &&
		  yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
						      YAML_BLOCK_MAPPING_STYLE) &&
		  yaml_emitter_emit(&em, &ev) &&
		  emit_items(&em, &all) == 0 &&
		  emit_items(&em, &healthy) == 0 &&
		  yaml_mapping_end_event_initialize(&ev) &&
		  yaml_emitter_emit(&em, &ev) &&
		  yaml_document_end_event_initialize(&ev, 1) &&
		  yaml_emitter_emit(&em, &ev) &&
		  yaml_stream_end_event_initialize(&ev) &&
		  yaml_emitter_emit(&em, &ev) &&
		  yaml_emitter_flush(&em);
	if (!ok)
		return em.error == YAML_MEMORY_ERROR || em.error == YAML_WRITER_ERROR ? -ENOMEM
										      : -EINVAL;
	return buf_add(out, doc.data, doc.len);
}
