/*
 * fuzz_hook_request.c — libFuzzer target for what the root hook runner parses
 * from whoever connects (hook_proto.h): hook_request_parse() over the input
 * and over every prefix of it, and hook_frame_parse() over the rest.
 *
 * The promises: a complete request names one of the four hooks and carries
 * only ORCHESTRATE_[A-Z0-9_]+=... variables, each once, at most 64, within
 * 64 KiB; a prefix of an accepted request is incomplete, never refused or
 * accepted; encoding the result again gives back the bytes consumed.
 *
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_hook_request/.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "hook/hook_proto.h"
#include "base/strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *d = (const char *)data;
	char *name = NULL, *error = NULL;
	char **env = NULL;
	size_t used = 0;
	int r = hook_request_parse(size ? d : NULL, size, &name, &env, &used, &error);

	if (r == 1) {
		struct buf again = BUF_INIT;
		size_t n = 0;
		if (!hook_proto_name_valid(name) || used > size || used > HOOK_REQUEST_MAX)
			abort();
		for (; env[n]; n++) {
			if (!hook_proto_env_allowed(env[n]))
				abort();
			for (size_t j = 0; j < n; j++) {
				size_t k = strcspn(env[j], "=");
				if (strncmp(env[j], env[n], k + 1) == 0)
					abort();
			}
		}
		if (n > HOOK_REQUEST_ENV_MAX)
			abort();
		if (hook_request_encode(&again, name, env) != 0 || again.len != used ||
		    memcmp(again.data, d, used) != 0)
			abort();
		buf_release(&again);
		for (size_t cut = 1; cut < used; cut += 1 + cut / 8) {
			char *n2 = NULL, *e2 = NULL;
			char **v2 = NULL;
			size_t u2;
			if (hook_request_parse(d, cut, &n2, &v2, &u2, &e2) != 0)
				abort();
			free(n2);
			free(e2);
			strv_free(v2);
		}
	} else if (r < 0 && !error && r != -ENOMEM) {
		abort();
	}
	free(name);
	free(error);
	strv_free(env);

	/* Frames: whatever follows, parsed until incomplete or refused. */
	for (size_t pos = r == 1 ? used : 0; pos < size;) {
		const char *payload;
		size_t n, took;
		char type;
		if (hook_frame_parse(d + pos, size - pos, &type, &payload, &n, &took) != 1)
			break;
		if (took != HOOK_FRAME_HEADER + n || n > HOOK_FRAME_MAX || took > size - pos)
			abort();
		pos += took;
	}
	return 0;
}
