/*
 * fuzz_watch_frame.c — libFuzzer target: arbitrary bytes as one frame of a
 * gateway watch stream, decoded by etcd_decode_watch_frame().  Checks the
 * contract of etcd.h: a result frame gives events whose keys are NUL-terminated
 * at their length, -ESTALE always comes with a positive compact revision, and
 * every other outcome is a negative code with no events to free.
 *
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_watch_frame/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "etcd/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct etcd_event *events = NULL;
	size_t n = 0;
	int64_t revision = 0, compact = 0;
	bool created = false;

	int r = etcd_decode_watch_frame((const char *)data, size, &events, &n, &revision,
					&compact, &created);
	if (r == 0) {
		for (size_t i = 0; i < n; i++) {
			const struct etcd_kv *kv = &events[i].kv;
			if (events[i].type != ETCD_EVENT_PUT && events[i].type != ETCD_EVENT_DELETE)
				abort();
			if (!kv->key || kv->key[kv->key_len] != '\0')
				abort();
		}
		etcd_events_free(events, n);
		return 0;
	}
	if (r > 0 || events != NULL || n != 0)
		abort();
	if (r == -ESTALE && compact <= 0)
		abort();
	return 0;
}
