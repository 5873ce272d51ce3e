/*
 * run.c - stg_run: a batch job's wrapper.  Stage, export, run the command
 * (run_supervise.c), collect, keep what could not be collected, clean
 * what it made.
 *
 * Invariants.  Everything stg_run makes on scratch (links into the cache,
 * collect sources it created, its job directory, its pins) is removed when
 * it returns, unless results in it were not all collected: those move to
 * kept/ (stg_keep_results), named in the log, and the record made before
 * the command started (stg_results_pending) lets stg_clean do the same if
 * stg_run itself is killed.  The command starts only once every stage
 * and every collect source is in place.  The final collect runs in this
 * process at normal priority while a thread takes the signals
 * (sigwatch.c): the first terminating signal is already counted if one
 * stopped the command, the second cancels the collect, whose files are
 * each whole or absent.  Every failure is told through the log as it
 * happens (stg_run goes on after most of them), so the caller need not
 * tell the one returned.
 */
#include "run_env.h"
#include "run_mount.h"
#include "run_supervise.h"
#include "run_budget.h"

#include "sigwatch.h"
#include "ctx.h"
#include "fsutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void stg_run_opts_init(stg_run_opts *opts)
{
	memset(opts, 0, sizeof *opts);
	stg_collect_opts_init(&opts->collect);
	stg_fanout_opts_init(&opts->fanout);
	opts->every = STG_RUN_EVERY_DEFAULT;
	opts->grace = 5;
}

/* A failure, told in the log (its detail is on ctx). */
static stg_err told(stg_ctx *ctx, stg_err err)
{
	stg__log(ctx, STG_LOG_ERROR, "%s", *ctx->errmsg ? ctx->errmsg : stg_strerror(err));
	return err;
}

/* STAGER_DATA with a trailing '/': find, du and cp -r see the dataset, not
 * the link to it (as stager stage prints it) */
static void export_data(size_t i, const char *path)
{
	size_t n = strlen(path);
	char *v = malloc(n + 2);
	if (!v)
		return;
	snprintf(v, n + 2, "%s%s", path, n && path[n - 1] == '/' ? "" : "/");
	stg__run_export("STAGER_DATA", i, v);
	free(v);
}

/* Where the job's scratch is: $SLURM_TMPDIR (job_tmpdir_var), else our
 * own job directory. */
static int job_directory(run_state *r)
{
	const char *t = stg_job_tmpdir(r->cache, NULL);
	if (t) {
		r->jobdir = strdup(t);
		return r->jobdir ? 0 : -1;
	}
	const char *who = r->owner;
	char job[160];
	if (!who) {
		snprintf(job, sizeof job, "job-%s", getenv("SLURM_JOB_ID"));
		who = job;
	}
	size_t n = strlen(stg_cache_root(r->cache)) + strlen(who) + 8;
	if (!(r->jobdir = malloc(n)))
		return -1;
	snprintf(r->jobdir, n, "%s/jobs/%s", stg_cache_root(r->cache), who);
	if (mkdir(r->jobdir, 0700) == 0)
		r->own_jobdir = true;
	else if (errno != EEXIST)
		return -1;
	return 0;
}

/* One stage on every node: its path into p->dest. */
static stg_err stage_everywhere(run_state *r, run_pair *p, const stg_stage_opts *so)
{
	stg_fanout_result fr;
	stg_err err = stg_stage_all_nodes(r->ctx, r->cache, p->src, so, &r->o->fanout, &fr);
	if (err) {
		told(r->ctx, err);
	} else if (fr.nodes_err) {
		err = fr.nodes_err; /* told by the nodes that failed */
	} else if (!fr.path) {
		err = told(r->ctx, stg__fail(r->ctx, STG_EREMOTE,
		                             "the stagers of '%s' on the job's nodes gave no path",
		                             p->src));
	} else {
		/* the line a stage on one node says (stage_all), with how each
		 * node came by the data */
		char how[1024] = "each node read it itself";
		size_t used = 0;
		for (size_t i = 0; fr.pack && i < fr.n_nodes && used < sizeof how - 100; i++)
			used += (size_t)snprintf(how + used, sizeof how - used, "%s%s %s",
			                         i ? ", " : "", fr.nodes[i].name, fr.nodes[i].how);
		stg__log(r->ctx, STG_LOG_INFO, "staged '%s' at '%s' on %u nodes (%.2f s): %s",
		         p->src, fr.path, stg_job_nodes(), fr.seconds, how);
		free(p->dest);
		p->dest = fr.path;
		p->staged = true;
		fr.path = NULL;
	}
	stg_fanout_result_free(&fr);
	return err;
}

