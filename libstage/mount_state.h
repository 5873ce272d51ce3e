/*
 * mount_state.h - one mount's state (struct stg_mount), shared by the
 * mount's files: mount.c (the filesystem's operations), mount_open.c
 * (opening, records, unmounting), mount_keep.c (frames kept in the node
 * cache), mount_spawn.c (its process).  A header of its own, so that the
 * calls between those files run one way.
 */
#ifndef STG_MOUNT_STATE_H
#define STG_MOUNT_STATE_H

#include "cache.h"
#include "mount_frames.h"
#include "mount_tree.h"
#include "path.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

struct fuse_session;
typedef struct stg_keep stg_keep;
struct stg_share;

/* One pack of a mount: a mount of several serves them as one tree, their
 * frames one after the other (mount.c says how). */
typedef struct stg_mpack {
	stg_pack *pack;
	char *path;        /* resolved */
	const char *given; /* as the caller named it, for messages */
	struct stat st;    /* the pack as it was mounted */
	atomic_bool changed;
	char digest[STG_DIGEST_HEXLEN + 1];
	uint64_t raw_base;           /* where its tar stream starts in the mount's frames */
	size_t frame_base;           /* its first frame's index there */
	_Atomic uint8_t *file_state; /* format 1 and 2: each file checked whole */
	/* served from the node cache's entry instead of the pack */
	int entry_fd; /* cache/<digest>/data, or -1 */
	bool pinned;
	stg_keep *keep; /* --cache: frames kept in the node cache (mount_keep.c) */
} stg_mpack;

struct stg_mount {
	stg_ctx *ctx; /* the caller's: messages go to its log callback */
	pthread_mutex_t log_mu;
	stg_cache *cache; /* not owned */
	stg_mpack *packs;
	size_t n_packs;
	stg_trailer frames_of; /* every pack's frame table, one after the other
	                          (only frames, n_frames and version are set) */
	char *mountpoint;
	stg_mtree *tree;
	stg_frames *frames;
	size_t cache_bytes;
	char owner[160];               /* pin and record owner: this process */
	char job[24];                  /* the Slurm job it was made in (SLURM_JOB_ID), or "" */
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
	int tie_fd; /* a tied mount's end of the pipe to its caller (mount_spawn.c) */
	/* A Python environment served at its own path (env.c): its files read
	 * from the node cache's entry, and nothing kept per open file, so that
	 * any of the node's servers of it answers any request (mount_share.c) */
	struct stg_share *share; /* NULL: a mount of its own */
	atomic_bool no_open;     /* the kernel opens files without asking us */
	uint8_t *init;           /* the INIT request the session began with */
	size_t init_len;
};

#endif
