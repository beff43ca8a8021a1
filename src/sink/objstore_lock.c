/*
 * A guest's lock on a store, across hosts (cb_objstore_lock.h): an object
 * created only if absent, renewed by a thread of its own, replaced when
 * stale, deleted on release only while it is still ours.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/rand.h>

#include "cb_objstore_lock.h"
#include "cb_util.h"

#define TAKE_TRIES 3

/* What a lock object says. */
struct lock_body {
	struct cb_objstore_owner owner;
	char token[33];
	time_t expires;
};

struct cb_objstore_lock {
	struct cb_objstore *s;       /* the caller's handle: take and release */
	struct cb_objstore *renewer; /* the thread's own */
	char *name, *what;           /* "locks/ct-101", "CT 101" */
	struct lock_body mine;
	unsigned ttl;
	char *note;
	pthread_t thread;
	int running, stop, lost;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

void cb_objstore_owner_self(struct cb_objstore_owner *me)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	memset(me, 0, sizeof(*me));
	if (gethostname(me->host, sizeof(me->host) - 1) < 0 || !me->host[0])
		snprintf(me->host, sizeof(me->host), "unknown");
	me->pid = (long)getpid();
	if (!f || !fgets(me->boot_id, sizeof(me->boot_id), f))
		snprintf(me->boot_id, sizeof(me->boot_id), "unknown");
	me->boot_id[strcspn(me->boot_id, "\n")] = '\0';
	if (f)
		fclose(f);
	me->since = time(NULL);
}

static char *body_text(const struct lock_body *b)
{
	return cb_xasprintf("cbackup lock\nhost %s\npid %ld\nboot %s\ntoken %s\nsince %lld\n"
			    "expires %lld\n", b->owner.host, b->owner.pid, b->owner.boot_id, b->token,
			    (long long)b->owner.since, (long long)b->expires);
}

/* One "key value" line into b; unknown keys are skipped (a later version
 * may add some). */
static void body_field(struct lock_body *b, const char *key, const char *v)
{
	if (!strcmp(key, "host"))
		snprintf(b->owner.host, sizeof(b->owner.host), "%s", v);
	else if (!strcmp(key, "pid"))
		b->owner.pid = strtol(v, NULL, 10);
	else if (!strcmp(key, "boot"))
		snprintf(b->owner.boot_id, sizeof(b->owner.boot_id), "%s", v);
	else if (!strcmp(key, "token"))
		snprintf(b->token, sizeof(b->token), "%s", v);
	else if (!strcmp(key, "since"))
		b->owner.since = (time_t)strtoll(v, NULL, 10);
	else if (!strcmp(key, "expires"))
		b->expires = (time_t)strtoll(v, NULL, 10);
}

static int body_parse(const struct cb_s3_buf *buf, struct lock_body *b)
{
	char *text = cb_xasprintf("%.*s", (int)buf->len, buf->data ? (const char *)buf->data : "");
	char *save = NULL, *line = strtok_r(text, "\n", &save);
	int ok = line && !strcmp(line, "cbackup lock");

	memset(b, 0, sizeof(*b));
	while (ok && (line = strtok_r(NULL, "\n", &save))) {
		char *sp = strchr(line, ' ');
		if (sp) {
			*sp = '\0';
			body_field(b, line, sp + 1);
		}
	}
	free(text);
	return ok && b->token[0] && b->expires ? 0 : -1;
}

/* The object's body: 0 read, 1 there is none, -1 failed or not a lock. */
static int read_lock(struct cb_objstore *s, const char *name, struct lock_body *b,
		     struct cb_s3_buf *raw)
{
	int rc;

	raw->len = 0;
	rc = s->ops->get(s, name, 0, 0, raw);
	if (rc == 0 && body_parse(raw, b) < 0)
		rc = cb_error("storage '%s': '%s' is not a cbackup lock (remove it if no backup of "
			      "this guest runs)", s->label, name);
	return rc;
}

static void fmt_time(time_t t, char *out, size_t len)
{
	struct tm tm;

	strftime(out, len, "%F %T %Z", localtime_r(&t, &tm));
}

