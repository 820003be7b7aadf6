/*
 * render_commands.c — what every command but `status` prints (render.h, "what
 * the commands print"): its answer as text or JSON, one host in full, the
 * pauses, plain lists.  The status table and its JSON are render.c's; the
 * JSON pieces both print (a rollout's state) and the stream check come from
 * there (render_internal.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/json.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "fleet/schema.h"
#include "output/render.h"
#include "render_internal.h"

/* --- lists -------------------------------------------------------------------------- */

int render_lines(char *const *items, FILE *out)
{
	for (size_t i = 0; items && items[i]; i++) {
		fputs(items[i], out);
		fputc('\n', out);
	}
	return render_stream_status(out);
}

/* --- what the commands print ------------------------------------------------------ */

static cJSON *json_strings(char *const *items)
{
	_cleanup_(cJSON_Deletep) cJSON *arr = cJSON_CreateArray();

	if (!arr)
		return NULL;
	for (size_t i = 0; items && items[i]; i++) {
		cJSON *s = cJSON_CreateString(items[i]);
		if (!s || !cJSON_AddItemToArray(arr, s)) {
			cJSON_Delete(s);
			return NULL;
		}
	}
	return TAKE_PTR(arr);
}

int render_json_version(FILE *out, const char *field, const char *version)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, field, version) < 0)
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_json_pending(FILE *out, const char *local, const char *desired, bool pending,
			bool reachable, const char *message)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, "local", local) < 0 ||
	    json_add_string_or_null(obj, "desired", desired) < 0 ||
	    !render_json_add(obj, "pending", cJSON_CreateBool(pending)) ||
	    !render_json_add(obj, "reachable", cJSON_CreateBool(reachable)) ||
	    json_add_string_or_null(obj, "message", message) < 0)
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_json_names(FILE *out, const char *version, const char *field, char *const *names)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || (version && json_add_string_or_null(obj, "version", version) < 0) ||
	    !render_json_add(obj, field, json_strings(names)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_version_counts(FILE *out, const struct fleet_version_count *counts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s: %zu host%s\n", counts[i].version, counts[i].hosts,
			counts[i].hosts == 1 ? "" : "s");
	return render_stream_status(out);
}

int render_json_single_version(FILE *out, const char *version, bool single,
			       const struct fleet_version_count *counts, size_t n)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *running;

	if (!obj || json_add_string_or_null(obj, "version", version) < 0 ||
	    !render_json_add(obj, "single", cJSON_CreateBool(single)) ||
	    !(running = cJSON_AddObjectToObject(obj, "running_versions")))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!render_json_add(running, counts[i].version, cJSON_CreateNumber((double)counts[i].hosts)))
			return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_failures(FILE *out, const struct fleet_failures *fl, bool hosts)
{
	if (!hosts) {
		fprintf(out, "failed puppet: %zu\nfailed validation: %zu\nunaccounted: %zu\n",
			fl->n_puppet, fl->n_validation, fl->n_unaccounted);
		return render_stream_status(out);
	}
	for (size_t i = 0; i < fl->n_puppet; i++)
		fprintf(out, "failed puppet %s\n", fl->puppet[i]);
	for (size_t i = 0; i < fl->n_validation; i++)
		fprintf(out, "failed validation %s\n", fl->validation[i]);
	for (size_t i = 0; i < fl->n_unaccounted; i++)
		fprintf(out, "unaccounted %s\n", fl->unaccounted[i]);
	return render_stream_status(out);
}

int render_json_failures(FILE *out, const struct fleet_failures *fl,
			 const struct rollout_state *rollout)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || !render_json_add(obj, "failed_puppet", json_strings(fl->puppet)) ||
	    !render_json_add(obj, "failed_validation", json_strings(fl->validation)) ||
	    !render_json_add(obj, "unaccounted", json_strings(fl->unaccounted)) ||
	    (rollout && !render_json_add(obj, "rollout", render_json_rollout(rollout))))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

static const char *state_or_null(enum status_state s)
{
	return s == STATE_INVALID ? NULL : status_state_name(s);
}

static int print_detail(FILE *out, const char *title, const char *detail)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r;

	if (!detail || !*detail)
		return 0;
	if ((r = render_sanitize(detail, strlen(detail), RENDER_BLOCK, &b)) < 0)
		return r;
	fprintf(out, "%s detail:\n%s\n", title, buf_str(&b));
	return 0;
}

