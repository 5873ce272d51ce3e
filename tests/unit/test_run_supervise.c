/* test_run_supervise.c - the command of `stager run` while it runs
 * (run_supervise.c), with real commands (sh -c) that signal this process
 * themselves: the command's status as a shell says it (an exit, a
 * signal, 127 for a command that is not there); a stop signal passed on
 * to the command, which then has its grace period, after which results
 * are collected in the background; SIGUSR1 passed on only to a command
 * that catches it, and a collect started at once; periodic collects;
 * collecting every source once, the first failure returned and what was
 * sent measured; a collector stopped. */
#include "unit.h"
#include "cache.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "run_state.h"
#include "run_supervise.h"
#include "run_budget.h"

#include <sys/mman.h>

typedef struct fx {
	UT_FX;
	sigset_t set, old;
	run_state r;
	stg_run_opts o;
	run_pair pair[2];
	char *argv[4];
	char *flag; /* a file the commands write */
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(&f->ut, NULL);
	f->src = ut_join(f->dir, "out");
	f->dest = ut_join(f->dir, "shared");
	mkdir(f->src, 0755);
	ut_write(f->src, "result", "42\n", 3);
	f->flag = ut_join(f->dir, "flag");
	sigemptyset(&f->set);
	int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < 6; i++)
		sigaddset(&f->set, sigs[i]);
	pthread_sigmask(SIG_BLOCK, &f->set, &f->old);
	memset(&f->o, 0, sizeof f->o);
	f->r.ctx = f->ctx;
	f->r.cache = f->c;
	f->r.o = &f->o;
	stg_collect_opts_init(&f->r.co);
	f->pair[0].src = f->src;
	f->pair[0].dest = f->dest;
	f->r.collects = f->pair;
	f->r.measured = mmap(NULL, sizeof *f->r.measured, PROT_READ | PROT_WRITE,
	                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(f->r.measured != MAP_FAILED);
	memset(f->r.measured, 0, sizeof *f->r.measured);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	/* what is pending (SIGCHLD) is taken before the mask goes back */
	struct timespec zero = {0, 0};
	while (sigtimedwait(&f->set, NULL, &zero) > 0)
		;
	pthread_sigmask(SIG_SETMASK, &f->old, NULL);
	munmap(f->r.measured, sizeof *f->r.measured);
	free(f->flag);
	return ut_teardown(state);
}

/* Run script with sh -c under supervision; its status. */
static int supervise(fx *f, const char *script, double grace, bool *stopped)
{
	f->argv[0] = "sh";
	f->argv[1] = "-c";
	f->argv[2] = (char *)script;
	f->argv[3] = NULL;
	f->o.argv = f->argv;
	f->r.cmd = stg__run_start(&f->r, &f->old);
	assert_true(f->r.cmd > 0);
	*stopped = false;
	return stg__run_supervise(&f->r, &f->set, grace, stopped);
}

/* Wait for a background collector, if one runs. */
static void wait_collector(fx *f)
{
	if (f->r.collector > 0) {
		waitpid(f->r.collector, NULL, 0);
		f->r.collector = 0;
	}
}

static void test_status(void **state)
{
	fx *f = *state;
	bool stopped;
	assert_int_equal(supervise(f, "exit 5", 1, &stopped), 5);
	assert_false(stopped);
	assert_int_equal(supervise(f, "kill -KILL $$", 1, &stopped), 128 + SIGKILL);
	assert_int_equal(supervise(f, "exit 0", 1, &stopped), 0);
	/* the command runs with the signals as they were before: none blocked */
	char script[4300];
	snprintf(script, sizeof script, "grep SigBlk /proc/self/status > '%s'", f->flag);
	assert_int_equal(supervise(f, script, 1, &stopped), 0);
	char *t = ut_read_text(f->flag);
	unsigned long long blk;
	assert_int_equal(sscanf(t, "SigBlk: %llx", &blk), 1);
	assert_int_equal(blk & (1ull << (SIGTERM - 1) | 1ull << (SIGCHLD - 1)), 0);
	free(t);
	/* a command that is not there */
	f->argv[0] = "no-such-command-here";
	f->argv[1] = NULL;
	f->o.argv = f->argv;
	f->r.cmd = stg__run_start(&f->r, &f->old);
	assert_int_equal(stg__run_supervise(&f->r, &f->set, 1, &stopped), 127);
}

/* SIGTERM: passed on (the command's trap says so and exits 3); the
 * command takes longer than the grace period, so results are collected
 * in the background meanwhile. */
