/* test_doctor_hooks.c - the Slurm hooks' check (doctor_hooks.c) and the
 * runner under it (hook_run.c): a program run as slurmd runs a hook (only
 * the environment given, cwd /, umask 022, no inherited descriptor or
 * ignored signal, as a user), killed with its process group after its time
 * bound, its output kept within bounds, a failure to start told apart; and
 * stg_doctor_hooks' round trip for a fake job, what it reports, and what
 * it removes (never through a link, never under a base others can write).
 * The round trips and runs as another user need root; as anyone else they
 * are skipped, and the check says it was. */
#include "unit.h"

#include "hook_run.h"

#include <errno.h>

static char *env_a[] = {"A=1", "SLURM_JOB_ID=4294967001", NULL};

static bool is_root(void)
{
	return geteuid() == 0;
}

/* Whether the process pid is gone (or a zombie) within 5 s. */
static bool gone(pid_t pid)
{
	for (int i = 0; i < 100; i++) {
		char p[64], st[512] = "";
		snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
		FILE *f = fopen(p, "r");
		if (!f)
			return true;
		size_t n = fread(st, 1, sizeof st - 1, f);
		fclose(f);
		st[n] = '\0';
		const char *e = strrchr(st, ')');
		if (e && e[1] == ' ' && e[2] == 'Z')
			return true;
		usleep(50000);
	}
	return false;
}

static bool has_line(const stg_hook_stream *s, const char *line)
{
	for (size_t i = 0; i < s->n_lines; i++)
		if (!strcmp(s->lines[i], line))
			return true;
	return false;
}

/* The line of s that starts with prefix ("" if none). */
static const char *line_of(const stg_hook_stream *s, const char *prefix)
{
	for (size_t i = 0; i < s->n_lines; i++)
		if (!strncmp(s->lines[i], prefix, strlen(prefix)))
			return s->lines[i];
	return "";
}

static void test_run_world(void **state)
{
	ut_fx *f = *state;
	ut_script(f->dir, "hook",
	          "#!/bin/sh\n"
	          "/usr/bin/env\n"
	          "echo \"cwd=$(/bin/pwd)\" \"umask=$(umask)\"\n"
	          "[ -e /proc/$$/fd/57 ] && echo fd57\n"
	          /* grep's own state: what the hook gave its children (the
	           * shell's own SigBlk is all ones while it waits) */
	          "/bin/grep -E '^Sig(Ign|Blk)' /proc/self/status\n"
	          "echo oops >&2\n"
	          "exit 3\n");
	char *path = ut_join(f->dir, "hook");
	/* what this process has that a hook must not inherit */
	int fd = open("/dev/null", O_RDONLY);
	assert_int_equal(dup2(fd, 57), 57);
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	mode_t um = umask(077);
	stg_hook_run r;
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, NULL, 10, &r), STG_OK);
	umask(um);
	signal(SIGPIPE, old);
	close(57);
	close(fd);
	assert_int_equal(r.exit_status, 3);
	assert_int_equal(r.exec_errno, 0);
	assert_int_equal(r.timed_out, 0);
	assert_true(has_line(&r.out, "A=1"));
	assert_true(has_line(&r.out, "SLURM_JOB_ID=4294967001"));
	assert_true(has_line(&r.out, "cwd=/ umask=0022"));
	/* (the lines themselves, so that a failure shows what the hook had) */
	assert_string_equal(line_of(&r.out, "SigIgn:"), "SigIgn:\t0000000000000000");
	assert_string_equal(line_of(&r.out, "SigBlk:"), "SigBlk:\t0000000000000000");
	for (size_t i = 0; i < r.out.n_lines; i++) {
		assert_true(strncmp(r.out.lines[i], "PATH=", 5));
		assert_true(strncmp(r.out.lines[i], "HOME=", 5));
		assert_string_not_equal(r.out.lines[i], "fd57");
	}
	assert_int_equal(r.err.n_lines, 1);
	assert_string_equal(r.err.lines[0], "oops");
	stg__hook_run_free(&r);
	free(path);
}

