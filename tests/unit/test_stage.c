/* test_stage.c - stg_stage of packs into a cache on a temporary scratch
 * root (stage.c): a miss builds a read-only entry, a hit reads nothing, the
 * same pack under another name is found by its digest, subsets are
 * entries of their own, a damaged warm entry is rebuilt (the quick check,
 * or every byte with verify), a damaged pack publishes nothing, a source
 * that is missing or not a file, a destination in the way, no room, a
 * version built from a delta against the cached one, waiting for another
 * builder, and leftovers of a dead one. */
#include "unit.h"
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>

typedef struct fx {
	UT_FX;
	stg_pack_info info;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 2);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_mkdir(f->src, "a");
	ut_mkdir(f->src, "b");
	ut_fill_file(f->src, "a/one", 100000, 1);
	ut_fill_file(f->src, "a/two", 3000, 2);
	ut_fill_file(f->src, "b/big", 300000, 3);
	ut_write(f->src, "top", "top\n", 4);
	ut_symlink(f->src, "link", "a/one");
	f->pack = ut_join(f->dir, "set.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	f->c = ut_cache(f->ctx, f->dir, NULL);
	*state = f;
	return 0;
}

static stg_err stage(fx *f, const char *src, const char *dest, stg_stage_opts *o,
                     stg_stage_result *r)
{
	return ut_stage(f->ctx, f->c, src, dest, o, r);
}

static void same_files(fx *f, const char *staged, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ut_same_in(f->src, staged, names[i]);
}

static const char *const all_files[] = {"a/one", "a/two", "b/big", "top"};

/* The cache's entries and builds (names under cache/). */
static size_t cache_names(fx *f, char ***names)
{
	size_t n;
	assert_int_equal(stg__dir_names(f->c->rootfd, "cache", true, names, &n), 0);
	return n;
}

/* How many entries and builds the cache holds. */
static size_t cache_count(fx *f)
{
	char **names;
	size_t n = cache_names(f, &names);
	stg__names_free(names, n);
	return n;
}

static void test_miss_then_hit(void **state)
{
	fx *f = *state;
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_string_equal(r.kind, "pack");
	assert_int_equal(r.hit, 0);
	assert_int_equal(r.delta, 0);
	assert_int_equal(r.files, 4);
	assert_int_equal(r.content_bytes, 100000 + 3000 + 300000 + 4);
	assert_memory_equal(r.digest, f->info.digest, STG_DIGEST_LEN);
	/* the end of the pack (one read of up to 1 MiB, here the whole of
	 * it), then the frames it did not hold: none */
	assert_true(f->info.pack_size <= STG_TAIL_READ);
	assert_int_equal(r.source_bytes, f->info.pack_size);
	assert_string_equal(r.path, dest);
	same_files(f, dest, all_files, 4);
	/* a link into the cache; the entry read-only */
	char hex[STG_DIGEST_HEXLEN + 1], want[4300], buf[4300];
	stg_digest_hex(f->info.digest, hex);
	snprintf(want, sizeof want, "%s/cache/%s/data", stg_cache_root(f->c), hex);
	ssize_t n = readlink(dest, buf, sizeof buf - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, want);
	char *one = ut_join(dest, "a/one");
	struct stat st;
	assert_int_equal(stat(one, &st), 0);
	assert_int_equal(st.st_mode & 0222, 0);
	assert_int_equal(stg_stage_cached(f->c, f->info.digest, NULL), 1);
	uint8_t other[STG_DIGEST_LEN] = {1};
	assert_int_equal(stg_stage_cached(f->c, other, NULL), 0);
	stg_meta m;
	assert_int_equal(stg__meta_read(f->c, hex, &m), 0);
	assert_string_equal(m.source, f->pack);
	assert_string_equal(m.kind, "pack");
	stg_stage_result_free(&r);
	/* warm: from the index, nothing read */
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 1);
	assert_int_equal(r.source_bytes, 0);
	assert_string_equal(r.kind, "pack");
	assert_memory_equal(r.digest, f->info.digest, STG_DIGEST_LEN);
	assert_int_equal(r.files, 4);
	stg_stage_result_free(&r);
	/* the same pack under another name, by a relative path: found by
	 * its digest, only the trailer read */
	char *copy = ut_join(f->dir, "copy.tar.zst");
	char cmd[8400];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f->pack, copy);
	assert_int_equal(system(cmd), 0);
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(f->dir), 0);
	char *dest2 = ut_join(f->dir, "ds2");
	assert_int_equal(stage(f, "copy.tar.zst", dest2, NULL, &r), STG_OK);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(r.hit, 1);
	assert_int_equal(r.source_bytes, f->info.pack_size);
	same_files(f, dest2, all_files, 4);
	stg_stage_result_free(&r);
	/* still one entry */
	assert_int_equal(cache_count(f), 1);
	free(dest2);
	free(copy);
	free(one);
	free(dest);
}

