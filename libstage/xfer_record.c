/*
 * xfer_record.c - what may be replaced at DEST: the record of what stager
 * published there (".stager-published.NAME", naming the directory's
 * identity), the lock of transfers to DEST (an flock on the record), the
 * checks before and after a switch, the names beside DEST that must be
 * the user's (refused naming their owner when they are another's), and
 * the test hooks that stand in for an NFS server (STAGER_TEST_FAULTS).
 */
#include "xfer_record.h"
#include "ctx.h"
#include "bytes.h"
#include "fsutil.h"
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

/* ---- the record, the lock, the switch, and what may be replaced ---------- */

/* The test hook (xfer.h): is op one of the comma-separated words of
 * STAGER_TEST_FAULTS?  Whole words only: "noflock" is not "flock". */
bool stg__xr_test_fault(const char *op)
{
	const char *f = getenv(STG_TEST_FAULTS_ENV);
	size_t n = strlen(op);
	while (f && *f) {
		const char *end = strchr(f, ',');
		size_t len = end ? (size_t)(end - f) : strlen(f);
		if (len == n && !memcmp(f, op, n))
			return true;
		f = end ? end + 1 : NULL;
	}
	return false;
}

int stg__xr_xrenameat2(int olddir, const char *oldname, int newdir, const char *newname,
                       unsigned flags)
{
	if (stg__xr_test_fault("renameat2")) {
		errno = EINVAL;
		return -1;
	}
	return renameat2(olddir, oldname, newdir, newname, flags);
}

/* The identity of name under dfd ("": dfd itself), not following a link.
 * AT_STATX_FORCE_SYNC: an NFS client's cached attributes would hide a
 * change made from another client (a directory made again, an entry
 * added). */
int stg__xr_id_at(int dfd, const char *name, dir_id *id)
{
	struct statx sx;
	int flags = (*name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH) | AT_STATX_FORCE_SYNC;
	if (statx(dfd, name, flags, STATX_INO | STATX_CTIME | STATX_BTIME, &sx))
		return -1;
	if (!(sx.stx_mask & STATX_INO) || !(sx.stx_mask & STATX_CTIME)) {
		errno = ENOTSUP;
		return -1;
	}
	memset(id, 0, sizeof *id);
	id->ino = sx.stx_ino;
	id->ct_sec = sx.stx_ctime.tv_sec;
	id->ct_nsec = sx.stx_ctime.tv_nsec;
	id->bt = (sx.stx_mask & STATX_BTIME) && !stg__xr_test_fault("btime");
	id->bt_sec = id->bt ? sx.stx_btime.tv_sec : 0;
	id->bt_nsec = id->bt ? sx.stx_btime.tv_nsec : 0;
	return 0;
}

int stg__xr_dir_id_of(int fd, dir_id *id)
{
	return stg__xr_id_at(fd, "", id);
}

/* All must agree; a birth time the filesystem reports now must be in the
 * record (a record without one proves nothing there). */
bool stg__xr_id_equal(const dir_id *rec, const dir_id *cur, bool ctime)
{
	return rec->ino == cur->ino &&
	       (!ctime || (rec->ct_sec == cur->ct_sec && rec->ct_nsec == cur->ct_nsec)) &&
	       rec->bt == cur->bt && rec->bt_sec == cur->bt_sec && rec->bt_nsec == cur->bt_nsec;
}

#define RECORD_MAGIC "stager-published 2\n"
#define RECORD_MAX   1024

/* Is fd (the record) a regular file of the user stager runs as?  Anyone
 * else who can write DEST's parent (a group's project directory) could
 * otherwise vouch for a directory of the user's. */
static bool record_trusted(int fd, struct stat *st)
{
	/* one link only: a hard link to another of the user's files would
	 * be emptied and overwritten by record_write */
	return !fstat(fd, st) && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	       st->st_nlink == 1;
}

/* " INO SEC.NSEC SEC.NSEC|-", or without ctime " INO SEC.NSEC|-". */
static char *id_format(char *p, const dir_id *id, bool ctime)
{
	p += sprintf(p, " %llu ", id->ino);
	if (ctime)
		p += sprintf(p, "%lld.%09u ", id->ct_sec, id->ct_nsec);
	if (id->bt)
		p += sprintf(p, "%lld.%09u", id->bt_sec, id->bt_nsec);
	else
		p += sprintf(p, "-");
	return p;
}

/* id_format's text at *s; *s moves past it.  Strict: a torn or edited
 * record matches nothing. */
