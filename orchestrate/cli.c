/*
 * cli.c — orchestrate's main, its one command table and the dispatcher.
 *
 * Like git's commands[] and systemd's verbs[], one table names every command
 * with its function, its arity, its own options, a synopsis in man-page form
 * and a one-line description.  Everything a command should not repeat happens
 * here, once: global options (before or after the command name), hyphenated
 * aliases (trigger-update), per-command options, `CMD -h` and `help`, arity
 * errors, unknown commands with a suggestion, resolving command line,
 * environment and config file into settings, and the final check that standard
 * output was really written.
 *
 * Exit statuses (SPEC §3): 64 usage, invalid names and a bad config file; 69 etcd
 * unreachable; 77 authentication or permission refused; 74 (EX_IOERR, our
 * choice: SPEC is silent) when standard output cannot be written; otherwise
 * what the command returns.
 *
 * Option order.  Global options may come before the command name or anywhere
 * after it; the command's own options may come anywhere after it.  Where a
 * command's option has the name of a global one (wait_for_service --timeout,
 * pause --host, update_own_info --version), after the command name it is the
 * command's.  A positional argument may look like a negative number
 * (update_own_status puppet -1): such an argument is never taken for an option.
 * "--" ends the options.
 *
 * The second half of the file holds the helpers the cmd_*.c files share: the
 * lazily created etcd client, error printing, JSON output, the local version
 * file and the watch-based wait on a directory of keys.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <cjson/cJSON.h>

#include "buf.h"
#include "cleanup.h"
#include "cli.h"
#include "etcd.h"
#include "fleet.h"
#include "hiera.h"
#include "log.h"
#include "options.h"
#include "schema.h"

/* EX_NOINPUT: the local version file exists but cannot be read. */
#define EXIT_NOINPUT 66

#ifndef ORCHESTRATE_VERSION
#define ORCHESTRATE_VERSION "0.1.0"
#endif

/* --- per-command options ------------------------------------------------------ */

enum {
	CO_IF_CURRENT = 0x200,
	CO_WAIT,
	CO_DETAIL,
	CO_COUNT,
	CO_HEALTHY,
	CO_ADDRESS,
	CO_TTL,
	CO_OUTPUT,
	CO_HOSTS,
	CO_GROUP,
	CO_HOST,
	CO_REASON,
	CO_INTERVAL,
	CO_VERSION,
	CO_WATCH,
	CO_MAX_PARALLEL,
	CO_MAX_PERCENT,
	CO_GROUPS,
};

#define OPT_END { NULL, 0, NULL, 0 }
static const struct option o_trigger_update[] = {
	{ "if-current", required_argument, NULL, CO_IF_CURRENT }, OPT_END };
static const struct option o_update_own_info[] = {
	{ "version", required_argument, NULL, CO_VERSION },
	{ "interval", required_argument, NULL, CO_INTERVAL }, OPT_END };
static const struct option o_wait[] = {
	{ "wait", required_argument, NULL, CO_WAIT }, OPT_END };
static const struct option o_update_own_status[] = {
	{ "detail", required_argument, NULL, CO_DETAIL }, OPT_END };
static const struct option o_get_failures[] = {
	{ "hosts", no_argument, NULL, CO_HOSTS }, OPT_END };
static const struct option o_status[] = {
	{ "watch", no_argument, NULL, CO_WATCH }, OPT_END };
static const struct option o_publish_service[] = {
	{ "address", required_argument, NULL, CO_ADDRESS },
	{ "ttl", required_argument, NULL, CO_TTL }, OPT_END };
static const struct option o_cache_services[] = {
	{ "output", required_argument, NULL, CO_OUTPUT }, OPT_END };
static const struct option o_wait_for_service[] = {
	{ "count", required_argument, NULL, CO_COUNT },
	{ "healthy", no_argument, NULL, CO_HEALTHY },
	{ "timeout", required_argument, NULL, CO_WAIT },
	{ "wait", required_argument, NULL, CO_WAIT }, OPT_END };
static const struct option o_pause[] = {
	{ "group", required_argument, NULL, CO_GROUP },
	{ "host", required_argument, NULL, CO_HOST },
	{ "reason", required_argument, NULL, CO_REASON }, OPT_END };
static const struct option o_rollout_policy[] = {
	{ "max-parallel", required_argument, NULL, CO_MAX_PARALLEL },
	{ "max-percent", required_argument, NULL, CO_MAX_PERCENT },
	{ "groups", required_argument, NULL, CO_GROUPS }, OPT_END };
static const struct option o_resume[] = {
	{ "group", required_argument, NULL, CO_GROUP },
	{ "host", required_argument, NULL, CO_HOST }, OPT_END };

/* --- the command table ---------------------------------------------------------- */

enum command_group { G_OPERATORS, G_NODES, G_CI, G_PUPPET, G_HUMANS, _G_MAX };

static const char *const group_titles[_G_MAX] = {
	[G_OPERATORS] = "Operators: the desired version and the fleet",
	[G_NODES] = "Nodes and cron: this host's own state",
	[G_CI] = "CI gates: where the fleet is",
	[G_PUPPET] = "Puppet: service discovery",
	[G_HUMANS] = "Humans: at a glance",
};

enum {
	CMD_NEEDS_ETCD = 1 << 0,	/* talks to etcd (all but local_version) */
	CMD_JSON = 1 << 1,		/* a read command: --json changes its output */
};

struct command {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv);
	int min_args, max_args;		/* max -1: any number */
	unsigned flags;
	enum command_group group;
	const struct option *options;
	const char *needs;		/* what the arity error says is missing */
	const char *synopsis;		/* after "orchestrate " */
	const char *description;
	const char *help;		/* option lines for CMD -h, or NULL */
};

