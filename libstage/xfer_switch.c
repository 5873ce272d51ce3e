/*
 * xfer_switch.c - the receiving end's second half: the record of what
 * stager published (".stager-published.NAME"), the lock of transfers to
 * DEST, what may be replaced, the switch (renameat2 RENAME_EXCHANGE, or two
 * renames where the filesystem has none), a pack instead of a tree, and
 * the receiver's set-up and its entry points.  xfer.c explains the whole.
 */
#include "xfer_switch.h"
#include "xfer_record.h"
#include "xfer_recv.h"
#include "xfer_recv_file.h"
#include "xfer_same.h"
#include "rsjob.h"
#include "ctx.h"
#include "bytes.h"
#include "fsutil.h"
#include "path.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- the switch, the pack, and the receiver's set-up ------------------ */

/* The switch without RENAME_EXCHANGE, cut after the old version was moved
 * aside: it goes back to DEST, and the record is as it was (naming it
 * again, with the ctime the renames gave it, if stager had published it). */
static void undo_aside(receiver *rc, const record *before)
{
	if (renameat(rc->parent, rc->old_name, rc->parent, rc->name))
		return; /* the record's "old" line puts it back next time */
	if (rc->by_record)
		stg__xr_record_published(rc, rc->dest, "");
	else
		stg__xr_record_write(rc, before);
}

/* NFS, CephFS and GlusterFS cannot exchange: the old version steps aside,
 * the new one takes its place, the old one is removed.  Between the two
 * renames, a moment, DEST does not exist.  The record names both (the
 * "old" line) before the first rename and until the removal is done, so a
 * receiver killed anywhere in between is finished by the next one
 * (finish_switch).  What is at .stager-old.NAME is never removed unseen:
 * it may be such a version. */
static stg_err switch_renames(receiver *rc)
{
	struct stat st;
	if (!fstatat(rc->parent, rc->old_name, &st, AT_SYMLINK_NOFOLLOW) || errno != ENOENT)
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s/%s' is in the way of the switch (left by an interrupted "
		                 "transfer?); nothing was replaced: look at it, move it "
		                 "elsewhere, and transfer again",
		                 rc->dir, rc->old_name);
	record before, r;
	if (!stg__xr_record_read(rc, &before))
		memset(&before, 0, sizeof before);
	before.old = false;
	r = before;
	r.old = true;
	r.old_pub = rc->by_record;
	if (stg__xr_dir_id_of(rc->dest, &r.o) || stg__xr_dir_id_of(rc->part, &r.n) ||
	    stg__xr_record_put(rc, &r)) {
		int en = errno;
		stg__xr_record_write(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en,
		                       "cannot write '%s/%s' before the switch of '%s'; nothing "
		                       "was replaced (the files are kept for the next transfer)",
		                       rc->dir, rc->rec_name, rc->shown);
	}
	if (renameat(rc->parent, rc->name, rc->parent, rc->old_name)) {
		int en = errno;
		stg__xr_record_write(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot switch '%s'", rc->shown);
	}
	if (!stg__xr_same_dir_at(rc, rc->old_name, rc->dest)) {
		/* not the directory checked: back, and nothing else */
		renameat(rc->parent, rc->old_name, rc->parent, rc->name);
		stg__xr_record_write(rc, &before);
		return stg__xr_not_replaced(rc);
	}
	if (stg__xr_filled_meanwhile(rc)) {
		undo_aside(rc, &before);
		return stg__xr_filled(rc);
	}
	if (stg__xr_test_fault("cut-switch"))
		return stg__fail(rc->ctx, STG_EINTR, "the switch of '%s' was cut (test)",
		                 rc->shown);
	if (renameat(rc->parent, rc->part_name, rc->parent, rc->name)) {
		int en = errno;
		undo_aside(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot switch '%s'", rc->shown);
	}
	if (stg__xr_test_fault("cut-published"))
		return stg__fail(rc->ctx, STG_EINTR,
		                 "the switch of '%s' was cut before the record (test)", rc->shown);
	r.pub = !stg__xr_dir_id_of(rc->part, &r.p);
	stg__xr_record_write(rc, &r);
	if (stg__xr_test_fault("cut-remove"))
		return stg__fail(rc->ctx, STG_EINTR, "the removal of the old '%s' was cut (test)",
		                 rc->shown);
	if (stg__rmtree_at(rc->parent, rc->old_name)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "cannot remove the old version at '%s/%s' (%s): the next transfer to "
		         "'%s' tries again",
		         rc->dir, rc->old_name, strerror(errno), rc->shown);
		return STG_OK;
	}
	r.old = false;
	stg__xr_record_write(rc, &r);
	return STG_OK;
}

