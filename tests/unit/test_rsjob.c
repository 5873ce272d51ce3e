/* test_rsjob.c - the librsync job driver, the file-hashing loop and
 * progress reports (rsjob.c): a signature, a delta and a patch run through
 * stg__job_run from descriptors and from memory rebuild the new file; a
 * delta cut short or damaged is refused; a cancel stops a run; the hash of
 * the rest of a file is XXH3-128 (and SHA-256) of exactly those bytes. */
#include "unit.h"
#include "rsjob.h"

typedef struct sink {
	uint8_t *p;
	size_t n, cap;
	int calls;
	stg_ctx *cancel; /* cancel this ctx at the first call */
} sink;

static stg_err to_mem(void *arg, const uint8_t *p, size_t n)
{
	sink *s = arg;
	if (s->n + n > s->cap) {
		s->cap = (s->n + n) * 2;
		s->p = realloc(s->p, s->cap);
		assert_non_null(s->p);
	}
	memcpy(s->p + s->n, p, n);
	s->n += n;
	s->calls++;
	if (s->cancel)
		stg_cancel(s->cancel);
	return STG_OK;
}

static stg_err refuse(void *arg, const uint8_t *p, size_t n)
{
	(void)arg;
	(void)p;
	(void)n;
	return STG_ENOSPC;
}

typedef struct fx {
	UT_FX;
	uint8_t *old, *new_, *in, *out;
	size_t len;
	int oldfd, newfd;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->len = 3 * XFER_BLOCK + 12345; /* several reads */
	f->old = ut_malloc(f->len);
	f->new_ = ut_malloc(f->len + 100);
	ut_fill(f->old, f->len, 1);
	/* new: old with 100 bytes inserted and a block changed */
	memcpy(f->new_, f->old, 1000000);
	ut_fill(f->new_ + 1000000, 100, 2);
	memcpy(f->new_ + 1000100, f->old + 1000000, f->len - 1000000);
	ut_fill(f->new_ + 2500000, 5000, 3);
	ut_write(f->dir, "old", f->old, f->len);
	ut_write(f->dir, "new", f->new_, f->len + 100);
	char *o = ut_join(f->dir, "old"), *n = ut_join(f->dir, "new");
	f->oldfd = open(o, O_RDONLY);
	f->newfd = open(n, O_RDONLY);
	free(o);
	free(n);
	f->in = ut_malloc(XFER_BLOCK);
	f->out = ut_malloc(XFER_BLOCK);
	*state = f;
	return f->oldfd < 0 || f->newfd < 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	close(f->oldfd);
	close(f->newfd);
	free(f->old);
	free(f->new_);
	free(f->in);
	free(f->out);
	return ut_teardown(state);
}

/* The signature of old, the delta of new against it (new read from fd or
 * from memory). */
static void make_delta(fx *f, bool from_mem, sink *delta)
{
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = 0; /* librsync's choice */
	assert_int_equal(rs_sig_args((rs_long_t)f->len, &magic, &block_len, &strong_len), RS_DONE);
	rs_job_t *job = rs_sig_begin(block_len, strong_len, magic);
	sink sig = {0};
	assert_int_equal(lseek(f->oldfd, 0, SEEK_SET), 0);
	assert_int_equal(stg__job_run(f->ctx, job, f->oldfd, NULL, 0, f->in, f->out, to_mem, &sig),
	                 STG_OK);
	rs_job_free(job);
	assert_true(sig.n > 0);
	assert_true(sig.n < f->len / 10);
	rs_signature_t *s = NULL;
	job = rs_loadsig_begin(&s);
	assert_int_equal(stg__job_run(f->ctx, job, -1, sig.p, sig.n, f->in, f->out, NULL, NULL),
	                 STG_OK);
	rs_job_free(job);
	assert_int_equal(rs_build_hash_table(s), RS_DONE);
	job = rs_delta_begin(s);
	assert_int_equal(lseek(f->newfd, 0, SEEK_SET), 0);
	if (from_mem)
		assert_int_equal(stg__job_run(f->ctx, job, -1, f->new_, f->len + 100, f->in, f->out,
		                              to_mem, delta),
		                 STG_OK);
	else
		assert_int_equal(
		        stg__job_run(f->ctx, job, f->newfd, NULL, 0, f->in, f->out, to_mem, delta),
		        STG_OK);
	rs_job_free(job);
	rs_free_sumset(s);
	free(sig.p);
}

static stg_err patch(fx *f, const uint8_t *delta, size_t n, sink *out)
{
	rs_job_t *job = rs_patch_begin(stg__basis_copy, &f->oldfd);
	stg_err err = stg__job_run(f->ctx, job, -1, delta, n, f->in, f->out, to_mem, out);
	rs_job_free(job);
	return err;
}

static void test_round_trip(void **state)
{
	fx *f = *state;
	for (int from_mem = 0; from_mem < 2; from_mem++) {
		sink delta = {0}, out = {0};
		make_delta(f, from_mem, &delta);
		/* far smaller than the file: most of it is copied from old */
		assert_true(delta.n < 64 * 1024);
		assert_int_equal(patch(f, delta.p, delta.n, &out), STG_OK);
		assert_int_equal(out.n, f->len + 100);
		assert_memory_equal(out.p, f->new_, out.n);
		/* output larger than a block reaches the sink in pieces */
		assert_true(out.calls >= 4);
		free(delta.p);
		free(out.p);
	}
}

