/*
 * config.c — the configuration file of orchestrate.conf(5): YAML in, struct config out,
 * strictly.
 *
 * The file is read with libyaml's event API rather than its document API, for
 * three reasons.  Events carry the anchor and alias markers, so an anchor is
 * refused the moment it appears and a billion-laughs file costs nothing; the
 * document loader resolves aliases silently.  Duplicate keys, which the loader
 * accepts, are seen here and refused.  And since the layout of the file is fixed
 * (a mapping of sections, each a mapping of keys, whose values are at most a list
 * of mappings deep) the walk below is a plain descent that expects one exact
 * shape and stops at the first event that does not fit: there is no generic tree
 * to build, no recursion on the input's depth, and a megabyte of nested lists is
 * refused at its first "[".
 *
 * Every key is described once in keys[] (section, name, kind, where it lives in
 * struct config, bounds); the walk, the duplicate check and the cross-key checks
 * all work from that table, and man/orchestrate.conf.5 documents the same table.
 *
 * Errors are one line, "FILE:LINE: KEY: what is wrong", with LINE taken from
 * libyaml's marks (1-based here) and KEY the dotted path of the key
 * ("timing.splay", "node.depends[0].count").  The first error stops the parse.
 *
 * Conventions a reader of the file can rely on, and which the man page states:
 * an empty value, "~" or "null" leaves a key at its default; booleans are
 * exactly "true" or "false"; numbers and booleans are plain (unquoted) scalars;
 * tags, anchors, aliases and more than one document are refused.
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/address.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "etcd/etcd.h"
#include "base/fileio.h"
#include "fleet/schema.h"
#include "base/strv.h"

#ifndef LIBEXECDIR
#define LIBEXECDIR "/usr/local/lib/orchestrate"
#endif

/* A configuration file is a few hundred bytes; anything near this is a mistake
 * (or an attack), and reading it whole keeps line numbers of reader errors exact. */
#define CONFIG_FILE_MAX (4u << 20)
/* Durations are capped at one year: far beyond any sane setting, and small
 * enough that the daemon may turn them into milliseconds or microseconds. */
#define SECONDS_MAX 31536000L
#define COUNT_MAX 1000000L
/* How much of an offending value a message quotes. */
#define QUOTE_MAX 64

enum kind {
	KIND_STRING,		/* any string; "" means none (NULL) */
	KIND_PATH,		/* a non-empty string */
	KIND_NAME,		/* a name (schema_name_valid) */
	KIND_PREFIX,		/* an etcd key prefix (schema_prefix_valid) */
	KIND_ENDPOINTS,		/* list of URLs, or one comma-separated string */
	KIND_LONG,		/* integer in [min, max] */
	KIND_SECONDS,		/* non-negative decimal number of seconds (double) */
	KIND_NAMES,		/* list of names */
	KIND_ADDRESSES,		/* mapping interface → IP address */
	KIND_DEPENDS,		/* list of {service, count, healthy} */
};

struct key_def {
	const char *section;
	const char *name;
	enum kind kind;
	size_t offset;
	long min, max;		/* KIND_LONG and KIND_SECONDS */
};

#define F(field) offsetof(struct config, field)

static const char *const sections[] = { "etcd", "node", "paths", "hooks", "timing" };

static const struct key_def keys[] = {
	{ "etcd", "endpoints", KIND_ENDPOINTS, F(endpoints), 0, 0 },
	{ "etcd", "prefix", KIND_PREFIX, F(prefix), 0, 0 },
	{ "etcd", "cacert", KIND_STRING, F(cacert), 0, 0 },
	{ "etcd", "cert", KIND_STRING, F(cert), 0, 0 },
	{ "etcd", "key", KIND_STRING, F(key), 0, 0 },
	{ "etcd", "user", KIND_STRING, F(user), 0, 0 },
	{ "etcd", "password_file", KIND_STRING, F(password_file), 0, 0 },
	{ "etcd", "timeout", KIND_LONG, F(timeout), 1, SECONDS_MAX },
	{ "etcd", "token_keep", KIND_LONG, F(token_keep), 0, SECONDS_MAX },
	{ "etcd", "login_spread", KIND_LONG, F(login_spread), 0, SECONDS_MAX },

	{ "node", "hostname", KIND_NAME, F(hostname), 0, 0 },
	{ "node", "group", KIND_NAME, F(group), 0, 0 },
	{ "node", "services", KIND_NAMES, F(services), 0, 0 },
	{ "node", "consumes", KIND_NAMES, F(consumes), 0, 0 },
	{ "node", "profile_list", KIND_PATH, F(profile_list), 0, 0 },
	{ "node", "profile_dir", KIND_PATH, F(profile_dir), 0, 0 },
	{ "node", "addresses", KIND_ADDRESSES, F(addresses), 0, 0 },
	{ "node", "depends", KIND_DEPENDS, F(depends), 0, 0 },

	{ "paths", "local_version", KIND_PATH, F(local_version), 0, 0 },
	{ "paths", "hiera_services", KIND_PATH, F(hiera_services), 0, 0 },
	{ "paths", "state_dir", KIND_PATH, F(state_dir), 0, 0 },
	{ "paths", "metrics_file", KIND_STRING, F(metrics_file), 0, 0 },

#define HOOK_KEY(name) { "hooks", #name, KIND_STRING, F(hook_##name), 0, 0 },
	CONFIG_HOOK_KINDS(HOOK_KEY)
#undef HOOK_KEY
	{ "hooks", "timeout", KIND_LONG, F(hook_timeout), 1, SECONDS_MAX },
	{ "hooks", "runner", KIND_STRING, F(hook_runner), 0, 0 },
	{ "hooks", "daemon_user", KIND_NAME, F(hook_daemon_user), 0, 0 },

	{ "timing", "lease_ttl", KIND_LONG, F(lease_ttl), 5, SECONDS_MAX },
	{ "timing", "once_ttl", KIND_LONG, F(once_ttl), 5, SECONDS_MAX },
	{ "timing", "splay", KIND_LONG, F(splay), 0, SECONDS_MAX },
	{ "timing", "quiet", KIND_SECONDS, F(quiet), 0, SECONDS_MAX },
	{ "timing", "quiet_max", KIND_SECONDS, F(quiet_max), 0, SECONDS_MAX },
	{ "timing", "retry_min", KIND_LONG, F(retry_min), 1, SECONDS_MAX },
	{ "timing", "retry_max", KIND_LONG, F(retry_max), 1, SECONDS_MAX },
	{ "timing", "watch_idle", KIND_LONG, F(watch_idle), 1, SECONDS_MAX },
};

