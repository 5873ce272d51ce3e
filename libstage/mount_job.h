/*
 * mount_job.h - a mount made in a Slurm job ends with it (mount_job.c):
 * the job's batch shell found and watched, Slurm asked.
 */
#ifndef STG_MOUNT_JOB_H
#define STG_MOUNT_JOB_H

#include "ctx.h"

/* The Slurm job a mount is made in, and the process of it
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
/* Is this process in the cgroup of a step of job that ends before the
 * job does (proctrack/cgroup: ".../job_JOB/step_0", not step_batch,
 * step_extern or step_interactive)?  Slurm ends every process of such a
 * step with it, a serving process that left its process group too. */
bool stg__step_cgroup_ends(const char *job);
/* The same of cgroups, the text of a /proc/PID/cgroup. */
bool stg__cgroup_step_ends(const char *cgroups, const char *job);
/* /proc/PID/stat's parent and start time; -1 if gone or a zombie. */
int stg__proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start);
/* A pidfd (-1/errno: ENOSYS before Linux 5.3); a signal through it (or
 * kill(pid) without one). */
int stg__pidfd_open(pid_t pid);
int stg__pidfd_signal(int pidfd, pid_t pid, int sig);

#endif
