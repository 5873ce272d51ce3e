/* test_collect_mark.c - markers of who writes temporaries in a DEST
 * (collect_mark.c): the host name in temporaries' names, the marker's
 * name with and without a job, and the sweep that removes the temporaries
 * of writers that are gone (a dead process on this host, an ended job, a
 * day-old marker of another host), only names collect makes, never
 * through a link, the top level only when flat. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <sys/wait.h>
#include <time.h>

typedef struct fx {
	UT_FX;
	char *bin, *old_path;
	int destfd;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->dest = ut_join(f->dir, "dest");
	mkdir(f->dest, 0755);
	f->destfd = open(f->dest, O_RDONLY | O_DIRECTORY);
	/* squeue: job 55 has ended ("Invalid job id"), job 66 runs */
	f->bin = ut_join(f->dir, "bin");
	mkdir(f->bin, 0755);
	static const char sq[] = "#!/bin/sh\ncase \"$*\" in *66*) echo RUNNING ;; *) exit 1 ;; "
	                         "esac\n";
	ut_script(f->bin, "squeue", sq);
	/* (squeue fails alike for a controller it cannot reach: asked) */
	ut_script(f->bin, "scontrol", "#!/bin/sh\necho 'Slurmctld(primary) at ctl is UP'\n");
	f->old_path = ut_path_set(NULL, f->bin);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	close(f->destfd);
	free(f->bin);
	return ut_teardown(state);
}

/* Every test runs after this one has fixed the host name. */
static void test_host(void **state)
{
	(void)state;
	setenv("SLURMD_NODENAME", "node7.cluster.example", 1);
	assert_string_equal(stg__collect_host(), "node7");
	/* asked once */
	setenv("SLURMD_NODENAME", "other", 1);
	assert_string_equal(stg__collect_host(), "node7");
	unsetenv("SLURMD_NODENAME");
}

/* Is there a name of the form fmt in DEST? */
static __attribute__((format(printf, 2, 3))) bool exists(fx *f, const char *fmt, ...)
{
	char name[256];
	UT_VFMT(name, fmt);
	return ut_exists_at(f->destfd, name);
}

static void test_marker(void **state)
{
	fx *f = *state;
	char name[128];
	assert_int_equal(stg__mark_begin(f->destfd, name, sizeof name), 0);
	char want[128];
	snprintf(want, sizeof want, ".stager-collecting.node7.%d", (int)getpid());
	assert_string_equal(name, want);
	assert_true(exists(f, "%s", name));
	stg__mark_end(f->destfd, name);
	assert_false(exists(f, "%s", name));
	setenv("SLURM_JOB_ID", "123_4", 1);
	assert_int_equal(stg__mark_begin(f->destfd, name, sizeof name), 0);
	snprintf(want, sizeof want, ".stager-collecting.node7.%d.123_4", (int)getpid());
	assert_string_equal(name, want);
	stg__mark_end(f->destfd, name);
	/* a job id that is not one: left out of the name */
	setenv("SLURM_JOB_ID", "1/../x", 1);
	assert_int_equal(stg__mark_begin(f->destfd, name, sizeof name), 0);
	snprintf(want, sizeof want, ".stager-collecting.node7.%d", (int)getpid());
	assert_string_equal(name, want);
	stg__mark_end(f->destfd, name);
	unsetenv("SLURM_JOB_ID");
	/* where it cannot be made: no name, and ending it does nothing */
	int bad = open("/proc", O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__mark_begin(bad, name, sizeof name), -1);
	assert_string_equal(name, "");
	stg__mark_end(bad, name);
	close(bad);
}

static int dead_pid(void)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	return (int)pid;
}

/* A file of the form fmt in DEST. */
static __attribute__((format(printf, 2, 3))) void put(fx *f, const char *fmt, ...)
{
	char name[256];
	UT_VFMT(name, fmt);
	ut_write(f->dest, name, "t", 1);
}