#undef F

struct cparser {
	yaml_parser_t yaml;
	const char *name;
	const char *text;
	size_t len;
	struct buf path;		/* dotted path of the value being read */
	char *error;			/* the first error, one line */
	bool oom;
	size_t section_line[ELEMENTSOF(sections)];	/* 1-based; 0: not seen */
	size_t key_line[ELEMENTSOF(keys)];
};

static void yaml_event_deletep(yaml_event_t *e)
{
	yaml_event_delete(e);
}

/* --- defaults and freeing ----------------------------------------------------- */

struct config *config_free(struct config *c)
{
	if (!c)
		return NULL;
	free(c->path);
	strv_free(c->endpoints);
	free(c->prefix);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c->user);
	free(c->password_file);
	free(c->hostname);
	free(c->group);
	strv_free(c->services);
	strv_free(c->consumes);
	free(c->profile_list);
	free(c->profile_dir);
	for (size_t i = 0; i < c->n_addresses; i++) {
		free(c->addresses[i].iface);
		free(c->addresses[i].address);
	}
	free(c->addresses);
	for (size_t i = 0; i < c->n_depends; i++)
		free(c->depends[i].service);
	free(c->depends);
	free(c->local_version);
	free(c->hiera_services);
	free(c->state_dir);
	free(c->metrics_file);
#define HOOK_FREE(name) free(c->hook_##name);
	CONFIG_HOOK_KINDS(HOOK_FREE)
#undef HOOK_FREE
	free(c->hook_runner);
	free(c->hook_daemon_user);
	free(c);
	return NULL;
}

const char *config_hook_path(const struct config *cfg, const char *name)
{
#define HOOK_PATH(kind) if (strcmp(name, #kind) == 0) return cfg->hook_##kind;
	CONFIG_HOOK_KINDS(HOOK_PATH)
#undef HOOK_PATH
	return NULL;
}

int config_new_default(struct config **ret)
{
	_cleanup_(config_freep) struct config *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;

	c->endpoints = calloc(2, sizeof(char *));
	if (!c->endpoints)
		return -ENOMEM;
	c->endpoints[0] = strdup(CONFIG_DEFAULT_ENDPOINT);
	c->services = calloc(1, sizeof(char *));
	c->prefix = strdup("");
	c->profile_list = strdup("/var/lib/puppet/profile_list.txt");
	c->profile_dir = strdup("/var/lib/puppet/orchestrate_profiles.d");
	c->local_version = strdup(CONFIG_DEFAULT_LOCAL_VERSION);
	c->hiera_services = strdup(CONFIG_DEFAULT_HIERA_SERVICES);
	c->hook_daemon_user = strdup(CONFIG_DEFAULT_DAEMON_USER);
	c->state_dir = strdup(CONFIG_DEFAULT_STATE_DIR);
	c->hook_config = strdup(LIBEXECDIR "/hooks/config");
	c->hook_validate = strdup(LIBEXECDIR "/hooks/validate");
	c->hook_services = strdup(LIBEXECDIR "/hooks/services");
	if (!c->endpoints[0] || !c->services || !c->prefix || !c->profile_list ||
	    !c->profile_dir || !c->local_version || !c->hiera_services || !c->state_dir ||
	    !c->hook_config || !c->hook_validate || !c->hook_services || !c->hook_daemon_user)
		return -ENOMEM;

	c->timeout = 5;
	c->token_keep = 240;
	c->login_spread = 60;
	c->hook_timeout = 3600;
	c->lease_ttl = 30;
	c->once_ttl = 610;
	c->splay = 0;
	c->quiet = 2;
	c->quiet_max = 10;
	c->retry_min = 5;
	c->retry_max = 300;
	c->watch_idle = 900;

	*ret = TAKE_PTR(c);
	return 0;
}