int render_health(FILE *out, const struct render_health *h, bool details)
{
	const char *p = state_or_null(h->puppet), *v = state_or_null(h->validation);
	int r;

	fprintf(out, "puppet: %s\nvalidation: %s\n", p ? p : "none", v ? v : "none");
	if (details && ((r = print_detail(out, "puppet", h->puppet_detail)) < 0 ||
			(r = print_detail(out, "validation", h->validation_detail)) < 0))
		return r;
	return render_stream_status(out);
}

int render_json_health(FILE *out, const struct render_health *h)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, "host", h->host) < 0 ||
	    json_add_string_or_null(obj, "puppet", state_or_null(h->puppet)) < 0 ||
	    json_add_string_or_null(obj, "validation", state_or_null(h->validation)) < 0 ||
	    json_add_string_or_null(obj, "puppet_detail", h->puppet_detail) < 0 ||
	    json_add_string_or_null(obj, "validation_detail", h->validation_detail) < 0)
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_ping(FILE *out, const char *endpoint, const char *server_version)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r;

	if ((r = render_sanitize(endpoint, strlen(endpoint), RENDER_LINE, &b)) < 0 ||
	    (r = buf_adds(&b, ": etcd ")) < 0 ||
	    (r = render_sanitize(server_version, strlen(server_version), RENDER_LINE, &b)) < 0)
		return r;
	fprintf(out, "%s\n", buf_str(&b));
	return render_stream_status(out);
}

int render_json_ping(FILE *out, const char *endpoint, const char *server_version,
		     const char *error)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, "endpoint", endpoint) < 0 ||
	    json_add_string_or_null(obj, "version", server_version) < 0 ||
	    (error && json_add_string_or_null(obj, "error", error) < 0))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_json_catalog(FILE *out, const struct catalog *cat)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *entries;

	if (!obj || !render_json_add(obj, "revision", cJSON_CreateNumber((double)cat->revision)) ||
	    !render_json_add(obj, "skipped", cJSON_CreateNumber((double)cat->skipped)) ||
	    !(entries = cJSON_AddArrayToObject(obj, "entries")))
		return -ENOMEM;
	for (size_t i = 0; i < cat->n; i++) {
		const struct catalog_entry *e = &cat->entries[i];
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(entries, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
		if (json_add_string_or_null(o, "service", e->service) < 0 ||
		    json_add_string_or_null(o, "host", e->host) < 0 || json_add_string_or_null(o, "iface", e->iface) < 0 ||
		    json_add_string_or_null(o, "address", e->address) < 0 ||
		    !render_json_add(o, "healthy", cJSON_CreateBool(e->healthy)))
			return -ENOMEM;
	}
	return render_json_emit(obj, out);
}

int render_json_service_wait(FILE *out, const char *service, size_t count, bool healthy,
			     size_t seen, bool ok)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, "service", service) < 0 ||
	    !render_json_add(obj, "count", cJSON_CreateNumber((double)count)) ||
	    !render_json_add(obj, "healthy", cJSON_CreateBool(healthy)) ||
	    !render_json_add(obj, "seen", cJSON_CreateNumber((double)seen)) ||
	    !render_json_add(obj, "ok", cJSON_CreateBool(ok)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

static void policy_setting_line(const char *name, const char *value, bool seconds, void *ud)
{
	fprintf(ud, "%s: %s\n", name, value ? value : "yes");
}

int render_policy(FILE *out, const struct rollout_policy *p)
{
	if (!p) {
		fputs("no policy\n", out);
		return render_stream_status(out);
	}
	render_policy_walk(p, " ", policy_setting_line, out);
	return render_stream_status(out);
}

int render_json_policy(FILE *out, const struct rollout_policy *p)
{
	_cleanup_(freep) char *text = NULL;
	int r;

	if (!p) {
		fputs("null\n", out);
		return render_stream_status(out);
	}
	if ((r = rollout_policy_encode(p, &text)) < 0)
		return r;
	fprintf(out, "%s\n", text);
	return render_stream_status(out);
}

/* --- one host in full, pauses ------------------------------------------------------ */

/* "12m ago" from a unix time, or "-" when unknown. */
static void print_ago(FILE *out, int64_t t, int64_t now)
{
	_cleanup_(buf_releasep) struct buf age = BUF_INIT;
	if (t <= 0 || render_age(now - t, &age) < 0) {
		fputs("-", out);
		return;
	}
	fprintf(out, "%s ago", buf_str(&age));
}

/* text from outside, one line (RENDER_LINE) */
static void print_line(FILE *out, const char *text)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (render_sanitize(text, strlen(text), RENDER_LINE, &b) == 0)
		fputs(buf_str(&b), out);
}

