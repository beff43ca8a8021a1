/*
 * cb_opts: the one schema table: every key with its type, default, places
 * and help, which the loader, the command line and the man pages read
 * (src/core/opts_set.c finds keys in it and sets their values). See
 * include/cb_opts.h.
 */
#include <limits.h>
#include <stddef.h>

#include "cb_opts.h"

#define OFF(field) offsetof(struct cb_opts, field)
#define G CB_WHERE_GLOBAL
#define S CB_WHERE_STORAGE
#define U CB_WHERE_GUEST
#define C CB_WHERE_CLI

static const struct cb_enum_name mode_names[] = {
	{ "suspend", CB_MODE_SUSPEND }, { "stop", CB_MODE_STOP }, { "snapshot", CB_MODE_SNAPSHOT },
	{ NULL, 0 }
};
static const struct cb_enum_name compress_names[] = {
	{ "0", CB_COMPRESS_NONE }, { "none", CB_COMPRESS_NONE }, { "1", CB_COMPRESS_LZO },
	{ "lzo", CB_COMPRESS_LZO }, { "gzip", CB_COMPRESS_GZIP }, { "zstd", CB_COMPRESS_ZSTD },
	{ NULL, 0 }
};
static const struct cb_enum_name policy_names[] = {
	{ "auto", CB_POLICY_AUTO }, { "always", CB_POLICY_ALWAYS }, { NULL, 0 }
};
static const struct cb_enum_name tracking_names[] = {
	{ "auto", CB_TRACKING_AUTO }, { "off", CB_TRACKING_OFF }, { NULL, 0 }
};
static const struct cb_enum_name vm_method_names[] = {
	{ "auto", CB_VM_AUTO }, { "stage", CB_VM_STAGE }, { "blockdev-backup", CB_VM_BACKUP },
	{ NULL, 0 }
};
static const struct cb_enum_name mailnotification_names[] = {
	{ "always", CB_MAIL_ALWAYS }, { "failure", CB_MAIL_FAILURE }, { NULL, 0 }
};
static const struct cb_enum_name output_names[] = {
	{ "text", CB_OUTPUT_TEXT }, { "json", CB_OUTPUT_JSON }, { NULL, 0 }
};
static const struct cb_enum_name archive_name_names[] = {
	{ "vzdump", CB_NAME_VZDUMP }, { "cbackup", CB_NAME_CBACKUP }, { NULL, 0 }
};
/* keep-staging is a boolean that also takes this word */
static const struct cb_enum_name keep_names[] = {
	{ "auto", CB_KEEP_AUTO }, { NULL, 0 }
};
static const struct cb_enum_name layout_names[] = {
	{ "classic", CB_LAYOUT_CLASSIC }, { "store", CB_LAYOUT_STORE }, { NULL, 0 }
};
static const struct cb_enum_name type_names[] = {
	{ "ct", CB_GUEST_CT }, { "vm", CB_GUEST_VM }, { NULL, 0 }
};
static const struct cb_enum_name storage_type_names[] = {
	{ "dir", CB_STORAGE_DIR }, { "s3", CB_STORAGE_S3 }, { NULL, 0 }
};

