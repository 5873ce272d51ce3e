/* test_xfer_record.c - what a push or pull may replace (xfer_record.c):
 * the record ".stager-published.NAME" written and read back (strictly: a
 * torn, edited, linked or foreign record vouches for nothing), the lock
 * of transfers to DEST, the directory identity (inode, ctime, birth
 * time), and the rules: an empty DEST, one stager published and nobody
 * changed, anything with --replace, never a home directory; the test
 * hooks. */
#include "unit.h"
#include "xfer_record.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

typedef struct fx {
	UT_FX;
	char *home;
	receiver rc;
	pid_t child;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->home = ut_env_save("HOME");
	unsetenv(STG_TEST_FAULTS_ENV);
	ut_mkdir(f->dir, "dest");
	receiver *rc = &f->rc;
	rc->ctx = f->ctx;
	rc->parent = open(f->dir, O_RDONLY | O_DIRECTORY);
	rc->dest = openat(rc->parent, "dest", O_RDONLY | O_DIRECTORY);
	rc->rec = -1;
	rc->rec_name = strdup(".stager-published.dest");
	rc->dir = strdup(f->dir);
	rc->shown = strdup("/far/dest");
	rc->what = "serve";
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_kill(&f->child);
	ut_env_restore("HOME", f->home);
	unsetenv(STG_TEST_FAULTS_ENV);
	receiver *rc = &f->rc;
	if (rc->rec >= 0)
		close(rc->rec);
	close(rc->dest);
	close(rc->parent);
	free(rc->rec_name);
	free(rc->dir);
	free(rc->shown);
	return ut_teardown(state);
}

static void test_faults(void **state)
{
	(void)state;
	assert_false(stg__xr_test_fault("flock"));
	setenv(STG_TEST_FAULTS_ENV, "btime,flock,cut-switch", 1);
	assert_true(stg__xr_test_fault("flock"));
	assert_true(stg__xr_test_fault("btime"));
	assert_true(stg__xr_test_fault("cut-switch"));
	assert_false(stg__xr_test_fault("cut"));
	assert_false(stg__xr_test_fault("lock"));
	setenv(STG_TEST_FAULTS_ENV, "noflock", 1);
	assert_false(stg__xr_test_fault("flock"));
	setenv(STG_TEST_FAULTS_ENV, "", 1);
	assert_false(stg__xr_test_fault("flock"));
	unsetenv(STG_TEST_FAULTS_ENV);
}

