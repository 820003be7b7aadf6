/*
 * cli.c — orchestrate's main, its one command table and the dispatcher.
 *
 * Like git's commands[] and systemd's verbs[], one table lists every command.
 * Each command is declared beside its function in a cmd_*.c file (struct
 * command: name, arity, synopsis, description, and its own options as a
 * struct cli_option table), so that adding a flag is one line next to the code
 * that reads it.  Everything a command should not repeat happens here, once:
 * global options (before or after the command name), hyphenated aliases
 * (trigger-update), parsing each command's options from its table, `CMD -h`
 * (made from the same table) and `help`, arity errors, unknown commands with a
 * suggestion, resolving command line, environment and config file into
 * settings, and the final check that standard output was really written.
 *
 * Exit statuses (orchestrate(1) "EXIT STATUS", exitcode.h): 64 usage, invalid names and a bad config
 * file; 69 etcd unreachable; 77 authentication or permission refused; 74
 * (EX_IOERR) when standard output cannot be
 * written; otherwise what the command returns.  Which library error is which
 * status is decided here, in cli_exit_code(), and nowhere below.
 *
 * Option order.  Global options may come before the command name or anywhere
 * after it; the command's own options may come anywhere after it.  Where a
 * command's option has the name of a global one (wait_for_service --timeout,
 * pause --host, update_own_info --version), after the command name it is the
 * command's.  --host and --port, etcd's endpoint, are the exception: after
 * a command without a --host of its own they are refused (exit 64), because
 * `get_failures --host web1` reads as a host of the fleet and would talk to
 * http://web1:2379.  A positional argument may look like a negative number
 * (update_own_status puppet -1): such an argument is never taken for an option.
 * "--" ends the options.
 *
 * The second half of the file holds the helpers the cmd_*.c files share: the
 * lazily made fleet, error printing and the local version file.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <curl/curl.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "cli.h"
#include "base/exitcode.h"
#include "fleet/fleet.h"
#include "config/local.h"
#include "base/log.h"
#include "config/options.h"
#include "output/render.h"
#include "fleet/schema.h"
#include "base/version.h"

/* getopt codes of a command's own options: CLI_OPTION_CODE + its index. */
#define CLI_OPTION_CODE 0x200

/* --- the command table ---------------------------------------------------------- */

static const char *const group_titles[_G_MAX] = {
	[G_OPERATORS] = "Operators: the desired version and the fleet",
	[G_NODES] = "Nodes and cron: this host's own state",
	[G_CI] = "CI gates: where the fleet is",
	[G_PUPPET] = "Puppet: service discovery",
	[G_HUMANS] = "Humans: at a glance",
};

/* In the order of `orchestrate help`, within each group. */
static const struct command *const commands[] = {
	&command_trigger_update,
	&command_rollback,
	&command_current_version,
	&command_provision,
	&command_decommission,
	&command_node_identity,
	&command_pause,
	&command_pauses,
	&command_resume,
	&command_rollout_policy,
	&command_promote,

	&command_pending_update,
	&command_local_version,
	&command_update_own_status,
	&command_update_own_info,
	&command_local_health,
	&command_publish_service,
	&command_unpublish_service,

	&command_verify_hosts,
	&command_check_single_version,
	&command_running_versions,
	&command_hosts_at_version,
	&command_get_failures,

	&command_wait_for_service,
	&command_cache_services,
	&command_get_services,

	&command_status,
	&command_history,
	&command_plan,
	&command_events,
	&command_ping,
};

static const char global_help[] =
	"Global options (before or after the command):\n"
	"  --etcd URLS             etcd endpoints, comma-separated ($ORCHESTRATE_ETCD;\n"
	"                          default " CONFIG_DEFAULT_ENDPOINT ")\n"
	"  --host H, --port N      compatibility: the endpoint http://H:N\n"
	"  --prefix P              key prefix ($ORCHESTRATE_PREFIX; default none)\n"
	"  --config FILE           config file (default " CONFIG_DEFAULT_PATH ")\n"
	"  --cacert FILE, --cert FILE, --key FILE   TLS\n"
	"  --user NAME             etcd user; password from $ORCHESTRATE_PASSWORD or\n"
	"  --password-file FILE    the first line of FILE\n"
	"  --timeout SECONDS       per etcd request (default 5)\n"
	"  --hostname H            this host's name (default: the system's)\n"
	"  --local-version-file FILE  ($ORCHESTRATE_LOCAL_VERSION_FILE;\n"
	"                          default " CONFIG_DEFAULT_LOCAL_VERSION ")\n"
	"  --json                  machine-readable output for read commands\n"
	"  -v, --verbose           say more (on stderr)\n"
	"  -h, --help              this help; 'orchestrate COMMAND -h' for a command\n"
	"  --version               print the program's version\n";

