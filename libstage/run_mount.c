/*
 * run_mount.c - the packs stg_run mounts for its command (--mount).
 *
 * Each is served by a process of its own, tied to stg_run
 * (stg_mount_spawn): it ignores the job's signals, so the command reads
 * its data for as long as it runs, also through scancel's SIGTERM and the
 * grace period; and when stg_run lets go of it (after the command, always)
 * or dies, it unmounts and ends.  A mount whose process was killed with
 * the job (SIGKILL at the end of KillWait) is left for `stager clean` (the
 * epilog) to unmount; one that stg_run itself had to kill, because it did
 * not end when let go of, is swept (record, pins) at once.
 */
#include "mount_open.h"
#include "run_mount.h"
#include "run_env.h"
#include "ctx.h"
#include "fsutil.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A mount's process takes this long to end after it is let go of. */
#define MOUNT_END_WAIT 10.0

/* Where a pack is mounted without a DIR: its name, less .tar.zst. */
static char *default_dir(const char *pack)
{
	const char *base = strrchr(pack, '/');
	base = base ? base + 1 : pack;
	size_t n = strlen(base);
	if (n > 8 && !strcmp(base + n - 8, ".tar.zst"))
		n -= 8;
	return strndup(base, n);
}

stg_err stg__run_mount_all(run_state *r)
{
	const stg_run_opts *o = r->o;
	if (!o->n_mounts)
		return STG_OK;
	if (!(r->mounts = calloc(o->n_mounts, sizeof *r->mounts)))
		return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
	for (size_t i = 0; i < o->n_mounts; i++) {
		run_mount *m = &r->mounts[r->n_mounts];
		const stg_run_pair *q = &o->mounts[i];
		char *rel = q->dest ? strdup(q->dest) : default_dir(q->src);
		m->dir = rel ? stg__run_in_jobdir(r, rel) : NULL;
		free(rel);
		if (!m->dir || !(m->pack = strdup(q->src))) {
			free(m->dir);
			return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
		}
		m->pid = m->tie = -1;
		r->n_mounts++;
		struct stat st;
		m->made = stat(m->dir, &st) != 0;
		if (m->made && stg__mkdirs(m->dir, 0700))
			return stg__fail_errno(r->ctx, STG_EIO, errno, "cannot create '%s'",
			                       m->dir);
		stg_err err = stg_mount_spawn(r->ctx, r->cache, m->pack, m->dir, NULL, 1, &m->pid,
		                              &m->tie);
		if (err)
			return err;
		stg__run_export("STAGER_MOUNT", i, m->dir);
		stg__log(r->ctx, STG_LOG_INFO, "mounted '%s' at '%s'", m->pack, m->dir);
	}
	return STG_OK;
}

void stg__run_unmount_all(run_state *r)
{
	/* let go of every mount first, and unmount it (a child of stg_run may
	 * hold the tie too): they end side by side */
	for (size_t i = 0; i < r->n_mounts; i++) {
		if (r->mounts[i].tie >= 0)
			close(r->mounts[i].tie);
		r->mounts[i].tie = -1;
		if (r->mounts[i].pid > 0)
			stg__unmount_path(r->mounts[i].dir);
	}
	for (size_t i = 0; i < r->n_mounts; i++) {
		run_mount *m = &r->mounts[i];
		double until = stg__now() + MOUNT_END_WAIT;
		bool ended = m->pid < 0;
		while (!ended) {
			pid_t p = waitpid(m->pid, NULL, WNOHANG);
			ended = p == m->pid || (p < 0 && errno != EINTR);
			if (!ended && stg__now() >= until)
				break;
			if (!ended)
				stg__nap(NULL, 0.02);
		}
		if (!ended) {
			/* it does not answer: end it, and unmount for it */
			kill(m->pid, SIGKILL);
			while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
				;
			stg__unmount_path(m->dir);
			stg__log(r->ctx, STG_LOG_WARN,
			         "the mount of '%s' at '%s' did not end when let go of: killed",
			         m->pack, m->dir);
			/* a killed process leaves its record and pins: sweep them
			 * as clean would (dead processes' mounts), not for later */
			int lk = stg__cache_lock(r->ctx, r->cache, "cache", true, NULL);
			if (lk >= 0) {
				stg__mounts_clean(r->ctx, r->cache, NULL, false, NULL, NULL);
				stg__cache_unlock(lk);
			}
		}
		/* a mount point stg_run made goes with the job directory */
		if (m->made)
			rmdir(m->dir);
		free(m->pack);
		free(m->dir);
	}
	free(r->mounts);
	r->mounts = NULL;
	r->n_mounts = 0;
}
