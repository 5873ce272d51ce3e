/*
 * collect.c - copy results from scratch to the shared filesystem, as often
 * as a job likes, cheaply and safely.
 *
 * The record.  For each (SRC, DEST, mode) stager keeps on scratch a log,
 * collect/<id>, of what it has put in DEST: directories made; files with
 * their identity on scratch (size, mtime, ctime, inode), mode and the
 * XXH3-128 of what was written; links.  A file whose identity is unchanged
 * is not looked at again; one whose identity changed but whose size did
 * not is hashed locally and sent only if its content differs.  None of that
 * touches the shared filesystem: the one call an unchanged collect makes
 * there is a stat() of DEST, which notices a DEST removed or replaced since
 * the record was made (everything is then sent again).  Files removed from
 * SRC are not removed from DEST: collect never deletes results.  A file
 * that was there at the walk and is gone when its turn comes was removed
 * or renamed (a checkpoint written as NAME.tmp and renamed to NAME):
 * nothing is lost, nothing is said but with --verbose, and SRC is walked
 * again (a few times at most) so that what took its place is sent by the
 * same collect.
 *
 * Atomicity.  Every file is written as .stager-tmp.<host>.<pid>.<n> beside its
 * final name and renamed over it, so a final name holds the old file or the
 * complete new one.  The temporary name is logged before the file is
 * created, so the next collect removes what a killed one left; the log is
 * appended with write(2) as each file lands, so a kill loses nothing
 * recorded and at worst sends a file again.
 *
 * --pack.  SRC is packed on scratch and verified there, then copied to
 * DEST.tar.zst like a single file.  The record then lists SRC's identities
 * at that time: any change, addition or removal makes a new pack.
 */
#include "collect.h"
#include "collect_record.h"
#include "collect_send.h"
#include "hash.h"
#include "walk.h"
#include "ctx.h"
#include "extract.h"
#include "fsutil.h"
#include "path.h"
#include "collect_mark.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TRIES          5 /* attempts at a file on transient errors */
#define CHANGE_TRIES   3 /* attempts at a file that changes while it is copied */
#define VANISHED_WALKS 3 /* walks again after files vanished mid-collect */

/* ---- deciding -------------------------------------------------------------------- */

static bool same_ident(const crec *r, const struct stat *st)
{
	return r->size == (uint64_t)st->st_size && r->ino == (uint64_t)st->st_ino &&
	       r->mtime_ns == ns_of(&st->st_mtim) && r->ctime_ns == ns_of(&st->st_ctim);
}

/* Does it need sending?  Identity first; a file whose identity changed but
 * not its size is hashed (locally) against what was sent. */
static bool needs_send(collector *k, const stg_witem *it)
{
	crec *r = stg__col_rec_find(k, it->path);
	if (S_ISDIR(it->st.st_mode))
		return !r || r->type != 'd';
	char type = S_ISLNK(it->st.st_mode) ? 'l' : 'f';
	if (!r || r->type != type)
		return true;
	if (type == 'l')
		return r->ino != (uint64_t)it->st.st_ino || r->mtime_ns != ns_of(&it->st.st_mtim) ||
		       r->ctime_ns != ns_of(&it->st.st_ctim);
	if (same_ident(r, &it->st) && r->mode == (it->st.st_mode & 07777))
		return false;
	if (r->size != (uint64_t)it->st.st_size || r->mode != (it->st.st_mode & 07777))
		return true;
	uint8_t h[16];
	uint64_t size;
	if (stg__hash_file(k->srcfd, it->path, h, &size))
		return true;
	if (size != r->size || memcmp(h, r->xxh3, 16))
		return true;
	/* touched, not changed: remember the new identity */
	r->mtime_ns = ns_of(&it->st.st_mtim);
	r->ctime_ns = ns_of(&it->st.st_ctim);
	r->ino = (uint64_t)it->st.st_ino;
	stg__col_log_rec(k, r);
	return false;
}

