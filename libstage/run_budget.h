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
/* Look (at most every 15 s): must a collect start now to end in time?
 * Warns once, early, when the last collect would not fit. */
bool stg__budget_due(run_state *r);

#endif
