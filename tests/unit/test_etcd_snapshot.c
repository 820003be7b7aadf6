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
		{ "one", false },	/* the key alone, not "one..." */
		{ "snap/", true },
		{ "none/", true },
	};
	ok(etcd_put(c, "one-more", "x", 1, 0) == 0, "a key that starts as the single one does");
	if (pthread_create(&thread, NULL, writer, NULL) != 0) {
		printf("Bail out! no writer thread\n");
		return 1;
	}
	/* Let the writer get going, so that it writes while the read runs. */
	for (int i = 0; i < 200 && writer_n < 20; i++)
		sd_event_run(e, 10 * 1000);
	int r = etcd_snapshot_start(c, ranges, 3, 10000, on_snapshot, &res, &call);
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
		r = etcd_snapshot_start(b, ranges, 3, 1000, on_snapshot, &fail, &call);
		r = r < 0 ? r : drive(e, &fail);
		ok(r == 0 && fail.error < 0 && fail.n == 0, "refused: an error and no lists (%d)",
		   fail.error);
		etcd_client_free(b);
	}

	etcd_client_free(c);
	sd_event_unref(e);
	return done_testing();
}