static void test_damaged(void **state)
{
	fx *f = *state;
	sink delta = {0};
	make_delta(f, false, &delta);
	/* every cut short of the whole: refused, never a silent short file */
	size_t cuts[] = {0, 1, 3, 4, 5, delta.n / 2, delta.n - 1};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		sink out = {0};
		assert_int_equal(patch(f, delta.p, cuts[i], &out), STG_ECORRUPT);
		assert_non_null(strstr(stg_errmsg(f->ctx), "librsync: "));
		free(out.p);
	}
	/* fed all but the end, with eof said: librsync's own word for it */
	sink out = {0};
	assert_int_equal(patch(f, delta.p, delta.n - 1, &out), STG_ECORRUPT);
	assert_true(!strcmp(stg_errmsg(f->ctx), "librsync: unexpected end of input") ||
	            !strcmp(stg_errmsg(f->ctx), "librsync: a truncated stream"));
	free(out.p);
	/* a bad magic number */
	delta.p[0] ^= 0xff;
	out = (sink){0};
	assert_int_equal(patch(f, delta.p, delta.n, &out), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "librsync: "));
	free(out.p);
	delta.p[0] ^= 0xff;
	/* the sink's error is passed up as it is */
	rs_job_t *job = rs_patch_begin(stg__basis_copy, &f->oldfd);
	assert_int_equal(
	        stg__job_run(f->ctx, job, -1, delta.p, delta.n, f->in, f->out, refuse, NULL),
	        STG_ENOSPC);
	rs_job_free(job);
	free(delta.p);
}

/* Fed in small pieces, a job waits for more; only eof ends it. */
static void test_feed(void **state)
{
	fx *f = *state;
	sink delta = {0}, out = {0};
	make_delta(f, false, &delta);
	rs_job_t *job = rs_patch_begin(stg__basis_copy, &f->oldfd);
	bool done = false;
	size_t off = 0;
	while (off < delta.n) {
		size_t k = delta.n - off < 777 ? delta.n - off : 777;
		assert_int_equal(stg__job_feed(f->ctx, job, delta.p + off, k, false, f->out, to_mem,
		                               &out, &done),
		                 STG_OK);
		off += k;
	}
	if (!done)
		assert_int_equal(
		        stg__job_feed(f->ctx, job, NULL, 0, true, f->out, to_mem, &out, &done),
		        STG_OK);
	assert_true(done);
	rs_job_free(job);
	assert_int_equal(out.n, f->len + 100);
	assert_memory_equal(out.p, f->new_, out.n);
	free(delta.p);
	free(out.p);
}

static void test_cancel(void **state)
{
	fx *f = *state;
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = 0; /* librsync's choice */
	assert_int_equal(rs_sig_args((rs_long_t)f->len, &magic, &block_len, &strong_len), RS_DONE);
	rs_job_t *job = rs_sig_begin(block_len, strong_len, magic);
	sink sig = {.cancel = f->ctx};
	assert_int_equal(lseek(f->oldfd, 0, SEEK_SET), 0);
	assert_int_equal(stg__job_run(f->ctx, job, f->oldfd, NULL, 0, f->in, f->out, to_mem, &sig),
	                 STG_EINTR);
	assert_string_equal(stg_errmsg(f->ctx), "interrupted");
	/* stopped after the first block read, not at the end */
	assert_true(lseek(f->oldfd, 0, SEEK_CUR) < (off_t)f->len);
	rs_job_free(job);
	free(sig.p);
	/* a descriptor that cannot be read */
	stg_ctx *ctx = stg_ctx_new();
	job = rs_sig_begin(block_len, strong_len, magic);
	int wfd = open("/dev/null", O_WRONLY);
	assert_int_equal(stg__job_run(ctx, job, wfd, NULL, 0, f->in, f->out, NULL, NULL), STG_EIO);
	assert_non_null(strstr(stg_errmsg(ctx), "reading: "));
	close(wfd);
	rs_job_free(job);
	stg_ctx_free(ctx);
}

typedef struct prog {
	int n;
	char what[16];
	uint64_t done, total;
} prog;

static void progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	prog *p = arg;
	p->n++;
	snprintf(p->what, sizeof p->what, "%s", what);
	p->done = done;
	p->total = total;
}

static void test_progress(void **state)
{
	fx *f = *state;
	stg__progress(f->ctx, "push", 1, 2); /* no callback: nothing */
	prog p = {0};
	stg_set_progress(f->ctx, progress, &p);
	stg__progress(f->ctx, "push", 10, 20);
	assert_int_equal(p.n, 1);
	assert_string_equal(p.what, "push");
	assert_int_equal(p.done, 10);
	assert_int_equal(p.total, 20);
	stg_set_progress(f->ctx, NULL, NULL);
	stg__progress(f->ctx, "push", 11, 20);
	assert_int_equal(p.n, 1);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_round_trip), T(test_damaged), T(test_feed), T(test_cancel), T(test_progress),
};

UT_MAIN(tests)
