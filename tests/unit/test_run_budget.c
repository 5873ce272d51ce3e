/* test_run_budget.c - the time budget of `stager run` in a Slurm job (run_budget.c):
 * the job's clock learned at start (fake squeue and scontrol on PATH, the
 * spooled script's #SBATCH --signal), and none outside a job; the interval
 * of periodic collects (a tenth of what is left, 60 s to 30 min); rates
 * measured only from collects of 1 MiB or more; when to look again; what
 * is pending (files changed since the last collect began, not through
 * links); when the last collect must start, with exec and without (the
 * early warning to the batch shell), the one warning when it would not
 * fit and the one note that collects are due; a batch shell that would
 * die of the early warning stops run before it starts. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "run_state.h"
#include "run_budget.h"

typedef struct fx {
	UT_FX;
	char *bin, *spool;
	char *old_path;
	int looks; /* the budget callback */
	uint64_t todo;
	double need, room;
	int measured;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->bin = ut_join(f->dir, "bin");
	ut_mkdir(f->dir, "bin");
	f->spool = ut_join(f->dir, "spool");
	ut_mkdir(f->dir, "spool");
	f->old_path = ut_path_set(NULL, f->bin);
	f->src = ut_join(f->dir, "src");
	ut_mkdir(f->dir, "src");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	free(f->bin);
	free(f->spool);
	unsetenv("SLURMD_NODENAME");
	return ut_teardown(state);
}

/* Fake squeue (the job ends in secs) and scontrol (KillWait kill_wait,
 * the spool directory); the spooled script of job 123 holds sbatch. */
static void fake_slurm(fx *f, double secs, unsigned kill_wait, const char *sbatch)
{
	time_t end = (time_t)(stg__wall() + secs);
	struct tm tm;
	localtime_r(&end, &tm);
	char when[64], text[8192];
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(text, sizeof text, "#!/bin/sh\necho %s\n", when);
	ut_script(f->bin, "squeue", text);
	snprintf(text, sizeof text,
	         "#!/bin/sh\necho 'Configuration data as of now'\necho 'KillWait                = "
	         "%u "
	         "sec'\necho 'SlurmdSpoolDir          = %s/%%n'\n",
	         kill_wait, f->spool);
	ut_script(f->bin, "scontrol", text);
	setenv("SLURMD_NODENAME", "node7", 1);
	char *dir = ut_join(f->spool, "node7");
	mkdir(dir, 0755);
	ut_mkdir(dir, "job00123");
	snprintf(text, sizeof text, "#!/bin/bash\n#SBATCH -t 10\n%s\n\nexec stager run -- true\n",
	         sbatch);
	ut_write(dir, "job00123/slurm_script", text, strlen(text));
	free(dir);
	setenv("SLURM_JOB_ID", "123", 1);
}

static void test_start(void **state)
{
	fx *f = *state;
	run_budget b;
	/* outside a job: nothing */
	assert_int_equal(stg__budget_start(f->ctx, &b, 1), STG_OK);
	assert_false(b.active);
	assert_int_equal(stg__budget_default_every(&b), 0);
	assert_true(stg__budget_next_check(&b) == 0);
	/* in one: its end, KillWait, and the early warning of its script */
	fake_slurm(f, 3600, 45, "#SBATCH --signal=B:USR1@120");
	double now = stg__wall();
	assert_int_equal(stg__budget_start(f->ctx, &b, 1), STG_OK);
	assert_true(b.active);
	assert_true(b.clock.end > now + 3590 && b.clock.end < now + 3610);
	assert_int_equal(b.clock.kill_wait, 45);
	assert_int_equal(b.clock.warn_signal, SIGUSR1);
	assert_int_equal(b.clock.warn_secs, 120);
	assert_int_equal(b.clock.warn_batch_only, 1);
	assert_int_equal(b.clock.no_exec, 0);
	assert_int_equal(f->log.warnings, 0);
	/* a tenth of the hour left */
	uint64_t every = stg__budget_default_every(&b);
	assert_true(every >= 358 && every <= 361);
	/* nothing to collect: no budget */
	assert_int_equal(stg__budget_start(f->ctx, &b, 0), STG_OK);
	assert_false(b.active);
	/* no time limit known */
	ut_script(f->bin, "squeue", "#!/bin/sh\necho UNLIMITED\n");
	assert_int_equal(stg__budget_start(f->ctx, &b, 1), STG_OK);
	assert_false(b.active);
}

