/*
 * env_nodes.c - a Python env served on every node of a Slurm job for the
 * rest of the job (stg_env_all_nodes: `stager env --all-nodes`).
 *
 * A server lives as long as the step it runs in: under proctrack/cgroup,
 * the end of `srun stager env ENV` kills it, and the later steps would
 * find a dead mount.  So the other nodes' servers run in a step of their
 * own that lasts the job: `srun --overlap` of one `stager env --foreground
 * --node-ready ENV_DIR` per node, started in the background and left
 * running once every task has said "stager-node ready NODE" (or why not:
 * "stager-node failed NODE MESSAGE").  Slurm ends that step with the job
 * (SIGTERM: each server leaves its mount, and the last unmounts); the
 * epilog's clean sweeps what a SIGKILL left.  This node's server is the
 * batch step's, as `stager env` makes it.  All or nothing: a node that
 * cannot serve it ends the others' servers, this one's too.
 *
 * The shared filesystem is read once for the job, not once per node:
 * before any server starts, the env's pack is staged into every node's
 * cache as `stager stage --all-nodes` stages a dataset (fanout_stage.c:
 * one copy, sent by sbcast to the nodes whose cache lacks it, pinned for
 * the job), so that each server finds its node's entry.  A node the
 * fan-out could not fill reads the shared filesystem itself, as a lone
 * `stager env` does.
 */
#include "env.h"
#include "fanout.h"
#include "ctx.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every node's task said it serves the env, or one said why not: the
 * first such reason is the error. */
static stg_err hear_nodes(stg_ctx *ctx, int out, unsigned n, const char *env_dir)
{
	char line[STG_ERRMSG_MAX + 128];
	unsigned ready = 0;
	int r = 0;
	while (ready < n &&
	       (r = stg__read_line(ctx, out, line, sizeof line, STG_STEP_START_TIMEOUT)) == 1) {
		char *word, *node, *rest;
		if (!stg__node_line(line, &word, &node, &rest))
			continue;
		if (!strcmp(word, "ready"))
			ready++;
		else if (!strcmp(word, "failed"))
			return stg__fail(ctx, STG_EREMOTE, "'%s' cannot be served on %s: %s",
			                 env_dir, node, rest ? rest : "(no reason given)");
	}
	if (ready == n)
		return STG_OK;
	if (stg__cancelled(ctx))
		return stg__fail(ctx, STG_EINTR, "interrupted");
	return stg__fail(ctx, STG_EREMOTE,
	                 "'%s' is served on %u of the job's %u other nodes: the step that "
	                 "serves it %s",
	                 env_dir, ready, n,
	                 r < 0 ? "did not say it was ready in time" : "ended first");
}

/* The env's pack into the cache of every node of the job, the shared
 * filesystem read once (stg_stage_all_nodes), once the env is known to
 * be servable (else that error).  A fan-out that fails, on some nodes or
 * all, is said in the log, not an error: the servers of the nodes it did
 * not reach read the pack themselves, as a lone `stager env` does. */
static stg_err fill_caches(stg_ctx *ctx, stg_cache *cache, const char *env_dir,
                           const stg_fanout_opts *fo)
{
	stg_err err = stg__env_servable(ctx, env_dir);
	char *pack = err ? NULL : stg_env_pack(env_dir);
	if (err || !pack)
		return err ? err : stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_stage_opts so;
	stg_stage_opts_init(&so);
	so.cache_only = 1;
	so.env = 1;
	stg_fanout_result res;
	stg_err fan = stg_stage_all_nodes(ctx, cache, pack, &so, fo, &res);
	if (fan || res.nodes_err) {
		stg__log(ctx, STG_LOG_WARN,
		         "'%s' did not reach every node's cache in one read%s%s: those nodes read "
		         "it from the shared filesystem",
		         pack, fan ? ": " : "", fan ? stg_errmsg(ctx) : "");
	} else {
		char line[1024];
		stg__log(ctx, STG_LOG_INFO, "'%s' in the caches of %zu nodes in %.2f s: %s", pack,
		         res.n_nodes, res.seconds, stg_fanout_nodes_text(&res, line, sizeof line));
	}
	stg_fanout_result_free(&res);
	free(pack);
	return fan == STG_EINTR ? fan : STG_OK;
}

stg_err stg_env_all_nodes(stg_ctx *ctx, stg_cache *cache, const char *env_dir,
                          const stg_fanout_opts *fo, int *pid)
{
	unsigned nn = stg_job_nodes();
	stg_fanout_opts def;
	if (!fo) {
		stg_fanout_opts_init(&def);
		fo = &def;
	}
	stg_err err = nn < 2 ? STG_OK : fill_caches(ctx, cache, env_dir, fo);
	if (!err)
		err = stg_env_spawn(ctx, cache, env_dir, 0, pid, NULL);
	if (err || nn < 2)
		return err;
	char me[HOST_NAME_MAX + 1];
	stg_node_name(me, sizeof me);
	const char *own[] = {"--foreground", "--node-ready", NULL};
	stg_argv a = {0};
	stg__srun_args(&a, nn - 1, NULL, me);
	stg__node_command(&a, fo, "env", own);
	stg__argv_add(&a, "--");
	stg__argv_add(&a, env_dir);
	int out = -1;
	pid_t step = 0;
	err = stg__spawn(ctx, &a, NULL, &out, &step);
	stg__argv_free(&a);
	if (!err && (err = hear_nodes(ctx, out, nn - 1, env_dir))) {
		/* all or nothing: the step's servers end (srun passes SIGTERM on)
		 * and so does this node's */
		char msg[STG_ERRMSG_MAX];
		snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
		kill(step, SIGTERM);
		stg__wait_status(ctx, step);
		kill(*pid, SIGTERM);
		*pid = -1;
		stg__fail(ctx, err, "%s", msg);
	}
	/* the step goes on for the rest of the job; nothing more is read */
	if (out >= 0)
		close(out);
	if (err && step <= 0 && *pid > 0) {
		kill(*pid, SIGTERM);
		*pid = -1;
	}
	return err;
}
