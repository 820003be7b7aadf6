/*
 * local.c — this node's own facts (local.h): the local version file, the
 * services it offers, its addresses and its name.
 *
 * Each fact has one rule here, used by the command line and the daemon alike.
 * Before this file they had one copy each, and the copies disagreed: the line
 * "glance # web" of the profile list was skipped by publish_service and
 * published as glance by the daemon, and a version file holding " v2" read as
 * v2 on the command line and as no version at all in the daemon.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/address.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/fileio.h"
#include "config/local.h"
#include "config/netif.h"
#include "fleet/schema.h"
#include "base/strv.h"

/* Mode of a local version file we create. */
#define LOCAL_VERSION_MODE 0644
#define LOCAL_VERSION_FILE_MAX 4096

const char *local_name_problem(const char *name)
{
	return schema_name_problem(name);
}

/* --- the local version file --------------------------------------------------- */

static bool is_ascii_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int local_version_read(const char *path, char **ret)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	const char *s, *e;
	int r;

	*ret = NULL;
	if (!path)
		return -EINVAL;
	/* A version file is one name and a newline: far below this, and a file
	 * above it holds something else. */
	r = file_read_max(path, LOCAL_VERSION_FILE_MAX, &b);
	if (r == -EFBIG)
		return -EINVAL;
	if (r < 0)
		return r;
	s = buf_str(&b);
	e = s + b.len;
	while (s < e && is_ascii_space(*s))
		s++;
	while (e > s && is_ascii_space(e[-1]))
		e--;
	if (s == e)
		return -ENOENT;
	/* A NUL byte would end the name early: "v2\0junk" is not "v2". */
	if (memchr(s, '\0', (size_t)(e - s)))
		return -EINVAL;
	_cleanup_(freep) char *v = strndup(s, (size_t)(e - s));
	if (!v)
		return -ENOMEM;
	if (!schema_name_valid(v))
		return -EINVAL;
	*ret = TAKE_PTR(v);
	return 0;
}

int local_version_write(const char *path, const char *version)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	bool changed = false;
	int r;

	if (!path || !version || !schema_name_valid(version))
		return -EINVAL;
	if ((r = buf_printf(&b, "%s\n", version)) < 0)
		return r;
	r = file_write_atomic(path, b.data, b.len, LOCAL_VERSION_MODE, &changed);
	if (r < 0)
		return r;
	return changed ? 1 : 0;
}

/* --- the services this node offers --------------------------------------------- */

/* Adds name to the services unless it is there already, or to the skipped
 * messages when it is not a valid name; what says where it came from. */
static int add_service(const char *what, const char *name, char ***v, size_t *n,
		       char ***skipped, size_t *n_skipped)
{
	if (!schema_name_valid(name)) {
		_cleanup_(buf_releasep) struct buf msg = BUF_INIT;
		if (!skipped)
			return 0;
		if (buf_printf(&msg, "%s: invalid service '%s': %s", what, name,
			       schema_name_problem(name)) < 0)
			return -ENOMEM;
		return strv_consume(skipped, n_skipped, buf_detach(&msg));
	}
	if (strv_contains(*v, name))
		return 0;
	return strv_push(v, n, name);
}

/* Records that a whole source could not be read. */
static int skip_source(const char *what, int error, char ***skipped, size_t *n_skipped)
{
	_cleanup_(buf_releasep) struct buf msg = BUF_INIT;
	if (!skipped)
		return 0;
	if (buf_printf(&msg, "cannot read %s: %s", what, strerror(-error)) < 0)
		return -ENOMEM;
	return strv_consume(skipped, n_skipped, buf_detach(&msg));
}

