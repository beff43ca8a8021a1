/*
 * The QMP freezer: QEMU's stop and cont on the VM's monitor socket, its
 * state query-status's "paused".
 */
#include "cb_guest.h"
#include "cb_qmp.h"
#include "cb_util.h"
#include "guest_int.h"

/* One QMP command on the VM's socket (stop, cont); QEMU's error text, if
 * any, in the error. */
static int qmp_run(const struct cb_guest *g, const char *cmd)
{
	char reply[512] = "";
	int st = cb_qmp_execute(g->path, cmd, reply, sizeof(reply), QMP_TIMEOUT_MS);

	if (st != CB_QMP_OK)
		return cb_error("qmp socket '%s': %s failed: %s%s%s", g->path, cmd, cb_qmp_strerror(st),
				*reply ? " " : "", reply);
	return 0;
}

static int qmp_freeze(const struct cb_guest *g, int wait_ms)
{
	(void)wait_ms;
	return qmp_run(g, "stop");
}

static int qmp_thaw(const struct cb_guest *g)
{
	return qmp_run(g, "cont");
}

static int qmp_is_frozen(const struct cb_guest *g)
{
	int r = cb_qmp_is_paused(g->path, QMP_TIMEOUT_MS);

	return r < 0 ? -1 : r;
}

const struct freezer_ops freezer_qmp = {
	"qmp", qmp_freeze, qmp_thaw, qmp_is_frozen, NULL
};
