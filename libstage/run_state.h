/*
 * run_state.h - the state of one stg_run (run_state), with its pairs,
 * mounts and time budget, shared by run.c and its parts (run_env.c,
 * run_mount.c, run_supervise.c, run_budget.c).  A header of its own so
 * that the calls run one way: run -> run_supervise -> run_budget,
 * run -> run_mount -> run_env.
 */
#ifndef STG_RUN_STATE_H
#define STG_RUN_STATE_H

#include "ctx.h"

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

/* Packs mounted for the command, as one tree (run_mount.c). */
typedef struct run_mount {
	char **packs, *dir; /* malloc'ed */
	size_t n_packs;
	int pid, tie; /* its process, and the descriptor that keeps it */
	bool made;    /* stg_run made dir (and removes it after) */
	bool env;     /* a Python env served at dir, its own path */
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

#endif
