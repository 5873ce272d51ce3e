/*
 * cache.c - the per-node, per-user cache on scratch.
 *
 * Layout under the scratch root (mode 0700, owned by the user):
 *   cache/<key>/             a published entry: data/ (the tree, read-only),
 *                            manifest (every file's XXH3, for --verify) and
 *                            meta (what it is; written before publishing)
 *   cache/<key>.tmp.<pid>    being built; never used
 *   cache/<key>.old.<pid>    being evicted; never used
 *   locks/<key>              single flight: its builder holds an flock
 *   locks/cache              short critical sections: publish, pin, evict
 *   index                    source identity -> digest
 *   pins/<key>/<owner>       users of an entry (a Slurm job, a process)
 *   jobs/<owner>/            job directories where there is no $SLURM_TMPDIR
 *
 * Invariants: an entry exists iff cache/<key>/meta exists (the rename of a
 * complete tmp directory publishes it; eviction renames it away first);
 * eviction and pinning both hold locks/cache, so an entry is never evicted
 * between a stager finding it and pinning it; a builder holds locks/<key>
 * while building, so a leftover cache/<key>.tmp.* whose lock is free
 * belongs to a dead builder.  Locks are flocks: the kernel drops them when
 * their holder dies, whatever killed it.
 *
 * This file opens the cache (its root, made or checked private) and holds
 * its locks and the entries' descriptions; owners and pins are in
 * cache_pin.c, eviction in cache_evict.c.
 */
#include "cache.h"
#include "holders.h"
#include "ctx.h"
#include "fsutil.h"
#include "config.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- opening ---------------------------------------------------------------- */

static const char *user_name(void)
{
	const char *u = getenv("USER");
	if (u && *u && !strchr(u, '/'))
		return u;
	struct passwd *pw = getpwuid(getuid());
	return pw ? pw->pw_name : "unknown";
}

static void owner_name(uid_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);
	if (pw)
		snprintf(buf, len, "%s (uid %u)", pw->pw_name, (unsigned)uid);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

/* Make (mode 01777, like /tmp) or check a directory that several users'
 * scratch roots share: one writable by all must be sticky, or another
 * user could rename ours away and put theirs in its place. */
static stg_err shared_dir(stg_ctx *ctx, const char *path)
{
	if (mkdir(path, 01777) == 0) {
		if (chmod(path, 01777)) /* past the umask */
			return stg__fail_errno(ctx, STG_EIO, errno, "cannot make '%s' shared",
			                       path);
		return STG_OK;
	}
	int e = errno;
	struct stat st;
	if (e == EACCES || e == EPERM)
		/* a disk top of root's: only root makes it, once per node */
		return stg__fail(ctx, STG_EIO,
		                 "cannot create '%s', the shared parent of the scratch roots: %s; "
		                 "it is made by root, once per node: ask your administrators "
		                 "to install stager's Slurm prolog (it makes it before every "
		                 "job) or to run `install -d -m 1777 '%s'` (or `stager "
		                 "doctor`) as root on this node",
		                 path, strerror(e), path);
	if (e != EEXIST || stat(path, &st))
		return stg__fail_errno(ctx, STG_EIO, e == EEXIST ? errno : e,
		                       "cannot create '%s', the shared parent of the scratch "
		                       "roots",
		                       path);
	if (!S_ISDIR(st.st_mode))
		return stg__fail(ctx, STG_EIO, "'%s' is not a directory", path);
	if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
		return stg__fail(ctx, STG_EIO,
		                 "'%s' is writable by every user but not sticky (mode %04o): "
		                 "another user could replace your scratch root there; ask "
		                 "the administrators to `chmod +t` it, or set scratch_root "
		                 "elsewhere",
		                 path, (unsigned)(st.st_mode & 07777));
	return STG_OK;
}

/* dir, on the way to the scratch root path (or the root itself), cannot
 * be made; in the shared parent (its first shared_len bytes), for want of
 * permission, that parent is not open to every user as it must be. */