static int services_from_list(const char *path, char ***v, size_t *n, char ***skipped,
			      size_t *n_skipped)
{
	_cleanup_(buf_releasep) struct buf text = BUF_INIT;
	_cleanup_(buf_releasep) struct buf what = BUF_INIT;
	_cleanup_(strv_freep) char **lines = NULL;
	size_t n_lines = 0;
	int r;

	if (buf_printf(&what, "profile list '%s'", path) < 0)
		return -ENOMEM;
	r = file_read_all(path, &text);
	if (r == -ENOENT)
		return 0;
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return skip_source(buf_str(&what), r, skipped, n_skipped);
	if ((r = strv_push_lines(&lines, &n_lines, text.data, text.len)) < 0)
		return r;
	for (size_t i = 0; i < n_lines; i++)
		if ((r = add_service(buf_str(&what), lines[i], v, n, skipped, n_skipped)) < 0)
			return r;
	return 0;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

static int services_from_dir(const char *path, char ***v, size_t *n, char ***skipped,
			     size_t *n_skipped)
{
	_cleanup_(buf_releasep) struct buf what = BUF_INIT;
	_cleanup_(strv_freep) char **names = NULL;
	_cleanup_(closedirp) DIR *d = NULL;
	size_t n_names = 0;
	struct dirent *de;
	int r;

	if (buf_printf(&what, "profile directory '%s'", path) < 0)
		return -ENOMEM;
	d = opendir(path);
	if (!d && errno == ENOENT)
		return 0;
	if (!d)
		return errno == ENOMEM ? -ENOMEM : skip_source(buf_str(&what), -errno, skipped,
							       n_skipped);
	for (errno = 0; (de = readdir(d)); errno = 0)
		if (de->d_name[0] != '.' && (r = strv_push(&names, &n_names, de->d_name)) < 0)
			return r;
	if (errno)
		return skip_source(buf_str(&what), -errno, skipped, n_skipped);
	/* readdir's order is the file system's: sort, for the same answer on
	 * every node and every run */
	strv_sort_unique(names, &n_names);
	for (size_t i = 0; i < n_names; i++)
		if ((r = add_service(buf_str(&what), names[i], v, n, skipped, n_skipped)) < 0)
			return r;
	return 0;
}

int local_services(const struct config *cfg, char ***ret, char ***ret_skipped)
{
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(strv_freep) char **skipped = NULL;
	_cleanup_(buf_releasep) struct buf what = BUF_INIT;
	size_t n = 0, n_skipped = 0;
	char ***sk = ret_skipped ? &skipped : NULL;
	int r;

	*ret = NULL;
	if (ret_skipped)
		*ret_skipped = NULL;
	if (buf_printf(&what, "%s: node.services", cfg->path ? cfg->path : "the config") < 0)
		return -ENOMEM;
	for (size_t i = 0; cfg->services && cfg->services[i]; i++)
		if ((r = add_service(buf_str(&what), cfg->services[i], &v, &n, sk, &n_skipped)) < 0)
			return r;
	if (cfg->profile_list && *cfg->profile_list &&
	    (r = services_from_list(cfg->profile_list, &v, &n, sk, &n_skipped)) < 0)
		return r;
	if (cfg->profile_dir && *cfg->profile_dir &&
	    (r = services_from_dir(cfg->profile_dir, &v, &n, sk, &n_skipped)) < 0)
		return r;
	if (!v && !(v = calloc(1, sizeof(char *))))
		return -ENOMEM;
	*ret = TAKE_PTR(v);
	if (ret_skipped)
		*ret_skipped = TAKE_PTR(skipped);
	return 0;
}

/* --- addresses and name ------------------------------------------------------------ */

int local_addresses(const struct config *cfg, struct catalog_entry **ret, size_t *ret_n)
{
	struct catalog_entry *v;
	size_t n = cfg->n_addresses;

	*ret = NULL;
	*ret_n = 0;
	if (n == 0)
		return netif_ipv4_addresses(ret, ret_n);
	for (size_t i = 0; i < n; i++)
		if (!schema_name_valid(cfg->addresses[i].iface) ||
		    !address_valid(cfg->addresses[i].address))
			return -EINVAL;
	v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i].iface = strdup(cfg->addresses[i].iface);
		v[i].address = strdup(cfg->addresses[i].address);
		if (!v[i].iface || !v[i].address) {
			netif_addresses_free(v, n);
			return -ENOMEM;
		}
	}
	*ret = v;
	*ret_n = n;
	return n > INT_MAX ? INT_MAX : (int)n;
}

int local_hostname(const char *configured, char **ret)
{
	char sys[HOST_NAME_MAX + 1];
	const char *name = configured;

	*ret = NULL;
	if (!name) {
		if (gethostname(sys, sizeof(sys)) < 0)
			return -errno;
		sys[sizeof(sys) - 1] = '\0';
		name = sys;
	}
	if (!(*ret = strdup(name)))
		return -ENOMEM;
	return schema_name_valid(name) ? 0 : -EINVAL;
}
