/* test_mount_job.c - a mount's Slurm job (mount_job.c): the step daemons'
 * titles, what is watched outside a step, the watch of a process (its end
 * calls back at once; an ended watch never does), and whether a job is
 * over, against fake squeue and scontrol on PATH (a controller that does
 * not answer is "unknown", a command that hangs is cut short). */
#include "unit.h"

#include "mount_job.h"

#include <stdatomic.h>

static char *bin, *top, *old_path;

static int setup(void **state)
{
	(void)state;
	ut_no_slurm();
	top = ut_tmpdir();
	bin = ut_join(top, "bin");
	mkdir(bin, 0755);
	/* squeue: $FAKE_STATE (status 1 and nothing if empty), or hangs with
	 * $FAKE_HANG; scontrol ping: the controller is $FAKE_CTL; listpids:
	 * $FAKE_PIDS, or fails */
	ut_script(bin, "squeue",
	          "#!/bin/sh\n"
	          "[ -z \"$FAKE_HANG\" ] || exec sleep 60\n"
	          "[ -n \"$FAKE_STATE\" ] || exit 1\n"
	          "echo \"$FAKE_STATE\"\n");
	ut_script(bin, "scontrol",
	          "#!/bin/sh\n"
	          "case $1 in\n"
	          "ping) echo \"Slurmctld(primary) at ctl is $FAKE_CTL\" ;;\n"
	          "listpids) [ -n \"$FAKE_PIDS\" ] || exit 1; printf \"$FAKE_PIDS\" ;;\n"
	          "*) exit 1 ;;\n"
	          "esac\n");
	old_path = ut_path_set(NULL, bin);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ut_path_restore(old_path);
	ut_no_slurm();
	unsetenv("FAKE_STATE");
	unsetenv("FAKE_HANG");
	unsetenv("FAKE_CTL");
	unsetenv("FAKE_PIDS");
	ut_rmtree(top);
	free(top);
	free(bin);
	return 0;
}

static void test_stepd_title(void **state)
{
	(void)state;
	char step[32];
	/* as /proc/PID/cmdline holds it: NUL-padded */
	const char t[] = "slurmstepd: [12.batch]\0\0\0";
	assert_true(stg__stepd_step(t, sizeof t, "12", step, sizeof step));
	assert_string_equal(step, "batch");
	const char t0[] = "slurmstepd: [12.0]";
	assert_true(stg__stepd_step(t0, sizeof t0 - 1, "12", step, sizeof step));
	assert_string_equal(step, "0");
	/* another job, one whose id ends like it, a cut or empty title */
	assert_false(stg__stepd_step(t, sizeof t, "2", step, sizeof step));
	assert_false(stg__stepd_step(t, sizeof t, "123", step, sizeof step));
	const char cut[] = "slurmstepd: [12.bat";
	assert_false(stg__stepd_step(cut, sizeof cut - 1, "12", step, sizeof step));
	const char empty[] = "slurmstepd: [12.]";
	assert_false(stg__stepd_step(empty, sizeof empty - 1, "12", step, sizeof step));
	/* a step name longer than the room is refused, not cut */
	char small[4];
	assert_false(stg__stepd_step(t, sizeof t, "12", small, sizeof small));
}

/* A step that ends before its job, by the cgroups proctrack/cgroup puts
 * its processes in (v1 and v2 paths), for this job only. */
static void test_cgroup_step(void **state)
{
	(void)state;
	const char v1[] = "12:pids:/\n6:freezer:/slurm_n1/uid_1000/job_12/step_0\n0::/\n";
	assert_true(stg__cgroup_step_ends(v1, "12"));
	assert_false(stg__cgroup_step_ends(v1, "1"));
	assert_false(stg__cgroup_step_ends(v1, "123"));
	const char v2[] = "0::/system.slice/slurmstepd.scope/job_12/step_3/user/task_0\n";
	assert_true(stg__cgroup_step_ends(v2, "12"));
	/* the steps that last the job */
	const char *lasting[] = {
	        "6:freezer:/slurm_n1/uid_1000/job_12/step_batch\n",
	        "6:freezer:/slurm_n1/uid_1000/job_12/step_extern\n",
	        "0::/system.slice/slurmstepd.scope/job_12/step_interactive/user/task_0\n",
	        "6:freezer:/slurm_n1/uid_1000/job_12/step_\n", /* no name */
	        "6:freezer:/\n0::/user.slice\n",               /* proctrack/pgid */
	};
	for (size_t i = 0; i < sizeof lasting / sizeof lasting[0]; i++)
		assert_false(stg__cgroup_step_ends(lasting[i], "12"));
	assert_false(stg__cgroup_step_ends(v1, NULL));
	assert_false(stg__cgroup_step_ends(v1, ""));
}