/* Is there room on DEST's filesystem for need bytes and inodes more? */
static stg_err check_space(collector *k, const char *path, uint64_t need, uint64_t inodes)
{
	struct statvfs vfs;
	if (statvfs(path, &vfs))
		return stg__fail_errno(k->ctx, STG_EIO, errno,
		                       "cannot check the free space of '%s'", path);
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	bool files_known = vfs.f_files != 0;
	bool no_bytes = need > avail;
	bool no_files = files_known && inodes > (uint64_t)vfs.f_favail;
	if (no_bytes || no_files) {
		/* the advice fits the shortage: --pack saves files (inodes), not
		 * bytes worth speaking of for results that are already compressed */
		char a[32], b[32], d[32];
		stg_format_size(need > avail ? need - avail : 0, d, sizeof d);
		return stg__fail(
		        k->ctx, STG_ENOSPC,
		        "'%s' cannot take the results: they need %s and %llu files, it has "
		        "%s and %llu files free (quota?); %s%s%s",
		        path, stg_format_size(need, a, sizeof a), (unsigned long long)inodes,
		        stg_format_size(avail, b, sizeof b),
		        (unsigned long long)(files_known ? vfs.f_favail : 0),
		        no_bytes ? "free at least " : "", no_bytes ? d : "",
		        no_bytes && no_files
		                ? " there, and collect with --pack (one file instead of many)"
		        : no_bytes ? " there, or collect to a filesystem with more room"
		                   : "too few files (inodes) are left: collect with --pack "
		                     "(one file instead of many), or remove files there");
	}
	return STG_OK;
}

