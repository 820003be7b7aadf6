/*
 * fleet-sim.c — a fleet of N real nodes in one process, for bench/fleet.sh.
 *
 * Every simulated node is the daemon's own node (node.h: node_new, node_start,
 * node_stop, node_free) with its own etcd client, lease, watch streams, local
 * version file, state directory and hiera file, against a real etcd given with
 * --etcd.  What it costs etcd is therefore what a real node costs etcd; only the
 * hooks are stand-ins, and the process, not the machine, is shared.
 *
 * Threads.  Every request a node makes runs on its client's multi handle, so
 * one loop can carry thousands of nodes; T worker threads (--threads) spread
 * them over the machine's cores.  They each run their own sd-event loop (sd_event_new,
 * never the per-thread default) with N/T nodes; a node is created, driven and
 * freed on its worker's thread only.  Everything process-wide is set up in
 * main() before the first thread starts: curl_global_init(), the log level, the
 * signal mask (SIGCHLD must be blocked in every thread for sd-event's child
 * sources), the environment (NOTIFY_SOCKET is removed: N nodes must not talk to
 * systemd), RLIMIT_NOFILE (each node holds one socket for unary requests and
 * one per watch stream) and hook_simulate() (hooks end on timers, no process
 * runs).  main() then only waits for signals.
 *
 * Measuring is bench/fleet.sh's job, from etcd's side.  The simulator says on
 * stdout when every node has registered and synced ("ready N"), and prints one
 * "stats" line on SIGUSR1 and at exit: nodes by state, how late its loops ran a
 * 100 ms timer since the last stats line (the simulator's own queueing, which
 * adds to every latency measured through it), its CPU time and RSS.
 *
 * Stopping.  SIGTERM, SIGINT or the end of --duration stops every node
 * (node_stop: the lease is revoked) and exits.  node_stop() ends the loop it
 * was given (sd_event_exit) when the node has stopped, so all nodes of a loop
 * are stopped together, at the end; a node whose hook runs at that moment is
 * freed without revoking its lease (it expires).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <curl/curl.h>
#include <systemd/sd-event.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "hook/hook.h"
#include "base/log.h"
#include "node/node.h"
#include "config/options.h"


#define USEC_PER_SEC 1000000ULL
#define TICK_USEC (100 * 1000ULL)
#define LAG_BUCKETS 40		/* log2 buckets of microseconds */
/* Descriptors per node: the unary connection, three watch streams, and room
 * for a staged rollout's three more and a running hook (pipe, pidfd). */
#define FDS_PER_NODE 9		/* bench/fleet.sh sizes its processes by it too */

enum { CMD_STOP = 1 << 0 };

struct sim;

struct worker {
	struct sim *sim;
	unsigned index;
	pthread_t thread;
	size_t first, count;		/* nodes [first, first + count) */
	struct node **nodes;
	sd_event *event;
	sd_event_source *cmd_source, *tick;
	int efd;			/* eventfd: main wakes the loop */
	atomic_uint cmd;
	atomic_size_t created;		/* nodes set up so far */
	atomic_size_t ready;		/* nodes past NODE_STARTING at the last tick */
	atomic_size_t states[_NODE_STATE_MAX];
	atomic_uint_fast64_t lag[LAG_BUCKETS];
	atomic_uint_fast64_t lag_max;	/* microseconds */
	atomic_bool failed;
	char error[512];
};

struct sim_node {
	struct global_options global;	/* node_new keeps a pointer for reloads */
	char *config;
	char *local_version;
	char *hostname;
	char *etcd;			/* --spread: the endpoints, rotated */
};

struct sim {
	size_t nodes;
	unsigned threads;
	const char *etcd;
	const char *prefix;
	const char *host_prefix;
	long first;
	char *dir;
	bool dir_created;
	bool keep;
	double hook_min, hook_max;
	const char *services;		/* comma-separated, or NULL */
	const char *consumes;		/* comma-separated, or NULL */
	bool hiera;
	bool spread;
	long lease_ttl;
	double quiet, quiet_max;	/* < 0: the config default */
	long splay;
	long watch_idle;		/* 0: the config default */
	double timeout;
	double duration;
	int verbose;

	char *hook_config, *hook_validate, *hook_services;
	struct sim_node *node;
	struct worker *worker;
};

