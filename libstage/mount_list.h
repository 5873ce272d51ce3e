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
/* Is path a stager mount (in this process's mount namespace), of uid
 * (any if uid is (uid_t)-1)? */
bool stg__is_stager_mount(const char *path, uid_t uid);
/* A live server of an env's mount. */
typedef struct stg_env_server {
	char owner[160];
	char digest[STG_DIGEST_HEXLEN + 1];
	char job[24];
} stg_env_server;
/* The live servers (at most max, but self) of the env mount at mountpoint
 * in mount namespace ns, from their records: how many. */
size_t stg__env_servers(stg_cache *c, const char *mountpoint, unsigned long long ns,
                        const char *self, stg_env_server *out, size_t max);
/* Mounts nobody needs any more, each reported as "mount": those whose
 * process died, every mount of job (if not NULL: `stager clean --job`,
 * the epilog), and those of jobs that Slurm says are over.  A live one's
 * process is stopped (SIGTERM; SIGKILL if it has not ended within 3 s),
 * its pins dropped; each is unmounted (lazily) and its record removed.
 * Called with the cache's lock held.  How many, or -1. */
int stg__mounts_clean(stg_ctx *ctx, stg_cache *c, const char *job, bool dry_run,
                      stg_clean_fn report, void *arg);

#endif
