/*
 * test_etcd_watch_create.c — every watch of a stream is created on its first
 * connection, against the real etcd whose URL is in ORCHESTRATE_TEST_ETCD
 * (t0187 starts one).
 *
 * A stream carries one create request per range in its body.  etcd's gateway
 * reads the first before it answers and the others beside the answer, and
 * Go's HTTP/1.1 server discards the unread rest of a body when the answer's
 * headers go out, unless the request asked for 100 Continue (etcd_watch.c,
 * watch_connect).  A stream that lost its last creates is opened again after
 * a wait (the client's reconnect counter tells), so here the last range holds
 * a key written before the watch: its event ends the watch once that range's
 * watch exists, and the streams must have needed no second connection.
 * Without the Expect header 11 to 17 of the 200 did here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "etcd/etcd.h"
#include "tap.h"

#define RANGES 20
#define STREAMS 200

struct seen {
	const char *key;
	bool found;
};

static int on_events(const struct etcd_event *ev, size_t n, int64_t revision, void *userdata)
{
	struct seen *s = userdata;
	(void)revision;
	for (size_t i = 0; i < n; i++)
		if (ev[i].kv.key && strcmp(ev[i].kv.key, s->key) == 0)
			s->found = true;
	return s->found ? 1 : 0;
}

int main(void)
{
	const char *url = getenv("ORCHESTRATE_TEST_ETCD");
	char *endpoints[] = { (char *)url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	_cleanup_(etcd_client_freep) struct etcd_client *c = NULL;
	struct etcd_watch_range ranges[RANGES];
	char keys[RANGES][32];
	int64_t rev = 0;
	unsigned found = 0;

	if (!url) {
		printf("Bail out! ORCHESTRATE_TEST_ETCD is not set (t0187 sets it)\n");
		return 1;
	}
	if (etcd_client_new(&opts, &c) < 0) {
		printf("Bail out! cannot set up the client\n");
		return 1;
	}
	{
		_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
		int r = etcd_put(c, "wc/r19/last", "x", 1, 0);
		if (r == 0)
			r = etcd_get(c, "wc/r19/last", &kv, NULL);	/* 1: it exists */
		rev = kv.mod_revision;
		ok(r == 1 && rev > 0, "a key in the last range, at revision %lld (%s)",
		   (long long)rev, r < 0 ? strerror(-r) : "written");
	}

	for (size_t i = 0; i < RANGES; i++) {
		snprintf(keys[i], sizeof(keys[i]), "wc/r%zu/", i);
		ranges[i] = (struct etcd_watch_range){ .key = keys[i], .prefix = true,
						       .start_revision = rev };
	}
	uint64_t before = etcd_client_reconnects(c);
	for (unsigned k = 0; k < STREAMS; k++) {
		struct seen s = { .key = "wc/r19/last" };
		int r = etcd_watch_ranges(c, ranges, RANGES, clock_msec(CLOCK_MONOTONIC) + 10000, on_events, &s, NULL);
		if (r == 1 && s.found)
			found++;
	}
	uint64_t reconnects = etcd_client_reconnects(c) - before;
	is_int(found, STREAMS, "every stream of %d ranges delivered its last range's event",
	       RANGES);
	is_int(reconnects, 0, "and none needed a second connection (%llu did)",
	       (unsigned long long)reconnects);
	return done_testing();
}
