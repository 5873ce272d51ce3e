/*
 * extract.c - decode a pack's frames in parallel, writing files (unpack) or
 * only checking them (verify).
 *
 * The manifest says where each file's content lies in the tar stream, so a
 * decoded frame is applied directly: for every selected file that overlaps
 * it, the overlapping bytes are written at the right offset of the file and
 * hashed.  Tar headers are not parsed again; the pack's SHA-256 (over all
 * compressed bytes) and each file's XXH3-128 are what make the result
 * trustworthy.
 *
 * Threads: a reader reads the needed frames in order (one sequential
 * pass) into a bounded set of buffers and does nothing else, so that the
 * shared filesystem is read without a pause: the link is what a cold stage
 * waits on.  A pack on a network filesystem is read past the page cache
 * (O_DIRECT) by two readers, each with a read in flight: a frame, or up to
 * 4 MiB of small ones (extract_read.c).
 * A hasher feeds the pack's SHA-256 (when every frame is read) from the
 * same buffers, in frame order, and workers decode and apply frames; a
 * buffer goes back to the readers once both are done with it.  A frame of
 * raw blocks (incompressible data) is not decoded: its blocks are written
 * from where they were read.  A file inside one frame is created, written,
 * hashed and closed by that frame's worker.  A file spanning frames is
 * created beforehand; each worker writes its piece with pwritev, and the
 * pieces are hashed in frame order (a worker waits for the previous
 * piece).  Frames are handed out in order, so such a wait always ends.
 *
 * Safety: before anything is written the tree is checked and planned
 * (extract_tree.c, which also makes the directories and links around the
 * files); a file is created here only with O_EXCL|O_NOFOLLOW, inside
 * directories made before and never through a symlink.
 */
#include "extract.h"
#include "extract_read.h"
#include "ctx.h"
#include "trailer.h"
#include "fsutil.h"

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_forceIgnoreChecksum */
#include <zstd.h>

/* Compare a finished hash with the manifest's; fail naming the file and
 * the frames that hold it (first..last), where the damage is. */
static bool check_hash(ex_state *s, const stg_rec *r, XXH128_hash_t h, size_t first, size_t last)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	if (memcmp(c.digest, r->xxh3, 16) == 0)
		return true;
	char want[33], got[33], where[64];
	stg__hex(r->xxh3, 16, want);
	stg__hex(c.digest, 16, got);
	if (first == last)
		snprintf(where, sizeof where, "frame %zu", first);
	else
		snprintf(where, sizeof where, "in frames %zu-%zu", first, last);
	char pbuf[STG_PATH_MAX + 1];
	stg__ex_fail(s, STG_ECORRUPT, "'%s' is damaged (%s): expected xxh3 %s, found %s",
	             stg__rec_path(s->p, r, pbuf), where, want, got);
	return false;
}

static void io_fail(ex_state *s, const char *what, const char *path)
{
	int e = errno;
	stg__ex_fail(s, stg__err_from_errno(e, STG_EIO), "%s '%s': %s", what, path, strerror(e));
}

/* A frame's content as pieces in order: the buffer the decoder wrote (one
 * piece), or a raw frame's blocks where they lie in what was read. */
#define EX_SEGS_MAX 1024 /* IOV_MAX: a piece of a file is one pwritev */
typedef struct ex_content {
	struct iovec seg[EX_SEGS_MAX];
	uint64_t at[EX_SEGS_MAX]; /* where seg[i] starts in the frame's content */
	size_t n;
	struct iovec iov[EX_SEGS_MAX]; /* the part that one file takes */
	XXH3_state_t *xs;              /* for a file of several pieces */
} ex_content;

/* c->iov = the bytes [a, b) of the frame's content; their number. */
static int take(ex_content *c, uint64_t a, uint64_t b)
{
	size_t lo = 0, hi = c->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->at[mid] + c->seg[mid].iov_len <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	int n = 0;
	for (size_t i = lo; i < c->n && c->at[i] < b; i++) {
		uint64_t x = a > c->at[i] ? a : c->at[i];
		uint64_t y = b < c->at[i] + c->seg[i].iov_len ? b : c->at[i] + c->seg[i].iov_len;
		c->iov[n].iov_base = (uint8_t *)c->seg[i].iov_base + (x - c->at[i]);
		c->iov[n++].iov_len = (size_t)(y - x);
	}
	return n;
}