static bool id_parse(const char **s, dir_id *id, bool ctime)
{
	int n = 0;
	memset(id, 0, sizeof *id);
	if (**s != ' ' || !strchr("0123456789", (*s)[1]) || !(*s)[1])
		return false;
	if (ctime ? sscanf(*s, " %llu %lld.%9u %n", &id->ino, &id->ct_sec, &id->ct_nsec, &n) != 3
	          : sscanf(*s, " %llu %n", &id->ino, &n) != 1)
		return false;
	if (!n)
		return false;
	*s += n;
	if (**s == '-') {
		(*s)++;
		return true;
	}
	n = 0;
	if (sscanf(*s, "%lld.%9u%n", &id->bt_sec, &id->bt_nsec, &n) != 2 || !n)
		return false;
	*s += n;
	id->bt = true;
	return true;
}

/* Read the record (from the locked rc->rec, else opened here without
 * following a link or blocking on a FIFO).  false: none, not ours, or not
 * one stager wrote whole. */
bool stg__xr_record_read(receiver *rc, record *r)
{
	char buf[RECORD_MAX + 1];
	struct stat st;
	memset(r, 0, sizeof *r);
	int fd = rc->rec >= 0 ? rc->rec
	                      : openat(rc->parent, rc->rec_name,
	                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = record_trusted(fd, &st) ? pread(fd, buf, RECORD_MAX, 0) : -1;
	if (fd != rc->rec)
		close(fd);
	if (n < (ssize_t)strlen(RECORD_MAGIC))
		return false;
	buf[n] = '\0';
	if (strncmp(buf, RECORD_MAGIC, strlen(RECORD_MAGIC)))
		return false;
	const char *s = buf + strlen(RECORD_MAGIC);
	while (*s) {
		if (!strncmp(s, "published", 9) && !r->pub) {
			s += 9;
			if (!id_parse(&s, &r->p, true))
				return false;
			r->pub = true;
		} else if (!strncmp(s, "old", 3) && !r->old) {
			s += 3;
			if (!id_parse(&s, &r->o, false))
				return false;
			if (!strncmp(s, " published", 10))
				r->old_pub = true, s += 10;
			else if (!strncmp(s, " other", 6))
				s += 6;
			else
				return false;
			if (strncmp(s, " new", 4))
				return false;
			s += 4;
			if (!id_parse(&s, &r->n, false))
				return false;
			r->old = true;
		} else {
			return false;
		}
		if (*s++ != '\n')
			return false;
	}
	return true;
}

/* Write the record in place, in the locked file: emptied first, so a write
 * cut short leaves a prefix, which names less (or, torn inside a line,
 * nothing), never more.  0, or -1/errno. */
int stg__xr_record_put(receiver *rc, const record *r)
{
	char buf[RECORD_MAX], *p = buf;
	p += sprintf(p, "%s", RECORD_MAGIC);
	if (r->pub) {
		p += sprintf(p, "published");
		p = id_format(p, &r->p, true);
		*p++ = '\n';
	}
	if (r->old) {
		p += sprintf(p, "old");
		p = id_format(p, &r->o, false);
		p += sprintf(p, " %s new", r->old_pub ? "published" : "other");
		p = id_format(p, &r->n, false);
		*p++ = '\n';
	}
	size_t n = (size_t)(p - buf);
	if (rc->rec < 0) {
		errno = EBADF;
		return -1;
	}
	if (ftruncate(rc->rec, 0) || pwrite(rc->rec, buf, n, 0) != (ssize_t)n || fdatasync(rc->rec))
		return -1;
	return 0;
}

/* record_put, best effort: without it the next transfer to DEST asks for
 * --replace, which is safe. */
void stg__xr_record_write(receiver *rc, const record *r)
{
	if (!stg__xr_record_put(rc, r))
		return;
	stg__log(rc->ctx, STG_LOG_WARN,
	         "cannot write '%s/%s' (%s): the next transfer to '%s' will need --replace",
	         rc->dir, rc->rec_name, strerror(errno), rc->shown);
}

/* The record names the directory now at DEST (name under dfd, "": dfd
 * itself): taken after the switch (the renames change its ctime); nothing
 * of stager's changes it after that. */
void stg__xr_record_published(receiver *rc, int dfd, const char *name)
{
	record r = {0};
	if (!stg__xr_id_at(dfd, name, &r.p))
		r.pub = true;
	stg__xr_record_write(rc, &r);
}

/* Take the lock of transfers to DEST: 0, or an errno (EWOULDBLOCK: held
 * by another).  flock where the filesystem has it; else (Lustre without
 * -o flock, some NFS setups) a POSIX lock of the open file description,
 * which NFSv4 takes on the server. */
static int lock_fd(int fd, bool wait)
{
	if (stg__xr_test_fault("flock"))
		errno = ENOSYS;
	else if (!flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)))
		return 0;
	if (errno == EWOULDBLOCK || errno == EINTR)
		return errno;
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (stg__xr_test_fault("ofdlock"))
		errno = ENOLCK;
	else if (!fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl))
		return 0;
	return errno == EACCES ? EWOULDBLOCK : errno;
}

