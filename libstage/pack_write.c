/*
 * pack_write.c - make a pack from a directory tree.
 *
 * Three stages run at once:
 *   1. the calling thread walks the tree (sorted, so the same tree gives the
 *      same pack), reads each file once, hashes it (XXH3-128) and writes the
 *      tar stream through libarchive into the current frame buffer;
 *   2. worker threads compress full frame buffers, each an independent zstd
 *      frame with its content size and checksum;
 *   3. the worker that finishes frame k waits until frames < k are written,
 *      then writes its frame, feeds it to the SHA-256 and records it in the
 *      frame table.
 * A frame is cut before an entry's header once it holds frame_size bytes, or
 * in the middle of a large file's data, so headers never straddle frames.
 * At most threads + 2 frame buffers exist, so memory is bounded whatever the
 * tree's size (plus the manifest).
 */
#include "internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#define READ_CHUNK (1u << 20)
/* the read buffer holds one byte more than a chunk */
#define READ_BUF (READ_CHUNK + 1)

void stg_pack_opts_init(stg_pack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->level = 3;
	o->frame_size = 4u << 20;
}

/* ---- walking the tree -------------------------------------------------- */

typedef struct pk_ent {
	char *path;
	size_t path_len;
	char *link; /* symlink target (owned) or hardlink target (another's path) */
	bool link_owned;
	uint8_t type;
	uint32_t mode;
	uint64_t size;
	int64_t mtime;
	uint32_t nsec;
	dev_t dev;
	ino_t ino;
	nlink_t nlink;
	uid_t uid;
	gid_t gid;
	uint64_t tar_off, data_off;
	uint8_t xxh3[16];
} pk_ent;

typedef struct pk_walk {
	stg_ctx *ctx;
	pk_ent *ents;
	size_t n, cap;
	dev_t skip_dev[2];
	ino_t skip_ino[2];
	int n_skip;
	uint64_t skipped;
} pk_walk;

static void ents_free(pk_ent *ents, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ents[i].path);
		if (ents[i].link_owned)
			free(ents[i].link);
	}
	free(ents);
}

static stg_err walk_dir(pk_walk *w, int rootfd, const char *rel, size_t rel_len);

static stg_err add_entry(pk_walk *w, int rootfd, int dfd, const char *name, const char *rel,
                         size_t rel_len)
{
	stg_ctx *ctx = w->ctx;
	size_t nlen = strlen(name);
	size_t plen = rel_len ? rel_len + 1 + nlen : nlen;
	if (plen > STG_PATH_MAX)
		return stg__fail(ctx, STG_ENOTSUP, "path too long (over %d bytes): '%s/%s'",
		                 STG_PATH_MAX, rel, name);
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot stat '%s/%s'", rel, name);
	for (int i = 0; i < w->n_skip; i++)
		if (st.st_dev == w->skip_dev[i] && st.st_ino == w->skip_ino[i])
			return STG_OK;
	uint8_t type;
	if (S_ISREG(st.st_mode))
		type = STG_FILE;
	else if (S_ISDIR(st.st_mode))
		type = STG_DIR;
	else if (S_ISLNK(st.st_mode))
		type = STG_SYMLINK;
	else {
		stg__log(ctx, STG_LOG_WARN, "skipping '%s%s%s': %s cannot be packed", rel,
		         rel_len ? "/" : "", name,
		         S_ISFIFO(st.st_mode)   ? "a FIFO"
		         : S_ISSOCK(st.st_mode) ? "a socket"
		                                : "a device node");
		w->skipped++;
		return STG_OK;
	}
	if (w->n == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 1024;
		pk_ent *n = realloc(w->ents, ncap * sizeof *n);
		if (!n)
			return stg__fail(ctx, STG_ENOMEM, "out of memory walking the tree");
		w->ents = n;
		w->cap = ncap;
	}
	pk_ent *e = &w->ents[w->n];
	memset(e, 0, sizeof *e);
	e->path = malloc(plen + 1);
	if (!e->path)
		return stg__fail(ctx, STG_ENOMEM, "out of memory walking the tree");
	if (rel_len) {
		memcpy(e->path, rel, rel_len);
		e->path[rel_len] = '/';
		memcpy(e->path + rel_len + 1, name, nlen + 1);
	} else {
		memcpy(e->path, name, nlen + 1);
	}
	e->path_len = plen;
	e->type = type;
	e->mode = st.st_mode & 07777;
	e->size = type == STG_FILE ? (uint64_t)st.st_size : 0;
	e->mtime = st.st_mtim.tv_sec;
	e->nsec = (uint32_t)st.st_mtim.tv_nsec;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->nlink = st.st_nlink;
	e->uid = st.st_uid;
	e->gid = st.st_gid;
	w->n++;
	if (type == STG_SYMLINK) {
		char buf[STG_PATH_MAX + 2];
		ssize_t n = readlinkat(dfd, name, buf, sizeof buf);
		if (n < 0)
			return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read link '%s'",
			                       e->path);
		if (n == 0 || (size_t)n > STG_PATH_MAX)
			return stg__fail(ctx, STG_ENOTSUP, "symlink target too long: '%s'",
			                 e->path);
		buf[n] = '\0';
		e->link = strdup(buf);
		e->link_owned = true;
		if (!e->link)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	if (type == STG_DIR) {
		/* e may move when the array grows: copy the path first */
		char *sub = strdup(e->path);
		if (!sub)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		stg_err err = walk_dir(w, rootfd, sub, plen);
		free(sub);
		return err;
	}
	return STG_OK;
}

