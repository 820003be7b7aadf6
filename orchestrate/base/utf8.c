/*
 * utf8.c — strict UTF-8 decoding (utf8.h).
 */
#include <errno.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"

size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
	unsigned c = s[0];
	size_t len;
	uint32_t cp, min;

	if (c < 0x80) {
		len = 1, cp = c, min = 0;
	} else if (c >= 0xc2 && c <= 0xdf) {
		len = 2, cp = c & 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3, cp = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, cp = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	if (ret_cp)
		*ret_cp = cp;
	return len;
}

int utf8_tail(const char *s, size_t max, char **ret)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	size_t len = strlen(s);
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	int r;

	if (len > max) {
		p = end - max;
		/* the continuation bytes of a sequence the cut went through */
		for (int i = 0; i < 3 && p < end && (*p & 0xc0) == 0x80; i++)
			p++;
	}
	r = buf_grow(&b, (size_t)(end - p));
	if (r < 0)
		return r;
	while (p < end) {
		size_t n = utf8_sequence(p, (size_t)(end - p), NULL);
		if (n)
			r = buf_add(&b, p, n);
		else
			r = buf_add(&b, "\xef\xbf\xbd", 3), n = 1;
		if (r < 0)
			return r;
		p += n;
	}
	if (b.len > max) {
		/* replacements made it longer: cut again at a character boundary */
		size_t start = b.len - max;
		while (start < b.len && (b.data[start] & 0xc0) == 0x80)
			start++;
		buf_consume(&b, start);
	}
	*ret = buf_detach(&b);
	return *ret ? 0 : -ENOMEM;
}
