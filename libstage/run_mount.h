/*
 * run_mount.h - the packs stg_run --mount mounts for its command
 * (run_mount.c).
 */
#ifndef STG_RUN_MOUNT_H
#define STG_RUN_MOUNT_H

#include "run_state.h"

/* Mount every --mount (a failure is told and returned); end
 * them all (lazily unmounted, their processes waited for). */
stg_err stg__run_mount_all(run_state *r);
void stg__run_unmount_all(run_state *r);

#endif
