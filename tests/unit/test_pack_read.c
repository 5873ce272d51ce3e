/* test_pack_read.c - opening a pack (pack_read.c): from a path, a
 * descriptor (dup'ed: the caller's may close) and memory; the totals, the
 * entries, frames and delta records it hands out, with out-of-range
 * indexes refused; hostile buffers (every truncation, garbage, bytes
 * appended or prepended, a lone footer) refused without a crash; paths
 * that are missing, directories or FIFOs named; a manifest larger than the
 * first read at the end. */
#include "unit.h"

#include <errno.h>

typedef struct fx {
	UT_FX;
	stg_pack_info info;
	uint8_t *img;
	size_t len;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 1);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_mkdir(f->src, "d");
	ut_fill_file(f->src, "d/big", 200000, 3);
	ut_write(f->src, "small", "small\n", 6);
	ut_symlink(f->src, "link", "small");
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	f->img = ut_read(f->pack, &f->len);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	free(f->img);
	return ut_teardown(state);
}

static void test_contents(void **state)
{
	fx *f = *state;
	stg_pack *p;
	assert_int_equal(stg_pack_open_mem(f->ctx, f->img, f->len, &p), STG_OK);
	stg_pack_info i;
	stg_pack_get_info(p, &i);
	assert_memory_equal(i.digest, f->info.digest, STG_DIGEST_LEN);
	assert_int_equal(i.pack_size, f->len);
	assert_int_equal(i.entries, 4);
	assert_int_equal(i.files, 2);
	assert_int_equal(i.dirs, 1);
	assert_int_equal(i.symlinks, 1);
	assert_int_equal(i.content_size, 200006);
	assert_int_equal(i.deltas, 0);
	assert_int_equal(i.format_version, 3);
	assert_int_equal(stg_pack_count(p), 4);
	/* entries: paths, links, sizes, hashes */
	stg_entry e;
	bool seen_link = false;
	for (size_t k = 0; k < 4; k++) {
		assert_int_equal(stg_pack_entry(p, k, &e), 0);
		if (e.type == STG_SYMLINK) {
			assert_string_equal(e.path, "link");
			assert_string_equal(e.link, "small");
			seen_link = true;
		}
		if (!strcmp(e.path, "small")) {
			assert_int_equal(e.size, 6);
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, XXH3_128bits("small\n", 6));
			assert_memory_equal(e.xxh3, c.digest, 16);
			assert_null(e.link);
			assert_true(e.data_offset > e.tar_offset);
		}
	}
	assert_true(seen_link);
	assert_int_equal(stg_pack_entry(p, 4, &e), -1);
	assert_int_equal(stg_pack_entry(p, (size_t)-1, &e), -1);
	/* frames: back to back in the file and in the tar stream */
	uint64_t off, size, toff, tsize, next = 0, tnext = 0;
	for (size_t k = 0; k < i.frames; k++) {
		assert_int_equal(stg_pack_frame(p, k, &off, &size, &toff, &tsize), 0);
		assert_int_equal(off, next);
		assert_int_equal(toff, tnext);
		assert_true(size > 0);
		next = off + size;
		tnext = toff + tsize;
	}
	assert_int_equal(next, i.data_size);
	assert_int_equal(tnext, i.tar_size);
	assert_int_equal(stg_pack_frame(p, i.frames, &off, &size, &toff, &tsize), -1);
	uint8_t base[STG_DIGEST_LEN];
	const char *name;
	assert_int_equal(stg_pack_delta(p, 0, base, &name), -1);
	/* its bytes, read back, bounded */
	uint8_t buf[16];
	assert_int_equal(stg__pack_pread(p, buf, sizeof buf, 0), 0);
	assert_memory_equal(buf, f->img, sizeof buf);
	assert_int_equal(stg__pack_pread(p, buf, 1, f->len), -1);
	assert_int_equal(stg__pack_pread(p, buf, 2, f->len - 1), -1);
	assert_int_equal(stg__pack_pread(p, buf, 1, UINT64_MAX), -1);
	stg_pack_close(p);
	stg_pack_close(NULL);
}

