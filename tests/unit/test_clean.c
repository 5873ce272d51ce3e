/* test_clean.c - stg_cache_status and stg_clean (clean.c) on a cache in a
 * temporary scratch root: leftovers of dead builders (a live builder's
 * kept), interrupted evictions, stale pins of dead processes (live ones
 * kept), job directories of gone owners, --job, --all, --older-than, the
 * quota; a dry run reports the same and changes nothing; results a gone
 * job never collected are kept, not removed; kept results past keep_days;
 * collect records whose source is gone. */
#include "unit.h"
#include "cache.h"

#include <errno.h>
#include <time.h>

typedef struct item {
	char what[16], path[512];
	uint64_t bytes;
} item;

typedef struct fx {
	UT_FX;
	char *me, *old_path;
	item items[64];
	int n;
} fx;

static void report(void *arg, const char *what, const char *path, uint64_t bytes)
{
	fx *f = arg;
	assert_true(f->n < 64);
	snprintf(f->items[f->n].what, sizeof f->items[0].what, "%s", what);
	snprintf(f->items[f->n].path, sizeof f->items[0].path, "%s", path);
	f->items[f->n].bytes = bytes;
	f->n++;
}

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->c = ut_cache(f->ctx, f->dir, NULL);
	f->me = stg_owner_process(getpid());
	/* no Slurm to ask: a job owner is "alive" (unknown) unless --job */
	f->old_path = ut_path_set("/nonexistent", NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	free(f->me);
	return ut_teardown(state);
}

static void make_entry(fx *f, int i, uint64_t size, int64_t last_use)
{
	char p[256];
	snprintf(p, sizeof p, "cache/%s", ut_key(i));
	assert_int_equal(mkdirat(f->c->rootfd, p, 0700), 0);
	int e = openat(f->c->rootfd, p, O_RDONLY | O_DIRECTORY);
	assert_int_equal(mkdirat(e, "data", 0755), 0);
	int fd = openat(e, "data/file", O_WRONLY | O_CREAT, 0444);
	char buf[8192] = {0};
	assert_int_equal(write(fd, buf, sizeof buf), (ssize_t)sizeof buf);
	close(fd);
	stg_meta m = {.size = size, .files = 1, .content = 8192};
	snprintf(m.kind, sizeof m.kind, "pack");
	snprintf(m.source, sizeof m.source, "/shared/set%d.tar.zst", i);
	assert_int_equal(stg__meta_write(e, &m), 0);
	struct timespec ts[2] = {{last_use, 0}, {last_use, 0}};
	assert_int_equal(utimensat(e, "meta", ts, 0), 0);
	close(e);
}

/* Make the directory (under the root) of the form fmt, if not there. */
static __attribute__((format(printf, 2, 3))) void mkdir_root(fx *f, const char *fmt, ...)
{
	char rel[512];
	UT_VFMT(rel, fmt);
	int rc = mkdirat(f->c->rootfd, rel, 0700);
	if (rc && errno != EEXIST)
		fail_msg("mkdir %s", rel);
}

/* Is there a path (under the root) of the form fmt? */
static __attribute__((format(printf, 2, 3))) bool exists(fx *f, const char *fmt, ...)
{
	char rel[512];
	UT_VFMT(rel, fmt);
	return ut_exists_at(f->c->rootfd, rel);
}

/* Was the path (under the root) of the form fmt reported as what? */
static __attribute__((format(printf, 3, 4))) bool reported(fx *f, const char *what, const char *fmt,
                                                           ...)
{
	char rel[512], path[1024];
	UT_VFMT(rel, fmt);
	snprintf(path, sizeof path, "%s/%s", stg_cache_root(f->c), rel);
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->items[i].what, what) && !strcmp(f->items[i].path, path))
			return true;
	return false;
}

static void pin(fx *f, int i, const char *owner)
{
	assert_int_equal(stg__pin(f->c, ut_key(i), owner), 0);
}

