/*
 * config.h — the YAML configuration file of orchestrate.conf(5), read strictly with libyaml.
 *
 * config_load() parses a file into a new struct config, filled with defaults for
 * every key the file leaves out.  A file that does not parse, holds an unknown key,
 * or a value of the wrong type or out of range is refused with a one-line message
 * naming the file, the line and the key ("/etc/orchestrate/orchestrate.yaml:7:
 * timing.splay: expected a non-negative integer, got 'soon'").  A missing file is
 * not an error when the caller says so (the default path may be absent).
 *
 * The struct is plain data, owned by the caller; reload parses into a new one and
 * swaps it in only when it parsed (httpd's parent_reload).
 */
#ifndef ORCHESTRATE_CONFIG_H
#define ORCHESTRATE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define CONFIG_DEFAULT_PATH "/etc/orchestrate/orchestrate.yaml"
/* etcd when nothing names it (orchestrate(1) "--etcd"). */
#define CONFIG_DEFAULT_ENDPOINT "http://127.0.0.1:2379"
/* The daemon's own files (orchestrated(8) "FILES"): in its state directory,
 * which its user owns, so that it needs no write access anywhere else. */
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/orchestrate"
#define CONFIG_DEFAULT_LOCAL_VERSION CONFIG_DEFAULT_STATE_DIR "/current_version"
#define CONFIG_DEFAULT_HIERA_SERVICES CONFIG_DEFAULT_STATE_DIR "/hiera/services.yaml"
#define CONFIG_DEFAULT_DAEMON_USER "orchestrate"

/*
 * The hook kinds, in the order a version's run takes them: the one list of
 * them, as X(NAME) for each.  A kind NAME has its path in struct config as
 * hook_NAME, its key hooks.NAME in the file, and NAME is what the hook
 * runner's protocol carries (hook_proto.h).
 */
#define CONFIG_HOOK_KINDS(X) X(upgrade) X(config) X(validate) X(services)

struct config_depend {
	char *service;
	long count;		/* default 1 */
	bool healthy;		/* default false */
};

struct config_address {
	char *iface;
	char *address;
};

struct config {
	char *path;			/* the file it came from, or NULL for defaults */

	/* etcd: */
	char **endpoints;		/* NULL-terminated; default {CONFIG_DEFAULT_ENDPOINT} */
	char *prefix;			/* default "" */
	char *cacert, *cert, *key;	/* default NULL */
	char *user;			/* default NULL */
	char *password_file;		/* default NULL */
	long timeout;			/* seconds per request, default 5 */
	long token_keep;		/* seconds a daemon's token may go unused, default 240; 0: no limit */
	long login_spread;		/* seconds a daemon spreads a login after etcd forgot its token, default 60 */

	/* node: */
	char *hostname;			/* default NULL: the system's */
	char *group;			/* default NULL: none */
	char **services;		/* NULL-terminated, default empty */
	char **consumes;		/* services whose catalog this node watches and
					 * renders (with those of depends); NULL (the
					 * default): the whole catalog */
	char *profile_list;		/* default /var/lib/puppet/profile_list.txt */
	char *profile_dir;		/* default /var/lib/puppet/orchestrate_profiles.d */
	struct config_address *addresses;	/* default none: discovered */
	size_t n_addresses;
	struct config_depend *depends;
	size_t n_depends;

	/* paths: */
	char *local_version;		/* default /var/lib/orchestrate/current_version */
	char *hiera_services;		/* default /var/lib/orchestrate/hiera/services.yaml */
	char *state_dir;		/* default /var/lib/orchestrate */
	char *metrics_file;		/* default NULL: no metrics */

	/* hooks: (NULL or "" means none; upgrade is optional) */
	char *hook_upgrade;
	char *hook_config;		/* default LIBEXECDIR/hooks/config */
	char *hook_validate;		/* default LIBEXECDIR/hooks/validate */
	char *hook_services;		/* default LIBEXECDIR/hooks/services */
	long hook_timeout;		/* seconds, default 3600 */
	char *hook_runner;		/* the hook runner's socket; default NULL:
					 * the daemon starts the hooks itself */
	char *hook_daemon_user;		/* the user the daemon runs as, the one the
					 * hook runner serves (and root); default
					 * "orchestrate" */

	/* timing: (seconds) */
	long lease_ttl;			/* 30 */
	long once_ttl;			/* 610 */
	long splay;			/* 0 */
	double quiet;			/* 2 */
	double quiet_max;		/* 10 */
	long retry_min;			/* 5 */
	long retry_max;			/* 300 */
	long watch_idle;		/* 900: a silent watch is reopened after this */
};

/* A config holding every default. */
int config_new_default(struct config **ret);
/*
 * Parses path.  When missing_ok is true and the file does not exist, returns the
 * defaults.  On failure returns a negative code and sets *ret_error to the
 * one-line message (caller frees).
 */
int config_load(const char *path, bool missing_ok, struct config **ret, char **ret_error);
/* Parses YAML text (name is used in messages); for tests and fuzzing. */
int config_parse(const char *text, size_t len, const char *name, struct config **ret,
		 char **ret_error);
struct config *config_free(struct config *c);
/* The path configured for the hook kind name (NULL or "" for none); NULL
 * too when name is no hook kind. */
const char *config_hook_path(const struct config *cfg, const char *name);
static inline void config_freep(struct config **c) { if (*c) config_free(*c); }

#endif
