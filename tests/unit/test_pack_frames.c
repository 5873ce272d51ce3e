/* test_pack_frames.c - the pack writer's frame pipeline (pack_frames.c):
 * tar bytes in, independent zstd frames out, in order: the frame table
 * (contiguous, cut at the target, each frame's content size and XXH3-128),
 * every frame decoding alone to its bytes, the SHA-256 of what was
 * written; the same bytes whatever the threads; a write that fails
 * (/dev/full: ENOSPC) stops the pipeline, named; the caller's error
 * writes nothing more; cancel at a slow level; the level each frame
 * gets: what only Huffman-coded literals save is saved. */
#include "unit.h"
#include "pack_frames.h"

#include <errno.h>
#include <openssl/sha.h>
#include <xxhash.h>
#include <zstd.h>

#define TARGET (256u * 1024)

/* The input: half text (compressible), half random, len bytes. */
static uint8_t *input(size_t len)
{
	uint8_t *b = ut_malloc(len);
	for (size_t i = 0; i < len / 2; i++)
		b[i] = (uint8_t)("the quick brown fox jumps over the lazy dog\n"[i % 44]);
	ut_fill(b + len / 2, len - len / 2, 7);
	return b;
}

/* Feed data to a framer on fd in pieces of 1 to 40 KiB, cutting between
 * them as the writer does before each header; the framed result. */
static stg_err frame_all(stg_ctx *ctx, int fd, int level, const uint8_t *data, size_t len,
                         stg_framed *out)
{
	stg_framer *fr;
	stg_err err = stg__framer_start(ctx, fd, level, TARGET, false, &fr);
	if (err)
		return err;
	size_t pos = 0, piece = 1;
	while (pos < len) {
		assert_int_equal(stg__framer_pos(fr), pos);
		size_t n = piece % (40 * 1024) + 1;
		if (n > len - pos)
			n = len - pos;
		if (stg__framer_put(fr, data + pos, n))
			return stg__framer_finish(fr, stg__framer_err(fr), NULL);
		pos += n;
		piece = piece * 7919 + 13;
		if ((err = stg__framer_cut(fr)))
			return stg__framer_finish(fr, err, NULL);
		assert_true(stg__framer_room(fr) > 0);
	}
	return stg__framer_finish(fr, STG_OK, out);
}

static void test_frames(void **state)
{
	ut_fx *f = *state;
	stg_set_threads(f->ctx, 3);
	size_t len = 3 * 1024 * 1024 + 12345;
	uint8_t *data = input(len);
	char *path = ut_join(f->dir, "out");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	stg_framed fm;
	if (frame_all(f->ctx, fd, 3, data, len, &fm))
		fail_msg("%s", stg_errmsg(f->ctx));
	close(fd);
	size_t flen;
	uint8_t *file = ut_read(path, &flen);
	assert_int_equal(fm.tar_size, len);
	assert_int_equal(fm.data_size, flen);
	uint8_t sha[32];
	SHA256(file, flen, sha);
	assert_memory_equal(fm.digest, sha, 32);
	/* cut once a frame holds the target: 12 or 13 frames */
	assert_true(fm.n_frames >= len / (TARGET + 40 * 1024));
	assert_true(fm.n_frames <= len / TARGET + 1);
	uint64_t comp = 0, raw = 0;
	uint8_t *back = ut_malloc(TARGET + 64 * 1024);
	bool some_smaller = false, some_raw = false;
	for (size_t i = 0; i < fm.n_frames; i++) {
		const stg_frame *fr = &fm.frames[i];
		assert_int_equal(fr->comp_off, comp);
		assert_int_equal(fr->raw_off, raw);
		if (i + 1 < fm.n_frames) {
			assert_true(fr->raw_size >= TARGET);
			assert_true(fr->raw_size <= TARGET + 40 * 1024);
		}
		/* each frame alone: its content size, its checksum, its bytes */
		const uint8_t *z = file + fr->comp_off;
		assert_int_equal(ZSTD_findFrameCompressedSize(z, fr->comp_size), fr->comp_size);
		assert_int_equal(ZSTD_getFrameContentSize(z, fr->comp_size), fr->raw_size);
		size_t n = ZSTD_decompress(back, TARGET + 64 * 1024, z, fr->comp_size);
		assert_false(ZSTD_isError(n));
		assert_int_equal(n, fr->raw_size);
		assert_memory_equal(back, data + fr->raw_off, n);
		XXH128_canonical_t h;
		XXH128_canonicalFromHash(&h, XXH3_128bits(z, fr->comp_size));
		assert_memory_equal(fr->xxh3, h.digest, 16);
		some_smaller |= fr->comp_size < fr->raw_size / 4;
		some_raw |= fr->comp_size > fr->raw_size * 99 / 100;
		comp += fr->comp_size;
		raw += fr->raw_size;
	}
	assert_int_equal(comp, flen);
	assert_int_equal(raw, len);
	assert_true(some_smaller); /* the text */
	assert_true(some_raw);     /* the random half, stored */
	free(back);
	free(fm.frames);
	free(file);
	free(data);
	free(path);
}

