/*
 * test_etcd_snapshot.c — a snapshot read (etcd_snapshot_start) is one
 * revision, however many pages it takes, against the real etcd whose URL is
 * in ORCHESTRATE_TEST_ETCD (t0186 starts one).
 *
 * The read is one txn of range operations; a range longer than a page (5000
 * keys) goes on in range requests pinned to the txn's revision.  Here one
 * range holds 5,003 keys while a second client keeps writing keys that sort
 * after them: every key the read returns must be one that existed at its
 * revision, and every key written at or before that revision must be there,
 * whichever page it fell on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <cjson/cJSON.h>

#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "tap.h"

#define BULK 5003		/* one page of 5000 and a second of 3 */
#define WRITER_MAX 2000

static struct etcd_client *c;
static const char *url;

/* --- a writer beside the read --------------------------------------------------- */

static volatile int writer_stop;
static int64_t writer_revs[WRITER_MAX];	/* the revision of snap/w%05d */
static int writer_n;

static void *writer(void *arg)
{
	char *endpoints[] = { (char *)url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	struct etcd_client *w = NULL;
	(void)arg;
	if (etcd_client_new(&opts, &w) < 0)
		return NULL;
	while (!writer_stop && writer_n < WRITER_MAX) {
		char key[32];
		snprintf(key, sizeof(key), "snap/w%05d", writer_n);
		if (etcd_put(w, key, "w", 1, 0) < 0)
			break;
		writer_revs[writer_n++] = etcd_client_revision(w);
	}
	etcd_client_free(w);
	return NULL;
}

/* --- the read ----------------------------------------------------------------------- */

struct result {
	bool done;
	int error;
	size_t n;
	int64_t revision;
	struct etcd_kv_list lists[3];
};

static void on_snapshot(int error, struct etcd_kv_list *lists, size_t n, int64_t revision,
			void *userdata)
{
	struct result *res = userdata;
	res->done = true;
	res->error = error;
	res->n = n;
	res->revision = revision;
	for (size_t i = 0; i < n && i < 3; i++) {
		res->lists[i] = lists[i];	/* taken: the call releases what is left */
		lists[i] = (struct etcd_kv_list)ETCD_KV_LIST_INIT;
	}
}

struct watched {
	bool done;
	int puts, deletes;
	char *key, *prev_value;
	int64_t prev_created;
};

static int on_watched(const struct etcd_event *ev, size_t n, int64_t revision, void *userdata)
{
	struct watched *w = userdata;
	for (size_t i = 0; i < n; i++) {
		if (ev[i].type == ETCD_EVENT_PUT) {
			w->puts++;
			continue;
		}
		w->deletes++;
		free(w->key);
		free(w->prev_value);
		w->key = strndup(ev[i].kv.key, ev[i].kv.key_len);
		w->prev_value = ev[i].prev_kv.key ? strndup(ev[i].prev_kv.value,
							      ev[i].prev_kv.value_len) : NULL;
		w->prev_created = ev[i].prev_kv.create_revision;
		w->done = true;
	}
	return 0;
}

static int drive(sd_event *e, struct result *res)
{
	for (int i = 0; !res->done && i < 600; i++)
		if (sd_event_run(e, 100 * 1000) < 0)
			return -EIO;
	return res->done ? 0 : -ETIMEDOUT;
}

static int put_bulk(void)
{
	for (int i = 0; i < BULK;) {
		_cleanup_(etcd_txn_freep) struct etcd_txn *t = etcd_txn_new();
		if (!t)
			return -ENOMEM;
		for (int k = 0; k < 100 && i < BULK; k++, i++) {
			char key[32];
			snprintf(key, sizeof(key), "snap/k%05d", i);
			if (etcd_txn_put(t, true, key, "k", 0) < 0)
				return -ENOMEM;
		}
		int r = etcd_txn_commit(c, t, NULL, NULL);
		if (r < 0)
			return r;
	}
	return 0;
}

static int compact(int64_t revision)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	char rev[32];
	snprintf(rev, sizeof(rev), "%lld", (long long)revision);
	if (!body || !cJSON_AddStringToObject(body, "revision", rev) ||
	    !cJSON_AddTrueToObject(body, "physical"))
		return -ENOMEM;
	return etcd_request(c, "/v3/kv/compaction", body, &reply);
}

