/*
 * fuzz_names.c — libFuzzer target for everything that turns outside names and
 * values into keys and into the hiera file: schema_name_valid() and
 * schema_name_problem(), key_split(), status_from_result(), and
 * catalog_add_value() + hiera_render().
 *
 * The input is "SERVICE\nHOST\nVALUE".  The checks are the promises that keep
 * a hostile entry in available_services/ from reaching Puppet as something else:
 *
 *  - schema_name_valid() agrees with schema_name_problem() and with the rule of
 *    orchestrate(1) written out again here (1–253 bytes of [A-Za-z0-9._:@+-], not "."
 *    or "..");
 *  - key_split() only ever returns valid names;
 *  - status_from_result() returns a state the type allows, or STATE_INVALID;
 *  - the rendered hiera YAML, parsed again with libyaml, is one mapping whose
 *    keys are exactly services::S::I or healthy_services::S::I made of valid
 *    names that were in the input, each mapped to a list of addresses that
 *    inet_pton() accepts; and no line of the text starts a top-level key that
 *    is not such a key.
 *
 * Built and run by `make fuzz`; seeds in tests/fuzz/corpus/fuzz_names/.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/buf.h"
#include "output/hiera.h"
#include "fleet/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool name_rule(const char *s)
{
	size_t len = strlen(s);
	if (len < 1 || len > 253 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	/* a letter or a digit first: no name reads as an option or a dot file */
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
	      (s[0] >= '0' && s[0] <= '9')))
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || strchr("._:@+-", ch)))
			return false;
	}
	return true;
}

static void check_name(const char *s)
{
	bool valid = schema_name_valid(s);
	if (valid != (schema_name_problem(s) == NULL) || valid != name_rule(s))
		abort();
}

/* "services::S::I" or "healthy_services::S::I" with valid S and I, S one of
 * the services given. */
static void check_key(const char *key, const char *const *services, size_t n_services)
{
	const char *rest;
	if (strncmp(key, "services::", 10) == 0)
		rest = key + 10;
	else if (strncmp(key, "healthy_services::", 18) == 0)
		rest = key + 18;
	else
		abort();
	/* Names may hold ':', so try each "::" as the split. */
	bool found = false;
	for (size_t i = 0; i < n_services && !found; i++) {
		size_t l = strlen(services[i]);
		if (strncmp(rest, services[i], l) == 0 && strncmp(rest + l, "::", 2) == 0 &&
		    schema_name_valid(rest + l + 2))
			found = true;
	}
	if (!found)
		abort();
}

static bool is_address(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

/* Parses the rendered YAML again and checks its shape, event by event. */
static void check_yaml(const struct buf *out, const char *const *services, size_t n_services)
{
	yaml_parser_t p;
	yaml_event_t ev;
	if (!yaml_parser_initialize(&p))
		abort();
	yaml_parser_set_input_string(&p, (const unsigned char *)out->data, out->len);

	/* 0 stream, 1 document, 2 mapping, 3 key seen, 4 in a sequence, 5 after mapping */
	int depth_state = 0;
	bool done = false;
	while (!done) {
		if (!yaml_parser_parse(&p, &ev))
			abort();	/* what we render must parse */
		switch (ev.type) {
		case YAML_STREAM_START_EVENT:
		case YAML_DOCUMENT_START_EVENT:
		case YAML_DOCUMENT_END_EVENT:
			break;
		case YAML_MAPPING_START_EVENT:
			if (depth_state != 0)
				abort();
			depth_state = 2;
			break;
		case YAML_SCALAR_EVENT:
			if (depth_state == 2) {
				check_key((const char *)ev.data.scalar.value, services, n_services);
				depth_state = 3;
			} else if (depth_state == 4) {
				if (!is_address((const char *)ev.data.scalar.value))
					abort();
			} else {
				abort();
			}
			break;
		case YAML_SEQUENCE_START_EVENT:
			if (depth_state != 3)
				abort();
			depth_state = 4;
			break;
		case YAML_SEQUENCE_END_EVENT:
			depth_state = 2;
			break;
		case YAML_MAPPING_END_EVENT:
			if (depth_state != 2)
				abort();
			depth_state = 5;
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			abort();	/* no aliases, no anchors, nothing else */
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);

	/* And in the text itself: a line at column 0 is the document marker, a
	 * list item or one of our keys, plain or quoted (the emitter quotes a key
	 * that ends in ':', such as an interface named "::"), or for a key longer
	 * than libyaml's 128-character limit on simple keys, "? KEY" then ": - …"
	 * (valid YAML that hiera reads the same). */
	const char *s = out->data, *end = out->data + out->len;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
		const char *k = s;
		if (len >= 2 && memcmp(k, "? ", 2) == 0)
			k += 2;
		if (k < s + len && (k[0] == '\'' || k[0] == '"'))
			k++;
		bool value_line = len >= 2 && memcmp(s, ": ", 2) == 0;
		if (len > 0 && !value_line && !(len >= 3 && memcmp(s, "---", 3) == 0) && s[0] != '-' &&
		    s[0] != ' ' && strncmp(k, "services::", 10) != 0 &&
		    strncmp(k, "healthy_services::", 18) != 0 &&
		    !(len >= 2 && memcmp(s, "{}", 2) == 0) && !(len == 3 && memcmp(s, "...", 3) == 0))
			abort();
		s += len + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';

	/* SERVICE\nHOST\nVALUE; a missing part is empty. */
	char *service = copy, *host = copy + size, *value = copy + size;
	char *nl = memchr(copy, '\n', size);
	if (nl) {
		*nl = '\0';
		host = nl + 1;
		char *nl2 = strchr(host, '\n');
		if (nl2) {
			*nl2 = '\0';
			value = nl2 + 1;
		}
	}
	size_t value_len = size - (size_t)(value - copy);

	check_name(service);
	check_name(host);

	/* The whole input as a key below available_services/. */
	char *parts[2];
	char *split = NULL;
	int r = key_split((const char *)data, size, "/available_services/", parts, 2, &split);
	if (r >= 0) {
		for (int i = 0; i < r; i++)
			if (!schema_name_valid(parts[i]))
				abort();
	}
	free(split);

	for (int t = 0; t < _STATUS_TYPE_MAX; t++) {
		enum status_state st = status_from_result((enum status_type)t, service);
		if (st != STATE_INVALID && !status_state_allowed((enum status_type)t, st))
			abort();
	}

	/* The value under the fuzzed names and under fixed valid ones, so that
	 * values get fuzzed even while the names are invalid. */
	struct catalog cat = CATALOG_INIT;
	const char *services[] = { service, "glance" };
	(void)catalog_add_value(&cat, service, host, value, value_len);
	(void)catalog_add_value(&cat, "glance", "web1", value, value_len);
	if (cat.n > 0 && (!schema_name_valid(service) || !schema_name_valid(host))) {
		/* Entries only from the fixed names, then. */
		for (size_t i = 0; i < cat.n; i++)
			if (strcmp(cat.entries[i].service, "glance") != 0)
				abort();
	}
	struct buf out = BUF_INIT;
	if (hiera_render(&cat, &out) >= 0)
		check_yaml(&out, services, 2);
	buf_release(&out);
	catalog_release(&cat);
	free(copy);
	return 0;
}
