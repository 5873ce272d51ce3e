/*
 * mount_open.c - a mount's making and unmaking: its packs and its
 * mountpoint opened, the node cache's entries, its record.
 *
 * The record, SCRATCH_ROOT/mounts/<owner>, says which process serves which
 * mountpoint from which packs (mount_list.c reads it, and says how).
 *
 * A pack the node cache already holds (its identity in the index, its entry
 * complete) is served from that entry's files, which were checked when they
 * were staged, and the entry is pinned by the mount's process while it
 * lives: nothing is read from the shared filesystem for it at all.
 */
#include "pack_read.h"
#include "attach.h"
#include "mount.h"
#include "mount_keep.h"
#include "mount_open.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_CACHE_BYTES ((size_t)256 << 20)

/* ---- opening -------------------------------------------------------------------- */

/* The node cache's entry of pack mp, by its identity, pinned by the
 * mount's owner: its data directory, or -1. */
static int cached_entry(stg_ctx *ctx, stg_mount *m, stg_mpack *mp)
{
	stg_ident id;
	stg__ident_of(&mp->st, &id);
	char hex[STG_DIGEST_HEXLEN + 1];
	if (stg__index_get(m->cache, &id, hex))
		return -1;
	int lock = stg__cache_lock(ctx, m->cache, "cache", true, NULL);
	if (lock < 0)
		return -1;
	int fd = -1;
	if (stg__entry_exists(m->cache, hex) && stg__pin(m->cache, hex, m->owner) >= 0) {
		char rel[STG_DIGEST_HEXLEN + 16];
		snprintf(rel, sizeof rel, "cache/%s/data", hex);
		fd = openat(m->cache->rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0) {
			mp->pinned = true;
			snprintf(mp->digest, sizeof mp->digest, "%s", hex);
		} else {
			stg__unpin_key(m->cache, hex, m->owner);
		}
	}
	stg__cache_unlock(lock);
	return fd;
}

/* The mountpoint (given; real: resolved, or NULL): an empty directory of
 * the user's, and not a link to one.  A mount over another user's
 * directory (one anybody may write) would hide it from its owner until
 * root unmounted it.  Checked on the directory opened without following
 * a link, which must still be the one the mount goes on. */
static stg_err check_mountpoint(stg_ctx *ctx, const char *given, const char *real)
{
	char path[STG_PATH_MAX + 1];
	size_t n = strlen(given);
	while (n > 1 && given[n - 1] == '/')
		n--; /* "link/" would follow the link */
	if (n > STG_PATH_MAX)
		return stg__fail(ctx, STG_EUSAGE, "mountpoint '%s': name too long", given);
	snprintf(path, sizeof path, "%.*s", (int)n, given);
	struct stat st, at;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		return stg__fail(ctx, STG_EUSAGE,
		                 "mountpoint '%s' is a symbolic link: mount on an empty directory "
		                 "of yours, not on a link",
		                 given);
	int fd = real ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (fd < 0 || fstat(fd, &st) || stat(real, &at) || st.st_dev != at.st_dev ||
	    st.st_ino != at.st_ino) {
		if (fd >= 0)
			close(fd);
		if (stat(path, &st) && errno == ENOENT)
			return stg__fail(ctx, STG_EUSAGE,
			                 "mountpoint '%s' does not exist: make an empty directory "
			                 "there first (mkdir)",
			                 given);
		if (stat(path, &st) || (S_ISDIR(st.st_mode) && access(path, R_OK | X_OK)))
			return stg__fail_errno(ctx, STG_EUSAGE, errno ? errno : EACCES,
			                       "cannot open the mountpoint '%s'", given);
		return stg__fail(ctx, STG_EUSAGE, "mountpoint '%s' is not a directory", given);
	}
	stg_err err = STG_OK;
	if (st.st_uid != geteuid()) {
		struct passwd pw, *res = NULL;
		char buf[1024];
		if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &res) || !res)
			res = NULL;
		err = stg__fail(ctx, STG_EUSAGE,
		                "'%s' belongs to %s%s(uid %u), not you: mount on an empty "
		                "directory of yours",
		                given, res ? res->pw_name : "", res ? " " : "",
		                (unsigned)st.st_uid);
	} else if (!stg__dir_is_empty(fd)) {
		err = stg__fail(ctx, STG_EUSAGE,
		                "mountpoint '%s' is not empty: mount on an empty directory", given);
	}
	close(fd);
	return err;
}