/* Put the partial directory at DEST: exchanged with the old version (then
 * removed), or renamed there on a first transfer.  DEST was checked when
 * the transfer began; the renames go by name, so the directory there now
 * must be that one, still allowed, and the one moved aside is checked
 * again (anything else is put back), and still empty if it was allowed
 * for that. */
static stg_err switch_in(receiver *rc)
{
	if (rc->dest >= 0) {
		if (!stg__xr_same_dir_at(rc, rc->name, rc->dest))
			return stg__xr_not_replaced(rc);
		stg_err err = stg__xr_dest_allowed(rc, rc->dest);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(rc->ctx));
			return stg__fail(rc->ctx, err, "%s; nothing was replaced", msg);
		}
		stg__xr_test_fill(rc);
		if (!stg__xr_xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name,
		                        RENAME_EXCHANGE)) {
			/* the old version now has the partial name */
			bool moved = stg__xr_same_dir_at(rc, rc->part_name, rc->dest);
			if (!moved || stg__xr_filled_meanwhile(rc)) {
				stg__xr_xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name,
				                   RENAME_EXCHANGE);
				return moved ? stg__xr_filled(rc) : stg__xr_not_replaced(rc);
			}
			stg__xr_record_published(rc, rc->part, "");
			stg__rmtree_at(rc->parent, rc->part_name);
			return STG_OK;
		}
		if (errno != EINVAL && errno != ENOSYS)
			return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot switch '%s'",
			                       rc->shown);
		return switch_renames(rc);
	}
	if (!stg__xr_xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name,
	                        RENAME_NOREPLACE)) {
		stg__xr_record_published(rc, rc->part, "");
		return STG_OK;
	}
	int en = errno;
	struct stat st;
	/* no RENAME_NOREPLACE (EINVAL): DEST was absent when the lock was
	 * taken, and transfers to it hold the lock; look again just before */
	if (en != EEXIST && en != EINVAL && en != ENOSYS)
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot publish '%s'", rc->shown);
	if (en == EEXIST || !fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW) ||
	    errno != ENOENT)
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s' appeared while the transfer ran; nothing was published "
		                 "(the files are kept for the next one)",
		                 rc->shown);
	if (renameat(rc->parent, rc->part_name, rc->parent, rc->name))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot publish '%s'", rc->shown);
	stg__xr_record_published(rc, rc->part, "");
	return STG_OK;
}

/* --pack: may the file at DEST (PATH.tar.zst) be replaced?  As for a tree:
 * only a pack stager published there (the record names it by inode, ctime
 * and birth time) or with --replace; nothing there is fine. */
static stg_err pack_allowed(receiver *rc)
{
	char path[2 * STG_PATH_MAX + 2];
	snprintf(path, sizeof path, "%s/%s", rc->dir, rc->name);
	struct stat st;
	if (fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return STG_OK;
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", path);
	}
	if (!S_ISREG(st.st_mode))
		return stg__fail(rc->ctx, STG_EEXIST, "'%s' exists and is not a pack", path);
	record r;
	dir_id cur;
	if (rc->replace ||
	    (stg__xr_record_read(rc, &r) && r.pub && !stg__xr_id_at(rc->parent, rc->name, &cur) &&
	     stg__xr_id_equal(&r.p, &cur, true)))
		return STG_OK;
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' exists and was not made by stager push --pack (or has changed "
	                 "since): give --replace to replace it, or push to another PATH",
	                 path);
}

