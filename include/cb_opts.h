/*
 * cb_opts: the resolved options of one guest's backup, and the ONE schema
 * table (key, type, default, where) that drives the config loader, the
 * command line and the documentation. Config lines and CLI options go
 * through the same setter, cb_opts_set().
 *
 * struct cb_opts is filled once (defaults < global < storage < guest < CLI)
 * and then only read: every module gets a const pointer.
 */
#ifndef CB_OPTS_H
#define CB_OPTS_H

#include <stddef.h>
#include "cb_util.h"

enum cb_mode { CB_MODE_SUSPEND, CB_MODE_STOP, CB_MODE_SNAPSHOT };
enum cb_compress { CB_COMPRESS_NONE, CB_COMPRESS_LZO, CB_COMPRESS_GZIP, CB_COMPRESS_ZSTD };
enum cb_policy { CB_POLICY_AUTO, CB_POLICY_ALWAYS };
enum cb_tracking { CB_TRACKING_AUTO, CB_TRACKING_OFF };
enum cb_vm_method { CB_VM_AUTO, CB_VM_STAGE, CB_VM_BACKUP };
enum cb_guest_type { CB_GUEST_CT, CB_GUEST_VM };
enum cb_mailnotification { CB_MAIL_ALWAYS, CB_MAIL_FAILURE };
enum cb_output_format { CB_OUTPUT_TEXT, CB_OUTPUT_JSON };
enum cb_archive_name { CB_NAME_VZDUMP, CB_NAME_CBACKUP };
enum cb_layout { CB_LAYOUT_CLASSIC, CB_LAYOUT_STORE };
enum cb_keep_staging { CB_KEEP_OFF, CB_KEEP_ON, CB_KEEP_AUTO };
enum cb_storage_type { CB_STORAGE_DIR, CB_STORAGE_S3 };

struct cb_opts {
	/* what to back up */
	enum cb_guest_type type;
	char *id;                 /* guest ID, e.g. "101" */
	char *root;               /* ct: rootfs directory */
	char *guest_config;       /* key "config": file stored in the archive */
	struct cb_strvec disks;   /* vm: disk images (key "disk", repeatable) */
	struct cb_strvec mps;     /* ct: mount points "SOURCE,TARGET" (key "mp", repeatable) */

	/* how */
	enum cb_mode mode;
	enum cb_compress compress;
	enum cb_policy compress_policy;
	int zstd_threads;         /* 0 = all cores */
	int zstd_level;           /* default 3 */
	int unit_size_mib;        /* seekable units, MiB of tar (0: 4, on a unit store 1) */
	int reuse;                /* copy unchanged units from the previous archive */
	int pigz_threads;         /* 0 = classic single-stream gzip; 1 = half the cores; N */
	char *storage;            /* storage section name */
	enum cb_layout layout;    /* a dir storage: one file a night, or a unit store */
	char *dumpdir;
	char *tmpdir;
	long bwlimit;             /* KiB/s, 0 = unlimited */
	int ionice;               /* 0-8, 8 = idle */
	double lockwait;          /* minutes (fractions allowed) */
	int stopwait;             /* minutes */
	struct cb_strvec exclude_paths;
	int stdexcludes;
	char *prune_backups;      /* "keep-last=3,keep-daily=7" or NULL */
	int remove;
	char *script;             /* hook script */
	int to_stdout;
	int quiet;
	int verbose;
	int dry_run;
	int max_freeze;           /* seconds */
	int freeze_wait;          /* seconds, at most max_freeze */
	int thaw_timeout;         /* seconds a failed thaw is retried */
	int keep_staging;         /* enum cb_keep_staging; auto: by keep_staging_free */
	char *keep_staging_free;  /* "20%" of the tmpdir, or a size ("10G"): cb_room_parse */
	int stage_workers;        /* pass 1 copy threads, 0 = online cores */
	int prune_staging;        /* prune --staging: the kept staging copies */
	enum cb_tracking change_tracking;  /* freeze window: fanotify */
	int tracking_audit;       /* after a tracked final sync */

	/* reporting */
	char *mailto;             /* "a@x, b@y" or NULL: no mail */
	enum cb_mailnotification mailnotification;
	char *sendmail;           /* mail program */
	int mail_timeout;         /* seconds the mail program has, report written included */
	char *notes_template;     /* ARCHIVE.notes, NULL = none */
	int protected_;           /* create ARCHIVE.protected */
	char *encryption_key;     /* key file: archives encrypted (cb_encarchive.h); NULL = plain */
	enum cb_archive_name archive_name; /* containers: vzdump-lxc-ID-... or cbackup-ct-ID-... */
	enum cb_output_format output_format;
	char *json_status;        /* directory for cbackup-job-<start>.json */

	/* freeze backends (at most one) */
	char *freeze_cgroup;
	long freeze_pid;          /* 0 = none */
	char *freeze_cmd;
	char *thaw_cmd;
	char *stop_cmd;           /* mode stop: stops the guest (else lxc-stop/pct if found) */
	char *start_cmd;          /* mode stop: starts it again */
	char *qmp;
	char *qga;                    /* VM: QEMU guest agent socket (fsfreeze) */
	enum cb_vm_method vm_method;  /* VM disks: QEMU copy-before-write or staging */

