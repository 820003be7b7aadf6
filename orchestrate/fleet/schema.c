/*
 * schema.c — orchestrate's key layout (orchestrate(1) "Key layout"), name validation and the
 * mapping of update_own_status results to states.  Pure functions: no I/O.
 *
 * Every key of the layout is built here and nowhere else.  A builder checks the
 * prefix and every name it is given and returns NULL rather than build a key
 * from something invalid, so "../current_version" as a host can never address
 * another key, whatever the caller forgot to check.
 *
 * The prefix.  Keys always start with exactly one "/", as in the seed's layout
 * (/current_version, /status/puppet/failed/web1).  The prefix is normalised to
 * one leading "/" and no trailing "/" and put in front:
 *
 *   ""  or "/"                        /current_version
 *   "/fleet", "/fleet/", "fleet"      /fleet/current_version
 *   "a/b"                             /a/b/current_version
 *
 * A prefix must be empty or "/"-separated valid names (schema_prefix_valid); an
 * empty component ("a//b") is refused, so two spellings never differ by more
 * than the optional slashes at either end.
 *
 * key_split() is the inverse for keys read back from etcd: it takes the part of a
 * key below a directory and insists on exactly the expected number of valid
 * names, so a key written by hand with a hostile path never becomes a name.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/schema.h"

static bool name_char_valid(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == ':' || c == '@' || c == '+' || c == '-';
}

/* The same rule as schema_name_problem() on a counted, not NUL-terminated
 * string: used for names inside a prefix or a key. */
static const char *name_problem_n(const char *name, size_t len)
{
	if (len == 0)
		return "empty";
	if (len > SCHEMA_NAME_MAX)
		return "longer than 253 bytes";
	if (len == 1 && name[0] == '.')
		return "is '.'";
	if (len == 2 && name[0] == '.' && name[1] == '.')
		return "is '..'";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (name_char_valid(c))
			continue;
		if (c == '/')
			return "contains '/'";
		if (c == ' ')
			return "contains a space";
		if (c == '\0')
			return "contains a NUL byte";
		if (c < 0x20 || c == 0x7f)
			return "contains a control character";
		if (c >= 0x80)
			return "contains a non-ASCII byte";
		return "contains a character outside [A-Za-z0-9._:@+-]";
	}
	/* A hook or a script that passes a name as an argument must never see an
	 * option in it ("-rf", "--force"), nor a hidden file ("..x"): a name
	 * starts with a letter or a digit.  Checked after the characters, so that
	 * "../x" is refused for its '/'. */
	if (!((name[0] >= 'A' && name[0] <= 'Z') || (name[0] >= 'a' && name[0] <= 'z') ||
	      (name[0] >= '0' && name[0] <= '9')))
		return "does not start with a letter or a digit";
	return NULL;
}

const char *schema_name_problem(const char *name)
{
	if (!name)
		return "missing";
	/* strnlen: a huge string is refused without walking all of it. */
	return name_problem_n(name, strnlen(name, SCHEMA_NAME_MAX + 1));
}

bool schema_name_valid(const char *name)
{
	return schema_name_problem(name) == NULL;
}

bool schema_prefix_valid(const char *prefix)
{
	if (!prefix)
		return false;
	size_t len = strlen(prefix);
	const char *p = prefix, *end = prefix + len;
	if (p < end && *p == '/')
		p++;
	if (end > p && end[-1] == '/')
		end--;
	if (p == end)
		return len <= 1;	/* "" and "/" are the root; "//" is an empty name */
	while (p <= end) {
		const char *slash = memchr(p, '/', (size_t)(end - p));
		const char *stop = slash ? slash : end;
		if (name_problem_n(p, (size_t)(stop - p)))
			return false;
		p = stop + 1;
	}
	return true;
}

/* --- status types and states ----------------------------------------------- */

static const char *const type_names[_STATUS_TYPE_MAX] = {
	[STATUS_PUPPET] = "puppet",
	[STATUS_VALIDATION] = "validation",
	[STATUS_PROVISIONED] = "provisioned",
};

