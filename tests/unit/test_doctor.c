/* test_doctor.c - is this node set up right (doctor.c): every check
 * handed over in order, each with what it found and, for a warning or a
 * failure, what to do.  A healthy node (a private scratch root, Slurm's
 * commands on PATH as fakes, slots, a shared path with a file to time);
 * then what goes wrong: a scratch root others can read, one whose cache
 * cannot be opened, a full one (a 1 MiB tmpfs: the write check fails, and
 * free space under min_free), no squeue, srun or sbcast, no reader limit,
 * a slot directory that is not sticky, a lease directory that is missing,
 * a job's scratch directory that is not writable, a shared path that does
 * not exist; no probe file left behind. */
#include "unit.h"

#include <errno.h>
#include <sys/mount.h>

#define MAXC 32

typedef struct fx {
	UT_FX;
	char *bin, *old_path, *small;
	struct {
		stg_check_level level;
		char name[64], found[1024], fix[256];
	} chk[MAXC];
	int n;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->bin = ut_join(f->dir, "bin");
	ut_mkdir(f->dir, "bin");
	ut_script(f->bin, "squeue", "#!/bin/sh\nexit 0\n");
	ut_script(f->bin, "srun", "#!/bin/sh\nexit 0\n");
	ut_script(f->bin, "sbcast", "#!/bin/sh\nexit 0\n");
	f->old_path = ut_path_set(f->bin, f->bin); /* only the fakes */
	f->src = ut_join(f->dir, "shared");
	ut_mkdir(f->dir, "shared");
	ut_fill_file(f->src, "data.bin", 2 << 20, 1);
	ut_write(f->src, "small", "x", 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	if (f->small) {
		umount2(f->small, MNT_DETACH);
		free(f->small);
	}
	free(f->bin);
	return ut_teardown(state);
}

static void take(void *arg, const stg_check *c)
{
	fx *f = arg;
	assert_true(f->n < MAXC);
	f->chk[f->n].level = c->level;
	snprintf(f->chk[f->n].name, sizeof f->chk[f->n].name, "%s", c->name);
	snprintf(f->chk[f->n].found, sizeof f->chk[f->n].found, "%s", c->found);
	snprintf(f->chk[f->n].fix, sizeof f->chk[f->n].fix, "%s", c->fix ? c->fix : "");
	/* a warning or a failure says what to do; an ok check has nothing
	 * to fix (libstage.h) */
	if (c->level != STG_CHECK_OK)
		assert_true(c->fix && *c->fix);
	else
		assert_null(c->fix);
	f->n++;
}

/* Run the doctor with settings (ut_config's, and these) on paths. */
static void doctor(fx *f, const char *const *settings, const char *const *paths, size_t n)
{
	f->n = 0;
	stg_config *cfg = ut_config(f->ctx, f->dir, settings);
	assert_int_equal(stg_doctor(f->ctx, cfg, paths, n, take, f), STG_OK);
	stg_config_free(cfg);
}

/* The check named name (the first; fails the test if none). */
static int find(fx *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->chk[i].name, name))
			return i;
	fail_msg("no check '%s'", name);
	return -1;
}

static void is(fx *f, const char *name, stg_check_level level, const char *found_has)
{
	int i = find(f, name);
	if (f->chk[i].level != level || !strstr(f->chk[i].found, found_has))
		fail_msg("'%s': level %d, '%s'; want level %d with '%s'", name, f->chk[i].level,
		         f->chk[i].found, level, found_has);
}

