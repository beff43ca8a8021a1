/*
 * cb_probe: stage-by-stage throughput. See include/cb_probe.h.
 *
 * The rates are those of the real code paths: the codec writer with the
 * job's options (threads, level, policy) into a sink without checksum, the
 * sink's SHA-256, write(2)+fsync for the disks (the storage also synced as
 * it is written, as a backup writes its archive: cb_syncer). Data written to
 * disk is incompressible, so a compressing file system (ZFS lz4, btrfs)
 * cannot make a storage look faster than it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_cleanup.h"
#include "cb_codec.h"
#include "cb_probe.h"
#include "cb_sink.h"
#include "cb_syncer.h"
#include "cb_util.h"

#define BLOCK (1024 * 1024)
#define SAMPLE (8 * BLOCK)                /* bigger than any codec's window */
#define IO_SECONDS 1.0                    /* per disk stage */
#define CPU_SECONDS 0.5                   /* per codec and kind of data */
#define IO_MAX ((uint64_t)1024 * BLOCK)   /* per disk stage */

struct samples {
	unsigned char *text;     /* log/source-like lines: compresses 3-6x */
	unsigned char *random;   /* does not compress */
};

/* A rate measured: bytes in, bytes out (codecs), seconds. */
struct rate {
	uint64_t in, out;
	double seconds;
};

static double per_second(const struct rate *r)
{
	return r->in / (r->seconds > 1e-9 ? r->seconds : 1e-9);
}

static void fmt_rate(char *buf, size_t len, double bytes_per_s)
{
	char b[24];

	cb_fmt_bytes(b, sizeof(b), (uint64_t)bytes_per_s);
	snprintf(buf, len, "%s/s", b);
}