static void test_find(void **state)
{
	(void)state;
	stg_mount_job j;
	/* outside a job, or an id that is not one */
	assert_false(stg__mount_job_find(&j, NULL));
	setenv("SLURM_JOB_ID", "12x", 1);
	assert_false(stg__mount_job_find(&j, NULL));
	/* a job, no step daemon above this process, Slurm lists nothing
	 * here: Slurm is asked */
	setenv("SLURM_JOB_ID", "4242", 1);
	assert_true(stg__mount_job_find(&j, NULL));
	assert_string_equal(j.job, "4242");
	assert_int_equal(j.pid, 0);
	assert_string_equal(j.what, "Slurm");
	/* a batch task 0 listed whose parent is no slurmstepd is not taken */
	char pids[128];
	snprintf(pids, sizeof pids, "PID JOBID STEPID LOCALID GLOBALID\\n%d 4242 batch 0 0\\n",
	         (int)getpid());
	setenv("FAKE_PIDS", pids, 1);
	assert_true(stg__mount_job_find(&j, NULL));
	assert_int_equal(j.pid, 0);
}

static atomic_int called;

static void on_over(void *arg, const stg_mount_job *j)
{
	(void)j;
	atomic_fetch_add(&called, 1);
	*(double *)arg = stg__now();
}

static int nothing(void *arg)
{
	(void)arg;
	return 0;
}

static void watched(stg_mount_job *j, pid_t pid)
{
	memset(j, 0, sizeof *j);
	snprintf(j->job, sizeof j->job, "4242");
	j->pid = pid;
	assert_int_equal(stg__proc_stat(pid, NULL, &j->start), 0);
}

static void test_watch_process(void **state)
{
	(void)state;
	pid_t child;
	ut_child(&child, nothing, NULL, 0);
	stg_mount_job j;
	watched(&j, child);
	atomic_store(&called, 0);
	double when = 0;
	stg_mount_jobwatch *w = stg__mount_job_watch(&j, on_over, &when);
	assert_non_null(w);
	struct timespec ts = {0, 200000000L};
	nanosleep(&ts, NULL);
	assert_int_equal(atomic_load(&called), 0);
	double t0 = stg__now();
	kill(child, SIGKILL);
	for (int i = 0; i < 200 && !atomic_load(&called); i++)
		stg__nap(NULL, 0.01);
	assert_int_equal(atomic_load(&called), 1);
	/* a pidfd wakes the watch at once (/proc would take up to 2 s) */
	assert_true(when - t0 < 1.0);
	waitpid(child, NULL, 0);
	stg__mount_job_unwatch(w);
	assert_int_equal(atomic_load(&called), 1);
}

static void test_watch_ended(void **state)
{
	(void)state;
	/* a watch ended before its process: never called */
	pid_t child;
	ut_child(&child, nothing, NULL, 0);
	stg_mount_job j;
	watched(&j, child);
	atomic_store(&called, 0);
	double when = 0;
	stg_mount_jobwatch *w = stg__mount_job_watch(&j, on_over, &when);
	assert_non_null(w);
	stg__mount_job_unwatch(w);
	ut_kill(&child);
	stg__nap(NULL, 0.3);
	assert_int_equal(atomic_load(&called), 0);
	/* a process already gone (the pid's start differs): called at once */
	ut_child(&child, nothing, NULL, 0);
	watched(&j, child);
	j.start++;
	w = stg__mount_job_watch(&j, on_over, &when);
	assert_non_null(w);
	for (int i = 0; i < 200 && !atomic_load(&called); i++)
		stg__nap(NULL, 0.01);
	assert_int_equal(atomic_load(&called), 1);
	stg__mount_job_unwatch(w);
	ut_kill(&child);
}

static void test_job_over(void **state)
{
	(void)state;
	bool late = false;
	setenv("FAKE_CTL", "UP", 1);
	setenv("FAKE_STATE", "RUNNING", 1);
	assert_int_equal(stg__mount_job_over("4242", &late), 0);
	setenv("FAKE_STATE", "COMPLETING", 1);
	assert_int_equal(stg__mount_job_over("4242", &late), 0);
	/* a final state, or a job squeue forgot: over, if the controller
	 * answers; unknown if it does not */
	setenv("FAKE_STATE", "COMPLETED", 1);
	assert_int_equal(stg__mount_job_over("4242", &late), 1);
	setenv("FAKE_STATE", "", 1);
	assert_int_equal(stg__mount_job_over("4242", &late), 1);
	setenv("FAKE_CTL", "DOWN", 1);
	assert_int_equal(stg__mount_job_over("4242", &late), -1);
	assert_false(late);
	/* no Slurm at all */
	char *old = ut_path_set("/nonexistent", NULL);
	assert_int_equal(stg__mount_job_over("4242", &late), -1);
	ut_path_restore(old);
	/* a squeue that does not answer is cut short */
	setenv("FAKE_HANG", "1", 1);
	double t0 = stg__now();
	assert_int_equal(stg__mount_job_over("4242", &late), -1);
	double t = stg__now() - t0;
	assert_true(late);
	assert_true(t >= 9.5);
	ut_assert_time_below(t, 15);
	unsetenv("FAKE_HANG");
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stepd_title),
        cmocka_unit_test(test_cgroup_step),
        cmocka_unit_test_setup_teardown(test_find, setup, teardown),
        cmocka_unit_test(test_watch_process),
        cmocka_unit_test(test_watch_ended),
        cmocka_unit_test_setup_teardown(test_job_over, setup, teardown),
};

UT_MAIN(tests)
