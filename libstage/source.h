/*
 * source.h - staging what is not a pack: archives (source_archive.c) and plain
 * directories (source_dir.c), called by stage.c.
 */
#ifndef STG_SOURCE_H
#define STG_SOURCE_H

#include "attach.h"

stg_err stg__stage_archive(stg_ctx *ctx, stg_cache *c, int fd, const char *src, const stg_ident *id,
                           const stg_stage_opts *o, const char *owner, stg_stage_result *res);
stg_err stg__stage_dir(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                       const char *owner, stg_stage_result *res);

#endif