/* The scene: entries 1 (pinned by this live process), 2 (pinned by a dead
 * one), 3 (unpinned, old), 4 (unpinned, recent), 5 (pinned by job 42);
 * builds of a dead and a live builder, an interrupted eviction; job
 * directories. */
static void scene(fx *f)
{
	time_t now = time(NULL);
	make_entry(f, 1, 10000, now - 10);
	make_entry(f, 2, 10000, now - 5000);
	make_entry(f, 3, 10000, now - 90000);
	make_entry(f, 4, 10000, now - 100);
	make_entry(f, 5, 10000, now - 80000);
	pin(f, 1, f->me);
	pin(f, 2, "pid-1-0");
	pin(f, 5, "job-42");
	mkdir_root(f, "cache/%s.tmp.11", ut_key(6));
	mkdir_root(f, "cache/%s.tmp.12", ut_key(7));
	mkdir_root(f, "cache/%s.old.13", ut_key(8));
	mkdir_root(f, "jobs/pid-1-0");
	mkdir_root(f, "jobs/job-42");
	mkdir_root(f, "jobs/%s", f->me);
	mkdir_root(f, "bcast");
	mkdir_root(f, "bcast/pid-1-0");
}

static void test_status(void **state)
{
	fx *f = *state;
	scene(f);
	stg_cache_info *info;
	assert_int_equal(stg_cache_status(f->ctx, f->c, &info), STG_OK);
	assert_string_equal(info->root, stg_cache_root(f->c));
	assert_int_equal(info->n_entries, 5);
	assert_int_equal(info->cache_bytes, 50000);
	assert_true(info->fs_size > 0);
	assert_int_equal(info->min_free, 0);
	/* most recently used first */
	assert_string_equal(info->entries[0].key, ut_key(1));
	assert_string_equal(info->entries[1].key, ut_key(4));
	assert_string_equal(info->entries[4].key, ut_key(3));
	const stg_cache_entry *e = &info->entries[0];
	assert_string_equal(e->kind, "pack");
	assert_string_equal(e->source, "/shared/set1.tar.zst");
	assert_int_equal(e->size, 10000);
	assert_int_equal(e->files, 1);
	assert_int_equal(e->n_pins, 1);
	assert_string_equal(e->pins[0].owner, f->me);
	assert_int_equal(e->pins[0].alive, 1);
	e = &info->entries[2];
	assert_string_equal(e->key, ut_key(2));
	assert_int_equal(e->n_pins, 1);
	assert_int_equal(e->pins[0].alive, 0);
	assert_int_equal(info->entries[1].n_pins, 0);
	stg_cache_info_free(info);
	stg_cache_info_free(NULL);
}

static void test_dry_run_then_real(void **state)
{
	fx *f = *state;
	scene(f);
	/* a live builder holds the lock of key 7 */
	int lk = stg__cache_lock(f->ctx, f->c, ut_key(7), false, NULL);
	assert_true(lk >= 0);
	stg_clean_opts o;
	stg_clean_opts_init(&o);
	o.dry_run = 1;
	uint64_t freed = 0;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, &freed), STG_OK);
	assert_true(reported(f, "partial", "cache/%s.tmp.11", ut_key(6)));
	assert_true(reported(f, "partial", "cache/%s.old.13", ut_key(8)));
	assert_true(reported(f, "pin", "pins/%s/pid-1-0", ut_key(2)));
	assert_true(reported(f, "jobdir", "jobs/pid-1-0"));
	assert_true(reported(f, "copy", "bcast/pid-1-0"));
	int dry_n = f->n;
	assert_int_equal(dry_n, 5);
	/* changed nothing */
	assert_true(exists(f, "cache/%s.tmp.11", ut_key(6)));
	assert_true(exists(f, "pins/%s/pid-1-0", ut_key(2)));
	assert_true(exists(f, "jobs/pid-1-0"));
	/* the real thing: the same */
	f->n = 0;
	o.dry_run = 0;
	uint64_t freed2 = 0;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, &freed2), STG_OK);
	assert_int_equal(f->n, dry_n);
	assert_int_equal(freed2, freed);
	uint64_t sum = 0;
	for (int i = 0; i < f->n; i++)
		sum += f->items[i].bytes;
	assert_int_equal(sum, freed2);
	assert_false(exists(f, "cache/%s.tmp.11", ut_key(6)));
	assert_false(exists(f, "cache/%s.old.13", ut_key(8)));
	/* the live builder's build stays */
	assert_true(exists(f, "cache/%s.tmp.12", ut_key(7)));
	assert_false(exists(f, "pins/%s", ut_key(2))); /* its last pin gone: the directory too */
	assert_true(exists(f, "pins/%s/%s", ut_key(1), f->me));
	assert_false(exists(f, "jobs/pid-1-0"));
	assert_false(exists(f, "bcast/pid-1-0"));
	assert_true(exists(f, "jobs/job-42"));
	assert_true(exists(f, "jobs/%s", f->me));
	/* entries: under no quota, all five stay */
	stg_lru *v;
	size_t n = stg__entries(f->c, &v);
	assert_int_equal(n, 5);
	free(v);
	stg__cache_unlock(lk);
}

