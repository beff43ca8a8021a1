/* cb_qmp: minimal async-signal-safe QMP client. See include/cb_qmp.h. */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cb_qmp.h"

struct qmp_conn {
	int fd;
	char buf[8192];
	size_t len;                 /* bytes in buf */
	struct timespec deadline;
};

static long ms_left(const struct qmp_conn *c)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (c->deadline.tv_sec - now.tv_sec) * 1000 + (c->deadline.tv_nsec - now.tv_nsec) / 1000000;
}

static int qmp_connect(struct qmp_conn *c, const char *path, int timeout_ms)
{
	struct sockaddr_un sa;
	size_t n = strlen(path);

	clock_gettime(CLOCK_MONOTONIC, &c->deadline);
	c->deadline.tv_sec += timeout_ms / 1000;
	c->deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
	if (c->deadline.tv_nsec >= 1000000000L) {
		c->deadline.tv_sec++;
		c->deadline.tv_nsec -= 1000000000L;
	}
	c->len = 0;
	if (n >= sizeof(sa.sun_path))
		return CB_QMP_CONNECT;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, n);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return CB_QMP_CONNECT;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(c->fd);
		return CB_QMP_CONNECT;
	}
	return CB_QMP_OK;
}

/* Move the next line (without CR/LF) to `line`; reads more as needed. */
static int read_line(struct qmp_conn *c, char *line, size_t cap)
{
	for (;;) {
		char *nl = memchr(c->buf, '\n', c->len);
		if (nl) {
			size_t n = (size_t)(nl - c->buf), keep = n < cap ? n : cap - 1;
			memcpy(line, c->buf, keep);
			line[keep] = '\0';
			if (keep && line[keep - 1] == '\r')
				line[keep - 1] = '\0';
			memmove(c->buf, nl + 1, c->len - n - 1);
			c->len -= n + 1;
			return CB_QMP_OK;
		}
		if (c->len == sizeof(c->buf))
			c->len = 0;   /* an over-long line (an event): drop it */
		long left = ms_left(c);
		struct pollfd p = { c->fd, POLLIN, 0 };
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return CB_QMP_TIMEOUT;
		ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return CB_QMP_IO;
		c->len += (size_t)r;
	}
}

/* Send one command and wait for its answer, skipping events. */
static int roundtrip(struct qmp_conn *c, const char *command, char *reply, size_t reply_len)
{
	static const char pre[] = "{\"execute\":\"", post[] = "\"}\r\n";
	char line[2048];
	int st;

	if (write(c->fd, pre, sizeof(pre) - 1) < 0 || write(c->fd, command, strlen(command)) < 0 ||
	    write(c->fd, post, sizeof(post) - 1) < 0)
		return CB_QMP_IO;
	for (;;) {
		if ((st = read_line(c, line, sizeof(line))) != CB_QMP_OK)
			return st;
		if (strstr(line, "\"return\"") || strstr(line, "\"error\""))
			break;
	}
	if (reply && reply_len) {
		size_t n = strlen(line) < reply_len ? strlen(line) : reply_len - 1;
		memcpy(reply, line, n);
		reply[n] = '\0';
	}
	return strstr(line, "\"return\"") ? CB_QMP_OK : CB_QMP_REFUSED;
}

int cb_qmp_execute(const char *socket_path, const char *command, char *reply, size_t reply_len,
		   int timeout_ms)
{
	struct qmp_conn c;
	char line[2048];
	int st = qmp_connect(&c, socket_path, timeout_ms);

	if (st != CB_QMP_OK)
		return st;
	st = read_line(&c, line, sizeof(line));
	if (st == CB_QMP_OK && !strstr(line, "\"QMP\""))
		st = CB_QMP_PROTOCOL;
	if (st == CB_QMP_OK)
		st = roundtrip(&c, "qmp_capabilities", NULL, 0);
	if (st == CB_QMP_OK)
		st = roundtrip(&c, command, reply, reply_len);
	close(c.fd);
	return st;
}

int cb_qmp_is_paused(const char *socket_path, int timeout_ms)
{
	char reply[512];
	int st = cb_qmp_execute(socket_path, "query-status", reply, sizeof(reply), timeout_ms);

	if (st != CB_QMP_OK)
		return st;
	if (strstr(reply, "\"running\": false") || strstr(reply, "\"running\":false"))
		return 1;
	if (strstr(reply, "\"running\": true") || strstr(reply, "\"running\":true"))
		return 0;
	return CB_QMP_PROTOCOL;
}

const char *cb_qmp_strerror(int status)
{
	switch (status) {
	case CB_QMP_OK: return "ok";
	case CB_QMP_CONNECT: return "cannot connect";
	case CB_QMP_IO: return "connection lost";
	case CB_QMP_TIMEOUT: return "no answer in time";
	case CB_QMP_PROTOCOL: return "not a QMP monitor";
	default: return "command refused";
	}
}
