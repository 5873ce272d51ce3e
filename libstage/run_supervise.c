/*
 * run_supervise.c - stg_run while the command runs: start it, pass
 * signals on, collect as asked.
 *
 * While the command runs, the signals stg_run cares about are blocked and
 * taken with sigtimedwait(), so nothing happens in a signal handler and
 * there is no global state.  Collects while it runs (periodic, the early
 * warning, the grace period after a terminating signal, the time budget)
 * happen in a child process with idle I/O priority, one at a time, so
 * signals keep being passed on promptly; what that child measured (bytes,
 * seconds) reaches the budget through a shared page.  With all_nodes each
 * node's collector keeps its own time and is told "now" on the early
 * warning.
 */
#include "run_supervise.h"
#include "run_budget.h"

#include "collect_every.h"
#include "ctx.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

pid_t stg__run_start(run_state *r, const sigset_t *old)
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
	char *const *argv = r->o->argv;
	execvp(argv[0], argv);
	int e = errno;
	stg__log(r->ctx, STG_LOG_ERROR, "cannot run '%s': %s", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* Whether process pid has a handler for sig (its SigCgt in /proc). */
static bool catches(pid_t pid, int sig)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	unsigned long long mask = 0;
	bool found = false;
	while (!found && fgets(line, sizeof line, f))
		found = sscanf(line, "SigCgt: %llx", &mask) == 1;
	fclose(f);
	return found && (mask >> (sig - 1) & 1);
}

stg_err stg__run_collect_all(run_state *r)
{
	stg_err first = STG_OK;
	if (r->measured)
		r->measured->started = stg__wall();
	for (size_t i = 0; i < r->n_collects; i++) {
		run_pair *p = &r->collects[i];
		if (r->all_nodes) {
			if (p->step.pid > 0) {
				p->status = stg__collectors_end(r->ctx, &p->step);
				if (p->status)
					stg__log(r->ctx, STG_LOG_ERROR,
					         "collecting '%s' on some nodes failed (exit %d); "
					         "see "
					         "above",
					         p->src, stg_exit_status(p->status));
			}
		} else {
			stg_collect_totals t = {0};
			p->status =
			        stg__collect_round(r->ctx, r->cache, p->src, p->dest, &r->co, &t);
			if (r->measured) {
				r->measured->bytes += t.sent_bytes;
				r->measured->secs += t.seconds;
			}
		}
		if (p->status && !first)
			first = p->status;
	}
	return first;
}

/* Start a collection in a child (idle I/O priority) unless one runs. */
static void collect_in_background(run_state *r, const char *why)
{
	if (r->all_nodes) {
		/* every node's collector collects now */
		for (size_t i = 0; i < r->n_collects; i++)
			if (r->collects[i].step.pid > 0)
				stg__collectors_now(r->ctx, &r->collects[i].step);
		return;
	}
	if (r->collector > 0 || !r->n_collects)
		return;
	stg__log(r->ctx, STG_LOG_DEBUG, "collecting (%s)", why);
	pid_t pid = fork();
	if (pid < 0) {
		stg__log(r->ctx, STG_LOG_ERROR, "cannot fork a collector: %s", strerror(errno));
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
		_exit(stg_exit_status(stg__run_collect_all(r)));
	}
	r->collector = pid;
}

/* The collector child ended: what it sent, and how fast, for the budget. */
static void collector_measured(run_state *r)
{
	if (!r->measured)
		return;
	stg__budget_measured(&r->budget, r->measured->bytes, r->measured->secs,
	                     r->measured->started);
	memset(r->measured, 0, sizeof *r->measured);
}

void stg__run_stop_collector(run_state *r)
{
	if (r->collector <= 0)
		return;
	/* what it has sent is complete; the final collect does the rest */
	kill(r->collector, SIGTERM);
	waitpid(r->collector, NULL, 0);
	r->collector = 0;
	collector_measured(r);
}

/* If pid was p's collectors' step (all_nodes), it ended before we stopped
 * it: Slurm stopped the job (each node collected: status 0), or it failed. */
static void collectors_ended(run_state *r, run_pair *p, pid_t pid, int st)
{
	if (pid != p->step.pid)
		return;
	int cs = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	p->status = stg__collectors_ended(&p->step, cs);
	if (cs)
		stg__log(r->ctx, STG_LOG_ERROR, "the collectors of '%s' ended early (status %d)",
		         p->src, cs);
}

/* A child ended: the command, the collector, or collectors' steps.
 * Whether the command did (its status into *status). */
static bool reap(run_state *r, int *status)
{
	int st;
	pid_t pid;
	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < r->n_collects; i++)
			collectors_ended(r, &r->collects[i], pid, st);
		if (pid == r->collector) {
			r->collector = 0;
			collector_measured(r);
		} else if (pid == r->kept) {
			r->kept = 0; /* it told how each went */
		} else if (pid == r->cmd) {
			*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			r->cmd = 0;
		}
	}
	return !r->cmd;
}

int stg__run_supervise(run_state *r, const sigset_t *set, double grace, bool *stopped)
{
	/* with all_nodes the collectors keep their own time */
	uint64_t every = r->all_nodes ? 0 : r->every;
	double next = every ? stg__now() + (double)every : 0, deadline = 0;
	int status = 0;
	for (;;) {
		double t = stg__now(), wake = 3600;
		if (next)
			wake = next - t;
		if (deadline && deadline - t < wake)
			wake = deadline - t;
		double check = stg__budget_next_check(&r->budget);
		if (check && check - t < wake)
			wake = check - t;
		if (wake < 0)
			wake = 0;
		struct timespec ts = {(time_t)wake, (long)((wake - (double)(time_t)wake) * 1e9)};
		siginfo_t si;
		int sig = sigtimedwait(set, &si, &ts);
		if (sig < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if ((sig == SIGCHLD || sig < 0) && reap(r, &status))
			return status;
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
			*stopped = true;
			/* from now on every collect is the job's last chance */
			r->co.slot_wait_max = STG_SLOT_WAIT_STOPPING;
			/* a terminal's ^C already reached the whole process group */
			if (si.si_code != SI_KERNEL)
				kill(r->cmd, sig);
			if (!deadline)
				deadline = stg__now() + grace;
			stg__log(r->ctx, STG_LOG_INFO,
			         "%s: passed to the command; collecting results", strsignal(sig));
		} else if (sig == SIGUSR1 || sig == SIGUSR2) {
			/* by default SIGUSR1 kills: pass it on only to a command that
			 * asks for it (one that checkpoints on the warning) */
			bool pass = catches(r->cmd, sig);
			if (pass)
				kill(r->cmd, sig);
			stg__log(r->ctx, STG_LOG_INFO,
			         "%s (early warning): collecting results now%s", strsignal(sig),
			         pass ? "; passed to the command"
			              : " (not passed to the command, which does not handle it)");
			collect_in_background(r, "early warning");
		}
		t = stg__now();
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
		if (stg__budget_due(r))
			collect_in_background(r, "before the time limit");
	}
	return status;
}
