/*
 * fanout_stage.c - stg_stage_all_nodes: one shared-filesystem read per
 * allocation, fanned out by Slurm; and the tasks on the other nodes.
 *
 * The node running the batch script (the lead) reads the pack's trailer
 * and asks every other node, in one srun step, whether its cache already
 * holds the entry (those that do just link it).  If anyone lacks it, the
 * lead copies the pack once to its scratch (stg_copy_pack, which checks
 * its SHA-256), starts a second step on the nodes that lack it, and when
 * their tasks are ready hands the copy to sbcast for that step only, so a
 * node that has the entry receives nothing.  Each task then stages from
 * its copy, which stage.c checks again (digest, SHA-256, every file's
 * XXH3) before trusting it; a copy that fails falls back to reading the
 * shared filesystem on that node, with a warning.  The tasks talk to the
 * lead in "stager-node" lines (fanout_step.c); the go-ahead reaches them
 * on stdin.  The copy lives under SCRATCH_ROOT/bcast/job-ID/, which
 * stg_clean empties once the job is gone, if a killed lead left it.
 */
#include "fanout.h"
#include "ctx.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DAY (24 * 3600)

/* Note how node name came by the data. */
static void node_add(stg_fanout_result *f, const char *name, const char *how)
{
	for (size_t i = 0; i < f->n_nodes; i++)
		if (!strcmp(f->nodes[i].name, name)) {
			snprintf(f->nodes[i].how, sizeof f->nodes[i].how, "%s", how);
			return;
		}
	if (f->n_nodes >= STG_MAX_NODES)
		return;
	stg_fanout_node *v = realloc(f->nodes, (f->n_nodes + 1) * sizeof *v);
	if (!v)
		return;
	f->nodes = v;
	stg_fanout_node *s = &v[f->n_nodes++];
	snprintf(s->name, sizeof s->name, "%s", name);
	snprintf(s->how, sizeof s->how, "%s", how);
}

char *stg_fanout_nodes_text(const stg_fanout_result *res, char *buf, size_t n)
{
	size_t used = 0;
	if (n)
		buf[0] = '\0';
	for (size_t i = 0; i < res->n_nodes; i++) {
		const stg_fanout_node *v = &res->nodes[i];
		size_t need = (i ? 2 : 0) + strlen(v->name) + 1 + strlen(v->how);
		if (used + need >= n)
			break;
		used += (size_t)snprintf(buf + used, n - used, "%s%s %s", i ? ", " : "", v->name,
		                         v->how);
	}
	return buf;
}

void stg_fanout_result_free(stg_fanout_result *res)
{
	free(res->path);
	free(res->nodes);
	res->path = NULL;
	res->nodes = NULL;
	res->n_nodes = 0;
}

/* The two directories above a copy (bcast/job-ID/), if missing. */
static void mkdir_parents(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	char *up = strrchr(dir, '/');
	if (up && up != dir) {
		*up = '\0';
		mkdir(dir, 0700);
		*up = '/';
	}
	mkdir(dir, 0700);
}

/* The stage options the other nodes' stagers are given, then fo's. */
static void stage_command(stg_argv *a, const stg_fanout_opts *fo, const stg_stage_opts *so,
                          const char *const *mode)
{
	stg__node_command(a, fo, "stage", mode);
	for (size_t i = 0; i < so->n_include; i++) {
		stg__argv_add(a, "--include");
		stg__argv_add(a, so->include[i]);
	}
	if (so->verify)
		stg__argv_add(a, "--verify");
	if (so->copy)
		stg__argv_add(a, "--copy");
	if (so->no_pin)
		stg__argv_add(a, "--no-pin");
	if (so->env && so->cache_only)
		stg__argv_add(a, "--node-env");
}

static void operands(stg_argv *a, const char *src, const stg_stage_opts *so)
{
	stg__argv_add(a, "--");
	stg__argv_add(a, src);
	if (so->dest)
		stg__argv_add(a, so->dest);
}

/* Run the probe step and note what its tasks say ("have" or "need"); its
 * exit status (7 if it could not start, told in the log). */
static int probe_step(stg_ctx *ctx, stg_argv *a, stg_fanout_result *f)
{
	int out;
	pid_t pid;
	stg_err err = stg__spawn(ctx, a, NULL, &out, &pid);
	if (err) {
		stg__log(ctx, STG_LOG_ERROR, "%s", ctx->errmsg);
		return stg_exit_status(err);
	}
	char line[512];
	while (stg__read_line(ctx, out, line, sizeof line, DAY) == 1) {
		char *word, *node, *rest;
		if (stg__node_line(line, &word, &node, &rest))
			node_add(f, node, !strcmp(word, "have") ? "cached" : "need");
	}
	close(out);
	return stg__wait_status(ctx, pid);
}

