/* test_delta.c - delta files: written by stg_delta_write and stg_pack_dir
 * with bases, applied from memory by stg__delta_apply; damaged bytes and
 * truncations refused; hand-made hostile deltas (made here from
 * FORMAT.md, not by the writer) refused with nothing beyond the output
 * directory touched. */
#include "unit.h"
#include "delta.h"

#include <xxhash.h>
#include <zstd.h>

typedef struct fixture {
	char *dir, *v1, *v2, *p1, *p2, *entry;
	stg_pack *base, *target;
	stg_manifest man;
	int basefd;
	uint8_t *delta;
	size_t delta_len;
} fixture;

/* v1, and v2: one file patched, one added, one renamed, one removed, one
 * re-dated; an empty file, a symlink and a hardlink in both. */
static void make_trees(fixture *f, bool only_add)
{
	ut_mkdir(f->v1, "d");
	ut_fill_file(f->v1, "d/same", 30000, 1);
	ut_fill_file(f->v1, "patched", 200000, 2);
	ut_fill_file(f->v1, "renamed-from", 5000, 3);
	ut_fill_file(f->v1, "removed", 7000, 4);
	ut_fill_file(f->v1, "redated", 9000, 5);
	ut_write(f->v1, "empty", "", 0);
	ut_symlink(f->v1, "link", "d/same");
	ut_hardlink(f->v1, "hard", "d/same");
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", f->v1, f->v2);
	assert_int_equal(system(cmd), 0);
	ut_fill_file(f->v2, "added", 12000, 6);
	if (only_add)
		return;
	/* 4 KiB changed in the middle of the 200 KB file */
	char *p = ut_join(f->v2, "patched");
	int fd = open(p, O_WRONLY);
	uint8_t chunk[4096];
	ut_fill(chunk, sizeof chunk, 7);
	assert_int_equal(pwrite(fd, chunk, sizeof chunk, 100000), (ssize_t)sizeof chunk);
	close(fd);
	free(p);
	char *from = ut_join(f->v2, "renamed-from"), *to = ut_join(f->v2, "renamed-to");
	assert_int_equal(rename(from, to), 0);
	free(from);
	free(to);
	char *r = ut_join(f->v2, "removed");
	unlink(r);
	free(r);
	char *d = ut_join(f->v2, "redated");
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1000000000, 5}};
	utimensat(AT_FDCWD, d, ts, 0);
	free(d);
}

static void setup_fixture(fixture *f, stg_ctx *ctx, bool only_add)
{
	memset(f, 0, sizeof *f);
	f->dir = ut_tmpdir();
	f->v1 = ut_join(f->dir, "v1");
	f->v2 = ut_join(f->dir, "v2");
	f->p1 = ut_join(f->dir, "v1.tar.zst");
	f->p2 = ut_join(f->dir, "v2.tar.zst");
	f->entry = ut_join(f->dir, "entry");
	assert_int_equal(mkdir(f->v1, 0755), 0);
	make_trees(f, only_add);
	assert_int_equal(stg_pack_dir(ctx, f->v1, f->p1, NULL, NULL), STG_OK);
	assert_int_equal(stg_pack_dir(ctx, f->v2, f->p2, NULL, NULL), STG_OK);
	assert_int_equal(stg_pack_open(ctx, f->p1, &f->base), STG_OK);
	assert_int_equal(stg_pack_open(ctx, f->p2, &f->target), STG_OK);
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	uo.read_only = 1;
	assert_int_equal(stg_unpack(ctx, f->base, f->entry, &uo, NULL), STG_OK);
	int dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__manifest_write(dfd, f->base, NULL), 0);
	close(dfd);
	char *m = ut_join(f->dir, "manifest");
	FILE *mf = fopen(m, "r");
	assert_non_null(mf);
	assert_int_equal(stg__manifest_load(mf, &f->man), 0);
	fclose(mf);
	free(m);
	f->basefd = open(f->entry, O_RDONLY | O_DIRECTORY);
	assert_true(f->basefd >= 0);
	/* the real delta */
	char *dp = ut_join(f->dir, "delta");
	int fd = open(dp, O_RDWR | O_CREAT | O_TRUNC, 0644);
	stg_delta_info info;
	assert_int_equal(stg_delta_write(ctx, f->base, f->target, f->v2, fd, &info), STG_OK);
	close(fd);
	assert_int_equal(info.size,
	                 (uint64_t)(f->delta = ut_read(dp, &f->delta_len), f->delta_len));
	free(dp);
}

