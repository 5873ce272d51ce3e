/*
 * mount_spawn.h - a mount served by a process (mount_spawn.c), made by
 * an opener of the caller's: stg_mount_foreground and stg_mount_spawn
 * (libstage.h) with stg_mount_open, an env's server (env.c) with its own.
 */
#ifndef STG_MOUNT_SPAWN_H
#define STG_MOUNT_SPAWN_H

#include "mount_state.h"

/* Makes the mount served (in the serving process). */
typedef stg_err (*stg_mount_opener)(void *arg, stg_ctx *ctx, stg_cache *cache, stg_mount **out);

/* As stg_mount_foreground and stg_mount_spawn, the mount made by
 * open_fn(open_arg, ...); mountpoint is for messages. */
stg_err stg__mount_foreground_with(stg_ctx *ctx, stg_cache *cache, stg_mount_opener open_fn,
                                   void *open_arg, const char *mountpoint, void (*ready)(void *arg),
                                   void *arg);
stg_err stg__mount_spawn_with(stg_ctx *ctx, stg_cache *cache, stg_mount_opener open_fn,
                              void *open_arg, const char *mountpoint, int tied, int *pid,
                              int *tie_fd);

#endif
