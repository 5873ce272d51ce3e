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
 * Threads: one reader reads the needed frames in order (one sequential
 * pass) into a bounded set of buffers and does nothing else, so that the
 * shared filesystem is read without a pause: the link is what a cold stage
 * waits on.  A hasher feeds the pack's SHA-256 (when every frame is read)
 * from the same buffers, in frame order, and workers decode and apply
 * frames; a buffer goes back to the reader once both are done with it.  A file inside one frame is
 * created, written, hashed and closed by that frame's worker.  A file spanning frames is created
 * beforehand; each worker writes its piece with pwrite, and the pieces are hashed in frame order (a
 * worker waits for the previous piece). Frames are handed out in order, so such a wait always ends.
 *
 * Safety: before anything is written the tree is checked and planned
 * (extract_tree.c, which also makes the directories and links around the
 * files); a file is created here only with O_EXCL|O_NOFOLLOW, inside
 * directories made before and never through a symlink.
 */
#include "extract.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_d_forceIgnoreChecksum */
#include <zstd.h>

typedef struct ex_buf {
	struct ex_buf *next;     /* in the free list or the workers' queue */
	struct ex_buf *sha_next; /* in the hasher's queue */
	size_t frame;
	uint8_t *data;
	size_t cap;
	unsigned refs; /* the worker, and the hasher when the pack is hashed */
} ex_buf;

typedef struct ex_state {
	stg_ctx *ctx;
	stg_pack *p;
	const stg_trailer *t;
	const ex_tree *tr; /* where the files go (rootfd -1: verify only) */
	ex_span *spans;
	const size_t *frames; /* needed frames, in order */
	size_t n_frames;
	/* the largest of those frames, compressed and not: each buffer is
	 * made once at that size (grown frame by frame, freed holes the next
	 * frame does not fit in crept the heap up by megabytes) */
	size_t comp_max, raw_max;
	bool hash_pack;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	ex_buf *free_list, *qhead, *qtail;
	ex_buf *sha_head, *sha_tail; /* read, not yet hashed (in frame order) */
	bool reader_done;
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	uint8_t sha[STG_DIGEST_LEN];
} ex_state;