static stg_err cannot_make(stg_ctx *ctx, const char *dir, const char *path, size_t shared_len)
{
	int e = errno;
	const char *what = dir == path ? "the scratch root " : "";
	if ((e == EACCES || e == EPERM) && shared_len && strlen(dir) > shared_len &&
	    !strchr(dir + shared_len + 1, '/'))
		return stg__fail(ctx, STG_EIO,
		                 "cannot create %s'%s': %s; '%.*s', where every user's scratch "
		                 "root is made, must be open to all like /tmp: ask your "
		                 "administrators to run `chmod 1777 '%.*s'` as root",
		                 what, dir, strerror(e), (int)shared_len, path, (int)shared_len,
		                 path);
	return stg__fail_errno(ctx, STG_EIO, e, "cannot create %s'%s'", what, dir);
}

/* Make or check a private directory we own (its parents from shared_len
 * on are ours too, made 0700; those before it are shared), and open it:
 * checked on the opened descriptor, a directory, not a link, ours, no
 * access for others.  The descriptor, or -1 (the cause on ctx). */
static int private_dir(stg_ctx *ctx, const char *path, size_t shared_len, bool create_parents)
{
	char buf[STG_PATH_MAX + 1];
	snprintf(buf, sizeof buf, "%s", path);
	size_t len = strlen(buf);
	for (size_t i = 1; create_parents && i < len; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		struct stat st;
		stg_err err = STG_OK;
		if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (i <= shared_len && (st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX)) {
				err = shared_dir(ctx, buf); /* names the problem */
			} else if (i > shared_len && st.st_uid != getuid() && st.st_uid != 0) {
				char who[96];
				owner_name(st.st_uid, who, sizeof who);
				err = stg__fail(
				        ctx, STG_EIO,
				        "'%s', on the way to your scratch root, belongs to %s; "
				        "set scratch_root (or --scratch) to a directory of "
				        "your own",
				        buf, who);
			}
		} else if (i <= shared_len) {
			err = shared_dir(ctx, buf);
		} else if (mkdir(buf, 0700) && errno != EEXIST) {
			err = cannot_make(ctx, buf, path, shared_len);
		}
		buf[i] = '/';
		if (err)
			return -1;
	}
	if (mkdir(path, 0700) && errno != EEXIST) {
		cannot_make(ctx, path, path, shared_len);
		return -1;
	}
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 && errno == EACCES && lstat(path, &st) == 0 && st.st_uid != getuid())
		goto not_ours; /* another user's, private */
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (e == ELOOP || e == ENOTDIR)
			stg__fail(ctx, STG_EIO, "scratch root '%s' is not a directory (a link?)",
			          path);
		else
			stg__fail_errno(ctx, STG_EIO, e, "cannot open the scratch root '%s'", path);
		return -1;
	}
	if (st.st_uid != getuid()) {
	not_ours:;
		char who[96];
		owner_name(st.st_uid, who, sizeof who);
		stg__fail(ctx, STG_EIO,
		          "scratch root '%s' belongs to %s, not to you (uid %u); set "
		          "scratch_root in ~/.config/stager/config (or --scratch) to a directory "
		          "of your own, e.g. one with $USER in it",
		          path, who, (unsigned)getuid());
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if ((st.st_mode & 077) && fchmod(fd, 0700)) {
		stg__fail_errno(ctx, STG_EIO, errno, "cannot make '%s' private", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* A default candidate is usable when its parent exists and we can write
 * there, or it is already ours. */
static bool usable(const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0)
		return S_ISDIR(st.st_mode) && st.st_uid == getuid();
	char *parent = strdup(path);
	if (!parent)
		return false;
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	bool ok = stat(parent, &st) == 0 && S_ISDIR(st.st_mode) && access(parent, W_OK | X_OK) == 0;
	free(parent);
	return ok;
}

/* The site's scratch_root v with $USER expanded, into buf; *shared the
 * length of its leading directories that every user's root shares (0:
 * none): those before the one named by $USER. */
static int expand_root(const char *v, char *buf, size_t len, size_t *shared)
{
	const char *user = user_name();
	size_t o = 0;
	for (const char *p = v; *p && o + 1 < len;) {
		size_t skip = !strncmp(p, "${USER}", 7) ? 7 : !strncmp(p, "$USER", 5) ? 5 : 0;
		if (skip) {
			o += (size_t)snprintf(buf + o, len - o, "%s", user);
			if (o >= len)
				return -1;
			p += skip;
		} else {
			buf[o++] = *p++;
		}
	}
	buf[o] = '\0';
	const char *u = strstr(v, "$USER") ? strstr(v, "$USER") : strstr(v, "${USER}");
	*shared = 0;
	if (u) {
		size_t at = (size_t)(u - v);
		while (at > 0 && v[at - 1] != '/')
			at--;
		/* the same place in the expanded path: what precedes $USER
		 * expands to itself unless an earlier $USER did */
		*shared = at ? at - 1 : 0;
	}
	return 0;
}

int stg__scratch_parent(const stg_config *cfg, char *out, size_t len)
{
	const char *v = stg_config_get(cfg, "scratch_root", NULL);
	char buf[STG_PATH_MAX + 1];
	size_t shared;
	*out = '\0';
	if (!v || *v != '/' || expand_root(v, buf, sizeof buf, &shared) || shared < 2 ||
	    shared >= len)
		return 0;
	snprintf(out, len, "%.*s", (int)shared, buf);
	return 1;
}

static stg_err resolve_root(stg_ctx *ctx, const stg_config *cfg, char **out, int *fd)
{
	const char *origin;
	const char *v = stg_config_get(cfg, "scratch_root", &origin);
	char buf[STG_PATH_MAX + 1];
	if (v && *v) {
		/* a site-wide setting names each user's directory with $USER:
		 * the directories before that one are every user's, those from
		 * it on, this user's */
		size_t shared;
		if (expand_root(v, buf, sizeof buf, &shared))
			return stg__fail(ctx, STG_EUSAGE, "scratch_root too long");
		if ((*fd = private_dir(ctx, buf, shared, true)) < 0)
			return STG_EIO;
	} else {
		const char *user = user_name();
		const char *tmp = getenv("TMPDIR");
		if (!tmp || *tmp != '/')
			tmp = "/tmp";
		char cand[3][STG_PATH_MAX + 1];
		snprintf(cand[0], sizeof cand[0], "/disk/scratch/%s", user);
		snprintf(cand[1], sizeof cand[1], "/scratch-ssd/%s", user);
		snprintf(cand[2], sizeof cand[2], "%s/stager-%s", tmp, user);
		int i;
		for (i = 0; i < 3; i++) {
			/* one there that is not the user's was made by someone
			 * else: said, never skipped for the next (a squatter
			 * would choose where the user's data goes) */
			struct stat st;
			if (lstat(cand[i], &st) == 0 &&
			    !(S_ISDIR(st.st_mode) && st.st_uid == getuid())) {
				char who[300];
				stg__user_text(st.st_uid, who, sizeof who);
				return stg__fail(
				        ctx, STG_EIO,
				        "'%s', your default scratch root, is %s of another user, "
				        "%s "
				        "(made before you used it): nothing was written; ask your "
				        "administrators to remove it, or set scratch_root in "
				        "~/.config/stager/config or use --scratch",
				        cand[i],
				        S_ISDIR(st.st_mode) ? "a directory" : "a file or link",
				        who);
			}
			if (usable(cand[i]))
				break;
		}
		if (i == 3)
			return stg__fail(ctx, STG_EIO,
			                 "no usable scratch directory (tried %s, %s, %s); set "
			                 "scratch_root in ~/.config/stager/config or use --scratch",
			                 cand[0], cand[1], cand[2]);
		_Static_assert(sizeof buf == sizeof cand[0], "one size of path");
		memcpy(buf, cand[i], sizeof buf);
		if ((*fd = private_dir(ctx, buf, 0, false)) < 0)
			return STG_EIO;
	}
	if (!(*out = strdup(buf))) {
		close(*fd);
		*fd = -1;
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	return STG_OK;
}

stg_err stg_cache_open(stg_ctx *ctx, const stg_config *cfg, stg_cache **out)
{
	*out = NULL;
	stg_cache *c = calloc(1, sizeof *c);
	if (!c)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	c->rootfd = -1;
	stg_err err = resolve_root(ctx, cfg, &c->root, &c->rootfd);
	if (err)
		goto fail;
	static const char *const dirs[] = {"cache", "locks", "pins", "jobs"};
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		if (mkdirat(c->rootfd, dirs[i], 0700) && errno != EEXIST) {
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s/%s'", c->root,
			                      dirs[i]);
			goto fail;
		}
	}
	c->stall_timeout = (unsigned)stg__config_count(cfg, "stall_timeout");
	if (!c->stall_timeout)
		c->stall_timeout = 30;
	c->keep_days = (unsigned)stg__config_count(cfg, "keep_days");
	c->cache_max = strdup(stg_config_get(cfg, "cache_max", NULL));
	c->min_free = strdup(stg_config_get(cfg, "min_free", NULL));
	c->job_tmpdir_var = strdup(stg_config_get(cfg, "job_tmpdir_var", NULL));
	if (!c->cache_max || !c->min_free || !c->job_tmpdir_var) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto fail;
	}
	if ((err = stg__limits_init(ctx, &c->lim, cfg)))
		goto fail;
	*out = c;
	return STG_OK;
fail:
	stg_cache_close(c);
	return err;
}

