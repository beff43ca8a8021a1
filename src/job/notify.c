/* cb_notify: the mail report. See include/cb_notify.h. In src/job/, the
 * job's: mailto's syntax, checked with the configuration, is cb_mailto. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb_mailto.h"
#include "cb_notify.h"
#include "cb_util.h"

#define ADDRESS_SEPARATORS CB_MAILTO_SEPARATORS

/* ---- addresses ---- */

static void print_recipients(FILE *out, const char *mailto)
{
	char *copy = cb_xstrdup(mailto), *save = NULL;
	const char *sep = "";

	for (char *t = strtok_r(copy, ADDRESS_SEPARATORS, &save); t;
	     t = strtok_r(NULL, ADDRESS_SEPARATORS, &save), sep = ", ")
		fprintf(out, "%s%s", sep, t);
	free(copy);
}

/* ---- the message ---- */

static void print_row(FILE *out, const struct cb_guest_result *g)
{
	char time[16] = "-", size[32] = "-";
	const char *what = cb_result_archived(g->result) ? g->archive : g->error;

	if (g->seconds >= 0)
		cb_fmt_hms(time, sizeof(time), g->seconds);
	if (cb_result_archived(g->result) && g->archive)
		cb_fmt_vzsize(size, sizeof(size), g->size);
	fprintf(out, "%-8s %-20s %-8s %-9s %-9s %s\n", g->id, g->name ? g->name : "-",
		cb_result_name(g->result), time, size, what ? what : "-");
}

static void print_table(FILE *out, const struct cb_job_status *js)
{
	double seconds = 0;
	uint64_t bytes = 0;
	size_t failed = 0;
	char time[16], size[32], guests[64];

	fprintf(out, "%-8s %-20s %-8s %-9s %-9s %s\n", "ID", "NAME", "STATUS", "TIME", "SIZE",
		"ARCHIVE");
	for (size_t i = 0; i < js->n; i++) {
		const struct cb_guest_result *g = &js->guests[i];
		print_row(out, g);
		seconds += g->seconds > 0 ? g->seconds : 0;
		bytes += cb_result_archived(g->result) ? g->size : 0;
		failed += g->result != CB_RESULT_OK;
	}
	cb_fmt_hms(time, sizeof(time), seconds);
	cb_fmt_vzsize(size, sizeof(size), bytes);
	snprintf(guests, sizeof(guests), "%zu guest(s), %zu not ok", js->n, failed);
	fprintf(out, "%-8s %-29s %-9s %-9s\n", "TOTAL", guests, time, size);
}

/* One guest's log, each line prefixed "ID: " (vzdump's mail shape). */
static void print_log(FILE *out, const struct cb_guest_result *g)
{
	struct stat st;
	FILE *in = g->log_path ? fopen(g->log_path, "re") : NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!in) {
		fprintf(out, "%s: no log file\n", g->id);
		return;
	}
	if (fstat(fileno(in), &st) == 0 && st.st_size > CB_NOTIFY_MAX_LOG) {
		fprintf(out, "%s: log file '%s' is larger than 1 MiB (%lld bytes): not included, "
			"read it on the host\n", g->id, g->log_path, (long long)st.st_size);
		fclose(in);
		return;
	}
	while ((n = getline(&line, &cap, in)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = '\0';
		fprintf(out, "%s: %s\n", g->id, line);
	}
	free(line);
	fclose(in);
}

/* Every guest archived, some with a warning (cb_jobstatus.h), no job error. */
static int only_warnings(const struct cb_job_status *js)
{
	if (js->error)
		return 0;
	for (size_t i = 0; i < js->n; i++)
		if (!cb_result_archived(js->guests[i].result))
			return 0;
	return 1;
}

static void print_headers(FILE *out, const struct cb_job_status *js, const char *mailto)
{
	fputs("To: ", out);
	print_recipients(out, mailto);
	fprintf(out, "\nSubject: cbackup backup status (%s): backup %s\n", js->host,
		!cb_jobstatus_failed(js) ? "successful" : only_warnings(js) ? "with warnings" : "failed");
	fputs("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
	      "Content-Transfer-Encoding: 8bit\nAuto-Submitted: auto-generated\n\n", out);
}

/* Each error of a configuration file that stopped the job, as printed. */
static void print_config_errors(FILE *out, const struct cb_job_status *js)
{
	if (!js->n_config_errors)
		return;
	fputs("Configuration errors:\n", out);
	for (size_t i = 0; i < js->n_config_errors; i++) {
		const struct cb_config_problem *c = &js->config_errors[i];

		if (c->line > 0 && c->file)
			fprintf(out, "%s:%d: %s\n", c->file, c->line, c->message);
		else
			fprintf(out, "%s\n", c->message);
	}
	fputc('\n', out);
}

