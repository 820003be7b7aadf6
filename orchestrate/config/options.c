/*
 * options.c — the global options of orchestrate(1) and their resolution.
 *
 * This file owns the one place where the command line, the environment and
 * the config file meet: parsing records only what argv said, and
 * options_resolve() applies the precedence "command line > environment >
 * config file > defaults" once, so that neither program has its own idea of
 * where an endpoint or a password comes from.  The contract and the exact
 * rules are in options.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "base/fileio.h"
#include "config/local.h"
#include "config/options.h"
#include "fleet/schema.h"
#include "base/strv.h"

/* A password is one line; a bigger file is not a password file. */
#define PASSWORD_FILE_MAX 65536

const struct option options_global_long[] = {
	{ "etcd", required_argument, NULL, OPT_ETCD },
	{ "host", required_argument, NULL, OPT_HOST },
	{ "port", required_argument, NULL, OPT_PORT },
	{ "prefix", required_argument, NULL, OPT_PREFIX },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "cacert", required_argument, NULL, OPT_CACERT },
	{ "cert", required_argument, NULL, OPT_CERT },
	{ "key", required_argument, NULL, OPT_KEY },
	{ "user", required_argument, NULL, OPT_USER },
	{ "password-file", required_argument, NULL, OPT_PASSWORD_FILE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "hostname", required_argument, NULL, OPT_HOSTNAME },
	{ "local-version-file", required_argument, NULL, OPT_LOCAL_VERSION_FILE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

void global_options_init(struct global_options *o)
{
	*o = (struct global_options){ .port = -1, .timeout = -1 };
}

/* Sets *ret_error to a formatted message; returns -EINVAL for the caller. */
__attribute__((format(printf, 2, 3)))
static int fail(char **ret_error, const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (ret_error)
		*ret_error = b.data ? buf_detach(&b) : NULL;
	else
		buf_release(&b);
	return -EINVAL;
}

int options_handle(struct global_options *o, int code, const char *arg, char **ret_error)
{
	char *end;

	switch (code) {
	case OPT_ETCD: o->etcd = arg; break;
	case OPT_HOST: o->host = arg; break;
	case OPT_PORT: {
		errno = 0;
		long n = strtol(arg, &end, 10);
		if (errno || end == arg || *end || n < 1 || n > 65535)
			return fail(ret_error, "invalid port '%s': expected 1-65535", arg);
		o->port = n;
		break;
	}
	case OPT_PREFIX: o->prefix = arg; break;
	case OPT_CONFIG: o->config = arg; break;
	case OPT_CACERT: o->cacert = arg; break;
	case OPT_CERT: o->cert = arg; break;
	case OPT_KEY: o->key = arg; break;
	case OPT_USER: o->user = arg; break;
	case OPT_PASSWORD_FILE: o->password_file = arg; break;
	case OPT_TIMEOUT: {
		errno = 0;
		double d = strtod(arg, &end);
		if (errno || end == arg || *end || !isfinite(d) || d <= 0 || d > 86400)
			return fail(ret_error,
				    "invalid timeout '%s': expected a positive number of seconds",
				    arg);
		o->timeout = d;
		break;
	}
	case OPT_HOSTNAME: o->hostname = arg; break;
	case OPT_LOCAL_VERSION_FILE: o->local_version_file = arg; break;
	case OPT_JSON: o->json = true; break;
	case 'v': o->verbose++; break;
	case 'h': o->help = true; break;
	case OPT_VERSION: o->version = true; break;
	default: return 0;
	}
	return 1;
}

int options_parse_global(struct global_options *o, int argc, char **argv, char **ret_error)
{
	int c;

	opterr = 0;
	optind = 0;	/* a full re-initialisation of glibc's getopt */
	while ((c = getopt_long(argc, argv, "+:" OPTIONS_GLOBAL_SHORT, options_global_long,
				NULL)) != -1) {
		if (c == '?') {
			if (optopt)
				return fail(ret_error, "unknown option '-%c'", optopt);
			return fail(ret_error, "unknown option '%s'", argv[optind - 1]);
		}
		if (c == ':')
			return fail(ret_error, "option '%s' needs a value", argv[optind - 1]);
		int r = options_handle(o, c, optarg, ret_error);
		if (r < 0)
			return r;
	}
	return optind;
}

struct option *options_merge_long(const struct option *own, const struct option *global)
{
	size_t n_own = 0, n_global = 0, n = 0;

	while (own && own[n_own].name)
		n_own++;
	while (global && global[n_global].name)
		n_global++;
	struct option *merged = calloc(n_own + n_global + 1, sizeof(*merged));
	if (!merged)
		return NULL;
	for (size_t i = 0; i < n_own; i++)
		merged[n++] = own[i];
	for (size_t i = 0; i < n_global; i++) {
		bool shadowed = false;
		for (size_t j = 0; j < n_own; j++)
			if (strcmp(own[j].name, global[i].name) == 0)
				shadowed = true;
		if (!shadowed)
			merged[n++] = global[i];
	}
	return merged;
}

/* --- resolution ------------------------------------------------------------- */

static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

/* Copies a string that may be NULL; -ENOMEM only when the copy fails. */
static int dup_opt(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

/* Parses a list of endpoints (etcd_endpoints_parse(): one rule for the
 * command line, the environment and the config file); where says where it
 * came from, for the message. */
static int endpoints_parse(const char *text, const char *where, char ***ret, char **ret_error)
{
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(freep) char *bad = NULL;
	const char *problem = NULL;
	size_t n = 0;
	int r = etcd_endpoints_parse(text, &v, &n, &bad, &problem);

	if (r == -EINVAL)
		return fail(ret_error, "invalid etcd endpoint '%s' (%s): %s", bad ? bad : text,
			    where, problem ? problem : "not a URL");
	if (r < 0)
		return r;
	*ret = TAKE_PTR(v);
	return 0;
}

static int endpoints_copy(char *const *src, char ***ret)
{
	_cleanup_(strv_freep) char **v = NULL;
	size_t n = 0;
	for (size_t i = 0; src && src[i]; i++)
		if (strv_push(&v, &n, src[i]) < 0)
			return -ENOMEM;
	*ret = TAKE_PTR(v);
	return 0;
}

static int resolve_endpoints(const struct global_options *o, const struct config *cfg,
			     char ***ret, char **ret_error)
{
	const char *env;

	if (o->etcd)
		return endpoints_parse(o->etcd, "--etcd", ret, ret_error);
	if (o->host || o->port >= 0) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		const char *h = o->host ? o->host : "127.0.0.1";
		/* An IPv6 literal needs brackets in a URL. */
		bool v6 = strchr(h, ':') && h[0] != '[';
		if (buf_printf(&b, "%s%s%s:%ld", v6 ? "[" : "", h, v6 ? "]" : "",
			       o->port >= 0 ? o->port : 2379L) < 0)
			return -ENOMEM;
		return endpoints_parse(buf_str(&b), "--host/--port", ret, ret_error);
	}
	if ((env = env_nonempty("ORCHESTRATE_ETCD")))
		return endpoints_parse(env, "ORCHESTRATE_ETCD", ret, ret_error);
	/* the config's were parsed by the same rule when it was loaded */
	if (cfg->endpoints && cfg->endpoints[0])
		return endpoints_copy(cfg->endpoints, ret);
	return endpoints_parse(CONFIG_DEFAULT_ENDPOINT, "the default", ret, ret_error);
}

/* The first line of path, without its line ending. */
static int read_password_file(const char *path, char **ret, char **ret_error)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r = file_read_max(path, PASSWORD_FILE_MAX, &b);

	if (r < 0) {
		explicit_bzero(b.data, b.cap);
		return fail(ret_error, "cannot read password file '%s': %s", path,
			    r == -EFBIG ? "too large for a password file" : strerror(-r));
	}
	size_t len = strcspn(buf_str(&b), "\r\n");
	if (b.len == 0 || len == 0) {
		explicit_bzero(b.data, b.cap);
		return fail(ret_error, "password file '%s' is empty", path);
	}
	*ret = strndup(b.data, len);
	explicit_bzero(b.data, b.cap);
	return *ret ? 0 : -ENOMEM;
}

