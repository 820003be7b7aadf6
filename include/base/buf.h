/*
 * buf.h — a small growable byte buffer (git's strbuf, Redis's sds).
 *
 * Every piece of data that comes from outside (HTTP bodies, keys, values, hook
 * output) lives in a struct buf, never in a fixed array.  The contents are always
 * NUL-terminated, so buf_str() can be handed to C string functions, but a buffer
 * may also hold binary data with embedded NULs: len is authoritative.
 *
 * Functions that can allocate return 0 or -ENOMEM and leave the buffer valid.
 */
#ifndef ORCHESTRATE_BUF_H
#define ORCHESTRATE_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

int buf_grow(struct buf *b, size_t extra);
int buf_add(struct buf *b, const void *data, size_t len);
int buf_adds(struct buf *b, const char *s);
int buf_addc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Drops the first n bytes (used by stream parsers to consume a frame). */
void buf_consume(struct buf *b, size_t n);
/* Keeps only the last max bytes (the tail of a hook's output). */
void buf_keep_tail(struct buf *b, size_t max);
void buf_reset(struct buf *b);
void buf_release(struct buf *b);
/* Hands the string to the caller (never NULL on success) and empties b. */
char *buf_detach(struct buf *b);
static inline const char *buf_str(const struct buf *b) { return b->data ? b->data : ""; }

#endif
