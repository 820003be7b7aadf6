/*
 * node.c — the node of node.h: registration, sync and watches, the run state
 * machine, the services hook, reload and stop, all on one sd-event loop.
 *
 * How the pieces meet.  Every wait is an event source: the lease keepalive, the
 * resync retry, the catalog debounce, splay and backoff are timers; hooks are
 * child, pipe and timer sources (hook.c); watches are curl streams driven by the
 * etcd client.  Nothing polls etcd.  Unary etcd requests are blocking calls,
 * each bounded by the request timeout: the loop stalls for at most that long,
 * which keeps every decision a straight line of code.
 *
 * Decisions happen in one place, node_evaluate(), run from a deferred event
 * source: watch callbacks only record what they saw and schedule an
 * evaluation, so that a burst of events gives one decision, and no decision
 * (which may stop or start watches) runs inside a watch's own callback.  node_evaluate() looks at the desired version,
 * the local version, the last validation, pauses, dependencies and the rollout
 * slot, and moves the state machine with node_set_state(), which also logs the
 * change and tells systemd (STATUS=).  A run in progress is never interrupted
 * by a change of the desired version: it finishes, and the next evaluation
 * starts a run for the new version.
 *
 * What an error means.  A failed or implausible read of current_version never
 * starts a run (desired_known stays false); a failed read of the catalog never
 * touches the hiera file.  Any watch error, compaction included, leads to a
 * full resync: read everything again at one revision, write the hiera file (a
 * changed catalog runs the services hook), and watch again from there.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <cjson/cJSON.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "buf.h"
#include "cleanup.h"
#include "config.h"
#include "etcd.h"
#include "fleet.h"
#include "hiera.h"
#include "hook.h"
#include "log.h"
#include "metrics.h"
#include "netif.h"
#include "node.h"
#include "options.h"
#include "schema.h"

#define USEC_PER_SEC 1000000ULL
/* Retry of a failed registration or sync: doubling from 1 s up to this. */
#define RESYNC_MAX_SEC 30
/* How long SIGTERM waits for running hooks before killing them. */
#define STOP_GRACE_USEC (HOOK_KILL_GRACE_USEC + 5 * USEC_PER_SEC)

static const char *const node_state_names[_NODE_STATE_MAX] = {
	[NODE_STARTING] = "starting",
	[NODE_IDLE] = "idle",
	[NODE_PAUSED] = "paused",
	[NODE_WAIT_DEPENDENCIES] = "wait-dependencies",
	[NODE_WAIT_GROUP] = "wait-group",
	[NODE_WAIT_SLOT] = "wait-slot",
	[NODE_SPLAY] = "splay",
	[NODE_RUN_UPGRADE] = "run-upgrade",
	[NODE_RUN_CONFIG] = "run-config",
	[NODE_RUN_VALIDATE] = "run-validate",
	[NODE_BACKOFF] = "backoff",
	[NODE_STOPPING] = "stopping",
};

const char *node_state_name(enum node_state s)
{
	if ((unsigned)s >= _NODE_STATE_MAX)
		return "invalid";
	return node_state_names[s];
}

struct node {
	sd_event *event;
	struct options_resolved opt;	/* owns the config, endpoints, hostname */
	const struct global_options *global;
	bool once;
	int exit_code;

	struct etcd_client *etcd;
	struct fleet fleet;
	const char *host;

	enum node_state state;
	char *status;			/* the STATUS= text last sent */

	/* lease */
	int64_t lease;
	bool registered;
	bool keys_lost;			/* a new lease whose keys are not all put */
	sd_event_source *keepalive;

	/* sync and watches */
	bool synced;			/* the first sync is done (READY=1 sent) */
	bool desired_known;		/* false: unread, or read failed/implausible */
	char *desired;			/* NULL: no desired version set */
	struct catalog catalog;
	struct etcd_watch *w_version, *w_services, *w_pause, *w_holders;
	struct etcd_watch *w_stage[3];	/* running_version/, alive/, policy: waiting for a group */
	sd_event_source *resync;
	unsigned resync_failures;
	bool paused;
	char *pause_reason;
	bool pause_dirty;
	sd_event_source *debounce;
	uint64_t debounce_first;

	/* the eventually consistent run */
	unsigned hiera_gen;		/* bumped whenever the hiera file changed */
	unsigned services_gen;		/* hiera_gen the services hook last covered */
	unsigned services_running_gen;
	unsigned config_gen;		/* hiera_gen when the config hook started */
	struct hook *services_hook;

	/* the consistent run */
	sd_event_source *evaluate;
	sd_event_source *run_timer;	/* splay or backoff */
	sd_event_source *once_deadline;
	struct hook *run_hook;
	char *run_version;
	char *run_previous;
	char *local;			/* the local version, NULL when none */
	bool validation_failed;
	bool rerun;			/* an interrupted run must be repeated */
	bool splay_done;
	unsigned failures;
	char *pending_detail;		/* what puppet/pending says now */
	char *hiera_error;		/* why the hiera file could not be written */
	char **published;		/* services published under the lease */
	bool services_healthy;
	char *running_published;	/* running_version/V/HOST we put (or owe) */
	bool running_unwritten;		/* ...but the put failed: retried when idle */
	bool holding;			/* rollout/holders/HOST is ours */
	bool has_slot;

	/* metrics (paths.metrics_file) */
	struct metrics_hook hook_metrics[4];	/* upgrade, config, validate, services */
	uint64_t hook_started[4];		/* CLOCK_MONOTONIC µs, 0: not running */
	uint64_t lease_regrants;

	/* stop */
	bool stopping;			/* no new work: stopping or --once ending */
	bool stop_requested;		/* node_stop() was called */
	sd_event_source *stop_timer;
};

/* What node_take_slot() says the node waits for. */
struct slot_wait {
	char *group;		/* an earlier group still behind, or NULL */
	size_t behind;		/* how many of its alive hosts */
	long limit;		/* else: the slots of the node's stage... */
	size_t holders;		/* ...and how many hosts of its stage want one */
};

static void node_schedule_evaluate(struct node *n);
static void node_unwatch_stage(struct node *n);
static void node_write_metrics(struct node *n);
static void node_schedule_resync(struct node *n, uint64_t delay_usec);
static void node_try_services(struct node *n);
static char *node_services_marker(struct node *n);
static void node_finish_stop(struct node *n);
static void node_once_finish(struct node *n, int code);

/* --- small helpers --------------------------------------------------------------- */

static uint64_t random_u64(void)
{
	uint64_t v;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = ((uint64_t)rand() << 32) ^ (uint64_t)rand() ^ (uint64_t)time(NULL);
	return v;
}

/* A uniformly random delay in [lo, hi] microseconds. */
static uint64_t random_between(uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + random_u64() % (hi - lo + 1);
}

static uint64_t sec_to_usec(double s)
{
	return s <= 0 ? 0 : (uint64_t)(s * (double)USEC_PER_SEC);
}

static void set_str(char **p, const char *s)
{
	char *copy = s ? strdup(s) : NULL;
	free(*p);
	*p = copy;
}

static bool str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static const char *or_none(const char *s)
{
	return s ? s : "none";
}

/* (Re)arms *s as a one-shot monotonic timer delay_usec from now. */
static int timer_arm(struct node *n, sd_event_source **s, uint64_t delay_usec,
		     sd_event_time_handler_t fn)
{
	*s = sd_event_source_disable_unref(*s);
	return sd_event_add_time_relative(n->event, s, CLOCK_MONOTONIC, delay_usec, 0, fn, n);
}

static void timer_cancel(sd_event_source **s)
{
	*s = sd_event_source_disable_unref(*s);
}

/* --- state -------------------------------------------------------------------------- */

/*
 * The one function that moves the state machine.  status is the human line for
 * STATUS= and the journal ("running config for v8"); a change of either is
 * logged once, so the journal tells the node's story without repeating it.
 */
static void node_set_state(struct node *n, enum node_state state, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void node_set_state(struct node *n, enum node_state state, const char *fmt, ...)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	(void)buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (state == n->state && str_eq(buf_str(&b), n->status))
		return;
	if (state != n->state)
		log_fields(LOG_INFO, n->run_version ? n->run_version : n->desired, NULL,
			   "state %s -> %s: %s", node_state_name(n->state), node_state_name(state),
			   buf_str(&b));
	else
		log_debug("state %s: %s", node_state_name(state), buf_str(&b));
	n->state = state;
	set_str(&n->status, buf_str(&b));
	(void)sd_notifyf(false, "STATUS=%s", buf_str(&b));
	node_write_metrics(n);
}

enum node_state node_get_state(const struct node *n) { return n->state; }
int node_exit_code(const struct node *n) { return n->exit_code; }

/* --- metrics ------------------------------------------------------------------------ */

enum { HOOK_M_UPGRADE, HOOK_M_CONFIG, HOOK_M_VALIDATE, HOOK_M_SERVICES, _HOOK_M_MAX };

static const char *const hook_metric_names[_HOOK_M_MAX] = {
	"upgrade", "config", "validate", "services",
};

