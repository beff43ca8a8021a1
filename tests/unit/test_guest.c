/*
 * Unit tests: cb_guest freeze/thaw backends and the watchdog, on real
 * cgroups (v2 and the v1 freezer) and real processes. Needs root; tests
 * whose cgroup hierarchy is missing are skipped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_ct_volumes.h"
#include "cb_guest.h"
#include "cb_opts.h"
#include "cb_rmtree.h"
#include "cb_util.h"

struct fixture {
	char *mount;              /* hierarchy mount point */
	char *name;               /* cgroup name relative to the mount */
	char *dir;                /* mount/name */
	int v1;
	pid_t child;              /* the counting "guest" */
	pid_t ns_init;            /* test_ct_init_identity: pid 1 of a pid namespace */
	volatile uint64_t *counter;
	char tmp[64];             /* scratch dir for the cmd backend */
};

static void msleep(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static char *find_mount(int v1)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;
	char *found = NULL;

	while (f && !found && (m = getmntent(f))) {
		if (!v1 && !strcmp(m->mnt_type, "cgroup2"))
			found = strdup(m->mnt_dir);
		if (v1 && !strcmp(m->mnt_type, "cgroup") && hasmntopt(m, "freezer"))
			found = strdup(m->mnt_dir);
	}
	if (f)
		endmntent(f);
	return found;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	int ok;

	if (fd < 0)
		return -1;
	ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok ? 0 : -1;
}

static int read_has(const char *path, const char *needle)
{
	char buf[512];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* A process that counts as fast as it can into shared memory. */
static pid_t spawn_counter(volatile uint64_t *counter, int new_session)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (new_session)
			setsid();
		for (;;)
			(*counter)++;
	}
	return pid;
}

/* Frozen: the counter must stay still for the whole window. */
static int counter_moves(volatile uint64_t *c, int ms)
{
	uint64_t a = *c;
	msleep(ms);
	return *c != a;
}

/* Running: it must move, but a loaded machine may take a while to schedule
 * the child, so wait up to 5 s and return as soon as it moved. */
static int counter_runs(volatile uint64_t *c)
{
	uint64_t a = *c;
	for (int i = 0; i < 500; i++) {
		msleep(10);
		if (*c != a)
			return 1;
	}
	return 0;
}

static int setup_common(void **state, int v1, int with_cgroup)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	char *p;

	fx->v1 = v1;
	fx->counter = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(fx->counter != MAP_FAILED);
	*state = fx;
	if (!with_cgroup)
		return 0;
	fx->mount = find_mount(v1);
	if (!fx->mount)
		return 0;  /* the test skips */
	if (asprintf(&fx->name, "cbtest-%d-%s", (int)getpid(), v1 ? "v1" : "v2") < 0 ||
	    asprintf(&fx->dir, "%s/%s", fx->mount, fx->name) < 0)
		return -1;
	if (mkdir(fx->dir, 0755) < 0)
		return 0;  /* not allowed here: the test skips */
	p = cb_xasprintf("%s/%s", fx->dir, v1 ? "freezer.state" : "cgroup.freeze");
	if (access(p, F_OK) != 0)
		rmdir(fx->dir);  /* no freezer (old kernel): the test skips */
	free(p);
	return 0;
}

static int setup_v2(void **state) { return setup_common(state, 0, 1); }
static int setup_v1(void **state) { return setup_common(state, 1, 1); }
static int setup_plain(void **state) { return setup_common(state, 0, 0); }

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char *p;

	if (fx->dir) {
		/* a v1-frozen task cannot die: thaw before the kill */
		p = cb_xasprintf("%s/%s", fx->dir, fx->v1 ? "freezer.state" : "cgroup.freeze");
		write_file(p, fx->v1 ? "THAWED" : "0");
		free(p);
	}
	if (fx->ns_init > 0)   /* not our child: killed, reaped by C or by init */
		kill(fx->ns_init, SIGKILL);
	if (fx->child > 0) {
		kill(fx->child, SIGCONT);
		kill(fx->child, SIGKILL);
		waitpid(fx->child, NULL, 0);
	}
	if (fx->dir && rmdir(fx->dir) < 0 && errno != ENOENT)
		fprintf(stderr, "cannot remove cgroup %s: %s\n", fx->dir, strerror(errno));
	if (fx->tmp[0])
		cb_remove_tree(fx->tmp);
	munmap((void *)fx->counter, 4096);
	free(fx->mount);
	free(fx->name);
	free(fx->dir);
	free(fx);
	return 0;
}

/* Start the counter child inside the fixture's cgroup. */
static void start_guest_in_cgroup(struct fixture *fx)
{
	char pidbuf[32], *procs;

	fx->child = spawn_counter(fx->counter, 1);
	assert_true(fx->child > 0);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)fx->child);
	procs = cb_xasprintf("%s/cgroup.procs", fx->dir);
	assert_int_equal(write_file(procs, pidbuf), 0);
	free(procs);
	assert_true(counter_runs(fx->counter));
}