static int resolve_hostname(const struct global_options *o, const struct config *cfg,
			    char **ret, char **ret_error)
{
	_cleanup_(freep) char *name = NULL;
	int r = local_hostname(o->hostname ? o->hostname : cfg->hostname, &name);

	if (r == -EINVAL)
		return fail(ret_error, "invalid hostname '%s': %s", name,
			    schema_name_problem(name));
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return fail(ret_error, "cannot get the system's hostname: %s", strerror(-r));
	*ret = TAKE_PTR(name);
	return 0;
}

static char *password_wipe(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
	return NULL;
}

void options_resolved_release(struct options_resolved *r)
{
	if (!r)
		return;
	strv_free(r->etcd.endpoints);
	free((char *)r->etcd.cacert);
	free((char *)r->etcd.cert);
	free((char *)r->etcd.key);
	free((char *)r->etcd.user);
	password_wipe((char *)r->etcd.password);
	free(r->prefix);
	free(r->hostname);
	free(r->local_version_file);
	if (r->config)
		config_free(r->config);
	*r = (struct options_resolved){ 0 };
}

/* Fills r from o and the loaded config; r->config is already set. */
static int resolve_fields(const struct global_options *o, struct options_resolved *r,
			  char **ret_error)
{
	const struct config *cfg = r->config;
	const char *s;
	char *tmp;
	int k;

	k = resolve_endpoints(o, cfg, &r->etcd.endpoints, ret_error);
	if (k < 0)
		return k;

	if (dup_opt(o->cacert ? o->cacert : cfg->cacert, &tmp) < 0)
		return -ENOMEM;
	r->etcd.cacert = tmp;
	if (dup_opt(o->cert ? o->cert : cfg->cert, &tmp) < 0)
		return -ENOMEM;
	r->etcd.cert = tmp;
	if (dup_opt(o->key ? o->key : cfg->key, &tmp) < 0)
		return -ENOMEM;
	r->etcd.key = tmp;
	if (dup_opt(o->user ? o->user : cfg->user, &tmp) < 0)
		return -ENOMEM;
	r->etcd.user = tmp;

	/* A TLS file that cannot be read would surface as a vague TLS failure
	 * on every endpoint; name it now instead. */
	const struct { const char *what, *path; } tls[] = {
		{ "CA certificate", r->etcd.cacert },
		{ "client certificate", r->etcd.cert },
		{ "client key", r->etcd.key },
	};
	for (size_t i = 0; i < ELEMENTSOF(tls); i++)
		if (tls[i].path && access(tls[i].path, R_OK) < 0)
			return fail(ret_error, "cannot read %s '%s': %s", tls[i].what, tls[i].path,
				    strerror(errno));

	if (o->password_file) {
		k = read_password_file(o->password_file, &tmp, ret_error);
	} else if ((s = getenv("ORCHESTRATE_PASSWORD"))) {
		k = dup_opt(s, &tmp);
	} else if (cfg->password_file && *cfg->password_file) {
		k = read_password_file(cfg->password_file, &tmp, ret_error);
	} else {
		k = 0;
		tmp = NULL;
	}
	if (k < 0)
		return k;
	r->etcd.password = tmp;
	if (r->etcd.user && !r->etcd.password)
		return fail(ret_error, "etcd user '%s' needs a password "
			    "(ORCHESTRATE_PASSWORD or --password-file)", r->etcd.user);

	double secs = o->timeout > 0 ? o->timeout : (double)cfg->timeout;
	r->etcd.timeout_ms = secs > 0 ? (long)(secs * 1000.0 + 0.5) : 0;
	r->etcd.token_keep_ms = cfg->token_keep * 1000;
	r->etcd.login_spread_ms = cfg->login_spread * 1000;

	s = o->prefix ? o->prefix : env_nonempty("ORCHESTRATE_PREFIX");
	if (!s)
		s = cfg->prefix ? cfg->prefix : "";
	if (!schema_prefix_valid(s))
		return fail(ret_error, "invalid prefix '%s': expected names of "
			    "[A-Za-z0-9._:@+-] separated by '/'", s);
	if (!(r->prefix = strdup(s)))
		return -ENOMEM;

	k = resolve_hostname(o, cfg, &r->hostname, ret_error);
	if (k < 0)
		return k;

	s = o->local_version_file ? o->local_version_file
				  : env_nonempty("ORCHESTRATE_LOCAL_VERSION_FILE");
	if (!s)
		s = cfg->local_version && *cfg->local_version ? cfg->local_version
							      : CONFIG_DEFAULT_LOCAL_VERSION;
	if (!(r->local_version_file = strdup(s)))
		return -ENOMEM;

	r->json = o->json;
	r->verbose = o->verbose;
	return 0;
}

int options_resolve(const struct global_options *o, struct options_resolved *ret,
		    char **ret_error)
{
	struct options_resolved r = { 0 };
	char *cfg_error = NULL;
	const char *path = o->config ? o->config : CONFIG_DEFAULT_PATH;
	int k;

	if (ret_error)
		*ret_error = NULL;
	k = config_load(path, !o->config, &r.config, &cfg_error);
	if (k < 0) {
		if (!cfg_error)
			fail(&cfg_error, "%s: %s", path, strerror(-k));
		if (ret_error)
			*ret_error = cfg_error;
		else
			free(cfg_error);
		return k;
	}
	k = resolve_fields(o, &r, ret_error);
	if (k < 0) {
		if (k == -ENOMEM && ret_error && !*ret_error)
			fail(ret_error, "out of memory");
		options_resolved_release(&r);
		return k;
	}
	*ret = r;
	return 0;
}