static const struct command commands[] = {
	{ "trigger_update", cmd_trigger_update, 1, 1, CMD_NEEDS_ETCD, G_OPERATORS,
	  o_trigger_update, "a VERSION",
	  "trigger_update VERSION [--if-current OLD]",
	  "set the desired version (and previous_version) in one transaction",
	  "  --if-current OLD   only if current_version is still OLD (compare-and-swap);\n"
	  "                     exit 1 when it is not\n" },
	{ "rollback", cmd_rollback, 0, 0, CMD_NEEDS_ETCD, G_OPERATORS, NULL, NULL,
	  "rollback",
	  "set the desired version back to previous_version; exit 1 when there is none",
	  NULL },
	{ "current_version", cmd_current_version, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_OPERATORS,
	  NULL, NULL,
	  "current_version",
	  "print the desired version; exit 1 when none is set", NULL },
	{ "provision", cmd_provision, 1, 1, CMD_NEEDS_ETCD, G_OPERATORS, NULL, "a HOST",
	  "provision HOST",
	  "mark HOST as expected (status/provisioned/success)", NULL },
	{ "decommission", cmd_decommission, 1, 1, CMD_NEEDS_ETCD, G_OPERATORS, NULL, "a HOST",
	  "decommission HOST",
	  "remove every key of HOST in one transaction", NULL },
	{ "pause", cmd_pause, 0, 0, CMD_NEEDS_ETCD, G_OPERATORS, o_pause, NULL,
	  "pause [--group GROUP | --host HOST] [--reason TEXT]",
	  "stop config runs fleet-wide, for a group or for a host",
	  "  --group GROUP      pause only the hosts of GROUP\n"
	  "  --host HOST        pause only HOST\n"
	  "  --reason TEXT      why, shown by status and in the nodes' logs\n" },
	{ "resume", cmd_resume, 0, 0, CMD_NEEDS_ETCD, G_OPERATORS, o_resume, NULL,
	  "resume [--group GROUP | --host HOST]",
	  "allow config runs again (fleet-wide, for a group or for a host)",
	  "  --group GROUP      resume the hosts of GROUP\n"
	  "  --host HOST        resume HOST\n" },
	{ "rollout_policy", cmd_rollout_policy, 0, 1, CMD_NEEDS_ETCD | CMD_JSON, G_OPERATORS,
	  o_rollout_policy, NULL,
	  "rollout_policy [set [--max-parallel N | --max-percent P] [--groups G1,G2,...] | clear]",
	  "show, set or clear the rollout policy: how many hosts apply an update at once,\n"
	  "and the order of groups (a group starts when the earlier ones are done)",
	  "  set                replace the policy with the options given (validated)\n"
	  "  clear              remove the policy: every host runs at once\n"
	  "  --max-parallel N   at most N hosts (of one group, with --groups) at a time\n"
	  "  --max-percent P    at most P% (1-100) of the alive hosts (of one group)\n"
	  "  --groups G1,G2,... one group at a time, in this order; hosts of no listed\n"
	  "                     group go after the last one\n" },

	{ "pending_update", cmd_pending_update, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_NODES,
	  NULL, NULL,
	  "pending_update",
	  "compare the local and the desired version; exit 0 update pending, 1 up to date,\n"
	  "2 etcd unreachable (local version known), 3 no desired version or nothing known",
	  NULL },
	{ "local_version", cmd_local_version, 0, 1, CMD_JSON, G_NODES, NULL, NULL,
	  "local_version [VERSION]",
	  "print this host's local version file, or set it to VERSION", NULL },
	{ "update_own_status", cmd_update_own_status, 2, 2, CMD_NEEDS_ETCD, G_NODES,
	  o_update_own_status, "a TYPE and a RESULT",
	  "update_own_status TYPE RESULT [--detail TEXT]",
	  "set this host's state of TYPE (puppet, validation, provisioned) from RESULT,\n"
	  "an exit code or a state name",
	  "  --detail TEXT      stored with the state (at most 4 KiB, the tail is kept)\n" },
	{ "update_own_info", cmd_update_own_info, 0, 0, CMD_NEEDS_ETCD, G_NODES,
	  o_update_own_info, NULL,
	  "update_own_info [--version V] [--interval N]",
	  "publish this host under running_version/V with a lease of 2N+10 seconds",
	  "  --version V        the version to publish (default: the local version)\n"
	  "  --interval N       seconds between runs (default 300: lease 610 s)\n" },
	{ "local_health", cmd_local_health, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_NODES,
	  NULL, NULL,
	  "local_health",
	  "print this host's puppet and validation states; exit 0 when both succeeded",
	  NULL },
	{ "publish_service", cmd_publish_service, 0, -1, CMD_NEEDS_ETCD, G_NODES,
	  o_publish_service, NULL,
	  "publish_service [SERVICE ...] [--address IFACE=ADDR]... [--ttl SECONDS]",
	  "publish this host's services (default: the profile list) with its addresses",
	  "  --address IFACE=ADDR  an address to publish (repeatable; default: node.addresses\n"
	  "                        of the config, else every IPv4 interface but loopback)\n"
	  "  --ttl SECONDS         attach a lease of that TTL (default: no lease)\n" },
	{ "unpublish_service", cmd_unpublish_service, 1, -1, CMD_NEEDS_ETCD, G_NODES, NULL,
	  "a SERVICE",
	  "unpublish_service SERVICE ...",
	  "withdraw this host's entry for each SERVICE", NULL },

	{ "verify_hosts", cmd_verify_hosts, 1, -1, CMD_NEEDS_ETCD | CMD_JSON, G_CI, o_wait,
	  "a VERSION",
	  "verify_hosts VERSION [HOST ...] [--wait SECONDS]",
	  "print the hosts (arguments, or one a line on stdin) not at VERSION;\n"
	  "exit 0 when all are at VERSION, 1 otherwise",
	  "  --wait SECONDS     block on an etcd watch until all are at VERSION or time runs out\n" },
	{ "check_single_version", cmd_check_single_version, 1, 1, CMD_NEEDS_ETCD | CMD_JSON,
	  G_CI, o_wait, "a VERSION",
	  "check_single_version VERSION [-v] [--wait SECONDS]",
	  "exit 0 when VERSION runs somewhere and no other version runs anywhere",
	  "  -v                 print every running version with its number of hosts\n"
	  "  --wait SECONDS     block on an etcd watch until it holds or time runs out\n" },
	{ "running_versions", cmd_running_versions, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_CI,
	  NULL, NULL,
	  "running_versions",
	  "print every version some host runs, one a line", NULL },
	{ "hosts_at_version", cmd_hosts_at_version, 1, 1, CMD_NEEDS_ETCD | CMD_JSON, G_CI,
	  NULL, "a VERSION",
	  "hosts_at_version VERSION",
	  "print the hosts running VERSION, one a line", NULL },
	{ "get_failures", cmd_get_failures, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_CI,
	  o_get_failures, NULL,
	  "get_failures [--hosts]",
	  "count hosts failed in puppet or validation, and unaccounted hosts;\n"
	  "exit 0 when there are none, 1 otherwise",
	  "  --hosts            list them, one \"failed puppet HOST\", \"failed validation HOST\"\n"
	  "                     or \"unaccounted HOST\" a line\n" },

	{ "wait_for_service", cmd_wait_for_service, 1, 1, CMD_NEEDS_ETCD | CMD_JSON, G_PUPPET,
	  o_wait_for_service, "a SERVICE",
	  "wait_for_service SERVICE [--count N] [--healthy] [--timeout SECONDS]",
	  "block on an etcd watch until N hosts publish SERVICE; exit 1 on timeout",
	  "  --count N          how many hosts (default 1)\n"
	  "  --healthy          count only hosts whose validation succeeded\n"
	  "  --timeout SECONDS  give up after this long (default: wait forever;\n"
	  "                     0: check once)\n" },
	{ "cache_services", cmd_cache_services, 0, 0, CMD_NEEDS_ETCD, G_PUPPET,
	  o_cache_services, NULL,
	  "cache_services [--output FILE]",
	  "write the service catalog as hiera YAML, atomically, only when it changed",
	  "  --output FILE      the file (default: paths.hiera_services of the config,\n"
	  "                     /etc/puppet/hiera/data/services.yaml)\n" },
	{ "get_services", cmd_get_services, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_PUPPET, NULL,
	  NULL,
	  "get_services",
	  "print the service catalog as hiera YAML", NULL },

	{ "status", cmd_status, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_HUMANS, o_status, NULL,
	  "status [--watch]",
	  "one row a host (version, puppet, validation, alive, group, age, and why it\n"
	  "failed, waits or is paused), hosts behind the desired version first; then totals",
	  "  --watch            redraw on every change (an etcd watch, not a timer)\n" },
	{ "ping", cmd_ping, 0, 0, CMD_NEEDS_ETCD | CMD_JSON, G_HUMANS, NULL, NULL,
	  "ping",
	  "check that etcd answers; print the member and its version; exit 1 when not",
	  NULL },
};

