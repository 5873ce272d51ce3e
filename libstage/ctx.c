/*
 * ctx.c - the context: error detail, callbacks, cancellation; and the small
 * helpers every module uses (full-length I/O, temporary names, the clock).
 *
 * The context is the only place an error's detail lives.  A module that
 * fails calls stg__fail() once, at the point where it knows the most (path,
 * offset, the underlying library's message), and returns the code upward
 * untouched.
 */
#include "ctx.h"

#include <stdatomic.h>
#include <time.h>

#include <errno.h>
#include <fcntl.h>
#include <librsync.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *stg_version(void)
{
	return STG_VERSION_STRING;
}

const char *stg_strerror(stg_err err)
{
	switch (err) {
	case STG_OK: return "success";
	case STG_EUSAGE: return "invalid argument";
	case STG_ENOENT: return "source missing or unreadable";
	case STG_ENOSPC: return "not enough space";
	case STG_ECORRUPT: return "integrity failure";
	case STG_EINTR: return "interrupted";
	case STG_EREMOTE: return "remote or transport failure";
	case STG_EIO: return "I/O error";
	case STG_ENOMEM: return "out of memory";
	case STG_EEXIST: return "destination exists";
	case STG_ENOTSUP: return "not supported";
	}
	return "unknown error";
}

int stg_exit_status(stg_err err)
{
	switch (err) {
	case STG_OK: return 0;
	case STG_EUSAGE: return 1;
	case STG_EEXIST: return 1;
	case STG_ENOTSUP: return 1;
	case STG_ENOENT: return 2;
	case STG_ENOSPC: return 3;
	case STG_ECORRUPT: return 4;
	case STG_EINTR: return 5;
	case STG_EREMOTE: return 6;
	case STG_EIO: return 7;
	case STG_ENOMEM: return 7;
	}
	return 7;
}

/* librsync logs to stderr unless told otherwise; a library must not print,
 * and every failure reaches the caller as a result code anyway */
static void rsync_quiet(rs_loglevel level, char const *msg)
{
	(void)level;
	(void)msg;
}

stg_ctx *stg_ctx_new(void)
{
	rs_trace_to(rsync_quiet);
	return calloc(1, sizeof(stg_ctx));
}

void stg_ctx_free(stg_ctx *ctx)
{
	free(ctx);
}

void stg_set_log(stg_ctx *ctx, stg_log_fn fn, void *arg)
{
	ctx->log_fn = fn;
	ctx->log_arg = arg;
}

void stg_set_progress(stg_ctx *ctx, stg_progress_fn fn, void *arg)
{
	ctx->progress_fn = fn;
	ctx->progress_arg = arg;
}

void stg_set_threads(stg_ctx *ctx, int threads)
{
	ctx->threads = threads < 0 ? 0 : threads;
}

void stg_cancel(stg_ctx *ctx)
{
	ctx->cancelled = 1;
}

const char *stg_errmsg(const stg_ctx *ctx)
{
	return ctx->errmsg;
}

int stg_errno(const stg_ctx *ctx)
{
	return ctx->errnum;
}

int stg__threads(const stg_ctx *ctx)
{
	if (ctx->threads > 0)
		return ctx->threads > 64 ? 64 : ctx->threads;
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n < 1)
		n = 1;
	return n > 64 ? 64 : (int)n;
}

static stg_err vfail(stg_ctx *ctx, stg_err err, int errnum, const char *fmt, va_list ap)
{
	int n = vsnprintf(ctx->errmsg, sizeof ctx->errmsg, fmt, ap);
	ctx->errnum = errnum;
	if (errnum && n >= 0 && (size_t)n < sizeof ctx->errmsg)
		snprintf(ctx->errmsg + n, sizeof ctx->errmsg - (size_t)n, ": %s", strerror(errnum));
	return err;
}

stg_err stg__fail(stg_ctx *ctx, stg_err err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, err, 0, fmt, ap);
	va_end(ap);
	return err;
}

stg_err stg__fail_errno(stg_ctx *ctx, stg_err err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(ctx, err, errnum, fmt, ap);
	va_end(ap);
	return err;
}

