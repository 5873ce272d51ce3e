/*
 * run_budget.c - stg_run's time budget inside a Slurm job.
 *
 * At the time limit Slurm sends SIGTERM and, KillWait seconds later,
 * SIGKILL: the last collect has those seconds, plus those of an early
 * warning (#SBATCH --signal=B:USR1@SECS) if there is one.  stg_run learns
 * the job's clock at start (stg_job_clock_read), measures the rate of its
 * own collects, and counts what is still to send (files of the sources
 * changed since the last collect began: local stats only, at most
 * COUNT_MAX entries a look).  When the last collect would not fit, it says
 * so early in the log, with the figures, and starts collecting on its own
 * in time.  It does the same when it was started without `exec`: then the
 * warning and SIGTERM reach the batch shell first, which dies of them, and
 * Slurm stops the job before stg_run can collect.
 */
#include "run_budget.h"
#include "ctx.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ASSUMED_RATE (50.0 * 1024 * 1024) /* bytes/s until a collect measures one */
#define MARGIN       15.0                 /* seconds of slack before the last moment */
#define CHECK_EVERY  15.0                 /* seconds between looks at what is pending */
#define COUNT_MAX    200000               /* entries counted at most per look */

double stg__wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void when(double t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

static const char *signame(int sig)
{
	switch (sig) {
	case SIGUSR1: return "USR1";
	case SIGUSR2: return "USR2";
	case SIGTERM: return "TERM";
	case SIGINT: return "INT";
	case SIGHUP: return "HUP";
	default: return "a signal";
	}
}

/* Does process pid take signal sig its default way (terminate), neither
 * catching nor ignoring it?  (/proc/PID/status: SigCgt, SigIgn.) */
static bool dies_of(pid_t pid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false; /* unknown: not "yes" */
	unsigned long long cgt = 0, ign = 0;
	bool seen = false;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "SigCgt: %llx", &cgt) == 1 ||
		    sscanf(line, "SigIgn: %llx", &ign) == 1)
			seen = true;
	}
	fclose(f);
	unsigned long long bit = 1ull << (sig - 1);
	return seen && !(cgt & bit) && !(ign & bit);
}

stg_err stg__budget_start(stg_ctx *ctx, run_budget *b, size_t n_collects)
{
	memset(b, 0, sizeof *b);
	const char *job = getenv("SLURM_JOB_ID");
	if (!job || !*job)
		return STG_OK;
	stg_job_clock_read(&b->clock);
	const stg_job_clock *c = &b->clock;
	b->active = c->end > 0 && n_collects > 0;
	if (!c->no_exec)
		return STG_OK;
	char w[64] = "";
	if (c->warn_signal && c->warn_batch_only)
		snprintf(w, sizeof w, "--signal=B:%s@%u", signame(c->warn_signal), c->warn_secs);
	/* The early warning goes to the batch shell alone, and Slurm may send
	 * it a minute earlier than asked: a shell that dies of it ends the
	 * job's step, and SIGKILL takes stager run before it has collected.
	 * Nothing run does can keep the shell alive, so it does not start:
	 * the fix is one word. */
	if (w[0] && dies_of(getppid(), c->warn_signal))
		return stg__fail(ctx, STG_EUSAGE,
		                 "not started: with %s the batch shell dies of the early warning, "
		                 "and Slurm then kills stager run before it can collect.  Write "
		                 "`exec stager run ...` in the script (or `trap '' %s` before it)",
		                 w, signame(c->warn_signal));
	stg__log(ctx, STG_LOG_WARN,
	         "stager run is not the batch script's main process: write `exec stager run "
	         "...` in the script.  Without exec %s, and Slurm then stops the job before "
	         "stager can collect%s",
	         w[0] ? "the early warning goes to the batch shell"
	              : "the batch shell dies first at the time limit",
	         n_collects ? "; stager collects on its own before then" : "");
	if (w[0])
		stg__log(ctx, STG_LOG_INFO, "early warning found in the script (%s)", w);
	return STG_OK;
}

uint64_t stg__budget_default_every(const run_budget *b)
{
	if (!b->active)
		return 0;
	/* a tenth of what is left, between a minute and half an hour: the
	 * last collect sends only what changed since */
	double left = b->clock.end - stg__wall();
	double e = left / 10;
	return (uint64_t)(e < 60 ? 60 : e > 1800 ? 1800 : e);
}

void stg__budget_measured(run_budget *b, uint64_t bytes, double secs, double started)
{
	if (started > 0)
		b->since = started;
	/* small collects say more about latency than about the rate */
	if (bytes >= (1u << 20) && secs > 0) {
		b->bytes += bytes;
		b->secs += secs;
	}
}

typedef struct pending {
	uint64_t sum;
	size_t seen;
	double since;
} pending;

