/*
 * netif.c — the node's IPv4 addresses, read with getifaddrs(3).
 *
 * publish_service uses these when neither the command line nor the config names
 * addresses.  Loopback and interfaces that are down are left out: another host
 * could not reach this one through them.  The list is sorted so that the value
 * published (and the hiera file it ends up in) does not change with the order
 * the kernel happens to list interfaces in.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/array.h"
#include "base/address.h"
#include "base/cleanup.h"
#include "fleet/catalog.h"
#include "config/netif.h"
#include "fleet/schema.h"

void netif_addresses_free(struct catalog_entry *entries, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(entries[i].service);
		free(entries[i].host);
		free(entries[i].iface);
		free(entries[i].address);
	}
	free(entries);
}

static void freeifaddrsp(struct ifaddrs **p)
{
	if (*p)
		freeifaddrs(*p);
}

static int netif_compare(const void *x, const void *y)
{
	const struct catalog_entry *a = x, *b = y;
	int r = strcmp(a->iface, b->iface);
	return r ? r : address_compare(a->address, b->address);
}

int netif_ipv4_addresses(struct catalog_entry **ret, size_t *ret_n)
{
	if (!ret || !ret_n)
		return -EINVAL;
	*ret = NULL;
	*ret_n = 0;

	_cleanup_(freeifaddrsp) struct ifaddrs *ifs = NULL;
	if (getifaddrs(&ifs) < 0)
		return -errno;

	size_t n = 0, cap = 0;
	struct catalog_entry *v = NULL;
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_name)
			continue;
		if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK))
			continue;
		if (!schema_name_valid(i->ifa_name))
			continue;
		char text[INET_ADDRSTRLEN];
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)i->ifa_addr;
		if (!inet_ntop(AF_INET, &sin->sin_addr, text, sizeof(text)))
			continue;
		if (ARRAY_GROW(v, cap, n + 1, 8) < 0) {
			netif_addresses_free(v, n);
			return -ENOMEM;
		}
		v[n] = (struct catalog_entry){ .iface = strdup(i->ifa_name), .address = strdup(text) };
		n++;
		if (!v[n - 1].iface || !v[n - 1].address) {
			netif_addresses_free(v, n);
			return -ENOMEM;
		}
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), netif_compare);
	*ret = v;
	*ret_n = n;
	return n > INT_MAX ? INT_MAX : (int)n;
}
