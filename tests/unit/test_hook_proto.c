/*
 * test_hook_proto.c — the daemon/runner wire format (hook_proto.h): a request
 * encodes and parses back; the runner refuses what must not run as root (a
 * path for a name, PATH or LD_PRELOAD, a repeated or malformed variable, a
 * wrong magic, an oversized request) and waits for more on a cut one; of the
 * variables it keeps the host and versions (valid names) and drops the paths,
 * endpoints and prefix it sets itself; frames
 * round-trip, split anywhere, and bad ones are refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "hook/hook_proto.h"
#include "base/strv.h"
#include "tap.h"

static int parse(const char *data, size_t len, char **name, char ***env, char **error)
{
	size_t used = 0;
	int r = hook_request_parse(data, len, name, env, &used, error);
	if (r == 1 && used != len)
		return -1000;
	return r;
}

static void test_request_roundtrip(void)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	char *env[] = { "PATH=/usr/bin", "ORCHESTRATE_HOST=web1", "ORCHESTRATE_VERSION=v2",
			"ORCHESTRATE_ETCD=http://a:2379,http://b:2379", "HOME=/root", NULL };
	_cleanup_(strv_freep) char **got = NULL;
	_cleanup_(freep) char *name = NULL, *error = NULL;

	is_int(hook_request_encode(&b, "config", env), 0, "encode config");
	is_int(parse(b.data, b.len, &name, &got, &error), 1, "parses back");
	is_str(name, "config", "name");
	ok(got && got[0] && got[1] && got[2] && !got[3], "three variables: PATH and HOME left out");
	is_str(got ? got[0] : NULL, "ORCHESTRATE_HOST=web1", "first");
	is_str(got ? got[2] : NULL, "ORCHESTRATE_ETCD=http://a:2379,http://b:2379", "third");

	/* Every cut short of the end asks for more. */
	bool all_incomplete = true;
	for (size_t cut = 0; cut < b.len; cut++) {
		char **e = NULL;
		char *n = NULL, *err = NULL;
		size_t used;
		if (hook_request_parse(b.data, cut, &n, &e, &used, &err) != 0)
			all_incomplete = false;
		free(n);
		strv_free(e);
		free(err);
	}
	ok(all_incomplete, "every prefix is incomplete, not refused");
	{
		char **e = NULL;
		char *n = NULL, *err = NULL;
		size_t used;
		/* What the runner parses before its first read: an empty buf. */
		is_int(hook_request_parse(NULL, 0, &n, &e, &used, &err), 0,
		       "nothing yet (NULL, 0): incomplete");
	}

	buf_reset(&b);
	is_int(hook_request_encode(&b, "/bin/sh", env), -EINVAL, "encode refuses a path for a name");
	char *empty[] = { NULL };
	buf_reset(&b);
	is_int(hook_request_encode(&b, "validate", empty), 0, "no variables");
	strv_free(got);
	got = NULL;
	free(name);
	name = NULL;
	is_int(parse(b.data, b.len, &name, &got, &error), 1, "parses");
	ok(got && !got[0], "an empty environment");
}

/* A raw request: magic, name, the variables, the final empty string. */
static void raw(struct buf *b, const char *magic, const char *name, const char *const *vars)
{
	buf_reset(b);
	(void)buf_add(b, magic, strlen(magic) + 1);
	(void)buf_add(b, name, strlen(name) + 1);
	for (size_t i = 0; vars && vars[i]; i++)
		(void)buf_add(b, vars[i], strlen(vars[i]) + 1);
	(void)buf_addc(b, '\0');
}

static void refused(const char *what, const char *magic, const char *name, const char *const *vars,
		    int code, const char *message)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(freep) char *n = NULL, *error = NULL;

	raw(&b, magic, name, vars);
	is_int(parse(b.data, b.len, &n, &env, &error), code, "%s: refused", what);
	ok(!n && !env, "%s: nothing returned", what);
	if (message)
		is_str(error, message, "%s: message", what);
}