static void skip_without_cgroup(struct fixture *fx)
{
	if (!fx->mount || access(fx->dir, F_OK) != 0) {
		fprintf(stderr, "# skip: no %s hierarchy mounted\n", fx->v1 ? "v1 freezer" : "cgroup2");
		skip();
	}
}

static void freeze_thaw_cycle(struct fixture *fx, const char *cgpath,
			      enum cb_freezer_kind want_kind)
{
	struct cb_opts o;
	struct cb_guest g;

	cb_opts_init(&o);
	o.freeze_cgroup = cb_xstrdup(cgpath);
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(g.kind, want_kind);
	assert_int_equal(cb_guest_is_frozen(&g), 0);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), 0);
	assert_int_equal(g.frozen, 1);
	assert_true(g.watchdog > 0);
	assert_int_equal(cb_guest_is_frozen(&g), 1);
	assert_false(counter_moves(fx->counter, 200));
	assert_int_equal(cb_guest_thaw(&g), 0);
	assert_int_equal(g.frozen, 0);
	assert_int_equal(g.watchdog, 0);
	assert_int_equal(cb_guest_is_frozen(&g), 0);
	assert_true(counter_runs(fx->counter));
	/* idempotent */
	assert_int_equal(cb_guest_thaw(&g), 0);
	cb_guest_release(&g);
	cb_opts_release(&o);
}

static void test_cgroup2(void **state)
{
	struct fixture *fx = *state;

	skip_without_cgroup(fx);
	start_guest_in_cgroup(fx);
	freeze_thaw_cycle(fx, fx->name, CB_FREEZER_CGROUP2);   /* relative lookup */
	freeze_thaw_cycle(fx, fx->dir, CB_FREEZER_CGROUP2);    /* absolute */
}

static void test_cgroup1(void **state)
{
	struct fixture *fx = *state;

	skip_without_cgroup(fx);
	start_guest_in_cgroup(fx);
	freeze_thaw_cycle(fx, fx->dir, CB_FREEZER_CGROUP1);
	/* relative: not under the cgroup2 mount, so found in the v1 freezer */
	freeze_thaw_cycle(fx, fx->name, CB_FREEZER_CGROUP1);
}

static void test_pid(void **state)
{
	struct fixture *fx = *state;
	struct cb_opts o;
	struct cb_guest g;

	fx->child = spawn_counter(fx->counter, 1);
	assert_true(counter_runs(fx->counter));
	cb_opts_init(&o);
	o.freeze_pid = fx->child;
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(g.kind, CB_FREEZER_PID);
	assert_int_equal(g.pgid, fx->child);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), 0);
	assert_int_equal(cb_guest_is_frozen(&g), 1);
	assert_false(counter_moves(fx->counter, 200));
	assert_int_equal(cb_guest_thaw(&g), 0);
	assert_int_equal(cb_guest_is_frozen(&g), 0);
	assert_true(counter_runs(fx->counter));
	cb_guest_release(&g);
	cb_opts_release(&o);
}

/* A pid in our own process group: only that pid is stopped, never us. */
static void test_pid_own_group(void **state)
{
	struct fixture *fx = *state;
	struct cb_opts o;
	struct cb_guest g;

	fx->child = spawn_counter(fx->counter, 0);
	cb_opts_init(&o);
	o.freeze_pid = fx->child;
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(g.pgid, 0);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), 0);
	assert_false(counter_moves(fx->counter, 100));
	cb_guest_release(&g);   /* thaws */
	assert_true(counter_runs(fx->counter));
	cb_opts_release(&o);
}

static void test_cmd(void **state)
{
	struct fixture *fx = *state;
	struct cb_opts o;
	struct cb_guest g;
	char *f, *t;

	strcpy(fx->tmp, "/tmp/cbtest-guest.XXXXXX");
	assert_non_null(mkdtemp(fx->tmp));
	f = cb_xasprintf("%s/frozen", fx->tmp);
	t = cb_xasprintf("%s/thawed", fx->tmp);
	cb_opts_init(&o);
	o.freeze_cmd = cb_xasprintf("touch '%s'", f);
	o.thaw_cmd = cb_xasprintf("touch '%s'", t);
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(g.kind, CB_FREEZER_CMD);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), 0);
	assert_int_equal(access(f, F_OK), 0);
	assert_int_not_equal(access(t, F_OK), 0);
	assert_int_equal(cb_guest_thaw(&g), 0);
	assert_int_equal(access(t, F_OK), 0);
	cb_guest_release(&g);

	/* a failing freeze-cmd fails the freeze and still runs thaw-cmd */
	unlink(t);
	free(o.freeze_cmd);
	o.freeze_cmd = cb_xstrdup("exit 3");
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), -1);
	assert_non_null(strstr(cb_last_error(), "exit code 3"));
	assert_int_equal(g.frozen, 0);
	assert_int_equal(g.watchdog, 0);
	assert_int_equal(access(t, F_OK), 0);
	cb_guest_release(&g);
	cb_opts_release(&o);
	free(f);
	free(t);
}

