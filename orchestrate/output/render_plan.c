/*
 * render_plan.c — `orchestrate plan`: the rollout a trigger would start
 * (fleet_plan.h), for people (render_plan) or as one JSON object
 * (render_json_plan).
 *
 * Host, group and version names are valid names already; what else comes
 * from etcd — a pause's reason, a published wait's detail, a halt's reason —
 * goes through render_sanitize() (RENDER_LINE) in text and utf8_tail() in
 * JSON, so that a hostile value can neither draw on the terminal nor break a
 * line or the JSON.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "base/utf8.h"
#include "output/render.h"
#include "render_internal.h"

/* --- text ------------------------------------------------------------------------------- */

/* One line of text from etcd, safe for a terminal. */
static int print_safe(FILE *out, const char *text)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (!text)
		return 0;
	if (render_sanitize(text, strlen(text), RENDER_LINE, &b) < 0)
		return -ENOMEM;
	fputs(buf_str(&b), out);
	return 0;
}

/* "~1m40s" (hours and minutes past an hour), or "?" when not known. */
static void print_duration(FILE *out, int64_t seconds)
{
	if (seconds < 0)
		fputs("?", out);
	else if (seconds < 60)
		fprintf(out, "~%llds", (long long)seconds);
	else if (seconds < 3600)
		fprintf(out, "~%lldm%02llds", (long long)(seconds / 60), (long long)(seconds % 60));
	else
		fprintf(out, "~%lldh%02lldm", (long long)(seconds / 3600),
			(long long)(seconds % 3600 / 60));
}

struct policy_words {
	FILE *out;
	size_t n;
};

static void policy_word(const char *name, const char *value, bool seconds, void *ud)
{
	struct policy_words *w = ud;
	fprintf(w->out, "%s %s%s%s%s", w->n++ ? "," : "", name, value ? " " : "",
		value ? value : "", seconds ? "s" : "");
}

static void print_head(FILE *out, const struct fleet_plan *p)
{
	fprintf(out, "plan for %s: ", p->version);
	if (!p->new_trigger)
		fprintf(out, "the current rollout, from now on");
	else if (p->current)
		fprintf(out, "a new trigger (current_version is %s)", p->current);
	else
		fprintf(out, "a new trigger (no current_version set)");
	fprintf(out, ", at revision %lld\n", (long long)p->revision);
	fputs("policy:", out);
	if (p->policy_state == 0)
		fputs(" none: every host runs at once", out);
	else
		render_policy_walk(&p->policy, " ", policy_word, &(struct policy_words){ out, 0 });
	if (p->policy_state < 0)
		fputs(" (the stored policy does not decode: the nodes take it as max_parallel 1)",
		      out);
	fputc('\n', out);
	fprintf(out, "hosts: %zu known, %zu alive: %zu to run in %zu batch%s, %zu at %s already, "
		"%zu waiting, %zu dead (%zu unaccounted)\n", p->n, p->alive, p->counts[PLAN_RUN],
		p->n_batches, p->n_batches == 1 ? "" : "es", p->counts[PLAN_AT_VERSION], p->version,
		p->counts[PLAN_WAIT], p->counts[PLAN_DEAD], p->unaccounted);
}

static int print_budget(FILE *out, const struct fleet_plan *p)
{
	if (p->budget < 0) {
		fputs("failure budget: none (failures never halt the rollout)\n", out);
		return 0;
	}
	fprintf(out, "failure budget: %ld host%s may fail (%zu failed so far)", p->budget,
		p->budget == 1 ? "" : "s", p->failed);
	if (p->budget_spent)
		fputs(": spent, the next host to start halts the rollout", out);
	else
		fprintf(out, "; failure %ld halts the rollout", p->budget + 1);
	fputc('\n', out);
	if (p->halted) {
		fputs("halted: ", out);
		if (print_safe(out, *p->halted ? p->halted : "no reason recorded") < 0)
			return -ENOMEM;
		fputs(" (orchestrate resume, or a new trigger, starts it again)\n", out);
	}
	return 0;
}

static int print_batches(FILE *out, const struct fleet_plan *p)
{
	for (size_t b = 0; b < p->n_batches; b++) {
		const struct plan_batch *pb = &p->batches[b];
		if (pb->promote_before)
			fprintf(out, "  then the canaries are promoted (%s)\n",
				p->manual_promote ? "by an operator: orchestrate promote"
						  : "auto_promote");
		fprintf(out, "batch %zu  %s%s  %zu host%s  ", b + 1, pb->group ? pb->group : "-",
			pb->canary ? "  canary" : "", pb->n, pb->n == 1 ? "" : "s");
		print_duration(out, pb->estimate);
		fputs(" ", out);
		for (size_t i = 0; i < pb->n; i++)
			fprintf(out, " %s%s", p->hosts[pb->hosts[i]].host,
				p->hosts[pb->hosts[i]].in_progress ? " (running now)" : "");
		fputc('\n', out);
	}
	return 0;
}

