/*
 * fleet_identity.c — one etcd identity per host (node_identity, decommission).
 *
 * etcd grants a role permissions on exact keys and [key, range_end) ranges.
 * Every key a node writes ends in its host name at a fixed place of the
 * layout, so host H's writes are a short, fixed list of exact keys: its
 * states, alive/H, running_version/H, history/H, rollout/holders/H, rollout/canary/H,
 * groups/G/H and available_services/S/H for each service named; and what
 * every node shares: rollout/failed/ (a host that died holding a slot gets
 * its record from another), rollout/halted and rollout/promoted (a node that
 * sees the failure budget exceeded halts the rollout), rollout/stages/ (the
 * gates of a staged rollout).  It reads what it acts on:
 * the versions, pause/, rollout/, the catalog, and (for staged rollouts)
 * alive/, running_version/ and groups/.  fleet_identity_grants() computes that
 * list (pure); fleet_identity_apply() makes the etcd user H and the role
 * orchestrate-node-H hold exactly it, through the gateway's auth API, and is
 * idempotent: it revokes what is not in the list and grants what is missing.
 *
 * The user is named after the host because etcd takes the user of a client
 * certificate from its CN, and the Puppet agent's certificate has the
 * certname there: the same name either way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "base/array.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "fleet/fleet.h"
#include "fleet/schema.h"
#include "base/strv.h"

#define ROLE_PREFIX "orchestrate-node-"

static const char *const perm_names[] = { "READ", "WRITE", "READWRITE" };

const char *fleet_perm_name(enum fleet_perm p)
{
	return p >= 0 && p < 3 ? perm_names[p] : "?";
}

void fleet_grants_free(struct fleet_grant *g, size_t n)
{
	for (size_t i = 0; g && i < n; i++) {
		free(g[i].key);
		free(g[i].range_end);
	}
	free(g);
}

char *fleet_identity_role(const char *host)
{
	struct buf b = BUF_INIT;
	if (!schema_name_valid(host) || buf_printf(&b, ROLE_PREFIX "%s", host) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b);
}

struct grants {
	struct fleet_grant *v;
	size_t n, cap;
};

/* Adds key (taken; NULL is out of memory) exactly, or as a prefix range. */
static int grants_add(struct grants *g, char *key, bool prefix, enum fleet_perm perm)
{
	_cleanup_(freep) char *k = key;
	char *end = NULL;

	if (!k)
		return -ENOMEM;
	if (prefix) {
		size_t len = strlen(k);
		if (!(end = malloc(len + 2)))
			return -ENOMEM;
		len = etcd_prefix_end(k, len, end);
		end[len] = '\0';
	}
	if (ARRAY_GROW(g->v, g->cap, g->n + 1, 32) < 0) {
		free(end);
		return -ENOMEM;
	}
	g->v[g->n++] = (struct fleet_grant){ TAKE_PTR(k), end, perm };
	return 0;
}

int fleet_identity_grants(const char *P, const char *host, const char *group,
			  char *const *services, struct fleet_grant **ret, size_t *ret_n)
{
	struct grants g = { 0 };
	int r = 0;

	*ret = NULL;
	*ret_n = 0;
	if (!schema_name_valid(host) || (group && !schema_name_valid(group)))
		return -EINVAL;
	for (size_t i = 0; services && services[i]; i++)
		if (!schema_name_valid(services[i]))
			return -EINVAL;

	/* what the host writes: exact keys, each with the host as last part */
	for (int t = 0; t < _STATUS_TYPE_MAX && r >= 0; t++)
		for (int s = 0; s < _STATE_MAX && r >= 0; s++)
			if (status_state_allowed(t, s))
				r = grants_add(&g, key_status(P, t, s, host), false, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_alive(P, host), false, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_running_version(P, host), false, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_rollout_holder(P, host), false, FLEET_PERM_READWRITE);
	/* the slot queue's tail, shared: each host names itself there as it
	 * queues (a wrong name costs the host behind a read of the queue) */
	if (r >= 0)
		r = grants_add(&g, key_rollout_tail(P), false, FLEET_PERM_READWRITE);
	/* its run history, read back at start and rewritten by each run's end */
	if (r >= 0)
		r = grants_add(&g, key_history(P, host), false, FLEET_PERM_READWRITE);
	/* a rollout that stops itself: the host's canary record, the failure
	 * records (all of them: the first host waiting for a slot writes the record
	 * of a host that died holding a slot), and the two shared records any
	 * node may write (the halt it saw, the automatic promotion) — a node
	 * that may halt the rollout gains nothing by writing a failure.  Not
	 * current_version: an automatic revert needs that granted by hand
	 * (orchestrate(1), ROLLOUT SAFETY). */
	if (r >= 0)
		r = grants_add(&g, key_rollout_failed_dir(P), true, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_rollout_canary(P, host), false, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_rollout_halted(P), false, FLEET_PERM_READWRITE);
	if (r >= 0)
		r = grants_add(&g, key_rollout_promoted(P), false, FLEET_PERM_READWRITE);
	/* the gates of a staged rollout: which one a host watches for follows
	 * the policy's group order, which the operator may change */
	if (r >= 0)
		r = grants_add(&g, key_rollout_stages_dir(P), true, FLEET_PERM_READWRITE);
	if (r >= 0 && group)
		r = grants_add(&g, key_group_host(P, group, host), false, FLEET_PERM_READWRITE);
	for (size_t i = 0; services && services[i] && r >= 0; i++)
		r = grants_add(&g, key_service(P, services[i], host), false, FLEET_PERM_READWRITE);

	/* what it acts on: read only */
	if (r >= 0)
		r = grants_add(&g, key_current_version(P), false, FLEET_PERM_READ);
	if (r >= 0)
		r = grants_add(&g, key_previous_version(P), false, FLEET_PERM_READ);
	char *(*dirs[])(const char *) = {
		key_pause_dir, key_rollout_dir, key_services_dir, key_alive_dir,
		key_running_version_dir, key_groups_dir,
	};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && r >= 0; i++)
		r = grants_add(&g, dirs[i](P), true, FLEET_PERM_READ);
	if (r < 0) {
		fleet_grants_free(g.v, g.n);
		return r;
	}
	*ret = g.v;
	*ret_n = g.n;
	return 0;
}

