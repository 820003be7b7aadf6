/*
 * options.h — the global options of orchestrate(1), shared by orchestrate and
 * orchestrated, and their resolution into the settings a program runs with.
 *
 * Two steps, kept apart so that both programs parse argv their own way:
 *
 *  1. Parsing fills a struct global_options with exactly what the command line
 *     said (NULL / -1 / false for "not given"); strings point into argv.
 *     options_parse_global() consumes the global options that come before the
 *     command name (it stops at the first non-option, getopt "+" mode).  To
 *     accept global options elsewhere too (after orchestrate's command name, or
 *     among orchestrated's own options), a program merges its own long options
 *     with options_global_long using options_merge_long() and hands every code
 *     it does not know to options_handle().  When a program's own option has the
 *     same name as a global one (wait_for_service --timeout, pause --host,
 *     update_own_info --version), the program's own option wins: that is why
 *     options_merge_long() leaves such globals out.
 *
 *  2. options_resolve() merges, in order of precedence,
 *        command line  >  environment  >  config file  >  defaults
 *     and produces a struct options_resolved: the etcd client options, the key
 *     prefix, this host's name (validated), the local version file and the
 *     loaded struct config for everything else.  The environment variables are
 *     ORCHESTRATE_ETCD, ORCHESTRATE_PREFIX, ORCHESTRATE_PASSWORD and
 *     ORCHESTRATE_LOCAL_VERSION_FILE.  The config file is --config, else
 *     CONFIG_DEFAULT_PATH, which may be absent; a file given with --config must
 *     exist.
 *
 * Endpoints: --etcd URLS (comma-separated) wins over --host/--port (compatibility:
 * "http://H:N"; a missing half defaults to 127.0.0.1 or 2379), which win over
 * ORCHESTRATE_ETCD, then etcd.endpoints of the config file, then
 * http://127.0.0.1:2379.  Wherever it comes from, every endpoint is checked by
 * the one rule of etcd_endpoint_parse() (etcd.h): no scheme means http://, a
 * scheme other than http:// or https://, a bad host or a port outside 1-65535
 * is refused here, before any request.
 *
 * Password: --password-file (its first line, the newline stripped) wins over
 * ORCHESTRATE_PASSWORD, which wins over etcd.password_file of the config file.
 *
 * Errors from both steps are one-line messages (the caller prints them as
 * "orchestrate: MESSAGE" and exits 64, EX_USAGE): a bad option value, a config
 * file that does not parse (config.h's message, naming file, line and key), an
 * invalid hostname or prefix, an unreadable password file.
 */
#ifndef ORCHESTRATE_OPTIONS_H
#define ORCHESTRATE_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>

#include "config/config.h"
#include "etcd/etcd.h"
#include "base/exitcode.h"	/* EXIT_USAGE and the others, for both programs */


/* What the command line said; NULL, -1 or false when an option was not given. */
struct global_options {
	const char *etcd;		/* --etcd URLS */
	const char *host;		/* --host H (compatibility) */
	long port;			/* --port N, -1 when not given */
	const char *prefix;		/* --prefix P */
	const char *config;		/* --config FILE */
	const char *cacert;		/* --cacert FILE */
	const char *cert;		/* --cert FILE */
	const char *key;		/* --key FILE */
	const char *user;		/* --user NAME */
	const char *password_file;	/* --password-file FILE */
	double timeout;			/* --timeout SECONDS, -1 when not given */
	const char *hostname;		/* --hostname H */
	const char *local_version_file;	/* --local-version-file FILE */
	bool json;			/* --json */
	int verbose;			/* -v/--verbose, counted */
	bool help;			/* -h/--help */
	bool version;			/* --version */
};

void global_options_init(struct global_options *o);

/* getopt codes of the global long options (short ones are 'v' and 'h'). */
enum {
	OPT_ETCD = 0x100,
	OPT_HOST,
	OPT_PORT,
	OPT_PREFIX,
	OPT_CONFIG,
	OPT_CACERT,
	OPT_CERT,
	OPT_KEY,
	OPT_USER,
	OPT_PASSWORD_FILE,
	OPT_TIMEOUT,
	OPT_HOSTNAME,
	OPT_LOCAL_VERSION_FILE,
	OPT_JSON,
	OPT_VERSION,
	_OPT_GLOBAL_MAX,	/* programs number their own options from 0x200 */
};

#define OPTIONS_GLOBAL_SHORT "vh"
/* The global long options, terminated by a zero entry. */
extern const struct option options_global_long[];

/*
 * Applies one option returned by getopt_long.  Returns 1 when code was a global
 * option (and stored it), 0 when it is not a global option, or -EINVAL with
 * *ret_error set (caller frees) when its argument is malformed.
 */
int options_handle(struct global_options *o, int code, const char *arg, char **ret_error);

/*
 * Parses the global options at the front of argv (argv[0] is the program) and
 * returns the index of the first argument that is not one (argc when none), or
 * -EINVAL with *ret_error set for an unknown option or a bad value.
 */
int options_parse_global(struct global_options *o, int argc, char **argv, char **ret_error);

/*
 * A new option table: own (may be NULL), then every entry of global whose name
 * own does not use; zero-terminated.  Free it with free().  NULL on ENOMEM.
 */
struct option *options_merge_long(const struct option *own, const struct option *global);

/* --- resolution ------------------------------------------------------------- */

struct options_resolved {
	struct etcd_options etcd;	/* endpoints, password and strings owned here */
	char *prefix;			/* "" when none */
	char *hostname;			/* validated with schema_name_valid() */
	char *local_version_file;
	struct config *config;		/* everything else, as loaded (or defaults) */
	bool json;
	int verbose;
};

/*
 * Resolves o (see the top of this file).  Returns 0, or a negative code with
 * *ret_error (caller frees) saying what is wrong.  On failure *ret holds nothing
 * to release.
 */
int options_resolve(const struct global_options *o, struct options_resolved *ret,
		    char **ret_error);
void options_resolved_release(struct options_resolved *r);
static inline void options_resolved_releasep(struct options_resolved *r)
{
	options_resolved_release(r);
}

#endif
