/* env.h - what env.c's neighbours of its floor use of it. */
#ifndef STG_ENV_H
#define STG_ENV_H

#include "libstage.h"

/* Is pack (stg_env_pack of env_dir) a regular file of the caller's own?
 * An env's pack is staged with its links as they are (a venv's
 * interpreter points out of it), so only the user's own is.  STG_ENOENT
 * with the command that makes it, or STG_EUSAGE, said in ctx. */
stg_err stg__env_pack_ours(stg_ctx *ctx, const char *env_dir, const char *pack);

/* Could env_dir be served here now: FUSE, the pack the user's own and
 * the env unchanged since it was packed (the checks stg_env_spawn makes
 * first, without serving anything; an env this node serves already is
 * checked again when served)?  STG_ENOTSUP without FUSE, STG_ENOENT for
 * a changed env with the command that packs it, as stg_env_spawn says. */
stg_err stg__env_servable(stg_ctx *ctx, const char *env_dir);

#endif
