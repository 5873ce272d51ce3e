/*
 * cmd_run.c - stager run [--stage SRC[:DEST]]... [--collect SRC:DEST]...
 *                        [--every INTERVAL] [--pack] [--grace TIME] -- CMD...
 *
 * The batch-script wrapper: stage, export, run CMD, pass signals on,
 * collect (periodically, on the early warning, on termination and at the
 * end), clean what it made.
 *
 * While CMD runs, the signals stager cares about are blocked and taken with
 * sigtimedwait(), so nothing happens in a signal handler.  Collections while
 * CMD runs (periodic, early warning, termination) happen in a child process
 * with idle I/O priority, so signals keep being passed on promptly; the
 * final collection happens here at normal priority, and a second
 * terminating signal during it interrupts it (what it already sent stays
 * complete).
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OPT_STAGE = OPT_FIRST_LOCAL, OPT_COLLECT, OPT_EVERY, OPT_PACK, OPT_GRACE, OPT_ALLNODES };

typedef struct pair {
	char *src, *dest; /* malloc'ed */
	bool made;        /* run created src (and removes it once collected) */
	int status;       /* of its last collect */
	pid_t step;       /* --all-nodes: the step of its collectors */
	int step_in, step_out;
} pair;

typedef struct run_state {
	stg_ctx *ctx;
	stg_cache *cache;
	pair *stages, *collects;
	size_t n_stages, n_collects;
	char *owner;             /* pins and job directory: NULL under Slurm (the job's) */
	char results_owner[160]; /* of the results record: owner, or job-ID */
	const stg_config *cfg;
	bool results_recorded;
	char *jobdir; /* malloc'ed */
	bool own_jobdir;
	stg_collect_opts co;
	pid_t cmd, collector;
	bool all_nodes; /* on every node of the job (srun steps) */
	uint64_t every;
	run_budget budget; /* the job's clock (budget.c) */
	char **srcs;       /* the collects' sources, for the budget */
	/* what the collector child measured, shared with it */
	struct measured {
		uint64_t bytes;
		double secs, started;
	} * measured;
} run_state;

/* A job being stopped has until Slurm's KillWait (30 s by default) before
 * SIGKILL: its collect waits this long at most for a shared-FS slot. */
#define SLOT_WAIT_STOPPING 10.0

/* --every not given: under Slurm a default (budget.c), else none */
#define EVERY_UNSET UINT64_MAX

static volatile sig_atomic_t final_signals;
static stg_ctx *volatile final_ctx;

static void on_final_signal(int sig)
{
	(void)sig;
	if (++final_signals > 1 && final_ctx)
		stg_cancel(final_ctx);
}

/* --stage SRC[:DEST]: split at the last ':', and a SRC whose own name has
 * a ':' is taken whole if it exists. */
static int split_stage(const char *arg, pair *p)
{
	const char *colon = strrchr(arg, ':');
	struct stat st;
	if (colon && stat(arg, &st) == 0)
		colon = NULL;
	p->src = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
	p->dest = colon && colon[1] ? strdup(colon + 1) : NULL;
	return p->src && *p->src ? 0 : -1;
}

/* --collect SRC:DEST: split at the first ':' not escaped as '\:' (SRC is a
 * name in the job directory; DEST may have colons: timestamps).  Refused
 * when another split would name a SRC that exists: it could be read two
 * ways.  NULL, or what is wrong. */
