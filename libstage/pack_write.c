/*
 * pack_write.c - make a pack from a directory tree.
 *
 * The tree is walked first (walk.c: sorted, so the same tree gives the
 * same pack) straight into the manifest, then each entry is written in
 * that order: its tar header through libarchive, and a file's data, read
 * once and hashed (XXH3-128) ahead of the writer on a thread of its own
 * (pack_files.c), passed on in pieces that fill the current frame
 * exactly.  The frame pipeline (pack_frames.c) compresses and writes the
 * frames behind the writer; the trailer (trailer.c) follows them, with
 * every entry's record, the frame table and the SHA-256 of the frames.
 *
 * A frame is cut before an entry's header once it holds frame_size bytes,
 * or in the middle of a large file's data, so headers never straddle
 * frames.  A file that changes size while it is read stops the pack: its
 * bytes would not be what the manifest says.  Memory is bounded whatever
 * the tree's size, but for the manifest.
 */
#include "pack_bases.h"
#include "pack_files.h"
#include "pack_frames.h"
#include "walk.h"
#include "ctx.h"
#include "trailer.h"
#include "fsutil.h"

#include <xxhash.h>
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

void stg_pack_opts_init(stg_pack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->level = 3;
	o->frame_size = 0; /* by the tree's size (auto_frame_size) */
}

/* The default frame size: the smallest power of two from 256 KiB to 4 MiB
 * that keeps the tree in at most 65,536 frames.  A read of a mount (or of
 * `import stager`) that misses fetches, checks and decodes a whole frame:
 * 4 KiB read at random from 256 KiB frames ran 4-7 times as fast as from
 * 4 MiB ones (bench/results-mount*.md), packs and stages as fast, and
 * cost 0.06 % in size on incompressible data (up to 7.5 % on text whose
 * repeats lie farther apart than a frame).  The bound keeps the frame
 * table (48 bytes a frame) at 3 MiB or less up to 256 GiB of data. */
static size_t auto_frame_size(const stg_trailer *t)
{
	uint64_t total = 0;
	for (size_t i = 0; i < t->n_entries; i++)
		total += t->recs[i].size + 512;
	size_t fs = 256u << 10;
	while (fs < (4u << 20) && total / fs > 65536)
		fs *= 2;
	return fs;
}

/* One owner for a run of entries, from entry `from` on (a tree mostly
 * has one: a list of owners costs nothing an entry). */
typedef struct pk_owner {
	size_t from;
	uid_t uid;
	gid_t gid;
} pk_owner;

/* A file with other links, matched with them once the tree is walked. */
typedef struct pk_inode {
	dev_t dev;
	ino_t ino;
	size_t i;
} pk_inode;

/* A pack being made.  The walk fills in the manifest itself (t's records
 * and names, about 100 bytes an entry) and keeps nothing else an entry:
 * at a million files the pack's memory is its manifest and its buffers. */
typedef struct packer {
	stg_ctx *ctx;
	int rootfd;
	stg_walk w;
	stg_trailer t; /* the records are completed as entries are written */
	size_t recs_cap, names_cap;
	pk_owner *own;
	size_t n_own, own_cap;
	pk_inode *linked;
	size_t n_linked, linked_cap;
	stg_framer *fr;
	stg_filer *files;
	struct archive *a;
	const char *path; /* the entry being written */
} packer;

/* ---- the tree ------------------------------------------------------------ */

/* What a pack leaves out of the tree: itself (and an older pack at its
 * path), and what tar cannot hold. */
typedef struct pk_skip {
	stg_ctx *ctx;
	dev_t dev[2];
	ino_t ino[2];
	int n;
} pk_skip;

static bool pack_keep(void *arg, const char *path, const struct stat *st)
{
	const pk_skip *k = arg;
	for (int i = 0; i < k->n; i++)
		if (st->st_dev == k->dev[i] && st->st_ino == k->ino[i])
			return false;
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) || S_ISLNK(st->st_mode))
		return true;
	stg__log(k->ctx, STG_LOG_WARN, "skipping '%s': %s cannot be packed", path,
	         S_ISFIFO(st->st_mode)   ? "a FIFO"
	         : S_ISSOCK(st->st_mode) ? "a socket"
	                                 : "a device node");
	return false;
}

