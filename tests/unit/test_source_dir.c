/* test_source_dir.c - a plain directory as a source (source_dir.c): copied
 * into a read-only cache entry while hashed (its manifest then verifies),
 * keyed by its listing so an unchanged tree is a hit and a changed one a
 * new entry, special files skipped with a warning, --include refused, a
 * file changing under the copy refused with nothing published. */
#include "unit.h"
#include "cache.h"
#include "source.h"

#include <pthread.h>
#include <time.h>

typedef ut_fx fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "data");
	mkdir(f->src, 0750);
	ut_mkdir(f->src, "train");
	ut_fill_file(f->src, "train/x.bin", 100000, 3);
	ut_write(f->src, "train/y.txt", "labels\n", 7);
	ut_write(f->src, "README", "read me\n", 8);
	ut_symlink(f->src, "current", "train");
	char *x = ut_join(f->src, "train/x.bin");
	chmod(x, 0640);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1600000000, 7}};
	utimensat(AT_FDCWD, x, ts, 0);
	free(x);
	f->c = ut_cache(f->ctx, f->dir, NULL);
	*state = f;
	return 0;
}

static stg_err stage(fx *f, const char *dest, stg_stage_result *r)
{
	return ut_stage(f->ctx, f->c, f->src, dest, NULL, r);
}

static void test_stage_dir(void **state)
{
	fx *f = *state;
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, dest, &r), STG_OK);
	assert_string_equal(r.kind, "directory");
	assert_int_equal(r.hit, 0);
	assert_int_equal(r.files, 3);
	assert_int_equal(r.content_bytes, 100000 + 7 + 8);
	assert_int_equal(r.source_bytes, 100000 + 7 + 8);
	ut_same_in(f->src, dest, "train/x.bin");
	ut_same_in(f->src, dest, "README");
	/* read-only, with the source's read bits and mtimes */
	char *x = ut_join(dest, "train/x.bin");
	struct stat st;
	assert_int_equal(stat(x, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0440);
	assert_int_equal(st.st_mtim.tv_sec, 1600000000);
	assert_int_equal(st.st_mtim.tv_nsec, 7);
	char *l = ut_join(dest, "current");
	ut_link_is(l, "train");
	assert_non_null(strstr(f->log.text, "is a directory: staging it costs "));
	/* its manifest verifies */
	char key[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(r.digest, key);
	assert_int_equal(stg__entry_check(f->ctx, f->c, key, true), 0);
	stg_meta m;
	assert_int_equal(stg__meta_read(f->c, key, &m), 0);
	assert_string_equal(m.kind, "directory");
	assert_string_equal(m.source, f->src);
	stg_stage_result_free(&r);
	/* unchanged: a hit, nothing copied */
	uint8_t d1[STG_DIGEST_LEN];
	assert_int_equal(stage(f, dest, &r), STG_OK);
	assert_int_equal(r.hit, 1);
	assert_int_equal(r.source_bytes, 0);
	memcpy(d1, r.digest, sizeof d1);
	stg_stage_result_free(&r);
	/* changed: another entry */
	ut_write(f->src, "README", "read me again\n", 14);
	assert_int_equal(stage(f, dest, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	assert_memory_not_equal(r.digest, d1, STG_DIGEST_LEN);
	ut_same_in(f->src, dest, "README");
	stg_stage_result_free(&r);
	free(l);
	free(x);
	free(dest);
}

static void test_direct(void **state)
{
	fx *f = *state;
	/* the seam: a directory is the directory kind's, and no other's */
	struct stat st;
	assert_int_equal(stat(f->src, &st), 0);
	stg_source s;
	assert_int_equal(stg__source_open(f->ctx, f->c, f->src, &st, &s), STG_OK);
	assert_true(stg__source_dir.claims(&s));
	assert_false(stg__source_pack.claims(&s));
	assert_false(stg__source_archive.claims(&s));
	assert_string_equal(stg__source_dir.kind, "directory");
	assert_null(stg__source_dir.read); /* a tree has no bytes of its own */
	s.ops = &stg__source_dir;
	/* with a subset: refused when opened */
	const char *inc[] = {"train"};
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	stg_stage_result r;
	memset(&r, 0, sizeof r);
	assert_int_equal(stg__source_dir.open(f->ctx, f->c, &s, &o, &r), STG_EUSAGE);
	char want[4300];
	snprintf(want, sizeof want, "--include needs a pack: pack '%s' with 'stager pack' first",
	         f->src);
	assert_string_equal(stg_errmsg(f->ctx), want);
	stg__source_close(&s);
	/* a missing source */
	stg_stage_opts_init(&o);
	char *missing = ut_join(f->dir, "missing");
	assert_int_equal(stg_stage(f->ctx, f->c, missing, &o, &r), STG_ENOENT);
	/* the entry is made and pinned by the owner given */
	char *dest = ut_join(f->dir, "ds");
	o.dest = dest;
	o.owner = "job-1";
	assert_int_equal(stg_stage(f->ctx, f->c, f->src, &o, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	assert_string_equal(r.kind, "directory");
	char key[STG_DIGEST_HEXLEN + 1], owners[4][160];
	stg_digest_hex(r.digest, key);
	assert_int_equal(stg__pins_list(f->c, key, owners, 4), 1);
	assert_string_equal(owners[0], "job-1");
	stg_stage_result_free(&r);
	free(dest);
	free(missing);
}

/* A FIFO in the tree: skipped with a warning, the rest staged. */
static void test_specials(void **state)
{
	fx *f = *state;
	char *fifo = ut_join(f->src, "pipe");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, dest, &r), STG_OK);
	assert_int_equal(r.files, 3);
	assert_non_null(strstr(f->log.text, "skipping 'pipe': not a file, directory or link"));
	char *p = ut_join(dest, "pipe");
	assert_int_equal(access(p, F_OK), -1);
	stg_stage_result_free(&r);
	free(p);
	free(dest);
	free(fifo);
}

/* A file rewritten in place while it is copied (same size) must not be
 * published: the entry would hold bytes that were never the file's at any
 * one time, under the key of the listing before the change, and the stage
 * (and any other that walked the tree before the change) would use it.
 * The pack and collect paths check mtime and ctime after a copy. */
static void test_changing_same_size(void **state)
{
	fx *f = *state;
	ut_fill_file(f->src, "big", 32 << 20, 5);
	ut_writer w = {.path = ut_join(f->src, "big"), .off = 12345, .us = 20};
	ut_writer_start(&w);
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	stg_err err = stage(f, dest, &r);
	ut_writer_stop(&w);
	assert_int_equal(err, STG_EIO);
	assert_int_equal(stg_stage_cached(f->c, r.digest, NULL), 0);
	stg_stage_result_free(&r);
	free(w.path);
	free(dest);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_stage_dir),
        T(test_direct),
        T(test_specials),
        T(test_changing_same_size),
};

UT_MAIN(tests)