static int print_others(FILE *out, const struct fleet_plan *p)
{
	size_t any = 0;

	for (size_t i = 0; i < p->n; i++) {
		const struct plan_host *h = &p->hosts[i];
		if (h->fate != PLAN_WAIT)
			continue;
		if (!any++)
			fputs("waiting:\n", out);
		fprintf(out, "  %s  %s  %s: ", h->host, h->group ? h->group : "-",
			plan_wait_name(h->wait));
		if (print_safe(out, h->why ? h->why : "no detail") < 0)
			return -ENOMEM;
		if (h->wait == PLAN_WAIT_DEPENDENCY)
			fputs(" (as last published)", out);
		fputc('\n', out);
	}
	any = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct plan_host *h = &p->hosts[i];
		if (h->fate != PLAN_DEAD)
			continue;
		if (!any++)
			fputs("dead (no alive key):\n", out);
		fprintf(out, "  %s  %s%s\n", h->host, h->group ? h->group : "-",
			h->provisioned ? "  unaccounted" : "");
	}
	any = 0;
	for (size_t i = 0; i < p->n; i++) {
		if (p->hosts[i].fate != PLAN_AT_VERSION)
			continue;
		if (!any++)
			fprintf(out, "at %s already:", p->version);
		fprintf(out, " %s", p->hosts[i].host);
	}
	if (any)
		fputc('\n', out);
	return 0;
}

static void print_estimate(FILE *out, const struct fleet_plan *p)
{
	fputs("estimated duration: ", out);
	if (p->n_batches == 0) {
		fputs("none, nothing to run", out);
	} else if (p->estimate < 0) {
		fputs("not known (no successful run in any host's history)", out);
	} else {
		print_duration(out, p->estimate);
		fprintf(out, " (%zu batch%s, each its slowest host's median run", p->n_batches,
			p->n_batches == 1 ? "" : "es");
		if (p->policy_state == 1 && p->policy.min_healthy_time)
			fprintf(out, " + min_healthy_time %lds", p->policy.min_healthy_time);
		fputs("; splay not counted", out);
		if (p->manual_promote)
			fputs("; plus the wait for an operator's promote", out);
		fputc(')', out);
	}
	fputs("\nmedian run: fleet ", out);
	print_duration(out, p->median);
	for (size_t g = 0; g < p->n_groups; g++) {
		fprintf(out, "%s %s ", g ? "," : ";",
			p->groups[g].group ? p->groups[g].group : "(no group)");
		print_duration(out, p->groups[g].median);
	}
	fputc('\n', out);
}

int render_plan(FILE *out, const struct fleet_plan *p)
{
	print_head(out, p);
	if (print_budget(out, p) < 0 || print_batches(out, p) < 0 || print_others(out, p) < 0)
		return -ENOMEM;
	print_estimate(out, p);
	if (p->n_batches > 1 && p->counts[PLAN_RUN] > p->n_batches)
		fputs("note: within a group, which host runs in which batch follows the order the "
		      "hosts queue in at the trigger (hosts queued already first, then by name)\n",
		      out);
	return render_stream_status(out);
}

/* --- JSON ---------------------------------------------------------------------------------- */


static cJSON *json_seconds(int64_t s)
{
	return s < 0 ? cJSON_CreateNull() : cJSON_CreateNumber((double)s);
}

static cJSON *json_policy(const struct fleet_plan *p)
{
	_cleanup_(freep) char *text = NULL;

	if (p->policy_state != 1)
		return cJSON_CreateNull();
	if (rollout_policy_encode(&p->policy, &text) < 0)
		return NULL;
	return cJSON_Parse(text);
}