/* Directory modes and mtimes, deepest first, then the switch. */
static stg_err publish(receiver *rc)
{
	for (size_t i = rc->n; i-- > 0;) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_DIR)
			continue;
		const char *base;
		int pfd = stg__parent_of(rc->part, e->path, &base);
		struct timespec ts[2] = {{0, UTIME_OMIT}, {e->mtime, e->mtime_nsec}};
		if (pfd < 0 || fchmodat(pfd, base, e->mode & 01777, 0) ||
		    utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW)) {
			int en = errno;
			if (pfd >= 0)
				close(pfd);
			return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot set up '%s'",
			                       stg__recv_shown(rc, e->path));
		}
		close(pfd);
	}
	struct timespec ts[2] = {{0, UTIME_OMIT}, {rc->root_mtime, 0}};
	if (fchmod(rc->part, rc->root_mode) || futimens(rc->part, ts))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set up '%s'", rc->name);
	if (rc->pack) {
		/* the pack is written beside PATH and renamed over it when complete */
		char tree[2 * STG_PATH_MAX + 2], out[2 * STG_PATH_MAX + 2];
		snprintf(tree, sizeof tree, "%s/%s", rc->dir, rc->part_name);
		snprintf(out, sizeof out, "%s/%s", rc->dir, rc->name);
		stg_pack_opts po;
		stg_pack_opts_init(&po);
		/* checked again under the lock: a file put there meanwhile */
		stg_err err = pack_allowed(rc);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(rc->ctx));
			return stg__fail(rc->ctx, err, "%s; nothing was replaced", msg);
		}
		if ((err = stg_pack_dir(rc->ctx, tree, out, &po, NULL)))
			return err;
		stg__xr_record_published(rc, rc->parent, rc->name);
		stg__rmtree_at(rc->parent, rc->part_name);
		return STG_OK;
	}
	return switch_in(rc);
}

/* --pack: the files of the pack already at PATH serve as the basis, so a
 * re-push sends deltas as it would for a tree.  A pack that cannot be read
 * is no basis (said once); nothing is sent that would not be otherwise. */
static stg_err unpack_basis(receiver *rc)
{
	stg_err err = pack_allowed(rc);
	if (err)
		return err;
	/* the old pack's files are unpacked here: the user's, so only into a
	 * directory of the user's (one left by a killed receiver is removed) */
	int ours = stg__xr_sibling_ours(rc, rc->basis_name);
	if (ours < 0)
		return stg__xr_not_ours(rc, rc->basis_name);
	if (ours)
		stg__rmtree_at(rc->parent, rc->basis_name);
	rc->basis_made = true;
	char pack_path[2 * STG_PATH_MAX + 2], basis[2 * STG_PATH_MAX + 2];
	snprintf(pack_path, sizeof pack_path, "%s/%s", rc->dir, rc->name);
	snprintf(basis, sizeof basis, "%s/%s", rc->dir, rc->basis_name);
	struct stat st;
	if (fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return STG_OK;
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", pack_path);
	}
	stg_pack *p = NULL;
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	if (stg_pack_open(rc->ctx, pack_path, &p) || stg_unpack(rc->ctx, p, basis, &uo, NULL)) {
		stg__log(rc->ctx, STG_LOG_WARN, "'%s' cannot serve as a basis: %s", pack_path,
		         stg_errmsg(rc->ctx));
		stg_pack_close(p);
		return STG_OK;
	}
	stg_pack_close(p);
	rc->dest =
	        openat(rc->parent, rc->basis_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->dest >= 0 && (fstat(rc->dest, &st) || st.st_uid != geteuid())) {
		close(rc->dest);
		rc->dest = -1;
		rc->basis_made = false;
		return stg__xr_not_ours(rc, rc->basis_name);
	}
	return STG_OK;
}

/* DEST's parent directory and the names beside it. */
static stg_err dest_names(receiver *rc, const char *dest)
{
	char path[STG_PATH_MAX + 1];
	size_t len = strlen(dest);
	while (len > 1 && dest[len - 1] == '/')
		len--;
	if (len == 0 || len > STG_PATH_MAX)
		return stg__fail(rc->ctx, STG_EUSAGE, "a bad destination '%s'", dest);
	memcpy(path, dest, len);
	path[len] = '\0';
	if (!(rc->shown = strdup(path)))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	char *slash = strrchr(path, '/');
	const char *dir = ".";
	if (slash == path) {
		dir = "/";
	} else if (slash) {
		*slash = '\0';
		dir = path;
	}
	const char *name = slash ? slash + 1 : path;
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > 200)
		return stg__fail(rc->ctx, STG_EUSAGE, "'%s' does not name a directory to write",
		                 dest);
	size_t nl = strlen(name);
	bool ext = nl > 8 && !strcmp(name + nl - 8, ".tar.zst");
	if (!(rc->name = malloc(nl + 9)) || !(rc->dir = strdup(dir)) ||
	    !(rc->part_name = malloc(nl + 9 + sizeof ".stager-partial.")) ||
	    !(rc->basis_name = malloc(nl + 9 + sizeof ".stager-basis.")) ||
	    !(rc->rec_name = malloc(nl + 9 + sizeof ".stager-published.")) ||
	    !(rc->old_name = malloc(nl + 9 + sizeof ".stager-old.")))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	/* --pack: PATH.tar.zst, as collect --pack writes */
	sprintf(rc->name, "%s%s", name, rc->pack && !ext ? ".tar.zst" : "");
	sprintf(rc->part_name, ".stager-partial.%s", rc->name);
	sprintf(rc->basis_name, ".stager-basis.%s", rc->name);
	sprintf(rc->rec_name, ".stager-published.%s", rc->name);
	sprintf(rc->old_name, ".stager-old.%s", rc->name);
	rc->parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc->parent < 0)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot open '%s' (the directory that will hold '%s')", dir,
		                       name);
	return STG_OK;
}