void cb_notify_compose(const struct cb_job_status *js, const char *mailto, FILE *out)
{
	char start[64], end[64];
	struct tm tm;

	print_headers(out, js, mailto);
	if (js->error)
		fprintf(out, "Backup job failed - %s\n\n", js->error);
	print_config_errors(out, js);
	print_table(out, js);
	localtime_r(&js->start, &tm);
	strftime(start, sizeof(start), "%Y-%m-%d %H:%M:%S", &tm);
	localtime_r(&js->end, &tm);
	strftime(end, sizeof(end), "%Y-%m-%d %H:%M:%S", &tm);
	fprintf(out, "\nJob: %s\nStarted %s, finished %s, exit status %d\n", js->cmdline, start, end,
		js->exit_status);
	fputs("\nDetailed backup logs:\n\n", out);
	for (size_t i = 0; i < js->n; i++) {
		print_log(out, &js->guests[i]);
		fputc('\n', out);
	}
}

/* ---- sending ---- */

/* In the child: message on stdin, output into OUT_FD, exec. Never returns. */
static void exec_mailer(const char *prog, int in_fd, int out_fd)
{
	char *argv[] = { (char *)prog, "-t", "-i", NULL };

	signal(SIGPIPE, SIG_DFL);
	dup2(in_fd, STDIN_FILENO);
	dup2(out_fd, STDOUT_FILENO);
	dup2(out_fd, STDERR_FILENO);
	execvp(prog, argv);
	fprintf(stderr, "cannot execute: %s\n", strerror(errno));
	_exit(127);
}

/* The mail program's first output line, for the warning. */
static void first_output_line(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
}

/*
 * The report goes in without blocking, under the deadline: a program that
 * does not read (a full pipe) cannot hold the job. 0 written (or the
 * program exited without reading all of it: its exit status says why),
 * 1 the deadline passed.
 */
static int feed_mailer(int fd, const char *msg, size_t len, double deadline)
{
	if (fcntl(fd, F_SETFL, O_NONBLOCK) < 0)
		return 1;
	while (len > 0) {
		ssize_t n = write(fd, msg, len);
		struct pollfd p = { fd, POLLOUT, 0 };
		double left = deadline - cb_now();

		if (n > 0) {
			msg += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return 0;   /* EPIPE: it exited */
		if (left <= 0)
			return 1;
		poll(&p, 1, (int)(left * 1000) + 1);
	}
	return 0;
}

static int wait_mailer(const char *prog, pid_t pid, int out_fd, double deadline, int fed,
		       int timeout)
{
	char first[256];
	int status = 0;
	pid_t r = 0;

	while (fed && (r = waitpid(pid, &status, WNOHANG)) == 0 && cb_now() < deadline)
		usleep(50000);
	if (!fed || r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return cb_error("mail program '%s' did not %s within %d seconds: killed", prog,
				fed ? "finish" : "read the report", timeout);
	}
	first_output_line(out_fd, first, sizeof(first));
	if (r < 0)
		return cb_error_errno("mail program '%s'", prog);
	if (WIFSIGNALED(status))
		return cb_error("mail program '%s' killed by signal %d", prog, WTERMSIG(status));
	if (WEXITSTATUS(status))
		return cb_error("mail program '%s' exited with status %d%s%s", prog,
				WEXITSTATUS(status), first[0] ? ": " : "", first);
	return 0;
}

/* Everything from the first byte written to its exit within timeout s. */
static int run_mailer(const char *prog, const char *msg, size_t len, int timeout)
{
	int in[2], out_fd = memfd_create("cbackup-sendmail", MFD_CLOEXEC), ret, fed;
	double deadline = cb_now() + timeout;
	pid_t pid;

	if (out_fd < 0 || pipe2(in, O_CLOEXEC) < 0) {
		ret = cb_error_errno("mail program '%s': cannot set up its input", prog);
		if (out_fd >= 0)
			close(out_fd);
		return ret;
	}
	pid = fork();
	if (pid == 0)
		exec_mailer(prog, in[0], out_fd);
	close(in[0]);
	if (pid < 0) {
		close(in[1]);
		close(out_fd);
		return cb_error_errno("mail program '%s': cannot fork", prog);
	}
	fed = !feed_mailer(in[1], msg, len, deadline);
	close(in[1]);
	ret = wait_mailer(prog, pid, out_fd, deadline, fed, timeout);
	close(out_fd);
	return ret;
}

int cb_notify_mail(const struct cb_opts *o, const struct cb_job_status *js, struct cb_log *log)
{
	char *msg = NULL;
	size_t len = 0;
	FILE *mem;
	int ret;

	if (!o->mailto || (o->mailnotification == CB_MAIL_FAILURE && !cb_jobstatus_failed(js)))
		return 0;
	mem = open_memstream(&msg, &len);
	if (!mem)
		return cb_error_errno("cannot compose the mail report");
	cb_notify_compose(js, o->mailto, mem);
	fclose(mem);
	ret = run_mailer(o->sendmail, msg, len, o->mail_timeout);
	if (ret == 0)
		cb_info(log, "mail report sent to %s", o->mailto);
	free(msg);
	return ret;
}
