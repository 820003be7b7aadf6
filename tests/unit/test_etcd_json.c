/*
 * test_etcd_json.c — the gateway JSON decoders against replies as etcd 3.4
 * sends them (int64 as strings, zero values left out, base64 bytes) and against
 * hostile ones (wrong types, bad base64, truncated frames).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "../../orchestrate/etcd/etcd_internal.h"
#include "tap.h"

static void test_base64(void)
{
	const char *cases[][2] = {
		{ "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		{ "/running_version/v1/web1", "L3J1bm5pbmdfdmVyc2lvbi92MS93ZWIx" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(buf_releasep) struct buf e = BUF_INIT, d = BUF_INIT;
		base64_encode(cases[i][0], strlen(cases[i][0]), &e);
		is_str(buf_str(&e), cases[i][1], "base64 encode '%s'", cases[i][0]);
		ok(base64_decode(cases[i][1], strlen(cases[i][1]), &d) == 0 &&
		   d.len == strlen(cases[i][0]) && memcmp(buf_str(&d), cases[i][0], d.len) == 0,
		   "base64 decode '%s'", cases[i][1]);
	}
	const char *bad[] = { "Zg=", "Z===", "Zm9v\n", "Zm 9", "=Zm9", "Zg==Zg==", "Zm9*",
			      "Zm=v", "Zg=x", "Zm9\xc3", "====" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		is_int(base64_decode(bad[i], strlen(bad[i]), &d), -EINVAL, "base64 refuses bad input %zu", i);
	}
	/* Decoding appends; a refusal leaves the buffer as it was. */
	{
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		buf_adds(&d, "x");
		ok(base64_decode("Zm9v", 4, &d) == 0 && strcmp(buf_str(&d), "xfoo") == 0,
		   "base64 appends to what the buffer holds");
		ok(base64_decode("Zm9vYmFy*m9v", 12, &d) == -EINVAL && d.len == 4 &&
		   strcmp(buf_str(&d), "xfoo") == 0, "a refused decode leaves the buffer as it was");
	}
	/* Binary bytes, a NUL among them, survive the round trip. */
	_cleanup_(buf_releasep) struct buf e = BUF_INIT, d = BUF_INIT;
	const char bin[] = { 0, (char)0xff, 'a', '\n', 0 };
	base64_encode(bin, sizeof(bin), &e);
	base64_decode(e.data, e.len, &d);
	ok(d.len == sizeof(bin) && memcmp(d.data, bin, sizeof(bin)) == 0, "binary round trip");
}

static void test_base64url(void)
{
	/* "?>?" is "Pz4/" in the standard alphabet: both alphabets' last two. */
	const char *cases[][2] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" }, { "?>?", "Pz4_" },
		{ ">>>", "Pj4-" },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		ok(base64url_decode(cases[i][1], strlen(cases[i][1]), &d) == 0 &&
		   d.len == strlen(cases[i][0]) && memcmp(buf_str(&d), cases[i][0], d.len) == 0,
		   "base64url decode '%s'", cases[i][1]);
	}
	/* Padding, the standard alphabet's own characters, a length no
	 * encoding has. */
	const char *bad[] = { "Zg==", "Pz4/", "Pj4+", "Zm9vZ", "Zm.v" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		is_int(base64url_decode(bad[i], strlen(bad[i]), &d), -EINVAL,
		       "base64url refuses '%s'", bad[i]);
	}
}

static void test_token_expiry(void)
{
	int64_t exp = 0;

	/* A token etcd 3.4.23 gave with --auth-token jwt (its signature cut
	 * short): {"exp":1795960706,"revision":7,"username":"n1"}. */
	ok(etcd_token_expiry("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9."
			     "eyJleHAiOjE3OTU5NjA3MDYsInJldmlzaW9uIjo3LCJ1c2VybmFtZSI6Im4xIn0."
			     "kilXpN-Drb4wvS5yjDNYPaWObYe6eO9PDogxu6bMBQyIqQ", &exp) == 1 &&
	   exp == 1795960706, "a JWT's expiry: %lld", (long long)exp);
	/* A simple token ("random.index") says nothing. */
	is_int(etcd_token_expiry("ZmJSdcNHIrDkjSjL.42", &exp), 0, "a simple token has no expiry");
	/* Hostile or odd payloads say nothing either: no exp, exp a string,
	 * negative, beyond any date, not JSON, not base64url, a part too many. */
	const char *odd[] = {
		"a.eyJ1c2VybmFtZSI6Im4xIn0.s",			/* {"username":"n1"} */
		"a.eyJleHAiOiIxNzk1OTYwNzA2In0.s",		/* {"exp":"1795960706"} */
		"a.eyJleHAiOi01fQ.s",				/* {"exp":-5} */
		"a.eyJleHAiOjFlMzAwfQ.s",			/* {"exp":1e300} */
		"a.bm90IGpzb24.s",				/* not json */
		"a.e30=.s",					/* padded */
		"a.e30.s.t",					/* four parts */
		"..",
	};
	for (size_t i = 0; i < ELEMENTSOF(odd); i++)
		is_int(etcd_token_expiry(odd[i], &exp), 0, "no expiry in '%s'", odd[i]);
}