static cJSON *json_budget(const struct fleet_plan *p)
{
	cJSON *o;

	if (p->budget < 0)
		return cJSON_CreateNull();
	if (!(o = cJSON_CreateObject()))
		return NULL;
	if (!render_json_add(o, "hosts", cJSON_CreateNumber((double)p->budget)) ||
	    !render_json_add(o, "failed", cJSON_CreateNumber((double)p->failed)) ||
	    !render_json_add(o, "spent", cJSON_CreateBool(p->budget_spent))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *json_batch(const struct fleet_plan *p, size_t b)
{
	const struct plan_batch *pb = &p->batches[b];
	cJSON *o = cJSON_CreateObject(), *hosts = cJSON_CreateArray();
	cJSON *running = cJSON_CreateArray();

	if (!o || !hosts || !running || !cJSON_AddItemToObject(o, "hosts", hosts)) {
		cJSON_Delete(o);
		cJSON_Delete(hosts);
		cJSON_Delete(running);
		return NULL;
	}
	if (!cJSON_AddItemToObject(o, "running_now", running)) {
		cJSON_Delete(o);
		cJSON_Delete(running);
		return NULL;
	}
	for (size_t i = 0; i < pb->n; i++) {
		const struct plan_host *h = &p->hosts[pb->hosts[i]];
		if (!cJSON_AddItemToArray(hosts, cJSON_CreateString(h->host)) ||
		    (h->in_progress && !cJSON_AddItemToArray(running, cJSON_CreateString(h->host)))) {
			cJSON_Delete(o);
			return NULL;
		}
	}
	if (!render_json_add(o, "batch", cJSON_CreateNumber((double)(b + 1))) ||
	    !render_json_add(o, "group", render_json_text(pb->group)) ||
	    !render_json_add(o, "canary", cJSON_CreateBool(pb->canary)) ||
	    !render_json_add(o, "promote_before", cJSON_CreateBool(pb->promote_before)) ||
	    !render_json_add(o, "estimate_seconds", json_seconds(pb->estimate))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *json_host(const struct plan_host *h)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !render_json_add(o, "host", cJSON_CreateString(h->host)) ||
	    !render_json_add(o, "group", render_json_text(h->group)) ||
	    (h->fate == PLAN_WAIT &&
	     (!render_json_add(o, "reason", cJSON_CreateString(plan_wait_name(h->wait))) ||
	      !render_json_add(o, "detail", render_json_text(h->why)))) ||
	    (h->fate == PLAN_DEAD &&
	     !render_json_add(o, "unaccounted", cJSON_CreateBool(h->provisioned))) ||
	    !render_json_add(o, "running_version", render_json_text(h->running))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* The hosts of one fate: objects, or (names) their names. */
static cJSON *json_hosts(const struct fleet_plan *p, enum plan_fate fate, bool names)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t i = 0; a && i < p->n; i++) {
		if (p->hosts[i].fate != fate)
			continue;
		cJSON *item = names ? cJSON_CreateString(p->hosts[i].host) : json_host(&p->hosts[i]);
		if (!cJSON_AddItemToArray(a, item)) {
			cJSON_Delete(item);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

static cJSON *json_duration(const struct fleet_plan *p)
{
	cJSON *o = cJSON_CreateObject(), *groups = cJSON_CreateArray();

	if (!o || !groups || !cJSON_AddItemToObject(o, "groups", groups)) {
		cJSON_Delete(o);
		cJSON_Delete(groups);
		return NULL;
	}
	for (size_t g = 0; g < p->n_groups; g++) {
		cJSON *e = cJSON_CreateObject();
		if (!cJSON_AddItemToArray(groups, e) ||
		    !render_json_add(e, "group", render_json_text(p->groups[g].group)) ||
		    !render_json_add(e, "median_seconds", json_seconds(p->groups[g].median)) ||
		    !render_json_add(e, "hosts_with_history", cJSON_CreateNumber((double)p->groups[g].hosts))) {
			cJSON_Delete(o);
			return NULL;
		}
	}
	if (!render_json_add(o, "estimate_seconds", json_seconds(p->estimate)) ||
	    !render_json_add(o, "median_seconds", json_seconds(p->median)) ||
	    !render_json_add(o, "manual_promote", cJSON_CreateBool(p->manual_promote))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

int render_json_plan(FILE *out, const struct fleet_plan *p)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *batches = cJSON_CreateArray();

	if (!obj || !batches || !cJSON_AddItemToObject(obj, "batches", batches)) {
		cJSON_Delete(batches);
		return -ENOMEM;
	}
	for (size_t b = 0; b < p->n_batches; b++)
		if (!cJSON_AddItemToArray(batches, json_batch(p, b)))
			return -ENOMEM;
	if (!render_json_add(obj, "version", cJSON_CreateString(p->version)) ||
	    !render_json_add(obj, "current_version", render_json_text(p->current)) ||
	    !render_json_add(obj, "new_trigger", cJSON_CreateBool(p->new_trigger)) ||
	    !render_json_add(obj, "revision", cJSON_CreateNumber((double)p->revision)) ||
	    !render_json_add(obj, "policy", json_policy(p)) ||
	    !render_json_add(obj, "policy_valid", cJSON_CreateBool(p->policy_state >= 0)) ||
	    !render_json_add(obj, "hosts", cJSON_CreateNumber((double)p->n)) ||
	    !render_json_add(obj, "alive", cJSON_CreateNumber((double)p->alive)) ||
	    !render_json_add(obj, "budget", json_budget(p)) ||
	    !render_json_add(obj, "halted", render_json_text(p->halted)) ||
	    !render_json_add(obj, "canaries_done", cJSON_CreateNumber((double)p->canaries_done)) ||
	    !render_json_add(obj, "promoted", cJSON_CreateBool(p->promoted)) ||
	    !render_json_add(obj, "waiting", json_hosts(p, PLAN_WAIT, false)) ||
	    !render_json_add(obj, "dead", json_hosts(p, PLAN_DEAD, false)) ||
	    !render_json_add(obj, "at_version", json_hosts(p, PLAN_AT_VERSION, true)) ||
	    !render_json_add(obj, "duration", json_duration(p)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}