/* Open DEST itself (a tree), and check that it may be replaced. */
static stg_err dest_open(receiver *rc)
{
	rc->dest = openat(rc->parent, rc->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->dest < 0 && errno == ENOENT)
		return STG_OK;
	if (rc->dest < 0 && (errno == ENOTDIR || errno == ELOOP))
		return stg__fail(rc->ctx, STG_EEXIST, "'%s' exists and is not a directory",
		                 rc->shown);
	if (rc->dest < 0)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot open '%s'", rc->shown);
	return stg__xr_dest_allowed(rc, rc->dest);
}

/* A switch without RENAME_EXCHANGE that did not finish (a receiver killed
 * between its first rename and the end of the old version's removal) left
 * the old version at .stager-old.NAME, and the record's "old" line names it
 * and the version that was to replace it.  Under the lock, before anything
 * else: the old version goes back if DEST is absent, and is removed (the
 * removal finished) if DEST is that new version.  Only a directory of the
 * user's that the line names: anyone who can write the parent could make
 * one of that name. */
static void finish_switch(receiver *rc)
{
	record r;
	bool have = stg__xr_record_read(rc, &r);
	struct stat st;
	if (fstatat(rc->parent, rc->old_name, &st, AT_SYMLINK_NOFOLLOW)) {
		/* nothing there: a line naming it is stale (its inode may be reused) */
		if (errno == ENOENT && have && r.old) {
			r.old = false;
			stg__xr_record_write(rc, &r);
		}
		return;
	}
	int fd = openat(rc->parent, rc->old_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
	    nfd = -1;
	dir_id id, nid;
	bool ours = fd >= 0 && !fstat(fd, &st) && st.st_uid == geteuid() &&
	            !stg__xr_dir_id_of(fd, &id) && have && r.old &&
	            stg__xr_id_equal(&r.o, &id, false);
	if (!ours) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "'%s/%s' is not a version stager moved aside; it was left where it is: "
		         "look at it, then move it back to '%s' or remove it",
		         rc->dir, rc->old_name, rc->shown);
		goto out;
	}
	nfd = openat(rc->parent, rc->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 && errno == ENOENT) {
		if (!renameat(rc->parent, rc->old_name, rc->parent, rc->name)) {
			stg__log(rc->ctx, STG_LOG_WARN,
			         "'%s': put back the version an interrupted switch had moved aside",
			         rc->shown);
			/* the rename changed its ctime: the record names it again
			 * only if stager had published it */
			r.old = false;
			r.pub = r.old_pub && !stg__xr_dir_id_of(fd, &r.p);
			stg__xr_record_write(rc, &r);
		}
		goto out;
	}
	if (nfd < 0 || fstat(nfd, &st) || st.st_uid != geteuid() || stg__xr_dir_id_of(nfd, &nid) ||
	    !stg__xr_id_equal(&r.n, &nid, false)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "'%s/%s' is the version an interrupted switch moved aside, and '%s' is "
		         "not the one that replaced it: both were left as they are; look at "
		         "them, then remove one",
		         rc->dir, rc->old_name, rc->shown);
		goto out;
	}
	if (stg__rmtree_at(rc->parent, rc->old_name)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "cannot remove '%s/%s', the old version an interrupted switch left "
		         "(%s): remove it, then transfer again",
		         rc->dir, rc->old_name, strerror(errno));
		goto out;
	}
	stg__log(rc->ctx, STG_LOG_INFO,
	         "'%s/%s': removed the old version an interrupted switch left", rc->dir,
	         rc->old_name);
	/* the record names DEST only if it did before the cut */
	r.old = false;
	r.pub = r.pub && stg__xr_id_equal(&r.p, &nid, true);
	stg__xr_record_write(rc, &r);
out:
	if (fd >= 0)
		close(fd);
	if (nfd >= 0)
		close(nfd);
}

