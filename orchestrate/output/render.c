/*
 * render.c — the status table and its JSON twin (render.h), and the
 * sanitiser every text from outside goes through; every other command's
 * answer is render_commands.c's.
 *
 * Output only: the data comes in as a fleet_view already read at one revision,
 * and the caller has decided about colour.  The table is what an operator reads
 * first during a rollout, so the hosts that need attention — behind the desired
 * version — come first, columns are computed from the data (names may be up to
 * 253 bytes) and the free-form DETAIL is cut to one short line at the end of the
 * row, where it cannot push the other columns around.
 *
 * Colour escapes never count towards a column's width: cells are padded by their
 * visible length, and the escapes wrap the text alone.
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
#include "output/render.h"
#include "render_internal.h"
#include "fleet/schema.h"
#include "base/utf8.h"

#define TABLE_WIDTH 80
#define DETAIL_MIN 20
/* A DETAIL that cannot have DETAIL_MIN columns at the end of its row goes on a
 * line of its own below it, indented by this much. */
#define DETAIL_INDENT 4
#define COLUMN_GAP 2

#define ANSI_RESET "\033[0m"
#define ANSI_BOLD "\033[1m"
#define ANSI_RED "\033[31m"
#define ANSI_GREEN "\033[32m"
#define ANSI_YELLOW "\033[33m"
#define ANSI_CYAN "\033[36m"

enum column {
	COL_HOST,
	COL_VERSION,
	COL_PUPPET,
	COL_VALIDATION,
	COL_ALIVE,
	COL_GROUP,
	COL_AGE,
	COL_DETAIL,
	_COL_MAX,
};

static const char *const column_names[_COL_MAX] = {
	"HOST", "VERSION", "PUPPET", "VALIDATION", "ALIVE", "GROUP", "AGE", "DETAIL",
};

int render_stream_status(FILE *out)
{
	return ferror(out) ? -EIO : 0;
}

int render_age(int64_t seconds, struct buf *out)
{
	if (seconds < 0)
		seconds = 0;
	if (seconds < 60)
		return buf_printf(out, "%llds", (long long)seconds);
	if (seconds < 3600)
		return buf_printf(out, "%lldm", (long long)(seconds / 60));
	if (seconds < 86400)
		return buf_printf(out, "%lldh", (long long)(seconds / 3600));
	return buf_printf(out, "%lldd", (long long)(seconds / 86400));
}

int render_clock(int64_t t, int64_t now, struct buf *out)
{
	time_t tt = (time_t)t;
	struct tm tm;
	char text[32];

	if (t <= 0 || !localtime_r(&tt, &tm))
		return buf_adds(out, "?");
	/* the time of day is enough within a day; older, the date says which */
	if (strftime(text, sizeof(text), t <= now && now - t < 86400 ? "%H:%M" : "%Y-%m-%d %H:%M",
		     &tm) == 0)
		return buf_adds(out, "?");
	return buf_adds(out, text);
}

bool render_host_behind(const struct fleet_view *v, const struct host_view *h)
{
	return v->current_version &&
	       (!h->running_version || strcmp(h->running_version, v->current_version) != 0);
}

static const char *state_cell(enum status_state s)
{
	const char *name = s == STATE_INVALID ? NULL : status_state_name(s);
	return name ? name : "-";
}

static const char *state_color(enum status_state s)
{
	switch (s) {
	case STATE_SUCCESS:
		return ANSI_GREEN;
	case STATE_FAILED:
		return ANSI_RED;
	case STATE_PENDING:
		return ANSI_YELLOW;
	case STATE_RUNNING:
		return ANSI_CYAN;
	default:
		return NULL;
	}
}

/* Visible width of UTF-8 text, counted in code points (close enough for the
 * text a detail holds; wide characters are rare in run output). */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

/* Whether the line [p, end) looks like an error: what a failed run says
 * ("Error: ...", Ansible's "FAILED", "... failed") rather than a notice. */
static bool line_is_error(const char *p, const char *end)
{
	static const char *const marks[] = { "Error:", "FAILED", "failed" };
	for (size_t k = 0; k < ELEMENTSOF(marks); k++) {
		size_t m = strlen(marks[k]);
		for (const char *q = p; q + m <= end; q++)
			if (memcmp(q, marks[k], m) == 0)
				return true;
	}
	return false;
}

/*
 * The detail as one line of at most width columns: prefix (made here: "attempt
 * 3 since 12:01: ", "wait slot: "; may be NULL), then the detail's last line
 * that looks like an error (a failed `puppet apply` ends with "Notice: Applied
 * catalog", its "Error:" is above), else its last non-blank line, as a table
 * cell (render_sanitize()), cut at a character boundary with "..." when too
 * long.  A prefix with no detail loses its ": ".
 */
