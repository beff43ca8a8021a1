/*
 * The command line's side of encryption: `cbackup key create|show FILE`,
 * and the key an encrypted archive named on the command line needs
 * (restore, ls, verify, mount, index read a decrypted view of it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

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

/* A passphrase: from the terminal without echo (twice when it is new),
 * else the first line of standard input (scripts). 0, or -1. */
static int read_pass(const char *prompt, int twice, char *buf, size_t len)
{
	struct termios old, quiet;
	int tty = isatty(STDIN_FILENO), ok;
	char again[256];

	if (tty && tcgetattr(STDIN_FILENO, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	}
	if (tty)
		fprintf(stderr, "%s: ", prompt);
	ok = fgets(buf, (int)len, stdin) != NULL;
	if (ok && tty && twice) {
		fprintf(stderr, "\nagain: ");
		ok = fgets(again, sizeof(again), stdin) && !strcmp(again, buf);
		OPENSSL_cleanse(again, sizeof(again));
		if (!ok)
			cb_error("the passphrases differ");
	}
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fputc('\n', stderr);
	}
	buf[strcspn(buf, "\n")] = '\0';
	if (ok && !buf[0])
		return cb_error("an empty passphrase protects nothing");
	return ok ? 0 : cb_last_error()[0] ? -1 : cb_error("no passphrase given");
}

/* key protect KEYFILE COPY: a passphrase-protected copy for the safe. */
static int key_protect(const char *file, const char *copy, struct cb_log *log)
{
	struct cb_enckey k;
	char pass[256], fp[CB_ENC_FP_HEX];
	int ret = cb_enckey_load(file, &k) < 0 ? -1 : read_pass("new passphrase", 1, pass, sizeof(pass));

	if (ret == 0)
		ret = cb_enckey_protect(&k, pass, strlen(pass), copy);
	OPENSSL_cleanse(pass, sizeof(pass));
	cb_enckey_fp_hex(k.fp, fp);
	cb_enckey_wipe(&k);
	if (ret < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	printf("protected copy '%s' of key %s written: `cbackup key recover` makes the key again "
	       "from it and the passphrase\n", copy, fp);
	return CB_EXIT_OK;
}

/* key recover COPY KEYFILE: the key back from a protected copy. */
static int key_recover(const char *copy, const char *file, struct cb_log *log)
{
	struct cb_enckey k;
	char pass[256], fp[CB_ENC_FP_HEX];
	int ret = read_pass("passphrase", 0, pass, sizeof(pass));

	if (ret == 0)
		ret = cb_enckey_recover(copy, pass, strlen(pass), &k);
	OPENSSL_cleanse(pass, sizeof(pass));
	if (ret == 0) {
		ret = cb_enckey_write(file, &k);
		cb_enckey_fp_hex(k.fp, fp);
		cb_enckey_wipe(&k);
	}
	if (ret < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	printf("key '%s' recovered, fingerprint %s\n", file, fp);
	return CB_EXIT_OK;
}

int cb_cmd_key(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	const char *what = cli->args.v[0], *file = cli->args.v[1];
	int two = cli->args.n == 2;

	(void)cfg;   /* key reads no configuration */
	if (two && !strcmp(what, "create"))
		return key_create(file, log);
	if (two && !strcmp(what, "show"))
		return key_show(file, log);
	if (!two && !strcmp(what, "protect"))
		return key_protect(file, cli->args.v[2], log);
	if (!two && !strcmp(what, "recover"))
		return key_recover(file, cli->args.v[2], log);
	cb_err(log, "usage: cbackup key create|show FILE, cbackup key protect KEYFILE COPY, "
	       "cbackup key recover COPY KEYFILE");
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

int cb_enc_cli_index(const struct cb_cli *cli, const char *archive, struct cb_log *log)
{
	const char *file = cb_cli_get(cli, "encryption-key");
	struct cb_enckey k;
	uint64_t frames = 0;
	int ret;

	if (!file || !strcmp(file, "none")) {
		cb_err(log, "'%s' is encrypted: give its key with --encryption-key FILE", archive);
		return CB_EXIT_USAGE;
	}
	if (cb_enckey_load(file, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	cb_enc_views_sweep(view_dir(cli), log);
	ret = cb_enc_rebuild_catalog(&k, archive, view_dir(cli), cli->dry_run, &frames);
	cb_enckey_wipe(&k);
	if (ret < 0) {
		cb_err(log, "index of '%s' failed - %s", archive, cb_last_error());
		return strstr(cb_last_error(), "archive was encrypted with key") ? CB_EXIT_USAGE
										  : CB_EXIT_FAILED;
	}
	cb_info(log, "%s catalog '%s.idx' and '%s.sha256' from %llu units", cli->dry_run ?
		"dry run: would write" : "wrote", archive, archive, (unsigned long long)frames);
	return CB_EXIT_OK;
}

int cb_enc_cli_open(const struct cb_cli *cli, const char *archive, struct cb_log *log,
		    const char **plain, struct cb_enc_view **view)
{
	return cb_enc_cli_open_for(cli, archive, NULL, log, plain, view);
}

int cb_enc_cli_open_for(const struct cb_cli *cli, const char *archive,
			const struct cb_enc_view_opts *o, struct cb_log *log, const char **plain,
			struct cb_enc_view **view)
{
	struct cb_enckey k;
	uint64_t n, total;
	int ret;

	*plain = archive;
	*view = NULL;
	if (!cb_enc_is_encrypted(archive))
		return CB_EXIT_OK;
	if (load_key_for(cli, archive, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	cb_enc_views_sweep(view_dir(cli), log);
	ret = cb_enc_view_open_opts(&k, archive, view_dir(cli), o, view);
	cb_enckey_wipe(&k);
	if (ret < 0) {
		cb_err(log, "'%s': %s", archive, cb_last_error());
		return CB_EXIT_FAILED;
	}
	*plain = cb_enc_view_path(*view);
	n = cb_enc_view_frames(*view, &total);
	cb_info(log, "'%s': %llu of %llu units decrypted", archive, (unsigned long long)n,
		(unsigned long long)total);
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