static void test_run_timeout(void **state)
{
	ut_fx *f = *state;
	ut_script(f->dir, "hang", "#!/bin/sh\n/bin/sleep 100 &\necho $!\nexec /bin/sleep 100\n");
	char *path = ut_join(f->dir, "hang");
	stg_hook_run r;
	double t0 = stg__now();
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, NULL, 1, &r), STG_OK);
	double t = stg__now() - t0;
	assert_true(t >= 1);
	ut_assert_time_below(t, 5);
	assert_int_equal(r.timed_out, 1);
	assert_int_equal(r.sig, SIGKILL);
	assert_int_equal(r.exit_status, -1);
	/* what it started went with it (its process group) */
	assert_int_equal(r.out.n_lines, 1);
	assert_true(gone((pid_t)atoi(r.out.lines[0])));
	stg__hook_run_free(&r);
	free(path);
}

static void test_run_cannot_start(void **state)
{
	ut_fx *f = *state;
	char *missing = ut_join(f->dir, "missing");
	stg_hook_run r;
	assert_int_equal(stg__hook_run(f->ctx, missing, env_a, NULL, 10, &r), STG_OK);
	assert_int_equal(r.exec_errno, ENOENT);
	assert_int_equal(r.exit_status, -1);
	stg__hook_run_free(&r);
	ut_write(f->dir, "plain", "#!/bin/sh\nexit 0\n", 17);
	char *plain = ut_join(f->dir, "plain");
	chmod(plain, 0644);
	assert_int_equal(stg__hook_run(f->ctx, plain, env_a, NULL, 10, &r), STG_OK);
	assert_int_equal(r.exec_errno, EACCES);
	stg__hook_run_free(&r);
	/* the hook's own 127 is its exit status, not a failure to start */
	ut_script(f->dir, "nf", "#!/bin/sh\nno-such-command-here\n");
	char *nf = ut_join(f->dir, "nf");
	assert_int_equal(stg__hook_run(f->ctx, nf, env_a, NULL, 10, &r), STG_OK);
	assert_int_equal(r.exec_errno, 0);
	assert_int_equal(r.exit_status, 127);
	assert_int_equal(r.err.n_lines, 1);
	stg__hook_run_free(&r);
	free(missing);
	free(plain);
	free(nf);
}

static void test_run_bounds(void **state)
{
	ut_fx *f = *state;
	/* 1 MiB on stdout: kept up to the bound, read to the end (no block) */
	ut_script(f->dir, "loud",
	          "#!/bin/sh\n/usr/bin/head -c 1048576 /dev/zero | /usr/bin/tr '\\0' x\n"
	          "echo done >&2\n");
	char *path = ut_join(f->dir, "loud");
	stg_hook_run r;
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, NULL, 10, &r), STG_OK);
	assert_int_equal(r.exit_status, 0);
	assert_int_equal(r.out.len, STG_HOOK_OUT_MAX);
	assert_int_equal(r.err.n_lines, 1);
	stg__hook_run_free(&r);
	free(path);
	/* a child that keeps stdout open does not hold the caller */
	ut_script(f->dir, "bg", "#!/bin/sh\n/bin/sleep 30 &\necho $!\nexit 0\n");
	path = ut_join(f->dir, "bg");
	double t0 = stg__now();
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, NULL, 10, &r), STG_OK);
	ut_assert_time_below(stg__now() - t0, 5);
	assert_int_equal(r.exit_status, 0);
	assert_int_equal(r.out.n_lines, 1);
	kill((pid_t)atoi(r.out.lines[0]), SIGKILL);
	stg__hook_run_free(&r);
	/* a cancelled context: the hook is killed, STG_EINTR */
	stg_cancel(f->ctx);
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, NULL, 10, &r), STG_EINTR);
	stg__hook_run_free(&r);
	free(path);
}