static void skip_inode(pk_skip *k, const struct stat *st)
{
	k->dev[k->n] = st->st_dev;
	k->ino[k->n++] = st->st_ino;
}

/* A name into t.names: the bytes and a NUL. */
static int put_name(packer *pk, const char *s, size_t n)
{
	if (stg__grow((void **)&pk->t.names, &pk->names_cap, pk->t.names_len + n + 1, 1, SIZE_MAX))
		return -1;
	memcpy(pk->t.names + pk->t.names_len, s, n);
	pk->t.names[pk->t.names_len + n] = '\0';
	pk->t.names_len += n + 1;
	return 0;
}

/* The walk's visitor: an entry's record and names (path, then a link's
 * target or ""), its owner when it is not the last one's, and a file with
 * other links to be matched. */
static stg_err pack_visit(void *arg, const char *path, const struct stat *st, const char *link)
{
	packer *pk = arg;
	size_t i = pk->t.n_entries;
	if (stg__grow((void **)&pk->t.recs, &pk->recs_cap, i + 1, sizeof *pk->t.recs, SIZE_MAX))
		return stg__fail(pk->ctx, STG_ENOMEM, "out of memory walking the tree");
	stg_rec *r = &pk->t.recs[i];
	memset(r, 0, sizeof *r);
	r->type = S_ISREG(st->st_mode) ? STG_FILE : S_ISDIR(st->st_mode) ? STG_DIR : STG_SYMLINK;
	r->mode = st->st_mode & 07777;
	r->size = r->type == STG_FILE ? (uint64_t)st->st_size : 0;
	r->mtime = st->st_mtim.tv_sec;
	r->mtime_nsec = (uint32_t)st->st_mtim.tv_nsec;
	r->path_off = pk->t.names_len;
	r->path_len = (uint32_t)strlen(path);
	r->link_len = link ? (uint32_t)strlen(link) : 0;
	if (put_name(pk, path, r->path_len) || put_name(pk, link ? link : "", r->link_len))
		return stg__fail(pk->ctx, STG_ENOMEM, "out of memory walking the tree");
	const pk_owner *last = pk->n_own ? &pk->own[pk->n_own - 1] : NULL;
	if (!last || last->uid != st->st_uid || last->gid != st->st_gid) {
		if (stg__room((void **)&pk->own, &pk->own_cap, pk->n_own + 1, sizeof *pk->own,
		              SIZE_MAX))
			return stg__fail(pk->ctx, STG_ENOMEM, "out of memory walking the tree");
		pk->own[pk->n_own++] = (pk_owner){i, st->st_uid, st->st_gid};
	}
	if (r->type == STG_FILE && st->st_nlink > 1) {
		if (stg__room((void **)&pk->linked, &pk->linked_cap, pk->n_linked + 1,
		              sizeof *pk->linked, SIZE_MAX))
			return stg__fail(pk->ctx, STG_ENOMEM, "out of memory walking the tree");
		pk->linked[pk->n_linked++] = (pk_inode){st->st_dev, st->st_ino, i};
	}
	pk->t.n_entries++;
	return STG_OK;
}

