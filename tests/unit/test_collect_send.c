/* test_collect_send.c - the shared-FS side of collect (collect_send.c):
 * one file or link put in DEST through a logged temporary and a rename,
 * with its mode, mtime and XXH3; a source that disappeared; a name DEST
 * cannot take (the user's file kept, the failure counted and named); DEST
 * removed under a run; cancel; leftovers of a killed run; the marker in
 * the record; the umask and the slot deadline. */
#include "ut_collect.h"

#include <dirent.h>
#include <errno.h>

typedef struct fx {
	UT_FX;
	collector *k;
	stg_collect_result res;
	stg_collect_opts o;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->c = ut_cache(f->ctx, f->dir, NULL);
	f->src = ut_join(f->dir, "src");
	f->dest = ut_join(f->dir, "dest");
	mkdir(f->src, 0755);
	mkdir(f->dest, 0755);
	stg_collect_opts_init(&f->o);
	collector *k = calloc(1, sizeof *k);
	k->ctx = f->ctx;
	k->c = f->c;
	k->o = &f->o;
	k->res = &f->res;
	k->umask = stg__col_current_umask();
	snprintf(k->dest, sizeof k->dest, "%s", f->dest);
	k->srcfd = open(f->src, O_RDONLY | O_DIRECTORY);
	k->destfd = open(f->dest, O_RDONLY | O_DIRECTORY);
	char *log = ut_join(f->dir, "record");
	k->logfd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	free(log);
	stg__strmap_init(&k->map, 64);
	stg__strmap_init(&k->dirs, 64);
	f->k = k;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_collector_free(f->k);
	return ut_teardown(state);
}

static char *record(fx *f)
{
	char *p = ut_join(f->dir, "record");
	char *t = ut_read_text(p);
	free(p);
	return t;
}

/* The walk item of name in SRC. */
static stg_witem item(fx *f, const char *name)
{
	stg_witem it = {.path = (char *)name};
	assert_int_equal(fstatat(f->k->srcfd, name, &it.st, AT_SYMLINK_NOFOLLOW), 0);
	return it;
}

static size_t dest_names(fx *f)
{
	char **v;
	size_t n;
	assert_int_equal(stg__dir_names(f->k->destfd, "", false, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (!strncmp(v[i], ".stager-tmp.", 12))
			fail_msg("a temporary is left: %s", v[i]);
	stg__names_free(v, n);
	return n;
}

static void test_send_file(void **state)
{
	fx *f = *state;
	uint8_t data[70000];
	ut_fill(data, sizeof data, 4);
	ut_write(f->src, "f", data, sizeof data);
	char *p = ut_join(f->src, "f");
	chmod(p, 0604);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1600000000, 42}};
	utimensat(AT_FDCWD, p, ts, 0);
	stg_witem it = item(f, "f");
	crec r;
	assert_true(stg__col_send_item(f->k, &it, "f", "f", &r));
	assert_int_equal(f->res.sent_files, 1);
	assert_int_equal(f->res.sent_bytes, sizeof data);
	assert_int_equal(r.type, 'f');
	assert_int_equal(r.size, sizeof data);
	assert_int_equal(r.mode, 0604);
	assert_int_equal(r.ino, it.st.st_ino);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(data, sizeof data));
	assert_memory_equal(r.xxh3, c.digest, 16);
	char *d = ut_join(f->dest, "f");
	size_t len;
	uint8_t *got = ut_read(d, &len);
	assert_int_equal(len, sizeof data);
	assert_memory_equal(got, data, len);
	free(got);
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0604);
	assert_int_equal(st.st_mtim.tv_sec, 1600000000);
	assert_int_equal(st.st_mtim.tv_nsec, 42);
	assert_int_equal(dest_names(f), 1);
	/* the temporary was logged before it was made, and resolved */
	char *text = record(f);
	char *t = strstr(text, "t .stager-tmp.");
	assert_non_null(t);
	char *x = strstr(text, "x .stager-tmp.");
	assert_non_null(x);
	assert_true(x > t);
	free(text);
	/* remembered: stored and logged */
	stg__col_remember(f->k, &r, "f");
	assert_non_null(stg__col_rec_find(f->k, "f"));
	text = record(f);
	assert_non_null(strstr(text, "\nf 70000 1600000000000000042 "));
	free(text);
	/* sent again over the old one: replaced whole */
	ut_write(f->src, "f", "short", 5);
	it = item(f, "f");
	assert_true(stg__col_send_item(f->k, &it, "f", "f", &r));
	got = ut_read(d, &len);
	assert_int_equal(len, 5);
	free(got);
	free(d);
	free(p);
}

static void test_send_link(void **state)
{
	fx *f = *state;
	ut_symlink(f->src, "l", "some/where");
	stg_witem it = item(f, "l");
	it.link = "some/where";
	crec r;
	assert_true(stg__col_send_item(f->k, &it, "l", "l", &r));
	assert_int_equal(r.type, 'l');
	assert_int_equal(r.ino, it.st.st_ino);
	char *d = ut_join(f->dest, "l");
	ut_link_is(d, "some/where");
	free(d);
}

