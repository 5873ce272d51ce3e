/*
 * env.c - a job's Python environment served from the node at its own path
 * (stg_env_spawn, stg_env_foreground: `stager run --env`, `stager env`).
 *
 * A venv or a conda prefix names its own absolute path everywhere: in
 * pyvenv.cfg, in the shebangs of its scripts, in .pth files, in RPATHs
 * and in conda's text files.  Moved, it breaks; so it is not moved.  Its
 * pack, ENV_DIR.tar.zst (`stager pack ENV_DIR`), is staged into the node
 * cache like any dataset (single flight, pinned while served, evicted
 * under the quota), and the cache's entry is mounted read-only over
 * ENV_DIR itself with FUSE, by the user, on this node only: every process
 * of the node that opens a path under ENV_DIR (subprocesses, DataLoader
 * workers, srun's tasks) reads the local copy, and the shared filesystem
 * sees no more than the path down to ENV_DIR.  Other nodes still see the
 * shared filesystem.  The mount belongs to the node (one per mount
 * namespace), shared by every job of the user that serves the same pack
 * there, and unmounted by the last one to end (mount_share.c).
 *
 * Never stale: before it is served, the env on the shared filesystem is
 * compared with its pack, cheaply: the directories that installers change
 * whenever they add, remove or upgrade a package (bin, lib, each
 * lib/pythonX.Y/site-packages: a *.dist-info directory comes or goes;
 * conda-meta: a record per package) must have the times the pack's
 * manifest gives them, a few stats in all.  A changed env is refused with
 * the command that packs it again.  An edit in place of a file inside a
 * package changes none of them, and is not seen.
 */
#include "env.h"
#include "mount_open.h"
#include "mount_spawn.h"
#include "pack_read.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directories whose times say whether an env changed. */
static const char *const watched[] = {"bin", "lib", "conda-meta"};
static const char *const watched_glob[] = {"lib/python*/site-packages",
                                           "lib64/python*/site-packages"};

static bool is_watched(const char *path)
{
	for (size_t i = 0; i < sizeof watched / sizeof watched[0]; i++)
		if (!strcmp(path, watched[i]))
			return true;
	for (size_t i = 0; i < sizeof watched_glob / sizeof watched_glob[0]; i++)
		if (!fnmatch(watched_glob[i], path, FNM_PATHNAME))
			return true;
	return false;
}

char *stg_env_pack(const char *env_dir)
{
	size_t n = strlen(env_dir);
	while (n > 1 && env_dir[n - 1] == '/')
		n--;
	char *p = malloc(n + sizeof ".tar.zst");
	if (p)
		snprintf(p, n + sizeof ".tar.zst", "%.*s.tar.zst", (int)n, env_dir);
	return p;
}

stg_err stg__env_pack_ours(stg_ctx *ctx, const char *env_dir, const char *pack)
{
	struct stat st;
	int r = stat(pack, &st);
	if (r && errno == ENOENT)
		return stg__fail(ctx, STG_ENOENT,
		                 "the env '%s' has no pack: make it with `stager pack %s` (it "
		                 "writes '%s'; again after each change of the env)",
		                 env_dir, env_dir, pack);
	if (r)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot read the env's pack '%s'",
		                       pack);
	if (!S_ISREG(st.st_mode))
		return stg__fail(ctx, STG_ENOENT, "the env's pack '%s' is not a regular file",
		                 pack);
	/* its links are taken as they are: only from a pack of the user's */
	if (st.st_uid != geteuid())
		return stg__fail(ctx, STG_EUSAGE,
		                 "the pack '%s' belongs to uid %u, not you: an env is served from "
		                 "a pack of your own (stager pack %s)",
		                 pack, (unsigned)st.st_uid, env_dir);
	return STG_OK;
}

/* Is the env (envfd, its directory on the shared filesystem) still what
 * pack p holds?  STG_ENOENT, with the command to run, if not. */
