/* test_ctx.c - the context (ctx.c): result codes and exit statuses, the
 * error detail and its errno suffix, logging, cancellation and the nap
 * that honours it, full-length I/O on pipes and short files, temporary
 * names, digests in hex. */
#include "unit.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

static void test_codes(void **state)
{
	(void)state;
	assert_string_equal(stg_version(), STG_VERSION_STRING);
	/* every code has its own description; an unknown one says so */
	const char *seen[STG_ENOTSUP + 1];
	for (int e = STG_OK; e <= STG_ENOTSUP; e++) {
		seen[e] = stg_strerror((stg_err)e);
		assert_non_null(seen[e]);
		assert_string_not_equal(seen[e], "unknown error");
		for (int j = 0; j < e; j++)
			assert_string_not_equal(seen[e], seen[j]);
	}
	assert_string_equal(stg_strerror((stg_err)99), "unknown error");
	assert_string_equal(stg_strerror(STG_OK), "success");
	/* exit statuses as the man page lists them */
	static const int want[] = {
	        [STG_OK] = 0,       [STG_EUSAGE] = 1, [STG_ENOENT] = 2,  [STG_ENOSPC] = 3,
	        [STG_ECORRUPT] = 4, [STG_EINTR] = 5,  [STG_EREMOTE] = 6, [STG_EIO] = 7,
	        [STG_ENOMEM] = 7,   [STG_EEXIST] = 1, [STG_ENOTSUP] = 1,
	};
	for (int e = STG_OK; e <= STG_ENOTSUP; e++)
		assert_int_equal(stg_exit_status((stg_err)e), want[e]);
	assert_int_equal(stg_exit_status((stg_err)99), 7);
}

static void test_fail(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	assert_non_null(ctx);
	assert_string_equal(stg_errmsg(ctx), "");
	assert_int_equal(stg_errno(ctx), 0);
	assert_int_equal(stg__fail(ctx, STG_ECORRUPT, "frame %d of '%s'", 3, "p.tar.zst"),
	                 STG_ECORRUPT);
	assert_string_equal(stg_errmsg(ctx), "frame 3 of 'p.tar.zst'");
	/* the next failure replaces the detail */
	assert_int_equal(stg__fail_errno(ctx, STG_EIO, ENOENT, "cannot open '%s'", "x"), STG_EIO);
	char want[256];
	snprintf(want, sizeof want, "cannot open 'x': %s", strerror(ENOENT));
	assert_string_equal(stg_errmsg(ctx), want);
	/* the errno is kept for stg_errno, until the next failure */
	assert_int_equal(stg_errno(ctx), ENOENT);
	stg__fail(ctx, STG_EIO, "no errno");
	assert_int_equal(stg_errno(ctx), 0);
	stg__fail_errno(ctx, STG_ENOENT, EACCES, "x");
	assert_int_equal(stg_errno(ctx), EACCES);
	/* errnum 0: no suffix */
	stg__fail_errno(ctx, STG_EIO, 0, "short read");
	assert_string_equal(stg_errmsg(ctx), "short read");
	assert_int_equal(stg_errno(ctx), 0);
	/* a detail longer than the buffer is cut and terminated; the errno
	 * suffix that does not fit is dropped rather than half-written */
	char big[3000];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	stg__fail_errno(ctx, STG_EIO, ENOSPC, "%s", big);
	assert_int_equal(strlen(stg_errmsg(ctx)), STG_ERRMSG_MAX - 1);
	assert_null(strchr(stg_errmsg(ctx), ':'));
	/* one that fits, with its suffix cut at the end of the buffer */
	memset(big, 'b', STG_ERRMSG_MAX - 5);
	big[STG_ERRMSG_MAX - 5] = '\0';
	stg__fail_errno(ctx, STG_EIO, ENOSPC, "%s", big);
	assert_int_equal(strlen(stg_errmsg(ctx)), STG_ERRMSG_MAX - 1);
	assert_memory_equal(stg_errmsg(ctx) + STG_ERRMSG_MAX - 5, ": ", 2);
	stg_ctx_free(ctx);
	stg_ctx_free(NULL);
}

