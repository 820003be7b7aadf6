/*
 * strv.h — NULL-terminated vectors of strings (char **), and the one way to
 * build them (systemd's strv, git's string_list); and the one null-safe
 * string equality.
 *
 * A vector is built by pushing onto a pair (char **v, size_t n): v NULL and n
 * 0 to start with, n its length after each push.  The vector is
 * NULL-terminated after every successful call, so it can be handed to
 * strv_contains() or strv_free() at any time, and on failure it is left as it
 * was.  The capacity is implicit (it doubles at each power of two), so only a
 * vector built by these functions may be pushed onto.
 *
 * Functions that allocate return 0 or -ENOMEM.
 */
#ifndef ORCHESTRATE_STRV_H
#define ORCHESTRATE_STRV_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "base/cleanup.h"	/* strv_free(), strv_freep() */

/* Whether a and b are the same string, or both NULL (systemd's streq_ptr). */
static inline bool streq_ptr(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* The number of strings before the NULL (0 for a NULL vector). */
size_t strv_length(char *const *v);
/* Whether a and b hold the same strings in the same order (NULL: only NULL). */
bool strv_equal(char *const *a, char *const *b);
/* Whether s is one of the strings of v (NULL is an empty vector). */
bool strv_contains(char *const *v, const char *s);

/* Appends a copy of s. */
int strv_push(char ***v, size_t *n, const char *s);
/* Appends s itself, which the vector then owns; s is freed when this fails. */
int strv_consume(char ***v, size_t *n, char *s);

/* Sorts v bytewise and drops repeated strings; *n becomes the new length. */
void strv_sort_unique(char **v, size_t *n);

/*
 * The items of text, one a line: '#' starts a comment anywhere on a line,
 * surrounding ASCII whitespace (spaces, tabs, "\r" of CRLF files) is trimmed,
 * and lines left empty are skipped.  What remains of each line is appended to
 * (*v, *n) as it is, for the caller to check; a NUL byte in it is appended as
 * the four characters "\x00", so that no check can be fooled by a string cut
 * short.  This is the rule of every list file and list on stdin orchestrate
 * reads: the profile list, verify_hosts' hosts.  On -ENOMEM the lines appended
 * so far stay.
 */
int strv_push_lines(char ***v, size_t *n, const char *text, size_t len);

#endif