static unsigned next_random(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void make_samples(struct samples *sm)
{
	static const char *const words[] = {
		"backup", "INFO:", "kernel:", "the", "of", "request", "served", "GET", "/index.html",
		"200", "user", "session", "opened", "for", "root", "systemd[1]:", "Started", "daily",
		"cleanup", "int", "return", "static", "const", "struct", "if", "else", "{", "}",
	};
	unsigned seed = 2026;
	size_t i = 0;

	sm->text = cb_xmalloc(SAMPLE);
	sm->random = cb_xmalloc(SAMPLE);
	for (size_t k = 0; k < SAMPLE; k += 4) {
		unsigned v = next_random(&seed);
		memcpy(sm->random + k, &v, 4);
	}
	while (i < SAMPLE) {
		char line[160];
		int n = snprintf(line, sizeof(line), "%u-%02u %s %s %s %u %s\n", next_random(&seed) % 100000,
				 next_random(&seed) % 60, words[next_random(&seed) % 28],
				 words[next_random(&seed) % 28], words[next_random(&seed) % 28],
				 next_random(&seed) % 5000, words[next_random(&seed) % 28]);
		for (int k = 0; k < n && i < SAMPLE; k++)
			sm->text[i++] = line[k];
	}
}

/* ---- disks ---- */

struct probe_file {
	char *path;
	int fd;
	int cleanup_handle;
};

/* Cleanup-stack action: async-signal-safe. */
static void unlink_probe_file(void *arg)
{
	unlink(((struct probe_file *)arg)->path);
}

static void probe_file_remove(struct probe_file *pf);

static int probe_file_create(struct probe_file *pf, const char *dir, const char *stage)
{
	pf->path = cb_xasprintf("%s/.cbackup-probe-%ld.tmp", dir, (long)getpid());
	pf->fd = open(pf->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (pf->fd < 0) {
		cb_error_errno("%s: cannot create '%s'", stage, pf->path);
		free(pf->path);
		pf->path = NULL;
		return -1;
	}
	pf->cleanup_handle = cb_cleanup_push(unlink_probe_file, pf);
	if (pf->cleanup_handle < 0) {
		/* a signal now would leave the file behind: do not go on */
		cb_error("%s: cleanup stack full, cannot protect '%s'", stage, pf->path);
		probe_file_remove(pf);
		return -1;
	}
	return 0;
}

static void probe_file_remove(struct probe_file *pf)
{
	if (!pf->path)
		return;
	close(pf->fd);
	unlink(pf->path);
	cb_cleanup_pop(pf->cleanup_handle, 0);
	free(pf->path);
	pf->path = NULL;
}

/* Write for about IO_SECONDS, then fsync: the rate a backup's writes see
 * (with sync_as_written, those of an archive: synced while written). */
static int write_for_a_while(struct probe_file *pf, const unsigned char *data, const char *stage,
			     int sync_as_written, struct rate *r)
{
	struct cb_syncer *syncer = sync_as_written ? cb_syncer_start(pf->fd, pf->path) : NULL;
	double t0 = cb_now();
	int ret = -1;

	r->in = 0;
	do {
		if (cb_check_interrupt() < 0)
			goto cleanup;
		if (cb_write_all(pf->fd, data + r->in % SAMPLE, BLOCK) < 0) {
			cb_error_errno("cannot write '%s'", pf->path);
			goto cleanup;
		}
		r->in += BLOCK;
		if (cb_syncer_written(syncer, r->in) < 0)
			goto cleanup;
	} while (cb_now() - t0 < IO_SECONDS && r->in < IO_MAX);
	ret = cb_syncer_stop(syncer);
	syncer = NULL;
	if (ret == 0 && fsync(pf->fd) < 0)
		ret = cb_error_errno("cannot sync '%s'", pf->path);
	r->seconds = cb_now() - t0;
cleanup:
	cb_syncer_cancel(syncer);
	return ret < 0 ? cb_error_prefix("%s", stage) : 0;
}

/* Read the file back after asking the kernel to drop it from the page cache
 * (clean pages after the fsync), as pass 2 and the archive read the staged
 * copy some time after pass 1 wrote it. */
static int read_back(struct probe_file *pf, unsigned char *buf, uint64_t size, const char *stage,
		     struct rate *r)
{
	double t0;

	posix_fadvise(pf->fd, 0, 0, POSIX_FADV_DONTNEED);
	t0 = cb_now();
	for (r->in = 0; r->in < size;) {
		ssize_t n = pread(pf->fd, buf, BLOCK, r->in);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? cb_error_errno("%s: cannot read '%s'", stage, pf->path)
				     : cb_error("%s: '%s' is shorter than written", stage, pf->path);
		if (cb_check_interrupt() < 0)
			return -1;
		r->in += n;
	}
	r->seconds = cb_now() - t0;
	return 0;
}

/* ---- CPU stages ---- */

/* Feed the sample to a codec writer for about CPU_SECONDS; the output goes
 * to /dev/null through a sink without checksum (counted separately). */
static int codec_rate(const struct cb_codec_params *p, const unsigned char *data, struct rate *r)
{
	struct cb_codec_writer *w = NULL;
	struct cb_codec_stats st;
	struct cb_sink *sink = NULL;
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC), ret = -1;
	double t0 = cb_now();
	uint64_t fed = 0;

	if (fd < 0)
		return cb_error_errno("cannot open /dev/null");
	if (cb_sink_open_fd(&sink, fd, "/dev/null") < 0 || cb_codec_writer_new(&w, p, sink) < 0)
		goto cleanup;
	do {
		if (cb_check_interrupt() < 0 || cb_codec_write(w, data + fed % SAMPLE, BLOCK) < 0)
			goto cleanup;
		fed += BLOCK;
	} while (cb_now() - t0 < CPU_SECONDS);
	if (cb_codec_finish(w) < 0)
		goto cleanup;
	r->seconds = cb_now() - t0;
	cb_codec_writer_stats(w, &st);
	r->in = st.bytes_in;
	r->out = st.bytes_out;
	ret = 0;
cleanup:
	cb_codec_writer_free(w);
	cb_sink_free(sink);
	close(fd);
	return ret;
}

static void sha256_rate(const unsigned char *data, struct rate *r)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n;
	double t0 = cb_now();

	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	r->in = 0;
	do {
		EVP_DigestUpdate(ctx, data + r->in % SAMPLE, BLOCK);
		r->in += BLOCK;
	} while (cb_now() - t0 < CPU_SECONDS);
	EVP_DigestFinal_ex(ctx, md, &n);
	r->seconds = cb_now() - t0;
	EVP_MD_CTX_free(ctx);
}

/* ---- the run ---- */

struct results {
	struct rate stage_write, stage_read, store_write, sha;
	struct rate text[4], random[4];   /* by enum cb_compress (none unused) */
};

static const char *threads_note(const struct cb_opts *o, enum cb_compress c, char *buf, size_t len)
{
	if (c == CB_COMPRESS_ZSTD)
		snprintf(buf, len, o->zstd_threads ? "%d threads" : "all cores", o->zstd_threads);
	else if (c == CB_COMPRESS_GZIP && o->pigz_threads == 0)
		snprintf(buf, len, "one stream");
	else if (c == CB_COMPRESS_GZIP)
		snprintf(buf, len, o->pigz_threads == 1 ? "pigz, half the cores" : "pigz %d threads",
			 o->pigz_threads);
	else
		snprintf(buf, len, "all cores");
	return buf;
}

/* The tmpdir (is_staging: read back too, as pass 2 and the archive read the
 * staged copy) or the storage (written as an archive is). */