static void expect_init_error(struct cb_opts *o, const char *needle)
{
	struct cb_guest g;

	assert_int_equal(cb_guest_init(&g, o), -1);
	if (!strstr(cb_last_error(), needle))
		fail_msg("error '%s' lacks '%s'", cb_last_error(), needle);
	cb_guest_release(&g);
}

static void test_init_errors(void **state)
{
	struct cb_opts o;
	struct cb_guest g;
	(void)state;

	cb_opts_init(&o);
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(g.kind, CB_FREEZER_NONE);
	assert_int_equal(cb_guest_freeze(&g, 100, 0), 0);  /* nothing to do */
	cb_guest_release(&g);

	o.freeze_cgroup = cb_xstrdup("no-such-cgroup-cbtest");
	expect_init_error(&o, "freeze cgroup 'no-such-cgroup-cbtest' not found");
	o.freeze_pid = getpid();
	expect_init_error(&o, "freeze-cgroup, freeze-pid");
	free(o.freeze_cgroup);
	o.freeze_cgroup = NULL;
	o.freeze_pid = 0x7ffffff0;
	expect_init_error(&o, "freeze pid");
	o.freeze_pid = 0;
	o.freeze_cmd = cb_xstrdup("true");
	expect_init_error(&o, "thaw-cmd");
	o.qmp = cb_xstrdup("/run/x.qmp");
	expect_init_error(&o, "more than one");
	free(o.freeze_cmd);
	o.freeze_cmd = NULL;
	/* a QMP socket that does not answer is refused before anything happens */
	expect_init_error(&o, "cannot connect");
	assert_string_equal(cb_guest_kind_name(CB_FREEZER_CGROUP1), "cgroup1");
	cb_opts_release(&o);
}

/* The cleanup-stack action (what SIGTERM runs) thaws the guest. */
static void test_cleanup_action(void **state)
{
	struct fixture *fx = *state;
	struct cb_opts o;
	struct cb_guest g;

	skip_without_cgroup(fx);
	start_guest_in_cgroup(fx);
	cb_opts_init(&o);
	o.freeze_cgroup = cb_xstrdup(fx->dir);
	assert_int_equal(cb_guest_init(&g, &o), 0);
	assert_int_equal(cb_guest_freeze(&g, 5000, 0), 0);
	assert_false(counter_moves(fx->counter, 50));
	cb_cleanup_run_all();
	assert_true(counter_runs(fx->counter));
	assert_int_equal(cb_guest_thaw(&g), 0);
	cb_guest_release(&g);
	cb_opts_release(&o);
}

/*
 * A process freezes the guest and dies without thawing (_exit or SIGKILL):
 * its watchdog must thaw the cgroup within 2 s.
 */
static void watchdog_case(struct fixture *fx, int how)
{
	char *events = cb_xasprintf("%s/cgroup.events", fx->dir);
	int p[2], status;
	char c = 0;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct cb_opts o;
		struct cb_guest g;

		close(p[0]);
		cb_opts_init(&o);
		o.freeze_cgroup = fx->dir;
		if (cb_guest_init(&g, &o) < 0 || cb_guest_freeze(&g, 5000, 0) < 0)
			_exit(1);
		if (write(p[1], "F", 1) != 1)
			_exit(1);
		if (how == 0)
			_exit(0);
		raise(SIGKILL);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	close(p[0]);
	assert_int_equal(c, 'F');
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (how == 1)
		assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int i = 0; i < 200 && read_has(events, "frozen 0") != 1; i++)
		msleep(10);
	assert_int_equal(read_has(events, "frozen 0"), 1);
	assert_true(counter_runs(fx->counter));
	free(events);
}

static void test_watchdog(void **state)
{
	struct fixture *fx = *state;

	skip_without_cgroup(fx);
	start_guest_in_cgroup(fx);
	watchdog_case(fx, 0);
	watchdog_case(fx, 1);
}