/* Entries of one directory, sorted by name, depth first.  The directory is
 * read whole and closed before recursing, so depth holds no descriptors. */
static stg_err walk_dir(pk_walk *w, int rootfd, const char *rel, size_t rel_len)
{
	stg_ctx *ctx = w->ctx;
	char **names;
	size_t n;
	if (stg__dir_names(rootfd, rel_len ? rel : NULL, true, &names, &n))
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot read directory '%s'", rel_len ? rel : ".");
	stg_err err = STG_OK;
	int dfd = rel_len ? openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	                  : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	if (dfd < 0)
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot open directory '%s'",
		                      rel_len ? rel : ".");
	for (size_t i = 0; i < n && !err; i++) {
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			break;
		}
		err = add_entry(w, rootfd, dfd, names[i], rel, rel_len);
	}
	if (dfd >= 0)
		close(dfd);
	stg__names_free(names, n);
	return err;
}

static int cmp_inode(const void *a, const void *b)
{
	const pk_ent *x = *(pk_ent *const *)a, *y = *(pk_ent *const *)b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Files with several links in the tree: the first in pack order keeps the
 * content, the others become hardlinks to it. */
static stg_err find_hardlinks(pk_walk *w)
{
	size_t m = 0;
	for (size_t i = 0; i < w->n; i++)
		if (w->ents[i].type == STG_FILE && w->ents[i].nlink > 1)
			m++;
	if (m < 2)
		return STG_OK;
	pk_ent **v = malloc(m * sizeof *v);
	if (!v)
		return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	m = 0;
	for (size_t i = 0; i < w->n; i++)
		if (w->ents[i].type == STG_FILE && w->ents[i].nlink > 1)
			v[m++] = &w->ents[i];
	qsort(v, m, sizeof *v, cmp_inode);
	for (size_t i = 1; i < m; i++) {
		size_t first = i - 1;
		while (i < m && v[i]->dev == v[first]->dev && v[i]->ino == v[first]->ino) {
			v[i]->type = STG_HARDLINK;
			v[i]->size = 0;
			v[i]->link = v[first]->path;
			v[i]->link_owned = false;
			i++;
		}
	}
	free(v);
	return STG_OK;
}

/* ---- the frame pipeline ------------------------------------------------ */

typedef struct pk_job {
	struct pk_job *next;
	size_t idx;
	uint8_t *raw;
	size_t len, cap;
	uint8_t *comp;
	size_t comp_cap;
} pk_job;

/* The deltas a pack's trailer lists: base digests and file names. */
typedef struct pk_deltas {
	size_t n;
	uint8_t (*base)[STG_DIGEST_LEN];
	char **name;
} pk_deltas;

typedef struct pk_state {
	stg_ctx *ctx;
	int fd;
	uint32_t root_mode; /* the packed directory's, for the trailer */
	int level;
	size_t target;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pk_job *free_list, *qhead, *qtail;
	pk_job *all; /* every job, for freeing (linked through idx-less array) */
	size_t n_jobs;
	size_t next_write, submitted;
	bool closing;
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	EVP_MD_CTX *sha;
	stg_frame *frames;
	size_t n_frames, cap_frames;
	uint64_t comp_off, raw_off;
	pk_job *cur;
	bool regular; /* fd is a regular file */
	uint64_t tar_pos;
	uint64_t out_bytes;
	const pk_deltas *deltas; /* listed in the trailer (NULL: none) */
} pk_state;

static void set_err(pk_state *s, stg_err err, const char *msg)
{
	/* called with s->mu held */
	if (!s->err) {
		s->err = err;
		snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
	}
	pthread_cond_broadcast(&s->cv);
}

/* Compress one frame.  The slow levels go in steps, so that a pack at
 * --level 19 answers SIGINT and SIGTERM within a second (a frame of a few
 * MiB takes seconds there); the fast ones in one call, which is what
 * earlier versions wrote (streaming changes the bytes at some levels, and
 * with them the digest of the same tree). */
static size_t compress_frame(stg_ctx *ctx, ZSTD_CCtx *cc, int level, const pk_job *j, size_t bound,
                             const char **zerr)
{
	if (level <= 9) {
		size_t n = ZSTD_compress2(cc, j->comp, bound, j->raw, j->len);
		if (ZSTD_isError(n))
			*zerr = ZSTD_getErrorName(n);
		return n;
	}
	ZSTD_CCtx_setPledgedSrcSize(cc, j->len);
	ZSTD_outBuffer out = {j->comp, bound, 0};
	const size_t step = 256 * 1024;
	for (size_t pos = 0; pos < j->len || !pos;) {
		size_t k = j->len - pos < step ? j->len - pos : step;
		ZSTD_EndDirective end = pos + k == j->len ? ZSTD_e_end : ZSTD_e_continue;
		ZSTD_inBuffer in = {j->raw + pos, k, 0};
		size_t left;
		do {
			left = ZSTD_compressStream2(cc, &out, &in, end);
			if (ZSTD_isError(left)) {
				*zerr = ZSTD_getErrorName(left);
				ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
				return 0;
			}
		} while (in.pos < in.size || (end == ZSTD_e_end && left));
		pos += k;
		if (end == ZSTD_e_end)
			break;
		if (stg__cancelled(ctx)) {
			*zerr = "interrupted";
			ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
			return 0;
		}
	}
	return out.pos;
}

/*
 * Is a frame incompressible (JPEG, PNG, already-compressed shards: most of
 * a training set)?  Three 32 KiB samples at level 1 tell; zstd would store
 * such a frame raw at any level, so it is encoded at a fast level instead,
 * which gives the same bytes' worth of output for a third of the CPU.  The
 * choice depends on the data only, so packs stay reproducible.
 */
#define PROBE_LEN  (32u << 10)
#define FAST_LEVEL (-1)

static bool incompressible(ZSTD_CCtx *probe, const uint8_t *raw, size_t len, uint8_t *scratch,
                           size_t scratch_len)
{
	if (!probe || len < 8 * PROBE_LEN)
		return false;
	size_t in = 0, out = 0;
	for (int i = 0; i < 3; i++) {
		size_t off = (len - PROBE_LEN) / 2 * (size_t)i;
		size_t n = ZSTD_compressCCtx(probe, scratch, scratch_len, raw + off, PROBE_LEN, 1);
		if (ZSTD_isError(n))
			return false;
		in += PROBE_LEN;
		out += n;
	}
	return out * 100 > in * 97;
}

static void *compress_worker(void *arg)
{
	pk_state *s = arg;
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_CCtx *probe = ZSTD_createCCtx();
	size_t scratch_len = ZSTD_compressBound(PROBE_LEN);
	uint8_t *scratch = malloc(scratch_len);
	if (cc) {
		ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
		ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
	}
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->qhead && !s->closing && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->err || (!s->qhead && s->closing))
			break;
		pk_job *j = s->qhead;
		s->qhead = j->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_mutex_unlock(&s->mu);

		size_t clen = 0;
		const char *zerr = NULL;
		size_t bound = ZSTD_compressBound(j->len);
		if (!cc) {
			zerr = "out of memory";
		} else {
			if (j->comp_cap < bound) {
				free(j->comp);
				j->comp = malloc(bound);
				j->comp_cap = j->comp ? bound : 0;
			}
			if (!j->comp) {
				zerr = "out of memory";
			} else {
				int level = s->level;
				if (scratch &&
				    incompressible(probe, j->raw, j->len, scratch, scratch_len))
					level = FAST_LEVEL;
				ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
				clen = compress_frame(s->ctx, cc, level, j, bound, &zerr);
			}
		}

		pthread_mutex_lock(&s->mu);
		if (zerr) {
			char msg[256];
			snprintf(msg, sizeof msg, "compressing frame %zu: %s", j->idx, zerr);
			set_err(s, stg__cancelled(s->ctx) ? STG_EINTR : STG_ENOMEM, msg);
			break;
		}
		while (s->next_write != j->idx && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->err)
			break;
		/* our turn: frames before us are written, none after us can be
		 * written until we are done, so the mutex need not be held for
		 * the write itself */
		pthread_mutex_unlock(&s->mu);
		int werr = stg__write_full(s->fd, j->comp, clen) ? errno : 0;
		if (!werr) {
			EVP_DigestUpdate(s->sha, j->comp, clen);
			/* start writing the frame back now, so the final fsync
			 * has little left to do and dirty pages do not pile up
			 * (harmless on a pipe: it fails with ESPIPE) */
			if (s->regular)
				sync_file_range(s->fd, (off_t)s->comp_off, (off_t)clen,
				                SYNC_FILE_RANGE_WRITE);
		}
		pthread_mutex_lock(&s->mu);
		if (werr) {
			char msg[256];
			snprintf(msg, sizeof msg, "writing the pack: %s", strerror(werr));
			set_err(s, stg__err_from_errno(werr, STG_EIO), msg);
			break;
		}
		if (s->n_frames == s->cap_frames) {
			size_t ncap = s->cap_frames ? s->cap_frames * 2 : 256;
			stg_frame *nf = realloc(s->frames, ncap * sizeof *nf);
			if (!nf) {
				set_err(s, STG_ENOMEM, "out of memory");
				break;
			}
			s->frames = nf;
			s->cap_frames = ncap;
		}
		s->frames[s->n_frames++] = (stg_frame){s->comp_off, clen, s->raw_off, j->len};
		s->comp_off += clen;
		s->raw_off += j->len;
		s->next_write++;
		j->len = 0;
		j->next = s->free_list;
		s->free_list = j;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	ZSTD_freeCCtx(cc);
	ZSTD_freeCCtx(probe);
	free(scratch);
	return NULL;
}