/* --- run history ---------------------------------------------------------------------- */

/* "2026-11-26 10:51:02", local time; "?" when not known. */
static void print_when(FILE *out, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char text[32];

	if (t <= 0 || !localtime_r(&tt, &tm) ||
	    strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm) == 0)
		snprintf(text, sizeof(text), "%-19s", "?");
	fputs(text, out);
}

/* "42s", "3m05s", "2h10m"; "?" when not known. */
static void duration_text(int64_t d, char *text, size_t size)
{
	if (d < 0)
		snprintf(text, size, "?");
	else if (d < 60)
		snprintf(text, size, "%llds", (long long)d);
	else if (d < 3600)
		snprintf(text, size, "%lldm%02llds", (long long)(d / 60), (long long)(d % 60));
	else
		snprintf(text, size, "%lldh%02lldm", (long long)(d / 3600), (long long)(d % 3600 / 60));
}

/* One run after its first column: "  RESULT  DURATION  attempt N  ERROR\n". */
static void print_run(FILE *out, const struct run_entry *e, bool with_version)
{
	char d[32];

	duration_text(e->duration, d, sizeof(d));
	if (with_version)
		fprintf(out, "  %s", e->version);
	fprintf(out, "  %-11s %7s", run_result_name(e->result), d);
	if (e->attempt > 0)
		fprintf(out, "  attempt %ld", e->attempt);
	if (e->error) {
		_cleanup_(buf_releasep) struct buf b = BUF_INIT;
		if (render_sanitize(e->error, strlen(e->error), RENDER_CELL, &b) == 0)
			fprintf(out, "  %s", buf_str(&b));
	}
	fputc('\n', out);
}

int render_runs(FILE *out, const struct run_history *h)
{
	if (h->n == 0)
		fputs("  none\n", out);
	for (size_t i = 0; i < h->n && i < FLEET_HISTORY_MAX; i++) {
		fputs("  ", out);
		print_when(out, h->runs[i].start);
		print_run(out, &h->runs[i], true);
	}
	return render_stream_status(out);
}

int render_history(FILE *out, const char *host, const struct run_history *h)
{
	fprintf(out, "runs of %s, newest first:\n", host);
	return render_runs(out, h);
}

static cJSON *json_run(const struct run_entry *e, const char *host)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	if ((host && json_add_string_or_null(o, "host", host) < 0) ||
	    json_add_string_or_null(o, "version", e->version) < 0 ||
	    !render_json_add(o, "start", cJSON_CreateNumber((double)e->start)) ||
	    !render_json_add(o, "duration", e->duration >= 0
				 ? cJSON_CreateNumber((double)e->duration) : cJSON_CreateNull()) ||
	    json_add_string_or_null(o, "result", run_result_name(e->result)) < 0 ||
	    !render_json_add(o, "attempt", cJSON_CreateNumber((double)e->attempt)) ||
	    json_add_string_or_null(o, "error", e->error) < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* [{…}, …] of h's runs; NULL when out of memory. */
static cJSON *json_runs(const struct run_history *h, const char *host)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr && i < h->n && i < FLEET_HISTORY_MAX; i++) {
		cJSON *o = json_run(&h->runs[i], host);
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
	}
	return arr;
}

int render_json_history(FILE *out, const char *host, const struct run_history *h)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj || json_add_string_or_null(obj, "host", host) < 0 ||
	    !render_json_add(obj, "runs", json_runs(h, NULL)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

int render_history_version(FILE *out, const char *version, const struct host_run *runs,
			   size_t n)
{
	size_t width = strlen("HOST");

	if (n == 0) {
		fprintf(out, "no run of %s recorded\n", version);
		return render_stream_status(out);
	}
	for (size_t i = 0; i < n; i++)
		if (strlen(runs[i].host) > width)
			width = strlen(runs[i].host);
	fprintf(out, "%-*s  %-19s  %-11s %7s\n", (int)width, "HOST", "STARTED", "RESULT", "TOOK");
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%-*s  ", (int)width, runs[i].host);
		print_when(out, runs[i].run.start);
		print_run(out, &runs[i].run, false);
	}
	return render_stream_status(out);
}

