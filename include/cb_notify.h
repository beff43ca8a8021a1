/*
 * cb_notify: the mail report of a backup job, as vzdump's: one message
 * piped to the mail program (`sendmail = PROGRAM`, run without a shell as
 * PROGRAM -t -i: the recipients come from the To: header) at the end of
 * a job, also when the job could not start (lock timeout, failed job
 * hook). Subject "cbackup backup status (HOST): backup successful" or
 * "... backup failed"; a table of the guests (ID, name, status, time,
 * size, archive) with totals; then each guest's log, lines prefixed with
 * "ID: ", a log over 1 MiB replaced by a note.
 */
#ifndef CB_NOTIFY_H
#define CB_NOTIFY_H

#include <stdio.h>
#include "cb_jobstatus.h"
#include "cb_log.h"
#include "cb_opts.h"

#define CB_NOTIFY_MAX_LOG (1024 * 1024)

/* The whole message, headers and body. */
void cb_notify_compose(const struct cb_job_status *js, const char *mailto, FILE *out);

/* Send the report if mailto is set and mailnotification asks for it
 * (always, or failure and the job failed). 0 when sent or not wanted;
 * -1 with the reason (the caller logs a WARN: a mail problem never
 * fails a backup). */
int cb_notify_mail(const struct cb_opts *o, const struct cb_job_status *js, struct cb_log *log);

#endif