static int detail_cell(const char *prefix, const char *detail, size_t width, struct buf *out)
{
	_cleanup_(buf_releasep) struct buf cell = BUF_INIT;
	const char *start, *end;
	size_t w = 0;
	int r;

	if (!detail || !*detail) {
		if (!prefix || !*prefix)
			return 0;
		if ((r = buf_adds(&cell, prefix)) < 0)
			return r;
		while (cell.len > 0 && (cell.data[cell.len - 1] == ' ' ||
					cell.data[cell.len - 1] == ':'))
			cell.data[--cell.len] = '\0';
		detail = "";
	} else if (prefix && (r = buf_adds(&cell, prefix)) < 0) {
		return r;
	}
	end = detail + strlen(detail);
	while (end > detail && (unsigned char)end[-1] <= ' ')
		end--;
	start = end;
	while (start > detail && start[-1] != '\n')
		start--;
	/* the last error line, when there is one */
	for (const char *e = end, *b; e > detail; e = b > detail ? b - 1 : detail) {
		b = e;
		while (b > detail && b[-1] != '\n')
			b--;
		if (line_is_error(b, e)) {
			start = b;
			end = e;
			while (end > start && (unsigned char)end[-1] <= ' ')
				end--;
			break;
		}
		if (b == detail)
			break;
	}
	while (start < end && (*start == ' ' || *start == '\t' || *start == '\r'))
		start++;
	if ((r = render_sanitize(start, (size_t)(end - start), RENDER_CELL, &cell)) < 0)
		return r;

	size_t total = text_width(buf_str(&cell));
	size_t keep = total <= width ? total : (width > 3 ? width - 3 : 0);
	for (const char *p = buf_str(&cell); *p; p++) {
		if (((unsigned char)*p & 0xc0) != 0x80 && w++ == keep)
			break;
		if ((r = buf_addc(out, *p)) < 0)
			return r;
	}
	if (keep < total)
		return buf_adds(out, width > 3 ? "..." : "");
	return 0;
}

struct row {
	const struct host_view *h;
	bool behind;
	int rank;		/* host_rank() */
	char *cells[_COL_MAX];
	const char *colors[_COL_MAX];
};

static bool host_failed(const struct host_view *h)
{
	return h->puppet == STATE_FAILED || h->validation == STATE_FAILED;
}

static bool host_waiting(const struct host_view *h)
{
	return h->puppet == STATE_PENDING || h->paused;
}

/* What needs attention first: 0 failed, 1 waiting (pending or paused), 2
 * behind the desired version, 3 the rest. */
static int host_rank(const struct fleet_view *v, const struct host_view *h)
{
	return host_failed(h) ? 0 : host_waiting(h) ? 1 : render_host_behind(v, h) ? 2 : 3;
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->h->host, y->h->host);
}

/* Whether h passes the filters of o (all of them). */
static bool host_shown(const struct fleet_view *v, const struct host_view *h,
		       const struct render_status_options *o)
{
	if (o->failed && !host_failed(h))
		return false;
	if (o->behind && !render_host_behind(v, h))
		return false;
	if (o->group && (!h->group || strcmp(h->group, o->group) != 0))
		return false;
	if (o->hosts && o->hosts[0]) {
		bool any = false;
		for (size_t i = 0; o->hosts[i] && !any; i++)
			any = strcmp(o->hosts[i], h->host) == 0;
		if (!any)
			return false;
	}
	return true;
}

static void rows_free(struct row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++)
		for (int c = 0; c < _COL_MAX; c++)
			free(rows[i].cells[c]);
	free(rows);
}

static int cell_set(struct row *row, enum column c, const char *text, const char *color)
{
	row->cells[c] = strdup(text ? text : "-");
	row->colors[c] = color;
	return row->cells[c] ? 0 : -ENOMEM;
}

static int row_fill(const struct fleet_view *v, const struct host_view *h, struct row *row,
		    int64_t now)
{
	_cleanup_(buf_releasep) struct buf age = BUF_INIT;
	int r;

	row->h = h;
	row->behind = render_host_behind(v, h);
	row->rank = host_rank(v, h);
	if (h->changed > 0)
		r = render_age(now - h->changed, &age);
	else
		r = buf_adds(&age, "-");
	if (r < 0)
		return r;
	if ((r = cell_set(row, COL_HOST, h->host, NULL)) < 0 ||
	    (r = cell_set(row, COL_VERSION, h->running_version,
			  row->behind ? ANSI_YELLOW : NULL)) < 0 ||
	    (r = cell_set(row, COL_PUPPET, state_cell(h->puppet), state_color(h->puppet))) < 0 ||
	    (r = cell_set(row, COL_VALIDATION, state_cell(h->validation),
			  state_color(h->validation))) < 0 ||
	    (r = cell_set(row, COL_ALIVE, h->alive ? "yes" : "no",
			  h->alive ? NULL : ANSI_RED)) < 0 ||
	    (r = cell_set(row, COL_GROUP, h->group, NULL)) < 0 ||
	    (r = cell_set(row, COL_AGE, buf_str(&age), NULL)) < 0)
		return r;
	return 0;
}

/* One cell, coloured, then padded to width unless it is the last of the row. */
static void print_cell(FILE *out, const char *text, const char *color, size_t width,
		       bool last, bool use_color)
{
	if (use_color && color)
		fprintf(out, "%s%s%s", color, text, ANSI_RESET);
	else
		fputs(text, out);
	if (!last)
		fprintf(out, "%*s", (int)(width - text_width(text) + COLUMN_GAP), "");
}

/* What DETAIL says before the detail: a failure's attempts and since when
 * ("attempt 3 since 12:01: "), or why a pending host waits ("wait slot: "). */
