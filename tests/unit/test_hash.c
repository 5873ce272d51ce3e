/*
 * test_hash.c - the one hash loop (hash.c): whole files and ranges, read
 * and pread, growth caught, a sink fed exactly what was hashed, a file
 * sink, cancellation, the bandwidth bucket, progress.
 */
#include "unit.h"
#include "hash.h"

#include <errno.h>

typedef struct fx {
	UT_FX;
	uint8_t *data;
	size_t len;
	int fd;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->len = (3 << 20) + 12345;
	f->data = ut_malloc(f->len);
	ut_fill(f->data, f->len, 7);
	ut_write(f->dir, "file", f->data, f->len);
	char *p = ut_join(f->dir, "file");
	f->fd = open(p, O_RDONLY);
	assert_true(f->fd >= 0);
	free(p);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	close(f->fd);
	free(f->data);
	return ut_teardown(state);
}

static void canon(XXH128_hash_t h, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	memcpy(out, c.digest, 16);
}

/* What a sink received, and an optional failure after some bytes. */
typedef struct sink {
	XXH3_state_t *xs;
	uint64_t bytes;
	int pieces, ends;
	uint64_t fail_after;
} sink;

static stg_err to_sink(void *arg, const uint8_t *p, size_t n)
{
	sink *s = arg;
	if (!n) {
		s->ends++;
		return STG_OK;
	}
	s->pieces++;
	s->bytes += n;
	XXH3_128bits_update(s->xs, p, n);
	if (s->fail_after && s->bytes >= s->fail_after)
		return STG_ENOSPC;
	return STG_OK;
}

static void test_hash_fd_and_file(void **state)
{
	fx *f = *state;
	uint8_t want[16], got[16], buf[4096];
	uint64_t size = 0;
	canon(XXH3_128bits(f->data, f->len), want);
	assert_int_equal(stg__hash_fd(f->fd, buf, sizeof buf, got, &size), 0);
	assert_int_equal(size, f->len);
	assert_memory_equal(got, want, 16);
	/* the rest of the file from where the descriptor is */
	assert_int_equal(lseek(f->fd, 1000, SEEK_SET), 1000);
	assert_int_equal(stg__hash_fd(f->fd, buf, sizeof buf, got, &size), 0);
	assert_int_equal(size, f->len - 1000);
	canon(XXH3_128bits(f->data + 1000, f->len - 1000), want);
	assert_memory_equal(got, want, 16);
	/* at the end: the hash of nothing */
	assert_int_equal(stg__hash_fd(f->fd, buf, sizeof buf, got, &size), 0);
	assert_int_equal(size, 0);
	canon(XXH3_128bits("", 0), want);
	assert_memory_equal(got, want, 16);
	/* unreadable */
	int wfd = open("/dev/null", O_WRONLY);
	assert_int_equal(stg__hash_fd(wfd, buf, sizeof buf, got, &size), -1);
	close(wfd);
	/* by name under a directory; a link is not followed, a missing file fails */
	int dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__hash_file(dfd, "file", got, &size), 0);
	assert_int_equal(size, f->len);
	canon(XXH3_128bits(f->data, f->len), want);
	assert_memory_equal(got, want, 16);
	assert_int_equal(symlinkat("file", dfd, "link"), 0);
	assert_int_equal(stg__hash_file(dfd, "link", got, &size), -1);
	assert_int_equal(errno, ELOOP);
	assert_int_equal(stg__hash_file(dfd, "nope", got, &size), -1);
	assert_int_equal(errno, ENOENT);
	close(dfd);
}

static void test_range_and_sink(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = stg_ctx_new();
	uint8_t *buf = ut_malloc(1 << 16);
	XXH3_state_t *xs = XXH3_createState();
	sink s = {.xs = XXH3_createState()};
	XXH3_128bits_reset(xs);
	XXH3_128bits_reset(s.xs);
	uint64_t done = 0, got = 0;
	stg_hash_in in = {.fd = f->fd,
	                  .off = 5000,
	                  .len = 1 << 20,
	                  .buf = buf,
	                  .buf_len = 1 << 16,
	                  .sink = to_sink,
	                  .arg = &s,
	                  .path = "file",
	                  .done = &done};
	assert_int_equal(stg__hash_read(ctx, &in, xs, &got), STG_OK);
	assert_int_equal(got, 1 << 20);
	assert_int_equal(done, 1 << 20);
	assert_int_equal(s.bytes, 1 << 20);
	assert_int_equal(s.pieces, 16);
	assert_int_equal(s.ends, 1);
	uint8_t want[16], a[16], b[16];
	canon(XXH3_128bits(f->data + 5000, 1 << 20), want);
	stg__hash_digest(xs, a);
	stg__hash_digest(s.xs, b);
	assert_memory_equal(a, want, 16);
	assert_memory_equal(b, want, 16); /* the sink got exactly what was hashed */
	/* a range past the end stops at the end */
	XXH3_128bits_reset(xs);
	in.off = (int64_t)f->len - 100;
	in.sink = NULL;
	assert_int_equal(stg__hash_read(ctx, &in, xs, &got), STG_OK);
	assert_int_equal(got, 100);
	/* the sink's error stops the loop and comes back */
	XXH3_128bits_reset(xs);
	sink s2 = {.xs = XXH3_createState(), .fail_after = 100000};
	XXH3_128bits_reset(s2.xs);
	in.off = 0;
	in.sink = to_sink;
	in.arg = &s2;
	assert_int_equal(stg__hash_read(ctx, &in, xs, &got), STG_ENOSPC);
	assert_true(s2.bytes < 200000);
	XXH3_freeState(s2.xs);
	XXH3_freeState(s.xs);
	XXH3_freeState(xs);
	free(buf);
	stg_ctx_free(ctx);
}

