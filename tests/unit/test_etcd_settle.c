/*
 * test_etcd_settle.c — a resent txn is written once (etcd_txn_settle), against
 * the real etcd whose URL is in ORCHESTRATE_TEST_ETCD (t0185 starts one).
 *
 * A txn whose reply was lost may have been applied.  Settled, its resend must
 * report "applied" without writing when the first send went through (even if a
 * guard of it no longer holds), write when it did not, and report a failed
 * compare when somebody else wrote the witness meanwhile.  Each case counts
 * the writes from the keys' own version counters, which etcd keeps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "tap.h"

static struct etcd_client *c;

static int64_t version_of(const char *key)
{
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	int r = etcd_get(c, key, &kv, NULL);
	return r == -ENOENT ? 0 : r < 0 ? -1 : kv.version;
}

static char *value_of(const char *key)
{
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	if (etcd_get(c, key, &kv, NULL) < 0 || !kv.value)
		return strdup("");
	return strdup(kv.value);
}

static struct etcd_txn *two_puts(const char *a, const char *b, const char *value)
{
	struct etcd_txn *t = etcd_txn_new();
	if (!t || etcd_txn_put(t, true, a, value, 0) < 0 || etcd_txn_put(t, true, b, value, 0) < 0)
		abort();
	return t;
}

/* The asynchronous commit, driven to its end on a loop of its own. */
struct async_result {
	bool done;
	int error;
	int64_t revision;
};

static void on_commit(int error, int64_t revision, void *userdata)
{
	struct async_result *res = userdata;
	res->done = true;
	res->error = error;
	res->revision = revision;
}

/* Runs the loop until the call started (r, from its start function) called
 * back: its error, and its value in *ret_value (may be NULL). */
static int drive(sd_event *e, int r, struct async_result *res, int64_t *ret_value)
{
	if (r < 0)
		return r;
	for (int i = 0; !res->done && i < 1000; i++)
		if (sd_event_run(e, 100 * 1000) < 0)
			return -EIO;
	if (!res->done)
		return -ETIMEDOUT;
	if (ret_value)
		*ret_value = res->revision;
	return res->error;
}

static int commit_async(sd_event *e, struct etcd_txn *t, int64_t *ret_revision)
{
	struct async_result res = { 0 };
	struct etcd_call *call = NULL;
	return drive(e, etcd_txn_commit_start(c, t, 10000, on_commit, &res, &call), &res,
		     ret_revision);
}

/* etcd_txn_applied_start(): the revision it reports (0: not applied), or an
 * error. */
static int applied_async(sd_event *e, struct etcd_txn *t, int64_t *ret_revision)
{
	struct async_result res = { 0 };
	struct etcd_call *call = NULL;
	return drive(e, etcd_txn_applied_start(c, t, 10000, on_commit, &res, &call), &res,
		     ret_revision);
}

