/*
 * run_env.c - where stg_run puts things of the job, and how the command
 * learns of them: paths in the job directory, and the STAGER_* variables
 * it inherits (STAGER_DATA, STAGER_MOUNT, STAGER_OUT, numbered _2, _3, ...
 * after the first of each kind).
 */
#include "run_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* path made absolute against the job directory (malloc'ed). */
char *stg__run_in_jobdir(const run_state *r, const char *path)
{
	if (path[0] == '/')
		return strdup(path);
	size_t n = strlen(r->jobdir) + strlen(path) + 2;
	char *out = malloc(n);
	if (out)
		snprintf(out, n, "%s/%s", r->jobdir, path);
	return out;
}

/* NAME, or NAME_N for the N-th of its kind. */
void stg__run_export(const char *base, size_t i, const char *value)
{
	char name[64];
	if (i == 0)
		snprintf(name, sizeof name, "%s", base);
	else
		snprintf(name, sizeof name, "%s_%zu", base, i + 1);
	setenv(name, value, 1);
}
