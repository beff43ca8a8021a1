/* Unit tests: the S3 side of a unit store. The S3 backend of cb_objstore.h
 * (every name under the storage's prefix, names outside the alphabet
 * refused, errors naming the storage, clone, check), opened from the
 * options (cb_objstore_s3_from_opts); the lock across hosts
 * (cb_objstore_lock.h) on the directory backend and on S3, and the upload
 * pool (cb_objstore_upload.h) on S3 (clones of a directory store put
 * through one temporary name sequence each, which collide: not yet). The S3 cases need a live store:
 * CB_S3_ENDPOINT, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (t0821
 * starts a radosgw for them); without one they are skipped, saying so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_objstore.h"
#include "cb_objstore_lock.h"
#include "cb_objstore_upload.h"
#include "cb_opts.h"
#include "cb_s3.h"
#include "cb_util.h"
#include "testlib.h"

struct fx {
	char dir[64];
	char bucket[64];
	struct cb_objstore *s;
	struct cb_s3 *raw;      /* S3: the bucket without the prefix */
};

static int live(void)
{
	return getenv("CB_S3_ENDPOINT") && getenv("AWS_ACCESS_KEY_ID") &&
	       getenv("AWS_SECRET_ACCESS_KEY");
}

static struct cb_s3_cfg live_cfg(const char *bucket, const char *secret)
{
	return (struct cb_s3_cfg){ .endpoint = getenv("CB_S3_ENDPOINT"), .bucket = bucket,
				   .access_key = getenv("AWS_ACCESS_KEY_ID"),
				   .secret_key = secret ? secret : getenv("AWS_SECRET_ACCESS_KEY"),
				   .timeout_s = 60 };
}

static int dir_setup(void **state)
{
	struct fx *f = cb_xcalloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/cb-objstore-s3-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->s = cb_objstore_open_dir("offsite", f->dir);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

/* S3: a bucket of this test's own, the store under prefix "host1/cb" */
static int s3_setup(void **state)
{
	struct fx *f;
	struct cb_s3_cfg cfg;

	*state = NULL;
	if (!live())
		return 0;
	f = cb_xcalloc(1, sizeof(*f));
	snprintf(f->bucket, sizeof(f->bucket), "cbstore-%d-%ld", (int)getpid(), (long)random() % 100000);
	cfg = live_cfg(f->bucket, NULL);
	f->raw = cb_s3_open(&cfg);
	assert_non_null(f->raw);
	assert_int_equal(cb_s3_create_bucket(f->raw), 0);
	f->s = cb_objstore_open_s3("offsite", &cfg, "host1/cb");
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int delete_key(void *arg, const char *key, uint64_t size)
{
	(void)size;
	return cb_s3_delete(arg, key);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	if (!f)
		return 0;
	f->s->ops->close(f->s);
	if (f->raw) {
		cb_s3_list(f->raw, "", delete_key, f->raw);
		cb_s3_free(f->raw);
	}
	if (f->dir[0])
		run("rm -rf %s", f->dir);
	free(f);
	return 0;
}

#define NEED(f) do { if (!(f)) { \
	print_message("skipped: no store (CB_S3_ENDPOINT unset; t0821 runs this against radosgw)\n"); \
	skip(); } } while (0)

static char *get_text(struct cb_objstore *s, const char *name)
{
	struct cb_s3_buf b = { 0 };
	char *t;

	if (s->ops->get(s, name, 0, 0, &b) != 0) {
		cb_s3_buf_release(&b);   /* a 404's body */
		return NULL;
	}
	t = cb_xasprintf("%.*s", (int)b.len, b.data ? (const char *)b.data : "");
	cb_s3_buf_release(&b);
	return t;
}

static void has_error(const char *want)
{
	if (!strstr(cb_last_error(), want))
		fail_msg("error '%s' lacks '%s'", cb_last_error(), want);
}

/* ---- the S3 backend ---- */

static int collect(void *arg, const char *name, uint64_t size)
{
	struct cb_strvec *v = arg;
	char *line = cb_xasprintf("%s %llu", name, (unsigned long long)size);

	cb_strvec_push(v, line);
	free(line);
	return 0;
}

static int stop_at_two(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	return ++*(int *)arg == 2 ? 7 : 0;
}

