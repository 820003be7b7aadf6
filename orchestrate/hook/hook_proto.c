/*
 * hook_proto.c — the request and frames of hook_proto.h.
 *
 * The runner parses what a connecting process sends before anything else
 * happens, as root: every length is bounded, every string is NUL-terminated
 * inside the request, and a request that is not exactly a known hook name with
 * ORCHESTRATE_* variables is refused whole rather than filtered, so that a
 * client cannot learn by trial which of its variables slipped through.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "config/config.h"
#include "config/local.h"
#include "hook/hook_proto.h"
#include "base/strv.h"

#define HOOK_NAME(name) #name,
static const char *const hook_names[] = { CONFIG_HOOK_KINDS(HOOK_NAME) };
#undef HOOK_NAME

bool hook_proto_name_valid(const char *name)
{
	for (size_t i = 0; name && i < ELEMENTSOF(hook_names); i++)
		if (strcmp(name, hook_names[i]) == 0)
			return true;
	return false;
}

#define ENV_PREFIX "ORCHESTRATE_"

/* The length of the name of "K=V" when it is an allowed one, else 0. */
static size_t env_name_len(const char *kv)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;
	size_t plen = strlen(ENV_PREFIX);

	if (!eq || (size_t)(eq - kv) <= plen || strncmp(kv, ENV_PREFIX, plen) != 0)
		return 0;
	for (const char *p = kv + plen; p < eq; p++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return (size_t)(eq - kv);
}

bool hook_proto_env_allowed(const char *kv)
{
	return env_name_len(kv) > 0;
}

int hook_request_encode(struct buf *b, const char *name, char *const *env)
{
	size_t start = b->len, count = 0;
	int r;

	if (!hook_proto_name_valid(name))
		return -EINVAL;
	if ((r = buf_add(b, HOOK_PROTO_MAGIC, sizeof(HOOK_PROTO_MAGIC))) < 0 ||
	    (r = buf_add(b, name, strlen(name) + 1)) < 0)
		return r;
	for (size_t i = 0; env && env[i]; i++) {
		if (!hook_proto_env_allowed(env[i]))
			continue;
		if (++count > HOOK_REQUEST_ENV_MAX)
			return -E2BIG;
		if ((r = buf_add(b, env[i], strlen(env[i]) + 1)) < 0)
			return r;
	}
	if ((r = buf_addc(b, '\0')) < 0)
		return r;
	if (b->len - start > HOOK_REQUEST_MAX)
		return -E2BIG;
	return 0;
}

/* "before 'arg' after", or "before" alone when arg is NULL. */
static int request_error(char **ret_error, int code, const char *before, const char *arg,
			 const char *after)
{
	_cleanup_(buf_releasep) struct buf m = BUF_INIT;
	/* The name of a refused variable, never its value; at most 64 bytes of
	 * it, printable only (it goes to the journal). */
	char shown[65];
	size_t i = 0;
	for (; arg && arg[i] && arg[i] != '=' && i < sizeof(shown) - 1; i++)
		shown[i] = (arg[i] >= 0x20 && arg[i] < 0x7f) ? arg[i] : '?';
	shown[i] = '\0';
	if ((arg ? buf_printf(&m, "%s'%s'%s", before, shown, after)
		 : buf_adds(&m, before)) < 0)
		return -ENOMEM;
	*ret_error = buf_detach(&m);
	return code;
}