static void free_fixture(fixture *f)
{
	stg_pack_close(f->base);
	stg_pack_close(f->target);
	stg__manifest_free(&f->man);
	close(f->basefd);
	free(f->delta);
	ut_rmtree(f->dir);
	free(f->dir);
	free(f->v1);
	free(f->v2);
	free(f->p1);
	free(f->p2);
	free(f->entry);
}

/* Apply bytes to the fixture into a new directory; the result, and the
 * directory (malloc'ed) through out when asked. */
static stg_err apply(stg_ctx *ctx, fixture *f, const uint8_t *p, size_t n, stg_delta_stats *st,
                     char **out)
{
	char *o = ut_join(f->dir, "out.XXXXXX");
	assert_non_null(mkdtemp(o));
	int ofd = open(o, O_RDONLY | O_DIRECTORY);
	stg_delta_src src = {.fd = -1, .mem = p, .len = n};
	stg_delta_stats mine;
	stg_err err = stg__delta_apply(ctx, &src, f->target, f->base->t.digest, &f->man, f->basefd,
	                               ofd, st ? st : &mine);
	close(ofd);
	if (out) {
		*out = o;
	} else {
		ut_rmtree(o);
		free(o);
	}
	return err;
}

static bool same_tree(const char *a, const char *b)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "diff -r --no-dereference '%s/' '%s/' >/dev/null", a, b);
	return system(cmd) == 0;
}

static void test_round_trip(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	fixture f;
	setup_fixture(&f, ctx, false);
	/* the changes, not the 270 KB of content */
	assert_true(f.delta_len < 30000);
	stg_delta_stats st;
	char *out;
	assert_int_equal(apply(ctx, &f, f.delta, f.delta_len, &st, &out), STG_OK);
	assert_true(same_tree(f.v2, out));
	assert_int_equal(st.patched, 1);
	assert_int_equal(st.whole, 1);
	/* d/same (also "hard" in the pack) and renamed-to (a COPY record):
	 * the base's inodes; redated: the same content with another mtime, so
	 * a copy */
	assert_int_equal(st.linked, 2);
	assert_int_equal(st.copied, 1);
	assert_int_equal(st.bytes_read, f.delta_len);
	struct stat a, b;
	char *pa = ut_join(out, "d/same"), *pb = ut_join(f.entry, "d/same");
	assert_int_equal(stat(pa, &a), 0);
	assert_int_equal(stat(pb, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	free(pa);
	free(pb);
	char *r = ut_join(out, "redated");
	assert_int_equal(stat(r, &a), 0);
	assert_int_equal(a.st_mtim.tv_sec, 1000000000);
	assert_int_equal(a.st_mtim.tv_nsec, 5);
	assert_int_equal(a.st_mode & 0777, 0444);
	free(r);
	stg__rmtree(out);
	free(out);
	/* the header, read alone */
	char *dp = ut_join(f.dir, "delta");
	int fd = open(dp, O_RDONLY);
	uint8_t b1[STG_DIGEST_LEN], b2[STG_DIGEST_LEN];
	uint64_t size;
	assert_int_equal(stg_delta_read_header(ctx, fd, b1, b2, &size), STG_OK);
	assert_memory_equal(b1, f.base->t.digest, STG_DIGEST_LEN);
	assert_memory_equal(b2, f.target->t.digest, STG_DIGEST_LEN);
	assert_int_equal(size, f.delta_len);
	close(fd);
	free(dp);
	/* applied to another base, or for another target: refused at once */
	uint8_t other[STG_DIGEST_LEN] = {1};
	int ofd = open(f.dir, O_RDONLY | O_DIRECTORY);
	stg_delta_src src = {.fd = -1, .mem = f.delta, .len = f.delta_len};
	assert_int_equal(stg__delta_apply(ctx, &src, f.target, other, &f.man, f.basefd, ofd, &st),
	                 STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(ctx), "another base"));
	assert_int_equal(
	        stg__delta_apply(ctx, &src, f.base, f.base->t.digest, &f.man, f.basefd, ofd, &st),
	        STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(ctx), "another pack"));
	close(ofd);
	free_fixture(&f);
	stg_ctx_free(ctx);
}