static void receiver_names_free(receiver *rc)
{
	/* an empty record names nothing: it was only the lock */
	struct stat st;
	if (rc->rec >= 0 && !fstat(rc->rec, &st) && st.st_size == 0)
		unlinkat(rc->parent, rc->rec_name, 0);
	if (rc->rec >= 0)
		close(rc->rec); /* and the lock with it */
	free(rc->name);
	free(rc->dir);
	free(rc->part_name);
	free(rc->basis_name);
	free(rc->rec_name);
	free(rc->old_name);
	free(rc->shown);
	if (rc->parent >= 0)
		close(rc->parent);
}

/* Open DEST's parent, the record (locked), the partial directory and DEST
 * itself. */
static stg_err receiver_open(receiver *rc, const char *dest)
{
	const char *faults = getenv(STG_TEST_FAULTS_ENV);
	if (faults && *faults)
		stg__log(rc->ctx, STG_LOG_WARN,
		         "%s=%s: simulating filesystem faults, for tests only; unset it",
		         STG_TEST_FAULTS_ENV, faults);
	stg_err err = dest_names(rc, dest);
	if (!err)
		err = stg__xr_record_lock(rc);
	if (err)
		return err;
	/* the temporary record of earlier stagers (renamed over the record), left by
	 * a receiver killed at that rename */
	char tmp[STG_PATH_MAX + 32];
	struct stat st;
	snprintf(tmp, sizeof tmp, ".stager-tmp-published.%s", rc->name);
	if (!fstatat(rc->parent, tmp, &st, AT_SYMLINK_NOFOLLOW) && !S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid())
		unlinkat(rc->parent, tmp, 0);
	if (rc->pack) {
		if ((err = unpack_basis(rc)))
			return err;
	} else {
		finish_switch(rc);
		if ((err = dest_open(rc)))
			return err;
	}
	if (mkdirat(rc->parent, rc->part_name, 0700) && errno != EEXIST)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot create '%s/%s'", rc->dir, rc->part_name);
	rc->part =
	        openat(rc->parent, rc->part_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->part < 0 && errno != ENOTDIR && errno != ELOOP)
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot open '%s/%s'", rc->dir,
		                       rc->part_name);
	/* the user's files go only into a directory of the user's: another
	 * user may have made this one first, open to all */
	struct stat pst;
	if (rc->part < 0 || fstat(rc->part, &pst) || !S_ISDIR(pst.st_mode) ||
	    pst.st_uid != geteuid()) {
		if (rc->part >= 0)
			close(rc->part);
		rc->part = -1;
		return stg__xr_not_ours(rc, rc->part_name);
	}
	if (fchmod(rc->part, 0700))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set the mode of '%s/%s'",
		                       rc->dir, rc->part_name);
	return STG_OK;
}

/* A receiver with nothing open yet. */
static receiver receiver_new(stg_ctx *ctx, stg_wire *w, bool pack, bool replace, const char *what)
{
	return (receiver){.ctx = ctx,
	                  .w = w,
	                  .parent = -1,
	                  .part = -1,
	                  .dest = -1,
	                  .rec = -1,
	                  .pack = pack,
	                  .replace = replace,
	                  .what = what};
}

stg_err stg__receive_check(stg_ctx *ctx, const char *dest, bool pack, bool replace,
                           const char *what)
{
	receiver rc = receiver_new(ctx, NULL, pack, replace, what);
	stg_err err = dest_names(&rc, dest);
	/* a record's name another user took is said before anything is read */
	if (!err)
		err = stg__xr_record_check(&rc);
	if (!err)
		err = pack ? pack_allowed(&rc) : dest_open(&rc);
	if (rc.dest >= 0)
		close(rc.dest);
	receiver_names_free(&rc);
	return err;
}

/* DEST is the tree already (xfer_same.c): nothing to build or switch; the
 * sender's DONE is awaited, the partial directory (ours, checked when
 * opened) removed. */
static stg_err keep_dest(receiver *rc)
{
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	stg_err err = stg__wire_send(rc->w, STG_W_WANTS_END, NULL, 0, NULL, 0);
	if (!err)
		err = stg__wire_read(rc->w, &t, &p, &len);
	if (!err && t != STG_W_DONE)
		err = stg__fail(rc->ctx, STG_EREMOTE, "protocol error: message %u, not DONE", t);
	if (err)
		return err;
	stg__rmtree_at(rc->parent, rc->part_name);
	close(rc->part);
	rc->part = -1;
	return stg__wire_send(rc->w, STG_W_PUBLISHED, NULL, 0, NULL, 0);
}