static void ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
{
	pthread_mutex_lock(&s->mu);
	if (!s->err) {
		s->err = err;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Has the run failed or been cancelled?  A cancel becomes an error here, so
 * that every waiter (for a buffer, or a previous piece of a file) wakes. */
static bool ex_failed(ex_state *s)
{
	if (stg__cancelled(s->ctx))
		ex_fail(s, STG_EINTR, "interrupted");
	pthread_mutex_lock(&s->mu);
	bool f = s->err != STG_OK;
	pthread_mutex_unlock(&s->mu);
	return f;
}

static void hex16(const uint8_t *h, char *out)
{
	static const char x[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = x[h[i] >> 4];
		out[2 * i + 1] = x[h[i] & 15];
	}
	out[32] = '\0';
}

/* Compare a finished hash with the manifest's; fail naming the file. */
static bool check_hash(ex_state *s, const stg_rec *r, XXH128_hash_t h, size_t frame)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	if (memcmp(c.digest, r->xxh3, 16) == 0)
		return true;
	char want[33], got[33];
	hex16(r->xxh3, want);
	hex16(c.digest, got);
	ex_fail(s, STG_ECORRUPT, "'%s' is damaged (frame %zu): expected xxh3 %s, found %s",
	        stg__rec_path(s->p, r), frame, want, got);
	return false;
}

static void io_fail(ex_state *s, const char *what, const char *path)
{
	int e = errno;
	ex_fail(s, stg__err_from_errno(e, STG_EIO), "%s '%s': %s", what, path, strerror(e));
}

/* Apply a decoded frame: every selected file overlapping it. */
static void apply_frame(ex_state *s, size_t k, const uint8_t *raw)
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
		if (ex_failed(s))
			return;
		uint64_t a = r->data_off > f->raw_off ? r->data_off : f->raw_off;
		uint64_t b = r->data_off + r->size < fend ? r->data_off + r->size : fend;
		const uint8_t *piece = raw + (a - f->raw_off);
		size_t plen = (size_t)(b - a);
		const char *path = stg__rec_path(s->p, r);
		uint32_t si = s->tr->span_of[i];

		if (si == NONE) {
			/* the whole file is in this frame */
			XXH128_hash_t h = XXH3_128bits(piece, plen);
			if (!check_hash(s, r, h, k))
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
			if (stg__pwrite_full(fd, piece, plen, 0) ||
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

		/* a piece of a file that spans frames */
		ex_span *sp = &s->spans[si];
		int fd = -1;
		if (s->tr->rootfd >= 0) {
			fd = openat(s->tr->rootfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 || stg__pwrite_full(fd, piece, plen, a - r->data_off)) {
				io_fail(s, "cannot write", path);
				if (fd >= 0)
					close(fd);
				return;
			}
		}
		pthread_mutex_lock(&s->mu);
		while (sp->next != k && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		bool stop = s->err != STG_OK;
		pthread_mutex_unlock(&s->mu);
		if (stop) {
			if (fd >= 0)
				close(fd);
			return;
		}
		XXH3_128bits_update(sp->xs, piece, plen);
		bool ok = true;
		if (k == sp->last) {
			ok = check_hash(s, r, XXH3_128bits_digest(sp->xs), k);
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
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
}

/* One of a buffer's users is done with it; the last gives it back, and
 * lets the kernel drop the pack's pages it held (a pack is read once: its
 * pages would only push the job's own out), here rather than all at the
 * end, where the reader would wait for it. */
static void buf_done(ex_state *s, ex_buf *b)
{
	pthread_mutex_lock(&s->mu);
	bool last = --b->refs == 0;
	const stg_frame *f = &s->t->frames[b->frame];
	if (last) {
		b->next = s->free_list;
		s->free_list = b;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	if (last && s->p->fd >= 0)
		posix_fadvise(s->p->fd, (off_t)f->comp_off, (off_t)f->comp_size,
		              POSIX_FADV_DONTNEED);
}

/* The pack's SHA-256, over the frames in order as the reader reads them,
 * on a thread of its own: the costliest thing per byte of a stage. */
static void *ex_hasher(void *arg)
{
	ex_state *s = arg;
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	if (!sha || !EVP_DigestInit_ex(sha, EVP_sha256(), NULL))
		ex_fail(s, STG_ENOMEM, "out of memory");
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->sha_head && !s->reader_done && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
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
	uint8_t *raw = NULL;
	size_t raw_cap = 0;
	if (!dc) {
		ex_fail(s, STG_ENOMEM, "out of memory");
		return NULL;
	}
	ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
	/* format 3: each frame is checked against its XXH3-128 before it is
	 * decoded, so the frame's own checksum (XXH64 of what it decodes to,
	 * a second pass over every byte) adds nothing */
	if (s->t->version >= 3)
		ZSTD_DCtx_setParameter(dc, ZSTD_d_forceIgnoreChecksum, ZSTD_d_ignoreChecksum);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->qhead && !s->reader_done && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->err || !s->qhead) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ex_buf *b = s->qhead;
		s->qhead = b->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);

		const size_t k = b->frame; /* b is reused once it is back on the free list */
		const stg_frame *f = &s->t->frames[k];
		bool ok = true;
		if (raw_cap < f->raw_size) {
			free(raw);
			raw = malloc(s->raw_max);
			raw_cap = raw ? s->raw_max : 0;
			if (!raw) {
				ex_fail(s, STG_ENOMEM, "out of memory");
				ok = false;
			}
		}
		if (ok && s->t->version >= 3) {
			/* format 3: the frame is the one its table names, before it is
			 * decoded (the SHA-256 says so too, but only at the end) */
			XXH128_canonical_t h;
			XXH128_canonicalFromHash(&h, XXH3_128bits(b->data, f->comp_size));
			if (memcmp(h.digest, f->xxh3, 16)) {
				ex_fail(s, STG_ECORRUPT,
				        "damaged pack: frame %zu (bytes %llu-%llu) does not match "
				        "its "
				        "XXH3-128",
				        k, (unsigned long long)f->comp_off,
				        (unsigned long long)(f->comp_off + f->comp_size));
				ok = false;
			}
		}
		if (ok) {
			/* exactly one frame, of exactly the size the table says */
			size_t fsz = ZSTD_findFrameCompressedSize(b->data, f->comp_size);
			unsigned long long csz = ZSTD_getFrameContentSize(b->data, f->comp_size);
			size_t n = 0;
			if (ZSTD_isError(fsz) || fsz != f->comp_size || csz != f->raw_size) {
				ok = false;
			} else {
				n = ZSTD_decompressDCtx(dc, raw, f->raw_size, b->data,
				                        f->comp_size);
				ok = !ZSTD_isError(n) && n == f->raw_size;
			}
			if (!ok)
				ex_fail(s, STG_ECORRUPT,
				        "damaged pack: frame %zu (bytes %llu-%llu) does not "
				        "decode%s%s",
				        k, (unsigned long long)f->comp_off,
				        (unsigned long long)(f->comp_off + f->comp_size),
				        ZSTD_isError(n) ? ": " : "",
				        ZSTD_isError(n) ? ZSTD_getErrorName(n) : "");
		}
		/* the compressed buffer is free again (once hashed too) */
		buf_done(s, b);
		if (!ok)
			break;
		apply_frame(s, k, raw);
	}
	free(raw);
	ZSTD_freeDCtx(dc);
	return NULL;
}

static void *ex_reader(void *arg)
{
	ex_state *s = arg;
	stg_ctx *ctx = s->ctx;
	if (s->p->fd >= 0)
		posix_fadvise(s->p->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < s->n_frames; i++)
		total += s->t->frames[s->frames[i]].comp_size;
	for (size_t i = 0; i < s->n_frames && !ex_failed(s); i++) {
		size_t k = s->frames[i];
		const stg_frame *f = &s->t->frames[k];
		pthread_mutex_lock(&s->mu);
		while (!s->free_list && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		ex_buf *b = s->free_list;
		if (s->err || !b) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		s->free_list = b->next;
		pthread_mutex_unlock(&s->mu);

		if (b->cap < f->comp_size) {
			free(b->data);
			b->data = malloc(s->comp_max);
			b->cap = b->data ? s->comp_max : 0;
		}
		bool ok = b->data != NULL;
		if (!ok)
			ex_fail(s, STG_ENOMEM, "out of memory");
		else if (stg__pack_pread(s->p, b->data, f->comp_size, f->comp_off)) {
			int e = errno;
			if (e)
				ex_fail(s, STG_EIO, "reading frame %zu of the pack: %s", k,
				        strerror(e));
			else
				ex_fail(s, STG_ECORRUPT, "damaged pack: frame %zu is truncated", k);
			ok = false;
		}
		pthread_mutex_lock(&s->mu);
		if (!ok) {
			b->next = s->free_list;
			s->free_list = b;
			pthread_mutex_unlock(&s->mu);
			break;
		}
		b->frame = k;
		b->next = NULL;
		b->sha_next = NULL;
		b->refs = s->hash_pack ? 2 : 1;
		if (s->qtail)
			s->qtail->next = b;
		else
			s->qhead = b;
		s->qtail = b;
		if (s->hash_pack) {
			if (s->sha_tail)
				s->sha_tail->sha_next = b;
			else
				s->sha_head = b;
			s->sha_tail = b;
		}
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		/* the next frame comes in (kernel readahead) while this one is
		 * hashed: on a network filesystem reading and hashing overlap */
		if (s->p->fd >= 0 && i + 1 < s->n_frames) {
			const stg_frame *nf = &s->t->frames[s->frames[i + 1]];
			posix_fadvise(s->p->fd, (off_t)nf->comp_off, (off_t)nf->comp_size,
			              POSIX_FADV_WILLNEED);
		}
		done += f->comp_size;
		if (ctx->progress_fn)
			ctx->progress_fn(ctx->progress_arg, s->tr->rootfd < 0 ? "verify" : "unpack",
			                 done, total);
	}
	pthread_mutex_lock(&s->mu);
	s->reader_done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- running ------------------------------------------------------------ */

/* Extract (rootfd >= 0) or verify (rootfd < 0) the selected part of a pack. */
static stg_err run_extract(stg_ctx *ctx, stg_pack *p, int rootfd, const stg_unpack_opts *opts,
                           stg_unpack_stats *stats, bool any_link)
{
	ex_plan pl = {0};
	stg_err err = stg__ex_plan(ctx, p, opts, &pl, any_link);
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
	pthread_cond_init(&s.cv, NULL);

	int nthreads = stg__threads(ctx);
	/* enough buffers that the reader is never held up by a frame being
	 * decoded or hashed: read-ahead of a few frames */
	size_t nbufs = (size_t)nthreads + 6;
	ex_buf *bufs = calloc(nbufs, sizeof *bufs);
	pthread_t *tids = calloc((size_t)nthreads + 2, sizeof *tids);
	int started = 0;
	if (!bufs || !tids) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nbufs; i++) {
		bufs[i].next = s.free_list;
		s.free_list = &bufs[i];
	}
	if ((err = stg__ex_prepare(&tr)))
		goto out;
	if (pthread_create(&tids[started], NULL, ex_reader, &s)) {
		err = stg__fail(ctx, STG_ENOMEM, "cannot start threads");
		goto out;
	}
	started++;
	if (s.hash_pack) {
		if (pthread_create(&tids[started], NULL, ex_hasher, &s)) {
			ex_fail(&s, STG_ENOMEM, "cannot start threads");
			goto out;
		}
		started++;
	}
	for (int i = 0; i < nthreads; i++, started++) {
		if (pthread_create(&tids[started], NULL, ex_worker, &s)) {
			ex_fail(&s, STG_ENOMEM, "cannot start threads");
			break;
		}
	}
out:
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
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
		for (size_t i = 0; i < pl.n_frames; i++)
			stats->pack_bytes_read += p->t.frames[pl.frames[i]].comp_size;
	}
	for (size_t i = 0; bufs && i < nbufs; i++)
		free(bufs[i].data);
	free(bufs);
	free(tids);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
	stg__ex_plan_free(&pl);
	return err;
}

stg_err stg_verify(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, false);
}

stg_err stg__verify_content(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, true);
}

void stg_unpack_opts_init(stg_unpack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->replace_empty = 1;
}

stg_err stg__extract_at(stg_ctx *ctx, stg_pack *pack, int rootfd, const stg_unpack_opts *opts,
                        stg_unpack_stats *stats)
{
	return run_extract(ctx, pack, rootfd, opts, stats, false);
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
	if ((err = run_extract(ctx, pack, rootfd, opts, stats, false)))
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