static const char *const state_names[_STATE_MAX] = {
	[STATE_RUNNING] = "running",
	[STATE_SUCCESS] = "success",
	[STATE_FAILED] = "failed",
	[STATE_PENDING] = "pending",
};

const char *status_type_name(enum status_type t)
{
	if ((int)t < 0 || t >= _STATUS_TYPE_MAX)
		return NULL;
	return type_names[t];
}

int status_type_from_name(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < _STATUS_TYPE_MAX; i++)
		if (strcmp(name, type_names[i]) == 0)
			return i;
	return -1;
}

const char *status_state_name(enum status_state s)
{
	if ((int)s < 0 || s >= _STATE_MAX)
		return NULL;
	return state_names[s];
}

int status_state_from_name(const char *name)
{
	if (!name)
		return STATE_INVALID;
	for (int i = 0; i < _STATE_MAX; i++)
		if (strcmp(name, state_names[i]) == 0)
			return i;
	return STATE_INVALID;
}

bool status_state_allowed(enum status_type t, enum status_state s)
{
	switch (t) {
	case STATUS_PUPPET:
		return s == STATE_RUNNING || s == STATE_SUCCESS || s == STATE_FAILED ||
		       s == STATE_PENDING;
	case STATUS_VALIDATION:
		return s == STATE_RUNNING || s == STATE_SUCCESS || s == STATE_FAILED;
	case STATUS_PROVISIONED:
		return s == STATE_SUCCESS || s == STATE_FAILED;
	default:
		return false;
	}
}

/* A decimal exit code: optional sign, digits only, no spaces, fits an int. */
static bool parse_exit_code(const char *s, int *ret)
{
	const char *p = s;
	if (*p == '-' || *p == '+')
		p++;
	if (*p < '0' || *p > '9')
		return false;
	for (const char *q = p; *q; q++)
		if (*q < '0' || *q > '9')
			return false;
	errno = 0;
	char *end;
	long v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < INT_MIN || v > INT_MAX)
		return false;
	*ret = (int)v;
	return true;
}

enum status_state status_from_result(enum status_type t, const char *result)
{
	if (!result || !status_type_name(t))
		return STATE_INVALID;

	int s = status_state_from_name(result);
	if (s != STATE_INVALID)
		return status_state_allowed(t, s) ? (enum status_state)s : STATE_INVALID;

	int code;
	if (!parse_exit_code(result, &code))
		return STATE_INVALID;

	switch (t) {
	case STATUS_PUPPET:
		/* puppet apply --detailed-exitcodes: 0 nothing changed, 2 changes
		 * applied; 4 and 6 failures; -1 is ours for "dependencies not ready". */
		if (code == 0 || code == 2)
			return STATE_SUCCESS;
		if (code == -1)
			return STATE_PENDING;
		return STATE_FAILED;
	case STATUS_VALIDATION:
	case STATUS_PROVISIONED:
		return code == 0 ? STATE_SUCCESS : STATE_FAILED;
	default:
		return STATE_INVALID;
	}
}

/* --- key builders ---------------------------------------------------------- */

/*
 * Builds the key: the normalised prefix, then each component preceded by "/",
 * then a trailing "/" when dir is set.  Components come in a NULL-terminated
 * list of (string, must-be-validated) pairs: the fixed words of the layout are
 * trusted, names are checked.  Returns NULL for an invalid prefix or name.
 * dir is an int, not a bool: va_start() after a parameter that undergoes
 * argument promotion is undefined behaviour (C11 7.16.1.4; clang says so).
 */