/* Bytes of the regular files under the directory dfd (closed here)
 * changed since p->since; links are not followed. */
static void count(pending *p, int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	struct dirent *e;
	while (p->seen < COUNT_MAX && (e = readdir(d))) {
		if (e->d_name[0] == '.' &&
		    (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		p->seen++;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (S_ISREG(st.st_mode)) {
			double m = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec / 1e9;
			double c = (double)st.st_ctim.tv_sec + st.st_ctim.tv_nsec / 1e9;
			if ((m > c ? m : c) >= p->since)
				p->sum += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				count(p, sub);
		}
	}
	closedir(d);
}

/* Bytes of the sources' files changed since the last collect began. */
static uint64_t pending_bytes(const run_budget *b, char *const *srcs, size_t n)
{
	/* mtimes are coarse on some filesystems */
	pending p = {.since = b->since - 1};
	for (size_t i = 0; i < n; i++) {
		int fd = open(srcs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			count(&p, fd);
	}
	return p.sum;
}

/* Looks are closer together once collects are due: each sends what
 * changed since the one before, until the end. */
static double interval(const run_budget *b)
{
	return b->due ? CHECK_EVERY / 3 : CHECK_EVERY;
}

double stg__budget_next_check(const run_budget *b)
{
	return b->active ? b->checked + interval(b) : 0;
}

void stg__budget_warning(const stg_job_clock *c, double now, uint64_t todo, double rate,
                         double need, char *out, size_t len)
{
	char sz[32], rs[32], at[16] = "now", lim[16], window[160];
	/* the room is from the first signal the job gets to SIGKILL: the early
	 * warning's seconds before the limit, SIGTERM at it, KillWait after */
	double room = c->kill_wait + (c->warn_signal ? c->warn_secs : 0);
	double from = c->end + c->kill_wait - need * 1.25 - MARGIN;
	if (from > now)
		when(from, at, sizeof at);
	when(c->end, lim, sizeof lim);
	if (c->warn_signal)
		snprintf(window, sizeof window,
		         "from its early warning (%s, %u s before its time limit at %s) to "
		         "SIGKILL (KillWait %u s after the limit)",
		         signame(c->warn_signal), c->warn_secs, lim, c->kill_wait);
	else
		snprintf(window, sizeof window,
		         "from SIGTERM at its time limit (%s) to SIGKILL (KillWait %u s)", lim,
		         c->kill_wait);
	snprintf(out, len,
	         "the last collect would need about %.0f s (%s at %s/s) but the job has %.0f s "
	         "%s: stager collects on its own from %s; send less, or ask for an earlier "
	         "warning (#SBATCH --signal=B:USR1@SECS)",
	         need, stg_format_size(todo, sz, sizeof sz),
	         stg_format_size((uint64_t)rate, rs, sizeof rs), room, window, at);
}

bool stg__budget_due(run_state *r)
{
	run_budget *b = &r->budget;
	double mono = stg__now(), now = stg__wall();
	if (!b->active || mono < b->checked + interval(b))
		return false;
	b->checked = mono;
	const stg_job_clock *c = &b->clock;
	bool measured = b->secs > 0;
	double rate = measured ? (double)b->bytes / b->secs : ASSUMED_RATE;
	uint64_t todo = pending_bytes(b, r->srcs, r->n_collects);
	double need = (double)todo / rate;
	/* the last moment a collect can end: with exec, KillWait after the
	 * end; without, when the shell dies (the warning, or the end) */
	double last = c->no_exec
	                      ? c->end - (c->warn_signal && c->warn_batch_only ? c->warn_secs : 0)
	                      : c->end + c->kill_wait;
	double room = c->no_exec ? 0 : c->kill_wait + (c->warn_signal ? c->warn_secs : 0);
	if (r->o->budget)
		r->o->budget(r->o->budget_arg, todo, need, measured, room);
	if (!c->no_exec && need + MARGIN <= room)
		return false; /* the warning or SIGTERM leaves time enough */
	/* warned once, when the last collect would really not fit (the
	 * margin only makes the collects start early) */
	if (!b->warned && !c->no_exec && measured && need * 1.25 > room) {
		char msg[512];
		stg__budget_warning(c, now, todo, rate, need, msg, sizeof msg);
		stg__log(r->ctx, STG_LOG_WARN, "%s", msg);
		b->warned = true;
	}
	bool due = now >= last - need * 1.25 - MARGIN;
	if (due && !b->due) {
		char lim[16];
		when(last, lim, sizeof lim);
		stg__log(r->ctx, STG_LOG_INFO,
		         "collecting results before the time limit (the last moment for it is "
		         "%s), and again every %.0f s",
		         lim, CHECK_EVERY / 3);
	}
	b->due = due;
	return due;
}
