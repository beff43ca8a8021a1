/*
 * e2e helper: run a command while watching a freezer, log every
 * frozen/thawed transition, and optionally send a signal to the command the
 * moment the guest is seen frozen (to hit cbackup inside its freeze window).
 *
 * Usage: killer-on-freeze (-c CGROUP_DIR | -p PID) -o EVENTS [-s SIDEFILE]
 *            [-k SIGNUM [-d DELAY_MS]] [-l LINGER_MS] [-t TIMEOUT_S] -- CMD...
 *
 * CGROUP_DIR: cgroup v2 (cgroup.events "frozen 1") or v1 (freezer.state
 * FROZEN); PID: stopped ('T' in /proc/PID/stat). EVENTS gets lines
 * "frozen|thawed|killed|exit COUNTER MS": COUNTER is the number in SIDEFILE
 * (the writer's counter; 0 without -s), MS the milliseconds since start.
 * With -d the signal goes DELAY_MS after the freeze was seen (if still
 * frozen then), to land inside the final sync rather than at its start.
 * After CMD exits the watch goes on until the guest is thawed, at most
 * LINGER_MS (default 0), so that a thaw by cbackup's watchdog is logged
 * too. Exit status: CMD's (128+signal if it was killed); 124 on timeout
 * (CMD then gets SIGKILL).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct watch {
	const char *cgroup;
	pid_t pid;
	const char *side;
	int events_fd;
	double start;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* 1 frozen, 0 not, -1 unreadable */
static int is_frozen(const struct watch *w)
{
	char path[4096], buf[512], *p;

	if (w->cgroup) {
		snprintf(path, sizeof(path), "%s/cgroup.events", w->cgroup);
		if (read_file(path, buf, sizeof(buf)) == 0)
			return strstr(buf, "frozen 1") != NULL;
		snprintf(path, sizeof(path), "%s/freezer.state", w->cgroup);
		if (read_file(path, buf, sizeof(buf)) == 0)
			return strncmp(buf, "FROZEN", 6) == 0;
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)w->pid);
	if (read_file(path, buf, sizeof(buf)) < 0 || !(p = strrchr(buf, ')')))
		return -1;
	return p[2] == 'T' || p[2] == 't';
}

static void event(const struct watch *w, const char *what)
{
	char buf[64] = "0", line[160];
	int n;

	if (w->side)
		read_file(w->side, buf, sizeof(buf));
	n = snprintf(line, sizeof(line), "%s %lu %.0f\n", what, strtoul(buf, NULL, 10),
		     (now() - w->start) * 1000);
	if (write(w->events_fd, line, n) != n)
		perror("killer-on-freeze: events");
}

static void wait_change(const struct watch *w)
{
	char path[4096];
	struct pollfd pfd = { .fd = -1, .events = POLLPRI };

	if (w->cgroup) {
		snprintf(path, sizeof(path), "%s/cgroup.events", w->cgroup);
		pfd.fd = open(path, O_RDONLY);
	}
	if (pfd.fd >= 0) {
		poll(&pfd, 1, 1);   /* v2 notifies; 1 ms covers the rest */
		close(pfd.fd);
	} else {
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: killer-on-freeze (-c CGROUP | -p PID) -o EVENTS [-s SIDE] "
		"[-k SIG [-d DELAY_MS]] [-l LINGER_MS] [-t TIMEOUT_S] -- CMD...\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct watch w = { 0 };
	const char *events = NULL;
	int sig = 0, delay = 0, linger = 0, timeout = 120, opt, state, status = 0, killed = 0;
	double end_at = 0, frozen_at = 0;
	pid_t child, done = 0;

	while ((opt = getopt(argc, argv, "+c:p:o:s:k:d:l:t:")) != -1) {
		switch (opt) {
		case 'c': w.cgroup = optarg; break;
		case 'p': w.pid = atoi(optarg); break;
		case 'o': events = optarg; break;
		case 's': w.side = optarg; break;
		case 'k': sig = atoi(optarg); break;
		case 'd': delay = atoi(optarg); break;
		case 'l': linger = atoi(optarg); break;
		case 't': timeout = atoi(optarg); break;
		default: return usage();
		}
	}
	if ((!w.cgroup && !w.pid) || !events || optind >= argc)
		return usage();
	w.events_fd = open(events, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (w.events_fd < 0) {
		perror(events);
		return 2;
	}
	w.start = now();
	state = is_frozen(&w);
	child = fork();
	if (child == 0) {
		execvp(argv[optind], argv + optind);
		perror(argv[optind]);
		_exit(127);
	}
	for (;;) {
		int s = is_frozen(&w);

		if (s >= 0 && s != state) {
			event(&w, s ? "frozen" : "thawed");
			state = s;
			frozen_at = now();
		}
		if (s == 1 && sig && !killed && !done && now() - frozen_at >= delay / 1000.0) {
			kill(child, sig);
			killed = 1;
			event(&w, "killed");
		}
		if (!done && waitpid(child, &status, WNOHANG) == child) {
			done = 1;
			event(&w, "exit");
			end_at = now() + linger / 1000.0;
		}
		/* after CMD: linger until thawed (or LINGER_MS passed) */
		if (done && (state == 0 || now() >= end_at))
			break;
		if (!done && now() - w.start > timeout) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			event(&w, "timeout");
			return 124;
		}
		wait_change(&w);
	}
	close(w.events_fd);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