static int cmp_inode(const void *a, const void *b)
{
	const pk_inode *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* Files with several links in the tree: the first in pack order keeps the
 * content, the others become hardlinks to it, its path where a symlink's
 * target would be.  The names are laid out again, once, when there are
 * any. */
static stg_err find_hardlinks(packer *pk)
{
	stg_trailer *t = &pk->t;
	qsort(pk->linked, pk->n_linked, sizeof *pk->linked, cmp_inode);
	size_t more = 0;
	for (size_t g = 0, e; g < pk->n_linked; g = e) {
		const pk_inode *first = &pk->linked[g];
		for (e = g + 1; e < pk->n_linked && pk->linked[e].dev == first->dev &&
		                pk->linked[e].ino == first->ino;
		     e++) {
			stg_rec *r = &t->recs[pk->linked[e].i];
			r->type = STG_HARDLINK;
			r->size = 0;
			r->link_len = t->recs[first->i].path_len;
			r->tar_off = first->i; /* the target, until the names are laid out */
			more += r->link_len;
		}
	}
	if (!more)
		return STG_OK;
	/* laid out again in one piece, so that a link copied from a target
	 * already laid out never moves under the copy */
	char *old = t->names;
	pk->names_cap = t->names_len + more;
	if (!(t->names = malloc(pk->names_cap))) {
		t->names = old;
		return stg__fail(pk->ctx, STG_ENOMEM, "out of memory");
	}
	t->names_len = 0;
	for (size_t i = 0; i < t->n_entries; i++) {
		stg_rec *r = &t->recs[i];
		const char *path = old + r->path_off;
		/* a target comes first in pack order: it is laid out already */
		const char *link = r->type == STG_HARDLINK ? t->names + t->recs[r->tar_off].path_off
		                                           : path + r->path_len + 1;
		r->path_off = t->names_len;
		put_name(pk, path, r->path_len);
		put_name(pk, link, r->link_len);
	}
	free(old);
	return STG_OK;
}

/* The tree walked into the manifest. */
static stg_err walk_tree(packer *pk, pk_skip *skip)
{
	pk->w = (stg_walk){.ctx = pk->ctx,
	                   .keep = pack_keep,
	                   .keep_arg = skip,
	                   .visit = pack_visit,
	                   .visit_arg = pk};
	stg_err err = stg__walk_tree(&pk->w, pk->rootfd, "");
	if (!err && !pk->t.recs && !(pk->t.recs = calloc(1, sizeof *pk->t.recs)))
		err = stg__fail(pk->ctx, STG_ENOMEM, "out of memory");
	if (!err && pk->n_linked > 1)
		err = find_hardlinks(pk);
	free(pk->linked);
	pk->linked = NULL;
	return err;
}

/* ---- the tar stream ------------------------------------------------------ */

static la_ssize_t tar_write_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	if (stg__framer_put(arg, buf, len)) {
		archive_set_error(a, errno, "%s",
		                  errno == ENOMEM ? "out of memory" : "pack pipeline stopped");
		return -1;
	}
	return (la_ssize_t)len;
}

/* libarchive failed: because the frame pipeline stopped (its error, told
 * when the pipeline finishes), or on its own. */
static stg_err tar_failed(packer *pk, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static stg_err tar_failed(packer *pk, const char *fmt, ...)
{
	stg_err err = stg__framer_err(pk->fr);
	if (err)
		return err;
	char what[STG_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	return stg__fail(pk->ctx, STG_EIO, "%s: %s", what, archive_error_string(pk->a));
}

/* A file's data as the hash loop reads it, into the tar stream in pieces
 * that fill the current frame exactly, so that a large file is cut into
 * frame_size frames. */
static stg_err tar_data(void *arg, const uint8_t *p, size_t n)
{
	packer *pk = arg;
	for (size_t done = 0; done < n;) {
		stg_err err = stg__framer_cut(pk->fr);
		if (err)
			return err;
		size_t room = stg__framer_room(pk->fr);
		size_t piece = n - done < room ? n - done : room;
		if (archive_write_data(pk->a, p + done, piece) != (la_ssize_t)piece)
			return tar_failed(pk, "writing '%s' to the tar stream", pk->path);
		done += piece;
	}
	return STG_OK;
}

/* A file's data, read and hashed ahead by the file reader (pack_files.c),
 * into the tar stream. */
static stg_err write_file_data(packer *pk, size_t i)
{
	for (bool last = false; !last;) {
		const uint8_t *p;
		size_t n;
		stg_err err = stg__filer_next(pk->files, i, &p, &n, &last);
		if (!err)
			err = tar_data(pk, p, n);
		if (err)
			return err;
	}
	return STG_OK;
}

static stg_err write_entries(packer *pk)
{
	stg_ctx *ctx = pk->ctx;
	stg_err err = STG_OK;
	struct archive_entry *ae = archive_entry_new();
	if (!ae)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < pk->t.n_entries; i++)
		total += pk->t.recs[i].size;
	const pk_owner *own = pk->own;
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));

	for (size_t i = 0; i < pk->t.n_entries && !err; i++) {
		stg_rec *r = &pk->t.recs[i];
		const char *path = pk->t.names + r->path_off, *link = path + r->path_len + 1;
		pk->path = path;
		if (own + 1 < pk->own + pk->n_own && own[1].from == i)
			own++;
		/* a file that fits in one frame is not split between two: its
		 * header (pax records for long names), data and padding */
		uint64_t span = 0;
		if (r->type == STG_FILE && r->size <= UINT64_MAX / 2)
			span = 1536 + r->path_len + ((r->size + 511) & ~(uint64_t)511);
		if ((err = stg__framer_cut_before(pk->fr, span)))
			break;
		archive_entry_clear(ae);
		archive_entry_copy_pathname(ae, path);
		archive_entry_set_perm(ae, r->mode);
		archive_entry_set_mtime(ae, r->mtime, r->mtime_nsec);
		archive_entry_set_uid(ae, own->uid);
		archive_entry_set_gid(ae, own->gid);
		switch (r->type) {
		case STG_FILE:
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_size(ae, (la_int64_t)r->size);
			break;
		case STG_DIR: archive_entry_set_filetype(ae, AE_IFDIR); break;
		case STG_SYMLINK:
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_copy_symlink(ae, link);
			break;
		case STG_HARDLINK:
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_copy_hardlink(ae, link);
			archive_entry_set_size(ae, 0);
			break;
		}
		r->tar_off = stg__framer_pos(pk->fr);
		if (archive_write_header(pk->a, ae) < ARCHIVE_WARN) {
			err = tar_failed(pk, "writing the header of '%s'", path);
			break;
		}
		r->data_off = stg__framer_pos(pk->fr);
		if (r->type == STG_FILE && r->size)
			err = write_file_data(pk, i);
		else
			memcpy(r->xxh3, empty.digest, 16);
		if (!err && archive_write_finish_entry(pk->a) < ARCHIVE_WARN)
			err = tar_failed(pk, "finishing '%s'", path);
		done += r->size;
		if (!err && ctx->progress_fn)
			ctx->progress_fn(ctx->progress_arg, "pack", done, total);
		if (!err && stg__cancelled(ctx))
			err = stg__fail(ctx, STG_EINTR, "interrupted");
	}
	archive_entry_free(ae);
	return err;
}

