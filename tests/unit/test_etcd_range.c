/*
 * test_etcd_range.c — a paged range read is one snapshot even when memory
 * runs out while a request is built.
 *
 * etcd_get_prefix_paged() pins every page after the first to the first
 * page's revision.  It used to ignore the result of adding "revision" (and
 * "limit", "keys_only") to a page's body, so an allocation failure there sent
 * an unpinned page: read at another moment, the pages no longer made one
 * snapshot.  Here a fake gateway on loopback serves three one-key pages and
 * records every request body, and cJSON's allocator fails at the Nth call, for
 * every N up to well past a clean read: each read must either fail, or send
 * every page after the first with the first page's revision.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "etcd/etcd.h"
#include "tap.h"

/* --- a fake gateway ----------------------------------------------------------- */

static int listen_fd = -1;
static volatile bool stopping;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct buf bodies[64];		/* request bodies of the current read */
static size_t n_bodies;

/* Page i (0, 1, 2) of the range "a/": the key a/i, "more" but for the last. */
static const char *const pages[] = {
	"{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"YS8w\",\"value\":\"eA==\","
	"\"create_revision\":\"2\",\"mod_revision\":\"2\",\"version\":\"1\"}],"
	"\"more\":true,\"count\":\"3\"}",
	"{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"YS8x\",\"value\":\"eA==\","
	"\"create_revision\":\"3\",\"mod_revision\":\"3\",\"version\":\"1\"}],"
	"\"more\":true,\"count\":\"2\"}",
	"{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"YS8y\",\"value\":\"eA==\","
	"\"create_revision\":\"4\",\"mod_revision\":\"4\",\"version\":\"1\"}],"
	"\"count\":\"1\"}",
};

static bool read_request(int fd, struct buf *req, struct buf *body)
{
	char chunk[4096];
	size_t head = 0, want = 0;

	for (;;) {
		char *end = req->data ? strstr(req->data, "\r\n\r\n") : NULL;
		if (end && !head) {
			head = (size_t)(end - req->data) + 4;
			const char *cl = strcasestr(req->data, "\r\ncontent-length:");
			want = cl ? strtoul(cl + 17, NULL, 10) : 0;
		}
		if (head && req->len >= head + want) {
			buf_add(body, req->data + head, want);
			buf_consume(req, head + want);
			return true;
		}
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n <= 0)
			return false;
		buf_add(req, chunk, (size_t)n);
	}
}

static void serve(int fd)
{
	_cleanup_(buf_releasep) struct buf req = BUF_INIT;

	for (;;) {
		struct buf body = BUF_INIT;
		if (!read_request(fd, &req, &body)) {
			buf_release(&body);
			return;
		}
		pthread_mutex_lock(&lock);
		size_t page = n_bodies < 3 ? n_bodies : 2;
		if (n_bodies < ELEMENTSOF(bodies))
			bodies[n_bodies++] = body;
		else
			buf_release(&body);
		pthread_mutex_unlock(&lock);

		_cleanup_(buf_releasep) struct buf reply = BUF_INIT;
		buf_printf(&reply, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
				   "Content-Length: %zu\r\n\r\n%s", strlen(pages[page]), pages[page]);
		if (write(fd, reply.data, reply.len) != (ssize_t)reply.len)
			return;
	}
}

static void *server(void *unused)
{
	while (!stopping) {
		struct pollfd p = { .fd = listen_fd, .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		int fd = accept(listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		serve(fd);
		close(fd);
	}
	return NULL;
}

/* --- failing allocations -------------------------------------------------------- */

static long allocations, fail_at;

static void *failing_malloc(size_t size)
{
	if (++allocations == fail_at)
		return NULL;
	return malloc(size);
}

static void reset_bodies(void)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_bodies; i++)
		buf_release(&bodies[i]);
	n_bodies = 0;
	pthread_mutex_unlock(&lock);
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	pthread_t thread;
	char url[64];

	curl_global_init(CURL_GLOBAL_DEFAULT);
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(listen_fd, 8) < 0 || getsockname(listen_fd, (struct sockaddr *)&a, &alen) < 0 ||
	    pthread_create(&thread, NULL, server, NULL) != 0) {
		printf("1..0 # SKIP no loopback socket\n");
		return 0;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(a.sin_port));

	char *endpoints[] = { url, NULL };
	struct etcd_options opts = { .endpoints = endpoints, .timeout_ms = 5000 };
	struct etcd_client *c = NULL;
	if (etcd_client_new(&opts, &c) < 0) {
		printf("Bail out! cannot make a client\n");
		return 1;
	}

	/* A clean read: three pages, the later two pinned to revision 7. */
	struct etcd_kv_list list = ETCD_KV_LIST_INIT;
	is_int(etcd_get_prefix_paged(c, "a/", 0, 0, 1, &list), 0, "a clean paged read");
	is_int(list.n, 3, "three keys");
	is_int(list.revision, 7, "at the first page's revision");
	is_int(n_bodies, 3, "three requests");
	ok(n_bodies == 3 && !strstr(buf_str(&bodies[0]), "revision") &&
	   strstr(buf_str(&bodies[1]), "\"revision\":\"7\"") &&
	   strstr(buf_str(&bodies[2]), "\"revision\":\"7\""),
	   "the first page reads the newest, the others are pinned");
	etcd_kv_list_release(&list);

	/* Every allocation of the read fails in turn. */
	cJSON_Hooks hooks = { .malloc_fn = failing_malloc, .free_fn = free };
	long unpinned = 0, failed = 0, whole = 0, partial = 0;
	for (fail_at = 1; fail_at <= 400; fail_at++) {
		reset_bodies();
		allocations = 0;
		cJSON_InitHooks(&hooks);
		int r = etcd_get_prefix_paged(c, "a/", ETCD_KEYS_ONLY, 0, 1, &list);
		cJSON_InitHooks(NULL);
		pthread_mutex_lock(&lock);
		for (size_t i = 1; i < n_bodies; i++)
			if (!strstr(buf_str(&bodies[i]), "\"revision\":\"7\"")) {
				unpinned++;
				printf("# failing allocation %ld: page %zu sent as %s\n", fail_at, i,
				       buf_str(&bodies[i]));
			}
		for (size_t i = 0; i < n_bodies; i++)
			if (!strstr(buf_str(&bodies[i]), "\"keys_only\":true") ||
			    !strstr(buf_str(&bodies[i]), "\"limit\":\"1\""))
				partial++;
		pthread_mutex_unlock(&lock);
		if (r < 0)
			failed++;
		else if (list.n == 3 && list.revision == 7)
			whole++;
		etcd_kv_list_release(&list);
	}
	is_int(unpinned, 0, "no page after the first is ever sent without the revision");
	is_int(partial, 0, "no page is ever sent without its limit or keys_only");
	ok(failed > 0, "some reads failed (%ld), as they must", failed);
	is_int(failed + whole, 400, "every other read is whole");

	etcd_client_free(c);
	stopping = true;
	pthread_join(thread, NULL);
	close(listen_fd);
	reset_bodies();
	curl_global_cleanup();
	return done_testing();
}
