/* test_fanout.c - one node reads a pack for the allocation (fanout.c):
 * stg_copy_pack makes a checked local copy (its SHA-256 against the
 * trailer, appearing whole or not at all, room made in the cache first),
 * and stg_stage from that copy reads nothing of the source, refuses a
 * copy or a source of another version, and uses a cached entry by digest
 * alone. */
#include "unit.h"
#include "cache.h"

#include <dirent.h>

typedef struct fx {
	UT_FX;
	char *local;
	stg_pack_info info;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 2);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_fill_file(f->src, "data.bin", 400000, 7);
	ut_write(f->src, "labels", "cat\ndog\n", 8);
	f->pack = ut_join(f->dir, "set.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	f->local = ut_join(f->dir, "local.tar.zst");
	f->c = ut_cache(f->ctx, f->dir, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	free(f->local);
	return ut_teardown(state);
}

/* The pack copied to local; its digest. */
static void copy_local(fx *f, uint8_t digest[STG_DIGEST_LEN])
{
	uint64_t bytes;
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, f->local, digest, &bytes), STG_OK);
}

static void test_copy(void **state)
{
	fx *f = *state;
	uint8_t digest[STG_DIGEST_LEN] = {0};
	uint64_t bytes = 0;
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, f->local, digest, &bytes), STG_OK);
	assert_memory_equal(digest, f->info.digest, STG_DIGEST_LEN);
	assert_int_equal(bytes, f->info.pack_size);
	ut_same_file(f->pack, f->local);
	ut_no_temporaries(f->dir, false);
	/* over an older copy: replaced */
	ut_write(f->dir, "local.tar.zst", "old", 3);
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, f->local, digest, &bytes), STG_OK);
	size_t lb;
	uint8_t *b = ut_read(f->local, &lb);
	assert_int_equal(lb, f->info.pack_size);
	free(b);
}

static void test_refused(void **state)
{
	fx *f = *state;
	uint8_t digest[STG_DIGEST_LEN];
	uint64_t bytes = 99;
	/* a byte flipped in the frames: the trailer is intact, the SHA-256
	 * is not; nothing at dst */
	ut_flip(f->pack, 1000, 1);
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, f->local, digest, &bytes),
	                 STG_ECORRUPT);
	char want[4200];
	snprintf(want, sizeof want, "'%s' is damaged: its SHA-256 does not match", f->pack);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_int_equal(access(f->local, F_OK), -1);
	ut_no_temporaries(f->dir, false);
	ut_flip(f->pack, 1000, 1);
	/* not a pack */
	ut_write(f->dir, "junk", "not a pack, no trailer here at all, none", 40);
	char *junk = ut_join(f->dir, "junk");
	assert_int_equal(stg_copy_pack(f->ctx, f->c, junk, f->local, digest, &bytes), STG_ECORRUPT);
	snprintf(want, sizeof want, "'%s': ", junk);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	/* missing */
	char *missing = ut_join(f->dir, "missing");
	assert_int_equal(stg_copy_pack(f->ctx, f->c, missing, f->local, digest, &bytes),
	                 STG_ENOENT);
	/* nowhere to put it */
	char *nowhere = ut_join(f->dir, "no/such/dir/x.tar.zst");
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, nowhere, digest, &bytes), STG_EIO);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot create a file beside '"));
	assert_int_equal(access(f->local, F_OK), -1);
	free(nowhere);
	free(missing);
	free(junk);
}

/* Room for the copy comes first: over cache_max, nothing is copied. */
static void test_no_room(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, (const char *const[]){"cache_max", "100K", NULL});
	uint8_t digest[STG_DIGEST_LEN];
	uint64_t bytes;
	assert_int_equal(stg_copy_pack(f->ctx, f->c, f->pack, f->local, digest, &bytes),
	                 STG_ENOSPC);
	assert_int_equal(access(f->local, F_OK), -1);
	ut_no_temporaries(f->dir, false);
}

/* Stage the pack to dest from the copy (NULL: none) of the pack with digest. */
static stg_err stage_copy(fx *f, const char *copy, const uint8_t *digest, const char *dest,
                          stg_stage_result *r)
{
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.from_copy = copy;
	o.from_copy_digest = digest;
	return ut_stage(f->ctx, f->c, f->pack, dest, &o, r);
}

static void test_stage_from_copy(void **state)
{
	fx *f = *state;
	uint8_t digest[STG_DIGEST_LEN];
	copy_local(f, digest);
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage_copy(f, f->local, digest, dest, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	assert_int_equal(r.source_bytes, 0); /* nothing of the shared FS read */
	assert_memory_equal(r.digest, f->info.digest, STG_DIGEST_LEN);
	ut_same_in(f->src, dest, "labels");
	stg_stage_result_free(&r);
	/* by digest alone: the entry is used without the source */
	char *moved = ut_join(f->dir, "moved.tar.zst");
	assert_int_equal(rename(f->pack, moved), 0);
	assert_int_equal(stage_copy(f, NULL, digest, dest, &r), STG_OK);
	assert_int_equal(r.hit, 1);
	stg_stage_result_free(&r);
	assert_int_equal(rename(moved, f->pack), 0);
	free(moved);
	free(dest);
}

static void test_stage_wrong_copy(void **state)
{
	fx *f = *state;
	uint8_t digest[STG_DIGEST_LEN];
	copy_local(f, digest);
	/* a damaged copy: a warning, and the source read instead */
	ut_flip(f->local, 500, 1);
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage_copy(f, f->local, digest, dest, &r), STG_OK);
	assert_true(r.source_bytes > 0);
	stg_stage_result_free(&r);
	char want[4400];
	snprintf(want, sizeof want, "the copy '%s' of '%s' cannot be used (", f->local, f->pack);
	assert_non_null(strstr(f->log.text, want));
	/* the source replaced by another version meanwhile: refused, so that
	 * the nodes of one job never hold different versions */
	ut_write(f->src, "labels", "cat\ndog\nemu\n", 12);
	ut_pack(f->ctx, f->src, f->pack, NULL);
	char *dest2 = ut_join(f->dir, "ds2");
	uint8_t other[STG_DIGEST_LEN];
	memcpy(other, digest, sizeof other);
	other[0] ^= 1;
	assert_int_equal(stage_copy(f, NULL, other, dest2, &r), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "the version the other nodes staged (was it "
	                                           "replaced during the job?)"));
	assert_int_equal(access(dest2, F_OK), -1);
	free(dest2);
	free(dest);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_copy),
        T(test_refused),
        T(test_no_room),
        T(test_stage_from_copy),
        T(test_stage_wrong_copy),
};

UT_MAIN(tests)
