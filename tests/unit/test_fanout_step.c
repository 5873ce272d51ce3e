/* test_fanout_step.c - srun steps and the "stager-node" lines their tasks
 * speak (fanout_step.c): argument vectors (grown, NULL-terminated); srun's
 * fixed arguments, -w and -x; the command each task runs; the job's node
 * count and this node's name from the environment; a step started for
 * real (a shell script as the task): its lines read with a time bound,
 * split, answered on its stdin, its exit status as a result (2-7 pass,
 * the rest is the transport's), default signal dispositions and no mask
 * whatever the lead has, a gone step an error and not a SIGPIPE; a
 * program that does not exist named; a line too long to tell refused. */
#include "unit.h"
#include "fanout.h"

typedef struct fx {
	UT_FX;
	char *bin, *old_path;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->bin = ut_join(f->dir, "bin");
	ut_mkdir(f->dir, "bin");
	f->old_path = ut_path_set(NULL, f->bin);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	free(f->bin);
	return ut_teardown(state);
}

/* The vector as one string, words separated by spaces. */
static void joined(const stg_argv *a, char *out, size_t len)
{
	out[0] = '\0';
	for (size_t i = 0; i < a->n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "", a->v[i]);
	assert_null(a->v[a->n]);
}

static void test_argv(void **state)
{
	(void)state;
	stg_argv a = {0};
	char word[16], out[2048];
	for (int i = 0; i < 100; i++) {
		snprintf(word, sizeof word, "w%d", i);
		stg__argv_add(&a, word);
	}
	assert_false(a.oom);
	assert_int_equal(a.n, 100);
	assert_string_equal(a.v[99], "w99");
	assert_null(a.v[100]);
	stg__argv_free(&a);
	assert_int_equal(a.n, 0);
	assert_null(a.v);

	stg__srun_args(&a, 4, NULL, NULL);
	joined(&a, out, sizeof out);
	assert_string_equal(out, "srun --overlap --quiet --kill-on-bad-exit=0 --ntasks-per-node=1 "
	                         "--cpus-per-task=1 -N 4 -n 4");
	stg__argv_free(&a);
	stg__srun_args(&a, 2, "n[1-2]", "lead");
	joined(&a, out, sizeof out);
	assert_non_null(strstr(out, "-N 2 -n 2 -w n[1-2] -x lead"));
	stg__argv_free(&a);

	stg_fanout_opts fo;
	stg_fanout_opts_init(&fo);
	assert_null(fo.program);
	const char *own[] = {"--every", "60", NULL};
	stg__node_command(&a, &fo, "node-collect", own);
	joined(&a, out, sizeof out);
	assert_string_equal(out, "stager node-collect --every 60");
	stg__argv_free(&a);
	const char *global[] = {"--scratch", "/s", NULL};
	fo.program = "/opt/stager/bin/stager";
	fo.args = global;
	stg__node_command(&a, &fo, "node-stage", NULL);
	joined(&a, out, sizeof out);
	assert_string_equal(out, "/opt/stager/bin/stager node-stage --scratch /s");
	stg__argv_free(&a);
}

static void test_job_env(void **state)
{
	(void)state;
	assert_int_equal(stg_job_nodes(), 0); /* not in a job */
	setenv("SLURM_NNODES", "5", 1);
	assert_int_equal(stg_job_nodes(), 0); /* still no job */
	setenv("SLURM_JOB_ID", "7", 1);
	assert_int_equal(stg_job_nodes(), 5);
	setenv("SLURM_JOB_NUM_NODES", "3", 1); /* preferred */
	assert_int_equal(stg_job_nodes(), 3);
	setenv("SLURM_JOB_NUM_NODES", "3x", 1);
	assert_int_equal(stg_job_nodes(), 0);
	setenv("SLURM_JOB_NUM_NODES", "100000", 1);
	assert_int_equal(stg_job_nodes(), STG_MAX_NODES);
	unsetenv("SLURM_JOB_NUM_NODES");
	unsetenv("SLURM_NNODES");
	unsetenv("SLURM_JOB_ID");

	char buf[72], host[256] = "";
	unsetenv("SLURMD_NODENAME");
	gethostname(host, sizeof host - 1);
	host[strcspn(host, ".")] = '\0';
	assert_string_equal(stg_node_name(buf, sizeof buf), host);
	setenv("SLURMD_NODENAME", "gpu017", 1);
	assert_ptr_equal(stg_node_name(buf, sizeof buf), buf);
	assert_string_equal(buf, "gpu017");
	unsetenv("SLURMD_NODENAME");
}

/* The task: says it is ready, echoes a line it is told, shows its signal
 * mask and dispositions, and exits with $1. */
static const char task[] = "#!/bin/sh\n"
                           "echo 'stager-node ready n1 with the rest'\n"
                           "read line\n"
                           "echo \"stager-node got n1 $line\"\n"
                           "grep -E '^Sig(Blk|Ign)' /proc/$$/status | tr '\\t' ' '\n"
                           "exit $1\n";