static const char global_help[] =
	"Global options (before or after the command):\n"
	"  --etcd URLS             etcd endpoints, comma-separated ($ORCHESTRATE_ETCD;\n"
	"                          default http://127.0.0.1:2379)\n"
	"  --host H, --port N      compatibility: the endpoint http://H:N\n"
	"  --prefix P              key prefix ($ORCHESTRATE_PREFIX; default none)\n"
	"  --config FILE           config file (default " CONFIG_DEFAULT_PATH ")\n"
	"  --cacert FILE, --cert FILE, --key FILE   TLS\n"
	"  --user NAME             etcd user; password from $ORCHESTRATE_PASSWORD or\n"
	"  --password-file FILE    the first line of FILE\n"
	"  --timeout SECONDS       per etcd request (default 5)\n"
	"  --hostname H            this host's name (default: the system's)\n"
	"  --local-version-file FILE  ($ORCHESTRATE_LOCAL_VERSION_FILE;\n"
	"                          default /etc/current_version)\n"
	"  --json                  machine-readable output for read commands\n"
	"  -v, --verbose           say more (on stderr)\n"
	"  -h, --help              this help; 'orchestrate COMMAND -h' for a command\n"
	"  --version               print the program's version\n";

static void print_command_usage(FILE *f, const struct command *c)
{
	fprintf(f, "usage: orchestrate [GLOBAL OPTIONS] %s\n\n%s.\n", c->synopsis,
		c->description);
	if (c->help)
		fprintf(f, "\nOptions:\n%s", c->help);
	fprintf(f, "\nSee 'orchestrate --help' for the global options.\n");
}

