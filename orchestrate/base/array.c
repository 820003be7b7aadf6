/*
 * array.c — growing arrays (array.h).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/array.h"

int array_grow(void **p, size_t *cap, size_t need, size_t size, size_t min)
{
	size_t c = *cap ? *cap : (min ? min : 1);
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (c > SIZE_MAX / size)
		return -ENOMEM;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}