/* Hand the current frame to the workers and take a free buffer. */
static stg_err submit(pk_state *s)
{
	pthread_mutex_lock(&s->mu);
	pk_job *j = s->cur;
	j->idx = s->submitted++;
	j->next = NULL;
	if (s->qtail)
		s->qtail->next = j;
	else
		s->qhead = j;
	s->qtail = j;
	pthread_cond_broadcast(&s->cv);
	while (!s->free_list && !s->err)
		pthread_cond_wait(&s->cv, &s->mu);
	stg_err err = s->err;
	if (!err) {
		s->cur = s->free_list;
		s->free_list = s->cur->next;
	} else {
		s->cur = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	return err;
}

static la_ssize_t tar_write_cb(struct archive *a, void *arg, const void *buf, size_t len)
{
	pk_state *s = arg;
	pk_job *j = s->cur;
	if (!j) {
		archive_set_error(a, EIO, "pack pipeline stopped");
		return -1;
	}
	if (j->len + len > j->cap) {
		size_t ncap = j->cap * 2 > j->len + len ? j->cap * 2 : j->len + len;
		uint8_t *n = realloc(j->raw, ncap);
		if (!n) {
			archive_set_error(a, ENOMEM, "out of memory");
			return -1;
		}
		j->raw = n;
		j->cap = ncap;
	}
	memcpy(j->raw + j->len, buf, len);
	j->len += len;
	s->tar_pos += len;
	return (la_ssize_t)len;
}

/* ---- writing one entry ------------------------------------------------- */

static stg_err write_file_data(pk_state *s, struct archive *a, int rootfd, pk_ent *e, uint8_t *buf,
                               XXH3_state_t *xs)
{
	stg_ctx *ctx = s->ctx;
	stg_err err = STG_OK;
	int fd = openat(rootfd, e->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot open '%s'", e->path);
	if (e->size > READ_CHUNK)
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	XXH3_128bits_reset(xs);
	uint64_t left = e->size;
	while (left) {
		/* the last read asks for one byte more: getting it means the
		 * file grew, without a separate read to find out */
		size_t want = left < READ_CHUNK ? (size_t)left + 1 : READ_CHUNK;
		ssize_t n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = stg__fail_errno(ctx, STG_EIO, errno, "reading '%s'", e->path);
			goto out;
		}
		if (n == 0) {
			err = stg__fail(ctx, STG_EIO,
			                "'%s' shrank while it was packed (%llu bytes missing); "
			                "pack again once nothing writes to the tree",
			                e->path, (unsigned long long)left);
			goto out;
		}
		if ((uint64_t)n > left) {
			err = stg__fail(ctx, STG_EIO,
			                "'%s' grew while it was packed; pack again once nothing "
			                "writes to the tree",
			                e->path);
			goto out;
		}
		XXH3_128bits_update(xs, buf, (size_t)n);
		left -= (uint64_t)n;
		/* feed the tar stream in pieces that fill the current frame
		 * exactly, so a large file is cut into frame_size frames */
		for (size_t done = 0; done < (size_t)n;) {
			if (s->cur->len >= s->target && (err = submit(s)))
				goto out;
			size_t room = s->target - s->cur->len;
			size_t piece = (size_t)n - done < room ? (size_t)n - done : room;
			if (archive_write_data(a, buf + done, piece) != (la_ssize_t)piece) {
				err = s->err ? s->err : STG_EIO;
				if (!s->err)
					stg__fail(ctx, err, "writing '%s' to the tar stream: %s",
					          e->path, archive_error_string(a));
				goto out;
			}
			done += piece;
		}
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
	/* growth after the last read is not seen; the pack then holds a
	 * consistent copy of the file's first e->size bytes */
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xs));
	memcpy(e->xxh3, c.digest, 16);
out:
	close(fd);
	return err;
}

