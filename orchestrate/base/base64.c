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

/* Each byte's value in the alphabet, or -1. */
static const signed char values[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
	-1,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
	-1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

/*
 * Every key and value of every watch event and read passes through here, so
 * it writes straight into the room grown for it, one quad at a time, with a
 * table lookup a byte (bench/catalog-events.sh: this was a tenth of the
 * daemon's instructions per catalog event).  '=' may only end the last quad,
 * as "x=" or "=="; anything else is -EINVAL, and out is then left as it was.
 */
int base64_decode(const char *text, size_t len, struct buf *out)
{
	if (len % 4)
		return -EINVAL;
	int r = buf_grow(out, len / 4 * 3);
	if (r < 0)
		return r;
	const unsigned char *p = (const unsigned char *)text;
	unsigned char *q = (unsigned char *)out->data + out->len;
	for (size_t i = 0; i < len; i += 4, p += 4) {
		int pad = 0;
		if (i + 4 == len && p[3] == '=')
			pad = p[2] == '=' ? 2 : 1;
		int a = values[p[0]], b = values[p[1]];
		int c = pad == 2 ? 0 : values[p[2]], d = pad ? 0 : values[p[3]];
		if ((a | b | c | d) < 0) {
			out->data[out->len] = '\0';
			return -EINVAL;
		}
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		*q++ = (unsigned char)(v >> 16);
		if (pad < 2)
			*q++ = (unsigned char)(v >> 8);
		if (pad < 1)
			*q++ = (unsigned char)v;
	}
	out->len = (size_t)((char *)q - out->data);
	out->data[out->len] = '\0';
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