/* The record's name is taken by something stager cannot use as the
 * record: another user's file, link or directory (anyone who can write
 * DEST's parent, a sticky /scratch included, can make one there first,
 * and the user can neither open nor remove it), or one of the user's
 * that is not a regular file of one link.  Refused, naming the owner. */
static stg_err record_refused(receiver *rc)
{
	struct stat st;
	if (!fstatat(rc->parent, rc->rec_name, &st, AT_SYMLINK_NOFOLLOW) &&
	    st.st_uid != geteuid()) {
		char who[300];
		stg__user_text(st.st_uid, who, sizeof who);
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s/%s' is %s of another user, %s, at the name where stager "
		                 "keeps its record of '%s' (and the lock of transfers to it): "
		                 "nothing was changed; ask them to remove it, or choose another "
		                 "destination",
		                 rc->dir, rc->rec_name,
		                 S_ISLNK(st.st_mode)   ? "a link"
		                 : S_ISDIR(st.st_mode) ? "a directory"
		                 : S_ISREG(st.st_mode) ? "a file"
		                                       : "a special file",
		                 who, rc->shown);
	}
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s/%s' is not stager's record (not a regular file of yours): "
	                 "nothing was changed; remove it, or choose another destination",
	                 rc->dir, rc->rec_name);
}

stg_err stg__xr_record_check(receiver *rc)
{
	struct stat st;
	if (fstatat(rc->parent, rc->rec_name, &st, AT_SYMLINK_NOFOLLOW))
		return STG_OK; /* (absent; else the lock's open says why) */
	if (S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1)
		return STG_OK;
	return record_refused(rc);
}

/* Open the record, creating it empty, and lock it: it is the lock of
 * transfers to DEST, so two of them never share the partial directory.
 * The holder before us may have removed it (an empty record, after a
 * failed first transfer): then the one at the name is locked instead. */