/* Dead on this host: same boot, no such process; or it rebooted since. */
static int owner_gone(const struct cb_objstore_owner *o, const struct cb_objstore_owner *me)
{
	if (strcmp(o->host, me->host))
		return 0;
	if (strcmp(o->boot_id, me->boot_id))
		return 1;
	return o->pid > 0 && kill((pid_t)o->pid, 0) < 0 && errno == ESRCH;
}

static int held_by(const struct cb_objstore_lock *l, const struct lock_body *b)
{
	char since[64], until[64];

	fmt_time(b->owner.since, since, sizeof(since));
	fmt_time(b->expires, until, sizeof(until));
	return cb_error("%s is being backed up to %s by host %s pid %ld since %s (lock '%s', "
			"held until %s unless renewed)", l->what, l->s->label, b->owner.host,
			b->owner.pid, since, l->name, until);
}

/* Delete the stale lock b, unless it changed since it was read (then
 * another host got there first: the next try sees it). */
static int remove_stale(struct cb_objstore_lock *l, const struct lock_body *b,
			const struct cb_s3_buf *seen)
{
	struct cb_s3_buf again = { 0 };
	struct lock_body now;
	char when[64];
	int rc = read_lock(l->s, l->name, &now, &again);

	if (rc == 0 && again.len == seen->len && !memcmp(again.data, seen->data, seen->len)) {
		rc = l->s->ops->del(l->s, l->name);
		fmt_time(b->expires, when, sizeof(when));
		free(l->note);
		l->note = cb_xasprintf("removed the stale lock '%s' of host %s pid %ld (%s %s)", l->name,
				       b->owner.host, b->owner.pid, b->expires < time(NULL) ?
				       "expired" : "its process is gone; it would expire", when);
	}
	cb_s3_buf_release(&again);
	return rc < 0 ? -1 : 0;
}

/* One try: 0 taken, 1 held, 2 a stale one removed (try again), -1 failed. */
static int take_once(struct cb_objstore_lock *l, const struct cb_objstore_owner *me)
{
	struct cb_s3_buf raw = { 0 };
	struct lock_body cur;
	char *text = body_text(&l->mine);
	int rc = l->s->ops->put(l->s, l->name, text, strlen(text), 1);

	free(text);
	if (rc == 1)
		rc = read_lock(l->s, l->name, &cur, &raw);
	else if (rc == 0)
		return 0;
	if (rc == 1)
		rc = 2;   /* gone in between */
	else if (rc == 0 && (cur.expires < time(NULL) || owner_gone(&cur.owner, me)))
		rc = remove_stale(l, &cur, &raw) < 0 ? -1 : 2;
	else if (rc == 0 && held_by(l, &cur) < 0)
		rc = 1;
	cb_s3_buf_release(&raw);
	return rc;
}

static void *renew_loop(void *arg)
{
	struct cb_objstore_lock *l = arg;
	struct timespec at;
	int rc;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		clock_gettime(CLOCK_REALTIME, &at);
		at.tv_sec += l->ttl / 3 ? l->ttl / 3 : 1;
		if (pthread_cond_timedwait(&l->cv, &l->mu, &at) == 0 || l->stop)
			continue;
		pthread_mutex_unlock(&l->mu);
		rc = cb_objstore_lock_renew(l);
		pthread_mutex_lock(&l->mu);
		/* another host may take it once expired: from then on it is not ours */
		if (rc < 0 && time(NULL) >= l->mine.expires)
			__atomic_store_n(&l->lost, 1, __ATOMIC_SEQ_CST);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static void lock_free(struct cb_objstore_lock *l)
{
	if (l->renewer)
		l->renewer->ops->close(l->renewer);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l->name);
	free(l->what);
	free(l->note);
	free(l);
}