static stg_err write_entries(pk_state *s, pk_walk *w, int rootfd, struct archive *a)
{
	stg_ctx *ctx = s->ctx;
	stg_err err = STG_OK;
	struct archive_entry *ae = archive_entry_new();
	uint8_t *buf = malloc(READ_BUF);
	XXH3_state_t *xs = XXH3_createState();
	if (!ae || !buf || !xs) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < w->n; i++)
		total += w->ents[i].size;
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));

	for (size_t i = 0; i < w->n; i++) {
		pk_ent *e = &w->ents[i];
		if (s->cur->len >= s->target && (err = submit(s)))
			goto out;
		archive_entry_clear(ae);
		archive_entry_copy_pathname(ae, e->path);
		archive_entry_set_perm(ae, e->mode);
		archive_entry_set_mtime(ae, e->mtime, e->nsec);
		archive_entry_set_uid(ae, e->uid);
		archive_entry_set_gid(ae, e->gid);
		switch (e->type) {
		case STG_FILE:
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_size(ae, (la_int64_t)e->size);
			break;
		case STG_DIR: archive_entry_set_filetype(ae, AE_IFDIR); break;
		case STG_SYMLINK:
			archive_entry_set_filetype(ae, AE_IFLNK);
			archive_entry_copy_symlink(ae, e->link);
			break;
		case STG_HARDLINK:
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_copy_hardlink(ae, e->link);
			archive_entry_set_size(ae, 0);
			break;
		}
		e->tar_off = s->tar_pos;
		int r = archive_write_header(a, ae);
		if (r < ARCHIVE_WARN) {
			err = s->err ? s->err : STG_EIO;
			if (!s->err)
				stg__fail(ctx, err, "writing the header of '%s': %s", e->path,
				          archive_error_string(a));
			goto out;
		}
		e->data_off = s->tar_pos;
		if (e->type == STG_FILE && e->size) {
			if ((err = write_file_data(s, a, rootfd, e, buf, xs)))
				goto out;
		} else {
			memcpy(e->xxh3, empty.digest, 16);
		}
		if (archive_write_finish_entry(a) < ARCHIVE_WARN) {
			err = s->err ? s->err : STG_EIO;
			if (!s->err)
				stg__fail(ctx, err, "finishing '%s': %s", e->path,
				          archive_error_string(a));
			goto out;
		}
		done += e->size;
		if (ctx->progress_fn)
			ctx->progress_fn(ctx->progress_arg, "pack", done, total);
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
out:
	archive_entry_free(ae);
	free(buf);
	XXH3_freeState(xs);
	return err;
}

