/* test_fanout_stage.c - staging on every node of a job (fanout_stage.c):
 * the lead refuses outside a job, in a job of one node, and off the job's
 * nodes; a node's probe says "need" when its cache lacks the pack (or has
 * another version) and "have PATH" once it holds it, linking the entry
 * without reading the pack; a node's receive says "ready NODE STEP",
 * stages from the copy the lead sends ("go") and removes it ("done NODE
 * copy"), reads the shared filesystem itself when no copy comes or the
 * copy is damaged ("done NODE shared"). */
#include "unit.h"
#include "cache.h"

typedef struct fx {
	UT_FX;
	stg_pack_info info;
	char *copy;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(&f->ut, NULL);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_write(f->src, "a.txt", "alpha\n", 6);
	ut_fill_file(f->src, "big", 200000, 5);
	f->pack = ut_join(f->dir, "set.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	f->copy = ut_join(f->dir, "scratch/bcast/job-5/set.tar.zst");
	setenv("SLURMD_NODENAME", "n2", 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	free(f->copy);
	unsetenv("SLURM_STEP_ID");
	unsetenv("SLURM_JOB_NUM_NODES");
	return ut_teardown(state);
}

static void test_lead_refuses(void **state)
{
	fx *f = *state;
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	stg_fanout_opts fo;
	stg_fanout_opts_init(&fo);
	stg_fanout_result res;
	unsetenv("SLURMD_NODENAME");
	assert_int_equal(stg_stage_all_nodes(f->ctx, f->c, f->pack, &so, &fo, &res), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "SLURM_JOB_ID is not set"));
	stg_fanout_result_free(&res);
	setenv("SLURM_JOB_ID", "5", 1);
	setenv("SLURM_JOB_NUM_NODES", "x", 1);
	assert_int_equal(stg_stage_all_nodes(f->ctx, f->c, f->pack, &so, &fo, &res), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is not a number of nodes"));
	setenv("SLURM_JOB_NUM_NODES", "1", 1);
	assert_int_equal(stg_stage_all_nodes(f->ctx, f->c, f->pack, &so, &fo, &res), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "the job has one node; stage as usual"));
	setenv("SLURM_JOB_NUM_NODES", "4", 1);
	assert_int_equal(stg_stage_all_nodes(f->ctx, f->c, f->pack, &so, &fo, &res), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "runs on one of the job's nodes"));
	assert_int_equal(res.n_nodes, 0);
	stg_fanout_result_free(&res);
}

/* Read what a node said on the pipe. */
static void said(int fd, char *out, size_t len)
{
	ssize_t n = read(fd, out, len - 1);
	out[n > 0 ? n : 0] = '\0';
}

static void test_probe(void **state)
{
	fx *f = *state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	char *dest = ut_join(f->dir, "d");
	so.dest = dest;
	so.owner = "job-5";
	char text[8400];
	assert_int_equal(stg_node_probe(f->ctx, f->c, f->pack, &so, f->info.digest, p[1]), STG_OK);
	said(p[0], text, sizeof text);
	assert_string_equal(text, "stager-node need n2\n");
	assert_int_equal(access(dest, F_OK), -1);
	/* once the cache holds it: linked, without reading the pack (it is
	 * gone from here) */
	stg_stage_result r;
	char *first = ut_join(f->dir, "first");
	assert_int_equal(ut_stage(f->ctx, f->c, f->pack, first, NULL, &r), STG_OK);
	stg_stage_result_free(&r);
	char *moved = ut_join(f->dir, "moved.tar.zst");
	assert_int_equal(rename(f->pack, moved), 0);
	assert_int_equal(stg_node_probe(f->ctx, f->c, f->pack, &so, f->info.digest, p[1]), STG_OK);
	said(p[0], text, sizeof text);
	char want[8400];
	snprintf(want, sizeof want, "stager-node have n2 %s\n", dest);
	assert_string_equal(text, want);
	ut_content_is(dest, "a.txt", "alpha\n");
	/* another version's digest: need */
	uint8_t other[STG_DIGEST_LEN];
	memcpy(other, f->info.digest, sizeof other);
	other[0] ^= 1;
	char *dest2 = ut_join(f->dir, "d2");
	so.dest = dest2;
	assert_int_equal(stg_node_probe(f->ctx, f->c, f->pack, &so, other, p[1]), STG_OK);
	said(p[0], text, sizeof text);
	assert_string_equal(text, "stager-node need n2\n");
	assert_int_equal(rename(moved, f->pack), 0);
	close(p[0]);
	close(p[1]);
	free(dest);
	free(dest2);
	free(first);
	free(moved);
}