static void test_errno_map(void **state)
{
	(void)state;
	assert_int_equal(stg__err_from_errno(ENOSPC, STG_EIO), STG_ENOSPC);
	assert_int_equal(stg__err_from_errno(EDQUOT, STG_EIO), STG_ENOSPC);
	assert_int_equal(stg__err_from_errno(ENOMEM, STG_EIO), STG_ENOMEM);
	assert_int_equal(stg__err_from_errno(EINTR, STG_EIO), STG_EINTR);
	assert_int_equal(stg__err_from_errno(ENOENT, STG_ENOENT), STG_ENOENT);
	assert_int_equal(stg__err_from_errno(EACCES, STG_EIO), STG_EIO);
	assert_int_equal(stg__err_from_errno(0, STG_ECORRUPT), STG_ECORRUPT);
}

typedef struct logged {
	int n;
	stg_log_level level;
	char msg[STG_ERRMSG_MAX + 8];
} logged;

static void log_fn(void *arg, stg_log_level level, const char *msg)
{
	logged *l = arg;
	l->n++;
	l->level = level;
	snprintf(l->msg, sizeof l->msg, "%s", msg);
}

static void test_log(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	/* no callback: nothing happens */
	stg__log(ctx, STG_LOG_WARN, "dropped %d", 1);
	logged l = {0};
	stg_set_log(ctx, log_fn, &l);
	stg__log(ctx, STG_LOG_WARN, "skipping '%s': a socket", "s");
	assert_int_equal(l.n, 1);
	assert_int_equal(l.level, STG_LOG_WARN);
	assert_string_equal(l.msg, "skipping 's': a socket");
	stg__log(ctx, STG_LOG_DEBUG, "d");
	assert_int_equal(l.level, STG_LOG_DEBUG);
	char big[4000];
	memset(big, 'z', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	stg__log(ctx, STG_LOG_INFO, "%s", big);
	assert_int_equal(strlen(l.msg), STG_ERRMSG_MAX - 1);
	/* and the log does not touch the error detail */
	assert_string_equal(stg_errmsg(ctx), "");
	stg_set_log(ctx, NULL, NULL);
	stg__log(ctx, STG_LOG_WARN, "gone");
	assert_int_equal(l.n, 3);
	stg_ctx_free(ctx);
}

static void test_threads(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
	assert_int_equal(stg__threads(ctx), want);
	stg_set_threads(ctx, 3);
	assert_int_equal(stg__threads(ctx), 3);
	stg_set_threads(ctx, 1000);
	assert_int_equal(stg__threads(ctx), 64);
	stg_set_threads(ctx, -5);
	assert_int_equal(stg__threads(ctx), want);
	stg_ctx_free(ctx);
}

static void *cancel_later(void *arg)
{
	struct timespec ts = {0, 150 * 1000 * 1000};
	nanosleep(&ts, NULL);
	stg_cancel(arg);
	return NULL;
}

static void test_nap_cancel(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	double t0 = stg__now();
	assert_true(stg__nap(ctx, 0.25));
	double t = stg__now() - t0;
	assert_true(t >= 0.25);
	ut_assert_time_below(t, 1.5);
	/* NULL ctx: a plain sleep */
	t0 = stg__now();
	assert_true(stg__nap(NULL, 0.05));
	assert_true(stg__now() - t0 >= 0.05);
	/* cancelled from another thread: the nap ends within a step */
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, ctx), 0);
	t0 = stg__now();
	assert_false(stg__nap(ctx, 30));
	t = stg__now() - t0;
	pthread_join(th, NULL);
	ut_assert_time_below(t, 5);
	assert_true(stg__cancelled(ctx));
	/* once cancelled, a nap returns at once */
	t0 = stg__now();
	assert_false(stg__nap(ctx, 10));
	ut_assert_time_below(stg__now() - t0, 0.5);
	/* zero and negative naps */
	stg_ctx *c2 = stg_ctx_new();
	assert_true(stg__nap(c2, 0));
	assert_true(stg__nap(c2, -1));
	stg_ctx_free(c2);
	stg_ctx_free(ctx);
}

