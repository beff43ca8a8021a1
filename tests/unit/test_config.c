/* Unit tests: config file loader and option resolution (cb_config). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "cb_config.h"
#include "cb_pve.h"
#include "cb_rmtree.h"

struct fixture {
	char dir[64];
	char path[128];   /* the config file of the current test */
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	strcpy(f->dir, "/tmp/cbackup-test-config.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/cbackup.conf", f->dir);
	/* the Proxmox storages come from the fixture, not from this host */
	setenv("CBACKUP_PVE_DIR", f->dir, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	cb_remove_tree(f->dir);
	free(f);
	return 0;
}

static void write_bytes(const char *path, const char *data, size_t len)
{
	FILE *fp = fopen(path, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(data, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
}

/* Write the test's config file and load it. */
static int load_text(struct fixture *f, struct cb_config *cfg, const char *text)
{
	write_bytes(f->path, text, strlen(text));
	return cb_config_load(cfg, f->path);
}

/* The error message mentions "FILE:LINE:" of the test's config file. */
static void assert_error_at(const struct fixture *f, int line)
{
	char where[192];
	snprintf(where, sizeof(where), "%s:%d:", f->path, line);
	if (!strstr(cb_last_error(), where))
		fail_msg("error '%s' does not name '%s'", cb_last_error(), where);
}

static void assert_error_has(const char *needle)
{
	if (!strstr(cb_last_error(), needle))
		fail_msg("error '%s' does not contain '%s'", cb_last_error(), needle);
}

static const char *find_warning(const struct cb_config *cfg, const char *needle)
{
	for (size_t i = 0; i < cfg->warnings.n; i++)
		if (strstr(cfg->warnings.v[i], needle))
			return cfg->warnings.v[i];
	return NULL;
}

static const char good_conf[] =
	"# global defaults\n"                                   /* 1 */
	"tmpdir = /var/lib/vz/vztmp\n"                          /* 2 */
	"storage = qnap_nfs\n"                                  /* 3 */
	"mode = suspend\n"                                      /* 4 */
	"compress = zstd\n"                                     /* 5 */
	"\n"                                                    /* 6 */
	"[storage qnap_nfs]\n"                                  /* 7 */
	"path = /mnt/pve/qnap_nfs/dump\n"                       /* 8 */
	"prune-backups = keep-last=3,keep-daily=7\n"            /* 9 */
	"\n"                                                    /* 10 */
	"[ct 101]\n"                                            /* 11 */
	"root = /var/lib/lxc/101/rootfs\n"                      /* 12 */
	"config = /var/lib/lxc/101/config        ; stored in the archive\n" /* 13 */
	"freeze-cgroup = /sys/fs/cgroup/lxc.payload.101\n"      /* 14 */
	"\n"                                                    /* 15 */
	"[vm 200]\n"                                            /* 16 */
	"disk = /var/lib/images/200/disk0.qcow2\n"              /* 17 */
	"qmp = /run/qemu/200.qmp\n"                             /* 18 */
	"disk = /var/lib/images/200/disk1.raw\n"                /* 19 */
	"[Storage backup-2.local]\n"                            /* 20 */
	"path = /srv/dump2\n";                                  /* 21 */

static void test_good_file(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_strvec ids = CB_STRVEC_INIT;
	const struct cb_config_section *s;

	assert_int_equal(load_text(f, &cfg, good_conf), 0);
	assert_string_equal(cfg.path, f->path);
	assert_int_equal(cfg.n_sections, 5);
	assert_int_equal(cfg.warnings.n, 0);
	assert_int_equal(cfg.sections[0].kind, CB_SECTION_GLOBAL);
	assert_string_equal(cfg.sections[0].name, "");
	assert_int_equal(cfg.sections[0].n_entries, 4);
	assert_string_equal(cfg.sections[0].entries[1].key, "storage");
	assert_string_equal(cfg.sections[0].entries[1].value, "qnap_nfs");
	assert_int_equal(cfg.sections[0].entries[1].line, 3);

	s = cb_config_storage(&cfg, "qnap_nfs");
	assert_non_null(s);
	assert_int_equal(s->kind, CB_SECTION_STORAGE);
	assert_int_equal(s->line, 7);
	assert_string_equal(s->entries[1].value, "keep-last=3,keep-daily=7");
	assert_non_null(cb_config_storage(&cfg, "backup-2.local"));
	assert_null(cb_config_storage(&cfg, "101"));

	s = cb_config_guest(&cfg, "101");
	assert_non_null(s);
	assert_int_equal(s->kind, CB_SECTION_CT);
	assert_string_equal(s->entries[1].key, "config");
	assert_string_equal(s->entries[1].value, "/var/lib/lxc/101/config");
	assert_int_equal(s->entries[1].line, 13);
	s = cb_config_guest(&cfg, "200");
	assert_non_null(s);
	assert_int_equal(s->kind, CB_SECTION_VM);
	assert_null(cb_config_guest(&cfg, "qnap_nfs"));

	cb_config_guest_ids(&cfg, &ids);
	assert_int_equal(ids.n, 2);
	assert_string_equal(ids.v[0], "101");
	assert_string_equal(ids.v[1], "200");
	cb_strvec_clear(&ids);
	cb_config_release(&cfg);
}

static void test_resolve_guests(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;

	assert_int_equal(load_text(f, &cfg, good_conf), 0);
	assert_int_equal(cb_config_resolve(&cfg, "200", NULL, &o), 0);
	assert_int_equal(o.type, CB_GUEST_VM);
	assert_string_equal(o.id, "200");
	assert_int_equal(o.disks.n, 2);
	assert_string_equal(o.disks.v[0], "/var/lib/images/200/disk0.qcow2");
	assert_string_equal(o.disks.v[1], "/var/lib/images/200/disk1.raw");
	assert_string_equal(o.qmp, "/run/qemu/200.qmp");
	assert_string_equal(o.dumpdir, "/mnt/pve/qnap_nfs/dump");
	assert_string_equal(o.storage, "qnap_nfs");
	assert_string_equal(o.prune_backups, "keep-last=3,keep-daily=7");
	assert_string_equal(o.tmpdir, "/var/lib/vz/vztmp");
	cb_opts_release(&o);

	assert_int_equal(cb_config_resolve(&cfg, "101", NULL, &o), 0);
	assert_int_equal(o.type, CB_GUEST_CT);
	assert_string_equal(o.id, "101");
	assert_string_equal(o.root, "/var/lib/lxc/101/rootfs");
	assert_string_equal(o.guest_config, "/var/lib/lxc/101/config");
	assert_string_equal(o.freeze_cgroup, "/sys/fs/cgroup/lxc.payload.101");
	assert_int_equal(o.disks.n, 0);
	cb_opts_release(&o);

	assert_int_equal(cb_config_resolve(&cfg, "999", NULL, &o), -1);
	assert_error_has("guest '999' is not defined in");
	assert_error_has(f->path);
	cb_config_release(&cfg);
}

/* A vzdump.conf as Proxmox ships it, with some settings uncommented. */
static const char vzdump_conf[] =
	"# vzdump default settings\n"                           /* 1 */
	"\n"                                                    /* 2 */
	"tmpdir: /var/lib/vz/vztmp\n"                           /* 3 */
	"#dumpdir: DIR\n"                                       /* 4 */
	"#storage: STORAGE_ID\n"                                /* 5 */
	"mode: snapshot\n"                                      /* 6 */
	"bwlimit: 50000\n"                                      /* 7 */
	"#performance: [max-workers=N][,pbs-entries-max=N]\n"   /* 8 */
	"ionice: 5\n"                                           /* 9 */
	"lockwait: 30\n"                                        /* 10 */
	"stopwait: 5\n"                                         /* 11 */
	"stdexcludes: 0\n"                                      /* 12 */
	"mailto: x@y\n"                                         /* 13 */
	"prune-backups: keep-last=3,keep-weekly=2\n"            /* 14 */
	"#script: FILENAME\n"                                   /* 15 */
	"exclude-path: /var/log/?*\n"                           /* 16 */
	"pigz: 2\n"                                             /* 17 */
	"zstd: 4\n"                                             /* 18 */
	"compress:lzo\n"                                        /* 19 */
	"remove: 0\n"                                           /* 20 */
	"notes-template: {{guestname}}\n"                       /* 21 */
	"performance: max-workers=8\n"                          /* 22 */
	"pool: production\n";                                   /* 23 */

static void test_vzdump_conf(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	const char *w;
	char want[320];

	assert_int_equal(load_text(f, &cfg, vzdump_conf), 0);
	assert_int_equal(cfg.warnings.n, 2);
	w = find_warning(&cfg, "'pool'");
	assert_non_null(w);
	snprintf(want, sizeof(want), "%s:23: key 'pool' is a vzdump option cbackup ignores (no "
		 "Proxmox resource pools: give guest IDs or --all)", f->path);
	assert_string_equal(w, want);
	assert_non_null(find_warning(&cfg, ":22: key 'performance' is a vzdump option"));
	assert_null(find_warning(&cfg, "unknown key"));

	assert_int_equal(cb_config_resolve(&cfg, NULL, NULL, &o), 0);
	assert_string_equal(o.tmpdir, "/var/lib/vz/vztmp");
	assert_int_equal(o.mode, CB_MODE_SNAPSHOT);
	assert_int_equal(o.bwlimit, 50000);
	assert_int_equal(o.ionice, 5);
	assert_int_equal(o.lockwait, 30);
	assert_int_equal(o.stopwait, 5);
	assert_int_equal(o.stdexcludes, 0);
	assert_string_equal(o.prune_backups, "keep-last=3,keep-weekly=2");
	assert_int_equal(o.exclude_paths.n, 1);
	assert_string_equal(o.exclude_paths.v[0], "/var/log/?*");
	assert_int_equal(o.pigz_threads, 2);
	assert_int_equal(o.zstd_threads, 4);
	assert_int_equal(o.compress, CB_COMPRESS_LZO);
	assert_int_equal(o.remove, 0);
	assert_string_equal(o.mailto, "x@y");
	assert_string_equal(o.notes_template, "{{guestname}}");
	cb_opts_release(&o);
	cb_config_release(&cfg);
}

/* vzdump's deprecated maxfiles: keep-last=N with a warning; beside
 * prune-backups in one section an error naming both lines. */
static void test_maxfiles(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	char want[256];

	assert_int_equal(load_text(f, &cfg, "tmpdir: /t\nmaxfiles: 3\n"), 0);
	assert_int_equal(cfg.warnings.n, 1);
	assert_non_null(find_warning(&cfg, ":2: key 'maxfiles' is deprecated: it means "
				     "prune-backups = keep-last=3; write that instead"));
	assert_int_equal(cb_config_resolve(&cfg, NULL, NULL, &o), 0);
	assert_string_equal(o.prune_backups, "keep-last=3");
	cb_opts_release(&o);
	cb_config_release(&cfg);

	assert_int_equal(load_text(f, &cfg, "prune-backups: keep-daily=2\n\nmaxfiles: 3\n"), -1);
	snprintf(want, sizeof(want), "%s:3: keys 'maxfiles' and 'prune-backups' are both set (the "
		 "other at line 1); keep only prune-backups", f->path);
	assert_string_equal(cb_last_error(), want);
	/* in different sections: precedence decides, as for any key */
	assert_int_equal(load_text(f, &cfg, "maxfiles: 3\n[storage s]\npath = /s\n"
				   "prune-backups = keep-last=1\n"), 0);
	cb_config_release(&cfg);
	assert_int_equal(load_text(f, &cfg, "maxfiles: 0\n"), -1);
	assert_error_has("key 'maxfiles': invalid value '0'");
}

/* Every error of the file in one load, by line, each with its key; the
 * valid keys stay (cb_config_open), so the file can still say where the
 * job's result goes. */
static void test_all_errors(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	const char *text = "mailto = a@example.com\nmode = fast\n[bad section]\nroot = /x\n"
			   "[ct 1]\nno key here\ncompres = zstd\nroot = /r\n";

	write_bytes(f->path, text, strlen(text));
	assert_int_equal(cb_config_open(&cfg, f->path), -1);
	assert_int_equal(cfg.n_errors, 4);
	assert_int_equal(cfg.errors[0].line, 2);
	assert_string_equal(cfg.errors[0].key, "mode");
	assert_non_null(strstr(cfg.errors[0].text, "suspend|stop|snapshot"));
	assert_int_equal(cfg.errors[1].line, 3);
	assert_null(cfg.errors[1].key);
	assert_int_equal(cfg.errors[2].line, 6);
	assert_int_equal(cfg.errors[3].line, 7);
	assert_string_equal(cfg.errors[3].key, "compres");
	assert_error_at(f, 2);
	/* root = /x under the bad header is left out, not taken as global */
	assert_int_equal(cfg.sections[0].n_entries, 1);
	assert_string_equal(cfg.sections[0].entries[0].key, "mailto");
	assert_non_null(cb_config_guest(&cfg, "1"));
	cb_config_release(&cfg);
}

static void test_bad_value(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;

	assert_int_equal(load_text(f, &cfg, "# c\ntmpdir = /x\n\nmode = fast\n"), -1);
	assert_error_at(f, 4);
	assert_error_has("key 'mode'");
	assert_error_has("'fast'");
	assert_error_has("suspend|stop|snapshot");
	/* a failed load leaves nothing to free, and releasing again is harmless */
	assert_null(cfg.sections);
	cb_config_release(&cfg);

	assert_int_equal(load_text(f, &cfg, "[ct 1]\nionice = 9\n"), -1);
	assert_error_at(f, 2);
	assert_error_has("0-8");
	assert_int_equal(load_text(f, &cfg, "tmpdir =\n"), -1);
	assert_error_at(f, 1);
	assert_error_has("key 'tmpdir'");
}

/* issue 28: an unknown key is an error with FILE:LINE and the key it most
 * looks like; a vzdump key cbackup ignores stays a warning and is dropped */
static void test_unknown_key_fails(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	char want[192];

	assert_int_equal(load_text(f, &cfg, "mode = stop\n[ct 5]\nroot = /r\ncompres = zstd\n"), -1);
	snprintf(want, sizeof(want), "%s:4: unknown key 'compres' (did you mean 'compress'?)", f->path);
	assert_string_equal(cb_last_error(), want);
	assert_int_equal(load_text(f, &cfg, "frobnicate = 3\n"), -1);
	assert_error_has(":1: unknown key 'frobnicate' (the keys are in cbackup.conf(5))");
	assert_int_equal(load_text(f, &cfg, "mode = stop\n[ct 5]\nroot = /r\npool = p\n"), 0);
	assert_int_equal(cfg.warnings.n, 1);
	/* the ignored key is not kept, so resolution does not trip over it */
	assert_int_equal(cb_config_guest(&cfg, "5")->n_entries, 1);
	assert_int_equal(cb_config_resolve(&cfg, "5", NULL, &o), 0);
	assert_int_equal(o.mode, CB_MODE_STOP);
	cb_opts_release(&o);
	cb_config_release(&cfg);
}

/* issue 28: a relative path in the file is refused (cron's directory is
 * not the admin's); vzdump's exclude-path list is split on blanks */
static void test_relative_path_and_exclude_list(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;

	assert_int_equal(load_text(f, &cfg, "dumpdir = /d\ntmpdir = tmp\n"), -1);
	assert_error_has(":2: key 'tmpdir': relative path 'tmp'");
	assert_int_equal(load_text(f, &cfg, "[ct 5]\nroot = r/oot\n"), -1);
	assert_error_has(":2: key 'root': relative path");
	assert_int_equal(load_text(f, &cfg, "exclude-path: /tmp/?* /var/cache/apt/archives/?*\n"), 0);
	assert_int_equal(cb_config_resolve(&cfg, NULL, NULL, &o), 0);
	assert_int_equal(o.exclude_paths.n, 2);
	assert_string_equal(o.exclude_paths.v[0], "/tmp/?*");
	assert_string_equal(o.exclude_paths.v[1], "/var/cache/apt/archives/?*");
	cb_opts_release(&o);
	cb_config_release(&cfg);
}

static void test_key_not_allowed(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;

	assert_int_equal(load_text(f, &cfg, "[storage s]\npath = /a\nlockwait = 3\n"), -1);
	assert_error_at(f, 3);
	assert_error_has("key 'lockwait' is not allowed in a [storage] section");
	assert_int_equal(load_text(f, &cfg, "path = /a\n"), -1);
	assert_error_at(f, 1);
	assert_error_has("key 'path' is not allowed in the global section");
	assert_int_equal(load_text(f, &cfg, "[vm 3]\nstdout = 1\n"), -1);
	assert_error_has("key 'stdout' is not allowed in a [vm] section");
	assert_error_has("command line only");
}

static void test_syntax_errors(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	char want[256];

	assert_int_equal(load_text(f, &cfg, "mode = stop\n\nthis is not valid\n"), -1);
	snprintf(want, sizeof(want), "%s:3: syntax error: this is not valid", f->path);
	assert_string_equal(cb_last_error(), want);

	assert_int_equal(load_text(f, &cfg, "[ct 101\nroot = /r\n"), -1);
	assert_error_at(f, 1);
	assert_error_has("syntax error");

	assert_int_equal(load_text(f, &cfg, "\n\n[container 7]\n"), -1);
	assert_error_at(f, 3);
	assert_error_has("unknown section '[container 7]' "
			 "(accepted: [storage NAME], [ct ID], [vm ID])");
	assert_int_equal(load_text(f, &cfg, "[ct]\n"), -1);
	assert_error_has("unknown section '[ct]'");
	assert_int_equal(load_text(f, &cfg, "[ct a/b]\n"), -1);
	assert_error_has("invalid guest ID 'a/b'");
	assert_int_equal(load_text(f, &cfg, "[vm .x]\n"), -1);
	assert_error_has("invalid guest ID '.x'");

	/* a long bad line is quoted, but truncated */
	char line[300];
	memset(line, 'x', sizeof(line) - 2);
	line[sizeof(line) - 2] = '\n';
	line[sizeof(line) - 1] = '\0';
	assert_int_equal(load_text(f, &cfg, line), -1);
	assert_error_has("syntax error: xxxx");
	assert_true(strlen(cb_last_error()) < strlen(f->path) + 100);
}

static void test_duplicate_section(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;

	assert_int_equal(load_text(f, &cfg, "[ct 101]\nroot = /a\n\n\n[ct 101]\nroot = /b\n"), -1);
	assert_error_at(f, 5);
	assert_error_has("duplicate section '[ct 101]'");
	assert_error_has("line 1");
	/* one ID cannot be both a container and a VM */
	assert_int_equal(load_text(f, &cfg, "[ct 7]\n[vm 7]\n"), -1);
	assert_error_at(f, 2);
	assert_error_has("line 1");
	/* but a storage may share a name with a guest */
	assert_int_equal(load_text(f, &cfg, "[ct 7]\n[storage 7]\n"), 0);
	cb_config_release(&cfg);
}

static void test_binary_junk(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	char junk[4096];

	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(rand() & 0xff);
	memcpy(junk, "mode = stop\n\177ELF", 16);
	write_bytes(f->path, junk, sizeof(junk));
	assert_int_equal(cb_config_load(&cfg, f->path), -1);
	assert_error_at(f, 2);
	assert_error_has("binary data");

	write_bytes(f->path, "mode = st\0op\n", 13);
	assert_int_equal(cb_config_load(&cfg, f->path), -1);
	assert_error_at(f, 1);
	assert_error_has("byte 0x00");
}

/* A line of `n` times `fill` after `prefix`, then `suffix`, in a fresh buffer. */
static char *make_text(const char *prefix, char fill, size_t n, const char *suffix)
{
	size_t lp = strlen(prefix), ls = strlen(suffix);
	char *text = malloc(lp + n + ls + 1);

	assert_non_null(text);
	memcpy(text, prefix, lp);
	for (size_t i = 0; i < n; i++)
		text[lp + i] = fill;
	memcpy(text + lp + n, suffix, ls + 1);
	return text;
}

static void test_long_lines(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	char *text;

	text = make_text("mode = stop\n# ", 'a', 1024 * 1024, "\n");
	assert_int_equal(load_text(f, &cfg, text), -1);
	assert_error_at(f, 2);
	assert_error_has("line too long");
	free(text);

	/* a comment of some KiB is fine; a value that long is not (iniparser) */
	text = make_text("# ", 'a', 5000, "\ntmpdir = /");
	char *more = make_text(text, 'b', 5000, "\n");
	assert_int_equal(load_text(f, &cfg, more), -1);
	assert_error_at(f, 2);
	assert_error_has("key 'tmpdir' is too long");
	free(more);
	free(text);
}

static void test_missing_file(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	char path[192], want[256];

	snprintf(path, sizeof(path), "%s/nope.conf", f->dir);
	assert_int_equal(cb_config_load(&cfg, path), -1);
	snprintf(want, sizeof(want), "cannot read config '%s': No such file or directory", path);
	assert_string_equal(cb_last_error(), want);
}

static void test_default_path(void **state)
{
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;
	(void)state;

	if (access("/etc/cbackup.conf", F_OK) == 0)
		skip();  /* a real config on this host: not ours to judge */
	assert_int_equal(cb_config_load(&cfg, NULL), 0);
	assert_null(cfg.path);
	assert_int_equal(cfg.n_sections, 1);
	assert_int_equal(cfg.sections[0].kind, CB_SECTION_GLOBAL);
	assert_int_equal(cfg.sections[0].n_entries, 0);
	assert_int_equal(cb_config_resolve(&cfg, NULL, NULL, &o), 0);
	assert_string_equal(o.tmpdir, "/var/tmp");
	cb_opts_release(&o);
	cb_strvec_push(&kv, "storage");
	cb_strvec_push(&kv, "nfs");
	assert_int_equal(cb_config_resolve(&cfg, NULL, &kv, &o), -1);
	assert_error_has("option --storage: storage 'nfs' is not defined: no [storage nfs] section, "
			 "and this host has no '");
	assert_error_has("/storage.cfg' (not Proxmox VE); set dumpdir = DIR, or --dumpdir");
	assert_int_equal(cb_config_resolve(&cfg, "101", NULL, &o), -1);
	assert_error_has("guest '101' is not defined (no config file)");
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

/*
 * Precedence: ionice is set at each level to the level's number (global 1,
 * storage 2, guest 3, command line 4; default 7); compress likewise. Then
 * each level is removed in turn, top first, and the next one must show.
 */
static void write_levels(struct fixture *f, int global, int storage, int guest)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "storage = st\n%s%s"
		 "[storage st]\npath = /st\n%s%s"
		 "[ct 9]\nroot = /r\n%s%s",
		 global ? "ionice = 1\n" : "", global ? "compress = gzip\n" : "",
		 storage ? "ionice = 2\n" : "", storage ? "compress = lzo\n" : "",
		 guest ? "ionice = 3\n" : "", guest ? "compress = 0\n" : "");
	write_bytes(f->path, text, strlen(text));
}

static void check_level(struct fixture *f, int global, int storage, int guest, int cli,
			int want_ionice, enum cb_compress want_compress)
{
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;

	write_levels(f, global, storage, guest);
	assert_int_equal(cb_config_load(&cfg, f->path), 0);
	if (cli) {
		cb_strvec_push(&kv, "ionice");
		cb_strvec_push(&kv, "0");
		cb_strvec_push(&kv, "compress");
		cb_strvec_push(&kv, "zstd");
		cb_strvec_push(&kv, "ionice");
		cb_strvec_push(&kv, "4");   /* the last one on the command line wins */
	}
	assert_int_equal(cb_config_resolve(&cfg, "9", &kv, &o), 0);
	assert_int_equal(o.ionice, want_ionice);
	assert_int_equal(o.compress, want_compress);
	cb_opts_release(&o);
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

static void test_precedence(void **state)
{
	struct fixture *f = *state;

	check_level(f, 1, 1, 1, 1, 4, CB_COMPRESS_ZSTD);
	check_level(f, 1, 1, 1, 0, 3, CB_COMPRESS_NONE);
	check_level(f, 1, 1, 0, 0, 2, CB_COMPRESS_LZO);
	check_level(f, 1, 0, 0, 0, 1, CB_COMPRESS_GZIP);
	check_level(f, 0, 0, 0, 0, 7, CB_COMPRESS_ZSTD);
	/* a lower level alone still beats the default */
	check_level(f, 0, 1, 0, 0, 2, CB_COMPRESS_LZO);
	check_level(f, 0, 0, 1, 0, 3, CB_COMPRESS_NONE);
	check_level(f, 1, 0, 1, 0, 3, CB_COMPRESS_NONE);
}

static void test_storage_path_dumpdir(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;

	assert_int_equal(load_text(f, &cfg,
				   "dumpdir = /global/dump\nstorage = a\n"
				   "[storage a]\npath = /mnt/a\n[storage b]\npath = /mnt/b\n"
				   "[ct 1]\n[ct 2]\nstorage = b\n[ct 3]\ndumpdir = /own\n"), 0);
	assert_int_equal(cb_config_resolve(&cfg, "1", NULL, &o), 0);
	assert_string_equal(o.dumpdir, "/mnt/a");     /* storage beats global dumpdir */
	assert_string_equal(o.storage, "a");
	cb_opts_release(&o);
	assert_int_equal(cb_config_resolve(&cfg, "2", NULL, &o), 0);
	assert_string_equal(o.dumpdir, "/mnt/b");     /* the guest picks its storage */
	assert_string_equal(o.storage, "b");
	cb_opts_release(&o);
	assert_int_equal(cb_config_resolve(&cfg, "3", NULL, &o), 0);
	assert_string_equal(o.dumpdir, "/own");       /* guest dumpdir beats storage path */
	cb_opts_release(&o);

	cb_strvec_push(&kv, "storage");
	cb_strvec_push(&kv, "b");
	assert_int_equal(cb_config_resolve(&cfg, "1", &kv, &o), 0);
	assert_string_equal(o.dumpdir, "/mnt/b");     /* --storage picks the storage */
	cb_opts_release(&o);
	cb_strvec_push(&kv, "dumpdir");
	cb_strvec_push(&kv, "/cli");
	assert_int_equal(cb_config_resolve(&cfg, "3", &kv, &o), 0);
	assert_string_equal(o.dumpdir, "/cli");
	cb_opts_release(&o);
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

static void test_repeated_exclude_path(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;

	assert_int_equal(load_text(f, &cfg,
				   "exclude-path = /g1\n"
				   "[ct 4]\nexclude-path = /a\nmode = stop\nEXCLUDE-PATH: /b\n"
				   "exclude-path = /c/*.log\n"), 0);
	assert_int_equal(cfg.warnings.n, 0);
	cb_strvec_push(&kv, "exclude-path");
	cb_strvec_push(&kv, "/cli");
	assert_int_equal(cb_config_resolve(&cfg, "4", &kv, &o), 0);
	assert_int_equal(o.exclude_paths.n, 5);
	assert_string_equal(o.exclude_paths.v[0], "/g1");
	assert_string_equal(o.exclude_paths.v[1], "/a");
	assert_string_equal(o.exclude_paths.v[2], "/b");
	assert_string_equal(o.exclude_paths.v[3], "/c/*.log");
	assert_string_equal(o.exclude_paths.v[4], "/cli");
	cb_opts_release(&o);
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

static void test_repeated_single_key_warns(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;

	assert_int_equal(load_text(f, &cfg, "mode = stop\nmode = snapshot\n"), 0);
	assert_int_equal(cfg.warnings.n, 1);
	assert_non_null(find_warning(&cfg, ":2: key 'mode' repeats line 1"));
	assert_int_equal(cb_config_resolve(&cfg, NULL, NULL, &o), 0);
	assert_int_equal(o.mode, CB_MODE_SNAPSHOT);
	cb_opts_release(&o);
	cb_config_release(&cfg);
}

/* issue 28: vzdump.conf's "storage: NAME" through /etc/pve/storage.cfg */
static void test_pve_storage(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	char path[300];
	static const char storage_cfg[] =
		"dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n\n"
		"nfs: nas\n\texport /backup\n\tserver 10.0.0.2\n\tcontent backup\n\n"
		"dir: isos\n\tpath /srv/iso\n\tcontent iso\n\n"
		"pbs: pbs1\n\tdatastore store1\n\tserver 10.0.0.3\n\tcontent backup\n\n"
		"lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n\n"
		"lvm: thick\n\tvgname vg2\n\n"
		"rbd: ceph\n\tpool cpool\n\n"
		"iscsi: san\n\tportal 10.0.0.1\n";

	snprintf(path, sizeof(path), "%s/storage.cfg", f->dir);
	write_bytes(path, storage_cfg, strlen(storage_cfg));
	assert_int_equal(load_text(f, &cfg, "storage: local\n[ct 1]\n[ct 2]\nstorage: nas\n"
					    "[ct 3]\nstorage: pbs1\n[ct 4]\nstorage: isos\n"
					    "[ct 5]\nstorage: local-lvm\n[ct 6]\nstorage: gone\n"), 0);
	assert_int_equal(cb_config_resolve(&cfg, "1", NULL, &o), 0);
	assert_string_equal(o.dumpdir, "/var/lib/vz/dump");
	cb_opts_release(&o);
	assert_int_equal(cb_config_resolve(&cfg, "2", NULL, &o), 0);
	assert_string_equal(o.dumpdir, "/mnt/pve/nas/dump");
	cb_opts_release(&o);
	assert_int_equal(cb_config_resolve(&cfg, "3", NULL, &o), -1);
	assert_error_at(f, 6);
	assert_error_has("storage 'pbs1' (");
	assert_error_has("storage.cfg:14) is a Proxmox Backup Server");
	assert_error_has("set dumpdir = DIR");
	assert_int_equal(cb_config_resolve(&cfg, "4", NULL, &o), -1);
	assert_error_has("does not hold backups (content iso)");
	assert_int_equal(cb_config_resolve(&cfg, "5", NULL, &o), -1);
	assert_error_has("is of type 'lvmthin', which has no directory");
	assert_int_equal(cb_config_resolve(&cfg, "6", NULL, &o), -1);
	assert_error_at(f, 12);
	assert_error_has("storage 'gone' is defined neither in a [storage gone] section nor in '");
	cb_config_release(&cfg);
}

/* issue 28: a guest's volumes through storage.cfg (cb_pve_volume_path) */
static void test_pve_volumes(void **state)
{
	struct fixture *f = *state;
	char path[300], *vol = NULL;
	static const char storage_cfg[] =
		"dir: local\n\tpath /var/lib/vz\n\tcontent images,rootdir\n\n"
		"cifs: smb\n\tshare vms\n\tcontent images\n\n"
		"zfspool: tank\n\tpool rpool/data\n\tcontent rootdir\n\n"
		"lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n\n"
		"lvm: thick\n\tvgname vg2\n\n"
		"rbd: ceph\n\tpool cpool\n\n"
		"iscsi: san\n\tportal 10.0.0.1\n";

	snprintf(path, sizeof(path), "%s/storage.cfg", f->dir);
	write_bytes(path, storage_cfg, strlen(storage_cfg));
	assert_int_equal(cb_pve_volume_path("local:101/subvol-101-disk-0.subvol", &vol), 0);
	assert_string_equal(vol, "/var/lib/vz/images/101/subvol-101-disk-0.subvol");
	free(vol);
	assert_int_equal(cb_pve_volume_path("smb:200/vm-200-disk-0.qcow2", &vol), 0);
	assert_string_equal(vol, "/mnt/pve/smb/images/200/vm-200-disk-0.qcow2");
	free(vol);
	assert_int_equal(cb_pve_volume_path("tank:subvol-102-disk-0", &vol), 0);
	assert_string_equal(vol, "/rpool/data/subvol-102-disk-0");
	free(vol);
	/* block storages: the device Proxmox's plugin names (cb_ct_volume reaches it) */
	assert_int_equal(cb_pve_volume_path("tank:vm-103-disk-0", &vol), 0);
	assert_string_equal(vol, "/dev/zvol/rpool/data/vm-103-disk-0");
	free(vol);
	assert_int_equal(cb_pve_volume_path("local-lvm:vm-104-disk-0", &vol), 0);
	assert_string_equal(vol, "/dev/pve/vm-104-disk-0");
	free(vol);
	assert_int_equal(cb_pve_volume_path("thick:vm-105-disk-0", &vol), 0);
	assert_string_equal(vol, "/dev/vg2/vm-105-disk-0");
	free(vol);
	assert_int_equal(cb_pve_volume_path("ceph:vm-106-disk-0", &vol), 0);
	assert_string_equal(vol, "/dev/rbd/cpool/vm-106-disk-0");
	free(vol);
	assert_int_equal(cb_pve_volume_path("san:0.0.0.scsi-1", &vol), -1);
	assert_error_has("storage.cfg:24) of type 'iscsi': cbackup does not know where it keeps");
	assert_int_equal(cb_pve_volume_path("gone:1/x.raw", &vol), -1);
	assert_error_has("storage 'gone' is not defined in '");
	assert_int_equal(cb_pve_volume_path("local:../../etc", &vol), -1);
	assert_error_has("is not a volume STORAGE:NAME");
	assert_int_equal(cb_pve_volume_path("nocolon", &vol), -1);
	assert_null(vol);
}

/* issue 28: a guest found on the host sits between the storage and its
 * section: the section and the command line override what was found. */
static void test_found_precedence(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_found_list found;
	struct cb_strvec kv = CB_STRVEC_INIT;
	struct cb_opts o;
	char path[300], *origin;
	static const char storage_cfg[] = "dir: local\n\tpath /vz\n\tcontent rootdir\n";
	static const char ct_conf[] = "hostname: seven\nrootfs: local:7/subvol-7-disk-0.subvol\n";

	snprintf(path, sizeof(path), "%s/storage.cfg", f->dir);
	write_bytes(path, storage_cfg, strlen(storage_cfg));
	snprintf(path, sizeof(path), "%s/lxc", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/lxc/7.conf", f->dir);
	write_bytes(path, ct_conf, strlen(ct_conf));
	setenv("CBACKUP_LXC_DIR", f->dir, 1);   /* holds no NAME/config */
	cb_discover(&found);
	assert_int_equal(found.n, 1);
	assert_int_equal(load_text(f, &cfg, "mode = stop\nexclude-path = /g\n[ct 7]\nexclude-path = /s\n"),
			 0);
	cfg.found = &found;
	assert_int_equal(cb_config_resolve(&cfg, "7", NULL, &o), 0);
	assert_string_equal(o.root, "/vz/images/7/subvol-7-disk-0.subvol");
	assert_string_equal(o.freeze_cgroup, "lxc/7");
	assert_int_equal(o.mode, CB_MODE_STOP);
	assert_int_equal(o.exclude_paths.n, 2);
	origin = cb_config_origin(&cfg, "7", NULL, "root");
	assert_non_null(strstr(origin, "/lxc/7.conf:2"));
	free(origin);
	cb_opts_release(&o);
	cb_strvec_push(&kv, "root");
	cb_strvec_push(&kv, "/elsewhere");
	assert_int_equal(cb_config_resolve(&cfg, "7", &kv, &o), 0);
	assert_string_equal(o.root, "/elsewhere");
	cb_opts_release(&o);
	assert_int_equal(cb_config_resolve(&cfg, "8", NULL, &o), -1);
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
	cb_found_list_release(&found);
	unsetenv("CBACKUP_LXC_DIR");
}

static void test_unknown_storage(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;
	char want[512];

	assert_int_equal(load_text(f, &cfg, "storage = nope\n[storage yes]\npath = /y\n[ct 1]\n"), 0);
	assert_int_equal(cb_config_resolve(&cfg, "1", NULL, &o), -1);
	snprintf(want, sizeof(want), "%s:1: key 'storage': storage 'nope' is not defined: no "
		 "[storage nope] section, and this host has no '%s/storage.cfg'", f->path, f->dir);
	assert_error_has(want);
	/* resolve() cleaned up after itself: releasing again must be harmless */
	cb_opts_release(&o);

	cb_strvec_push(&kv, "storage");
	cb_strvec_push(&kv, "yes");
	assert_int_equal(cb_config_resolve(&cfg, "1", &kv, &o), 0);
	assert_string_equal(o.dumpdir, "/y");
	cb_opts_release(&o);
	cb_strvec_push(&kv, "storage");
	cb_strvec_push(&kv, "other");
	assert_int_equal(cb_config_resolve(&cfg, NULL, &kv, &o), -1);
	assert_error_has("storage 'other' is not defined");
	cb_strvec_clear(&kv);
	/* vzdump.conf's "storage: local" names a Proxmox storage: --dumpdir replaces it */
	cb_strvec_push(&kv, "dumpdir");
	cb_strvec_push(&kv, "/d");
	assert_int_equal(cb_config_resolve(&cfg, "1", &kv, &o), 0);
	assert_string_equal(o.dumpdir, "/d");
	cb_opts_release(&o);
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

static void test_cli_error(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	struct cb_strvec kv = CB_STRVEC_INIT;

	assert_int_equal(load_text(f, &cfg, "[ct 1]\n"), 0);
	cb_strvec_push(&kv, "mode");
	cb_strvec_push(&kv, "fast");
	assert_int_equal(cb_config_resolve(&cfg, "1", &kv, &o), -1);
	assert_error_has("option --mode: ");
	assert_error_has("suspend|stop|snapshot");
	cb_strvec_clear(&kv);
	cb_config_release(&cfg);
}

static void test_quotes_and_comments(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;

	assert_int_equal(load_text(f, &cfg,
				   "; a comment\n"
				   "   # an indented comment\n"
				   "script = \"/usr/local/bin/hook ; with # chars\" ; comment\n"
				   "tmpdir = /fast/tmp ; the fast disk\n"
				   "dumpdir = /d   # comment\n"
				   "[CT 8]   # the web server\r\n"
				   "Root = '/var/lib/lxc/8/rootfs'\r\n"
				   "freeze-cmd = C:\\freeze\\\n"
				   "thaw-cmd: \"echo a: b = c\"\n"), 0);
	assert_int_equal(cfg.warnings.n, 0);
	assert_int_equal(cb_config_resolve(&cfg, "8", NULL, &o), 0);
	assert_string_equal(o.script, "/usr/local/bin/hook ; with # chars");
	assert_string_equal(o.tmpdir, "/fast/tmp");
	assert_string_equal(o.dumpdir, "/d");
	assert_int_equal(o.type, CB_GUEST_CT);
	assert_string_equal(o.root, "/var/lib/lxc/8/rootfs");
	/* a trailing backslash is a character, not a line continuation */
	assert_string_equal(o.freeze_cmd, "C:\\freeze\\");
	assert_string_equal(o.thaw_cmd, "echo a: b = c");
	cb_opts_release(&o);
	cb_config_release(&cfg);
}

/* The whole file, or NULL when the test does not run from the source tree. */
static char *slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	char *text = NULL;
	size_t len = 0;

	if (!fp)
		return NULL;
	assert_int_equal(getdelim(&text, &len, '\0', fp) > 0, 1);
	fclose(fp);
	return text;
}

/* Uncomment "#key: value" and "#[section]" lines of the example. */
static char *uncomment_example(const char *text)
{
	char *out = malloc(strlen(text) + 1), *o = out;
	const char *line = text;

	assert_non_null(out);
	while (*line) {
		const char *end = strchrnul(line, '\n');
		size_t key = strspn(line + 1, "abcdefghijklmnopqrstuvwxyz-");
		if (line[0] == '#' && (line[1] == '[' || (key && line[1 + key] == ':')))
			line++;
		memcpy(o, line, (size_t)(end - line));
		o += end - line;
		*o++ = '\n';
		line = *end ? end + 1 : end;
	}
	*o = '\0';
	return out;
}

static void test_docs_match_table(void **state)
{
	struct fixture *f = *state;
	struct cb_config cfg;
	struct cb_opts o;
	char *example = slurp("vzdump.conf.example"), *man = slurp("man/cbackup.conf.5"), *all;
	char want[128], roff[64];

	if (!example || !man)
		skip();  /* not run from the top of the source tree */
	assert_int_equal(load_text(f, &cfg, example), 0);
	assert_int_equal(cfg.n_sections, 1);
	assert_int_equal(cfg.sections[0].n_entries, 0);
	cb_config_release(&cfg);
	/* uncommented, every shown key and value must be accepted as is */
	all = uncomment_example(example);
	assert_int_equal(load_text(f, &cfg, all), 0);
	/* the one warning by design: the deprecated maxfiles, shown for vzdump's sake */
	for (size_t i = 0; i < cfg.warnings.n; i++)
		if (!strstr(cfg.warnings.v[i], "key 'maxfiles' is deprecated"))
			fail_msg("vzdump.conf.example: %s", cfg.warnings.v[i]);
	assert_int_equal(cb_config_resolve(&cfg, "200", NULL, &o), 0);
	cb_opts_release(&o);
	cb_config_release(&cfg);

	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		size_t n = 0;
		for (const char *k = s->key; *k; k++) {
			if (*k == '-')
				roff[n++] = '\\';
			roff[n++] = *k;
		}
		roff[n] = '\0';
		if (s->where & (CB_WHERE_GLOBAL | CB_WHERE_STORAGE | CB_WHERE_GUEST)) {
			snprintf(want, sizeof(want), "\n#%s: ", s->key);
			if (!strstr(example, want))
				fail_msg("vzdump.conf.example lacks key '%s'", s->key);
			snprintf(want, sizeof(want), "\\fB%s\\fP = ", roff);
		} else {
			snprintf(want, sizeof(want), "\\fB\\-\\-%s\\fP", roff);
		}
		if (!strstr(man, want))
			fail_msg("man/cbackup.conf.5 lacks key '%s'", s->key);
	}
	free(all);
	free(example);
	free(man);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resolve_guests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_maxfiles, setup, teardown),
		cmocka_unit_test_setup_teardown(test_vzdump_conf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_value, setup, teardown),
		cmocka_unit_test_setup_teardown(test_all_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_key_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_relative_path_and_exclude_list, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_not_allowed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syntax_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_duplicate_section, setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary_junk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_file, setup, teardown),
		cmocka_unit_test(test_default_path),
		cmocka_unit_test_setup_teardown(test_precedence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_storage_path_dumpdir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_repeated_exclude_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_repeated_single_key_warns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_storage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pve_storage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pve_volumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_found_precedence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cli_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_quotes_and_comments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_docs_match_table, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
