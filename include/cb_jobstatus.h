/*
 * cb_jobstatus: what one backup job did, kept by the job (cb_job) and
 * filled by each guest's backup (cb_backup): the source of the mail report
 * (cb_notify) and of the JSON status document (--output-format json,
 * json-status = DIR). The document's fields are a documented, stable
 * interface (cbackup(8), JSON STATUS).
 */
#ifndef CB_JOBSTATUS_H
#define CB_JOBSTATUS_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include "cb_opts.h"
#include "cb_text.h"

/* WARNING: backed up, archive kept, but the tracking audit found changes
 * the tracker missed (cb_audit.h): it may hold them as they were before. */
enum cb_result { CB_RESULT_OK, CB_RESULT_FAILED, CB_RESULT_SKIPPED, CB_RESULT_WARNING };

/* One guest. Durations < 0: the phase did not run (JSON null). */
struct cb_guest_result {
	char *id;
	enum cb_guest_type type;
	char *name;              /* the guest's host name, or NULL */
	enum cb_result result;
	char *error;             /* why it failed or was skipped, or NULL */
	char *archive;           /* path of the archive written, or NULL */
	char *log_path;          /* its .log, or NULL */
	uint64_t size;           /* archive bytes */
	char sha256[65];         /* "" when none */
	uint64_t stored_raw;     /* bytes the codec stored uncompressed */
	/* units copied from reused_from / compressed; tar bytes */
	char *reused_from;       /* the previous archive's name, or NULL */
	uint64_t reused_units, reused_bytes, compressed_units, compressed_bytes;
	/* of the reused: copied on trust, and the staged bytes never read */
	uint64_t trusted_units, trusted_unread_bytes;
	double seconds;          /* the whole guest */
	double first_sync, final_sync, archive_seconds, freeze;
	struct cb_trash *trash;  /* its staging copy still being removed, or NULL */
	/* the tracking audit (cb_audit.h): audited 0 if it did not run */
	int audited;
	uint64_t audit_checked, audit_missed;
	char **audit_paths;      /* the first missed entries (owned), and how */
	const char **audit_whats;   /* each differs (static strings) */
	size_t n_audit_names;
	double audit_seconds;
};

/* An error of the configuration file that stopped the job (status "error"). */
struct cb_config_problem {
	char *file;              /* the configuration file, or NULL */
	int line;                /* 0: none (JSON null) */
	char *key;               /* or NULL */
	char *message;           /* without the "FILE:LINE: " the text starts with */
};

struct cb_job_status {
	time_t start, end;
	char *cmdline;
	char host[256];
	int exit_status;         /* enum cb_exit */
	char *error;             /* why the job could not start or failed, or NULL */
	struct cb_guest_result *guests;
	size_t n;
	struct cb_config_problem *config_errors;
	size_t n_config_errors;
};

void cb_jobstatus_init(struct cb_job_status *js, const char *cmdline);
void cb_jobstatus_release(struct cb_job_status *js);
/* Append a guest (status skipped until its backup says otherwise). */
struct cb_guest_result *cb_jobstatus_add(struct cb_job_status *js, const char *id,
					 enum cb_guest_type type);
void cb_jobstatus_set_error(struct cb_job_status *js, const char *msg);
/* An error of configuration file `file` at `line` (0: none) about `key`
 * (NULL: none); text as printed, "FILE:LINE: " and all. */
void cb_jobstatus_add_config_error(struct cb_job_status *js, const char *file, int line,
				   const char *key, const char *text);
/* Any guest not ok (a warning too), or a job error. */
int cb_jobstatus_failed(const struct cb_job_status *js);
const char *cb_result_name(enum cb_result r);   /* "ok", "failed", "skipped", "warning" */
/* The guest has an archive to report (ok, warning). */
int cb_result_archived(enum cb_result r);

/* The document, pretty-printed, ending with a new line. */
void cb_jobstatus_json(const struct cb_job_status *js, FILE *out);
/* DIR/cbackup-job-<YYYY_MM_DD-HH_MM_SS of start>.json, written as a .tmp
 * beside it and renamed (readers never see half a document). 0 or -1. */
int cb_jobstatus_write(const struct cb_job_status *js, const char *dir);

#endif
