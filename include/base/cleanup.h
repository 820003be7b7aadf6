/*
 * cleanup.h — scope-bound cleanup, after systemd's _cleanup_ macros.
 *
 * A variable declared with _cleanup_(freep) is freed when it leaves scope, on
 * every return path; TAKE_PTR() hands ownership out of such a variable.  Each
 * destructor accepts a pointer to NULL.  This is the one cleanup idiom of the
 * code base: a function that frees what it half built on failure does it
 * with these, not with a goto to an exit label (scripts/check-layers fails
 * on a goto).
 */
#ifndef ORCHESTRATE_CLEANUP_H
#define ORCHESTRATE_CLEANUP_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <cjson/cJSON.h>

#include "base/buf.h"

#define _cleanup_(f) __attribute__((cleanup(f)))

#define TAKE_PTR(p) ({ __typeof__(p) _p = (p); (p) = NULL; _p; })
#define TAKE_FD(fd) ({ int _fd = (fd); (fd) = -1; _fd; })

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd) { if (*fd >= 0) close(*fd); }
static inline void fclosep(FILE **f) { if (*f) fclose(*f); }
static inline void cJSON_Deletep(cJSON **j) { if (*j) cJSON_Delete(*j); }
static inline void buf_releasep(struct buf *b) { buf_release(b); }

/* Frees a NULL-terminated array of strings and the array (strv.h builds
 * them); NULL is fine. */
void strv_free(char **v);
static inline void strv_freep(char ***v) { strv_free(*v); }

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

#endif
