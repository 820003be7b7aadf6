/*
 * fuzz_config.c — libFuzzer target: arbitrary bytes as the YAML config file,
 * parsed by config_parse().  Checks the contract of config.h: success gives a
 * config and no message, failure gives a one-line message and no config (a
 * reload must never swap in half a config).
 *
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_config/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = NULL;
	char *error = NULL;

	int r = config_parse((const char *)data, size, "fuzz.yaml", &c, &error);
	if (r < 0) {
		if (c || !error || strchr(error, '\n'))
			abort();
	} else if (!c) {
		abort();
	}
	free(error);
	if (c)
		config_free(c);
	return 0;
}