static void test_stop(void **state)
{
	fx *f = *state;
	f->r.n_collects = 1;
	char script[4300];
	snprintf(script, sizeof script,
	         "trap 'echo TERM > \"%s\"; sleep 1; exit 3' TERM; kill -TERM $PPID; "
	         "while :; do sleep 0.05; done",
	         f->flag);
	bool stopped;
	double t0 = stg__now();
	assert_int_equal(supervise(f, script, 0.3, &stopped), 3);
	assert_true(stopped);
	assert_true(stg__now() - t0 < 5);
	ut_content_is(f->dir, "flag", "TERM\n");
	assert_true(f->r.co.slot_wait_max == STG_SLOT_WAIT_STOPPING);
	assert_non_null(strstr(f->log.text, ": passed to the command; collecting results"));
	/* the background collect after the grace period */
	wait_collector(f);
	ut_content_is(f->dest, "result", "42\n");
}

/* SIGUSR1 reaches a command that catches it, not one that would die of
 * it; either way a collect starts now. */
static void test_early_warning(void **state)
{
	fx *f = *state;
	f->r.n_collects = 1;
	char script[4300];
	snprintf(script, sizeof script,
	         "trap 'echo USR1 > \"%s\"; exit 4' USR1; kill -USR1 $PPID; "
	         "while :; do sleep 0.05; done",
	         f->flag);
	bool stopped;
	assert_int_equal(supervise(f, script, 1, &stopped), 4);
	assert_false(stopped);
	ut_content_is(f->dir, "flag", "USR1\n");
	assert_non_null(strstr(f->log.text, "(early warning): collecting results now; passed to "
	                                    "the command"));
	wait_collector(f);
	ut_content_is(f->dest, "result", "42\n");
	/* sh's default for SIGUSR1 is to die: not passed */
	ut_write(f->src, "result", "43\n", 3);
	assert_int_equal(supervise(f, "kill -USR1 $PPID; sleep 0.5; exit 6", 1, &stopped), 6);
	assert_non_null(strstr(f->log.text, "(not passed to the command, which does not handle "
	                                    "it)"));
	wait_collector(f);
	ut_content_is(f->dest, "result", "43\n");
}

static void test_periodic(void **state)
{
	fx *f = *state;
	f->r.n_collects = 1;
	f->r.every = 1;
	bool stopped;
	/* every second: a collect while the command runs */
	assert_int_equal(supervise(f, "sleep 1.6", 1, &stopped), 0);
	wait_collector(f);
	ut_content_is(f->dest, "result", "42\n");
}

static void test_collect_all(void **state)
{
	fx *f = *state;
	char *missing = ut_join(f->dir, "missing");
	char *dest2 = ut_join(f->dir, "shared2");
	f->pair[1].src = missing;
	f->pair[1].dest = dest2;
	f->r.n_collects = 2;
	ut_fill_file(f->src, "big", 2 << 20, 3);
	stg_err err = stg__run_collect_all(&f->r);
	assert_int_not_equal(err, STG_OK);
	assert_int_equal(f->pair[0].status, STG_OK);
	assert_int_equal(f->pair[1].status, err);
	ut_same_in(f->src, f->dest, "big");
	assert_int_equal(f->r.measured->bytes, (2 << 20) + 3);
	assert_true(f->r.measured->started > 0);
	/* the first failure is returned, in order */
	f->pair[0].src = missing;
	f->pair[1].src = f->src;
	assert_int_equal(stg__run_collect_all(&f->r), err);
	assert_int_equal(f->pair[1].status, STG_OK);
	ut_same_in(f->src, dest2, "big");
	/* a collector that runs is stopped, and its figures reach the budget */
	f->r.collector = fork();
	if (f->r.collector == 0) {
		pthread_sigmask(SIG_SETMASK, &f->old, NULL);
		pause();
		_exit(0);
	}
	f->r.measured->bytes = 4 << 20;
	f->r.measured->secs = 2;
	f->r.measured->started = 100;
	stg__run_stop_collector(&f->r);
	assert_int_equal(f->r.collector, 0);
	assert_int_equal(f->r.budget.bytes, 4 << 20);
	assert_true(f->r.budget.since == 100);
	assert_int_equal(f->r.measured->bytes, 0);
	stg__run_stop_collector(&f->r); /* none: nothing */
	free(missing);
	free(dest2);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_status), T(test_stop), T(test_early_warning), T(test_periodic), T(test_collect_all),
};

UT_MAIN(tests)
