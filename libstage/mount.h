/*
 * mount.h - the mount's filesystem (mount.c): its log, the FUSE session,
 * unmounting and freeing a mount.
 */
#ifndef STG_MOUNT_H
#define STG_MOUNT_H

#include "mount_state.h"

void stg__mount_log(stg_mount *m, stg_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Start the FUSE session and mount it on mountpoint; or, join_fd >= 0,
 * join the session of that FUSE device (a clone of the one mounted at
 * mountpoint), whose INIT request m->init holds.  An env's session
 * (m->share) keeps its INIT request in m->init for those that join. */
stg_err stg__mount_session(stg_ctx *ctx, stg_mount *m, const char *mountpoint, int join_fd);
void stg__mount_unmount(stg_mount *m);
/* The session's FUSE device, or -1. */
int stg__mount_fd(stg_mount *m);
/* Unmount if mounted, and free everything. */
void stg__mount_free(stg_mount *m);

#endif