static void test_every_measured(void **state)
{
	(void)state;
	run_budget b;
	memset(&b, 0, sizeof b);
	b.active = true;
	b.clock.end = stg__wall() + 100;
	assert_int_equal(stg__budget_default_every(&b), 60);
	b.clock.end = stg__wall() + 10 * 3600;
	assert_int_equal(stg__budget_default_every(&b), 1800);
	b.clock.end = stg__wall() + 1000;
	uint64_t e = stg__budget_default_every(&b);
	assert_true(e >= 99 && e <= 100);
	/* small collects give no rate, only their start */
	stg__budget_measured(&b, 1000, 2.0, 50.0);
	assert_int_equal(b.bytes, 0);
	assert_true(b.secs == 0);
	assert_true(b.since == 50.0);
	stg__budget_measured(&b, 4 << 20, 2.0, 60.0);
	stg__budget_measured(&b, 2 << 20, 1.0, 0); /* no start given: kept */
	assert_int_equal(b.bytes, 6 << 20);
	assert_true(b.secs == 3.0);
	assert_true(b.since == 60.0);
	/* looks: every 15 s, every 5 once collects are due; never inactive */
	b.checked = 1000;
	assert_true(stg__budget_next_check(&b) == 1015);
	b.due = true;
	assert_true(stg__budget_next_check(&b) == 1005);
	b.active = false;
	assert_true(stg__budget_next_check(&b) == 0);
}

static void budget_fn(void *arg, uint64_t todo, double need, int measured, double room)
{
	fx *f = arg;
	f->looks++;
	f->todo = todo;
	f->need = need;
	f->measured = measured;
	f->room = room;
}

/* A file of size bytes (sparse) in dir, changed now. */
static void sized(const char *dir, const char *name, off_t size)
{
	char *p = ut_join(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
	free(p);
}

static void test_due(void **state)
{
	fx *f = *state;
	/* pending: 100 MiB changed now (30 + 70, one level down); an old
	 * file and what a link leads to are not */
	sized(f->src, "a", 30 << 20);
	ut_mkdir(f->src, "sub");
	sized(f->src, "sub/b", 70 << 20);
	sized(f->dir, "outside", 500 << 20);
	char *outside = ut_join(f->dir, "outside");
	ut_symlink(f->src, "link", outside);
	sized(f->src, "old", 1 << 30);
	char *old = ut_join(f->src, "old");
	struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, old, ts, 0), 0);
	/* (ctime is now: the file counts as changed unless since is later) */

	stg_run_opts o;
	memset(&o, 0, sizeof o);
	o.budget = budget_fn;
	o.budget_arg = f;
	char *srcs[] = {f->src};
	run_state r;
	memset(&r, 0, sizeof r);
	r.ctx = f->ctx;
	r.o = &o;
	r.srcs = srcs;
	r.n_collects = 1;
	run_budget *b = &r.budget;
	b->active = true;
	b->clock.end = stg__wall() + 3600;
	b->clock.kill_wait = 30;
	b->since = stg__wall() - 5;

	/* at the assumed 50 MiB/s, 1 GiB + 100 MiB takes 22.5 s: with the
	 * margin, more than KillWait's 30 s; but the end is an hour away */
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->looks, 1);
	assert_int_equal(f->todo, (1ull << 30) + (100 << 20));
	assert_int_equal(f->measured, 0);
	assert_true(f->room == 30);
	assert_true(f->need > 22.4 && f->need < 22.6);
	assert_int_equal(f->log.warnings, 0); /* not measured: no warning */
	/* looked just now: not again for 15 s */
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->looks, 1);

	/* since later than the old file's change: only the 100 MiB; at the
	 * assumed rate 2 s, which KillWait leaves time for */
	utimensat(AT_FDCWD, old, ts, 0);
	b->since = stg__wall() + 2; /* (a second is taken off: coarse mtimes) */
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->todo, 0);
	b->since = stg__wall() - 5;
	unlink(old);
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->todo, 100 << 20);
	assert_true(f->need == 2.0);

	/* a measured rate of 1 MiB/s: 100 s, over KillWait's 30 s: warned
	 * once, early; not due while the end is an hour away */
	stg__budget_measured(b, 10 << 20, 10.0, 0);
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->measured, 1);
	assert_true(f->need == 100.0);
	assert_int_equal(f->log.warnings, 1);
	/* the 30 s are from SIGTERM at the limit to SIGKILL, not after it */
	char from[64], lim[64], want[256];
	struct tm tm;
	time_t t = (time_t)b->clock.end;
	localtime_r(&t, &tm);
	strftime(lim, sizeof lim, "%H:%M:%S", &tm);
	snprintf(want, sizeof want,
	         "the last collect would need about 100 s (100.0 MiB at 1.0 MiB/s) but the "
	         "job has 30 s from SIGTERM at its time limit (%s) to SIGKILL (KillWait 30 s): ",
	         lim);
	assert_non_null(strstr(f->log.text, want));
	assert_null(strstr(f->log.text, "after its time limit"));
	/* from: the end + KillWait - 1.25 * 100 s - the margin of 15 s */
	t = (time_t)(b->clock.end + 30 - 125 - 15);
	localtime_r(&t, &tm);
	strftime(from, sizeof from, "%H:%M:%S", &tm);
	snprintf(want, sizeof want, "stager collects on its own from %s;", from);
	assert_non_null(strstr(f->log.text, want));
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	assert_int_equal(f->log.warnings, 1);
	/* the end near: due once now >= end + KillWait - 125 - 15 */
	b->clock.end = stg__wall() + 150;
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	b->clock.end = stg__wall() + 100;
	b->checked = 0;
	assert_true(stg__budget_due(&r));
	assert_true(b->due);
	assert_non_null(strstr(f->log.text, "collecting results before the time limit"));
	assert_true(stg__budget_next_check(b) == b->checked + 5);
	/* an early warning to the job's steps leaves 120 s more: 100 s and
	 * the margin fit in 150 */
	b->clock.warn_signal = SIGUSR1;
	b->clock.warn_secs = 120;
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	assert_true(f->room == 150);
	free(outside);
	free(old);
}

