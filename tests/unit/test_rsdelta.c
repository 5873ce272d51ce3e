/*
 * test_rsdelta.c - deltas in librsync's format made and applied by
 * rsdelta.c: round trips over changed, shifted, grown and shrunk files in
 * pieces of every size; small deltas for small changes; compatibility with
 * librsync both ways; hostile deltas refused; and the file writer
 * (writer.c) that writes a patched file on a thread of its own.
 */
#include "unit.h"
#include "rsdelta.h"
#include "writer.h"

#include <errno.h>
#include <librsync.h>

typedef struct buf {
	uint8_t *p;
	size_t len, cap;
} buf;

static stg_err to_buf(void *arg, const uint8_t *p, size_t n)
{
	buf *b = arg;
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 1024;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return STG_OK;
}

/* Feed data to sink in pieces of step bytes (0: at once), then the end. */
static stg_err feed(stg_sink_fn sink, void *arg, const uint8_t *data, size_t len, size_t step)
{
	for (size_t off = 0; off < len;) {
		size_t k = step && step < len - off ? step : len - off;
		stg_err err = sink(arg, data + off, k);
		if (err)
			return err;
		off += k;
	}
	return sink(arg, NULL, 0);
}

static buf make_delta(const uint8_t *old, size_t olen, const uint8_t *new_, size_t nlen,
                      size_t step)
{
	stg_rsig *sig = stg__rsig_new(olen);
	assert_non_null(sig);
	assert_int_equal(feed(stg__rsig_sink, sig, old, olen, step), STG_OK);
	buf d = {0};
	stg_rdelta *rd = stg__rdelta_new(sig, to_buf, &d);
	assert_non_null(rd);
	assert_int_equal(feed(stg__rdelta_sink, rd, new_, nlen, step), STG_OK);
	stg__rdelta_free(rd);
	stg__rsig_free(sig);
	return d;
}

/* The old file in a temporary file, for the applier's preads. */
static int old_fd(const uint8_t *old, size_t olen)
{
	char *dir = ut_tmpdir(), *path = ut_join(dir, "old");
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	unlink(path);
	rmdir(dir);
	free(path);
	free(dir);
	assert_int_equal(write(fd, old, olen), (ssize_t)olen);
	return fd;
}

static stg_err apply(const uint8_t *old, size_t olen, const buf *d, size_t step, buf *out,
                     stg_ctx *ctx)
{
	int fd = old_fd(old, olen);
	stg_rpatch *rp = stg__rpatch_new(ctx, fd, olen, to_buf, out);
	assert_non_null(rp);
	stg_err err = feed(stg__rpatch_sink, rp, d->p, d->len, step);
	stg__rpatch_free(rp);
	close(fd);
	return err;
}

static void round_trip(const uint8_t *old, size_t olen, const uint8_t *new_, size_t nlen,
                       size_t max_delta)
{
	static const size_t steps[] = {0, 1, 7, 4096, 100000};
	stg_ctx *ctx = stg_ctx_new();
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (steps[i] == 1 && nlen > (1 << 20))
			continue;
		buf d = make_delta(old, olen, new_, nlen, steps[i]);
		if (max_delta && d.len > max_delta)
			fail_msg("delta of %zu bytes, more than %zu", d.len, max_delta);
		buf out = {0};
		assert_int_equal(apply(old, olen, &d, steps[i], &out, ctx), STG_OK);
		assert_int_equal(out.len, nlen);
		if (nlen)
			assert_memory_equal(out.p, new_, nlen);
		free(out.p);
		free(d.p);
	}
	stg_ctx_free(ctx);
}

static void test_round_trips(void **state)
{
	(void)state;
	size_t n = 3 << 20;
	uint8_t *old = ut_malloc(n), *new_ = ut_malloc(n + 70000);
	ut_fill(old, n, 1);
	/* the same */
	round_trip(old, n, old, n, 4096);
	/* changed in place: three regions */
	memcpy(new_, old, n);
	ut_fill(new_ + 100000, 5000, 2);
	ut_fill(new_ + 1500000, 300, 3);
	ut_fill(new_ + n - 10, 10, 4);
	round_trip(old, n, new_, n, 64 * 1024);
	/* shifted: bytes inserted near the start, the rest moved */
	ut_fill(new_, 777, 5);
	memcpy(new_ + 777, old, n);
	round_trip(old, n, new_, n + 777, 64 * 1024);
	/* shrunk, grown, empty either side, all new */
	round_trip(old, n, old + 1000, n - 5000, 64 * 1024);
	memcpy(new_, old, n);
	ut_fill(new_ + n, 70000, 6);
	round_trip(old, n, new_, n + 70000, 80 * 1024);
	round_trip(old, n, old, 0, 16);
	round_trip(old, 0, old, 5000, 6000);
	round_trip(old, 0, old, 0, 16);
	ut_fill(new_, n, 7);
	round_trip(old, n, new_, n, n + n / 100);
	/* a file smaller than one block: its short last block is copied */
	round_trip(old, 700, old, 700, 64);
	/* zeros: many blocks with one sum */
	memset(old, 0, n);
	memset(new_, 0, n);
	new_[n / 2] = 1;
	round_trip(old, n, new_, n, 64 * 1024);
	free(old);
	free(new_);
}

