/*
 * utf8.h — UTF-8 decoding, strictly: what fleet/ stores (valid UTF-8, so that
 * cJSON writes valid JSON) and what output/ shows (no control characters)
 * both start from here; and the one UTF-8-safe cut of a text's tail.
 */
#ifndef ORCHESTRATE_UTF8_H
#define ORCHESTRATE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * The length (1-4) of the well-formed UTF-8 sequence at the start of the n
 * bytes at s (n > 0), with its code point in *ret_cp when not NULL; 0 when
 * it is not one: a stray continuation byte, a cut sequence, an overlong form,
 * a surrogate or a code point past U+10FFFF.
 */
size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *ret_cp);

/*
 * The last max bytes of s as valid UTF-8, in *ret (0, or -ENOMEM).  A failed
 * run's error is at the end of its output, so the tail is what is kept; the
 * cut never splits a multibyte sequence, and invalid bytes become U+FFFD
 * (cJSON would emit them raw and make the value invalid JSON for every other
 * reader).
 */
int utf8_tail(const char *s, size_t max, char **ret);

#endif
