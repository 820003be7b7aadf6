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
 * Keys and IPv4 addresses are plain scalars, as in orchestrate(1) get_services.  An IPv6 address is
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