int main(void)
{
	url = getenv("ORCHESTRATE_TEST_ETCD");
	char *endpoints[] = { (char *)url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	sd_event *e = NULL;
	struct result res = { 0 };
	struct etcd_call *call = NULL;
	pthread_t thread;

	if (!url) {
		printf("Bail out! ORCHESTRATE_TEST_ETCD is not set (t0186 sets it)\n");
		return 1;
	}
	if (etcd_client_new(&opts, &c) < 0 || sd_event_new(&e) < 0 ||
	    etcd_client_attach_event(c, e) < 0) {
		printf("Bail out! cannot set up the client\n");
		return 1;
	}
	ok(put_bulk() == 0, "%d keys under snap/", BULK);
	ok(etcd_put(c, "one", "1", 1, 0) == 0, "a key of its own");

	const struct etcd_range ranges[] = {
		{ .key = "one" },	/* the key alone, not "one..." */
		{ .key = "snap/", .prefix = true },
		{ .key = "none/", .prefix = true },
	};
	ok(etcd_put(c, "one-more", "x", 1, 0) == 0, "a key that starts as the single one does");
	if (pthread_create(&thread, NULL, writer, NULL) != 0) {
		printf("Bail out! no writer thread\n");
		return 1;
	}
	/* Let the writer get going, so that it writes while the read runs. */
	for (int i = 0; i < 200 && writer_n < 20; i++)
		sd_event_run(e, 10 * 1000);
	int r = etcd_snapshot_start(c, ranges, 3, 0, 10000, on_snapshot, &res, &call);
	ok(r == 0, "the read started");
	r = r < 0 ? r : drive(e, &res);
	writer_stop = 1;
	pthread_join(thread, NULL);
	ok(r == 0 && res.error == 0, "the read ended without error (%d, %d)", r, res.error);
	is_int(res.n, 3, "a list per range");

	/* The single key: itself, not the key that starts as it does. */
	is_int(res.lists[0].n, 1, "one key in the single-key range");
	ok(res.lists[0].n == 1 && strcmp(res.lists[0].kvs[0].key, "one") == 0, "it is 'one'");
	is_int(res.lists[2].n, 0, "an empty range is empty");

	/* The long range: every bulk key, and the writer's keys of the read's
	 * revision and before, and nothing newer, in key order. */
	const struct etcd_kv_list *l = &res.lists[1];
	int expected_w = 0, newer_w = 0, got_w = 0, got_k = 0, newer = 0, unsorted = 0;
	for (int i = 0; i < writer_n; i++) {
		if (writer_revs[i] <= res.revision)
			expected_w++;
		else
			newer_w++;
	}
	for (size_t i = 0; i < l->n; i++) {
		if (l->kvs[i].mod_revision > res.revision)
			newer++;
		if (i > 0 && strcmp(l->kvs[i - 1].key, l->kvs[i].key) >= 0)
			unsorted++;
		if (strncmp(l->kvs[i].key, "snap/k", 6) == 0)
			got_k++;
		else if (strncmp(l->kvs[i].key, "snap/w", 6) == 0)
			got_w++;
	}
	printf("# read at revision %lld: %zu keys; the writer wrote %d keys, %d after it\n",
	       (long long)res.revision, l->n, writer_n, newer_w);
	is_int(got_k, BULK, "every bulk key, over two pages");
	is_int(got_w, expected_w, "the writer's keys of the read's revision and before, no other");
	is_int(newer, 0, "no key newer than the read's revision");
	is_int(unsorted, 0, "in key order");
	ok(l->count >= (int64_t)l->n, "the count is the first page's total (%lld)",
	   (long long)l->count);
	ok(newer_w > 0, "the writer went on past the read's revision (the pages were pinned)");
	for (size_t i = 0; i < 3; i++)
		etcd_kv_list_release(&res.lists[i]);

	/* Keys only, and a count alone: over the same 5,003 keys, the count
	 * in one request and the keys over two pages, still without values. */
	{
		const struct etcd_range shapes[] = {
			{ .key = "snap/k", .prefix = true, .flags = ETCD_COUNT_ONLY },
			{ .key = "snap/k", .prefix = true, .flags = ETCD_KEYS_ONLY },
			{ .key = "one", .flags = ETCD_KEYS_ONLY },
		};
		struct result sh = { 0 };
		size_t with_value = 0;
		r = etcd_snapshot_start(c, shapes, 3, 0, 10000, on_snapshot, &sh, &call);
		r = r < 0 ? r : drive(e, &sh);
		ok(r == 0 && sh.error == 0 && sh.n == 3, "keys-only and count-only ranges read (%d)",
		   sh.error);
		is_int(sh.lists[0].n, 0, "a count-only range holds no key");
		is_int(sh.lists[0].count, BULK, "and the count of every key");
		is_int(sh.lists[1].n, BULK, "a keys-only range holds every key, over two pages");
		for (size_t i = 0; i < sh.lists[1].n; i++)
			with_value += sh.lists[1].kvs[i].value_len > 0;
		is_int(with_value, 0, "and no value");
		is_int(sh.lists[2].n, 1, "a keys-only single key is the key");
		for (size_t i = 0; i < 3; i++)
			etcd_kv_list_release(&sh.lists[i]);
	}

	/* The slot queue's look (ETCD_NEWEST_FIRST): the keys created before a
	 * revision, newest first, at most a limit; a key written again keeps
	 * its place. */
	{
		int64_t created[4];
		const char *names[] = { "q/a", "q/b", "q/c", "q/d" };
		for (int i = 0; i < 4; i++) {
			ok(etcd_put(c, names[i], names[i] + 2, 1, 0) == 0, "queue key %s", names[i]);
			created[i] = etcd_client_revision(c);
		}
		ok(etcd_put(c, "q/a", "A", 1, 0) == 0, "q/a written again");
		const struct etcd_range look[] = {
			{ .key = "q/", .prefix = true, .flags = ETCD_NEWEST_FIRST, .limit = 2,
			  .max_create_revision = created[2] - 1 },
			{ .key = "q/", .prefix = true, .flags = ETCD_NEWEST_FIRST, .limit = 5,
			  .max_create_revision = created[2] },
			{ .key = "q/", .prefix = true, .flags = ETCD_NEWEST_FIRST | ETCD_KEYS_ONLY,
			  .limit = 1, .max_create_revision = created[3] - 1 },
		};
		struct result lk = { 0 };
		r = etcd_snapshot_start(c, look, 3, 0, 10000, on_snapshot, &lk, &call);
		r = r < 0 ? r : drive(e, &lk);
		ok(r == 0 && lk.error == 0 && lk.n == 3, "newest-first ranges read (%d)", lk.error);
		ok(lk.lists[0].n == 2 && strcmp(lk.lists[0].kvs[0].key, "q/b") == 0 &&
		   strcmp(lk.lists[0].kvs[1].key, "q/a") == 0,
		   "the two created before q/c, newest first: q/b, q/a");
		ok(lk.lists[0].kvs[1].value_len == 1 && lk.lists[0].kvs[1].value[0] == 'A',
		   "q/a written again keeps its place, with its new value");
		ok(lk.lists[1].n == 3 && strcmp(lk.lists[1].kvs[0].key, "q/c") == 0,
		   "a limit past them: all three up to q/c, and no page after");
		ok(lk.lists[2].n == 1 && strcmp(lk.lists[2].kvs[0].key, "q/c") == 0 &&
		   lk.lists[2].kvs[0].value_len == 0, "limit 1: the key just ahead of q/d alone");
		for (size_t i = 0; i < 3; i++)
			etcd_kv_list_release(&lk.lists[i]);
		const struct etcd_range bad[] = {
			{ .key = "q/", .prefix = true, .flags = ETCD_NEWEST_FIRST } };
		is_int(etcd_snapshot_start(c, bad, 1, 0, 10000, on_snapshot, &lk, &call), -EINVAL,
		       "newest-first without a limit is refused before any request");

		/* How many keys were ahead of q/d when it was created: a count
		 * at the revision before it, whatever went since. */
		ok(etcd_delete(c, "q/a") >= 0, "q/a leaves the queue");
		const struct etcd_range then[] = {
			{ .key = "q/", .prefix = true, .flags = ETCD_COUNT_ONLY,
			  .revision = created[3] - 1 },
			{ .key = "q/", .prefix = true, .flags = ETCD_COUNT_ONLY },
			{ .key = "q/", .prefix = true, .flags = ETCD_COUNT_ONLY,
			  .revision = created[1] },
		};
		struct result th = { 0 };
		r = etcd_snapshot_start(c, then, 3, 0, 10000, on_snapshot, &th, &call);
		r = r < 0 ? r : drive(e, &th);
		ok(r == 0 && th.error == 0 && th.n == 3, "counts at earlier revisions read (%d)",
		   th.error);
		is_int(th.lists[0].count, 3, "three keys were ahead of q/d when it came");
		ok(th.lists[0].revision == created[3] - 1, "counted at the revision asked");
		is_int(th.lists[1].count, 3, "three are there now (q/a gone, q/d in)");
		is_int(th.lists[2].count, 2, "two when q/b came");
		for (size_t i = 0; i < 3; i++)
			etcd_kv_list_release(&th.lists[i]);
		const struct etcd_range old_keys[] = {
			{ .key = "q/", .prefix = true, .revision = created[1] } };
		is_int(etcd_snapshot_start(c, old_keys, 1, 0, 10000, on_snapshot, &th, &call),
		       -EINVAL, "a prefix of keys has no revision of its own: only a count");
		/* One key as it was (the slot queue's tail before a host
		 * queued): q/a, since rewritten and deleted, at q/b's
		 * creation, beside the snapshot's own range. */
		const struct etcd_range was[] = {
			{ .key = "q/a", .revision = created[1] },
			{ .key = "q/a" },
		};
		struct result wa = { 0 };
		r = etcd_snapshot_start(c, was, 2, 0, 10000, on_snapshot, &wa, &call);
		r = r < 0 ? r : drive(e, &wa);
		ok(r == 0 && wa.error == 0 && wa.n == 2, "one key at an earlier revision read (%d)",
		   wa.error);
		ok(wa.lists[0].n == 1 && wa.lists[0].kvs[0].value_len == 1 &&
		   wa.lists[0].kvs[0].value[0] == 'a' &&
		   wa.lists[0].kvs[0].mod_revision == created[0],
		   "q/a as it was then: 'a', written at its creation");
		ok(wa.lists[0].revision == created[1], "read at the revision asked");
		is_int((long long)wa.lists[1].n, 0, "and gone now, in the same request");
		for (size_t i = 0; i < 2; i++)
			etcd_kv_list_release(&wa.lists[i]);
	}

	/* The first waiter's stream: deletions only, each with the key as it
	 * was. */
	{
		struct etcd_watch *w = NULL;
		struct watched got = { 0 };
		const struct etcd_watch_range range = {
			.key = "q/", .prefix = true, .start_revision = etcd_client_revision(c) + 1,
			.flags = ETCD_WATCH_NO_PUT | ETCD_WATCH_PREV_KV };
		ok(etcd_put(c, "q/e", "e", 1, 0) == 0, "a put the stream must not carry");
		ok(etcd_delete(c, "q/b") >= 0, "q/b deleted");
		r = etcd_watch_start_ranges(c, &range, 1, 60000, on_watched, NULL, &got, &w);
		for (int i = 0; r == 0 && !got.done && i < 100; i++)
			sd_event_run(e, 100 * 1000);
		ok(r == 0 && got.done, "the stream delivered (%d)", r);
		is_int(got.puts, 0, "no put");
		ok(got.deletes == 1 && strcmp(got.key, "q/b") == 0, "the deletion of q/b");
		ok(got.prev_value && strcmp(got.prev_value, "b") == 0,
		   "with the key as it was (value 'b')");
		ok(got.prev_created > 0, "and its create revision (%lld)",
		   (long long)got.prev_created);
		etcd_watch_stop(w);
		free(got.key);
		free(got.prev_value);
	}

	/* At a revision: what a key held then, not now; a compacted revision is
	 * -ESTALE. */
	{
		const struct etcd_range then[] = {
			{ .key = "then" }, { .key = "snap/w", .prefix = true, .flags = ETCD_COUNT_ONLY } };
		struct result at = { 0 }, gone = { 0 };
		int64_t first;
		ok(etcd_put(c, "then", "1", 1, 0) == 0, "a key written");
		first = etcd_client_revision(c);
		ok(etcd_put(c, "then", "22", 2, 0) == 0, "and written again");
		r = etcd_snapshot_start(c, then, 2, first, 10000, on_snapshot, &at, &call);
		r = r < 0 ? r : drive(e, &at);
		ok(r == 0 && at.error == 0, "a read at an earlier revision (%d)", at.error);
		is_int(at.revision, first, "is said to be at that revision");
		ok(at.lists[0].n == 1 && at.lists[0].kvs[0].value_len == 1 &&
		   at.lists[0].kvs[0].value[0] == '1', "and holds the value of then");
		is_int(at.lists[1].count, writer_n, "a count at that revision");
		for (size_t i = 0; i < 2; i++)
			etcd_kv_list_release(&at.lists[i]);
		ok(compact(etcd_client_revision(c)) == 0, "etcd compacted");
		r = etcd_snapshot_start(c, then, 2, first, 10000, on_snapshot, &gone, &call);
		r = r < 0 ? r : drive(e, &gone);
		ok(r == 0 && gone.error == -ESTALE && gone.n == 0,
		   "a compacted revision is -ESTALE, with no lists (%d)", gone.error);
	}

	/* A failed read calls back with an error and no lists. */
	{
		char *bad[] = { (char *)"http://127.0.0.1:1", NULL };
		struct etcd_options o = { .endpoints = bad, .timeout_ms = 1000 };
		struct etcd_client *b = NULL;
		struct result fail = { 0 };
		if (etcd_client_new(&o, &b) < 0 || etcd_client_attach_event(b, e) < 0) {
			printf("Bail out! cannot set up the second client\n");
			return 1;
		}
		r = etcd_snapshot_start(b, ranges, 3, 0, 1000, on_snapshot, &fail, &call);
		r = r < 0 ? r : drive(e, &fail);
		ok(r == 0 && fail.error < 0 && fail.n == 0, "refused: an error and no lists (%d)",
		   fail.error);
		etcd_client_free(b);
	}

	etcd_client_free(c);
	sd_event_unref(e);
	return done_testing();
}