static void test_run_as_user(void **state)
{
	ut_fx *f = *state;
	if (!is_root())
		skip();
	chmod(f->dir, 0755);
	ut_script(f->dir, "who", "#!/bin/sh\n/usr/bin/id -u\n/usr/bin/id -g\n/usr/bin/id -G\n");
	char *path = ut_join(f->dir, "who");
	gid_t groups[] = {65534, 4242};
	stg_hook_cred cred = {.uid = 65534, .gid = 65534, .groups = groups, .n_groups = 2};
	stg_hook_run r;
	assert_int_equal(stg__hook_run(f->ctx, path, env_a, &cred, 10, &r), STG_OK);
	assert_int_equal(r.exit_status, 0);
	assert_int_equal(r.out.n_lines, 3);
	assert_string_equal(r.out.lines[0], "65534");
	assert_string_equal(r.out.lines[1], "65534");
	assert_string_equal(r.out.lines[2], "65534 4242");
	stg__hook_run_free(&r);
	free(path);
}

/* ---- stg_doctor_hooks ----------------------------------------------- */

#define MAX_CHECKS 32

typedef struct seen {
	size_t n;
	stg_check_level level[MAX_CHECKS];
	char name[MAX_CHECKS][32], found[MAX_CHECKS][1024];
	char exports[MAX_CHECKS][256];
	int left[MAX_CHECKS];
} seen;

static void record(void *arg, const stg_check *c, const stg_hook_result *h)
{
	seen *s = arg;
	assert_true(s->n < MAX_CHECKS);
	s->level[s->n] = c->level;
	snprintf(s->name[s->n], sizeof s->name[0], "%s", c->name);
	snprintf(s->found[s->n], sizeof s->found[0], "%s", c->found);
	s->exports[s->n][0] = '\0';
	for (size_t i = 0; h && i < h->n_exports; i++)
		snprintf(s->exports[s->n], sizeof s->exports[0], "%s", h->exports[i]);
	s->left[s->n] = h ? h->job_dir_left : -1;
	s->n++;
}

/* The check named name (its index), or -1. */
static int find(const seen *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return (int)i;
	return -1;
}

/* In dir: hooks/{prolog,task-prolog,epilog} (the epilog's body given),
 * the job's base jobs/ (mode base_mode). */
static char *hooks(const char *dir, const char *epilog, mode_t base_mode)
{
	char *h = ut_join(dir, "hooks"), *jobs = ut_join(dir, "jobs"), text[2048];
	chmod(dir, 0755);
	mkdir(h, 0755);
	mkdir(jobs, 0755);
	chmod(jobs, base_mode);
	snprintf(text, sizeof text,
	         "#!/bin/sh\n/usr/bin/install -d -m 0700 -o \"$SLURM_JOB_UID\" -g "
	         "\"$SLURM_JOB_GID\" %s/$SLURM_JOB_ID\n"
	         "/bin/ln -s %s/outside %s/$SLURM_JOB_ID/link\n",
	         jobs, dir, jobs);
	ut_script(h, "prolog", text);
	snprintf(text, sizeof text, "#!/bin/sh\necho \"export SLURM_TMPDIR=%s/$SLURM_JOB_ID\"\n",
	         jobs);
	ut_script(h, "task-prolog", text);
	ut_script(h, "epilog", epilog);
	free(jobs);
	return h;
}

static void test_hooks_round_trip(void **state)
{
	ut_fx *f = *state;
	if (!is_root())
		skip();
	char *h = hooks(f->dir,
	                "#!/bin/sh\nd=${0%/hooks/epilog}/jobs/$SLURM_JOB_ID\n"
	                "/usr/bin/setpriv --reuid=$SLURM_JOB_UID --regid=$SLURM_JOB_GID "
	                "--clear-groups /usr/bin/find $d -mindepth 1 -delete && /bin/rmdir $d\n",
	                0755);
	stg_doctor_hooks_opts o;
	stg_doctor_hooks_opts_init(&o);
	o.dir = h;
	o.timeout = 10;
	seen *s = ut_malloc(sizeof *s);
	s->n = 0;
	assert_int_equal(stg_doctor_hooks(f->ctx, &o, record, s), STG_OK);
	/* no Slurm here: this host is no Slurm node, said before the runs */
	static const char *const order[] = {"slurm hooks",     "prolog",        "task-prolog",
	                                    "epilog",          "node features", "prolog run",
	                                    "task-prolog run", "epilog run",    "job directory"};
	assert_int_equal(s->n, 9);
	for (size_t i = 0; i < 9; i++) {
		if (s->level[i] != STG_CHECK_OK)
			fail_msg("%s: %s", s->name[i], s->found[i]);
		assert_string_equal(s->name[i], order[i]);
	}
	assert_non_null(strstr(s->found[4], "skipped: this host is not a Slurm node"));
	assert_non_null(strstr(s->exports[6], "SLURM_TMPDIR="));
	assert_int_equal(s->left[8], 0);
	free(s);
	free(h);
}

