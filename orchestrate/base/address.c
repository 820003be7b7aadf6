/*
 * address.c — IP address validation, canonical spelling and order
 * (address.h), on inet_pton(3) and inet_ntop(3).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "base/address.h"

int address_family(const char *text, unsigned char bytes[16])
{
	unsigned char b[sizeof(struct in6_addr)];
	int family = 0;

	if (!text)
		return 0;
	if (inet_pton(AF_INET, text, b) == 1)
		family = 4;
	else if (inet_pton(AF_INET6, text, b) == 1)
		family = 6;
	if (family && bytes)
		memcpy(bytes, b, family == 4 ? sizeof(struct in_addr) : sizeof(struct in6_addr));
	return family;
}

int address_canonical(const char *text, char out[ADDRESS_TEXT_MAX])
{
	unsigned char b[sizeof(struct in6_addr)];

	switch (address_family(text, b)) {
	case 4:
		/* inet_pton's IPv4 is dotted decimal with no leading zero, one
		 * spelling a value: the text is canonical already (inet_ntop
		 * would sprintf it again, for every address of every catalog
		 * event). */
		if (strlen(text) >= ADDRESS_TEXT_MAX)
			return -EINVAL;
		strcpy(out, text);
		return 0;
	case 6:
		return inet_ntop(AF_INET6, b, out, ADDRESS_TEXT_MAX) ? 0 : -EINVAL;
	default:
		return -EINVAL;
	}
}

void address_key(const char *text, struct address_key *ret)
{
	int family = address_family(text, ret->bytes);
	ret->family = (unsigned char)(family ? family : 9);	/* not an address: last */
}

int address_key_compare(const struct address_key *ka, const char *a,
			const struct address_key *kb, const char *b)
{
	if (ka->family != kb->family)
		return (int)ka->family - (int)kb->family;
	if (ka->family == 4)
		return memcmp(ka->bytes, kb->bytes, sizeof(struct in_addr));
	if (ka->family == 6)
		return memcmp(ka->bytes, kb->bytes, sizeof(struct in6_addr));
	return strcmp(a ? a : "", b ? b : "");
}

int address_compare(const char *a, const char *b)
{
	struct address_key ka, kb;

	address_key(a, &ka);
	address_key(b, &kb);
	return address_key_compare(&ka, a, &kb, b);
}