static void test_sweep(void **state)
{
	fx *f = *state;
	int dead = dead_pid(), me = (int)getpid();
	ut_mkdir(f->dest, "sub");
	ut_mkdir(f->dest, "sub/deeper");
	/* a dead writer on this host: its temporaries go, everywhere */
	put(f, ".stager-collecting.node7.%d", dead);
	put(f, ".stager-tmp.node7.%d.0", dead);
	put(f, "sub/deeper/.stager-tmp.node7.%d.7", dead);
	/* ... not those of a live one, nor other names */
	put(f, ".stager-collecting.node7.%d", me);
	put(f, ".stager-tmp.node7.%d.1", me);
	put(f, "sub/result.stager-tmp.node7.%d.2", dead);
	put(f, "sub/.stager-tmp.node7.%d0.3", dead); /* another pid */
	/* a link named like a temporary: not a file, left */
	char target[64];
	snprintf(target, sizeof target, ".stager-tmp.node7.%d.9", dead);
	char *outside = ut_join(f->dir, "outside");
	ut_write(f->dir, "outside", "keep", 4);
	assert_int_equal(symlinkat(outside, f->destfd, target), 0);
	/* other hosts' writers, and whether the sweep keeps their names */
	static const struct {
		const char *name;
		bool kept;
	} other[] = {
	        /* another host: an ended job's writer goes, a running job's stays */
	        {".stager-collecting.node9.100.55", false},
	        {".stager-tmp.node9.100.0", false},
	        {".stager-collecting.node9.200.66", true},
	        {".stager-tmp.node9.200.0", true},
	        /* another host without a job: a day-old marker's writer is gone */
	        {".stager-collecting.node3.300", false},
	        {".stager-tmp.node3.300.0", false},
	        {".stager-collecting.node4.400", true},
	        {".stager-tmp.node4.400.0", true},
	        /* malformed markers: ignored */
	        {".stager-collecting.", true},
	        {".stager-collecting.node5.x", true},
	        {".stager-collecting.node5.0", true},
	};
	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
		put(f, "%s", other[i].name);
	struct timespec old[2] = {{0, UTIME_OMIT}, {time(NULL) - 2 * 86400, 0}};
	assert_int_equal(utimensat(f->destfd, ".stager-collecting.node3.300", old, 0), 0);
	stg__mark_sweep(f->ctx, f->destfd, f->dest, false);

	assert_false(exists(f, ".stager-collecting.node7.%d", dead));
	assert_false(exists(f, ".stager-tmp.node7.%d.0", dead));
	assert_false(exists(f, "sub/deeper/.stager-tmp.node7.%d.7", dead));
	char want[512];
	snprintf(want, sizeof want,
	         "removed 2 temporaries that a collect killed on node7.%d left in '%s'", dead,
	         f->dest);
	assert_non_null(strstr(f->log.text, want));

	assert_true(exists(f, ".stager-collecting.node7.%d", me));
	assert_true(exists(f, ".stager-tmp.node7.%d.1", me));
	assert_true(exists(f, "sub/result.stager-tmp.node7.%d.2", dead));
	assert_true(exists(f, "sub/.stager-tmp.node7.%d0.3", dead));
	assert_true(exists(f, "%s", target));
	assert_true(exists(f, "../outside"));

	for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
		if (exists(f, "%s", other[i].name) != other[i].kept)
			fail_msg("'%s' %s", other[i].name, other[i].kept ? "removed" : "kept");
	free(outside);
}

/* No Slurm to ask: a job's writer is not known to be gone. */
static void test_sweep_unknown_job(void **state)
{
	fx *f = *state;
	setenv("PATH", "/nonexistent", 1);
	put(f, ".stager-collecting.node9.100.55");
	put(f, ".stager-tmp.node9.100.0");
	stg__mark_sweep(f->ctx, f->destfd, f->dest, false);
	assert_true(exists(f, ".stager-collecting.node9.100.55"));
	assert_true(exists(f, ".stager-tmp.node9.100.0"));
}

/* Flat (a DEST.tar.zst's directory, which is not ours): the top only. */
static void test_sweep_flat(void **state)
{
	fx *f = *state;
	int dead = dead_pid();
	ut_mkdir(f->dest, "theirs");
	put(f, ".stager-collecting.node7.%d", dead);
	put(f, ".stager-tmp.node7.%d.0", dead);
	put(f, "theirs/.stager-tmp.node7.%d.1", dead);
	stg__mark_sweep(f->ctx, f->destfd, f->dest, true);
	assert_false(exists(f, ".stager-tmp.node7.%d.0", dead));
	assert_true(exists(f, "theirs/.stager-tmp.node7.%d.1", dead));
	assert_false(exists(f, ".stager-collecting.node7.%d", dead));
	assert_non_null(strstr(f->log.text, "removed 1 temporary that a collect killed on"));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host), T(test_marker),     T(test_sweep),
        T(test_sweep_unknown_job),   T(test_sweep_flat),
};

UT_MAIN(tests)
