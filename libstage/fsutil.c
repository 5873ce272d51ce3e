/*
 * fsutil.c - filesystem helpers that must never follow a symbolic link.
 *
 * rmtree works relative to directory descriptors opened with O_NOFOLLOW, so
 * a symlink planted inside a tree being removed is removed itself, never
 * followed.  Directories without write permission (read-only trees, as a
 * pack may restore them) are made writable by their owner first.
 *
 * Trees are visited without recursion (stg__tree_visit: rmtree, a tree's
 * bytes, the warm check's count): a stack of frames on the heap and at
 * most VISIT_OPEN descriptors, so a tree as deep as the filesystem allows
 * neither overflows the C stack nor runs out of descriptors.
 */
#include "fsutil.h"
#include "path.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pwd.h>
#include <sys/statfs.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <stdio.h>
#include <unistd.h>

bool stg__dir_is_empty(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	bool empty = true;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

int stg__rmtree(const char *path)
{
	return stg__rmtree_at(AT_FDCWD, path);
}

int stg__mkdirs_parent(const char *path)
{
	size_t len = strlen(path);
	char *buf = malloc(len + 1);
	if (!buf) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(buf, path, len + 1);
	char *slash = strrchr(buf, '/');
	if (!slash || slash == buf) {
		free(buf);
		return 0;
	}
	*slash = '\0';
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, 0777) && errno != EEXIST) {
			int e = errno;
			free(buf);
			errno = e;
			return -1;
		}
		if (!c)
			break;
		*p = '/';
	}
	free(buf);
	return 0;
}

int stg__mkdirs(const char *path, mode_t mode)
{
	char buf[STG_PATH_MAX + 1];
	if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, mode) && errno != EEXIST ? -1 : 0;
}

int stg__replace(const char *tmp, const char *path, bool durable)
{
	if (!durable && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
		/* tmp now names the old file; one that cannot be unlinked (a
		 * directory: RENAME_EXCHANGE swaps any two names) is put back,
		 * as rename(2) would have refused to replace it */
		if (unlink(tmp) == 0 || errno == ENOENT)
			return 0;
		int e = errno;
		renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE);
		errno = e;
		return -1;
	}
	/* no file to swap with (ENOENT), or no RENAME_EXCHANGE here */
	return rename(tmp, path);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int stg__dir_names(int dirfd, const char *rel, bool sorted, char ***out, size_t *count)
{
	*out = NULL;
	*count = 0;
	int fd = rel && *rel ? openat(dirfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	                     : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	char **v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nv = realloc(v, cap * sizeof *nv);
			if (!nv) {
				rc = -1;
				errno = ENOMEM;
				break;
			}
			v = nv;
		}
		if (!(v[n] = strdup(de->d_name))) {
			rc = -1;
			errno = ENOMEM;
			break;
		}
		n++;
		errno = 0;
	}
	if (!rc && errno)
		rc = -1;
	int e = errno;
	closedir(d);
	if (rc) {
		stg__names_free(v, n);
		errno = e;
		return -1;
	}
	if (sorted && n > 1)
		qsort(v, n, sizeof *v, cmp_names);
	*out = v;
	*count = n;
	return 0;
}

void stg__names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int stg__absolute(const char *path, char *out, size_t len)
{
	if (path[0] == '/')
		return (size_t)snprintf(out, len, "%s", path) < len ? 0 : -1;
	char cwd[STG_PATH_MAX + 1];
	if (!getcwd(cwd, sizeof cwd))
		return -1;
	return (size_t)snprintf(out, len, "%s/%s", cwd, path) < len ? 0 : -1;
}

/* Copy one file: a reflink where the filesystem shares blocks, else
 * copy_file_range, else read and write. */
int stg__copy_range(int sfd, uint64_t soff, int dfd, uint64_t doff, uint64_t len)
{
	loff_t in = (loff_t)soff, out = (loff_t)doff;
	uint64_t done = 0;
	while (done < len) {
		ssize_t n = copy_file_range(sfd, &in, dfd, &out, len - done, 0);
		if (n > 0) {
			done += (uint64_t)n;
			continue;
		}
		if (n == 0) {
			errno = 0; /* sfd ended first */
			return -1;
		}
		if (errno == EINTR)
			continue;
		if (!done &&
		    (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP))
			return 1;
		return -1;
	}
	return 0;
}

