/* test_collect_every.c - collecting again and again while a job runs
 * (collect_every.c): one round told through the log (sent at INFO,
 * unchanged at DEBUG, a failure at ERROR) and added up; every 0: one
 * round; the loop woken at once by a "now" line of the control descriptor
 * and by SIGUSR1, stopped by the descriptor's end and by SIGTERM, with one
 * last collect that sends what changed since; a source that will not get
 * better ends the loop at once; in a Slurm job, SRC noted as results yet
 * to collect. */
#include "unit.h"
#include "cache.h"
#include "collect_every.h"
#include "results.h"

typedef ut_fx fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "out");
	f->dest = ut_join(f->dir, "shared");
	mkdir(f->src, 0755);
	ut_write(f->src, "a", "first\n", 6);
	ut_fill_file(f->src, "big", 100000, 1);
	ut_fx_cache(f, NULL);
	*state = f;
	return 0;
}

static stg_log_level last_level;

/* ut_log_fn, and the level of the last message. */
static void level_log(void *arg, stg_log_level level, const char *msg)
{
	last_level = level;
	ut_log_fn(arg, level, msg);
}

static void test_round(void **state)
{
	fx *f = *state;
	stg_set_log(f->ctx, level_log, &f->log);
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	stg_collect_totals t;
	memset(&t, 0, sizeof t);
	assert_int_equal(stg__collect_round(f->ctx, f->c, f->src, f->dest, &o, &t), STG_OK);
	assert_int_equal(t.rounds, 1);
	assert_int_equal(t.sent_files, 2);
	assert_int_equal(t.sent_bytes, 100006);
	ut_same_in(f->src, f->dest, "big");
	char want[8400];
	snprintf(want, sizeof want, "collected '%s' to '%s': 2 sent (", f->src, f->dest);
	assert_non_null(strstr(f->log.text, want));
	assert_int_equal(last_level, STG_LOG_INFO);
	/* unchanged: said at DEBUG */
	assert_int_equal(stg__collect_round(f->ctx, f->c, f->src, f->dest, &o, &t), STG_OK);
	assert_int_equal(t.rounds, 2);
	assert_int_equal(t.sent_files, 2);
	assert_int_equal(t.unchanged, 2);
	snprintf(want, sizeof want, "'%s' unchanged since the last collect to '%s'", f->src,
	         f->dest);
	assert_non_null(strstr(f->log.text, want));
	assert_int_equal(last_level, STG_LOG_DEBUG);
	/* a change: added up */
	ut_write(f->src, "a", "second\n", 7);
	assert_int_equal(stg__collect_round(f->ctx, f->c, f->src, f->dest, &o, &t), STG_OK);
	assert_int_equal(t.sent_files, 3);
	assert_int_equal(t.sent_bytes, 100013);
	ut_content_is(f->dest, "a", "second\n");
	/* a failure: logged (the error's message), kept in t */
	char *missing = ut_join(f->dir, "missing");
	stg_err err = stg__collect_round(f->ctx, f->c, missing, f->dest, &o, &t);
	assert_int_not_equal(err, STG_OK);
	assert_int_equal(t.err, err);
	assert_int_equal(t.rounds, 4);
	assert_non_null(strstr(f->log.text, stg_errmsg(f->ctx)));
	assert_int_equal(last_level, STG_LOG_ERROR);
	free(missing);
}

/* every 0: one collect, and no signal watcher. */
static void test_once(void **state)
{
	fx *f = *state;
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	stg_collect_totals t;
	memset(&t, 0, sizeof t);
	assert_int_equal(stg_collect_every(f->ctx, f->c, f->src, f->dest, &o, 0, -1, &t), STG_OK);
	assert_int_equal(t.rounds, 1);
	ut_same_in(f->src, f->dest, "a");
}

typedef struct loop {
	fx *f;
	int control;
	stg_collect_totals t;
	stg_err err;
	double took;
	pthread_t th;
} loop;

static void *loop_run(void *arg)
{
	loop *l = arg;
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	double t0 = stg__now();
	l->err = stg_collect_every(l->f->ctx, l->f->c, l->f->src, l->f->dest, &o, 600, l->control,
	                           &l->t);
	l->took = stg__now() - t0;
	return NULL;
}