/* --- small helpers ------------------------------------------------------------ */

static uint64_t mono_usec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	struct buf b = BUF_INIT;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (r < 0) {
		fprintf(stderr, "fleet-sim: out of memory\n");
		exit(1);
	}
	return buf_detach(&b);
}

/* Appends s as a single-quoted YAML scalar. */
static int yaml_quoted(struct buf *b, const char *s)
{
	int r = buf_addc(b, '\'');
	for (; r >= 0 && *s; s++)
		r = *s == '\'' ? buf_adds(b, "''") : buf_addc(b, *s);
	return r < 0 ? r : buf_addc(b, '\'');
}

/* Appends "[a, b]" from "a,b" (names are validated by config.c). */
static int yaml_list(struct buf *b, const char *csv)
{
	int r = buf_addc(b, '[');
	const char *p = csv;
	bool first = true;

	while (r >= 0 && *p) {
		size_t len = strcspn(p, ",");
		if (len > 0) {
			if (!first)
				r = buf_adds(b, ", ");
			if (r >= 0)
				r = buf_add(b, p, len);
			first = false;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return r < 0 ? r : buf_addc(b, ']');
}

static int write_file(const char *path, const char *text, mode_t mode)
{
	_cleanup_(closep) int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	while (len > 0) {
		ssize_t k = write(fd, text, len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		text += k;
		len -= (size_t)k;
	}
	return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)remove(path);
	return 0;
}

/* --- configuration ------------------------------------------------------------- */

/*
 * The node's config file: its own paths under DIR/HOST/, hooks, timings, and the
 * services it offers and consumes.  profile_list and profile_dir point at a path
 * that does not exist, so no node reads the machine's own Puppet files; the
 * address is fixed, so no node lists the machine's interfaces.
 */
static int sim_write_config(struct sim *s, size_t i)
{
	struct sim_node *sn = &s->node[i];
	_cleanup_(freep) char *ndir = xasprintf("%s/%s", s->dir, sn->hostname);
	_cleanup_(freep) char *absent = xasprintf("%s/absent", s->dir);
	_cleanup_(freep) char *state = xasprintf("%s/state", ndir);
	_cleanup_(freep) char *hiera = xasprintf("%s/services.yaml", ndir);
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	unsigned long k = (unsigned long)(s->first + (long)i);
	int r = 0;

	if (mkdir(ndir, 0755) < 0 && errno != EEXIST)
		return -errno;
	sn->config = xasprintf("%s/orchestrate.yaml", ndir);
	sn->local_version = xasprintf("%s/current_version", ndir);

	r |= buf_printf(&b, "# written by fleet-sim\nnode:\n  hostname: %s\n", sn->hostname);
	r |= buf_printf(&b, "  addresses: {eth0: 10.%lu.%lu.%lu}\n", (k >> 16) & 255,
			(k >> 8) & 255, k & 255);
	r |= buf_adds(&b, "  profile_list: ");
	r |= yaml_quoted(&b, absent);
	r |= buf_adds(&b, "\n  profile_dir: ");
	r |= yaml_quoted(&b, absent);
	if (s->services) {
		r |= buf_adds(&b, "\n  services: ");
		r |= yaml_list(&b, s->services);
	}
	if (s->consumes) {
		/* node.consumes is being added to config.c; until then a config
		 * with it is refused, and main() says so. */
		r |= buf_adds(&b, "\n  consumes: ");
		r |= yaml_list(&b, s->consumes);
	}
	r |= buf_adds(&b, "\npaths:\n  local_version: ");
	r |= yaml_quoted(&b, sn->local_version);
	r |= buf_adds(&b, "\n  hiera_services: ");
	r |= yaml_quoted(&b, hiera);
	r |= buf_adds(&b, "\n  state_dir: ");
	r |= yaml_quoted(&b, state);
	r |= buf_adds(&b, "\nhooks:\n  config: ");
	r |= yaml_quoted(&b, s->hook_config);
	r |= buf_adds(&b, "\n  validate: ");
	r |= yaml_quoted(&b, s->hook_validate);
	r |= buf_adds(&b, "\n  services: ");
	r |= yaml_quoted(&b, s->hook_services);
	r |= buf_printf(&b, "\n  timeout: 3600\ntiming:\n  lease_ttl: %ld\n  splay: %ld\n",
			s->lease_ttl, s->splay);
	if (s->quiet >= 0)
		r |= buf_printf(&b, "  quiet: %g\n", s->quiet);
	if (s->quiet_max >= 0)
		r |= buf_printf(&b, "  quiet_max: %g\n", s->quiet_max);
	if (s->watch_idle > 0)
		r |= buf_printf(&b, "  watch_idle: %ld\n", s->watch_idle);
	if (r < 0)
		return -ENOMEM;

	global_options_init(&sn->global);
	sn->global.etcd = s->etcd;
	if (s->spread && s->etcd && strchr(s->etcd, ',')) {
		/* A client tries its endpoints in order from the first: node i
		 * starts at member i mod M, as if every host's config listed the
		 * cluster in its own order. */
		size_t m = 1, skip;
		const char *p = s->etcd;
		for (const char *q = s->etcd; *q; q++)
			m += *q == ',';
		skip = i % m;
		for (size_t j = 0; j < skip; j++)
			p = strchr(p, ',') + 1;
		if (skip) {
			sn->etcd = xasprintf("%s,%.*s", p, (int)(p - s->etcd - 1), s->etcd);
			sn->global.etcd = sn->etcd;
		}
	}
	sn->global.prefix = s->prefix;
	sn->global.config = sn->config;
	/* Given as options, so that ORCHESTRATE_LOCAL_VERSION_FILE in the
	 * environment cannot make every node share one file. */
	sn->global.hostname = sn->hostname;
	sn->global.local_version_file = sn->local_version;
	if (s->timeout > 0)
		sn->global.timeout = s->timeout;
	return write_file(sn->config, buf_str(&b), 0644);
}

/* Resolves node i's options as orchestrated would; hiera off when asked. */
static int sim_resolve(struct sim *s, size_t i, struct options_resolved *ret, char **ret_error)
{
	int r = options_resolve(&s->node[i].global, ret, ret_error);
	if (r < 0)
		return r;
	if (!s->hiera) {
		/* paths.hiera_services cannot be emptied in the file (a path
		 * must not be empty): turn it off in the resolved config. */
		free(ret->config->hiera_services);
		ret->config->hiera_services = NULL;
	}
	return 0;
}

static int sim_write_hooks(struct sim *s)
{
	/* hook_simulate(): no process runs; the paths only have to be
	 * executables. */
	s->hook_config = strdup("/bin/true");
	s->hook_validate = strdup("/bin/true");
	s->hook_services = strdup("/bin/true");
	return s->hook_config && s->hook_validate && s->hook_services ? 0 : -ENOMEM;
}

/* --- workers -------------------------------------------------------------------- */

static void worker_fail(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void worker_fail(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->error, sizeof(w->error), fmt, ap);
	va_end(ap);
	atomic_store(&w->failed, true);
}

static unsigned lag_bucket(uint64_t usec)
{
	unsigned k = 0;
	while (usec > 1 && k < LAG_BUCKETS - 1) {
		usec >>= 1;
		k++;
	}
	return k;
}

/* Every 100 ms: how late the loop came to this timer, and the nodes' states. */
static int worker_on_tick(sd_event_source *src, uint64_t usec, void *userdata)
{
	struct worker *w = userdata;
	uint64_t now = mono_usec(), lag = now > usec ? now - usec : 0, next;
	size_t states[_NODE_STATE_MAX] = { 0 }, ready = 0;
	uint_fast64_t max = atomic_load_explicit(&w->lag_max, memory_order_relaxed);

	atomic_fetch_add_explicit(&w->lag[lag_bucket(lag)], 1, memory_order_relaxed);
	while (lag > max && !atomic_compare_exchange_weak(&w->lag_max, &max, lag))
		;
	for (size_t i = 0; i < w->count; i++) {
		if (!w->nodes[i])
			continue;
		enum node_state st = node_get_state(w->nodes[i]);
		if ((unsigned)st < _NODE_STATE_MAX)
			states[st]++;
		if (st != NODE_STARTING)
			ready++;
	}
	for (size_t k = 0; k < _NODE_STATE_MAX; k++)
		atomic_store_explicit(&w->states[k], states[k], memory_order_relaxed);
	atomic_store(&w->ready, ready);

	next = usec + TICK_USEC;
	if (next <= now)
		next = now + TICK_USEC;
	(void)sd_event_source_set_time(src, next);
	return 0;
}

static int worker_on_cmd(sd_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct worker *w = userdata;
	uint64_t v;
	unsigned cmd;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return 0;
	cmd = atomic_exchange(&w->cmd, 0);
	if (cmd & CMD_STOP) {
		/* Each node ends the loop when it has stopped; all of them stop
		 * here, in this one dispatch, before the loop can return. */
		for (size_t i = 0; i < w->count; i++)
			if (w->nodes[i])
				node_stop(w->nodes[i]);
		(void)sd_event_exit(w->event, 0);
	}
	return 0;
}

static void *worker_run(void *userdata)
{
	struct worker *w = userdata;
	struct sim *s = w->sim;
	int r;

	r = sd_event_new(&w->event);
	if (r < 0) {
		worker_fail(w, "cannot create an event loop: %s", strerror(-r));
		return NULL;
	}
	if ((r = sd_event_add_io(w->event, &w->cmd_source, w->efd, EPOLLIN, worker_on_cmd, w)) < 0 ||
	    (r = sd_event_add_time(w->event, &w->tick, CLOCK_MONOTONIC, mono_usec() + TICK_USEC, 1,
				   worker_on_tick, w)) < 0 ||
	    (r = sd_event_source_set_enabled(w->tick, SD_EVENT_ON)) < 0) {
		worker_fail(w, "cannot set up the event loop: %s", strerror(-r));
		goto out;
	}

	for (size_t i = 0; i < w->count; i++) {
		_cleanup_(options_resolved_releasep) struct options_resolved res = { 0 };
		_cleanup_(freep) char *error = NULL;
		size_t k = w->first + i;

		if (atomic_load(&w->cmd) & CMD_STOP)
			break;
		r = sim_resolve(s, k, &res, &error);
		if (r < 0) {
			worker_fail(w, "%s", error ? error : strerror(-r));
			goto out;
		}
		r = node_new(w->event, &res, &s->node[k].global, false, &w->nodes[i]);
		if (r < 0) {
			worker_fail(w, "node '%s': cannot set up: %s", s->node[k].hostname, strerror(-r));
			goto out;
		}
		r = node_start(w->nodes[i]);
		if (r < 0) {
			worker_fail(w, "node '%s': cannot start: %s", s->node[k].hostname, strerror(-r));
			goto out;
		}
		atomic_fetch_add(&w->created, 1);
	}

	r = sd_event_loop(w->event);
	if (r < 0)
		worker_fail(w, "event loop failed: %s", strerror(-r));
out:
	for (size_t i = 0; i < w->count; i++)
		w->nodes[i] = node_free(w->nodes[i]);
	w->cmd_source = sd_event_source_disable_unref(w->cmd_source);
	w->tick = sd_event_source_disable_unref(w->tick);
	w->event = sd_event_unref(w->event);
	return NULL;
}

static void worker_command(struct worker *w, unsigned cmd)
{
	uint64_t one = 1;
	atomic_fetch_or(&w->cmd, cmd);
	if (write(w->efd, &one, sizeof(one)) < 0)
		fprintf(stderr, "fleet-sim: cannot wake worker %u: %s\n", w->index, strerror(errno));
}

/* --- reporting -------------------------------------------------------------------- */

static double lag_percentile(const uint64_t *hist, uint64_t total, double p)
{
	uint64_t want = (uint64_t)((double)total * p + 0.999999), seen = 0;
	if (total == 0)
		return 0;
	for (unsigned k = 0; k < LAG_BUCKETS; k++) {
		seen += hist[k];
		if (seen >= want)
			return (double)(1ULL << k) / 1000.0;	/* the bucket's upper bound */
	}
	return (double)(1ULL << (LAG_BUCKETS - 1)) / 1000.0;
}

static long self_rss_kib(void)
{
	_cleanup_(fclosep) FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	return kib;
}

/*
 * One line on stdout: "stats nodes=N ready=R STATE=COUNT... lag_ms_p50=…
 * lag_ms_p99=… lag_ms_max=… cpu_s=… rss_kib=…".  The lag figures cover the time
 * since the last stats line (they are reset here); p50 and p99 are the upper
 * bounds of power-of-two buckets.
 */
static void sim_print_stats(struct sim *s, const char *what)
{
	size_t states[_NODE_STATE_MAX] = { 0 }, ready = 0;
	uint64_t hist[LAG_BUCKETS] = { 0 }, total = 0, max = 0;
	struct rusage ru;

	for (unsigned t = 0; t < s->threads; t++) {
		struct worker *w = &s->worker[t];
		ready += atomic_load(&w->ready);
		for (size_t k = 0; k < _NODE_STATE_MAX; k++)
			states[k] += atomic_load_explicit(&w->states[k], memory_order_relaxed);
		for (unsigned k = 0; k < LAG_BUCKETS; k++) {
			uint64_t c = atomic_exchange_explicit(&w->lag[k], 0, memory_order_relaxed);
			hist[k] += c;
			total += c;
		}
		uint64_t m = atomic_exchange_explicit(&w->lag_max, 0, memory_order_relaxed);
		if (m > max)
			max = m;
	}
	getrusage(RUSAGE_SELF, &ru);
	printf("%s nodes=%zu ready=%zu", what, s->nodes, ready);
	for (size_t k = 0; k < _NODE_STATE_MAX; k++)
		if (states[k])
			printf(" %s=%zu", node_state_name((enum node_state)k), states[k]);
	printf(" lag_ms_p50=%.1f lag_ms_p99=%.1f lag_ms_max=%.1f cpu_s=%.2f rss_kib=%ld\n",
	       lag_percentile(hist, total, 0.50), lag_percentile(hist, total, 0.99),
	       (double)max / 1000.0,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6,
	       self_rss_kib());
	fflush(stdout);
}

/* --- main --------------------------------------------------------------------------- */

enum {
	OPT_NODES = 0x300,
	OPT_THREADS,
	OPT_ETCD_S,
	OPT_PREFIX_S,
	OPT_HOST_PREFIX,
	OPT_FIRST,
	OPT_DIR,
	OPT_KEEP,
	OPT_HOOK_SECONDS,
	OPT_SERVICES,
	OPT_CONSUMES,
	OPT_NO_HIERA,
	OPT_SPREAD,
	OPT_LEASE_TTL,
	OPT_QUIET,
	OPT_SPLAY,
	OPT_WATCH_IDLE,
	OPT_TIMEOUT_S,
	OPT_DURATION,
};

static const struct option sim_options[] = {
	{ "nodes", required_argument, NULL, OPT_NODES },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "etcd", required_argument, NULL, OPT_ETCD_S },
	{ "prefix", required_argument, NULL, OPT_PREFIX_S },
	{ "hostname-prefix", required_argument, NULL, OPT_HOST_PREFIX },
	{ "first", required_argument, NULL, OPT_FIRST },
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "keep", no_argument, NULL, OPT_KEEP },
	{ "hook-seconds", required_argument, NULL, OPT_HOOK_SECONDS },
	{ "services", optional_argument, NULL, OPT_SERVICES },
	{ "consumes", required_argument, NULL, OPT_CONSUMES },
	{ "no-hiera", no_argument, NULL, OPT_NO_HIERA },
	{ "spread", no_argument, NULL, OPT_SPREAD },
	{ "lease-ttl", required_argument, NULL, OPT_LEASE_TTL },
	{ "quiet", required_argument, NULL, OPT_QUIET },
	{ "splay", required_argument, NULL, OPT_SPLAY },
	{ "watch-idle", required_argument, NULL, OPT_WATCH_IDLE },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT_S },
	{ "duration", required_argument, NULL, OPT_DURATION },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fleet-sim [--nodes N] [--threads T] [--etcd URLS] [--prefix P]\n"
		"                 [--hostname-prefix S] [--first K] [--dir DIR] [--keep]\n"
		"                 [--hook-seconds MIN[:MAX]] [--services[=LIST]] [--consumes LIST]\n"
		"                 [--no-hiera] [--spread] [--lease-ttl S] [--quiet S[:MAX]] [--splay S]\n"
		"                 [--watch-idle S] [--timeout S] [--duration S] [-v]\n"
		"\n"
		"Runs N real nodes (orchestrated's node) in one process against etcd.\n"
		"  --nodes N            simulated nodes (default 100), hosts S1..SN (S: sim)\n"
		"  --threads T          worker threads, each with its own event loop (default 8)\n"
		"  --etcd URLS          endpoints (default $ORCHESTRATE_ETCD, else 127.0.0.1:2379)\n"
		"  --first K            number the hosts from K (default 1), for several simulators\n"
		"  --dir DIR            the nodes' files (default a new directory in /dev/shm)\n"
		"  --keep               leave DIR in place at exit\n"
		"  --hook-seconds A[:B] every config run takes A..B s (default 0)\n"
		"  --services[=LIST]    every node offers these services (default web)\n"
		"  --consumes LIST      node.consumes of every node (config.c must know the key)\n"
		"  --no-hiera           nodes write no hiera file\n"
		"  --spread             node i lists the endpoints from the (i mod M)-th on\n"
		"  --lease-ttl S        timing.lease_ttl (default 30)\n"
		"  --quiet S[:MAX]      timing.quiet and quiet_max (default the config's, 2:10)\n"
		"  --splay S            timing.splay (default 0)\n"
		"  --watch-idle S       timing.watch_idle (default the config's, 300)\n"
		"  --timeout S          etcd request timeout (default the config's, 5)\n"
		"  --duration S         stop after S seconds (default: at SIGTERM or SIGINT)\n"
		"  -v                   log the nodes' info messages (-vv: debug); default warnings\n"
		"\n"
		"Prints \"ready N\" when every node has registered and synced, and a \"stats\"\n"
		"line on SIGUSR1 and at exit.\n");
}