/* Make DEST (and its parents) and open it; note its identity if note. */
static stg_err open_dest(collector *k, const char *path, mode_t mode, bool note)
{
	stg__col_op(k);
	stg_err err = stg__dest_ours(k->ctx, path, false);
	if (err)
		return err;
	if (mkdir(path, mode) && errno != EEXIST) {
		if (errno != ENOENT || stg__mkdirs_parent(path) ||
		    (mkdir(path, mode) && errno != EEXIST))
			return stg__fail_errno(k->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot create '%s'", path);
	}
	k->destfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (k->destfd < 0 || fstat(k->destfd, &st))
		return stg__fail_errno(k->ctx, STG_EIO, errno, "cannot open '%s'", path);
	/* what was opened, whatever happened since the check */
	if (st.st_uid != geteuid() && stg__dest_ours(k->ctx, path, false))
		return STG_EEXIST; /* (it said why) */
	/* where the temporaries of this collect go: `stager clean` removes
	 * what a killed one left there once the record goes */
	char abs[STG_PATH_MAX + 1];
	if (stg__absolute(path, abs, sizeof abs) == 0 && strcmp(abs, k->where)) {
		snprintf(k->where, sizeof k->where, "%s", abs);
		stg__col_log_line(k, "P ", abs);
	}
	if (note && ((uint64_t)st.st_dev != k->dest_dev || (uint64_t)st.st_ino != k->dest_ino)) {
		k->dest_dev = (uint64_t)st.st_dev;
		k->dest_ino = (uint64_t)st.st_ino;
		char head[80];
		snprintf(head, sizeof head, "D %llu %llu", (unsigned long long)k->dest_dev,
		         (unsigned long long)k->dest_ino);
		stg__col_log_line(k, head, NULL);
	}
	return STG_OK;
}

/* The nearest existing directory at or above path (for statvfs). */
static void existing_parent(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	struct stat st;
	while (stat(out, &st)) {
		char *slash = strrchr(out, '/');
		if (!slash || slash == out) {
			snprintf(out, len, "/");
			return;
		}
		*slash = '\0';
	}
}

/* ---- the tree ---------------------------------------------------------------------- */

/* Note that the directory holding path changed in DEST (path itself stays
 * valid while the walk lives: the set keeps pointers into it). */
static void touched(collector *k, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;
	stg__strmap_put(&k->dirs, path, len, 1);
}

/* Give the directories that changed their mtimes from SRC, deepest first
 * (as rsync -a does). */
static void dir_times(collector *k, const stg_walk *w)
{
	for (size_t i = w->n; i-- > 0;) {
		const stg_witem *it = &w->v[i];
		if (!S_ISDIR(it->st.st_mode) ||
		    stg__strmap_get(&k->dirs, it->path, strlen(it->path)) == UINT32_MAX)
			continue;
		struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
		stg__col_op(k);
		utimensat(k->destfd, it->path, ts, AT_SYMLINK_NOFOLLOW);
	}
	struct stat st;
	if (stg__strmap_get(&k->dirs, "", 0) != UINT32_MAX && fstat(k->srcfd, &st) == 0) {
		struct timespec ts[2] = {{0, UTIME_OMIT}, st.st_mtim};
		stg__col_op(k);
		futimens(k->destfd, ts);
	}
}

static stg_err collect_tree(collector *k, stg_walk *w)
{
	struct stat dst;
	if (stat(k->dest, &dst) || (uint64_t)dst.st_dev != k->dest_dev ||
	    (uint64_t)dst.st_ino != k->dest_ino) {
		if (k->n_recs)
			stg__log(
			        k->ctx, STG_LOG_INFO,
			        "'%s' is not the directory collected to before: sending everything",
			        k->dest);
		stg__col_recs_clear(k);
	}
	bool *send = calloc(w->n ? w->n : 1, sizeof *send);
	if (!send)
		return stg__fail(k->ctx, STG_ENOMEM, "out of memory");
	/* need: blocks, for the space check; bytes: what progress counts */
	uint64_t need = 0, bytes = 0, inodes = 0, todo = 0, files = 0;
	for (size_t i = 0; i < w->n; i++) {
		const stg_witem *it = &w->v[i];
		if (S_ISREG(it->st.st_mode))
			k->res->files++;
		if (!(send[i] = needs_send(k, it))) {
			/* (one this collect sent before it walked again is sent,
			 * not unchanged) */
			crec *rec = S_ISREG(it->st.st_mode) ? stg__col_rec_find(k, it->path) : NULL;
			if (S_ISREG(it->st.st_mode) && !(rec && rec->now))
				k->res->unchanged++;
			continue;
		}
		todo++;
		inodes++;
		if (S_ISREG(it->st.st_mode)) {
			files++;
			bytes += (uint64_t)it->st.st_size;
			need += ((uint64_t)it->st.st_size + 4095) / 4096 * 4096;
		}
	}
	stg_err err = STG_OK;
	if (!todo && !k->n_pending)
		goto out; /* nothing to do: the shared FS is not touched */
	/* a job's last collect says what it has to do: if Slurm's SIGKILL cuts
	 * it short, the log shows where it was */
	char sz[16];
	stg__log(k->ctx, k->o->slot_wait_max > 0 ? STG_LOG_INFO : STG_LOG_DEBUG,
	         "collecting %llu file%s (%s) to '%s'", (unsigned long long)files,
	         files == 1 ? "" : "s", stg_format_size(bytes, sz, sizeof sz), k->dest);
	char at[STG_PATH_MAX + 1];
	existing_parent(k->dest, at, sizeof at);
	if ((err = check_space(k, at, need + 64 * 1024, inodes + 1)))
		goto out;
	stg_slot slot;
	if ((err = stg__slot_acquire_by(k->ctx, &k->c->lim, &slot, stg__col_slot_deadline(k->o))))
		goto out;
	char mark[128] = "";
	/* DEST, when this collect makes it, keeps SRC's permission bits as the
	 * directories below it do: a private SRC gives a private DEST */
	struct stat sst;
	mode_t top = fstat(k->srcfd, &sst) == 0 ? (sst.st_mode & 0777) | 0700 : 0777;
	if (!(err = open_dest(k, k->dest, top, true))) {
		stg__col_remove_leftovers(k);
		/* what a collect killed on another node left, and our marker */
		stg__mark_sweep(k->ctx, k->destfd, k->dest, false);
		stg__col_mark_begin(k, mark, sizeof mark);
		k->total_bytes = bytes;
		if (k->ctx->progress_fn)
			k->ctx->progress_fn(k->ctx->progress_arg, "collect", 0, bytes);
		for (size_t i = 0; i < w->n && !k->stop; i++) {
			const stg_witem *it = &w->v[i];
			if (!send[i])
				continue;
			if (stg__cancelled(k->ctx)) {
				k->stop = stg__fail(k->ctx, STG_EINTR, "interrupted");
				break;
			}
			if (S_ISDIR(it->st.st_mode)) {
				stg__col_op(k);
				struct stat st;
				if (mkdirat(k->destfd, it->path, (it->st.st_mode & 0777) | 0700) &&
				    (errno != EEXIST ||
				     fstatat(k->destfd, it->path, &st, AT_SYMLINK_NOFOLLOW) ||
				     !S_ISDIR(st.st_mode))) {
					stg__col_failed(k, it->path,
					                errno == EEXIST ? "notdir" : "dest",
					                errno == EEXIST ? ENOTDIR : errno);
					continue;
				}
				crec r = {.type = 'd'};
				stg__col_remember(k, &r, it->path);
				touched(k, it->path);
				/* and its own mtime, once it is filled */
				stg__strmap_put(&k->dirs, it->path, strlen(it->path), 1);
				continue;
			}
			crec r;
			if (stg__col_send_item(k, it, it->path, it->path, &r)) {
				r.now = true;
				stg__col_remember(k, &r, it->path);
			}
			touched(k, it->path);
			if (k->ctx->progress_fn)
				k->ctx->progress_fn(k->ctx->progress_arg, "collect",
				                    k->res->sent_bytes, bytes);
		}
		dir_times(k, w);
		stg__col_mark_end(k, mark);
	}
	stg__slot_release(&slot);
out:
	free(send);
	return err;
}

/* ---- the pack ---------------------------------------------------------------------- */

/* Has SRC changed since the pack was made?  (Identities only.) */
static bool tree_changed(collector *k, stg_walk *w)
{
	size_t seen = 0;
	for (size_t i = 0; i < w->n; i++) {
		const stg_witem *it = &w->v[i];
		crec *r = stg__col_rec_find(k, it->path);
		char type = S_ISDIR(it->st.st_mode) ? 'd' : S_ISLNK(it->st.st_mode) ? 'l' : 'f';
		if (!r || r->type != type)
			return true;
		if (type == 'f' && (!same_ident(r, &it->st) || r->mode != (it->st.st_mode & 07777)))
			return true;
		if (type == 'l' &&
		    (r->ino != (uint64_t)it->st.st_ino || r->mtime_ns != ns_of(&it->st.st_mtim)))
			return true;
		seen++;
	}
	return seen != k->n_recs;
}

static stg_err collect_pack(collector *k, stg_walk *w)
{
	stg_ctx *ctx = k->ctx;
	for (size_t i = 0; i < w->n; i++)
		if (S_ISREG(w->v[i].st.st_mode))
			k->res->files++;
	struct stat dst;
	bool same_dest = stat(k->res->dest, &dst) == 0 && (uint64_t)dst.st_dev == k->dest_dev &&
	                 (uint64_t)dst.st_ino == k->dest_ino;
	if (same_dest && !k->n_pending && !tree_changed(k, w)) {
		k->res->unchanged = k->res->files;
		return STG_OK;
	}
	/* pack on scratch and check it there */
	char local[STG_PATH_MAX + 64];
	snprintf(local, sizeof local, "%s/collect/%s.tar.zst", k->c->root, k->id);
	stg_pack_opts po;
	stg_pack_opts_init(&po);
	if (k->o->level)
		po.level = k->o->level;
	stg_pack_info info;
	stg_err err = stg_pack_dir(ctx, k->src, local, &po, &info);
	stg_pack *p = NULL;
	if (!err && !(err = stg_pack_open(ctx, local, &p)))
		err = stg__verify_content(ctx, p);
	stg_pack_close(p);
	int lfd = -1;
	struct stat lst;
	if (err)
		goto out;
	/* what is sent keeps the mode of the pack on scratch, which is read
	 * as SRC is (stg_pack_dir): a private SRC gives a private pack */
	if ((lfd = open(local, O_RDONLY | O_CLOEXEC)) < 0 || fstat(lfd, &lst)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot read '%s'", local);
		goto out;
	}
	/* DEST.tar.zst's directory */
	char dir[STG_PATH_MAX + 1], at[STG_PATH_MAX + 1];
	snprintf(dir, sizeof dir, "%s", k->res->dest);
	char *slash = strrchr(dir, '/');
	const char *base = slash + 1;
	*slash = '\0';
	if (!*dir)
		snprintf(dir, sizeof dir, "/");
	existing_parent(dir, at, sizeof at);
	if ((err = check_space(k, at, (uint64_t)lst.st_size + 4096, 1)))
		goto out;
	stg_slot slot;
	if ((err = stg__slot_acquire_by(ctx, &k->c->lim, &slot, stg__col_slot_deadline(k->o))))
		goto out;
	char mark[128] = "";
	if (!(err = open_dest(k, dir, 0777, false))) {
		stg__col_remove_leftovers(k);
		stg__mark_sweep(k->ctx, k->destfd, dir, true);
		stg__col_mark_begin(k, mark, sizeof mark);
		stg_witem it = {.path = (char *)base, .st = lst};
		it.st.st_mode = (it.st.st_mode & ~07777u) | (lst.st_mode & 0644);
		int keep = k->srcfd;
		k->srcfd = AT_FDCWD;
		it.path = local;
		crec sent;
		bool ok = stg__col_send_item(k, &it, base, base, &sent);
		k->srcfd = keep;
		if (ok) {
			k->res->sent_files = info.files;
			if (stat(k->res->dest, &dst) == 0) {
				k->dest_dev = (uint64_t)dst.st_dev;
				k->dest_ino = (uint64_t)dst.st_ino;
			}
			/* the record is now SRC as packed */
			stg__col_recs_clear(k);
			for (size_t i = 0; i < w->n; i++) {
				const stg_witem *wi = &w->v[i];
				crec r = {.type = S_ISDIR(wi->st.st_mode)   ? 'd'
				                  : S_ISLNK(wi->st.st_mode) ? 'l'
				                                            : 'f',
				          .size = (uint64_t)wi->st.st_size,
				          .ino = (uint64_t)wi->st.st_ino,
				          .mtime_ns = ns_of(&wi->st.st_mtim),
				          .ctime_ns = ns_of(&wi->st.st_ctim),
				          .mode = wi->st.st_mode & 07777,
				          .path = strdup(wi->path)};
				if (r.path)
					stg__col_rec_set(k, &r);
			}
			k->rewrite = true;
		}
		stg__col_mark_end(k, mark);
	}
	stg__slot_release(&slot);
out:
	if (lfd >= 0)
		close(lfd);
	unlink(local);
	return err;
}

/* ---- the whole ----------------------------------------------------------------------- */

void stg_collect_opts_init(stg_collect_opts *o)
{
	memset(o, 0, sizeof *o);
}

void stg_collect_result_free(stg_collect_result *res)
{
	if (res) {
		free(res->dest);
		res->dest = NULL;
	}
}

stg_err stg_collect(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest,
                    const stg_collect_opts *opts, stg_collect_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_collect_opts def;
	if (!opts) {
		stg_collect_opts_init(&def);
		opts = &def;
	}
	collector *k = calloc(1, sizeof *k);
	if (!k)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*k = (collector){.ctx = ctx,
	                 .c = c,
	                 .o = opts,
	                 .res = res,
	                 .srcfd = -1,
	                 .destfd = -1,
	                 .logfd = -1,
	                 .umask = stg__col_current_umask()};
	stg_err err = STG_OK;
	int lock = -1;
	stg_walk w = {.ctx = ctx};
	if (stg__col_names(src, dest, opts->pack, k->src, k->dest, k->id)) {
		err = stg__fail(ctx, STG_EUSAGE, "path too long");
		goto out;
	}
	if (!(res->dest = strdup(k->dest))) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	struct stat st;
	k->srcfd = open(k->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->srcfd < 0 || fstat(k->srcfd, &st)) {
		err = stg__fail_errno(ctx, errno == ENOTDIR ? STG_EUSAGE : STG_ENOENT, errno,
		                      errno == ENOTDIR
		                              ? "'%s' is not a directory (collect copies a "
		                                "directory's contents)"
		                              : "cannot read '%s'",
		                      k->src);
		goto out;
	}
	size_t sl = strlen(k->src);
	if (!strncmp(k->dest, k->src, sl) &&
	    (k->dest[sl] == '/' || k->dest[sl] == '\0' || sl == 1)) {
		err = stg__fail(ctx, STG_EUSAGE, "'%s' is inside '%s': collect it elsewhere",
		                k->dest, k->src);
		goto out;
	}
	char lname[40];
	snprintf(lname, sizeof lname, "collect-%s", k->id);
	bool waited;
	if ((lock = stg__cache_lock(ctx, c, lname, true, &waited)) < 0) {
		err = stg__cancelled(ctx) ? stg__fail(ctx, STG_EINTR, "interrupted")
		                          : stg__fail_errno(ctx, STG_EIO, errno,
		                                            "cannot lock the collect record");
		goto out;
	}
	if (stg__strmap_init(&k->map, 1024) || stg__strmap_init(&k->dirs, 64)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if ((err = stg__col_record_open(k)))
		goto out;
	if (k->log_lines == 0) {
		/* a new record */
		stg__col_log_line(k, "stager-collect 1", NULL);
		stg__col_log_line(k, "S ", k->src);
	}
	if ((err = stg__walk_tree(&w, k->srcfd, "")))
		goto out;
	err = opts->pack ? collect_pack(k, &w) : collect_tree(k, &w);
	/* a file renamed away since the walk's listing (NAME.tmp to NAME),
	 * before its stat or its copy, left its new name unseen: look again,
	 * while files keep vanishing, a few times */
	for (int again = 0; !err && !opts->pack && !k->stop && (k->vanished || w.vanished) &&
	                    again < VANISHED_WALKS;
	     again++) {
		k->vanished = 0;
		/* the set of touched directories points into the walk, whose
		 * times that pass gave already: emptied with it */
		stg__strmap_free(&k->dirs);
		stg__walk_free(&w);
		w = (stg_walk){.ctx = ctx};
		if (stg__strmap_init(&k->dirs, 64)) {
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
			goto out;
		}
		res->files = res->unchanged = 0;
		if ((err = stg__walk_tree(&w, k->srcfd, "")))
			goto out;
		err = collect_tree(k, &w);
	}
	if (!err && k->stop)
		err = k->stop;
	if (!err && res->failed)
		err = stg__fail(ctx, STG_EIO, "%llu of the files could not be collected; first: %s",
		                (unsigned long long)res->failed, k->first_error);
	if (k->rewrite || k->log_lines > 2 * k->n_recs + 64)
		stg__col_record_compact(k);
out:
	if (k->srcfd >= 0)
		close(k->srcfd);
	if (k->destfd >= 0)
		close(k->destfd);
	if (k->logfd >= 0)
		close(k->logfd);
	stg__cache_unlock(lock);
	stg__walk_free(&w);
	for (size_t i = 0; i < k->n_recs; i++)
		free(k->recs[i].path);
	free(k->recs);
	stg__strmap_free(&k->map);
	stg__strmap_free(&k->dirs);
	for (size_t i = 0; i < k->n_pending; i++)
		free(k->pending[i]);
	free(k->pending);
	free(k);
	res->seconds = stg__now() - t0;
	return err;
}

/* ---- after the job -------------------------------------------------------------- */

int stg__collect_whole(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest, bool pack)
{
	collector *k = calloc(1, sizeof *k);
	if (!k)
		return -1;
	*k = (collector){.ctx = ctx, .c = c, .srcfd = -1, .destfd = -1, .logfd = -1};
	int whole = 0, lock = -1;
	stg_walk w = {.ctx = ctx};
	char rel[64], lname[40];
	if (stg__col_names(src, dest, pack, k->src, k->dest, k->id))
		goto out;
	snprintf(rel, sizeof rel, "collect/%s", k->id);
	snprintf(lname, sizeof lname, "collect-%s", k->id);
	/* no record: nothing was ever sent; a collect at work: not whole */
	if (faccessat(c->rootfd, rel, F_OK, AT_SYMLINK_NOFOLLOW) ||
	    (lock = stg__cache_lock(ctx, c, lname, false, NULL)) < 0)
		goto out;
	k->srcfd = open(k->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->srcfd < 0 || stg__strmap_init(&k->map, 1024) || stg__col_record_open(k) ||
	    stg__walk_tree(&w, k->srcfd, ""))
		goto out;
	if (pack) {
		whole = !tree_changed(k, &w);
		goto out;
	}
	/* a tree: files removed since stay on DEST, the rest must be there */
	whole = 1;
	for (size_t i = 0; i < w.n && whole; i++) {
		const stg_witem *it = &w.v[i];
		crec *r = stg__col_rec_find(k, it->path);
		char type = S_ISDIR(it->st.st_mode) ? 'd' : S_ISLNK(it->st.st_mode) ? 'l' : 'f';
		if (!r || r->type != type ||
		    (type == 'f' &&
		     (!same_ident(r, &it->st) || r->mode != (it->st.st_mode & 07777))) ||
		    (type == 'l' && r->ino != (uint64_t)it->st.st_ino))
			whole = 0;
	}
out:
	if (k->srcfd >= 0)
		close(k->srcfd);
	if (k->logfd >= 0)
		close(k->logfd);
	stg__cache_unlock(lock);
	stg__walk_free(&w);
	for (size_t i = 0; i < k->n_recs; i++)
		free(k->recs[i].path);
	free(k->recs);
	stg__strmap_free(&k->map);
	for (size_t i = 0; i < k->n_pending; i++)
		free(k->pending[i]);
	free(k->pending);
	free(k);
	return whole;
}
