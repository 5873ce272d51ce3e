/* test_run.c - `stager run` as the library does it (run.c), outside
 * Slurm, with a real command (sh -c): a pack staged and a results
 * directory made for it, both exported (STAGER_DATA with its trailing
 * '/', STAGER_OUT, STAGER_JOB_DIR), the command's exit status returned,
 * its results collected to DEST, and afterwards the job directory, the
 * link and the pins gone and the signal mask as it was; a stage that
 * fails keeps the command from running; a collect that fails is said,
 * and what did not reach DEST is kept on the node. */
#include "unit.h"
#include "cache.h"

typedef struct fx {
	UT_FX;
	stg_config *cfg;
	char *flag, *old_home;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "data");
	mkdir(f->src, 0755);
	ut_write(f->src, "in.txt", "hello\n", 6);
	f->pack = ut_join(f->dir, "data.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL);
	f->dest = ut_join(f->dir, "shared/out");
	f->cfg = ut_config(f->ctx, f->dir, NULL);
	assert_int_equal(stg_cache_open(f->ctx, f->cfg, &f->c), STG_OK);
	f->flag = ut_join(f->dir, "ran");
	f->old_home = ut_env_save("HOME");
	setenv("HOME", f->dir, 1); /* notes of kept results go there */
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	stg_config_free(f->cfg);
	ut_env_restore("HOME", f->old_home);
	free(f->flag);
	unsetenv("STAGER_DATA");
	unsetenv("STAGER_OUT");
	unsetenv("STAGER_JOB_DIR");
	return ut_teardown(state);
}

static stg_err run(fx *f, const char *stage_src, const char *collect_dest, const char *script,
                   stg_run_result *res)
{
	stg_run_pair st = {stage_src, "data"}, co = {"out", collect_dest};
	char *argv[] = {"sh", "-c", (char *)script, NULL};
	stg_run_opts o;
	stg_run_opts_init(&o);
	o.stages = &st;
	o.n_stages = 1;
	o.collects = &co;
	o.n_collects = 1;
	o.argv = argv;
	o.every = 0;
	memset(res, 0, sizeof *res);
	return stg_run(f->ctx, f->c, f->cfg, &o, res);
}

static void test_run(void **state)
{
	fx *f = *state;
	char script[8192];
	snprintf(script, sizeof script,
	         "cat \"${STAGER_DATA}in.txt\" > \"$STAGER_OUT/copy\" && "
	         "echo \"$STAGER_DATA|$STAGER_OUT|$STAGER_JOB_DIR\" > '%s' && exit 7",
	         f->flag);
	sigset_t before, after;
	pthread_sigmask(SIG_BLOCK, NULL, &before);
	stg_run_result res;
	stg_err err = run(f, f->pack, f->dest, script, &res);
	if (err)
		fail_msg("%s", stg_errmsg(f->ctx));
	assert_int_equal(res.status, 7);
	assert_int_equal(res.stopped, 0);
	assert_int_equal(res.collect_err, STG_OK);
	ut_content_is(f->dest, "copy", "hello\n");
	/* what the command was told */
	char *said = ut_read_text(f->flag);
	char *jobdir = strdup(strrchr(said, '|') + 1);
	jobdir[strcspn(jobdir, "\n")] = '\0';
	char want[8192];
	snprintf(want, sizeof want, "%s/data/|%s/out|%s\n", jobdir, jobdir, jobdir);
	assert_string_equal(said, want);
	char *scratch = ut_join(f->dir, "scratch");
	assert_memory_equal(jobdir, scratch, strlen(scratch)); /* under the scratch root */
	/* cleaned up after: the job directory (the link, the collected
	 * source) and the pins */
	assert_int_equal(access(jobdir, F_OK), -1);
	char **names;
	size_t n;
	if (stg__dir_names(f->c->rootfd, "pins", true, &names, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			char rel[512], **owners;
			size_t m;
			snprintf(rel, sizeof rel, "pins/%s", names[i]);
			if (stg__dir_names(f->c->rootfd, rel, true, &owners, &m) == 0) {
				assert_int_equal(m, 0);
				stg__names_free(owners, m);
			}
		}
		stg__names_free(names, n);
	}
	/* the signal mask as it was */
	pthread_sigmask(SIG_BLOCK, NULL, &after);
	for (int s = 1; s < 32; s++)
		assert_int_equal(sigismember(&before, s), sigismember(&after, s));
	free(said);
	free(jobdir);
	free(scratch);
}

/* A stage that fails: the command does not run. */
static void test_stage_fails(void **state)
{
	fx *f = *state;
	char *missing = ut_join(f->dir, "missing.tar.zst");
	char script[4200];
	snprintf(script, sizeof script, "touch '%s'", f->flag);
	stg_run_result res;
	stg_err err = run(f, missing, f->dest, script, &res);
	assert_int_equal(err, STG_ENOENT);
	assert_int_equal(access(f->flag, F_OK), -1);
	assert_int_equal(access(f->dest, F_OK), -1);
	free(missing);
}

/* DEST cannot be written: the command ran, the collect failed and said
 * so, and the results are kept on the node. */
static void test_collect_fails(void **state)
{
	fx *f = *state;
	ut_write(f->dir, "afile", "x", 1);
	char *bad = ut_join(f->dir, "afile/out");
	stg_run_result res;
	stg_err err = run(f, f->pack, bad, "echo result > \"$STAGER_OUT/r\"", &res);
	assert_int_equal(err, STG_OK);
	assert_int_equal(res.status, 0);
	assert_int_not_equal(res.collect_err, STG_OK);
	char **names;
	size_t n;
	assert_int_equal(stg__dir_names(f->c->rootfd, "kept", true, &names, &n), 0);
	/* the results, and beside them the DEST they were meant for */
	assert_int_equal(n, 2);
	const char *kept = strstr(names[0], ".to") ? names[1] : names[0];
	char rel[512];
	snprintf(rel, sizeof rel, "kept/%s/r", kept);
	assert_true(ut_exists_at(f->c->rootfd, rel));
	snprintf(rel, sizeof rel, "kept/%s.to", kept);
	assert_true(ut_exists_at(f->c->rootfd, rel));
	assert_non_null(strstr(f->log.text, kept));
	stg__names_free(names, n);
	free(bad);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_run),
        T(test_stage_fails),
        T(test_collect_fails),
};

UT_MAIN(tests)
