/*
 * test_fleet_queue.c — the slot queue's values as a node's streams give them
 * (fleet_queue.h), in memory: a mark carries where its host stood, and is
 * taken only for the very key it was counted for; a release says whose key
 * went, when it was created and whether its run had started.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cleanup.h"
#include "fleet/fleet_queue.h"
#include "../../orchestrate/fleet/fleet_internal.h"
#include "tap.h"

static struct etcd_event event(enum etcd_event_type type, const char *key, const char *value,
			       int64_t created, int64_t modified)
{
	struct etcd_event e = { .type = type };
	e.kv.key = (char *)key;
	e.kv.key_len = strlen(key);
	e.kv.value = (char *)(value ? value : "");
	e.kv.value_len = value ? strlen(value) : 0;
	e.kv.create_revision = created;
	e.kv.mod_revision = modified;
	return e;
}

static const char *const key = "/orchestrate/rollout/holders/web1";

static void test_mark(void)
{
	struct queue_place place = { .created = 40, .ahead = 3, .at = 57 }, got;
	_cleanup_(freep) char *value = NULL;
	_cleanup_(freep) char *waiting = NULL;
	_cleanup_(freep) char *unplaced = NULL;

	ok(holder_value("web1", "v2", "east", true, &place, &value) == 0, "a mark with its place");
	is_str(value, "{\"version\":\"v2\",\"group\":\"east\",\"holding\":true,"
		      "\"place\":{\"created\":40,\"ahead\":3,\"at\":57}}",
	       "the place is written beside the mark");

	struct etcd_event e = event(ETCD_EVENT_PUT, key, value, 40, 60);
	memset(&got, 0xff, sizeof(got));
	is_int(fleet_queue_mark(&e, &got), 1, "the mark is read back");
	ok(got.created == 40 && got.ahead == 3 && got.at == 57, "with the place it carried");

	e = event(ETCD_EVENT_PUT, key, value, 41, 60);
	is_int(fleet_queue_mark(&e, &got), 0, "a key put again since (another create revision) counts for nothing");
	e = event(ETCD_EVENT_PUT, key, value, 40, 57);
	is_int(fleet_queue_mark(&e, &got), 0, "a count not taken before the mark counts for nothing");
	e = event(ETCD_EVENT_DELETE, key, value, 40, 60);
	is_int(fleet_queue_mark(&e, &got), 0, "a deletion is no mark");

	ok(holder_value("web1", "v2", NULL, false, &place, &waiting) == 0, "a place in the queue");
	is_str(waiting, "{\"version\":\"v2\"}", "a host waiting says no place");
	e = event(ETCD_EVENT_PUT, key, waiting, 40, 60);
	is_int(fleet_queue_mark(&e, &got), 0, "a key that waits is no mark");

	ok(holder_value("web1", "v2", NULL, true, NULL, &unplaced) == 0, "a mark with no place");
	is_str(unplaced, "{\"version\":\"v2\",\"holding\":true}", "written as before");
	e = event(ETCD_EVENT_PUT, key, unplaced, 40, 60);
	is_int(fleet_queue_mark(&e, &got), 0, "a mark with no place asks the host behind to look");

	static const char *const hostile[] = {
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":-1,\"at\":57}}",
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":2.5,\"at\":57}}",
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":\"3\",\"at\":57}}",
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":1e300,\"at\":57}}",
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":3,\"at\":38}}",
		"{\"holding\":true,\"place\":{\"created\":40,\"ahead\":3}}",
		"{\"holding\":true,\"place\":[40,3,57]}",
		"{\"holding\":\"yes\",\"place\":{\"created\":40,\"ahead\":3,\"at\":57}}",
		"not json",
	};
	for (size_t i = 0; i < sizeof(hostile) / sizeof(*hostile); i++) {
		e = event(ETCD_EVENT_PUT, key, hostile[i], 40, 60);
		is_int(fleet_queue_mark(&e, &got), 0, "hostile mark %zu is no place", i);
	}

	_cleanup_(freep) char *bad = NULL;
	struct queue_place backwards = { .created = 40, .ahead = 3, .at = 38 };
	is_int(holder_value("web1", "v2", NULL, true, &backwards, &bad), -EINVAL,
	       "a place counted before the revision its key came after is refused");
	_cleanup_(freep) char *before = NULL;
	struct queue_place just_before = { .created = 40, .ahead = 3, .at = 39 };
	ok(holder_value("web1", "v2", NULL, true, &just_before, &before) == 0,
	   "a place counted at the revision just before its key is one");
	e = event(ETCD_EVENT_PUT, key, before, 40, 60);
	is_int(fleet_queue_mark(&e, &got), 1, "and is read back");
	ok(bad == NULL, "and nothing is written");
}

static void test_release(void)
{
	_cleanup_(queue_release_release) struct queue_release rel = { 0 };
	struct etcd_event e = event(ETCD_EVENT_DELETE, key, NULL, 0, 70);

	e.prev_kv = event(ETCD_EVENT_PUT, key,
			  "{\"version\":\"v2\",\"holding\":true,"
			  "\"place\":{\"created\":40,\"ahead\":3,\"at\":57}}",
			  40, 60).kv;
	is_int(fleet_queue_release(&e, &rel), 1, "a holder's deletion is a release");
	is_str(rel.host, "web1", "whose");
	ok(rel.revision == 70 && rel.created == 40, "when it went, and when it came");
	ok(rel.held, "its run had started");
	is_str(rel.version, "v2", "at which version");
}

/* A mark the daemon could not build is never sent, and the error it logs for
 * that write names the write, not an older etcd failure (no etcd is reached:
 * fleet_open does not connect). */
