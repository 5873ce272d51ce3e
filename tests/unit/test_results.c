/* test_results.c - results a job has yet to collect (results.c): the
 * record of each SRC and DEST (absolute, escaped), hostile records
 * refused, results kept by one rename with their DEST beside them, the
 * list of kept results, and collecting them to their DEST (removed once
 * sent whole). */
#include "unit.h"
#include "cache.h"
#include "results.h"

#include <errno.h>
#include <time.h>

typedef ut_fx fx;

typedef struct pairs {
	int n;
	char src[8][256], dest[8][256];
	bool pack[8];
	int stop_at;
} pairs;

static int each(void *arg, const char *src, const char *dest, bool pack)
{
	pairs *p = arg;
	snprintf(p->src[p->n], sizeof p->src[0], "%s", src);
	snprintf(p->dest[p->n], sizeof p->dest[0], "%s", dest);
	p->pack[p->n] = pack;
	p->n++;
	return p->n == p->stop_at ? 7 : 0;
}

static void test_pending(void **state)
{
	fx *f = *state;
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof cwd));
	const char *src[] = {"/scratch/job/out", "rel/ckpt", "/scratch/odd\nname"};
	const char *dest[] = {"/shared/out", "/shared/ckpt", "/shared/odd\\name"};
	assert_int_equal(stg_results_pending(f->ctx, f->c, "job-42", 3, src, dest), STG_OK);
	pairs p = {0};
	assert_int_equal(stg__results_each(f->c, "job-42", each, &p), 0);
	assert_int_equal(p.n, 3);
	assert_string_equal(p.src[0], "/scratch/job/out");
	assert_string_equal(p.dest[0], "/shared/out");
	char want[4200];
	snprintf(want, sizeof want, "%s/rel/ckpt", cwd);
	assert_string_equal(p.src[1], want); /* made absolute */
	assert_string_equal(p.src[2], "/scratch/odd\nname");
	assert_string_equal(p.dest[2], "/shared/odd\\name");
	/* the callback's non-zero return ends the walk and is returned */
	pairs q = {.stop_at = 2};
	assert_int_equal(stg__results_each(f->c, "job-42", each, &q), 7);
	assert_int_equal(q.n, 2);
	/* the record: private, in results/ */
	char *rec = ut_join(stg_cache_root(f->c), "results/job-42");
	struct stat st;
	assert_int_equal(stat(rec, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	/* written again: merged (a job's run and its collects share it) */
	assert_int_equal(stg_results_pending(f->ctx, f->c, "job-42", 1, src, dest), STG_OK);
	p.n = 0;
	assert_int_equal(stg__results_each(f->c, "job-42", each, &p), 0);
	assert_int_equal(p.n, 3);
	/* a collect's pair added, with its mode; the same pair again changes
	 * nothing but the mode */
	assert_int_equal(stg__results_add(f->ctx, f->c, "job-42", "/s/x", "/d/x", true), STG_OK);
	assert_int_equal(stg__results_add(f->ctx, f->c, "job-42", "/s/x", "/d/x", true), STG_OK);
	p.n = 0;
	assert_int_equal(stg__results_each(f->c, "job-42", each, &p), 0);
	assert_int_equal(p.n, 4);
	assert_string_equal(p.src[3], "/s/x");
	assert_true(p.pack[3]);
	assert_false(p.pack[0]);
	/* done: gone; done again: fine */
	assert_int_equal(stg_results_done(f->ctx, f->c, "job-42"), STG_OK);
	assert_int_equal(access(rec, F_OK), -1);
	assert_int_equal(stg_results_done(f->ctx, f->c, "job-42"), STG_OK);
	errno = 0;
	assert_int_equal(stg__results_each(f->c, "job-42", each, &p), -1);
	assert_int_equal(errno, ENOENT);
	/* owner names that are not one name */
	static const char *const bad[] = {"", "../x", "a/b", ".hidden"};
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(stg_results_pending(f->ctx, f->c, bad[i], 1, src, dest),
		                 STG_EUSAGE);
		assert_non_null(strstr(stg_errmsg(f->ctx), "is not an owner name"));
		assert_int_equal(stg_results_done(f->ctx, f->c, bad[i]), STG_EUSAGE);
	}
	assert_int_equal(stg_results_pending(f->ctx, f->c, NULL, 1, src, dest), STG_EUSAGE);
	free(rec);
}

