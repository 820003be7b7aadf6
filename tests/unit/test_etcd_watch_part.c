/*
 * test_etcd_watch_part.c — a range added to a running watch stream and
 * removed from it (etcd_watch_add, etcd_watch_remove), against the real etcd
 * whose URL is in ORCHESTRATE_TEST_ETCD (t0188 starts one).
 *
 * The daemon's stream keeps its request body open, so that the slot queue's
 * watch is one more create on it, not a stream of its own.  The cases: an
 * added range delivers to its own callback and the stream's ranges to
 * theirs; a removed one delivers nothing more and the stream goes on; one
 * whose start revision was compacted ends alone; and, when the script
 * restarts etcd under it (ORCHESTRATE_TEST_RESTART_DIR: the driver writes
 * "restart" there and waits for "restarted"), the stream, its body paused,
 * sees etcd go and resumes every range from its revision: the events written
 * after the restart, before the stream came back, arrive once.
 * No case may need a second stream but that restart.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <systemd/sd-event.h>

#include "base/cleanup.h"
#include "base/clock.h"
#include "etcd/etcd.h"
#include "tap.h"

struct seen {
	unsigned events;		/* events delivered */
	char last[64];			/* the last key */
	int error;			/* on_error's, 0 before */
	int64_t compact;
};

static int on_events(const struct etcd_event *ev, size_t n, int64_t revision, void *userdata)
{
	struct seen *s = userdata;
	(void)revision;
	for (size_t i = 0; i < n; i++) {
		s->events++;
		snprintf(s->last, sizeof(s->last), "%s", ev[i].kv.key ? ev[i].kv.key : "");
	}
	return 0;
}

static void on_error(struct etcd_watch *w, int error, int64_t compact, void *userdata)
{
	struct seen *s = userdata;
	(void)w;
	s->error = error;
	s->compact = compact;
}

/* Runs the loop until s has seen key last (or an error, with key NULL), or
 * ms passed; whether it did. */
static bool run_until(sd_event *e, const struct seen *s, const char *key, unsigned ms)
{
	uint64_t end = clock_msec(CLOCK_MONOTONIC) + ms;
	while (clock_msec(CLOCK_MONOTONIC) < end) {
		if (key ? strcmp(s->last, key) == 0 : s->error != 0)
			return true;
		if (sd_event_run(e, 100 * 1000) < 0)
			return false;
	}
	return key ? strcmp(s->last, key) == 0 : s->error != 0;
}

/* Runs the loop for ms whatever comes. */
static void run_for(sd_event *e, unsigned ms)
{
	uint64_t end = clock_msec(CLOCK_MONOTONIC) + ms;
	while (clock_msec(CLOCK_MONOTONIC) < end)
		(void)sd_event_run(e, 50 * 1000);
}

static int64_t put(struct etcd_client *w, const char *key)
{
	_cleanup_(etcd_kv_releasep) struct etcd_kv kv = { 0 };
	if (etcd_put(w, key, "x", 1, 0) < 0 || etcd_get(w, key, &kv, NULL) != 1)
		return -1;
	return kv.mod_revision;
}

static int compact(struct etcd_client *w, int64_t revision)
{
	_cleanup_(cJSON_Deletep) cJSON *body = cJSON_CreateObject();
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	char rev[32];
	snprintf(rev, sizeof(rev), "%" PRId64, revision);
	if (!body || !cJSON_AddStringToObject(body, "revision", rev) ||
	    !cJSON_AddTrueToObject(body, "physical"))
		return -ENOMEM;
	return etcd_request(w, "/v3/kv/compaction", body, &reply);
}

/* Asks the script to restart etcd, and waits until it did. */
static bool restart_etcd(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/restart", dir);
	FILE *f = fopen(path, "w");
	if (!f)
		return false;
	fclose(f);
	snprintf(path, sizeof(path), "%s/restarted", dir);
	for (int i = 0; i < 300; i++) {
		if (access(path, F_OK) == 0)
			return true;
		usleep(100 * 1000);
	}
	return false;
}