int render_json_history_version(FILE *out, const char *version, const struct host_run *runs,
				size_t n)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *arr;

	if (!obj || json_add_string_or_null(obj, "version", version) < 0 ||
	    !(arr = cJSON_AddArrayToObject(obj, "runs")))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		cJSON *o = json_run(&runs[i].run, runs[i].host);
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			return -ENOMEM;
		}
	}
	return render_json_emit(obj, out);
}

int render_host(FILE *out, const struct fleet_view *v, const struct host_view *h,
		const struct host_record *rec, int64_t now)
{
	fprintf(out, "host:         %s\n", h->host);
	fprintf(out, "group:        %s\n", h->group ? h->group : "-");
	fprintf(out, "version:      %s", h->running_version ? h->running_version : "-");
	if (v->current_version)
		fprintf(out, " (desired %s%s)", v->current_version,
			render_host_behind(v, h) ? ": behind" : "");
	fputc('\n', out);
	fputs("paused:       ", out);
	print_line(out, h->paused ? h->paused : "no");
	fputc('\n', out);
	if (h->wait)
		fprintf(out, "waits:        %s\n", h->wait);
	if (rec->alive) {
		fputs("alive:        yes, heard ", out);
		print_ago(out, rec->alive_time, now);
		if (rec->alive_pid)
			fprintf(out, ", pid %ld", rec->alive_pid);
		if (rec->alive_version)
			fprintf(out, ", runs %s", rec->alive_version);
		if (rec->lease)
			fprintf(out, ", lease %llx", (unsigned long long)rec->lease);
		fputc('\n', out);
	} else {
		fprintf(out, "alive:        no%s\n", h->provisioned == STATE_SUCCESS
			? " (provisioned: unaccounted)" : "");
	}
	for (size_t i = 0; i < rec->n_states; i++) {
		const struct host_state *st = &rec->states[i];
		_cleanup_(buf_releasep) struct buf label = BUF_INIT;
		if (buf_printf(&label, "%s:", status_type_name(st->type)) < 0)
			return -ENOMEM;
		fprintf(out, "%-13s %s, ", buf_str(&label), status_state_name(st->state));
		print_ago(out, st->time, now);
		if (st->type != STATUS_PROVISIONED)
			fprintf(out, ", exit %d", st->exit_code);
		if (st->version)
			fprintf(out, ", at %s", st->version);
		if (st->state == STATE_FAILED && st->attempts > 0) {
			_cleanup_(buf_releasep) struct buf since = BUF_INIT;
			fprintf(out, ", attempt %ld", st->attempts);
			if (st->first_failure > 0 && render_clock(st->first_failure, now, &since) == 0)
				fprintf(out, " since %s", buf_str(&since));
		}
		if (st->state == STATE_PENDING && st->wait)
			fprintf(out, ", wait %s", st->wait);
		fputc('\n', out);
		if (st->detail) {
			_cleanup_(buf_releasep) struct buf d = BUF_INIT;
			int r = render_sanitize(st->detail, strlen(st->detail), RENDER_BLOCK, &d);
			if (r < 0)
				return r;
			for (const char *line = buf_str(&d); *line;) {
				size_t len = strcspn(line, "\n");
				fprintf(out, "  | %.*s\n", (int)len, line);
				line += len + (line[len] ? 1 : 0);
			}
		}
	}
	if (rec->n_states == 0)
		fputs("states:       none\n", out);
	fputs("runs:\n", out);
	return render_runs(out, &rec->history);
}

