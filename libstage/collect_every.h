/*
 * collect_every.h - one collect told through the log (collect_every.c),
 * shared by the --every loop and by stg_run.
 */
#ifndef STG_COLLECT_EVERY_H
#define STG_COLLECT_EVERY_H

#include "ctx.h"

/* stg_collect of src to dest, told through the log (what it sent at
 * STG_LOG_INFO, "unchanged" at STG_LOG_DEBUG, a failure at
 * STG_LOG_ERROR) and added to *t; its result. */
stg_err stg__collect_round(stg_ctx *ctx, stg_cache *cache, const char *src, const char *dest,
                           const stg_collect_opts *o, stg_collect_totals *t);

#endif