/* A filesystem type of /proc/self/mountinfo whose bytes cross a link. */
static bool network_type(const char *t)
{
	static const char *const net[] = {"nfs",  "cifs",   "smb", "lustre",    "gpfs",
	                                  "ceph", "beegfs", "afs", "glusterfs", "fuse"};
	if (!strcmp(t, "fuseblk")) /* a FUSE driver of a local disk (ntfs-3g) */
		return false;
	for (size_t i = 0; i < sizeof net / sizeof net[0]; i++) {
		size_t n = strlen(net[i]);
		if (!strncmp(t, net[i], n) &&
		    (!t[n] || isdigit((unsigned char)t[n]) || t[n] == '.'))
			return true;
	}
	return false;
}

bool stg__dev_is_network(dev_t dev, char *type, size_t len)
{
	snprintf(type, len, "unknown");
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char *line = NULL, fstype[64];
	size_t cap = 0;
	bool net = false;
	while (getline(&line, &cap, f) > 0) {
		unsigned a, b;
		const char *dash = strstr(line, " - ");
		if (sscanf(line, "%*s %*s %u:%u", &a, &b) != 2 || a != major(dev) ||
		    b != minor(dev) || !dash || sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		snprintf(type, len, "%s", fstype);
		net = network_type(fstype);
		break;
	}
	free(line);
	fclose(f);
	return net;
}

bool stg__fs_shares_blocks(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf))
		return false;
	switch ((unsigned long)sf.f_type) {
	case 0x58465342: /* XFS (reflink=1 by default since 2019) */
	case 0x9123683e: /* btrfs */
	case 0xca451a4e: /* bcachefs */ return true;
	default: return false;
	}
}

int stg__copy_file(int sfd, int dfd, uint64_t size)
{
	if (ioctl(dfd, FICLONE, sfd) == 0)
		return 0;
	int r = stg__copy_range(sfd, 0, dfd, 0, size);
	if (r < 0 && !errno)
		errno = EIO;
	if (r <= 0)
		return r;
	/* the plain way */
	char buf[1 << 16];
	for (uint64_t done = 0; done < size;) {
		ssize_t n = pread(sfd, buf, sizeof buf, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (!n)
				errno = EIO;
			return -1;
		}
		if (stg__write_full(dfd, buf, (size_t)n))
			return -1;
		done += (uint64_t)n;
	}
	return 0;
}

/* ---- confined access: beneath a directory, never through a link -------- */

int stg__open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	                       .mode = (flags & O_CREAT) ? mode : 0,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	if (fd < 0 && errno == ENOSYS)
		return openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW, mode);
	return (int)fd;
}

/* The directory that holds path, opened beneath root; *base is path's last
 * component.  -1/errno. */
int stg__parent_of(int root, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		*base = path;
		return fcntl(root, F_DUPFD_CLOEXEC, 0);
	}
	char dir[STG_PATH_MAX + 1];
	size_t n = (size_t)(slash - path);
	memcpy(dir, path, n);
	dir[n] = '\0';
	*base = slash + 1;
	return stg__open_beneath(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* Bytes a tree takes (blocks), not following links. */
static int bytes_entry(void *arg, int dirfd, const char *name, const struct stat *st)
{
	(void)dirfd;
	(void)name;
	*(uint64_t *)arg += (uint64_t)st->st_blocks * 512;
	return 1;
}

uint64_t stg__tree_bytes(int dirfd, const char *name)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return 0;
	uint64_t total = (uint64_t)st.st_blocks * 512;
	if (!S_ISDIR(st.st_mode))
		return total;
	stg_tvisit v = {.entry = bytes_entry, .arg = &total};
	stg__tree_visit(dirfd, name, &v); /* what it could read */
	return total;
}

void stg__user_text(uid_t uid, char *name, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[1024];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res)
		snprintf(name, len, "%s (uid %u)", res->pw_name, (unsigned)uid);
	else
		snprintf(name, len, "uid %u", (unsigned)uid);
}

/* Trusted to hold the user's files: the user's own, or root's. */
static bool trusted(uid_t uid)
{
	return uid == geteuid() || uid == 0;
}

/* A directory of a group the user is in, which the group may write and
 * others may not (a project's shared directory): its members are trusted
 * with each other's results, no one else could have planted it. */
