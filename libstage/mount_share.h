/*
 * mount_share.h - a mount's record; a Python env's mount shared by every
 * process that serves it on the node (mount_share.c).
 */
#ifndef STG_MOUNT_SHARE_H
#define STG_MOUNT_SHARE_H

#include "mount_state.h"

typedef struct stg_share stg_share;

/* The record of m (SCRATCH_ROOT/mounts/<owner>), written whole or not at
 * all; removed. */
void stg__mount_record_write(stg_mount *m);
void stg__mount_record_remove(stg_mount *m);

/* The share of the env mount at mountpoint (resolved) in this process's
 * mount namespace. */
stg_err stg__share_new(stg_ctx *ctx, stg_cache *c, const char *mountpoint, stg_share **out);
void stg__share_free(stg_share *sh);
/* Under the share's lock: the env's own directory, from a live server
 * (whose pack's digest goes to digest) or, with none, opened (a dead
 * mount of ours over it unmounted first; digest ""). */
stg_err stg__share_look(stg_ctx *ctx, stg_share *sh, char digest[STG_DIGEST_HEXLEN + 1]);
/* The env's directory that stg__share_look opened (O_PATH), or -1. */
int stg__share_envfd(const stg_share *sh);
const char *stg__share_mountpoint(const stg_share *sh);
/* Serve m (its packs[0] the env's pack) at the share's mountpoint: join
 * a live server of the same pack, else mount it (no live server); record
 * it and listen for those that join.  STG_EEXIST: another version of the
 * pack is served there. */
stg_err stg__share_start(stg_ctx *ctx, stg_share *sh, stg_mount *m);
/* This server ends: its record removed, and the mount unmounted if no
 * other server lives. */
void stg__share_leave(stg_share *sh, stg_mount *m);

#endif
