/*
 * cb_qmp: a minimal QMP client for QEMU's monitor socket.
 *
 * Each command is one connection: read the greeting, negotiate
 * qmp_capabilities, send the command, read until its "return" or "error"
 * line (events in between are skipped), disconnect. So cbackup never holds
 * the monitor between operations (QEMU serves one QMP client per socket),
 * and a watchdog or signal handler can send "cont" on its own connection.
 *
 * Async-signal-safe: only socket/connect/poll/read/write/close, no
 * allocation, no stdio, and errno-style results (no cb_error()).
 */
#ifndef CB_QMP_H
#define CB_QMP_H

#include <stddef.h>

enum cb_qmp_status { CB_QMP_OK = 0, CB_QMP_CONNECT = -1, CB_QMP_IO = -2, CB_QMP_TIMEOUT = -3,
		     CB_QMP_PROTOCOL = -4, CB_QMP_REFUSED = -5 };

/* Runs {"execute":"COMMAND"}; reply (may be NULL) gets the answer line. */
int cb_qmp_execute(const char *socket_path, const char *command, char *reply, size_t reply_len,
		   int timeout_ms);
/* 1 paused, 0 running, < 0 an enum cb_qmp_status error. */
int cb_qmp_is_paused(const char *socket_path, int timeout_ms);
const char *cb_qmp_strerror(int status);

#endif
