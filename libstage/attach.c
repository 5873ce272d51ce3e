/*
 * attach.c - a cache entry put at its destination: the index that maps a
 * source's identity to its digest, the destination's name (DEST, DEST/,
 * the job's directory), the link into the cache or a private copy
 * (--copy), the pin; and the leftovers of dead builders.  Used by stage.c
 * for every kind of source.
 */
#include "attach.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ---- the index ---------------------------------------------------------------- */

void stg__ident_of(const struct stat *st, stg_ident *id)
{
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	id->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static bool ident_line(const char *line, stg_ident *id, char hex[STG_DIGEST_HEXLEN + 1])
{
	unsigned long long dev, ino, size;
	long long mt, ct;
	char h[STG_DIGEST_HEXLEN + 2];
	if (sscanf(line, "%65s %llu %llu %llu %lld %lld", h, &dev, &ino, &size, &mt, &ct) != 6 ||
	    strlen(h) != STG_DIGEST_HEXLEN)
		return false;
	id->dev = dev;
	id->ino = ino;
	id->size = size;
	id->mtime_ns = mt;
	id->ctime_ns = ct;
	memcpy(hex, h, STG_DIGEST_HEXLEN + 1);
	return true;
}

int stg__index_get(stg_cache *c, const stg_ident *id, char hex[STG_DIGEST_HEXLEN + 1])
{
	int fd = openat(c->rootfd, "index", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -1;
	}
	char line[STG_PATH_MAX + 256];
	int found = -1;
	while (fgets(line, sizeof line, f)) {
		stg_ident x;
		char h[STG_DIGEST_HEXLEN + 1];
		if (ident_line(line, &x, h) && !memcmp(&x, id, sizeof x)) {
			memcpy(hex, h, sizeof h);
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

int stg__index_put(stg_ctx *ctx, stg_cache *c, const stg_ident *id, const char *hex,
                   const char *path)
{
	int lk = stg__cache_lock(ctx, c, "index", true, NULL);
	if (lk < 0)
		return -1;
	int rc = -1;
	FILE *in = NULL, *out = NULL;
	int ifd = openat(c->rootfd, "index", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (ifd >= 0 && !(in = fdopen(ifd, "r")))
		close(ifd);
	char tmp[64];
	snprintf(tmp, sizeof tmp, "index.tmp.%d", (int)getpid());
	int ofd =
	        openat(c->rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ofd < 0 || !(out = fdopen(ofd, "w"))) {
		if (ofd >= 0)
			close(ofd);
		goto done;
	}
	char line[STG_PATH_MAX + 256];
	size_t kept = 0;
	while (in && fgets(line, sizeof line, in)) {
		stg_ident x;
		char h[STG_DIGEST_HEXLEN + 1];
		/* one line per file: a newer identity of the same inode replaces it;
		 * the index stays bounded by keeping the newest 10,000 */
		if (!ident_line(line, &x, h) || (x.dev == id->dev && x.ino == id->ino))
			continue;
		if (++kept > 10000)
			break;
		fputs(line, out);
	}
	/* a path with a newline is not worth an escape: it is left out */
	const char *shown = strchr(path, '\n') ? "?" : path;
	fprintf(out, "%s %llu %llu %llu %lld %lld %s\n", hex, (unsigned long long)id->dev,
	        (unsigned long long)id->ino, (unsigned long long)id->size, (long long)id->mtime_ns,
	        (long long)id->ctime_ns, shown);
	if (fclose(out) == 0 && renameat(c->rootfd, tmp, c->rootfd, "index") == 0)
		rc = 0;
	out = NULL;
done:
	if (in)
		fclose(in);
	if (rc)
		unlinkat(c->rootfd, tmp, 0);
	stg__cache_unlock(lk);
	return rc;
}

/* ---- names ---------------------------------------------------------------------- */

/* NAME from a source path: its last component without archive suffixes. */
static char *dest_name(const char *src)
{
	size_t len = strlen(src);
	while (len > 1 && src[len - 1] == '/')
		len--;
	size_t start = len;
	while (start > 0 && src[start - 1] != '/')
		start--;
	char *name = strndup(src + start, len - start);
	if (!name)
		return NULL;
	static const char *const sfx[] = {".tar.zst", ".tar.gz", ".tar.xz", ".tar.bz2",
	                                  ".tar.lz4", ".tzst",   ".tgz",    ".txz",
	                                  ".tbz2",    ".tar",    ".zip",    ".7z"};
	size_t n = strlen(name);
	for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
		size_t k = strlen(sfx[i]);
		if (n > k && !strcmp(name + n - k, sfx[i])) {
			name[n - k] = '\0';
			break;
		}
	}
	if (!strcmp(name, ".") || !strcmp(name, "..") || !*name) {
		free(name);
		name = strdup("data");
	}
	return name;
}

/* DEST as given; "DIR/" means into DIR, as NAME (as cp, scp and push do). */
static char *dest_into(const char *dest, const char *src)
{
	size_t n = strlen(dest);
	if (!n || dest[n - 1] != '/')
		return strdup(dest);
	char *name = dest_name(src), *out = NULL;
	if (name && asprintf(&out, "%s%s", dest, name) < 0)
		out = NULL;
	free(name);
	return out;
}

static char *default_dest(stg_ctx *ctx, stg_cache *c, const char *src, const char *owner,
                          stg_err *err)
{
	char *name = dest_name(src);
	char *out = NULL;
	if (!name) {
		*err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		return NULL;
	}
	const char *tmpdir = stg_job_tmpdir(c, NULL);
	size_t need =
	        strlen(c->root) + strlen(owner) + strlen(name) + 16 + (tmpdir ? strlen(tmpdir) : 0);
	out = malloc(need);
	if (!out) {
		free(name);
		*err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		return NULL;
	}
	if (tmpdir) {
		snprintf(out, need, "%s/%s", tmpdir, name);
	} else {
		/* the site has no per-job scratch: a job directory of our own,
		 * removed by clean once its owner is gone */
		char jd[STG_PATH_MAX];
		snprintf(jd, sizeof jd, "jobs/%s", owner);
		if (mkdirat(c->rootfd, jd, 0700) && errno != EEXIST) {
			*err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s/%s'",
			                       c->root, jd);
			free(out);
			free(name);
			return NULL;
		}
		snprintf(out, need, "%s/jobs/%s/%s", c->root, owner, name);
	}
	free(name);
	return out;
}

/* The default DEST (the job's NAME), unless it links to another dataset
 * already: another pack of that name staged earlier by the job, which may
 * be reading it there.  That link is never switched; NAME-2, NAME-3, ...
 * (the first free one, or one with this very link, or one whose entry is
 * gone) instead.  NULL if out of memory. */
static char *unused_default(char *dest, const char *target)
{
	char *cand = dest;
	for (int i = 2; cand && i < 10000; i++) {
		char cur[STG_PATH_MAX + 1];
		ssize_t n = readlink(cand, cur, sizeof cur - 1);
		if (n <= 0)
			break; /* free, or not a link (link_dest decides) */
		cur[n] = '\0';
		if (!strcmp(cur, target) || access(cur, F_OK))
			break; /* this very link, or one to an entry gone */
		if (cand != dest)
			free(cand);
		if (asprintf(&cand, "%s-%d", dest, i) < 0)
			cand = NULL;
	}
	if (cand != dest)
		free(dest);
	return cand;
}

/* ---- linking and copying into place ------------------------------------------- */

static stg_err link_dest(stg_ctx *ctx, stg_cache *c, const char *target, const char *dest)
{
	struct stat st;
	if (lstat(dest, &st) == 0) {
		if (S_ISLNK(st.st_mode)) {
			char cur[STG_PATH_MAX + 1];
			ssize_t n = readlink(dest, cur, sizeof cur - 1);
			if (n > 0) {
				cur[n] = '\0';
				if (!strcmp(cur, target))
					return STG_OK; /* staged there already */
				size_t rl = strlen(c->root);
				if (strncmp(cur, c->root, rl) || strncmp(cur + rl, "/cache/", 7))
					return stg__fail(
					        ctx, STG_EEXIST,
					        "'%s' exists (a link to '%s'); remove it or "
					        "choose another destination",
					        dest, cur);
				/* a link to another entry of ours: switch it below */
			}
		} else if (!(S_ISDIR(st.st_mode) && rmdir(dest) == 0)) {
			return stg__fail(ctx, STG_EEXIST,
			                 "'%s' exists; remove it or choose another destination",
			                 dest);
		}
	} else if (errno == ENOENT && stg__mkdirs_parent(dest)) {
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot create the parents of '%s'",
		                       dest);
	}
	/* a new link beside it, renamed over: the switch is atomic */
	char *tmp = stg__tmp_name(dest, "link");
	if (!tmp)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	if (symlink(target, tmp) || rename(tmp, dest)) {
		int e = errno;
		unlink(tmp);
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "cannot link '%s'",
		                      dest);
	}
	free(tmp);
	return err;
}

/* A private copy, made without recursion (stg__tree_visit walks the
 * entry): the copy's directories on a stack beside the visit's, the
 * deepest COPY_OPEN of them open, a closed one opened again from its
 * child's "..", checked to be the one made. */
#define COPY_OPEN 32

typedef struct cdir {
	int fd;
	dev_t dev;
	ino_t ino;
	mode_t mode;
	struct timespec mtime;
} cdir;

typedef struct copier {
	stg_ctx *ctx; /* cancelled: the copy stops (EINTR) before the next entry */
	int top;      /* the copy's top (the caller's) */
	cdir *d;
	size_t n, cap;
	const char *pending; /* the directory just made, to go into */
} copier;

static int copy_entry(void *arg, int sfd, const char *n, const struct stat *st)
{
	copier *c = arg;
	if (stg__cancelled(c->ctx)) {
		errno = EINTR;
		return -1;
	}
	int dfd = c->d[c->n - 1].fd;
	struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
	mode_t mode = (st->st_mode & 07777) | S_IWUSR;
	if (S_ISDIR(st->st_mode)) {
		if (mkdirat(dfd, n, 0700))
			return -1;
		c->pending = n;
		return 1;
	}
	if (S_ISLNK(st->st_mode)) {
		char t[STG_PATH_MAX + 1];
		ssize_t k = readlinkat(sfd, n, t, sizeof t - 1);
		if (k < 0)
			return -1;
		t[k] = '\0';
		return symlinkat(t, dfd, n) || utimensat(dfd, n, ts, AT_SYMLINK_NOFOLLOW) ? -1 : 0;
	}
	if (!S_ISREG(st->st_mode))
		return 0;
	int rc = 0;
	int a = openat(sfd, n, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int b = a < 0 ? -1
	              : openat(dfd, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a < 0 || b < 0 || stg__copy_file(a, b, (uint64_t)st->st_size) || fchmod(b, mode) ||
	    futimens(b, ts))
		rc = -1;
	int e = errno;
	if (a >= 0)
		close(a);
	if (b >= 0 && close(b))
		return -1;
	errno = e;
	return rc;
}

/* A directory of the entry is listed: its copy (the top's, or the one
 * copy_entry just made) goes on the stack. */
static int copy_enter(void *arg, int sfd, const struct stat *st)
{
	(void)sfd;
	copier *c = arg;
	if (stg__grow((void **)&c->d, &c->cap, c->n + 1, sizeof *c->d, SIZE_MAX)) {
		errno = ENOMEM;
		return -1;
	}
	cdir *d = &c->d[c->n];
	struct stat dst;
	d->fd = c->n == 0 ? fcntl(c->top, F_DUPFD_CLOEXEC, 0)
	                  : openat(c->d[c->n - 1].fd, c->pending,
	                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d->fd < 0)
		return -1;
	if (fstat(d->fd, &dst)) {
		close(d->fd);
		return -1;
	}
	d->dev = dst.st_dev;
	d->ino = dst.st_ino;
	d->mode = (st->st_mode & 07777) | S_IWUSR | S_IXUSR;
	d->mtime = st->st_mtim;
	c->n++;
	if (c->n > COPY_OPEN && c->d[c->n - 1 - COPY_OPEN].fd >= 0) {
		close(c->d[c->n - 1 - COPY_OPEN].fd);
		c->d[c->n - 1 - COPY_OPEN].fd = -1;
	}
	return 0;
}

/* What a directory holds is copied: its bits and mtime, then its parent
 * is the top again. */
static int copy_leave(void *arg, int sfd, const char *name)
{
	(void)sfd;
	(void)name;
	copier *c = arg;
	cdir *d = &c->d[c->n - 1], *up = &c->d[c->n - 2];
	struct timespec ts[2] = {{0, UTIME_OMIT}, d->mtime};
	int rc = fchmod(d->fd, d->mode) || futimens(d->fd, ts) ? -1 : 0;
	if (!rc && up->fd < 0) {
		struct stat st;
		up->fd = openat(d->fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up->fd < 0 || fstat(up->fd, &st) || st.st_dev != up->dev ||
		    st.st_ino != up->ino) {
			errno = up->fd < 0 ? errno : ESTALE; /* moved meanwhile */
			rc = -1;
		}
	}
	int e = errno;
	close(d->fd);
	c->n--;
	errno = e;
	return rc;
}

/* Copy the tree at sfd into dfd (both directories), writable for the job. */
static int copy_tree(stg_ctx *ctx, int sfd, int dfd)
{
	copier c = {.ctx = ctx, .top = dfd};
	stg_tvisit v = {.entry = copy_entry, .enter = copy_enter, .leave = copy_leave, .arg = &c};
	int rc = stg__tree_visit(sfd, ".", &v);
	int e = errno;
	for (size_t k = 0; k < c.n; k++)
		if (c.d[k].fd >= 0)
			close(c.d[k].fd);
	free(c.d);
	errno = e;
	return rc;
}

/* A private copy's top: the entry's bits (the source's, read-only) made
 * writable by its owner, as copy_tree does for what is inside. */
static mode_t top_mode(int sfd)
{
	struct stat st;
	return fstat(sfd, &st) ? 0755 : (st.st_mode & 07777) | S_IWUSR | S_IXUSR;
}

/* Why a copy at dest failed (errno e), with the figures when it did not
 * fit: the dataset's size (need) and what is free there without it. */
static stg_err copy_failed(stg_ctx *ctx, int e, const char *dest, uint64_t need)
{
	struct statvfs vfs;
	char a[16], b[16], dir[STG_PATH_MAX + 1];
	const char *slash = strrchr(dest, '/');
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - dest) + 1 : 1, slash ? dest : ".");
	if (stg__cancelled(ctx))
		return stg__fail(ctx, STG_EINTR, "interrupted: no copy was made at '%s'", dest);
	if ((e == ENOSPC || e == EDQUOT) && need && statvfs(dir, &vfs) == 0)
		return stg__fail(
		        ctx, STG_ENOSPC,
		        "not enough space for a copy at '%s': need %s, %s free there: "
		        "free some space, or stage without --copy (a link to the "
		        "cache)",
		        dest, stg_format_size(need, a, sizeof a),
		        stg_format_size((uint64_t)vfs.f_bavail * vfs.f_frsize, b, sizeof b));
	return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
	                       "cannot copy the dataset to '%s'", dest);
}