/* "--name ARG", the left column of an option's help line. */
static int option_label(const struct cli_option *o, struct buf *b)
{
	return o->arg ? buf_printf(b, "--%s %s", o->name, o->arg) : buf_printf(b, "--%s", o->name);
}

/* The options' help, two columns, made from the command's own table. */
static void print_options(FILE *f, const struct command *c)
{
	/* the column of the command's .help lines, unless a label is longer */
	size_t column = 19;

	for (const struct cli_option *o = c->options; o && o->name; o++) {
		_cleanup_(buf_releasep) struct buf label = BUF_INIT;
		if (option_label(o, &label) == 0 && label.len + 1 > column)
			column = label.len + 1;
	}
	for (const struct cli_option *o = c->options; o && o->name; o++) {
		_cleanup_(buf_releasep) struct buf label = BUF_INIT;
		const char *line = o->help ? o->help : "";
		if (option_label(o, &label) < 0)
			return;
		fprintf(f, "  %-*s", (int)column, buf_str(&label));
		for (;;) {
			int len = (int)strcspn(line, "\n");
			fprintf(f, "%.*s\n", len, line);
			if (!line[len])
				break;
			line += len + 1;
			fprintf(f, "  %-*s", (int)column, "");
		}
	}
}

static void print_command_usage(FILE *f, const struct command *c)
{
	fprintf(f, "usage: orchestrate [GLOBAL OPTIONS] %s\n\n%s.\n", c->synopsis,
		c->description);
	if (c->help || (c->options && c->options[0].name)) {
		fprintf(f, "\nOptions:\n");
		if (c->help)
			fputs(c->help, f);
		print_options(f, c);
	}
	fprintf(f, "\nSee 'orchestrate --help' for the global options.\n");
}