/* --- messages ----------------------------------------------------------------- */

/* Appends s quoted for a one-line message: control bytes escaped, long values cut. */
static int buf_add_quoted(struct buf *b, const char *s, size_t len)
{
	int r = buf_addc(b, '\'');
	for (size_t i = 0; r >= 0 && i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i == QUOTE_MAX) {
			r = buf_adds(b, "...");
			break;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			r = buf_printf(b, "\\x%02x", ch);
		else
			r = buf_addc(b, (char)ch);
	}
	if (r >= 0)
		r = buf_addc(b, '\'');
	return r;
}

/* Appends a key taken from the file to the path, sanitized the same way but
 * without quotes, so that an unknown key cannot break the message's one line. */
static int buf_add_key(struct buf *b, const char *s, size_t len)
{
	int r = 0;
	for (size_t i = 0; r >= 0 && i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i == QUOTE_MAX) {
			r = buf_adds(b, "...");
			break;
		}
		if (ch < 0x20 || ch == 0x7f)
			r = buf_printf(b, "\\x%02x", ch);
		else
			r = buf_addc(b, (char)ch);
	}
	return r;
}

/*
 * Records the first error as "NAME:LINE: PATH: message" (PATH left out when
 * empty, LINE when 0) and returns -EINVAL, or -ENOMEM when even that failed.
 */
__attribute__((format(printf, 3, 4)))
static int fail_at(struct cparser *p, size_t line, const char *fmt, ...)
{
	if (p->error || p->oom)
		return p->oom ? -ENOMEM : -EINVAL;

	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r = buf_adds(&b, p->name);
	if (r >= 0 && line > 0)
		r = buf_printf(&b, ":%zu", line);
	if (r >= 0)
		r = buf_adds(&b, ": ");
	if (r >= 0 && p->path.len > 0)
		r = buf_printf(&b, "%s: ", buf_str(&p->path));
	if (r >= 0) {
		va_list ap;
		va_start(ap, fmt);
		r = buf_vprintf(&b, fmt, ap);
		va_end(ap);
	}
	if (r < 0 || !(p->error = buf_detach(&b))) {
		p->oom = true;
		return -ENOMEM;
	}
	return -EINVAL;
}

static size_t mark_line(const yaml_mark_t *m)
{
	return m->line + 1;
}

/* Builds "expected X, got 'V'" for a scalar that does not fit. */
static int fail_value(struct cparser *p, const yaml_event_t *ev, const char *expected)
{
	_cleanup_(buf_releasep) struct buf v = BUF_INIT;
	const char *what = "";

	if (ev->type == YAML_SEQUENCE_START_EVENT)
		return fail_at(p, mark_line(&ev->start_mark), "expected %s, got a list", expected);
	if (ev->type == YAML_MAPPING_START_EVENT)
		return fail_at(p, mark_line(&ev->start_mark), "expected %s, got a mapping",
			       expected);
	if (buf_add_quoted(&v, (const char *)ev->data.scalar.value, ev->data.scalar.length) < 0)
		return -ENOMEM;
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		what = " (a quoted string)";
	return fail_at(p, mark_line(&ev->start_mark), "expected %s, got %s%s", expected,
		       buf_str(&v), what);
}

/* --- the path ----------------------------------------------------------------- */

static size_t path_push(struct cparser *p, const char *key, size_t len)
{
	size_t saved = p->path.len;
	if (saved > 0 && buf_addc(&p->path, '.') < 0)
		p->oom = true;
	if (buf_add_key(&p->path, key, len) < 0)
		p->oom = true;
	return saved;
}

static size_t path_push_index(struct cparser *p, size_t i)
{
	size_t saved = p->path.len;
	if (buf_printf(&p->path, "[%zu]", i) < 0)
		p->oom = true;
	return saved;
}

static void path_pop(struct cparser *p, size_t saved)
{
	if (p->path.data && saved <= p->path.len) {
		p->path.len = saved;
		p->path.data[saved] = '\0';
	}
}

/* --- events ------------------------------------------------------------------- */

/* The 1-based line of a byte offset, for reader errors, which carry no mark. */
static size_t offset_line(const struct cparser *p, size_t offset)
{
	size_t line = 1;
	for (size_t i = 0; i < offset && i < p->len; i++)
		if (p->text[i] == '\n')
			line++;
	return line;
}