stg_err stg__receive_tree(stg_ctx *ctx, stg_wire *w, const char *dest, bool pack, bool replace,
                          bool checksum, const char *what, stg_xfer_result *res)
{
	receiver rc = receiver_new(ctx, w, pack, replace, what);
	rc.checksum = checksum;
	stg_err err = STG_OK;
	if (stg__strmap_init(&rc.paths, 1024)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	rc.map = true;
	stg__boot_id(rc.boot);
	if ((err = receiver_open(&rc, dest)))
		goto out;
	/* a pull's server reads its tree under a shared lock: it is told
	 * which lock this end holds, in case it is that very tree */
	if (!strcmp(what, "pull") && w->version >= 4) {
		uint8_t holds[XFER_HOLDS];
		stg__xr_holds(&rc, holds);
		if ((err = stg__wire_send(w, STG_W_HOLDS, holds, sizeof holds, NULL, 0)))
			goto out;
	}
	stg__recv_index_load(&rc);
	bool same = false;
	if ((err = stg__recv_read_manifest(&rc)))
		goto out;
	/* the file buffers once the manifest is in: a stream refused before
	 * (a damaged one, each input of the fuzz target) never pays for them */
	rc.buf = malloc(XFER_BLOCK);
	rc.out = malloc(XFER_BLOCK);
	if (!rc.buf || !rc.out) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if ((err = stg__recv_unchanged(&rc, res, &same)))
		goto out;
	if (same) {
		err = keep_dest(&rc);
		goto out;
	}
	if ((err = stg__recv_resume_names_init(&rc)) || (err = stg__recv_clean_partial(&rc)) ||
	    (err = stg__recv_plan(&rc, res)))
		goto out;
	stg__progress(ctx, what, 0, rc.total);
	for (;;) {
		uint8_t t;
		const uint8_t *p;
		uint32_t len;
		if ((err = stg__wire_read(w, &t, &p, &len)))
			goto out;
		if (t == STG_W_DONE)
			break;
		if (t != STG_W_FILE) {
			err = stg__fail(ctx, STG_EREMOTE, "protocol error: message %u, not a file",
			                t);
			goto out;
		}
		uint32_t idx = len >= 4 ? stg__get32(p) : 0; /* p is gone after the file */
		if ((err = stg__recv_receive_file(&rc, p, len)))
			goto out;
		rentry *re = &rc.r[idx];
		if (re->from) {
			/* resumed within: its first bytes were not sent again */
			res->resumed_files++;
			res->resumed_bytes = stg__sat_add(res->resumed_bytes, re->from);
		} else if (re->basis != BASIS_NONE) {
			res->delta_files++;
		} else {
			res->whole_files++;
		}
		res->sent_content = stg__sat_add(res->sent_content, re->e.size - re->from);
	}
	for (size_t i = 0; i < rc.n; i++)
		if (rc.r[i].wanted && !rc.r[i].received) {
			err = stg__fail(ctx, STG_ECORRUPT, "'%s' never arrived",
			                stg__recv_shown(&rc, rc.r[i].e.path));
			goto out;
		}
	if ((err = stg__recv_links_and_verify(&rc)) || (err = publish(&rc)))
		goto out;
	stg__recv_index_save(&rc);
	err = stg__wire_send(w, STG_W_PUBLISHED, NULL, 0, NULL, 0);
out:
	res->hashed_files = stg__sat_add(res->hashed_files, rc.hashed);
	stg__xindex_free(&rc.idx);
	stg__recv_dest_walk_free(&rc);
	if (rc.map)
		stg__strmap_free(&rc.paths);
	if (rc.rmap)
		stg__strmap_free(&rc.rnames);
	for (size_t i = 0; i < rc.n; i++) {
		XXH3_freeState(rc.r[i].pre);
		free(rc.r[i].rname);
	}
	free(rc.r);
	stg__arena_free(&rc.names);
	free(rc.buf);
	free(rc.out);
	/* a partial directory with nothing to resume from is no use */
	if (err && rc.part >= 0 && stg__dir_is_empty(rc.part))
		unlinkat(rc.parent, rc.part_name, AT_REMOVEDIR);
	if (rc.dest >= 0)
		close(rc.dest);
	if (rc.basis_made && stg__xr_sibling_ours(&rc, rc.basis_name) > 0)
		stg__rmtree_at(rc.parent, rc.basis_name);
	if (rc.part >= 0)
		close(rc.part);
	receiver_names_free(&rc);
	return err;
}