static bool group_shared(const struct stat *st)
{
	if ((st->st_mode & S_IWOTH) || !(st->st_mode & S_IWGRP))
		return false;
	if (st->st_gid == getegid())
		return true;
	gid_t g[256];
	int n = getgroups(256, g);
	for (int i = 0; i < n; i++)
		if (g[i] == st->st_gid)
			return true;
	return false;
}

stg_err stg__dest_ours(stg_ctx *ctx, const char *path, bool file)
{
	char at[STG_PATH_MAX + 1], who[300];
	struct stat st, lst;
	if (strlen(path) >= sizeof at)
		return stg__fail(ctx, STG_EUSAGE, "path too long: '%.200s...'", path);
	snprintf(at, sizeof at, "%s", path);
	/* DEST itself, if it is there: a directory of the user's, or a link
	 * of the user's to one */
	if (lstat(at, &lst) == 0) {
		if (S_ISLNK(lst.st_mode) && !trusted(lst.st_uid)) {
			stg__user_text(lst.st_uid, who, sizeof who);
			return stg__fail(ctx, STG_EEXIST,
			                 "'%s' is a link of another user, %s: nothing was written "
			                 "through it; remove it (or ask its owner to), or choose "
			                 "another destination",
			                 path, who);
		}
		if (file && !S_ISLNK(lst.st_mode) && !trusted(lst.st_uid)) {
			stg__user_text(lst.st_uid, who, sizeof who);
			return stg__fail(
			        ctx, STG_EEXIST,
			        "'%s' is another user's, %s: nothing was written; remove it "
			        "(or ask its owner to), or choose another destination",
			        path, who);
		}
		if (file)
			goto made_in; /* what it goes into decides */
		if (stat(at, &st))
			return STG_OK; /* (a dangling link of the user's: the caller says) */
		if (S_ISDIR(st.st_mode) && st.st_uid != geteuid() && !group_shared(&st)) {
			stg__user_text(st.st_uid, who, sizeof who);
			return stg__fail(
			        ctx, STG_EEXIST,
			        "'%s' is a directory of another user, %s: nothing was "
			        "written to it; remove it (or ask its owner to), or choose "
			        "another destination",
			        path, who);
		}
		return STG_OK;
	}
	/* else the nearest directory that is there, which it is made in: the
	 * user's or root's (a sticky /scratch, a home), and no link of
	 * anyone else's on the way */
made_in:
	for (;;) {
		char *slash = strrchr(at, '/');
		if (!slash)
			snprintf(at, sizeof at, ".");
		else if (slash == at)
			at[1] = '\0';
		else
			*slash = '\0';
		if (lstat(at, &lst) == 0)
			break;
		if (errno != ENOENT || !strcmp(at, ".") || !strcmp(at, "/"))
			return STG_OK; /* (the caller's mkdir says why) */
	}
	uid_t owner = lst.st_uid;
	if (!S_ISLNK(lst.st_mode) || trusted(lst.st_uid)) {
		if (stat(at, &st))
			return STG_OK;
		owner = st.st_uid;
		if (trusted(owner) || group_shared(&st))
			return STG_OK;
	}
	stg__user_text(owner, who, sizeof who);
	return stg__fail(ctx, STG_EEXIST,
	                 "'%s' would be made in '%s', %s of another user, %s: nothing "
	                 "was written; choose a destination in a directory of yours",
	                 path, at, S_ISLNK(lst.st_mode) ? "a link" : "a directory", who);
}

/* ---- trees without recursion ------------------------------------------------ */

/* How many directories up a visit keeps open; a level closed is opened
 * again from its child's "..", checked to be the same directory. */
#define VISIT_OPEN 32

typedef struct vframe {
	char **names;
	size_t n, i;
	int fd;
	dev_t dev;
	ino_t ino;
} vframe;