/* ---- the trailer ------------------------------------------------------- */

static stg_err write_trailer(pk_state *s, pk_walk *w, int level, stg_pack_info *info)
{
	stg_ctx *ctx = s->ctx;
	stg_err err = STG_OK;
	stg_trailer t = {0};
	uint8_t *frame = NULL;
	size_t frame_len = 0, names = 0;
	size_t nd = s->deltas ? s->deltas->n : 0;
	unsigned int dlen = 0;
	EVP_DigestFinal_ex(s->sha, t.digest, &dlen);
	for (size_t i = 0; i < w->n; i++)
		names += w->ents[i].path_len + (w->ents[i].link ? strlen(w->ents[i].link) : 0) + 2;
	for (size_t i = 0; i < nd; i++)
		names += strlen(s->deltas->name[i]) + 1;
	t.recs = calloc(w->n ? w->n : 1, sizeof *t.recs);
	t.deltas = calloc(nd ? nd : 1, sizeof *t.deltas);
	t.names = malloc(names + 1);
	if (!t.recs || !t.deltas || !t.names) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	size_t off = 0;
	for (size_t i = 0; i < w->n; i++) {
		const pk_ent *e = &w->ents[i];
		stg_rec *r = &t.recs[i];
		r->tar_off = e->tar_off;
		r->data_off = e->data_off;
		r->size = e->size;
		r->mtime = e->mtime;
		r->mtime_nsec = e->nsec;
		r->mode = e->mode;
		r->type = e->type;
		memcpy(r->xxh3, e->xxh3, 16);
		r->path_off = off;
		r->path_len = (uint32_t)e->path_len;
		memcpy(t.names + off, e->path, e->path_len + 1);
		off += e->path_len + 1;
		size_t ll = e->link ? strlen(e->link) : 0;
		r->link_len = (uint32_t)ll;
		if (ll)
			memcpy(t.names + off, e->link, ll);
		t.names[off + ll] = '\0';
		off += ll + 1;
		if (e->type == STG_FILE)
			t.content_size += e->size;
	}
	for (size_t i = 0; i < nd; i++) {
		/* the same tree packed again: no delta from itself */
		if (!memcmp(s->deltas->base[i], t.digest, STG_DIGEST_LEN))
			continue;
		stg_delta_rec *d = &t.deltas[t.n_deltas++];
		memcpy(d->base, s->deltas->base[i], STG_DIGEST_LEN);
		d->name_off = off;
		d->name_len = (uint32_t)strlen(s->deltas->name[i]);
		memcpy(t.names + off, s->deltas->name[i], d->name_len + 1);
		off += d->name_len + 1;
	}
	t.n_entries = w->n;
	t.frames = s->frames;
	t.n_frames = s->n_frames;
	t.data_size = s->comp_off;
	t.tar_size = s->raw_off;
	t.root_mode = s->root_mode;

	if ((err = stg__trailer_encode(ctx, &t, level > 9 ? level : 9, &frame, &frame_len)))
		goto out;
	if (stg__write_full(s->fd, frame, frame_len)) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "writing the pack's trailer");
		goto out;
	}
	if (info) {
		memset(info, 0, sizeof *info);
		memcpy(info->digest, t.digest, STG_DIGEST_LEN);
		info->pack_size = t.data_size + frame_len;
		info->data_size = t.data_size;
		info->tar_size = t.tar_size;
		info->content_size = t.content_size;
		info->entries = w->n;
		info->frames = t.n_frames;
		info->deltas = t.n_deltas;
		info->format_version = STG_FORMAT_VERSION;
		for (size_t i = 0; i < w->n; i++) {
			switch (w->ents[i].type) {
			case STG_FILE: info->files++; break;
			case STG_DIR: info->dirs++; break;
			case STG_SYMLINK: info->symlinks++; break;
			case STG_HARDLINK: info->hardlinks++; break;
			}
		}
	}
