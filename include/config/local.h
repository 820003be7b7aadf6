/*
 * local.h — this node's own facts, read from its own files and its own
 * system: the local version file, the services it offers (node.services, the
 * profile list, node.profile_dir), its addresses and its name.
 *
 * The command line (local_version, pending_update, publish_service,
 * update_own_info...) and the daemon read these facts here and nowhere else,
 * so that both always agree on what a file says.  Nothing here talks to etcd,
 * prints or exits: every function returns 0 (or a documented count) or a
 * negative errno-style code, and what a caller may want to log is handed back
 * (local_services()'s skipped lines).
 */
#ifndef ORCHESTRATE_LOCAL_H
#define ORCHESTRATE_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "fleet/catalog.h"

/* The name rule of orchestrate(1) (schema_name_problem()), for hook/, which may not
 * use fleet/: the root hook runner checks the names a client sends with it, so
 * that one rule holds everywhere.  NULL when name is valid. */
const char *local_name_problem(const char *name);

/* --- the local version file --------------------------------------------------- */

/*
 * Reads the version recorded in the local version file at path: the version
 * whose config run and validation last succeeded on this node.
 *
 * The one rule: the whole file, with surrounding ASCII whitespace (space,
 * tab, newline, carriage return, vertical tab, form feed) trimmed, must be one
 * valid name (schema_name_valid(): 1-253 bytes of [A-Za-z0-9._:@+-], not "."
 * or "..").  So "v2\n", " v2", "v2\r\n" and "\tv2  \n\n" all read as "v2";
 * "v 2", "v2\nv3", "v2\0", "../v2" and a file of 300 bytes are invalid.
 *
 * Returns 0 with *ret (caller frees) when the file holds a version;
 * -ENOENT when there is no version: the file does not exist, or holds
 * nothing but whitespace; -EINVAL when it holds anything else (a file of more
 * than 4 KiB included); another negative errno when it cannot be read
 * (-EACCES, -EISDIR...).  *ret is NULL on every failure.
 */
int local_version_read(const char *path, char **ret);

/*
 * Records version (which must be a valid name, else -EINVAL with nothing
 * written) in the local version file as "VERSION\n", atomically
 * (file_write_atomic(), mode 0644 when new).  Returns 1 when the file was
 * written, 0 when it already said exactly that, or a negative errno (the
 * old file is then left as it was).
 */
int local_version_write(const char *path, const char *version);

/* --- the services this node offers --------------------------------------------- */

/*
 * The services of this node, from three sources, in this order: node.services
 * of the config, the lines of the profile list file (node.profile_list, written
 * by Puppet), and the names of the files in node.profile_dir (sorted; hidden
 * files, whose names start with '.', left out).  Each source may be absent
 * (unset, or no such file or directory).
 *
 * The profile list is read with strv_push_lines()'s rule: '#' starts a comment
 * anywhere on a line ("glance # web" is glance), surrounding whitespace is
 * trimmed, and blank lines are skipped.  Each name must then be valid
 * (schema_name_valid()); one that is not is skipped.  A name named twice is
 * kept once, where it first appears.
 *
 * Returns 0 and *ret, a NULL-terminated vector (never NULL; empty when no
 * source names anything; free with strv_free()), or -ENOMEM.  Everything left
 * out is described in *ret_skipped when it is not NULL: a NULL-terminated
 * vector of one-line messages for the caller to log (each says what and why:
 * "profile list '/var/lib/puppet/profile_list.txt': invalid service 'a b':
 * contains ' '"), or NULL when nothing was left out.  A source that exists but
 * cannot be read (permissions) is also left out there: the other sources still
 * count.  Lines are quoted as read and may hold any bytes: print them through
 * a sanitiser (render.h).
 */
int local_services(const struct config *cfg, char ***ret, char ***ret_skipped);

/* --- addresses and name ------------------------------------------------------------ */

/*
 * The addresses this node publishes its services with: node.addresses of the
 * config when it names any (each checked: an invalid interface name or address
 * is -EINVAL), else every IPv4 address of every interface that is up and not
 * a loopback (netif_ipv4_addresses()).  Entries have iface and address set,
 * service and host NULL.  Returns the number of entries (0 with *ret NULL when
 * there are none) or a negative code; free with netif_addresses_free().
 */
int local_addresses(const struct config *cfg, struct catalog_entry **ret, size_t *ret_n);

/*
 * This node's name: configured (--hostname, node.hostname) when not NULL, else
 * the system's (gethostname(2)).  Returns 0 with *ret (caller frees); -EINVAL
 * when that name is not a valid name, with the name in *ret all the same, for
 * the message (schema_name_problem() says why); or another negative errno
 * when the system's cannot be read (*ret NULL).
 */
int local_hostname(const char *configured, char **ret);

#endif