/* The output depends on the bytes and the level only. */
static void test_reproducible(void **state)
{
	ut_fx *f = *state;
	size_t len = 2 * 1024 * 1024;
	uint8_t *data = input(len);
	uint8_t *files[2];
	size_t lens[2];
	stg_framed fm[2];
	static const int threads[2] = {1, 4};
	for (int k = 0; k < 2; k++) {
		stg_set_threads(f->ctx, threads[k]);
		char name[16];
		snprintf(name, sizeof name, "out%d", k);
		char *path = ut_join(f->dir, name);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (frame_all(f->ctx, fd, 5, data, len, &fm[k]))
			fail_msg("%s", stg_errmsg(f->ctx));
		close(fd);
		files[k] = ut_read(path, &lens[k]);
		free(path);
	}
	assert_int_equal(lens[0], lens[1]);
	assert_memory_equal(files[0], files[1], lens[0]);
	assert_memory_equal(fm[0].digest, fm[1].digest, 32);
	assert_int_equal(fm[0].n_frames, fm[1].n_frames);
	assert_memory_equal(fm[0].frames, fm[1].frames, fm[0].n_frames * sizeof(stg_frame));
	for (int k = 0; k < 2; k++) {
		free(files[k]);
		free(fm[k].frames);
	}
	free(data);
}

/* A disk that is full: the write fails, the pipeline stops, the caller's
 * puts fail with EIO, and finish names the error. */
static void test_write_fails(void **state)
{
	ut_fx *f = *state;
	stg_set_threads(f->ctx, 2);
	int fd = open("/dev/full", O_WRONLY);
	if (fd < 0)
		skip();
	size_t len = 4 * 1024 * 1024;
	uint8_t *data = input(len);
	stg_framer *fr;
	assert_int_equal(stg__framer_start(f->ctx, fd, 1, TARGET, false, &fr), STG_OK);
	assert_int_equal(stg__framer_err(fr), STG_OK);
	stg_err err = STG_OK;
	size_t pos = 0;
	while (pos < len && !err) {
		assert_int_equal(stg__framer_put(fr, data + pos, 4096), 0);
		pos += 4096;
		err = stg__framer_cut(fr);
	}
	/* the error reaches the writer long before 4 MiB (buffers: threads + 2) */
	assert_true(pos < len);
	assert_int_equal(err, STG_ENOSPC);
	assert_int_equal(stg__framer_err(fr), STG_ENOSPC);
	/* the pipeline has stopped: a put fails */
	errno = 0;
	assert_int_equal(stg__framer_put(fr, data, 1), -1);
	assert_int_equal(errno, EIO);
	/* a failed framer answers a cut again with its error, not a crash */
	assert_int_equal(stg__framer_cut(fr), STG_ENOSPC);
	assert_int_equal(stg__framer_room(fr), 0);
	stg_framed fm = {0};
	assert_int_equal(stg__framer_finish(fr, err, &fm), STG_ENOSPC);
	assert_null(fm.frames);
	/* the cut's error, passed on to finish as pack_write does, keeps its
	 * detail on ctx */
	assert_string_equal(stg_errmsg(f->ctx), "writing the pack: No space left on device");

	/* the failure found by finish itself: named */
	assert_int_equal(stg__framer_start(f->ctx, fd, 1, TARGET, false, &fr), STG_OK);
	assert_int_equal(stg__framer_put(fr, data, 100000), 0);
	assert_int_equal(stg__framer_cut(fr), STG_OK);
	assert_int_equal(stg__framer_finish(fr, STG_OK, &fm), STG_ENOSPC);
	assert_string_equal(stg_errmsg(f->ctx), "writing the pack: No space left on device");
	assert_null(fm.frames);
	close(fd);
	free(data);
}