static void test_failures(void **state)
{
	fx *f = *state;
	/* gone from SRC since the walk (removed, or renamed: NAME.tmp to
	 * NAME): no failure, no warning (a note for --verbose), counted so
	 * that collect walks again */
	ut_write(f->src, "gone", "x", 1);
	stg_witem it = item(f, "gone");
	char *g = ut_join(f->src, "gone");
	unlink(g);
	crec r;
	int warned = f->log.warnings;
	assert_false(stg__col_send_item(f->k, &it, "gone", "gone", &r));
	assert_int_equal(f->res.failed, 0);
	assert_int_equal(f->log.warnings, warned);
	assert_int_equal(f->k->vanished, 1);
	assert_non_null(
	        strstr(f->log.text, "'gone' was removed or renamed before it could be collected"));
	assert_int_equal(dest_names(f), 0);
	/* DEST has a non-empty directory where the file goes: it stays, the
	 * failure is counted and named */
	ut_write(f->src, "busy", "x", 1);
	ut_mkdir(f->dest, "busy");
	ut_write(f->dest, "busy/keep", "k", 1);
	it = item(f, "busy");
	assert_false(stg__col_send_item(f->k, &it, "busy", "busy", &r));
	assert_int_equal(f->res.failed, 1);
	assert_int_equal(f->k->stop, STG_OK);
	assert_non_null(strstr(f->log.text, "cannot collect 'busy' (writing it to DEST): "));
	char want[4200];
	snprintf(want, sizeof want, "'%s/busy': ", f->dest);
	assert_memory_equal(f->k->first_error, want, strlen(want));
	char *keep = ut_join(f->dest, "busy/keep");
	assert_int_equal(access(keep, F_OK), 0);
	assert_int_equal(dest_names(f), 1);
	/* a second failure does not replace the first named */
	stg__col_failed(f->k, "other", "source", EACCES);
	assert_int_equal(f->res.failed, 2);
	assert_memory_equal(f->k->first_error, want, strlen(want));
	assert_non_null(strstr(f->log.text, "cannot collect 'other' (reading it on scratch): "));
	free(keep);
	free(g);
}

static void test_dest_removed(void **state)
{
	fx *f = *state;
	ut_write(f->src, "a", "x", 1);
	stg_witem it = item(f, "a");
	ut_rmtree(f->dest);
	crec r;
	assert_false(stg__col_send_item(f->k, &it, "a", "a", &r));
	assert_int_equal(f->k->stop, STG_EIO);
	char want[4200];
	snprintf(want, sizeof want,
	         "'%s' was removed while it was collected: nothing more sent; collect again to "
	         "send everything",
	         f->dest);
	assert_string_equal(stg_errmsg(f->ctx), want);
}

static void test_cancel(void **state)
{
	fx *f = *state;
	uint8_t data[4096];
	ut_fill(data, sizeof data, 1);
	ut_write(f->src, "a", data, sizeof data);
	stg_witem it = item(f, "a");
	stg_cancel(f->ctx);
	crec r;
	assert_false(stg__col_send_item(f->k, &it, "a", "a", &r));
	assert_int_equal(f->k->stop, STG_EINTR);
	assert_int_equal(dest_names(f), 0);
}

static void test_leftovers_and_mark(void **state)
{
	fx *f = *state;
	ut_write(f->dest, ".stager-tmp.h.1.0", "partial", 7);
	f->k->pending = malloc(2 * sizeof(char *));
	f->k->pending[0] = strdup(".stager-tmp.h.1.0");
	f->k->pending[1] = strdup(".stager-tmp.h.1.1"); /* never made */
	f->k->n_pending = 2;
	stg__col_remove_leftovers(f->k);
	assert_int_equal(f->k->n_pending, 0);
	assert_int_equal(dest_names(f), 0);
	assert_int_equal(f->log.warnings, 0);
	char *text = record(f);
	assert_non_null(strstr(text, "x .stager-tmp.h.1.0\n"));
	assert_non_null(strstr(text, "x .stager-tmp.h.1.1\n"));
	free(text);
	/* the marker: in DEST while it writes, and in the record */
	char mark[128];
	stg__col_mark_begin(f->k, mark, sizeof mark);
	assert_memory_equal(mark, ".stager-collecting.", 19);
	struct stat st;
	assert_int_equal(fstatat(f->k->destfd, mark, &st, 0), 0);
	text = record(f);
	char want[160];
	snprintf(want, sizeof want, "t %s\n", mark);
	assert_non_null(strstr(text, want));
	free(text);
	stg__col_mark_end(f->k, mark);
	assert_int_equal(fstatat(f->k->destfd, mark, &st, 0), -1);
	text = record(f);
	snprintf(want, sizeof want, "x %s\n", mark);
	assert_non_null(strstr(text, want));
	free(text);
}

static void test_umask_and_deadline(void **state)
{
	(void)state;
	mode_t old = umask(027);
	assert_int_equal(stg__col_current_umask(), 027);
	umask(old);
	assert_int_equal(stg__col_current_umask(), (int)old);
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	assert_true(stg__col_slot_deadline(&o) == 0);
	o.slot_wait_max = 5;
	double d = stg__col_slot_deadline(&o);
	assert_true(d >= stg__now() + 4.9);
	assert_true(d <= stg__now() + 5);
}

/* A file that DEST's umask would strip bits from is given its mode. */
static void test_mode_past_umask(void **state)
{
	fx *f = *state;
	ut_write(f->src, "g", "x", 1);
	char *p = ut_join(f->src, "g");
	chmod(p, 0775);
	mode_t old = umask(077);
	f->k->umask = 077;
	stg_witem it = item(f, "g");
	crec r;
	assert_true(stg__col_send_item(f->k, &it, "g", "g", &r));
	umask(old);
	char *d = ut_join(f->dest, "g");
	struct stat st;
	assert_int_equal(stat(d, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0775);
	free(d);
	free(p);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_send_file),          T(test_send_link),       T(test_failures),
        T(test_dest_removed),       T(test_cancel),          T(test_leftovers_and_mark),
        T(test_umask_and_deadline), T(test_mode_past_umask),
};

UT_MAIN(tests)