static int detail_prefix(const struct host_view *h, int64_t now, struct buf *out)
{
	int r;

	if (host_failed(h) && h->attempts > 0) {
		if ((r = buf_printf(out, "attempt %ld", h->attempts)) < 0)
			return r;
		if (h->first_failure > 0 &&
		    ((r = buf_adds(out, " since ")) < 0 || (r = render_clock(h->first_failure, now, out)) < 0))
			return r;
		return buf_adds(out, ": ");
	}
	if (h->puppet == STATE_PENDING && h->wait)
		return buf_printf(out, "wait %s: ", h->wait);
	return 0;
}

static int table_rows(const struct fleet_view *v, FILE *out,
		      const struct render_status_options *o)
{
	size_t widths[_COL_MAX], n = 0;
	size_t table_width = o->width >= 40 ? o->width : TABLE_WIDTH;
	struct row *rows = calloc(v->n ? v->n : 1, sizeof(*rows));
	bool color = o->color;
	int r;

	if (!rows)
		return -ENOMEM;
	for (int c = 0; c < _COL_MAX; c++)
		widths[c] = strlen(column_names[c]);
	for (size_t i = 0; i < v->n; i++) {
		if (!host_shown(v, &v->hosts[i], o))
			continue;
		r = row_fill(v, &v->hosts[i], &rows[n++], o->now);
		if (r < 0) {
			rows_free(rows, n);
			return r;
		}
		for (int c = 0; c < COL_DETAIL; c++) {
			size_t w = strlen(rows[n - 1].cells[c]);
			if (w > widths[c])
				widths[c] = w;
		}
	}
	qsort(rows, n, sizeof(*rows), row_cmp);

	/* DETAIL takes what is left of the terminal's width; when that is less
	 * than a glance (long names), it goes below the row instead of past the
	 * right edge */
	size_t used = 0;
	for (int c = 0; c < COL_DETAIL; c++)
		used += widths[c] + COLUMN_GAP;
	bool detail_below = used + DETAIL_MIN > table_width;
	size_t detail_width = detail_below ? table_width - DETAIL_INDENT : table_width - used;

	for (int c = 0; c < (detail_below ? COL_DETAIL : _COL_MAX); c++)
		print_cell(out, column_names[c], ANSI_BOLD, widths[c],
			   c == (detail_below ? COL_AGE : COL_DETAIL), color);
	fputc('\n', out);
	for (size_t i = 0; i < n; i++) {
		_cleanup_(buf_releasep) struct buf detail = BUF_INIT;
		_cleanup_(buf_releasep) struct buf paused = BUF_INIT;
		_cleanup_(buf_releasep) struct buf prefix = BUF_INIT;
		const char *text = rows[i].h->detail;
		/* A failure says more than a pause; a paused host says why it waits. */
		if (!text && !rows[i].h->wait && rows[i].h->paused) {
			if (buf_printf(&paused, "paused: %s", rows[i].h->paused) < 0) {
				rows_free(rows, n);
				return -ENOMEM;
			}
			text = buf_str(&paused);
		}
		if (detail_prefix(rows[i].h, o->now, &prefix) < 0) {
			rows_free(rows, n);
			return -ENOMEM;
		}
		r = detail_cell(buf_str(&prefix), text, detail_width, &detail);
		if (r < 0) {
			rows_free(rows, n);
			return r;
		}
		/* an empty DETAIL leaves no trailing spaces behind AGE */
		for (int c = 0; c < COL_DETAIL; c++)
			print_cell(out, rows[i].cells[c], rows[i].colors[c], widths[c],
				   c == COL_AGE && (detail.len == 0 || detail_below), color);
		if (detail_below && detail.len > 0)
			fprintf(out, "\n%*s", DETAIL_INDENT, "");
		fputs(buf_str(&detail), out);
		fputc('\n', out);
	}
	if (n < v->n)
		fprintf(out, "(%zu of %zu hosts shown)\n", n, v->n);
	rows_free(rows, n);
	return 0;
}

static int str_ptr_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	/* NULL ("under none") sorts last */
	if (!x || !y)
		return x ? -1 : y ? 1 : 0;
	return strcmp(x, y);
}

/* Each running version (NULL for none) with its number of hosts, sorted. */
struct version_count {
	const char *version;
	size_t count;
};

static int count_versions(const struct fleet_view *v, struct version_count **ret, size_t *ret_n)
{
	const char **all = calloc(v->n ? v->n : 1, sizeof(*all));
	struct version_count *counts = calloc(v->n ? v->n : 1, sizeof(*counts));
	size_t n = 0;

	if (!all || !counts) {
		free(all);
		free(counts);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->n; i++)
		all[i] = v->hosts[i].running_version;
	qsort(all, v->n, sizeof(*all), str_ptr_cmp);
	for (size_t i = 0; i < v->n; i++) {
		if (n > 0 && str_ptr_cmp(&counts[n - 1].version, &all[i]) == 0) {
			counts[n - 1].count++;
			continue;
		}
		counts[n].version = all[i];
		counts[n].count = 1;
		n++;
	}
	free(all);
	*ret = counts;
	*ret_n = n;
	return 0;
}