static int syntax_error(struct cparser *p)
{
	const yaml_parser_t *y = &p->yaml;
	const char *problem = y->problem ? y->problem : "cannot parse";
	size_t line;

	if (y->error == YAML_MEMORY_ERROR) {
		p->oom = true;
		return -ENOMEM;
	}
	if (y->error == YAML_READER_ERROR)
		return fail_at(p, offset_line(p, y->problem_offset), "YAML syntax error: %s",
			       problem);
	/* At the end of input libyaml moves its mark to a line after the last one
	 * when the file does not end in a newline; name the last line instead. */
	line = mark_line(&y->problem_mark);
	if (p->len > 0) {
		size_t last = offset_line(p, p->len) - (p->text[p->len - 1] == '\n');
		if (line > last)
			line = last;
	}
	if (y->context)
		return fail_at(p, line, "YAML syntax error: %s %s (line %zu)", problem,
			       y->context, mark_line(&y->context_mark));
	return fail_at(p, line, "YAML syntax error: %s", problem);
}

/*
 * Pulls the next event into *ev (deleting what it held).  Refuses aliases,
 * anchors and tags here, once, so that no caller ever sees one: the file has
 * no use for them, and an alias is how a few lines of YAML become gigabytes.
 */
static int next_event(struct cparser *p, yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	yaml_event_delete(ev);
	if (p->oom)
		return -ENOMEM;
	if (!yaml_parser_parse(&p->yaml, ev)) {
		memset(ev, 0, sizeof(*ev));
		return syntax_error(p);
	}
	switch (ev->type) {
	case YAML_ALIAS_EVENT:
		return fail_at(p, mark_line(&ev->start_mark),
			       "anchors and aliases are not allowed");
	case YAML_SCALAR_EVENT:
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
		break;
	case YAML_SEQUENCE_START_EVENT:
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
		break;
	default:
		break;
	}
	if (anchor)
		return fail_at(p, mark_line(&ev->start_mark), "anchors and aliases are not allowed");
	if (tag)
		return fail_at(p, mark_line(&ev->start_mark), "tags are not allowed");
	return 0;
}

static bool scalar_is(const yaml_event_t *ev, const char *s)
{
	return strlen(s) == ev->data.scalar.length &&
	       memcmp(ev->data.scalar.value, s, ev->data.scalar.length) == 0;
}

/* An empty value, "~" or "null" (plain, not quoted): the key keeps its default. */
static bool event_is_null(const yaml_event_t *ev)
{
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	return scalar_is(ev, "") || scalar_is(ev, "~") || scalar_is(ev, "null") ||
	       scalar_is(ev, "Null") || scalar_is(ev, "NULL");
}

/* --- scalar values ------------------------------------------------------------ */

/* A copy of a scalar's text; refuses NUL and other control characters, which
 * no path, name or URL holds and which would only hide a typo or an attack. */
static int scalar_string(struct cparser *p, const yaml_event_t *ev, const char *expected,
			 char **ret)
{
	if (ev->type != YAML_SCALAR_EVENT)
		return fail_value(p, ev, expected);
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch < 0x20 || ch == 0x7f)
			return fail_value(p, ev, "a string without control characters");
	}
	char *copy = strndup(s, len);
	if (!copy) {
		p->oom = true;
		return -ENOMEM;
	}
	*ret = copy;
	return 0;
}

static int scalar_name(struct cparser *p, const yaml_event_t *ev, const char *what,
		       char **ret)
{
	_cleanup_(freep) char *s = NULL;
	_cleanup_(buf_releasep) struct buf v = BUF_INIT;
	int r = scalar_string(p, ev, what, &s);
	if (r < 0)
		return r;
	const char *problem = schema_name_problem(s);
	if (problem) {
		if (buf_add_quoted(&v, s, strlen(s)) < 0)
			return -ENOMEM;
		return fail_at(p, mark_line(&ev->start_mark), "invalid %s %s: %s", what,
			       buf_str(&v), problem);
	}
	*ret = TAKE_PTR(s);
	return 0;
}

static void describe_integer(struct buf *b, long min)
{
	if (min == 0)
		buf_adds(b, "a non-negative integer");
	else if (min == 1)
		buf_adds(b, "a positive integer");
	else
		buf_printf(b, "an integer of at least %ld", min);
}

static int scalar_long(struct cparser *p, const yaml_event_t *ev, long min, long max,
		       long *ret)
{
	_cleanup_(buf_releasep) struct buf want = BUF_INIT;
	describe_integer(&want, min);
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return fail_value(p, ev, buf_str(&want));

	/* Only digits: no sign, no 0x, no 1e3, no 1_000 — whatever YAML allows. */
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	bool digits = len > 0;
	for (size_t i = 0; digits && i < len; i++)
		digits = s[i] >= '0' && s[i] <= '9';
	if (!digits)
		return fail_value(p, ev, buf_str(&want));
	errno = 0;
	long v = strtol(s, NULL, 10);
	if (v < min)
		return fail_value(p, ev, buf_str(&want));
	if (errno == ERANGE || v > max) {
		if (buf_printf(&want, " no greater than %ld", max) < 0)
			return -ENOMEM;
		return fail_value(p, ev, buf_str(&want));
	}
	*ret = v;
	return 0;
}

