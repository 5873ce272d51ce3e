/*
 * doctor_prepare.c - stg_doctor_prepare: the node's shared places, which
 * no user can make safely for the others: the shared parent of the users'
 * scratch roots (/scratch/stager in scratch_root = /scratch/stager/$USER)
 * and the reader slots' directory (slot_dir).
 *
 * Root makes a missing one (the prolog runs this before every job, and
 * `stager doctor` as root does too), root's and mode 01777 like /tmp,
 * whatever the umask; anyone else only checks.  Both places come from the
 * settings the tool itself reads (the site's scratch_root with $USER
 * expanded, the same code as the cache's; slot_dir with its fallback), so
 * a site names them once.  Root trusts nothing found there: the place is
 * opened O_NOFOLLOW | O_DIRECTORY and checked with fstat on that
 * descriptor (a link is refused, a directory another user made is named
 * with its owner, never changed); one is made only in a parent reached
 * from '/' a component at a time, each root's and writable by no one else
 * unless sticky, through root's links only (mkdirat, openat on that
 * parent: no user's link or swap on the way), and the scratch roots'
 * parent is made only where its own parent exists (a scratch disk that did not mount
 * must not turn into a directory on the root filesystem).
 */
#include "cache.h"
#include "ctx.h"
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLOT_DIR_DEFAULT  "/run/lock/stager"
#define SLOT_DIR_FALLBACK "/dev/shm/stager-slots"

typedef struct prep {
	stg_check_fn fn;
	void *arg;
} prep;

static void say(prep *p, stg_check_level level, const char *name, const char *fix, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));

static void say(prep *p, stg_check_level level, const char *name, const char *fix, const char *fmt,
                ...)
{
	char found[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(found, sizeof found, fmt, ap);
	va_end(ap);
	stg_check c = {.level = level,
	               .name = name,
	               .found = found,
	               .fix = level == STG_CHECK_OK ? NULL : fix};
	p->fn(p->arg, &c);
}

/* A directory root may make a shared place in: root's, and not writable
 * by others unless sticky (no user can swap or plant what is in it). */
static bool safe_dir(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == 0 &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* Open dir's parent for root to make dir in, walking from '/' a component
 * at a time: each one safe_dir, a link followed only if root's (in a
 * directory already found safe), a missing one made 0755 if parents (else
 * ENOENT).  -1 with errno, and in *bad the prefix found unsafe (EPERM). */
static int open_parent(const char *dir, bool parents, char *bad, size_t badlen)
{
	char path[STG_PATH_MAX + 1];
	snprintf(path, sizeof path, "%s", dir);
	char *end = strrchr(path, '/');
	if (!end || path[0] != '/') {
		errno = EINVAL;
		return -1;
	}
	*end = '\0';
	int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st))
		return -1;
	size_t done = 1; /* fd is path's first done bytes ("/" at first) */
	for (char *c = path + 1;;) {
		if (!safe_dir(&st))
			break;
		while (*c == '/')
			c++;
		if (!*c)
			return fd;
		char *slash = strchr(c, '/');
		size_t next_done = slash ? (size_t)(slash - path) : strlen(path);
		if (slash)
			*slash = '\0';
		int next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && parents && mkdirat(fd, c, 0755) == 0)
			next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		bool users = false;
		if (next < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			/* followed only if root's (/scratch to /local/scratch) */
			if (fstatat(fd, c, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) &&
			    st.st_uid == 0)
				next = openat(fd, c, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			else
				users = true;
		}
		int e = errno;
		close(fd);
		fd = next;
		if (slash)
			*slash = '/';
		c = slash ? slash + 1 : c + strlen(c);
		done = next_done;
		if (users)
			break;
		if (fd < 0 || fstat(fd, &st)) {
			e = fd < 0 ? e : errno;
			if (fd >= 0)
				close(fd);
			errno = e;
			return -1;
		}
	}
	snprintf(bad, badlen, "%.*s", (int)done, path);
	if (fd >= 0)
		close(fd);
	errno = EPERM;
	return -1;
}

/* One shared place: dir, for what (a phrase), made by root if missing
 * (with its parents if parents), then checked: a directory, not a link,
 * root's, 01777. */
