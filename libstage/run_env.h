/*
 * run_env.h - the job directory's paths and the STAGER_* variables the
 * command inherits (run_env.c).
 */
#ifndef STG_RUN_ENV_H
#define STG_RUN_ENV_H

#include "run_state.h"

/* A path made absolute against the job directory (malloc'ed);
 * base (STAGER_DATA ...) exported for the i-th of its kind. */
char *stg__run_in_jobdir(const run_state *r, const char *path);
void stg__run_export(const char *base, size_t i, const char *value);

#endif