static void test_fd_and_path(void **state)
{
	fx *f = *state;
	int fd = open(f->pack, O_RDONLY);
	stg_pack *p;
	assert_int_equal(stg_pack_open_fd(f->ctx, fd, &p), STG_OK);
	close(fd); /* the pack has its own */
	assert_int_equal(stg_verify(f->ctx, p), STG_OK);
	stg_pack_close(p);
	/* what is not a pack, named */
	char *missing = ut_join(f->dir, "missing");
	assert_int_equal(stg_pack_open(f->ctx, missing, &p), STG_ENOENT);
	assert_null(p);
	char want[4300];
	snprintf(want, sizeof want, "cannot open '%s': No such file or directory", missing);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_int_equal(stg_errno(f->ctx), ENOENT);
	assert_int_equal(stg_pack_open(f->ctx, f->dir, &p), STG_ENOENT);
	snprintf(want, sizeof want, "'%s': is a directory, not a pack", f->dir);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_int_equal(stg_errno(f->ctx), 0);
	char *fifo = ut_join(f->dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	double t0 = stg__now();
	assert_int_equal(stg_pack_open(f->ctx, fifo, &p), STG_ENOENT);
	ut_assert_time_below(stg__now() - t0, 2);
	snprintf(want, sizeof want, "'%s': not a regular file", fifo);
	assert_string_equal(stg_errmsg(f->ctx), want);
	ut_write(f->dir, "text", "hello\n", 6);
	char *text = ut_join(f->dir, "text");
	assert_int_equal(stg_pack_open(f->ctx, text, &p), STG_ECORRUPT);
	snprintf(want, sizeof want, "'%s': ", text);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	free(text);
	free(fifo);
	free(missing);
}

/* Open, then verify: every hostile image fails one or the other, cleanly. */
static stg_err open_and_verify(fx *f, const uint8_t *img, size_t len)
{
	stg_pack *p = NULL;
	stg_err err = stg_pack_open_mem(f->ctx, img, len, &p);
	if (!err)
		err = stg_verify(f->ctx, p);
	stg_pack_close(p);
	return err;
}

static void test_hostile(void **state)
{
	fx *f = *state;
	/* every cut: the trailer is at the end, so a cut pack is no pack */
	for (size_t n = 0; n < f->len; n += n < 256 ? 1 : 997) {
		stg_pack *p = (stg_pack *)0x1;
		stg_err err = stg_pack_open_mem(f->ctx, f->img, n, &p);
		if (err != STG_ECORRUPT)
			fail_msg("cut at %zu of %zu: %d", n, f->len, err);
		assert_null(p);
	}
	/* bytes after the end, or before the start */
	uint8_t *more = ut_malloc(f->len + 100);
	memcpy(more, f->img, f->len);
	memset(more + f->len, 0, 100);
	assert_int_equal(open_and_verify(f, more, f->len + 100), STG_ECORRUPT);
	memset(more, 0, 100);
	memcpy(more + 100, f->img, f->len);
	assert_int_equal(open_and_verify(f, more, f->len + 100), STG_ECORRUPT);
	/* the footer alone */
	assert_int_equal(open_and_verify(f, f->img + f->len - STG_FOOTER_SIZE, STG_FOOTER_SIZE),
	                 STG_ECORRUPT);
	/* garbage of every size up to a few KiB */
	uint8_t *g = ut_malloc(8192);
	for (size_t n = 1; n <= 8192; n = n * 2 + 1) {
		ut_fill(g, n, n);
		assert_int_equal(open_and_verify(f, g, n), STG_ECORRUPT);
	}
	/* the real footer on garbage */
	memcpy(g + 8192 - STG_FOOTER_SIZE, f->img + f->len - STG_FOOTER_SIZE, STG_FOOTER_SIZE);
	assert_int_equal(open_and_verify(f, g, 8192), STG_ECORRUPT);
	/* a flipped bit anywhere: caught at open or verify */
	for (size_t k = 0; k < f->len; k += f->len / 61 + 1) {
		f->img[k] ^= 4;
		if (open_and_verify(f, f->img, f->len) != STG_ECORRUPT)
			fail_msg("flip at %zu not caught", k);
		f->img[k] ^= 4;
	}
	assert_int_equal(open_and_verify(f, f->img, f->len), STG_OK);
	free(g);
	free(more);
}

/* A manifest larger than the first 1 MiB read at the end: two reads.
 * (Links with long targets that do not compress: few files to make.) */
static void test_large_manifest(void **state)
{
	fx *f = *state;
	char *many = ut_join(f->dir, "many");
	mkdir(many, 0755);
	static const char abc[] =
	        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
	char *target = ut_malloc(4001), name[32];
	uint8_t *rnd = ut_malloc(4000);
	for (int i = 0; i < 400; i++) {
		ut_fill(rnd, 4000, (uint64_t)i + 1);
		for (size_t k = 0; k < 4000; k++)
			target[k] = abc[rnd[k] & 63];
		target[4000] = '\0';
		snprintf(name, sizeof name, "l%03d", i);
		char *l = ut_join(many, name);
		assert_int_equal(symlink(target, l), 0);
		free(l);
	}
	char *pk = ut_join(f->dir, "many.tar.zst");
	stg_pack_info info;
	ut_pack(f->ctx, many, pk, &info);
	assert_true(info.pack_size - info.data_size > STG_TAIL_READ);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, pk, &p), STG_OK);
	assert_int_equal(stg_pack_count(p), 400);
	assert_int_equal(stg_verify(f->ctx, p), STG_OK);
	stg_entry e;
	assert_int_equal(stg_pack_entry(p, 399, &e), 0);
	assert_string_equal(e.path, "l399");
	assert_string_equal(e.link, target);
	stg_pack_close(p);
	/* from memory too */
	size_t len;
	uint8_t *img = ut_read(pk, &len);
	assert_int_equal(stg_pack_open_mem(f->ctx, img, len, &p), STG_OK);
	assert_int_equal(stg_pack_count(p), 400);
	stg_pack_close(p);
	free(img);
	free(rnd);
	free(target);
	free(pk);
	free(many);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_contents),
        T(test_fd_and_path),
        T(test_hostile),
        T(test_large_manifest),
};

UT_MAIN(tests)