/* ---- the trailer --------------------------------------------------------- */

/* The trailer, listing the deltas from bases (NULL: none). */
static stg_err write_trailer(packer *pk, int fd, stg_framed *framed, int level,
                             const stg_bases *deltas, stg_pack_info *info)
{
	stg_ctx *ctx = pk->ctx;
	stg_trailer *t = &pk->t;
	stg_err err = STG_OK;
	uint8_t *frame = NULL;
	size_t frame_len = 0, nd = deltas ? deltas->n : 0;
	memcpy(t->digest, framed->digest, STG_DIGEST_LEN);
	for (size_t i = 0; i < t->n_entries; i++)
		if (t->recs[i].type == STG_FILE)
			t->content_size += t->recs[i].size;
	t->deltas = calloc(nd ? nd : 1, sizeof *t->deltas);
	if (!t->deltas)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	for (size_t i = 0; i < nd; i++) {
		/* the same tree packed again: no delta from itself */
		if (!memcmp(deltas->base[i], t->digest, STG_DIGEST_LEN))
			continue;
		stg_delta_rec *d = &t->deltas[t->n_deltas++];
		memcpy(d->base, deltas->base[i], STG_DIGEST_LEN);
		d->name_off = t->names_len;
		d->name_len = (uint32_t)strlen(deltas->name[i]);
		if (put_name(pk, deltas->name[i], d->name_len))
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	t->frames = framed->frames;
	t->n_frames = framed->n_frames;
	framed->frames = NULL; /* t's now */
	t->data_size = framed->data_size;
	t->tar_size = framed->tar_size;

	/* The trailer is compressed on one thread after the last frame, with
	 * nothing to overlap it: at level 1, not 9.  A million entries' body
	 * (99 MiB) takes 0.7 s instead of 4.9 and stores 25.7 MiB instead of
	 * 25.0 (2.9% more, for ls and mount to read); 20,000 entries' (2 MiB)
	 * take 15 ms instead of 150 (zstd -b, this loaded machine).  The slow
	 * levels asked for still apply. */
	if ((err = stg__trailer_encode(ctx, t, level > 9 ? level : 1, &frame, &frame_len)))
		goto out;
	if (stg__write_full(fd, frame, frame_len)) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "writing the pack's trailer");
		goto out;
	}
	if (info) {
		memset(info, 0, sizeof *info);
		memcpy(info->digest, t->digest, STG_DIGEST_LEN);
		info->pack_size = t->data_size + frame_len;
		info->data_size = t->data_size;
		info->tar_size = t->tar_size;
		info->content_size = t->content_size;
		info->entries = t->n_entries;
		info->frames = t->n_frames;
		info->deltas = t->n_deltas;
		info->format_version = STG_FORMAT_VERSION;
		for (size_t i = 0; i < t->n_entries; i++) {
			switch (t->recs[i].type) {
			case STG_FILE: info->files++; break;
			case STG_DIR: info->dirs++; break;
			case STG_SYMLINK: info->symlinks++; break;
			case STG_HARDLINK: info->hardlinks++; break;
			}
		}
	}