out:
	t.frames = NULL; /* owned by s */
	free(t.recs);
	free(t.deltas);
	free(t.names);
	free(frame);
	return err;
}

/* ---- the whole ---------------------------------------------------------- */

static stg_err pack_tree(stg_ctx *ctx, int rootfd, int fd, const stg_pack_opts *opts, pk_walk *w,
                         const pk_deltas *deltas, stg_pack_info *info)
{
	stg_err err = STG_OK;
	stg_pack_opts def;
	if (!opts) {
		stg_pack_opts_init(&def);
		opts = &def;
	}
	if (opts->level < 1 || opts->level > 19)
		return stg__fail(ctx, STG_EUSAGE, "compression level %d is out of range (1-19)",
		                 opts->level);
	size_t target = opts->frame_size ? opts->frame_size : (4u << 20);
	if (target < 64 * 1024 || target > STG_FRAME_RAW_MAX / 2)
		return stg__fail(ctx, STG_EUSAGE, "frame size out of range (64 KiB to %u MiB)",
		                 STG_FRAME_RAW_MAX / 2 >> 20);

	if ((err = walk_dir(w, rootfd, "", 0)) || (err = find_hardlinks(w)))
		return err;

	pk_state s = {0};
	s.ctx = ctx;
	s.fd = fd;
	struct stat fst;
	s.regular = fstat(fd, &fst) == 0 && S_ISREG(fst.st_mode);
	struct stat rst;
	if (fstat(rootfd, &rst) == 0)
		s.root_mode = STG_ROOT_MODE_SET | (uint32_t)(rst.st_mode & 07777);
	s.level = opts->level;
	s.target = target;
	s.deltas = deltas;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	int nthreads = stg__threads(ctx);
	size_t njobs = (size_t)nthreads + 2;
	pk_job *jobs = calloc(njobs, sizeof *jobs);
	pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
	s.sha = EVP_MD_CTX_new();
	struct archive *a = archive_write_new();
	int started = 0;
	if (!jobs || !tids || !s.sha || !a) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	EVP_DigestInit_ex(s.sha, EVP_sha256(), NULL);
	for (size_t i = 0; i < njobs; i++) {
		jobs[i].cap = target + READ_CHUNK + 64 * 1024;
		if (!(jobs[i].raw = malloc(jobs[i].cap))) {
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
			goto out;
		}
		if (i) {
			jobs[i].next = s.free_list;
			s.free_list = &jobs[i];
		}
	}
	s.cur = &jobs[0];
	for (; started < nthreads; started++) {
		if (pthread_create(&tids[started], NULL, compress_worker, &s)) {
			err = stg__fail(ctx, STG_ENOMEM, "cannot start threads");
			goto out;
		}
	}

	archive_write_set_format_pax_restricted(a);
	archive_write_set_bytes_per_block(a, 0);
	archive_write_set_bytes_in_last_block(a, 1);
	if (archive_write_open2(a, &s, NULL, tar_write_cb, NULL, NULL) != ARCHIVE_OK) {
		err = stg__fail(ctx, STG_EIO, "starting the tar stream: %s",
		                archive_error_string(a));
		goto out;
	}
	if ((err = write_entries(&s, w, rootfd, a)))
		goto out;
	if (archive_write_close(a) != ARCHIVE_OK) {
		err = s.err ? s.err : STG_EIO;
		if (!s.err)
			stg__fail(ctx, err, "ending the tar stream: %s", archive_error_string(a));
		goto out;
	}
	if (s.cur->len && (err = submit(&s)))
		goto out;

out:
	pthread_mutex_lock(&s.mu);
	s.closing = true;
	if (err && !s.err)
		s.err = err; /* stop the workers without writing more */
	pthread_cond_broadcast(&s.cv);
	pthread_mutex_unlock(&s.mu);
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (!err && s.err) {
		err = s.err;
		stg__fail(ctx, err, "%s", s.errmsg);
	}
	if (!err && s.next_write != s.submitted)
		err = stg__fail(ctx, STG_EIO, "pack pipeline ended early");
	if (!err)
		err = write_trailer(&s, w, opts->level, info);
	if (a)
		archive_write_free(a);
	for (size_t i = 0; jobs && i < njobs; i++) {
		free(jobs[i].raw);
		free(jobs[i].comp);
	}
	free(jobs);
	free(tids);
	free(s.frames);
	EVP_MD_CTX_free(s.sha);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
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
	pk_walk w = {.ctx = ctx};
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		w.skip_dev[0] = st.st_dev;
		w.skip_ino[0] = st.st_ino;
		w.n_skip = 1;
	}
	err = pack_tree(ctx, rootfd, fd, opts, &w, NULL, info);
	ents_free(w.ents, w.n);
	close(rootfd);
	return err;
}