static void print_help(FILE *f)
{
	fprintf(f, "usage: orchestrate [GLOBAL OPTIONS] COMMAND [ARGS]\n");
	for (int g = 0; g < _G_MAX; g++) {
		fprintf(f, "\n%s\n", group_titles[g]);
		for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
			const struct command *c = &commands[i];
			if (c->group != (enum command_group)g)
				continue;
			fprintf(f, "  %s\n", c->synopsis);
			/* Every line of the description, indented under the synopsis:
			 * a summary cut at its first line would cut sentences. */
			for (const char *line = c->description; *line;) {
				const char *nl = strchr(line, '\n');
				int len = nl ? (int)(nl - line) : (int)strlen(line);
				fprintf(f, "      %.*s\n", len, line);
				line += len + (nl ? 1 : 0);
			}
		}
	}
	fprintf(f, "\n%s", global_help);
	fprintf(f, "\nCommands may also be spelled with hyphens (trigger-update).\n"
		   "'orchestrate COMMAND -h' describes a command and its options.\n");
}

/* The command named name, hyphens read as underscores; NULL when none. */
static const struct command *command_find(const char *name)
{
	_cleanup_(freep) char *n = strdup(name);
	if (!n)
		return NULL;
	for (char *p = n; *p; p++)
		if (*p == '-')
			*p = '_';
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i].name, n) == 0)
			return &commands[i];
	return NULL;
}

/* Levenshtein distance, for "did you mean". */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	_cleanup_(freep) size_t *row = calloc(lb + 1, sizeof(size_t));
	if (!row)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			char ca = a[i - 1] == '-' ? '_' : a[i - 1];
			size_t best = diag + (ca != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

static const struct command *command_nearest(const char *name)
{
	const struct command *best = NULL;
	size_t best_d = (size_t)-1;
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		size_t d = edit_distance(name, commands[i].name);
		if (d < best_d) {
			best_d = d;
			best = &commands[i];
		}
	}
	size_t limit = strlen(name) / 3 > 2 ? strlen(name) / 3 : 2;
	return best_d <= limit ? best : NULL;
}

static bool looks_negative_number(const char *s)
{
	if (s[0] != '-' || !s[1])
		return false;
	for (const char *p = s + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	return true;
}

/* The long option that text ("--name" or "--name=value") names: an exact
 * match, else a unique prefix as getopt_long allows.  NULL when none. */
static const struct option *long_option_find(const struct option *opts, const char *text)
{
	const char *name = text + 2;
	size_t len = strcspn(name, "=");
	const struct option *found = NULL;
	int matches = 0;
	for (const struct option *o = opts; o->name; o++) {
		if (strncmp(o->name, name, len) != 0)
			continue;
		if (strlen(o->name) == len)
			return o;
		found = o;
		matches++;
	}
	return matches == 1 ? found : NULL;
}

/*
 * Splits the arguments after the command name into options (with their
 * values) and positional arguments, so that a positional "-1" is never an
 * option and options may follow positional arguments.  Both lists point into
 * argv; opt_argv[0] is the command name, as getopt wants.
 */
static int split_args(int argc, char **argv, const struct option *opts, char ***ret_opt,
		      int *ret_nopt, char ***ret_pos, int *ret_npos)
{
	_cleanup_(freep) char **o = calloc((size_t)argc + 1, sizeof(char *));
	_cleanup_(freep) char **p = calloc((size_t)argc + 1, sizeof(char *));
	int no = 0, np = 0;

	if (!o || !p)
		return -ENOMEM;
	o[no++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			while (++i < argc)
				p[np++] = argv[i];
			break;
		}
		if (a[0] != '-' || !a[1] || looks_negative_number(a)) {
			p[np++] = argv[i];
			continue;
		}
		o[no++] = argv[i];
		if (a[1] == '-') {
			const struct option *lo = long_option_find(opts, a);
			if (lo && lo->has_arg == required_argument && !strchr(a, '=') &&
			    i + 1 < argc)
				o[no++] = argv[++i];
		}
		/* Short options (-v, -h) take no values. */
	}
	*ret_opt = TAKE_PTR(o);
	*ret_nopt = no;
	*ret_pos = TAKE_PTR(p);
	*ret_npos = np;
	return 0;
}

static void cli_args_release(struct cli_args *a)
{
	for (size_t i = 0; i < a->n_addresses; i++) {
		free(a->addresses[i].iface);
		free(a->addresses[i].address);
	}
	free(a->addresses);
	a->addresses = NULL;
	a->n_addresses = 0;
}

static int parse_seconds(const char *cmd, const char *opt, const char *arg, double *ret)
{
	char *end;
	errno = 0;
	double d = strtod(arg, &end);
	if (errno || end == arg || *end || d < 0 || d > 1e9 || d != d)
		return cli_error(EXIT_USAGE, "invalid %s '%s' for '%s': expected seconds", opt,
				 arg, cmd);
	*ret = d;
	return 0;
}

static int parse_long(const char *cmd, const char *opt, const char *arg, long min, long max,
		      long *ret)
{
	char *end;
	errno = 0;
	long n = strtol(arg, &end, 10);
	if (errno || end == arg || *end || n < min || n > max)
		return cli_error(EXIT_USAGE, "invalid %s '%s' for '%s': expected %ld-%ld", opt,
				 arg, cmd, min, max);
	*ret = n;
	return 0;
}

