/*
 * mount.c - stg_mount: a pack as a read-only tree (FUSE), served straight
 * from its trailer and its frames.
 *
 * Mounting reads the trailer (one read at the end of the pack, two for a
 * large manifest) and builds the tree of inodes in memory (mount_tree.c);
 * nothing else is read and no index is written, so the first file is
 * readable at once whatever the pack's size.  stat, readdir and readlink
 * are answered from the manifest.  A read fetches, checks and decodes only
 * the frames it touches (mount_frames.c); a reader going through a file in
 * order has the next frames read ahead.
 *
 * The pack is read as a stage reads it: within a shared-filesystem slot
 * (taken when a fetch needs it, given back after a second without one, so
 * an idle mount holds none) and the bandwidth limit.  The pack stays open:
 * one replaced by a rename keeps being served as it was, from the file
 * that was mounted.  One changed in place (its size or times differ from
 * the mount's) is not read again: reads that need a frame not cached fail
 * with ESTALE and the change is logged once, so the two versions never mix.
 * The pack's last MiB, read with the trailer at mount, is served as it was
 * then (stg_pack_open).
 *
 * A pack of format 1 or 2 has no hash per frame: a file of it is checked
 * whole against its manifest's XXH3-128 at its first read, before any of
 * it is served (mount_frames.c says how its frames are held to that).
 *
 * Every request is answered by one of libfuse's threads; what they share
 * (the frame cache, the slot, the per-file checks) has its own lock, and
 * messages go through one lock to the context's log callback.
 */
#define FUSE_USE_VERSION 312
#include "mount.h"
#include "mount_keep.h"
#include "mount_slot.h"
#include "ctx.h"
#include "trailer.h"
#include "pack_read.h"
#include "fsutil.h"
#include "path.h"

#include <pthread.h>
#include <stdatomic.h>
#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define TIMEOUT    86400.0     /* attributes and names never change */
#define READ_AHEAD (16u << 20) /* bytes read ahead of a reader in order, about */

enum { FILE_UNCHECKED, FILE_OK, FILE_BAD };

/* A file the kernel has open.  Kept on the mount's list until its
 * release: a session that ends before the kernel's last releases arrive
 * (they are asynchronous) frees the rest when the mount goes. */
typedef struct open_file {
	uint64_t next; /* where a reader in order reads next */
	int fd;        /* the file in the node cache's entry, or -1 */
	struct open_file *older, *newer;
} open_file;

static void open_add(stg_mount *m, open_file *of)
{
	pthread_mutex_lock(&m->open_mu);
	of->older = m->open_files;
	if (of->older)
		of->older->newer = of;
	m->open_files = of;
	pthread_mutex_unlock(&m->open_mu);
}

static void open_free(open_file *of)
{
	if (of->fd >= 0)
		close(of->fd);
	free(of);
}

static void open_drop(stg_mount *m, open_file *of)
{
	pthread_mutex_lock(&m->open_mu);
	if (of->older)
		of->older->newer = of->newer;
	if (of->newer)
		of->newer->older = of->older;
	else
		m->open_files = of->older;
	pthread_mutex_unlock(&m->open_mu);
	open_free(of);
}

static stg_mount *req_mount(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

void stg__mount_log(stg_mount *m, stg_log_level level, const char *fmt, ...)
{
	char msg[STG_ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&m->log_mu);
	stg__log(m->ctx, level, "%s", msg);
	pthread_mutex_unlock(&m->log_mu);
}

/* ---- fetching frames ------------------------------------------------------------ */

/* Has the pack changed in place since it was mounted?  Logged once. */
static bool pack_changed(stg_mount *m, stg_mpack *mp)
{
	if (!stg__pack_changed(mp->pack, &mp->st))
		return false;
	if (!atomic_exchange(&mp->changed, true))
		stg__mount_log(m, STG_LOG_WARN,
		               "'%s' changed since it was mounted: what is not cached already "
		               "can no longer be read (stale); mount it again",
		               mp->path);
	return true;
}

/* The pack that frame k of the mount's frames is of. */
static stg_mpack *pack_of_frame(stg_mount *m, size_t k)
{
	size_t lo = 0, hi = m->n_packs;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->packs[mid].frame_base <= k)
			lo = mid;
		else
			hi = mid;
	}
	/* a pack of no frames starts where the next one does */
	while (lo > 0 && k >= m->packs[lo].frame_base + m->packs[lo].pack->t.n_frames)
		lo--;
	return &m->packs[lo];
}