int hook_request_parse(const char *data, size_t len, char **ret_name, char ***ret_env,
		       size_t *ret_consumed, char **ret_error)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(freep) char *name = NULL;
	size_t pos = 0, count = 0, field = 0;
	int r;

	*ret_error = NULL;
	if (len == 0)		/* nothing read yet (data may be NULL) */
		return 0;
	for (;;) {
		const char *s = data + pos;
		const char *nul = pos < len ? memchr(s, '\0', len - pos) : NULL;

		if (!nul) {
			/* Incomplete: refuse early what can no longer be right. */
			if (field == 0 && pos < len && strncmp(s, HOOK_PROTO_MAGIC, len - pos) != 0)
				return request_error(ret_error, -EPROTO, "not a hook request", NULL, NULL);
			if (len > HOOK_REQUEST_MAX)
				return request_error(ret_error, -E2BIG, "request larger than 64 KiB", NULL, NULL);
			return 0;
		}
		if ((size_t)(nul - data) + 1 > HOOK_REQUEST_MAX)
			return request_error(ret_error, -E2BIG, "request larger than 64 KiB", NULL, NULL);
		pos = (size_t)(nul - data) + 1;
		if (field == 0) {
			if (strcmp(s, HOOK_PROTO_MAGIC) != 0)
				return request_error(ret_error, -EPROTO, "not a hook request", NULL, NULL);
		} else if (field == 1) {
			if (!hook_proto_name_valid(s))
				return request_error(ret_error, -EPERM, "unknown hook ", s, "");
			if (!(name = strdup(s)))
				return -ENOMEM;
		} else if (!*s) {
			break;
		} else {
			size_t klen = env_name_len(s);
			if (!klen)
				return request_error(ret_error, -EPERM,
						     "environment variable ", s, " refused");
			for (size_t i = 0; i < count; i++)
				if (strncmp(env[i], s, klen + 1) == 0)
					return request_error(ret_error, -EPERM,
							     "environment variable ", s, " given twice");
			if (count >= HOOK_REQUEST_ENV_MAX)
				return request_error(ret_error, -E2BIG,
						     "more than 64 environment variables", NULL, NULL);
			if ((r = strv_push(&env, &count, s)) < 0)
				return r;
		}
		field++;
	}
	if (!env && !(env = calloc(1, sizeof(*env))))
		return -ENOMEM;
	*ret_name = TAKE_PTR(name);
	*ret_env = TAKE_PTR(env);
	*ret_consumed = pos;
	return 1;
}

/* The variables a client may set (a name each; "may be empty" for the
 * versions), and those the runner sets itself from its own config. */
static const struct {
	const char *name;
	bool empty_ok;
} client_vars[] = {
	{ "ORCHESTRATE_HOST", false },
	{ "ORCHESTRATE_VERSION", true },
	{ "ORCHESTRATE_PREVIOUS_VERSION", true },
};
static const char *const runner_vars[] = {
	"ORCHESTRATE_SERVICES_FILE", "ORCHESTRATE_LOCAL_VERSION_FILE", "ORCHESTRATE_ETCD",
	"ORCHESTRATE_PREFIX",
};

static bool env_is(const char *kv, size_t klen, const char *name)
{
	return strlen(name) == klen && strncmp(kv, name, klen) == 0;
}

int hook_request_client_env(char *const *req_env, char ***ret_env, size_t *ret_ignored,
			    char **ret_error)
{
	_cleanup_(strv_freep) char **env = NULL;
	size_t count = 0, ignored = 0;
	int r;

	*ret_error = NULL;
	for (size_t i = 0; req_env && req_env[i]; i++) {
		const char *kv = req_env[i];
		size_t klen = env_name_len(kv);
		bool known = false;

		for (size_t j = 0; klen && j < ELEMENTSOF(runner_vars); j++)
			if (env_is(kv, klen, runner_vars[j])) {
				ignored++;
				known = true;
			}
		for (size_t j = 0; klen && !known && j < ELEMENTSOF(client_vars); j++) {
			const char *value = kv + klen + 1, *why;
			if (!env_is(kv, klen, client_vars[j].name))
				continue;
			known = true;
			why = *value || !client_vars[j].empty_ok ? local_name_problem(value) : NULL;
			if (why) {
				_cleanup_(buf_releasep) struct buf m = BUF_INIT;
				if (buf_printf(&m, "environment variable '%s' refused: its value is not a name (%s)",
					       client_vars[j].name, why) < 0)
					return -ENOMEM;
				*ret_error = buf_detach(&m);
				return -EPERM;
			}
			if ((r = strv_push(&env, &count, kv)) < 0)
				return r;
		}
		if (!known)
			return request_error(ret_error, -EPERM, "environment variable ", kv,
					     " refused: the hook runner sets it, or no hook gets it");
	}
	if (!env && !(env = calloc(1, sizeof(*env))))
		return -ENOMEM;
	*ret_env = TAKE_PTR(env);
	*ret_ignored = ignored;
	return 0;
}