static bool parse_long(const char *s, long min, long *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min)
		return false;
	*ret = v;
	return true;
}

/* "A" or "A:B", non-negative seconds, A <= B. */
static bool parse_range(const char *s, double *ret_a, double *ret_b)
{
	char *end;
	double a = strtod(s, &end), b = a;
	if (end == s || a < 0)
		return false;
	if (*end == ':') {
		const char *p = end + 1;
		b = strtod(p, &end);
		if (end == p || b < a)
			return false;
	}
	if (*end)
		return false;
	*ret_a = a;
	*ret_b = b;
	return true;
}

/* Raises RLIMIT_NOFILE to what the fleet needs, at least to the hard limit. */
static void raise_nofile(size_t need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
		struct rlimit more = { need, need };
		/* As root (CAP_SYS_RESOURCE) the hard limit may go up too. */
		if (setrlimit(RLIMIT_NOFILE, &more) == 0)
			return;
		fprintf(stderr, "fleet-sim: warning: RLIMIT_NOFILE hard limit %llu is below the "
			"%zu descriptors these nodes may need; raise it (ulimit -Hn) or run fewer\n",
			(unsigned long long)rl.rlim_max, need);
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		fprintf(stderr, "fleet-sim: warning: cannot raise RLIMIT_NOFILE: %s\n", strerror(errno));
}