/* The warning's figures, from an injected clock: with an early warning
 * the window is from it to SIGKILL; a moment to start collecting that is
 * already past (before the job began, even) is "now". */
static void test_warning_figures(void **state)
{
	(void)state;
	stg_job_clock c = {.end = 1000000, .kill_wait = 35};
	char msg[512], lim[16], from[16], want[256];
	struct tm tm;
	time_t t = 1000000;
	localtime_r(&t, &tm);
	strftime(lim, sizeof lim, "%H:%M:%S", &tm);
	/* USR1@300: 335 s from the warning to SIGKILL; 400 s needed at
	 * 1 MiB/s: from end + 35 - 500 - 15, which is still ahead */
	c.warn_signal = SIGUSR1;
	c.warn_secs = 300;
	stg__budget_warning(&c, 1000000 - 3600, 400u << 20, 1 << 20, 400, msg, sizeof msg);
	snprintf(want, sizeof want,
	         "but the job has 335 s from its early warning (USR1, 300 s before its time "
	         "limit at %s) to SIGKILL (KillWait 35 s after the limit): ",
	         lim);
	assert_non_null(strstr(msg, want));
	t = 1000000 + 35 - 500 - 15;
	localtime_r(&t, &tm);
	strftime(from, sizeof from, "%H:%M:%S", &tm);
	snprintf(want, sizeof want, "stager collects on its own from %s;", from);
	assert_non_null(strstr(msg, want));
	/* a job that began at end - 600 and needs 2000 s: the moment
	 * computed is before its start; it says now */
	stg__budget_warning(&c, 1000000 - 590, 2000u << 20, 1 << 20, 2000, msg, sizeof msg);
	assert_non_null(strstr(msg, "stager collects on its own from now;"));
	assert_null(strstr(msg, "after its time limit"));
	/* no warning: SIGTERM at the limit to SIGKILL */
	c.warn_signal = 0;
	c.warn_secs = 0;
	stg__budget_warning(&c, 1000000 - 3600, 100u << 20, 1 << 20, 100, msg, sizeof msg);
	snprintf(want, sizeof want,
	         "but the job has 35 s from SIGTERM at its time limit (%s) to SIGKILL "
	         "(KillWait 35 s): ",
	         lim);
	assert_non_null(strstr(msg, want));
}