static const char *split_collect(const char *arg, pair *p)
{
	size_t n = strlen(arg);
	char *src = malloc(n + 1), *o = src;
	const char *q = arg;
	if (!src)
		return "out of memory";
	for (; *q && *q != ':'; q++) {
		if (q[0] == '\\' && q[1] == ':')
			q++;
		*o++ = *q;
	}
	*o = '\0';
	if (*q != ':' || !*src || !q[1]) {
		free(src);
		return "is not SRC:DEST (a ':' in SRC is written '\\:')";
	}
	for (const char *c = strchr(q + 1, ':'); c; c = strchr(c + 1, ':')) {
		char *other = strndup(arg, (size_t)(c - arg));
		struct stat st;
		bool exists = other && stat(other, &st) == 0 && strchr(other, '\\') == NULL;
		free(other);
		if (exists) {
			free(src);
			return "could be read two ways: a SRC with a ':' exists; write the ':' in "
			       "SRC "
			       "as '\\:'";
		}
	}
	p->src = src;
	p->dest = strdup(q + 1);
	return p->dest ? NULL : "out of memory";
}

/* path made absolute against the job directory. */
static char *in_jobdir(const run_state *r, const char *path)
{
	if (path[0] == '/')
		return strdup(path);
	size_t n = strlen(r->jobdir) + strlen(path) + 2;
	char *out = malloc(n);
	if (out)
		snprintf(out, n, "%s/%s", r->jobdir, path);
	return out;
}

static void export_numbered(const char *base, size_t i, const char *value);

/* STAGER_DATA with a trailing '/': find, du and cp -r see the dataset, not
 * the link to it (as stager stage prints it) */
static void export_data(size_t i, const char *path)
{
	size_t n = strlen(path);
	char *v = malloc(n + 2);
	if (!v)
		return;
	snprintf(v, n + 2, "%s%s", path, n && path[n - 1] == '/' ? "" : "/");
	export_numbered("STAGER_DATA", i, v);
	free(v);
}

static void export_numbered(const char *base, size_t i, const char *value)
{
	char name[64];
	if (i == 0)
		snprintf(name, sizeof name, "%s", base);
	else
		snprintf(name, sizeof name, "%s_%zu", base, i + 1);
	setenv(name, value, 1);
}

