/* Unit tests: option schema/setter (cb_opts) and command line (cb_cli). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cb_cli.h"
#include "cb_commands.h"
#include "cb_opts.h"
#include "cb_util.h"

static void test_defaults(void **state)
{
	struct cb_opts o;
	(void)state;
	cb_opts_init(&o);
	assert_string_equal(o.tmpdir, "/var/tmp");
	assert_string_equal(o.dumpdir, "/var/lib/cbackup/dump");
	assert_int_equal(o.mode, CB_MODE_SUSPEND);
	assert_int_equal(o.compress, CB_COMPRESS_ZSTD);
	assert_int_equal(o.max_freeze, 60);
	assert_int_equal(o.stdexcludes, 1);
	assert_int_equal(o.ionice, 7);
	cb_opts_release(&o);
}

static void test_set_values(void **state)
{
	struct cb_opts o;
	int unknown = 0;
	(void)state;
	cb_opts_init(&o);
	assert_int_equal(cb_opts_set(&o, "compress", "1", NULL), 0);
	assert_int_equal(o.compress, CB_COMPRESS_LZO);
	assert_int_equal(cb_opts_set(&o, "compress", "0", NULL), 0);
	assert_int_equal(o.compress, CB_COMPRESS_NONE);
	assert_int_equal(cb_opts_set(&o, "Mode", "stop", NULL), 0);
	assert_int_equal(o.mode, CB_MODE_STOP);
	assert_int_equal(cb_opts_set(&o, "path", "/mnt/x", NULL), 0);
	assert_string_equal(o.dumpdir, "/mnt/x");
	assert_int_equal(cb_opts_set(&o, "exclude-path", "/a", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "exclude-path", "b", NULL), 0);
	assert_int_equal(o.exclude_paths.n, 2);
	assert_string_equal(o.exclude_paths.v[1], "b");
	assert_int_equal(cb_opts_set(&o, "remove", "no", NULL), 0);
	assert_int_equal(o.remove, 0);
	assert_int_equal(cb_opts_set(&o, "nosuchkey", "x", &unknown), -1);
	assert_int_equal(unknown, 1);
	cb_opts_release(&o);
}

static void test_bad_values(void **state)
{
	struct cb_opts o;
	(void)state;
	cb_opts_init(&o);
	assert_int_equal(cb_opts_set(&o, "mode", "fast", NULL), -1);
	assert_non_null(strstr(cb_last_error(), "suspend|stop|snapshot"));
	assert_int_equal(cb_opts_set(&o, "ionice", "9", NULL), -1);
	assert_non_null(strstr(cb_last_error(), "0-8"));
	assert_int_equal(cb_opts_set(&o, "zstd", "two", NULL), -1);
	assert_int_equal(cb_opts_set(&o, "remove", "maybe", NULL), -1);
	assert_int_equal(cb_opts_set(&o, "tmpdir", "", NULL), -1);
	assert_int_equal(o.mode, CB_MODE_SUSPEND);  /* a failed set changes nothing */
	cb_opts_release(&o);
}

static void test_copy_is_deep(void **state)
{
	struct cb_opts a, b;
	(void)state;
	cb_opts_init(&a);
	cb_opts_set(&a, "exclude-path", "/x", NULL);
	cb_opts_copy(&b, &a);
	cb_opts_release(&a);
	assert_string_equal(b.tmpdir, "/var/tmp");
	assert_string_equal(b.exclude_paths.v[0], "/x");
	cb_opts_release(&b);
}

static int parse(struct cb_cli *cli, const char *const *args)
{
	char *argv[32];
	int argc = 0;
	while (args[argc]) {
		argv[argc] = (char *)args[argc];
		argc++;
	}
	return cb_cli_parse(cli, argc, argv);
}

static void test_cli_backup(void **state)
{
	struct cb_cli cli;
	const char *const args[] = { "cbackup", "101", "102", "--mode", "stop", "--compress=lzo",
				     "--quiet", "--remove", "0", "--exclude-path", "/tmp/?*", NULL };
	(void)state;
	assert_int_equal(parse(&cli, args), 0);
	assert_int_equal(cli.command, CB_CMD_BACKUP);
	assert_int_equal(cli.args.n, 2);
	assert_string_equal(cb_cli_get(&cli, "mode"), "stop");
	assert_string_equal(cb_cli_get(&cli, "compress"), "lzo");
	assert_string_equal(cb_cli_get(&cli, "quiet"), "1");
	assert_string_equal(cb_cli_get(&cli, "remove"), "0");
	assert_string_equal(cli.cmdline, "cbackup 101 102 --mode stop --compress=lzo --quiet --remove 0 --exclude-path /tmp/?*");
	cb_cli_release(&cli);
}