out:
	free(frame);
	return err;
}

/* ---- the whole ----------------------------------------------------------- */

static stg_err pack_tree(stg_ctx *ctx, int rootfd, int fd, const stg_pack_opts *opts, pk_skip *skip,
                         const stg_bases *deltas, stg_pack_info *info)
{
	stg_pack_opts def;
	if (!opts) {
		stg_pack_opts_init(&def);
		opts = &def;
	}
	if (opts->level < 1 || opts->level > 19)
		return stg__fail(ctx, STG_EUSAGE, "compression level %d is out of range (1-19)",
		                 opts->level);
	size_t target = opts->frame_size;
	if (target && (target < 64 * 1024 || target > STG_FRAME_RAW_MAX / 2))
		return stg__fail(ctx, STG_EUSAGE, "frame size out of range (64 KiB to %u MiB)",
		                 STG_FRAME_RAW_MAX / 2 >> 20);

	packer pk = {.ctx = ctx, .rootfd = rootfd};
	stg_err err = walk_tree(&pk, skip);
	if (!err && !target)
		target = auto_frame_size(&pk.t);
	struct stat rst;
	if (fstat(rootfd, &rst) == 0)
		pk.t.root_mode = STG_ROOT_MODE_SET | (uint32_t)(rst.st_mode & 07777);
	if (!err)
		err = stg__framer_start(ctx, fd, opts->level, target, opts->fsync, &pk.fr);
	if (err)
		goto out;
	pk.a = archive_write_new();
	if (!pk.a || (err = stg__filer_start(ctx, rootfd, &pk.t, &pk.files))) {
		if (!err)
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	} else {
		archive_write_set_format_pax_restricted(pk.a);
		archive_write_set_bytes_per_block(pk.a, 0);
		archive_write_set_bytes_in_last_block(pk.a, 1);
		if (archive_write_open2(pk.a, pk.fr, NULL, tar_write_cb, NULL, NULL) != ARCHIVE_OK)
			err = stg__fail(ctx, STG_EIO, "starting the tar stream: %s",
			                archive_error_string(pk.a));
	}
	if (!err)
		err = write_entries(&pk);
	if (!err && archive_write_close(pk.a) != ARCHIVE_OK)
		err = tar_failed(&pk, "ending the tar stream");
	/* before the pipeline ends: freeing a tar stream that was not closed
	 * writes its end into the current frame */
	if (pk.a)
		archive_write_free(pk.a);
	/* before the trailer: it lays out the names again */
	stg__filer_stop(pk.files);
	pk.files = NULL;
	stg_framed framed = {0};
	err = stg__framer_finish(pk.fr, err, &framed);
	if (!err)
		err = write_trailer(&pk, fd, &framed, opts->level, deltas, info);
	free(framed.frames);
out:
	free(pk.own);
	free(pk.t.recs);
	free(pk.t.deltas);
	free(pk.t.names);
	free(pk.t.frames);
	return err;
}

static stg_err open_root(stg_ctx *ctx, const char *dir, int *rootfd)
{
	*rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*rootfd < 0) {
		int e = errno;
		if (e == ENOTDIR)
			return stg__fail(ctx, STG_ENOENT, "'%s' is not a directory", dir);
		return stg__fail_errno(ctx, STG_ENOENT, e, "cannot open '%s'", dir);
	}
	return STG_OK;
}

stg_err stg_pack_dir_fd(stg_ctx *ctx, const char *dir, int fd, const stg_pack_opts *opts,
                        stg_pack_info *info)
{
	if (opts && opts->n_bases)
		return stg__fail(ctx, STG_EUSAGE,
		                 "deltas are written beside a pack file: use stg_pack_dir, or "
		                 "stg_delta_write");
	int rootfd;
	stg_err err = open_root(ctx, dir, &rootfd);
	if (err)
		return err;
	pk_skip skip = {.ctx = ctx};
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		skip_inode(&skip, &st);
	err = pack_tree(ctx, rootfd, fd, opts, &skip, NULL, info);
	close(rootfd);
	return err;
}

