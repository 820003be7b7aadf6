/*
 * base64.c — RFC 4648 base64 with padding, the encoding etcd's gateway uses for
 * every bytes field.  Decoding is strict: the gateway never sends whitespace or
 * unpadded text, so anything else is a malformed reply.  The URL alphabet
 * without padding is read too: the parts of a JSON Web Token are written so.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/base64.h"
#include "base/cleanup.h"

static const char alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(const void *data, size_t len, struct buf *out)
{
	const unsigned char *p = data;
	int r = buf_grow(out, (len + 2) / 3 * 4);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < len)
			v |= p[i + 2];
		char q[4] = {
			alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63],
			i + 1 < len ? alphabet[(v >> 6) & 63] : '=',
			i + 2 < len ? alphabet[v & 63] : '=',
		};
		buf_add(out, q, 4);
	}
	return 0;
}

static int value_of(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int base64_decode(const char *text, size_t len, struct buf *out)
{
	if (len % 4)
		return -EINVAL;
	int r = buf_grow(out, len / 4 * 3);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len; i += 4) {
		bool last = i + 4 == len;
		int pad = 0;
		uint32_t v = 0;
		for (int j = 0; j < 4; j++) {
			char c = text[i + j];
			int d;
			if (c == '=' && last && j >= 2) {
				pad++;
				d = 0;
			} else if (pad || (d = value_of(c)) < 0) {
				return -EINVAL;
			}
			v = v << 6 | (uint32_t)d;
		}
		unsigned char q[3] = { v >> 16, v >> 8, v };
		buf_add(out, q, 3 - pad);
	}
	return 0;
}

int base64url_decode(const char *text, size_t len, struct buf *out)
{
	if (len % 4 == 1)
		return -EINVAL;
	_cleanup_(buf_releasep) struct buf std = BUF_INIT;
	int r = buf_grow(&std, len + 2);
	if (r < 0)
		return r;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (c == '+' || c == '/' || c == '=')
			return -EINVAL;	/* the standard alphabet's, or padding */
		c = c == '-' ? '+' : c == '_' ? '/' : c;
		buf_add(&std, &c, 1);
	}
	while (std.len % 4)
		buf_add(&std, "=", 1);
	return base64_decode(std.data, std.len, out);
}
