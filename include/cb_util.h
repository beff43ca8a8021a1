/*
 * cb_util: error reporting, memory helpers, string vectors, formatting.
 *
 * Errors: a function that fails returns -1 (or NULL) after recording a
 * message with cb_error()/cb_error_errno(). Only the top (backup/main) reads
 * it with cb_last_error() and reports it once. The message buffer is
 * thread-local, like errno, so that deep helpers need no extra parameter.
 * Messages are lowercase and quote paths as '%s' (git style).
 */
#ifndef CB_UTIL_H
#define CB_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <sys/types.h>

#define CB_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Record an error message; always returns -1. */
int cb_error(const char *fmt, ...) CB_PRINTF(1, 2);
/* Same, with ": strerror(errno)" appended (errno is preserved). */
int cb_error_errno(const char *fmt, ...) CB_PRINTF(1, 2);
/* The last recorded message ("" if none). Valid until the next cb_error. */
const char *cb_last_error(void);
/* Prefix the current message: "CONTEXT: old message". Returns -1. */
int cb_error_prefix(const char *fmt, ...) CB_PRINTF(1, 2);

/* Allocation that aborts on out-of-memory (as git's xmalloc). */
void *cb_xmalloc(size_t n);
void *cb_xcalloc(size_t n, size_t size);
void *cb_xrealloc(void *p, size_t n);
char *cb_xstrdup(const char *s);
/* Large buffers (1 MiB and up, reused for a whole archive): aligned to
 * 2 MiB and offered to transparent huge pages, so that the first touch
 * costs one page fault per 2 MiB instead of one per 4 KiB. Aborts on
 * out-of-memory; free with the same size. */
void *cb_xmalloc_huge(size_t n);
void cb_free_huge(void *p, size_t n);
/* Large buffers sized for the worst case and mostly used far less (a
 * segment of up to 2 units, its compressed bytes): small pages, so that
 * only those touched count in the resident set; cb_pages_drop() gives the
 * part of a buffer past what it usually holds back after a rare large
 * use (those pages read as zeros when touched again). Free with
 * cb_free_huge. */
void *cb_xmalloc_pages(size_t n);
/* Buffer buf of cap bytes that just held used: the pages past keep
 * given back when used went past it. */
void cb_pages_trim(void *buf, size_t cap, size_t keep, size_t used);
char *cb_xasprintf(const char *fmt, ...) CB_PRINTF(1, 2);

/* A growable NULL-terminated array of owned strings. */
struct cb_strvec {
	char **v;       /* v[n] == NULL; v may be NULL when n == 0 */
	size_t n, alloc;
};
#define CB_STRVEC_INIT { NULL, 0, 0 }
void cb_strvec_push(struct cb_strvec *sv, const char *s);
void cb_strvec_clear(struct cb_strvec *sv);
void cb_strvec_copy(struct cb_strvec *dst, const struct cb_strvec *src);

/* "1.9GiB", "46MiB", "512B": binary units, one decimal below 10. */
void cb_fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* vzdump's size format: "572MB", "1.23GB". */
void cb_fmt_vzsize(char *buf, size_t len, uint64_t bytes);
/* "00:01:35" */
void cb_fmt_hms(char *buf, size_t len, double seconds);
/* Monotonic clock in seconds. */
double cb_now(void);

/* write() all of buf, retrying on EINTR/short writes; -1 with errno set. */
int cb_write_all(int fd, const void *buf, size_t len);
/* The same with pwrite() at off; a write that takes nothing is ENOSPC. */
int cb_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Read exactly len bytes (EINTR retried); -1 on an error or an early end. */
int cb_read_all(int fd, void *buf, size_t len);
/* The same at offset off, with pread (the file offset is not moved). */
int cb_pread_all(int fd, void *buf, size_t len, uint64_t off);

/* Open path for reading (flags: more O_ flags) only if it is a regular
 * file: a dump directory others can write to may hold a FIFO, device,
 * directory or symlink in the place of an archive, catalog or side file.
 * Not through a symlink (O_NOFOLLOW), never blocking in open()
 * (O_NONBLOCK, cleared again for a regular file unless flags has it), the
 * type checked on the fd (*st filled if st is not NULL). The fd, or -1
 * with the error set ("cannot open WHAT 'path': ...", or "WHAT 'path' is
 * a FIFO, not a regular file") and errno: the open's, EINVAL for a name
 * that is no regular file. what: "catalog", "" for none. */
struct stat;
int cb_open_regular(const char *path, int flags, const char *what, struct stat *st);
/* The same for a path the user gave (an archive named on the command
 * line): a symlink is followed, the rest is the same. */
int cb_open_regular_given(const char *path, const char *what, struct stat *st);

/* This host's name without its domain (vzdump's node name). */
void cb_node_name(char *buf, size_t len);

/* pthread_create() of a helper thread that leaves every signal to the main
 * thread, whose handlers thaw the guest and clean up, and whose blocking
 * calls they interrupt. Every helper thread is started so. 0 or -1. */
int cb_thread_start(pthread_t *th, void *(*fn)(void *), void *arg);
/* Run fn(arg) on a thread with a CB_DEEP_STACK stack and wait for it; its
 * return value, and its error message on -1, are the caller's. The tree
 * walks recurse once per directory level (a few hundred bytes of stack a
 * level): the 8 MiB main stack ends at ~15,000 levels, this one at about
 * half a million (only the pages touched are used). Runs fn on the
 * caller's own stack if such a thread cannot be made. */
#define CB_DEEP_STACK ((size_t)256 << 20)
int cb_call_deep(int (*fn)(void *), void *arg);
/* cb_thread_start() on a CB_DEEP_STACK stack. 0 or -1. */
int cb_thread_start_deep(pthread_t *th, void *(*fn)(void *), void *arg);

/* The names in directory dfd (without . and ..), sorted (strcmp), added to
 * names. 0, or -1 with errno (names left empty). */
int cb_dir_names(int dfd, struct cb_strvec *names);
/* The same, with each name's d_type (DT_UNKNOWN where the file system does
 * not say) in *types, names->n of them, the caller's to free. */
int cb_dir_names_types(int dfd, struct cb_strvec *names, unsigned char **types);

/* The candidate closest to WORD (a typo: at most a third of its letters
 * wrong, and 3), or NULL: for "did you mean". */
const char *cb_closest_word(const char *word, const char *const *cands, size_t n);

/* 1 if standard output is a pipe or socket its reader closed (`| head`):
 * what failed was the writing, and as tar a command ends quietly. */
int cb_stdout_gone(void);

/* The executable NAME found on PATH (malloc'ed), or NULL. */
char *cb_find_on_path(const char *name);

#endif