/* SIGTERM while frozen: the installed handler thaws at once. */
static void test_sigterm(void **state)
{
	struct fixture *fx = *state;
	int status;
	pid_t pid;

	skip_without_cgroup(fx);
	start_guest_in_cgroup(fx);
	pid = fork();
	if (pid == 0) {
		struct cb_opts o;
		struct cb_guest g;
		uint64_t a;

		cb_cleanup_install();
		cb_opts_init(&o);
		o.freeze_cgroup = fx->dir;
		if (cb_guest_init(&g, &o) < 0 || cb_guest_freeze(&g, 5000, 0) < 0)
			_exit(1);
		a = *fx->counter;
		msleep(50);
		if (*fx->counter != a)
			_exit(2);
		raise(SIGTERM);
		if (cb_interrupted() != SIGTERM)
			_exit(3);
		a = *fx->counter;
		msleep(50);
		_exit(*fx->counter != a ? 0 : 4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* issue 28: a container's init in the fixture's cgroup: C moves there,
 * unshares a pid namespace and forks G, pid 1 of it; G's pid (as this
 * process sees it) returned. fx->child is C; G goes with kill_init. */
static pid_t start_ns_init(struct fixture *fx)
{
	int go[2], back[2];
	char pidbuf[32], *procs;
	pid_t g = 0;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(back), 0);
	fx->child = fork();
	assert_true(fx->child >= 0);
	if (fx->child == 0) {
		char c;
		if (read(go[0], &c, 1) != 1 || unshare(CLONE_NEWPID) < 0)
			_exit(1);
		if ((g = fork()) == 0) {
			for (;;)
				pause();
		}
		if (write(back[1], &g, sizeof(g)) != (ssize_t)sizeof(g))
			_exit(1);
		waitpid(g, NULL, 0);
		_exit(0);
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)fx->child);
	procs = cb_xasprintf("%s/cgroup.procs", fx->dir);
	assert_int_equal(write_file(procs, pidbuf), 0);
	free(procs);
	assert_int_equal(write(go[1], "x", 1), 1);
	assert_int_equal(read(back[0], &g, sizeof(g)), (ssize_t)sizeof(g));
	fx->ns_init = g;   /* teardown kills it whatever fails */
	close(go[0]);
	close(go[1]);
	close(back[0]);
	close(back[1]);
	return g;
}

static unsigned long long start_of(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')');
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d "
				"%*d %*d %*d %*d %*d %llu", &v), 1);
	return v;
}

/* The PID found is checked after the open: the same start time, in the
 * container's cgroup, pid 1 of its own pid namespace; anything else is
 * refused (a recycled PID, another process of the container, the host's). */
static void test_ct_init_identity(void **state)
{
	struct fixture *fx = *state;
	struct cb_ctinit init, bad;
	char *old_path = getenv("PATH") ? cb_xstrdup(getenv("PATH")) : NULL;
	struct stat a, b;
	pid_t g;
	int fd;

	skip_without_cgroup(fx);
	g = start_ns_init(fx);
	setenv("PATH", "/nonexistent", 1);   /* no lxc-info: the cgroup is read */
	assert_int_equal(cb_ct_volume_find_init("1", fx->dir, &init), 0);
	assert_int_equal(init.pid, g);
	assert_string_equal(init.source, "cgroup");
	assert_int_equal(cb_ct_volume_check_init(&init), 0);
	fd = cb_ct_volume_open_root(&init);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(stat("/", &b), 0);
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	close(fd);
	/* the PID now names a process started at another time: recycled */
	bad = init;
	bad.start = init.start + 1;
	assert_int_equal(cb_ct_volume_check_init(&bad), -1);
	assert_non_null(strstr(cb_last_error(), "start time changed"));
	assert_int_equal(cb_ct_volume_open_root(&bad), -1);
	/* the container's other process (C: in the cgroup, not an init) */
	bad.pid = fx->child;
	bad.start = start_of(fx->child);
	assert_int_equal(cb_ct_volume_check_init(&bad), -1);
	assert_non_null(strstr(cb_last_error(), "is not the container's init"));
	/* the host's process (this one): not in the cgroup */
	bad.pid = getpid();
	bad.start = start_of(getpid());
	assert_int_equal(cb_ct_volume_check_init(&bad), -1);
	assert_non_null(strstr(cb_last_error(), "is not in the container's cgroup"));
	kill(g, SIGKILL);
	waitpid(fx->child, NULL, 0);
	fx->child = 0;
	fx->ns_init = 0;
	/* gone: refused */
	assert_int_equal(cb_ct_volume_check_init(&init), -1);
	cb_ctinit_release(&init);
	if (old_path)
		setenv("PATH", old_path, 1);
	free(old_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_init_errors, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup2, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_cgroup1, setup_v1, teardown),
		cmocka_unit_test_setup_teardown(test_pid, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_pid_own_group, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_cmd, setup_plain, teardown),
		cmocka_unit_test_setup_teardown(test_cleanup_action, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_watchdog, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_sigterm, setup_v2, teardown),
		cmocka_unit_test_setup_teardown(test_ct_init_identity, setup_v2, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