void stg_cache_close(stg_cache *c)
{
	if (!c)
		return;
	if (c->rootfd >= 0)
		close(c->rootfd);
	free(c->root);
	free(c->cache_max);
	free(c->min_free);
	free(c->job_tmpdir_var);
	stg__limits_free(&c->lim);
	free(c);
}

const char *stg_cache_root(const stg_cache *c)
{
	return c->root;
}

stg_err stg_slot_holders(stg_ctx *ctx, stg_cache *c, stg_holder **v, size_t *n)
{
	return stg__holders(ctx, &c->lim, v, n);
}

const char *stg_job_tmpdir(const stg_cache *c, const char **var)
{
	if (var)
		*var = c->job_tmpdir_var;
	/* a variable other than Slurm's own counts only inside a job: TMPDIR,
	 * say, is set on login nodes too */
	if (strcmp(c->job_tmpdir_var, "SLURM_TMPDIR") && !getenv("SLURM_JOB_ID"))
		return NULL;
	const char *t = getenv(c->job_tmpdir_var);
	return t && t[0] == '/' ? t : NULL;
}

/* ---- locks ------------------------------------------------------------------ */

/* One try at flock on locks/<name>, made if missing. */
static int lock_once(stg_ctx *ctx, stg_cache *c, const char *path, bool wait, bool *waited)
{
	int fd = openat(c->rootfd, path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return fd;
	if (errno != EWOULDBLOCK || !wait) {
		close(fd);
		return -1;
	}
	if (waited)
		*waited = true;
	/* tried again and again, not blocked in flock: a stop signal that
	 * came just before a blocking flock would not interrupt it, and the
	 * wait would last as long as the holder */
	double delay = 0.005;
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK || !stg__nap(ctx, delay)) {
			int e = errno == EWOULDBLOCK ? EINTR : errno;
			close(fd);
			errno = e;
			return -1;
		}
		delay = delay * 2 > 0.1 ? 0.1 : delay * 2;
	}
	return fd;
}