/* Whether process pid has a handler for sig (its SigCgt in /proc). */
static bool catches(pid_t pid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	unsigned long long mask = 0;
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = sscanf(line, "SigCgt: %llx", &mask) == 1;
	fclose(f);
	return found && (mask >> (sig - 1) & 1);
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

static int stage_all(run_state *r)
{
	for (size_t i = 0; i < r->n_stages; i++) {
		pair *p = &r->stages[i];
		stg_stage_opts so;
		stg_stage_opts_init(&so);
		so.owner = r->owner;
		char *dest = p->dest ? in_jobdir(r, p->dest) : NULL;
		if (p->dest && !dest)
			return EXIT_IO;
		so.dest = dest;
		if (r->all_nodes) {
			const char *fwd[16];
			size_t nf = cli_global_args(fwd);
			fwd[nf++] = "--";
			fwd[nf++] = p->src;
			if (dest)
				fwd[nf++] = dest;
			fwd[nf] = NULL;
			char *path = NULL;
			int rc = cli_stage_all_nodes(r->ctx, r->cache, p->src, &so, fwd, 0, &path);
			free(dest);
			if (rc > 0 || !path) {
				free(path);
				return rc > 0 ? rc : EXIT_IO;
			}
			free(p->dest);
			p->dest = path;
			export_data(i, path);
			continue;
		}
		stg_stage_result res;
		stg_err err = stg_stage(r->ctx, r->cache, p->src, &so, &res);
		free(dest);
		if (err)
			return cli_fail(r->ctx, err);
		free(p->dest);
		p->dest = strdup(res.path);
		export_data(i, res.path);
		char a[16];
		cli_info("%s '%s' at '%s' (%s, %.2f s)", res.hit ? "cached" : "staged", p->src,
		         res.path, stg_format_size(res.content_bytes, a, sizeof a), res.seconds);
		stg_stage_result_free(&res);
	}
	return EXIT_OK;
}

static int prepare_outputs(run_state *r)
{
	for (size_t i = 0; i < r->n_collects; i++) {
		pair *p = &r->collects[i];
		char *abs = in_jobdir(r, p->src);
		if (!abs)
			return EXIT_IO;
		free(p->src);
		p->src = abs;
		struct stat st;
		if (r->all_nodes) {
			/* a collector on every node makes it, and collects it
			 * (periodically, at the early warning, when stopped) */
			p->made = stat(abs, &st) != 0;
			p->step = cli_node_collectors(abs, p->dest, &r->co, r->every, &p->step_in,
			                              &p->step_out);
			if (p->step < 0)
				return EXIT_IO;
		} else if (stat(abs, &st)) {
			if (cli_mkdirs(abs)) {
				cli_error("cannot create '%s': %s", abs, strerror(errno));
				return EXIT_IO;
			}
			p->made = true;
		} else if (!S_ISDIR(st.st_mode)) {
			cli_error("--collect: '%s' is not a directory", abs);
			return EXIT_USAGE;
		}
		export_numbered("STAGER_OUT", i, abs);
	}
	return EXIT_OK;
}

/* Collect every pair once (in this process; with --all-nodes, stop every
 * node's collectors, which collect one last time); the worst status. */
static int collect_all(run_state *r)
{
	int rc = EXIT_OK;
	if (r->measured)
		r->measured->started = budget_wall();
	for (size_t i = 0; i < r->n_collects; i++) {
		pair *p = &r->collects[i];
		if (r->all_nodes) {
			if (p->step > 0) {
				p->status =
				        cli_node_collectors_end(p->step, p->step_in, p->step_out);
				p->step = 0;
				if (p->status)
					cli_error("collecting '%s' on some nodes failed (exit %d); "
					          "see "
					          "above",
					          p->src, p->status);
			}
			if (p->status && !rc)
				rc = p->status;
			continue;
		}
		collect_totals t = {0};
		p->status = cli_collect_once(r->ctx, r->cache, p->src, p->dest, &r->co, &t);
		if (r->measured) {
			r->measured->bytes += t.sent_bytes;
			r->measured->secs += t.seconds;
		}
		if (p->status && !rc)
			rc = p->status;
	}
	return rc;
}

/* Start a collection in a child (idle I/O priority) unless one runs. */
static void collect_in_background(run_state *r, const char *why)
{
	if (r->all_nodes) {
		/* every node's collector collects now */
		for (size_t i = 0; i < r->n_collects; i++)
			if (r->collects[i].step > 0)
				cli_node_collectors_now(r->collects[i].step_in);
		return;
	}
	if (r->collector > 0 || !r->n_collects)
		return;
	if (g_opts.verbose)
		cli_info("collecting (%s)", why);
	pid_t pid = fork();
	if (pid < 0) {
		cli_error("cannot fork a collector: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		stg_io_idle(1);
		_exit(collect_all(r));
	}
	r->collector = pid;
}

/* The collector child ended: what it sent, and how fast, for the budget. */
static void collector_measured(run_state *r)
{
	if (!r->measured)
		return;
	budget_measured(&r->budget, r->measured->bytes, r->measured->secs, r->measured->started);
	memset(r->measured, 0, sizeof *r->measured);
}

static void stop_collector(run_state *r)
{
	if (r->collector <= 0)
		return;
	/* what it has sent is complete; the final collect does the rest */
	kill(r->collector, SIGTERM);
	waitpid(r->collector, NULL, 0);
	r->collector = 0;
	collector_measured(r);
}

static pid_t start_cmd(char **argv, const sigset_t *old)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	sigprocmask(SIG_SETMASK, old, NULL);
	/* if stager dies, so does the command (outside Slurm nothing else
	 * would stop it) */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	execvp(argv[0], argv);
	int e = errno;
	cli_error("cannot run '%s': %s", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* If pid was p's collector step (--all-nodes), it ended before we stopped
 * it: Slurm stopped the job (each node collected: status 0), or it failed. */
static void collector_ended(pair *p, pid_t pid, int st)
{
	if (pid != p->step)
		return;
	int cs = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	p->step = 0;
	p->status = cs == 0 ? EXIT_OK : cs >= EXIT_SOURCE && cs <= EXIT_IO ? cs : EXIT_REMOTE;
	close(p->step_in);
	close(p->step_out);
	if (cs)
		cli_error("the collectors of '%s' ended early (status %d)", p->src, cs);
}

/* Wait for CMD, passing signals on and collecting as asked.  Returns CMD's
 * status as a shell reports it; *stopped says whether a terminating
 * signal reached stager. */
static int supervise(run_state *r, const sigset_t *set, uint64_t every, double grace, bool *stopped)
{
	double next = every ? cli_now() + (double)every : 0, deadline = 0;
	int status = 0;
	for (;;) {
		double t = cli_now(), wake = 3600;
		if (next)
			wake = next - t;
		if (deadline && deadline - t < wake)
			wake = deadline - t;
		double check = budget_next_check(&r->budget);
		if (check && check - t < wake)
			wake = check - t;
		if (wake < 0)
			wake = 0;
		struct timespec ts = {(time_t)wake, (long)((wake - (double)(time_t)wake) * 1e9)};
		siginfo_t si;
		int sig = sigtimedwait(set, &si, &ts);
		if (sig < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (sig == SIGCHLD || sig < 0) {
			int st;
			pid_t pid;
			while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
				for (size_t i = 0; i < r->n_collects; i++)
					collector_ended(&r->collects[i], pid, st);
				if (pid == r->collector) {
					r->collector = 0;
					collector_measured(r);
				} else if (pid == r->cmd) {
					status = WIFEXITED(st) ? WEXITSTATUS(st)
					                       : 128 + WTERMSIG(st);
					r->cmd = 0;
				}
			}
			if (!r->cmd)
				return status;
		}
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
			*stopped = true;
			/* from now on every collect is the job's last chance */
			r->co.slot_wait_max = SLOT_WAIT_STOPPING;
			/* a terminal's ^C already reached the whole process group */
			if (si.si_code != SI_KERNEL)
				kill(r->cmd, sig);
			if (!deadline)
				deadline = cli_now() + grace;
			cli_info("%s: passed to the command; collecting results", strsignal(sig));
		} else if (sig == SIGUSR1 || sig == SIGUSR2) {
			/* by default SIGUSR1 kills: pass it on only to a command that
			 * asks for it (one that checkpoints on the warning) */
			bool pass = catches(r->cmd, sig);
			if (pass)
				kill(r->cmd, sig);
			cli_info("%s (early warning): collecting results now%s", strsignal(sig),
			         pass ? "; passed to the command"
			              : " (not passed to the command, which does not handle it)");
			collect_in_background(r, "early warning");
		}
		t = cli_now();
		if (deadline && t >= deadline) {
			/* the command takes its time: save what is there already */
			collect_in_background(r, "stopping");
			deadline = 0;
		}
		if (next && t >= next) {
			collect_in_background(r, "periodic");
			next = t + (double)every;
		}
		/* the time limit nears and the last collect would not fit */
		if (budget_due(&r->budget, r->srcs, r->n_collects))
			collect_in_background(r, "before the time limit");
	}
	return status;
}

/* Results that could not all be collected: out of the job's scratch, which
 * goes with the job, into the scratch root's kept/. */
static void keep_results(run_state *r, const pair *p)
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
		cli_error("the results in '%s' were not all collected, and cannot be kept (%s): "
		          "they go when the job's scratch is removed; collect them now with "
		          "`stager collect %s %s`",
		          p->src, stg_errmsg(r->ctx), p->src, p->dest);
		return;
	}
	cli_error("the results in '%s' were not all collected: moved to '%s' on %s, kept "
	          "%s days (keep_days); the next `stager run` on %s collects them, or "
	          "`stager collect --kept` in a job on that node (sbatch -w %s)",
	          p->src, kept, node, stg_config_get(r->cfg, "keep_days", NULL), node, node);
	free(kept);
}