static void test_s3_backend(void **state)
{
	struct fx *f = *state;
	struct cb_strvec v = CB_STRVEC_INIT;
	struct cb_objstore *c;
	uint64_t size = 0;
	char *t;
	int n = 0;

	NEED(f);
	assert_string_equal(f->s->ops->kind, "s3");
	assert_int_equal(f->s->ops->check(f->s), 0);
	assert_int_equal(f->s->ops->put(f->s, "units/ab/abcdef", "unit bytes", 10, 0), 0);
	assert_int_equal(f->s->ops->put(f->s, "nights/n1", "one", 3, 1), 0);
	assert_int_equal(f->s->ops->put(f->s, "nights/n1", "two", 3, 1), 1);
	/* every object under the prefix, in the bucket itself */
	assert_int_equal(cb_s3_head(f->raw, "host1/cb/units/ab/abcdef", &size), 0);
	assert_int_equal(size, 10);
	assert_int_equal(cb_s3_head(f->raw, "units/ab/abcdef", &size), 1);
	assert_non_null(t = get_text(f->s, "nights/n1"));
	assert_string_equal(t, "one");
	free(t);
	assert_int_equal(f->s->ops->head(f->s, "units/ab/abcdef", &size), 0);
	assert_int_equal(f->s->ops->head(f->s, "units/ab/nothing", &size), 1);
	/* a listing names objects as the store does, without the prefix */
	assert_int_equal(f->s->ops->list(f->s, "", collect, &v), 0);
	assert_int_equal(v.n, 2);
	assert_string_equal(v.v[0], "nights/n1 3");
	assert_string_equal(v.v[1], "units/ab/abcdef 10");
	cb_strvec_clear(&v);
	assert_int_equal(f->s->ops->list(f->s, "units/a", collect, &v), 0);
	assert_int_equal(v.n, 1);
	cb_strvec_clear(&v);
	assert_int_equal(f->s->ops->list(f->s, "", stop_at_two, &n), 7);
	/* a clone is another connection on the same bucket and prefix */
	c = f->s->ops->clone(f->s);
	assert_non_null(c);
	assert_non_null(t = get_text(c, "units/ab/abcdef"));
	assert_string_equal(t, "unit bytes");
	free(t);
	assert_int_equal(c->ops->del(c, "units/ab/abcdef"), 0);
	assert_int_equal(c->ops->del(c, "units/ab/abcdef"), 0);
	c->ops->close(c);
	assert_int_equal(f->s->ops->head(f->s, "units/ab/abcdef", &size), 1);
}

/* Names outside the store's alphabet never reach the bucket. */
static void test_s3_names(void **state)
{
	struct fx *f = *state;
	struct cb_strvec v = CB_STRVEC_INIT;
	static const char *const bad[] = { "", "../x", "a//b", "a/./b", "a/", "/a", "a b", "a?b", NULL };

	NEED(f);
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(f->s->ops->put(f->s, bad[i], "x", 1, 0), -1);
		has_error("storage 'offsite': PUT '");
		has_error("not a name of the store");
	}
	assert_int_equal(f->s->ops->list(f->s, "a/../", collect, &v), -1);
	assert_int_equal(cb_s3_list(f->raw, "", collect, &v), 0);
	assert_int_equal(v.n, 0);
}

/* RGW ignores If-None-Match on a versioned bucket (and on an object-lock
 * one): a put only if absent must still never replace an object, or a
 * second host would overwrite a lock and a rerun a night's manifest. */
static void test_s3_if_absent_versioned(void **state)
{
	struct fx *f = *state;
	char *t;

	NEED(f);
	assert_int_equal(run("curl -sf --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
			     "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "
			     "-X PUT --data-binary '<VersioningConfiguration><Status>Enabled</Status>"
			     "</VersioningConfiguration>' \"$CB_S3_ENDPOINT/%s?versioning=\"", f->bucket), 0);
	assert_int_equal(f->s->ops->put(f->s, "nights/n1", "one", 3, 1), 0);
	assert_int_equal(f->s->ops->put(f->s, "nights/n1", "two", 3, 1), 1);
	assert_non_null(t = get_text(f->s, "nights/n1"));
	assert_string_equal(t, "one");
	free(t);
	/* a put that may replace still does */
	assert_int_equal(f->s->ops->put(f->s, "nights/n1", "three", 5, 0), 0);
	assert_non_null(t = get_text(f->s, "nights/n1"));
	assert_string_equal(t, "three");
	free(t);
}