static struct cb_objstore_lock *lock_new(struct cb_objstore *s, const char *type, const char *id,
					 unsigned ttl_s, const struct cb_objstore_owner *me)
{
	struct cb_objstore_lock *l = cb_xcalloc(1, sizeof(*l));
	unsigned char r[16];

	l->s = s;
	l->name = cb_xasprintf("locks/%s-%s", type, id);
	l->what = cb_xasprintf("%s %s", !strcmp(type, "vm") ? "VM" : "CT", id);
	l->ttl = ttl_s ? ttl_s : CB_OBJSTORE_LOCK_TTL;
	l->mine.owner = *me;
	RAND_bytes(r, sizeof(r));
	for (int i = 0; i < 16; i++)
		snprintf(l->mine.token + 2 * i, 3, "%02x", r[i]);
	l->mine.expires = time(NULL) + l->ttl;
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	return l;
}

int cb_objstore_lock_take(struct cb_objstore *s, const char *type, const char *id, unsigned ttl_s,
			  const struct cb_objstore_owner *me, struct cb_objstore_lock **out)
{
	struct cb_objstore_owner self;
	struct cb_objstore_lock *l;
	int rc = 2;

	*out = NULL;
	if (!me) {
		cb_objstore_owner_self(&self);
		me = &self;
	}
	l = lock_new(s, type, id, ttl_s, me);
	for (int i = 0; i < TAKE_TRIES && rc == 2; i++)
		rc = take_once(l, me);
	if (rc == 2)
		rc = cb_error("storage '%s': lock '%s' changed hands %d times while taken: try again",
			      s->label, l->name, TAKE_TRIES);
	if (rc == 0 && !(l->renewer = s->ops->clone(s))) {
		cb_error_prefix("storage '%s': lock '%s': no handle to renew it", s->label, l->name);
		s->ops->del(s, l->name);
		rc = -1;
	}
	if (rc == 0 && pthread_create(&l->thread, NULL, renew_loop, l) == 0)
		l->running = 1;
	if (rc != 0) {
		lock_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

const char *cb_objstore_lock_note(const struct cb_objstore_lock *l)
{
	return l->note;
}

/* Is the object still ours? 1 yes, 0 another's (error set), -1 failed. */
static int still_ours(struct cb_objstore_lock *l, struct cb_objstore *s)
{
	struct cb_s3_buf raw = { 0 };
	struct lock_body cur;
	int rc = read_lock(s, l->name, &cur, &raw);

	cb_s3_buf_release(&raw);
	if (rc == 1)
		return cb_error("storage '%s': lock '%s' is gone: removed by another host as stale?",
				s->label, l->name), 0;
	if (rc < 0)
		return -1;
	if (strcmp(cur.token, l->mine.token))
		return held_by(l, &cur), 0;
	return 1;
}

int cb_objstore_lock_renew(struct cb_objstore_lock *l)
{
	struct cb_objstore *s = l->renewer ? l->renewer : l->s;
	int rc = still_ours(l, s);
	char *text;

	if (rc == 0) {
		__atomic_store_n(&l->lost, 1, __ATOMIC_SEQ_CST);
		return cb_error_prefix("lock lost");
	}
	if (rc < 0)
		return -1;
	pthread_mutex_lock(&l->mu);
	l->mine.expires = time(NULL) + l->ttl;
	text = body_text(&l->mine);
	pthread_mutex_unlock(&l->mu);
	rc = s->ops->put(s, l->name, text, strlen(text), 0);
	free(text);
	return rc;
}

int cb_objstore_lock_lost(struct cb_objstore_lock *l)
{
	return __atomic_load_n(&l->lost, __ATOMIC_SEQ_CST);
}

int cb_objstore_lock_release(struct cb_objstore_lock *l)
{
	int rc = 0;

	if (!l)
		return 0;
	if (l->running) {
		pthread_mutex_lock(&l->mu);
		l->stop = 1;
		pthread_cond_signal(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->thread, NULL);
	}
	if (!cb_objstore_lock_lost(l)) {
		rc = still_ours(l, l->s);
		rc = rc == 1 ? l->s->ops->del(l->s, l->name) : rc == 0 ? 0 : -1;
	}
	lock_free(l);
	return rc;
}