static stg_err stage_all(run_state *r)
{
	for (size_t i = 0; i < r->n_stages; i++) {
		run_pair *p = &r->stages[i];
		stg_stage_opts so;
		stg_stage_opts_init(&so);
		so.owner = r->owner;
		char *dest = p->dest ? stg__run_in_jobdir(r, p->dest) : NULL;
		if (p->dest && !dest)
			return told(r->ctx, stg__fail(r->ctx, STG_ENOMEM, "out of memory"));
		so.dest = dest;
		if (r->all_nodes) {
			stg_err err = stage_everywhere(r, p, &so);
			free(dest);
			if (err)
				return err;
			export_data(i, p->dest);
			continue;
		}
		stg_stage_result res;
		stg_err err = stg_stage(r->ctx, r->cache, p->src, &so, &res);
		free(dest);
		if (err)
			return told(r->ctx, err);
		free(p->dest);
		if (!(p->dest = strdup(res.path))) {
			stg_stage_result_free(&res);
			return told(r->ctx, stg__fail(r->ctx, STG_ENOMEM, "out of memory"));
		}
		p->staged = true;
		export_data(i, res.path);
		char a[16];
		stg__log(r->ctx, STG_LOG_INFO, "%s '%s' at '%s' (%s, %.2f s)",
		         res.hit ? "cached" : "staged", p->src, res.path,
		         stg_format_size(res.content_bytes, a, sizeof a), res.seconds);
		stg_stage_result_free(&res);
	}
	return STG_OK;
}

static stg_err prepare_outputs(run_state *r)
{
	for (size_t i = 0; i < r->n_collects; i++) {
		run_pair *p = &r->collects[i];
		char *abs = stg__run_in_jobdir(r, p->src);
		if (!abs)
			return told(r->ctx, stg__fail(r->ctx, STG_ENOMEM, "out of memory"));
		free(p->src);
		p->src = abs;
		struct stat st;
		if (r->all_nodes) {
			/* a collector on every node makes it, and collects it
			 * (periodically, at the early warning, when stopped) */
			p->made = stat(abs, &st) != 0;
			stg_err err = stg__collectors_start(r->ctx, &r->o->fanout, abs, p->dest,
			                                    &r->co, r->every, &p->step);
			if (err)
				return told(r->ctx, err);
		} else if (stat(abs, &st)) {
			if (stg__mkdirs(abs, 0700))
				return told(r->ctx, stg__fail_errno(r->ctx, STG_EIO, errno,
				                                    "cannot create '%s'", abs));
			p->made = true;
		} else if (!S_ISDIR(st.st_mode)) {
			return told(r->ctx, stg__fail(r->ctx, STG_EUSAGE,
			                              "--collect: '%s' is not a directory", abs));
		}
		stg__run_export("STAGER_OUT", i, abs);
	}
	return STG_OK;
}

/* Say what this job is to collect, before its command starts: if the job
 * or stager is killed before a last collect sent everything (KillWait's
 * SIGKILL), clean moves the results to kept/ instead of removing them. */
static stg_err record_results(run_state *r)
{
	if (!r->n_collects || r->all_nodes)
		return STG_OK;
	const char *job = getenv("SLURM_JOB_ID");
	if (r->owner)
		snprintf(r->results_owner, sizeof r->results_owner, "%s", r->owner);
	else
		snprintf(r->results_owner, sizeof r->results_owner, "job-%s", job ? job : "");
	const char **src = calloc(r->n_collects, sizeof *src);
	const char **dest = calloc(r->n_collects, sizeof *dest);
	stg_err err = STG_OK;
	if (!src || !dest) {
		err = told(r->ctx, stg__fail(r->ctx, STG_ENOMEM, "out of memory"));
	} else {
		for (size_t i = 0; i < r->n_collects; i++) {
			src[i] = r->collects[i].src;
			dest[i] = r->collects[i].dest;
		}
		err = stg_results_pending(r->ctx, r->cache, r->results_owner, r->n_collects, src,
		                          dest);
		if (err)
			told(r->ctx, err);
		else
			r->results_recorded = true;
	}
	free(src);
	free(dest);
	return err;
}

static void kept_report(void *arg, const stg_kept *k, stg_err err, const stg_collect_result *res)
{
	(void)res;
	stg_ctx *ctx = arg;
	if (err)
		stg__log(ctx, STG_LOG_ERROR, "kept results '%s' not collected to '%s' yet: %s",
		         k->path, k->dest, ctx->errmsg);
	else
		stg__log(ctx, STG_LOG_INFO,
		         "kept results '%s' (from an earlier job) collected to '%s'", k->path,
		         k->dest);
}