/* ---- deltas from older versions ------------------------------------------ */

/* The bases of a pack: opened, with the names and paths of their deltas. */
typedef struct pk_bases {
	pk_deltas d;
	stg_pack **packs;
	const char **given; /* as the caller named them */
	char **paths;       /* where each delta goes */
	char **tmps;        /* the temporary file each is written to */
} pk_bases;

static void bases_free(pk_bases *b)
{
	for (size_t i = 0; i < b->d.n; i++) {
		if (b->tmps[i])
			unlink(b->tmps[i]);
		free(b->tmps[i]);
		free(b->paths[i]);
		free(b->d.name[i]);
		stg_pack_close(b->packs[i]);
	}
	free(b->tmps);
	free(b->paths);
	free(b->d.name);
	free(b->d.base);
	free(b->packs);
	free(b->given);
	memset(b, 0, sizeof *b);
}

/* Open each base (once per digest) and name its delta beside out_path. */
static stg_err bases_open(stg_ctx *ctx, const stg_pack_opts *o, const char *out_path, pk_bases *b)
{
	size_t n = o->n_bases;
	memset(b, 0, sizeof *b);
	b->packs = calloc(n, sizeof *b->packs);
	b->given = calloc(n, sizeof *b->given);
	b->paths = calloc(n, sizeof *b->paths);
	b->tmps = calloc(n, sizeof *b->tmps);
	b->d.name = calloc(n, sizeof *b->d.name);
	b->d.base = calloc(n, sizeof *b->d.base);
	if (!b->packs || !b->given || !b->paths || !b->tmps || !b->d.name || !b->d.base)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	const char *slash = strrchr(out_path, '/');
	const char *name = slash ? slash + 1 : out_path;
	int dir_len = slash ? (int)(slash - out_path) : 1;
	const char *dir = slash ? out_path : ".";
	for (size_t i = 0; i < n; i++) {
		stg_pack *p = NULL;
		stg_err err = stg_pack_open(ctx, o->bases[i], &p);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			return stg__fail(ctx, err, "the base '%s': %s", o->bases[i], msg);
		}
		bool dup = false;
		for (size_t k = 0; k < b->d.n; k++)
			dup |= !memcmp(b->d.base[k], p->t.digest, STG_DIGEST_LEN);
		if (dup) {
			stg_pack_close(p);
			continue;
		}
		size_t k = b->d.n++;
		b->packs[k] = p;
		b->given[k] = o->bases[i];
		memcpy(b->d.base[k], p->t.digest, STG_DIGEST_LEN);
		char hex[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(p->t.digest, hex);
		if (strlen(name) + 23 > 255)
			return stg__fail(ctx, STG_EUSAGE,
			                 "the name '%s' is too long to name its deltas after it "
			                 "(at most 232 bytes)",
			                 name);
		if (asprintf(&b->d.name[k], "%s.delta-%.16s", name, hex) < 0 ||
		    asprintf(&b->paths[k], "%.*s/%s", dir_len, dir, b->d.name[k]) < 0) {
			b->d.name[k] = b->paths[k] = NULL;
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
	}
	return STG_OK;
}

/* Write each base's delta into a temporary file beside its final path;
 * pack is the new pack, complete. */
static stg_err deltas_write(stg_ctx *ctx, const char *dir, const char *pack, pk_bases *b,
                            const stg_pack_opts *o)
{
	stg_pack *np = NULL;
	stg_err err = stg_pack_open(ctx, pack, &np);
	for (size_t i = 0; i < b->d.n && !err; i++) {
		if (!memcmp(b->d.base[i], np->t.digest, STG_DIGEST_LEN)) {
			stg__log(ctx, STG_LOG_INFO,
			         "the base '%s' is the same pack (the tree has not changed): no "
			         "delta from it",
			         b->given[i]);
			continue;
		}
		int dfd = stg__create_tmp(b->paths[i], "tmp", &b->tmps[i]);
		if (dfd < 0) {
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "cannot create a file beside '%s'", b->paths[i]);
			break;
		}
		stg_delta_info di;
		err = stg_delta_write(ctx, b->packs[i], np, dir, dfd, &di);
		if (!err && o->fsync && fsync(dfd))
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "writing '%s'", b->paths[i]);
		if (close(dfd) && !err)
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "writing '%s'", b->paths[i]);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			stg__fail(ctx, err, "the delta from '%s': %s", b->given[i], msg);
		} else if (o->delta_done) {
			di.name = b->d.name[i];
			o->delta_done(o->delta_arg, b->given[i], &di);
		}
	}
	stg_pack_close(np);
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

