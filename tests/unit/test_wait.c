/*
 * test_wait.c — the pure parts of a wait's progress line: which hosts
 * fleet_wait.c counts as at the version, failed or waiting
 * (fleet_wait_host_state()), when a rollout/halted record stops the rollout
 * waited for (fleet_wait_halt_applies()), and the line render_progress()
 * draws from the counts, cut to the terminal's width.
 */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/cleanup.h"
#include "fleet/fleet.h"
#include "fleet/fleet_rollout.h"
#include "output/render.h"
#include "tap.h"

static void test_host_state(void)
{
	is_int(fleet_wait_host_state("v2", "v2", NULL, NULL, NULL), FLEET_HOST_AT, "at the version");
	is_int(fleet_wait_host_state("v2", "v2", "v2", NULL, "v2"), FLEET_HOST_AT,
	       "at the version wins over a failed status");
	is_int(fleet_wait_host_state("v2", "v1", "v2", NULL, NULL), FLEET_HOST_FAILED,
	       "puppet failed at the version");
	is_int(fleet_wait_host_state("v2", NULL, NULL, "v2", NULL), FLEET_HOST_FAILED,
	       "validation failed at the version, no running version");
	is_int(fleet_wait_host_state("v2", "v1", NULL, "v2", "v2"), FLEET_HOST_FAILED,
	       "failed wins over waiting");
	is_int(fleet_wait_host_state("v2", "v1", "v1", "v1", NULL), FLEET_HOST_OTHER,
	       "failed at another version does not count");
	is_int(fleet_wait_host_state("v2", "v1", NULL, NULL, "v2"), FLEET_HOST_WAITING,
	       "pending for the version");
	is_int(fleet_wait_host_state("v2", "v1", NULL, NULL, "v3"), FLEET_HOST_OTHER,
	       "pending for another version does not count");
	is_int(fleet_wait_host_state("v2", "v1", "v1", NULL, "v2"), FLEET_HOST_WAITING,
	       "waiting for the version after failing at another");
	is_int(fleet_wait_host_state("v2", NULL, NULL, NULL, NULL), FLEET_HOST_OTHER,
	       "nothing known");
	is_int(fleet_wait_host_state("v2", "v20", "v", NULL, "v2x"), FLEET_HOST_OTHER,
	       "versions compare whole");
}

static void test_halt_applies(void)
{
	struct rollout_record h = { .version = "v2", .trigger = 100 };
	struct rollout_record none = { 0 };

	ok(fleet_wait_halt_applies(&h, "v2", "v2", 100), "the halt of this trigger");
	ok(!fleet_wait_halt_applies(&h, "v3", "v2", 100), "a halt of another version");
	ok(!fleet_wait_halt_applies(&h, "v2", "v2", 200),
	   "a record left from an earlier trigger of the same version");
	ok(fleet_wait_halt_applies(&h, "v2", "v1", 200), "reverted: current_version moved on");
	ok(fleet_wait_halt_applies(&h, "v2", NULL, 0), "current_version unset");
	h.trigger = 0;
	ok(!fleet_wait_halt_applies(&h, "v2", "v2", 100), "no trigger recorded, version current");
	ok(!fleet_wait_halt_applies(&none, "v2", "v2", 100), "a record without a version");
}

/* The line for p, cut to width. */
static char *line(const struct fleet_progress *p, const char *what, size_t width)
{
	_cleanup_(buf_releasep) struct buf b = BUF_INIT;
	if (render_progress(p, what, width, &b) < 0)
		return NULL;
	return buf_detach(&b);
}

static void is_line(const struct fleet_progress *p, size_t width, const char *want,
		    const char *name)
{
	char *got = line(p, "hosts at v42", width);
	is_str(got, want, "%s", name);
	free(got);
}

static void test_render(void)
{
	struct fleet_progress p = { .have = 412, .want = 1000 };

	is_line(&p, 0, "412/1000 hosts at v42", "have of want");
	p.states = true;
	p.failed = 3;
	p.waiting = 12;
	is_line(&p, 0, "412/1000 hosts at v42, 3 failed, 12 waiting", "with failed and waiting");
	p.failed = p.waiting = 0;
	is_line(&p, 0, "412/1000 hosts at v42, 0 failed, 0 waiting", "zeros are said");
	p.failed = 3;
	p.halted = "3 of 5 hosts failed (budget 2)";
	is_line(&p, 0, "412/1000 hosts at v42, 3 failed, 0 waiting, halted: 3 of 5 hosts failed "
		"(budget 2)", "halted with a reason");
	p.reverted_to = "v41";
	is_line(&p, 0, "412/1000 hosts at v42, 3 failed, 0 waiting, halted: 3 of 5 hosts failed "
		"(budget 2), reverted to v41", "halted and reverted");
	p.halted = "";
	p.reverted_to = NULL;
	is_line(&p, 0, "412/1000 hosts at v42, 3 failed, 0 waiting, halted", "halted, no reason");
	p.halted = "bad\n\033[2Jreason";
	is_line(&p, 0, "412/1000 hosts at v42, 3 failed, 0 waiting, halted: bad\\n\\x1b[2Jreason",
		"the reason cannot drive the terminal");
	p.halted = "a long reason that goes on";
	is_line(&p, 40, "412/1000 hosts at v42, 3 failed, 0 wa...", "cut to the width");
	is_line(&p, 200, "412/1000 hosts at v42, 3 failed, 0 waiting, halted: a long reason that "
		"goes on", "a wide terminal cuts nothing");
	p = (struct fleet_progress){ .have = 2, .want = 3, .states = false, .failed = 9 };
	is_line(&p, 80, "2/3 hosts at v42", "counts not read are not said");
}

int main(void)
{
	test_host_state();
	test_halt_applies();
	test_render();
	return done_testing();
}
