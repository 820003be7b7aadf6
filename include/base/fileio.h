/*
 * fileio.h — reading a small file whole, and replacing a file atomically.
 *
 * file_write_atomic() is the one way orchestrate replaces a file others read
 * (the hiera file, the local version file, cache_services' output, the
 * metrics file): compare, temporary file beside the target, fsync, rename,
 * fsync the directory.  The reads are bounded, so a huge or endless file (a
 * FIFO, /dev/zero) is an error, never an exhausted memory.
 */
#ifndef ORCHESTRATE_FILEIO_H
#define ORCHESTRATE_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/buf.h"

/* No file we read whole (version, profile list, hiera, password) is larger. */
#define FILE_READ_MAX ((size_t)64 << 20)

/*
 * Appends everything fd holds (up to its end) to out.  -EFBIG when that is
 * more than max bytes.  On any failure out holds what it held before.
 */
int fd_read_all(int fd, size_t max, struct buf *out);
/* As fd_read_all() on the file at path: -ENOENT when absent, -EISDIR for a
 * directory. */
int file_read_max(const char *path, size_t max, struct buf *out);
/* file_read_max() with FILE_READ_MAX. */
int file_read_all(const char *path, struct buf *out);

/*
 * Writes data to path atomically: a temporary file in the same directory, fsync,
 * rename over path, fsync of the directory.  The new file keeps the mode (and,
 * when we may, the owner) of the file it replaces, default_mode when new.  When
 * path already holds exactly these bytes nothing is written and *ret_changed
 * (may be NULL) is false.  Only a regular file is replaced; when path is a
 * symbolic link, the link itself is replaced by the new file.  On any error the
 * old file is left as it was and no temporary file remains.
 */
int file_write_atomic(const char *path, const void *data, size_t len, mode_t default_mode,
		      bool *ret_changed);

#endif
