/*
 * codec_pool: chunks compressed on worker threads, their output emitted on
 * the calling thread in submission order (pigz's scheme, without its
 * dictionary chaining: a codec that wants history copies it into the job).
 *
 * A fixed ring of threads + 2 jobs bounds the memory: one running on each
 * thread, one being filled, one being written; the caller blocks in
 * cb_pool_acquire() until the oldest job is done and written. Twice the
 * threads bought no throughput (a 642 MB root, zstd on 2 cores: 2.52 s
 * against 2.14 s, medians of 3) and cost 18 MB of peak RSS. A codec whose
 * job is filled for long (zstd gathers a whole segment in it, up to 8 MiB
 * at 4 MiB units, with as much output) asks for threads + 1. A job takes
 * an output buffer only when it is submitted and gives it back once
 * written, so there is one fewer of them than jobs: the job being filled
 * needs none (taking one waits for the oldest job, as the next
 * cb_pool_acquire() would anyway). With one
 * thread jobs run inline, so the bytes never depend on the thread count;
 * stored chunks, which need only their checksums, run inline too when
 * nothing is in flight.
 */
#include <pthread.h>
#include <stdlib.h>

#include "cb_util.h"
#include "codec_int.h"

struct cb_pool {
	const struct cb_pool_ops *ops;
	void *ctx;
	int threads;
	pthread_t *th;
	int started;                  /* threads actually running */
	struct cb_pool_job *jobs;
	unsigned char *in_mem, *out_mem;  /* the jobs' buffers */
	size_t in_cap, out_cap;
	unsigned char **free_out;     /* output buffers no job holds */
	size_t nouts, n_free;
	unsigned char *done;          /* per job slot */
	size_t njobs;
	uint64_t head, run, tail;     /* next to emit, next to run, next to fill */
	int acquired, stop, failed;
	void *inline_scratch;
	double seconds;
	pthread_mutex_t mu;
	pthread_cond_t work_cv, done_cv;
};

static void run_job(struct cb_pool *p, struct cb_pool_job *j, void *scratch)
{
	double t0 = cb_now();

	j->failed = p->ops->run(p->ctx, j, scratch) < 0;
	j->seconds = cb_now() - t0;
}

static void *worker(void *arg)
{
	struct cb_pool *p = arg;
	void *scratch = p->ops->scratch_new(p->ctx);

	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t slot;

		while (!p->stop && p->run == p->tail)
			pthread_cond_wait(&p->work_cv, &p->mu);
		if (p->stop)
			break;
		slot = p->run++ % p->njobs;
		pthread_mutex_unlock(&p->mu);
		run_job(p, &p->jobs[slot], scratch);
		pthread_mutex_lock(&p->mu);
		p->done[slot] = 1;
		pthread_cond_broadcast(&p->done_cv);
	}
	pthread_mutex_unlock(&p->mu);
	p->ops->scratch_free(scratch);
	return NULL;
}

struct cb_pool *cb_pool_new(int threads, size_t out_cap, size_t extra_size,
			    const struct cb_pool_ops *ops, void *ctx)
{
	return cb_pool_new_ring(threads, 2, CB_CODEC_CHUNK, out_cap, extra_size, ops, ctx);
}