static void test_rename_hook(void **state)
{
	fx *f = *state;
	int d = f->rc.parent;
	ut_write(f->dir, "a", "a", 1);
	ut_write(f->dir, "b", "b", 1);
	assert_int_equal(stg__xr_xrenameat2(d, "a", d, "b", RENAME_NOREPLACE), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(stg__xr_xrenameat2(d, "a", d, "b", RENAME_EXCHANGE), 0);
	setenv(STG_TEST_FAULTS_ENV, "renameat2", 1);
	assert_int_equal(stg__xr_xrenameat2(d, "a", d, "b", RENAME_EXCHANGE), -1);
	assert_int_equal(errno, EINVAL);
	unsetenv(STG_TEST_FAULTS_ENV);
}

static void test_ids(void **state)
{
	fx *f = *state;
	dir_id a, b;
	assert_int_equal(stg__xr_dir_id_of(f->rc.dest, &a), 0);
	struct stat st;
	fstat(f->rc.dest, &st);
	assert_int_equal(a.ino, st.st_ino);
	assert_int_equal(a.ct_sec, st.st_ctim.tv_sec);
	assert_int_equal(stg__xr_id_at(f->rc.parent, "dest", &b), 0);
	assert_true(stg__xr_id_equal(&a, &b, true));
	/* an entry added: the ctime moves, the inode does not */
	struct timespec ts = {0, 20 * 1000 * 1000};
	nanosleep(&ts, NULL);
	ut_write(f->dir, "dest/x", "", 0);
	assert_int_equal(stg__xr_dir_id_of(f->rc.dest, &b), 0);
	assert_false(stg__xr_id_equal(&a, &b, true));
	assert_true(stg__xr_id_equal(&a, &b, false));
	/* a birth time the filesystem reports must be in the record */
	dir_id nobt = a;
	nobt.bt = false;
	nobt.bt_sec = nobt.bt_nsec = 0;
	if (a.bt)
		assert_false(stg__xr_id_equal(&nobt, &a, false));
	setenv(STG_TEST_FAULTS_ENV, "btime", 1);
	assert_int_equal(stg__xr_dir_id_of(f->rc.dest, &b), 0);
	assert_false(b.bt);
	unsetenv(STG_TEST_FAULTS_ENV);
	/* a link is not followed */
	assert_int_equal(symlinkat("dest", f->rc.parent, "ldest"), 0);
	assert_int_equal(stg__xr_id_at(f->rc.parent, "ldest", &b), 0);
	assert_int_not_equal(b.ino, a.ino);
	assert_int_equal(stg__xr_id_at(f->rc.parent, "missing", &b), -1);
}

static char *record_text(fx *f)
{
	char *p = ut_join(f->dir, ".stager-published.dest");
	char *t = ut_read_text(p);
	free(p);
	return t;
}

static void test_record_round_trip(void **state)
{
	fx *f = *state;
	receiver *rc = &f->rc;
	record r;
	assert_false(stg__xr_record_read(rc, &r)); /* none yet */
	assert_int_equal(stg__xr_record_lock(rc), STG_OK);
	assert_true(rc->rec >= 0);
	record w = {.pub = true,
	            .p = {.ino = 12,
	                  .ct_sec = 1700000000,
	                  .ct_nsec = 5,
	                  .bt = true,
	                  .bt_sec = 99,
	                  .bt_nsec = 7}};
	assert_int_equal(stg__xr_record_put(rc, &w), 0);
	char *t = record_text(f);
	assert_string_equal(t, "stager-published 2\npublished 12 1700000000.000000005 "
	                       "99.000000007\n");
	free(t);
	assert_true(stg__xr_record_read(rc, &r));
	assert_true(r.pub);
	assert_false(r.old);
	assert_true(stg__xr_id_equal(&w.p, &r.p, true));
	/* with a switch under way, without birth times */
	record w2 = {.pub = true,
	             .old = true,
	             .old_pub = true,
	             .p = {.ino = 1, .ct_sec = 2, .ct_nsec = 3},
	             .o = {.ino = 4},
	             .n = {.ino = 5, .bt = true, .bt_sec = 6, .bt_nsec = 7}};
	assert_int_equal(stg__xr_record_put(rc, &w2), 0);
	t = record_text(f);
	assert_string_equal(t, "stager-published 2\npublished 1 2.000000003 -\n"
	                       "old 4 - published new 5 6.000000007\n");
	free(t);
	assert_true(stg__xr_record_read(rc, &r));
	assert_true(r.old);
	assert_true(r.old_pub);
	assert_int_equal(r.o.ino, 4);
	assert_false(r.o.bt);
	assert_int_equal(r.n.ino, 5);
	assert_true(r.n.bt);
	/* read by another, unlocked: the same */
	receiver other = *rc;
	other.rec = -1;
	assert_true(stg__xr_record_read(&other, &r));
	assert_int_equal(r.p.ino, 1);
	/* written through rc->rec only */
	assert_int_equal(stg__xr_record_put(&other, &w), -1);
	assert_int_equal(errno, EBADF);
}

/* What a record must look like to count. */
static void test_record_strict(void **state)
{
	fx *f = *state;
	static const char *const bad[] = {
	        "stager-published 1\n12 -\n",
	        "stager-published 2\npublished 12 1700000000.000000005 -", /* torn */
	        "stager-published 2\npublished 12 1700000000 -\n",
	        "stager-published 2\npublished x 1.1 -\n",
	        "stager-published 2\npublished 12 1.1 -\npublished 12 1.1 -\n",
	        "stager-published 2\nold 4 - mine new 5 -\n",
	        "stager-published 2\nold 4 - other\n",
	        "stager-published 2\nhello\n",
	        "stager-published 2\npublished 12 1.1 - trailing\n",
	        "",
	};
	record r;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		ut_write(f->dir, ".stager-published.dest", bad[i], strlen(bad[i]));
		if (stg__xr_record_read(&f->rc, &r))
			fail_msg("accepted: '%s'", bad[i]);
	}
	/* good ones */
	static const char good[] = "stager-published 2\npublished 12 1.000000001 -\n"
	                           "old 4 - other new 5 -\n";
	ut_write(f->dir, ".stager-published.dest", good, sizeof good - 1);
	assert_true(stg__xr_record_read(&f->rc, &r));
	assert_false(r.old_pub);
	/* a hard link to another of the user's files: not trusted, and the
	 * lock refuses it rather than overwrite that file */
	char *rec = ut_join(f->dir, ".stager-published.dest"), *mine = ut_join(f->dir, "mine");
	assert_int_equal(link(rec, mine), 0);
	assert_false(stg__xr_record_read(&f->rc, &r));
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is not stager's record (not a regular file of "
	                                           "yours): nothing was changed"));
	unlink(mine);
	/* a link: neither read nor locked through */
	unlink(rec);
	assert_int_equal(symlink("mine", rec), 0);
	ut_write(f->dir, "mine", good, sizeof good - 1);
	assert_false(stg__xr_record_read(&f->rc, &r));
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_EEXIST);
	size_t len;
	uint8_t *b = ut_read(mine, &len);
	assert_int_equal(len, sizeof good - 1);
	free(b);
	/* a FIFO: not read, without blocking */
	unlink(rec);
	assert_int_equal(mkfifo(rec, 0600), 0);
	assert_false(stg__xr_record_read(&f->rc, &r));
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_EEXIST);
	/* another user's (as root: given away) */
	if (geteuid() == 0) {
		unlink(rec);
		ut_write(f->dir, ".stager-published.dest", good, sizeof good - 1);
		assert_int_equal(chown(rec, 65534, 65534), 0);
		assert_false(stg__xr_record_read(&f->rc, &r));
	}
	free(rec);
	free(mine);
}

