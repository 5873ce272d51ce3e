/*
 * run.h - what stg_run's files share: its state (run.c), the supervision
 * of the command (run_supervise.c) and the job's time budget
 * (run_budget.c).
 */
#ifndef STG_RUN_H
#define STG_RUN_H

#include "internal.h"

#include "fanout.h"

#include <signal.h>
#include <sys/types.h>

/* The job's time budget (run_budget.c). */
typedef struct run_budget {
	stg_job_clock clock;
	bool active;    /* a known time limit, and something to collect */
	uint64_t bytes; /* sent by measured collects ... */
	double secs;    /* ... in this many seconds */
	double since;   /* the start of the last collect that ended (wall) */
	double checked; /* the last look at what is pending (stg__now) */
	bool warned;
	bool due; /* collects are due: the end is near */
} run_budget;

typedef struct run_pair {
	char *src, *dest;    /* malloc'ed */
	bool made;           /* stg_run created src (and removes it once collected) */
	bool staged;         /* a stage: dest is what stg_run linked there */
	stg_err status;      /* of its last collect */
	stg_collectors step; /* all_nodes: its collectors */
} run_pair;

/* A pack mounted for the command (run_mount.c). */
typedef struct run_mount {
	char *pack, *dir; /* malloc'ed */
	int pid, tie;     /* its process, and the descriptor that keeps it */
	bool made;        /* stg_run made dir (and removes it after) */
} run_mount;

typedef struct run_state {
	stg_ctx *ctx;
	stg_cache *cache;
	const stg_config *cfg;
	const stg_run_opts *o;
	run_pair *stages, *collects;
	size_t n_stages, n_collects;
	run_mount *mounts;
	size_t n_mounts;
	char *owner;             /* pins and job directory: NULL under Slurm (the job's) */
	char results_owner[160]; /* of the results record: owner, or job-ID */
	bool results_recorded;
	char *jobdir; /* malloc'ed */
	bool own_jobdir;
	stg_collect_opts co;
	pid_t cmd, collector;
	pid_t kept;     /* the child collecting kept results of earlier jobs */
	bool all_nodes; /* on every node of the job (srun steps) */
	uint64_t every;
	run_budget budget;
	char **srcs; /* the collects' sources, for the budget */
	/* what the collector child measured, shared with it */
	struct run_measured {
		uint64_t bytes;
		double secs, started;
	} * measured;
} run_state;

/* A job being stopped has until Slurm's KillWait (30 s by default) before
 * SIGKILL: its collect waits this long at most for a shared-FS slot. */
#define STG_SLOT_WAIT_STOPPING 10.0

/* run_env.c: path made absolute against the job directory (malloc'ed);
 * base (STAGER_DATA ...) exported for the i-th of its kind. */
char *stg__run_in_jobdir(const run_state *r, const char *path);
void stg__run_export(const char *base, size_t i, const char *value);

/* run_mount.c: mount every --mount (a failure is told and returned); end
 * them all (lazily unmounted, their processes waited for). */
stg_err stg__run_mount_all(run_state *r);
void stg__run_unmount_all(run_state *r);

/* run_supervise.c */
/* Start the command, with the signal mask old and default dispositions;
 * its pid, or -1/errno. */
pid_t stg__run_start(run_state *r, const sigset_t *old);
/* Wait for the command, passing signals (of set, blocked) on and
 * collecting as asked; its status as a shell reports it.  *stopped: a
 * terminating signal came. */
int stg__run_supervise(run_state *r, const sigset_t *set, double grace, bool *stopped);
/* Stop a collector child that still runs (what it sent is whole). */
void stg__run_stop_collector(run_state *r);
/* Collect every source once (with all_nodes, stop the collectors, which
 * collect once more); the first failure. */
stg_err stg__run_collect_all(run_state *r);

/* run_budget.c */
/* The wall clock (the job's end and files' mtimes are in its time). */
double stg__wall(void);
/* Learn the job's clock; warn if run was started without exec. */
stg_err stg__budget_start(stg_ctx *ctx, run_budget *b, size_t n_collects);
/* The interval of periodic collects when every is not given (0: none). */
uint64_t stg__budget_default_every(const run_budget *b);
/* A collect that began at started sent bytes in secs. */
void stg__budget_measured(run_budget *b, uint64_t bytes, double secs, double started);
/* When to look again (stg__now() time; 0: never). */
double stg__budget_next_check(const run_budget *b);
/* Look (at most every 15 s): must a collect start now to end in time?
 * Warns once, early, when the last collect would not fit. */
bool stg__budget_due(run_state *r);

#endif