static void test_unbuilt_mark(void)
{
	char *endpoints[] = { (char *)"http://127.0.0.1:9", NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 1000 };
	struct queue_place bad = { .created = 40, .ahead = 3, .at = 20 };
	struct queue_place good = { .created = 40, .ahead = 3, .at = 57 };
	struct fleet f;
	struct fleet_batch *b = NULL;

	if (fleet_open(&f, &opts, "/orchestrate") < 0 || fleet_batch_new(&f, &b) < 0) {
		ok(false, "a fleet and a batch");
		return;
	}
	ok(!strstr(fleet_last_error(&f), "slot holder"), "no error before");
	is_int(fleet_batch_holder(b, "web1", "v2", NULL, true, &bad, 0), -EINVAL,
	       "a place counted before its key was created is refused");
	ok(fleet_batch_empty(b), "and the batch holds nothing");
	is_str(fleet_last_error(&f),
	       "not sent to etcd: the slot holder key did not pass this daemon's own checks",
	       "the error says the write was not sent, and which one");
	is_int(fleet_batch_holder(b, "web1", "v2", NULL, true, &good, 0), 0,
	       "the same mark with a place it can hold is added");
	ok(!fleet_batch_empty(b), "to the batch");
	is_int(fleet_batch_release_holder(b, "../web1"), -EINVAL, "a host name that is not one");
	is_str(fleet_last_error(&f),
	       "not sent to etcd: the slot holder key did not pass this daemon's own checks",
	       "the first refusal of a batch is the one told");
	is_int(fleet_batch_queue_tail(b, "../web1"), -EINVAL, "nor is it a tail");
	ok(strstr(fleet_last_error(&f), "slot holder key") != NULL,
	   "still the first refusal, not the tail's");
	fleet_batch_free(b);
	if (fleet_batch_new(&f, &b) < 0) {
		ok(false, "a second batch");
		fleet_close(&f);
		return;
	}
	is_int(fleet_batch_queue_tail(b, "web1 "), -EINVAL, "a tail that is not a host name");
	is_str(fleet_last_error(&f),
	       "not sent to etcd: the slot queue's tail did not pass this daemon's own checks",
	       "a new batch tells its own refusal");
	is_int(fleet_batch_queue_tail(b, "web1"), 0, "the tail of a host is added");
	ok(!fleet_batch_empty(b), "to the batch");
	fleet_batch_free(b);
	fleet_close(&f);
}

int main(void)
{
	test_mark();
	test_release();
	test_unbuilt_mark();
	return done_testing();
}