/* check() says which of endpoint, keys, bucket is wrong, naming the storage. */
static void test_s3_check(void **state)
{
	struct fx *f = *state;
	struct cb_s3_cfg cfg;
	struct cb_objstore *s;

	NEED(f);
	cfg = live_cfg("cbtest-no-such-bucket", NULL);
	s = cb_objstore_open_s3("offsite", &cfg, NULL);
	assert_int_equal(s->ops->check(s), -1);
	has_error("storage 'offsite': bucket 'cbtest-no-such-bucket' does not exist");
	s->ops->close(s);
	cfg = live_cfg(f->bucket, "not-the-secret");
	s = cb_objstore_open_s3("offsite", &cfg, NULL);
	assert_int_equal(s->ops->check(s), -1);
	has_error("storage 'offsite': bucket '");
	has_error("access denied");
	s->ops->close(s);
}

static void test_s3_unreachable(void **state)
{
	struct cb_objstore *s = cb_objstore_open_s3("offsite", &(struct cb_s3_cfg){
		.endpoint = "http://127.0.0.1:1", .bucket = "b", .access_key = "a", .secret_key = "s",
		.timeout_s = 5 }, NULL);

	(void)state;
	assert_non_null(s);
	assert_int_equal(s->ops->check(s), -1);
	has_error("storage 'offsite': endpoint http://127.0.0.1:1 does not answer");
	s->ops->close(s);
}

/* from the options: nothing for a directory storage; the keys of the
 * environment or of the credentials file for an S3 one */
static void test_from_opts(void **state)
{
	struct cb_opts o;
	struct cb_objstore *s = (struct cb_objstore *)1;
	char cred[] = "/tmp/cb-cred-XXXXXX";
	int fd;

	(void)state;
	cb_opts_init(&o);
	assert_int_equal(cb_objstore_s3_from_opts(&o, &s), 0);
	assert_null(s);
	assert_int_equal(cb_opts_set_at(&o, "type", CB_WHERE_STORAGE, "s3", NULL), 0);
	assert_int_equal(o.storage_type, CB_STORAGE_S3);
	assert_int_equal(o.type, CB_GUEST_CT);   /* the guest's type untouched */
	assert_int_equal(cb_opts_set(&o, "storage", "offsite", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "endpoint", "http://127.0.0.1:1", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "bucket", "night", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "prefix", "a/b", NULL), 0);
	setenv("AWS_ACCESS_KEY_ID", "k", 0);
	setenv("AWS_SECRET_ACCESS_KEY", "s", 0);
	assert_int_equal(cb_objstore_s3_from_opts(&o, &s), 0);
	assert_non_null(s);
	assert_string_equal(s->label, "offsite");
	assert_string_equal(s->ops->kind, "s3");
	s->ops->close(s);
	fd = mkstemp(cred);
	assert_true(fd >= 0);
	assert_int_equal(cb_write_all(fd, "[x]\naws_access_key_id=1\naws_secret_access_key=2\n", 48), 0);
	close(fd);
	assert_int_equal(cb_opts_set(&o, "credentials", cred, NULL), 0);
	assert_int_equal(cb_objstore_s3_from_opts(&o, &s), -1);
	has_error("storage 'offsite': credentials '");
	has_error("has no profile [default]");
	assert_int_equal(cb_opts_set(&o, "profile", "x", NULL), 0);
	assert_int_equal(cb_objstore_s3_from_opts(&o, &s), 0);
	s->ops->close(s);
	unlink(cred);
	cb_opts_release(&o);
}

/* ---- locks ---- */

static struct cb_objstore_owner other_host(void)
{
	struct cb_objstore_owner o = { .host = "hostB", .pid = 4242, .boot_id = "b00t",
				       .since = 1765000000 };
	return o;
}

static void put_lock(struct cb_objstore *s, const char *host, long pid, const char *boot,
		     const char *token, long long expires)
{
	char *t = cb_xasprintf("cbackup lock\nhost %s\npid %ld\nboot %s\ntoken %s\nsince %lld\n"
			       "expires %lld\n", host, pid, boot, token, expires - 900, expires);

	assert_int_equal(s->ops->put(s, "locks/ct-101", t, strlen(t), 0), 0);
	free(t);
}

/* One host holds it: the second is told who, since when; after the
 * release the second gets it. */