/* The caller's own error: nothing more is written, that error returned. */
static void test_caller_error(void **state)
{
	ut_fx *f = *state;
	char *path = ut_join(f->dir, "out");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	stg_framer *fr;
	assert_int_equal(stg__framer_start(f->ctx, fd, 1, TARGET, false, &fr), STG_OK);
	uint8_t *data = input(TARGET / 2);
	assert_int_equal(stg__framer_put(fr, data, TARGET / 2), 0);
	assert_int_equal(stg__framer_cut(fr), STG_OK); /* not full yet: kept */
	assert_int_equal(stg__framer_room(fr), TARGET - TARGET / 2);
	stg__fail(f->ctx, STG_EIO, "the caller's");
	assert_int_equal(stg__framer_finish(fr, STG_EIO, NULL), STG_EIO);
	assert_string_equal(stg_errmsg(f->ctx), "the caller's");
	close(fd);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	free(data);
	free(path);
}

/* At a slow level a frame is compressed in steps, and cancel stops it. */
static void test_cancel(void **state)
{
	ut_fx *f = *state;
	stg_set_threads(f->ctx, 1);
	char *path = ut_join(f->dir, "out");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	size_t len = 1024 * 1024;
	uint8_t *data = ut_malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)("compressible text, line after line\n"[i % 35]);
	stg_framer *fr;
	assert_int_equal(stg__framer_start(f->ctx, fd, 19, len, false, &fr), STG_OK);
	assert_int_equal(stg__framer_put(fr, data, len), 0);
	stg_cancel(f->ctx);
	double t0 = stg__now();
	stg_framed fm = {0};
	assert_int_equal(stg__framer_finish(fr, STG_OK, &fm), STG_EINTR);
	assert_null(fm.frames);
	assert_true(stg__now() - t0 < 2);
	assert_string_equal(stg_errmsg(f->ctx), "compressing frame 0: interrupted");
	close(fd);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	free(data);
	free(path);
}

/* Frames that save under 10% at level 1 are coded at a fast level, but
 * not at one that codes no literals when the savings are in them: bytes
 * of a skewed distribution (raw numbers, weights) still compress; random
 * bytes with a run of zeros every 12 KiB (a tar of small JPEGs: headers,
 * padding) still decode to themselves. */
static void test_fast_levels(void **state)
{
	ut_fx *f = *state;
	stg_set_threads(f->ctx, 2);
	size_t len = 4 * TARGET;
	uint8_t *data = ut_malloc(len);
	ut_fill(data, len, 11);
	for (size_t i = 0; i < len; i++) /* 182 values: 7.5 bits a byte, 94% */
		data[i] = (uint8_t)(data[i] % 182);
	char *path = ut_join(f->dir, "out");
	for (int k = 0; k < 2; k++) {
		if (k == 1) {
			ut_fill(data, len, 12);
			for (size_t i = 0; i + 12 * 1024 <= len; i += 12 * 1024)
				memset(data + i, 0, 700);
		}
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_true(fd >= 0);
		stg_framed fm;
		if (frame_all(f->ctx, fd, 3, data, len, &fm))
			fail_msg("%s", stg_errmsg(f->ctx));
		close(fd);
		size_t flen;
		uint8_t *file = ut_read(path, &flen);
		if (k == 0)
			assert_true(flen < len * 97 / 100); /* stored: over 100% */
		else
			assert_true(flen < len);
		uint8_t *back = ut_malloc(TARGET + 64 * 1024);
		for (size_t i = 0; i < fm.n_frames; i++) {
			const stg_frame *fr = &fm.frames[i];
			size_t n = ZSTD_decompress(back, TARGET + 64 * 1024, file + fr->comp_off,
			                           fr->comp_size);
			assert_int_equal(n, fr->raw_size);
			assert_memory_equal(back, data + fr->raw_off, n);
		}
		free(back);
		free(file);
		free(fm.frames);
	}
	free(path);
	free(data);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_frames),       T(test_reproducible), T(test_write_fails),
        T(test_caller_error), T(test_cancel),       T(test_fast_levels),
};

UT_MAIN(tests)
