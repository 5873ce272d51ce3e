/* test_fanout_collect.c - collecting on every node of a job
 * (fanout_collect.c), with a fake srun on PATH that plays the step's
 * nodes: the step's arguments (one task a node, the collector's options,
 * the operands); started once every node said it is ready, and refused,
 * named, when some never do; "now" written to the step; its end and its
 * status as a result; and the node's side (stg_node_collect): SRC made,
 * "ready" said, collected when told and once more at the end. */
#include "unit.h"
#include "cache.h"
#include "fanout.h"

#include <sys/socket.h>

typedef struct fx {
	UT_FX;
	char *bin, *old_path, *args, *said;
} fx;

/* srun: its arguments into $top/args; $READY nodes say they are ready;
 * then each line of its stdin into $top/said; at its end, exit $RC. */
static const char srun_text[] =
        "#!/bin/sh\n"
        "echo \"$@\" > \"$TOP/args\"\n"
        "i=0\n"
        "while [ $i -lt \"$READY\" ]; do i=$((i+1)); echo \"stager-node ready n$i\"; done\n"
        "[ \"$READY\" -lt \"$SLURM_JOB_NUM_NODES\" ] && exit 1\n"
        "while read line; do echo \"$line\" >> \"$TOP/said\"; done\n"
        "exit $RC\n";

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->bin = ut_join(f->dir, "bin");
	ut_mkdir(f->dir, "bin");
	ut_script(f->bin, "srun", srun_text);
	f->old_path = ut_path_set(NULL, f->bin);
	setenv("TOP", f->dir, 1);
	setenv("SLURM_JOB_ID", "31", 1);
	setenv("SLURM_JOB_NUM_NODES", "3", 1);
	setenv("READY", "3", 1);
	setenv("RC", "0", 1);
	f->args = ut_join(f->dir, "args");
	f->said = ut_join(f->dir, "said");
	f->src = ut_join(f->dir, "node/out");
	f->dest = ut_join(f->dir, "shared");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_path_restore(f->old_path);
	unsetenv("TOP");
	unsetenv("SLURM_JOB_NUM_NODES");
	unsetenv("READY");
	unsetenv("RC");
	free(f->bin);
	free(f->args);
	free(f->said);
	return ut_teardown(state);
}

static void test_step(void **state)
{
	fx *f = *state;
	stg_fanout_opts fo;
	stg_fanout_opts_init(&fo);
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	co.pack = 1;
	co.level = 5;
	stg_collectors c = {0};
	assert_int_equal(stg__collectors_start(f->ctx, &fo, f->src, f->dest, &co, 60, &c), STG_OK);
	assert_true(c.pid > 0);
	char want[8400];
	snprintf(want, sizeof want,
	         "--overlap --quiet --kill-on-bad-exit=0 --ntasks-per-node=1 --cpus-per-task=1 -N "
	         "3 -n 3 --input=all stager collect --node-ready --every 60s --pack --level 5 -- "
	         "%s %s\n",
	         f->src, f->dest);
	char *args = ut_read_text(f->args);
	assert_string_equal(args, want);
	free(args);
	stg__collectors_now(f->ctx, &c);
	stg__collectors_now(f->ctx, &c);
	assert_int_equal(stg__collectors_end(f->ctx, &c), STG_OK);
	assert_int_equal(c.pid, 0);
	ut_content_is(f->dir, "said", "now\nnow\n");
	/* without --every, --pack or --level; the step ends with the
	 * tasks' own status */
	setenv("RC", "3", 1);
	stg_collect_opts_init(&co);
	assert_int_equal(stg__collectors_start(f->ctx, &fo, f->src, f->dest, &co, 0, &c), STG_OK);
	args = ut_read_text(f->args);
	snprintf(want, sizeof want, "stager collect --node-ready -- %s %s\n", f->src, f->dest);
	assert_non_null(strstr(args, want));
	free(args);
	assert_int_equal(stg__collectors_end(f->ctx, &c), STG_ENOSPC);
	/* a step gone: "now" is not an error, nor a SIGPIPE */
	setenv("RC", "0", 1);
	assert_int_equal(stg__collectors_start(f->ctx, &fo, f->src, f->dest, &co, 0, &c), STG_OK);
	int st;
	close(c.in); /* the step ends */
	waitpid(c.pid, &st, 0);
	assert_true(WIFEXITED(st));
	int in[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, in), 0);
	close(in[1]);
	c.in = in[0];
	stg__collectors_now(f->ctx, &c);
	/* it ended on its own, status 1 (srun's): the transport's */
	c.in = dup(in[0]);
	assert_int_equal(stg__collectors_ended(&c, 1), STG_EREMOTE);
	close(in[0]);
	assert_int_equal(c.pid, 0);
}