static void test_all_and_older(void **state)
{
	fx *f = *state;
	scene(f);
	stg_clean_opts o;
	stg_clean_opts_init(&o);
	o.older_than = 3600;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_OK);
	/* unused for an hour and not pinned by a live owner: 2 (its pin is
	 * dead) and 3; 5 is pinned by job 42 (alive as far as we know) */
	for (int i = 1; i <= 5; i++) {
		bool gone = i == 2 || i == 3;
		if (exists(f, "cache/%s", ut_key(i)) == gone)
			fail_msg("entry %d %s", i, gone ? "kept" : "removed");
		if (gone)
			assert_true(reported(f, "entry", "cache/%s", ut_key(i)));
	}
	/* --all: every unpinned one */
	f->n = 0;
	stg_clean_opts_init(&o);
	o.all = 1;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_OK);
	assert_false(exists(f, "cache/%s", ut_key(4)));
	assert_true(exists(f, "cache/%s", ut_key(1)));
	assert_true(exists(f, "cache/%s", ut_key(5)));
	/* --job 42: that job is over, its pins and directory go */
	f->n = 0;
	stg_clean_opts_init(&o);
	o.all = 1;
	o.job = "42";
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_OK);
	assert_false(exists(f, "cache/%s", ut_key(5)));
	assert_false(exists(f, "jobs/job-42"));
	assert_true(exists(f, "cache/%s", ut_key(1))); /* never an entry a live owner pins */
	o.job = "";
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_EUSAGE);
	assert_string_equal(stg_errmsg(f->ctx), "--job needs a job id");
}

static void test_quota(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, (const char *const[]){"cache_max", "30000", NULL});
	scene(f);
	/* 50000 in entries: least recently used unpinned ones go until it
	 * fits: 3 (oldest) and 2 (its pin is dead); 5 is pinned */
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_false(exists(f, "cache/%s", ut_key(3)));
	assert_false(exists(f, "cache/%s", ut_key(2)));
	for (int i = 4; i <= 5; i++)
		assert_true(exists(f, "cache/%s", ut_key(i)));
}

/* A job that is gone never collected its results: kept, not removed with
 * its job directory; the record goes once they are kept. */
