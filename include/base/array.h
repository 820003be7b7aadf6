/*
 * array.h — the one way an array grows (systemd's GREEDY_REALLOC): to at
 * least what is needed, doubling, so that n appends cost O(n).
 */
#ifndef ORCHESTRATE_ARRAY_H
#define ORCHESTRATE_ARRAY_H

#include <stddef.h>

/*
 * Makes the array *p of *cap items of size bytes hold at least need items:
 * nothing when it does, else a capacity doubled from *cap (from min when 0)
 * until it is enough.  Returns 0, or -ENOMEM with *p and *cap unchanged.
 */
int array_grow(void **p, size_t *cap, size_t need, size_t size, size_t min);

/* array_grow() for a typed pointer p and its capacity cap (size_t lvalues). */
#define ARRAY_GROW(p, cap, need, min) \
	array_grow((void **)&(p), &(cap), (need), sizeof(*(p)), (min))

#endif