/* Two of three nodes say they are ready, and the step ends. */
static void test_not_all_ready(void **state)
{
	fx *f = *state;
	setenv("READY", "2", 1);
	stg_fanout_opts fo;
	stg_fanout_opts_init(&fo);
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	stg_collectors c = {0};
	assert_int_equal(stg__collectors_start(f->ctx, &fo, f->src, f->dest, &co, 0, &c), STG_EIO);
	char want[4400];
	snprintf(want, sizeof want, "the collectors for '%s' did not start on all 3 nodes (2 did)",
	         f->src);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_int_equal(c.pid, 0);
	/* srun missing */
	free(ut_path_set("/nonexistent", f->bin));
	assert_int_not_equal(stg__collectors_start(f->ctx, &fo, f->src, f->dest, &co, 0, &c),
	                     STG_OK);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot run 'srun'"));
}

typedef struct node {
	fx *f;
	int in, out;
	stg_err err;
	stg_collect_totals t;
} node;

static void *node_run(void *arg)
{
	node *n = arg;
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	n->err = stg_node_collect(n->f->ctx, n->f->c, n->f->src, n->f->dest, &co, 0, n->in, n->out,
	                          &n->t);
	return NULL;
}

/* A node's collector: makes SRC, says it is ready, collects when told
 * "now" and once more when its input ends. */
static void test_node(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, NULL);
	setenv("SLURMD_NODENAME", "gpu3", 1);
	int to[2], from[2];
	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	node n = {.f = f, .in = to[0], .out = from[1]};
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, node_run, &n), 0);
	char line[128];
	assert_int_equal(stg__read_line(f->ctx, from[0], line, sizeof line, 5), 1);
	assert_string_equal(line, "stager-node ready gpu3");
	struct stat st;
	assert_int_equal(stat(f->src, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	ut_write(f->src, "r", "one\n", 4);
	assert_int_equal(write(to[1], "now\n", 4), 4);
	char *r = ut_join(f->dest, "r");
	for (int i = 0; i < 500 && access(r, F_OK); i++)
		usleep(10000);
	ut_content_is(f->dest, "r", "one\n");
	ut_write(f->src, "r", "two\n", 4);
	close(to[1]);
	pthread_join(th, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	assert_int_equal(n.err, STG_OK);
	ut_content_is(f->dest, "r", "two\n");
	assert_true(n.t.rounds >= 2);
	close(to[0]);
	close(from[0]);
	close(from[1]);
	free(r);
	/* SRC that cannot be made */
	ut_write(f->dir, "afile", "x", 1);
	free(f->src);
	f->src = ut_join(f->dir, "afile/out");
	stg_collect_opts co;
	stg_collect_opts_init(&co);
	stg_collect_totals t = {0};
	assert_int_equal(stg_node_collect(f->ctx, f->c, f->src, f->dest, &co, 0, -1, -1, &t),
	                 STG_EIO);
	char want[4400];
	snprintf(want, sizeof want, "cannot create '%s'", f->src);
	assert_non_null(strstr(stg_errmsg(f->ctx), want));
	unsetenv("SLURMD_NODENAME");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_step),
        T(test_not_all_ready),
        T(test_node),
};

UT_MAIN(tests)