static void test_keeps_results(void **state)
{
	fx *f = *state;
	mkdir_root(f, "jobs/pid-1-0");
	char *out = ut_join(stg_cache_root(f->c), "jobs/pid-1-0/out");
	mkdir(out, 0755);
	ut_write(out, "result", "42\n", 3);
	const char *src[] = {out}, *dest[] = {"/shared/out"};
	assert_int_equal(stg_results_pending(f->ctx, f->c, "pid-1-0", 1, src, dest), STG_OK);
	/* dry run: says it would keep them, touches nothing */
	stg_clean_opts o;
	stg_clean_opts_init(&o);
	o.dry_run = 1;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_OK);
	assert_int_equal(access(out, F_OK), 0);
	assert_true(exists(f, "results/pid-1-0"));
	bool said = false;
	for (int i = 0; i < f->n; i++)
		said |= !strcmp(f->items[i].what, "keep") && !strcmp(f->items[i].path, out);
	assert_true(said);
	/* for real */
	f->n = 0;
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_int_equal(access(out, F_OK), -1);
	assert_false(exists(f, "results/pid-1-0"));
	assert_false(exists(f, "jobs/pid-1-0"));
	stg_kept *v;
	size_t n;
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_memory_equal(v[0].name, "pid-1-0-out.", 12);
	assert_string_equal(v[0].dest, "/shared/out");
	char *r = ut_join(v[0].path, "result");
	assert_int_equal(access(r, F_OK), 0);
	free(r);
	assert_non_null(
	        strstr(f->log.text, "were never fully collected to '/shared/out': kept in "));
	/* young: they stay, and clean says so */
	f->n = 0;
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_int_equal(f->n, 1);
	assert_string_equal(f->items[0].what, "stays");
	assert_string_equal(f->items[0].path, v[0].path);
	/* --kept: removed now */
	f->n = 0;
	stg_clean_opts_init(&o);
	o.kept = 1;
	assert_int_equal(stg_clean(f->ctx, f->c, &o, report, f, NULL), STG_OK);
	assert_int_equal(f->n, 1);
	assert_string_equal(f->items[0].what, "kept");
	assert_int_equal(access(v[0].path, F_OK), -1);
	stg_kept_free(v, n);
	free(out);
}

/* Kept results older than keep_days go. */
static void test_keep_days(void **state)
{
	fx *f = *state;
	mkdir_root(f, "kept");
	mkdir_root(f, "kept/old-out.1000");
	mkdir_root(f, "kept/new-out.99999999999");
	int fd = openat(f->c->rootfd, "kept/old-out.1000.to", O_WRONLY | O_CREAT, 0600);
	close(fd);
	fd = openat(f->c->rootfd, "kept/orphan.5.to", O_WRONLY | O_CREAT, 0600);
	close(fd);
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_false(exists(f, "kept/old-out.1000"));
	assert_false(exists(f, "kept/old-out.1000.to"));
	assert_false(exists(f, "kept/orphan.5.to"));
	assert_true(exists(f, "kept/new-out.99999999999"));
	assert_true(reported(f, "kept", "kept/old-out.1000"));
	/* keep_days 0: never */
	ut_fx_cache(&f->ut, (const char *const[]){"keep_days", "0", NULL});
	mkdir_root(f, "kept/older.1000");
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_true(exists(f, "kept/older.1000"));
}

/* A collect record whose source is gone goes, with the temporaries a
 * killed collect left in its DEST (only names collect makes). */