/* librsync applies our deltas; we apply librsync's. */
static void test_librsync_compat(void **state)
{
	(void)state;
	size_t n = 1 << 20;
	uint8_t *old = ut_malloc(n), *new_ = ut_malloc(n);
	ut_fill(old, n, 11);
	memcpy(new_, old, n);
	ut_fill(new_ + 400000, 3000, 12);
	buf d = make_delta(old, n, new_, n, 0);
	/* through rdiff's patch: a file each */
	char *dir = ut_tmpdir();
	ut_write(dir, "old", old, n);
	ut_write(dir, "new", new_, n);
	ut_write(dir, "delta", d.p, d.len);
	char *po = ut_join(dir, "old"), *pd = ut_join(dir, "delta"), *pn = ut_join(dir, "new");
	char *pp = ut_join(dir, "patched"), *ps = ut_join(dir, "sig"), *pl = ut_join(dir, "ld");
	FILE *fo = fopen(po, "rb"), *fd = fopen(pd, "rb"), *fp = fopen(pp, "wb");
	assert_int_equal(rs_patch_file(fo, fd, fp, NULL), RS_DONE);
	fclose(fo);
	fclose(fd);
	fclose(fp);
	size_t got;
	uint8_t *patched = ut_read(pp, &got);
	assert_int_equal(got, n);
	assert_memory_equal(patched, new_, n);
	free(patched);
	/* librsync's own delta, applied here */
	fo = fopen(po, "rb");
	FILE *fs = fopen(ps, "wb");
	assert_int_equal(rs_sig_file(fo, fs, 0, 0, RS_RK_BLAKE2_SIG_MAGIC, NULL), RS_DONE);
	fclose(fo);
	fclose(fs);
	fs = fopen(ps, "rb");
	rs_signature_t *sig;
	assert_int_equal(rs_loadsig_file(fs, &sig, NULL), RS_DONE);
	fclose(fs);
	assert_int_equal(rs_build_hash_table(sig), RS_DONE);
	FILE *fn = fopen(pn, "rb"), *fl = fopen(pl, "wb");
	assert_int_equal(rs_delta_file(sig, fn, fl, NULL), RS_DONE);
	fclose(fn);
	fclose(fl);
	rs_free_sumset(sig);
	size_t ll;
	uint8_t *ld = ut_read(pl, &ll);
	buf lb = {ld, ll, ll}, out = {0};
	stg_ctx *ctx = stg_ctx_new();
	assert_int_equal(apply(old, n, &lb, 333, &out, ctx), STG_OK);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.p, new_, n);
	stg_ctx_free(ctx);
	free(out.p);
	free(ld);
	ut_rmtree(dir);
	free(dir);
	free(po), free(pd), free(pn), free(pp), free(ps), free(pl);
	free(d.p);
	free(old);
	free(new_);
}

static void refused(const uint8_t *delta, size_t len, const char *why)
{
	uint8_t old[1000];
	ut_fill(old, sizeof old, 21);
	stg_ctx *ctx = stg_ctx_new();
	buf d = {(uint8_t *)delta, len, len}, out = {0};
	assert_int_equal(apply(old, sizeof old, &d, 0, &out, ctx), STG_ECORRUPT);
	if (!strstr(stg_errmsg(ctx), why))
		fail_msg("'%s' does not say '%s'", stg_errmsg(ctx), why);
	free(out.p);
	stg_ctx_free(ctx);
}

static void test_hostile(void **state)
{
	(void)state;
	refused((const uint8_t *)"xx\x02\x36\x00", 5, "not a librsync delta");
	refused((const uint8_t *)"rs\x02\x36", 4, "ends before its END");
	refused((const uint8_t *)"rs\x02\x36\x03"
	                         "ab",
	        7, "ends before its END");
	refused((const uint8_t *)"rs\x02\x36\x99", 5, "unknown command");
	refused((const uint8_t *)"rs\x02\x36\x00\x00", 6, "after its END");
	/* COPY 1000+1 from a 1000-byte file; COPY of length 0; a huge one */
	refused((const uint8_t *)"rs\x02\x36\x49\x03\xe8\x01\x00", 9, "past the end");
	refused((const uint8_t *)"rs\x02\x36\x45\x00\x00\x00", 8, "past the end");
	refused((const uint8_t *)"rs\x02\x36\x54\x00\x00\x00\x00\x00\x00\x00\x01"
	                         "\xff\xff\xff\xff\xff\xff\xff\xff\x00",
	        22, "past the end");
	/* a literal whose bytes never come */
	refused((const uint8_t *)"rs\x02\x36\x44\x7f\xff\xff\xff\xff\xff\xff\xff", 13,
	        "ends before its END");
}

/* The writer: pieces of any size, in order at their offsets; a failed
 * write is reported with its errno. */
static void test_writer(void **state)
{
	(void)state;
	char *dir = ut_tmpdir();
	char *path = ut_join(dir, "f");
	size_t n = (9 << 20) + 12345;
	uint8_t *data = ut_malloc(n);
	ut_fill(data, n, 31);
	stg_writer *w = stg__writer_new(2, 1 << 20);
	assert_non_null(w);
	for (int round = 0; round < 2; round++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		stg__writer_begin(w, fd);
		for (size_t off = 0, k = 1; off < n; off += k, k = k * 3 + 1)
			assert_int_equal(stg__writer_put(w, data + off, k < n - off ? k : n - off),
			                 0);
		assert_int_equal(stg__writer_end(w), 0);
		close(fd);
		size_t got;
		uint8_t *back = ut_read(path, &got);
		assert_int_equal(got, n);
		assert_memory_equal(back, data, n);
		free(back);
	}
	int full = open("/dev/full", O_WRONLY);
	if (full >= 0) {
		stg__writer_begin(w, full);
		int rc = 0;
		for (size_t off = 0; off < n && !rc; off += 65536)
			rc = stg__writer_put(w, data + off, 65536);
		int end = stg__writer_end(w);
		assert_true(rc == -1 || end == -1);
		assert_int_equal(errno, ENOSPC);
		close(full);
	}
	stg__writer_free(w);
	free(data);
	free(path);
	ut_rmtree(dir);
	free(dir);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_librsync_compat),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_writer),
};

UT_MAIN(tests)
