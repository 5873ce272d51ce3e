/* test_run_env.c - what a command run by `stager run` learns of its job
 * (run_env.c): paths made absolute against the job directory (absolute
 * ones kept), and the STAGER_* variables numbered _2, _3 ... after the
 * first of each kind, inherited by the command it starts. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "run_state.h"
#include "run_env.h"

static void test_in_jobdir(void **state)
{
	(void)state;
	run_state r;
	memset(&r, 0, sizeof r);
	r.jobdir = "/scratch/u/job-42";
	char *p = stg__run_in_jobdir(&r, "results");
	assert_string_equal(p, "/scratch/u/job-42/results");
	free(p);
	p = stg__run_in_jobdir(&r, "a/b/c");
	assert_string_equal(p, "/scratch/u/job-42/a/b/c");
	free(p);
	p = stg__run_in_jobdir(&r, "/abs/out");
	assert_string_equal(p, "/abs/out");
	free(p);
}

static void test_export(void **state)
{
	(void)state;
	char *old[4] = {ut_env_save("STAGER_DATA"), ut_env_save("STAGER_DATA_2"),
	                ut_env_save("STAGER_DATA_3"), ut_env_save("STAGER_OUT")};
	unsetenv("STAGER_DATA");
	unsetenv("STAGER_DATA_2");
	unsetenv("STAGER_DATA_3");
	unsetenv("STAGER_OUT");
	stg__run_export("STAGER_DATA", 0, "/d/first");
	stg__run_export("STAGER_DATA", 1, "/d/second");
	stg__run_export("STAGER_DATA", 2, "/d/third");
	stg__run_export("STAGER_OUT", 0, "/o/only");
	assert_string_equal(getenv("STAGER_DATA"), "/d/first");
	assert_string_equal(getenv("STAGER_DATA_2"), "/d/second");
	assert_string_equal(getenv("STAGER_DATA_3"), "/d/third");
	assert_string_equal(getenv("STAGER_OUT"), "/o/only");
	assert_null(getenv("STAGER_OUT_2"));
	assert_null(getenv("STAGER_DATA_1"));
	/* set again: replaced */
	stg__run_export("STAGER_DATA", 0, "/d/new");
	assert_string_equal(getenv("STAGER_DATA"), "/d/new");
	/* what a command started now sees */
	FILE *fp = popen("echo \"$STAGER_DATA|$STAGER_DATA_2|$STAGER_DATA_3|$STAGER_OUT\"", "r");
	assert_non_null(fp);
	char line[256] = "";
	assert_non_null(fgets(line, sizeof line, fp));
	pclose(fp);
	assert_string_equal(line, "/d/new|/d/second|/d/third|/o/only\n");
	ut_env_restore("STAGER_DATA", old[0]);
	ut_env_restore("STAGER_DATA_2", old[1]);
	ut_env_restore("STAGER_DATA_3", old[2]);
	ut_env_restore("STAGER_OUT", old[3]);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_jobdir),
        cmocka_unit_test(test_export),
};

UT_MAIN(tests)