struct cb_pool *cb_pool_new_ring(int threads, int spare, size_t in_cap, size_t out_cap,
				 size_t extra_size, const struct cb_pool_ops *ops, void *ctx)
{
	struct cb_pool *p = cb_xcalloc(1, sizeof(*p));

	p->in_cap = in_cap;
	p->ops = ops;
	p->ctx = ctx;
	p->threads = threads < 1 ? 1 : threads;
	p->njobs = p->threads == 1 ? 1 : (size_t)(p->threads + spare);
	p->jobs = cb_xcalloc(p->njobs, sizeof(*p->jobs));
	p->done = cb_xcalloc(p->njobs, 1);
	/* small pages: a job is sized for the largest frame and most hold
	 * half of it or less (huge pages made every job count whole) */
	p->out_cap = out_cap;
	p->nouts = p->njobs > 1 ? p->njobs - 1 : 1;
	p->in_mem = cb_xmalloc_pages(p->njobs * in_cap);
	p->out_mem = cb_xmalloc_pages(p->nouts * out_cap);
	p->free_out = cb_xcalloc(p->nouts, sizeof(*p->free_out));
	for (size_t i = 0; i < p->nouts; i++)
		p->free_out[p->n_free++] = p->out_mem + i * out_cap;
	for (size_t i = 0; i < p->njobs; i++) {
		p->jobs[i].in = p->in_mem + i * in_cap;
		p->jobs[i].extra = extra_size ? cb_xcalloc(1, extra_size) : NULL;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work_cv, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	if (p->threads == 1) {
		p->inline_scratch = ops->scratch_new(ctx);
		return p;
	}
	p->th = cb_xcalloc(p->threads, sizeof(*p->th));
	for (; p->started < p->threads; p->started++)
		if (cb_thread_start(&p->th[p->started], worker, p) < 0)
			break;
	/* fewer threads than asked still work; none would hang the caller */
	if (p->started == 0) {
		p->threads = 1;
		p->inline_scratch = ops->scratch_new(ctx);
	}
	return p;
}

/* Hand a finished job to the codec, its output buffer back: 1, or -1 on
 * error. */
static int emit_job(struct cb_pool *p, struct cb_pool_job *j)
{
	int ret = 1;

	p->seconds += j->seconds;
	if (j->failed ? cb_error("compression failed (chunk of %zu bytes)", j->m.len) < 0
		      : p->ops->emit(p->ctx, j) < 0) {
		p->failed = 1;
		ret = -1;
	} else {
		/* a rare large frame (a segment of 2 units, output of more
		 * than half a unit) does not keep its pages in every job */
		cb_pages_trim(j->in, p->in_cap, p->in_cap / 2, j->m.len);
		cb_pages_trim(j->out, p->out_cap, p->out_cap / 4, j->out_len);
	}
	p->free_out[p->n_free++] = j->out;
	j->out = NULL;
	return ret;
}

/* Emit the oldest job; wait for it if asked, else only if it is done.
 * Returns 1 if a job was emitted, 0 if not, -1 on error. */
static int emit_head(struct cb_pool *p, int wait)
{
	size_t slot = p->head % p->njobs;
	struct cb_pool_job *j = &p->jobs[slot];
	int ret;

	if (p->head == p->tail)
		return 0;
	if (p->started > 0) {
		pthread_mutex_lock(&p->mu);
		while (wait && !p->done[slot])
			pthread_cond_wait(&p->done_cv, &p->mu);
		ret = p->done[slot];
		p->done[slot] = 0;
		pthread_mutex_unlock(&p->mu);
		if (!ret)
			return 0;
	}
	p->head++;
	return emit_job(p, j);
}

struct cb_pool_job *cb_pool_acquire(struct cb_pool *p)
{
	if (p->failed)
		return NULL;
	if (!p->acquired && p->tail - p->head == p->njobs && emit_head(p, 1) < 0)
		return NULL;
	p->acquired = 1;
	return &p->jobs[p->tail % p->njobs];
}

/* An output buffer for the job about to be submitted: every one held is
 * a job submitted and not written yet, the oldest of which frees one. */
static int take_out(struct cb_pool *p, struct cb_pool_job *j)
{
	while (p->n_free == 0) {
		int r = emit_head(p, 1);

		if (r <= 0)
			return r < 0 ? -1 : cb_error("codec pool: no output buffer");
	}
	j->out = p->free_out[--p->n_free];
	return 0;
}

int cb_pool_submit(struct cb_pool *p)
{
	struct cb_pool_job *j = &p->jobs[p->tail % p->njobs];
	int r;

	p->acquired = 0;
	if (take_out(p, j) < 0)
		return -1;
	if (p->started == 0) {
		run_job(p, j, p->inline_scratch);
		p->tail++;
		return emit_head(p, 1) < 0 ? -1 : 0;
	}
	if (j->m.cls == CB_CHUNK_STORE && p->head == p->tail) {
		/* A stored chunk with nothing in flight needs only its checksums:
		 * done here, without a worker's wake-up or a core taken from the
		 * sink's hasher (which sets the pace on such data), and the same
		 * slot, still in the CPU's cache, is handed out next. */
		if (!p->inline_scratch)
			p->inline_scratch = p->ops->scratch_new(p->ctx);
		run_job(p, j, p->inline_scratch);
		return emit_job(p, j) < 0 ? -1 : 0;
	}
	pthread_mutex_lock(&p->mu);
	p->tail++;
	pthread_cond_signal(&p->work_cv);
	pthread_mutex_unlock(&p->mu);
	/* keep the output flowing: write whatever is already finished */
	while ((r = emit_head(p, 0)) > 0)
		;
	return r;
}

int cb_pool_drain(struct cb_pool *p)
{
	if (p->failed)
		return -1;
	while (p->head != p->tail)
		if (emit_head(p, 1) < 0)
			return -1;
	return 0;
}

double cb_pool_seconds(const struct cb_pool *p)
{
	return p->seconds / p->threads;
}

void cb_pool_free(struct cb_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->work_cv);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->started; i++)
		pthread_join(p->th[i], NULL);
	if (p->inline_scratch)
		p->ops->scratch_free(p->inline_scratch);
	for (size_t i = 0; i < p->njobs; i++) {
		if (p->ops->extra_free && p->jobs[i].extra)
			p->ops->extra_free(p->jobs[i].extra);
		free(p->jobs[i].extra);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work_cv);
	pthread_cond_destroy(&p->done_cv);
	cb_free_huge(p->in_mem, p->njobs * p->in_cap);   /* unmaps small pages too */
	cb_free_huge(p->out_mem, p->nouts * p->out_cap);
	free(p->free_out);
	free(p->th);
	free(p->jobs);
	free(p->done);
	free(p);
}
