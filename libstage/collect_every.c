/*
 * collect_every.c - collecting again and again while a job runs.
 *
 * stg__collect_round is one collect as a job's log tells it: what was
 * sent, or why not.  stg_collect_every repeats it at idle I/O priority
 * (the job's own reads of scratch come first) until it is told to stop,
 * then collects once more at normal priority: that last collect is what
 * the job keeps, and Slurm's SIGKILL follows its SIGTERM after KillWait
 * (30 s by default), so a shared-FS slot is waited for 10 s at most.
 *
 * Being told: signals, taken by a thread (sigwatch.c) so that a stop
 * during a round lets the round end and still leads to the last collect,
 * and a second stop cancels that; or, for the per-node collectors of
 * stg_run --all-nodes, a control descriptor (the lead's srun step): a line
 * "now" collects at once, its end stops.  An end of the descriptor is not
 * a signal: a signal after it still counts as the first.
 */
#include "collect_every.h"

#include "collect.h"
#include "results.h"
#include "sigwatch.h"
#include "ctx.h"
#include "slurm.h"

#include <stdatomic.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LAST_SLOT_WAIT 10.0 /* s: Slurm's KillWait is 30 s by default */

stg_err stg__collect_round(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                           const stg_collect_opts *o, stg_collect_totals *t)
{
	stg_collect_result res;
	stg_err err = stg_collect(ctx, cache, src, dest, o, &res);
	t->rounds++;
	t->files = res.files;
	t->sent_files += res.sent_files;
	t->sent_bytes += res.sent_bytes;
	t->unchanged = res.unchanged;
	t->retries += res.retries;
	t->failed = res.failed;
	t->changing = res.changing;
	t->seconds += res.seconds;
	if (err) {
		stg__log(ctx, STG_LOG_ERROR, "%s", *ctx->errmsg ? ctx->errmsg : stg_strerror(err));
	} else if (res.sent_files) {
		char a[16];
		stg__log(ctx, STG_LOG_INFO,
		         "collected '%s' to '%s': %llu sent (%s), %llu unchanged, %.2f s", src,
		         res.dest, (unsigned long long)res.sent_files,
		         stg_format_size(res.sent_bytes, a, sizeof a),
		         (unsigned long long)res.unchanged, res.seconds);
	} else {
		stg__log(ctx, STG_LOG_DEBUG, "'%s' unchanged since the last collect to '%s'", src,
		         res.dest);
	}
	stg_collect_result_free(&res);
	t->err = err;
	return err;
}

/* SRC on a mount of the job's own (job_container/tmpfs's private /tmp):
 * Slurm removes it when the job ends, before the epilog, which so cannot
 * keep what did not reach DEST.  When the collect is stopped, a copy of
 * SRC goes to kept/ on the node's scratch first (a local copy: seconds of
 * KillWait), named for the job (the epilog's `collect --kept --job`
 * sends it).  Its name into kept[len] ("" if none was made). */
static void keep_private(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest,
                         const stg_collect_opts *o, const char *job, char *kept, size_t len)
{
	kept[0] = '\0';
	if (stg__collect_whole(ctx, c, src, dest, o->pack) == 1)
		return; /* all of it is in DEST already */
	const char *base = strrchr(src, '/');
	char name[256], *path = NULL;
	snprintf(name, sizeof name, "job%.100s-%.100s", job,
	         base && base[1] ? base + 1 : "results");
	/* the stop that brought us here must not cut the copy short (a
	 * second one still does) */
	sig_atomic_t was = ctx->cancelled;
	ctx->cancelled = 0;
	stg_err err = stg__keep_results(ctx, c, src, name, dest, true, &path);
	if (!ctx->cancelled)
		ctx->cancelled = was;
	if (err) {
		stg__log(ctx, STG_LOG_ERROR,
		         "'%s' is in this job's own mount, which Slurm removes with the job, and "
		         "it cannot be kept on the node: %s",
		         src, ctx->errmsg);
		return;
	}
	if (o->pack)
		stg__kept_set_pack(c, path);
	stg__log(ctx, STG_LOG_WARN,
	         "the job is stopping and '%s' goes with it: a copy is kept in '%s' for '%s' "
	         "(the epilog sends it; or `stager collect --kept`)",
	         src, path, dest);
	snprintf(kept, len, "%s", strrchr(path, '/') + 1);
	free(path);
}