static int scalar_seconds(struct cparser *p, const yaml_event_t *ev, long max, double *ret)
{
	static const char want[] = "a non-negative number of seconds";
	if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return fail_value(p, ev, want);

	/* digits, optionally "." digits: no sign, exponent, hex, inf or nan. */
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length, i = 0, int_digits = 0, frac_digits = 0;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++, int_digits++;
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++, frac_digits++;
		if (frac_digits == 0)
			return fail_value(p, ev, want);
	}
	if (i != len || int_digits == 0)
		return fail_value(p, ev, want);
	double v = strtod(s, NULL);
	if (v > (double)max) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		if (buf_printf(&b, "%s no greater than %ld", want, max) < 0)
			return -ENOMEM;
		return fail_value(p, ev, buf_str(&b));
	}
	*ret = v;
	return 0;
}

static int scalar_bool(struct cparser *p, const yaml_event_t *ev, bool *ret)
{
	if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		if (scalar_is(ev, "true")) {
			*ret = true;
			return 0;
		}
		if (scalar_is(ev, "false")) {
			*ret = false;
			return 0;
		}
	}
	return fail_value(p, ev, "true or false");
}

/* --- composite values --------------------------------------------------------- */

/*
 * Splits one scalar at commas into endpoints, each checked and normalised by
 * the etcd client's own rule (etcd_endpoints_parse()), so that an endpoint is
 * the same on the command line and here: "127.0.0.1:2379" is
 * http://127.0.0.1:2379 in both, "ftp://x" or port 99999 refused by both.
 */
static int endpoints_add(struct cparser *p, const yaml_event_t *ev, char ***v, size_t *n)
{
	_cleanup_(freep) char *s = NULL;
	_cleanup_(freep) char *bad = NULL;
	const char *problem = NULL;
	int r = scalar_string(p, ev, "a URL or a list of URLs", &s);
	if (r < 0)
		return r;

	r = etcd_endpoints_parse(s, v, n, &bad, &problem);
	if (r == -EINVAL) {
		_cleanup_(buf_releasep) struct buf q = BUF_INIT;
		if (buf_add_quoted(&q, bad ? bad : "", bad ? strlen(bad) : 0) < 0)
			return -ENOMEM;
		return fail_at(p, mark_line(&ev->start_mark), "invalid endpoint %s: %s",
			       buf_str(&q), problem ? problem : "not a URL");
	}
	if (r < 0)
		p->oom = true;
	return r;
}

static int parse_endpoints(struct cparser *p, const yaml_event_t *first, struct config *c)
{
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	size_t n = 0;
	int r;

	if (first->type == YAML_SCALAR_EVENT) {
		r = endpoints_add(p, first, &v, &n);
		if (r < 0)
			return r;
	} else if (first->type == YAML_SEQUENCE_START_EVENT) {
		for (size_t i = 0;; i++) {
			if ((r = next_event(p, &ev)) < 0)
				return r;
			if (ev.type == YAML_SEQUENCE_END_EVENT)
				break;
			size_t saved = path_push_index(p, i);
			if (event_is_null(&ev))
				r = fail_value(p, &ev, "a URL");
			else
				r = endpoints_add(p, &ev, &v, &n);
			if (r < 0)
				return r;
			path_pop(p, saved);
		}
		if (n == 0)
			return fail_at(p, mark_line(&first->start_mark),
				       "expected at least one endpoint");
	} else {
		return fail_value(p, first, "a URL or a list of URLs");
	}

	strv_free(c->endpoints);
	c->endpoints = TAKE_PTR(v);
	return 0;
}