static char *key_build(const char *prefix, int dir, ...)
{
	if (!prefix)
		prefix = "";
	if (!schema_prefix_valid(prefix))
		return NULL;

	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	size_t plen = strlen(prefix);
	const char *p = prefix;
	if (plen && p[0] == '/') {
		p++;
		plen--;
	}
	if (plen && p[plen - 1] == '/')
		plen--;
	if (plen) {
		if (buf_addc(&b, '/') < 0 || buf_add(&b, p, plen) < 0)
			return NULL;
	}

	va_list ap;
	va_start(ap, dir);
	for (;;) {
		const char *part = va_arg(ap, const char *);
		if (!part)
			break;
		int check = va_arg(ap, int);
		if (check && !schema_name_valid(part)) {
			va_end(ap);
			return NULL;
		}
		if (buf_addc(&b, '/') < 0 || buf_adds(&b, part) < 0) {
			va_end(ap);
			return NULL;
		}
	}
	va_end(ap);
	if (dir && buf_addc(&b, '/') < 0)
		return NULL;
	return buf_detach(&b);
}

/* Fixed words of the layout and names, for key_build()'s argument list. */
#define W(s) (s), 0
#define N(s) (s), 1
#define END ((const char *)NULL)

char *key_root(const char *prefix)
{
	return key_build(prefix, true, END);
}

char *key_current_version(const char *prefix)
{
	return key_build(prefix, false, W("current_version"), END);
}

char *key_previous_version(const char *prefix)
{
	return key_build(prefix, false, W("previous_version"), END);
}

char *key_running_version_dir(const char *prefix)
{
	return key_build(prefix, true, W("running_version"), END);
}

char *key_running_version(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("running_version"), N(host), END);
}

char *key_status_dir(const char *prefix)
{
	return key_build(prefix, true, W("status"), END);
}

char *key_status(const char *prefix, enum status_type t, enum status_state s, const char *host)
{
	if (!status_state_allowed(t, s) || !host)
		return NULL;
	return key_build(prefix, false, W("status"), W(status_type_name(t)),
			 W(status_state_name(s)), N(host), END);
}

char *key_status_state_dir(const char *prefix, enum status_type t, enum status_state s)
{
	if (!status_state_allowed(t, s))
		return NULL;
	return key_build(prefix, true, W("status"), W(status_type_name(t)),
			 W(status_state_name(s)), END);
}

char *key_services_dir(const char *prefix)
{
	return key_build(prefix, true, W("available_services"), END);
}

char *key_service_dir(const char *prefix, const char *service)
{
	if (!service)
		return NULL;
	return key_build(prefix, true, W("available_services"), N(service), END);
}

char *key_service(const char *prefix, const char *service, const char *host)
{
	if (!service || !host)
		return NULL;
	return key_build(prefix, false, W("available_services"), N(service), N(host), END);
}

char *key_alive_dir(const char *prefix)
{
	return key_build(prefix, true, W("alive"), END);
}

char *key_alive(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("alive"), N(host), END);
}

char *key_rollout_policy(const char *prefix)
{
	return key_build(prefix, false, W("rollout"), W("policy"), END);
}

char *key_rollout_dir(const char *prefix)
{
	return key_build(prefix, true, W("rollout"), END);
}

char *key_rollout_holders_dir(const char *prefix)
{
	return key_build(prefix, true, W("rollout"), W("holders"), END);
}

char *key_rollout_holder(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("rollout"), W("holders"), N(host), END);
}

/* Outside rollout/, so that the daemon's stream over rollout/ (which leaves
 * out holders/ too) is not sent a put of it each time a host queues. */
char *key_rollout_tail(const char *prefix)
{
	return key_build(prefix, false, W("rollout_tail"), END);
}

/* The rollout's safety records (orchestrate(1), "Key layout"): each names the
 * trigger (current_version's mod revision) it belongs to, so that a new
 * trigger leaves the old ones without effect. */
char *key_rollout_failed_dir(const char *prefix)
{
	return key_build(prefix, true, W("rollout"), W("failed"), END);
}

char *key_rollout_failed(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("rollout"), W("failed"), N(host), END);
}

char *key_rollout_canary_dir(const char *prefix)
{
	return key_build(prefix, true, W("rollout"), W("canary"), END);
}

char *key_rollout_canary(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("rollout"), W("canary"), N(host), END);
}

char *key_rollout_halted(const char *prefix)
{
	return key_build(prefix, false, W("rollout"), W("halted"), END);
}