static void print_help(FILE *f)
{
	fprintf(f, "usage: orchestrate [GLOBAL OPTIONS] COMMAND [ARGS]\n");
	for (int g = 0; g < _G_MAX; g++) {
		fprintf(f, "\n%s\n", group_titles[g]);
		for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
			const struct command *c = commands[i];
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
		if (strcmp(commands[i]->name, n) == 0)
			return commands[i];
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
		size_t d = edit_distance(name, commands[i]->name);
		if (d < best_d) {
			best_d = d;
			best = commands[i];
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

/* --- a command's own options ------------------------------------------------------ */

static size_t options_count(const struct cli_option *opts)
{
	size_t n = 0;
	while (opts && opts[n].name)
		n++;
	return n;
}

/* getopt's table of the command's own options, then the global ones it does
 * not shadow (options_merge_long()); free() it. */
static struct option *options_getopt(const struct command *cmd)
{
	size_t n = options_count(cmd->options);
	_cleanup_(freep) struct option *own = calloc(n + 1, sizeof(*own));

	if (!own)
		return NULL;
	for (size_t i = 0; i < n; i++)
		own[i] = (struct option){
			.name = cmd->options[i].name,
			.has_arg = cmd->options[i].kind == CLI_OPT_FLAG ? no_argument
									 : required_argument,
			.val = CLI_OPTION_CODE + (int)i,
		};
	return options_merge_long(own, options_global_long);
}

/* Stores one of the command's own options; 0 or an exit status. */
static int option_apply(const struct command *cmd, const struct cli_option *o,
			const char *arg)
{
	char *end;

	switch (o->kind) {
	case CLI_OPT_FLAG:
		*(bool *)o->value = true;
		return 0;
	case CLI_OPT_STRING:
		*(const char **)o->value = arg;
		return 0;
	case CLI_OPT_LONG: {
		errno = 0;
		long n = strtol(arg, &end, 10);
		if (errno || end == arg || *end || n < o->min || n > o->max)
			return cli_error(EXIT_USAGE, "invalid --%s '%s' for '%s': expected %ld-%ld",
					 o->name, arg, cmd->name, o->min, o->max);
		*(long *)o->value = n;
		return 0;
	}
	case CLI_OPT_SECONDS: {
		errno = 0;
		double d = strtod(arg, &end);
		if (errno || end == arg || *end || !isfinite(d) || d < 0 || d > 1e9)
			return cli_error(EXIT_USAGE, "invalid --%s '%s' for '%s': expected seconds",
					 o->name, arg, cmd->name);
		*(double *)o->value = d;
		return 0;
	}
	case CLI_OPT_CALLBACK:
		return o->parse(o->name, arg, o->value);
	}
	return cli_error(1, "option '--%s' of '%s' has no kind", o->name, cmd->name);
}

/*
 * --host and --port name etcd's endpoint (http://H:N), not a host of the
 * fleet: after a command that has no --host of its own (`get_failures --host
 * web1`) they would send every request to http://web1:2379.  So after the
 * command name they are refused, saying whose host it is and where it goes.
 */
static int global_after_command(const struct command *cmd, const char *name)
{
	return cli_error(EXIT_USAGE, "'--%s' is etcd's %s (a global option: the endpoint "
			 "http://HOST:PORT), not an option of '%s'; put it before the command "
			 "('orchestrate --%s ... %s') or use --etcd URL", name, name, cmd->name,
			 name, cmd->name);
}

/* Parses the options after the command name: the command's own into its
 * variables, the global ones into o. */
static int parse_command_options(const struct command *cmd, const struct option *merged,
				 int argc, char **argv, struct global_options *o)
{
	size_t n_own = options_count(cmd->options);
	int c, r;

	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:" OPTIONS_GLOBAL_SHORT, merged, NULL)) != -1) {
		const char *bad = argv[optind - 1];
		if (c == '?') {
			if (optopt && optopt < 0x100)
				return cli_error(EXIT_USAGE,
						 "unknown option '-%c' for '%s'; usage: orchestrate %s",
						 optopt, cmd->name, cmd->synopsis);
			return cli_error(EXIT_USAGE, "unknown option '%s' for '%s'; usage: orchestrate %s",
					 bad, cmd->name, cmd->synopsis);
		}
		if (c == ':')
			return cli_error(EXIT_USAGE, "option '%s' needs a value; usage: orchestrate %s",
					 bad, cmd->synopsis);
		if (c >= CLI_OPTION_CODE && (size_t)(c - CLI_OPTION_CODE) < n_own) {
			if ((r = option_apply(cmd, &cmd->options[c - CLI_OPTION_CODE], optarg)))
				return r;
			continue;
		}
		if (c == OPT_HOST || c == OPT_PORT)
			return global_after_command(cmd, c == OPT_HOST ? "host" : "port");
		_cleanup_(freep) char *err = NULL;
		r = options_handle(o, c, optarg, &err);
		if (r < 0)
			return cli_error(EXIT_USAGE, "%s", err ? err : "bad option");
		if (r == 0)
			return cli_error(EXIT_USAGE, "unknown option '%s' for '%s'", bad, cmd->name);
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

	/* The command's own options first: they shadow globals of the same name. */
	_cleanup_(freep) struct option *merged = options_getopt(cmd);
	if (!merged || split_args(argc, argv, merged, &opt_argv, &nopt, &pos, &npos) < 0)
		return cli_error(1, "out of memory");
	if ((r = parse_command_options(cmd, merged, nopt, opt_argv, o)))
		return r;
	if (o->version) {
		printf("orchestrate %s\n", ORCHESTRATE_VERSION);
		return 0;
	}
	if ((r = check_arity(cmd, npos)))
		return r;

	_cleanup_(options_resolved_releasep) struct options_resolved resolved = { 0 };
	_cleanup_(freep) char *err = NULL;
	if (options_resolve(o, &resolved, &err) < 0)
		return cli_error(EXIT_USAGE, "%s", err ? err : "out of memory");
	log_set_verbose(o->verbose);

	struct cli cli = { .cmd = cmd, .name = cmd->name, .opt = &resolved };
	r = cmd->fn(&cli, npos, pos);
	fleet_close(&cli.fleet);
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
 * Every message is one line, whatever the names in it hold: the text goes
 * through render_sanitize(RENDER_LINE), so that a hostile value (a newline in
 * a name, an escape sequence in a reply) can neither forge a second line of
 * output nor drive the terminal.
 */
__attribute__((format(printf, 1, 0)))
static void warn_one_line(const char *fmt, va_list ap)
{
	_cleanup_(buf_releasep) struct buf raw = BUF_INIT;
	_cleanup_(buf_releasep) struct buf out = BUF_INIT;
	int r = buf_vprintf(&raw, fmt, ap);

	if (r >= 0)
		r = render_sanitize(raw.data, raw.len, RENDER_LINE, &out);
	log_warnx("%s", r < 0 ? "out of memory" : buf_str(&out));
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

/*
 * The exit status for an error code of the library (orchestrate(1) "EXIT STATUS"): 77 refused
 * (-EACCES), 64 a request refused as invalid (-EINVAL), 1 out of memory, 69
 * for everything else (unreachable, a reply that makes no sense).
 */
static int cli_exit_code(int r)
{
	switch (r) {
	case -EACCES:
		return EXIT_NOPERM;
	case -EINVAL:
		return EXIT_USAGE;
	case -ENOMEM:
		return 1;
	default:
		return EXIT_UNAVAILABLE;
	}
}

/* Whether r is one of the codes the etcd client sets its last error for
 * (etcd.h); the others (-ENOMEM, fleet's -EBADMSG...) have no words there. */
static bool error_from_etcd(int r)
{
	return r == -ECONNREFUSED || r == -EBUSY || r == -EACCES || r == -EPROTO ||
	       r == -ENOSPC || r == -ESTALE || r == -ETIMEDOUT || r == -EINVAL ||
	       r == -EKEYEXPIRED;
}

int cli_fleet_error(struct cli *cli, int r, const char *what)
{
	const char *msg = error_from_etcd(r) ? fleet_last_error(&cli->fleet) : NULL;
	/* etcd's own words ("database space exceeded") do not say what to do. */
	const char *hint = r == -ENOSPC ? " (etcd's NOSPACE alarm: free space with compact and "
					  "defrag, then disarm it; reads still work)" :
			   r == -EBUSY ? " (etcd is far behind applying writes and did not apply "
					 "this one: try again in a while)" : "";

	if (r == -ENOMEM)
		return cli_error(1, "out of memory");
	/* a write etcd refused: which kind of key, as whom */
	if (r == -EACCES && fleet_denied_error(&cli->fleet)) {
		cli_warn("%s", fleet_denied_error(&cli->fleet));
		return EXIT_NOPERM;
	}
	if (!msg || !*msg)
		msg = strerror(-r);
	if (what)
		cli_warn("%s: %s%s", what, msg, hint);
	else
		cli_warn("%s%s", msg, hint);
	return cli_exit_code(r);
}

int cli_check_name(const char *kind, const char *name)
{
	if (schema_name_valid(name))
		return 0;
	return cli_error(EXIT_USAGE, "invalid %s '%s': %s", kind, name,
			 schema_name_problem(name));
}

int cli_output(int r)
{
	if (r >= 0)
		return 0;
	if (r == -ENOMEM)
		return cli_error(1, "out of memory");
	return cli_error(EXIT_IOERR, "write failure on standard output");
}

int cli_fleet(struct cli *cli, struct fleet **ret)
{
	if (!cli->fleet.etcd) {
		int r = fleet_open(&cli->fleet, &cli->opt->etcd, cli->opt->prefix);
		if (r < 0)
			return cli_error(r == -ENOMEM ? 1 : EXIT_USAGE,
					 "cannot set up the etcd client: %s", strerror(-r));
	}
	*ret = &cli->fleet;
	return 0;
}

int cli_local_version(struct cli *cli, char **ret)
{
	const char *path = cli->opt->local_version_file;
	int r = local_version_read(path, ret);

	switch (r) {
	case 0:
		return 1;
	case -ENOENT:
		return 0;
	case -EINVAL:
		cli_warn("local version file '%s' holds no valid version (one name of "
			 "[A-Za-z0-9._:@+-]), ignoring", path);
		return 0;
	case -ENOMEM:
		return cli_error(1, "out of memory");
	default:
		return cli_error(EXIT_NOINPUT, "cannot read local version file '%s': %s", path,
				 strerror(-r));
	}
}

/* Whether a progress line is on stderr, to be cleared before anything else. */
static bool progress_shown;

bool cli_progress_on_terminal(void)
{
	return isatty(STDERR_FILENO);
}

void cli_progress(const struct fleet_progress *p, void *what)
{
	_cleanup_(buf_releasep) struct buf line = BUF_INIT;
	struct winsize ws;
	size_t width = 0;

	if (render_progress(p, what, 0, &line) == 0)
		log_debug("%s", buf_str(&line));
	/* a person watching sees how far it is, and that etcd does not
	 * answer; a pipe or CI log gets none of it (the wait's end says what
	 * happened, in one line) */
	if (!cli_progress_on_terminal())
		return;
	/* one column short of the terminal's width: a line that fills it would
	 * wrap, and "\r" would then redraw only its last part */
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1)
		width = ws.ws_col - 1;
	buf_reset(&line);
	if (render_progress(p, what, width, &line) < 0)
		return;
	fprintf(stderr, "\r\033[K%s", buf_str(&line));
	fflush(stderr);
	progress_shown = true;
}

void cli_progress_end(void)
{
	if (!progress_shown)
		return;
	fputs("\r\033[K", stderr);
	fflush(stderr);
	progress_shown = false;
}