/* Remove what run made on scratch: links to the cache, collected outputs,
 * its job directory if empty, its pins. */
static void clean_up(run_state *r)
{
	for (size_t i = 0; i < r->n_collects; i++)
		if (r->collects[i].step > 0) /* stopped early: they collect once more */
			cli_node_collectors_end(r->collects[i].step, r->collects[i].step_in,
			                        r->collects[i].step_out);
	for (size_t i = 0; i < r->n_stages; i++) {
		struct stat st;
		const char *d = r->stages[i].dest;
		if (d && lstat(d, &st) == 0 && S_ISLNK(st.st_mode))
			unlink(d);
	}
	for (size_t i = 0; i < r->n_collects; i++) {
		pair *p = &r->collects[i];
		if (!p->made)
			continue;
		if (p->status) {
			keep_results(r, p);
			continue;
		}
		char *argv[] = {"rm", "-rf", "--", p->src, NULL};
		pid_t pid = fork();
		if (pid == 0) {
			execvp("rm", argv);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	if (r->own_jobdir)
		rmdir(r->jobdir); /* only if empty: anything left is kept */
	if (r->owner)
		stg_unpin(r->ctx, r->cache, r->owner);
}

/* Say what this job is to collect, before its command starts: if the job
 * or stager is killed before a last collect sent everything (KillWait's
 * SIGKILL), clean moves the results to kept/ instead of removing them. */
static int record_results(run_state *r)
{
	if (!r->n_collects || r->all_nodes)
		return EXIT_OK;
	const char *job = getenv("SLURM_JOB_ID");
	if (r->owner)
		snprintf(r->results_owner, sizeof r->results_owner, "%s", r->owner);
	else
		snprintf(r->results_owner, sizeof r->results_owner, "job-%s", job ? job : "");
	const char **src = calloc(r->n_collects, sizeof *src);
	const char **dest = calloc(r->n_collects, sizeof *dest);
	int rc = EXIT_OK;
	if (!src || !dest) {
		rc = EXIT_IO;
	} else {
		for (size_t i = 0; i < r->n_collects; i++) {
			src[i] = r->collects[i].src;
			dest[i] = r->collects[i].dest;
		}
		stg_err err = stg_results_pending(r->ctx, r->cache, r->results_owner, r->n_collects,
		                                  src, dest);
		if (err)
			rc = cli_fail(r->ctx, err);
		else
			r->results_recorded = true;
	}
	free(src);
	free(dest);
	return rc;
}

static void kept_report(void *arg, const stg_kept *k, stg_err err, const stg_collect_result *res)
{
	(void)res;
	if (err)
		cli_error("kept results '%s' not collected to '%s' yet: %s", k->path, k->dest,
		          stg_errmsg(arg));
	else
		cli_info("kept results '%s' (from an earlier job) collected to '%s'", k->path,
		         k->dest);
}

/* Results that earlier jobs on this node could not collect: sent to their
 * DEST by a child at idle I/O priority while the command runs. */
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
	cli_info("%zu kept result%s of earlier jobs on this node: collecting them to their "
	         "destinations",
	         todo, todo == 1 ? "" : "s");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		stg_io_idle(1);
		_exit(stg_collect_kept(r->ctx, r->cache, &r->co, kept_report, r->ctx) ? 1 : 0);
	}
}