static stg_err copy_dest(stg_ctx *ctx, const char *target, const char *dest, uint64_t need)
{
	struct stat st;
	bool was_dir = false; /* an empty directory there, removed: made again on failure */
	if (lstat(dest, &st) == 0 && !(was_dir = S_ISDIR(st.st_mode) && rmdir(dest) == 0))
		return stg__fail(ctx, STG_EEXIST,
		                 "'%s' exists; remove it or choose another destination", dest);
	if (stg__mkdirs_parent(dest))
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot create the parents of '%s'",
		                       dest);
	char *tmp = stg__tmp_name(dest, "copy");
	if (!tmp)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	int sfd = open(target, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int dfd = -1;
	if (sfd < 0 || mkdir(tmp, 0700) ||
	    (dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    copy_tree(ctx, sfd, dfd) || fchmod(dfd, top_mode(sfd)) || rename(tmp, dest)) {
		int e = errno;
		stg__rmtree(tmp);
		err = copy_failed(ctx, e, dest, need);
		if (was_dir)
			mkdir(dest, st.st_mode & 07777);
	}
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	free(tmp);
	return err;
}

/* Remove builds of this key left by dead builders (the caller holds the
 * key's lock, so no live builder has one). */
void stg__remove_leftovers(stg_cache *c, const char *key)
{
	char **names;
	size_t n;
	if (stg__dir_names(c->rootfd, "cache", false, &names, &n))
		return;
	size_t kl = strlen(key);
	char rel[STG_PATH_MAX];
	for (size_t i = 0; i < n; i++) {
		if (!strncmp(names[i], key, kl) && !strncmp(names[i] + kl, ".tmp.", 5)) {
			snprintf(rel, sizeof rel, "cache/%s", names[i]);
			stg__rmtree_at(c->rootfd, rel);
		}
	}
	stg__names_free(names, n);
}

/* Pin the entry (if it still exists) and put it at the destination.
 * STG_ENOENT (quietly) if it was evicted meanwhile: the caller retries. */
stg_err stg__attach(stg_ctx *ctx, stg_cache *c, const char *key, const char *src,
                    const stg_stage_opts *o, const char *owner, stg_stage_result *res)
{
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	bool ok = stg__entry_exists(c, key);
	if (ok && !o->no_pin && stg__pin(c, key, owner) < 0) {
		int e = errno;
		stg__cache_unlock(lk);
		return stg__fail_errno(ctx, STG_EIO, e, "cannot pin the cache entry %s", key);
	}
	stg__cache_unlock(lk);
	if (!ok)
		return STG_ENOENT;
	stg__entry_touch(c, key);
	stg_meta m;
	if (stg__meta_read(c, key, &m) == 0) {
		if (!res->files)
			res->files = m.files;
		if (!res->content_bytes)
			res->content_bytes = m.content;
	}
	char target[STG_PATH_MAX];
	snprintf(target, sizeof target, "%s/cache/%s/data", c->root, key);
	if (o->cache_only) {
		res->path = strdup(target);
		return res->path ? STG_OK : stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	stg_err err = STG_OK;
	char *dest = o->dest ? dest_into(o->dest, src) : default_dest(ctx, c, src, owner, &err);
	if (dest && !o->dest && !o->copy)
		dest = unused_default(dest, target);
	if (!dest)
		return err ? err : stg__fail(ctx, STG_ENOMEM, "out of memory");
	/* a link or copy only where no other user could swap it for one of
	 * theirs (the job would read their data) */
	if (!(err = stg__dest_ours(ctx, dest, true)))
		err = o->copy ? copy_dest(ctx, target, dest, res->content_bytes)
		              : link_dest(ctx, c, target, dest);
	if (err) {
		free(dest);
		return err;
	}
	res->path = dest;
	return STG_OK;
}
