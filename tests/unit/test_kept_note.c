/* test_kept_note.c - notes of kept results in the user's home
 * (kept_note.c), with HOME a temporary directory: a note written and read
 * back (node, job from the name, path, DEST with a newline escaped,
 * bytes, since), replaced, dropped; names that could leave the directory
 * never written; what is not a note skipped (another magic, too large, a
 * link, a FIFO - without hanging -, a temporary, one lacking a field); a
 * home where no note can be written warned about. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "kept_note.h"
#include "results.h"

typedef struct fx {
	UT_FX;
	char *home, *old_home, *notes;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->home = ut_join(f->dir, "home");
	ut_mkdir(f->dir, "home");
	f->old_home = ut_env_save("HOME");
	setenv("HOME", f->home, 1);
	setenv("SLURMD_NODENAME", "node3", 1);
	f->notes = ut_join(f->home, ".local/state/stager/kept");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_env_restore("HOME", f->old_home);
	free(f->home);
	free(f->notes);
	return ut_teardown(state);
}

static void test_round_trip(void **state)
{
	fx *f = *state;
	stg_kept_note *v;
	size_t n;
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK); /* no directory yet */
	assert_int_equal(n, 0);
	stg_kept_notes_free(v, n);
	int64_t t0 = (int64_t)time(NULL);
	stg__kept_note_write(f->ctx, "job42-results", "/scratch/u/kept/job42-results",
	                     "/shared/out\nsecond line", 123456789);
	assert_int_equal(f->log.warnings, 0);
	char *file = ut_join(f->notes, "node3.job42-results");
	struct stat st;
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].node, "node3");
	assert_string_equal(v[0].job, "42");
	assert_string_equal(v[0].path, "/scratch/u/kept/job42-results");
	assert_string_equal(v[0].dest, "/shared/out\nsecond line");
	assert_int_equal(v[0].bytes, 123456789);
	assert_true(v[0].since >= t0 && v[0].since <= t0 + 5);
	stg_kept_notes_free(v, n);
	/* written again: replaced, one note; no temporary left */
	stg__kept_note_write(f->ctx, "job42-results", "/p2", NULL, 1);
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].path, "/p2");
	assert_string_equal(v[0].dest, "");
	stg_kept_notes_free(v, n);
	char **names;
	size_t m;
	int dfd = open(f->notes, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__dir_names(dfd, ".", true, &names, &m), 0);
	assert_int_equal(m, 1);
	stg__names_free(names, m);
	close(dfd);
	/* a name that is not a job's: no job */
	stg__kept_note_write(f->ctx, "results", "/p3", "/d3", 3);
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].path, "/p3"))
			assert_string_equal(v[i].job, "");
	stg_kept_notes_free(v, n);
	/* dropped */
	stg__kept_note_drop("job42-results");
	stg__kept_note_drop("results");
	assert_int_equal(access(file, F_OK), -1);
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	stg_kept_notes_free(v, n);
	free(file);
}

/* Names that would leave the directory, or hide, are never written. */
static void test_names(void **state)
{
	fx *f = *state;
	stg__kept_note_write(f->ctx, "../../escape", "/p", "/d", 1);
	stg__kept_note_write(f->ctx, ".hidden", "/p", "/d", 1);
	stg__kept_note_write(f->ctx, "", "/p", "/d", 1);
	setenv("SLURMD_NODENAME", "../up", 1);
	stg__kept_note_write(f->ctx, "job1", "/p", "/d", 1);
	setenv("SLURMD_NODENAME", ".n", 1);
	stg__kept_note_write(f->ctx, "job1", "/p", "/d", 1);
	setenv("SLURMD_NODENAME", "node3", 1);
	char *escape = ut_join(f->home, ".local/state/escape");
	assert_int_equal(access(escape, F_OK), -1);
	free(escape);
	stg_kept_note *v;
	size_t n;
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	stg_kept_notes_free(v, n);
}

static void test_not_notes(void **state)
{
	fx *f = *state;
	stg__kept_note_write(f->ctx, "job7-good", "/good", "/d", 7);
	/* another magic; a field missing; too large; a link to a good
	 * note; a FIFO; a temporary */
	const char *other = "stager-kept 2\nnode n\njob 1\npath /p\ndest /d\n";
	ut_write(f->notes, "node3.other", other, strlen(other));
	const char *lacking = "stager-kept 1\nnode n\njob 1\npath /p\n";
	ut_write(f->notes, "node3.lacking", lacking, strlen(lacking));
	size_t big_len = 70 * 1024;
	char *big = ut_malloc(big_len);
	memset(big, 'x', big_len);
	memcpy(big, "stager-kept 1\nnode n\njob 1\npath /p\ndest /d\nx ", 46);
	ut_write(f->notes, "node3.big", big, big_len);
	free(big);
	ut_symlink(f->notes, "node3.link", "node3.job7-good");
	char *fifo = ut_join(f->notes, "node3.fifo");
	assert_int_equal(mkfifo(fifo, 0600), 0);
	const char *tmp = "stager-kept 1\nnode n\njob 1\npath /tmp\ndest /d\n";
	ut_write(f->notes, "node3.x.tmp.123", tmp, strlen(tmp));
	stg_kept_note *v;
	size_t n;
	double t0 = stg__now();
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_true(stg__now() - t0 < 2);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].path, "/good");
	stg_kept_notes_free(v, n);
	free(fifo);
}

/* A home where no note can be written: warned, nothing else. */
static void test_unwritable(void **state)
{
	fx *f = *state;
	ut_write(f->dir, "plainfile", "x", 1);
	char *file = ut_join(f->dir, "plainfile");
	setenv("HOME", file, 1);
	stg__kept_note_write(f->ctx, "job9-r", "/p", "/d", 1);
	assert_int_equal(f->log.warnings, 1);
	char want[4300];
	snprintf(want, sizeof want,
	         "cannot leave a note of kept results in '%s/.local/state/stager/kept'", file);
	assert_non_null(strstr(f->log.text, want));
	stg_kept_note *v;
	size_t n;
	assert_int_equal(stg_kept_notes(f->ctx, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	stg_kept_notes_free(v, n);
	free(file);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_round_trip),
        T(test_names),
        T(test_not_notes),
        T(test_unwritable),
};

UT_MAIN(tests)