static int decode_range_text(const char *text, struct etcd_kv_list *l, bool *more)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(text);
	if (!j)
		return -EPROTO;
	return etcd_decode_range(j, l, more);
}

static void test_range(void)
{
	struct etcd_kv_list l = ETCD_KV_LIST_INIT;
	bool more = true;
	int r = decode_range_text(
		"{\"header\":{\"cluster_id\":\"1\",\"revision\":\"42\"},\"kvs\":["
		"{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":\"40\",\"version\":\"3\","
		"\"value\":\"YmFy\",\"lease\":\"7587\"},"
		"{\"key\":\"Zm9w\",\"create_revision\":\"5\",\"mod_revision\":\"5\",\"version\":\"1\"}],"
		"\"count\":\"2\"}", &l, &more);
	is_int(r, 0, "range decodes");
	is_int(l.n, 2, "two kvs");
	is_int(l.revision, 42, "revision from a string");
	is_int(l.count, 2, "count");
	ok(!more, "absent more is false");
	is_str(l.kvs[0].key, "foo", "key decoded");
	is_str(l.kvs[0].value, "bar", "value decoded");
	is_int(l.kvs[0].lease, 7587, "lease");
	is_int(l.kvs[0].mod_revision, 40, "mod_revision");
	is_int(l.kvs[1].value_len, 0, "absent value is empty");
	ok(l.kvs[1].value && l.kvs[1].value[0] == '\0', "absent value is an empty string");
	etcd_kv_list_release(&l);

	r = decode_range_text("{\"header\":{\"revision\":\"3\"}}", &l, &more);
	ok(r == 0 && l.n == 0 && l.count == 0, "empty range: no kvs, no count");
	etcd_kv_list_release(&l);

	const char *bad[] = {
		"{\"kvs\":[]}",						/* no header */
		"{\"header\":{\"revision\":\"x1\"}}",			/* not a number */
		"{\"header\":{\"revision\":\"3\"},\"kvs\":\"x\"}",	/* kvs not an array */
		"{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"value\":\"YmFy\"}]}", /* no key */
		"{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":\"***\"}]}",    /* bad base64 */
		"{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":5}]}",
		"{\"header\":{\"revision\":\"3\"},\"kvs\":[{\"key\":\"Zm9v\",\"version\":true}]}",
		"{\"header\":{\"revision\":\"3\"},\"more\":\"yes\"}",
		"{\"header\":{\"revision\":\"99999999999999999999999\"}}",	/* overflows int64 */
		"{\"header\":{\"revision\":\"3\"},\"kvs\":[7]}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		r = decode_range_text(bad[i], &l, &more);
		is_int(r, -EPROTO, "malformed range %zu refused", i);
		etcd_kv_list_release(&l);
	}
}

static void test_int64(void)
{
	_cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(
		"{\"a\":\"-5\",\"b\":12,\"c\":1.5,\"d\":\"\",\"e\":\"12x\",\"f\":null}");
	int64_t v = -1;
	ok(etcd_decode_int64(j, "a", &v) == 0 && v == -5, "string int64");
	ok(etcd_decode_int64(j, "b", &v) == 0 && v == 12, "number int64 tolerated");
	ok(etcd_decode_int64(j, "missing", &v) == 0 && v == 0, "absent is zero");
	is_int(etcd_decode_int64(j, "c", &v), -EPROTO, "fraction refused");
	is_int(etcd_decode_int64(j, "d", &v), -EPROTO, "empty string refused");
	is_int(etcd_decode_int64(j, "e", &v), -EPROTO, "trailing garbage refused");
	is_int(etcd_decode_int64(j, "f", &v), -EPROTO, "null refused");
}

static int frame(const char *text, struct etcd_event **ev, size_t *n, int64_t *rev,
		 int64_t *compact, bool *created)
{
	return etcd_decode_watch_frame(text, strlen(text), ev, n, rev, compact, created);
}

