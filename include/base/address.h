/*
 * address.h — IP addresses as text: the one validator of IPv4 and IPv6
 * addresses, used wherever one comes in (the config file's node.addresses,
 * publish_service --address, a value read from available_services/, the
 * interfaces), and their order.
 *
 * An address is what inet_pton(3) reads, and nothing more: dotted-quad IPv4
 * with no leading zeros ("10.0.0.5", not "010.0.0.5"), or IPv6 in any of its
 * spellings ("2001:db8::1", "::ffff:10.0.0.5"); no surrounding spaces, no
 * brackets, no zone ("fe80::1%eth0"), no prefix length, no host name.
 */
#ifndef ORCHESTRATE_ADDRESS_H
#define ORCHESTRATE_ADDRESS_H

#include <stdbool.h>

/* Room for the text of any address, NUL included (INET6_ADDRSTRLEN). */
#define ADDRESS_TEXT_MAX 46

/* 4 for an IPv4 address, 6 for an IPv6 one, 0 for anything else (text may
 * be NULL); the address's bytes (4 or 16) go to bytes when it is not NULL. */
int address_family(const char *text, unsigned char bytes[16]);

static inline bool address_valid(const char *text)
{
	return address_family(text, 0) != 0;
}

/* The canonical spelling of text (inet_ntop's: lower case, "::" compressed),
 * so that "2001:DB8::1" and "2001:db8::0:1" are one address.  -EINVAL when
 * text is not an address. */
int address_canonical(const char *text, char out[ADDRESS_TEXT_MAX]);

/* Numeric order, not text order: IPv4 before IPv6, then by value
 * ("10.0.0.9" before "10.0.0.10"); text that is not an address after every
 * address, by strcmp. */
int address_compare(const char *a, const char *b);

/* The same order with each text parsed once, for sorts of many addresses:
 * address_key() fills the key of text (kept beside it), and
 * address_key_compare() orders two (key, text) pairs as address_compare()
 * orders the texts. */
struct address_key {
	unsigned char family;	/* 4, 6, or 9: not an address */
	unsigned char bytes[16];
};
void address_key(const char *text, struct address_key *ret);
int address_key_compare(const struct address_key *ka, const char *a,
			const struct address_key *kb, const char *b);

#endif