int stg__cache_lock(stg_ctx *ctx, stg_cache *c, const char *name, bool wait, bool *waited)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "locks/%s", name);
	if (waited)
		*waited = false;
	/* clean removes lock files nobody holds (stg__clean_locks): a file
	 * removed between our open and our flock is no lock any more, so the
	 * lock held must still be the file under the name */
	for (int tries = 0;; tries++) {
		int fd = lock_once(ctx, c, path, wait, waited);
		if (fd < 0)
			return -1;
		struct stat held, named;
		if (fstat(fd, &held) == 0 &&
		    fstatat(c->rootfd, path, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
		    held.st_dev == named.st_dev && held.st_ino == named.st_ino)
			return fd;
		close(fd);
		if (tries >= 100) {
			errno = EAGAIN;
			return -1;
		}
	}
}

void stg__clean_locks(stg_cache *c)
{
	/* relative to locks/ opened once, never through a link: clean may
	 * run as root on a user's scratch root */
	int ld = openat(c->rootfd, "locks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	char **v = NULL;
	size_t n = 0;
	if (ld < 0 || stg__dir_names(ld, "", false, &v, &n)) {
		if (ld >= 0)
			close(ld);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i], "cache") || !strcmp(v[i], "index"))
			continue; /* the cache's own, always in use */
		int fd = openat(ld, v[i], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st, named;
		if (fd < 0)
			continue;
		/* held by nobody, and still the file under the name */
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    flock(fd, LOCK_EX | LOCK_NB) == 0 &&
		    fstatat(ld, v[i], &named, AT_SYMLINK_NOFOLLOW) == 0 &&
		    named.st_dev == st.st_dev && named.st_ino == st.st_ino)
			unlinkat(ld, v[i], 0);
		close(fd); /* drops the flock: a waiter finds the file gone and retries */
	}
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	close(ld);
}