/* Results that earlier jobs on this node could not collect: sent to their
 * DEST by a child at idle I/O priority while the command runs; stg_run
 * waits for it after the command (kept_wait), so that what it announces
 * is done. */
static void collect_kept_in_background(run_state *r)
{
	stg_kept *v;
	size_t n = 0;
	if (stg_kept_list(r->ctx, r->cache, &v, &n) || !n)
		return;
	size_t todo = 0;
	for (size_t i = 0; i < n; i++)
		todo += v[i].dest != NULL;
	stg_kept_free(v, n);
	if (!todo)
		return;
	stg__log(r->ctx, STG_LOG_INFO,
	         "%zu kept result%s of earlier jobs on this node: collecting them to their "
	         "destinations",
	         todo, todo == 1 ? "" : "s");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		stg_io_idle(1);
		_exit(stg_collect_kept(r->ctx, r->cache, &r->co, kept_report, r->ctx) ? 1 : 0);
	}
	if (pid < 0)
		stg__log(r->ctx, STG_LOG_ERROR,
		         "cannot start collecting the kept results (%s): they stay in '%s/kept' "
		         "for `stager collect --kept`",
		         strerror(errno), stg_cache_root(r->cache));
	else
		r->kept = pid;
}

/* The child of collect_kept_in_background, once the command has ended
 * and the job's own results are collected: waited for, since what it
 * announced must not be cut short by stg_run's end (its parent's death
 * stops it), unless the job is stopping (stopped, or a stop signal w
 * counts past before, or ctx cancelled): then it is stopped, what it sent
 * is whole, and the rest stays kept. */
static void kept_wait(run_state *r, stg_sigwatch *w, unsigned before, bool stopped)
{
	bool said = false;
	while (r->kept > 0) {
		pid_t p = waitpid(r->kept, NULL, WNOHANG);
		if (p == r->kept || (p < 0 && errno != EINTR)) {
			r->kept = 0;
			return;
		}
		if (stopped || (w && atomic_load(&w->stops) > before) || stg__cancelled(r->ctx))
			break;
		if (!said)
			stg__log(r->ctx, STG_LOG_INFO,
			         "waiting for the kept results of earlier jobs to reach their "
			         "destinations");
		said = true;
		if (w) {
			struct pollfd pf = {.fd = w->wake, .events = POLLIN};
			if (poll(&pf, 1, 100) > 0)
				stg__sigwatch_drain(w);
		} else {
			usleep(100000);
		}
	}
	if (r->kept <= 0)
		return;
	kill(r->kept, SIGTERM);
	while (waitpid(r->kept, NULL, 0) < 0 && errno == EINTR)
		;
	r->kept = 0;
	stg__log(r->ctx, STG_LOG_ERROR,
	         "the job is stopping: the kept results of earlier jobs were not all collected; "
	         "what is left stays in '%s/kept' for the next `stager run` on this node, or "
	         "`stager collect --kept`",
	         stg_cache_root(r->cache));
}

/* Results that could not all be collected: out of the job's scratch, which
 * goes with the job, into the scratch root's kept/. */
static void keep_results(run_state *r, const run_pair *p)
{
	const char *job = getenv("SLURM_JOB_ID"), *base = strrchr(p->src, '/');
	char name[256], node[128] = "this node";
	base = base ? base + 1 : p->src;
	if (job && *job)
		snprintf(name, sizeof name, "job%s-%s", job, base);
	else
		snprintf(name, sizeof name, "pid%d-%s", (int)getpid(), base);
	const char *nn = getenv("SLURMD_NODENAME");
	if (nn && *nn)
		snprintf(node, sizeof node, "%s", nn);
	else
		gethostname(node, sizeof node - 1);
	char *kept = NULL;
	if (stg_keep_results(r->ctx, r->cache, p->src, name, p->dest, &kept)) {
		stg__log(r->ctx, STG_LOG_ERROR,
		         "the results in '%s' were not all collected, and cannot be kept (%s): "
		         "they go when the job's scratch is removed; collect them now with "
		         "`stager collect %s %s`",
		         p->src, r->ctx->errmsg, p->src, p->dest);
		return;
	}
	stg__log(r->ctx, STG_LOG_ERROR,
	         "the results in '%s' were not all collected: moved to '%s' on %s, kept "
	         "%s days (keep_days); the next `stager run` on %s collects them, or "
	         "`stager collect --kept` in a job on that node (sbatch -w %s)",
	         p->src, kept, node, stg_config_get(r->cfg, "keep_days", NULL), node, node);
	free(kept);
}