static void test_request_refused(void)
{
	const char *ld[] = { "ORCHESTRATE_HOST=a", "LD_PRELOAD=/tmp/evil.so", NULL };
	const char *path[] = { "PATH=/tmp", NULL };
	const char *twice[] = { "ORCHESTRATE_HOST=a", "ORCHESTRATE_HOST=b", NULL };
	const char *lower[] = { "ORCHESTRATE_host=a", NULL };
	const char *bare[] = { "ORCHESTRATE_=a", NULL };
	const char *noeq[] = { "ORCHESTRATE_HOST", NULL };
	const char *ok_vars[] = { "ORCHESTRATE_HOST=a", NULL };

	refused("LD_PRELOAD", HOOK_PROTO_MAGIC, "config", ld, -EPERM,
		"environment variable 'LD_PRELOAD' refused");
	refused("PATH", HOOK_PROTO_MAGIC, "config", path, -EPERM,
		"environment variable 'PATH' refused");
	refused("twice", HOOK_PROTO_MAGIC, "config", twice, -EPERM,
		"environment variable 'ORCHESTRATE_HOST' given twice");
	refused("lower case", HOOK_PROTO_MAGIC, "config", lower, -EPERM, NULL);
	refused("bare prefix", HOOK_PROTO_MAGIC, "config", bare, -EPERM, NULL);
	refused("no =", HOOK_PROTO_MAGIC, "config", noeq, -EPERM, NULL);
	refused("a path", HOOK_PROTO_MAGIC, "/bin/sh", ok_vars, -EPERM, "unknown hook '/bin/sh'");
	refused("unknown hook", HOOK_PROTO_MAGIC, "deploy", ok_vars, -EPERM, "unknown hook 'deploy'");
	refused("magic", "orchestrate-hook 2", "config", ok_vars, -EPROTO, "not a hook request");

	/* A wrong magic is refused before it is complete. */
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(freep) char *n = NULL, *error = NULL;
	size_t used;
	is_int(hook_request_parse("GET / HTTP/1.1", 14, &n, &env, &used, &error), -EPROTO,
	       "an HTTP request is refused at once");

	/* Too many variables, too many bytes. */
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	(void)buf_add(&b, HOOK_PROTO_MAGIC, sizeof(HOOK_PROTO_MAGIC));
	(void)buf_add(&b, "config", 7);
	for (int i = 0; i <= HOOK_REQUEST_ENV_MAX; i++)
		(void)buf_printf(&b, "ORCHESTRATE_V%d=x%c", i, '\0');
	(void)buf_addc(&b, '\0');
	free(error);
	error = NULL;
	is_int(hook_request_parse(b.data, b.len, &n, &env, &used, &error), -E2BIG,
	       "65 variables refused");
	buf_reset(&b);
	(void)buf_add(&b, HOOK_PROTO_MAGIC, sizeof(HOOK_PROTO_MAGIC));
	(void)buf_add(&b, "config", 7);
	(void)buf_adds(&b, "ORCHESTRATE_BIG=");
	for (int i = 0; i < HOOK_REQUEST_MAX; i++)
		(void)buf_addc(&b, 'x');
	free(error);
	error = NULL;
	is_int(hook_request_parse(b.data, b.len, &n, &env, &used, &error), -E2BIG,
	       "an endless variable is refused before its end");

	char *many[HOOK_REQUEST_ENV_MAX + 2];
	char names[HOOK_REQUEST_ENV_MAX + 1][32];
	for (int i = 0; i <= HOOK_REQUEST_ENV_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "ORCHESTRATE_V%d=x", i);
		many[i] = names[i];
	}
	many[HOOK_REQUEST_ENV_MAX + 1] = NULL;
	buf_reset(&b);
	is_int(hook_request_encode(&b, "config", many), -E2BIG, "encode: 65 variables refused");
}

static void test_frames(void)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	const char *payload;
	size_t n, used;
	char type;
	long v;
	int code, sig;

	is_int(hook_frame_addf(&b, HOOK_FRAME_STARTED, "%d", 4242), 0, "S");
	is_int(hook_frame_add(&b, HOOK_FRAME_OUTPUT, "a\0b\n", 4), 0, "O with a NUL byte");
	is_int(hook_frame_addf(&b, HOOK_FRAME_EXIT, "killed %d", SIGTERM), 0, "X");
	is_int((int)b.len, 5 + 4 + 5 + 4 + 5 + 9, "lengths");

	bool incomplete = true;
	for (size_t cut = 0; cut < 9; cut++)
		if (hook_frame_parse(b.data, cut, &type, &payload, &n, &used) != 0)
			incomplete = false;
	ok(incomplete, "a cut S frame is incomplete");
	is_int(hook_frame_parse(b.data, b.len, &type, &payload, &n, &used), 1, "S parses");
	ok(type == 'S' && used == 9, "S: type and size");
	is_int(hook_frame_int(payload, n, 1, 1L << 30, &v), 0, "S: pid");
	is_int((int)v, 4242, "S: 4242");
	buf_consume(&b, used);
	is_int(hook_frame_parse(b.data, b.len, &type, &payload, &n, &used), 1, "O parses");
	ok(type == 'O' && n == 4 && memcmp(payload, "a\0b\n", 4) == 0, "O: bytes kept");
	buf_consume(&b, used);
	is_int(hook_frame_parse(b.data, b.len, &type, &payload, &n, &used), 1, "X parses");
	is_int(hook_frame_exit(payload, n, &code, &sig), 0, "X: decoded");
	ok(code == -1 && sig == SIGTERM, "X: killed by SIGTERM");
	is_int(hook_frame_exit("exited 4", 8, &code, &sig), 0, "exited 4");
	ok(code == 4 && sig == 0, "exited 4: code 4");
	is_int(hook_frame_exit("exited 256", 10, &code, &sig), -EBADMSG, "exited 256 refused");
	is_int(hook_frame_exit("exited 1 x", 10, &code, &sig), -EBADMSG, "trailing words refused");
	is_int(hook_frame_exit("killed 0", 8, &code, &sig), -EBADMSG, "signal 0 refused");
	is_int(hook_frame_exit("exited", 6, &code, &sig), -EBADMSG, "no number refused");
	is_int(hook_frame_int("2 no such file", 14, 1, 4095, &v), 0, "E: errno before the message");
	is_int((int)v, 2, "E: 2");
	is_int(hook_frame_int("99999999999999999999", 20, 0, 100, &v), -EBADMSG, "overflow refused");
	is_int(hook_frame_int("15x", 3, 0, 100, &v), -EBADMSG, "junk after a number refused");

	is_int(hook_frame_parse("Z\0\0\0\0", 5, &type, &payload, &n, &used), -EBADMSG,
	       "unknown type refused");
	is_int(hook_frame_parse("O\0\x01\0\x01", 5, &type, &payload, &n, &used), -EBADMSG,
	       "length over 64 KiB refused");
	buf_reset(&b);
	char *big = calloc(1, HOOK_FRAME_MAX + 1);
	is_int(hook_frame_add(&b, 'O', big, HOOK_FRAME_MAX + 1), -E2BIG, "oversized frame not encoded");
	is_int(hook_frame_add(&b, 'O', big, HOOK_FRAME_MAX), 0, "64 KiB frame encoded");
	is_int(hook_frame_parse(b.data, b.len, &type, &payload, &n, &used), 1, "64 KiB frame parses");
	free(big);
}