/* At most this much in one write call: the page cache sizes a file's
 * folios by the write, and on this VM's ext4 and XFS large ones cost
 * several times more to fill (dd of 1 GiB into ext4: 0.23-0.29 s of system
 * time in 128 KiB writes, 0.6-1.8 s in 1 or 4 MiB ones). */
#define EX_WRITE_MAX ((size_t)128 << 10)

/* All of iov[0..n) written at off. */
static int pwritev_full(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		int k = 0;
		size_t sum = 0, cut = 0;
		while (k < n && sum < EX_WRITE_MAX)
			sum += iov[k++].iov_len;
		if (sum > EX_WRITE_MAX) {
			cut = sum - EX_WRITE_MAX;
			iov[k - 1].iov_len -= cut;
		}
		ssize_t w = pwritev(fd, iov, k, (off_t)off);
		iov[k - 1].iov_len += cut;
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!w)
				errno = EIO;
			return -1;
		}
		off += (uint64_t)w;
		for (size_t left = (size_t)w; left;) {
			size_t t = left < iov->iov_len ? left : iov->iov_len;
			iov->iov_base = (uint8_t *)iov->iov_base + t;
			iov->iov_len -= t;
			left -= t;
			if (!iov->iov_len) {
				iov++;
				n--;
			}
		}
		while (n > 0 && !iov->iov_len) {
			iov++;
			n--;
		}
	}
	return 0;
}

static void hash_iov(XXH3_state_t *xs, const struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++)
		XXH3_128bits_update(xs, iov[i].iov_base, iov[i].iov_len);
}

/* Apply a decoded frame: every selected file overlapping it. */
static void apply_frame(ex_state *s, size_t k, ex_content *c)
{
	const stg_trailer *t = s->t;
	const stg_frame *f = &t->frames[k];
	uint64_t fend = f->raw_off + f->raw_size;
	/* first entry whose content ends after the frame starts */
	size_t lo = 0, hi = t->n_entries;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const stg_rec *r = &t->recs[mid];
		if (r->data_off + r->size <= f->raw_off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		if (r->data_off >= fend)
			break;
		if (r->type != STG_FILE || r->size == 0 || !s->tr->sel[i])
			continue;
		if (stg__ex_failed(s))
			return;
		uint64_t a = r->data_off > f->raw_off ? r->data_off : f->raw_off;
		uint64_t b = r->data_off + r->size < fend ? r->data_off + r->size : fend;
		int niov = take(c, a - f->raw_off, b - f->raw_off);
		char pbuf[STG_PATH_MAX + 1];
		const char *path = stg__rec_path(s->p, r, pbuf);
		uint32_t si = s->tr->span_of[i];

		if (si == NONE) {
			/* the whole file is in this frame */
			XXH128_hash_t h;
			if (niov == 1) {
				h = XXH3_128bits(c->iov[0].iov_base, c->iov[0].iov_len);
			} else {
				XXH3_128bits_reset(c->xs);
				hash_iov(c->xs, c->iov, niov);
				h = XXH3_128bits_digest(c->xs);
			}
			if (!check_hash(s, r, h, k, k))
				return;
			if (s->tr->rootfd < 0)
				continue;
			int fd = openat(s->tr->rootfd, path,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			                stg__ex_create_mode(r, s->tr->read_only));
			if (fd < 0) {
				io_fail(s, "cannot create", path);
				return;
			}
			if (pwritev_full(fd, c->iov, niov, 0) ||
			    stg__ex_set_meta(s->tr, fd, r, false)) {
				io_fail(s, "cannot write", path);
				close(fd);
				return;
			}
			if (close(fd)) {
				io_fail(s, "cannot write", path);
				return;
			}
			continue;
		}

		/* a piece of a file that spans frames (hashed below, after the
		 * write: pwritev moved c->iov along, so take it again) */
		ex_span *sp = &s->spans[si];
		int fd = -1;
		if (s->tr->rootfd >= 0) {
			fd = openat(s->tr->rootfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 || pwritev_full(fd, c->iov, niov, a - r->data_off)) {
				io_fail(s, "cannot write", path);
				if (fd >= 0)
					close(fd);
				return;
			}
			niov = take(c, a - f->raw_off, b - f->raw_off);
		}
		pthread_mutex_lock(&s->mu);
		while (sp->next != k && !s->err)
			pthread_cond_wait(&s->cv_piece, &s->mu);
		bool stop = s->err != STG_OK;
		pthread_mutex_unlock(&s->mu);
		if (stop) {
			if (fd >= 0)
				close(fd);
			return;
		}
		hash_iov(sp->xs, c->iov, niov);
		bool ok = true;
		if (k == sp->last) {
			ok = check_hash(s, r, XXH3_128bits_digest(sp->xs), sp->first, k);
			if (ok && fd >= 0 && stg__ex_set_meta(s->tr, fd, r, true)) {
				io_fail(s, "cannot write", path);
				ok = false;
			}
		}
		if (fd >= 0 && close(fd) && ok) {
			io_fail(s, "cannot write", path);
			ok = false;
		}
		if (!ok)
			return;
		pthread_mutex_lock(&s->mu);
		sp->next = k + 1;
		pthread_cond_broadcast(&s->cv_piece);
		pthread_mutex_unlock(&s->mu);
	}
}

