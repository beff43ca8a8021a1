/*
 * cb_qmp_session: one QMP session held for a whole VM backup.
 *
 * Unlike cb_qmp (one connection per command, async-signal-safe, for the
 * freeze watchdog), a session stays connected from the first query to the
 * teardown: the block graph changes cbackup makes are undone by the same
 * client that made them, and QEMU's events (STOP, RESUME, SHUTDOWN) are seen
 * in order with the replies. Commands carry an "id"; replies with another
 * id (the watchdog's, on the same socket) are skipped. Each command is one
 * write(), so a killed cbackup never leaves half a command for the
 * watchdog to follow.
 */
#ifndef CB_QMP_SESSION_H
#define CB_QMP_SESSION_H

#include <stddef.h>
#include "cb_json.h"

struct cb_qmp_session {
	int fd;                  /* -1 when closed */
	char *buf;               /* bytes read, not yet a whole line */
	size_t len, cap;
	unsigned next_id;
	const char *id_prefix;   /* "cb" (cbackup) or "wd" (its watchdog) */
	int timeout_ms;          /* per command */
	double stop_ts, resume_ts;  /* QEMU's timestamps of the last STOP / RESUME */
	int shutdown_seen;       /* a SHUTDOWN event came */
	int migration_seen;      /* a MIGRATION event: the VM is moving away */
	int lost;                /* QEMU closed the connection (it quit) */
};

/* Connect, read the greeting, negotiate capabilities. */
int cb_qmp_session_open(struct cb_qmp_session *s, const char *socket_path, int timeout_ms);
/* A session over an fd already negotiated (the watchdog's copy). */
void cb_qmp_session_adopt(struct cb_qmp_session *s, int fd, const char *id_prefix, int timeout_ms);
void cb_qmp_session_close(struct cb_qmp_session *s);

/* Run CMD with ARGS (a JSON object text, or NULL). On success *ret (may be
 * NULL) gets the whole reply message (free with cb_json_free; its "return"
 * member is the result). -1 with "CMD: QEMU's error text" on an error reply,
 * a lost connection or no answer within the session's timeout. */
int cb_qmp_session_exec(struct cb_qmp_session *s, const char *cmd, const char *args, struct cb_json **ret);
/* Same, formatting ARGS printf-style. */
int cb_qmp_session_execf(struct cb_qmp_session *s, struct cb_json **ret, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Read events (noted) for ms milliseconds; returns early only when the
 * connection is lost. */
void cb_qmp_session_drain(struct cb_qmp_session *s, int ms);

#endif