/* The runner's share of the variables: host and versions, checked names;
 * the paths, endpoints and prefix dropped; anything else refuses. */
static void client_env_refused(const char *var, const char *want)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(freep) char *error = NULL;
	char *req[] = { "ORCHESTRATE_HOST=web1", (char *)var, NULL };
	size_t ignored = 99;

	is_int(hook_request_client_env(req, &env, &ignored, &error), -EPERM, "refused: %s", want);
	is_str(error, want, "message for %s", want);
	ok(!env, "nothing returned for %s", want);
	ok(!error || !strchr(error, '\n'), "one line for %s", want);
}

static void test_client_env(void)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(freep) char *error = NULL;
	char *req[] = { "ORCHESTRATE_HOST=web1", "ORCHESTRATE_VERSION=v2",
			"ORCHESTRATE_PREVIOUS_VERSION=", "ORCHESTRATE_SERVICES_FILE=/tmp/x",
			"ORCHESTRATE_LOCAL_VERSION_FILE=/etc/shadow", "ORCHESTRATE_ETCD=http://evil:1",
			"ORCHESTRATE_PREFIX=/other", NULL };
	size_t ignored = 0;

	is_int(hook_request_client_env(req, &env, &ignored, &error), 0, "client env: the daemon's request");
	is_int(ignored, 4, "client env: paths, endpoints and prefix dropped");
	ok(env && env[0] && env[1] && env[2] && !env[3], "client env: three kept");
	is_str(env ? env[0] : NULL, "ORCHESTRATE_HOST=web1", "client env: host");
	is_str(env ? env[1] : NULL, "ORCHESTRATE_VERSION=v2", "client env: version");
	is_str(env ? env[2] : NULL, "ORCHESTRATE_PREVIOUS_VERSION=", "client env: no previous version");

	client_env_refused("ORCHESTRATE_VERSION=v2\nORCHESTRATE_X=1",
			   "environment variable 'ORCHESTRATE_VERSION' refused: its value is not a name "
			   "(contains a control character)");
	client_env_refused("ORCHESTRATE_PREVIOUS_VERSION=-rf",
			   "environment variable 'ORCHESTRATE_PREVIOUS_VERSION' refused: its value is not "
			   "a name (does not start with a letter or a digit)");
	client_env_refused("ORCHESTRATE_VERSION=../../etc",
			   "environment variable 'ORCHESTRATE_VERSION' refused: its value is not a name "
			   "(contains '/')");
	client_env_refused("ORCHESTRATE_PASSWORD=secret",
			   "environment variable 'ORCHESTRATE_PASSWORD' refused: the hook runner sets it, "
			   "or no hook gets it");
	client_env_refused("ORCHESTRATE_CONFIG=/tmp/x",
			   "environment variable 'ORCHESTRATE_CONFIG' refused: the hook runner sets it, "
			   "or no hook gets it");
	{
		_cleanup_(strv_freep) char **e2 = NULL;
		_cleanup_(freep) char *err2 = NULL;
		char *nohost[] = { "ORCHESTRATE_HOST=", NULL };
		is_int(hook_request_client_env(nohost, &e2, &ignored, &err2), -EPERM, "an empty host is refused");
	}
}

int main(void)
{
	test_client_env();
	test_request_roundtrip();
	test_request_refused();
	test_frames();
	return done_testing();
}