/* The pack is read by whom the directory is: its read bits at most (a
 * private directory gives a private pack), set before a byte is written. */
static void private_as_source(int fd, const struct stat *st, int rootfd)
{
	struct stat rst;
	if (fstat(rootfd, &rst) == 0) {
		mode_t m = st->st_mode & 0777 & ((rst.st_mode & 0444) | 0600);
		if (m != (st->st_mode & 0777))
			fchmod(fd, m);
	}
}

/* The disk filled while the pack was written at tmp: what was written and
 * what is free once it is gone (the pack needs more). */
static void no_room(stg_ctx *ctx, const char *tmp, const char *out_path)
{
	struct stat st;
	struct statvfs vfs;
	char a[16], b[16], dir[4096];
	uint64_t written = stat(tmp, &st) == 0 ? (uint64_t)st.st_size : 0;
	unlink(tmp);
	const char *slash = strrchr(tmp, '/');
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - tmp) + 1 : 1, slash ? tmp : ".");
	if (statvfs(dir, &vfs))
		return;
	stg__fail(ctx, STG_ENOSPC,
	          "not enough space for '%s': the filesystem filled after %s of the pack, "
	          "%s free without it: free some space, or write the pack elsewhere",
	          out_path, stg_format_size(written, a, sizeof a),
	          stg_format_size((uint64_t)vfs.f_bavail * vfs.f_frsize, b, sizeof b));
}

stg_err stg_pack_dir(stg_ctx *ctx, const char *dir, const char *out_path, const stg_pack_opts *opts,
                     stg_pack_info *info)
{
	stg_bases bases = {0};
	/* a pack goes only where no other user could swap it for theirs */
	stg_err err = stg__dest_ours(ctx, out_path, true);
	if (err)
		return err;
	/* a pack replaces a file, never a directory (the user's, or the tree
	 * itself) */
	struct stat ost;
	if (stat(out_path, &ost) == 0 && S_ISDIR(ost.st_mode))
		return stg__fail(ctx, STG_EEXIST,
		                 "'%s' is a directory: name the pack file itself (such as "
		                 "'%s/NAME.tar.zst')",
		                 out_path, out_path);
	if (opts && opts->n_bases && (err = stg__bases_open(ctx, opts, out_path, &bases))) {
		stg__bases_free(&bases);
		return err;
	}
	int rootfd;
	if ((err = open_root(ctx, dir, &rootfd))) {
		stg__bases_free(&bases);
		return err;
	}
	char *tmp = NULL;
	int fd = stg__create_tmp(out_path, "tmp", &tmp);
	if (fd < 0) {
		int e = errno;
		close(rootfd);
		stg__bases_free(&bases);
		return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                       "cannot create a file beside '%s'", out_path);
	}
	pk_skip skip = {.ctx = ctx};
	struct stat st;
	if (fstat(fd, &st) == 0) {
		skip_inode(&skip, &st);
		private_as_source(fd, &st, rootfd);
	}
	/* an older pack at the output path, inside the tree, is not packed */
	if (stat(out_path, &st) == 0)
		skip_inode(&skip, &st);
	err = pack_tree(ctx, rootfd, fd, opts, &skip, bases.n ? &bases : NULL, info);
	close(rootfd);
	if (!err && opts && opts->fsync && fsync(fd)) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "writing '%s'",
		                      out_path);
	}
	if (!err && bases.n)
		err = stg__bases_write(ctx, dir, tmp, &bases, opts);
	if (close(fd) && !err) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "writing '%s'",
		                      out_path);
	}
	/* the deltas first: a pack that lists them finds them in place */
	if (!err && bases.n)
		err = stg__bases_publish(ctx, &bases, opts->fsync);
	if (!err && stg__replace(tmp, out_path, opts && opts->fsync)) {
		int e = errno;
		err = stg__fail_errno(ctx, STG_EIO, e, "cannot rename into '%s'", out_path);
	}
	if (err == STG_ENOSPC)
		no_room(ctx, tmp, out_path);
	if (err)
		unlink(tmp);
	free(tmp);
	stg__bases_free(&bases);
	return err;
}
