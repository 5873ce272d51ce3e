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
                      int (*fn)(void *arg, const char *src, const char *dest, bool pack),
                      void *arg);
/* Add SRC and DEST (collected as a pack or not) to owner's record of
 * results yet to collect, beside what is there. */
stg_err stg__results_add(stg_ctx *ctx, stg_cache *c, const char *owner, const char *src,
                         const char *dest, bool pack);
/* stg_keep_results; copy: src is copied and stays, also on one
 * filesystem. */
stg_err stg__keep_results(stg_ctx *ctx, stg_cache *c, const char *src, const char *name,
                          const char *dest, bool copy, char **out);
/* Kept results (a path under kept/) that go to their DEST as a pack. */
int stg__kept_set_pack(stg_cache *c, const char *kept);
/* The epoch of a kept name (0: not one). */
int64_t stg__kept_epoch(const char *name);
/* Remove a kept entry. */
int stg__kept_remove(stg_cache *c, const char *name);

#endif