static stg_err env_fresh(stg_ctx *ctx, int envfd, const stg_pack *p, const char *env_dir,
                         const char *pack)
{
	const stg_trailer *t = &p->t;
	char buf[STG_PATH_MAX + 1], why[STG_PATH_MAX + 64] = "";
	bool seen[sizeof watched / sizeof watched[0]] = {false};
	size_t checked = 0;
	for (size_t i = 0; i < t->n_entries && !why[0]; i++) {
		const stg_rec *r = &t->recs[i];
		if (r->type != STG_DIR)
			continue;
		const char *path = stg__rec_path(p, r, buf);
		if (!is_watched(path))
			continue;
		for (size_t k = 0; k < sizeof watched / sizeof watched[0]; k++)
			seen[k] |= !strcmp(path, watched[k]);
		checked++;
		struct stat st;
		if (fstatat(envfd, path, &st, AT_SYMLINK_NOFOLLOW))
			snprintf(why, sizeof why, "'%s' is gone", path);
		else if (!S_ISDIR(st.st_mode))
			snprintf(why, sizeof why, "'%s' is no longer a directory", path);
		else if (st.st_mtim.tv_sec != r->mtime ||
		         (r->mtime_nsec && (uint32_t)st.st_mtim.tv_nsec != r->mtime_nsec))
			snprintf(why, sizeof why, "'%s' changed after the pack was made", path);
	}
	/* one the pack did not have must not have come since */
	for (size_t k = 0; k < sizeof watched / sizeof watched[0] && !why[0]; k++) {
		struct stat st;
		if (!seen[k] && fstatat(envfd, watched[k], &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode))
			snprintf(why, sizeof why, "'%s' is new since the pack was made",
			         watched[k]);
	}
	if (why[0])
		return stg__fail(ctx, STG_ENOENT,
		                 "the env '%s' changed after its pack '%s' was made (%s; a package "
		                 "installed, removed or upgraded?): it is not served as it was. "
		                 "Pack it again: stager pack '%s'",
		                 env_dir, pack, why, env_dir);
	if (!checked)
		stg__log(ctx, STG_LOG_WARN,
		         "'%s' has none of bin, lib, conda-meta or lib/python*/site-packages: "
		         "a change to it after its pack will not be noticed",
		         env_dir);
	return STG_OK;
}

/* Can this user mount with FUSE here: /dev/fuse opened, fusermount3 on
 * the PATH (libfuse runs it)?  STG_ENOTSUP, saying which, if not. */
static stg_err fuse_here(stg_ctx *ctx)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return stg__fail_errno(ctx, STG_ENOTSUP, errno,
		                       "FUSE is not available on this node (/dev/fuse)");
	close(fd);
	const char *path = getenv("PATH");
	char buf[STG_PATH_MAX + 1];
	for (const char *p = path && *path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");
		snprintf(buf, sizeof buf, "%.*s/fusermount3", (int)n, p);
		if (n && access(buf, X_OK) == 0)
			return STG_OK;
		p += n + (p[n] == ':');
	}
	return stg__fail(ctx, STG_ENOTSUP,
	                 "FUSE is not available on this node (no fusermount3 on the PATH)");
}

