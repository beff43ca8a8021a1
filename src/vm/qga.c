/* cb_qga: QEMU guest agent fsfreeze. See include/cb_qga.h. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cb_json.h"
#include "cb_qga.h"
#include "cb_util.h"

#define QGA_MAX_LINE 65536

void cb_qga_close(struct cb_qga *q)
{
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
}

/* One byte, or -1 (cb_error set) at the deadline or on a closed channel. */
static int read_byte(struct cb_qga *q, double deadline)
{
	unsigned char c;

	for (;;) {
		int left = (int)((deadline - cb_now()) * 1000);
		struct pollfd p = { q->fd, POLLIN, 0 };
		ssize_t r;
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return cb_error("no answer from the guest agent in time (is it running in "
					"the guest?)");
		r = read(q->fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return cb_error("guest agent connection lost");
		return c;
	}
}

/* The next reply line (after the 0xFF delimiter when SYNC), parsed. */
static struct cb_json *read_reply(struct cb_qga *q, double deadline, int sync)
{
	char line[QGA_MAX_LINE];
	size_t n = 0;
	int c;

	while (sync && (c = read_byte(q, deadline)) != 0xff)
		if (c < 0)
			return NULL;
	for (;;) {
		if ((c = read_byte(q, deadline)) < 0)
			return NULL;
		if (c == '\n' && n) {
			line[n] = '\0';
			return cb_json_parse(line, n);
		}
		if (c != '\n' && n + 1 < sizeof(line))
			line[n++] = (char)c;
	}
}

static int send_line(struct cb_qga *q, const char *text)
{
	if (cb_write_all(q->fd, text, strlen(text)) < 0)
		return cb_error_errno("guest agent connection lost");
	return 0;
}

int cb_qga_open(struct cb_qga *q, const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	double deadline = cb_now() + timeout_ms / 1000.0;
	long long id = (long long)(getpid() ^ ((unsigned)(cb_now() * 1e6) << 8)) & 0x3fffffff;
	struct cb_json *m;
	char *cmd;
	int rc;

	q->fd = -1;
	if (strlen(path) >= sizeof(sa.sun_path))
		return cb_error("guest agent socket path '%s' too long", path);
	memcpy(sa.sun_path, path, strlen(path));
	q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (q->fd < 0 || connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		cb_error_errno("cannot connect to the guest agent socket '%s'", path);
		cb_qga_close(q);
		return -1;
	}
	/* 0xFF resets the agent's parser after a client that died mid-command */
	cmd = cb_xasprintf("\xff{\"execute\":\"guest-sync-delimited\",\"arguments\":{\"id\":%lld}}\n", id);
	rc = send_line(q, cmd);
	free(cmd);
	while (rc == 0) {
		if (!(m = read_reply(q, deadline, 1))) {
			rc = -1;
			break;
		}
		rc = cb_json_int(m, "return", -1) == id ? 1 : 0;   /* else a stale reply */
		cb_json_free(m);
	}
	if (rc < 0) {
		cb_error_prefix("guest-sync-delimited");
		cb_qga_close(q);
		return -1;
	}
	return 0;
}

int cb_qga_exec(struct cb_qga *q, const char *cmd, int timeout_ms, long long *ret)
{
	char *line = cb_xasprintf("{\"execute\":\"%s\"}\n", cmd);
	struct cb_json *m = NULL;
	const char *desc;
	int rc = q->fd < 0 ? cb_error("no guest agent connection") : send_line(q, line);

	free(line);
	if (ret)
		*ret = 0;
	if (rc == 0 && !(m = read_reply(q, cb_now() + timeout_ms / 1000.0, 0)))
		rc = -1;
	if (rc == 0 && !cb_json_get(m, "return")) {
		desc = cb_json_str(m, "error.desc");
		rc = cb_error("%s", desc ? desc : "refused");
	} else if (rc == 0 && ret) {
		*ret = cb_json_int(m, "return", 0);
	}
	cb_json_free(m);
	return rc < 0 ? cb_error_prefix("%s", cmd) : 0;
}