static void test_records(void **state)
{
	fx *f = *state;
	char *dest = ut_join(f->dir, "dest");
	mkdir(dest, 0755);
	ut_write(dest, ".stager-tmp.h.1.0", "partial", 7);
	ut_write(dest, "not-ours", "keep", 4);
	ut_write(dest, "result", "done", 4);
	mkdir_root(f, "collect");
	char text[8192];
	snprintf(text, sizeof text,
	         "stager-collect 1\nS %s/gone-src\nP %s\nt .stager-tmp.h.1.0\nt not-ours\n"
	         "t .stager-tmp.h.1.1\nx .stager-tmp.h.1.1\n",
	         f->dir, dest);
	char *cd = ut_join(stg_cache_root(f->c), "collect");
	ut_write(cd, "00000000000000aa", text, strlen(text));
	/* a record whose source is there stays; so do names it does not make */
	char *live = ut_join(f->dir, "live-src");
	mkdir(live, 0755);
	snprintf(text, sizeof text, "stager-collect 1\nS %s\n", live);
	ut_write(cd, "00000000000000bb", text, strlen(text));
	ut_write(cd, "00000000000000cc.tmp", "x", 1); /* a rewrite a kill cut short */
	ut_write(cd, "README", "x", 1);
	assert_int_equal(stg_clean(f->ctx, f->c, NULL, report, f, NULL), STG_OK);
	assert_false(exists(f, "collect/00000000000000aa"));
	assert_true(reported(f, "record", "collect/00000000000000aa"));
	assert_true(exists(f, "collect/00000000000000bb"));
	assert_false(exists(f, "collect/00000000000000cc.tmp"));
	assert_true(exists(f, "collect/README"));
	char *t = ut_join(dest, ".stager-tmp.h.1.0"), *n = ut_join(dest, "not-ours"),
	     *r = ut_join(dest, "result");
	assert_int_equal(access(t, F_OK), -1);
	assert_int_equal(access(n, F_OK), 0);
	assert_int_equal(access(r, F_OK), 0);
	bool left = false;
	for (int i = 0; i < f->n; i++)
		left |= !strcmp(f->items[i].what, "leftover") && !strcmp(f->items[i].path, t);
	assert_true(left);
	free(t);
	free(n);
	free(r);
	free(live);
	free(cd);
	free(dest);
}

/* A job with two results directories of one name (two runs' out/): both
 * kept, each with its own DEST. */
static void test_keeps_two_of_one_name(void **state)
{
	fx *f = *state;
	mkdir_root(f, "jobs/pid-1-0");
	char *a = ut_join(stg_cache_root(f->c), "jobs/pid-1-0/run1");
	char *b = ut_join(stg_cache_root(f->c), "jobs/pid-1-0/run2");
	mkdir(a, 0755);
	mkdir(b, 0755);
	char *oa = ut_join(a, "out"), *ob = ut_join(b, "out");
	mkdir(oa, 0755);
	mkdir(ob, 0755);
	const char *src[] = {oa, ob}, *dest[] = {"/shared/run1", "/shared/run2"};
	assert_int_equal(stg_results_pending(f->ctx, f->c, "pid-1-0", 2, src, dest), STG_OK);
	stg_clean(f->ctx, f->c, NULL, report, f, NULL);
	stg_kept *v;
	size_t n;
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	size_t with_dest = 0;
	for (size_t i = 0; i < n; i++)
		with_dest += v[i].dest != NULL;
	/* both kept, each with its own DEST */
	assert_int_equal(n, 2);
	assert_int_equal(with_dest, 2);
	assert_string_not_equal(v[0].dest, v[1].dest);
	assert_int_equal(access(oa, F_OK), -1);
	assert_int_equal(access(ob, F_OK), -1);
	stg_kept_free(v, n);
	free(oa);
	free(ob);
	free(a);
	free(b);
}

static void test_unpin(void **state)
{
	fx *f = *state;
	pin(f, 1, "job-9");
	pin(f, 2, "job-9");
	pin(f, 2, "job-10");
	assert_int_equal(stg_unpin(f->ctx, f->c, "job-9"), STG_OK);
	char owners[4][160];
	assert_int_equal(stg__pins_list(f->c, ut_key(1), owners, 4), 0);
	assert_int_equal(stg__pins_list(f->c, ut_key(2), owners, 4), 1);
	assert_int_equal(stg_unpin(f->ctx, f->c, "nobody"), STG_OK);
	assert_int_equal(stg_unpin(f->ctx, f->c, "../x"), STG_EUSAGE);
	assert_string_equal(stg_errmsg(f->ctx), "'../x' is not a pin owner");
	assert_int_equal(stg_unpin(f->ctx, f->c, ""), STG_EUSAGE);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_status),  T(test_dry_run_then_real),     T(test_all_and_older),
        T(test_quota),   T(test_keeps_results),         T(test_keep_days),
        T(test_records), T(test_keeps_two_of_one_name), T(test_unpin),
};

UT_MAIN(tests)
