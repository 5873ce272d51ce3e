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
	char job[24];    /* the Slurm job it was made in (SLURM_JOB_ID), or "" */
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
/* Mounts nobody needs any more, each reported as "mount": those whose
 * process died, every mount of job (if not NULL: `stager clean --job`,
 * the epilog), and those of jobs that Slurm says are over.  A live one's
 * process is stopped (SIGTERM; SIGKILL if it has not ended within 3 s),
 * its pins dropped; each is unmounted (lazily) and its record removed.
 * Called with the cache's lock held.  How many, or -1. */
int stg__mounts_clean(stg_ctx *ctx, stg_cache *c, const char *job, bool dry_run,
                      stg_clean_fn report, void *arg);
/* mount_keep.c: drop m's pin of key, taking the cache's lock only if the
 * pin is still there (clean, which holds the lock, may have dropped it). */
void stg__mount_unpin(stg_mount *m, const char *key);
/* mount_keep.c: the frames of m's pack kept in the node cache (--cache;
 * m->keep stays NULL for a pack whose frames cannot be checked alone);
 * frame i read from there (0, or -1 if not kept), kept there (when room
 * can be made), and let go of. */
stg_err stg__keep_open(stg_ctx *ctx, stg_mount *m);
int stg__keep_get(stg_keep *k, const stg_frame *f, size_t i, uint8_t *buf);
void stg__keep_put(stg_mount *m, stg_keep *k, const stg_frame *f, size_t i, const uint8_t *buf);
void stg__keep_close(stg_mount *m, stg_keep *k);
/* mount_job.c: the Slurm job a mount is made in, and the process of it
 * that is watched (the batch shell), found while the caller lives. */
typedef struct stg_mount_job {
	char job[24];             /* SLURM_JOB_ID */
	pid_t pid;                /* the job's process watched; 0: Slurm is asked */
	unsigned long long start; /* its start time, from /proc */
	char what[32];            /* "its batch shell", for messages */
} stg_mount_job;
typedef struct stg_mount_jobwatch stg_mount_jobwatch;
/* false outside a Slurm job; Slurm's answer is given up on once ctx (if
 * not NULL) is cancelled */
bool stg__mount_job_find(stg_mount_job *j, const stg_ctx *ctx);
/* A thread that calls over(arg, j) once, when the job ends; NULL if it
 * cannot be started.  unwatch ends it: over is never called after. */
stg_mount_jobwatch *stg__mount_job_watch(const stg_mount_job *j,
                                         void (*over)(void *arg, const stg_mount_job *j),
                                         void *arg);
void stg__mount_job_unwatch(stg_mount_jobwatch *w);
/* 1: Slurm says job is over (and its controller answers); 0: it is not;
 * -1: unknown.  A Slurm command that took too long (killed) sets *late
 * (late may be NULL). */
int stg__mount_job_over(const char *job, bool *late);
/* The step of job that a slurmstepd's title ("slurmstepd: [JOB.STEP]",
 * len bytes) names, into step (step_len bytes); false if none of job's. */
bool stg__stepd_step(const char *title, size_t len, const char *job, char *step, size_t step_len);
/* /proc/PID/stat's parent and start time; -1 if gone or a zombie. */
int stg__proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start);
/* A pidfd (-1/errno: ENOSYS before Linux 5.3); a signal through it (or
 * kill(pid) without one). */
int stg__pidfd_open(pid_t pid);
int stg__pidfd_signal(int pidfd, pid_t pid, int sig);
/* Unmount if mounted, and free everything. */
void stg__mount_free(stg_mount *m);

#endif