/* --address IFACE=ADDR: IFACE a valid name, ADDR an IPv4 or IPv6 address. */
static int parse_address(const char *cmd, const char *arg, struct cli_args *a)
{
	const char *eq = strchr(arg, '=');
	if (!eq)
		return cli_error(EXIT_USAGE, "invalid --address '%s' for '%s': expected IFACE=ADDR",
				 arg, cmd);
	_cleanup_(freep) char *iface = strndup(arg, (size_t)(eq - arg));
	_cleanup_(freep) char *addr = strdup(eq + 1);
	if (!iface || !addr)
		return cli_error(1, "out of memory");
	if (!schema_name_valid(iface))
		return cli_error(EXIT_USAGE, "invalid interface '%s': %s", iface,
				 schema_name_problem(iface));
	unsigned char bin[16];
	if (inet_pton(AF_INET, addr, bin) != 1 && inet_pton(AF_INET6, addr, bin) != 1)
		return cli_error(EXIT_USAGE, "invalid address '%s': not an IPv4 or IPv6 address",
				 addr);
	struct catalog_entry *v = realloc(a->addresses, (a->n_addresses + 1) * sizeof(*v));
	if (!v)
		return cli_error(1, "out of memory");
	a->addresses = v;
	v[a->n_addresses++] = (struct catalog_entry){ .iface = TAKE_PTR(iface),
						       .address = TAKE_PTR(addr) };
	return 0;
}

/* Parses the options after the command name into o (global) and a (own). */
static int parse_command_options(const struct command *cmd, const struct option *merged,
				 int argc, char **argv, struct global_options *o,
				 struct cli_args *a)
{
	int c, r;

	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:" OPTIONS_GLOBAL_SHORT, merged, NULL)) != -1) {
		const char *bad = argv[optind - 1];
		switch (c) {
		case '?':
			if (optopt && optopt < 0x100)
				return cli_error(EXIT_USAGE,
						 "unknown option '-%c' for '%s'; usage: orchestrate %s",
						 optopt, cmd->name, cmd->synopsis);
			return cli_error(EXIT_USAGE, "unknown option '%s' for '%s'; usage: orchestrate %s",
					 bad, cmd->name, cmd->synopsis);
		case ':':
			return cli_error(EXIT_USAGE, "option '%s' needs a value; usage: orchestrate %s",
					 bad, cmd->synopsis);
		case CO_IF_CURRENT: a->if_current = optarg; break;
		case CO_WAIT:
			if ((r = parse_seconds(cmd->name,
						 cmd->fn == cmd_wait_for_service ? "--timeout" : "--wait",
						 optarg, &a->wait)))
				return r;
			break;
		case CO_DETAIL: a->detail = optarg; break;
		case CO_COUNT:
			if ((r = parse_long(cmd->name, "--count", optarg, 1, 1000000, &a->count)))
				return r;
			break;
		case CO_HEALTHY: a->healthy = true; break;
		case CO_ADDRESS:
			if ((r = parse_address(cmd->name, optarg, a)))
				return r;
			break;
		case CO_TTL:
			if ((r = parse_long(cmd->name, "--ttl", optarg, 1, 100000000, &a->ttl)))
				return r;
			break;
		case CO_OUTPUT: a->output = optarg; break;
		case CO_HOSTS: a->hosts = true; break;
		case CO_GROUP: a->group = optarg; break;
		case CO_HOST: a->host = optarg; break;
		case CO_REASON: a->reason = optarg; break;
		case CO_INTERVAL:
			if ((r = parse_long(cmd->name, "--interval", optarg, 1, 10000000,
					    &a->interval)))
				return r;
			break;
		case CO_VERSION: a->version = optarg; break;
		case CO_WATCH: a->watch = true; break;
		case CO_MAX_PARALLEL:
			if ((r = parse_long(cmd->name, "--max-parallel", optarg, 1, 1000000000,
					    &a->max_parallel)))
				return r;
			break;
		case CO_MAX_PERCENT:
			if ((r = parse_long(cmd->name, "--max-percent", optarg, 1, 100,
					    &a->max_percent)))
				return r;
			break;
		case CO_GROUPS: a->groups = optarg; break;
		default: {
			_cleanup_(freep) char *err = NULL;
			r = options_handle(o, c, optarg, &err);
			if (r < 0)
				return cli_error(EXIT_USAGE, "%s", err ? err : "bad option");
			if (r == 0)
				return cli_error(EXIT_USAGE, "unknown option '%s' for '%s'", bad,
						 cmd->name);
		}
		}
	}
	return 0;
}

static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			break;
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return true;
	}
	return false;
}

static int check_arity(const struct command *cmd, int n)
{
	if (n < cmd->min_args)
		return cli_error(EXIT_USAGE, "'%s' needs %s; usage: orchestrate %s", cmd->name,
				 cmd->needs ? cmd->needs : "more arguments", cmd->synopsis);
	if (cmd->max_args >= 0 && n > cmd->max_args) {
		if (cmd->max_args == 0)
			return cli_error(EXIT_USAGE, "'%s' takes no arguments; usage: orchestrate %s",
					 cmd->name, cmd->synopsis);
		return cli_error(EXIT_USAGE, "'%s' takes at most %d argument%s; usage: orchestrate %s",
				 cmd->name, cmd->max_args, cmd->max_args == 1 ? "" : "s",
				 cmd->synopsis);
	}
	return 0;
}