void stg__cache_unlock(int fd)
{
	if (fd >= 0)
		close(fd); /* closing drops the flock */
}

/* ---- entries ------------------------------------------------------------------ */

bool stg__key_ok(const char *key)
{
	size_t n = strlen(key);
	if (n < STG_DIGEST_HEXLEN || n > STG_DIGEST_HEXLEN + 17)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = key[i];
		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
		      (ch == '-' && i == STG_DIGEST_HEXLEN)))
			return false;
	}
	return true;
}

bool stg__entry_exists(stg_cache *c, const char *key)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "cache/%s/meta", key);
	struct stat st;
	return fstatat(c->rootfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

void stg__entry_touch(stg_cache *c, const char *key)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "cache/%s/meta", key);
	utimensat(c->rootfd, path, NULL, AT_SYMLINK_NOFOLLOW);
}

int stg__meta_write(int dirfd, const stg_meta *m)
{
	int fd = openat(dirfd, "meta", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return -1;
	}
	fprintf(f, "kind=%s\nsize=%llu\nfiles=%llu\ncontent=%llu\nsource=%s\n", m->kind,
	        (unsigned long long)m->size, (unsigned long long)m->files,
	        (unsigned long long)m->content, m->source);
	return fclose(f);
}

int stg__meta_read(stg_cache *c, const char *key, stg_meta *m)
{
	memset(m, 0, sizeof *m);
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "cache/%s/meta", key);
	int fd = openat(c->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	struct stat st;
	fstat(fd, &st);
	m->last_use = st.st_mtim.tv_sec;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -1;
	}
	char line[STG_PATH_MAX + 64];
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		const char *v = eq + 1;
		if (!strcmp(line, "kind"))
			snprintf(m->kind, sizeof m->kind, "%s", v);
		else if (!strcmp(line, "size"))
			m->size = strtoull(v, NULL, 10);
		else if (!strcmp(line, "files"))
			m->files = strtoull(v, NULL, 10);
		else if (!strcmp(line, "content"))
			m->content = strtoull(v, NULL, 10);
		else if (!strcmp(line, "source"))
			snprintf(m->source, sizeof m->source, "%s", v);
	}
	fclose(f);
	return 0;
}