/* A format-3 frame made only of raw blocks (what zstd writes for data it
 * cannot compress) is its content already, in pieces between the block
 * headers: c gets them, and nothing is copied.  false for any other
 * frame, and for anything the decoder would judge (a block over 128 KiB or
 * the window, a window over 2^27, sizes that do not add up): the decoder
 * then decides. */
static bool raw_blocks(const ex_state *s, const uint8_t *src, const stg_frame *f, ex_content *c)
{
	ZSTD_frameHeader h;
	if (s->t->version < 3 || ZSTD_getFrameHeader(&h, src, f->comp_size) != 0 ||
	    h.frameType != ZSTD_frame || h.dictID || h.windowSize > (1ull << 27))
		return false;
	size_t pos = h.headerSize, len = f->comp_size;
	uint64_t out = 0,
	         bmax = h.windowSize < ZSTD_BLOCKSIZE_MAX ? h.windowSize : ZSTD_BLOCKSIZE_MAX;
	c->n = 0;
	for (bool last = false; !last;) {
		if (len - pos < 3)
			return false;
		uint32_t bh = src[pos] | (uint32_t)src[pos + 1] << 8 | (uint32_t)src[pos + 2] << 16;
		size_t bsize = bh >> 3;
		last = bh & 1;
		pos += 3;
		if ((bh >> 1 & 3) != 0 || bsize > bmax || bsize > len - pos || c->n == EX_SEGS_MAX)
			return false;
		if (bsize) {
			c->seg[c->n].iov_base = (void *)(src + pos);
			c->seg[c->n].iov_len = bsize;
			c->at[c->n++] = out;
		}
		pos += bsize;
		out += bsize;
	}
	return len - pos == (h.checksumFlag ? 4u : 0u) && out == f->raw_size;
}

/* One of a buffer's users is done with it; the last gives it back, and
 * lets the kernel drop the pack's pages it held (a pack is read once: its
 * pages would only push the job's own out), here rather than all at the
 * end, where the reader would wait for it. */
static void buf_done(ex_state *s, ex_buf *b)
{
	pthread_mutex_lock(&s->mu);
	bool last = --b->refs == 0;
	if (last) {
		b->next = s->free_list;
		s->free_list = b;
		bool wake = ++s->n_free >= stg__ex_want(s); /* a chunk's worth */
		if (b->chunk && !--b->chunk->refs) {
			b->chunk->next = s->chunk_free;
			s->chunk_free = b->chunk;
		} else if (b->chunk) {
			wake = false;
		}
		if (wake)
			pthread_cond_broadcast(&s->cv_read);
	}
	uint64_t from = 0, len = last ? stg__ex_drop_range(s, b->frame, &from) : 0;
	pthread_mutex_unlock(&s->mu);
	if (len && s->p->fd >= 0)
		posix_fadvise(s->p->fd, (off_t)from, (off_t)len, POSIX_FADV_DONTNEED);
}

/* The pack's SHA-256, over the frames in order as the reader reads them,
 * on a thread of its own: the costliest thing per byte of a stage. */
static void *ex_hasher(void *arg)
{
	ex_state *s = arg;
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL))
		stg__ex_fail(s, STG_ENOMEM, "out of memory");
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->sha_head && s->readers && !s->err)
			pthread_cond_wait(&s->cv_work, &s->mu);
		ex_buf *b = s->sha_head;
		if (b) {
			s->sha_head = b->sha_next;
			if (!s->sha_head)
				s->sha_tail = NULL;
		}
		bool stop = !b || s->err;
		pthread_mutex_unlock(&s->mu);
		if (b && !stop && sha)
			EVP_DigestUpdate(sha, b->data, s->t->frames[b->frame].comp_size);
		if (b)
			buf_done(s, b);
		if (stop && !b)
			break;
	}
	if (sha) {
		unsigned int len = 0;
		EVP_DigestFinal_ex(sha, s->sha, &len);
		EVP_MD_CTX_free(sha);
	}
	return NULL;
}