/* Runs the command at argv[0] (after the global options). */
static int dispatch(struct global_options *o, int argc, char **argv)
{
	const struct command *cmd;

	if (strcmp(argv[0], "help") == 0) {
		if (argc > 1) {
			if (!(cmd = command_find(argv[1])))
				return cli_error(EXIT_USAGE, "unknown command '%s'; see 'orchestrate help'",
						 argv[1]);
			print_command_usage(stdout, cmd);
		} else {
			print_help(stdout);
		}
		return 0;
	}
	if (!(cmd = command_find(argv[0]))) {
		const struct command *near = command_nearest(argv[0]);
		if (near)
			return cli_error(EXIT_USAGE, "unknown command '%s'; did you mean '%s'? "
					 "(see 'orchestrate help')", argv[0], near->name);
		return cli_error(EXIT_USAGE, "unknown command '%s'; see 'orchestrate help'",
				 argv[0]);
	}
	if (o->help || wants_help(argc, argv)) {
		print_command_usage(stdout, cmd);
		return 0;
	}

	_cleanup_(freep) char **opt_argv = NULL;
	_cleanup_(freep) char **pos = NULL;
	int nopt, npos, r;
	struct cli cli = {
		.cmd = cmd,
		.name = cmd->name,
		.args = { .wait = -1, .count = 1, .ttl = -1, .interval = -1, .max_parallel = -1,
			  .max_percent = -1 },
	};

	/* The command's own options first: they shadow globals of the same name. */
	_cleanup_(freep) struct option *merged = options_merge_long(cmd->options,
								     options_global_long);
	if (!merged || split_args(argc, argv, merged, &opt_argv, &nopt, &pos, &npos) < 0)
		return cli_error(1, "out of memory");
	r = parse_command_options(cmd, merged, nopt, opt_argv, o, &cli.args);
	if (r == 0 && o->version) {
		printf("orchestrate %s\n", ORCHESTRATE_VERSION);
		cli_args_release(&cli.args);
		return 0;
	}
	if (r == 0)
		r = check_arity(cmd, npos);
	if (r) {
		cli_args_release(&cli.args);
		return r;
	}

	_cleanup_(options_resolved_releasep) struct options_resolved resolved = { 0 };
	_cleanup_(freep) char *err = NULL;
	if (options_resolve(o, &resolved, &err) < 0) {
		cli_args_release(&cli.args);
		return cli_error(EXIT_USAGE, "%s", err ? err : "out of memory");
	}
	log_set_verbose(o->verbose);
	cli.opt = &resolved;

	r = cmd->fn(&cli, npos, pos);

	if (cli.etcd)
		etcd_client_free(cli.etcd);
	cli_args_release(&cli.args);
	return r;
}

int main(int argc, char **argv)
{
	struct global_options o;
	_cleanup_(freep) char *err = NULL;
	int r, idx;

	log_init("orchestrate", LOG_TO_STDERR);
	global_options_init(&o);
	idx = options_parse_global(&o, argc, argv, &err);
	if (idx < 0) {
		cli_error(EXIT_USAGE, "%s; see 'orchestrate --help'", err ? err : "bad option");
		return EXIT_USAGE;
	}
	log_set_verbose(o.verbose);

	if (o.version && idx >= argc) {
		printf("orchestrate %s\n", ORCHESTRATE_VERSION);
		r = 0;
	} else if (idx >= argc) {
		if (o.help) {
			print_help(stdout);
			r = 0;
		} else {
			fprintf(stderr, "usage: orchestrate [GLOBAL OPTIONS] COMMAND [ARGS]; "
					"see 'orchestrate help'\n");
			r = EXIT_USAGE;
		}
	} else {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
			cli_error(1, "cannot initialise libcurl");
			return 1;
		}
		r = dispatch(&o, argc - idx, argv + idx);
		curl_global_cleanup();
	}

	/* A full disk or a closed pipe must not look like success (git's
	 * "write failure on standard output"). */
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_warn("write failure on standard output");
		return EXIT_IOERR;
	}
	return r;
}

/* --- helpers for the commands --------------------------------------------------- */

/*
 * Every message is one line, whatever the names in it hold: control bytes
 * (a newline in a host name, an escape sequence in a reply) are written as
 * \n, \t or \xNN, so that a hostile value can neither forge a second line
 * of output nor drive the terminal.
 */
__attribute__((format(printf, 1, 0)))
static void warn_one_line(const char *fmt, va_list ap)
{
	struct buf raw = BUF_INIT, out = BUF_INIT;
	int r = buf_vprintf(&raw, fmt, ap);
	for (size_t i = 0; r >= 0 && i < raw.len; i++) {
		unsigned char c = (unsigned char)raw.data[i];
		if (c == '\n')
			r = buf_adds(&out, "\\n");
		else if (c == '\t')
			r = buf_adds(&out, "\\t");
		else if (c < 0x20 || c == 0x7f)
			r = buf_printf(&out, "\\x%02x", c);
		else
			r = buf_addc(&out, (char)c);
	}
	log_warnx("%s", r < 0 ? "out of memory" : buf_str(&out));
	buf_release(&raw);
	buf_release(&out);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	warn_one_line(fmt, ap);
	va_end(ap);
}

int cli_error(int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	warn_one_line(fmt, ap);
	va_end(ap);
	return status;
}

int cli_etcd_error(struct cli *cli, int r, const char *what)
{
	const char *msg = cli->etcd ? etcd_last_error(cli->etcd) : NULL;
	/* etcd's own words ("database space exceeded") do not say what to do. */
	const char *hint = r == -ENOSPC ? " (etcd's NOSPACE alarm: free space with compact and "
					  "defrag, then disarm it; reads still work)" : "";
	if (!msg || !*msg)
		msg = strerror(-r);
	if (what)
		cli_warn("%s: %s%s", what, msg, hint);
	else
		cli_warn("%s%s", msg, hint);
	return etcd_error_exit_code(r);
}

int cli_check_name(const char *kind, const char *name)
{
	if (schema_name_valid(name))
		return 0;
	return cli_error(EXIT_USAGE, "invalid %s '%s': %s", kind, name,
			 schema_name_problem(name));
}

int cli_fleet(struct cli *cli, struct fleet **ret)
{
	if (!cli->etcd) {
		int r = etcd_client_new(&cli->opt->etcd, &cli->etcd);
		if (r < 0) {
			cli->etcd = NULL;
			return cli_error(r == -ENOMEM ? 1 : EXIT_USAGE,
					 "cannot set up the etcd client: %s", strerror(-r));
		}
		cli->fleet.etcd = cli->etcd;
		cli->fleet.prefix = cli->opt->prefix;
		cli->fleet.parallel = &cli->opt->etcd;
	}
	*ret = &cli->fleet;
	return 0;
}