int main(void)
{
	const char *url = getenv("ORCHESTRATE_TEST_ETCD");
	char *endpoints[] = { (char *)url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	_cleanup_(freep) char *v = NULL;
	sd_event *e = NULL;
	bool held;
	int64_t since, rev = 0, applied_at = 0;
	int r;

	if (!url) {
		printf("Bail out! ORCHESTRATE_TEST_ETCD is not set (t0185 sets it)\n");
		return 1;
	}
	if (etcd_client_new(&opts, &c) < 0 || sd_event_new(&e) < 0 ||
	    etcd_client_attach_event(c, e) < 0) {
		printf("Bail out! cannot set up the client\n");
		return 1;
	}

	/* 1. The first send was applied; the settled resend writes nothing. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = two_puts("s1/a", "s1/b", "one");
		(void)etcd_get(c, "s1/none", &(struct etcd_kv){ 0 }, NULL);	/* a revision seen */
		since = etcd_client_revision(c);
		ok(since > 0, "the client knows a revision after a read (%lld)", (long long)since);
		r = etcd_txn_commit(c, t, &held, &applied_at);
		ok(r == 0 && held, "first send applied");
		ok(etcd_txn_settle(t, since) == 0, "settled");
		r = etcd_txn_commit(c, t, &held, &rev);
		ok(r == 0 && held, "the resend reports the txn applied");
		is_int(rev, applied_at, "at the revision of the first send");
		is_int(version_of("s1/a"), 1, "the witness was written once");
		is_int(version_of("s1/b"), 1, "and so was the other key");
	}

	/* 2. The first send never arrived; the settled resend writes. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = two_puts("s2/a", "s2/b", "two");
		(void)etcd_put(c, "s2/a", "older", 5, 0);	/* the key exists from before */
		since = etcd_client_revision(c);
		ok(etcd_txn_settle(t, since) == 0, "settled");
		r = etcd_txn_commit(c, t, &held, NULL);
		ok(r == 0 && held, "the resend of a txn never applied writes");
		v = value_of("s2/a");
		is_str(v, "two", "the witness holds the txn's value");
		free(v), v = NULL;
		is_int(version_of("s2/b"), 1, "the other key written once");
	}

	/* 3. Somebody else wrote the witness after the first send. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = two_puts("s3/a", "s3/b", "mine");
		since = etcd_client_revision(c);
		(void)etcd_put(c, "s3/a", "theirs", 6, 0);
		ok(etcd_txn_settle(t, since) == 0, "settled");
		r = etcd_txn_commit(c, t, &held, NULL);
		ok(r == 0 && !held, "the resend does not hold: the witness moved on");
		v = value_of("s3/a");
		is_str(v, "theirs", "their value stays");
		free(v), v = NULL;
		is_int(version_of("s3/b"), 0, "nothing of the txn written");
	}

	/* 4. Applied under a guard that no longer holds: still applied, and the
	 * asynchronous commit says so too. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = NULL;
		_cleanup_(etcd_kv_releasep) struct etcd_kv g = { 0 };
		(void)etcd_put(c, "s4/guard", "g", 1, 0);
		(void)etcd_get(c, "s4/guard", &g, NULL);
		t = two_puts("s4/a", "s4/b", "four");
		if (etcd_txn_if_mod_revision(t, "s4/guard", ETCD_CMP_EQUAL, g.mod_revision) < 0)
			abort();
		since = etcd_client_revision(c);
		r = commit_async(e, t, &applied_at);
		ok(r == 0, "asynchronous first send applied (%d)", r);
		(void)etcd_put(c, "s4/guard", "moved", 5, 0);
		ok(etcd_txn_settle(t, since) == 0, "settled");
		r = commit_async(e, t, &rev);
		ok(r == 0, "the asynchronous resend reports it applied (%d)", r);
		is_int(rev, applied_at, "at the revision of the first send");
		is_int(version_of("s4/a"), 1, "the witness was written once");
	}

	/* 5. Not applied, and the guard fails: -ECANCELED, nothing written. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = two_puts("s5/a", "s5/b", "five");
		if (etcd_txn_if_version(t, "s4/guard", ETCD_CMP_EQUAL, 0) < 0)
			abort();
		since = etcd_client_revision(c);
		ok(etcd_txn_settle(t, since) == 0, "settled");
		r = commit_async(e, t, NULL);
		is_int(r, -ECANCELED, "a failed guard is -ECANCELED");
		is_int(version_of("s5/a"), 0, "nothing written");
	}

	/* 6. A txn that puts nothing is left as it is. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
		if (!t || etcd_txn_delete(t, true, "s1/b") < 0)
			abort();
		ok(etcd_txn_settle(t, 1) == 0, "settling a txn without a put is a no-op");
		r = etcd_txn_commit(c, t, &held, NULL);
		ok(r == 0 && held, "and it commits as before");
	}

	/* 7. Asked without writing (etcd_txn_applied_start): applied, at its
	 * revision; not applied; the witness written by somebody else; a txn
	 * that is not settled cannot be asked about.  Nothing is written. */
	{
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = two_puts("s7/a", "s7/b", "seven");
		_cleanup_(etcd_txn_freep) struct etcd_txn *u = two_puts("s7/c", "s7/d", "never");
		_cleanup_(etcd_txn_freep) struct etcd_txn *w = two_puts("s7/e", "s7/f", "mine");
		_cleanup_(etcd_txn_freep) struct etcd_txn *x = two_puts("s7/g", "s7/h", "x");

		since = etcd_client_revision(c);
		ok(etcd_txn_settle(t, since) == 0 && etcd_txn_settle(u, since) == 0 &&
		   etcd_txn_settle(w, since) == 0, "settled");
		r = commit_async(e, t, &applied_at);
		ok(r == 0, "sent and applied (%d)", r);
		rev = -1;
		r = applied_async(e, t, &rev);
		ok(r == 0, "asked (%d)", r);
		is_int(rev, applied_at, "applied, at the revision of its send");
		rev = -1;
		r = applied_async(e, u, &rev);
		ok(r == 0 && rev == 0, "a txn never sent is not applied (%d, %lld)", r,
		   (long long)rev);
		(void)etcd_put(c, "s7/e", "theirs", 6, 0);
		rev = -1;
		r = applied_async(e, w, &rev);
		ok(r == 0 && rev == 0, "a witness somebody else wrote is not ours (%d, %lld)", r,
		   (long long)rev);
		(void)etcd_put(c, "s7/g", "x", 1, 0);	/* the same value, before `since` */
		ok(etcd_txn_settle(x, etcd_client_revision(c)) == 0, "settled after that put");
		rev = -1;
		r = applied_async(e, x, &rev);
		ok(r == 0 && rev == 0, "the same value written before the send is not this txn (%d)",
		   r);
		is_int(version_of("s7/a"), 1, "asking wrote nothing");
		is_int(version_of("s7/c"), 0, "nor created anything");
		_cleanup_(etcd_txn_freep) struct etcd_txn *plain = two_puts("s7/i", "s7/j", "p");
		struct etcd_call *call = NULL;
		is_int(etcd_txn_applied_start(c, plain, 1000, on_commit, NULL, &call), -EINVAL,
		       "a txn that is not settled cannot be asked about");
	}

	/* 8. A grant is a write too: asked by id, a grant sent again after an
	 *    unanswered one that etcd applied is that lease, not a second. */
	{
		int64_t id = 0x5e771ed0 + (int64_t)getpid(), got = 0, again = 0, other = 0, ttl = 0;
		struct async_result res = { 0 };
		struct etcd_call *call = NULL;
		r = drive(e, etcd_lease_grant_start(c, 30, id, 10000, on_commit, &res, &call), &res,
			  &got);
		ok(r == 0 && got == id, "a grant asked by id is that lease (%d, %llx)", r,
		   (unsigned long long)got);
		res = (struct async_result){ 0 };
		r = drive(e, etcd_lease_grant_start(c, 30, id, 10000, on_commit, &res, &call), &res,
			  &again);
		ok(r == 0 && again == id, "sent again, it is granted: the same lease (%d, %llx)", r,
		   (unsigned long long)again);
		res = (struct async_result){ 0 };
		r = drive(e, etcd_lease_keepalive_start(c, id, 10000, on_commit, &res, &call), &res,
			  &ttl);
		ok(r == 0 && ttl > 0 && ttl <= 30, "and alive (ttl %lld)", (long long)ttl);
		res = (struct async_result){ 0 };
		r = drive(e, etcd_lease_grant_start(c, 30, 0, 10000, on_commit, &res, &call), &res,
			  &other);
		ok(r == 0 && other > 0 && other != id, "a grant without an id gets etcd's own");
		(void)etcd_lease_revoke(c, id);
		(void)etcd_lease_revoke(c, other);
		res = (struct async_result){ 0 };
		r = drive(e, etcd_lease_keepalive_start(c, id, 10000, on_commit, &res, &call), &res,
			  &ttl);
		ok(r == 0 && ttl == 0, "revoked, it is gone (%d, ttl %lld)", r, (long long)ttl);
	}

	/* A put that asks for the key it replaces (the slot queue's tail):
	 * the client has it for that txn's revision alone. */
	{
		int64_t before_at = 0, at = 0, at2 = 0;
		const struct etcd_kv *was;
		(void)etcd_put(c, "r/tail", "h1", 2, 0);
		before_at = etcd_client_revision(c);
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
		ok(t && etcd_txn_put(t, true, "r/h2", "x", 0) == 0 &&
		   etcd_txn_put_replacing(t, "r/tail", "h2", 0) == 0, "a txn that names h2 the tail");
		r = etcd_txn_commit(c, t, &held, &at);
		ok(r == 0 && held && at > before_at, "applied (%d)", r);
		was = etcd_txn_replaced(c, at);
		ok(was && was->value && was->value_len == 2 && memcmp(was->value, "h1", 2) == 0 &&
		   was->mod_revision == before_at, "it replaced h1, written at %lld",
		   (long long)before_at);
		ok(etcd_txn_replaced(c, before_at) == NULL, "nothing is known of another revision");
		_cleanup_(etcd_txn_freep) struct etcd_txn *t2 = etcd_txn_new();
		ok(t2 && etcd_txn_put_replacing(t2, "r/new", "h3", 0) == 0, "a put of a new key");
		r = etcd_txn_commit(c, t2, &held, &at2);
		was = etcd_txn_replaced(c, at2);
		ok(r == 0 && was && !was->key, "it replaced nothing: an empty key, known");
		ok(etcd_txn_replaced(c, at) == NULL, "and the first txn's is gone with it");
	}

	etcd_client_free(c);
	sd_event_unref(e);
	return done_testing();
}
