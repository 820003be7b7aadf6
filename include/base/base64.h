/*
 * base64.h — the standard alphabet with padding, as etcd's gateway encodes bytes
 * fields (keys, values, range ends).
 */
#ifndef ORCHESTRATE_BASE64_H
#define ORCHESTRATE_BASE64_H

#include <stddef.h>
#include "base/buf.h"

int base64_encode(const void *data, size_t len, struct buf *out);
/* Returns -EINVAL on a character outside the alphabet or bad padding. */
int base64_decode(const char *text, size_t len, struct buf *out);
/* The URL alphabet without padding (RFC 4648 section 5), as a JSON Web
 * Token's parts are written; -EINVAL likewise. */
int base64url_decode(const char *text, size_t len, struct buf *out);

#endif
