/*
 * mount_open.h - a mount's making (mount_open.c), for an env's server
 * (env.c); stg_mount_open and stg_mount_close are libstage.h's.
 */
#ifndef STG_MOUNT_OPEN_H
#define STG_MOUNT_OPEN_H

#include "mount_share.h"

/* Serve the env's pack at env_dir (the share's mountpoint), from the node
 * cache's entry of the pack (which must be there: staged by the caller),
 * shared with the node's other servers of it (mount_share.c).  p is the
 * pack, opened by the caller (its trailer read once).  p and the share
 * are the mount's from the call on: freed with it, or here on failure. */
stg_err stg__mount_open_env(stg_ctx *ctx, stg_cache *c, const char *pack, stg_pack *p,
                            const char *env_dir, stg_share *sh, stg_mount **out);

#endif
