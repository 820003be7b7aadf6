/*
 * catalog.c — the service catalog (catalog.h): what available_services/
 * holds, decoded and checked.
 *
 * A catalog is built from the kvs of one range read, so it is one consistent
 * snapshot, and then follows watch events in place (catalog_apply_kv).
 * Everything that comes from etcd is checked before it can reach the file
 * Puppet reads: the SERVICE and HOST of the key must be valid names
 * (key_split), the value must be the JSON object of the key layout, each IFACE
 * must be a valid name and each address must parse as an IPv4 or IPv6 address
 * (address.h).  Addresses are stored in inet_ntop's canonical spelling, so
 * "2001:DB8::1" and "2001:db8::1" from two hosts are one address.  What fails a
 * check is left out and counted in catalog->skipped: a whole value when it is
 * not the expected object, a single address when only that address is bad (the
 * host's other addresses still count).  A hand-written value such as
 * {"addresses":{"eth0":"10.0.0.1\n- evil: x"}} therefore never reaches YAML.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/address.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/catalog.h"
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
	if (ARRAY_GROW(c->entries, c->cap, c->n + 1, 16) < 0)
		return -ENOMEM;
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
 * A value that is not the object of orchestrate(1) "Key layout" is -EPROTO and adds nothing; the
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
	/* an empty catalog has no array: memmove must not be given NULL */
	if (c->n > hi)
		memmove(&c->entries[lo + add.n], &c->entries[hi],
			(c->n - hi) * sizeof(*c->entries));
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

/* Sorts c; a catalog that is sorted already (a node's, which follows its
 * events in order: catalog_apply) costs one pass, not a sort, on each render. */
void catalog_sort(struct catalog *c)
{
	if (!c || c->n < 2)
		return;
	for (size_t i = 1; i < c->n; i++)
		if (entry_compare(&c->entries[i - 1], &c->entries[i]) > 0) {
			qsort(c->entries, c->n, sizeof(*c->entries), entry_compare);
			return;
		}
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

