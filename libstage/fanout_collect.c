/*
 * fanout_collect.c - collecting on every node of a job: the per-node
 * collectors of stg_run with all_nodes.
 *
 * For each source to collect, the lead starts one srun step with a
 * collector on every node (stg_node_collect), and waits until each has
 * made its source and said "stager-node ready NODE": only then does the
 * command start, so its tasks find the directory.  The collectors keep
 * their own time (--every); the lead writes "now" on the step's stdin
 * when the early warning comes, and closes it when the command has ended:
 * each node then collects once more and ends.  If Slurm stops the job,
 * the collectors get its SIGTERM themselves and collect once more.
 */
#include "fanout.h"
#include "ctx.h"
#include "fsutil.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

stg_err stg__collectors_start(stg_ctx *ctx, const stg_fanout_opts *fo, const char *src,
                              const char *dest, const stg_collect_opts *co, uint64_t every,
                              stg_collectors *c)
{
	unsigned nn = stg_job_nodes();
	char every_s[32], level_s[16];
	const char *own[8];
	size_t n = 0;
	own[n++] = "--node-ready";
	if (every) {
		snprintf(every_s, sizeof every_s, "%llus", (unsigned long long)every);
		own[n++] = "--every";
		own[n++] = every_s;
	}
	if (co->pack)
		own[n++] = "--pack";
	if (co->level) {
		snprintf(level_s, sizeof level_s, "%d", co->level);
		own[n++] = "--level";
		own[n++] = level_s;
	}
	own[n] = NULL;
	stg_argv a = {0};
	stg__srun_args(&a, nn, NULL, NULL);
	stg__argv_add(&a, "--input=all");
	stg__node_command(&a, fo, "collect", own);
	stg__argv_add(&a, "--");
	stg__argv_add(&a, src);
	stg__argv_add(&a, dest);
	stg_err err = stg__spawn(ctx, &a, &c->in, &c->out, &c->pid);
	stg__argv_free(&a);
	if (err)
		return err;
	char line[512];
	unsigned ready = 0;
	while (ready < nn &&
	       stg__read_line(ctx, c->out, line, sizeof line, STG_STEP_START_TIMEOUT) == 1) {
		char *word, *node, *rest;
		if (stg__node_line(line, &word, &node, &rest) && !strcmp(word, "ready"))
			ready++;
	}
	if (ready < nn) {
		close(c->in);
		kill(c->pid, SIGTERM);
		stg__wait_status(ctx, c->pid);
		close(c->out);
		c->pid = 0;
		return stg__fail(ctx, STG_EIO,
		                 "the collectors for '%s' did not start on all %u nodes (%u did)",
		                 src, nn, ready);
	}
	return STG_OK;
}

void stg__collectors_now(stg_ctx *ctx, stg_collectors *c)
{
	if (!stg__say(c->in, "now\n"))
		stg__log(ctx, STG_LOG_DEBUG, "the collectors are gone: %s", strerror(errno));
}

stg_err stg__collectors_end(stg_ctx *ctx, stg_collectors *c)
{
	close(c->in); /* the end: each collects once more and ends */
	int st = stg__wait_status(ctx, c->pid);
	close(c->out);
	c->pid = 0;
	return stg__step_err(st, false);
}

stg_err stg__collectors_ended(stg_collectors *c, int status)
{
	close(c->in);
	close(c->out);
	c->pid = 0;
	return stg__step_err(status, false);
}

stg_err stg_node_collect(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                         const stg_collect_opts *opts, uint64_t every, int in, int out,
                         stg_collect_totals *t)
{
	if (stg__mkdirs(src, 0700)) {
		stg_err err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s'", src);
		stg__log(ctx, STG_LOG_ERROR, "%s", ctx->errmsg);
		return err;
	}
	char me[HOST_NAME_MAX + 1];
	stg__tell(out, "stager-node ready %s\n", stg_node_name(me, sizeof me));
	/* without --every: only when told, and at the end */
	return stg_collect_every(ctx, cache, src, dest, opts, every ? every : UINT32_MAX, in, t);
}