static void test_every_byte(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	fixture f;
	setup_fixture(&f, ctx, false);
	uint8_t *copy = ut_malloc(f.delta_len);
	/* every byte of the header and the records around it; in the long
	 * run of a new file's bytes, every 11th */
	for (size_t i = 0; i < f.delta_len; i += i < 2048 ? 1 : 11) {
		memcpy(copy, f.delta, f.delta_len);
		copy[i] ^= 0x20;
		if (apply(ctx, &f, copy, f.delta_len, NULL, NULL) != STG_ECORRUPT)
			fail_msg("a flip at byte %zu of %zu was not refused", i, f.delta_len);
	}
	for (size_t n = 0; n < f.delta_len; n += n < 2048 ? 1 : 11)
		if (apply(ctx, &f, f.delta, n, NULL, NULL) != STG_ECORRUPT)
			fail_msg("the first %zu bytes of %zu were not refused", n, f.delta_len);
	/* checked without the base: the real delta passes, damage does not */
	char *dp = ut_join(f.dir, "checked");
	uint8_t base[STG_DIGEST_LEN];
	for (size_t i = 0; i < f.delta_len; i += 97) {
		memcpy(copy, f.delta, f.delta_len);
		if (i)
			copy[i] ^= 0x01;
		ut_write(f.dir, "checked", copy, f.delta_len);
		int fd = open(dp, O_RDONLY);
		stg_err err = stg_delta_check(ctx, f.target, fd, base, NULL);
		close(fd);
		if (!i) {
			assert_int_equal(err, STG_OK);
			assert_memory_equal(base, f.base->t.digest, STG_DIGEST_LEN);
		} else if (err != STG_ECORRUPT) {
			fail_msg("a flip at byte %zu passed the check", i);
		}
	}
	free(dp);
	free(copy);
	free_fixture(&f);
	stg_ctx_free(ctx);
}

/* ---- hand-made deltas ------------------------------------------------------ */

typedef struct body {
	uint8_t b[1 << 16];
	size_t n;
} body;

static void put(body *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof b->b);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put_record(body *b, uint64_t idx, int kind, const stg_rec *r, const char *basis)
{
	uint8_t h[40] = {0};
	stg__put64(h, idx);
	h[8] = (uint8_t)kind;
	stg__put32(h + 12, basis ? (uint32_t)strlen(basis) : 0);
	stg__put64(h + 16, r->size);
	memcpy(h + 24, r->xxh3, 16);
	put(b, h, sizeof h);
	if (basis)
		put(b, basis, strlen(basis));
}

static void put_chunk(body *b, const void *p, uint32_t n)
{
	uint8_t len[4];
	stg__put32(len, n);
	put(b, len, 4);
	put(b, p, n);
}

/* A delta file from a body, per FORMAT.md. */
static uint8_t *make_delta(const fixture *f, const body *b, uint64_t n_records, uint64_t n_removed,
                           size_t *len)
{
	size_t cap = ZSTD_compressBound(b->n);
	uint8_t *out = ut_malloc(128 + cap);
	size_t z = ZSTD_compress(out + 128, cap, b->b, b->n, 3);
	assert_false(ZSTD_isError(z));
	memset(out, 0, 128);
	memcpy(out, "STGDELTA", 8);
	stg__put32(out + 8, 1);
	memcpy(out + 16, f->base->t.digest, 32);
	memcpy(out + 48, f->target->t.digest, 32);
	stg__put64(out + 80, n_records);
	stg__put64(out + 88, n_removed);
	stg__put64(out + 96, z);
	stg__put64(out + 104, XXH3_64bits(out + 128, z));
	stg__put64(out + 120, XXH3_64bits(out, 120));
	*len = 128 + z;
	return out;
}