static void *ex_worker(void *arg)
{
	ex_state *s = arg;
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	ex_content *c = malloc(sizeof *c);
	XXH3_state_t *xs = XXH3_createState();
	uint8_t *raw = NULL;
	if (!dc || !c || !xs) {
		stg__ex_fail(s, STG_ENOMEM, "out of memory");
		goto out;
	}
	c->xs = xs;
	ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
	/* format 3: each frame is checked against its XXH3-128 before it is
	 * decoded, or the whole pack against its SHA-256, so the frame's own
	 * checksum (XXH64 of what it decodes to, a second pass over every
	 * byte) adds nothing */
	if (s->t->version >= 3)
		ZSTD_DCtx_setParameter(dc, ZSTD_d_forceIgnoreChecksum, ZSTD_d_ignoreChecksum);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->qhead && s->readers && !s->err)
			pthread_cond_wait(&s->cv_work, &s->mu);
		if (s->err || !s->qhead) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ex_buf *b = s->qhead;
		s->qhead = b->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_mutex_unlock(&s->mu);

		const size_t k = b->frame; /* b is reused once it is back on the free list */
		const stg_frame *f = &s->t->frames[k];
		bool ok = true;
		if (s->t->version >= 3 && !s->hash_pack) {
			/* format 3: the frame is the one its table names, before it is
			 * decoded.  Not when the whole pack is read: the SHA-256 says
			 * so too (at the end, before anything is kept), each file's
			 * XXH3-128 is checked as it is written, and zstd decodes
			 * hostile input safely into a buffer of the size the table
			 * gives; a second pass over every byte bought only an earlier
			 * error */
			XXH128_canonical_t h;
			XXH128_canonicalFromHash(&h, XXH3_128bits(b->data, f->comp_size));
			if (memcmp(h.digest, f->xxh3, 16)) {
				stg__ex_fail(s, STG_ECORRUPT,
				             "damaged pack: frame %zu (bytes %llu-%llu) does not "
				             "match its XXH3-128",
				             k, (unsigned long long)f->comp_off,
				             (unsigned long long)(f->comp_off + f->comp_size));
				ok = false;
			}
		}
		/* exactly one frame, of exactly the size the table says */
		size_t fsz = ok ? ZSTD_findFrameCompressedSize(b->data, f->comp_size) : 0;
		unsigned long long csz = ok ? ZSTD_getFrameContentSize(b->data, f->comp_size) : 0;
		bool in_place = false;
		if (ok && (ZSTD_isError(fsz) || fsz != f->comp_size || csz != f->raw_size)) {
			stg__ex_fail(s, STG_ECORRUPT,
			             "damaged pack: frame %zu (bytes %llu-%llu) does not decode", k,
			             (unsigned long long)f->comp_off,
			             (unsigned long long)(f->comp_off + f->comp_size));
			ok = false;
		} else if (ok && !(in_place = raw_blocks(s, b->data, f, c))) {
			if (!raw && !(raw = stg__io_alloc(s->raw_max))) {
				stg__ex_fail(s, STG_ENOMEM, "out of memory");
				ok = false;
			}
			size_t n = ok ? ZSTD_decompressDCtx(dc, raw, f->raw_size, b->data,
			                                    f->comp_size)
			              : 0;
			if (ok && (ZSTD_isError(n) || n != f->raw_size)) {
				stg__ex_fail(s, STG_ECORRUPT,
				             "damaged pack: frame %zu (bytes %llu-%llu) does not "
				             "decode%s%s",
				             k, (unsigned long long)f->comp_off,
				             (unsigned long long)(f->comp_off + f->comp_size),
				             ZSTD_isError(n) ? ": " : "",
				             ZSTD_isError(n) ? ZSTD_getErrorName(n) : "");
				ok = false;
			}
			c->seg[0].iov_base = raw;
			c->seg[0].iov_len = f->raw_size;
			c->at[0] = 0;
			c->n = 1;
		}
		/* the compressed buffer is free again (once hashed too); a raw
		 * frame's content is in it until it is applied */
		if (!in_place)
			buf_done(s, b);
		if (ok)
			apply_frame(s, k, c);
		if (in_place)
			buf_done(s, b);
		if (!ok)
			break;
	}