static void test_hostile_records(void **state)
{
	fx *f = *state;
	char *dir = ut_join(stg_cache_root(f->c), "results");
	mkdir(dir, 0700);
	pairs p = {0};
	/* not a record */
	ut_write(dir, "a", "something\nS /x\nD /y\n", 20);
	errno = 0;
	assert_int_equal(stg__results_each(f->c, "a", each, &p), -1);
	assert_int_equal(errno, EINVAL);
	/* larger than a record may be */
	size_t big = (1 << 20) + 1;
	char *b = ut_malloc(big);
	memset(b, '\n', big);
	memcpy(b, "stager-results 1\n", 17);
	ut_write(dir, "b", b, big);
	errno = 0;
	assert_int_equal(stg__results_each(f->c, "b", each, &p), -1);
	assert_int_equal(errno, EINVAL);
	free(b);
	/* a FIFO: refused at once */
	char *fifo = ut_join(dir, "c");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	double t0 = stg__now();
	assert_int_equal(stg__results_each(f->c, "c", each, &p), -1);
	ut_assert_time_below(stg__now() - t0, 2);
	/* a link: not followed */
	ut_symlink(dir, "d", "a");
	assert_int_equal(stg__results_each(f->c, "d", each, &p), -1);
	/* a D without its S, bad escapes: skipped */
	static const char text[] = "stager-results 1\nD /orphan\nS /bad\\q\nD /x\nS /s\nD /d\n";
	ut_write(dir, "e", text, sizeof text - 1);
	assert_int_equal(stg__results_each(f->c, "e", each, &p), 0);
	assert_int_equal(p.n, 1);
	assert_string_equal(p.src[0], "/s");
	assert_string_equal(p.dest[0], "/d");
	free(fifo);
	free(dir);
}

static void test_keep(void **state)
{
	fx *f = *state;
	char *out = ut_join(f->dir, "scratch/job/out");
	char cmd[4300];
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", out);
	assert_int_equal(system(cmd), 0);
	ut_write(out, "r.txt", "result\n", 7);
	char *kept = NULL;
	time_t t0 = time(NULL);
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, "job42-out", "/shared/out", &kept),
	                 STG_OK);
	/* one rename: SRC is gone, its contents under kept/NAME.EPOCH */
	assert_int_equal(access(out, F_OK), -1);
	char prefix[4200];
	snprintf(prefix, sizeof prefix, "%s/kept/job42-out.", stg_cache_root(f->c));
	assert_memory_equal(kept, prefix, strlen(prefix));
	int64_t when = stg__kept_epoch(kept);
	assert_true(when >= t0 && when <= time(NULL));
	char *r = ut_join(kept, "r.txt");
	assert_int_equal(access(r, F_OK), 0);
	free(r);
	stg_kept *v;
	size_t n;
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].path, kept);
	assert_string_equal(v[0].dest, "/shared/out");
	assert_int_equal(v[0].since, when);
	assert_memory_equal(v[0].name, "job42-out.", 10);
	stg_kept_free(v, n);
	/* refused names, a missing source */
	char *k2 = (char *)0x1;
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, "a/b", NULL, &k2), STG_EUSAGE);
	assert_null(k2);
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, ".x", NULL, &k2), STG_EUSAGE);
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, "", NULL, &k2), STG_EUSAGE);
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, "gone", "/d", &k2), STG_EIO);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot move '"));
	/* its .to is not left behind */
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	stg_kept_free(v, n);
	char *kd = ut_join(stg_cache_root(f->c), "kept");
	int kfd = open(kd, O_RDONLY | O_DIRECTORY);
	char **names;
	size_t k;
	assert_int_equal(stg__dir_names(kfd, "", true, &names, &k), 0);
	assert_int_equal(k, 2); /* job42-out.EPOCH and its .to */
	stg__names_free(names, k);
	/* removed with its .to */
	const char *base = strrchr(kept, '/') + 1;
	assert_int_equal(stg__kept_remove(f->c, base), 0);
	assert_int_equal(stg__dir_names(kfd, "", true, &names, &k), 0);
	assert_int_equal(k, 0);
	stg__names_free(names, k);
	assert_int_equal(stg__kept_remove(f->c, base), 0);
	close(kfd);
	free(kd);
	free(kept);
	free(out);
}

/* Two sources with the same name kept in one second (job42-out from
 * two runs of one job): the second must not take the first's DEST. */
static void test_keep_same_name(void **state)
{
	fx *f = *state;
	char *a = ut_join(f->dir, "a"), *b = ut_join(f->dir, "b");
	mkdir(a, 0755);
	mkdir(b, 0755);
	ut_write(a, "x", "a", 1);
	ut_write(b, "x", "b", 1);
	char *ka = NULL, *kb = NULL;
	assert_int_equal(stg_keep_results(f->ctx, f->c, a, "job42-out", "/shared/a", &ka), STG_OK);
	stg_err err = stg_keep_results(f->ctx, f->c, b, "job42-out", "/shared/b", &kb);
	stg_kept *v;
	size_t n;
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	/* both kept, under two names, each with its own DEST */
	assert_int_equal(err, STG_OK);
	assert_int_equal(n, 2);
	assert_string_not_equal(ka, kb);
	for (size_t i = 0; i < n; i++) {
		assert_non_null(v[i].dest);
		assert_string_equal(v[i].dest, !strcmp(v[i].path, ka) ? "/shared/a" : "/shared/b");
	}
	stg_kept_free(v, n);
	free(ka);
	free(kb);
	free(a);
	free(b);
}

