/*
 * mount_list.h - what others ask of the mounts recorded (mount_list.c):
 * unmounting a path, and the mounts nobody needs any more (clean).
 */
#ifndef STG_MOUNT_LIST_H
#define STG_MOUNT_LIST_H

#include "cache.h"

/* Unmount a stager mount at path, lazily: umount2 as root, fusermount3
 * otherwise.  0 or -1/errno. */
int stg__unmount_path(const char *path);
/* Mounts nobody needs any more, each reported as "mount": those whose
 * process died, every mount of job (if not NULL: `stager clean --job`,
 * the epilog), and those of jobs that Slurm says are over.  A live one's
 * process is stopped (SIGTERM; SIGKILL if it has not ended within 3 s),
 * its pins dropped; each is unmounted (lazily) and its record removed.
 * Called with the cache's lock held.  How many, or -1. */
int stg__mounts_clean(stg_ctx *ctx, stg_cache *c, const char *job, bool dry_run,
                      stg_clean_fn report, void *arg);

#endif
