/*
 * catalog.h — the service catalog: what available_services/ holds, decoded and
 * validated.  An entry whose key or value is not well-formed (an invalid name,
 * a value that is not the JSON object of the key layout, an address that is
 * not an IPv4 or IPv6 address) is skipped and counted, never kept.  The node's
 * model follows it from watch events; output/hiera.h renders it.
 */
#ifndef ORCHESTRATE_CATALOG_H
#define ORCHESTRATE_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.h"

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

#endif
