/*
 * The command line's side of encryption: `cbackup key create|show FILE`,
 * and the key an encrypted archive named on the command line needs
 * (restore, ls, verify, mount, index read a decrypted view of it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_commands.h"
#include "cb_encarchive.h"
#include "cb_enckey.h"
#include "cb_exit.h"
#include "cb_util.h"
#include "cb_verify.h"

static int key_create(const char *path, struct cb_log *log)
{
	struct cb_enckey k;
	char fp[CB_ENC_FP_HEX];

	if (cb_enckey_create(path, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	cb_enckey_fp_hex(k.fp, fp);
	cb_enckey_wipe(&k);
	printf("key '%s' created, fingerprint %s\n"
	       "WARNING: losing this key loses every backup encrypted with it: nobody, not even\n"
	       "cbackup, can read them without it. Keep a copy apart from this host.\n", path, fp);
	return CB_EXIT_OK;
}

static int key_show(const char *path, struct cb_log *log)
{
	struct cb_enckey k;
	char fp[CB_ENC_FP_HEX];

	if (cb_enckey_load(path, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	cb_enckey_fp_hex(k.fp, fp);
	cb_enckey_wipe(&k);
	printf("%s\n", fp);
	return CB_EXIT_OK;
}

int cb_cmd_key(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	const char *what = cli->args.v[0], *file = cli->args.v[1];

	(void)cfg;   /* key reads no configuration */
	if (!strcmp(what, "create"))
		return key_create(file, log);
	if (!strcmp(what, "show"))
		return key_show(file, log);
	cb_err(log, "unknown key command '%s' (accepted: create|show)", what);
	return CB_EXIT_USAGE;
}

/* Where views go: --tmpdir, else $TMPDIR, else /var/tmp. */
static const char *view_dir(const struct cb_cli *cli)
{
	const char *d = cb_cli_get(cli, "tmpdir");

	if (!d || !*d)
		d = getenv("TMPDIR");
	return d && *d ? d : "/var/tmp";
}

/* The key given for an encrypted archive, checked against it. */
static int load_key_for(const struct cb_cli *cli, const char *archive, struct cb_enckey *k)
{
	const char *file = cb_cli_get(cli, "encryption-key");

	if (!file || !strcmp(file, "none"))
		return cb_error("'%s' is encrypted: give its key with --encryption-key FILE", archive);
	if (cb_enckey_load(file, k) < 0)
		return -1;
	if (cb_enc_check_key(archive, k) < 0) {
		cb_enckey_wipe(k);
		return -1;
	}
	return 0;
}

int cb_enc_cli_open(const struct cb_cli *cli, const char *archive, struct cb_log *log,
		    const char **plain, struct cb_enc_view **view)
{
	struct cb_enckey k;
	int ret;

	*plain = archive;
	*view = NULL;
	if (!cb_enc_is_encrypted(archive))
		return CB_EXIT_OK;
	if (load_key_for(cli, archive, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	ret = cb_enc_view_open(&k, archive, view_dir(cli), view);
	cb_enckey_wipe(&k);
	if (ret < 0) {
		cb_err(log, "'%s': %s", archive, cb_last_error());
		return CB_EXIT_FAILED;
	}
	*plain = cb_enc_view_path(*view);
	return CB_EXIT_OK;
}

int cb_enc_cli_verify(const struct cb_cli *cli, const char *archive, struct cb_log *log)
{
	const char *file = cb_cli_get(cli, "encryption-key"), *plain;
	struct cb_enc_view *view;
	struct cb_verify_stats st;
	uint64_t frames = 0;
	int status;

	if (cb_enc_check_stored(archive, &frames) < 0) {
		cb_err(log, "verify of '%s' failed - %s", archive, cb_last_error());
		return CB_EXIT_FAILED;
	}
	if (!file || !strcmp(file, "none")) {
		cb_warn(log, "'%s': %llu units and the .sha256 checked; contents were not checked "
			"(no --encryption-key)", archive, (unsigned long long)frames);
		return CB_EXIT_OK;
	}
	if ((status = cb_enc_cli_open(cli, archive, log, &plain, &view)) != CB_EXIT_OK)
		return status;
	cb_info(log, "'%s': %llu units authenticated, checking their contents", archive,
		(unsigned long long)frames);
	/* the view's own .verified goes with the view */
	if (cb_verify_run(plain, cli->dry_run, 0, log, &st) < 0) {
		cb_err(log, "verify of '%s' failed - %s", archive, cb_last_error());
		status = CB_EXIT_FAILED;
	} else if (cli->dry_run)
		cb_info(log, "dry run: '%s.verified' not written", archive);
	else
		cb_verify_mark(archive, log);
	cb_enc_view_free(view);
	return status;
}