/* In a child (ut_child): the record locked by another transfer. */
static int lock_record(void *arg)
{
	fx *f = arg;
	receiver r2 = f->rc;
	r2.ctx = stg_ctx_new();
	r2.rec = -1;
	return stg__xr_record_lock(&r2);
}

static void test_lock(void **state)
{
	fx *f = *state;
	/* another transfer holds it for 0.4 s: this one waits, then has it */
	ut_child(&f->child, lock_record, f, 0.4);
	double t0 = stg__now();
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_OK);
	assert_true(stg__now() - t0 >= 0.01);
	assert_non_null(strstr(f->log.text, "waiting for another transfer to '/far/dest'"));
	waitpid(f->child, NULL, 0);
	f->child = 0;
	/* without flock (Lustre): a POSIX lock of the description instead */
	close(f->rc.rec);
	f->rc.rec = -1;
	setenv(STG_TEST_FAULTS_ENV, "flock", 1);
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_OK);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int other = openat(f->rc.parent, ".stager-published.dest", O_RDWR);
	assert_int_equal(fcntl(other, F_OFD_SETLK, &fl), -1);
	close(other);
	close(f->rc.rec);
	f->rc.rec = -1;
	/* without any lock: a warning, and on it goes */
	f->log.text[0] = '\0';
	setenv(STG_TEST_FAULTS_ENV, "flock,ofdlock", 1);
	assert_int_equal(stg__xr_record_lock(&f->rc), STG_OK);
	assert_non_null(strstr(f->log.text, "carrying on without the lock; do not run two "
	                                    "transfers to '/far/dest' at once"));
	unsetenv(STG_TEST_FAULTS_ENV);
}

static void test_dest_allowed(void **state)
{
	fx *f = *state;
	receiver *rc = &f->rc;
	setenv("HOME", "/nonexistent-home", 1);
	/* empty: yes, for that reason */
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_OK);
	assert_true(rc->by_empty);
	assert_false(rc->by_record);
	assert_false(stg__xr_filled_meanwhile(rc));
	ut_write(f->dir, "dest/late", "x", 1);
	assert_true(stg__xr_filled_meanwhile(rc));
	assert_int_equal(stg__xr_filled(rc), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "was empty when the transfer began and has "
	                                           "files now; nothing was replaced"));
	/* the user's files: no */
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_EEXIST);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "'/far/dest' exists and was not made by stager push: push into it as "
	                    "'HOST:/far/dest/' (makes /far/dest/NAME) or give --replace to make it "
	                    "a copy of LOCAL");
	rc->what = "pull";
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "was not made by stager pull: pull into it as "
	                                           "'/far/dest/'"));
	rc->what = "serve";
	/* --replace: yes */
	rc->replace = true;
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_OK);
	rc->replace = false;
	/* published by stager, as recorded: yes */
	assert_int_equal(stg__xr_record_lock(rc), STG_OK);
	stg__xr_record_published(rc, rc->parent, "dest");
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_OK);
	assert_true(rc->by_record);
	/* ... until the user changes it */
	struct timespec ts = {0, 20 * 1000 * 1000};
	nanosleep(&ts, NULL);
	ut_write(f->dir, "dest/mine", "x", 1);
	assert_int_equal(stg__xr_dest_allowed(rc, rc->dest), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "has changed since stager published it"));
	/* a home directory: never, even with --replace or a record */
	setenv("HOME", f->dir, 1);
	rc->replace = true;
	int home = open(f->dir, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__xr_dest_allowed(rc, home), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is your home directory, which stager never "
	                                           "replaces"));
	close(home);
	rc->replace = false;
}

static void test_same_dir_and_messages(void **state)
{
	fx *f = *state;
	receiver *rc = &f->rc;
	assert_true(stg__xr_same_dir_at(rc, "dest", rc->dest));
	ut_mkdir(f->dir, "other");
	assert_false(stg__xr_same_dir_at(rc, "other", rc->dest));
	assert_false(stg__xr_same_dir_at(rc, "missing", rc->dest));
	assert_int_equal(stg__xr_not_replaced(rc), STG_EEXIST);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "'/far/dest' was removed or replaced while the transfer ran; nothing "
	                    "was replaced (the files are kept for the next transfer)");
	/* the "fill-dest" hook writes into DEST only when asked */
	stg__xr_test_fill(rc);
	assert_true(stg__dir_is_empty(rc->dest));
	setenv(STG_TEST_FAULTS_ENV, "fill-dest", 1);
	stg__xr_test_fill(rc);
	unsetenv(STG_TEST_FAULTS_ENV);
	assert_false(stg__dir_is_empty(rc->dest));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_faults),        T(test_rename_hook),
        T(test_ids),           T(test_record_round_trip),
        T(test_record_strict), T(test_lock),
        T(test_dest_allowed),  T(test_same_dir_and_messages),
};

UT_MAIN(tests)