/* Send the copy to the tasks of step (sbcast); whether it arrived. */
static bool sbcast(stg_ctx *ctx, const char *nodes, const char *step, const char *copy)
{
	char target[64];
	snprintf(target, sizeof target, "%s.%s", getenv("SLURM_JOB_ID"), step);
	stg_argv sb = {0};
	const char *args[] = {"sbcast", "--compress=none", "--force", "-j", target, copy, copy};
	for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
		stg__argv_add(&sb, args[i]);
	double t0 = stg__now();
	pid_t sp;
	bool started = !stg__spawn(ctx, &sb, NULL, NULL, &sp);
	stg__argv_free(&sb);
	if (!started)
		stg__log(ctx, STG_LOG_ERROR, "%s", ctx->errmsg);
	int st = started ? stg__wait_status(ctx, sp) : 127;
	if (st == 0) {
		stg__log(ctx, STG_LOG_DEBUG, "sent the pack to %s with sbcast in %.2f s", nodes,
		         stg__now() - t0);
		return true;
	}
	stg__log(ctx, STG_LOG_ERROR,
	         "sbcast to %s failed (status %d): those nodes read the shared filesystem "
	         "themselves",
	         nodes, st);
	return false;
}

/* The fan-out step on the nodes that need the pack: start it, wait for its
 * tasks, sbcast the copy (if there is one) to that step, tell them to go,
 * and note their answers.  If the copy cannot be sent, the tasks are told
 * so and read the shared filesystem themselves; if they do not start, the
 * step is cancelled.  The step's result; failures are told in the log. */
static stg_err fan_out(stg_ctx *ctx, stg_fanout_result *f, const char *nodes, unsigned n,
                       const char *src, const stg_stage_opts *so, const stg_fanout_opts *fo,
                       const char *copy, bool have_copy, const char *digest_hex)
{
	stg_argv b = {0};
	stg__srun_args(&b, n, nodes, NULL);
	stg__argv_add(&b, "--input=all");
	const char *mode[] = {"--node-receive", copy, "--node-digest", digest_hex, NULL};
	stage_command(&b, fo, so, mode);
	operands(&b, src, so);
	int in, out;
	pid_t pid;
	stg_err err = stg__spawn(ctx, &b, &in, &out, &pid);
	stg__argv_free(&b);
	if (err) {
		stg__log(ctx, STG_LOG_ERROR, "%s", ctx->errmsg);
		return err;
	}
	char line[512], step[32] = "";
	unsigned ready = 0;
	int r = 1;
	while (ready < n &&
	       (r = stg__read_line(ctx, out, line, sizeof line, STG_STEP_START_TIMEOUT)) == 1) {
		char *word, *node, *rest;
		if (stg__node_line(line, &word, &node, &rest) && !strcmp(word, "ready") && rest) {
			snprintf(step, sizeof step, "%s", rest);
			ready++;
		}
	}
	if (ready < n || !step[0]) {
		bool intr = stg__cancelled(ctx);
		stg__log(ctx, STG_LOG_ERROR, "the stagers on %s did not start (%s)", nodes,
		         intr    ? "interrupted"
		         : r < 0 ? "timed out"
		                 : "the step ended");
		kill(pid, SIGTERM); /* srun cancels the step */
		close(in);
		close(out);
		stg__wait_status(ctx, pid);
		return intr ? STG_EINTR : STG_EREMOTE;
	}
	bool sent = have_copy && sbcast(ctx, nodes, step, copy);
	if (!stg__say(in, sent ? "go\n" : "nogo\n"))
		stg__log(ctx, STG_LOG_DEBUG, "the fan-out step is gone: %s", strerror(errno));
	close(in);
	while (stg__read_line(ctx, out, line, sizeof line, DAY) == 1) {
		char *word, *node, *rest;
		if (stg__node_line(line, &word, &node, &rest) && !strcmp(word, "done"))
			node_add(f, node, rest && !strcmp(rest, "copy") ? "sbcast" : "shared");
	}
	close(out);
	int st = stg__wait_status(ctx, pid);
	return stg__step_err(st, stg__cancelled(ctx));
}

/* A directory or another archive: every node stages it on its own, in one
 * step; the path the first one prints. */