out:
	free(raw);
	free(c);
	XXH3_freeState(xs);
	ZSTD_freeDCtx(dc);
	return NULL;
}

/* ---- running ------------------------------------------------------------ */

/* Extract (rootfd >= 0) or verify (rootfd < 0) the selected part of a pack. */
static stg_err run_extract(stg_ctx *ctx, stg_pack *p, int rootfd, const stg_unpack_opts *opts,
                           stg_unpack_stats *stats, bool any_link, const char *room_for)
{
	ex_plan pl = {0};
	stg_err err = stg__ex_plan(ctx, p, opts, &pl, any_link);
	if (!err && room_for) /* room first: nothing is written unless it fits */
		err = stg__ex_room(ctx, p, pl.sel, rootfd, room_for);
	if (err) {
		stg__ex_plan_free(&pl);
		return err;
	}
	ex_tree tr = {ctx, p, rootfd, stg__ex_umask(), opts && opts->read_only, pl.sel, pl.span_of};
	ex_state s = {0};
	s.ctx = ctx;
	s.p = p;
	s.t = &p->t;
	s.tr = &tr;
	s.spans = pl.spans;
	s.frames = pl.frames;
	s.n_frames = pl.n_frames;
	for (size_t i = 0; i < pl.n_frames; i++) {
		const stg_frame *f = &p->t.frames[pl.frames[i]];
		s.comp_max = f->comp_size > s.comp_max ? f->comp_size : s.comp_max;
		s.raw_max = f->raw_size > s.raw_max ? f->raw_size : s.raw_max;
	}
	s.hash_pack = pl.n_frames == p->t.n_frames;
	pthread_mutex_init(&s.mu, NULL);
	pthread_mutex_init(&s.progress_mu, NULL);
	pthread_cond_init(&s.cv_read, NULL);
	pthread_cond_init(&s.cv_work, NULL);
	pthread_cond_init(&s.cv_piece, NULL);

	for (size_t i = 0; i < pl.n_frames; i++)
		s.total += p->t.frames[pl.frames[i]].comp_size;

	int nthreads = stg__threads(ctx);
	int fd_flags = stg__ex_direct_begin(&s);
	pthread_t *tids = calloc((size_t)nthreads + 3, sizeof *tids);
	int started = 0;
	if (!tids || !stg__ex_bufs_make(&s, nthreads)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if ((err = stg__ex_prepare(&tr)))
		goto out;
	if (!s.direct && p->fd >= 0)
		posix_fadvise(p->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	s.readers = stg__ex_readers(&s);
	for (int i = 0, n = s.readers; i < n; i++) {
		if (pthread_create(&tids[started], NULL, stg__ex_reader, &s)) {
			pthread_mutex_lock(&s.mu);
			s.readers -= n - i; /* the ones never started */
			pthread_mutex_unlock(&s.mu);
			if (!i) {
				err = stg__fail(ctx, STG_ENOMEM, "cannot start threads");
				goto out;
			}
			break;
		}
		started++;
	}
	if (s.hash_pack) {
		if (pthread_create(&tids[started], NULL, ex_hasher, &s)) {
			stg__ex_fail(&s, STG_ENOMEM, "cannot start threads");
			goto out;
		}
		started++;
	}
	for (int i = 0; i < nthreads; i++, started++) {
		if (pthread_create(&tids[started], NULL, ex_worker, &s)) {
			stg__ex_fail(&s, STG_ENOMEM, "cannot start threads");
			break;
		}
	}
out:
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (fd_flags >= 0)
		fcntl(p->fd, F_SETFL, fd_flags);
	if (s.direct_refused)
		stg__log(ctx, STG_LOG_DEBUG,
		         "the filesystem refused a direct read (EINVAL): the rest of the pack was "
		         "read through the page cache");
	if (!err && s.err) {
		err = s.err;
		stg__fail(ctx, err, "%s", s.errmsg);
	}
	if (!err && stg__cancelled(ctx))
		err = stg__fail(ctx, STG_EINTR, "interrupted");
	if (!err && s.hash_pack && memcmp(s.sha, p->t.digest, STG_DIGEST_LEN)) {
		char want[STG_DIGEST_HEXLEN + 1], got[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(p->t.digest, want);
		stg_digest_hex(s.sha, got);
		err = stg__fail(ctx, STG_ECORRUPT,
		                "damaged pack: SHA-256 mismatch: expected %s, found %s", want, got);
	}
	if (!err && rootfd >= 0)
		err = stg__ex_finish(&tr);
	if (!err && stats) {
		memset(stats, 0, sizeof *stats);
		for (size_t i = 0; i < p->t.n_entries; i++) {
			const stg_rec *r = &p->t.recs[i];
			if (!pl.sel[i])
				continue;
			stats->files += r->type == STG_FILE || r->type == STG_HARDLINK;
			stats->dirs += r->type == STG_DIR;
			stats->symlinks += r->type == STG_SYMLINK;
			stats->bytes += r->size;
		}
		stats->frames_read = pl.n_frames;
		stats->frames_total = p->t.n_frames;
		for (size_t i = 0; i < pl.n_frames; i++) {
			const stg_frame *f = &p->t.frames[pl.frames[i]];
			stats->pack_bytes_read += stg__pack_unread(p, f->comp_off, f->comp_size);
		}
	}
	stg__ex_bufs_free(&s);
	free(tids);
	pthread_mutex_destroy(&s.mu);
	pthread_mutex_destroy(&s.progress_mu);
	pthread_cond_destroy(&s.cv_read);
	pthread_cond_destroy(&s.cv_work);
	pthread_cond_destroy(&s.cv_piece);
	stg__ex_plan_free(&pl);
	return err;
}

stg_err stg_verify(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, false, NULL);
}

stg_err stg__verify_content(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, true, NULL);
}

void stg_unpack_opts_init(stg_unpack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->replace_empty = 1;
}

stg_err stg__extract_at(stg_ctx *ctx, stg_pack *pack, int rootfd, const stg_unpack_opts *opts,
                        stg_unpack_stats *stats, bool any_link)
{
	return run_extract(ctx, pack, rootfd, opts, stats, any_link, NULL);
}

stg_err stg_unpack(stg_ctx *ctx, stg_pack *pack, const char *dir, const stg_unpack_opts *opts,
                   stg_unpack_stats *stats)
{
	stg_unpack_opts def;
	if (!opts) {
		stg_unpack_opts_init(&def);
		opts = &def;
	}
	struct stat st;
	stg_err derr = stg__dest_ours(ctx, dir, false);
	if (derr)
		return derr;
	if (lstat(dir, &st) == 0) {
		bool empty = false;
		if (S_ISDIR(st.st_mode) && opts->replace_empty) {
			/* rmdir-able means empty; recreate it below by rename */
			int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0) {
				empty = stg__dir_is_empty(fd);
				close(fd);
			}
		}
		if (!empty)
			return stg__fail(ctx, STG_EEXIST,
			                 "'%s' exists%s; unpack into a new directory", dir,
			                 S_ISDIR(st.st_mode) ? " and is not empty" : "");
	}
	char *tmp = stg__tmp_name(dir, "unpack");
	if (!tmp)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	int rootfd = -1;
	if (mkdir(tmp, 0700) && (errno != ENOENT || stg__mkdirs_parent(tmp) || mkdir(tmp, 0700))) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "cannot create a directory beside '%s'", dir);
		free(tmp);
		return err;
	}
	rootfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot open '%s'", tmp);
		goto out;
	}
	if ((err = run_extract(ctx, pack, rootfd, opts, stats, false, dir)))
		goto out;
	/* the packed directory's mode, as tar and rsync -a keep it (not its
	 * setuid and setgid bits); else what mkdir would have made */
	mode_t top = pack->t.root_mode & STG_ROOT_MODE_SET ? (mode_t)(pack->t.root_mode & 01777)
	                                                   : 0777 & ~stg__ex_umask();
	if (fchmod(rootfd, top)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot set the mode of '%s'", dir);
		goto out;
	}
	if (rename(tmp, dir)) {
		int e = errno;
		err = stg__fail_errno(ctx, e == ENOTEMPTY || e == EEXIST ? STG_EEXIST : STG_EIO, e,
		                      "cannot move the unpacked tree to '%s'", dir);
	}
out:
	if (rootfd >= 0)
		close(rootfd);
	if (err)
		stg__rmtree(tmp);
	free(tmp);
	return err;
}