/* The control descriptor has something: "now" asks for a collect; its
 * end (or an error) stops the loop. */
static void control(int fd, unsigned *nows, bool *closed)
{
	char buf[256];
	ssize_t n = read(fd, buf, sizeof buf);
	if (n > 0 && memmem(buf, (size_t)n, "now", 3))
		(*nows)++;
	else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
		*closed = true;
}

stg_err stg_collect_every(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                          const stg_collect_opts *o, uint64_t every, int control_fd,
                          stg_collect_totals *t)
{
	/* in a Slurm job, SRC is noted as results the job has yet to collect:
	 * if Slurm kills this collect (a time limit, KillWait), the epilog's
	 * clean keeps what did not reach DEST instead of removing it with the
	 * job's scratch */
	const char *job = getenv("SLURM_JOB_ID");
	char mnt[256], kept[256] = "";
	bool private =
	        job && *job && strlen(job) < 100 && stg__job_private_mount(src, mnt, sizeof mnt);
	if (private) {
		stg__log(ctx, STG_LOG_WARN,
		         "'%s' is on '%s', a mount of this job's own that Slurm removes with the "
		         "job, before the epilog: if the job is stopped, what is there is copied "
		         "to the node's scratch first (results written under $SLURM_TMPDIR need "
		         "no copy)",
		         src, mnt);
	} else if (job && *job && strlen(job) < 100) {
		char owner[128];
		snprintf(owner, sizeof owner, "job-%s", job);
		if (stg__results_add(ctx, cache, owner, src, dest, o->pack))
			stg__log(ctx, STG_LOG_WARN,
			         "%s: if this job is killed before '%s' is collected, "
			         "the epilog cannot keep it",
			         ctx->errmsg, src);
	}
	if (!every) {
		stg_err err = stg__collect_round(ctx, cache, src, dest, o, t);
		if (err == STG_EINTR && private)
			keep_private(ctx, cache, src, dest, o, job, kept, sizeof kept);
		return err;
	}
	stg_sigwatch w;
	if (stg__sigwatch_start(&w, ctx, 0)) {
		stg_err err = stg__fail_errno(ctx, STG_EIO, errno, "cannot start a thread");
		stg__log(ctx, STG_LOG_ERROR, "%s", ctx->errmsg);
		return err;
	}
	stg_err err = STG_OK;
	unsigned asked = 0; /* "now" lines on control_fd */
	bool closed = false;
	while (!atomic_load(&w.stops) && !closed) {
		stg_io_idle(1);
		double t0 = stg__now();
		unsigned nows = atomic_load(&w.nows) + asked;
		err = stg__collect_round(ctx, cache, src, dest, o, t);
		if (err == STG_EUSAGE || err == STG_EEXIST || err == STG_ENOTSUP ||
		    err == STG_ENOENT)
			goto out; /* will not get better */
		/* sleep until the next round; signals and the lead cut it short */
		for (double left; (left = t0 + (double)every - stg__now()) > 0 &&
		                  !atomic_load(&w.stops) && !closed &&
		                  atomic_load(&w.nows) + asked == nows;) {
			struct pollfd p[2] = {{.fd = w.wake, .events = POLLIN},
			                      {.fd = control_fd, .events = POLLIN}};
			int ms = left > 3600 ? 3600 * 1000 : (int)(left * 1000) + 1;
			if (poll(p, control_fd >= 0 ? 2 : 1, ms) <= 0)
				continue;
			if (p[0].revents)
				stg__sigwatch_drain(&w);
			if (control_fd >= 0 && p[1].revents)
				control(control_fd, &asked, &closed);
		}
	}
	stg_io_idle(0);
	stg__log(ctx, STG_LOG_DEBUG, "stopping: collecting one last time");
	stg_collect_opts last = *o;
	last.slot_wait_max = LAST_SLOT_WAIT;
	if (private && atomic_load(&w.stops))
		keep_private(ctx, cache, src, dest, o, job, kept, sizeof kept);
	err = stg__collect_round(ctx, cache, src, dest, &last, t);
	/* all of it reached DEST: the copy is not needed */
	if (*kept && !err && !t->failed && !t->changing && !stg__kept_remove(cache, kept))
		stg__log(ctx, STG_LOG_INFO,
		         "'%s' reached '%s' whole: the copy kept on the node is removed", src,
		         dest);
out:
	stg__sigwatch_end(&w);
	return err;
}
