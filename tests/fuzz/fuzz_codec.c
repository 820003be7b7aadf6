/*
 * fuzz_codec.c — libFuzzer target for the codecs of the values the fleet
 * stores (fleet_codec.c, fleet_rollout.c): every node and every command
 * decodes them from etcd, where anyone with write access may have put
 * anything.
 *
 * The first byte picks the decoder, the rest is the stored value:
 *
 *   'p'  rollout_policy_decode(): on success, rollout_policy_problem() says
 *        something or nothing without crashing, and encoding the policy and
 *        decoding that again gives the same encoding (the value a command
 *        writes back is the value it read);
 *   'r'  rollout_record_decode(): on success its version is a valid name,
 *        and encode → decode → encode is stable;
 *   'v'  fleet_running_decode(): on success the version is a valid name;
 *   'h'  run_history_decode(): on success at most FLEET_HISTORY_MAX runs,
 *        each with a valid version, a known result and an error line of at
 *        most FLEET_HISTORY_ERROR_MAX bytes without a newline, and
 *        encode → decode → encode is stable.
 *
 * Any other first byte runs all four.  Built and run by `make fuzz`; seeds in
 * tests/fuzz/corpus/fuzz_codec/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static void policy(const char *value, size_t len)
{
	struct rollout_policy p = { 0 }, q = { 0 };
	char *once = NULL, *twice = NULL;

	if (rollout_policy_decode(value, len, &p) < 0)
		return;
	(void)rollout_policy_problem(&p);
	if (rollout_policy_encode(&p, &once) >= 0) {
		CHECK(rollout_policy_decode(once, strlen(once), &q) >= 0);
		CHECK(rollout_policy_encode(&q, &twice) >= 0);
		CHECK(strcmp(once, twice) == 0);
	}
	free(once);
	free(twice);
	rollout_policy_release(&p);
	rollout_policy_release(&q);
}

static void record(const char *value, size_t len)
{
	struct rollout_record a = { 0 }, b = { 0 };
	char *once = NULL, *twice = NULL;

	if (rollout_record_decode(value, len, &a) < 0)
		return;
	CHECK(a.version && schema_name_valid(a.version));
	if (rollout_record_encode(&a, &once) >= 0) {
		CHECK(rollout_record_decode(once, strlen(once), &b) >= 0);
		CHECK(rollout_record_encode(&b, &twice) >= 0);
		CHECK(strcmp(once, twice) == 0);
	}
	free(once);
	free(twice);
	rollout_record_release(&a);
	rollout_record_release(&b);
}

static void running(const char *value, size_t len)
{
	char *version = NULL;

	if (fleet_running_decode(value, len, &version) < 0)
		return;
	CHECK(version && schema_name_valid(version));
	free(version);
}

static void history(const char *value, size_t len)
{
	struct run_history a = { 0 }, b = { 0 };
	char *once = NULL, *twice = NULL;

	if (run_history_decode(value, len, &a) < 0)
		return;
	CHECK(a.n <= FLEET_HISTORY_MAX);
	for (size_t i = 0; i < a.n; i++) {
		CHECK(a.runs[i].version && schema_name_valid(a.runs[i].version));
		CHECK(run_result_name(a.runs[i].result));
		CHECK(!a.runs[i].error || (strlen(a.runs[i].error) <= FLEET_HISTORY_ERROR_MAX &&
					   !strchr(a.runs[i].error, '\n')));
	}
	if (run_history_encode(&a, &once) >= 0) {
		CHECK(run_history_decode(once, strlen(once), &b) >= 0);
		CHECK(run_history_encode(&b, &twice) >= 0);
		CHECK(strcmp(once, twice) == 0);
	}
	free(once);
	free(twice);
	run_history_release(&a);
	run_history_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *value = (const char *)data + 1;

	if (size < 1)
		return 0;
	switch (data[0]) {
	case 'p': policy(value, size - 1); break;
	case 'r': record(value, size - 1); break;
	case 'v': running(value, size - 1); break;
	case 'h': history(value, size - 1); break;
	default:
		policy(value, size - 1);
		record(value, size - 1);
		running(value, size - 1);
		history(value, size - 1);
	}
	return 0;
}