int hook_frame_add(struct buf *b, char type, const void *payload, size_t n)
{
	unsigned char h[HOOK_FRAME_HEADER];
	int r;

	if (n > HOOK_FRAME_MAX)
		return -E2BIG;
	h[0] = (unsigned char)type;
	h[1] = (unsigned char)(n >> 24);
	h[2] = (unsigned char)(n >> 16);
	h[3] = (unsigned char)(n >> 8);
	h[4] = (unsigned char)n;
	if ((r = buf_add(b, h, sizeof(h))) < 0)
		return r;
	return n ? buf_add(b, payload, n) : 0;
}

int hook_frame_addf(struct buf *b, char type, const char *fmt, ...)
{
	_cleanup_(buf_releasep) struct buf p = BUF_INIT;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(&p, fmt, ap);
	va_end(ap);
	if (r < 0)
		return r;
	return hook_frame_add(b, type, p.data, p.len);
}

static bool frame_type_known(char t)
{
	return t == HOOK_FRAME_STARTED || t == HOOK_FRAME_ERROR || t == HOOK_FRAME_OUTPUT ||
	       t == HOOK_FRAME_EXIT || t == HOOK_FRAME_KILL;
}

int hook_frame_parse(const char *data, size_t len, char *ret_type, const char **ret_payload,
		     size_t *ret_n, size_t *ret_consumed)
{
	const unsigned char *u = (const unsigned char *)data;
	uint32_t n;

	if (len < 1)
		return 0;
	if (!frame_type_known(data[0]))
		return -EBADMSG;
	if (len < HOOK_FRAME_HEADER)
		return 0;
	n = (uint32_t)u[1] << 24 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 8 | u[4];
	if (n > HOOK_FRAME_MAX)
		return -EBADMSG;
	if (len - HOOK_FRAME_HEADER < n)
		return 0;
	*ret_type = data[0];
	*ret_payload = data + HOOK_FRAME_HEADER;
	*ret_n = n;
	*ret_consumed = HOOK_FRAME_HEADER + n;
	return 1;
}

int hook_frame_int(const char *payload, size_t n, long min, long max, long *ret)
{
	long v = 0;
	size_t i = 0;
	bool neg = false;

	if (i < n && payload[i] == '-') {
		neg = true;
		i++;
	}
	if (i >= n || payload[i] < '0' || payload[i] > '9')
		return -EBADMSG;
	for (; i < n && payload[i] >= '0' && payload[i] <= '9'; i++) {
		if (v > (LONG_MAX - 9) / 10)
			return -EBADMSG;
		v = v * 10 + (payload[i] - '0');
	}
	if (i < n && payload[i] != ' ')
		return -EBADMSG;
	if (neg)
		v = -v;
	if (v < min || v > max)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int hook_frame_exit(const char *payload, size_t n, int *ret_exit_code, int *ret_signal)
{
	long v;

	if (n > 7 && memcmp(payload, "exited ", 7) == 0) {
		if (hook_frame_int(payload + 7, n - 7, 0, 255, &v) < 0 || memchr(payload + 7, ' ', n - 7))
			return -EBADMSG;
		*ret_exit_code = (int)v;
		*ret_signal = 0;
		return 0;
	}
	if (n > 7 && memcmp(payload, "killed ", 7) == 0) {
		if (hook_frame_int(payload + 7, n - 7, 1, NSIG - 1, &v) < 0 || memchr(payload + 7, ' ', n - 7))
			return -EBADMSG;
		*ret_exit_code = -1;
		*ret_signal = (int)v;
		return 0;
	}
	return -EBADMSG;
}

int hook_proto_send(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int hook_proto_read_until(int fd, struct buf *b, uint64_t deadline_ms)
{
	for (;;) {
		char chunk[4096];
		uint64_t now = clock_msec(CLOCK_MONOTONIC);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r;

		if (now >= deadline_ms)
			return -ETIMEDOUT;
		r = poll(&p, 1, (int)(deadline_ms - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		return buf_add(b, chunk, (size_t)n);
	}
}