static size_t hook_metric_index(const char *name)
{
	for (size_t i = 0; i < _HOOK_M_MAX; i++)
		if (strcmp(hook_metric_names[i], name) == 0)
			return i;
	return HOOK_M_SERVICES;
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mono_now(struct node *n)
{
	uint64_t usec = 0;
	(void)sd_event_now(n->event, CLOCK_MONOTONIC, &usec);
	return usec;
}

/*
 * Rewrites paths.metrics_file (when set): called on every change of state or
 * status line and at every hook's end — the moments its contents change — so
 * no timer is needed.  file_write_atomic() leaves an unchanged file alone.
 */
static void node_write_metrics(struct node *n)
{
	const char *path = n->opt.config->metrics_file;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	bool changed;
	int r;

	if (!path || !*path)
		return;
	struct metrics m = {
		.desired_version = n->desired_known ? n->desired : NULL,
		.local_version = n->local,
		.hooks = n->hook_metrics,
		.n_hooks = _HOOK_M_MAX,
		.catalog_entries = n->catalog.n,
		.etcd_reconnects = etcd_client_reconnects(n->etcd),
		.lease_regrants = n->lease_regrants,
		.states = node_state_names,
		.n_states = _NODE_STATE_MAX,
		.state = (size_t)n->state,
	};
	r = metrics_render(&m, &out);
	if (r >= 0)
		r = file_write_atomic(path, out.data, out.len, 0644, &changed);
	if (r < 0)
		log_warnx("cannot write metrics file '%s': %s", path, strerror(-r));
}

static void node_hook_started(struct node *n, const char *name)
{
	n->hook_started[hook_metric_index(name)] = mono_now(n);
}

/* Records a hook's end for the metrics (and writes them). */
static void node_hook_ended(struct node *n, const char *name, const struct hook_result *res)
{
	size_t i = hook_metric_index(name);
	struct metrics_hook *h = &n->hook_metrics[i];
	uint64_t now = mono_now(n);

	h->ran = true;
	h->exit_code = res->signal || res->timed_out ? -1 : res->exit_code;
	h->duration = n->hook_started[i] && now >= n->hook_started[i]
			      ? (double)(now - n->hook_started[i]) / (double)USEC_PER_SEC : 0;
	h->time = wall_now();
	n->hook_started[i] = 0;
	node_write_metrics(n);
}

/* --- local version ----------------------------------------------------------------- */

static void node_read_local(struct node *n)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	int r = file_read_all(n->opt.local_version_file, &b);
	size_t len;

	free(n->local);
	n->local = NULL;
	if (r == -ENOENT)
		return;
	if (r < 0) {
		log_warnx("cannot read local version file '%s': %s, taking none",
			  n->opt.local_version_file, strerror(-r));
		return;
	}
	len = b.len;
	while (len > 0 && (b.data[len - 1] == '\n' || b.data[len - 1] == ' ' ||
			   b.data[len - 1] == '\r' || b.data[len - 1] == '\t'))
		len--;
	if (len == 0)
		return;
	b.data[len] = '\0';
	b.len = len;
	if (strlen(b.data) != len || !schema_name_valid(b.data)) {
		log_warnx("local version file '%s' holds no valid version, taking none",
			  n->opt.local_version_file);
		return;
	}
	n->local = buf_detach(&b);
}

static int node_write_local(struct node *n, const char *version)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	bool changed;
	int r;

	if ((r = buf_printf(&b, "%s\n", version)) < 0)
		return r;
	r = file_write_atomic(n->opt.local_version_file, b.data, b.len, 0644, &changed);
	if (r < 0)
		return r;
	set_str(&n->local, version);
	return 0;
}

/* --- services of this node ----------------------------------------------------------- */

static bool strv_contains(char **v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static int strv_push(char ***v, size_t *n, const char *s)
{
	char *copy = strdup(s);
	char **nv;
	if (!copy)
		return -ENOMEM;
	nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv) {
		free(copy);
		return -ENOMEM;
	}
	nv[(*n)++] = copy;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

/* Keeps the names of a profile directory that are not hidden (scandir filter). */
static int profile_entry_visible(const struct dirent *de)
{
	return de->d_name[0] != '.';
}

/* The services this node offers: node.services of the config, then every line
 * of the profile list file (written by Puppet during the config run), then
 * every file name in node.profile_dir (orchestrate::profile's one file per
 * service), like publish_service's defaults. */
static int node_services(struct node *n, char ***ret)
{
	_cleanup_(strv_freep) char **v = NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	const struct config *cfg = n->opt.config;
	size_t count = 0;
	int r;

	for (size_t i = 0; cfg->services && cfg->services[i]; i++)
		if (!strv_contains(v, cfg->services[i]) &&
		    (r = strv_push(&v, &count, cfg->services[i])) < 0)
			return r;
	if (cfg->profile_list && (r = file_read_all(cfg->profile_list, &b)) >= 0) {
		char *save = NULL;
		for (char *line = strtok_r(b.data, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save)) {
			line += strspn(line, " \t\r");
			size_t l = strcspn(line, " \t\r#");
			line[l] = '\0';
			if (!*line)
				continue;
			if (!schema_name_valid(line)) {
				log_warnx("profile list '%s': invalid service name '%s': %s, ignoring",
					  cfg->profile_list, line, schema_name_problem(line));
				continue;
			}
			if (!strv_contains(v, line) && (r = strv_push(&v, &count, line)) < 0)
				return r;
		}
	} else if (cfg->profile_list && r != -ENOENT) {
		log_warnx("cannot read profile list '%s': %s, ignoring", cfg->profile_list,
			  strerror(-r));
	}
	if (cfg->profile_dir && *cfg->profile_dir) {
		struct dirent **names = NULL;
		int nn = scandir(cfg->profile_dir, &names, profile_entry_visible, alphasort);
		if (nn < 0 && errno != ENOENT)
			log_warn("cannot read profile directory '%s', ignoring", cfg->profile_dir);
		for (int i = 0; i < nn; i++) {
			const char *name = names[i]->d_name;
			r = 0;
			if (!schema_name_valid(name))
				log_warnx("profile directory '%s': invalid service name '%s': %s, "
					  "ignoring", cfg->profile_dir, name, schema_name_problem(name));
			else if (!strv_contains(v, name))
				r = strv_push(&v, &count, name);
			if (r < 0) {
				while (i < nn)
					free(names[i++]);
				free(names);
				return r;
			}
			free(names[i]);
		}
		free(names);
	}
	*ret = TAKE_PTR(v);
	return 0;
}

/*
 * Publishes every service of this node under the lease with healthy, and
 * withdraws the ones it published before that are no longer listed.
 */
static int node_publish_services(struct node *n, bool healthy)
{
	_cleanup_(strv_freep) char **services = NULL;
	struct catalog_entry *addrs = NULL, *found = NULL;
	size_t n_addrs = 0, n_found = 0;
	const struct config *cfg = n->opt.config;
	const char *version = n->local ? n->local : n->run_version;
	int r, ret = 0;

	if ((r = node_services(n, &services)) < 0)
		return r;
	if (cfg->n_addresses > 0) {
		addrs = calloc(cfg->n_addresses, sizeof(*addrs));
		if (!addrs)
			return -ENOMEM;
		for (size_t i = 0; i < cfg->n_addresses; i++) {
			addrs[i].iface = cfg->addresses[i].iface;
			addrs[i].address = cfg->addresses[i].address;
		}
		n_addrs = cfg->n_addresses;
	} else {
		r = netif_ipv4_addresses(&found, &n_found);
		if (r < 0) {
			log_warnx("cannot list this node's addresses: %s", strerror(-r));
			n_found = 0;
		}
		addrs = found;
		n_addrs = n_found;
	}

	for (size_t i = 0; services && services[i]; i++) {
		r = fleet_publish_service(&n->fleet, services[i], n->host, addrs, n_addrs,
					  healthy, version, n->lease);
		if (r < 0) {
			log_warnx("cannot publish service '%s': %s", services[i],
				  etcd_last_error(n->etcd));
			ret = r;
		}
	}
	for (size_t i = 0; n->published && n->published[i]; i++) {
		if (strv_contains(services, n->published[i]))
			continue;
		r = fleet_unpublish_service(&n->fleet, n->published[i], n->host);
		if (r < 0)
			log_warnx("cannot withdraw service '%s': %s", n->published[i],
				  etcd_last_error(n->etcd));
		else
			log_info("service '%s' withdrawn", n->published[i]);
	}

	if (found)
		netif_addresses_free(found, n_found);
	else
		free(addrs);
	strv_free(n->published);
	n->published = services ? TAKE_PTR(services) : calloc(1, sizeof(char *));
	n->services_healthy = healthy;
	return ret;
}

/* --- status ------------------------------------------------------------------------- */

static void node_status(struct node *n, enum status_type type, enum status_state state,
			const char *version, int exit_code, const char *detail)
{
	int r = fleet_set_status(&n->fleet, n->host, type, state, version, exit_code, detail);
	if (r < 0)
		log_warnx("cannot set status %s/%s: %s", status_type_name(type),
			  status_state_name(state), etcd_last_error(n->etcd));
}

/* --- lease and registration ---------------------------------------------------------- */

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata);

static uint64_t node_keepalive_interval(struct node *n)
{
	long ttl = n->opt.config->lease_ttl;
	uint64_t usec = sec_to_usec((double)ttl / 3.0);
	return usec < USEC_PER_SEC / 2 ? USEC_PER_SEC / 2 : usec;
}

/*
 * Puts every leased key this node owns: alive, provisioned and group (one txn
 * in fleet_register), its services, its running_version and its rollout holder.
 * Used at start and when the lease was lost.
 */