/* key, type, default, where, accepted, help, since_issue, offset, min, max, names */
const struct cb_opt_schema cb_opt_table[] = {
	{ "tmpdir", CB_OPT_STRING, "/var/tmp", G | S | U | C, "DIR",
	  "fast local directory for the staging copy", 0, OFF(tmpdir), 0, 0, NULL,
	  "The copy goes into\n"
	  ".IB DIR /cbackup/\\fR,\n"
	  "which cbackup creates with mode 0700 and refuses when it is not root's\n"
	  "alone (another owner, a symlink, group or other bits); see SECURITY in\n"
	  ".BR cbackup (8)." },
	{ "dumpdir", CB_OPT_STRING, "/var/lib/cbackup/dump", G | U | C, "DIR",
	  "directory the archives are written to (an S3 storage uses none; not with --storage on "
	  "the command line)", 0, OFF(dumpdir), 0, 0, NULL, NULL },
	{ "path", CB_OPT_STRING, NULL, S, "DIR",
	  "a storage's directory (becomes dumpdir)", 0, OFF(dumpdir), 0, 0, NULL, NULL },
	{ "storage", CB_OPT_STRING, NULL, G | U | C, "NAME",
	  "storage section to write to, or a Proxmox storage of /etc/pve/storage.cfg (its path/dump)",
	  0, OFF(storage), 0, 0, NULL, NULL },
	{ "mode", CB_OPT_ENUM, "suspend", G | S | U | C, "suspend|stop|snapshot",
	  "suspend: two-pass copy, frozen only for the final delta; stop: frozen for the whole copy; "
	  "snapshot: frozen only to take btrfs snapshots of every volume, archived from them (falls "
	  "back to suspend where a volume cannot be snapshotted)", 0, OFF(mode), 0, 0, mode_names, NULL },
	{ "compress", CB_OPT_ENUM, "zstd", G | S | U | C, "0|1|gzip|lzo|zstd|none",
	  "archive compression (1 = lzo, 0 = none)", 0, OFF(compress), 0, 0, compress_names, NULL },
	{ "compress-policy", CB_OPT_ENUM, "auto", G | S | U | C, "auto|always",
	  "auto: store already-compressed data raw; always: compress everything", 0,
	  OFF(compress_policy), 0, 0, policy_names, NULL },
	{ "zstd", CB_OPT_INT, "0", G | S | U | C, "0-256",
	  "worker threads of zstd (0 = all cores)", 0, OFF(zstd_threads), 0, 256, NULL, NULL },
	{ "unit-size", CB_OPT_INT, "0", G | S | U | C, "0-64",
	  "MiB of tar per independently decodable unit of the archive (seekable archives); 0: 4 "
	  "for an archive file, 1 on a unit store (layout = store, an S3 storage)", 0,
	  OFF(unit_size_mib), 0, 64, NULL,
	  "The codec cuts the tar stream into units a reader can decode on its own,\n"
	  "at member boundaries chosen by content (after a member whose path hashes\n"
	  "to a hit, once the unit holds a quarter of\n"
	  ".I unit-size\n"
	  "MiB, and before a member once it holds\n"
	  ".IR unit-size ;\n"
	  "within a member's data every\n"
	  ".I unit-size\n"
	  "MiB from the data's start), so that a change moves only the units around\n"
	  "it (see\n"
	  ".BR reuse ):\n"
	  "zstd frames (with the seek\n"
	  "table of zstd's seekable format in a skippable frame at the end), gzip\n"
	  "members, lzop blocks. Stock tools read the archive as one stream;\n"
	  ".BR \"cbackup ls\" ,\n"
	  ".B \"cbackup restore \\-\\-path\"\n"
	  "and\n"
	  ".B \"cbackup mount\"\n"
	  "decode only the units they need. Smaller units: faster single-file\n"
	  "restores, a slightly larger archive (on a Debian root, zstd \\-3: 4 MiB\n"
	  "units +0.55% against one stream, 1 MiB about +3%). zstd compresses\n"
	  "whole units on its worker threads, which hold two units each in memory.\n"
	  "On a unit store a unit is also what a change costs a night in upload and\n"
	  "storage: a 4 KiB page changed in a database file costs its whole unit\n"
	  "again. With 1 MiB units the seven nights of bench/README.md add about a\n"
	  "quarter less a night than with 4 MiB, for some 3% more on the first.\n"
	  "A changed unit-size cuts other units: the first night after the change\n"
	  "copies none from the one before." },
	{ "reuse", CB_OPT_BOOL, "1", G | S | U | C, "0|1",
	  "copy the units whose content the guest's previous archive already holds instead of "
	  "compressing them again", 0, OFF(reuse), 0, 1, NULL,
	  "The archive is cut into units at member boundaries chosen by content\n"
	  "(see\n"
	  ".BR unit\\-size ),\n"
	  "and the catalog\n"
	  ".RB ( cbackup\\-idx (5))\n"
	  "records a key per unit: the SHA\\-256 of its uncompressed bytes, of the\n"
	  "compression decisions within it and of the codec's settings and library\n"
	  "version. A unit whose key the newest complete archive of the same guest\n"
	  "in the same dump directory (same codec) also has is copied from there\n"
	  "with copy_file_range(2) (a clone on btrfs and xfs, a server\\-side copy on\n"
	  "NFS 4.2, a plain copy elsewhere) after its compressed bytes are checked\n"
	  "against that catalog: by the CRC\\-32 it keeps of each seekable unit (at\n"
	  "memory speed), or by the unit's SHA\\-256 where those do not cover it\n"
	  "exactly (the archive's last); a damaged one stops the copying\n"
	  "(the rest is compressed, with a log line). The archive is byte for byte\n"
	  "the one\n"
	  ".B reuse 0\n"
	  "writes: every archive stays standalone, any can be pruned. zstd pads\n"
	  "units to 4 KiB with skippable frames so that copies can be clones. gzip\n"
	  "writes one member per unit (no name, mtime 0: GNU gzip and tar read\n"
	  "concatenated members) and pads it to 4 KiB with an empty member whose\n"
	  "FEXTRA field (subfield 'Cb') fills the room: 26 bytes to 8 KiB a unit,\n"
	  "so copies can be clones too. lzop has no padding: its units are as long\n"
	  "as their blocks, and copies are plain copies. Uncompressed archives get\n"
	  "no keys and are written in\n"
	  "full. With\n"
	  ".B reuse 0\n"
	  "the catalog has no keys either (as one that\n"
	  ".B cbackup index\n"
	  "rebuilds), so the next backup compresses in full too. With\n"
	  ".B keep\\-staging 1\n"
	  "the units whose staged files are unchanged since the previous archive\n"
	  "are copied without their data being read (a trust map kept beside the\n"
	  "staging copy; see \"Reuse without reading the staging copy\" in\n"
	  ".BR cbackup (8))." },
	{ "pigz", CB_OPT_INT, "0", G | S | U | C, "0-256",
	  "parallel gzip threads (0 = single-threaded gzip, 1 = half the cores, N = N threads)", 0,
	  OFF(pigz_threads), 0, 256, NULL, NULL },
	{ "bwlimit", CB_OPT_LONG, "0", G | S | U | C, "KiB/s",
	  "I/O bandwidth limit in KiB/s (0 = none)", 0, OFF(bwlimit), 0, LONG_MAX / 1024, NULL, NULL },
	{ "ionice", CB_OPT_INT, "7", G | S | U | C, "0-8",
	  "I/O priority (8 = idle class)", 0, OFF(ionice), 0, 8, NULL, NULL },
	{ "lockwait", CB_OPT_DOUBLE, "180", G | C, "MINUTES",
	  "maximal time to wait for the global lock", 0, OFF(lockwait), 0, INT_MAX / 60, NULL, NULL },
	{ "stopwait", CB_OPT_INT, "10", G | U | C, "MINUTES",
	  "maximal time to wait until a guest is stopped (mode stop: the stop command's time limit)",
	  0, OFF(stopwait), 0, INT_MAX / 60, NULL, NULL },
	{ "stop-cmd", CB_OPT_STRING, NULL, G | U | C, "COMMAND",
	  "mode stop: shell command that stops the guest (default: lxc-stop -P LXCDIR -n ID or pct "
	  "shutdown ID when the guest is an LXC or Proxmox container of this host)", 0, OFF(stop_cmd), 0, 0,
	  NULL, NULL },
	{ "start-cmd", CB_OPT_STRING, NULL, G | U | C, "COMMAND",
	  "mode stop: shell command that starts the guest again after the copy (default: lxc-start "
	  "-P LXCDIR -n ID or pct start ID, with stop-cmd's default)", 0, OFF(start_cmd), 0, 0, NULL, NULL },
	{ "exclude-path", CB_OPT_LIST, NULL, G | U | C, "GLOB",
	  "exclude paths, split on blanks as vzdump's list (a leading '/' anchors at the guest root; "
	  "repeatable)", 0,
	  OFF(exclude_paths), 0, 0, NULL, NULL },
	{ "stdexcludes", CB_OPT_BOOL, "1", G | U | C, "0|1",
	  "exclude temporary files and logs (/tmp/?*, /var/tmp/?*, /var/run/?*.pid)", 0,
	  OFF(stdexcludes), 0, 1, NULL, NULL },
	{ "prune-backups", CB_OPT_STRING, NULL, G | S | U | C, "keep-last=N,...",
	  "retention: keep-last, keep-hourly, keep-daily, keep-weekly, keep-monthly, keep-yearly, keep-all",
	  0, OFF(prune_backups), 0, 0, NULL,
	  "Rules that keep nothing\n"
	  ".RB ( keep\\-last=0 ,\n"
	  "every count 0,\n"
	  ".BR keep\\-all=0 )\n"
	  "are an error naming the file and line, as vzdump refuses them; use\n"
	  ".B keep\\-all=1\n"
	  "to keep everything. The backup just written is never pruned." },
	{ "maxfiles", CB_OPT_INT, NULL, G | S | U | C, "N",
	  "deprecated (vzdump): the same as prune-backups = keep-last=N, with a warning", 0,
	  OFF(prune_backups), 1, INT_MAX, NULL,
	  "Both keys in one section is an error (exit 2) naming both lines; in\n"
	  "different sections precedence decides, as for any key." },
	{ "remove", CB_OPT_BOOL, "1", G | S | U | C, "0|1",
	  "prune old backups after a successful one", 0, OFF(remove), 0, 1, NULL, NULL },
	{ "script", CB_OPT_STRING, NULL, G | U | C, "FILE",
	  "hook script called at each phase", 0, OFF(script), 0, 0, NULL, NULL },
	{ "mailto", CB_OPT_STRING, NULL, G | U | C, "ADDRESS,...",
	  "mail the job report to these addresses (comma- or space-separated)", 0, OFF(mailto), 0,
	  0, NULL,
	  "An address with blanks, control characters or header syntax\n"
	  "(\\fB\"(),:;<>[\\e]\\fP) in it is an error; see cbackup(8), MAIL REPORT." },
	{ "mailnotification", CB_OPT_ENUM, "always", G | U | C, "always|failure",
	  "when to mail the report: after every job, or only when something failed", 0,
	  OFF(mailnotification), 0, 0, mailnotification_names, NULL },
	{ "sendmail", CB_OPT_STRING, "/usr/sbin/sendmail", G | C, "PROGRAM",
	  "mail program, run without a shell as PROGRAM -t -i (a name without '/' is searched "
	  "in PATH)", 0, OFF(sendmail), 0, 0, NULL,
	  "A mail program that is missing, fails or runs longer than\n"
	  ".B mail\\-timeout\n"
	  "is a warning, never a failed backup." },
	{ "mail-timeout", CB_OPT_INT, "300", G | C, "SECONDS",
	  "how long the mail program may take, from the first byte of the report to its exit; "
	  "then it is killed", 0, OFF(mail_timeout), 1, 86400, NULL,
	  "The report is written without blocking under the same deadline: a mail\n"
	  "program that never reads its input cannot hold the job (a one-shot\n"
	  "service would never finish), whatever the size of the report." },
	{ "notes-template", CB_OPT_STRING, NULL, G | S | U | C, "TEMPLATE",
	  "text of ARCHIVE.notes: {{cluster}} {{guestname}} {{node}} {{vmid}} {{type}}, \\n = "
	  "new line", 0, OFF(notes_template), 0, 0, NULL,
	  "\\fB{{cluster}}\\fP and \\fB{{node}}\\fP are this host's name, \\fB{{guestname}}\\fP\n"
	  "the guest's host name, \\fB{{vmid}}\\fP the guest ID, \\fB{{type}}\\fP ct or vm;\n"
	  "\\fB\\e\\e\\fP is a backslash. An unknown variable is an error." },
	{ "protected", CB_OPT_BOOL, "0", G | S | U | C, "0|1",
	  "mark the new backup protected (ARCHIVE.protected): prune never removes it", 0,
	  OFF(protected_), 0, 1, NULL, NULL },
	{ "encryption-key", CB_OPT_STRING, NULL, G | S | U | C, "FILE",
	  "encrypt archives, catalogs and notes with the key in FILE (made by cbackup key create); "
	  "restore, ls, verify, mount and index of an encrypted archive need it too", 0,
	  OFF(encryption_key), 0, 0, NULL,
	  "Setting a key turns encryption on; \\fBnone\\fP turns it off again (a guest\n"
	  "section under an encrypting storage). Archives are then named\n"
	  ".IB NAME .tar.zst.cbenc\n"
	  "and only the keyed frames, a frame table and sealed catalogs reach the\n"
	  "dump directory (see docs/encryption.md). On a unit store (layout = store,\n"
	  "type = s3) each unit object is sealed and named by a keyed MAC, and each\n"
	  "night's manifest is sealed; night names keep no suffix.\n"
	  "A key file readable or writable\n"
	  "by group or others, empty, short or a directory is refused (exit 2).\n"
	  "Losing the key loses every backup made with it: keep a copy apart." },
	{ "archive-name", CB_OPT_ENUM, "vzdump", G | S | U | C, "vzdump|cbackup",
	  "vzdump: a container whose ID Proxmox VE can hold (100-999999999) is archived as "
	  "vzdump names it, vzdump-lxc-ID-DATE.tar.EXT; cbackup: cbackup-ct-ID-DATE... "
	  "(VMs and other IDs always)", 0, OFF(archive_name), 0, 0,
	  archive_name_names,
	  "Proxmox VE lists, restores and prunes only backups of vzdump's names.\n"
	  "Archives of both names are one series for\n"
	  ".BR \"cbackup list\" ,\n"
	  ".BR \"cbackup prune\" ,\n"
	  "the keep rules and\n"
	  ".BR reuse :\n"
	  "switching loses no history." },
	{ "layout", CB_OPT_ENUM, "classic", G | S | C, "classic|store",
	  "classic: one archive file a night in the directory; store: a unit store there, each unit "
	  "one file named by its content, shared by every night and guest, a manifest a night",
	  0, OFF(layout), 0, 0, layout_names,
	  "A store costs what changed: a unit another night (of any guest) has\n"
	  "already is neither compressed nor written again, on any file system\n"
	  "(classic needs one that clones, btrfs or XFS, for that). Its archives\n"
	  "are named\n"
	  ".IB STORAGE : NAME\n"
	  "on every command; the units of a night, in its manifest's order, are\n"
	  "the same .tar.zst as a classic archive. See docs/object-storage.md." },
	{ "output-format", CB_OPT_ENUM, "text", G | C, "text|json",
	  "json: backup prints one JSON job status document, list one JSON array, on stdout", 0,
	  OFF(output_format), 0, 0, output_names,
	  "See cbackup(8), JSON STATUS." },
	{ "json-status", CB_OPT_STRING, NULL, G | C, "DIR",
	  "also write the job status as DIR/cbackup-job-<start>.json", 0, OFF(json_status), 0, 0,
	  NULL,
	  "\\fIstart\\fP is the job's start time, \\fIYYYY_MM_DD\\-HH_MM_SS\\fP; the file\n"
	  "is written as a .tmp and renamed." },
	{ "stdout", CB_OPT_BOOL, "0", C, "0|1",
	  "write the archive to standard output", 0, OFF(to_stdout), 0, 1, NULL, NULL },
	{ "quiet", CB_OPT_BOOL, "0", G | C, "0|1",
	  "only warnings and errors on stderr", 0, OFF(quiet), 0, 1, NULL, NULL },
	{ "verbose", CB_OPT_BOOL, "0", G | C, "0|1",
	  "more detail in the log", 0, OFF(verbose), 0, 1, NULL, NULL },
	{ "dry-run", CB_OPT_BOOL, "0", C, "0|1",
	  "run every check of the real run (paths, hook script, locks, tmpdir and dump disk space) "
	  "and print the resolved dumpdir, archive name, mode and excludes; change nothing", 0,
	  OFF(dry_run), 0, 1, NULL, NULL },
	{ "staging", CB_OPT_BOOL, "0", C, "0|1",
	  "prune: remove the kept staging copies (keep-staging) of the guest, else of the guests "
	  "no longer configured (with --all: of every guest), instead of old backups; looked for in "
	  "every tmpdir the configuration names (global, storages, guests) unless --tmpdir is given",
	  0, OFF(prune_staging), 0, 1, NULL, NULL },
	{ "max-freeze", CB_OPT_INT, "60", G | S | U | C, "SECONDS",
	  "thaw and fail the guest when it stays frozen longer (final sync and pre-restart hook); "
	  "held by the watchdog", 0, OFF(max_freeze), 1, INT_MAX, NULL,
	  "See cbackup(8), HOW THE GUEST IS KEPT SAFE." },
	{ "freeze-wait", CB_OPT_INT, "10", G | S | U | C, "SECONDS",
	  "how long a freeze may take (freeze-cmd, the freezer); a guest not frozen by then is "
	  "thawed at once and fails; at most max-freeze", 0, OFF(freeze_wait), 1, 3600, NULL,
	  "For a cgroup the error names the tasks that did not freeze." },
	{ "thaw-timeout", CB_OPT_INT, "60", G | S | U | C, "SECONDS",
	  "how long a failed thaw is retried (0.1 s doubling to 2 s) before the watchdog gives up",
	  0, OFF(thaw_timeout), 1, 86400, NULL,
	  "cbackup waits 5 s for a confirmed thaw, then fails the guest; the freeze\n"
	  "watchdog goes on retrying for the rest of the time." },
	{ "keep-staging", CB_OPT_BOOL, "auto", G | U | C, "0|1|auto",
	  "keep the staging copy so that the next first sync is a delta; auto: when the tmpdir "
	  "keeps keep-staging-free free after it", 0, OFF(keep_staging), 0, 1, keep_names,
	  "Only a copy cbackup itself made and recorded (a marker beside it in\n"
	  ".IB tmpdir /cbackup/\\fR)\n"
	  "is reused; anything else found there is removed first.\n"
	  "The trade-off: the tmpdir holds a full copy of the guest between runs\n"
	  "(as much space as the guest's files, shown by\n"
	  ".B cbackup list\\fR),\n"
	  "for a first sync that copies only what changed (a checksummed index\n"
	  "beside the copy says what it holds; a damaged or foreign one means a\n"
	  "full first sync with a WARN: line).\n"
	  ".B auto\n"
	  "(containers) keeps the copy when the tmpdir's file system keeps at least\n"
	  ".B keep\\-staging\\-free\n"
	  "free with it: before a first copy, the space estimate is counted as\n"
	  "taken; with a copy kept already, what is free now counts. An INFO line\n"
	  "says which and why; a copy not kept is removed after the run as with\n"
	  ".B 0\n"
	  "(one kept by an earlier run is still where this run's first sync\n"
	  "starts from).\n"
	  "VM disks and snapshot mode keep nothing with\n"
	  ".BR auto .\n"
	  ".B cbackup list\n"
	  "shows the kept copies, those of guests no longer configured apart;\n"
	  ".B cbackup prune \\-\\-staging\n"
	  "removes them." },
	{ "keep-staging-free", CB_OPT_STRING, "20%", G | U | C, "PERCENT%|SIZE",
	  "with keep-staging auto, how much of the tmpdir must stay free with the staging copy kept "
	  "(a percentage of its file system, or a size such as 10G)", 0, OFF(keep_staging_free),
	  0, 0, NULL,
	  "A size is bytes, or a number with K, M, G or T (KiB, MiB, GiB, TiB;\n"
	  "also written KiB or KB)." },
	{ "stage-workers", CB_OPT_INT, "0", G | U | C, "0-256",
	  "threads that copy files in the first sync (0 = one per online core)", 0,
	  OFF(stage_workers), 0, 256, NULL,
	  "One thread walks the guest, creates directories and special files in\n"
	  "order and hands regular files to the workers; bwlimit is shared by all\n"
	  "of them and ionice applies to each. The final sync (guest frozen) stays\n"
	  "on one thread. 1 copies on the walking thread itself.\n"
	  "With keep-staging 0 the same number of threads removes the staging copy\n"
	  "once the archive has its name: the copy is moved aside\n"
	  "(\\fItmpdir\\fR/cbackup/.trash-cbackup-\\fIID\\fR.stage.\\fIPID\\fR)\n"
	  "and removed while the result lines are logged and the next guest runs;\n"
	  "the process ends once it is gone. The next run of the guest removes\n"
	  "what a killed run left there." },
	{ "change-tracking", CB_OPT_ENUM, "auto", G | U | C, "auto|off",
	  "track changes during the first sync so that the frozen final sync re-checks only them",
	  0, OFF(change_tracking), 0, 0, tracking_names,
	  "With\n"
	  ".BR auto ,\n"
	  "cbackup watches the file system of a container's root with fanotify\n"
	  "from before the first sync until the freeze, and the final sync looks\n"
	  "only at the directories in which something changed (plus the ones of files\n"
	  "with several links and of files the guest holds open for writing or\n"
	  "maps shared); where only some entries changed in place, only at those\n"
	  "entries. Where that cannot be exact (no fanotify, a file system\n"
	  "without file handles, an overflowed event queue, more changes than it\n"
	  "keeps) a WARN says why and the final sync walks the whole tree, as\n"
	  ".B off\n"
	  "always does. See \"THE FREEZE WINDOW\" in\n"
	  ".BR cbackup (8)." },
	{ "tracking-audit", CB_OPT_BOOL, "1", G | U | C, "0|1",
	  "after a tracked final sync, compare the running guest with what was archived and "
	  "warn about changes tracking missed", 0, OFF(tracking_audit), 0, 1, NULL,
	  "Runs only when the final sync was tracked (a full walk needs no audit)\n"
	  "and the guest was frozen, after the thaw, before the archive is written:\n"
	  "a stat walk of the guest's tree against the staging index (what the\n"
	  "archive holds), as long as a full walk of the final sync but with the\n"
	  "guest running. An entry that differs and whose ctime is settled before\n"
	  "the freeze is a change tracking missed: the log names the entries\n"
	  "(at most 20, and a count), the guest's result is\n"
	  ".B warning\n"
	  "(the archive is kept; the job exits 1 and mails with\n"
	  ".BR \"mailnotification failure\" ),\n"
	  "and the guest's next run walks the whole tree in its final sync. See\n"
	  "\"THE FREEZE WINDOW\" in\n"
	  ".BR cbackup (8)." },
	{ "freeze-cgroup", CB_OPT_STRING, NULL, U | C, "PATH",
	  "cgroup (v2 cgroup.freeze or v1 freezer) holding the guest's processes", 0,
	  OFF(freeze_cgroup), 0, 0, NULL, NULL },
	{ "freeze-pid", CB_OPT_LONG, "0", U | C, "PID",
	  "freeze the process group of PID with SIGSTOP/SIGCONT", 0, OFF(freeze_pid), 0, INT_MAX,
	  NULL, NULL },
	{ "freeze-cmd", CB_OPT_STRING, NULL, U | C, "COMMAND",
	  "command that freezes the guest (with thaw-cmd)", 0, OFF(freeze_cmd), 0, 0, NULL, NULL },
	{ "thaw-cmd", CB_OPT_STRING, NULL, U | C, "COMMAND",
	  "command that thaws the guest", 0, OFF(thaw_cmd), 0, 0, NULL, NULL },
	{ "qmp", CB_OPT_STRING, NULL, U | C, "SOCKET",
	  "QEMU QMP socket: stop/cont the VM", 0, OFF(qmp), 0, 0, NULL, NULL },
	{ "qga", CB_OPT_STRING, NULL, U | C, "SOCKET",
	  "QEMU guest agent socket: the guest's file systems are frozen around the snapshot",
	  0, OFF(qga), 0, 0, NULL,
	  "With a\n"
	  ".B qga\n"
	  "socket (the host side of the VM's virtio-serial guest agent channel), the\n"
	  "guest's file systems are frozen with\n"
	  ".B guest-fsfreeze-freeze\n"
	  "just before the copy-before-write filters go in (or the blockdev-backup\n"
	  "jobs start) and thawed with\n"
	  ".B guest-fsfreeze-thaw\n"
	  "right after, as vzdump does: the disks are then consistent for the guest's\n"
	  "file systems, not only crash-consistent. A freeze that fails or times out\n"
	  "is a WARN and the backup goes on; a thaw is always attempted." },
	{ "vm-method", CB_OPT_ENUM, "auto", G | U | C, "auto|stage|blockdev-backup",
	  "how VM disks are read: auto = by QEMU's version (copy-before-write, blockdev-backup, staging)",
	  0, OFF(vm_method), 0, 0, vm_method_names,
	  "With\n"
	  ".B auto\n"
	  "and a\n"
	  ".B qmp\n"
	  "socket, a VM on QEMU 7.1 or later is paused only while a copy-before-write\n"
	  "filter goes in front of each disk (milliseconds, whatever the disk size),\n"
	  "and the disks are read over NBD from QEMU itself while the VM runs; each\n"
	  "is archived as a sparse raw image\n"
	  ".IB NAME .raw\n"
	  "(the guest-visible content, backing chains included). On QEMU 4.2 to 7.0\n"
	  "(or with\n"
	  ".BR blockdev-backup ),\n"
	  "one QMP transaction starts a\n"
	  ".B blockdev-backup sync=full\n"
	  "job per disk (grouped completion) into a raw image in the private staging\n"
	  "directory, at the\n"
	  ".B bwlimit\n"
	  "speed, after a check of the free space; the VM is not paused. A QEMU older\n"
	  "than 4.2 (a WARN names its version), mode\n"
	  ".BR stop ,\n"
	  "or\n"
	  ".B stage\n"
	  "copy the image files in two passes with the VM paused for the second. See \"VM DISK IMAGES\" in\n"
	  ".BR cbackup (8)." },
	{ "root", CB_OPT_STRING, NULL, U | C, "DIR",
	  "container root file system", 0, OFF(root), 0, 0, NULL, NULL },
	{ "config", CB_OPT_STRING, NULL, U, "FILE",
	  "guest configuration file stored in the archive", 0, OFF(guest_config), 0, 0, NULL, NULL },
	{ "guest-config", CB_OPT_STRING, NULL, C, "FILE",
	  "guest configuration file stored in the archive", 0, OFF(guest_config), 0, 0, NULL, NULL },
	{ "disk", CB_OPT_LIST, NULL, U | C, "FILE",
	  "VM disk image (repeatable)", 0, OFF(disks), 0, 0, NULL, NULL },
	{ "mp", CB_OPT_LIST, NULL, U | C, "SOURCE,TARGET",
	  "container mount point: host directory SOURCE appears at TARGET in the guest "
	  "(repeatable; snapshot mode snapshots it with the root)", 0, OFF(mps), 0, 0, NULL, NULL },
	{ "type", CB_OPT_ENUM, "ct", C, "ct|vm",
	  "guest type of an ad hoc backup", 0, OFF(type), 0, 0, type_names, NULL },
	{ "id", CB_OPT_STRING, NULL, C, "ID",
	  "guest ID of an ad hoc backup", 0, OFF(id), 0, 0, NULL, NULL },
	/* a storage's "type" after the guest's: cb_opts_set("type") stays the
	 * command line's; a [storage] section finds its own by place */
	{ "type", CB_OPT_ENUM, "dir", S, "dir|s3",
	  "a storage's kind: a directory (path) or an S3 bucket (endpoint, bucket)", 0,
	  OFF(storage_type), 0, 0, storage_type_names,
	  "With\n"
	  ".BR s3 ,\n"
	  ".B endpoint\n"
	  "and\n"
	  ".B bucket\n"
	  "are required (a section without them is an error naming it), and the\n"
	  "keys of an S3 storage are refused in a directory's section. A backup\n"
	  "to an S3 storage checks it before the guest is touched: an endpoint that\n"
	  "does not answer, keys it refuses or a bucket that does not exist fail\n"
	  "that guest with one\n"
	  ".B ERROR\n"
	  "naming the storage, and the job exits 2. Requests are path\\-style\n"
	  "(ENDPOINT/BUCKET/KEY), signed with AWS Signature Version 4, each upload\n"
	  "with its Content\\-MD5\n"
	  "and SHA\\-256. See\n"
	  ".I docs/object\\-storage.md\n"
	  "for the way out with stock tools." },
	{ "endpoint", CB_OPT_STRING, NULL, S, "URL",
	  "an S3 storage's address: http://HOST:PORT or https://HOST", 0, OFF(s3_endpoint), 0, 0,
	  NULL, NULL },
	{ "bucket", CB_OPT_STRING, NULL, S, "NAME",
	  "an S3 storage's bucket (it must exist)", 0, OFF(s3_bucket), 0, 0, NULL, NULL },
	{ "prefix", CB_OPT_STRING, NULL, S, "PATH",
	  "an S3 storage's objects are all named under this prefix (a/b: a/b/...)", 0,
	  OFF(s3_prefix), 0, 0, NULL, NULL },
	{ "region", CB_OPT_STRING, "us-east-1", S, "NAME",
	  "an S3 storage's region, as its requests are signed", 0, OFF(s3_region), 0, 0, NULL,
	  NULL },
	{ "credentials", CB_OPT_STRING, NULL, S, "FILE",
	  "an S3 storage's keys: an AWS shared-credentials file (else AWS_ACCESS_KEY_ID and "
	  "AWS_SECRET_ACCESS_KEY)", 0, OFF(s3_credentials), 0, 0, NULL,
	  "The file is read as the AWS tools write\n"
	  ".IR ~/.aws/credentials :\n"
	  "a\n"
	  ".BI [ PROFILE ]\n"
	  "section with\n"
	  ".B aws_access_key_id\n"
	  "and\n"
	  ".BR aws_secret_access_key .\n"
	  "Like a key file it is refused when it is not a regular file, is owned\n"
	  "by another user than root or the one running cbackup, or has any group\n"
	  "or other permission bit (chmod 600). Without this key the keys come\n"
	  "from the environment." },
	{ "profile", CB_OPT_STRING, "default", S, "NAME",
	  "the profile of the credentials file an S3 storage uses", 0, OFF(s3_profile), 0, 0,
	  NULL, NULL },
	{ "upload-parallel", CB_OPT_INT, "4", S, "1-64",
	  "objects an S3 storage uploads at once (each a connection and a buffer in memory)", 0,
	  OFF(upload_parallel), 1, 64, NULL, NULL },
	{ NULL, 0, NULL, 0, NULL, NULL, 0, 0, 0, 0, NULL, NULL }
};

const char *cb_compress_ext(enum cb_compress c)
{
	static const char *const ext[] = { "", ".lzo", ".gz", ".zst" };
	return ext[c];
}

const char *cb_compress_name(enum cb_compress c)
{
	static const char *const names[] = { "none", "lzo", "gzip", "zstd" };
	return names[c];
}

const char *cb_mode_name(enum cb_mode m)
{
	return mode_names[m].name;
}

const char *cb_guest_type_name(enum cb_guest_type t)
{
	return t == CB_GUEST_VM ? "vm" : "ct";
}

const char *cb_guest_type_label(enum cb_guest_type t)
{
	return t == CB_GUEST_VM ? "VM" : "CT";
}