/* Open the pack named name into mp: its trailer read (the caller holds a
 * reader slot).  A FIFO or device put where the pack should be is refused,
 * not waited on. */
static stg_err open_pack(stg_ctx *ctx, stg_mount *m, stg_mpack *mp, const char *name)
{
	mp->given = name;
	if (!(mp->path = realpath(name, NULL)))
		return stg__fail_errno(ctx, STG_ENOENT, errno, "'%s'", name);
	int fd = open(mp->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno, "'%s'",
		                       name);
	if (fstat(fd, &mp->st) || !S_ISREG(mp->st.st_mode)) {
		close(fd);
		return stg__fail(ctx, STG_ENOENT, "'%s' is not a regular file", name);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	stg_err err = stg_pack_open_fd(ctx, fd, &mp->pack);
	close(fd);
	if (err) {
		char msg[STG_ERRMSG_MAX];
		snprintf(msg, sizeof msg, "%s", ctx->errmsg);
		return stg__fail(ctx, err, "'%s': %s", name, msg);
	}
	mp->pack->bw = &m->cache->lim.bw;
	mp->pack->bw_ctx = ctx;
	stg_digest_hex(mp->pack->t.digest, mp->digest);
	return STG_OK;
}

/* Open every pack (within one reader slot); of several, each one once and
 * of format 3. */
static stg_err open_packs(stg_ctx *ctx, stg_mount *m, const char *const *names)
{
	stg_slot slot;
	stg_err err = stg__slot_acquire(ctx, &m->cache->lim, &slot);
	if (err)
		return err;
	for (size_t i = 0; !err && i < m->n_packs; i++) {
		stg_mpack *mp = &m->packs[i];
		if ((err = open_pack(ctx, m, mp, names[i])))
			break;
		for (size_t k = 0; k < i; k++)
			if (m->packs[k].st.st_dev == mp->st.st_dev &&
			    m->packs[k].st.st_ino == mp->st.st_ino)
				err = stg__fail(ctx, STG_EUSAGE, "'%s' is given twice (as '%s')",
				                names[i], names[k]);
		if (!err && m->n_packs > 1 && mp->pack->t.version < 3)
			err = stg__fail(ctx, STG_EUSAGE,
			                "'%s' is a pack of format %u: packs of formats 1 and 2 are "
			                "mounted one at a time; pack it again with this stager to "
			                "mount it with others",
			                names[i], mp->pack->t.version);
	}
	stg__slot_release(&slot);
	return err;
}

/* The mount's frames: each pack's, one after the other, their offsets in
 * the tar stream moved past the packs before. */
static stg_err join_frames(stg_ctx *ctx, stg_mount *m)
{
	stg_trailer *t = &m->frames_of;
	const stg_trailer *first = &m->packs[0].pack->t;
	t->version = first->version;
	if (m->n_packs == 1) {
		t->frames = first->frames;
		t->n_frames = first->n_frames;
		return STG_OK;
	}
	size_t n = 0;
	for (size_t i = 0; i < m->n_packs; i++)
		n += m->packs[i].pack->t.n_frames;
	if (!(t->frames = malloc((n ? n : 1) * sizeof *t->frames)))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	uint64_t base = 0;
	for (size_t i = 0; i < m->n_packs; i++) {
		stg_mpack *mp = &m->packs[i];
		const stg_trailer *pt = &mp->pack->t;
		mp->frame_base = t->n_frames;
		mp->raw_base = base;
		for (size_t k = 0; k < pt->n_frames; k++) {
			stg_frame f = pt->frames[k];
			if (f.raw_off > UINT64_MAX - base - f.raw_size)
				return stg__fail(ctx, STG_ECORRUPT,
				                 "'%s': damaged pack: frames too large", mp->given);
			f.raw_off += base;
			t->frames[t->n_frames++] = f;
		}
		if (pt->n_frames)
			base = t->frames[t->n_frames - 1].raw_off +
			       t->frames[t->n_frames - 1].raw_size;
	}
	return STG_OK;
}

/* Descriptors for n packs: the soft limit raised as far as the hard one
 * lets it, or a clear refusal. */
static stg_err enough_fds(stg_ctx *ctx, size_t n)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)n * 5 + 64; /* pack, entry, kept frames; the rest */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need)
		return STG_OK;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		return stg__fail(ctx, STG_EUSAGE,
		                 "%zu packs need about %llu open files, and this process may have "
		                 "%llu (ulimit -Hn): mount fewer at a time",
		                 n, (unsigned long long)need, (unsigned long long)rl.rlim_max);
	rl.rlim_cur = need;
	setrlimit(RLIMIT_NOFILE, &rl);
	return STG_OK;
}