static int node_put_leased_keys(struct node *n)
{
	const struct config *cfg = n->opt.config;
	int r;

	r = fleet_register(&n->fleet, n->host, cfg->group, n->local, (long)getpid(), n->lease);
	if (r < 0)
		return r;
	if (n->published)
		(void)node_publish_services(n, n->services_healthy);
	if (n->running_published) {
		r = fleet_set_running_version(&n->fleet, n->host, n->running_published, n->lease);
		n->running_unwritten = r < 0;
		if (r < 0)
			log_warnx("cannot put running_version/%s: %s", n->running_published,
				  etcd_last_error(n->etcd));
	}
	if (n->holding &&
	    fleet_put_holder(&n->fleet, n->host, n->run_version ? n->run_version : n->desired,
			     cfg->group, n->lease) < 0)
		log_warnx("cannot put rollout holder: %s", etcd_last_error(n->etcd));
	return 0;
}

static int node_register(struct node *n)
{
	long ttl = n->once ? n->opt.config->once_ttl : n->opt.config->lease_ttl;
	int64_t lease;
	int r;

	r = etcd_lease_grant(n->etcd, ttl, &lease);
	if (r < 0)
		return r;
	n->lease = lease;
	r = node_put_leased_keys(n);
	if (r < 0)
		return r;
	n->registered = true;
	log_info("registered as '%s' with lease %llx (ttl %ld s)", n->host,
		 (unsigned long long)lease, ttl);
	if (!n->once)
		return timer_arm(n, &n->keepalive, node_keepalive_interval(n), node_on_keepalive);
	return 0;
}

static int node_on_keepalive(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	uint64_t next = node_keepalive_interval(n);
	int64_t ttl = 0;
	int r;

	r = etcd_lease_keepalive(n->etcd, n->lease, &ttl);
	if (r < 0) {
		/* Try again sooner: two more misses still fit in the TTL. */
		log_warnx("lease keepalive failed: %s", etcd_last_error(n->etcd));
		next = next / 3 < USEC_PER_SEC ? next / 3 : USEC_PER_SEC;
		if (next < USEC_PER_SEC / 4)
			next = USEC_PER_SEC / 4;
	} else if (ttl <= 0) {
		int64_t lease;
		log_warnx("lease %llx is gone, granting a new one and registering again",
			  (unsigned long long)n->lease);
		r = etcd_lease_grant(n->etcd, n->opt.config->lease_ttl, &lease);
		if (r < 0) {
			log_warnx("cannot grant a lease: %s", etcd_last_error(n->etcd));
			next = USEC_PER_SEC;
		} else {
			n->lease = lease;
			n->keys_lost = true;
			n->lease_regrants++;
		}
	}
	if (n->keys_lost && r >= 0) {
		/* Until every leased key is back under the new lease, try again
		 * at each tick. */
		if (node_put_leased_keys(n) < 0) {
			log_warnx("cannot register again: %s", etcd_last_error(n->etcd));
			next = USEC_PER_SEC;
		} else {
			n->keys_lost = false;
			log_info("registered again with lease %llx", (unsigned long long)n->lease);
		}
	}
	(void)timer_arm(n, &n->keepalive, next, node_on_keepalive);
	return 0;
}

/* --- hiera file ----------------------------------------------------------------------- */

/* Renders the catalog and writes the hiera file; a change bumps hiera_gen. */
static int node_on_debounce(sd_event_source *s, uint64_t usec, void *userdata);

static void node_write_hiera(struct node *n)
{
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	const char *path = n->opt.config->hiera_services;
	bool changed = false;
	int r;

	if (!path || !*path)
		return;
	r = hiera_render(&n->catalog, &out);
	if (r < 0) {
		log_warnx("cannot render the catalog: %s", strerror(-r));
		return;
	}
	r = file_write_atomic(path, out.data, out.len, 0644, &changed);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf why = BUF_INIT;
		(void)buf_printf(&why, "cannot write hiera file '%s': %s", path, strerror(-r));
		if (!str_eq(n->hiera_error, buf_str(&why)))
			log_warnx("%s, keeping the old one", buf_str(&why));
		set_str(&n->hiera_error, buf_str(&why));
		/* A full or read-only disk heals without a catalog change:
		 * read and write again a little later. */
		if (!n->debounce && !n->stopping)
			(void)timer_arm(n, &n->debounce,
					sec_to_usec(n->opt.config->quiet) + USEC_PER_SEC,
					node_on_debounce);
		return;
	}
	if (n->hiera_error) {
		log_info("hiera file '%s' written again", path);
		set_str(&n->hiera_error, NULL);
	}
	if (changed) {
		n->hiera_gen++;
		log_info("hiera file '%s' updated (catalog revision %lld, %zu entries)", path,
			 (long long)n->catalog.revision, n->catalog.n);
	}
}

/* --- watches -------------------------------------------------------------------------- */

static void node_stop_watches(struct node *n)
{
	n->w_version = etcd_watch_stop(n->w_version);
	n->w_services = etcd_watch_stop(n->w_services);
	n->w_pause = etcd_watch_stop(n->w_pause);
	n->w_holders = etcd_watch_stop(n->w_holders);
	node_unwatch_stage(n);
}

static void node_on_watch_error(struct etcd_watch *w, int error, int64_t compact, void *userdata)
{
	struct node *n = userdata;
	if (error == -ESTALE)
		log_warnx("watch revision compacted (compacted at %lld), reading everything again",
			  (long long)compact);
	else
		log_warnx("watch failed: %s, reading everything again", strerror(-error));
	/* Stopping the watches here would re-enter libcurl: leave it to the
	 * resync, which runs from the loop. */
	node_schedule_resync(n, error == -ESTALE ? 0 : USEC_PER_SEC);
}

static int node_on_version_events(const struct etcd_event *ev, size_t count, int64_t revision,
				  void *userdata)
{
	struct node *n = userdata;
	for (size_t i = 0; i < count; i++) {
		const struct etcd_kv *kv = &ev[i].kv;
		if (ev[i].type == ETCD_EVENT_DELETE) {
			log_warnx("current_version was deleted: no desired version");
			set_str(&n->desired, NULL);
			n->desired_known = true;
		} else if (!kv->value || strlen(kv->value) != kv->value_len ||
			   !schema_name_valid(kv->value)) {
			log_warnx("current_version holds an implausible value, ignoring it until it is valid");
			set_str(&n->desired, NULL);
			n->desired_known = false;
		} else if (!str_eq(n->desired, kv->value) || !n->desired_known) {
			log_fields(LOG_INFO, kv->value, NULL, "desired version is now '%s' (was '%s')",
				   kv->value, or_none(n->desired));
			set_str(&n->desired, kv->value);
			n->desired_known = true;
			/* A new version is a new target: retry at once, from the
			 * start of the backoff. */
			n->failures = 0;
			if (n->state == NODE_BACKOFF)
				timer_cancel(&n->run_timer);
		}
	}
	if (count > 0)
		node_schedule_evaluate(n);
	return 0;
}

static int node_on_debounce(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	int r;

	timer_cancel(&n->debounce);
	r = fleet_read_catalog(&n->fleet, 0, &cat);
	if (r < 0) {
		log_warnx("cannot read the catalog: %s, keeping the hiera file",
			  etcd_last_error(n->etcd));
		n->debounce_first = 0;
		(void)timer_arm(n, &n->debounce, sec_to_usec(n->opt.config->quiet) + USEC_PER_SEC,
				node_on_debounce);
		return 0;
	}
	n->debounce_first = 0;
	catalog_release(&n->catalog);
	n->catalog = cat;
	cat = (struct catalog)CATALOG_INIT;
	node_write_hiera(n);
	node_schedule_evaluate(n);
	return 0;
}

/* A catalog event: wait until the catalog has been quiet for timing.quiet, but
 * no longer than timing.quiet_max after the first event of the burst. */
static int node_on_services_events(const struct etcd_event *ev, size_t count, int64_t revision,
				   void *userdata)
{
	struct node *n = userdata;
	uint64_t now, at;

	if (count == 0)
		return 0;
	if (sd_event_now(n->event, CLOCK_MONOTONIC, &now) < 0)
		return 0;
	if (!n->debounce || n->debounce_first == 0)
		n->debounce_first = now;
	at = now + sec_to_usec(n->opt.config->quiet);
	if (at > n->debounce_first + sec_to_usec(n->opt.config->quiet_max))
		at = n->debounce_first + sec_to_usec(n->opt.config->quiet_max);
	timer_cancel(&n->debounce);
	(void)sd_event_add_time(n->event, &n->debounce, CLOCK_MONOTONIC, at, 0, node_on_debounce, n);
	return 0;
}

static int node_on_pause_events(const struct etcd_event *ev, size_t count, int64_t revision,
				void *userdata)
{
	struct node *n = userdata;
	if (count > 0) {
		n->pause_dirty = true;
		node_schedule_evaluate(n);
	}
	return 0;
}

static int node_on_holders_events(const struct etcd_event *ev, size_t count, int64_t revision,
				  void *userdata)
{
	struct node *n = userdata;
	for (size_t i = 0; i < count; i++)
		if (ev[i].type == ETCD_EVENT_DELETE) {
			node_schedule_evaluate(n);
			break;
		}
	return 0;
}

static uint64_t node_watch_idle_ms(struct node *n)
{
	long s = n->opt.config->watch_idle;
	return s > 0 ? (uint64_t)s * 1000 : 0;
}