/* Remove what run made on scratch: links to the cache, collected outputs,
 * its job directory if empty, its pins. */
static void clean_up(run_state *r)
{
	stg__run_unmount_all(r);
	for (size_t i = 0; i < r->n_collects; i++)
		if (r->collects[i].step.pid > 0) /* stopped early: they collect once more */
			stg__collectors_end(r->ctx, &r->collects[i].step);
	/* only the links stg_run made: a stage that failed or never ran
	 * leaves its DEST (the user's own, maybe) alone */
	for (size_t i = 0; i < r->n_stages; i++) {
		struct stat st;
		const char *d = r->stages[i].dest;
		if (r->stages[i].staged && d && lstat(d, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(d);
	}
	for (size_t i = 0; i < r->n_collects; i++) {
		run_pair *p = &r->collects[i];
		if (!p->made)
			continue;
		if (p->status)
			keep_results(r, p);
		else
			stg__rmtree(p->src);
	}
	if (r->own_jobdir)
		rmdir(r->jobdir); /* only if empty: anything left is kept */
	if (r->owner)
		stg_unpin(r->ctx, r->cache, r->owner);
}

/* The pairs of opts, copied (stg_run rewrites them as it goes). */
static stg_err copy_pairs(run_state *r)
{
	const stg_run_opts *o = r->o;
	r->stages = calloc(o->n_stages + 1, sizeof *r->stages);
	r->collects = calloc(o->n_collects + 1, sizeof *r->collects);
	if (!r->stages || !r->collects)
		return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
	for (; r->n_stages < o->n_stages; r->n_stages++) {
		const stg_run_pair *q = &o->stages[r->n_stages];
		run_pair *p = &r->stages[r->n_stages];
		if (!(p->src = strdup(q->src)) || (q->dest && !(p->dest = strdup(q->dest))))
			return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
	}
	for (; r->n_collects < o->n_collects; r->n_collects++) {
		const stg_run_pair *q = &o->collects[r->n_collects];
		run_pair *p = &r->collects[r->n_collects];
		if (!(p->src = strdup(q->src)) || !(p->dest = strdup(q->dest)))
			return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
	}
	return STG_OK;
}

/* Owner, job directory, the job's clock. */
static stg_err set_up(run_state *r)
{
	const char *job = getenv("SLURM_JOB_ID");
	if (!(job && *job) && !(r->owner = stg_owner_process((int)getpid())))
		return told(r->ctx, stg__fail(r->ctx, STG_ENOMEM, "out of memory"));
	/* in a job: its clock, exec (refused without it where the early
	 * warning would kill the shell), and collects while it runs by
	 * default */
	stg_err err = stg__budget_start(r->ctx, &r->budget, r->n_collects);
	if (err)
		return told(r->ctx, err);
	if (job_directory(r))
		return told(r->ctx, stg__fail_errno(r->ctx, STG_EIO, errno,
		                                    "cannot create the job directory '%s'",
		                                    r->jobdir ? r->jobdir : "?"));
	setenv("STAGER_JOB_DIR", r->jobdir, 1);
	r->every = r->o->every;
	if (r->every == STG_RUN_EVERY_DEFAULT) {
		r->every = stg__budget_default_every(&r->budget);
		if (r->every)
			stg__log(r->ctx, STG_LOG_INFO,
			         "collecting every %llu s while the command runs (--every 0: only "
			         "at the end)",
			         (unsigned long long)r->every);
	}
	if (r->n_collects && !r->all_nodes) {
		r->measured = mmap(NULL, sizeof *r->measured, PROT_READ | PROT_WRITE,
		                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (r->measured == MAP_FAILED)
			r->measured = NULL;
	} else {
		r->budget.active = false;
	}
	return STG_OK;
}

/* Up to the command: stages, outputs, the record of pending results. */
static stg_err prepare(run_state *r)
{
	stg_err err;
	if ((err = stage_all(r)))
		return err;
	/* (a mount's failure is said here: run --mount of a missing pack
	 * used to end with its exit status alone) */
	if ((err = stg__run_mount_all(r)))
		return told(r->ctx, err);
	if ((err = prepare_outputs(r)) || (err = record_results(r)))
		return err;
	/* the sources as prepare_outputs made them (in the job's directory) */
	if (r->budget.active && !(r->srcs = calloc(r->n_collects, sizeof *r->srcs)))
		r->budget.active = false;
	for (size_t i = 0; r->srcs && i < r->n_collects; i++)
		r->srcs[i] = r->collects[i].src;
	return STG_OK;
}

/* The final collect, in this process; a second terminating signal cancels
 * it.  Then the clean-up, still with the signals taken. */
static void finish(run_state *r, const sigset_t *old, bool stopped, stg_run_result *res)
{
	sigset_t during = *old;
	const int taken[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
		sigaddset(&during, taken[i]);
	pthread_sigmask(SIG_SETMASK, &during, NULL);
	stg_sigwatch w;
	unsigned before = stopped ? 1 : 0;
	bool watching = stg__sigwatch_start(&w, r->ctx, before) == 0;
	if (!watching)
		stg__log(r->ctx, STG_LOG_ERROR,
		         "cannot watch for signals during the last collect: %s", strerror(errno));
	if (stopped)
		r->co.slot_wait_max = STG_SLOT_WAIT_STOPPING;
	/* the command has ended: its mounts go first, before KillWait could
	 * take their processes */
	stg__run_unmount_all(r);
	res->collect_err = stg__run_collect_all(r);
	if (watching && atomic_load(&w.stops) > before)
		stopped = true;
	/* everything is on DEST: nothing of this job needs keeping */
	if (!res->collect_err && r->results_recorded &&
	    stg_results_done(r->ctx, r->cache, r->results_owner))
		told(r->ctx, STG_EIO);
	res->stopped = stopped;
	if (stopped || res->status) {
		char how[64] = "was stopped by a signal";
		if (!stopped)
			snprintf(how, sizeof how, "failed (exit %d)", res->status);
		/* (with no --collect, there were none to collect) */
		stg__log(r->ctx, STG_LOG_INFO, "the command %s%s%s", how,
		         r->n_collects ? "; results collected" : "",
		         r->n_collects && res->collect_err ? " only in part (see above)" : "");
	}
	/* the job's own results are safe: now those of earlier jobs, which
	 * a stop signal may cut short too */
	kept_wait(r, watching ? &w : NULL, before, stopped);
	if (watching && atomic_load(&w.stops) > before)
		res->stopped = true;
	clean_up(r);
	if (watching)
		stg__sigwatch_end(&w);
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

static void run_free(run_state *r)
{
	for (size_t i = 0; r->stages && i < r->n_stages; i++) {
		free(r->stages[i].src);
		free(r->stages[i].dest);
	}
	for (size_t i = 0; r->collects && i < r->n_collects; i++) {
		free(r->collects[i].src);
		free(r->collects[i].dest);
	}
	free(r->stages);
	free(r->collects);
	free(r->srcs);
	if (r->measured)
		munmap(r->measured, sizeof *r->measured);
	free(r->owner);
	free(r->jobdir);
}

stg_err stg_run(stg_ctx *ctx, stg_cache *cache, const stg_config *cfg, const stg_run_opts *opts,
                stg_run_result *res)
{
	memset(res, 0, sizeof *res);
	if (opts->n_mounts && opts->all_nodes)
		return told(ctx, stg__fail(ctx, STG_EUSAGE,
		                           "mounts are of this node only: not with all_nodes"));
	if (opts->n_envs && opts->all_nodes)
		return told(ctx,
		            stg__fail(ctx, STG_EUSAGE,
		                      "an env is served on this node only, not with all_nodes: "
		                      "`srun stager run --env ENV -- CMD` serves it on each "
		                      "node of the step"));
	run_state r = {.ctx = ctx, .cache = cache, .cfg = cfg, .o = opts, .co = opts->collect};
	/* in a job of one node, or none, all_nodes changes nothing */
	r.all_nodes = opts->all_nodes && stg_job_nodes() > 1;
	stg_err err;
	if (!opts->argv || !opts->argv[0])
		err = told(ctx, stg__fail(ctx, STG_EUSAGE, "no command to run"));
	else if ((err = copy_pairs(&r)))
		told(ctx, err);
	if (err || (err = set_up(&r)))
		goto out;
	if ((err = prepare(&r))) {
		clean_up(&r);
		goto out;
	}
	collect_kept_in_background(&r);

	/* from here on signals are taken, not handled */
	sigset_t set, old;
	sigemptyset(&set);
	const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&set, sigs[i]);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	fflush(NULL);
	r.cmd = stg__run_start(&r, &old);
	if (r.cmd < 0) {
		err = told(ctx, stg__fail_errno(ctx, STG_EIO, errno, "cannot start '%s'",
		                                opts->argv[0]));
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		kept_wait(&r, NULL, 0, false);
		clean_up(&r);
		goto out;
	}
	bool stopped = false;
	res->status = stg__run_supervise(&r, &set, opts->grace, &stopped);
	stg__run_stop_collector(&r);
	finish(&r, &old, stopped, res);
out:
	run_free(&r);
	return err;
}