/* Per type, how many hosts are in each state; index _STATE_MAX counts "none". */
struct state_counts {
	size_t puppet[_STATE_MAX + 1];
	size_t validation[_STATE_MAX + 1];
	size_t behind, alive, unaccounted, paused, failed, waiting;
};

static size_t state_index(enum status_state s)
{
	return s >= 0 && s < _STATE_MAX ? (size_t)s : _STATE_MAX;
}

static void count_states(const struct fleet_view *v, struct state_counts *sc)
{
	memset(sc, 0, sizeof(*sc));
	for (size_t i = 0; i < v->n; i++) {
		const struct host_view *h = &v->hosts[i];
		sc->puppet[state_index(h->puppet)]++;
		sc->validation[state_index(h->validation)]++;
		if (render_host_behind(v, h))
			sc->behind++;
		if (h->alive)
			sc->alive++;
		else if (h->provisioned == STATE_SUCCESS)
			sc->unaccounted++;
		if (h->paused)
			sc->paused++;
		if (host_failed(h))
			sc->failed++;
		else if (host_waiting(h))
			sc->waiting++;
	}
}

/* The order states are listed in: what went wrong first. */
static const enum status_state state_order[] = {
	STATE_FAILED, STATE_PENDING, STATE_RUNNING, STATE_SUCCESS,
};

static void print_state_line(FILE *out, const char *label, const size_t *counts, bool color)
{
	bool any = false;

	fprintf(out, "%-12s", label);
	for (size_t k = 0; k < ELEMENTSOF(state_order); k++) {
		enum status_state s = state_order[k];
		if (!counts[s])
			continue;
		fprintf(out, "%s", any ? ", " : " ");
		if (color && state_color(s))
			fprintf(out, "%s%s%s %zu", state_color(s), status_state_name(s), ANSI_RESET,
				counts[s]);
		else
			fprintf(out, "%s %zu", status_state_name(s), counts[s]);
		any = true;
	}
	if (counts[_STATE_MAX]) {
		fprintf(out, "%snone %zu", any ? ", " : " ", counts[_STATE_MAX]);
		any = true;
	}
	if (!any)
		fputs(" -", out);
	fputc('\n', out);
}

/* The group of h as the header counts it; NULL: in none. */
static int group_index(char **names, size_t n, const char *group)
{
	for (size_t i = 0; i < n; i++)
		if ((!names[i] && !group) || (names[i] && group && strcmp(names[i], group) == 0))
			return (int)i;
	return -1;
}

/*
 * "progress: dc1 10/12, dc2 0/8, (none) 3/3": per group, the alive hosts at
 * the desired version of the alive hosts, the policy's groups first in their
 * order, then the others by name; wrapped to the width.
 */