static void test_hooks_left_removed_safely(void **state)
{
	ut_fx *f = *state;
	if (!is_root())
		skip();
	/* an epilog that removes nothing: doctor removes the job's directory,
	 * and not what a link in it points at */
	char *h = hooks(f->dir, "#!/bin/sh\nexit 0\n", 0755);
	ut_mkdir(f->dir, "outside");
	char *out = ut_join(f->dir, "outside");
	ut_write(out, "keep", "x", 1);
	stg_doctor_hooks_opts o;
	stg_doctor_hooks_opts_init(&o);
	o.dir = h;
	seen *s = ut_malloc(sizeof *s);
	s->n = 0;
	assert_int_equal(stg_doctor_hooks(f->ctx, &o, record, s), STG_OK);
	int j = find(s, "job directory");
	assert_true(j >= 0);
	assert_int_equal(s->level[j], STG_CHECK_FAIL);
	assert_int_equal(s->left[j], 1);
	assert_non_null(strstr(s->found[j], "doctor removed it"));
	ut_content_is(out, "keep", "x");
	char *jobs = ut_join(f->dir, "jobs");
	int jfd = open(jobs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(jfd >= 0);
	assert_true(stg__dir_is_empty(jfd));
	close(jfd);
	/* under a base others can write, nothing is removed */
	chmod(jobs, 01777);
	s->n = 0;
	assert_int_equal(stg_doctor_hooks(f->ctx, &o, record, s), STG_OK);
	j = find(s, "job directory");
	assert_true(j >= 0);
	assert_non_null(strstr(s->found[j], "doctor could not remove it"));
	assert_non_null(strstr(s->found[j], "is not root's alone"));
	ut_content_is(out, "keep", "x");
	free(jobs);
	free(out);
	free(s);
	free(h);
}

static void test_hooks_user_and_skip(void **state)
{
	ut_fx *f = *state;
	stg_doctor_hooks_opts o;
	stg_doctor_hooks_opts_init(&o);
	o.dir = f->dir;
	seen *s = ut_malloc(sizeof *s);
	s->n = 0;
	if (is_root()) {
		o.user = "no-such-user-here";
		assert_int_equal(stg_doctor_hooks(f->ctx, &o, record, s), STG_EUSAGE);
		assert_non_null(strstr(stg_errmsg(f->ctx), "no-such-user-here"));
		assert_int_equal(s->n, 0);
		/* and as anyone else: one check, skipped */
		pid_t pid = fork();
		if (pid == 0) {
			if (setgid(65534) || setuid(65534))
				_exit(2);
			stg_err e = stg_doctor_hooks(f->ctx, &o, record, s);
			_exit(e == STG_OK && s->n == 1 && s->level[0] == STG_CHECK_OK &&
			                      strstr(s->found[0], "skipped: run as root")
			              ? 0
			              : 1);
		}
		int st;
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st));
		assert_int_equal(WEXITSTATUS(st), 0);
	} else {
		assert_int_equal(stg_doctor_hooks(f->ctx, &o, record, s), STG_OK);
		assert_int_equal(s->n, 1);
		assert_non_null(strstr(s->found[0], "skipped: run as root"));
	}
	free(s);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, ut_setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_run_world),
        T(test_run_timeout),
        T(test_run_cannot_start),
        T(test_run_bounds),
        T(test_run_as_user),
        T(test_hooks_round_trip),
        T(test_hooks_left_removed_safely),
        T(test_hooks_user_and_skip),
};

UT_MAIN(tests)