static int parse(int argc, char **argv, run_state *r, uint64_t *every, double *grace)
{
	static const struct option lo[] = {
	        {"stage", required_argument, NULL, OPT_STAGE},
	        {"collect", required_argument, NULL, OPT_COLLECT},
	        {"every", required_argument, NULL, OPT_EVERY},
	        {"pack", no_argument, NULL, OPT_PACK},
	        {"grace", required_argument, NULL, OPT_GRACE},
	        {"all-nodes", no_argument, NULL, OPT_ALLNODES},
	        CLI_GLOBAL_OPTIONS,
	        {NULL, 0, NULL, 0},
	};
	int c, rc;
	uint64_t g;
	while ((c = getopt_long(argc, argv, "+hqv", lo, NULL)) != -1) {
		rc = cli_global_option(c, optarg);
		if (rc >= 0)
			return rc;
		if (rc == -2)
			continue;
		switch (c) {
		case OPT_STAGE:
			if (split_stage(optarg, &r->stages[r->n_stages++]))
				return cli_usage("--stage: '%s' is not SRC or SRC:DEST", optarg);
			break;
		case OPT_COLLECT: {
			pair *p = &r->collects[r->n_collects++];
			const char *why = split_collect(optarg, p);
			if (why)
				return cli_usage("--collect: '%s' %s", optarg, why);
			break;
		}
		case OPT_EVERY:
			/* 0: only at the end (no periodic collects in a job) */
			if (stg_parse_duration(optarg, every))
				return cli_usage("--every: '%s' is not a time interval (e.g. 10m)",
				                 optarg);
			break;
		case OPT_GRACE:
			if (stg_parse_duration(optarg, &g))
				return cli_usage("--grace: '%s' is not a time (e.g. 5s)", optarg);
			*grace = (double)g;
			break;
		case OPT_PACK: r->co.pack = 1; break;
		case OPT_ALLNODES: r->all_nodes = true; break;
		default: return cli_usage("unexpected option");
		}
	}
	if (optind >= argc)
		return cli_usage("what to run? stager run [OPTIONS] -- CMD [ARG]...");
	if (*every != EVERY_UNSET && *every && !r->n_collects)
		return cli_usage("--every needs something to collect (--collect SRC:DEST)");
	if (r->all_nodes) {
		unsigned nn = cli_job_nodes();
		if (!nn)
			return cli_usage("--all-nodes works inside a Slurm allocation (sbatch, "
			                 "salloc); SLURM_JOB_ID is not set");
		r->all_nodes = nn > 1;
		for (size_t i = 0; r->all_nodes && r->co.pack && i < r->n_collects; i++)
			if (!strstr(r->collects[i].dest, "%n") &&
			    !strstr(r->collects[i].dest, "%N"))
				return cli_usage(
				        "--all-nodes --pack: put %%N (the node's name) or %%n "
				        "(its index) in DEST, one pack per node: '%s'",
				        r->collects[i].dest);
	}
	/* sbatch's patterns in DEST (%j, %a, %N, ...); with --all-nodes each
	 * node's collector fills in its own */
	stg_ctx *pctx = stg_ctx_new();
	for (size_t i = 0; pctx && i < r->n_collects; i++) {
		char *d = NULL;
		stg_err e = stg_expand_pattern(pctx, r->collects[i].dest, &d);
		if (e) {
			int st = e == STG_EUSAGE ? cli_usage("--collect: DEST %s", stg_errmsg(pctx))
			                         : cli_fail(pctx, e);
			stg_ctx_free(pctx);
			return st;
		}
		if (r->all_nodes)
			free(d); /* checked here; expanded on each node */
		else {
			free(r->collects[i].dest);
			r->collects[i].dest = d;
		}
	}
	stg_ctx_free(pctx);
	if (!pctx)
		return EXIT_IO;
	return -1;
}