	/* the storage's kind ([storage NAME] key "type", not the guest's) and,
	 * for an S3 storage, where its bucket is and how to reach it */
	enum cb_storage_type storage_type;
	char *s3_endpoint;        /* "http://127.0.0.1:7480" */
	char *s3_bucket;
	char *s3_prefix;          /* every object name under it; NULL: none */
	char *s3_region;          /* default us-east-1 */
	char *s3_credentials;     /* AWS shared-credentials file; NULL: the environment */
	char *s3_profile;         /* its profile; default "default" */
	int upload_parallel;      /* uploads at once (default 4) */
};

/* Where a key may appear in the config file (bit set). */
enum cb_opt_where {
	CB_WHERE_GLOBAL = 1, CB_WHERE_STORAGE = 2, CB_WHERE_GUEST = 4, CB_WHERE_CLI = 8,
	CB_WHERE_ANY = 15
};

enum cb_opt_type { CB_OPT_STRING, CB_OPT_INT, CB_OPT_LONG, CB_OPT_DOUBLE, CB_OPT_BOOL, CB_OPT_ENUM,
		   CB_OPT_LIST };

struct cb_enum_name {
	const char *name;
	int value;
};

struct cb_opt_schema {
	const char *key;          /* config key == long CLI option name */
	enum cb_opt_type type;
	const char *def;          /* built-in default as text (NULL = unset) */
	unsigned where;           /* enum cb_opt_where bits */
	const char *accepted;     /* for messages and docs: "suspend|stop|snapshot", "0-8" */
	const char *help;         /* one line for --help and the man page */
	int since_issue;          /* 0 = implemented; else "comes in a later release" */
	size_t offset;            /* field in struct cb_opts */
	long min, max;            /* INT/LONG range */
	const struct cb_enum_name *names; /* ENUM: NULL-terminated */
	const char *doc;          /* more for cbackup.conf(5), as roff lines; NULL if none */
};

/* The table, terminated by an entry with key == NULL. */
extern const struct cb_opt_schema cb_opt_table[];

const struct cb_opt_schema *cb_opt_find(const char *key);
/* A key may mean two things in two places ("type": the guest's on the
 * command line, the storage's in a [storage] section): the entry of KEY
 * allowed in one of the WHERE places, else the first of KEY (whose
 * places an error then names), else NULL. */
const struct cb_opt_schema *cb_opt_find_at(const char *key, unsigned where);
/* Every place KEY is allowed, over all its entries (0: unknown). */
unsigned cb_opt_places(const char *key);

/* Fill with the built-in defaults (tmpdir /var/tmp, dumpdir /var/lib/cbackup/dump...). */
void cb_opts_init(struct cb_opts *o);
void cb_opts_release(struct cb_opts *o);
void cb_opts_copy(struct cb_opts *dst, const struct cb_opts *src);

/*
 * Set one key from its text value. Returns 0, or -1 with a message like
 * "invalid value 'fast' (accepted: suspend|stop|snapshot)" (no key, no
 * location: the caller prefixes "FILE:LINE: key 'mode': " or "option --mode: ").
 * Unknown key: -1 and *unknown = 1 (if unknown != NULL).
 * List keys (disk, exclude-path) append.
 */
int cb_opts_set(struct cb_opts *o, const char *key, const char *value, int *unknown);
/* The same for the entry of KEY allowed in WHERE (cb_opt_find_at). */
int cb_opts_set_at(struct cb_opts *o, const char *key, unsigned where, const char *value,
		   int *unknown);

/* The values of a [storage]'s S3 keys (endpoint, bucket, prefix, region,
 * profile): 0 (also for any other key), or -1 with the message. */
int cb_store_value_check(const char *key, const char *value);

/* Guest IDs: letters, digits, '_', '-', '.', not starting with '.' or '-'
 * (so no '/', no "..", no option look-alike). 0, or -1 with the message. */
int cb_guest_id_check(const char *id);
/*
 * One mp value "SOURCE,TARGET-IN-GUEST": SOURCE an absolute directory on
 * the host, TARGET an absolute path in the guest other than "/", without
 * "." or ".." parts. *source and *target (newly allocated; target as the
 * archive names it, "./srv/data") may be NULL to validate only.
 */
int cb_mp_split(const char *value, char **source, char **target);

/*
 * keep-staging-free: "N%" (0-100, of the tmpdir's file system) or a size,
 * bytes with an optional K, M, G or T (KiB... also written KiB, K, KB).
 * 0, or -1 with the message; *out may be NULL to validate only.
 */
struct cb_room {
	int pct;          /* >= 0: a percentage; -1: bytes */
	uint64_t bytes;
};
int cb_room_parse(const char *value, struct cb_room *out);

const char *cb_compress_ext(enum cb_compress c);   /* ".zst", ".lzo", ".gz", "" */
const char *cb_compress_name(enum cb_compress c);  /* "zstd", "lzo", "gzip", "none" */
const char *cb_mode_name(enum cb_mode m);
const char *cb_guest_type_name(enum cb_guest_type t); /* "ct" / "vm" */
const char *cb_guest_type_label(enum cb_guest_type t); /* "CT" / "VM", for log lines */

#endif
