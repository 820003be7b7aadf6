/*
 * netif.h — this node's own addresses, for publish_service's default
 * (orchestrate(1): "every IPv4 address of every interface but loopback").
 */
#ifndef ORCHESTRATE_NETIF_H
#define ORCHESTRATE_NETIF_H

#include <stddef.h>

#include "fleet/catalog.h"

/*
 * Every IPv4 address of every interface that is up and not a loopback
 * (getifaddrs), as entries with only iface and address set (service and host
 * NULL, healthy false), sorted by iface then address.  An interface with several
 * addresses gives several entries; an interface whose name is not a valid name
 * (schema_name_valid) is left out, since it could not be published.  Returns the
 * number of entries (0 with *ret NULL when there are none) or a negative code;
 * free with netif_addresses_free().
 */
int netif_ipv4_addresses(struct catalog_entry **ret, size_t *ret_n);
void netif_addresses_free(struct catalog_entry *entries, size_t n);

#endif
