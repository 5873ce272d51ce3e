/*
 * mount.h - the mount's filesystem (mount.c): its log, the FUSE session,
 * unmounting and freeing a mount.
 */
#ifndef STG_MOUNT_H
#define STG_MOUNT_H

#include "mount_state.h"

void stg__mount_log(stg_mount *m, stg_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Start the FUSE session and mount it on mountpoint. */
stg_err stg__mount_session(stg_ctx *ctx, stg_mount *m, const char *mountpoint);
void stg__mount_unmount(stg_mount *m);
/* Unmount if mounted, and free everything. */
void stg__mount_free(stg_mount *m);

#endif
