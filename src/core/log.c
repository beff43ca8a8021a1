/* cb_log: vzdump-style log lines. See include/cb_log.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_log.h"
#include "cb_text.h"
#include "cb_private.h"

static const char *const level_prefix[] = { "ERROR", "WARN", "INFO", "INFO", "DEBUG" };

void cb_log_init(struct cb_log *log)
{
	const char *dbg = getenv("CB_DEBUG");

	memset(log, 0, sizeof(*log));
	log->debug = dbg && *dbg && strcmp(dbg, "0");
}

int cb_log_attach(struct cb_log *log, const char *path)
{
	int fd;

	cb_log_detach(log);
	fd = cb_create_excl(path, 0644);
	if (fd < 0)
		return cb_error_errno("cannot create log file '%s'", path);
	log->file = fdopen(fd, "w");
	if (!log->file) {
		int e = errno;
		close(fd);
		errno = e;
		return cb_error_errno("cannot create log file '%s'", path);
	}
	setvbuf(log->file, NULL, _IOLBF, 0);
	return 0;
}

void cb_log_detach(struct cb_log *log)
{
	if (log->file)
		fclose(log->file);
	log->file = NULL;
}

/* A log line is one line, whatever a file name in it holds: names are
 * quoted as GNU tar quotes them (cb_quote: \n, \033, \ooo for bytes that
 * are not printable UTF-8). A guest's file named "x\nERROR: ..." cannot
 * start a line of its own, nor send escape sequences to a terminal. */
void cb_log_vline(struct cb_log *log, enum cb_log_level lvl, const char *fmt, va_list ap)
{
	char *raw, *msg;
	int to_stderr;

	if ((lvl == CB_LOG_VERBOSE && !log->verbose) || (lvl == CB_LOG_DEBUG && !log->debug))
		return;
	if (vasprintf(&raw, fmt, ap) < 0)
		raw = cb_xstrdup(fmt);
	msg = cb_quote(raw);
	free(raw);
	if (lvl == CB_LOG_ERROR)
		log->errors++;
	if (lvl == CB_LOG_WARN)
		log->warnings++;
	to_stderr = lvl <= CB_LOG_WARN || !log->quiet;
	if (to_stderr)
		fprintf(stderr, "%s: %s\n", level_prefix[lvl], msg);
	if (log->file)
		fprintf(log->file, "%s: %s\n", level_prefix[lvl], msg);
	free(msg);
}

void cb_log_line(struct cb_log *log, enum cb_log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cb_log_vline(log, lvl, fmt, ap);
	va_end(ap);
}
