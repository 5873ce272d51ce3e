/*
 * slurm.h - Slurm's commands and a job's own mounts (slurm.c).
 */
#ifndef STG_SLURM_H
#define STG_SLURM_H

#include "libstage.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Run argv (from PATH), its stdout into out (NUL-terminated, cut
 * to len - 1), its exit status into *status; -1 if it could not run or was
 * killed. */
int stg__capture(char *const argv[], char *out, size_t len, int *status);
/* The value of "Key = value" in `scontrol show config`'s output conf,
 * into out ("" for "(null)"); false (out "") if conf has no such key. */
bool stg__slurm_conf_value(const char *conf, const char *key, char *out, size_t len);
/* Does Slurm know node as one of its nodes?  1 yes (`scontrol show node`
 * answers), 0 no (the controller says "not found", or there is no Slurm
 * here: no scontrol, no controller configured), -1 unknown (a controller
 * is configured but did not answer). */
int stg__slurm_is_node(const char *node);
/* Ask squeue about a job: 1 alive, 0 gone, -1 unknown (no Slurm to ask, or
 * a controller that does not answer). */
int stg__slurm_job_alive(const char *id);
/* Whether path (existing) is on a mount of this Slurm job's own
 * ($SLURM_JOB_ID): job_container/tmpfs's private /tmp and /dev/shm, whose
 * root is BasePath/[NODE/]ID/.ID, or a SPANK plugin's per-job /tmp.  Slurm
 * removes those when the job ends, before the epilog runs.  The mount
 * point into mnt[len] (may be NULL).  The _in form reads mountinfo lines
 * from a stream, for job. */
bool stg__job_private_mount(const char *path, char *mnt, size_t len);
bool stg__job_private_mount_in(FILE *mountinfo, const char *path, const char *job, char *mnt,
                               size_t len);

#endif