/* Without exec the shell dies of SIGTERM at the end, or of a B: warning:
 * the last moment is then, with no room after it. */
static void test_due_no_exec(void **state)
{
	fx *f = *state;
	sized(f->src, "a", 100 << 20); /* 2 s at the assumed rate */
	stg_run_opts o;
	memset(&o, 0, sizeof o);
	o.budget = budget_fn;
	o.budget_arg = f;
	char *srcs[] = {f->src};
	run_state r;
	memset(&r, 0, sizeof r);
	r.ctx = f->ctx;
	r.o = &o;
	r.srcs = srcs;
	r.n_collects = 1;
	run_budget *b = &r.budget;
	b->active = true;
	b->clock.no_exec = 1;
	b->clock.kill_wait = 30;
	b->since = stg__wall() - 5;
	/* the end in 20 s: 2 * 1.25 + 15 = 17.5 s before it is not yet */
	b->clock.end = stg__wall() + 20;
	assert_false(stg__budget_due(&r));
	assert_true(f->room == 0);
	b->clock.end = stg__wall() + 17;
	b->checked = 0;
	assert_true(stg__budget_due(&r));
	/* a B: warning 120 s before the end kills the shell then */
	b->due = false;
	b->clock.warn_signal = SIGUSR1;
	b->clock.warn_secs = 120;
	b->clock.warn_batch_only = 1;
	b->clock.end = stg__wall() + 200;
	b->checked = 0;
	assert_false(stg__budget_due(&r));
	b->clock.end = stg__wall() + 130;
	b->checked = 0;
	assert_true(stg__budget_due(&r));
}

/* This program run again by the batch script of test_start_no_exec
 * ($UT_BUDGET_CHILD set): its parent is the script's shell. */
__attribute__((constructor)) static void budget_child(void)
{
	if (!getenv("UT_BUDGET_CHILD"))
		return;
	static ut_log log;
	stg_ctx *ctx = ut_ctx(0);
	stg_set_log(ctx, ut_log_fn, &log);
	run_budget b;
	stg_err err = stg__budget_start(ctx, &b, 1);
	if (err == STG_EUSAGE &&
	    strstr(stg_errmsg(ctx), "not started: with --signal=B:USR1@120 the batch shell dies "
	                            "of the early warning") &&
	    strstr(stg_errmsg(ctx), "`trap '' USR1`"))
		_exit(10);
	if (err == STG_OK && b.clock.no_exec && b.active && log.warnings == 1 &&
	    strstr(log.text, "write `exec stager run ...` in the script.  Without exec the early "
	                     "warning goes to the batch shell"))
		_exit(11);
	fprintf(stderr, "# child: %d %s / %s\n", err, stg_errmsg(ctx), log.text);
	_exit(1);
}

/* Run without exec by a batch script (bash, its command line naming
 * slurm_script) with an early warning for the shell: a shell that dies of
 * that signal stops run before it starts; one that ignores it gets a
 * warning to write exec. */
static void test_start_no_exec(void **state)
{
	fx *f = *state;
	fake_slurm(f, 3600, 30, "");
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	assert_true(n > 0);
	self[n] = '\0';
	char *dir = ut_join(f->dir, "batch");
	mkdir(dir, 0755);
	for (int ignores = 0; ignores < 2; ignores++) {
		char text[8192];
		snprintf(text, sizeof text,
		         "#!/bin/bash\n#SBATCH --signal=B:USR1@120\n%s\n'%s'\nrc=$?\nexit $rc\n",
		         ignores ? "trap '' USR1" : "", self);
		ut_write(dir, "slurm_script", text, strlen(text));
		char cmd[8400];
		snprintf(cmd, sizeof cmd, "UT_BUDGET_CHILD=1 /bin/bash '%s/slurm_script'", dir);
		int st = system(cmd);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), ignores ? 11 : 10);
	}
	free(dir);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_start),       T(test_every_measured), T(test_due),
        T(test_due_no_exec), T(test_start_no_exec),  T(test_warning_figures),
};

UT_MAIN(tests)