/* A file read whole at the size a walk saw: more bytes are caught with no
 * read of their own; fewer show as a short count. */
static void test_growth(void **state)
{
	fx *f = *state;
	uint8_t buf[4096];
	XXH3_state_t *xs = XXH3_createState();
	uint64_t got;
	XXH3_128bits_reset(xs);
	stg_hash_in in = {
	        .fd = f->fd, .len = f->len - 10, .whole = true, .buf = buf, .buf_len = sizeof buf};
	assert_int_equal(stg__hash_read(NULL, &in, xs, &got), STG_OK);
	assert_int_equal(got, f->len - 10 + 1); /* it grew */
	XXH3_128bits_reset(xs);
	in.len = f->len + 10;
	assert_int_equal(stg__hash_read(NULL, &in, xs, &got), STG_OK);
	assert_int_equal(got, f->len); /* it shrank */
	XXH3_128bits_reset(xs);
	in.len = f->len;
	assert_int_equal(stg__hash_read(NULL, &in, xs, &got), STG_OK);
	assert_int_equal(got, f->len);
	XXH3_freeState(xs);
}

/* The file sink: what it writes is what was hashed; a write that fails
 * leaves its errno. */
static void test_fd_sink(void **state)
{
	fx *f = *state;
	char *out = ut_join(f->dir, "copy");
	int d = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	uint8_t *buf = ut_malloc(1 << 20);
	XXH3_state_t *xs = XXH3_createState();
	XXH3_128bits_reset(xs);
	stg_fd_sink fs = {d, 0};
	stg_hash_in in = {.fd = f->fd,
	                  .len = STG_HASH_ALL,
	                  .buf = buf,
	                  .buf_len = 1 << 20,
	                  .sink = stg__sink_fd,
	                  .arg = &fs};
	uint64_t got;
	assert_int_equal(stg__hash_read(NULL, &in, xs, &got), STG_OK);
	close(d);
	size_t n;
	uint8_t *copy = ut_read(out, &n);
	assert_int_equal(n, f->len);
	assert_memory_equal(copy, f->data, n);
	free(copy);
	/* a sink that cannot write */
	int full = open("/dev/full", O_WRONLY);
	if (full >= 0) {
		fs = (stg_fd_sink){full, 0};
		XXH3_128bits_reset(xs);
		assert_int_equal(stg__hash_read(NULL, &in, xs, &got), STG_EIO);
		assert_int_equal(fs.err, ENOSPC);
		close(full);
	}
	XXH3_freeState(xs);
	free(buf);
	free(out);
}

static int cancel_at;
static void cancel_progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	(void)what;
	(void)total;
	if (done >= (uint64_t)cancel_at)
		stg_cancel(arg);
}

/* Cancellation between pieces (STG_EINTR, named), progress reported, the
 * bucket charged. */
static void test_cancel_progress_bucket(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = stg_ctx_new();
	cancel_at = 1 << 18;
	stg_set_progress(ctx, cancel_progress, ctx);
	uint8_t *buf = ut_malloc(1 << 16);
	XXH3_state_t *xs = XXH3_createState();
	XXH3_128bits_reset(xs);
	uint64_t done = 0, got;
	stg_hash_in in = {.fd = f->fd,
	                  .len = STG_HASH_ALL,
	                  .buf = buf,
	                  .buf_len = 1 << 16,
	                  .path = "file",
	                  .done = &done,
	                  .what = "test",
	                  .total = f->len};
	assert_int_equal(stg__hash_read(ctx, &in, xs, &got), STG_EINTR);
	assert_int_equal(errno, EINTR);
	assert_int_equal(got, 1 << 18);
	assert_string_equal(stg_errmsg(ctx), "interrupted");
	stg_ctx_free(ctx);
	/* a bucket of 8 MiB/s: 1 MiB takes about an eighth of a second */
	ctx = stg_ctx_new();
	stg_bucket b;
	stg__bucket_init(&b, 8 << 20);
	XXH3_128bits_reset(xs);
	in.done = NULL;
	in.len = 1 << 20;
	in.bw = &b;
	double t0 = stg__now();
	assert_int_equal(stg__hash_read(ctx, &in, xs, &got), STG_OK);
	double dt = stg__now() - t0;
	assert_int_equal(got, 1 << 20);
	assert_true(dt > 0.08);
	stg__bucket_destroy(&b);
	XXH3_freeState(xs);
	free(buf);
	stg_ctx_free(ctx);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_hash_fd_and_file), T(test_range_and_sink),         T(test_growth),
        T(test_fd_sink),          T(test_cancel_progress_bucket),
};

UT_MAIN(tests)