static int vframe_open(vframe *f, int dirfd, const char *name, const stg_tvisit *v)
{
	memset(f, 0, sizeof *f);
	struct stat st;
	f->fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (f->fd < 0 || fstat(f->fd, &st) || (v->enter && v->enter(v->arg, f->fd, &st)) ||
	    stg__dir_names(f->fd, NULL, v->sorted, &f->names, &f->n)) {
		int e = errno;
		if (f->fd >= 0)
			close(f->fd);
		f->fd = -1;
		errno = e;
		return -1;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	return 0;
}

/* A level closed while its subtree was visited, opened again from its
 * child's "..": it must be the directory it was. */
static int reopen_parent(const vframe *child, vframe *up)
{
	struct stat st;
	up->fd = openat(child->fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (up->fd < 0)
		return -1;
	if (fstat(up->fd, &st) || st.st_dev != up->dev || st.st_ino != up->ino) {
		close(up->fd);
		up->fd = -1;
		errno = ESTALE; /* moved while its subtree was visited */
		return -1;
	}
	return 0;
}

int stg__tree_visit(int dirfd, const char *name, const stg_tvisit *v)
{
	vframe *fr = NULL;
	size_t depth = 0, cap = 0;
	int rc = 0, e = 0;
	if (stg__grow((void **)&fr, &cap, 1, sizeof *fr, SIZE_MAX)) {
		errno = ENOMEM;
		return -1;
	}
	if (vframe_open(&fr[0], dirfd, name, v)) {
		e = errno;
		rc = -1;
		goto out;
	}
	depth = 1;
	while (depth > 0) {
		vframe *f = &fr[depth - 1];
		if (f->i == f->n) {
			vframe *up = depth > 1 ? &fr[depth - 2] : NULL;
			int r = up && up->fd < 0 ? reopen_parent(f, up) : 0;
			e = errno;
			close(f->fd);
			stg__names_free(f->names, f->n);
			depth--;
			if (!up)
				break;
			if (r || (v->leave && v->leave(v->arg, up->fd, up->names[up->i - 1]))) {
				e = r ? e : errno;
				rc = -1;
				break;
			}
			continue;
		}
		if (v->cancel && v->cancel(v->arg)) {
			e = EINTR;
			rc = -1;
			break;
		}
		const char *n = f->names[f->i++];
		struct stat st;
		if (fstatat(f->fd, n, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT)
				continue; /* gone since it was listed */
			e = errno;
			rc = -1;
			break;
		}
		int r = v->entry(v->arg, f->fd, n, &st);
		if (r < 0) {
			e = errno;
			rc = -1;
			break;
		}
		if (r == 0 || !S_ISDIR(st.st_mode))
			continue;
		if (stg__grow((void **)&fr, &cap, depth + 1, sizeof *fr, SIZE_MAX)) {
			e = ENOMEM;
			rc = -1;
			break;
		}
		f = &fr[depth - 1];
		if (vframe_open(&fr[depth], f->fd, n, v)) {
			e = errno;
			rc = -1;
			break;
		}
		depth++;
		if (depth > VISIT_OPEN && fr[depth - 1 - VISIT_OPEN].fd >= 0) {
			close(fr[depth - 1 - VISIT_OPEN].fd);
			fr[depth - 1 - VISIT_OPEN].fd = -1;
		}
	}
out:
	for (size_t k = 0; k < depth; k++) {
		if (fr[k].fd >= 0)
			close(fr[k].fd);
		stg__names_free(fr[k].names, fr[k].n);
	}
	free(fr);
	if (rc)
		errno = e;
	return rc;
}

/* rmtree: a file goes at once, a directory once what it holds is gone;
 * one without write permission is made writable by its owner first. */
typedef struct rm_state {
	int err; /* the first error, the rest still removed */
} rm_state;

static int rm_entry(void *arg, int dirfd, const char *name, const struct stat *st)
{
	rm_state *r = arg;
	if (S_ISDIR(st->st_mode))
		return 1;
	if (unlinkat(dirfd, name, 0) && errno != ENOENT && !r->err)
		r->err = errno;
	return 0;
}

static int rm_enter(void *arg, int fd, const struct stat *st)
{
	(void)arg;
	if (!(st->st_mode & S_IWUSR) || !(st->st_mode & S_IXUSR) || !(st->st_mode & S_IRUSR))
		fchmod(fd, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

static int rm_leave(void *arg, int dirfd, const char *name)
{
	rm_state *r = arg;
	if (unlinkat(dirfd, name, AT_REMOVEDIR) && errno != ENOENT && !r->err)
		r->err = errno;
	return 0;
}

int stg__rmtree_at(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -1;
	rm_state r = {0};
	stg_tvisit v = {.entry = rm_entry, .enter = rm_enter, .leave = rm_leave, .arg = &r};
	if (stg__tree_visit(dirfd, name, &v))
		return -1;
	if (r.err) {
		errno = r.err;
		return -1;
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) && errno != ENOENT)
		return -1;
	return 0;
}