static void test_watch_frames(void)
{
	struct etcd_event *ev;
	size_t n;
	int64_t rev, compact;
	bool created;

	int r = frame("{\"result\":{\"header\":{\"revision\":\"2\"},\"created\":true}}", &ev, &n,
		      &rev, &compact, &created);
	ok(r == 0 && created && n == 0 && rev == 2, "created frame");
	etcd_events_free(ev, n);

	r = frame("{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":["
		  "{\"kv\":{\"key\":\"Zm9v\",\"mod_revision\":\"8\",\"value\":\"YmFy\"}},"
		  "{\"type\":\"DELETE\",\"kv\":{\"key\":\"Zm9w\",\"mod_revision\":\"9\"}}]}}",
		  &ev, &n, &rev, &compact, &created);
	ok(r == 0 && n == 2 && !created && rev == 9, "event frame");
	ok(n == 2 && ev[0].type == ETCD_EVENT_PUT, "no type means PUT");
	ok(n == 2 && ev[1].type == ETCD_EVENT_DELETE && strcmp(ev[1].kv.key, "fop") == 0,
	   "DELETE event");
	etcd_events_free(ev, n);

	r = frame("{\"result\":{\"header\":{\"revision\":\"2\"},\"canceled\":true,"
		  "\"compact_revision\":\"5\"}}", &ev, &n, &rev, &compact, &created);
	ok(r == -ESTALE && compact == 5, "compaction cancel gives -ESTALE and the revision");

	r = frame("{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"no leader\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -ECONNREFUSED, "error frame inside a 200 stream: unavailable");
	r = frame("{\"error\":{\"grpc_code\":7,\"message\":\"etcdserver: permission denied\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EACCES, "permission error frame");
	r = frame("{\"error\":\"etcdserver: mvcc: required revision has been compacted\","
		  "\"code\":11,\"message\":\"etcdserver: mvcc: required revision has been compacted\"}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -ESTALE, "unary-style compacted error");
	/* Found by fuzz_watch_frame: a code too large for a long was cast (UB). */
	r = frame("{\"error\":{\"grpc_code\":1e300,\"message\":\"x\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EPROTO, "error frame with an absurd grpc_code: -EPROTO, no overflow");
	r = frame("{\"error\":{\"grpc_code\":-1e300}}", &ev, &n, &rev, &compact, &created);
	is_int(r, -EPROTO, "error frame with a hugely negative grpc_code: -EPROTO");

	/* What etcd 3.4.23 answers, through the gateway, to a watch created with
	 * an expired simple token, or with no token on a cluster with auth. */
	r = frame("{\"result\":{\"header\":{\"revision\":\"2\"},\"watch_id\":\"-1\","
		  "\"created\":true,\"canceled\":true,\"cancel_reason\":\"rpc error: code = "
		  "Unauthenticated desc = etcdserver: invalid auth token\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EACCES, "cancel for an expired token: -EACCES (and the stream re-authenticates)");
	r = frame("{\"result\":{\"header\":{\"revision\":\"3\"},\"watch_id\":\"-1\","
		  "\"created\":true,\"canceled\":true,\"cancel_reason\":\"rpc error: code = "
		  "InvalidArgument desc = etcdserver: user name is empty\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EACCES, "cancel for a missing token: -EACCES");
	r = frame("{\"result\":{\"header\":{\"revision\":\"3\"},\"canceled\":true,"
		  "\"cancel_reason\":\"etcdserver: permission denied\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EACCES, "cancel for a refused permission: -EACCES");
	r = frame("{\"result\":{\"header\":{\"revision\":\"3\"},\"canceled\":true,"
		  "\"cancel_reason\":\"something else\"}}",
		  &ev, &n, &rev, &compact, &created);
	is_int(r, -EPROTO, "cancel for a reason we cannot act on: -EPROTO");

	const char *bad[] = {
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"kv\":{\"key\":\"Zm9v\"",
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":{}}}",
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"type\":\"EXPIRE\","
		"\"kv\":{\"key\":\"Zm9v\"}}]}}",
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{\"type\":1}]}}",
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"events\":[{}]}}",
		"{\"result\":{\"events\":[]}}",
		"{\"result\":{\"header\":{\"revision\":\"9\"},\"created\":\"true\"}}",
		"[]", "", "null", "{\"result\":5}",
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ev = (void *)1;
		r = frame(bad[i], &ev, &n, &rev, &compact, &created);
		ok(r == -EPROTO && ev == NULL, "malformed frame %zu refused", i);
	}
}

static void test_prefix_end(void)
{
	char end[16];
	size_t n = etcd_prefix_end("/a/", 3, end);
	ok(n == 3 && memcmp(end, "/a0", 3) == 0, "prefix end increments the last byte");
	const char ff[] = { 'a', (char)0xff };
	n = etcd_prefix_end(ff, 2, end);
	ok(n == 1 && end[0] == 'b', "trailing 0xff bytes are dropped");
	n = etcd_prefix_end("", 0, end);
	ok(n == 1 && end[0] == '\0', "empty prefix means every key");
}

/* What an error from etcd means to the caller: a definite failure, or one
 * after which the request may still be applied (transient: -ECONNREFUSED). */
static void test_grpc_errno(void)
{
	static const struct {
		long code;
		const char *message;
		int errno_;
	} cases[] = {
		{ 14, "etcdserver: request timed out", -ECONNREFUSED },
		{ 14, "etcdserver: request timed out, waiting for the applied index took too long",
		  -ECONNREFUSED },
		{ 4, "context deadline exceeded", -ECONNREFUSED },
		/* the gateway's own deadline, as grpc code Unknown */
		{ 2, "context deadline exceeded", -ECONNREFUSED },
		{ 1, "context canceled", -ECONNREFUSED },
		{ 2, "etcdserver: leader changed", -ECONNREFUSED },
		{ 2, "something else", -EPROTO },
		{ 5, "etcdserver: requested lease not found", -EINVAL },
		{ 7, "etcdserver: permission denied", -EACCES },
		{ 8, "etcdserver: mvcc: database space exceeded", -ENOSPC },
		/* refused before it was proposed: never applied (etcd 3.4.23's
		 * gateway sends code 2; the gRPC status is ResourceExhausted) */
		{ 2, "etcdserver: too many requests", -EBUSY },
		{ 8, "etcdserver: too many requests", -EBUSY },
		{ 8, "grpc: received message larger than max", -ECONNREFUSED },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		bool retry, reauth;
		int r = etcd_grpc_errno(cases[i].code, cases[i].message, false, &retry, &reauth);
		ok(r == cases[i].errno_, "grpc %ld '%s': %d (want %d)", cases[i].code,
		   cases[i].message, r, cases[i].errno_);
		if (r == -EBUSY)
			ok(retry && !reauth, "...and another member may take it");
	}
}

/* A request that failed on every endpoint: "too many requests" from the
 * last says it was not applied only when no earlier attempt may have been. */
static void test_attempts_error(void)
{
	struct etcd_attempts none = { 0 }, unsure = { .unsure = true },
			     untrusted = { .tls_refused = true };

	ok(etcd_attempts_error(&none, -EBUSY) == -EBUSY, "refused everywhere: not applied");
	ok(etcd_attempts_error(&unsure, -EBUSY) == -ECONNREFUSED,
	   "refused after an attempt without an answer: it may be applied");
	ok(etcd_attempts_error(&unsure, -ECONNREFUSED) == -ECONNREFUSED, "no answer stays so");
	ok(etcd_attempts_error(&untrusted, -ECONNREFUSED) == -EACCES,
	   "no endpoint reached, one not trusted: refused");
	ok(etcd_attempts_error(&untrusted, -EBUSY) == -EBUSY,
	   "a member that answered is not a trust failure");
	ok(etcd_attempts_error(&none, -EPROTO) == -EPROTO, "anything else as it is");
}

/* The keepalive stream's reply, split into frames: each answer a line, and
 * the error that ends the stream a whole object with no line break after it. */
static void test_keepalive_frames(void)
{
	const char *answer = "{\"result\":{\"ID\":\"7\",\"TTL\":\"30\"}}\n{\"res";
	const char *error = "{\"error\":{\"grpc_code\":4,\"message\":\"etcdserver: request "
			    "timed out, waiting for the applied index took too long\"}}";
	const char *partial = "{\"error\":{\"grpc_code\":4,\"message\":\"etcdserver";
	size_t len = 0, consumed = 0;

	ok(etcd_keepalive_frame(answer, strlen(answer), &len, &consumed), "an answer is a frame");
	ok(len == strlen(answer) - strlen("\n{\"res") && consumed == len + 1,
	   "up to its line break, which goes with it");
	answer += consumed;
	ok(!etcd_keepalive_frame(answer, strlen(answer), &len, &consumed),
	   "the start of the next one is not a frame yet");
	ok(etcd_keepalive_frame(error, strlen(error), &len, &consumed),
	   "the error that ends the stream is one, with no line break after it");
	ok(len == strlen(error) && consumed == len, "all of it");
	ok(!etcd_keepalive_frame(partial, strlen(partial), &len, &consumed),
	   "a part of it is not");
	ok(etcd_keepalive_frame("  {\"error\":{}} \r", 16, &len, &consumed) && consumed == 16,
	   "blanks around it are part of it");
	ok(!etcd_keepalive_frame("{\"a\":1}x", 8, &len, &consumed),
	   "an object followed by something else is not");
	ok(!etcd_keepalive_frame(" \r", 2, &len, &consumed), "nor is a blank");
}

int main(void)
{
	test_keepalive_frames();
	test_grpc_errno();
	test_attempts_error();
	test_base64();
	test_base64url();
	test_token_expiry();
	test_range();
	test_int64();
	test_watch_frames();
	test_prefix_end();
	return done_testing();
}