static void test_step(void **state)
{
	fx *f = *state;
	ut_script(f->bin, "task", task);
	/* the lead blocks and ignores signals: the task must not inherit it */
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	struct sigaction ign = {0}, was;
	ign.sa_handler = SIG_IGN;
	sigaction(SIGTERM, &ign, &was);

	stg_argv a = {0};
	stg__argv_add(&a, "task");
	stg__argv_add(&a, "3");
	int in = -1, out = -1;
	pid_t pid = 0;
	assert_int_equal(stg__spawn(f->ctx, &a, &in, &out, &pid), STG_OK);
	assert_true(pid > 0 && in >= 0 && out >= 0);
	char line[256], *word, *node, *rest;
	assert_int_equal(stg__read_line(f->ctx, out, line, sizeof line, 5), 1);
	assert_true(stg__node_line(line, &word, &node, &rest));
	assert_string_equal(word, "ready");
	assert_string_equal(node, "n1");
	assert_string_equal(rest, "with the rest");
	assert_true(stg__say(in, "go on\n"));
	assert_int_equal(stg__read_line(f->ctx, out, line, sizeof line, 5), 1);
	assert_true(stg__node_line(line, &word, &node, &rest));
	assert_string_equal(word, "got");
	assert_string_equal(rest, "go on");
	/* SIGUSR1 not blocked, SIGTERM not ignored (nor any other of the
	 * classic signals the lead might have set) */
	unsigned long long mask;
	assert_int_equal(stg__read_line(f->ctx, out, line, sizeof line, 5), 1);
	assert_int_equal(sscanf(line, "SigBlk: %llx", &mask), 1);
	assert_int_equal(mask & 0x7fffffffull, 0);
	assert_int_equal(stg__read_line(f->ctx, out, line, sizeof line, 5), 1);
	assert_int_equal(sscanf(line, "SigIgn: %llx", &mask), 1);
	assert_int_equal(mask & (1ull << (SIGTERM - 1) | 1ull << (SIGPIPE - 1)), 0);
	assert_int_equal(stg__read_line(f->ctx, out, line, sizeof line, 5), 0); /* the end */
	int st = stg__wait_status(f->ctx, pid);
	assert_int_equal(st, 3);
	assert_int_equal(stg__step_err(st, false), STG_ENOSPC);
	/* gone: telling it fails, with no SIGPIPE (SIGPIPE's default would
	 * end this test) */
	assert_false(stg__say(in, "anyone?\n"));
	close(in);
	close(out);

	sigaction(SIGTERM, &was, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	stg__argv_free(&a);
}

static void test_status(void **state)
{
	fx *f = *state;
	assert_int_equal(stg__step_err(0, false), STG_OK);
	assert_int_equal(stg__step_err(1, false), STG_EREMOTE); /* srun's own */
	for (int s = 2; s <= 7; s++)
		assert_int_equal(stg__step_err(s, false), (stg_err)s);
	assert_int_equal(stg__step_err(8, false), STG_EREMOTE);
	assert_int_equal(stg__step_err(143, false), STG_EREMOTE);
	assert_int_equal(stg__step_err(0, true), STG_EINTR);
	/* killed by a signal: 128 + its number, as a shell says */
	ut_script(f->bin, "selfkill", "#!/bin/sh\nkill -TERM $$\nsleep 5\n");
	stg_argv a = {0};
	stg__argv_add(&a, "selfkill");
	pid_t pid;
	assert_int_equal(stg__spawn(f->ctx, &a, NULL, NULL, &pid), STG_OK);
	assert_int_equal(stg__wait_status(f->ctx, pid), 128 + SIGTERM);
	stg__argv_free(&a);
	/* a program that is not there */
	stg__argv_add(&a, "no-such-stager-program");
	int in = -1;
	assert_int_equal(stg__spawn(f->ctx, &a, &in, NULL, &pid), STG_EIO);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "cannot run 'no-such-stager-program': No such file or directory");
	assert_int_equal(in, -1);
	stg__argv_free(&a);
}

static void test_lines(void **state)
{
	fx *f = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	char line[16];
	/* nothing comes: -1 after the time bound */
	double t0 = stg__now();
	assert_int_equal(stg__read_line(f->ctx, p[0], line, sizeof line, 1), -1);
	double t = stg__now() - t0;
	assert_true(t >= 0.9 && t < 3);
	/* a long line is cut to the buffer; a last line without its newline
	 * still counts */
	assert_true(stg__tell(p[1], "stager-node %s %s\n", "done", "a-node-with-a-long-name"));
	assert_true(stg__tell(p[1], "tail"));
	close(p[1]);
	assert_int_equal(stg__read_line(f->ctx, p[0], line, sizeof line, 1), 1);
	assert_string_equal(line, "stager-node don");
	assert_int_equal(stg__read_line(f->ctx, p[0], line, sizeof line, 1), 1);
	assert_string_equal(line, "tail");
	assert_int_equal(stg__read_line(f->ctx, p[0], line, sizeof line, 1), 0);
	close(p[0]);
	/* cancelled: at once */
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x\n", 2), 2);
	stg_cancel(f->ctx);
	assert_int_equal(stg__read_line(f->ctx, p[0], line, sizeof line, 5), -1);
	close(p[0]);
	/* a line too long to tell is not told at all */
	char *big = ut_malloc(8192);
	memset(big, 'x', 8191);
	big[8191] = '\0';
	assert_false(stg__tell(p[1], "%s\n", big));
	close(p[1]);
	free(big);

	/* lines that are not a node's */
	char l1[] = "hello n1", l2[] = "stager-node ready", l3[] = "stager-node ready ",
	     l4[] = "stager-node need n2";
	char *w, *n, *r;
	assert_false(stg__node_line(l1, &w, &n, &r));
	assert_false(stg__node_line(l2, &w, &n, &r));
	assert_false(stg__node_line(l3, &w, &n, &r));
	assert_true(stg__node_line(l4, &w, &n, &r));
	assert_string_equal(w, "need");
	assert_string_equal(n, "n2");
	assert_null(r);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_argv), T(test_job_env), T(test_step), T(test_status), T(test_lines),
};

UT_MAIN(tests)