/* --- the auth API ------------------------------------------------------------------ */

static int add_b64(cJSON *obj, const char *field, const char *s)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (base64_encode(s, strlen(s), &b) < 0 || buf_addc(&b, '\0') < 0)
		return -ENOMEM;
	return cJSON_AddStringToObject(obj, field, b.data) ? 0 : -ENOMEM;
}

static char *decode_b64(const cJSON *item)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (!cJSON_IsString(item))
		return strdup("");
	if (base64_decode(item->valuestring, strlen(item->valuestring), &b) < 0 ||
	    buf_addc(&b, '\0') < 0)
		return NULL;
	return buf_detach(&b);
}

/* Whether r and the client's last error say "not found" (etcd answers a
 * missing user or role with FailedPrecondition, which the client maps to
 * -EINVAL). */
static bool not_found(struct fleet *f, int r)
{
	const char *e = etcd_last_error(f->etcd);
	return r == -EINVAL && e && strstr(e, "not found");
}

/* One request of the auth API; takes body (NULL: out of memory). */
static int call(struct fleet *f, const char *path, cJSON *body_, cJSON **ret)
{
	_cleanup_(cJSON_Deletep) cJSON *body = body_;
	_cleanup_(cJSON_Deletep) cJSON *reply = NULL;
	if (!body)
		return -ENOMEM;
	int r = etcd_request(f->etcd, path, body, &reply);
	if (r >= 0 && ret)
		*ret = TAKE_PTR(reply);
	return r;
}