static stg_err each_node(stg_ctx *ctx, const char *src, const stg_stage_opts *so,
                         const stg_fanout_opts *fo, unsigned nn, stg_fanout_result *res)
{
	stg_argv a = {0};
	stg__srun_args(&a, nn, NULL, NULL);
	stage_command(&a, fo, so, NULL);
	operands(&a, src, so);
	int out;
	pid_t pid;
	stg_err err = stg__spawn(ctx, &a, NULL, &out, &pid);
	stg__argv_free(&a);
	if (err)
		return err;
	/* every node prints the same path: once is enough */
	char line[PATH_MAX + 64], first[PATH_MAX + 64] = "";
	while (stg__read_line(ctx, out, line, sizeof line, DAY) == 1)
		if (!first[0])
			snprintf(first, sizeof first, "%s", line);
	close(out);
	int st = stg__wait_status(ctx, pid);
	res->nodes_err = stg__step_err(st, stg__cancelled(ctx));
	if (first[0] && !(res->path = strdup(first)))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	return STG_OK;
}

/* The nodes that said "need", as a comma list (malloc'ed), and how many. */
static char *needing(const stg_fanout_result *f, unsigned *n)
{
	size_t cap = 1;
	for (size_t i = 0; i < f->n_nodes; i++)
		cap += strlen(f->nodes[i].name) + 1;
	char *need = calloc(cap, 1);
	*n = 0;
	for (size_t i = 0; need && i < f->n_nodes; i++) {
		if (strcmp(f->nodes[i].how, "need"))
			continue;
		if ((*n)++)
			strcat(need, ",");
		strcat(need, f->nodes[i].name);
	}
	return need;
}

/* The one read of the shared filesystem for all: src copied to *copy
 * (malloc'ed); *have says whether it worked (a failure here that another
 * node may not have is told in the log; the nodes then read src). */
static stg_err read_once(stg_ctx *ctx, stg_cache *cache, const char *src,
                         const uint8_t digest[STG_DIGEST_LEN], const char *hex, char **copy,
                         bool *have)
{
	const char *job = getenv("SLURM_JOB_ID");
	size_t len = strlen(stg_cache_root(cache)) + strlen(job) + STG_DIGEST_HEXLEN + 40;
	if (!(*copy = malloc(len)))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	snprintf(*copy, len, "%s/bcast/job-%s/%s.tar.zst", stg_cache_root(cache), job, hex);
	mkdir_parents(*copy);
	uint64_t bytes;
	uint8_t got[STG_DIGEST_LEN];
	stg_err err = stg_copy_pack(ctx, cache, src, *copy, got, &bytes);
	if (err == STG_EINTR || err == STG_ENOENT || err == STG_ECORRUPT)
		return err;
	if (err) {
		/* no room or a read error here: the others may do better */
		stg__log(ctx, STG_LOG_ERROR, "%s: every node reads '%s' itself", ctx->errmsg, src);
	} else if (memcmp(got, digest, STG_DIGEST_LEN)) {
		return stg__fail(ctx, STG_ENOENT,
		                 "'%s' changed while it was being staged; try again", src);
	}
	*have = !err;
	return STG_OK;
}

