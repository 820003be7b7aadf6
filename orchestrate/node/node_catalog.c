/*
 * node_catalog.c — the eventually consistent configuration, and this node's
 * own entries in the catalog.
 *
 * Consuming.  The catalog lives in the fleet model, changed in place by every
 * watch event.  A change arms a debounce (quiet for timing.quiet, but no
 * longer than timing.quiet_max after the first change of a burst); when it
 * fires, the hiera file is rendered from memory — no read — and written only
 * when its bytes changed, which runs the services hook (never while the config
 * hook runs).
 *
 * Offering.  Each service entry's value (addresses, healthy, version) is kept
 * as it was last written, and only a changed value is written again: a run
 * that ends as the last one did changes nothing that consumers receive.  The
 * writes go into the batch of the moment (the end of a run, a registration),
 * so publishing costs no request of its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "config/config.h"
#include "output/hiera.h"
#include "config/local.h"
#include "base/strv.h"
#include "base/log.h"
#include "config/netif.h"
#include "node_internal.h"
#include "fleet/schema.h"

/* --- the hiera file ------------------------------------------------------------------- */

static int node_on_debounce(sd_event_source *s, uint64_t usec, void *userdata);

/* Renders the model's catalog and writes the hiera file; a change bumps
 * hiera_gen, which the services hook follows. */
void node_write_hiera(struct node *n)
{
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	const char *path = n->opt.config->hiera_services;
	bool changed = false;
	int r;

	if (!path || !*path)
		return;
	r = hiera_render(&n->sync.model.catalog, &out);
	if (r < 0) {
		log_warnx("cannot render the catalog: %s", strerror(-r));
		return;
	}
	r = file_write_atomic(path, out.data, out.len, 0644, &changed);
	if (r < 0) {
		_cleanup_(buf_releasep) struct buf why = BUF_INIT;
		(void)buf_printf(&why, "cannot write hiera file '%s': %s", path, strerror(-r));
		if (!streq_ptr(n->catalog.hiera_error, buf_str(&why)))
			log_warnx("%s, keeping the old one", buf_str(&why));
		set_str(&n->catalog.hiera_error, buf_str(&why));
		/* A full or read-only disk heals without a catalog change:
		 * write again a little later. */
		if (!n->catalog.debounce && !n->stopping)
			(void)node_timer_arm(n, &n->catalog.debounce,
					     sec_to_usec(n->opt.config->quiet) + USEC_PER_SEC,
					     node_on_debounce);
		return;
	}
	if (n->catalog.hiera_error) {
		log_info("hiera file '%s' written again", path);
		set_str(&n->catalog.hiera_error, NULL);
	}
	if (changed) {
		n->catalog.hiera_gen++;
		log_info("hiera file '%s' updated (catalog revision %lld, %zu entries)", path,
			 (long long)n->sync.model.catalog.revision, n->sync.model.catalog.n);
	}
}

static int node_on_debounce(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct node *n = userdata;

	node_timer_cancel(&n->catalog.debounce);
	n->catalog.debounce_first = 0;
	node_write_hiera(n);
	node_schedule_evaluate(n);
	return 0;
}

/* The catalog changed: wait until it has been quiet for timing.quiet, but no
 * longer than timing.quiet_max after the first change of the burst. */