/* Does buf hold frame f as its frame table says (format 3)? */
static bool frame_ok(const stg_frame *f, const uint8_t *buf)
{
	XXH128_canonical_t h;
	XXH128_canonicalFromHash(&h, XXH3_128bits(buf, f->comp_size));
	return memcmp(h.digest, f->xxh3, 16) == 0;
}

static int fetch(void *arg, size_t k, uint8_t *buf, size_t len)
{
	stg_mount *m = arg;
	stg_mpack *mp = pack_of_frame(m, k);
	k -= mp->frame_base;
	const stg_frame *f = &mp->pack->t.frames[k];
	/* kept on this node by an earlier mount (--cache): no shared FS at all */
	if (mp->keep && stg__keep_get(mp->keep, f, k, buf) == 0 && frame_ok(f, buf))
		return 0;
	/* Format 3: the frame's own hash says whether these are the bytes
	 * mounted, so the pack's attributes (one round trip on NFS) are asked
	 * only when they are not: changed (stale) or damaged (EIO, below).
	 * Older formats have no such hash: asked before and after each read,
	 * as a read racing a change in place may return bytes of either. */
	bool hashed = mp->pack->t.version >= 3;
	if (!hashed && pack_changed(m, mp))
		return ESTALE;
	int rc = stg__mslot_take(m);
	if (rc)
		return rc;
	rc = stg__pack_pread(mp->pack, buf, len, f->comp_off) ? (errno ? errno : EIO) : 0;
	stg__mslot_done(m);
	if (rc)
		return rc;
	if (!hashed)
		return pack_changed(m, mp) ? ESTALE : 0;
	/* checked here, once (the frames are told so: fetch_checks) */
	if (!frame_ok(f, buf))
		return pack_changed(m, mp) ? ESTALE : EBADMSG;
	if (mp->keep)
		stg__keep_put(m, mp, f, k, buf);
	return 0;
}

static void frame_bad(void *arg, size_t k, const char *why)
{
	stg_mount *m = arg;
	stg_mpack *mp = pack_of_frame(m, k);
	stg__mount_log(m, STG_LOG_WARN, "'%s': frame %zu is damaged (%s): reads of it fail (EIO)",
	               mp->path, k - mp->frame_base, why);
}

/* ---- reading a file ------------------------------------------------------------- */

/* Format 1 and 2: a file is checked whole before any of it is served. */
static int check_file(stg_mount *m, stg_mpack *mp, const stg_rec *r)
{
	size_t i = (size_t)(r - mp->pack->t.recs);
	uint8_t state = atomic_load(&mp->file_state[i]);
	if (state != FILE_UNCHECKED)
		return state == FILE_OK ? 0 : EIO;
	int rc = stg__frames_check(m->frames, mp->raw_base + r->data_off, r->size, r->xxh3);
	char pbuf[STG_PATH_MAX + 1];
	if (rc == EIO)
		stg__mount_log(m, STG_LOG_WARN,
		               "'%s': '%s' does not match its XXH3-128: reads of it fail (EIO)",
		               mp->path, stg__rec_path(mp->pack, r, pbuf));
	if (rc != ENOMEM && rc != ESTALE && rc != EINTR)
		atomic_store(&mp->file_state[i], rc ? FILE_BAD : FILE_OK);
	return rc;
}

/* ---- the filesystem's operations ------------------------------------------------ */

