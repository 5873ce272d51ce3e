/*
 * results.h - the results a job has yet to collect, and kept results
 * (results.c), as clean.c goes through them.
 */
#ifndef STG_RESULTS_H
#define STG_RESULTS_H

#include "cache.h"

/* Call fn for each SRC and DEST of owner's record (-1/errno if there is
 * none, or it is malformed; else fn's first non-zero return). */
int stg__results_each(stg_cache *c, const char *owner,
                      int (*fn)(void *arg, const char *src, const char *dest), void *arg);
/* The epoch of a kept name (0: not one). */
int64_t stg__kept_epoch(const char *name);
/* Remove a kept entry. */
int stg__kept_remove(stg_cache *c, const char *name);

#endif