static int node_start_watches(struct node *n, int64_t from)
{
	const char *P = n->fleet.prefix;
	_cleanup_(freep) char *kv = key_current_version(P);
	_cleanup_(freep) char *ks = key_services_dir(P);
	_cleanup_(freep) char *kp = key_pause_dir(P);
	uint64_t idle = node_watch_idle_ms(n);
	int r;

	if (!kv || !ks || !kp)
		return -ENOMEM;
	if ((r = etcd_watch_start(n->etcd, kv, false, from, idle, node_on_version_events,
				  node_on_watch_error, n, &n->w_version)) < 0 ||
	    (r = etcd_watch_start(n->etcd, ks, true, from, idle, node_on_services_events,
				  node_on_watch_error, n, &n->w_services)) < 0 ||
	    (r = etcd_watch_start(n->etcd, kp, true, from, idle, node_on_pause_events,
				  node_on_watch_error, n, &n->w_pause)) < 0)
		return r;
	return 0;
}

/* --- sync ----------------------------------------------------------------------------- */

/* At the first sync: a run this daemon was doing when it died is recorded as
 * failed and repeated; a failed validation is remembered across restarts. */
static void node_check_interrupted(struct node *n)
{
	enum status_state st = STATE_INVALID;
	if (fleet_get_status(&n->fleet, n->host, STATUS_PUPPET, &st, NULL) >= 0 &&
	    st == STATE_RUNNING) {
		log_warnx("found this host's puppet/running from an earlier run: it was interrupted");
		node_status(n, STATUS_PUPPET, STATE_FAILED, n->desired, -1, "interrupted");
		n->rerun = true;
	}
	st = STATE_INVALID;
	if (fleet_get_status(&n->fleet, n->host, STATUS_VALIDATION, &st, NULL) >= 0) {
		if (st == STATE_RUNNING) {
			node_status(n, STATUS_VALIDATION, STATE_FAILED, n->desired, -1, "interrupted");
			n->validation_failed = true;
		} else if (st == STATE_FAILED) {
			n->validation_failed = true;
		}
		n->services_healthy = st == STATE_SUCCESS;
	}
}

/*
 * Reads current_version and the catalog at one revision, the pauses, writes
 * the hiera file, and watches from the next revision.  Returns 0 or the error
 * (the caller retries).
 */
static int node_sync(struct node *n)
{
	_cleanup_(catalog_releasep) struct catalog cat = CATALOG_INIT;
	_cleanup_(freep) char *desired = NULL, *reason = NULL;
	int64_t revision = 0;
	int r, paused;

	node_stop_watches(n);
	r = fleet_current_version(&n->fleet, &desired, &revision);
	if (r < 0) {
		/* Not an answer: no run starts on what we could not read. */
		n->desired_known = false;
		return r;
	}
	r = fleet_read_catalog(&n->fleet, revision, &cat);
	if (r < 0)
		return r;
	paused = fleet_paused(&n->fleet, n->host, n->opt.config->group, &reason);
	if (paused < 0)
		return paused;

	if (!str_eq(desired, n->desired) || !n->desired_known)
		log_fields(LOG_INFO, desired, NULL, "desired version '%s', local version '%s'",
			   or_none(desired), or_none(n->local));
	set_str(&n->desired, desired);
	n->desired_known = true;
	n->paused = paused > 0;
	set_str(&n->pause_reason, reason);
	n->pause_dirty = false;
	catalog_release(&n->catalog);
	n->catalog = cat;
	cat = (struct catalog)CATALOG_INIT;
	node_write_hiera(n);

	r = node_start_watches(n, revision + 1);
	if (r < 0) {
		node_stop_watches(n);
		return r;
	}
	return 0;
}

/* Registers (once) and syncs; returns 0 or the error. */
static int node_resync(struct node *n)
{
	int r;

	if (!n->registered && (r = node_register(n)) < 0)
		return r;
	if ((r = node_sync(n)) < 0)
		return r;
	if (!n->synced) {
		n->synced = true;
		node_check_interrupted(n);
		/* The node ran its config here before: its services are
		 * offered again under the new lease. */
		if (n->local && !n->published)
			(void)node_publish_services(n, n->services_healthy);
		/* The local version is the one whose run and validation last
		 * succeeded here, and the host runs it until a new run ends:
		 * put running_version again under the new lease (the old one
		 * may have expired while the daemon was down), unless the last
		 * run was interrupted or its validation failed. */
		_cleanup_(freep) char *marker = node_services_marker(n);
		if (marker && access(marker, F_OK) == 0) {
			log_warnx("the services hook was interrupted by the last stop: running it again");
			n->hiera_gen++;
		}
		if (n->local && !n->running_published && !n->rerun && !n->validation_failed) {
			int k = fleet_set_running_version(&n->fleet, n->host, n->local, n->lease);
			set_str(&n->running_published, n->local);
			n->running_unwritten = k < 0;
			if (k < 0)
				log_warnx("cannot put running_version/%s: %s, will retry", n->local,
					  etcd_last_error(n->etcd));
		}
		if (!n->once)
			(void)sd_notify(false, "READY=1");
	}
	return 0;
}

static int node_on_resync(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	unsigned k;
	uint64_t delay;

	timer_cancel(&n->resync);
	if (n->stopping)
		return 0;
	if (node_resync(n) >= 0) {
		n->resync_failures = 0;
		node_schedule_evaluate(n);
		return 0;
	}
	/* Doubling from 1 s, capped; the last error says why. */
	k = n->resync_failures < 5 ? n->resync_failures : 5;
	delay = USEC_PER_SEC << k;
	if (delay > RESYNC_MAX_SEC * USEC_PER_SEC)
		delay = RESYNC_MAX_SEC * USEC_PER_SEC;
	n->resync_failures++;
	log_warnx("%s failed: %s, retrying in %llu s", n->registered ? "sync" : "registration",
		  etcd_last_error(n->etcd), (unsigned long long)(delay / USEC_PER_SEC));
	if (!n->synced)
		node_set_state(n, NODE_STARTING, "cannot reach etcd: %s", etcd_last_error(n->etcd));
	(void)timer_arm(n, &n->resync, delay, node_on_resync);
	return 0;
}

static void node_schedule_resync(struct node *n, uint64_t delay_usec)
{
	if (n->resync || n->stopping)
		return;
	(void)timer_arm(n, &n->resync, delay_usec, node_on_resync);
}

/* --- dependencies and the rollout slot --------------------------------------------- */

/* NULL when every dependency is met, else what is missing (caller frees). */
static char *node_missing_dependencies(struct node *n, char **ret_short)
{
	const struct config *cfg = n->opt.config;
	struct buf b = BUF_INIT, s = BUF_INIT;

	for (size_t i = 0; i < cfg->n_depends; i++) {
		const struct config_depend *d = &cfg->depends[i];
		size_t have = catalog_count_hosts(&n->catalog, d->service, d->healthy);
		if ((long)have >= d->count)
			continue;
		(void)buf_printf(&b, "%swaiting for %ld %s%s, have %zu", b.len ? "; " : "",
				 d->count, d->healthy ? "healthy " : "", d->service, have);
		(void)buf_printf(&s, "%s%ld\u00d7 %s", s.len ? ", " : "", d->count, d->service);
	}
	if (b.len == 0) {
		buf_release(&s);
		return NULL;
	}
	*ret_short = buf_detach(&s);
	return buf_detach(&b);
}

/* Gives the slot (or the place in the queue for one) back. */
static void node_drop_holder(struct node *n)
{
	n->w_holders = etcd_watch_stop(n->w_holders);
	if (!n->holding)
		return;
	_cleanup_(freep) char *key = key_rollout_holder(n->fleet.prefix, n->host);
	if (key && etcd_delete(n->etcd, key) < 0)
		log_warnx("cannot release rollout slot: %s, its lease will", etcd_last_error(n->etcd));
	else
		log_debug("rollout slot released");
	n->holding = false;
	n->has_slot = false;
}

/* Done with the rollout, or no policy: no slot, no waiting for a group. */
static void node_release_slot(struct node *n)
{
	node_drop_holder(n);
	node_unwatch_stage(n);
}

static int cmp_kv_create(const void *a, const void *b)
{
	const struct etcd_kv *x = a, *y = b;
	return (x->create_revision > y->create_revision) - (x->create_revision < y->create_revision);
}

/* The part of kv's key below a directory of dir_len bytes. */
static const char *kv_suffix(const struct etcd_kv *kv, size_t dir_len)
{
	return kv->key_len > dir_len ? kv->key + dir_len : "";
}

/* Whether a range below a directory of dir_len bytes (sorted by key, as etcd
 * returns it: byte order, which is strcmp's) holds the key dir + name. */
static bool kvs_has(const struct etcd_kv_list *l, size_t dir_len, const char *name)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(kv_suffix(&l->kvs[mid], dir_len), name);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * The node's stage in a staged rollout: the index of group in the policy's
 * groups, or n_groups — after every listed group — when the node has no group
 * or one the policy does not list (an unlisted host is never the first to get
 * an update, and never blocks a listed group).  Without groups, everyone is in
 * stage 0.
 */
static size_t policy_stage(const struct rollout_policy *p, const char *group)
{
	for (size_t i = 0; group && i < p->n_groups; i++)
		if (strcmp(p->groups[i], group) == 0)
			return i;
	return p->n_groups;
}

