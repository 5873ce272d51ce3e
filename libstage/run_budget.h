/*
 * run_budget.h - the time budget inside a Slurm job (run_budget.c).
 */
#ifndef STG_RUN_BUDGET_H
#define STG_RUN_BUDGET_H

#include "run_state.h"

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
/* The warning that the last collect would not fit, into out: need s for
 * todo bytes at rate, the window from the job's first stop signal to
 * SIGKILL, and when stager starts collecting on its own (now, rather than
 * a time already past). */
void stg__budget_warning(const stg_job_clock *c, double now, uint64_t todo, double rate,
                         double need, char *out, size_t len);
/* Look (at most every 15 s): must a collect start now to end in time?
 * Warns once, early, when the last collect would not fit. */
bool stg__budget_due(run_state *r);

#endif