/* An env's directory (the share's, opened under any mount): the user's. */
static stg_err check_env_dir(stg_ctx *ctx, stg_share *sh, const char *given)
{
	struct stat st;
	if (fstat(stg__share_envfd(sh), &st) || !S_ISDIR(st.st_mode))
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not a directory", given);
	if (st.st_uid != geteuid())
		return stg__fail(ctx, STG_EUSAGE,
		                 "'%s' belongs to uid %u, not you: an env is served at its path "
		                 "by its owner",
		                 given, (unsigned)st.st_uid);
	return STG_OK;
}

/* An env's pack, opened by the caller already (its trailer read once). */
static stg_err take_pack(stg_ctx *ctx, stg_mount *m, const char *name, stg_pack *p)
{
	stg_mpack *mp = &m->packs[0];
	mp->given = name;
	mp->pack = p;
	if (!(mp->path = realpath(name, NULL)) || fstat(p->fd, &mp->st))
		return stg__fail_errno(ctx, STG_ENOENT, errno, "'%s'", name);
	mp->pack->bw = &m->cache->lim.bw;
	mp->pack->bw_ctx = ctx;
	stg_digest_hex(mp->pack->t.digest, mp->digest);
	return STG_OK;
}

static stg_err mount_make(stg_ctx *ctx, stg_cache *c, const char *const *packs, size_t n_packs,
                          const char *mountpoint, const stg_mount_opts *opts, stg_share *sh,
                          stg_pack *pre, stg_mount **out)
{
	*out = NULL;
	stg_err err = n_packs < 1 || n_packs > STG_MOUNT_MAX_PACKS
	                      ? stg__fail(ctx, STG_EUSAGE, "%zu packs: a mount takes 1 to %d",
	                                  n_packs, STG_MOUNT_MAX_PACKS)
	                      : enough_fds(ctx, n_packs);
	stg_mount *m = err ? NULL : calloc(1, sizeof *m);
	if (!err && (!m || !(m->packs = calloc(n_packs, sizeof *m->packs)))) {
		free(m);
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	if (err) {
		stg_pack_close(pre); /* what the caller gave is freed either way */
		stg__share_free(sh);
		return err;
	}
	m->n_packs = n_packs;
	for (size_t i = 0; i < n_packs; i++)
		m->packs[i].entry_fd = -1;
	m->ctx = ctx;
	m->cache = c;
	m->tie_fd = -1;
	pthread_mutex_init(&m->log_mu, NULL);
	pthread_mutex_init(&m->slot_mu, NULL);
	pthread_mutex_init(&m->open_mu, NULL);
	pthread_cond_init(&m->slot_cv, NULL);
	m->cache_bytes =
	        opts && opts->cache_bytes ? (size_t)opts->cache_bytes : DEFAULT_CACHE_BYTES;
	char *own = stg_owner_process((int)getpid());
	snprintf(m->owner, sizeof m->owner, "%s", own ? own : "pid-0-0");
	free(own);
	const char *job = getenv("SLURM_JOB_ID");
	if (job && *job && strlen(job) < sizeof m->job && strspn(job, "0123456789") == strlen(job))
		snprintf(m->job, sizeof m->job, "%s", job);
	if (sh) {
		m->mountpoint = strdup(stg__share_mountpoint(sh));
		err = m->mountpoint ? check_env_dir(ctx, sh, mountpoint)
		                    : stg__fail(ctx, STG_ENOMEM, "out of memory");
	} else {
		m->mountpoint = realpath(mountpoint, NULL);
		err = check_mountpoint(ctx, mountpoint, m->mountpoint);
	}
	if (!err)
		err = pre ? take_pack(ctx, m, packs[0], pre) : open_packs(ctx, m, packs);
	pre = NULL; /* the mount's */
	if (err || (err = join_frames(ctx, m)))
		goto fail;
	const stg_pack **pv = malloc(n_packs * sizeof *pv);
	if (!pv) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n_packs; i++)
		pv[i] = m->packs[i].pack;
	err = stg__mtree_build(ctx, pv, packs, n_packs, sh != NULL, &m->tree);
	free(pv);
	if (err)
		goto fail;
	m->tree->uid = getuid();
	m->tree->gid = getgid();
	m->tree->mtime = m->packs[0].st.st_mtim;
	for (size_t i = 0; i < n_packs; i++) {
		stg_mpack *mp = &m->packs[i];
		mp->entry_fd = cached_entry(ctx, m, mp);
		if (sh && mp->entry_fd < 0) {
			err = stg__fail(ctx, STG_EIO,
			                "'%s' is no longer in the node cache (evicted meanwhile?): "
			                "try again",
			                mp->path);
			goto fail;
		}
		if (mp->entry_fd < 0 && mp->pack->t.version < 3) {
			size_t n = mp->pack->t.n_entries ? mp->pack->t.n_entries : 1;
			if (!(mp->file_state = calloc(n, 1))) {
				err = stg__fail(ctx, STG_ENOMEM, "out of memory");
				goto fail;
			}
		}
		if (opts && opts->keep_frames && mp->entry_fd < 0 &&
		    (err = stg__keep_open(ctx, m, mp)))
			goto fail;
	}
	/* a stop that came while it waited: nothing is mounted */
	if (stg__cancelled(ctx)) {
		err = stg__fail(ctx, STG_EINTR, "interrupted before '%s' was mounted", mountpoint);
		goto fail;
	}
	if (sh) {
		/* the share is the mount's from here, whatever happens */
		if ((err = stg__share_start(ctx, sh, m)))
			goto fail;
	} else {
		if ((err = stg__mount_session(ctx, m, m->mountpoint, -1)))
			goto fail;
		stg__mount_record_write(m);
	}
	*out = m;
	return STG_OK;
fail:
	if (sh && !m->share)
		stg__share_free(sh);
	stg_mount_close(m);
	return err;
}

stg_err stg_mount_open(stg_ctx *ctx, stg_cache *c, const char *const *packs, size_t n_packs,
                       const char *mountpoint, const stg_mount_opts *opts, stg_mount **out)
{
	return mount_make(ctx, c, packs, n_packs, mountpoint, opts, NULL, NULL, out);
}

stg_err stg__mount_open_env(stg_ctx *ctx, stg_cache *c, const char *pack, stg_pack *p,
                            const char *env_dir, stg_share *sh, stg_mount **out)
{
	return mount_make(ctx, c, &pack, 1, env_dir, NULL, sh, p, out);
}

void stg_mount_close(stg_mount *m)
{
	if (!m)
		return;
	if (m->share) {
		stg__share_leave(m->share, m);
		stg__share_free(m->share);
		m->share = NULL;
	} else {
		stg__mount_unmount(m);
		stg__mount_record_remove(m);
	}
	for (size_t i = 0; i < m->n_packs; i++) {
		stg_mpack *mp = &m->packs[i];
		stg__keep_close(m, mp, mp->keep);
		if (mp->pinned)
			stg__mount_unpin(m, mp->digest);
		if (mp->entry_fd >= 0)
			close(mp->entry_fd);
	}
	stg__mount_free(m);
}