static int header_progress(const struct fleet_view *v, FILE *out,
			   const struct render_status_options *o, const char *bold,
			   const char *reset)
{
	size_t width = o->width >= 40 ? o->width : TABLE_WIDTH;
	size_t cap = v->n + (o->policy ? o->policy->n_groups : 0) + 1, n = 0;
	_cleanup_(freep) char **names = calloc(cap, sizeof(char *));
	_cleanup_(freep) size_t *at = calloc(cap, sizeof(size_t));
	_cleanup_(freep) size_t *alive = calloc(cap, sizeof(size_t));
	size_t column;

	if (!names || !at || !alive)
		return -ENOMEM;
	for (size_t i = 0; o->policy && i < o->policy->n_groups; i++)
		names[n++] = o->policy->groups[i];
	size_t fixed = n;
	for (size_t i = 0; i < v->n; i++) {
		const struct host_view *h = &v->hosts[i];
		int k = group_index(names, n, h->group);
		if (k < 0) {
			k = (int)n;
			names[n++] = h->group;
		}
		if (!h->alive)
			continue;
		alive[k]++;
		if (v->current_version && h->running_version &&
		    strcmp(h->running_version, v->current_version) == 0)
			at[k]++;
	}
	if (!v->current_version || n == 0)
		return 0;
	/* the others by name, the hosts in no group last */
	for (size_t i = fixed; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (str_ptr_cmp(&names[j], &names[i]) < 0) {
				char *t = names[i]; names[i] = names[j]; names[j] = t;
				size_t a = at[i]; at[i] = at[j]; at[j] = a;
				a = alive[i]; alive[i] = alive[j]; alive[j] = a;
			}
	fprintf(out, "%sprogress:%s", bold, reset);
	column = strlen("progress:");
	for (size_t i = 0; i < n; i++) {
		_cleanup_(buf_releasep) struct buf item = BUF_INIT;
		if (buf_printf(&item, "%s %zu/%zu", names[i] ? names[i] : "(no group)", at[i],
			       alive[i]) < 0)
			return -ENOMEM;
		if (column + item.len + 2 > width && column > strlen("progress:")) {
			fputs(",\n ", out);
			column = 1;
		} else if (i > 0) {
			fputs(",", out);
			column++;
		}
		fprintf(out, " %s", buf_str(&item));
		column += item.len + 1;
	}
	fputc('\n', out);
	return 0;
}

void render_policy_walk(const struct rollout_policy *p, const char *group_sep,
			policy_setting_fn fn, void *ud)
{
	_cleanup_(buf_releasep) struct buf groups = BUF_INIT;
	char v[64];

	if (p->max_parallel > 0) {
		snprintf(v, sizeof(v), "%ld", p->max_parallel);
		fn("max_parallel", v, false, ud);
	} else if (p->max_percent > 0) {
		snprintf(v, sizeof(v), "%g", p->max_percent);
		fn("max_percent", v, false, ud);
	} else {
		fn("max_parallel", "unlimited", false, ud);
	}
	for (size_t i = 0; i < p->n_groups; i++)
		if ((i && buf_adds(&groups, group_sep) < 0) || buf_adds(&groups, p->groups[i]) < 0)
			break;
	if (p->n_groups)
		fn("groups", buf_str(&groups), false, ud);
#define LONG_SETTING(field, seconds)                                   \
	if (p->field) {                                                \
		snprintf(v, sizeof(v), "%ld", p->field);               \
		fn(#field, v, seconds, ud);                            \
	}
	if (p->has_max_failures) {
		snprintf(v, sizeof(v), "%ld", p->max_failures);
		fn("max_failures", v, false, ud);
	}
	if (p->max_fail_percent > 0) {
		snprintf(v, sizeof(v), "%g", p->max_fail_percent);
		fn("max_fail_percent", v, false, ud);
	}
	LONG_SETTING(healthy_deadline, true)
	LONG_SETTING(progress_deadline, true)
	LONG_SETTING(min_healthy_time, true)
	if (p->auto_revert)
		fn("auto_revert", NULL, false, ud);
	LONG_SETTING(canary, false)
	if (p->auto_promote)
		fn("auto_promote", NULL, false, ud);
#undef LONG_SETTING
}

struct header_line {
	FILE *out;
	bool per_group;		/* a limit with groups: it applies per group */
	size_t n;
};

static void header_setting(const char *name, const char *value, bool seconds, void *ud)
{
	struct header_line *h = ud;
	const char *sep = h->n++ ? ", " : "";

	if (h->n == 1 && value && strcmp(value, "unlimited") == 0)
		fputs("no limit", h->out);
	else if (!value)
		fprintf(h->out, "%s%s", sep, name);
	else
		fprintf(h->out, "%s%s %s%s", sep, name, value, seconds ? "s" : "");
	if (h->n == 1 && h->per_group && strcmp(value, "unlimited") != 0)
		fputs(" per group", h->out);
}

/* The policy in one line: "max_parallel 5 per group, groups dc1 > dc2". */
static void header_policy(FILE *out, const struct render_status_options *o, const char *bold,
			  const char *reset)
{
	const struct rollout_policy *p = o->policy;

	fprintf(out, "%spolicy:%s ", bold, reset);
	if (o->policy_problem) {
		fprintf(out, "invalid (%s)\n", o->policy_problem);
		return;
	}
	if (!p) {
		fputs("none (no limit)\n", out);
		return;
	}
	struct header_line h = { .out = out, .per_group = p->n_groups > 0 };
	render_policy_walk(p, " > ", header_setting, &h);
	fputc('\n', out);
}

/* render_internal.h */

cJSON *render_json_text(const char *s)
{
	_cleanup_(freep) char *safe = NULL;

	if (!s)
		return cJSON_CreateNull();
	if (utf8_tail(s, strlen(s), &safe) < 0)
		return NULL;
	return cJSON_CreateString(safe);
}
long render_failure_budget(const struct rollout_policy *p, size_t alive)
{
	long budget = -1;

	if (p->has_max_failures)
		budget = p->max_failures;
	if (p->max_fail_percent > 0) {
		long b = (long)(p->max_fail_percent * (double)alive / 100.0 + 1e-9);
		if (budget < 0 || b < budget)
			budget = b;
	}
	return budget;
}

int render_halt_text(const struct rollout_state *s, int64_t now, struct buf *out)
{
	const struct rollout_record *h = &s->halt;
	int r;

	if (!s->halted && !s->reverted)
		return 0;
	if (s->halted)
		r = buf_adds(out, "HALTED: ");
	else
		r = buf_printf(out, "reverted to %s after %s halted: ", s->version, h->version);
	if (r < 0)
		return r;
	const char *reason = h->reason && *h->reason ? h->reason : "no reason recorded";
	if ((r = render_sanitize(reason, strlen(reason), RENDER_LINE, out)) < 0)
		return r;
	if (h->host || h->time > 0) {
		if ((r = buf_adds(out, " (")) < 0 ||
		    (h->host && (r = buf_printf(out, "by %s%s", h->host, h->time > 0 ? " " : "")) < 0) ||
		    (h->time > 0 && ((r = buf_adds(out, "at ")) < 0 ||
				     (r = render_clock(h->time, now, out)) < 0)) ||
		    (r = buf_adds(out, ")")) < 0)
			return r;
	}
	if (s->halted && h->reverted_to && (r = buf_printf(out, ", reverted to %s", h->reverted_to)) < 0)
		return r;
	return 0;
}

int render_progress(const struct fleet_progress *p, const char *what, size_t width,
		    struct buf *out)
{
	_cleanup_(buf_releasep) struct buf line = BUF_INIT;
	int r;

	if ((r = buf_printf(&line, "%zu/%zu %s", p->have, p->want, what)) < 0 ||
	    (p->states &&
	     (r = buf_printf(&line, ", %zu failed, %zu waiting", p->failed, p->waiting)) < 0))
		return r;
	if (p->halted) {
		if ((r = buf_adds(&line, ", halted")) < 0 ||
		    (*p->halted && ((r = buf_adds(&line, ": ")) < 0 ||
				    (r = render_sanitize(p->halted, strlen(p->halted), RENDER_LINE,
							 &line)) < 0)) ||
		    (p->reverted_to && (r = buf_adds(&line, ", reverted to ")) < 0) ||
		    (p->reverted_to && (r = render_sanitize(p->reverted_to, strlen(p->reverted_to),
							    RENDER_LINE, &line)) < 0))
			return r;
	}
	if (p->retrying &&
	    ((r = buf_adds(&line, "; etcd: ")) < 0 ||
	     (r = render_sanitize(p->retrying, strlen(p->retrying), RENDER_LINE, &line)) < 0 ||
	     (r = buf_adds(&line, ", retrying")) < 0))
		return r;
	if (width == 0)
		return buf_add(out, line.data, line.len);
	return detail_cell(NULL, buf_str(&line), width, out);
}

/* The rollout's safety state, a line each when there is something to say:
 * "rollout: HALTED: ..." or "rollout: reverted to v41 after v42 halted: ...",
 * "canary: 2/3 done, waiting for promote", "failures: 1 failed of budget 2". */
static int header_rollout(const struct fleet_view *v, FILE *out,
			  const struct render_status_options *o, size_t alive)
{
	const struct rollout_state *s = o->rollout;
	const struct rollout_policy *p = o->policy;
	const char *bold = o->color ? ANSI_BOLD : "", *reset = o->color ? ANSI_RESET : "";
	int r;

	if (!s || !s->version || !v->current_version)
		return 0;
	if (s->halted || s->reverted) {
		_cleanup_(buf_releasep) struct buf text = BUF_INIT;
		if ((r = render_halt_text(s, o->now, &text)) < 0)
			return r;
		fprintf(out, "%srollout:%s %s%s%s\n", bold, reset,
			s->halted && o->color ? ANSI_RED ANSI_BOLD : "", buf_str(&text),
			s->halted && o->color ? ANSI_RESET : "");
	}
	if ((p && p->canary > 0) || s->promoted || s->canaries_done > 0) {
		fprintf(out, "%scanary:%s ", bold, reset);
		if (p && p->canary > 0)
			fprintf(out, "%zu/%ld done", s->canaries_done, p->canary);
		else
			fprintf(out, "%zu done", s->canaries_done);
		if (s->promoted)
			fputs(", promoted\n", out);
		else if (p && p->canary > 0 && s->canaries_done >= (size_t)p->canary)
			fprintf(out, ", waiting for %s\n", p->auto_promote ? "auto_promote" : "promote");
		else
			fputs(", waiting for the canaries\n", out);
	}
	long budget = p ? render_failure_budget(p, alive) : -1;
	if (budget >= 0) {
		fprintf(out, "%sfailures:%s %zu failed of budget %ld", bold, reset, s->failed, budget);
		if (p->max_fail_percent > 0)
			fprintf(out, " (max_fail_percent %g of %zu alive%s)", p->max_fail_percent,
				alive, p->has_max_failures ? ", max_failures" : "");
		fputc('\n', out);
	} else if (s->failed > 0) {
		fprintf(out, "%sfailures:%s %zu failed\n", bold, reset, s->failed);
	}
	return 0;
}

/* What an operator reads first, at the top (status --watch keeps it on
 * screen): the desired version, the policy, progress per group, the counts
 * that need attention, and when etcd was last heard from. */
static int table_header(const struct fleet_view *v, FILE *out,
			const struct render_status_options *o)
{
	struct state_counts sc;
	const char *bold = o->color ? ANSI_BOLD : "", *reset = o->color ? ANSI_RESET : "";
	int r;

	count_states(v, &sc);
	if (o->banner)
		fprintf(out, "%s%s%s\n", o->color ? ANSI_RED ANSI_BOLD : "", o->banner, reset);
	fprintf(out, "%sdesired version:%s %s", bold, reset,
		v->current_version ? v->current_version : "none");
	if (v->previous_version)
		fprintf(out, " (previous %s)", v->previous_version);
	fputc('\n', out);
	if (o->show_policy)
		header_policy(out, o, bold, reset);
	if ((r = header_rollout(v, out, o, sc.alive)) < 0)
		return r;
	if ((r = header_progress(v, out, o, bold, reset)) < 0)
		return r;
	fprintf(out, "%shosts:%s %zu, behind %zu, alive %zu, unaccounted %zu", bold, reset, v->n,
		sc.behind, sc.alive, sc.unaccounted);
	if (sc.paused)
		fprintf(out, ", paused %zu", sc.paused);
	fprintf(out, "; failed %zu, waiting %zu\n", sc.failed, sc.waiting);
	if (o->heard)
		fprintf(out, "%s\n", o->heard);
	return 0;
}

static int table_totals(const struct fleet_view *v, FILE *out, bool color)
{
	struct version_count *versions = NULL;
	struct state_counts sc;
	size_t n_versions = 0, width = strlen("(none)");
	const char *bold = color ? ANSI_BOLD : "", *reset = color ? ANSI_RESET : "";
	int r;

	r = count_versions(v, &versions, &n_versions);
	if (r < 0)
		return r;
	count_states(v, &sc);

	fprintf(out, "%sby running version:%s%s\n", bold, reset, n_versions ? "" : " -");
	for (size_t i = 0; i < n_versions; i++)
		if (versions[i].version && strlen(versions[i].version) > width)
			width = strlen(versions[i].version);
	for (size_t i = 0; i < n_versions; i++) {
		const char *name = versions[i].version ? versions[i].version : "(none)";
		bool desired = v->current_version && versions[i].version &&
			       strcmp(versions[i].version, v->current_version) == 0;
		fprintf(out, "  %-*s  %zu%s\n", (int)width, name, versions[i].count,
			desired ? "  (desired)" : "");
	}
	free(versions);

	print_state_line(out, "puppet:", sc.puppet, color);
	print_state_line(out, "validation:", sc.validation, color);
	return 0;
}

int render_status_view(const struct fleet_view *v, FILE *out,
		       const struct render_status_options *o)
{
	int r = table_header(v, out, o);
	if (r < 0)
		return r;
	if (!o->summary) {
		fputc('\n', out);
		if ((r = table_rows(v, out, o)) < 0)
			return r;
	}
	fputc('\n', out);
	if ((r = table_totals(v, out, o->color)) < 0)
		return r;
	return render_stream_status(out);
}

int render_status_table(const struct fleet_view *v, FILE *out, bool color, int64_t now)
{
	struct render_status_options o = { .width = TABLE_WIDTH, .color = color, .now = now };
	return render_status_view(v, out, &o);
}

/* --- JSON ------------------------------------------------------------------------ */

static cJSON *json_string_or_null(const char *s)
{
	return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static cJSON *json_state(enum status_state s)
{
	return json_string_or_null(s == STATE_INVALID ? NULL : status_state_name(s));
}

/* Adds item to obj under name; false (and item freed) when either is missing. */
bool render_json_add(cJSON *obj, const char *name, cJSON *item)
{
	if (!item)
		return false;
	if (!cJSON_AddItemToObject(obj, name, item)) {
		cJSON_Delete(item);
		return false;
	}
	return true;
}

static cJSON *json_host(const struct host_view *h)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj ||
	    !render_json_add(obj, "host", cJSON_CreateString(h->host)) ||
	    !render_json_add(obj, "running_version", json_string_or_null(h->running_version)) ||
	    !render_json_add(obj, "puppet", json_state(h->puppet)) ||
	    !render_json_add(obj, "puppet_exit_code", cJSON_CreateNumber(h->puppet_exit_code)) ||
	    !render_json_add(obj, "validation", json_state(h->validation)) ||
	    !render_json_add(obj, "provisioned", json_state(h->provisioned)) ||
	    !render_json_add(obj, "alive", cJSON_CreateBool(h->alive)) ||
	    !render_json_add(obj, "alive_version", json_string_or_null(h->alive_version)) ||
	    !render_json_add(obj, "group", json_string_or_null(h->group)) ||
	    !render_json_add(obj, "changed", cJSON_CreateNumber((double)h->changed)) ||
	    !render_json_add(obj, "detail", json_string_or_null(h->detail)) ||
	    !render_json_add(obj, "paused", json_string_or_null(h->paused)) ||
	    !render_json_add(obj, "attempts", cJSON_CreateNumber((double)h->attempts)) ||
	    !render_json_add(obj, "first_failure", cJSON_CreateNumber((double)h->first_failure)) ||
	    !render_json_add(obj, "wait", json_string_or_null(h->wait)))
		return NULL;
	return TAKE_PTR(obj);
}

/* The rollout's safety state: {"version","trigger","halted","reverted",
 * "halt":{"version","trigger","time","host","reason","reverted_to","failed"}
 * or null,"promoted","failed","canaries_done"}. */
cJSON *render_json_rollout(const struct rollout_state *s)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	const struct rollout_record *h = &s->halt;

	if (!obj ||
	    !render_json_add(obj, "version", json_string_or_null(s->version)) ||
	    !render_json_add(obj, "trigger", cJSON_CreateNumber((double)s->trigger)) ||
	    !render_json_add(obj, "halted", cJSON_CreateBool(s->halted)) ||
	    !render_json_add(obj, "reverted", cJSON_CreateBool(s->reverted)))
		return NULL;
	if (s->halted || s->reverted) {
		cJSON *halt = cJSON_AddObjectToObject(obj, "halt");
		if (!halt ||
		    !render_json_add(halt, "version", json_string_or_null(h->version)) ||
		    !render_json_add(halt, "trigger", cJSON_CreateNumber((double)h->trigger)) ||
		    !render_json_add(halt, "time", cJSON_CreateNumber((double)h->time)) ||
		    !render_json_add(halt, "host", json_string_or_null(h->host)) ||
		    !render_json_add(halt, "reason", json_string_or_null(h->reason)) ||
		    !render_json_add(halt, "reverted_to", json_string_or_null(h->reverted_to)) ||
		    !render_json_add(halt, "failed", cJSON_CreateNumber((double)h->failed)))
			return NULL;
	} else if (!render_json_add(obj, "halt", cJSON_CreateNull())) {
		return NULL;
	}
	if (!render_json_add(obj, "promoted", cJSON_CreateBool(s->promoted)) ||
	    !render_json_add(obj, "failed", cJSON_CreateNumber((double)s->failed)) ||
	    !render_json_add(obj, "canaries_done", cJSON_CreateNumber((double)s->canaries_done)))
		return NULL;
	return TAKE_PTR(obj);
}

