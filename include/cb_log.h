/*
 * cb_log: vzdump-style log lines ("INFO: ...", "WARN: ...", "ERROR: ...")
 * to stderr and, when attached, to the per-backup log file.
 *
 * The caller owns struct cb_log; cb_log_attach() opens a log file that
 * cb_log_detach() closes. --quiet keeps INFO off stderr (the file still
 * gets it). VERBOSE lines need --verbose; DEBUG lines need CB_DEBUG=1.
 */
#ifndef CB_LOG_H
#define CB_LOG_H

#include <stdio.h>
#include "cb_util.h"

enum cb_log_level { CB_LOG_ERROR, CB_LOG_WARN, CB_LOG_INFO, CB_LOG_VERBOSE, CB_LOG_DEBUG };

struct cb_log {
	int quiet;        /* no INFO/VERBOSE on stderr */
	int verbose;      /* emit VERBOSE lines */
	int debug;        /* emit DEBUG lines */
	FILE *file;       /* per-backup log file or NULL */
	unsigned errors;  /* ERROR lines emitted */
	unsigned warnings;
};

void cb_log_init(struct cb_log *log);
/* creates PATH, mode 0644, O_EXCL|O_NOFOLLOW: an existing name (a symlink
 * too) is an error with errno EEXIST, never overwritten */
int cb_log_attach(struct cb_log *log, const char *path);
void cb_log_detach(struct cb_log *log);

void cb_log_line(struct cb_log *log, enum cb_log_level lvl, const char *fmt, ...) CB_PRINTF(3, 4);
void cb_log_vline(struct cb_log *log, enum cb_log_level lvl, const char *fmt, va_list ap);

/* One line to syslog (the journal under systemd), ident "cbackup", facility
 * daemon: the job's and each guest's summary, for monitoring that reads
 * the journal. PRIORITY: LOG_INFO, LOG_ERR (<syslog.h>). */
void cb_log_syslog(int priority, const char *fmt, ...) CB_PRINTF(2, 3);

#define cb_info(log, ...)    cb_log_line((log), CB_LOG_INFO, __VA_ARGS__)
#define cb_warn(log, ...)    cb_log_line((log), CB_LOG_WARN, __VA_ARGS__)
#define cb_err(log, ...)     cb_log_line((log), CB_LOG_ERROR, __VA_ARGS__)
#define cb_verbose(log, ...) cb_log_line((log), CB_LOG_VERBOSE, __VA_ARGS__)
#define cb_debug(log, ...)   cb_log_line((log), CB_LOG_DEBUG, __VA_ARGS__)

#endif