int cli_print_json(cJSON *doc)
{
	_cleanup_(cJSON_Deletep) cJSON *d = doc;
	_cleanup_(freep) char *text = d ? cJSON_PrintUnformatted(d) : NULL;
	if (!text)
		return cli_error(1, "out of memory");
	puts(text);
	return 0;
}

cJSON *cli_json_string_or_null(cJSON *obj, const char *name, const char *s)
{
	return s ? cJSON_AddStringToObject(obj, name, s) : cJSON_AddNullToObject(obj, name);
}

cJSON *cli_json_strv(char *const *v)
{
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a && v && v[i]; i++) {
		cJSON *s = cJSON_CreateString(v[i]);
		if (!s) {
			cJSON_Delete(a);
			return NULL;
		}
		cJSON_AddItemToArray(a, s);
	}
	return a;
}

int cli_local_version(struct cli *cli, char **ret)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	const char *path = cli->opt->local_version_file;

	*ret = NULL;
	int r = file_read_all(path, &b);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return cli_error(EXIT_NOINPUT, "cannot read local version file '%s': %s",
				 path, strerror(-r));
	/* Trim surrounding whitespace: the file ends with a newline. */
	const char *s = buf_str(&b);
	size_t len = b.len;
	while (len && isspace((unsigned char)*s))
		s++, len--;
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (!len)
		return 0;
	_cleanup_(freep) char *v = strndup(s, len);
	if (!v)
		return cli_error(1, "out of memory");
	if (!schema_name_valid(v) || strlen(v) != len) {
		cli_warn("local version file '%s' holds an invalid version: %s, ignoring", path,
			  strlen(v) != len ? "contains a NUL byte" : schema_name_problem(v));
		return 0;
	}
	*ret = TAKE_PTR(v);
	return 1;
}

uint64_t cli_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t cli_deadline(double secs)
{
	if (secs < 0)
		return 0;
	if (secs == 0)
		return 1;	/* already passed: check once */
	return cli_now_ms() + (uint64_t)(secs * 1000.0) + 1;
}

int cli_strv_push(char ***list, size_t *n, const char *s)
{
	char *copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	char **v = *list;
	/* Grow geometrically: when n + 1 reaches a power of two, double. */
	if (((*n + 1) & *n) == 0) {
		v = realloc(*list, (2 * (*n + 1) + 1) * sizeof(char *));
		if (!v) {
			free(copy);
			return -ENOMEM;
		}
		*list = v;
	}
	v[(*n)++] = copy;
	v[*n] = NULL;
	return 0;
}