static void test_lock_two_hosts(void **state)
{
	struct fx *f = *state;
	struct cb_objstore_owner b = other_host();
	struct cb_objstore_lock *la, *lb;
	char *t;

	NEED(f);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &la), 0);
	assert_null(cb_objstore_lock_note(la));
	assert_non_null(t = get_text(f->s, "locks/ct-101"));
	assert_non_null(strstr(t, "cbackup lock\nhost "));
	free(t);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, &b, &lb), 1);
	assert_null(lb);
	has_error("CT 101 is being backed up to offsite by host ");
	has_error(" since ");
	has_error("(lock 'locks/ct-101', held until ");
	/* another guest is another lock */
	assert_int_equal(cb_objstore_lock_take(f->s, "vm", "101", 0, &b, &lb), 0);
	assert_int_equal(cb_objstore_lock_release(lb), 0);
	assert_int_equal(cb_objstore_lock_release(la), 0);
	assert_null(get_text(f->s, "locks/ct-101"));
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, &b, &lb), 0);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &la), 1);
	has_error("CT 101 is being backed up to offsite by host hostB pid 4242 since ");
	assert_int_equal(cb_objstore_lock_release(lb), 0);
}

/* Stale: expired; or of this host and boot with its process gone; or of
 * this host before a reboot. Replaced, and said so. */
static void test_lock_stale(void **state)
{
	struct fx *f = *state;
	struct cb_objstore_owner me;
	struct cb_objstore_lock *l;
	pid_t dead = fork();

	NEED(f);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0);
	cb_objstore_owner_self(&me);
	put_lock(f->s, "hostB", 4242, "b00t", "0123", (long long)time(NULL) - 10);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &l), 0);
	assert_non_null(strstr(cb_objstore_lock_note(l), "removed the stale lock 'locks/ct-101' of "
					"host hostB pid 4242 (expired "));
	assert_int_equal(cb_objstore_lock_release(l), 0);
	put_lock(f->s, me.host, (long)dead, me.boot_id, "0123", (long long)time(NULL) + 900);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &l), 0);
	assert_non_null(strstr(cb_objstore_lock_note(l), "its process is gone"));
	assert_int_equal(cb_objstore_lock_release(l), 0);
	put_lock(f->s, me.host, (long)getpid(), "another-boot", "0123", (long long)time(NULL) + 900);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &l), 0);
	assert_int_equal(cb_objstore_lock_release(l), 0);
	/* alive on this host, same boot: held */
	put_lock(f->s, me.host, (long)getppid(), me.boot_id, "0123", (long long)time(NULL) + 900);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &l), 1);
	/* what is no lock is not removed */
	assert_int_equal(f->s->ops->put(f->s, "locks/ct-101", "junk", 4, 0), 0);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 0, NULL, &l), -1);
	has_error("'locks/ct-101' is not a cbackup lock");
}

/* Renewal rewrites the expiry; a lock taken over meanwhile is lost, and
 * release leaves the new owner's object alone. */
static void test_lock_renew_lost(void **state)
{
	struct fx *f = *state;
	struct cb_objstore_lock *l;
	char *t, token[64];
	const char *p;

	NEED(f);
	assert_int_equal(cb_objstore_lock_take(f->s, "ct", "101", 600, NULL, &l), 0);
	assert_non_null(t = get_text(f->s, "locks/ct-101"));
	assert_non_null(p = strstr(t, "token "));
	snprintf(token, sizeof(token), "%.32s", p + 6);
	free(t);
	/* as if the expiry had passed: renew writes a new one */
	put_lock(f->s, "x", 1, "y", token, 1000);
	assert_int_equal(cb_objstore_lock_renew(l), 0);
	assert_non_null(t = get_text(f->s, "locks/ct-101"));
	assert_null(strstr(t, "expires 1000\n"));
	assert_non_null(strstr(t, token));
	free(t);
	assert_int_equal(cb_objstore_lock_lost(l), 0);
	put_lock(f->s, "hostB", 4242, "b00t", "other", (long long)time(NULL) + 900);
	assert_int_equal(cb_objstore_lock_renew(l), -1);
	has_error("lock lost: CT 101 is being backed up to offsite by host hostB pid 4242");
	assert_int_equal(cb_objstore_lock_lost(l), 1);
	assert_int_equal(cb_objstore_lock_release(l), 0);
	assert_non_null(t = get_text(f->s, "locks/ct-101"));
	assert_non_null(strstr(t, "token other\n"));
	free(t);
}

/* ---- the upload pool ---- */

#define N_UNITS 40
#define UNIT_LEN (64 * 1024)

static void *unit_bytes(int i)
{
	unsigned char *b = cb_xmalloc(UNIT_LEN);

	for (size_t k = 0; k < UNIT_LEN; k++)
		b[k] = (unsigned char)(i * 31 + k * 7);
	return b;
}

/* Every object there with its bytes; never more than depth + threads
 * buffers held, however many puts were queued. */