stg_err stg__env_servable(stg_ctx *ctx, const char *env_dir)
{
	char *pack = stg_env_pack(env_dir);
	if (!pack)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_pack *p = NULL;
	stg_err err = fuse_here(ctx);
	if (!err)
		err = stg__env_pack_ours(ctx, env_dir, pack);
	if (!err)
		err = stg_pack_open(ctx, pack, &p);
	if (!err) {
		int fd = open(env_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		err = fd < 0 ? stg__fail_errno(ctx, STG_ENOENT, errno, "no env at '%s'", env_dir)
		             : env_fresh(ctx, fd, p, env_dir, pack);
		if (fd >= 0)
			close(fd);
	}
	stg_pack_close(p);
	free(pack);
	return err;
}

/* What the serving process is given. */
struct env_at {
	const char *env_dir;
};

static stg_err env_open(void *arg, stg_ctx *ctx, stg_cache *c, stg_mount **out)
{
	struct env_at *a = arg;
	char given[STG_PATH_MAX + 1];
	size_t n = strlen(a->env_dir);
	while (n > 1 && a->env_dir[n - 1] == '/')
		n--;
	if (n > STG_PATH_MAX)
		return stg__fail(ctx, STG_EUSAGE, "'%s': name too long", a->env_dir);
	snprintf(given, sizeof given, "%.*s", (int)n, a->env_dir);
	char *pack = stg_env_pack(given);
	char *real = realpath(given, NULL);
	/* a mount of ours whose server died answers ENOTCONN: its path as given */
	if (!real && errno == ENOTCONN) {
		char abs[STG_PATH_MAX + 1];
		real = stg__absolute(given, abs, sizeof abs) == 0 ? strdup(abs) : NULL;
	}
	stg_err err = STG_OK;
	stg_share *sh = NULL;
	stg_pack *p = NULL;
	char digest[STG_DIGEST_HEXLEN + 1];
	if (!pack || (!real && errno == ENOMEM)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	} else if ((err = fuse_here(ctx))) {
		/* (the caller may go on with the env as it is) */
	} else if (!real) {
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "no env at '%s'", given);
	} else if ((err = stg__env_pack_ours(ctx, given, pack))) {
		/* (said) */
	} else if (!(err = stg_pack_open(ctx, pack, &p)) &&
	           !(err = stg__share_new(ctx, c, real, &sh)) &&
	           !(err = stg__share_look(ctx, sh, digest))) {
		err = env_fresh(ctx, stg__share_envfd(sh), p, given, pack);
	}
	char *owner = err ? NULL : stg_owner_process((int)getpid());
	if (!err && !owner)
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (!err) {
		/* the env's files on this node, pinned by this process (the
		 * mount's owner: it drops the pin when it ends) */
		stg_stage_result res;
		stg_stage_opts so;
		stg_stage_opts_init(&so);
		so.cache_only = 1;
		so.env = 1;
		so.owner = owner;
		err = stg_stage(ctx, c, pack, &so, &res);
		stg_stage_result_free(&res);
	}
	if (!err) {
		err = stg__mount_open_env(ctx, c, pack, p, given, sh, out);
		sh = NULL; /* the mount's, or freed */
		p = NULL;
	}
	stg_pack_close(p);
	stg__share_free(sh);
	free(owner);
	free(real);
	free(pack);
	return err;
}

stg_err stg_env_foreground(stg_ctx *ctx, stg_cache *cache, const char *env_dir,
                           void (*ready)(void *arg), void *arg)
{
	struct env_at a = {env_dir};
	return stg__mount_foreground_with(ctx, cache, env_open, &a, env_dir, ready, arg);
}

/* Is this process the task of a step of srun (its parent a slurmstepd of
 * a step other than the batch script's)?  Such a step ends when its task
 * does, and Slurm ends the step's processes with it (proctrack/cgroup):
 * a server left behind by `srun stager env` would die at once, leaving a
 * dead mount to the job's later steps. */
static bool srun_task(void)
{
	char path[64], title[128] = "";
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, title, sizeof title - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	title[n] = '\0';
	return getenv("SLURM_JOB_ID") && !strncmp(title, "slurmstepd: [", 13) &&
	       !strstr(title, ".batch]") && !strstr(title, ".extern]");
}

stg_err stg_env_spawn(stg_ctx *ctx, stg_cache *cache, const char *env_dir, int tied, int *pid,
                      int *tie_fd)
{
	struct env_at a = {env_dir};
	if (!tied && srun_task())
		return stg__fail(ctx, STG_EUSAGE,
		                 "'%s' would be served only until this step of srun ends, which is "
		                 "now: for the job's later steps on every node, `stager env "
		                 "--all-nodes %s` in the batch script; for one step, `srun stager "
		                 "run --env %s -- CMD`",
		                 env_dir, env_dir, env_dir);
	return stg__mount_spawn_with(ctx, cache, env_open, &a, env_dir, tied, pid, tie_fd);
}