bool cli_strv_contains(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

int cli_read_lines(FILE *f, char ***list, size_t *n)
{
	_cleanup_(freep) char *line = NULL;
	size_t cap = 0;
	ssize_t len;

	errno = 0;
	while ((len = getline(&line, &cap, f)) >= 0) {
		char *s = line;
		while (len && isspace((unsigned char)s[len - 1]))
			s[--len] = '\0';
		while (*s && isspace((unsigned char)*s))
			s++;
		if (!*s || *s == '#')
			continue;
		if (cli_strv_push(list, n, s) < 0)
			return -ENOMEM;
	}
	if (ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

/* --- waiting on a directory of keys ---------------------------------------------- */

/*
 * The keyset keeps its keys in an array (insertion order, for iteration) and an
 * open-addressing hash index over it, so that finding, adding and removing a key
 * cost O(1): verify_hosts checks 10,000 hosts against 10,000 keys, and again
 * after every watch event, so a linear scan would make it quadratic.
 */
void keyset_release(struct keyset *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->keys[i]);
		if (s->values)
			free(s->values[i]);
	}
	free(s->keys);
	free(s->values);
	free(s->index);
	*s = (struct keyset){ 0 };
}

static size_t keyset_hash(const char *key)
{
	size_t h = 14695981039346656037ULL;	/* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return h;
}

/* The slot of key in the index: where it is, or the empty slot it would take.
 * Slots hold position + 1 (0 is empty). */
static size_t keyset_slot(const struct keyset *s, const char *key)
{
	size_t mask = s->index_cap - 1;
	for (size_t i = keyset_hash(key) & mask;; i = (i + 1) & mask)
		if (s->index[i] == 0 || strcmp(s->keys[s->index[i] - 1], key) == 0)
			return i;
}

static int keyset_reindex(struct keyset *s, size_t cap)
{
	size_t *index = calloc(cap, sizeof(size_t));
	if (!index)
		return -ENOMEM;
	free(s->index);
	s->index = index;
	s->index_cap = cap;
	for (size_t i = 0; i < s->n; i++)
		s->index[keyset_slot(s, s->keys[i])] = i + 1;
	return 0;
}

long keyset_find(const struct keyset *s, const char *key)
{
	if (s->index_cap == 0)
		return -1;
	size_t slot = keyset_slot(s, key);
	return s->index[slot] ? (long)s->index[slot] - 1 : -1;
}

int keyset_put(struct keyset *s, const char *key, const char *value, size_t value_len)
{
	_cleanup_(freep) char *v = value ? strndup(value, value_len) : NULL;
	if (value && !v)
		return -ENOMEM;
	long i = keyset_find(s, key);
	if (i >= 0) {
		free(s->values[i]);
		s->values[i] = TAKE_PTR(v);
		return 0;
	}
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		char **k = realloc(s->keys, cap * sizeof(char *));
		if (!k)
			return -ENOMEM;
		s->keys = k;
		char **vv = realloc(s->values, cap * sizeof(char *));
		if (!vv)
			return -ENOMEM;
		s->values = vv;
		s->cap = cap;
	}
	/* Keep the index at most half full so that probes stay short. */
	if (2 * (s->n + 1) > s->index_cap && keyset_reindex(s, s->index_cap ? 2 * s->index_cap : 32) < 0)
		return -ENOMEM;
	if (!(s->keys[s->n] = strdup(key)))
		return -ENOMEM;
	s->values[s->n] = TAKE_PTR(v);
	s->index[keyset_slot(s, key)] = ++s->n;
	return 0;
}

static void keyset_remove(struct keyset *s, const char *key)
{
	if (s->index_cap == 0)
		return;
	size_t mask = s->index_cap - 1;
	size_t slot = keyset_slot(s, key);
	if (!s->index[slot])
		return;
	size_t i = s->index[slot] - 1;

	/* Backward-shift deletion: pull later members of the probe run into the
	 * hole, so lookups never stop early at it. */
	s->index[slot] = 0;
	for (size_t j = (slot + 1) & mask; s->index[j]; j = (j + 1) & mask) {
		size_t home = keyset_hash(s->keys[s->index[j] - 1]) & mask;
		if (((j - home) & mask) >= ((j - slot) & mask)) {
			s->index[slot] = s->index[j];
			s->index[j] = 0;
			slot = j;
		}
	}

	/* Fill the array hole with the last key and point its slot at i. */
	free(s->keys[i]);
	free(s->values[i]);
	size_t last = --s->n;
	if (i != last) {
		s->keys[i] = s->keys[last];
		s->values[i] = s->values[last];
		s->index[keyset_slot(s, s->keys[i])] = i + 1;
	}
}

/* The suffix of key below dir as "a/b" when it has exactly components valid
 * names; NULL (and *ret_error 0) for a key to skip. */
static char *keyset_suffix(const char *key, size_t key_len, const char *dir, int components,
			   int *ret_error)
{
	char *parts[4];
	_cleanup_(freep) char *copy = NULL;
	*ret_error = 0;
	int r = key_split(key, key_len, dir, parts, components, &copy);
	if (r == -ENOMEM)
		*ret_error = r;
	if (r != components)
		return NULL;
	struct buf b = BUF_INIT;
	for (int i = 0; i < components; i++)
		if ((i && buf_addc(&b, '/') < 0) || buf_adds(&b, parts[i]) < 0) {
			buf_release(&b);
			*ret_error = -ENOMEM;
			return NULL;
		}
	return buf_detach(&b);
}

struct keyset_watch {
	struct keyset *set;
	const char *dir;
	int components;
	bool values;
	keyset_done_fn done;
	void *userdata;
};

static int keyset_on_events(const struct etcd_event *events, size_t n, int64_t revision,
			    void *userdata)
{
	struct keyset_watch *w = userdata;
	for (size_t i = 0; i < n; i++) {
		const struct etcd_kv *kv = &events[i].kv;
		int err;
		_cleanup_(freep) char *k = keyset_suffix(kv->key, kv->key_len, w->dir,
							 w->components, &err);
		if (err)
			return err;
		if (!k)
			continue;
		if (events[i].type == ETCD_EVENT_DELETE) {
			keyset_remove(w->set, k);
		} else {
			int r = keyset_put(w->set, k, w->values ? kv->value : NULL, kv->value_len);
			if (r < 0)
				return r;
		}
	}
	return w->done(w->set, w->userdata) ? 1 : 0;
}

int cli_wait_keyset(struct cli *cli, const char *dir, int components, bool values,
		    uint64_t deadline_ms, bool wait_forever, keyset_done_fn done,
		    void *userdata, struct keyset *s)
{
	struct fleet *f;
	int r = cli_fleet(cli, &f);
	if (r)
		return r;

	for (;;) {
		_cleanup_(etcd_kv_list_releasep) struct etcd_kv_list kvs = ETCD_KV_LIST_INIT;
		r = etcd_get_prefix(cli->etcd, dir, values ? 0 : ETCD_KEYS_ONLY, 0, &kvs);
		if (r < 0)
			return cli_etcd_error(cli, r, NULL);
		keyset_release(s);
		for (size_t i = 0; i < kvs.n; i++) {
			int err;
			_cleanup_(freep) char *k = keyset_suffix(kvs.kvs[i].key, kvs.kvs[i].key_len,
								 dir, components, &err);
			if (err)
				return cli_error(1, "out of memory");
			if (k && keyset_put(s, k, values ? kvs.kvs[i].value : NULL,
					    kvs.kvs[i].value_len) < 0)
				return cli_error(1, "out of memory");
		}
		if (done(s, userdata))
			return 1;
		if (!wait_forever && (deadline_ms == 0 || cli_now_ms() >= deadline_ms))
			return 0;

		struct keyset_watch w = { s, dir, components, values, done, userdata };
		r = etcd_watch(cli->etcd, dir, true, kvs.revision + 1, deadline_ms,
			       keyset_on_events, &w, NULL);
		if (r == 1)
			return 1;
		if (r == -ETIMEDOUT)
			return 0;
		if (r == -ESTALE) {
			log_debug("watch of '%s' compacted, reading again", dir);
			continue;
		}
		if (r == -ENOMEM)
			return cli_error(1, "out of memory");
		if (r < 0)
			return cli_etcd_error(cli, r, NULL);
		/* The watch ended without an answer (fn returned 0 to the end). */
		return 0;
	}
}