int cmd_run(int argc, char **argv)
{
	run_state r = {0};
	stg_collect_opts_init(&r.co);
	r.stages = calloc((size_t)argc, sizeof *r.stages);
	r.collects = calloc((size_t)argc, sizeof *r.collects);
	uint64_t every = EVERY_UNSET;
	double grace = 5;
	int rc = r.stages && r.collects ? parse(argc, argv, &r, &every, &grace) : EXIT_IO;
	stg_config *cfg = NULL;
	if (rc >= 0)
		goto out;
	r.ctx = cli_ctx();
	cfg = cli_config(r.ctx);
	r.cfg = cfg;
	if (!(r.cache = cli_cache(r.ctx, cfg, &rc)))
		goto out;
	const char *job = getenv("SLURM_JOB_ID");
	if (!(job && *job) && !(r.owner = stg_owner_process((int)getpid()))) {
		rc = EXIT_IO;
		goto out;
	}
	if (job_directory(&r)) {
		cli_error("cannot create the job directory '%s': %s", r.jobdir ? r.jobdir : "?",
		          strerror(errno));
		rc = EXIT_IO;
		goto out;
	}
	setenv("STAGER_JOB_DIR", r.jobdir, 1);
	/* in a job: its clock, exec, and collects while it runs by default */
	budget_start(&r.budget, r.n_collects);
	if (every == EVERY_UNSET) {
		every = budget_default_every(&r.budget);
		if (every)
			cli_info("collecting every %llu s while the command runs (--every 0: only "
			         "at the end)",
			         (unsigned long long)every);
	}
	r.every = every;
	if (r.n_collects && !r.all_nodes) {
		r.measured = mmap(NULL, sizeof *r.measured, PROT_READ | PROT_WRITE,
		                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (r.measured == MAP_FAILED)
			r.measured = NULL;
	} else {
		r.budget.active = false;
	}
	if ((rc = stage_all(&r)) || (rc = prepare_outputs(&r)) || (rc = record_results(&r)))
		goto cleanup;
	/* the sources as prepare_outputs made them (in the job's directory) */
	if (r.budget.active && !(r.srcs = calloc(r.n_collects, sizeof *r.srcs)))
		r.budget.active = false;
	for (size_t i = 0; r.srcs && i < r.n_collects; i++)
		r.srcs[i] = r.collects[i].src;
	collect_kept_in_background(&r);

	/* from here on signals are taken, not handled */
	sigset_t set, old;
	sigemptyset(&set);
	int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaddset(&set, sigs[i]);
	sigprocmask(SIG_BLOCK, &set, &old);
	fflush(NULL);
	r.cmd = start_cmd(argv + optind, &old);
	if (r.cmd < 0) {
		cli_error("cannot start '%s': %s", argv[optind], strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		rc = EXIT_IO;
		goto cleanup;
	}
	bool stopped = false;
	/* with --all-nodes the collectors keep their own time */
	int status = supervise(&r, &set, r.all_nodes ? 0 : every, grace, &stopped);
	stop_collector(&r);

	/* the final collect; a second terminating signal interrupts it */
	final_ctx = r.ctx;
	final_signals = stopped ? 1 : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_final_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (stopped)
		r.co.slot_wait_max = SLOT_WAIT_STOPPING;
	int crc = collect_all(&r);
	if (final_signals > (stopped ? 1 : 0))
		stopped = true;
	/* everything is on DEST: nothing of this job needs keeping */
	if (!crc && r.results_recorded && stg_results_done(r.ctx, r.cache, r.results_owner))
		cli_error("%s", stg_errmsg(r.ctx));
	rc = stopped ? EXIT_INTERRUPTED : status ? status : crc;
	if (stopped || status)
		cli_info("the command %s; results collected%s",
		         stopped ? "was stopped by a signal" : "failed",
		         crc ? " only in part (see above)" : "");
cleanup:
	clean_up(&r);
out:
	for (size_t i = 0; r.stages && i < r.n_stages; i++) {
		free(r.stages[i].src);
		free(r.stages[i].dest);
	}
	for (size_t i = 0; r.collects && i < r.n_collects; i++) {
		free(r.collects[i].src);
		free(r.collects[i].dest);
	}
	free(r.stages);
	free(r.collects);
	free(r.srcs);
	if (r.measured)
		munmap(r.measured, sizeof *r.measured);
	free(r.owner);
	free(r.jobdir);
	stg_cache_close(r.cache);
	stg_config_free(cfg);
	if (r.ctx)
		cli_ctx_done(r.ctx);
	return rc;
}