static cJSON *json_state_counts(const size_t *counts)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();

	if (!obj)
		return NULL;
	for (int s = 0; s < _STATE_MAX; s++) {
		const char *name = status_state_name((enum status_state)s);
		if (counts[s] && !render_json_add(obj, name, cJSON_CreateNumber((double)counts[s])))
			return NULL;
	}
	if (counts[_STATE_MAX] && !render_json_add(obj, "none", cJSON_CreateNumber((double)counts[_STATE_MAX])))
		return NULL;
	return TAKE_PTR(obj);
}

static cJSON *json_totals(const struct fleet_view *v)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	_cleanup_(freep) struct version_count *versions = NULL;
	size_t n_versions = 0;
	struct state_counts sc;
	cJSON *by_version;

	if (!obj || count_versions(v, &versions, &n_versions) < 0)
		return NULL;
	count_states(v, &sc);
	if (!render_json_add(obj, "hosts", cJSON_CreateNumber((double)v->n)) ||
	    !render_json_add(obj, "behind", cJSON_CreateNumber((double)sc.behind)) ||
	    !render_json_add(obj, "alive", cJSON_CreateNumber((double)sc.alive)) ||
	    !render_json_add(obj, "unaccounted", cJSON_CreateNumber((double)sc.unaccounted)) ||
	    !render_json_add(obj, "paused", cJSON_CreateNumber((double)sc.paused)))
		return NULL;
	by_version = cJSON_AddObjectToObject(obj, "versions");
	if (!by_version)
		return NULL;
	/* hosts under no version get a field of their own: any key inside
	 * "versions" could be a real version's name */
	size_t unversioned = 0;
	for (size_t i = 0; i < n_versions; i++) {
		if (!versions[i].version) {
			unversioned = versions[i].count;
			continue;
		}
		if (!render_json_add(by_version, versions[i].version,
			      cJSON_CreateNumber((double)versions[i].count)))
			return NULL;
	}
	if (!render_json_add(obj, "unversioned", cJSON_CreateNumber((double)unversioned)))
		return NULL;
	if (!render_json_add(obj, "puppet", json_state_counts(sc.puppet)) ||
	    !render_json_add(obj, "validation", json_state_counts(sc.validation)))
		return NULL;
	return TAKE_PTR(obj);
}