static cJSON *named(const char *field, const char *name)
{
	cJSON *o = cJSON_CreateObject();
	if (o && !cJSON_AddStringToObject(o, field, name)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static enum fleet_perm perm_of(const cJSON *p)
{
	if (cJSON_IsString(p))
		for (int i = 0; i < 3; i++)
			if (strcmp(p->valuestring, perm_names[i]) == 0)
				return (enum fleet_perm)i;
	if (cJSON_IsNumber(p) && p->valueint >= 0 && p->valueint < 3)
		return (enum fleet_perm)p->valueint;
	return FLEET_PERM_READ;	/* the gateway leaves out 0, READ */
}

static bool grant_eq(const struct fleet_grant *a, const char *key, const char *end,
		     enum fleet_perm perm)
{
	return a->perm == perm && strcmp(a->key, key) == 0 &&
	       strcmp(a->range_end ? a->range_end : "", end ? end : "") == 0;
}

static int role_revoke(struct fleet *f, const char *role, const char *key, const char *end)
{
	_cleanup_(cJSON_Deletep) cJSON *body = named("role", role);
	int r;
	if (!body)
		return -ENOMEM;
	if ((r = add_b64(body, "key", key)) < 0 ||
	    (end && *end && (r = add_b64(body, "range_end", end)) < 0))
		return r;
	return call(f, "/v3/auth/role/revoke", TAKE_PTR(body), NULL);
}

static int role_grant(struct fleet *f, const char *role, const struct fleet_grant *g)
{
	_cleanup_(cJSON_Deletep) cJSON *body = named("name", role);
	cJSON *perm;
	int r;
	if (!body || !(perm = cJSON_AddObjectToObject(body, "perm")) ||
	    !cJSON_AddStringToObject(perm, "permType", perm_names[g->perm]))
		return -ENOMEM;
	if ((r = add_b64(perm, "key", g->key)) < 0 ||
	    (g->range_end && (r = add_b64(perm, "range_end", g->range_end)) < 0))
		return r;
	return call(f, "/v3/auth/role/grant", TAKE_PTR(body), NULL);
}

int fleet_identity_apply(struct fleet *f, const char *host, const char *password,
			 const struct fleet_grant *grants, size_t n, size_t *ret_changes)
{
	_cleanup_(freep) char *role = fleet_identity_role(host);
	_cleanup_(cJSON_Deletep) cJSON *user = NULL;
	_cleanup_(cJSON_Deletep) cJSON *have = NULL;
	_cleanup_(freep) bool *kept = NULL;
	size_t changes = 0;
	bool has_role = false;
	int r;

	*ret_changes = 0;
	if (!role)
		return -EINVAL;
	if (!(kept = calloc(n ? n : 1, sizeof(bool))))
		return -ENOMEM;

	/* the role, then its permissions */
	r = call(f, "/v3/auth/role/get", named("role", role), &have);
	if (r < 0 && not_found(f, r)) {
		if ((r = call(f, "/v3/auth/role/add", named("name", role), NULL)) < 0)
			return r;
		changes++;
	} else if (r < 0) {
		return r;
	}
	const cJSON *perms = have ? cJSON_GetObjectItemCaseSensitive(have, "perm") : NULL;
	const cJSON *p;
	cJSON_ArrayForEach(p, perms) {
		_cleanup_(freep) char *key = decode_b64(cJSON_GetObjectItemCaseSensitive(p, "key"));
		_cleanup_(freep) char *end = decode_b64(cJSON_GetObjectItemCaseSensitive(p, "range_end"));
		enum fleet_perm perm = perm_of(cJSON_GetObjectItemCaseSensitive(p, "permType"));
		bool wanted = false;

		if (!key || !end)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			if (!kept[i] && grant_eq(&grants[i], key, end, perm)) {
				kept[i] = wanted = true;
				break;
			}
		if (wanted)
			continue;
		if ((r = role_revoke(f, role, key, end)) < 0)
			return r;
		changes++;
	}
	for (size_t i = 0; i < n; i++) {
		if (kept[i])
			continue;
		if ((r = role_grant(f, role, &grants[i])) < 0)
			return r;
		changes++;
	}

	/* the user, its password, its role */
	r = call(f, "/v3/auth/user/get", named("name", host), &user);
	if (r < 0 && not_found(f, r)) {
		_cleanup_(cJSON_Deletep) cJSON *body = named("name", host);
		if (!body)
			return -ENOMEM;
		if (password) {
			if (!cJSON_AddStringToObject(body, "password", password))
				return -ENOMEM;
		} else {
			cJSON *o = cJSON_AddObjectToObject(body, "options");
			if (!o || !cJSON_AddTrueToObject(o, "no_password"))
				return -ENOMEM;
		}
		if ((r = call(f, "/v3/auth/user/add", TAKE_PTR(body), NULL)) < 0)
			return r;
		changes++;
	} else if (r < 0) {
		return r;
	} else if (password) {
		_cleanup_(cJSON_Deletep) cJSON *body = named("name", host);
		_cleanup_(cJSON_Deletep) cJSON *login = named("name", host);
		if (!body || !cJSON_AddStringToObject(body, "password", password) ||
		    !login || !cJSON_AddStringToObject(login, "password", password))
			return -ENOMEM;
		if ((r = call(f, "/v3/auth/user/changepw", TAKE_PTR(body), NULL)) < 0)
			return r;
		/* etcd keeps a user made for certificates (no_password) without
		 * a password through changepw: logging in says whether it took.
		 * If not, the user is made again, with the password (and its
		 * role granted again below). */
		if (call(f, "/v3/auth/authenticate", TAKE_PTR(login), NULL) < 0) {
			_cleanup_(cJSON_Deletep) cJSON *add = named("name", host);
			if (!add || !cJSON_AddStringToObject(add, "password", password))
				return -ENOMEM;
			if ((r = call(f, "/v3/auth/user/delete", named("name", host), NULL)) < 0 ||
			    (r = call(f, "/v3/auth/user/add", TAKE_PTR(add), NULL)) < 0)
				return r;
			cJSON_Delete(user);
			user = NULL;
			changes++;
		}
	}
	const cJSON *roles = user ? cJSON_GetObjectItemCaseSensitive(user, "roles") : NULL;
	cJSON_ArrayForEach(p, roles)
		if (cJSON_IsString(p) && strcmp(p->valuestring, role) == 0)
			has_role = true;
	if (!has_role) {
		_cleanup_(cJSON_Deletep) cJSON *body = named("user", host);
		if (!body || !cJSON_AddStringToObject(body, "role", role))
			return -ENOMEM;
		if ((r = call(f, "/v3/auth/user/grant", TAKE_PTR(body), NULL)) < 0)
			return r;
		changes++;
	}
	*ret_changes = changes;
	return 0;
}

int fleet_identity_remove(struct fleet *f, const char *host)
{
	_cleanup_(freep) char *role = fleet_identity_role(host);
	int removed = 0, r;

	if (!role)
		return -EINVAL;
	r = call(f, "/v3/auth/user/delete", named("name", host), NULL);
	if (r >= 0)
		removed++;
	else if (!not_found(f, r))
		return r;
	r = call(f, "/v3/auth/role/delete", named("role", role), NULL);
	if (r >= 0)
		removed++;
	else if (!not_found(f, r))
		return r;
	return removed;
}
