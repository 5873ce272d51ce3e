/* test_walk.c - the tree walker (walk.c): sorted, depth first, parents
 * before children, links listed with their targets and never followed,
 * special files skipped with a warning, every metadata operation counted
 * and charged to the operations limit, errors named; an entry gone since
 * the listing skipped; a tree as deep as its
 * paths allow walked on a small stack with few descriptors, a deeper one
 * refused. */
#include "unit.h"
#include "walk.h"

#include <errno.h>
#include <sys/resource.h>

typedef struct warn {
	int n;
	char last[512];
} warn;

static void log_fn(void *arg, stg_log_level level, const char *msg)
{
	warn *w = arg;
	if (level == STG_LOG_WARN) {
		w->n++;
		snprintf(w->last, sizeof w->last, "%s", msg);
	}
}

/* root/: a/ (x, l -> ../b, deep/ (y)), a.b, b, fifo, z/ (empty), ".h" */
static char *make_tree(void)
{
	char *dir = ut_tmpdir();
	ut_mkdir(dir, "a");
	ut_write(dir, "a/x", "xx", 2);
	ut_mkdir(dir, "a/deep");
	ut_write(dir, "a/deep/y", "yyy", 3);
	ut_write(dir, "a.b", "", 0);
	ut_write(dir, "b", "b", 1);
	ut_write(dir, ".h", "h", 1);
	ut_mkdir(dir, "z");
	ut_symlink(dir, "a/l", "../b");
	char *fifo = ut_join(dir, "fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	free(fifo);
	return dir;
}

static void test_order(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	warn wn = {0};
	stg_set_log(ctx, log_fn, &wn);
	char *dir = make_tree();
	int rootfd = open(dir, O_RDONLY | O_DIRECTORY);
	stg_walk w = {.ctx = ctx};
	assert_int_equal(stg__walk_tree(&w, rootfd, ""), STG_OK);
	static const char *const want[] = {".h",  "a",   "a/deep", "a/deep/y", "a/l",
	                                   "a/x", "a.b", "b",      "z"};
	assert_int_equal(w.n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < w.n; i++) {
		assert_string_equal(w.v[i].path, want[i]);
		if (!strcmp(want[i], "a/l")) {
			assert_true(S_ISLNK(w.v[i].st.st_mode));
			assert_string_equal(w.v[i].link, "../b");
		} else {
			assert_null(w.v[i].link);
		}
	}
	assert_true(S_ISDIR(w.v[1].st.st_mode));
	assert_true(S_ISREG(w.v[3].st.st_mode));
	assert_int_equal(w.v[3].st.st_size, 3);
	/* the FIFO: skipped, with a warning naming it */
	assert_int_equal(wn.n, 1);
	assert_string_equal(wn.last, "skipping 'fifo': not a file, directory or link");
	/* operations: open+list per directory (4), a stat per entry (10 with
	 * the FIFO), a readlink per link (1) */
	assert_int_equal(w.ops, 4 * 2 + 10 + 1);
	stg__walk_free(&w);

	/* a subtree, appended to what is there */
	stg_walk s = {.ctx = ctx};
	assert_int_equal(stg__walk_tree(&s, rootfd, "a/deep"), STG_OK);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0].path, "a/deep/y");
	assert_int_equal(stg__walk_tree(&s, rootfd, "z"), STG_OK);
	assert_int_equal(s.n, 1);
	assert_int_equal(stg__walk_tree(&s, rootfd, "a/deep"), STG_OK);
	assert_int_equal(s.n, 2);
	stg__walk_free(&s);
	close(rootfd);
	ut_rmtree(dir);
	free(dir);
	stg_ctx_free(ctx);
}

static void test_errors(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char *dir = make_tree();
	int rootfd = open(dir, O_RDONLY | O_DIRECTORY);
	stg_walk w = {.ctx = ctx};
	assert_int_equal(stg__walk_tree(&w, rootfd, "missing"), STG_ENOENT);
	assert_string_equal(stg_errmsg(ctx),
	                    "cannot read directory 'missing': No such file or directory");
	/* a link to a directory is not walked through */
	char *ld = ut_join(dir, "ld");
	assert_int_equal(symlink("a", ld), 0);
	assert_int_equal(stg__walk_tree(&w, rootfd, "ld"), STG_ENOENT);
	assert_non_null(strstr(stg_errmsg(ctx), "cannot read directory 'ld'"));
	assert_int_equal(w.n, 0);
	/* a link inside is listed, not followed */
	assert_int_equal(stg__walk_tree(&w, rootfd, ""), STG_OK);
	size_t links = 0;
	for (size_t i = 0; i < w.n; i++) {
		assert_null(strstr(w.v[i].path, "ld/"));
		if (w.v[i].link)
			links++;
	}
	assert_int_equal(links, 2);
	stg__walk_free(&w);
	/* a directory it cannot read (not as root: root reads anything) */
	if (geteuid() != 0) {
		char *a = ut_join(dir, "a");
		chmod(a, 0);
		stg_walk u = {.ctx = ctx};
		assert_int_equal(stg__walk_tree(&u, rootfd, ""), STG_ENOENT);
		assert_non_null(strstr(stg_errmsg(ctx), "cannot read directory 'a'"));
		stg__walk_free(&u);
		chmod(a, 0755);
		free(a);
	}
	close(rootfd);
	ut_rmtree(dir);
	free(ld);
	free(dir);
	stg_ctx_free(ctx);
}

/* keep: at "a.b", the entry "b" (listed, not yet looked at) renamed away */
static bool rename_b(void *arg, const char *path, const struct stat *st)
{
	(void)st;
	if (!strcmp(path, "a.b")) {
		char *from = ut_join(arg, "b"), *to = ut_join(arg, "0-b");
		assert_int_equal(rename(from, to), 0);
		free(from);
		free(to);
	}
	return !S_ISFIFO(st->st_mode);
}

