/*
 * ctx.h - the context (struct stg_ctx: error detail, callbacks,
 * cancellation) and what every module takes from ctx.c: errors, the log,
 * the clock, full-length I/O, growing arrays, page-aligned I/O buffers,
 * temporary names.
 */
#ifndef STG_CTX_H
#define STG_CTX_H

#include "libstage.h"

#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define STG_ERRMSG_MAX 1024

struct stg_ctx {
	char errmsg[STG_ERRMSG_MAX];
	int errnum; /* the errno behind it, 0 if none (stg_errno) */
	stg_log_fn log_fn;
	void *log_arg;
	stg_progress_fn progress_fn;
	void *progress_arg;
	int threads;
	volatile sig_atomic_t cancelled;
};

/* Record the error detail on ctx and return err.  printf-style.  The errno
 * behind the last error becomes 0. */
stg_err stg__fail(stg_ctx *ctx, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* The same, appending ": strerror(errnum)", and keeping errnum for
 * stg_errno. */
stg_err stg__fail_errno(stg_ctx *ctx, stg_err err, int errnum, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
/* Map an errno from opening or reading a source to a result code. */
stg_err stg__err_from_errno(int errnum, stg_err otherwise);

void stg__log(stg_ctx *ctx, stg_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
int stg__threads(const stg_ctx *ctx);
/* Seconds on the monotonic clock. */
double stg__now(void);
/* Sleep s seconds in short steps; false (early) if ctx was cancelled. */
bool stg__nap(stg_ctx *ctx, double s);
static inline bool stg__cancelled(const stg_ctx *ctx)
{
	return ctx->cancelled != 0;
}

/* Full-length I/O that retries on EINTR and short counts.  0 or -1/errno;
 * pread_full reports a short file as -1 with errno = 0. */
int stg__write_full(int fd, const void *buf, size_t len);
/* Room for n elements of size in *v (capacity *cap, at most max, say a
 * declared count): grown by doubling as elements really appear, so that a
 * hostile count costs nothing until its bytes do.  -1 when n is over max
 * or memory is short (*v is then unchanged).  stg__room zeroes the new
 * room; stg__grow leaves it untouched, so that the pages a large array
 * has not used yet cost nothing. */
int stg__grow(void **v, size_t *cap, size_t n, size_t size, size_t max);
int stg__room(void **v, size_t *cap, size_t n, size_t size, size_t max);
int stg__pread_full(int fd, void *buf, size_t len, uint64_t off);
int stg__pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* b[0..n) as 2n lowercase hex digits and a NUL at out; returns 2n. */
size_t stg__hex(const uint8_t *b, size_t n, char *out);
/* A buffer that read(2) fills: n bytes (at least 1) on a page boundary,
 * freed with free().  The kernel copies into a page-aligned buffer about 3x
 * faster than into malloc's (16 bytes past a page: 0.65 against 0.21 s for
 * 1 GiB from tmpfs on these AMD EPYC machines, where rep movsb slows down
 * on a misaligned destination), and O_DIRECT wants one. */
void *stg__io_alloc(size_t n);

/* Name a temporary sibling of path: "<dir>/.stager-<tag>.<base>.<pid>.<n>"
 * (malloc'ed).  NULL when out of memory. */
char *stg__tmp_name(const char *path, const char *tag);
/* Create a new temporary sibling file of path (mode 0666 less the umask),
 * O_EXCL; returns the fd and its name in *name (malloc'ed), or -1/errno. */
int stg__create_tmp(const char *path, const char *tag, char **name);

#endif