stg_err stg__err_from_errno(int errnum, stg_err otherwise)
{
	switch (errnum) {
	case ENOSPC:
	case EDQUOT: return STG_ENOSPC;
	case ENOMEM: return STG_ENOMEM;
	case EINTR: return STG_EINTR;
	default: return otherwise;
	}
}

void stg__log(stg_ctx *ctx, stg_log_level level, const char *fmt, ...)
{
	if (!ctx->log_fn)
		return;
	char buf[STG_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	ctx->log_fn(ctx->log_arg, level, buf);
}

/* All of buf written at off, or where fd stands when off < 0 (a pipe). */
static int write_all(int fd, const void *buf, size_t len, int64_t off)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int stg__write_full(int fd, const void *buf, size_t len)
{
	return write_all(fd, buf, len, -1);
}

int stg__pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = 0;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int stg__pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	if (off > INT64_MAX) {
		errno = EINVAL;
		return -1;
	}
	return write_all(fd, buf, len, (int64_t)off);
}

size_t stg__hex(const uint8_t *b, size_t n, char *out)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * n] = '\0';
	return 2 * n;
}

void stg_digest_hex(const uint8_t digest[STG_DIGEST_LEN], char *out)
{
	stg__hex(digest, STG_DIGEST_LEN, out);
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

int stg_digest_parse(const char *hex, uint8_t digest[STG_DIGEST_LEN])
{
	if (!hex || strlen(hex) != STG_DIGEST_HEXLEN)
		return -1;
	for (size_t i = 0; i < STG_DIGEST_LEN; i++) {
		int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		digest[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

char *stg__tmp_name(const char *path, const char *tag)
{
	static atomic_uint counter;
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	size_t slash = len;
	while (slash > 0 && path[slash - 1] != '/')
		slash--;
	size_t need = len + strlen(tag) + 64;
	char *out = malloc(need);
	if (!out)
		return NULL;
	unsigned n = atomic_fetch_add(&counter, 1);
	snprintf(out, need, "%.*s.stager-%s.%.*s.%ld.%u", (int)slash, path, tag, (int)(len - slash),
	         path + slash, (long)getpid(), n);
	return out;
}

int stg__create_tmp(const char *path, const char *tag, char **name)
{
	for (int tries = 0; tries < 100; tries++) {
		char *tmp = stg__tmp_name(path, tag);
		if (!tmp) {
			errno = ENOMEM;
			return -1;
		}
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
		if (fd >= 0) {
			*name = tmp;
			return fd;
		}
		int e = errno;
		free(tmp);
		if (e != EEXIST) {
			errno = e;
			return -1;
		}
	}
	errno = EEXIST;
	return -1;
}

double stg__now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

bool stg__nap(stg_ctx *ctx, double s)
{
	while (s > 0 && !(ctx && stg__cancelled(ctx))) {
		double step = s < 0.1 ? s : 0.1;
		struct timespec ts = {(time_t)step, (long)((step - (double)(time_t)step) * 1e9)};
		nanosleep(&ts, NULL);
		s -= step;
	}
	return !(ctx && stg__cancelled(ctx));
}

void *stg__io_alloc(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = NULL;
	if (n > SIZE_MAX - page)
		return NULL;
	n = n ? (n + page - 1) / page * page : page;
	return posix_memalign(&p, page, n) ? NULL : p;
}

int stg__grow(void **v, size_t *cap, size_t n, size_t size, size_t max)
{
	if (n <= *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	if (c < n)
		c = n;
	if (c > max)
		c = max;
	if (c < n || c > SIZE_MAX / size)
		return -1;
	void *nv = realloc(*v, c * size);
	if (!nv)
		return -1;
	*v = nv;
	*cap = c;
	return 0;
}

int stg__room(void **v, size_t *cap, size_t n, size_t size, size_t max)
{
	size_t old = *cap;
	if (stg__grow(v, cap, n, size, max))
		return -1;
	memset((char *)*v + old * size, 0, (*cap - old) * size);
	return 0;
}