int render_json_emit(cJSON *obj, FILE *out)
{
	_cleanup_(freep) char *text = cJSON_PrintUnformatted(obj);
	if (!text)
		return -ENOMEM;
	fputs(text, out);
	fputc('\n', out);
	return render_stream_status(out);
}

int render_status_json(const struct fleet_view *v, const struct rollout_state *rollout,
		       FILE *out)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = cJSON_CreateObject();
	cJSON *hosts;

	if (!obj ||
	    !render_json_add(obj, "current_version", json_string_or_null(v->current_version)) ||
	    !render_json_add(obj, "previous_version", json_string_or_null(v->previous_version)) ||
	    !render_json_add(obj, "revision", cJSON_CreateNumber((double)v->revision)) ||
	    (rollout && !render_json_add(obj, "rollout", render_json_rollout(rollout))))
		return -ENOMEM;
	hosts = cJSON_AddArrayToObject(obj, "hosts");
	if (!hosts)
		return -ENOMEM;
	for (size_t i = 0; i < v->n; i++) {
		cJSON *h = json_host(&v->hosts[i]);
		if (!h || !cJSON_AddItemToArray(hosts, h)) {
			cJSON_Delete(h);
			return -ENOMEM;
		}
	}
	if (!render_json_add(obj, "totals", json_totals(v)))
		return -ENOMEM;
	return render_json_emit(obj, out);
}

/* --- text from outside ---------------------------------------------------------- */

static int add_escaped(struct buf *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = buf_printf(out, "\\x%02x", p[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

int render_sanitize(const char *text, size_t len, enum render_text mode, struct buf *out)
{
	const unsigned char *p = (const unsigned char *)text, *end = p + len;
	int r = 0;

	while (p < end && r >= 0) {
		uint32_t cp = 0;
		size_t n = utf8_sequence(p, (size_t)(end - p), &cp);
		bool control = n && (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f));

		if (n && !control) {
			r = buf_add(out, p, n);
		} else if (mode == RENDER_CELL) {
			r = buf_addc(out, n ? ' ' : '?');
		} else if (n && cp == '\n') {
			r = mode == RENDER_BLOCK ? buf_addc(out, '\n') : buf_adds(out, "\\n");
		} else if (n && cp == '\t') {
			r = mode == RENDER_BLOCK ? buf_addc(out, '\t') : buf_adds(out, "\\t");
		} else {
			r = add_escaped(out, p, n ? n : 1);
		}
		p += n ? n : 1;
	}
	return r;
}