/* Wait (5 s at most) until dest/name holds want. */
static void wait_for(fx *f, const char *name, const char *want)
{
	char *p = ut_join(f->dest, name);
	for (int i = 0; i < 500; i++) {
		FILE *fp = fopen(p, "r");
		char buf[64] = "";
		if (fp) {
			size_t n = fread(buf, 1, sizeof buf - 1, fp);
			buf[n] = '\0';
			fclose(fp);
			if (!strcmp(buf, want))
				break;
		}
		usleep(10000);
	}
	free(p);
	ut_content_is(f->dest, name, want);
}

/* The lead's control descriptor: "now" collects at once (not in 600 s),
 * its end stops the loop after one last collect. */
static void test_control(void **state)
{
	fx *f = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	loop l = {.f = f, .control = p[0]};
	assert_int_equal(pthread_create(&l.th, NULL, loop_run, &l), 0);
	wait_for(f, "a", "first\n");
	ut_write(f->src, "a", "now!\n", 5);
	assert_int_equal(write(p[1], "now\n", 4), 4);
	wait_for(f, "a", "now!\n");
	ut_write(f->src, "a", "last\n", 5);
	close(p[1]);
	pthread_join(l.th, NULL);
	close(p[0]);
	assert_int_equal(l.err, STG_OK);
	assert_true(l.took < 10);
	assert_int_equal(l.t.rounds, 3);
	ut_content_is(f->dest, "a", "last\n");
	assert_non_null(strstr(f->log.text, "stopping: collecting one last time"));
}

/* Signals: SIGUSR1 collects now, SIGTERM stops (one last collect). The
 * signals are blocked in this thread too, as the tool does, so that the
 * watcher takes them. */
static void test_signals(void **state)
{
	fx *f = *state;
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	loop l = {.f = f, .control = -1};
	assert_int_equal(pthread_create(&l.th, NULL, loop_run, &l), 0);
	wait_for(f, "a", "first\n");
	ut_write(f->src, "a", "usr1\n", 5);
	kill(getpid(), SIGUSR1);
	wait_for(f, "a", "usr1\n");
	ut_write(f->src, "a", "term\n", 5);
	kill(getpid(), SIGTERM);
	pthread_join(l.th, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	assert_int_equal(l.err, STG_OK);
	assert_true(l.took < 10);
	assert_int_equal(l.t.rounds, 3);
	ut_content_is(f->dest, "a", "term\n");
	assert_false(stg__cancelled(f->ctx)); /* one stop: not cancelled */
}

/* A source that will not get better: the loop ends at once, told. */
static void test_gives_up(void **state)
{
	fx *f = *state;
	free(f->src);
	f->src = ut_join(f->dir, "missing");
	loop l = {.f = f, .control = -1};
	loop_run(&l);
	assert_int_equal(l.err, STG_ENOENT);
	assert_int_equal(l.t.rounds, 1);
	assert_true(l.took < 5);
	assert_null(strstr(f->log.text, "one last time"));
}

static int noted(void *arg, const char *src, const char *dest, bool pack)
{
	char **out = arg;
	assert_false(pack);
	out[0] = strdup(src);
	out[1] = strdup(dest);
	return 0;
}

/* In a Slurm job SRC is noted as results the job has yet to collect. */
static void test_in_job(void **state)
{
	fx *f = *state;
	setenv("SLURM_JOB_ID", "4242", 1);
	stg_collect_opts o;
	stg_collect_opts_init(&o);
	stg_collect_totals t;
	memset(&t, 0, sizeof t);
	char *got[2] = {NULL, NULL};
	assert_int_equal(stg__results_each(f->c, "job-4242", noted, got), -1);
	assert_int_equal(stg_collect_every(f->ctx, f->c, f->src, f->dest, &o, 0, -1, &t), STG_OK);
	assert_int_equal(stg__results_each(f->c, "job-4242", noted, got), 0);
	assert_string_equal(got[0], f->src);
	assert_string_equal(got[1], f->dest);
	free(got[0]);
	free(got[1]);
	unsetenv("SLURM_JOB_ID");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_round),   T(test_once),     T(test_control),
        T(test_signals), T(test_gives_up), T(test_in_job),
};

UT_MAIN(tests)