static int parse_names(struct cparser *p, const yaml_event_t *first, char ***field)
{
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	size_t n = 0;
	int r;

	if (first->type != YAML_SEQUENCE_START_EVENT)
		return fail_value(p, first, "a list of service names");
	for (size_t i = 0;; i++) {
		char *s = NULL;
		if ((r = next_event(p, &ev)) < 0)
			return r;
		if (ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		size_t saved = path_push_index(p, i);
		if (event_is_null(&ev))
			return fail_value(p, &ev, "a service name");
		if ((r = scalar_name(p, &ev, "service name", &s)) < 0)
			return r;
		if (strv_contains(v, s)) {
			free(s);
			return fail_at(p, mark_line(&ev.start_mark), "service listed twice");
		}
		if (strv_consume(&v, &n, s) < 0) {
			p->oom = true;
			return -ENOMEM;
		}
		path_pop(p, saved);
	}
	if (!v && !(v = calloc(1, sizeof(char *)))) {
		p->oom = true;
		return -ENOMEM;
	}
	strv_free(*field);
	*field = TAKE_PTR(v);
	return 0;
}

/* A mapping key: a scalar that is not a collection.  Returns 0 with the event
 * filled, or an error naming what stood where a key belongs. */
static int expect_key(struct cparser *p, const yaml_event_t *ev)
{
	if (ev->type == YAML_SCALAR_EVENT)
		return 0;
	return fail_at(p, mark_line(&ev->start_mark), "expected a key, got a %s",
		       ev->type == YAML_SEQUENCE_START_EVENT ? "list" : "mapping");
}

/* The next key of a mapping: 1 with ev its scalar, pushed on the path of
 * messages (*ret_saved pops it), 0 at the mapping's end, or an error. */
static int next_key(struct cparser *p, yaml_event_t *ev, size_t *ret_saved)
{
	int r;

	if ((r = next_event(p, ev)) < 0)
		return r;
	if (ev->type == YAML_MAPPING_END_EVENT)
		return 0;
	if ((r = expect_key(p, ev)) < 0)
		return r;
	*ret_saved = path_push(p, (const char *)ev->data.scalar.value, ev->data.scalar.length);
	return 1;
}

/*
 * The one walk of a mapping of known keys (the top level, each section, each
 * item of node.depends): for each key, its index below n is its place in
 * names[], or what find() says when the keys are no plain list (n: "unknown
 * key"); line[] refuses a key seen before and records where it was,
 * and value() reads the value from its first event, with the key on the
 * path of messages.  A value that is not a mapping is refused as expected,
 * save null when null_ok (an empty mapping: every default).
 */
struct mapping_walk {
	const char *expected;
	bool null_ok;
	size_t n;
	const char *const *names;	/* n names, or NULL and find */
	size_t *line;
	size_t (*find)(const yaml_event_t *key, const void *ctx);
	int (*value)(struct cparser *p, size_t i, const yaml_event_t *ev, void *ctx);
	void *ctx;
};

static int walk_mapping(struct cparser *p, const yaml_event_t *first, const struct mapping_walk *w)
{
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	int r;

	if (w->null_ok && event_is_null(first))
		return 0;
	if (first->type != YAML_MAPPING_START_EVENT)
		return fail_value(p, first, w->expected);

	for (;;) {
		size_t i, saved;
		if ((r = next_key(p, &ev, &saved)) <= 0)
			return r;
		if (w->names) {
			for (i = 0; i < w->n; i++)
				if (scalar_is(&ev, w->names[i]))
					break;
		} else {
			i = w->find(&ev, w->ctx);
		}
		if (i == w->n)
			return fail_at(p, mark_line(&ev.start_mark), "unknown key");
		if (w->line[i])
			return fail_at(p, mark_line(&ev.start_mark),
				       "duplicate key (first on line %zu)", w->line[i]);
		w->line[i] = mark_line(&ev.start_mark);

		if ((r = next_event(p, &ev)) < 0)
			return r;
		if ((r = w->value(p, i, &ev, w->ctx)) < 0)
			return r;
		path_pop(p, saved);
	}
}

static int parse_addresses(struct cparser *p, const yaml_event_t *first, struct config *c)
{
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	int r;

	if (first->type != YAML_MAPPING_START_EVENT)
		return fail_value(p, first, "a mapping of interface to address");
	for (;;) {
		_cleanup_(freep) char *iface = NULL;
		_cleanup_(freep) char *address = NULL;
		size_t saved;

		if ((r = next_key(p, &ev, &saved)) < 0)
			return r;
		if (r == 0)
			break;
		if ((r = scalar_name(p, &ev, "interface name", &iface)) < 0)
			return r;
		for (size_t i = 0; i < c->n_addresses; i++)
			if (strcmp(c->addresses[i].iface, iface) == 0)
				return fail_at(p, mark_line(&ev.start_mark), "duplicate key");
		if ((r = next_event(p, &ev)) < 0)
			return r;
		if ((r = scalar_string(p, &ev, "an IPv4 or IPv6 address", &address)) < 0)
			return r;
		if (!address_valid(address))
			return fail_value(p, &ev, "an IPv4 or IPv6 address");

		struct config_address *a =
			realloc(c->addresses, (c->n_addresses + 1) * sizeof(*a));
		if (!a) {
			p->oom = true;
			return -ENOMEM;
		}
		c->addresses = a;
		a[c->n_addresses].iface = TAKE_PTR(iface);
		a[c->n_addresses].address = TAKE_PTR(address);
		c->n_addresses++;
		path_pop(p, saved);
	}
	return 0;
}

static const char *const depend_keys[] = { "service", "count", "healthy" };

static int depend_value(struct cparser *p, size_t k, const yaml_event_t *ev, void *ctx)
{
	struct config *c = ctx;
	struct config_depend *d = &c->depends[c->n_depends - 1];
	int r;

	if (k == 0) {
		if (event_is_null(ev))
			return fail_value(p, ev, "a service name");
		if ((r = scalar_name(p, ev, "service name", &d->service)) < 0)
			return r;
		for (size_t i = 0; i + 1 < c->n_depends; i++)
			if (strcmp(c->depends[i].service, d->service) == 0)
				return fail_at(p, mark_line(&ev->start_mark), "service listed twice");
	} else if (event_is_null(ev)) {
		/* keeps the default */
	} else if (k == 1) {
		if ((r = scalar_long(p, ev, 1, COUNT_MAX, &d->count)) < 0)
			return r;
	} else {
		if ((r = scalar_bool(p, ev, &d->healthy)) < 0)
			return r;
	}
	return 0;
}

/* One {service, count, healthy} item of node.depends. */
static int parse_depend(struct cparser *p, const yaml_event_t *first, struct config *c)
{
	size_t seen[ELEMENTSOF(depend_keys)] = { 0 };
	const struct mapping_walk w = {
		.expected = "a mapping of service, count and healthy",
		.n = ELEMENTSOF(depend_keys), .names = depend_keys, .line = seen,
		.value = depend_value, .ctx = c,
	};
	struct config_depend *d;
	int r;

	if (first->type != YAML_MAPPING_START_EVENT)
		return fail_value(p, first, w.expected);

	d = realloc(c->depends, (c->n_depends + 1) * sizeof(*d));
	if (!d) {
		p->oom = true;
		return -ENOMEM;
	}
	c->depends = d;
	d = &c->depends[c->n_depends++];
	*d = (struct config_depend){ .service = NULL, .count = 1, .healthy = false };

	if ((r = walk_mapping(p, first, &w)) < 0)
		return r;
	if (!d->service)
		return fail_at(p, mark_line(&first->start_mark), "missing key 'service'");
	return 0;
}

static int parse_depends(struct cparser *p, const yaml_event_t *first, struct config *c)
{
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	int r;

	if (first->type != YAML_SEQUENCE_START_EVENT)
		return fail_value(p, first, "a list of dependencies");
	for (size_t i = 0;; i++) {
		if ((r = next_event(p, &ev)) < 0)
			return r;
		if (ev.type == YAML_SEQUENCE_END_EVENT)
			break;
		size_t saved = path_push_index(p, i);
		if ((r = parse_depend(p, &ev, c)) < 0)
			return r;
		path_pop(p, saved);
	}
	return 0;
}

/* Reads the value of key k, whose first event is ev, into c. */
static int parse_value(struct cparser *p, const struct key_def *k, const yaml_event_t *ev,
		       struct config *c)
{
	void *field = (char *)c + k->offset;
	char *s = NULL;
	int r;

	/* A null value leaves the default, whatever the kind (see the man page). */
	if (event_is_null(ev))
		return 0;

	switch (k->kind) {
	case KIND_STRING:
	case KIND_PATH:
		if ((r = scalar_string(p, ev, k->kind == KIND_PATH ? "a path" : "a string", &s)) < 0)
			return r;
		if (k->kind == KIND_PATH && !*s) {
			free(s);
			return fail_value(p, ev, "a non-empty path");
		}
		if (!*s) {
			/* "" turns an optional setting off. */
			free(s);
			s = NULL;
		}
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	case KIND_NAME:
		if ((r = scalar_name(p, ev, "name", &s)) < 0)
			return r;
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	case KIND_PREFIX:
		if ((r = scalar_string(p, ev, "a key prefix", &s)) < 0)
			return r;
		if (!schema_prefix_valid(s)) {
			free(s);
			return fail_value(p, ev, "a key prefix of names separated by '/'");
		}
		free(*(char **)field);
		*(char **)field = s;
		return 0;
	case KIND_LONG:
		return scalar_long(p, ev, k->min, k->max, field);
	case KIND_SECONDS:
		return scalar_seconds(p, ev, k->max, field);
	case KIND_ENDPOINTS:
		return parse_endpoints(p, ev, c);
	case KIND_NAMES:
		return parse_names(p, ev, field);
	case KIND_ADDRESSES:
		return parse_addresses(p, ev, c);
	case KIND_DEPENDS:
		return parse_depends(p, ev, c);
	}
	return -EINVAL;
}

struct section_walk {
	struct config *c;
	const char *section;
};

static size_t section_find(const yaml_event_t *key, const void *ctx)
{
	const struct section_walk *sw = ctx;
	size_t k;
	for (k = 0; k < ELEMENTSOF(keys); k++)
		if (strcmp(keys[k].section, sw->section) == 0 && scalar_is(key, keys[k].name))
			break;
	return k;
}

static int section_value(struct cparser *p, size_t k, const yaml_event_t *ev, void *ctx)
{
	struct section_walk *sw = ctx;
	return parse_value(p, &keys[k], ev, sw->c);
}

static int top_value(struct cparser *p, size_t s, const yaml_event_t *ev, void *ctx)
{
	struct section_walk sw = { .c = ctx, .section = sections[s] };
	const struct mapping_walk w = {
		.expected = "a mapping", .null_ok = true,
		.n = ELEMENTSOF(keys), .line = p->key_line,
		.find = section_find, .value = section_value, .ctx = &sw,
	};
	return walk_mapping(p, ev, &w);
}

/* "---" alone, or a document holding only "~": every default. */
static int parse_top(struct cparser *p, const yaml_event_t *first, struct config *c)
{
	const struct mapping_walk w = {
		.expected = "a mapping at the top level", .null_ok = true,
		.n = ELEMENTSOF(sections), .names = sections, .line = p->section_line,
		.value = top_value, .ctx = c,
	};
	return walk_mapping(p, first, &w);
}

static size_t key_index(const char *section, const char *name)
{
	for (size_t k = 0; k < ELEMENTSOF(keys); k++)
		if (strcmp(keys[k].section, section) == 0 && strcmp(keys[k].name, name) == 0)
			return k;
	abort();
}

/*
 * Checks between keys, once all are read.  The error names the second key of
 * the pair at its own line when the file sets it, else at the first key's line.
 */
static int check_pairs(struct cparser *p, const struct config *c)
{
	size_t qi = key_index("timing", "quiet"), qmi = key_index("timing", "quiet_max");
	size_t ri = key_index("timing", "retry_min"), rmi = key_index("timing", "retry_max");

	if (c->quiet_max < c->quiet) {
		size_t saved = path_push(p, "timing.quiet_max", strlen("timing.quiet_max"));
		int r = fail_at(p, p->key_line[qmi] ? p->key_line[qmi] : p->key_line[qi],
				"must not be less than timing.quiet (%g < %g)", c->quiet_max,
				c->quiet);
		path_pop(p, saved);
		return r;
	}
	if (c->retry_max < c->retry_min) {
		size_t saved = path_push(p, "timing.retry_max", strlen("timing.retry_max"));
		int r = fail_at(p, p->key_line[rmi] ? p->key_line[rmi] : p->key_line[ri],
				"must not be less than timing.retry_min (%ld < %ld)",
				c->retry_max, c->retry_min);
		path_pop(p, saved);
		return r;
	}
	return 0;
}

static int parse_stream(struct cparser *p, struct config *c)
{
	_cleanup_(yaml_event_deletep) yaml_event_t ev = { 0 };
	int r;

	if ((r = next_event(p, &ev)) < 0)
		return r;
	if (ev.type != YAML_STREAM_START_EVENT)
		return fail_at(p, mark_line(&ev.start_mark), "YAML syntax error: no stream");
	if ((r = next_event(p, &ev)) < 0)
		return r;
	if (ev.type == YAML_STREAM_END_EVENT)
		return 0;	/* an empty file: every default */
	if (ev.type != YAML_DOCUMENT_START_EVENT)
		return fail_at(p, mark_line(&ev.start_mark), "YAML syntax error: no document");
	if ((r = next_event(p, &ev)) < 0)
		return r;
	if ((r = parse_top(p, &ev, c)) < 0)
		return r;
	if ((r = next_event(p, &ev)) < 0)
		return r;
	if (ev.type != YAML_DOCUMENT_END_EVENT)
		return fail_at(p, mark_line(&ev.start_mark),
			       "YAML syntax error: expected the end of the document");
	if ((r = next_event(p, &ev)) < 0)
		return r;
	if (ev.type == YAML_DOCUMENT_START_EVENT)
		return fail_at(p, mark_line(&ev.start_mark),
			       "more than one YAML document in the file");
	if (ev.type != YAML_STREAM_END_EVENT)
		return fail_at(p, mark_line(&ev.start_mark),
			       "YAML syntax error: expected the end of the file");
	return check_pairs(p, c);
}

static void cparser_release(struct cparser *p)
{
	yaml_parser_delete(&p->yaml);
	buf_release(&p->path);
	free(p->error);
}

int config_parse(const char *text, size_t len, const char *name, struct config **ret,
		 char **ret_error)
{
	_cleanup_(config_freep) struct config *c = NULL;
	_cleanup_(cparser_release) struct cparser p = { .name = name ? name : "<config>" };
	int r;

	*ret = NULL;
	if (ret_error)
		*ret_error = NULL;
	p.text = text;
	p.len = len;
	if (!yaml_parser_initialize(&p.yaml))
		return -ENOMEM;
	yaml_parser_set_input_string(&p.yaml, (const unsigned char *)text, len);

	if ((r = config_new_default(&c)) < 0)
		return r;
	if (name && !(c->path = strdup(name)))
		return -ENOMEM;

	r = parse_stream(&p, c);
	if (p.oom)
		r = -ENOMEM;
	if (r < 0) {
		if (ret_error)
			*ret_error = p.error ? TAKE_PTR(p.error) : strdup("out of memory");
		return r;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

int config_load(const char *path, bool missing_ok, struct config **ret, char **ret_error)
{
	_cleanup_(buf_releasep) struct buf text = BUF_INIT;
	_cleanup_(buf_releasep) struct buf msg = BUF_INIT;
	int r;

	*ret = NULL;
	if (ret_error)
		*ret_error = NULL;
	r = file_read_max(path, CONFIG_FILE_MAX, &text);
	if (r == -ENOENT && missing_ok)
		return config_new_default(ret);
	if (r >= 0)
		return config_parse(buf_str(&text), text.len, path, ret, ret_error);
	if (ret_error &&
	    (r == -EFBIG ? buf_printf(&msg, "%s: larger than %zu bytes, refusing", path,
				      (size_t)CONFIG_FILE_MAX)
			 : buf_printf(&msg, "%s: %s", path, strerror(-r))) >= 0)
		*ret_error = buf_detach(&msg);
	return r;
}