static void test_pool_all_bounded(void **state)
{
	struct fx *f = *state;
	struct cb_upload_stats st;
	struct cb_upload_pool *p;
	char name[64];

	NEED(f);
	p = cb_upload_pool_start(f->s, 3, 2);
	assert_non_null(p);
	for (int i = 0; i < N_UNITS; i++) {
		snprintf(name, sizeof(name), "units/%02x/unit-%d", i, i);
		if (cb_upload_pool_put(p, name, unit_bytes(i), UNIT_LEN, 1) < 0)
			fail_msg("%s", cb_last_error());
	}
	if (cb_upload_pool_finish(p, &st) < 0)
		fail_msg("%s", cb_last_error());
	print_message("pool: %llu objects, %llu bytes, peak %zu buffers (%llu bytes)\n",
		      (unsigned long long)st.objects, (unsigned long long)st.bytes, st.peak_held,
		      (unsigned long long)st.peak_bytes);
	assert_int_equal(st.objects, N_UNITS);
	assert_int_equal(st.bytes, (uint64_t)N_UNITS * UNIT_LEN);
	assert_true(st.peak_held <= 2 + 3);
	assert_true(st.peak_bytes <= (uint64_t)(2 + 3) * UNIT_LEN);
	for (int i = 0; i < N_UNITS; i++) {
		struct cb_s3_buf b = { 0 };
		void *want = unit_bytes(i);
		snprintf(name, sizeof(name), "units/%02x/unit-%d", i, i);
		assert_int_equal(f->s->ops->get(f->s, name, 0, 0, &b), 0);
		assert_int_equal(b.len, UNIT_LEN);
		assert_memory_equal(b.data, want, UNIT_LEN);
		free(want);
		cb_s3_buf_release(&b);
	}
	/* the same again: every name is there already, nothing written */
	p = cb_upload_pool_start(f->s, 2, 0);
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "units/%02x/unit-%d", i, i);
		assert_int_equal(cb_upload_pool_put(p, name, unit_bytes(i), UNIT_LEN, 1), 0);
	}
	assert_int_equal(cb_upload_pool_finish(p, &st), 0);
	assert_int_equal(st.objects, 0);
	assert_int_equal(st.existed, 4);
}

/* A put that fails fails the pool, with the storage and the object named. */
static void test_pool_failure(void **state)
{
	struct fx *f = *state;
	struct cb_upload_pool *p;
	int rc = 0;

	NEED(f);
	p = cb_upload_pool_start(f->s, 2, 2);
	assert_non_null(p);
	assert_int_equal(cb_upload_pool_put(p, "units/00/good", unit_bytes(0), UNIT_LEN, 0), 0);
	assert_int_equal(cb_upload_pool_put(p, "units/../bad", unit_bytes(1), UNIT_LEN, 0), 0);
	for (int i = 0; i < 50 && rc == 0; i++)
		rc = cb_upload_pool_put(p, "units/00/later", unit_bytes(2), UNIT_LEN, 0);
	assert_int_equal(cb_upload_pool_finish(p, NULL), -1);
	has_error("storage 'offsite'");
	has_error("units/../bad");
}

/* On S3: a bucket that is gone makes every put fail; the first error is
 * the pool's, naming the operation and the key. */
static void test_pool_s3_bucket_gone(void **state)
{
	struct fx *f = *state;
	struct cb_s3_cfg cfg;
	struct cb_objstore *s;
	struct cb_upload_pool *p;

	NEED(f);
	cfg = live_cfg("cbtest-no-such-bucket", NULL);
	s = cb_objstore_open_s3("offsite", &cfg, NULL);
	p = cb_upload_pool_start(s, 2, 2);
	assert_non_null(p);
	cb_upload_pool_put(p, "units/00/u0", unit_bytes(0), UNIT_LEN, 0);
	assert_int_equal(cb_upload_pool_finish(p, NULL), -1);
	has_error("storage 'offsite': PUT 'units/00/u0' on bucket 'cbtest-no-such-bucket': HTTP 404 NoSuchBucket");
	s->ops->close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_unreachable),
		cmocka_unit_test(test_from_opts),
		cmocka_unit_test_setup_teardown(test_lock_two_hosts, dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_stale, dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_renew_lost, dir_setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_backend, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_names, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_check, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_s3_if_absent_versioned, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_two_hosts, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_stale, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_renew_lost, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_all_bounded, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_failure, s3_setup, teardown),
		cmocka_unit_test_setup_teardown(test_pool_s3_bucket_gone, s3_setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