int render_json_host(FILE *out, const struct fleet_view *v, const struct host_view *h,
		     const struct host_record *rec)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *states, *alive;

	if (!obj || json_add_string_or_null(obj, "host", h->host) < 0 ||
	    json_add_string_or_null(obj, "group", h->group) < 0 ||
	    json_add_string_or_null(obj, "running_version", h->running_version) < 0 ||
	    json_add_string_or_null(obj, "desired_version", v->current_version) < 0 ||
	    !render_json_add(obj, "behind", cJSON_CreateBool(render_host_behind(v, h))) ||
	    json_add_string_or_null(obj, "paused", h->paused) < 0 ||
	    json_add_string_or_null(obj, "wait", h->wait) < 0)
		return -ENOMEM;
	if (rec->alive) {
		if (!(alive = cJSON_AddObjectToObject(obj, "alive")) ||
		    !render_json_add(alive, "time", cJSON_CreateNumber((double)rec->alive_time)) ||
		    !render_json_add(alive, "pid", cJSON_CreateNumber((double)rec->alive_pid)) ||
		    json_add_string_or_null(alive, "version", rec->alive_version) < 0 ||
		    !render_json_add(alive, "lease", cJSON_CreateNumber((double)rec->lease)))
			return -ENOMEM;
	} else if (!render_json_add(obj, "alive", cJSON_CreateNull())) {
		return -ENOMEM;
	}
	if (!(states = cJSON_AddArrayToObject(obj, "states")))
		return -ENOMEM;
	for (size_t i = 0; i < rec->n_states; i++) {
		const struct host_state *st = &rec->states[i];
		cJSON *s = cJSON_CreateObject();
		if (!s || !cJSON_AddItemToArray(states, s)) {
			cJSON_Delete(s);
			return -ENOMEM;
		}
		if (json_add_string_or_null(s, "type", status_type_name(st->type)) < 0 ||
		    json_add_string_or_null(s, "state", status_state_name(st->state)) < 0 ||
		    !render_json_add(s, "time", cJSON_CreateNumber((double)st->time)) ||
		    !render_json_add(s, "exit_code", cJSON_CreateNumber(st->exit_code)) ||
		    json_add_string_or_null(s, "version", st->version) < 0 ||
		    json_add_string_or_null(s, "detail", st->detail) < 0 ||
		    !render_json_add(s, "attempts", cJSON_CreateNumber((double)st->attempts)) ||
		    !render_json_add(s, "first_failure", cJSON_CreateNumber((double)st->first_failure)) ||
		    json_add_string_or_null(s, "wait", st->wait) < 0)
			return -ENOMEM;
	}
	if (!render_json_add(obj, "runs", json_runs(&rec->history, NULL)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

static const char *pause_scope_name(enum pause_scope s)
{
	return s == PAUSE_GROUP ? "group" : s == PAUSE_HOST ? "host" : "global";
}

int render_pauses(FILE *out, const struct pause_entry *p, size_t n, int64_t now)
{
	size_t width = strlen("NAME");

	if (n == 0) {
		fputs("no pause set\n", out);
		return render_stream_status(out);
	}
	for (size_t i = 0; i < n; i++)
		if (p[i].name && strlen(p[i].name) > width)
			width = strlen(p[i].name);
	fprintf(out, "%-6s  %-*s  %-8s  %s\n", "SCOPE", (int)width, "NAME", "SINCE", "REASON");
	for (size_t i = 0; i < n; i++) {
		_cleanup_(buf_releasep) struct buf age = BUF_INIT;
		if (p[i].time > 0 ? render_age(now - p[i].time, &age) : buf_adds(&age, "-"))
			return -ENOMEM;
		fprintf(out, "%-6s  %-*s  %-8s  ", pause_scope_name(p[i].scope), (int)width,
			p[i].name ? p[i].name : "-", buf_str(&age));
		print_line(out, p[i].reason ? p[i].reason : "-");
		fputc('\n', out);
	}
	return render_stream_status(out);
}

int render_json_pauses(FILE *out, const struct pause_entry *p, size_t n)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *arr;

	if (!obj || !(arr = cJSON_AddArrayToObject(obj, "pauses")))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		cJSON *e = cJSON_CreateObject();
		if (!e || !cJSON_AddItemToArray(arr, e)) {
			cJSON_Delete(e);
			return -ENOMEM;
		}
		if (json_add_string_or_null(e, "scope", pause_scope_name(p[i].scope)) < 0 ||
		    json_add_string_or_null(e, "name", p[i].name) < 0 ||
		    !render_json_add(e, "time", cJSON_CreateNumber((double)p[i].time)) ||
		    json_add_string_or_null(e, "reason", p[i].reason) < 0)
			return -ENOMEM;
	}
	return render_json_emit(obj, out);
}