static void test_healthy(void **state)
{
	fx *f = *state;
	const char *paths[] = {f->src};
	doctor(f, NULL, paths, 1);
	/* the node's shared places first (stg_doctor_prepare): as root, what
	 * is made there is said before root's own scratch root is opened */
	static const char *const order[] = {
	        "configuration",     "reader slots", "scratch root", "scratch throughput",
	        "scratch space",     "slurm job",    "squeue",       "srun, sbcast",
	        "shared filesystem",
	};
	assert_int_equal(f->n, 9);
	for (int i = 0; i < 9; i++) {
		assert_string_equal(f->chk[i].name, order[i]);
		/* (a user's doctor makes no slot directory: only root's is shared) */
		if (f->chk[i].level != STG_CHECK_OK && (geteuid() == 0 || i != 1))
			fail_msg("'%s': %s", f->chk[i].name, f->chk[i].found);
	}
	if (geteuid() != 0) {
		is(f, "reader slots", STG_CHECK_WARN, "does not exist");
		return;
	}
	char *scratch = ut_join(f->dir, "scratch");
	char want[4200];
	snprintf(want, sizeof want, "'%s' (", scratch);
	is(f, "scratch root", STG_CHECK_OK, want);
	is(f, "scratch root", STG_CHECK_OK, ", private)");
	is(f, "scratch throughput", STG_CHECK_OK, "(64 MiB)");
	is(f, "scratch space", STG_CHECK_OK, "(min_free 0 B)");
	is(f, "slurm job", STG_CHECK_OK, "not in a job");
	is(f, "reader slots", STG_CHECK_OK, "(root's, 1777), the reader slots (2 per node)");
	/* the largest file near the top is timed */
	snprintf(want, sizeof want, "'%s' (", f->src);
	is(f, "shared filesystem", STG_CHECK_OK, want);
	is(f, "shared filesystem", STG_CHECK_OK, "per stat() (median of 200), read");
	char *data = ut_join(f->src, "data.bin");
	snprintf(want, sizeof want, "(2 MiB of %s)", data);
	is(f, "shared filesystem", STG_CHECK_OK, want);
	/* the slot directory was made sticky and world-writable */
	char *slots = ut_join(f->dir, "slots");
	struct stat st;
	assert_int_equal(stat(slots, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	/* no probe file left */
	ut_no_temporaries(scratch, true);
	DIR *d = opendir(scratch);
	struct dirent *e;
	while ((e = readdir(d)))
		assert_null(strstr(e->d_name, ".doctor."));
	closedir(d);
	free(slots);
	free(data);
	free(scratch);
}

static void test_problems(void **state)
{
	fx *f = *state;
	/* no Slurm commands; no reader limit; a path that does not exist,
	 * and a directory with no file large enough to time */
	free(ut_path_set("/nonexistent", f->bin));
	char *missing = ut_join(f->dir, "missing");
	char *empty = ut_join(f->dir, "empty");
	mkdir(empty, 0755);
	const char *paths[] = {missing, empty};
	const char *set[] = {"max_readers_per_node", "0", NULL};
	doctor(f, set, paths, 2);
	is(f, "squeue", STG_CHECK_WARN, "not found: `stager clean` cannot tell");
	is(f, "srun, sbcast", STG_CHECK_WARN, "srun and sbcast not found");
	is(f, "reader slots", STG_CHECK_WARN, "no node-wide limit on shared-FS readers");
	char want[4200];
	snprintf(want, sizeof want, "'%s': No such file or directory", missing);
	int i = find(f, "shared filesystem");
	assert_int_equal(f->chk[i].level, STG_CHECK_FAIL);
	assert_string_equal(f->chk[i].found, want);
	assert_string_equal(f->chk[i].fix, "check the path and the mount");
	assert_int_equal(f->chk[i + 1].level, STG_CHECK_OK);
	assert_non_null(strstr(f->chk[i + 1].found, "no file of 1 MiB or more near its top"));
	/* only srun missing */
	free(ut_path_set(f->bin, f->bin));
	char *srun = ut_join(f->bin, "srun");
	unlink(srun);
	doctor(f, NULL, paths, 1);
	is(f, "srun, sbcast", STG_CHECK_WARN, "srun not found");
	is(f, "squeue", STG_CHECK_OK, "found");

	/* a slot directory that is not sticky; a lease directory missing */
	char *slots = ut_join(f->dir, "slots");
	mkdir(slots, 0755);
	chmod(slots, 0755);
	char *leases = ut_join(f->dir, "no-leases");
	const char *set2[] = {"shared_lock_dir", leases, "max_readers_cluster", "4", NULL};
	doctor(f, set2, paths, 1);
	/* (a user's own is no root's: other users' stagers do not use it) */
	if (geteuid() == 0)
		is(f, "reader slots", STG_CHECK_FAIL,
		   "is mode 0755, not 1777: users cannot use it");
	else
		is(f, "reader slots", STG_CHECK_WARN, "(you), who can change it for every user");
	snprintf(want, sizeof want, "cannot create a lease in '%s': No such file or directory",
	         leases);
	is(f, "cluster leases", STG_CHECK_FAIL, want);
	/* with the lease directory there */
	mkdir(leases, 01777);
	chmod(slots, 01777);
	doctor(f, set2, paths, 1);
	is(f, "reader slots", geteuid() == 0 ? STG_CHECK_OK : STG_CHECK_WARN, "");
	is(f, "cluster leases", STG_CHECK_OK, "4 per cluster");
	DIR *d = opendir(leases);
	struct dirent *e;
	while ((e = readdir(d)))
		assert_null(strstr(e->d_name, ".doctor."));
	closedir(d);

	/* in a job whose scratch directory cannot be written */
	stg_config *cfg = ut_config(f->ctx, f->dir, NULL);
	const char *var = stg_config_get(cfg, "job_tmpdir_var", NULL);
	char varname[64];
	snprintf(varname, sizeof varname, "%s", var);
	stg_config_free(cfg);
	char *old = ut_env_save(varname);
	setenv("SLURM_JOB_ID", "99", 1);
	setenv(varname, "relative/tmp", 1);
	doctor(f, NULL, paths, 1);
	is(f, "slurm job", STG_CHECK_OK, "job 99 on 1 node(s)");
	is(f, varname, STG_CHECK_FAIL, "'relative/tmp'");
	setenv(varname, f->dir, 1);
	doctor(f, NULL, paths, 1);
	is(f, varname, STG_CHECK_OK, f->dir);
	unsetenv(varname);
	doctor(f, NULL, paths, 1);
	is(f, varname, STG_CHECK_OK, "not set: stager keeps a job directory");
	ut_env_restore(varname, old);
	unsetenv("SLURM_JOB_ID");
	free(srun);
	free(slots);
	free(leases);
	free(missing);
	free(empty);
}

/* A scratch root others could read is made private when the cache opens
 * it (so the doctor finds it private); one of another user's, or under a
 * file, cannot be a cache: told, and the other checks still made. */
static void test_scratch_root(void **state)
{
	fx *f = *state;
	const char *paths[] = {f->src};
	char *scratch = ut_join(f->dir, "scratch");
	mkdir(scratch, 0755);
	chmod(scratch, 0755);
	doctor(f, NULL, paths, 1);
	is(f, "scratch root", STG_CHECK_OK, ", private)");
	struct stat st;
	assert_int_equal(stat(scratch, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	/* another user's */
	assert_int_equal(chown(scratch, 4321, 4321), 0);
	doctor(f, NULL, paths, 1);
	int i = find(f, "scratch root");
	assert_int_equal(f->chk[i].level, STG_CHECK_FAIL);
	assert_string_equal(f->chk[i].fix, "set scratch_root to a writable node-local directory");
	assert_int_equal(chown(scratch, getuid(), getgid()), 0);
	/* under a file: the cache cannot be opened; the rest still checked */
	char *file = ut_join(f->dir, "afile");
	ut_write(f->dir, "afile", "x", 1);
	char *under = ut_join(file, "scratch");
	const char *set[] = {"scratch_root", under, NULL};
	doctor(f, set, paths, 1);
	i = find(f, "scratch root");
	assert_non_null(strstr(f->chk[i].found, under));
	assert_int_equal(f->chk[i].level, STG_CHECK_FAIL);
	assert_string_equal(f->chk[i].fix, "set scratch_root to a writable node-local directory");
	assert_string_equal(f->chk[i + 1].name, "slurm job"); /* no throughput, no space */
	is(f, "shared filesystem", STG_CHECK_OK, "");
	free(under);
	free(file);
	free(scratch);
}

/* Scratch on a 1 MiB tmpfs: 64 MiB cannot be written, and the free space
 * is under min_free. */
static void test_full_scratch(void **state)
{
	fx *f = *state;
	f->small = ut_join(f->dir, "small");
	ut_mkdir(f->dir, "small");
	if (mount("tmpfs", f->small, "tmpfs", 0, "size=1m,mode=0700")) {
		fprintf(stderr, "# cannot mount a 1 MiB tmpfs (%s): need root\n", strerror(errno));
		free(f->small);
		f->small = NULL;
		skip();
	}
	char *root = ut_join(f->small, "scratch");
	const char *set[] = {"scratch_root", root, "min_free", "10M", NULL};
	const char *paths[] = {f->src};
	doctor(f, set, paths, 1);
	is(f, "scratch root", STG_CHECK_OK, "(tmpfs, private)");
	is(f, "scratch write", STG_CHECK_FAIL, "only 0 of 64 MiB could be written");
	int i = find(f, "scratch write");
	assert_string_equal(f->chk[i].fix, "free space on the scratch disk");
	is(f, "scratch space", STG_CHECK_FAIL, "(min_free 10.0 MiB)");
	/* the probe file is gone */
	DIR *d = opendir(root);
	struct dirent *e;
	while ((e = readdir(d)))
		assert_null(strstr(e->d_name, ".doctor."));
	closedir(d);
	free(root);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_healthy),
        T(test_problems),
        T(test_scratch_root),
        T(test_full_scratch),
};

UT_MAIN(tests)