static void place(prep *p, const char *name, const char *dir_in, const char *what, bool parents)
{
	char dir[STG_PATH_MAX + 1]; /* without a trailing '/' (slot_dir = /run/lock/stager/) */
	snprintf(dir, sizeof dir, "%s", dir_in);
	for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--)
		dir[n - 1] = '\0';
	char parent[STG_PATH_MAX + 1], fix[2 * STG_PATH_MAX + 300];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = '\0';
	snprintf(fix, sizeof fix,
	         "as root: `install -d -m 1777 '%s'` (stager's Slurm prolog makes it before "
	         "every job, and `stager doctor` run as root)",
	         dir);
	bool root = geteuid() == 0, created = false;
	struct stat st;
	if (lstat(dir, &st) && errno == ENOENT) {
		if (!root) {
			/* a user's stager makes it if it can, but as that user's */
			bool can = access(parent, W_OK | X_OK) == 0;
			if (can)
				say(p, STG_CHECK_WARN, name, fix,
				    "'%s', %s, does not exist: the first stager to need it "
				    "makes it, its user's and not root's",
				    dir, what);
			else /* the slots' stage goes on without (warned) */
				say(p, parents ? STG_CHECK_WARN : STG_CHECK_FAIL, name, fix,
				    "'%s', %s, does not exist, and users cannot create it in '%s' "
				    "(%s)",
				    dir, what, parent, strerror(errno));
			return;
		}
		/* made in a parent no user can steer (a node without /run/lock:
		 * its parents made too), never through a user's link */
		char bad[STG_PATH_MAX + 1] = "";
		int pfd = open_parent(dir, parents, bad, sizeof bad);
		if (pfd < 0 && errno == EPERM && *bad) {
			snprintf(fix, sizeof fix,
			         "as root: check '%s' (a link or directory of a user's, or one "
			         "others may write), then make it by hand: `install -d -m 1777 "
			         "'%s'`",
			         bad, dir);
			say(p, STG_CHECK_FAIL, name, fix,
			    "'%s', %s, not made: '%s' on the way to it is not root's alone "
			    "(a user's link, or a directory others may write, not sticky)",
			    dir, what, bad);
			return;
		}
		if (pfd >= 0 && mkdirat(pfd, strrchr(dir, '/') + 1, 01777) == 0) {
			created = true;
			/* opened where it was made: no user can swap it there */
			int fd = openat(pfd, strrchr(dir, '/') + 1,
			                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
			    fchmod(fd, 01777))
				created = false; /* checked below as found */
			if (fd >= 0)
				close(fd);
		} else if (pfd < 0 || errno != EEXIST) {
			int e = errno;
			if (pfd >= 0)
				close(pfd);
			say(p, STG_CHECK_FAIL, name,
			    e == ENOENT
			            ? "mount the node's scratch disk, or set scratch_root in the "
			              "site's settings to a directory on it"
			            : "check the disk and its permissions",
			    "cannot create '%s', %s: %s", dir, what, strerror(e));
			return;
		}
		if (pfd >= 0)
			close(pfd);
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid != 0)
		goto not_roots; /* another user's, closed to us: named below */
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		snprintf(fix, sizeof fix,
		         "as root: remove it; stager's Slurm prolog (or `stager doctor` as root) "
		         "then makes it, root's");
		say(p, STG_CHECK_FAIL, name, fix, "'%s', %s: %s", dir, what,
		    e == ELOOP || e == ENOTDIR ? "a link or not a directory: not used"
		                               : strerror(e));
		return;
	}
	close(fd);
	if (st.st_uid != 0) {
	not_roots:;
		char who[300];
		stg__user_text(st.st_uid, who, sizeof who);
		snprintf(fix, sizeof fix,
		         "as root: `chown root '%s'` (what is in it stays its users'), or remove "
		         "it and let stager's prolog make it",
		         dir);
		say(p, STG_CHECK_WARN, name, fix,
		    "'%s', %s, belongs to %s%s, who can change it for every user%s", dir, what, who,
		    st.st_uid == geteuid() ? " (you)" : "",
		    parents ? ": the other users' stagers do not use it (no node-wide limit)"
		            : ": only root's is safe");
		return;
	}
	if ((st.st_mode & 01777) != 01777) {
		snprintf(fix, sizeof fix, "as root: `chmod 1777 '%s'`", dir);
		say(p, STG_CHECK_FAIL, name, fix, "'%s', %s, is mode %04o, not 1777: %s", dir, what,
		    (unsigned)(st.st_mode & 07777),
		    !(st.st_mode & S_IWOTH) ? "users cannot use it"
		                            : "not sticky, so one user can remove another's");
		return;
	}
	say(p, STG_CHECK_OK, name, NULL, "%s'%s' (root's, 1777), %s", created ? "created " : "",
	    dir, what);
}

stg_err stg_doctor_prepare(stg_ctx *ctx, const stg_config *cfg, stg_check_fn fn, void *arg)
{
	(void)ctx;
	prep p = {.fn = fn, .arg = arg};
	char parent[STG_PATH_MAX + 1];
	if (stg__scratch_parent(cfg, parent, sizeof parent))
		place(&p, "scratch parent", parent, "the shared parent of the scratch roots",
		      false);
	const char *max = stg_config_get(cfg, "max_readers_per_node", NULL);
	if (!strcmp(max, "0")) {
		say(&p, STG_CHECK_WARN, "reader slots", "set max_readers_per_node (e.g. 2)",
		    "no node-wide limit on shared-FS readers");
		return STG_OK;
	}
	/* where the tool looks (limit.c): a node without /run/lock uses /dev/shm */
	const char *dir = stg_config_get(cfg, "slot_dir", NULL);
	struct stat st;
	if (!strcmp(dir, SLOT_DIR_DEFAULT) && stat("/run/lock", &st) && errno == ENOENT &&
	    stat("/dev/shm", &st) == 0)
		dir = SLOT_DIR_FALLBACK;
	char what[64];
	snprintf(what, sizeof what, "the reader slots (%s per node)", max);
	place(&p, "reader slots", dir, what, true);
	return STG_OK;
}