static void test_epoch_and_list(void **state)
{
	fx *f = *state;
	assert_int_equal(stg__kept_epoch("job1-out.1700000000"), 1700000000);
	assert_int_equal(stg__kept_epoch("a.b.17"), 17);
	assert_int_equal(stg__kept_epoch("noepoch"), 0);
	assert_int_equal(stg__kept_epoch("x."), 0);
	assert_int_equal(stg__kept_epoch("x.12a"), 0);
	assert_int_equal(stg__kept_epoch("x.-5"), 0);
	assert_int_equal(stg__kept_epoch("x.0"), 0);
	assert_int_equal(stg__kept_epoch("x.1700000000.to"), 0);
	/* no kept/ yet: an empty list */
	stg_kept *v = (stg_kept *)0x1;
	size_t n = 9;
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	assert_null(v);
	/* what is listed: directories with an epoch, sorted by name */
	char *kd = ut_join(stg_cache_root(f->c), "kept");
	mkdir(kd, 0700);
	ut_mkdir(kd, "b.200");
	ut_mkdir(kd, "a.300");
	ut_mkdir(kd, "c");
	ut_mkdir(kd, ".hidden.5");
	ut_write(kd, "file.100", "", 0);
	ut_write(kd, "a.300.to", "/shared/a\n", 10);
	ut_write(kd, "b.200.to", "no newline", 10);
	assert_int_equal(stg_kept_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 2);
	assert_string_equal(v[0].name, "a.300");
	assert_string_equal(v[0].dest, "/shared/a");
	assert_int_equal(v[0].since, 300);
	assert_string_equal(v[1].name, "b.200");
	assert_null(v[1].dest); /* a .to without its line: not trusted */
	stg_kept_free(v, n);
	stg_kept_free(NULL, 0);
	free(kd);
}

typedef struct reports {
	int n;
	stg_err err[4];
	uint64_t sent[4];
} reports;

static void kept_report(void *arg, const stg_kept *k, stg_err err, const stg_collect_result *res)
{
	(void)k;
	reports *r = arg;
	r->err[r->n] = err;
	r->sent[r->n] = res->sent_files;
	r->n++;
}

static void test_collect_kept(void **state)
{
	fx *f = *state;
	char *out = ut_join(f->dir, "out"), *dest = ut_join(f->dir, "shared/out");
	mkdir(out, 0755);
	ut_write(out, "a", "aaa", 3);
	ut_write(out, "b", "bb", 2);
	char *kept;
	assert_int_equal(stg_keep_results(f->ctx, f->c, out, "job1-out", dest, &kept), STG_OK);
	/* one kept without a DEST: left alone */
	char *old = ut_join(f->dir, "old");
	mkdir(old, 0755);
	char *kept2;
	assert_int_equal(stg_keep_results(f->ctx, f->c, old, "old", NULL, &kept2), STG_OK);
	reports r = {0};
	assert_int_equal(stg_collect_kept(f->ctx, f->c, NULL, kept_report, &r), STG_OK);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.err[0], STG_OK);
	assert_int_equal(r.sent[0], 2);
	ut_content_is(dest, "a", "aaa");
	/* collected whole: removed; the one without a DEST stays */
	assert_int_equal(access(kept, F_OK), -1);
	assert_int_equal(access(kept2, F_OK), 0);
	/* a DEST that cannot be made: the error is reported and returned,
	 * the kept results stay */
	char *out3 = ut_join(f->dir, "out3");
	mkdir(out3, 0755);
	ut_write(out3, "c", "c", 1);
	ut_write(f->dir, "file", "", 0);
	char *bad = ut_join(f->dir, "file/sub");
	char *kept3;
	assert_int_equal(stg_keep_results(f->ctx, f->c, out3, "job3-out", bad, &kept3), STG_OK);
	r.n = 0;
	assert_int_not_equal(stg_collect_kept(f->ctx, f->c, NULL, kept_report, &r), STG_OK);
	assert_int_equal(r.n, 1);
	assert_int_not_equal(r.err[0], STG_OK);
	assert_int_equal(access(kept3, F_OK), 0);
	free(kept3);
	free(bad);
	free(out3);
	free(kept2);
	free(old);
	free(kept);
	free(out);
	free(dest);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup_cache, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_pending),        T(test_hostile_records), T(test_keep),
        T(test_keep_same_name), T(test_epoch_and_list),  T(test_collect_kept),
};

UT_MAIN(tests)