/* The target's entry at path. */
static size_t entry_at(const fixture *f, const char *path)
{
	char buf[STG_PATH_MAX + 1];
	for (size_t i = 0; i < f->target->t.n_entries; i++)
		if (!strcmp(stg__rec_path(f->target, &f->target->t.recs[i], buf), path))
			return i;
	fail_msg("no entry '%s'", path);
	return 0;
}

static void expect(stg_ctx *ctx, fixture *f, const body *b, uint64_t nr, uint64_t nd, stg_err want,
                   const char *says)
{
	size_t len;
	uint8_t *d = make_delta(f, b, nr, nd, &len);
	char *out;
	stg_err err = apply(ctx, f, d, len, NULL, &out);
	if (err != want)
		fail_msg("got %d (%s), wanted %d", err, stg_errmsg(ctx), want);
	if (says && !strstr(stg_errmsg(ctx), says))
		fail_msg("'%s' does not say '%s'", stg_errmsg(ctx), says);
	if (!err)
		assert_true(same_tree(f->v2, out));
	stg__rmtree(out);
	free(out);
	free(d);
}

static void test_hostile(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	fixture f;
	setup_fixture(&f, ctx, true); /* v2 is v1 and "added" */
	size_t added = entry_at(&f, "added");
	const stg_rec *r = &f.target->t.recs[added];
	uint8_t content[12000];
	ut_fill(content, sizeof content, 6);
	body b;

	/* the baseline: made by hand, it works */
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	put_chunk(&b, content, 5000);
	put_chunk(&b, content + 5000, 7000);
	put_chunk(&b, "", 0);
	expect(ctx, &f, &b, 1, 0, STG_OK, NULL);

	/* one byte too many */
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	put_chunk(&b, content, 12000);
	put_chunk(&b, "x", 1);
	put_chunk(&b, "", 0);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "larger than");

	/* one byte short */
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	put_chunk(&b, content, 11999);
	put_chunk(&b, "", 0);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "does not rebuild");

	/* a chunk over 1 MiB announced */
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	uint8_t big[4];
	stg__put32(big, (1u << 20) + 1);
	put(&b, big, 4);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "oversized chunk");

	/* the same record twice */
	b.n = 0;
	for (int k = 0; k < 2; k++) {
		put_record(&b, added, 3, r, NULL);
		put_chunk(&b, content, 12000);
		put_chunk(&b, "", 0);
	}
	expect(ctx, &f, &b, 2, 0, STG_ECORRUPT, "out of order");

	/* a record for a directory */
	b.n = 0;
	put_record(&b, entry_at(&f, "d"), 3, r, NULL);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "not the pack's");

	/* a record past the last entry */
	b.n = 0;
	put_record(&b, f.target->t.n_entries, 3, r, NULL);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "out of order");

	/* a copy from outside the base */
	b.n = 0;
	put_record(&b, added, 1, r, "../../etc/passwd");
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "unsafe path");

	/* a copy whose basis has other content */
	b.n = 0;
	put_record(&b, added, 1, r, "d/same");
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "content wanted");

	/* a patch against a file the base lacks */
	b.n = 0;
	put_record(&b, added, 2, r, "nowhere");
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "the base lacks");

	/* a patch that is not a librsync stream */
	b.n = 0;
	put_record(&b, added, 2, r, "d/same");
	put_chunk(&b, "not a delta at all", 18);
	put_chunk(&b, "", 0);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, NULL);

	/* a kind that does not exist, reserved bytes set */
	b.n = 0;
	put_record(&b, added, 9, r, NULL);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "a bad record");
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	b.b[10] = 1;
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "a bad record");

	/* removed paths: clean, and in the base */
	b.n = 0;
	put(&b,
	    "\x06\x00"
	    "nohere",
	    8);
	expect(ctx, &f, &b, 0, 1, STG_ECORRUPT, "the base lacks");
	b.n = 0;
	put(&b, "\x00\x00", 2);
	expect(ctx, &f, &b, 0, 1, STG_ECORRUPT, "removed files");

	/* no record for the new file */
	b.n = 0;
	expect(ctx, &f, &b, 0, 0, STG_ECORRUPT, "nothing for it");

	/* data after the last record */
	b.n = 0;
	put_record(&b, added, 3, r, NULL);
	put_chunk(&b, content, 12000);
	put_chunk(&b, "", 0);
	put(&b, "tail", 4);
	expect(ctx, &f, &b, 1, 0, STG_ECORRUPT, "after its last record");

	/* counts no pack could have */
	b.n = 0;
	expect(ctx, &f, &b, UINT64_MAX, 0, STG_ECORRUPT, "impossible counts");
	expect(ctx, &f, &b, 0, UINT64_MAX, STG_ECORRUPT, "impossible counts");

	free_fixture(&f);
	stg_ctx_free(ctx);
}

