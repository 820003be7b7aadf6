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

int address_compare(const char *a, const char *b)
{
	unsigned char ba[sizeof(struct in6_addr)], bb[sizeof(struct in6_addr)];
	int fa = address_family(a, ba), fb = address_family(b, bb);

	/* 0 (not an address) sorts last */
	if (fa != fb)
		return (fa ? fa : 9) - (fb ? fb : 9);
	if (fa == 4)
		return memcmp(ba, bb, sizeof(struct in_addr));
	if (fa == 6)
		return memcmp(ba, bb, sizeof(struct in6_addr));
	return strcmp(a ? a : "", b ? b : "");
}
