/*
 * hiera.h — the service catalog and its rendering as a hiera YAML file (SPEC §4).
 *
 * The catalog is what available_services/ holds, decoded and validated: an entry
 * whose key or value is not well-formed (an invalid name, a value that is not the
 * JSON object of SPEC §2, an address that is not an IPv4 or IPv6 address) is
 * skipped and counted, never rendered.  Rendering goes through libyaml's emitter
 * (never printf), sorts everything, and so gives the same bytes for the same
 * catalog: an unchanged catalog never rewrites the file.
 *
 *   ---
 *   services::glance::eth0:
 *   - 10.0.0.5
 *   - 10.0.0.6
 *   healthy_services::glance::eth0:
 *   - 10.0.0.5
 */
#ifndef ORCHESTRATE_HIERA_H
#define ORCHESTRATE_HIERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "etcd/etcd.h"
#include "base/fileio.h"	/* file_write_atomic(), which installs the hiera file */

struct catalog_entry {
	char *service;
	char *host;
	char *iface;
	char *address;
	bool healthy;
};

struct catalog {
	struct catalog_entry *entries;	/* sorted by service, host, iface, address */
	size_t n;
	size_t cap;
	size_t skipped;			/* malformed keys or values left out */
	int64_t revision;
};

#define CATALOG_INIT { NULL, 0, 0, 0, 0 }

/* Decodes the kvs of a range over services_dir (key_services_dir()). */
int catalog_from_kvs(const struct etcd_kv_list *kvs, const char *services_dir,
		     struct catalog *ret);
/* Decodes one service value: {"addresses":{IFACE:ADDR,…},"healthy":bool,…}.
 * Appends one entry per valid address; -EPROTO when the value is malformed. */
int catalog_add_value(struct catalog *c, const char *service, const char *host,
		      const char *value, size_t value_len);
void catalog_sort(struct catalog *c);
/*
 * Applies one change to a sorted catalog: host now publishes value for service
 * (NULL: withdrew it).  The catalog stays sorted and holds exactly what a fresh
 * read of the same keys would give, so a node can follow the catalog from its
 * watch events instead of reading it again.  -ENOMEM leaves c unchanged.
 */
int catalog_apply(struct catalog *c, const char *service, const char *host, const char *value,
		  size_t value_len);
/* The same for a watch event on a key below services_dir; keys that are not
 * SERVICE/HOST are ignored, as a read skips them.  Raises c->revision. */
int catalog_apply_kv(struct catalog *c, const char *services_dir, const struct etcd_kv *kv,
		     bool deleted);
void catalog_release(struct catalog *c);
static inline void catalog_releasep(struct catalog *c) { catalog_release(c); }

/* How many distinct hosts publish service (only healthy ones if healthy). */
size_t catalog_count_hosts(const struct catalog *c, const char *service, bool healthy);

/* Renders the catalog (sorted first) as hiera YAML into out. */
int hiera_render(struct catalog *c, struct buf *out);


#endif