stg_err stg__xr_record_lock(receiver *rc)
{
	for (int tries = 0; tries < 100; tries++) {
		struct stat st, now;
		int fd = openat(rc->parent, rc->rec_name,
		                O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
		int en = errno;
		/* another user's at that name: EACCES (or EPERM, where the
		 * kernel protects files in sticky directories), ELOOP for a link */
		if (fd < 0 && en != ELOOP && !stg__xr_record_check(rc))
			return stg__fail_errno(rc->ctx, stg__err_from_errno(en, STG_EIO), en,
			                       "cannot open '%s/%s'", rc->dir, rc->rec_name);
		if (fd < 0 || !record_trusted(fd, &st)) {
			if (fd >= 0)
				close(fd);
			return record_refused(rc);
		}
		en = lock_fd(fd, false);
		if (en == EWOULDBLOCK) {
			stg__log(rc->ctx, STG_LOG_INFO, "waiting for another transfer to '%s'",
			         rc->shown);
			en = lock_fd(fd, true);
		}
		if (en == EINTR || stg__cancelled(rc->ctx)) {
			close(fd);
			return stg__fail_errno(rc->ctx, STG_EINTR, en, "waiting for a lock");
		}
		if (en)
			stg__log(rc->ctx, STG_LOG_WARN,
			         "cannot lock '%s/%s' (%s): carrying on without the lock; do "
			         "not run two transfers to '%s' at once",
			         rc->dir, rc->rec_name, strerror(en), rc->shown);
		if (!fstatat(rc->parent, rc->rec_name, &now, AT_SYMLINK_NOFOLLOW) &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
			rc->rec = fd;
			return STG_OK;
		}
		close(fd);
	}
	return stg__fail(rc->ctx, STG_EIO, "cannot lock '%s/%s': it keeps being replaced", rc->dir,
	                 rc->rec_name);
}

/* Does the record name the directory dest as the one stager published? */
static bool record_matches(receiver *rc, int dest)
{
	record r;
	dir_id cur;
	return stg__xr_record_read(rc, &r) && r.pub && !stg__xr_dir_id_of(dest, &cur) &&
	       stg__xr_id_equal(&r.p, &cur, true);
}

/* Is dir the home directory of the user stager runs as? */
static bool is_home(int dir)
{
	struct stat st, hs;
	if (fstat(dir, &st))
		return false;
	const char *h = getenv("HOME");
	if (h && *h && !stat(h, &hs) && hs.st_dev == st.st_dev && hs.st_ino == st.st_ino)
		return true;
	struct passwd pw, *pp = NULL;
	char pbuf[4096];
	return !getpwuid_r(geteuid(), &pw, pbuf, sizeof pbuf, &pp) && pp && pp->pw_dir &&
	       !stat(pp->pw_dir, &hs) && hs.st_dev == st.st_dev && hs.st_ino == st.st_ino;
}

/* May the directory dest (DEST, open) be replaced?  Only what stager
 * published there itself (and the user has not changed since), an empty
 * directory, or anything with --replace; a home directory never: a
 * destination mistyped without its trailing "/" must not cost a user their
 * data.  rc->by_record: allowed because the record names it. */
stg_err stg__xr_dest_allowed(receiver *rc, int dest)
{
	bool pull = !strcmp(rc->what, "pull");
	const char *verb = pull ? "pull" : "push";
	rc->by_record = rc->by_empty = false;
	if (is_home(dest))
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s' is your home directory, which stager never replaces: %s "
		                 "into it as '%s%s/' (makes %s/NAME)",
		                 rc->shown, verb, pull ? "" : "HOST:", rc->shown, rc->shown);
	rc->by_record = record_matches(rc, dest);
	if (rc->replace || rc->by_record)
		return STG_OK;
	if (stg__dir_is_empty(dest)) {
		rc->by_empty = true;
		return STG_OK;
	}
	/* the inode the record names, with another ctime: changed by hand */
	record r;
	dir_id cur;
	bool changed = stg__xr_record_read(rc, &r) && r.pub && !stg__xr_dir_id_of(dest, &cur) &&
	               stg__xr_id_equal(&r.p, &cur, false);
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' exists and %s: %s into it as '%s%s/' (makes %s/NAME) or give "
	                 "--replace to make it a copy of %s",
	                 rc->shown,
	                 changed ? "has changed since stager published it"
	                 : pull  ? "was not made by stager pull"
	                         : "was not made by stager push",
	                 verb, pull ? "" : "HOST:", rc->shown, rc->shown,
	                 pull ? "HOST:PATH" : "LOCAL");
}

/* Is name, beside DEST, a directory of the user's?  1 yes, 0 absent, -1
 * something else: another user's (anyone who can write DEST's parent, a
 * sticky /scratch included, can make one there first), or not a directory.
 * stager writes the user's files only into a directory of the user's. */
int stg__xr_sibling_ours(receiver *rc, const char *name)
{
	struct stat st;
	if (fstatat(rc->parent, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -1;
	return S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? 1 : -1;
}

stg_err stg__xr_not_ours(receiver *rc, const char *name)
{
	struct stat st;
	char who[300];
	if (!fstatat(rc->parent, name, &st, AT_SYMLINK_NOFOLLOW) && st.st_uid != geteuid()) {
		stg__user_text(st.st_uid, who, sizeof who);
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s/%s' is not a directory of yours: it is %s of another user, "
		                 "%s; nothing was written to it; ask them to remove it, or choose "
		                 "another destination",
		                 rc->dir, name,
		                 S_ISLNK(st.st_mode)   ? "a link"
		                 : S_ISDIR(st.st_mode) ? "a directory"
		                                       : "a file",
		                 who);
	}
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s/%s' is not a directory of yours (another user's, or not a "
	                 "directory): nothing was written to it; remove it (or ask its owner "
	                 "to), or choose another destination",
	                 rc->dir, name);
}

/* Is what is at name in DEST's parent the directory open as fd? */
bool stg__xr_same_dir_at(receiver *rc, const char *name, int fd)
{
	struct stat a, b;
	return !fstatat(rc->parent, name, &a, AT_SYMLINK_NOFOLLOW) && !fstat(fd, &b) &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

stg_err stg__xr_not_replaced(receiver *rc)
{
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' was removed or replaced while the transfer ran; nothing was "
	                 "replaced (the files are kept for the next transfer)",
	                 rc->shown);
}

