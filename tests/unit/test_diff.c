/* test_diff.c - stg_diff (diff.c): what changed between two packs, from
 * their manifests: added, removed and changed entries (content, mode,
 * type, link target; not an mtime alone), reported in the new pack's
 * order and then the removed in the old one's, with counts and bytes. */
#include "unit.h"

typedef struct seen {
	int n;
	char line[32][160];
} seen;

static void report(void *arg, stg_diff_kind kind, unsigned what, const stg_entry *old,
                   const stg_entry *new_)
{
	seen *s = arg;
	assert_true(s->n < 32);
	const char *k = kind == STG_DIFF_ADDED ? "+" : kind == STG_DIFF_REMOVED ? "-" : "~";
	if (kind == STG_DIFF_ADDED) {
		assert_null(old);
		assert_non_null(new_);
	} else if (kind == STG_DIFF_REMOVED) {
		assert_null(new_);
		assert_non_null(old);
	} else {
		assert_non_null(old);
		assert_non_null(new_);
		assert_string_equal(old->path, new_->path);
	}
	snprintf(s->line[s->n++], sizeof s->line[0], "%s%s%s%s%s%s", k,
	         (what & STG_DIFF_CONTENT) ? "c" : "", (what & STG_DIFF_MODE) ? "m" : "",
	         (what & STG_DIFF_TYPE) ? "t" : "", (what & STG_DIFF_LINK) ? "l" : "",
	         new_ ? new_->path : old->path);
}

static void mtime(const char *dir, const char *name, time_t t)
{
	char *p = ut_join(dir, name);
	struct timespec ts[2] = {{t, 0}, {t, 0}};
	assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
	free(p);
}

static void test_diff(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	char *dir = ut_tmpdir(), *a = ut_join(dir, "a"), *b = ut_join(dir, "b");
	mkdir(a, 0755);
	ut_write(a, "same", "same\n", 5);
	ut_write(a, "touched", "t\n", 2);
	ut_write(a, "content", "old content\n", 12);
	ut_write(a, "resized", "12345", 5);
	ut_write(a, "mode", "m\n", 2);
	ut_write(a, "gone1", "bye\n", 4);
	ut_write(a, "gone2", "", 0);
	ut_write(a, "becomes-dir", "f", 1);
	ut_symlink(a, "link", "same");
	ut_symlink(a, "linkmode", "same");
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "cp -a '%s' '%s'", a, b);
	assert_int_equal(system(cmd), 0);
	/* b: the changes */
	mtime(b, "touched", 1000);
	ut_write(b, "content", "new content\n", 12); /* same size */
	ut_write(b, "resized", "123456", 6);
	char *m = ut_join(b, "mode");
	chmod(m, 0600);
	char *g1 = ut_join(b, "gone1"), *g2 = ut_join(b, "gone2"), *bd = ut_join(b, "becomes-dir");
	unlink(g1);
	unlink(g2);
	unlink(bd);
	mkdir(bd, 0755);
	ut_write(b, "added", "new file\n", 9);
	char *bl = ut_join(b, "link");
	unlink(bl);
	assert_int_equal(symlink("content", bl), 0);
	char *pa = ut_join(dir, "a.tar.zst"), *pb = ut_join(dir, "b.tar.zst");
	ut_pack(ctx, a, pa, NULL);
	ut_pack(ctx, b, pb, NULL);
	stg_pack *oa, *ob;
	assert_int_equal(stg_pack_open(ctx, pa, &oa), STG_OK);
	assert_int_equal(stg_pack_open(ctx, pb, &ob), STG_OK);

	seen s = {0};
	stg_diff_stats st;
	memset(&st, 0x55, sizeof st);
	assert_int_equal(stg_diff(ctx, oa, ob, report, &s, &st), STG_OK);
	/* in b's order (sorted), then the removed in a's */
	static const char *const want[] = {"+added", "~tbecomes-dir", "~ccontent", "~llink",
	                                   "~mmode", "~cresized",     "-gone1",    "-gone2"};
	assert_int_equal(s.n, sizeof want / sizeof want[0]);
	for (int i = 0; i < s.n; i++)
		assert_string_equal(s.line[i], want[i]);
	assert_int_equal(st.added, 1);
	assert_int_equal(st.removed, 2);
	assert_int_equal(st.changed, 5);
	assert_int_equal(st.unchanged, 3); /* same, touched, linkmode */
	assert_int_equal(st.added_bytes, 9);
	assert_int_equal(st.removed_bytes, 4);
	assert_int_equal(st.changed_bytes, 12 + 6); /* content, resized */

	/* the other way round */
	s.n = 0;
	assert_int_equal(stg_diff(ctx, ob, oa, report, &s, &st), STG_OK);
	assert_int_equal(st.added, 2);
	assert_int_equal(st.removed, 1);
	assert_int_equal(st.changed, 5);
	assert_string_equal(s.line[s.n - 1], "-added");
	/* a pack against itself; no callback, no stats */
	s.n = 0;
	assert_int_equal(stg_diff(ctx, oa, oa, report, &s, &st), STG_OK);
	assert_int_equal(s.n, 0);
	assert_int_equal(st.unchanged, stg_pack_count(oa));
	assert_int_equal(st.changed + st.added + st.removed, 0);
	assert_int_equal(stg_diff(ctx, oa, ob, NULL, NULL, NULL), STG_OK);

	stg_pack_close(oa);
	stg_pack_close(ob);
	ut_rmtree(dir);
	free(bl);
	free(g1);
	free(g2);
	free(bd);
	free(m);
	free(pa);
	free(pb);
	free(a);
	free(b);
	free(dir);
	stg_ctx_free(ctx);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diff),
};

UT_MAIN(tests)