/* An entry gone between the listing and its stat (a checkpoint's NAME.tmp
 * renamed to NAME) is not there: skipped, no error, no warning. */
static void test_vanished(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	warn wn = {0};
	stg_set_log(ctx, log_fn, &wn);
	char *dir = make_tree();
	int rootfd = open(dir, O_RDONLY | O_DIRECTORY);
	stg_walk w = {.ctx = ctx, .keep = rename_b, .keep_arg = dir};
	assert_int_equal(stg__walk_tree(&w, rootfd, ""), STG_OK);
	static const char *const want[] = {".h",  "a",   "a/deep", "a/deep/y",
	                                   "a/l", "a/x", "a.b",    "z"};
	assert_int_equal(w.n, sizeof want / sizeof want[0]);
	for (size_t i = 0; i < w.n; i++)
		assert_string_equal(w.v[i].path, want[i]);
	assert_int_equal(wn.n, 0);
	/* counted: collect walks again to find what took its place */
	assert_int_equal(w.vanished, 1);
	stg__walk_free(&w);
	close(rootfd);
	ut_rmtree(dir);
	free(dir);
	stg_ctx_free(ctx);
}

/* With an operations limit, the walk takes as long as its ops demand. */
static void test_rate(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char *dir = ut_tmpdir();
	for (int i = 0; i < 60; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%02d", i);
		ut_write(dir, name, "", 0);
	}
	int rootfd = open(dir, O_RDONLY | O_DIRECTORY);
	stg_bucket b;
	stg__bucket_init(&b, 200);
	stg_walk w = {.ctx = ctx, .opl = &b};
	double t0 = stg__now();
	assert_int_equal(stg__walk_tree(&w, rootfd, ""), STG_OK);
	double t = stg__now() - t0;
	assert_int_equal(w.n, 60);
	assert_int_equal(w.ops, 62);
	assert_true(t >= 0.2); /* 62 ops at 200/s, less a burst of 20 */
	assert_true(t < 3);
	/* the list is sorted */
	for (size_t i = 1; i < w.n; i++)
		assert_true(strcmp(w.v[i - 1].path, w.v[i].path) < 0);
	stg__walk_free(&w);
	stg__bucket_destroy(&b);
	close(rootfd);
	ut_rmtree(dir);
	free(dir);
	stg_ctx_free(ctx);
}

typedef struct deep_walk {
	stg_walk w;
	int rootfd;
	stg_err err;
} deep_walk;

static void *walk_thread(void *arg)
{
	deep_walk *d = arg;
	d->err = stg__walk_tree(&d->w, d->rootfd, "");
	return NULL;
}

/* A chain 2,040 levels deep (paths of 4,079 bytes: as deep as one-letter
 * names allow) is walked whole on a 64 KiB stack (the recursive walker
 * took 4 KiB a level) and within 64 descriptors; 2,100 levels are refused
 * by name, and nothing is left open either way. */
static void test_deep(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char *dir = ut_tmpdir();
	ut_make_deep(dir, 2040);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 64;
	int fds = ut_open_fds();
	deep_walk d = {.w = {.ctx = ctx}, .rootfd = open(dir, O_RDONLY | O_DIRECTORY)};
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	ut_on_small_stack(walk_thread, &d, 64 * 1024);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_int_equal(d.err, STG_OK);
	assert_int_equal(d.w.n, 2041);
	for (size_t i = 0; i < 2040; i++) {
		assert_int_equal(strlen(d.w.v[i].path), 2 * i + 1);
		assert_true(S_ISDIR(d.w.v[i].st.st_mode));
	}
	assert_int_equal(strlen(d.w.v[2040].path), 4081);
	assert_string_equal(d.w.v[2040].path + 4080, "f");
	/* open+list a directory, a stat an entry */
	assert_int_equal(d.w.ops, 2041 * 2 + 2041);
	stg__walk_free(&d.w);
	assert_int_equal(ut_open_fds(), fds + 1);

	/* 60 levels more: the first path over STG_PATH_MAX is refused */
	bool bottom;
	char *deeper = ut_tmpdir();
	ut_make_deep(deeper, 2100);
	assert_int_equal(ut_deep_depth(deeper, &bottom), 2100);
	int dfd = open(deeper, O_RDONLY | O_DIRECTORY);
	deep_walk e = {.w = {.ctx = ctx}, .rootfd = dfd};
	ut_on_small_stack(walk_thread, &e, 64 * 1024);
	assert_int_equal(e.err, STG_ENOTSUP);
	assert_non_null(strstr(stg_errmsg(ctx), "path too long (over 4095 bytes): 'd/d/d/"));
	assert_int_equal(e.w.n, 2048); /* every path up to 4,095 bytes */
	stg__walk_free(&e.w);

	/* cancelled: stops at once, whatever the depth */
	stg_cancel(ctx);
	deep_walk c = {.w = {.ctx = ctx}, .rootfd = dfd};
	ut_on_small_stack(walk_thread, &c, 64 * 1024);
	assert_int_equal(c.err, STG_EINTR);
	assert_true(c.w.n <= 1);
	stg__walk_free(&c.w);
	close(dfd);
	close(d.rootfd);
	assert_int_equal(ut_open_fds(), fds);
	ut_rmtree(deeper);
	ut_rmtree(dir);
	free(deeper);
	free(dir);
	stg_ctx_free(ctx);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_vanished), cmocka_unit_test(test_rate),
        cmocka_unit_test(test_deep),
};

UT_MAIN(tests)
