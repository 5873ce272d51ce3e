/*
 * run_supervise.h - while the command runs (run_supervise.c): its start,
 * signals passed on, collects.
 */
#ifndef STG_RUN_SUPERVISE_H
#define STG_RUN_SUPERVISE_H

#include "run_state.h"

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

#endif