int main(void)
{
	const char *url = getenv("ORCHESTRATE_TEST_ETCD");
	const char *restart_dir = getenv("ORCHESTRATE_TEST_RESTART_DIR");
	char *endpoints[] = { (char *)url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	_cleanup_(etcd_client_freep) struct etcd_client *c = NULL;
	_cleanup_(etcd_client_freep) struct etcd_client *writer = NULL;
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct etcd_watch *stream = NULL;
	struct etcd_watch_part *part = NULL;
	struct seen own = { 0 }, added = { 0 }, old = { 0 };

	if (!url) {
		printf("Bail out! ORCHESTRATE_TEST_ETCD is not set (t0188 sets it)\n");
		return 1;
	}
	if (etcd_client_new(&opts, &c) < 0 || etcd_client_new(&opts, &writer) < 0 ||
	    sd_event_new(&e) < 0 || etcd_client_attach_event(c, e) < 0) {
		printf("Bail out! cannot set up the clients\n");
		return 1;
	}

	/* The stream, over wp/own/, as the daemon opens its own.  Every range
	 * starts after a revision known here, so that what is written next is
	 * delivered however soon its watch is created. */
	int64_t from = put(writer, "wp/start");
	struct etcd_watch_range own_range = { .key = "wp/own/", .prefix = true,
					      .start_revision = from + 1 };
	int r = etcd_watch_start_ranges(c, &own_range, 1, 0, on_events, on_error, &own, &stream);
	ok(r == 0 && from > 0, "a stream over wp/own/ (%s)", r < 0 ? strerror(-r) : "started");
	put(writer, "wp/own/1");
	bool got = run_until(e, &own, "wp/own/1", 5000);
	ok(got, "its range delivers (%u events)", own.events);
	uint64_t reconnects = etcd_client_reconnects(c);

	/* A range added to it. */
	struct etcd_watch_range key = { .key = "wp/part/k", .start_revision = put(writer, "wp/x") + 1 };
	r = etcd_watch_add(stream, &key, on_events, on_error, &added, &part);
	ok(r == 0, "a range added to the running stream (%s)", r < 0 ? strerror(-r) : "added");
	put(writer, "wp/part/k");
	got = run_until(e, &added, "wp/part/k", 5000);
	ok(got && added.events == 1, "the added range delivers to its own callback (%u events)",
	   added.events);
	put(writer, "wp/own/2");
	got = run_until(e, &own, "wp/own/2", 5000);
	ok(got && own.events == 2 && added.events == 1,
	   "the stream's own range still delivers to the stream's (%u events), not the "
	   "added one's (%u)", own.events, added.events);

	/* Removed: nothing more, and the stream goes on. */
	part = etcd_watch_remove(part);
	run_for(e, 300);	/* the cancel goes, etcd answers it */
	put(writer, "wp/part/k");
	put(writer, "wp/own/3");
	got = run_until(e, &own, "wp/own/3", 5000);
	ok(got && added.events == 1,
	   "a removed range delivers nothing more (%u events) while the stream goes on",
	   added.events);

	/* Added from a compacted revision: it ends alone. */
	int64_t rev = put(writer, "wp/old/a");
	put(writer, "wp/old/b");
	int64_t last = put(writer, "wp/old/c");
	r = rev > 0 && last > 0 ? compact(writer, last) : -EINVAL;
	ok(r == 0, "etcd compacted to %" PRId64 " (%s)", last, r < 0 ? strerror(-r) : "done");
	struct etcd_watch_range old_range = { .key = "wp/old/", .prefix = true,
					      .start_revision = rev };
	r = etcd_watch_add(stream, &old_range, on_events, on_error, &old, &part);
	got = r == 0 && run_until(e, &old, NULL, 5000);
	ok(got && old.error == -ESTALE && old.compact >= last,
	   "a range added from a compacted revision ends with -ESTALE, compacted at %" PRId64
	   " (%s)", old.compact, old.error ? strerror(-old.error) : "no error");
	part = etcd_watch_remove(part);
	put(writer, "wp/own/4");
	got = run_until(e, &own, "wp/own/4", 5000);
	ok(got && own.error == 0,
	   "the stream goes on after it (%u events, %s)", own.events,
	   own.error ? strerror(-own.error) : "no error");
	is_int(etcd_client_reconnects(c) - reconnects, 0,
	       "no case so far needed a second stream");

	if (!restart_dir)
		return done_testing();

	/* etcd restarted under a paused body: the hang-up is seen, and every
	 * range resumes from its revision. */
	memset(&added, 0, sizeof(added));
	key.start_revision = put(writer, "wp/x") + 1;
	r = etcd_watch_add(stream, &key, on_events, on_error, &added, &part);
	put(writer, "wp/part/k");
	got = r == 0 && run_until(e, &added, "wp/part/k", 5000);
	ok(got, "a range added again delivers (%u events)", added.events);
	unsigned own_before = own.events, added_before = added.events;
	ok(restart_etcd(restart_dir), "the script restarted etcd");
	put(writer, "wp/own/5");
	put(writer, "wp/part/k");
	put(writer, "wp/own/6");
	got = run_until(e, &own, "wp/own/6", 15000);
	ok(got && own.events == own_before + 2,
	   "after the restart the stream's range has what was written since, once "
	   "(%u events more)", own.events - own_before);
	run_for(e, 500);	/* anything delivered twice would come now */
	ok(added.events == added_before + 1 && own.events == own_before + 2,
	   "and so has the added range (%u events more; the stream's %u)",
	   added.events - added_before, own.events - own_before);
	ok(etcd_client_reconnects(c) - reconnects >= 1 && own.error == 0 && added.error == 0,
	   "on a new stream (%" PRIu64 " reconnects), no range ended",
	   etcd_client_reconnects(c) - reconnects);
	part = etcd_watch_remove(part);
	stream = etcd_watch_stop(stream);
	return done_testing();
}