char *key_rollout_promoted(const char *prefix)
{
	return key_build(prefix, false, W("rollout"), W("promoted"), END);
}

/* A staged rollout's gate: rollout/stages/GROUP is the stage after GROUP,
 * watched for by one of its hosts and then opened (orchestrate(1)). */
char *key_rollout_stages_dir(const char *prefix)
{
	return key_build(prefix, true, W("rollout"), W("stages"), END);
}

char *key_rollout_stage(const char *prefix, const char *group)
{
	if (!group)
		return NULL;
	return key_build(prefix, false, W("rollout"), W("stages"), N(group), END);
}

char *key_groups_dir(const char *prefix)
{
	return key_build(prefix, true, W("groups"), END);
}

char *key_group_members_dir(const char *prefix, const char *group)
{
	if (!group)
		return NULL;
	return key_build(prefix, true, W("groups"), N(group), END);
}

char *key_group_host(const char *prefix, const char *group, const char *host)
{
	if (!group || !host)
		return NULL;
	return key_build(prefix, false, W("groups"), N(group), N(host), END);
}

char *key_pause_dir(const char *prefix)
{
	return key_build(prefix, true, W("pause"), END);
}

char *key_pause_global(const char *prefix)
{
	return key_build(prefix, false, W("pause"), W("global"), END);
}

char *key_pause_group(const char *prefix, const char *group)
{
	if (!group)
		return NULL;
	return key_build(prefix, false, W("pause"), W("groups"), N(group), END);
}

char *key_pause_host(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("pause"), W("hosts"), N(host), END);
}

char *key_history_dir(const char *prefix)
{
	return key_build(prefix, true, W("history"), END);
}

char *key_history(const char *prefix, const char *host)
{
	if (!host)
		return NULL;
	return key_build(prefix, false, W("history"), N(host), END);
}

/* --- key_split ------------------------------------------------------------- */

int key_split(const char *key, size_t key_len, const char *dir, char **parts, int max,
	      char **ret_copy)
{
	if (!key || !dir || !parts || !ret_copy || max <= 0)
		return -EINVAL;
	size_t dlen = strlen(dir);
	if (key_len <= dlen || memcmp(key, dir, dlen) != 0)
		return -EINVAL;

	const char *rest = key + dlen;
	size_t rlen = key_len - dlen;
	/* An embedded NUL would let the C string differ from the etcd key. */
	if (memchr(rest, '\0', rlen))
		return -EINVAL;

	_cleanup_(freep) char *copy = strndup(rest, rlen);
	if (!copy)
		return -ENOMEM;

	int n = 0;
	char *p = copy;
	for (;;) {
		char *slash = strchr(p, '/');
		if (slash)
			*slash = '\0';
		if (n >= max || !schema_name_valid(p))
			return -EINVAL;
		parts[n++] = p;
		if (!slash)
			break;
		p = slash + 1;
	}
	if (n != max)
		return -EINVAL;
	*ret_copy = TAKE_PTR(copy);
	return n;
}

const char *key_class(const char *prefix, const char *key)
{
	static const char *const classes[] = {
		"status/puppet/", "status/validation/", "status/provisioned/",
		"rollout/holders/", "rollout/policy", "rollout/failed/", "rollout/canary/",
		"rollout/halted", "rollout/promoted", "rollout_tail", "pause/", "running_version/",
		"available_services/", "alive/", "groups/", "current_version",
		"previous_version", "history/",
	};
	_cleanup_(freep) char *root = key_root(prefix);
	size_t n;

	if (!root || !key)
		return "a key outside the layout";
	n = strlen(root);
	if (strncmp(key, root, n) != 0)
		return "a key outside the layout";
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
		size_t len = strlen(classes[i]);
		if (strncmp(key + n, classes[i], len) == 0) {
			/* the class without its trailing "/" */
			static char word[32];
			snprintf(word, sizeof(word), "%.*s", (int)(classes[i][len - 1] == '/' ? len - 1 : len),
				 classes[i]);
			return word;
		}
	}
	return "a key outside the layout";
}