/* DEST was allowed for being empty, and the directory moved aside is not
 * empty now: something wrote into it after the last check. */
bool stg__xr_filled_meanwhile(receiver *rc)
{
	return rc->by_empty && !stg__dir_is_empty(rc->dest);
}

stg_err stg__xr_filled(receiver *rc)
{
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' was empty when the transfer began and has files now; nothing "
	                 "was replaced (the files are kept for the next transfer): %s into it "
	                 "as '%s/' or give --replace",
	                 rc->shown, !strcmp(rc->what, "pull") ? "pull" : "push", rc->shown);
}

/* The test hook "fill-dest": a file written into DEST after its last
 * check, as another process of the user's might. */
void stg__xr_test_fill(receiver *rc)
{
	int fd = stg__xr_test_fault("fill-dest")
	                 ? openat(rc->dest, "stager-test-fill",
	                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
	                 : -1;
	if (fd >= 0)
		close(fd);
}

/* ---- a pull's lock: readers of a published tree ------------------------- */

void stg__xr_holds(const receiver *rc, uint8_t out[XFER_HOLDS])
{
	memset(out, 0, XFER_HOLDS);
	struct stat st;
	if (rc->rec < 0 || fstat(rc->rec, &st))
		return;
	memcpy(out, rc->boot, XFER_BOOT);
	stg__put64(out + XFER_BOOT, (uint64_t)st.st_dev);
	stg__put64(out + XFER_BOOT + 8, (uint64_t)st.st_ino);
}

/* Is the record open at fd the one the pull's receiver holds? */
static bool held_by_peer(int fd, const uint8_t *holds)
{
	char boot[XFER_BOOT];
	struct stat st;
	stg__boot_id(boot);
	return holds && boot[0] && !memcmp(holds, boot, XFER_BOOT) && !fstat(fd, &st) &&
	       stg__get64(holds + XFER_BOOT) == (uint64_t)st.st_dev &&
	       stg__get64(holds + XFER_BOOT + 8) == (uint64_t)st.st_ino;
}

/* The longest a pull waits for a transfer to PATH to end (seconds). */
#define READ_LOCK_WAIT 600

stg_err stg__xfer_read_lock(stg_ctx *ctx, const char *path, const uint8_t *holds, int *out)
{
	*out = -1;
	char dir[STG_PATH_MAX + 1], rec[STG_PATH_MAX + 32];
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	if (len == 0 || len > STG_PATH_MAX)
		return STG_OK; /* the walk says what is wrong */
	memcpy(dir, path, len);
	dir[len] = '\0';
	char *slash = strrchr(dir, '/');
	const char *name = slash ? slash + 1 : dir;
	if (slash == dir)
		snprintf(rec, sizeof rec, "/.stager-published.%s", name);
	else if (slash)
		snprintf(rec, sizeof rec, "%.*s/.stager-published.%s", (int)(slash - dir), dir,
		         name);
	else
		snprintf(rec, sizeof rec, ".stager-published.%s", name);
	/* no record: stager never published here, and no transfer runs */
	int fd = open(rec, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return STG_OK;
	if (!record_trusted(fd, &st) || held_by_peer(fd, holds)) {
		close(fd);
		return STG_OK;
	}
	double t0 = stg__now();
	bool said = false;
	for (;;) {
		if (!flock(fd, LOCK_SH | LOCK_NB))
			break;
		int en = errno;
		if (en != EWOULDBLOCK) {
			/* no flock here: a POSIX lock of the open file description */
			struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
			if (!fcntl(fd, F_OFD_SETLK, &fl))
				break;
			en = errno == EACCES ? EWOULDBLOCK : errno;
		}
		if (en != EWOULDBLOCK)
			break; /* no lock at all on this filesystem: carry on */
		if (!said) {
			stg__log(ctx, STG_LOG_INFO,
			         "waiting for a transfer to '%s' to end before reading it", dir);
			said = true;
		}
		if (stg__now() - t0 > READ_LOCK_WAIT) {
			close(fd);
			return stg__fail(ctx, STG_EIO,
			                 "'%s' is being replaced by another transfer, still after "
			                 "%d s: pull again when it is done",
			                 dir, READ_LOCK_WAIT);
		}
		if (!stg__nap(ctx, 0.1)) {
			close(fd);
			return stg__fail(ctx, STG_EINTR, "interrupted");
		}
	}
	*out = fd;
	return STG_OK;
}