typedef struct drain {
	int fd;
	size_t got;
	uint64_t sum;
} drain;

static void *drain_pipe(void *arg)
{
	drain *d = arg;
	uint8_t buf[7001]; /* odd size: short reads on the other end */
	ssize_t n;
	while ((n = read(d->fd, buf, sizeof buf)) > 0) {
		for (ssize_t i = 0; i < n; i++)
			d->sum = d->sum * 31 + buf[i];
		d->got += (size_t)n;
	}
	return NULL;
}

static void test_write_full(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	int p[2];
	assert_int_equal(pipe(p), 0);
	/* far more than a pipe holds: many partial writes */
	size_t len = 3 << 20;
	uint8_t *buf = ut_malloc(len);
	ut_fill(buf, len, 42);
	uint64_t want = 0;
	for (size_t i = 0; i < len; i++)
		want = want * 31 + buf[i];
	drain d = {p[0], 0, 0};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, drain_pipe, &d), 0);
	assert_int_equal(stg__write_full(p[1], buf, len), 0);
	assert_int_equal(stg__write_full(p[1], buf, 0), 0);
	close(p[1]);
	pthread_join(th, NULL);
	assert_int_equal(d.got, len);
	assert_true(d.sum == want);
	close(p[0]);
	/* a pipe nobody reads: EPIPE */
	assert_int_equal(pipe(p), 0);
	close(p[0]);
	errno = 0;
	assert_int_equal(stg__write_full(p[1], buf, 10), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	/* a bad descriptor */
	assert_int_equal(stg__write_full(-1, buf, 10), -1);
	assert_int_equal(errno, EBADF);
	free(buf);
}

static void test_pread_full(void **state)
{
	(void)state;
	char *dir = ut_tmpdir();
	uint8_t data[10000];
	ut_fill(data, sizeof data, 7);
	ut_write(dir, "f", data, sizeof data);
	char *path = ut_join(dir, "f");
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	uint8_t buf[10000];
	assert_int_equal(stg__pread_full(fd, buf, sizeof buf, 0), 0);
	assert_memory_equal(buf, data, sizeof data);
	assert_int_equal(stg__pread_full(fd, buf, 100, 9900), 0);
	assert_memory_equal(buf, data + 9900, 100);
	assert_int_equal(stg__pread_full(fd, buf, 0, 20000), 0);
	/* short: -1 with errno 0, whatever errno was */
	errno = EAGAIN;
	assert_int_equal(stg__pread_full(fd, buf, 101, 9900), -1);
	assert_int_equal(errno, 0);
	errno = EAGAIN;
	assert_int_equal(stg__pread_full(fd, buf, 1, 10000), -1);
	assert_int_equal(errno, 0);
	close(fd);
	/* a real error keeps its errno */
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(stg__pread_full(p[0], buf, 1, 0), -1);
	assert_int_equal(errno, ESPIPE);
	close(p[0]);
	close(p[1]);
	ut_rmtree(dir);
	free(path);
	free(dir);
}