/* receive with line on its input ("go", or NULL: the input ends). */
static stg_err receive(fx *f, const char *line, const char *dest, char *text, size_t len)
{
	int in[2], out[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	if (line)
		assert_int_equal(write(in[1], line, strlen(line)), (ssize_t)strlen(line));
	close(in[1]);
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	so.dest = dest;
	so.owner = "job-5";
	stg_err err = stg_node_receive(f->ctx, f->c, f->pack, &so, f->copy, f->info.digest, in[0],
	                               out[1]);
	close(out[1]);
	size_t got = 0;
	ssize_t n;
	while ((n = read(out[0], text + got, len - 1 - got)) > 0)
		got += (size_t)n;
	text[got] = '\0';
	close(in[0]);
	close(out[0]);
	return err;
}

/* Put a copy of the pack where the lead's sbcast would (the directories
 * above it made by receive). */
static void place_copy(fx *f)
{
	char cmd[8400];
	snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", f->copy, f->pack,
	         f->copy);
	assert_int_equal(system(cmd), 0);
}

static void test_receive(void **state)
{
	fx *f = *state;
	setenv("SLURM_STEP_ID", "3", 1);
	char text[8400];
	/* the copy comes: staged from it, and removed */
	place_copy(f);
	char *d1 = ut_join(f->dir, "d1");
	if (receive(f, "go\n", d1, text, sizeof text))
		fail_msg("%s", stg_errmsg(f->ctx));
	assert_string_equal(text, "stager-node ready n2 3\nstager-node done n2 copy\n");
	ut_content_is(d1, "a.txt", "alpha\n");
	ut_same_in(f->src, d1, "big");
	assert_int_equal(access(f->copy, F_OK), -1);
	free(d1);
}

/* No copy comes (the input ends), or it is damaged: read here. */
static void test_receive_shared(void **state)
{
	fx *f = *state;
	char text[8400];
	char *d1 = ut_join(f->dir, "d1");
	assert_int_equal(receive(f, NULL, d1, text, sizeof text), STG_OK);
	assert_string_equal(text, "stager-node ready n2 \nstager-node done n2 shared\n");
	char want[4400];
	snprintf(want, sizeof want, "no copy of '%s' came from the lead node: reading it here",
	         f->pack);
	assert_non_null(strstr(f->log.text, want));
	ut_content_is(d1, "a.txt", "alpha\n");
	ut_same_in(f->src, d1, "big");
	free(d1);
	/* a damaged copy (a fresh cache, so it is really staged) */
	stg_cache_close(f->c);
	f->c = NULL;
	ut_rmtree(f->dir);
	mkdir(f->dir, 0700);
	ut_fx_cache(&f->ut, NULL);
	mkdir(f->src, 0755);
	ut_write(f->src, "a.txt", "alpha\n", 6);
	ut_fill_file(f->src, "big", 200000, 5);
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	place_copy(f);
	ut_flip(f->copy, 100, 0x01);
	char *d2 = ut_join(f->dir, "d2");
	assert_int_equal(receive(f, "go\n", d2, text, sizeof text), STG_OK);
	assert_non_null(strstr(text, "stager-node done n2 shared\n"));
	assert_true(f->log.warnings >= 1);
	ut_content_is(d2, "a.txt", "alpha\n");
	ut_same_in(f->src, d2, "big");
	assert_int_equal(access(f->copy, F_OK), -1);
	free(d2);
}

/* How each node came by the data, in one line: whole nodes only when the
 * buffer is small. */
static void test_nodes_text(void **state)
{
	(void)state;
	stg_fanout_node nodes[] = {{"n2", "sbcast"}, {"n3", "cached"}, {"n1", "read"}};
	stg_fanout_result res = {.nodes = nodes, .n_nodes = 3};
	char buf[64], small[21], smaller[20];
	assert_string_equal(stg_fanout_nodes_text(&res, buf, sizeof buf),
	                    "n2 sbcast, n3 cached, n1 read");
	assert_string_equal(stg_fanout_nodes_text(&res, small, sizeof small),
	                    "n2 sbcast, n3 cached");
	assert_string_equal(stg_fanout_nodes_text(&res, smaller, sizeof smaller), "n2 sbcast");
	res.n_nodes = 0;
	assert_string_equal(stg_fanout_nodes_text(&res, buf, sizeof buf), "");
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nodes_text),
        T(test_lead_refuses),
        T(test_probe),
        T(test_receive),
        T(test_receive_shared),
};

UT_MAIN(tests)
