/*
 * fuzz_range.c — libFuzzer target: arbitrary bytes, parsed with cJSON as a
 * gateway reply would be, then decoded by etcd_decode_range() (which drives
 * etcd_decode_kv() and etcd_decode_int64()).  Besides "no crash, no leak, no
 * undefined behaviour", it checks what the decoder promises its callers: on
 * success every key and value is NUL-terminated at its stated length, and on
 * failure nothing is left behind that the caller would not release.
 *
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_range/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <cjson/cJSON.h>

#include "etcd/etcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cJSON *json = cJSON_ParseWithLength((const char *)data, size);
	if (!json)
		return 0;

	struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	bool more = false;
	int r = etcd_decode_range(json, &list, &more);
	if (r >= 0) {
		for (size_t i = 0; i < list.n; i++) {
			const struct etcd_kv *kv = &list.kvs[i];
			if (!kv->key || kv->key[kv->key_len] != '\0' || !kv->value ||
			    kv->value[kv->value_len] != '\0')
				abort();
		}
	}
	etcd_kv_list_release(&list);

	/* A range reply is also what a single get decodes: one kv at a time. */
	const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(json, "kvs");
	const cJSON *item;
	if (cJSON_IsArray(kvs)) {
		cJSON_ArrayForEach(item, kvs) {
			struct etcd_kv kv = { 0 };
			if (etcd_decode_kv(item, &kv) >= 0 && kv.key[kv.key_len] != '\0')
				abort();
			etcd_kv_release(&kv);
		}
	}
	cJSON_Delete(json);
	return 0;
}