static void test_tmp_names(void **state)
{
	(void)state;
	char pid[32];
	snprintf(pid, sizeof pid, ".%ld.", (long)getpid());
	char *a = stg__tmp_name("/d/e/pack.tar.zst", "tmp");
	char *b = stg__tmp_name("/d/e/pack.tar.zst", "tmp");
	assert_non_null(a);
	assert_non_null(b);
	/* a sibling, hidden, naming the tag, the file and the process */
	assert_memory_equal(a, "/d/e/.stager-tmp.pack.tar.zst.", 30);
	assert_non_null(strstr(a, pid));
	assert_string_not_equal(a, b);
	free(a);
	free(b);
	/* a trailing slash is not a component; a bare name stays bare */
	a = stg__tmp_name("/d/e/dir//", "unpack");
	assert_memory_equal(a, "/d/e/.stager-unpack.dir.", 24);
	assert_null(strchr(a + 5, '/'));
	free(a);
	a = stg__tmp_name("name", "x");
	assert_memory_equal(a, ".stager-x.name.", 15);
	free(a);
	a = stg__tmp_name("/", "x");
	assert_memory_equal(a, "/.stager-x..", 12);
	free(a);

	char *dir = ut_tmpdir(), *target = ut_join(dir, "out");
	char *n1 = NULL, *n2 = NULL;
	mode_t old = umask(022);
	int f1 = stg__create_tmp(target, "t", &n1);
	int f2 = stg__create_tmp(target, "t", &n2);
	umask(old);
	assert_true(f1 >= 0);
	assert_true(f2 >= 0);
	assert_string_not_equal(n1, n2);
	assert_memory_equal(n1, dir, strlen(dir));
	assert_memory_equal(n1 + strlen(dir), "/.stager-t.out.", 15);
	struct stat st;
	assert_int_equal(fstat(f1, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0644);
	/* opened for writing, close-on-exec */
	assert_int_equal(write(f1, "x", 1), 1);
	assert_true(fcntl(f1, F_GETFD) & FD_CLOEXEC);
	close(f1);
	close(f2);
	assert_int_equal(access(n1, F_OK), 0);
	free(n1);
	free(n2);
	/* where it cannot be made: -1 and the reason */
	char *nowhere = ut_join(dir, "missing/out");
	char *n3 = (char *)0x1;
	assert_int_equal(stg__create_tmp(nowhere, "t", &n3), -1);
	assert_int_equal(errno, ENOENT);
	assert_ptr_equal(n3, (char *)0x1);
	ut_rmtree(dir);
	free(nowhere);
	free(target);
	free(dir);
}

static void test_digest_hex(void **state)
{
	(void)state;
	uint8_t d[STG_DIGEST_LEN];
	for (int i = 0; i < STG_DIGEST_LEN; i++)
		d[i] = (uint8_t)(i * 8 + 1);
	char hex[STG_DIGEST_HEXLEN + 2];
	memset(hex, 'X', sizeof hex);
	stg_digest_hex(d, hex);
	assert_int_equal(strlen(hex), STG_DIGEST_HEXLEN);
	assert_memory_equal(hex, "0109111921293139", 16);
	assert_memory_equal(hex + 56, "e1e9f1f9", 8);
	assert_int_equal(hex[STG_DIGEST_HEXLEN + 1], 'X');
	/* monotonic clock */
	double a = stg__now(), b = stg__now();
	assert_true(b >= a);
	assert_true(a > 0);
}

/* I/O buffers start on a page and hold what was asked, 0 bytes included */
static void test_io_alloc(void **state)
{
	(void)state;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t sizes[] = {0, 1, 4096, 4097, 1u << 20, (4u << 20) + 110};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		uint8_t *p = stg__io_alloc(sizes[i]);
		assert_non_null(p);
		assert_int_equal((uintptr_t)p % page, 0);
		memset(p, 0xa5, sizes[i] ? sizes[i] : 1); /* all of it is ours */
		free(p);
	}
	assert_null(stg__io_alloc(SIZE_MAX));
	assert_null(stg__io_alloc(SIZE_MAX - 10));
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes),      cmocka_unit_test(test_fail),
        cmocka_unit_test(test_errno_map),  cmocka_unit_test(test_log),
        cmocka_unit_test(test_threads),    cmocka_unit_test(test_nap_cancel),
        cmocka_unit_test(test_write_full), cmocka_unit_test(test_pread_full),
        cmocka_unit_test(test_tmp_names),  cmocka_unit_test(test_digest_hex),
        cmocka_unit_test(test_io_alloc),
};

UT_MAIN(tests)