static void fill_entry(stg_mount *m, fuse_ino_t ino, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof *e);
	e->ino = ino;
	e->attr_timeout = TIMEOUT;
	e->entry_timeout = TIMEOUT;
	stg__mtree_stat(m->tree, ino, &e->attr);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	stg_mount *m = req_mount(req);
	uint32_t ino = stg__mtree_lookup(m->tree, parent, name, strlen(name));
	if (!ino) {
		/* a negative entry, cached as long as a positive one */
		struct fuse_entry_param e = {.entry_timeout = TIMEOUT};
		fuse_reply_entry(req, &e);
		return;
	}
	struct fuse_entry_param e;
	fill_entry(m, ino, &e);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	stg_mount *m = req_mount(req);
	if (!stg__mtree_node(m->tree, ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st;
	stg__mtree_stat(m->tree, ino, &st);
	fuse_reply_attr(req, &st, TIMEOUT);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	stg_mount *m = req_mount(req);
	const stg_mnode *n = stg__mtree_node(m->tree, ino);
	size_t pk = 0;
	const stg_rec *r = stg__mtree_rec(m->tree, ino, &pk);
	if (!n || n->type != STG_SYMLINK || !r)
		fuse_reply_err(req, EINVAL);
	else
		fuse_reply_readlink(req, stg__rec_link(m->packs[pk].pack, r));
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	stg_mount *m = req_mount(req);
	const stg_mnode *n = stg__mtree_node(m->tree, ino);
	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->type == STG_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_APPEND))) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (m->share) {
		/* nothing kept per open file: whichever server of the env gets
		 * the reads answers them; a kernel that can opens without asking */
		if (atomic_load(&m->no_open)) {
			fuse_reply_err(req, ENOSYS);
			return;
		}
		fi->fh = 0;
		fi->keep_cache = 1;
		fuse_reply_open(req, fi);
		return;
	}
	open_file *of = calloc(1, sizeof *of);
	if (!of) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	of->fd = -1;
	size_t pk = 0;
	const stg_rec *r = stg__mtree_rec(m->tree, ino, &pk);
	const stg_mpack *mp = &m->packs[pk];
	if (mp->entry_fd >= 0 && r) {
		char pbuf[STG_PATH_MAX + 1];
		const char *path = stg__rec_path(mp->pack, r, pbuf);
		of->fd = stg__open_beneath(mp->entry_fd, path, O_RDONLY, 0);
		if (of->fd < 0) {
			int e = errno;
			stg__mount_log(m, STG_LOG_WARN, "'%s' in the node cache: %s", path,
			               strerror(e));
			free(of);
			fuse_reply_err(req, EIO);
			return;
		}
	}
	open_add(m, of);
	fi->fh = (uint64_t)(uintptr_t)of;
	fi->keep_cache = 1; /* the content never changes */
	/* an interrupted open gets no release: as libfuse's high-level API */
	if (fuse_reply_open(req, fi) == -ENOENT)
		open_drop(m, of);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
	stg_mount *m = req_mount(req);
	size_t pk = 0;
	const stg_rec *r = stg__mtree_rec(m->tree, ino, &pk);
	stg_mpack *mp = &m->packs[pk];
	open_file *of = (open_file *)(uintptr_t)fi->fh;
	if (!r || off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if ((uint64_t)off >= r->size || !size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (!of && mp->entry_fd >= 0) {
		/* an env's file, in the node cache's entry (checked when it was
		 * staged), opened for this read alone and passed on without a
		 * copy where the kernel can (splice) */
		char pbuf[STG_PATH_MAX + 1];
		int fd = stg__open_beneath(mp->entry_fd, stg__rec_path(mp->pack, r, pbuf), O_RDONLY,
		                           0);
		if (fd < 0) {
			fuse_reply_err(req, EIO);
			return;
		}
		size_t n =
		        r->size - (uint64_t)off < size ? (size_t)(r->size - (uint64_t)off) : size;
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = fd;
		bv.buf[0].pos = off;
		fuse_reply_data(req, &bv, 0);
		close(fd);
		return;
	}
	if (of && of->fd >= 0) {
		/* the node cache's entry: checked when it was staged */
		char *b = malloc(size);
		ssize_t got = b ? pread(of->fd, b, size, off) : -1;
		if (got < 0)
			fuse_reply_err(req, b ? errno : ENOMEM);
		else
			fuse_reply_buf(req, b, (size_t)got);
		free(b);
		return;
	}
	int rc = mp->file_state ? check_file(m, mp, r) : 0;
	if (rc) {
		fuse_reply_err(req, rc);
		return;
	}
	size_t n = r->size - (uint64_t)off < size ? (size_t)(r->size - (uint64_t)off) : size;
	uint8_t *buf = malloc(n);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	uint64_t at = mp->raw_base + r->data_off + (uint64_t)off;
	/* a reader in order: have the frames after this read fetched meanwhile */
	if (of && of->next == (uint64_t)off) {
		const stg_trailer *t = &m->frames_of;
		size_t last = stg__frame_of(t, at + n - 1);
		size_t end = stg__frame_of(t, mp->raw_base + r->data_off + r->size - 1);
		/* as many frames as hold READ_AHEAD bytes (4 at least) */
		size_t ahead = 4;
		while (ahead < 256 && last + ahead < end &&
		       (uint64_t)ahead * t->frames[last + 1].raw_size < READ_AHEAD)
			ahead++;
		if (last < end)
			stg__frames_prefetch(m->frames, last + 1,
			                     end - last < ahead ? end - last : ahead);
	}
	rc = stg__frames_read(m->frames, at, n, buf);
	if (of)
		of->next = (uint64_t)off + n;
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_buf(req, (const char *)buf, n);
	free(buf);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	open_file *of = (open_file *)(uintptr_t)fi->fh;
	if (of)
		open_drop(req_mount(req), of);
	fuse_reply_err(req, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	stg_mount *m = req_mount(req);
	const stg_mnode *n = stg__mtree_node(m->tree, ino);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (n->type != STG_DIR)
		fuse_reply_err(req, ENOTDIR);
	else {
		fi->keep_cache = 1;
		fi->cache_readdir = 1;
		fuse_reply_open(req, fi);
	}
}

/* readdir and readdirplus: offsets 1 and 2 are "." and "..", 3 + i the
 * directory's i-th name. */
static void list_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	stg_mount *m = req_mount(req);
	const stg_mnode *d = stg__mtree_node(m->tree, ino);
	if (!d || d->type != STG_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	char name[STG_PATH_MAX + 1];
	for (off_t i = off < 0 ? 0 : off; (uint64_t)i < 2 + (uint64_t)d->n_kids; i++) {
		fuse_ino_t e_ino;
		const char *nm;
		if (i < 2) {
			e_ino = i == 0 ? ino : d->parent;
			nm = i == 0 ? "." : "..";
		} else {
			const stg_mnode *k =
			        stg__mtree_node(m->tree, m->tree->kids[d->kids + i - 2]);
			e_ino = k->target;
			memcpy(name, k->name, k->name_len);
			name[k->name_len] = '\0';
			nm = name;
		}
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			fill_entry(m, e_ino, &e);
			need = fuse_add_direntry_plus(req, buf + used, size - used, nm, &e, i + 1);
		} else {
			struct stat st;
			stg__mtree_stat(m->tree, e_ino, &st);
			need = fuse_add_direntry(req, buf + used, size - used, nm, &st, i + 1);
		}
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
	(void)fi;
	list_dir(req, ino, size, off, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	stg_mount *m = req_mount(req);
	struct statvfs sv = {0};
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	for (size_t i = 0; i < m->n_packs; i++)
		sv.f_blocks += (m->packs[i].pack->t.content_size + 4095) / 4096;
	sv.f_files = m->tree->n_nodes;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	fuse_reply_statfs(req, &sv);
}

static void op_init(void *arg, struct fuse_conn_info *conn)
{
	stg_mount *m = arg;
	if (m->share && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT))
		atomic_store(&m->no_open, true);
	/* an env's reads are spliced from the cache's files */
	if (m->share && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	/* the content never changes: let the kernel keep what it read */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static const struct fuse_lowlevel_ops mount_ops = {
        .init = op_init,
        .lookup = op_lookup,
        .getattr = op_getattr,
        .readlink = op_readlink,
        .open = op_open,
        .read = op_read,
        .release = op_release,
        .opendir = op_opendir,
        .readdir = op_readdir,
        .readdirplus = op_readdirplus,
        .statfs = op_statfs,
};

/* ---- the mount's life ----------------------------------------------------------- */

void stg_mount_opts_init(stg_mount_opts *o)
{
	memset(o, 0, sizeof *o);
}

/* An env's first request, INIT, answered here and kept: a server that
 * joins the session later is given it, and answers it again to itself
 * (its reply goes nowhere: the kernel has had one), so that every
 * server's libfuse agrees with the kernel on what was agreed. */
static stg_err take_init(stg_ctx *ctx, stg_mount *m)
{
	struct fuse_buf fb = {0};
	int r;
	do
		r = fuse_session_receive_buf(m->se, &fb);
	while (r == -EINTR);
	if (r > 0 && !(fb.flags & FUSE_BUF_IS_FD) && (m->init = malloc((size_t)r))) {
		memcpy(m->init, fb.mem, (size_t)r);
		m->init_len = (size_t)r;
		fuse_session_process_buf(m->se, &fb);
	}
	free(fb.mem);
	if (!m->init)
		return stg__fail(ctx, STG_EIO, "the FUSE session of '%s' did not begin (%s)",
		                 m->mountpoint, r < 0 ? strerror(-r) : "no INIT request");
	return STG_OK;
}

stg_err stg__mount_session(stg_ctx *ctx, stg_mount *m, const char *mountpoint, int join_fd)
{
	char fsname[STG_PATH_MAX + 32];
	snprintf(fsname, sizeof fsname, "-ofsname=stager%s:%s", m->share ? "-env" : "",
	         m->packs[0].path);
	/* libfuse takes its options as arguments; ',' would split ours */
	for (char *c = fsname; *c; c++)
		if (*c == ',')
			*c = '_';
	char *argv[] = {"stager", "-oro,default_permissions,subtype=stager", fsname, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	m->se = fuse_session_new(&args, &mount_ops, sizeof mount_ops, m);
	fuse_opt_free_args(&args);
	if (!m->se)
		return stg__fail(ctx, STG_EIO, "cannot start a FUSE session (is /dev/fuse there?)");
	/* a session of the node's already, which this process joins: libfuse
	 * takes "/dev/fd/N" as a device already mounted */
	char dev[32];
	snprintf(dev, sizeof dev, "/dev/fd/%d", join_fd);
	if (fuse_session_mount(m->se, join_fd >= 0 ? dev : mountpoint)) {
		fuse_session_destroy(m->se);
		m->se = NULL;
		if (join_fd >= 0)
			return stg__fail(ctx, STG_EIO, "cannot join the FUSE session of '%s'",
			                 mountpoint);
		return stg__fail(ctx, STG_EIO,
		                 m->share ? "cannot mount on '%s' (a directory of yours? is "
		                            "fusermount3 installed, /dev/fuse there?)"
		                          : "cannot mount on '%s' (is it an empty directory of "
		                            "yours, and fusermount3 installed?)",
		                 mountpoint);
	}
	if (join_fd >= 0) {
		struct fuse_buf fb = {.mem = m->init, .size = m->init_len};
		fuse_session_process_buf(m->se, &fb);
		return STG_OK; /* the mount is the share's: its last server unmounts it */
	}
	m->mounted = true;
	return m->share ? take_init(ctx, m) : STG_OK;
}

stg_err stg_mount_serve(stg_mount *m)
{
	stg_err err = STG_OK;
	pthread_t keeper;
	bool keeper_started = pthread_create(&keeper, NULL, stg__mslot_keeper, m) == 0;
	stg_frames_opts fo = {
	        .max_bytes = m->cache_bytes,
	        .prefetchers = 2,
	        .fetch = fetch,
	        .fetch_arg = m,
	        .fetch_checks = true,
	        .bad = frame_bad,
	        .bad_arg = m,
	};
	if (!m->frames && (err = stg__frames_new(m->ctx, &m->frames_of, &fo, &m->frames)))
		goto out;
	/* a configuration of our own: libfuse 3.14 leaks the one it makes */
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	if (!lc) {
		err = stg__fail(m->ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	fuse_loop_cfg_set_clone_fd(lc, 0);
	if (fuse_session_loop_mt(m->se, lc) < 0)
		err = stg__fail(m->ctx, STG_EIO, "the FUSE session of '%s' failed", m->mountpoint);
	fuse_loop_cfg_destroy(lc);
out:
	pthread_mutex_lock(&m->slot_mu);
	m->stopping = true;
	pthread_cond_signal(&m->slot_cv);
	pthread_mutex_unlock(&m->slot_mu);
	if (keeper_started)
		pthread_join(keeper, NULL);
	return err;
}

int stg__mount_fd(stg_mount *m)
{
	return m->se ? fuse_session_fd(m->se) : -1;
}

void stg_mount_stop(stg_mount *m)
{
	if (m && m->se)
		fuse_session_exit(m->se);
}

void stg__mount_unmount(stg_mount *m)
{
	if (m->se && m->mounted) {
		fuse_session_unmount(m->se);
		m->mounted = false;
	}
}

void stg__mount_free(stg_mount *m)
{
	stg__mount_unmount(m);
	if (m->se)
		fuse_session_destroy(m->se);
	while (m->open_files) {
		open_file *of = m->open_files;
		m->open_files = of->older;
		open_free(of);
	}
	pthread_mutex_destroy(&m->open_mu);
	free(m->init);
	stg__frames_free(m->frames);
	stg__mtree_free(m->tree);
	for (size_t i = 0; m->packs && i < m->n_packs; i++) {
		stg_pack_close(m->packs[i].pack);
		free((void *)m->packs[i].file_state);
		free(m->packs[i].path);
	}
	if (m->n_packs > 1)
		free(m->frames_of.frames);
	free(m->packs);
	free(m->mountpoint);
	pthread_mutex_destroy(&m->log_mu);
	pthread_mutex_destroy(&m->slot_mu);
	pthread_cond_destroy(&m->slot_cv);
	free(m);
}