stg_err stg_stage_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *src,
                            const stg_stage_opts *so, const stg_fanout_opts *fo,
                            stg_fanout_result *res)
{
	memset(res, 0, sizeof *res);
	double t0 = stg__now();
	const char *job = getenv("SLURM_JOB_ID");
	unsigned nn = stg_job_nodes();
	if (!nn)
		return stg__fail(ctx, STG_EUSAGE, "%s",
		                 job && *job
		                         ? "--all-nodes: SLURM_JOB_NUM_NODES (or SLURM_NNODES) "
		                           "is not a number of nodes"
		                         : "--all-nodes works inside a Slurm allocation (sbatch, "
		                           "salloc); SLURM_JOB_ID is not set");
	if (nn == 1 || !getenv("SLURMD_NODENAME"))
		return stg__fail(
		        ctx, STG_EUSAGE, "%s",
		        nn == 1 ? "--all-nodes: the job has one node; stage as usual"
		                : "--all-nodes runs on one of the job's nodes: in the batch "
		                  "script, or under salloc as `srun -N1 -n1 stager stage "
		                  "--all-nodes ...`");
	char me[HOST_NAME_MAX + 1];
	stg_node_name(me, sizeof me);
	stg_argv a = {0};
	char *copy = NULL, *need = NULL;
	stg_err err;

	/* the pack's identity: its trailer, one small read */
	stg_pack *p = NULL;
	struct stat st;
	bool dir = stat(src, &st) == 0 && S_ISDIR(st.st_mode);
	err = dir ? STG_ECORRUPT : stg_pack_open(ctx, src, &p);
	if (err == STG_ECORRUPT) {
		stg__log(ctx, STG_LOG_INFO,
		         "'%s' is not a pack (%s): each of the %u nodes stages it from the "
		         "shared filesystem on its own; `stager pack` it once and it is read "
		         "once",
		         src, dir ? "a directory" : ctx->errmsg, nn);
		err = each_node(ctx, src, so, fo, nn, res);
		goto out;
	}
	if (err)
		goto out;
	stg_pack_info info;
	stg_pack_get_info(p, &info);
	stg_pack_close(p);
	res->pack = 1;
	memcpy(res->digest, info.digest, STG_DIGEST_LEN);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(res->digest, hex);

	/* who has it already: those that do link it now */
	bool lead_needs = !stg_stage_cached(cache, res->digest, so);
	stg__srun_args(&a, nn - 1, NULL, me);
	const char *probe[] = {"--node-probe", "--node-digest", hex, NULL};
	stage_command(&a, fo, so, probe);
	operands(&a, src, so);
	int pst = probe_step(ctx, &a, res);
	if (pst || res->n_nodes != nn - 1) {
		err = pst ? stg__step_err(pst, stg__cancelled(ctx)) : STG_EREMOTE;
		stg__fail(ctx, err,
		          "asking the other nodes with srun failed (status %d, %zu of %u answered)",
		          pst, res->n_nodes, nn - 1);
		goto out;
	}
	unsigned n_need;
	if (!(need = needing(res, &n_need))) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	bool have_copy = false;
	if ((lead_needs || n_need) &&
	    (err = read_once(ctx, cache, src, res->digest, hex, &copy, &have_copy)))
		goto out;
	stg_err ferr = n_need ? fan_out(ctx, res, need, n_need, src, so, fo, copy, have_copy, hex)
	                      : STG_OK;

	/* this node, from the copy too */
	stg_stage_opts mine = *so;
	mine.from_copy = lead_needs && have_copy ? copy : NULL;
	mine.from_copy_digest = res->digest;
	stg_stage_result sr;
	err = stg_stage(ctx, cache, src, &mine, &sr);
	if (copy)
		unlink(copy);
	if (err) {
		node_add(res, me, "failed");
		goto out;
	}
	node_add(res, me, !lead_needs ? "cached" : sr.source_bytes ? "shared" : "read");
	if (ferr) {
		stg__log(ctx, STG_LOG_ERROR, "staging on some nodes failed (exit %d); see above",
		         stg_exit_status(ferr));
		res->nodes_err = ferr;
	}
	if (!(res->path = strdup(sr.path)))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_stage_result_free(&sr);
out:
	if (copy) {
		unlink(copy);
		free(copy);
	}
	free(need);
	stg__argv_free(&a);
	res->seconds = stg__now() - t0;
	return err;
}

/* The task on a node that may have the entry: link it if so (without
 * touching the shared filesystem). */
stg_err stg_node_probe(stg_ctx *ctx, stg_cache *cache, const char *src, const stg_stage_opts *so,
                       const uint8_t digest[STG_DIGEST_LEN], int out)
{
	char me[HOST_NAME_MAX + 1];
	stg_node_name(me, sizeof me);
	if (!stg_stage_cached(cache, digest, so)) {
		stg__tell(out, "stager-node need %s\n", me);
		return STG_OK;
	}
	stg_stage_opts mine = *so;
	mine.from_copy_digest = digest;
	stg_stage_result res;
	stg_err err = stg_stage(ctx, cache, src, &mine, &res);
	if (err)
		return err;
	stg__tell(out, "stager-node have %s %s\n", me, res.path);
	stg_stage_result_free(&res);
	return STG_OK;
}

/* The task on a node that lacks the entry: say it is ready, wait for the
 * copy, stage from it (or from src if none came or it is bad). */
stg_err stg_node_receive(stg_ctx *ctx, stg_cache *cache, const char *src, const stg_stage_opts *so,
                         const char *copy, const uint8_t digest[STG_DIGEST_LEN], int in, int out)
{
	char me[HOST_NAME_MAX + 1];
	stg_node_name(me, sizeof me);
	mkdir_parents(copy);
	const char *step = getenv("SLURM_STEP_ID");
	stg__tell(out, "stager-node ready %s %s\n", me, step ? step : "");
	char line[64];
	int r = stg__read_line(ctx, in, line, sizeof line, DAY);
	bool go = r == 1 && !strcmp(line, "go");
	if (!go)
		stg__log(ctx, STG_LOG_ERROR,
		         "no copy of '%s' came from the lead node: reading it here", src);
	stg_stage_opts mine = *so;
	mine.from_copy = go ? copy : NULL;
	mine.from_copy_digest = digest;
	stg_stage_result res;
	stg_err err = stg_stage(ctx, cache, src, &mine, &res);
	unlink(copy);
	if (err)
		return err;
	stg__tell(out, "stager-node done %s %s\n", me, res.source_bytes ? "shared" : "copy");
	stg_stage_result_free(&res);
	return STG_OK;
}
