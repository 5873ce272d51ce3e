/* test_run_mount.c - the packs `stager run --mount` mounts for its
 * command (run_mount.c), through FUSE: each at DIR in the job directory
 * (made if missing, removed after if made) or at the pack's name without
 * .tar.zst, exported as STAGER_MOUNT, STAGER_MOUNT_2, readable while
 * mounted; all unmounted, their processes ended, when let go of; a pack
 * that cannot be mounted is the error, the mounts before it still ended.
 * Skipped where FUSE cannot mount. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "run_state.h"
#include "run_mount.h"

#include <sys/mount.h>

typedef struct fx {
	UT_FX;
	char *pack2;
	run_state r;
	stg_run_opts o;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(&f->ut, NULL);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_write(f->src, "a.txt", "alpha\n", 6);
	f->pack = ut_join(f->dir, "first.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL);
	ut_write(f->src, "a.txt", "beta\n", 5);
	f->pack2 = ut_join(f->dir, "second.tar.zst");
	ut_pack(f->ctx, f->src, f->pack2, NULL);
	f->dest = ut_join(f->dir, "job");
	ut_mkdir(f->dir, "job");
	stg_run_opts_init(&f->o);
	f->r.ctx = f->ctx;
	f->r.cache = f->c;
	f->r.o = &f->o;
	f->r.jobdir = f->dest;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	if (f->r.mounts)
		stg__run_unmount_all(&f->r);
	unsetenv("STAGER_MOUNT");
	unsetenv("STAGER_MOUNT_2");
	free(f->pack2);
	return ut_teardown(state);
}

static bool is_mount(const char *path, const char *parent)
{
	struct stat a, b;
	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

static void test_mounts(void **state)
{
	fx *f = *state;
	char *given = ut_join(f->dest, "given"); /* there already: kept after */
	mkdir(given, 0700);
	stg_run_pair m[] = {{f->pack, NULL}, {f->pack2, "deep/er/two"}, {f->pack, given}};
	f->o.mounts = m;
	f->o.n_mounts = 3;
	stg_err err = stg__run_mount_all(&f->r);
	if (err == STG_EIO && strstr(stg_errmsg(f->ctx), "FUSE")) {
		fprintf(stderr, "# FUSE cannot mount here: %s\n", stg_errmsg(f->ctx));
		skip();
	}
	if (err)
		fail_msg("%s", stg_errmsg(f->ctx));
	assert_int_equal(f->r.n_mounts, 3);
	char *first = ut_join(f->dest, "first"), *two = ut_join(f->dest, "deep/er/two");
	assert_non_null(getenv("STAGER_MOUNT"));
	assert_non_null(getenv("STAGER_MOUNT_2"));
	assert_non_null(getenv("STAGER_MOUNT_3"));
	assert_string_equal(getenv("STAGER_MOUNT"), first);
	assert_string_equal(getenv("STAGER_MOUNT_2"), two);
	assert_string_equal(getenv("STAGER_MOUNT_3"), given);
	ut_content_is(first, "a.txt", "alpha\n");
	ut_content_is(two, "a.txt", "beta\n");
	ut_content_is(given, "a.txt", "alpha\n");
	assert_true(is_mount(first, f->dest));
	char snippet[4400];
	snprintf(snippet, sizeof snippet, "mounted '%s' at '%s'", f->pack2, two);
	assert_non_null(strstr(f->log.text, snippet));
	int pids[3];
	for (int i = 0; i < 3; i++)
		pids[i] = f->r.mounts[i].pid;
	/* let go: unmounted, processes ended, the directories made removed */
	stg__run_unmount_all(&f->r);
	assert_int_equal(f->r.n_mounts, 0);
	assert_null(f->r.mounts);
	for (int i = 0; i < 3; i++)
		assert_int_equal(kill(pids[i], 0), -1);
	assert_int_equal(access(first, F_OK), -1);
	assert_int_equal(access(two, F_OK), -1);
	assert_int_equal(access(given, F_OK), 0);
	assert_false(is_mount(given, f->dest));
	assert_int_equal(f->log.warnings, 0);
	unsetenv("STAGER_MOUNT_3");
	free(first);
	free(two);
	free(given);
}

/* The second pack is missing: its error, and the first still ended. */
static void test_fails(void **state)
{
	fx *f = *state;
	char *missing = ut_join(f->dir, "missing.tar.zst");
	stg_run_pair m[] = {{f->pack, "one"}, {missing, "two"}};
	f->o.mounts = m;
	f->o.n_mounts = 2;
	stg_err err = stg__run_mount_all(&f->r);
	if (err == STG_EIO && strstr(stg_errmsg(f->ctx), "FUSE"))
		skip();
	assert_int_equal(err, STG_ENOENT);
	assert_int_equal(f->r.n_mounts, 2);
	int pid = f->r.mounts[0].pid;
	assert_true(pid > 0);
	stg__run_unmount_all(&f->r);
	assert_int_equal(kill(pid, 0), -1);
	char *one = ut_join(f->dest, "one");
	assert_int_equal(access(one, F_OK), -1);
	free(one);
	free(missing);
	/* nothing to mount: nothing done */
	f->o.n_mounts = 0;
	assert_int_equal(stg__run_mount_all(&f->r), STG_OK);
	assert_null(f->r.mounts);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_mounts),
        T(test_fails),
};

UT_MAIN(tests)
