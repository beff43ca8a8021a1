/* cb_qmp_session: a QMP session held for a whole VM backup. See include/cb_qmp_session.h. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cb_qmp_session.h"
#include "cb_util.h"

/* QMP messages are one JSON object a line; query-block of many disks is
 * tens of KiB, so the buffer grows to this and no further */
#define QMPS_MAX_LINE (16u << 20)

void cb_qmp_session_adopt(struct cb_qmp_session *s, int fd, const char *id_prefix, int timeout_ms)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->id_prefix = id_prefix;
	s->timeout_ms = timeout_ms;
}

void cb_qmp_session_close(struct cb_qmp_session *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* The next whole line, parsed, or NULL (cb_error set) after ms_left. */
static struct cb_json *read_msg(struct cb_qmp_session *s, double deadline)
{
	for (;;) {
		char *nl = s->buf ? memchr(s->buf, '\n', s->len) : NULL;
		if (nl) {
			struct cb_json *m;
			size_t n = (size_t)(nl - s->buf);
			*nl = '\0';
			m = cb_json_parse(s->buf, n);
			memmove(s->buf, nl + 1, s->len - n - 1);
			s->len -= n + 1;
			if (!m)
				return NULL;
			return m;
		}
		if (s->len + 65537 > s->cap) {
			if (s->cap >= QMPS_MAX_LINE)
				return cb_error("QMP message over %u bytes", QMPS_MAX_LINE), NULL;
			s->cap = s->cap ? s->cap * 2 : 131072;
			s->buf = cb_xrealloc(s->buf, s->cap);
		}
		int left = (int)((deadline - cb_now()) * 1000);
		struct pollfd p = { s->fd, POLLIN, 0 };
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return cb_error("no answer from QEMU in time"), NULL;
		ssize_t r = read(s->fd, s->buf + s->len, s->cap - s->len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			s->lost = 1;
			return cb_error("QMP connection lost"), NULL;
		}
		s->len += (size_t)r;
	}
}

static void note_event(struct cb_qmp_session *s, const struct cb_json *m)
{
	const char *ev = cb_json_str(m, "event");
	double ts = (double)cb_json_int(m, "timestamp.seconds", 0) +
		    (double)cb_json_int(m, "timestamp.microseconds", 0) / 1e6;

	if (!strcmp(ev, "STOP"))
		s->stop_ts = ts;
	else if (!strcmp(ev, "RESUME"))
		s->resume_ts = ts;
	else if (!strcmp(ev, "SHUTDOWN"))
		s->shutdown_seen = 1;
	else if (!strcmp(ev, "MIGRATION") && cb_json_str(m, "data.status") &&
		 strcmp(cb_json_str(m, "data.status"), "none") &&
		 strcmp(cb_json_str(m, "data.status"), "cancelled") &&
		 strcmp(cb_json_str(m, "data.status"), "failed"))
		s->migration_seen = 1;
}

int cb_qmp_session_open(struct cb_qmp_session *s, const char *path, int timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct cb_json *greeting;

	cb_qmp_session_adopt(s, -1, "cb", timeout_ms);
	if (strlen(path) >= sizeof(sa.sun_path))
		return cb_error("QMP socket path '%s' too long", path);
	memcpy(sa.sun_path, path, strlen(path));
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		cb_error_errno("cannot connect to QMP socket '%s'", path);
		cb_qmp_session_close(s);
		return -1;
	}
	greeting = read_msg(s, cb_now() + timeout_ms / 1000.0);
	if (!greeting || !cb_json_get(greeting, "QMP")) {
		cb_json_free(greeting);
		cb_qmp_session_close(s);
		return cb_error("'%s' is not a QMP monitor (or another client holds it)", path);
	}
	cb_json_free(greeting);
	if (cb_qmp_session_exec(s, "qmp_capabilities", NULL, NULL) < 0) {
		cb_qmp_session_close(s);
		return -1;
	}
	return 0;
}

/* Wait for the reply with id ID; events are noted, other ids skipped. */
static int wait_reply(struct cb_qmp_session *s, const char *cmd, const char *id, struct cb_json **ret)
{
	double deadline = cb_now() + s->timeout_ms / 1000.0;

	for (;;) {
		struct cb_json *m = read_msg(s, deadline);
		const char *mid, *desc;
		if (!m)
			return cb_error_prefix("%s", cmd);
		if (cb_json_str(m, "event")) {
			note_event(s, m);
		} else if ((mid = cb_json_str(m, "id")) && !strcmp(mid, id)) {
			if (cb_json_get(m, "return")) {
				if (ret)
					*ret = m;
				else
					cb_json_free(m);
				return 0;
			}
			desc = cb_json_str(m, "error.desc");
			cb_error("%s: %s", cmd, desc ? desc : "refused");
			cb_json_free(m);
			return -1;
		}
		cb_json_free(m);
	}
}

int cb_qmp_session_exec(struct cb_qmp_session *s, const char *cmd, const char *args, struct cb_json **ret)
{
	char id[32];
	char *line;
	int rc;

	if (ret)
		*ret = NULL;
	if (s->fd < 0)
		return cb_error("%s: no QMP session", cmd);
	snprintf(id, sizeof(id), "%s-%u", s->id_prefix, ++s->next_id);
	line = args ? cb_xasprintf("{\"execute\":\"%s\",\"arguments\":%s,\"id\":\"%s\"}\n", cmd, args, id)
		    : cb_xasprintf("{\"execute\":\"%s\",\"id\":\"%s\"}\n", cmd, id);
	rc = cb_write_all(s->fd, line, strlen(line));
	free(line);
	if (rc < 0)
		return cb_error_errno("%s: QMP connection lost", cmd);
	return wait_reply(s, cmd, id, ret);
}

int cb_qmp_session_execf(struct cb_qmp_session *s, struct cb_json **ret, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	char *args;
	int rc;

	va_start(ap, fmt);
	if (vasprintf(&args, fmt, ap) < 0)
		abort();
	va_end(ap);
	rc = cb_qmp_session_exec(s, cmd, args, ret);
	free(args);
	return rc;
}

void cb_qmp_session_drain(struct cb_qmp_session *s, int ms)
{
	double deadline = cb_now() + ms / 1000.0;

	for (;;) {
		struct pollfd p = { s->fd, POLLIN, 0 };
		int left = (int)((deadline - cb_now()) * 1000);
		struct cb_json *m;
		if (s->fd < 0 || s->lost || left <= 0 || poll(&p, 1, left) <= 0 ||
		    !(m = read_msg(s, deadline)))
			return;
		if (cb_json_str(m, "event"))
			note_event(s, m);
		cb_json_free(m);
	}
}