static void on_delta(void *arg, const char *base, const stg_delta_info *info)
{
	(void)base;
	*(stg_delta_info *)arg = *info;
	((stg_delta_info *)arg)->name = NULL;
}

static void test_pack_with_bases(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	fixture f;
	setup_fixture(&f, ctx, false);
	char *out = ut_join(f.dir, "v2b.tar.zst");
	const char *bases[] = {f.p1, f.p1};
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	o.bases = bases;
	o.n_bases = 2; /* the same base twice: one delta */
	stg_delta_info di;
	o.delta_done = on_delta;
	o.delta_arg = &di;
	stg_pack_info info;
	assert_int_equal(stg_pack_dir(ctx, f.v2, out, &o, &info), STG_OK);
	assert_int_equal(info.deltas, 1);
	assert_memory_equal(info.digest, f.target->t.digest, STG_DIGEST_LEN);
	assert_int_equal(di.patched, 1);
	assert_int_equal(di.added, 1);
	assert_int_equal(di.copied, 1);
	assert_int_equal(di.removed, 2);
	stg_pack *p;
	assert_int_equal(stg_pack_open(ctx, out, &p), STG_OK);
	uint8_t base[STG_DIGEST_LEN];
	const char *name;
	assert_int_equal(stg_pack_delta(p, 0, base, &name), 0);
	assert_memory_equal(base, f.base->t.digest, STG_DIGEST_LEN);
	char hex[STG_DIGEST_HEXLEN + 1], want[128];
	stg_digest_hex(base, hex);
	snprintf(want, sizeof want, "v2b.tar.zst.delta-%.16s", hex);
	assert_string_equal(name, want);
	char *dp = ut_join(f.dir, name);
	size_t len;
	uint8_t *d = ut_read(dp, &len);
	assert_int_equal(len, di.size);
	assert_int_equal(apply(ctx, &f, d, len, NULL, NULL), STG_OK);
	free(d);
	free(dp);
	stg_pack_close(p);
	/* the stream form writes no files beside: it refuses bases */
	int fd = open("/dev/null", O_WRONLY);
	assert_int_equal(stg_pack_dir_fd(ctx, f.v2, fd, &o, NULL), STG_EUSAGE);
	close(fd);
	/* a tree changed after it was packed: the delta says so */
	stg_pack *np;
	assert_int_equal(stg_pack_open(ctx, out, &np), STG_OK);
	ut_fill_file(f.v2, "patched", 200000, 99);
	char *dp2 = ut_join(f.dir, "stale-delta");
	fd = open(dp2, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(stg_delta_write(ctx, f.base, np, f.v2, fd, NULL), STG_EIO);
	assert_non_null(strstr(stg_errmsg(ctx), "changed while it was packed"));
	close(fd);
	free(dp2);
	stg_pack_close(np);
	free(out);
	free_fixture(&f);
	stg_ctx_free(ctx);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_every_byte),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_pack_with_bases),
};

UT_MAIN(tests)
