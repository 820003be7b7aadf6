/*
 * strv.c — NULL-terminated string vectors (strv.h).
 *
 * Growth: a vector of n strings needs n + 1 slots.  The slots are reallocated
 * when n + 1 reaches a power of two, to twice that plus one, so that n pushes
 * cost O(n) and the length alone tells the capacity.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/strv.h"

void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

size_t strv_length(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

bool strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

int strv_consume(char ***v, size_t *n, char *s)
{
	char **p = *v;

	if (!s)
		return -ENOMEM;
	if (!p || ((*n + 1) & *n) == 0) {
		p = *n > ((size_t)-1) / (4 * sizeof(char *)) ? NULL
			: realloc(*v, (2 * (*n + 1) + 1) * sizeof(char *));
		if (!p) {
			free(s);
			return -ENOMEM;
		}
		*v = p;
	}
	p[(*n)++] = s;
	p[*n] = NULL;
	return 0;
}

int strv_push(char ***v, size_t *n, const char *s)
{
	return strv_consume(v, n, strdup(s));
}

/* Appends a copy of the len bytes at s (which need not be NUL-terminated). */
static int strv_pushn(char ***v, size_t *n, const char *s, size_t len)
{
	char *copy = malloc(len + 1);
	if (copy) {
		memcpy(copy, s, len);
		copy[len] = '\0';
	}
	return strv_consume(v, n, copy);
}

static int strv_compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort_unique(char **v, size_t *n)
{
	size_t w = 0;

	if (!v || *n == 0)
		return;
	qsort(v, *n, sizeof(char *), strv_compare);
	for (size_t i = 0; i < *n; i++) {
		if (w > 0 && strcmp(v[w - 1], v[i]) == 0)
			free(v[i]);
		else
			v[w++] = v[i];
	}
	v[w] = NULL;
	*n = w;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Appends [s, e) with each NUL byte spelled "\x00". */
static int push_escaped(char ***v, size_t *n, const char *s, const char *e)
{
	size_t len = (size_t)(e - s), nuls = 0;
	for (const char *p = s; p < e; p++)
		nuls += *p == '\0';
	char *copy = malloc(len + 3 * nuls + 1), *w = copy;
	if (!copy)
		return -ENOMEM;
	for (const char *p = s; p < e; p++) {
		if (*p) {
			*w++ = *p;
		} else {
			memcpy(w, "\\x00", 4);
			w += 4;
		}
	}
	*w = '\0';
	return strv_consume(v, n, copy);
}

int strv_push_lines(char ***v, size_t *n, const char *text, size_t len)
{
	const char *end = text + len;

	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *stop = nl ? nl : end;
		const char *hash = memchr(line, '#', (size_t)(stop - line));
		const char *s = line, *e = hash ? hash : stop;

		while (s < e && is_space(*s))
			s++;
		while (e > s && is_space(e[-1]))
			e--;
		if (e > s) {
			int r = memchr(s, '\0', (size_t)(e - s)) ? push_escaped(v, n, s, e)
								   : strv_pushn(v, n, s, (size_t)(e - s));
			if (r < 0)
				return r;
		}
		line = nl ? nl + 1 : end;
	}
	return 0;
}

bool strv_equal(char *const *a, char *const *b)
{
	size_t i;

	if (!a || !b)
		return a == b;
	for (i = 0; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return !a[i] && !b[i];
}