void node_catalog_changed(struct node *n)
{
	uint64_t now, at;

	if (n->stopping || sd_event_now(n->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	if (!n->catalog.debounce || n->catalog.debounce_first == 0)
		n->catalog.debounce_first = now;
	at = now + sec_to_usec(n->opt.config->quiet);
	if (at > n->catalog.debounce_first + sec_to_usec(n->opt.config->quiet_max))
		at = n->catalog.debounce_first + sec_to_usec(n->opt.config->quiet_max);
	node_timer_cancel(&n->catalog.debounce);
	if (sd_event_add_time(n->event, &n->catalog.debounce, CLOCK_MONOTONIC, at, 0, node_on_debounce,
			      n) < 0) {
		/* No timer: write now rather than never. */
		n->catalog.debounce_first = 0;
		node_write_hiera(n);
	}
}

/* --- the services hook --------------------------------------------------------------- */

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

	/* res points into the hook: free it only after the result was used. */
	_cleanup_(hook_freep) struct hook *done = TAKE_PTR(n->catalog.services_hook);

	node_hook_done(n, h, n->run.local, res);
	if (n->stopping) {
		/* stopped midway: the marker stays, the next start runs it again */
		node_finish_stop(n);
		return;
	}
	node_services_mark(n, false);
	/* A failed services run is not retried in a loop: the next catalog
	 * change or config run will carry the same data. */
	n->catalog.services_gen = n->catalog.services_running_gen;
	/* A run may have waited for this hook; else more catalog changes may. */
	node_schedule_evaluate(n);
}

/* Runs the services hook when the hiera file changed since it last ran, unless
 * it runs already or the config (or upgrade) hook runs. */
void node_try_services(struct node *n)
{
	_cleanup_(freep) char *why = NULL;
	const char *path = n->opt.config->hook_services;
	int r;

	if (n->stopping || n->catalog.services_hook || n->catalog.services_gen >= n->catalog.hiera_gen)
		return;
	if (n->run.hook && (n->state == NODE_RUN_CONFIG || n->state == NODE_RUN_UPGRADE))
		return;
	if (n->state == NODE_RUN_START)
		return;	/* the config hook is about to start: its end runs this */
	if (!path || !*path) {
		n->catalog.services_gen = n->catalog.hiera_gen;
		return;
	}
	n->catalog.services_running_gen = n->catalog.hiera_gen;
	/* The marker says "a services run was interrupted" to the next start
	 * (node_catalog_recover): set before the hook runs. */
	node_services_mark(n, true);
	r = node_hook_spawn(n, "services", path, n->run.local, node_on_services_hook,
			    &n->catalog.services_hook, &why);
	if (r < 0) {
		node_services_mark(n, false);
		n->catalog.services_gen = n->catalog.hiera_gen;
	}
}

/* --- this node's services -------------------------------------------------------------- */

/* The services this node offers (local.h: node.services, the profile list,
 * node.profile_dir), what was left out logged. */
static int node_services(struct node *n, char ***ret)
{
	_cleanup_(strv_freep) char **skipped = NULL;
	int r = local_services(n->opt.config, ret, &skipped);
	for (size_t i = 0; r >= 0 && skipped && skipped[i]; i++)
		log_warnx("%s, ignoring", skipped[i]);
	return r;
}

static const char *published_value(struct node *n, const char *service)
{
	for (size_t i = 0; n->catalog.published && n->catalog.published[i]; i++)
		if (strcmp(n->catalog.published[i], service) == 0)
			return n->catalog.published_values[i];
	return NULL;
}

void node_services_release(struct node_services *s)
{
	strv_free(s->names);
	strv_free(s->values);
	*s = (struct node_services){ 0 };
}

void node_services_forget_pending(struct node *n)
{
	node_services_release(&n->catalog.staged);
}

struct node_services node_services_take_staged(struct node *n)
{
	struct node_services s = n->catalog.staged;
	n->catalog.staged = (struct node_services){ 0 };
	return s;
}

int node_batch_services(struct node *n, struct fleet_batch *b, bool healthy, bool force)
{
	_cleanup_(strv_freep) char **services = NULL;
	_cleanup_(strv_freep) char **values = NULL;
	struct catalog_entry *addrs = NULL;
	size_t n_addrs = 0, count = 0;
	int r;

	node_services_forget_pending(n);
	if ((r = node_services(n, &services)) < 0)
		return r;
	for (count = 0; services[count]; count++)
		;
	if (!(values = calloc(count + 1, sizeof(char *))))
		return -ENOMEM;
	r = local_addresses(n->opt.config, &addrs, &n_addrs);
	if (r < 0) {
		log_warnx("cannot list this node's addresses: %s", strerror(-r));
		addrs = NULL;
		n_addrs = 0;
	}
	r = 0;
	for (size_t i = 0; i < count && r >= 0; i++) {
		r = fleet_service_value(services[i], n->host, addrs, n_addrs, healthy, &values[i]);
		if (r < 0)
			break;
		if (!force && streq_ptr(values[i], published_value(n, services[i])))
			continue;
		r = fleet_batch_service(b, services[i], n->host, values[i], n->lease.id);
	}
	netif_addresses_free(addrs, n_addrs);
	if (r < 0)
		return r;
	for (size_t i = 0; n->catalog.published && n->catalog.published[i]; i++) {
		if (strv_contains(services, n->catalog.published[i]))
			continue;
		if ((r = fleet_batch_unpublish(b, n->catalog.published[i], n->host)) < 0)
			return r;
		log_info("service '%s' withdrawn", n->catalog.published[i]);
	}
	n->catalog.staged = (struct node_services){ TAKE_PTR(services), TAKE_PTR(values) };
	n->catalog.services_healthy = healthy;
	return 0;
}

void node_services_committed(struct node *n, struct node_services *s)
{
	if (!s->names)
		return;
	strv_free(n->catalog.published);
	strv_free(n->catalog.published_values);
	n->catalog.published = TAKE_PTR(s->names);
	n->catalog.published_values = TAKE_PTR(s->values);
}

static void node_services_published(struct node *n, int r)
{
	if (r < 0)
		log_warnx("cannot publish this node's services: %s", node_etcd_error(n));
}

/* Publishes this node's services in a write of their own (a first
 * publication, a reload): only the changed ones, or all with force.  The
 * write goes out in turn (node_write.c); 0 once it is queued. */
int node_publish_services(struct node *n, bool healthy, bool force)
{
	struct fleet_batch *b = NULL;
	int r;

	if ((r = fleet_batch_new(&n->fleet, &b)) < 0 ||
	    (r = node_batch_services(n, b, healthy, force)) < 0) {
		fleet_batch_free(b);
		node_services_forget_pending(n);
		node_services_published(n, r);
		return r;
	}
	r = node_write_begin(n, b, "this node's services", node_services_published);
	if (r < 0)
		node_services_published(n, r);
	return r < 0 ? r : 0;
}

/* --- the catalog's part of the node's life ---------------------------------------------- */

void node_catalog_config_started(struct node *n)
{
	n->catalog.config_gen = n->catalog.hiera_gen;
}

void node_catalog_config_ended(struct node *n)
{
	/* The config hook saw the hiera file as it was when it started: a
	 * services run for that same file would only repeat it. */
	if (n->catalog.services_gen < n->catalog.config_gen)
		n->catalog.services_gen = n->catalog.config_gen;
}

void node_catalog_recover(struct node *n, bool healthy)
{
	_cleanup_(freep) char *marker = node_services_marker(n);

	n->catalog.services_healthy = healthy;
	/* The node ran its config here before: its services are offered
	 * again under the new lease. */
	if (n->run.local && !n->catalog.published)
		(void)node_publish_services(n, n->catalog.services_healthy, true);
	if (marker && access(marker, F_OK) == 0) {
		log_warnx("the services hook was interrupted by the last stop: running it again");
		n->catalog.hiera_gen++;
	}
}

void node_catalog_stop(struct node *n)
{
	node_timer_cancel(&n->catalog.debounce);
}

void node_catalog_abandon(struct node *n)
{
	n->catalog.services_hook = hook_free(n->catalog.services_hook);
}

void node_catalog_release(struct node *n)
{
	node_catalog_stop(n);
	node_catalog_abandon(n);
	free(n->catalog.hiera_error);
	strv_free(n->catalog.published);
	strv_free(n->catalog.published_values);
	node_services_release(&n->catalog.staged);
	n->catalog = (struct node_catalog){ 0 };
}