static void test_subset(void **state)
{
	fx *f = *state;
	const char *inc[] = {"a/t*"};
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	char *dest = ut_join(f->dir, "sub");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, &o, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	assert_int_equal(r.files, 1);
	assert_int_equal(r.content_bytes, 3000);
	same_files(f, dest, all_files + 1, 1);
	char *one = ut_join(dest, "a/one");
	assert_int_equal(access(one, F_OK), -1);
	stg_stage_result_free(&r);
	assert_int_equal(stg_stage_cached(f->c, f->info.digest, &o), 1);
	assert_int_equal(stg_stage_cached(f->c, f->info.digest, NULL), 0);
	/* the whole pack is another entry */
	char *whole = ut_join(f->dir, "whole");
	assert_int_equal(stage(f, f->pack, whole, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	stg_stage_result_free(&r);
	char **names;
	size_t k = cache_names(f, &names);
	assert_int_equal(k, 2);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(f->info.digest, hex);
	assert_string_equal(names[0], hex);
	assert_memory_equal(names[1], hex, STG_DIGEST_HEXLEN);
	assert_int_equal(names[1][STG_DIGEST_HEXLEN], '-');
	assert_int_equal(strlen(names[1]), STG_DIGEST_HEXLEN + 17);
	stg__names_free(names, k);
	/* the subset again: a hit */
	stg_stage_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	assert_int_equal(stage(f, f->pack, dest, &o, &r), STG_OK);
	assert_int_equal(r.hit, 1);
	stg_stage_result_free(&r);
	free(whole);
	free(one);
	free(dest);
}

/* The path of a file in the entry of the whole pack. */
static char *entry_file(fx *f, const char *name)
{
	char hex[STG_DIGEST_HEXLEN + 1], p[4300];
	stg_digest_hex(f->info.digest, hex);
	snprintf(p, sizeof p, "%s/cache/%s/data/%s", stg_cache_root(f->c), hex, name);
	return strdup(p);
}

/* The pack staged to dir/ds (returned), whole. */
static char *staged(fx *f)
{
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	stg_stage_result_free(&r);
	return dest;
}

static void test_damaged_entry(void **state)
{
	fx *f = *state;
	char *dest = staged(f);
	stg_stage_result r;
	/* a byte changed, same size: the quick check of a warm stage does
	 * not see it, verify does, and stages it again */
	char *two = entry_file(f, "a/two");
	chmod(two, 0644);
	int fd = open(two, O_WRONLY);
	assert_int_equal(pwrite(fd, "X", 1, 100), 1);
	close(fd);
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 1);
	stg_stage_result_free(&r);
	assert_int_equal(f->log.warnings, 0);
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.verify = 1;
	assert_int_equal(stage(f, f->pack, dest, &o, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	same_files(f, dest, all_files, 4);
	stg_stage_result_free(&r);
	char want[4400];
	snprintf(want, sizeof want,
	         "the cached copy of '%s' is damaged ('a/two' does not match its manifest (3000 "
	         "bytes, expected 3000)): staging it again",
	         f->pack);
	assert_non_null(strstr(f->log.text, want));
	/* a file cut short: the quick check sees it */
	f->log.text[0] = '\0';
	chmod(two, 0644);
	assert_int_equal(truncate(two, 10), 0);
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	same_files(f, dest, all_files, 4);
	stg_stage_result_free(&r);
	assert_non_null(strstr(f->log.text, "('a/two' has 10 bytes, its manifest says 3000)"));
	/* an extra file in the entry */
	f->log.text[0] = '\0';
	char *d = entry_file(f, "b");
	chmod(d, 0755);
	ut_write(d, "planted", "x", 1);
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	char *planted = ut_join(dest, "b/planted");
	assert_int_equal(access(planted, F_OK), -1);
	stg_stage_result_free(&r);
	assert_non_null(strstr(f->log.text, "it holds 1 file more than its manifest names"));
	free(planted);
	free(d);
	free(two);
	free(dest);
}

static void test_damaged_pack(void **state)
{
	fx *f = *state;
	/* a byte flipped in the middle of the frames */
	ut_flip(f->pack, (off_t)(f->info.data_size / 2), 0x40);
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_ECORRUPT);
	assert_null(r.path);
	char want[4200];
	snprintf(want, sizeof want, "'%s': ", f->pack);
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	assert_true(strstr(stg_errmsg(f->ctx), "frame") || strstr(stg_errmsg(f->ctx), "damaged"));
	/* nothing published, nothing left */
	assert_int_equal(cache_count(f), 0);
	assert_int_equal(access(dest, F_OK), -1);
	assert_int_equal(stg_stage_cached(f->c, f->info.digest, NULL), 0);
	/* not a pack, not an archive */
	ut_write(f->dir, "junk.tar.zst", "this is not a pack at all", 25);
	char *junk = ut_join(f->dir, "junk.tar.zst");
	assert_int_not_equal(stage(f, junk, dest, NULL, &r), STG_OK);
	assert_int_equal(access(dest, F_OK), -1);
	free(junk);
	free(dest);
}

static void test_bad_sources(void **state)
{
	fx *f = *state;
	char *dest = ut_join(f->dir, "ds");
	char *missing = ut_join(f->dir, "missing.tar.zst");
	stg_stage_result r;
	assert_int_equal(stage(f, missing, dest, NULL, &r), STG_ENOENT);
	char want[4200];
	snprintf(want, sizeof want, "cannot read '%s': No such file or directory", missing);
	assert_string_equal(stg_errmsg(f->ctx), want);
	char *fifo = ut_join(f->dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	double t0 = stg__now();
	assert_int_equal(stage(f, fifo, dest, NULL, &r), STG_ENOENT);
	ut_assert_time_below(stg__now() - t0, 2);
	snprintf(want, sizeof want, "'%s' is not a file or directory", fifo);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_int_equal(access(dest, F_OK), -1);
	/* a destination in the way: refused, the user's file untouched */
	ut_write(f->dir, "taken", "mine", 4);
	char *taken = ut_join(f->dir, "taken");
	assert_int_equal(stage(f, f->pack, taken, NULL, &r), STG_EEXIST);
	ut_content_is(f->dir, "taken", "mine");
	free(taken);
	free(fifo);
	free(missing);
	free(dest);
}

static void test_no_room(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, (const char *const[]){"cache_max", "100K", NULL});
	char *dest = ut_join(f->dir, "ds");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_ENOSPC);
	assert_non_null(strstr(stg_errmsg(f->ctx), "not enough room in the cache on "));
	assert_non_null(strstr(stg_errmsg(f->ctx), "cache_max 100.0 KiB"));
	assert_int_equal(cache_count(f), 0);
	assert_int_equal(access(dest, F_OK), -1);
	free(dest);
}

static void test_copy(void **state)
{
	fx *f = *state;
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.copy = 1;
	char *dest = ut_join(f->dir, "mine");
	stg_stage_result r;
	assert_int_equal(stage(f, f->pack, dest, &o, &r), STG_OK);
	struct stat st;
	assert_int_equal(lstat(dest, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	same_files(f, dest, all_files, 4);
	/* writable, and writing it leaves the cache alone */
	ut_write(dest, "a/two", "changed", 7);
	stg_stage_result_free(&r);
	char *two = entry_file(f, "a/two");
	assert_int_equal(stat(two, &st), 0);
	assert_int_equal(st.st_size, 3000);
	free(two);
	free(dest);
}

/* A new version packed with the old one as a base: staged from the delta
 * against the cached old version. */
static void test_delta(void **state)
{
	fx *f = *state;
	/* a slow link (1 MiB/s): reading 300 KiB of new files through the delta
	 * beats reading the pack, so the delta is chosen (on a fast link the
	 * pack would be: delta.bats tests that choice) */
	ut_fx_cache(&f->ut, (const char *const[]){"bwlimit", "1M", NULL});
	char *dest = staged(f);
	stg_stage_result r;
	ut_fill_file(f->src, "a/three", 5000, 4);
	ut_fill_file(f->src, "b/big", 300000, 5);
	char *v2 = ut_join(f->dir, "set-v2.tar.zst");
	stg_pack_opts po;
	stg_pack_opts_init(&po);
	const char *bases[] = {f->pack};
	po.bases = bases;
	po.n_bases = 1;
	stg_pack_info i2;
	assert_int_equal(stg_pack_dir(f->ctx, f->src, v2, &po, &i2), STG_OK);
	assert_int_equal(i2.deltas, 1);
	assert_int_equal(stage(f, v2, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	assert_int_equal(r.delta, 1);
	assert_memory_equal(r.base_digest, f->info.digest, STG_DIGEST_LEN);
	assert_memory_equal(r.digest, i2.digest, STG_DIGEST_LEN);
	assert_int_equal(r.files, 5);
	/* past the trailer, only the delta is read: less than the frames */
	uint64_t tail = i2.pack_size < STG_TAIL_READ ? i2.pack_size : STG_TAIL_READ;
	assert_true(r.source_bytes > tail);
	assert_true(r.source_bytes - tail < i2.data_size);
	const char *v2_files[] = {"a/one", "a/two", "a/three", "b/big", "top"};
	same_files(f, dest, v2_files, 5);
	stg_stage_result_free(&r);
	/* the base is not left pinned by the build */
	char hex[STG_DIGEST_HEXLEN + 1], owners[8][160];
	stg_digest_hex(f->info.digest, hex);
	size_t np = stg__pins_list(f->c, hex, owners, 8);
	for (size_t i = 0; i < np; i++)
		assert_memory_not_equal(owners[i], "pid-", 4);
	/* the delta file gone: a warning, and the whole pack read */
	stg_digest_hex(i2.digest, hex);
	int lk = stg__cache_lock(f->ctx, f->c, "cache", true, NULL);
	assert_int_equal(stg__entry_remove(f->c, hex), 0);
	stg__cache_unlock(lk);
	char *dir = f->dir;
	char **names;
	size_t k;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__dir_names(dfd, "", true, &names, &k), 0);
	for (size_t i = 0; i < k; i++)
		if (strstr(names[i], ".delta-"))
			assert_int_equal(unlinkat(dfd, names[i], 0), 0);
	stg__names_free(names, k);
	close(dfd);
	f->log.text[0] = '\0';
	assert_int_equal(stage(f, v2, dest, NULL, &r), STG_OK);
	assert_int_equal(r.delta, 0);
	same_files(f, dest, v2_files, 5);
	assert_non_null(strstr(f->log.text, "cannot read the delta '"));
	assert_non_null(strstr(f->log.text, "reading the whole pack instead"));
	stg_stage_result_free(&r);
	free(v2);
	free(dest);
}

typedef struct bg {
	fx *f;
	const char *dest;
	stg_err err;
	stg_stage_result r;
} bg;

static void *stage_bg(void *arg)
{
	bg *b = arg;
	stg_ctx *ctx = stg_ctx_new();
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.owner = "job-2";
	b->err = ut_stage(ctx, b->f->c, b->f->pack, b->dest, &o, &b->r);
	stg_ctx_free(ctx);
	return NULL;
}

/* Single flight: while another process holds the entry's lock, a stage
 * waits and then uses what it built; a dead builder's leftovers go. */
static void test_wait_for_builder(void **state)
{
	fx *f = *state;
	/* the entry, built in another cache, put in place by "the builder" */
	char *other = ut_join(f->dir, "other");
	mkdir(other, 0700);
	stg_cache *oc = ut_cache(f->ctx, other, NULL);
	char *d0 = ut_join(f->dir, "d0");
	stg_stage_result r;
	assert_int_equal(ut_stage(f->ctx, oc, f->pack, d0, NULL, &r), STG_OK);
	stg_stage_result_free(&r);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(f->info.digest, hex);
	int lk = stg__cache_lock(f->ctx, f->c, hex, false, NULL);
	assert_true(lk >= 0);
	bg b = {f, NULL, STG_EIO, {0}};
	char *dest = ut_join(f->dir, "ds");
	b.dest = dest;
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, stage_bg, &b), 0);
	struct timespec ts = {0, 300 * 1000 * 1000};
	nanosleep(&ts, NULL);
	/* it waits: nothing published yet */
	assert_int_equal(access(dest, F_OK), -1);
	char cmd[8800];
	snprintf(cmd, sizeof cmd, "cp -a '%s/cache/%s' '%s/cache/'", stg_cache_root(oc), hex,
	         stg_cache_root(f->c));
	assert_int_equal(system(cmd), 0);
	stg__cache_unlock(lk);
	pthread_join(th, NULL);
	assert_int_equal(b.err, STG_OK);
	assert_int_equal(b.r.waited, 1);
	assert_int_equal(b.r.hit, 1);
	same_files(f, dest, all_files, 4);
	stg_stage_result_free(&b.r);
	stg_cache_close(oc);

	/* a builder that died: its leftover is removed, the entry built */
	int lk2 = stg__cache_lock(f->ctx, f->c, "cache", true, NULL);
	assert_int_equal(stg__entry_remove(f->c, hex), 0);
	stg__cache_unlock(lk2);
	char tmp[256];
	snprintf(tmp, sizeof tmp, "cache/%s.tmp.999999", hex);
	assert_int_equal(mkdirat(f->c->rootfd, tmp, 0700), 0);
	assert_int_equal(stage(f, f->pack, dest, NULL, &r), STG_OK);
	assert_int_equal(r.hit, 0);
	stg_stage_result_free(&r);
	char **names;
	size_t k = cache_names(f, &names);
	assert_int_equal(k, 1);
	assert_string_equal(names[0], hex);
	stg__names_free(names, k);
	free(dest);
	free(d0);
	free(other);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_miss_then_hit), T(test_subset),      T(test_damaged_entry),
        T(test_damaged_pack),  T(test_bad_sources), T(test_no_room),
        T(test_copy),          T(test_delta),       T(test_wait_for_builder),
};

UT_MAIN(tests)
