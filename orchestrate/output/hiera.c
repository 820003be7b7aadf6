/*
 * hiera.c — the service catalog (fleet/catalog.h, decoded and checked there)
 * rendered as the hiera YAML file (fileio.c's file_write_atomic() installs it).
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
#include <yaml.h>

#include "base/address.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "output/hiera.h"

/* --- rendering ------------------------------------------------------------- */

/*
 * One (key, address) pair of the document.  The key is SERVICE::IFACE, the
 * part after "services::" or "healthy_services::", which is the same for both
 * blocks (a common prefix leaves the order as it is): the pairs are collected
 * and sorted once, and the healthy block is the healthy pairs in that order.
 * An address's order key (address_key()) is read once here, not at each of
 * the sort's comparisons.  Rendering runs after every quiet catalog change,
 * so at thousands of entries this is much of a daemon's CPU per event
 * (bench/catalog-events.sh).
 */
struct item {
	const char *key;	/* in struct items' arena, shared by equal keys */
	const char *address;	/* borrowed from the catalog */
	struct address_key order;
	bool healthy;
};

struct items {
	struct item *v;
	size_t n;
	struct buf arena;	/* the keys, each NUL-terminated */
};

static void items_release(struct items *it)
{
	free(it->v);
	it->v = NULL;
	it->n = 0;
	buf_release(&it->arena);
}

static int item_compare(const void *x, const void *y)
{
	const struct item *a = x, *b = y;
	int r = a->key == b->key ? 0 : strcmp(a->key, b->key);
	return r ? r : address_key_compare(&a->order, a->address, &b->order, b->address);
}

/*
 * The pairs of the document, sorted.  A key (SERVICE::IFACE) is written into
 * the arena once and shared by the entries that follow with the same service
 * and iface (the catalog is sorted by service, then host: host after host
 * publishing one iface give one key), so that most comparisons of keys are of
 * pointers.  Keys are kept as offsets until the arena stops growing.
 */
static int items_collect(const struct catalog *c, struct items *ret)
{
	if (c->n == 0)
		return 0;
	ret->v = calloc(c->n, sizeof(*ret->v));
	_cleanup_(freep) size_t *offset = calloc(c->n, sizeof(*offset));
	if (!ret->v || !offset)
		return -ENOMEM;
	const struct catalog_entry *prev = NULL;
	for (size_t i = 0; i < c->n; i++) {
		const struct catalog_entry *e = &c->entries[i];
		if (!e->service || !e->iface || !e->address)
			continue;
		if (prev && strcmp(prev->service, e->service) == 0 &&
		    strcmp(prev->iface, e->iface) == 0) {
			offset[ret->n] = offset[ret->n - 1];
		} else {
			offset[ret->n] = ret->arena.len;
			if (buf_printf(&ret->arena, "%s::%s", e->service, e->iface) < 0 ||
			    buf_addc(&ret->arena, '\0') < 0)
				return -ENOMEM;
		}
		prev = e;
		struct item *it = &ret->v[ret->n++];
		it->address = e->address;
		it->healthy = e->healthy;
		address_key(e->address, &it->order);
	}
	/* The arena stopped moving: offsets become pointers. */
	for (size_t i = 0; i < ret->n; i++)
		ret->v[i].key = ret->arena.data + offset[i];
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
 * Keys and IPv4 addresses are plain scalars, as in orchestrate(1) get_services.  An IPv6 address is
 * single-quoted: plain, Ruby's YAML (Psych, which hiera uses) reads "::1" as the
 * Symbol :":1" and "1:2:3:4:5:6:7:8" as a base-60 integer, never as the string.
 */
static yaml_scalar_style_t address_style(const char *address)
{
	return strchr(address, ':') ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE;
}

/* Emits one block's pairs as HEAD::KEY: [addresses] (only the healthy ones
 * when healthy_only), skipping repeated pairs. */
static int emit_items(yaml_emitter_t *em, const struct items *it, const char *head,
		      bool healthy_only)
{
	yaml_event_t ev;
	_cleanup_(buf_releasep) struct buf text = BUF_INIT;
	for (size_t i = 0; i < it->n;) {
		const char *key = it->v[i].key;
		size_t end = i;
		bool any = false;
		for (; end < it->n && (it->v[end].key == key || strcmp(it->v[end].key, key) == 0);
		     end++)
			any = any || !healthy_only || it->v[end].healthy;
		if (!any) {
			i = end;	/* no healthy address: no key */
			continue;
		}
		buf_reset(&text);
		if (buf_printf(&text, "%s::%s", head, key) < 0)
			return -1;
		if (!scalar_event(&ev, text.data, YAML_PLAIN_SCALAR_STYLE) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
							  YAML_BLOCK_SEQUENCE_STYLE) ||
		    !yaml_emitter_emit(em, &ev))
			return -1;
		const char *last = NULL;
		for (; i < end; i++) {
			if (healthy_only && !it->v[i].healthy)
				continue;
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

	_cleanup_(items_releasep) struct items items = { NULL, 0, BUF_INIT };
	int r = items_collect(c, &items);
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
		  emit_items(&em, &items, "services", false) == 0 &&
		  emit_items(&em, &items, "healthy_services", true) == 0 &&
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
