/*
 * The keys of an S3 storage from an AWS shared-credentials file
 * (cb_s3_credentials_load, cb_s3.h): the format `aws configure` writes to
 * ~/.aws/credentials, read with the care of a key file, since whoever
 * reads it may delete every backup of the bucket.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "cb_s3.h"
#include "cb_trust.h"
#include "cb_util.h"

#define MAX_CRED_FILE (64 * 1024)

struct cred_read {
	const char *path, *profile;
	int in_profile, found;
	char *access, *secret;
};

/* Open PATH as a key file; -1 with the error. */
static int open_key_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return cb_error_errno("credentials '%s'", path);
	if (fstat(fd, &st) < 0) {
		cb_error_errno("credentials '%s'", path);
	} else if (!S_ISREG(st.st_mode)) {
		cb_error("credentials '%s' is not a regular file", path);
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		cb_error("credentials '%s' is owned by uid %u, neither root nor this user (uid %u): "
			 "refused, as a key file", path, (unsigned)st.st_uid, (unsigned)geteuid());
	} else if (st.st_mode & 077) {
		cb_error("credentials '%s' has mode %04o: group or others may %s it (chmod 600 '%s')",
			 path, (unsigned)(st.st_mode & 07777), st.st_mode & 044 ? "read" : "write",
			 path);
	} else if (cb_trust_file(fd, path, "credentials") == 0) {
		return fd;
	}
	close(fd);
	return -1;
}

static char *trim(char *s)
{
	char *e;

	s += strspn(s, " \t");
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

static void set_key(char **field, const char *value)
{
	if (*field)
		OPENSSL_cleanse(*field, strlen(*field));
	free(*field);
	*field = cb_xstrdup(value);
}

/* One line of the file (NUL-ended, modified). */
static int cred_line(struct cred_read *c, char *line, int lineno)
{
	char *l = trim(line), *eq, *end;

	if (!*l || *l == '#' || *l == ';')
		return 0;
	if (*l == '[') {
		if (!(end = strchr(l, ']')))
			return cb_error("credentials '%s':%d: a section header without ']'", c->path, lineno);
		*end = '\0';
		c->in_profile = !strcmp(trim(l + 1), c->profile);
		c->found |= c->in_profile;
		return 0;
	}
	if (!(eq = strchr(l, '=')))
		return cb_error("credentials '%s':%d: not a 'key = value' line", c->path, lineno);
	*eq = '\0';
	if (!c->in_profile)
		return 0;
	if (!strcmp(trim(l), "aws_access_key_id"))
		set_key(&c->access, trim(eq + 1));
	else if (!strcmp(trim(l), "aws_secret_access_key"))
		set_key(&c->secret, trim(eq + 1));
	return 0;
}

static int cred_parse(struct cred_read *c, char *text)
{
	int lineno = 1;

	for (char *line = text, *nl; line; line = nl, lineno++) {
		if ((nl = strchr(line, '\n')))
			*nl++ = '\0';
		if (cred_line(c, line, lineno) < 0)
			return -1;
	}
	if (!c->found)
		return cb_error("credentials '%s' has no profile [%s]", c->path, c->profile);
	if (!c->access || !*c->access || !c->secret || !*c->secret)
		return cb_error("credentials '%s': profile [%s] lacks %s", c->path, c->profile,
				!c->access || !*c->access ? "aws_access_key_id" : "aws_secret_access_key");
	return 0;
}

static void cred_forget(struct cred_read *c)
{
	set_key(&c->access, "");
	set_key(&c->secret, "");
	free(c->access);
	free(c->secret);
}

int cb_s3_credentials_load(const char *path, const char *profile, char **access_key,
			   char **secret_key)
{
	struct cred_read c = { .path = path, .profile = profile ? profile : "default" };
	char *text = cb_xmalloc(MAX_CRED_FILE + 1);
	int fd = open_key_file(path), ret = -1;
	ssize_t n = fd < 0 ? -1 : read(fd, text, MAX_CRED_FILE + 1);

	if (fd >= 0 && n < 0)
		cb_error_errno("credentials '%s'", path);
	else if (n > MAX_CRED_FILE)
		cb_error("credentials '%s' is larger than %d bytes: not a credentials file", path,
			 MAX_CRED_FILE);
	else if (n >= 0 && memchr(text, '\0', (size_t)n))
		cb_error("credentials '%s' holds binary data: not a credentials file", path);
	else if (n >= 0)
		text[n] = '\0', ret = cred_parse(&c, text);
	if (ret == 0) {
		*access_key = c.access;
		*secret_key = c.secret;
	} else {
		cred_forget(&c);
	}
	if (fd >= 0)
		close(fd);
	OPENSSL_cleanse(text, MAX_CRED_FILE + 1);
	free(text);
	return ret;
}
