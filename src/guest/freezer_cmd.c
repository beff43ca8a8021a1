/*
 * The command freezer: freeze-cmd and thaw-cmd, the admin's own (lxc-freeze,
 * a script). It cannot be asked whether the guest is frozen: a command's
 * exit status is its word.
 */
#include <stdio.h>
#include "cb_guest.h"
#include "cb_run.h"
#include "guest_int.h"

static int cmd_freeze(const struct cb_guest *g, int wait_ms)
{
	char what[512];
	struct cb_run run = { .what = what, .timeout_ms = wait_ms };

	snprintf(what, sizeof(what), "freeze-cmd '%s'", g->freeze_cmd);
	return cb_run_sh(&run, g->freeze_cmd);
}

static int cmd_thaw(const struct cb_guest *g)
{
	/* one attempt may not eat the whole retry time */
	struct cb_run run = { .timeout_ms = g->thaw_timeout_ms < 10000 ? g->thaw_timeout_ms : 10000,
			      .ignore_interrupt = 1 };
	char what[512];

	snprintf(what, sizeof(what), "thaw-cmd '%s'", g->thaw_cmd);
	run.what = what;
	return cb_run_sh(&run, g->thaw_cmd);
}

static int cmd_is_frozen(const struct cb_guest *g)
{
	(void)g;
	return -1;   /* no way to ask */
}

const struct freezer_ops freezer_cmd = {
	"cmd", cmd_freeze, cmd_thaw, cmd_is_frozen, NULL
};
