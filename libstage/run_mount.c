/*
 * run_mount.c - the packs stg_run mounts for its command (--mount).
 *
 * The packs given with one DIR are one mount, one tree; a pack given as a
 * pattern (a name with * ? or [ that is not a file's) stands for the packs it
 * matches.  Each mount is served by a process of its own, tied to stg_run
 * (stg_mount_spawn): it ignores the job's signals, so the command reads
 * its data for as long as it runs, also through scancel's SIGTERM and the
 * grace period; and when stg_run lets go of it (after the command, always)
 * or dies, it unmounts and ends.  A mount whose process was killed with
 * the job (SIGKILL at the end of KillWait) is left for `stager clean` (the
 * epilog) to unmount; one that stg_run itself had to kill, because it did
 * not end when let go of, is swept (record, pins) at once.
 */
#include "mount_list.h"
#include "run_mount.h"
#include "run_env.h"
#include "ctx.h"
#include "fsutil.h"

#include <errno.h>
#include <glob.h>
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

/* Add src to m's packs: the packs a pattern (a name with * ? or [ that is
 * not a file's) matches, sorted, or src itself. */
static stg_err add_packs(stg_ctx *ctx, run_mount *m, const char *src)
{
	glob_t g = {0};
	struct stat st;
	bool pattern = strpbrk(src, "*?[") && lstat(src, &st) != 0;
	if (pattern) {
		int rc = glob(src, GLOB_ERR, NULL, &g);
		if (rc) {
			globfree(&g);
			return rc == GLOB_NOMATCH
			               ? stg__fail(ctx, STG_ENOENT, "--mount: '%s' matches no pack",
			                           src)
			               : stg__fail_errno(ctx, STG_EIO, errno, "--mount: '%s'", src);
		}
	}
	size_t n = pattern ? g.gl_pathc : 1;
	char **v = realloc(m->packs, (m->n_packs + n) * sizeof *v);
	if (v)
		m->packs = v;
	for (size_t i = 0; v && i < n; i++) {
		if (!(v[m->n_packs] = strdup(pattern ? g.gl_pathv[i] : src)))
			v = NULL;
		else
			m->n_packs++;
	}
	globfree(&g);
	return v ? STG_OK : stg__fail(ctx, STG_ENOMEM, "out of memory");
}

/* The mount at dir, made if need be (NULL when out of memory). */
static run_mount *mount_at(run_state *r, char *dir)
{
	for (size_t i = 0; i < r->n_mounts; i++)
		if (!strcmp(r->mounts[i].dir, dir)) {
			free(dir);
			return &r->mounts[i];
		}
	run_mount *m = &r->mounts[r->n_mounts++];
	*m = (run_mount){.dir = dir, .pid = -1, .tie = -1};
	return m;
}

/* The envs, each served at its own path by a process of its own. */
static stg_err serve_envs(run_state *r)
{
	const stg_run_opts *o = r->o;
	for (size_t i = 0; i < o->n_envs; i++) {
		char *dir = strdup(o->envs[i]), *pack = stg_env_pack(o->envs[i]);
		char **packs = malloc(sizeof *packs);
		if (!dir || !pack || !packs) {
			free(dir);
			free(pack);
			free(packs);
			return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
		}
		run_mount *m = &r->mounts[r->n_mounts++];
		packs[0] = pack;
		*m = (run_mount){.dir = dir,
		                 .packs = packs,
		                 .n_packs = 1,
		                 .pid = -1,
		                 .tie = -1,
		                 .env = true};
		stg_err err = stg_env_spawn(r->ctx, r->cache, dir, 1, &m->pid, &m->tie);
		if (err == STG_ENOTSUP) {
			/* no FUSE here: the env as it is, never half of one */
			stg__log(r->ctx, STG_LOG_WARN,
			         "%s: '%s' is used from the shared filesystem as it is (slower: "
			         "every import asks it)",
			         stg_errmsg(r->ctx), dir);
			continue;
		}
		if (err)
			return err;
		stg__log(r->ctx, STG_LOG_INFO, "'%s' served from this node (its pack '%s')", dir,
		         pack);
	}
	return STG_OK;
}

stg_err stg__run_mount_all(run_state *r)
{
	const stg_run_opts *o = r->o;
	if (!o->n_mounts && !o->n_envs)
		return STG_OK;
	if (!(r->mounts = calloc(o->n_mounts + o->n_envs, sizeof *r->mounts)))
		return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
	/* the packs given with one DIR make one tree there */
	for (size_t i = 0; i < o->n_mounts; i++) {
		const stg_run_pair *q = &o->mounts[i];
		char *rel = q->dest ? strdup(q->dest) : default_dir(q->src);
		char *dir = rel ? stg__run_in_jobdir(r, rel) : NULL;
		free(rel);
		run_mount *m = dir ? mount_at(r, dir) : NULL;
		if (!m)
			return stg__fail(r->ctx, STG_ENOMEM, "out of memory");
		stg_err err = add_packs(r->ctx, m, q->src);
		if (err)
			return err;
	}
	for (size_t i = 0; i < r->n_mounts; i++) {
		run_mount *m = &r->mounts[i];
		struct stat st;
		m->made = stat(m->dir, &st) != 0;
		if (m->made && stg__mkdirs(m->dir, 0700))
			return stg__fail_errno(r->ctx, STG_EIO, errno, "cannot create '%s'",
			                       m->dir);
		stg_err err = stg_mount_spawn(r->ctx, r->cache, (const char *const *)m->packs,
		                              m->n_packs, m->dir, NULL, 1, &m->pid, &m->tie);
		if (err)
			return err;
		stg__run_export("STAGER_MOUNT", i, m->dir);
		if (m->n_packs == 1)
			stg__log(r->ctx, STG_LOG_INFO, "mounted '%s' at '%s'", m->packs[0], m->dir);
		else
			stg__log(r->ctx, STG_LOG_INFO, "mounted '%s' and %zu more packs at '%s'",
			         m->packs[0], m->n_packs - 1, m->dir);
	}
	return serve_envs(r);
}

void stg__run_unmount_all(run_state *r)
{
	/* let go of every mount first, and unmount it (a child of stg_run may
	 * hold the tie too): they end side by side */
	for (size_t i = 0; i < r->n_mounts; i++) {
		if (r->mounts[i].tie >= 0)
			close(r->mounts[i].tie);
		r->mounts[i].tie = -1;
		/* an env's mount may be other jobs' too: its server leaves it
		 * to the last one */
		if (r->mounts[i].pid > 0 && !r->mounts[i].env)
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
			if (!m->env) /* the sweep below unmounts an env nobody serves */
				stg__unmount_path(m->dir);
			stg__log(r->ctx, STG_LOG_WARN,
			         "the mount of '%s'%s at '%s' did not end when let go of: killed",
			         m->packs[0], m->n_packs > 1 ? " and more" : "", m->dir);
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
		for (size_t k = 0; k < m->n_packs; k++)
			free(m->packs[k]);
		free(m->packs);
		free(m->dir);
	}
	free(r->mounts);
	r->mounts = NULL;
	r->n_mounts = 0;
}