stg_err stg_pack_dir(stg_ctx *ctx, const char *dir, const char *out_path, const stg_pack_opts *opts,
                     stg_pack_info *info)
{
	pk_bases bases = {0};
	stg_err err = STG_OK;
	if (opts && opts->n_bases && (err = bases_open(ctx, opts, out_path, &bases))) {
		bases_free(&bases);
		return err;
	}
	int rootfd;
	if ((err = open_root(ctx, dir, &rootfd))) {
		bases_free(&bases);
		return err;
	}
	char *tmp = NULL;
	int fd = stg__create_tmp(out_path, "tmp", &tmp);
	if (fd < 0) {
		int e = errno;
		close(rootfd);
		bases_free(&bases);
		return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                       "cannot create a file beside '%s'", out_path);
	}
	pk_walk w = {.ctx = ctx};
	struct stat st;
	if (fstat(fd, &st) == 0) {
		w.skip_dev[w.n_skip] = st.st_dev;
		w.skip_ino[w.n_skip++] = st.st_ino;
		private_as_source(fd, &st, rootfd);
	}
	/* an older pack at the output path, inside the tree, is not packed */
	if (stat(out_path, &st) == 0) {
		w.skip_dev[w.n_skip] = st.st_dev;
		w.skip_ino[w.n_skip++] = st.st_ino;
	}
	err = pack_tree(ctx, rootfd, fd, opts, &w, bases.d.n ? &bases.d : NULL, info);
	ents_free(w.ents, w.n);
	close(rootfd);
	if (!err && opts && opts->fsync && fsync(fd)) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "writing '%s'",
		                      out_path);
	}
	if (!err && bases.d.n)
		err = deltas_write(ctx, dir, tmp, &bases, opts);
	if (close(fd) && !err) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "writing '%s'",
		                      out_path);
	}
	/* the deltas first: a pack that lists them finds them in place */
	for (size_t i = 0; !err && i < bases.d.n; i++) {
		if (!bases.tmps[i])
			continue; /* no delta from the same pack */
		if (stg__replace(bases.tmps[i], bases.paths[i], opts->fsync)) {
			int e = errno;
			err = stg__fail_errno(ctx, STG_EIO, e, "cannot rename into '%s'",
			                      bases.paths[i]);
			break;
		}
		free(bases.tmps[i]);
		bases.tmps[i] = NULL;
	}
	if (!err && stg__replace(tmp, out_path, opts && opts->fsync)) {
		int e = errno;
		err = stg__fail_errno(ctx, STG_EIO, e, "cannot rename into '%s'", out_path);
	}
	if (err)
		unlink(tmp);
	free(tmp);
	bases_free(&bases);
	return err;
}