static char *key_group_dir(const char *P, const char *group)
{
	_cleanup_(freep) char *dir = key_groups_dir(P);
	struct buf b = BUF_INIT;
	if (!dir || buf_printf(&b, "%s%s/", dir, group) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}

/* How many hosts of alive (a range below a dir of alive_len bytes) are members
 * of group, other than skip (may be NULL); with running (not NULL), only those
 * not in it.  Reads groups/GROUP/ at revision. */
static int group_count(struct node *n, const char *group, int64_t revision,
		       const struct etcd_kv_list *alive, size_t alive_len,
		       const struct etcd_kv_list *running, size_t running_len, const char *skip,
		       size_t *ret)
{
	_cleanup_(freep) char *gdir = key_group_dir(n->fleet.prefix, group);
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list members = ETCD_KV_LIST_INIT;
	size_t count = 0;
	int r;

	if (!gdir)
		return -ENOMEM;
	r = etcd_get_prefix(n->etcd, gdir, ETCD_KEYS_ONLY, revision, &members);
	if (r < 0)
		return r;
	for (size_t i = 0; i < members.n; i++) {
		const char *host = kv_suffix(&members.kvs[i], strlen(gdir));
		if (!schema_name_valid(host) || (skip && strcmp(host, skip) == 0))
			continue;
		if (kvs_has(alive, alive_len, host) &&
		    (!running || !kvs_has(running, running_len, host)))
			count++;
	}
	*ret = count;
	return 0;
}

static int node_on_stage_events(const struct etcd_event *ev, size_t count, int64_t revision,
				void *userdata)
{
	if (count > 0)
		node_schedule_evaluate(userdata);
	return 0;
}

static void node_unwatch_stage(struct node *n)
{
	for (size_t i = 0; i < ELEMENTSOF(n->w_stage); i++)
		n->w_stage[i] = etcd_watch_stop(n->w_stage[i]);
}

/* While the node waits for an earlier group: what can end the wait is a host
 * reaching the version (running_version/), a host dying or joining (alive/), or
 * a new policy.  Watched from the revision the decision was made at. */
static int node_watch_stage(struct node *n, int64_t from)
{
	const char *P = n->fleet.prefix;
	_cleanup_(freep) char *kr = key_running_version_dir(P);
	_cleanup_(freep) char *ka = key_alive_dir(P);
	_cleanup_(freep) char *kp = key_rollout_policy(P);
	const char *keys[ELEMENTSOF(n->w_stage)] = { kr, ka, kp };
	int r;

	if (!kr || !ka || !kp)
		return -ENOMEM;
	for (size_t i = 0; i < ELEMENTSOF(n->w_stage); i++) {
		if (n->w_stage[i])
			continue;
		r = etcd_watch_start(n->etcd, keys[i], keys[i] != kp, from, node_watch_idle_ms(n),
				     node_on_stage_events, node_on_watch_error, n, &n->w_stage[i]);
		if (r < 0) {
			node_unwatch_stage(n);
			return r;
		}
	}
	return 0;
}

/*
 * Staged rollout: 1 when every alive host of the groups before this node's
 * stage runs the desired version (or there is nothing before it), 0 with the
 * first group still behind and how many of its alive hosts are, or a negative
 * code.  One pinned read: alive/ and running_version/DESIRED/ (keys only),
 * then groups/G/ of each earlier group until one is behind.
 */
static int node_stage_ready(struct node *n, const struct rollout_policy *p,
			    struct slot_wait *ret_wait, int64_t *ret_revision)
{
	const char *P = n->fleet.prefix;
	size_t stage = policy_stage(p, n->opt.config->group);
	_cleanup_(freep) char *adir = NULL, *rdir = NULL;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list alive = ETCD_KV_LIST_INIT;
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list running = ETCD_KV_LIST_INIT;
	int r;

	if (stage == 0)
		return 1;
	adir = key_alive_dir(P);
	rdir = key_running_version_version_dir(P, n->desired);
	if (!adir || !rdir)
		return -ENOMEM;
	if ((r = etcd_get_prefix(n->etcd, adir, ETCD_KEYS_ONLY, 0, &alive)) < 0 ||
	    (r = etcd_get_prefix(n->etcd, rdir, ETCD_KEYS_ONLY, alive.revision, &running)) < 0)
		return r;
	*ret_revision = alive.revision;
	for (size_t g = 0; g < stage; g++) {
		size_t behind = 0;
		r = group_count(n, p->groups[g], alive.revision, &alive, strlen(adir), &running,
				strlen(rdir), n->host, &behind);
		if (r < 0)
			return r;
		if (behind > 0) {
			if (!(ret_wait->group = strdup(p->groups[g])))
				return -ENOMEM;
			ret_wait->behind = behind;
			return 0;
		}
	}
	return 1;
}

/* max_percent of the alive hosts of the node's stage (of the fleet without
 * groups), at least 1. */
static int node_percent_limit(struct node *n, const struct rollout_policy *p, long *ret)
{
	_cleanup_(freep) char *adir = key_alive_dir(n->fleet.prefix);
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list alive = ETCD_KV_LIST_INIT;
	size_t stage = policy_stage(p, n->opt.config->group), total;
	int r;

	if (!adir)
		return -ENOMEM;
	r = etcd_get_prefix(n->etcd, adir, p->n_groups ? ETCD_KEYS_ONLY : ETCD_COUNT_ONLY, 0,
			    &alive);
	if (r < 0)
		return r;
	total = p->n_groups ? alive.n : (size_t)alive.count;
	if (stage < p->n_groups) {
		r = group_count(n, p->groups[stage], alive.revision, &alive, strlen(adir), NULL, 0,
				NULL, &total);
		if (r < 0)
			return r;
	} else {
		/* the unlisted: the alive hosts of no listed group */
		for (size_t g = 0; g < p->n_groups; g++) {
			size_t in = 0;
			r = group_count(n, p->groups[g], alive.revision, &alive, strlen(adir), NULL,
					0, NULL, &in);
			if (r < 0)
				return r;
			total -= in < total ? in : total;
		}
	}
	*ret = (long)((double)total * p->max_percent / 100.0);
	if (*ret < 1)
		*ret = 1;
	return 0;
}

/* The stage of a holder, from the group in its value (none: unlisted). */
static size_t holder_stage(const struct etcd_kv *kv, const struct rollout_policy *p)
{
	_cleanup_(cJSON_Deletep) cJSON *obj = NULL;
	const cJSON *g;

	if (p->n_groups == 0)
		return 0;
	obj = cJSON_ParseWithLength(kv->value ? kv->value : "", kv->value_len);
	g = cJSON_GetObjectItemCaseSensitive(obj, "group");
	return policy_stage(p, cJSON_IsString(g) ? g->valuestring : NULL);
}

/*
 * Takes a rollout slot when a policy is set.  Returns 1 when the node may run
 * (no policy, or its stage's turn and a slot held), 0 when it must wait — for
 * an earlier group (ret_wait->group set; watches on running_version/, alive/
 * and the policy wake it) or for a slot (a watch on holders/ wakes it on
 * deletions) — or a negative code.
 *
 * Slots are counted among the holders of the node's own stage: the first
 * max_parallel of them by create revision hold one.  Holders of other stages
 * are hosts still retrying an earlier group (which keeps this stage waiting
 * anyway) or the unlisted, which must not eat a listed group's slots.
 */
static int node_take_slot(struct node *n, struct slot_wait *ret_wait)
{
	const char *P = n->fleet.prefix;
	_cleanup_(freep) char *hdir = key_rollout_holders_dir(P);
	_cleanup_(freep) char *mine = key_rollout_holder(P, n->host);
	_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list holders = ETCD_KV_LIST_INIT;
	_cleanup_(rollout_policy_releasep) struct rollout_policy policy = { 0 };
	size_t stage, rank = 0;
	int64_t revision = 0;
	long limit = 0;
	int r;

	if (n->has_slot)
		return 1;
	if (!hdir || !mine)
		return -ENOMEM;
	r = fleet_get_policy(&n->fleet, &policy, NULL);
	if (r == -EPROTO) {
		/* An unreadable policy is taken as the most careful one. */
		log_warnx("rollout policy is not understood, taking max_parallel 1");
		policy.max_parallel = 1;
	} else if (r < 0) {
		return r;
	} else if (r == 0) {
		node_release_slot(n);
		return 1;
	}
	stage = policy_stage(&policy, n->opt.config->group);

	r = node_stage_ready(n, &policy, ret_wait, &revision);
	if (r < 0)
		return r;
	if (r == 0) {
		node_drop_holder(n);
		return node_watch_stage(n, revision + 1);
	}
	node_unwatch_stage(n);

	if (policy.max_parallel > 0)
		limit = policy.max_parallel;
	else if (policy.max_percent > 0 && (r = node_percent_limit(n, &policy, &limit)) < 0)
		return r;
	if (limit <= 0) {
		node_release_slot(n);
		return 1;	/* groups alone: the whole group at once */
	}

	if (!n->holding) {
		r = fleet_put_holder(&n->fleet, n->host, n->desired, n->opt.config->group,
				     n->lease);
		if (r < 0)
			return r;
		n->holding = true;
	}
	r = etcd_get_prefix(n->etcd, hdir, 0, 0, &holders);
	if (r < 0)
		return r;
	qsort(holders.kvs, holders.n, sizeof(*holders.kvs), cmp_kv_create);
	ret_wait->limit = limit;
	for (size_t i = 0; i < holders.n; i++) {
		if (holder_stage(&holders.kvs[i], &policy) != stage)
			continue;
		ret_wait->holders++;
		if (strcmp(holders.kvs[i].key, mine) == 0 && (long)rank < limit) {
			n->has_slot = true;
			n->w_holders = etcd_watch_stop(n->w_holders);
			log_info("rollout slot taken (%zu of %ld)", rank + 1, limit);
			return 1;
		}
		rank++;
	}
	if (!n->w_holders) {
		r = etcd_watch_start(n->etcd, hdir, true, holders.revision + 1,
				     node_watch_idle_ms(n), node_on_holders_events,
				     node_on_watch_error, n, &n->w_holders);
		if (r < 0)
			return r;
	}
	return 0;
}

/* --- the run -------------------------------------------------------------------------- */

static int node_build_env(struct node *n, const char *version, char ***ret)
{
	_cleanup_(strv_freep) char **env = NULL;
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	size_t count = 0;
	int r;

	if ((r = strv_push(&env, &count, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")) < 0)
		return r;
#define ADD(name, value)                                                      \
	do {                                                                  \
		buf_reset(&b);                                                \
		if ((r = buf_printf(&b, "%s=%s", name, value ? value : "")) < 0 || \
		    (r = strv_push(&env, &count, buf_str(&b))) < 0)            \
			return r;                                             \
	} while (0)
	ADD("ORCHESTRATE_HOST", n->host);
	ADD("ORCHESTRATE_VERSION", version);
	ADD("ORCHESTRATE_PREVIOUS_VERSION", n->run_previous ? n->run_previous : n->local);
	ADD("ORCHESTRATE_SERVICES_FILE", n->opt.config->hiera_services);
	buf_reset(&b);
	if ((r = buf_adds(&b, "ORCHESTRATE_ETCD=")) < 0)
		return r;
	for (size_t i = 0; n->opt.etcd.endpoints && n->opt.etcd.endpoints[i]; i++)
		if ((i && (r = buf_addc(&b, ',')) < 0) ||
		    (r = buf_adds(&b, n->opt.etcd.endpoints[i])) < 0)
			return r;
	if ((r = strv_push(&env, &count, buf_str(&b))) < 0)
		return r;
	/* So that a hook calling `orchestrate` talks about the same fleet. */
	if (n->opt.prefix && *n->opt.prefix)
		ADD("ORCHESTRATE_PREFIX", n->opt.prefix);
	ADD("ORCHESTRATE_LOCAL_VERSION_FILE", n->opt.local_version_file);
#undef ADD
	*ret = TAKE_PTR(env);
	return 0;
}

static void node_on_run_hook(struct hook *h, const struct hook_result *res, void *userdata);

static const char *node_hook_path(struct node *n, enum node_state which)
{
	const struct config *cfg = n->opt.config;
	switch (which) {
	case NODE_RUN_UPGRADE: return cfg->hook_upgrade;
	case NODE_RUN_CONFIG: return cfg->hook_config;
	case NODE_RUN_VALIDATE: return cfg->hook_validate;
	default: return NULL;
	}
}

static const char *node_hook_name(enum node_state which)
{
	switch (which) {
	case NODE_RUN_UPGRADE: return "upgrade";
	case NODE_RUN_CONFIG: return "config";
	case NODE_RUN_VALIDATE: return "validate";
	default: return "services";
	}
}

static void node_run_failed(struct node *n, const char *what);
static void node_config_done(struct node *n, const struct hook_result *res);
static void node_validate_done(struct node *n, const struct hook_result *res);
static void node_upgrade_done(struct node *n, const struct hook_result *res);

static void node_hook_finished(struct node *n, enum node_state which, const struct hook_result *res)
{
	switch (which) {
	case NODE_RUN_UPGRADE: node_upgrade_done(n, res); break;
	case NODE_RUN_CONFIG: node_config_done(n, res); break;
	case NODE_RUN_VALIDATE: node_validate_done(n, res); break;
	default: break;
	}
}

/* Starts the hook of state which; a hook not configured counts as success. */
static void node_run_hook(struct node *n, enum node_state which)
{
	_cleanup_(strv_freep) char **env = NULL;
	const char *path = node_hook_path(n, which);
	const char *name = node_hook_name(which);
	int r;

	node_set_state(n, which, "running %s for %s", name, n->run_version);
	if (which == NODE_RUN_CONFIG || which == NODE_RUN_UPGRADE)
		n->config_gen = n->hiera_gen;
	if (!path || !*path) {
		struct hook_result ok = { .output = "" };
		log_fields(LOG_INFO, n->run_version, name, "no %s hook configured, skipping", name);
		node_hook_finished(n, which, &ok);
		return;
	}
	r = node_build_env(n, n->run_version, &env);
	if (r >= 0)
		node_hook_started(n, name);
	if (r >= 0)
		r = hook_spawn(n->event, name, path, env, n->opt.config->hook_timeout,
			       n->run_version, node_on_run_hook, n, &n->run_hook);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf d = BUF_INIT;
		struct hook_result bad = { .exit_code = 127 };
		(void)buf_printf(&d, "cannot run %s hook '%s': %s", name, path, strerror(-r));
		log_fields(LOG_ERR, n->run_version, name, "%s", buf_str(&d));
		bad.output = buf_str(&d);
		node_hook_ended(n, name, &bad);
		node_hook_finished(n, which, &bad);
	}
}

static void node_on_run_hook(struct hook *h, const struct hook_result *res, void *userdata)
{
	struct node *n = userdata;
	enum node_state which = n->state;
	_cleanup_(freep) char *what = hook_result_describe(res);

	/* res points into the hook: free it only after the result was used. */
	_cleanup_(hook_freep) struct hook *done = TAKE_PTR(n->run_hook);

	log_fields(res->exit_code == 0 ? LOG_INFO : LOG_WARNING, n->run_version, hook_name(h),
		   "hook '%s' %s", hook_name(h), or_none(what));
	node_hook_ended(n, hook_name(h), res);
	if (n->stopping) {
		node_finish_stop(n);
		return;
	}
	node_hook_finished(n, which, res);
	/* The services hook may have waited for the config hook. */
	node_try_services(n);
}

/* "exited with status 1" and the tail of the output, for the status detail. */
static char *node_detail(const struct hook_result *res)
{
	_cleanup_(freep) char *what = hook_result_describe(res);
	struct buf b = BUF_INIT;
	const char *out = res->output ? res->output : "";
	size_t len = strlen(out), room;

	/* The detail keeps its last SCHEMA_DETAIL_MAX bytes: cut the output
	 * here so that the reason in front survives a hook that printed a lot,
	 * and never in the middle of a UTF-8 sequence. */
	(void)buf_adds(&b, or_none(what));
	room = SCHEMA_DETAIL_MAX > b.len + 1 ? SCHEMA_DETAIL_MAX - b.len - 1 : 0;
	if (len > room) {
		out += len - room;
		while (*out && ((unsigned char)*out & 0xc0) == 0x80)
			out++;
	}
	if (*out) {
		(void)buf_addc(&b, '\n');
		(void)buf_adds(&b, out);
	}
	return buf_detach(&b);
}

static void node_upgrade_done(struct node *n, const struct hook_result *res)
{
	if (res->exit_code != 0) {
		_cleanup_(freep) char *detail = node_detail(res);
		node_status(n, STATUS_PUPPET, STATE_FAILED, n->run_version, res->exit_code, detail);
		node_run_failed(n, "upgrade");
		return;
	}
	node_run_hook(n, NODE_RUN_CONFIG);
}

static void node_config_done(struct node *n, const struct hook_result *res)
{
	_cleanup_(freep) char *detail = NULL;
	enum status_state st;
	char code[16];

	snprintf(code, sizeof(code), "%d", res->exit_code);
	st = res->signal || res->timed_out ? STATE_FAILED
					   : status_from_result(STATUS_PUPPET, code);
	if (st != STATE_SUCCESS)
		st = STATE_FAILED;
	if (st == STATE_FAILED)
		detail = node_detail(res);
	node_status(n, STATUS_PUPPET, st, n->run_version, res->exit_code, detail);
	/* The config hook saw the hiera file as it was when it started: a
	 * services run for that same file would only repeat it. */
	if (n->services_gen < n->config_gen)
		n->services_gen = n->config_gen;
	/* After the first config run, whether or not it succeeded, the node's
	 * services are published (not healthy until validation succeeds): this
	 * breaks the circular wait of two nodes depending on each other. */
	(void)node_publish_services(n, false);
	if (st != STATE_SUCCESS) {
		node_run_failed(n, "config");
		return;
	}
	node_status(n, STATUS_VALIDATION, STATE_RUNNING, n->run_version, 0, NULL);
	node_run_hook(n, NODE_RUN_VALIDATE);
}

static void node_validate_done(struct node *n, const struct hook_result *res)
{
	_cleanup_(freep) char *detail = NULL;
	_cleanup_(freep) char *version = NULL;
	bool ok = res->exit_code == 0 && !res->signal && !res->timed_out;
	int r;

	if (!ok)
		detail = node_detail(res);
	node_status(n, STATUS_VALIDATION, ok ? STATE_SUCCESS : STATE_FAILED, n->run_version,
		    res->exit_code, detail);
	if (!ok) {
		n->validation_failed = true;
		node_run_failed(n, "validation");
		return;
	}
	version = TAKE_PTR(n->run_version);
	r = node_write_local(n, version);
	if (r < 0) {
		log_fields(LOG_ERR, version, NULL, "cannot write local version file '%s': %s",
			   n->opt.local_version_file, strerror(-r));
		n->run_version = TAKE_PTR(version);
		node_run_failed(n, "local version file");
		return;
	}
	/* The run succeeded whatever etcd says now; a failed put is owed and
	 * retried from idle, or the fleet would never see this host at VERSION. */
	r = fleet_set_running_version(&n->fleet, n->host, version, n->lease);
	n->running_unwritten = r < 0;
	if (r < 0)
		log_fields(LOG_WARNING, version, NULL, "cannot put running_version/%s: %s, will retry",
			   version, etcd_last_error(n->etcd));
	set_str(&n->running_published, version);
	(void)node_publish_services(n, true);
	n->validation_failed = false;
	n->rerun = false;
	n->failures = 0;
	free(n->run_previous);
	n->run_previous = NULL;
	node_release_slot(n);
	log_fields(LOG_NOTICE, version, NULL, "now at version '%s'", version);
	node_set_state(n, NODE_IDLE, "idle at %s", version);
	node_schedule_evaluate(n);
}

static int node_on_run_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	timer_cancel(&n->run_timer);
	if (n->state == NODE_SPLAY)
		n->splay_done = true;
	node_schedule_evaluate(n);
	return 0;
}

/* A failed run: capped exponential backoff with full jitter, then retry. */
static void node_run_failed(struct node *n, const char *what)
{
	const struct config *cfg = n->opt.config;
	_cleanup_(freep) char *version = TAKE_PTR(n->run_version);
	uint64_t lo = sec_to_usec((double)cfg->retry_min), hi = lo, cap = sec_to_usec((double)cfg->retry_max);
	uint64_t delay;

	n->failures++;
	if (n->once) {
		log_fields(LOG_WARNING, version, NULL, "%s failed for '%s'", what, or_none(version));
		node_once_finish(n, 1);
		return;
	}
	for (unsigned i = 1; i < n->failures && hi < cap; i++)
		hi *= 2;
	if (hi > cap)
		hi = cap;
	if (hi < lo)
		hi = lo;
	delay = random_between(lo, hi);
	node_set_state(n, NODE_BACKOFF, "%s failed for %s (%u\u00d7), retrying in %llu s", what,
		       or_none(version), n->failures,
		       (unsigned long long)((delay + USEC_PER_SEC / 2) / USEC_PER_SEC));
	(void)timer_arm(n, &n->run_timer, delay, node_on_run_timer);
}

static void node_start_run(struct node *n)
{
	int r;

	n->splay_done = false;
	set_str(&n->run_version, n->desired);
	set_str(&n->run_previous, n->local);
	set_str(&n->pending_detail, NULL);
	if (n->hiera_error)
		node_write_hiera(n);
	if (n->hiera_error) {
		/* The config run would read a stale catalog: fail it, visibly. */
		node_status(n, STATUS_PUPPET, STATE_FAILED, n->run_version, -1, n->hiera_error);
		node_run_failed(n, "hiera file");
		return;
	}
	r = fleet_set_status(&n->fleet, n->host, STATUS_PUPPET, STATE_RUNNING, n->run_version, 0,
			     NULL);
	if (r < 0) {
		/* Without puppet/running the fleet could not see the run: retry. */
		log_warnx("cannot set puppet/running: %s", etcd_last_error(n->etcd));
		node_run_failed(n, "status update");
		return;
	}
	node_run_hook(n, n->opt.config->hook_upgrade && *n->opt.config->hook_upgrade
				 ? NODE_RUN_UPGRADE : NODE_RUN_CONFIG);
}

static bool node_need_run(const struct node *n)
{
	if (!n->desired_known || !n->desired)
		return false;
	return !str_eq(n->local, n->desired) || n->validation_failed || n->rerun;
}

static void node_idle(struct node *n)
{
	timer_cancel(&n->run_timer);
	n->failures = 0;
	n->splay_done = false;
	node_release_slot(n);
	if (n->running_published && n->running_unwritten) {
		int r = fleet_set_running_version(&n->fleet, n->host, n->running_published,
						  n->lease);
		n->running_unwritten = r < 0;
		if (r < 0)
			node_schedule_resync(n, USEC_PER_SEC);
	}
	if (!n->desired_known)
		node_set_state(n, NODE_IDLE, "idle at %s, desired version unknown", or_none(n->local));
	else if (!n->desired)
		node_set_state(n, NODE_IDLE, "idle at %s, no desired version", or_none(n->local));
	else
		node_set_state(n, NODE_IDLE, "idle at %s", or_none(n->local));
}

/*
 * The decision: called whenever something the node depends on may have
 * changed.  A run in progress (or a splay or backoff timer) is left alone;
 * otherwise the node goes to the first state whose condition holds.
 */
static bool node_evaluate_run(struct node *n)
{
	_cleanup_(freep) char *missing = NULL, *missing_short = NULL;
	_cleanup_(freep) char *waiting_group = NULL;
	struct slot_wait wait = { 0 };
	int r;

	if (n->stopping || !n->synced || n->run_hook)
		return false;

	if (n->pause_dirty) {
		_cleanup_(freep) char *reason = NULL;
		r = fleet_paused(&n->fleet, n->host, n->opt.config->group, &reason);
		if (r < 0) {
			/* Unknown is not "not paused": keep the last answer and
			 * look again at the next resync. */
			log_warnx("cannot read pauses: %s", etcd_last_error(n->etcd));
			node_schedule_resync(n, USEC_PER_SEC);
		} else {
			n->pause_dirty = false;
			if ((r > 0) != n->paused || !str_eq(reason, n->pause_reason))
				log_info(r > 0 ? "paused: %s" : "resumed%s", r > 0 ? reason : "");
			n->paused = r > 0;
			set_str(&n->pause_reason, reason);
		}
	}

	if (!node_need_run(n)) {
		node_idle(n);
		if (n->once)
			node_once_finish(n, n->desired_known ? 0 : 1);
		return false;
	}
	if (n->run_timer)
		return false;	/* splay or backoff still running */
	if (n->paused) {
		node_set_state(n, NODE_PAUSED, "paused: %s", or_none(n->pause_reason));
		return false;
	}

	missing = node_missing_dependencies(n, &missing_short);
	if (missing) {
		if (!str_eq(missing, n->pending_detail)) {
			node_status(n, STATUS_PUPPET, STATE_PENDING, n->desired, -1, missing);
			set_str(&n->pending_detail, missing);
		}
		node_set_state(n, NODE_WAIT_DEPENDENCIES, "waiting for %s", missing_short);
		return false;
	}

	r = node_take_slot(n, &wait);
	waiting_group = wait.group;
	if (r < 0) {
		log_warnx("cannot take a rollout slot: %s", etcd_last_error(n->etcd));
		node_run_failed(n, "rollout slot");
		return false;
	}
	if (r == 0 && waiting_group) {
		node_set_state(n, NODE_WAIT_GROUP, "waiting for group %s (%zu host%s behind)",
			       waiting_group, wait.behind, wait.behind == 1 ? "" : "s");
		return false;
	}
	if (r == 0) {
		node_set_state(n, NODE_WAIT_SLOT, "waiting for a rollout slot for %s (%zu holders, max %ld)",
			       n->desired, wait.holders, wait.limit);
		return false;
	}

	if (n->opt.config->splay > 0 && !n->splay_done) {
		uint64_t delay = random_between(0, sec_to_usec((double)n->opt.config->splay));
		node_set_state(n, NODE_SPLAY, "splay %.1f s before config for %s",
			       (double)delay / (double)USEC_PER_SEC, n->desired);
		(void)timer_arm(n, &n->run_timer, delay, node_on_run_timer);
		return false;
	}
	/* Two Puppet runs at once would fight over Puppet's lock: a running
	 * services hook ends first (its end evaluates again). */
	if (n->services_hook)
		return false;
	node_start_run(n);
	return true;
}

static void node_evaluate(struct node *n)
{
	if (!node_evaluate_run(n))
		node_try_services(n);
}

static int node_on_evaluate(sd_event_source *s, void *userdata)
{
	node_evaluate(userdata);
	return 0;
}

static void node_schedule_evaluate(struct node *n)
{
	if (n->evaluate)
		(void)sd_event_source_set_enabled(n->evaluate, SD_EVENT_ONESHOT);
}

/* --- the services hook ----------------------------------------------------------------- */

/*
 * STATE_DIR/services-pending exists while the services hook runs.  A daemon
 * killed meanwhile finds it at its next start and runs the hook again: the
 * hiera file it writes then holds the same bytes, which alone would never
 * run the hook, and the interrupted run may have applied nothing.
 */
static char *node_services_marker(struct node *n)
{
	const char *dir = n->opt.config->state_dir;
	struct buf b = BUF_INIT;
	if (!dir || !*dir || buf_printf(&b, "%s/services-pending", dir) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}

static void node_services_mark(struct node *n, bool pending)
{
	_cleanup_(freep) char *path = node_services_marker(n);
	int fd;

	if (!path)
		return;
	if (!pending) {
		(void)unlink(path);
		return;
	}
	(void)mkdir(n->opt.config->state_dir, 0755);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		log_warnx("cannot create '%s': %s", path, strerror(errno));
	else
		close(fd);
}

static void node_on_services_hook(struct hook *h, const struct hook_result *res, void *userdata)
{
	struct node *n = userdata;
	_cleanup_(freep) char *what = hook_result_describe(res);

	_cleanup_(hook_freep) struct hook *done = TAKE_PTR(n->services_hook);

	log_fields(res->exit_code == 0 ? LOG_INFO : LOG_WARNING, n->local, "services",
		   "hook 'services' %s", or_none(what));
	node_hook_ended(n, "services", res);
	if (n->stopping) {
		/* stopped midway: the marker stays, the next start runs it again */
		node_finish_stop(n);
		return;
	}
	node_services_mark(n, false);
	/* A failed services run is not retried in a loop: the next catalog
	 * change or config run will carry the same data. */
	n->services_gen = n->services_running_gen;
	/* A run may have waited for this hook; else more catalog changes may. */
	node_schedule_evaluate(n);
}

/* Runs the services hook when the hiera file changed since it last ran, unless
 * it runs already or the config (or upgrade) hook runs. */
static void node_try_services(struct node *n)
{
	_cleanup_(strv_freep) char **env = NULL;
	const char *path = n->opt.config->hook_services;
	int r;

	if (n->stopping || n->services_hook || n->services_gen >= n->hiera_gen)
		return;
	if (n->run_hook && (n->state == NODE_RUN_CONFIG || n->state == NODE_RUN_UPGRADE))
		return;
	if (!path || !*path) {
		n->services_gen = n->hiera_gen;
		return;
	}
	n->services_running_gen = n->hiera_gen;
	r = node_build_env(n, n->local, &env);
	if (r >= 0) {
		node_hook_started(n, "services");
		node_services_mark(n, true);
	}
	if (r >= 0)
		r = hook_spawn(n->event, "services", path, env, n->opt.config->hook_timeout, n->local,
			       node_on_services_hook, n, &n->services_hook);
	if (r < 0) {
		node_services_mark(n, false);
		log_fields(LOG_ERR, n->local, "services", "cannot run services hook '%s': %s",
			   path, strerror(-r));
		n->services_gen = n->hiera_gen;
	}
}

/* --- once --------------------------------------------------------------------------- */

static void node_once_finish(struct node *n, int code)
{
	if (!n->once || n->stopping)
		return;
	if (code == 0 && (n->services_hook || n->services_gen < n->hiera_gen))
		return;		/* the services hook finishes first */
	n->exit_code = code;
	n->stopping = true;
	node_stop_watches(n);
	log_info("--once: %s", code == 0 ? "at the desired version" : "not at the desired version");
	(void)sd_event_exit(n->event, code);
}

static int node_on_once_deadline(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	log_warnx("--once: gave up after %ld s in state %s (%s)", n->opt.config->hook_timeout,
		  node_state_name(n->state), or_none(n->status));
	if (n->run_hook || n->services_hook) {
		node_stop(n);
		n->exit_code = 1;
		return 0;
	}
	node_once_finish(n, 1);
	return 0;
}

/* --- stop ------------------------------------------------------------------------------ */

static int node_on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;
	log_warnx("hooks still running after the stop grace period, killing them");
	n->run_hook = hook_free(n->run_hook);
	n->services_hook = hook_free(n->services_hook);
	node_finish_stop(n);
	return 0;
}

/* Runs when no hook is left: records an interrupted run, revokes the lease. */
static void node_finish_stop(struct node *n)
{
	if (n->run_hook || n->services_hook)
		return;
	timer_cancel(&n->stop_timer);
	if (n->synced && n->run_version) {
		if (n->state == NODE_RUN_CONFIG || n->state == NODE_RUN_UPGRADE)
			node_status(n, STATUS_PUPPET, STATE_FAILED, n->run_version, -1, "interrupted");
		else if (n->state == NODE_RUN_VALIDATE)
			node_status(n, STATUS_VALIDATION, STATE_FAILED, n->run_version, -1, "interrupted");
	}
	node_stop_watches(n);
	if (n->registered && !n->once) {
		/* alive/ and the services disappear now rather than at expiry. */
		if (etcd_lease_revoke(n->etcd, n->lease) < 0)
			log_warnx("cannot revoke lease: %s", etcd_last_error(n->etcd));
	}
	n->state = NODE_STOPPING;
	log_info("stopped");
	(void)sd_event_exit(n->event, n->exit_code);
}

void node_stop(struct node *n)
{
	if (n->stop_requested) {
		/* A second SIGTERM: do not wait any longer. */
		n->run_hook = hook_free(n->run_hook);
		n->services_hook = hook_free(n->services_hook);
		node_finish_stop(n);
		return;
	}
	(void)sd_notify(false, "STOPPING=1");
	n->stop_requested = true;
	n->stopping = true;
	if (n->once)
		n->exit_code = 1;
	timer_cancel(&n->run_timer);
	timer_cancel(&n->resync);
	timer_cancel(&n->debounce);
	timer_cancel(&n->keepalive);
	timer_cancel(&n->once_deadline);
	if (!n->run_hook && !n->services_hook) {
		node_finish_stop(n);
		return;
	}
	log_info("stopping: waiting for running hooks");
	hook_kill(n->run_hook, SIGTERM);
	hook_kill(n->services_hook, SIGTERM);
	(void)timer_arm(n, &n->stop_timer, STOP_GRACE_USEC, node_on_stop_timer);
	(void)sd_notifyf(false, "STATUS=stopping: waiting for hooks");
}

/* --- reload ------------------------------------------------------------------------------ */

int node_reload(struct node *n)
{
	_cleanup_(options_resolved_releasep) struct options_resolved fresh = { 0 };
	_cleanup_(freep) char *error = NULL;
	struct config *old;
	bool regroup;
	int r;

	r = options_resolve(n->global, &fresh, &error);
	if (r < 0) {
		log_warnx("reload: %s, keeping the running configuration", error ? error : strerror(-r));
		return r;
	}
	if (!str_eq(fresh.hostname, n->opt.hostname) || !str_eq(fresh.prefix, n->opt.prefix))
		log_warnx("reload: a new hostname or prefix needs a restart, ignoring them");
	for (size_t i = 0; fresh.etcd.endpoints[i] || n->opt.etcd.endpoints[i]; i++)
		if (!str_eq(fresh.etcd.endpoints[i], n->opt.etcd.endpoints[i])) {
			log_warnx("reload: new etcd endpoints need a restart, ignoring them");
			break;
		}
	old = n->opt.config;
	regroup = !str_eq(old->group, fresh.config->group);
	n->opt.config = TAKE_PTR(fresh.config);
	config_free(old);
	if (!str_eq(fresh.local_version_file, n->opt.local_version_file)) {
		char *t = n->opt.local_version_file;
		n->opt.local_version_file = fresh.local_version_file;
		fresh.local_version_file = t;
		node_read_local(n);
	}
	log_info("configuration reloaded from '%s'", or_none(n->opt.config->path));
	if (n->registered && regroup &&
	    fleet_register(&n->fleet, n->host, n->opt.config->group, n->local, (long)getpid(),
			   n->lease) < 0)
		log_warnx("cannot register the new group: %s", etcd_last_error(n->etcd));
	if (n->published)
		(void)node_publish_services(n, n->services_healthy);
	n->pause_dirty = true;
	set_str(&n->pending_detail, NULL);
	node_schedule_evaluate(n);
	return 0;
}

/* --- life cycle -------------------------------------------------------------------------- */

int node_new(sd_event *event, struct options_resolved *opts,
	     const struct global_options *global, bool once, struct node **ret)
{
	struct node *n = calloc(1, sizeof(*n));
	int r;

	if (!n)
		return -ENOMEM;
	n->event = sd_event_ref(event);
	n->global = global;
	n->once = once;
	n->catalog = (struct catalog)CATALOG_INIT;
	n->state = NODE_STARTING;
	for (size_t i = 0; i < _HOOK_M_MAX; i++)
		n->hook_metrics[i].name = hook_metric_names[i];
	r = etcd_client_new(&opts->etcd, &n->etcd);
	if (r < 0) {
		node_free(n);
		return r;
	}
	n->opt = *opts;
	*opts = (struct options_resolved){ 0 };
	n->host = n->opt.hostname;
	n->fleet.etcd = n->etcd;
	n->fleet.prefix = n->opt.prefix ? n->opt.prefix : "";
	if ((r = etcd_client_attach_event(n->etcd, event)) < 0 ||
	    (r = sd_event_add_defer(event, &n->evaluate, node_on_evaluate, n)) < 0 ||
	    (r = sd_event_source_set_enabled(n->evaluate, SD_EVENT_OFF)) < 0) {
		node_free(n);
		return r;
	}
	*ret = n;
	return 0;
}

int node_start(struct node *n)
{
	node_read_local(n);
	log_fields(LOG_INFO, n->local, NULL, "starting as '%s', local version '%s'%s", n->host,
		   or_none(n->local), n->once ? ", once" : "");
	node_set_state(n, NODE_STARTING, "connecting to etcd");
	if (n->once && n->opt.config->hook_timeout > 0) {
		int r = timer_arm(n, &n->once_deadline,
				  (uint64_t)n->opt.config->hook_timeout * USEC_PER_SEC,
				  node_on_once_deadline);
		if (r < 0)
			return r;
	}
	return timer_arm(n, &n->resync, 0, node_on_resync);
}

struct node *node_free(struct node *n)
{
	if (!n)
		return NULL;
	hook_free(n->run_hook);
	hook_free(n->services_hook);
	node_stop_watches(n);
	sd_event_source_disable_unref(n->keepalive);
	sd_event_source_disable_unref(n->resync);
	sd_event_source_disable_unref(n->debounce);
	sd_event_source_disable_unref(n->evaluate);
	sd_event_source_disable_unref(n->run_timer);
	sd_event_source_disable_unref(n->once_deadline);
	sd_event_source_disable_unref(n->stop_timer);
	etcd_client_free(n->etcd);
	catalog_release(&n->catalog);
	options_resolved_release(&n->opt);
	strv_free(n->published);
	free(n->status);
	free(n->desired);
	free(n->pause_reason);
	free(n->run_version);
	free(n->run_previous);
	free(n->local);
	free(n->pending_detail);
	free(n->hiera_error);
	free(n->running_published);
	sd_event_unref(n->event);
	free(n);
	return NULL;
}
