/*
 * mount.h - what the mount's files share (mount.c: the filesystem's
 * operations and its life; mount_open.c: opening, records, umount).
 */
#ifndef STG_MOUNT_H
#define STG_MOUNT_H

#include "cache.h"
#include "mount_frames.h"
#include "mount_tree.h"

#include <stdatomic.h>
#include <sys/stat.h>

struct fuse_session;
typedef struct stg_keep stg_keep;

struct stg_mount {
	stg_ctx *ctx; /* the caller's: messages go to its log callback */
	pthread_mutex_t log_mu;
	stg_cache *cache; /* not owned */
	stg_pack *pack;
	char *pack_path, *mountpoint;
	struct stat pack_st; /* the pack as it was mounted */
	atomic_bool changed;
	char digest[STG_DIGEST_HEXLEN + 1];
	stg_mtree *tree;
	stg_frames *frames;
	size_t cache_bytes;
	_Atomic uint8_t *file_state; /* format 1 and 2: each file checked whole */
	/* served from the node cache's entry instead of the pack */
	int entry_fd;    /* cache/<digest>/data, or -1 */
	char owner[160]; /* pin and record owner: this process */
	bool pinned;
	char record[STG_PATH_MAX + 1]; /* mounts/<owner> */
	/* the shared-FS slot, held while fetches need it */
	pthread_mutex_t slot_mu;
	pthread_cond_t slot_cv;
	stg_slot slot;
	bool slot_held, stopping;
	unsigned in_flight;
	double slot_used;
	struct fuse_session *se;
	bool mounted;
	pthread_mutex_t open_mu;
	struct open_file *open_files; /* open by the kernel, newest first (mount.c) */
	int tie_fd;     /* a tied mount's end of the pipe to its caller (mount_spawn.c) */
	stg_keep *keep; /* --cache: frames kept in the node cache (mount_keep.c) */
};

void stg__mount_log(stg_mount *m, stg_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Start the FUSE session and mount it on mountpoint. */
stg_err stg__mount_session(stg_ctx *ctx, stg_mount *m, const char *mountpoint);
void stg__mount_unmount(stg_mount *m);
/* Unmount a stager mount at path, lazily: umount2 as root, fusermount3
 * otherwise.  0 or -1/errno. */
int stg__unmount_path(const char *path);
/* Mounts whose process died: unmounted (if still mounted) and their
 * records removed, each reported as "mount"; how many, or -1. */
int stg__mounts_clean(stg_ctx *ctx, stg_cache *c, bool dry_run, stg_clean_fn report, void *arg);
/* mount_keep.c: the frames of m's pack kept in the node cache (--cache;
 * m->keep stays NULL for a pack whose frames cannot be checked alone);
 * frame i read from there (0, or -1 if not kept), kept there (when room
 * can be made), and let go of. */
stg_err stg__keep_open(stg_ctx *ctx, stg_mount *m);
int stg__keep_get(stg_keep *k, const stg_frame *f, size_t i, uint8_t *buf);
void stg__keep_put(stg_mount *m, stg_keep *k, const stg_frame *f, size_t i, const uint8_t *buf);
void stg__keep_close(stg_mount *m, stg_keep *k);
/* Unmount if mounted, and free everything. */
void stg__mount_free(stg_mount *m);

#endif
