/*
 * cmd_events.c — `orchestrate events`: the rollout as it happens, one line
 * per event (or one JSON object a line), from one watch over the prefix.
 *
 * The fleet layer derives the events (fleet_events.h): it reads the state
 * at one revision, follows the watch and compares what each revision
 * changed; it says when a compaction cut the stream and what changed
 * meanwhile.  Here: the options, an sd-event loop with the signals and the
 * time bound as sources, the printing, and the exit status.  Each revision's
 * events are flushed together, so a consumer that saw revision R whole
 * resumes with --since R+1 and loses nothing, repeats nothing.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "base/cleanup.h"
#include "base/log.h"
#include "cli.h"
#include "fleet/fleet_events.h"
#include "output/render.h"

static long arg_since;
static long arg_count;
static double arg_for = -1;

struct events_run {
	struct cli *cli;
	sd_event *event;
	long printed;
	int status;		/* the exit status */
};

static int on_batch(const struct fleet_event *events, size_t n, void *userdata)
{
	struct events_run *run = userdata;
	int64_t now = fleet_now();
	int r = 0;

	for (size_t i = 0; i < n && r >= 0; i++) {
		if (run->cli->opt->json)
			r = render_json_event(stdout, &events[i], now);
		else
			r = render_event(stdout, &events[i], now);
	}
	if (r >= 0 && fflush(stdout) != 0)
		r = -EIO;
	if (r < 0) {
		run->status = cli_output(r);
		(void)sd_event_exit(run->event, 0);
		return 1;
	}
	run->printed += (long)n;
	/* whole revisions: the one that brings the N-th event is printed whole */
	if (arg_count > 0 && run->printed >= arg_count) {
		(void)sd_event_exit(run->event, 0);
		return 1;
	}
	return 0;
}

static void on_end(int error, void *userdata)
{
	struct events_run *run = userdata;

	run->status = cli_fleet_error(run->cli, error, "watch");
	(void)sd_event_exit(run->event, 0);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct events_run *run = userdata;

	log_debug("%s: stopping", strsignal((int)si->ssi_signo));
	return sd_event_exit(run->event, 0);
}

static int on_time_up(sd_event_source *s, uint64_t usec, void *userdata)
{
	struct events_run *run = userdata;
	return sd_event_exit(run->event, 0);
}

static int cmd_events(struct cli *cli, int argc, char **argv)
{
	_cleanup_(fleet_events_stopp) struct fleet_events *fe = NULL;
	struct events_run run = { .cli = cli };
	struct fleet *f;
	sigset_t mask;
	int r;

	if ((r = cli_fleet(cli, &f)))
		return r;
	/* the signals are the loop's: blocked first, so that none is lost
	 * while the first read runs */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return cli_error(1, "cannot block signals: %s", strerror(errno));
	if ((r = sd_event_new(&run.event)) < 0 ||
	    (r = sd_event_add_signal(run.event, NULL, SIGINT, on_signal, &run)) < 0 ||
	    (r = sd_event_add_signal(run.event, NULL, SIGTERM, on_signal, &run)) < 0 ||
	    (arg_for >= 0 &&
	     (r = sd_event_add_time_relative(run.event, NULL, CLOCK_MONOTONIC,
					     (uint64_t)(arg_for * 1e6), 0, on_time_up, &run)) < 0)) {
		sd_event_unref(run.event);
		return cli_error(1, "cannot set up the event loop: %s", strerror(-r));
	}
	r = fleet_events_start(f, run.event, arg_since, on_batch, on_end, &run, &fe);
	if (r < 0) {
		sd_event_unref(run.event);
		if (r == -EINVAL && arg_since > 0)
			return cli_error(EXIT_USAGE, "cannot read the fleet at revision %ld (--since "
					 "%ld): %s", arg_since - 1, arg_since,
					 fleet_last_error(f) ? fleet_last_error(f) : strerror(-r));
		return cli_fleet_error(cli, r, "cannot read the fleet");
	}
	log_debug("following the fleet from revision %lld",
		  (long long)fleet_events_revision(fe) + 1);
	/* --count reached by what the start said already (a compaction) */
	if (run.status == 0 && !(arg_count > 0 && run.printed >= arg_count)) {
		r = sd_event_loop(run.event);
		if (r < 0 && run.status == 0)
			run.status = cli_error(1, "event loop failed: %s", strerror(-r));
	}
	fe = fleet_events_stop(fe);
	sd_event_unref(run.event);
	return run.status;
}

static const struct cli_option events_options[] = {
	CLI_LONG("since", "REV", &arg_since, 1, 9000000000000000000L,
		 "the events from etcd revision REV on (the state at REV-1 is\n"
		 "read first); a consumer that saw revision R resumes with\n"
		 "--since R+1.  Default: from now on, nothing of the past"),
	CLI_LONG("count", "N", &arg_count, 1, 1000000000,
		 "exit 0 after the revision that brings the N-th event\n"
		 "(that revision's events are all printed)"),
	CLI_SECONDS("for", &arg_for, "exit 0 after SECONDS"),
	CLI_OPTIONS_END,
};

const struct command command_events = {
	.name = "events", .fn = cmd_events, .group = G_HUMANS, .options = events_options,
	.synopsis = "events [--since REV] [--count N] [--for SECONDS] [--json]",
	.description = "follow the rollout, one line per event: trigger, rollback, started,\n"
		       "succeeded, failed, waiting, halted, paused, dead ... (TIME REVISION\n"
		       "KIND HOST VERSION DETAIL); until SIGINT or SIGTERM (exit 0)",
};