static void sim_remove_files(struct sim *s)
{
	if (s->keep || !s->dir)
		return;
	for (size_t i = 0; i < s->nodes; i++) {
		_cleanup_(freep) char *ndir = xasprintf("%s/%s", s->dir, s->node[i].hostname);
		(void)nftw(ndir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	if (s->hook_config && strncmp(s->hook_config, s->dir, strlen(s->dir)) == 0)
		(void)unlink(s->hook_config);
	if (s->dir_created)
		(void)rmdir(s->dir);
}

int main(int argc, char **argv)
{
	struct sim s = {
		.nodes = 100, .threads = 8, .host_prefix = "sim", .first = 1, .hiera = true,
		.lease_ttl = 30, .quiet = -1, .quiet_max = -1, .verbose = 0,
	};
	sigset_t mask;
	uint64_t start, deadline = 0, stop_at;
	bool ready_said = false;
	int c, rc = 0;
	long v;

	while ((c = getopt_long(argc, argv, "vh", sim_options, NULL)) != -1) {
		switch (c) {
		case OPT_NODES:
			if (!parse_long(optarg, 1, &v))
				goto bad;
			s.nodes = (size_t)v;
			break;
		case OPT_THREADS:
			if (!parse_long(optarg, 1, &v) || v > 1024)
				goto bad;
			s.threads = (unsigned)v;
			break;
		case OPT_ETCD_S: s.etcd = optarg; break;
		case OPT_PREFIX_S: s.prefix = optarg; break;
		case OPT_HOST_PREFIX: s.host_prefix = optarg; break;
		case OPT_FIRST:
			if (!parse_long(optarg, 0, &s.first))
				goto bad;
			break;
		case OPT_DIR: s.dir = strdup(optarg); break;
		case OPT_KEEP: s.keep = true; break;
		case OPT_HOOK_SECONDS:
			if (!parse_range(optarg, &s.hook_min, &s.hook_max))
				goto bad;
			break;
		case OPT_SERVICES: s.services = optarg ? optarg : "web"; break;
		case OPT_CONSUMES: s.consumes = optarg; break;
		case OPT_NO_HIERA: s.hiera = false; break;
		case OPT_SPREAD: s.spread = true; break;
		case OPT_LEASE_TTL:
			if (!parse_long(optarg, 5, &s.lease_ttl))
				goto bad;
			break;
		case OPT_QUIET:
			if (!parse_range(optarg, &s.quiet, &s.quiet_max))
				goto bad;
			if (!strchr(optarg, ':'))
				s.quiet_max = -1;
			break;
		case OPT_SPLAY:
			if (!parse_long(optarg, 0, &s.splay))
				goto bad;
			break;
		case OPT_WATCH_IDLE:
			if (!parse_long(optarg, 1, &s.watch_idle))
				goto bad;
			break;
		case OPT_TIMEOUT_S:
			s.timeout = strtod(optarg, NULL);
			if (s.timeout <= 0)
				goto bad;
			break;
		case OPT_DURATION:
			s.duration = strtod(optarg, NULL);
			if (s.duration <= 0)
				goto bad;
			break;
		case 'v': s.verbose++; break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
		continue;
bad:
		fprintf(stderr, "fleet-sim: invalid value '%s' for --%s\n", optarg,
			sim_options[c - OPT_NODES].name);
		return EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "fleet-sim: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (s.threads > s.nodes)
		s.threads = (unsigned)s.nodes;
	if (!s.etcd && getenv("ORCHESTRATE_ETCD") && *getenv("ORCHESTRATE_ETCD"))
		s.etcd = getenv("ORCHESTRATE_ETCD");

	/* --- process-wide set-up, before any thread --- */
	raise_nofile(s.nodes * FDS_PER_NODE + 64 + 8 * (size_t)s.threads);
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
		fprintf(stderr, "fleet-sim: curl_global_init failed\n");
		return 1;
	}
	log_init("fleet-sim", LOG_TO_STDERR);
	/* log.c prints info at 0, debug at 1; below 0 only warnings. */
	log_set_verbose(s.verbose - 1);
	/* N nodes must not report to systemd as if each were the service. */
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGCHLD);
	if ((errno = pthread_sigmask(SIG_BLOCK, &mask, NULL)) != 0) {
		perror("fleet-sim: pthread_sigmask");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* main waits for these; SIGCHLD stays blocked for sd-event's child
	 * sources in the workers. */
	sigdelset(&mask, SIGCHLD);
	if (hook_simulate(s.hook_min, s.hook_max, 0, NULL, NULL) < 0) {
		fprintf(stderr, "fleet-sim: bad --hook-seconds\n");
		return 64;
	}

	/* --- the nodes' files --- */
	if (!s.dir) {
		const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
		s.dir = xasprintf("%s/fleet-sim.XXXXXX", base && *base ? base : "/tmp");
		if (!mkdtemp(s.dir)) {
			fprintf(stderr, "fleet-sim: cannot create '%s': %s\n", s.dir, strerror(errno));
			return 1;
		}
		s.dir_created = true;
	} else if (mkdir(s.dir, 0755) == 0) {
		s.dir_created = true;
	} else if (errno != EEXIST) {
		fprintf(stderr, "fleet-sim: cannot create '%s': %s\n", s.dir, strerror(errno));
		return 1;
	}
	s.node = calloc(s.nodes, sizeof(*s.node));
	s.worker = calloc(s.threads, sizeof(*s.worker));
	if (!s.node || !s.worker) {
		fprintf(stderr, "fleet-sim: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < s.nodes; i++)
		s.node[i].hostname = xasprintf("%s%ld", s.host_prefix, s.first + (long)i);
	int r = sim_write_hooks(&s);
	for (size_t i = 0; r >= 0 && i < s.nodes; i++)
		r = sim_write_config(&s, i);
	if (r < 0) {
		fprintf(stderr, "fleet-sim: cannot write the nodes' files in '%s': %s\n", s.dir,
			strerror(-r));
		rc = 1;
		goto out;
	}
	{
		/* One config read here gives a clean error before any thread. */
		_cleanup_(options_resolved_releasep) struct options_resolved res = { 0 };
		_cleanup_(freep) char *error = NULL;
		r = sim_resolve(&s, 0, &res, &error);
		if (r < 0) {
			fprintf(stderr, "fleet-sim: %s\n", error ? error : strerror(-r));
			if (s.consumes && error && strstr(error, "consumes"))
				fprintf(stderr, "fleet-sim: this build's config.c does not know "
					"node.consumes yet; run without --consumes\n");
			rc = EXIT_USAGE;
			goto out;
		}
	}

	/* --- the workers --- */
	for (unsigned t = 0; t < s.threads; t++) {
		struct worker *w = &s.worker[t];
		w->sim = &s;
		w->index = t;
		w->first = s.nodes * t / s.threads;
		w->count = s.nodes * (t + 1) / s.threads - w->first;
		w->nodes = calloc(w->count ? w->count : 1, sizeof(*w->nodes));
		w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (!w->nodes || w->efd < 0 ||
		    (errno = pthread_create(&w->thread, NULL, worker_run, w)) != 0) {
			perror("fleet-sim: cannot start a worker");
			s.threads = t;	/* join only those started */
			rc = 1;
			goto stop;
		}
	}

	start = mono_usec();
	if (s.duration > 0)
		deadline = start + (uint64_t)(s.duration * (double)USEC_PER_SEC);
	for (;;) {
		struct timespec tick = { 0, 100 * 1000 * 1000 };
		size_t ready = 0;
		int sig = sigtimedwait(&mask, NULL, &tick);

		if (sig == SIGUSR1)
			sim_print_stats(&s, "stats");
		else if (sig == SIGTERM || sig == SIGINT)
			break;
		for (unsigned t = 0; t < s.threads; t++) {
			if (atomic_load(&s.worker[t].failed)) {
				fprintf(stderr, "fleet-sim: %s\n", s.worker[t].error);
				rc = 1;
				goto stop;
			}
			ready += atomic_load(&s.worker[t].ready);
		}
		if (!ready_said && ready >= s.nodes) {
			printf("ready %zu\n", ready);
			fflush(stdout);
			ready_said = true;
			if (s.verbose)
				fprintf(stderr, "fleet-sim: %zu nodes ready after %.1f s\n", ready,
					(double)(mono_usec() - start) / 1e6);
		}
		if (deadline && mono_usec() >= deadline)
			break;
	}

stop:
	for (unsigned t = 0; t < s.threads; t++)
		worker_command(&s.worker[t], CMD_STOP);
	/* Revoking N leases takes a while; a loop stuck on an unreachable etcd
	 * must not keep the process forever. */
	stop_at = mono_usec() + 60 * USEC_PER_SEC;
	for (unsigned t = 0; t < s.threads; t++) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t left = stop_at > mono_usec() ? stop_at - mono_usec() : 0;
		ts.tv_sec += (time_t)(left / USEC_PER_SEC);
		ts.tv_nsec += (long)(left % USEC_PER_SEC) * 1000;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_timedjoin_np(s.worker[t].thread, NULL, &ts) != 0) {
			fprintf(stderr, "fleet-sim: workers did not stop within 60 s, exiting\n");
			sim_remove_files(&s);
			_exit(1);
		}
		if (atomic_load(&s.worker[t].failed) && rc == 0) {
			fprintf(stderr, "fleet-sim: %s\n", s.worker[t].error);
			rc = 1;
		}
	}
	sim_print_stats(&s, "final");
out:
	sim_remove_files(&s);
	for (unsigned t = 0; s.worker && t < s.threads; t++) {
		free(s.worker[t].nodes);
		if (s.worker[t].efd > 0)
			close(s.worker[t].efd);
	}
	for (size_t i = 0; s.node && i < s.nodes; i++) {
		free(s.node[i].config);
		free(s.node[i].local_version);
		free(s.node[i].hostname);
		free(s.node[i].etcd);
	}
	free(s.node);
	free(s.worker);
	free(s.hook_config);
	free(s.hook_validate);
	free(s.hook_services);
	free(s.dir);
	curl_global_cleanup();
	return rc;
}
