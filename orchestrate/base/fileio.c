/*
 * fileio.c — whole-file reads and the atomic file replacement (fileio.h).
 *
 * The atomic write compares first, so that a file whose bytes did not change
 * is never rewritten (its mtime, and whoever watches it, stay quiet), then
 * writes a temporary file beside the target, fsyncs it, renames it over the
 * target and fsyncs the directory.
 */
#define _GNU_SOURCE	/* mkostemp */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/fileio.h"

int fd_read_all(int fd, size_t max, struct buf *out)
{
	size_t start = out->len;

	for (;;) {
		if (out->len - start > max) {
			out->len = start;
			if (out->data)
				out->data[start] = '\0';
			return -EFBIG;
		}
		int r = buf_grow(out, 16384);
		if (r < 0) {
			out->len = start;
			if (out->data)
				out->data[start] = '\0';
			return r;
		}
		ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			out->len = start;
			out->data[start] = '\0';
			return r;
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
		out->data[out->len] = '\0';
	}
	return 0;
}

int file_read_max(const char *path, size_t max, struct buf *out)
{
	if (!path || !out)
		return -EINVAL;
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	return fd_read_all(fd, max, out);
}

int file_read_all(const char *path, struct buf *out)
{
	return file_read_max(path, FILE_READ_MAX, out);
}

/* The temporary file of file_write_atomic(): closed and removed on every
 * return path unless the rename made it the real file (path is then NULL). */
struct tmpfile {
	char *path;
	int fd;
};

static void tmpfile_cleanup(struct tmpfile *t)
{
	if (t->fd >= 0)
		close(t->fd);
	if (t->path) {
		unlink(t->path);
		free(t->path);
	}
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int file_write_atomic(const char *path, const void *data, size_t len, mode_t default_mode,
		      bool *ret_changed)
{
	if (ret_changed)
		*ret_changed = false;
	if (!path || !*path || (!data && len))
		return -EINVAL;

	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return -EISDIR;

	/* The mode (and owner) of the file we replace; only a regular file is
	 * replaced, and only it is read (reading a FIFO would block). */
	struct stat st;
	bool have_old = false;
	mode_t mode = default_mode & 07777;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		if (!S_ISREG(st.st_mode))
			return -EINVAL;
		have_old = true;
		mode = st.st_mode & 07777;

		_cleanup_(buf_releasep) struct buf old = BUF_INIT;
		if (file_read_max(path, len, &old) == 0 && old.len == len &&
		    (len == 0 || memcmp(old.data, data, len) == 0))
			return 0;
	} else if (errno != ENOENT) {
		return -errno;
	}

	_cleanup_(buf_releasep) struct buf dir = BUF_INIT;
	_cleanup_(buf_releasep) struct buf tmpl = BUF_INIT;
	int r = !slash ? buf_adds(&dir, ".") : slash == path ? buf_adds(&dir, "/")
			 : buf_add(&dir, path, (size_t)(slash - path));
	if (r < 0 || buf_printf(&tmpl, "%s/.%s.XXXXXX", buf_str(&dir), base) < 0)
		return -ENOMEM;

	_cleanup_(tmpfile_cleanup) struct tmpfile tmp = { NULL, -1 };
	tmp.fd = mkostemp(tmpl.data, O_CLOEXEC);
	if (tmp.fd < 0)
		return -errno;
	tmp.path = buf_detach(&tmpl);

	r = write_all(tmp.fd, data, len);
	if (r < 0)
		return r;
	/* Keep the owner of the file we replace when we may (as root); chown
	 * first, since it may clear set-id bits that fchmod then restores. */
	if (have_old && (st.st_uid != geteuid() || st.st_gid != getegid()) &&
	    fchown(tmp.fd, st.st_uid, st.st_gid) < 0 && errno != EPERM)
		return -errno;
	if (fchmod(tmp.fd, mode) < 0)
		return -errno;
	if (fsync(tmp.fd) < 0)
		return -errno;
	int fd = TAKE_FD(tmp.fd);
	if (close(fd) < 0)
		return -errno;
	if (rename(tmp.path, path) < 0)
		return -errno;
	free(TAKE_PTR(tmp.path));
	if (ret_changed)
		*ret_changed = true;

	/* The rename is durable once the directory is synced.  The new file is
	 * in place whatever happens here, so a failure is not reported: the caller
	 * must know that the bytes changed (to run the services hook), and some
	 * file systems do not sync directories at all. */
	_cleanup_(closep) int dfd = open(buf_str(&dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0)
		(void)fsync(dfd);
	return 0;
}
