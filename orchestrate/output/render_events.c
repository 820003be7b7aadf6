/*
 * render_events.c — `orchestrate events`: one line per event of the rollout,
 * for people (render_event) or as JSON lines (render_json_event).
 *
 * Everything an event carries besides its kind came from etcd: names are
 * valid names already, but a detail (a failed run's output, a pause's
 * reason) may hold anything, so the line goes through render_sanitize()
 * whole, and a JSON string through utf8_tail() (invalid bytes become U+FFFD;
 * cJSON escapes the controls), so that one event is always one line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "output/render.h"
#include "render_internal.h"

/* The words after VERSION: "from v1", "config, attempt 2", "wait slot",
 * then the detail. */
static int event_words(const struct fleet_event *e, struct buf *b)
{
	size_t start = b->len;
	int r = 0;

	if (e->from)
		r = buf_printf(b, "from %s", e->from);
	if (r >= 0 && e->stage)
		r = buf_printf(b, "%s%s", b->len > start ? ", " : "", e->stage);
	if (r >= 0 && e->attempt > 0)
		r = buf_printf(b, "%sattempt %ld", b->len > start ? ", " : "", e->attempt);
	if (r >= 0 && e->wait)
		r = buf_printf(b, "%swait %s", b->len > start ? ", " : "", e->wait);
	if (r >= 0 && e->detail && *e->detail)
		r = buf_printf(b, "%s%s", b->len > start ? ": " : "", e->detail);
	return r < 0 ? -ENOMEM : 0;
}

int render_event(FILE *out, const struct fleet_event *e, int64_t now)
{
	_cleanup_(buf_releasep) struct buf raw = BUF_INIT;
	_cleanup_(buf_releasep) struct buf line = BUF_INIT;
	time_t t = (time_t)(e->time > 0 ? e->time : now);
	struct tm tm;
	char when[32] = "?";

	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (buf_printf(&raw, "%s %lld %-14s %s %s", when, (long long)e->revision,
		       fleet_event_kind_name(e->kind), e->host ? e->host : "-",
		       e->version ? e->version : "-") < 0)
		return -ENOMEM;
	size_t len = raw.len;
	if (event_words(e, &raw) < 0)
		return -ENOMEM;
	/* one space before the words, none at the end of a line without */
	if (render_sanitize(raw.data, len, RENDER_LINE, &line) < 0 ||
	    (raw.len > len && (buf_addc(&line, ' ') < 0 ||
			       render_sanitize(raw.data + len, raw.len - len, RENDER_LINE,
					       &line) < 0)))
		return -ENOMEM;
	fputs(buf_str(&line), out);
	fputc('\n', out);
	return render_stream_status(out);
}


int render_json_event(FILE *out, const struct fleet_event *e, int64_t now)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj ||
	    !render_json_add(obj, "revision", cJSON_CreateNumber((double)e->revision)) ||
	    !render_json_add(obj, "time", cJSON_CreateNumber((double)(e->time > 0 ? e->time : now))) ||
	    !render_json_add(obj, "kind", cJSON_CreateString(fleet_event_kind_name(e->kind))) ||
	    !render_json_add(obj, "host", render_json_text(e->host)) ||
	    !render_json_add(obj, "version", render_json_text(e->version)) ||
	    (e->from && !render_json_add(obj, "from", render_json_text(e->from))) ||
	    (e->stage && !render_json_add(obj, "stage", render_json_text(e->stage))) ||
	    (e->attempt > 0 && !render_json_add(obj, "attempt", cJSON_CreateNumber((double)e->attempt))) ||
	    (e->wait && !render_json_add(obj, "wait", render_json_text(e->wait))) ||
	    (e->scope && !render_json_add(obj, "scope", render_json_text(e->scope))) ||
	    !render_json_add(obj, "detail", render_json_text(e->detail)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}