static void test_cli_subcommands(void **state)
{
	struct cb_cli cli;
	const char *const restore[] = { "cbackup", "restore", "a.tar.zst", "/d", "--force", NULL };
	const char *const all[] = { "cbackup", "--all", "--exclude", "101,102", "--config", "/x.conf", NULL };
	(void)state;
	assert_int_equal(parse(&cli, restore), 0);
	assert_int_equal(cli.command, CB_CMD_RESTORE);
	assert_int_equal(cli.force, 1);
	assert_string_equal(cli.args.v[1], "/d");
	cb_cli_release(&cli);
	assert_int_equal(parse(&cli, all), 0);
	assert_int_equal(cli.all, 1);
	assert_int_equal(cli.exclude_ids.n, 2);
	assert_string_equal(cli.exclude_ids.v[1], "102");
	assert_string_equal(cli.config_path, "/x.conf");
	cb_cli_release(&cli);
}

/* One table serves the parser and main: every subcommand is found by its
 * name, its entry by its id, and each has something to run. */
static void test_command_table(void **state)
{
	const char *const names[] = { "backup", "restore", "verify", "list", "prune", "probe", NULL };
	struct cb_cli cli;
	(void)state;
	for (int i = 0; names[i]; i++) {
		const struct cb_command_def *c = cb_command_find(names[i]);
		const char *const args[] = { "cbackup", names[i], "a", "b", NULL };
		assert_non_null(c);
		assert_ptr_equal(cb_command_get(c->id), c);
		assert_non_null(c->run);
		assert_int_equal(parse(&cli, args) == 0, c->max_args < 0 || c->max_args >= 2);
		if (c->max_args < 0 || c->max_args >= 2)
			assert_int_equal(cli.command, c->id);
		cb_cli_release(&cli);
	}
	assert_null(cb_command_find("nosuch"));
	assert_false(cb_command_find("restore")->needs_config);
	assert_true(cb_command_find("prune")->needs_config);
}

/* The names the job suggests from (src/core/request.c) are the commands
 * the front end runs and documents, no more and no fewer. */
static void test_command_names(void **state)
{
	size_t n = 0;
	FILE *out = fopen("/dev/null", "w");

	(void)state;
	for (; cb_command_names[n]; n++) {
		assert_non_null(cb_command_find(cb_command_names[n]));
		assert_int_equal(cb_cli_command_usage(out, cb_command_names[n]), 0);
	}
	for (int id = 0; cb_command_get(id); id++) {
		size_t k = 0;
		while (cb_command_names[k] && strcmp(cb_command_names[k], cb_command_get(id)->name))
			k++;
		assert_non_null(cb_command_names[k]);
	}
	assert_int_equal(cb_cli_unknown_command("restor"), -1);
	assert_non_null(strstr(cb_last_error(), "did you mean 'restore'"));
	fclose(out);
}

static void test_cli_errors(void **state)
{
	struct cb_cli cli;
	const char *const unknown[] = { "cbackup", "101", "--frobnicate", NULL };
	const char *const badval[] = { "cbackup", "101", "--mode", "fast", NULL };
	const char *const noval[] = { "cbackup", "101", "--tmpdir", NULL };
	const char *const arity[] = { "cbackup", "restore", "only-one", NULL };
	const char *const notcli[] = { "cbackup", "101", "--path", "/x", NULL };
	(void)state;
	assert_int_equal(parse(&cli, unknown), -1);
	assert_non_null(strstr(cb_last_error(), "--frobnicate"));
	cb_cli_release(&cli);
	assert_int_equal(parse(&cli, badval), -1);
	assert_non_null(strstr(cb_last_error(), "option --mode"));
	assert_non_null(strstr(cb_last_error(), "suspend|stop|snapshot"));
	cb_cli_release(&cli);
	assert_int_equal(parse(&cli, noval), -1);
	cb_cli_release(&cli);
	assert_int_equal(parse(&cli, arity), -1);
	cb_cli_release(&cli);
	assert_int_equal(parse(&cli, notcli), -1);
	cb_cli_release(&cli);
}

static void test_mp_values(void **state)
{
	static const char *const bad[] = { "/a", "a,/b", "/a,b", "/a,/", "/a,//", "/a,/b/../c",
					   "/a,/./b", "/a,/b,/c", NULL };
	char *src, *target;

	(void)state;
	assert_int_equal(cb_mp_split("/srv/vol,/srv/data", &src, &target), 0);
	assert_string_equal(src, "/srv/vol");
	assert_string_equal(target, "./srv/data");
	free(src);
	free(target);
	assert_int_equal(cb_mp_split("/v,//a//b/", NULL, &target), 0);
	assert_string_equal(target, "./a/b");
	free(target);
	assert_int_equal(cb_mp_split("/v,/..data/.x", NULL, NULL), 0);
	for (int i = 0; bad[i]; i++)
		if (cb_mp_split(bad[i], NULL, NULL) == 0)
			fail_msg("mp value '%s' accepted", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_mp_values),
		cmocka_unit_test(test_set_values),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_copy_is_deep),
		cmocka_unit_test(test_cli_backup),
		cmocka_unit_test(test_cli_subcommands),
		cmocka_unit_test(test_command_table),
		cmocka_unit_test(test_command_names),
		cmocka_unit_test(test_cli_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