static int probe_disk(const char *dir, const char *what, const struct samples *sm, int is_staging,
		      struct rate *wr, struct rate *rd, struct cb_log *log)
{
	struct probe_file pf = { NULL, -1, -1 };
	unsigned char *buf = NULL;
	char w[32], r[32], size[32];
	int ret = -1;

	if (probe_file_create(&pf, dir, what) < 0 ||
	    write_for_a_while(&pf, sm->random, what, !is_staging, wr) < 0)
		goto cleanup;
	fmt_rate(w, sizeof(w), per_second(wr));
	cb_fmt_bytes(size, sizeof(size), wr->in);
	if (is_staging) {
		buf = cb_xmalloc(BLOCK);
		if (read_back(&pf, buf, wr->in, what, rd) < 0)
			goto cleanup;
		fmt_rate(r, sizeof(r), per_second(rd));
		cb_info(log, "probe: %s '%s': write %s (%s, fsync included), read %s", what, dir, w, size,
			r);
	} else {
		cb_info(log, "probe: %s '%s': write %s (%s, fsync included)", what, dir, w, size);
	}
	ret = 0;
cleanup:
	free(buf);
	probe_file_remove(&pf);
	return ret;
}

static int probe_codecs(const struct cb_opts *o, const struct samples *sm, struct results *res,
			struct cb_log *log)
{
	static const enum cb_compress codecs[] = { CB_COMPRESS_ZSTD, CB_COMPRESS_LZO, CB_COMPRESS_GZIP };
	char note[48], t[32], rnd[32];

	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++) {
		enum cb_compress c = codecs[i];
		struct cb_codec_params p;

		cb_codec_params_for(o, c, &p);
		if (codec_rate(&p, sm->text, &res->text[c]) < 0 ||
		    codec_rate(&p, sm->random, &res->random[c]) < 0)
			return cb_error_prefix("compress %s: ", cb_compress_name(c));
		fmt_rate(t, sizeof(t), per_second(&res->text[c]));
		fmt_rate(rnd, sizeof(rnd), per_second(&res->random[c]));
		cb_info(log, "probe: compress %s (%s)%s: text %s to %.0f%%, incompressible %s%s",
			cb_compress_name(c), threads_note(o, c, note, sizeof(note)),
			c == o->compress ? " [configured]" : "", t,
			100.0 * res->text[c].out / (res->text[c].in ? res->text[c].in : 1), rnd,
			o->compress_policy == CB_POLICY_AUTO ? " (stored)" : "");
	}
	sha256_rate(sm->random, &res->sha);
	fmt_rate(t, sizeof(t), per_second(&res->sha));
	cb_info(log, "probe: checksum sha256 (the .sha256, on its own thread): %s", t);
	return 0;
}

/* The archive stage runs at the pace of its slowest part, each counted in
 * bytes of tar: the staged copy is read, compressed, and the compressed
 * bytes are hashed and written. */
static void summarize(const struct cb_opts *o, const struct results *res, int text, struct cb_log *log)
{
	const struct rate *comp = o->compress == CB_COMPRESS_NONE ? NULL
				  : text ? &res->text[o->compress] : &res->random[o->compress];
	double ratio = comp && comp->in ? (double)comp->out / comp->in : 1.0;
	struct { const char *name; double rate; } parts[] = {
		{ "staging read", per_second(&res->stage_read) },
		{ "compress", comp ? per_second(comp) : 0 },
		{ "checksum", per_second(&res->sha) / ratio },
		{ "storage write", per_second(&res->store_write) / ratio },
	};
	size_t slowest = 0;
	char r[32];

	for (size_t i = 1; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (parts[i].rate > 0 && parts[i].rate < parts[slowest].rate)
			slowest = i;
	fmt_rate(r, sizeof(r), parts[slowest].rate);
	cb_info(log, "probe: compress=%s, %s data: archive stage about %s - slowest: %s",
		cb_compress_name(o->compress), text ? "compressible" : "incompressible", r,
		parts[slowest].name);
}

int cb_probe_run(const struct cb_opts *o, struct cb_log *log)
{
	struct results res;
	struct samples sm;
	int ret = -1;

	memset(&res, 0, sizeof(res));
	make_samples(&sm);
	if (probe_disk(o->tmpdir, "staging (tmpdir)", &sm, 1, &res.stage_write, &res.stage_read, log) < 0 ||
	    probe_codecs(o, &sm, &res, log) < 0 ||
	    probe_disk(o->dumpdir, "storage (dumpdir)", &sm, 0, &res.store_write, NULL, log) < 0)
		goto cleanup;
	if (o->bwlimit)
		cb_info(log, "probe: bwlimit %ld KiB/s applies to backups, not to these figures", o->bwlimit);
	summarize(o, &res, 1, log);
	summarize(o, &res, 0, log);
	ret = 0;
cleanup:
	free(sm.text);
	free(sm.random);
	return ret;
}
