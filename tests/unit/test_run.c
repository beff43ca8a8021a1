/* Unit tests: cb_run (child programs with a bounded wait): output lines,
 * exit codes, the time limit killing the whole process group, a signal
 * ending the wait, and a child started after a signal still running. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_cleanup.h"
#include "cb_run.h"
#include "cb_util.h"

struct lines {
	char text[1024];
	int n;
};

static void collect(void *arg, const char *line)
{
	struct lines *l = arg;

	snprintf(l->text + strlen(l->text), sizeof(l->text) - strlen(l->text), "%s|", line);
	l->n++;
}

static void test_output_and_status(void **state)
{
	struct lines l = { "", 0 };
	struct cb_run r = { .what = "cmd", .on_line = collect, .arg = &l };

	(void)state;
	assert_int_equal(cb_run_sh(&r, "echo one; echo two >&2; printf three"), 0);
	assert_string_equal(l.text, "one|two|three|");
	assert_int_equal(cb_run_sh(&r, "exit 3"), -1);
	assert_string_equal(cb_last_error(), "cmd failed with exit code 3");
	assert_int_equal(cb_run_sh(&r, "kill -USR1 $$"), -1);
	assert_string_equal(cb_last_error(), "cmd killed by signal USR1");
	r.on_line = NULL;   /* discarded output, no pipe */
	assert_int_equal(cb_run_sh(&r, "echo gone"), 0);
}

/* Gone or a zombie (reaped by whoever inherited it). */
static int alive(pid_t pid)
{
	char path[64], st[256] = "";
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(st, sizeof(st), f))
		st[0] = '\0';
	fclose(f);
	p = strrchr(st, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* The limit kills the child and what it forked (its process group); a
 * grandchild holding the output pipe open does not keep us waiting. */
static void test_timeout_kills_group(void **state)
{
	char pidfile[] = "/tmp/cbtest-run.XXXXXX", cmd[256], buf[32] = "";
	struct lines l = { "", 0 };
	struct cb_run r = { .what = "slow", .timeout_ms = 300, .on_line = collect, .arg = &l };
	double t0 = cb_now();
	FILE *f;
	int fd = mkstemp(pidfile);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "sleep 30 & echo $! >%s; echo started; wait", pidfile);
	assert_int_equal(cb_run_sh(&r, cmd), -1);
	assert_non_null(strstr(cb_last_error(), "slow timed out after 0.3 s (killed)"));
	assert_true(cb_now() - t0 < 3);
	assert_string_equal(l.text, "started|");
	f = fopen(pidfile, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	unlink(pidfile);
	usleep(100000);
	assert_false(alive(atoi(buf)));   /* the grandchild is gone */
}

static void on_alarm(int sig)
{
	(void)sig;
	raise(SIGTERM);
}

/* A SIGTERM during the wait ends it at once; a child started after it
 * still runs (abort hooks), and only a further signal would end it. */
static void test_signal(void **state)
{
	struct cb_run r = { .what = "hook" };
	struct itimerval it = { { 0, 0 }, { 0, 200000 } };
	double t0;

	(void)state;
	cb_cleanup_install();
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
	t0 = cb_now();
	assert_int_equal(cb_run_sh(&r, "sleep 30"), -1);
	assert_true(cb_now() - t0 < 2);
	assert_string_equal(cb_last_error(), "hook interrupted by signal TERM (killed)");
	assert_int_equal(cb_interrupted(), SIGTERM);
	assert_int_equal(cb_run_sh(&r, "sleep 0.2; exit 0"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_and_status),
		cmocka_unit_test(test_timeout_kills_group),
		cmocka_unit_test(test_signal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
