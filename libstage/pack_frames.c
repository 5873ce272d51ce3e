/*
 * pack_frames.c - the pack writer's frame pipeline: the tar stream, cut
 * into frames, compressed by worker threads and written in order.
 *
 *   1. the writer's thread appends tar bytes to the current frame buffer
 *      and hands it over (stg__framer_cut) once it holds target bytes;
 *   2. worker threads compress full frame buffers, each an independent
 *      zstd frame with its content size and checksum;
 *   3. the worker that finishes frame k waits until frames < k are
 *      written, then writes its frame, feeds it to the SHA-256 and records
 *      it in the frame table.
 * At most threads + 2 frame buffers exist, and a buffer of compressed
 * bytes a worker, so memory is bounded whatever the tree's size.  The
 * output depends on the tar bytes and the level only (not on the threads
 * or the timing), so a tree packs to the same bytes each time.
 */
#include "pack_frames.h"
#include "ctx.h"
#include "trailer.h"

#include <pthread.h>
#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

/* A frame buffer's first size past target: a frame is handed over once it
 * holds target bytes, so it passes target by a file's tar padding and one
 * header at most (the buffer grows if that is ever short). */
#define FRAME_SLACK ((1u << 20) + 64 * 1024)

typedef struct pk_job {
	struct pk_job *next;
	size_t idx;
	uint8_t *raw;
	size_t len, cap;
} pk_job;

struct stg_framer {
	stg_ctx *ctx;
	int fd;
	bool writeback; /* start each frame's writeback once written */
	int level;
	size_t target;
	pthread_mutex_t mu;
	/* each wait its own condition, so that an event wakes only who waits
	 * for it: on a loaded machine every needless wake-up is a thread that
	 * queues for a CPU and then for the mutex */
	pthread_cond_t work; /* workers: a frame queued, closing, an error */
	pthread_cond_t turn; /* workers: the frames before theirs written */
	pthread_cond_t room; /* the writer's thread: a free frame buffer */
	pk_job *jobs;        /* all of them, n_jobs */
	size_t n_jobs;
	pk_job *free_list, *qhead, *qtail;
	pk_job *cur; /* being filled by the writer (NULL: the pipeline stopped) */
	pthread_t *tids;
	int started;
	size_t next_write, submitted;
	bool closing;
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	EVP_MD_CTX *sha;
	stg_frame *frames;
	size_t n_frames, cap_frames;
	uint64_t comp_off, raw_off;
	uint64_t tar_pos;
};

static void set_err(stg_framer *s, stg_err err, const char *msg)
{
	/* called with s->mu held */
	if (!s->err) {
		s->err = err;
		snprintf(s->errmsg, sizeof s->errmsg, "%s", msg);
	}
	pthread_cond_broadcast(&s->work);
	pthread_cond_broadcast(&s->turn);
	pthread_cond_broadcast(&s->room);
}

/* Compress one frame.  The slow levels go in steps, so that a pack at
 * --level 19 answers SIGINT and SIGTERM within a second (a frame of a few
 * MiB takes seconds there, and a stop also skips the frames queued); the fast ones in one call,
 * which is what earlier versions wrote (streaming changes the bytes at some levels, and with them
 * the digest of the same tree). */
static size_t compress_frame(stg_ctx *ctx, ZSTD_CCtx *cc, int level, const pk_job *j, uint8_t *comp,
                             size_t bound, const char **zerr)
{
	/* the frames queued behind a stop are not compressed */
	if (stg__cancelled(ctx)) {
		*zerr = "interrupted";
		return 0;
	}
	if (level <= 9) {
		size_t n = ZSTD_compress2(cc, comp, bound, j->raw, j->len);
		if (ZSTD_isError(n))
			*zerr = ZSTD_getErrorName(n);
		return n;
	}
	ZSTD_CCtx_setPledgedSrcSize(cc, j->len);
	ZSTD_outBuffer out = {comp, bound, 0};
	const size_t step = 256 * 1024;
	for (size_t pos = 0; pos < j->len || !pos;) {
		if (pos && stg__cancelled(ctx)) {
			*zerr = "interrupted";
			ZSTD_CCtx_reset(cc, ZSTD_reset_session_only);
			return 0;
		}
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
	}
	return out.pos;
}

/*
 * The level a frame is compressed at.  Most of a training set is entropy
 * already (JPEG, PNG, compressed shards); what zstd finds in it is the tar
 * stream's own (headers, the zeros after each file: about 5% of a tree of
 * small files) or, in raw numbers (weights, audio), the skew of the bytes,
 * which the Huffman-coded literals take.  Neither needs the match finders
 * that make the higher levels slow: three 32 KiB samples at level 1 tell.
 *   - under 3% saved: zstd would store the frame nearly as is at any
 *     level; a negative level does it for a third of level 3's CPU;
 *   - under 10% saved, at the fast levels asked for (1-9): the samples at
 *     that negative level too.  It codes no literals: if it saves as much
 *     as level 1 (within 0.5% of the samples: the savings are headers and
 *     padding) it is used, else level 1 (the savings are literals: float
 *     weights compress to 92% at level 1 as at level 3, and not at all at
 *     the negative level).  bench/run.sh's images pack 0.1% larger than at
 *     level 3, in less than half the CPU;
 *   - else the level asked for.
 * The choice depends on the data only, so packs stay reproducible.
 */
#define PROBE_LEN  (32u << 10)
#define FAST_LEVEL (-1)

/* The three samples' compressed size at level, 0 on failure. */
static size_t probe_size(ZSTD_CCtx *probe, const uint8_t *raw, size_t len, int level,
                         uint8_t *scratch, size_t scratch_len)
{
	size_t out = 0;
	for (int i = 0; i < 3; i++) {
		size_t off = (len - PROBE_LEN) / 2 * (size_t)i;
		size_t n =
		        ZSTD_compressCCtx(probe, scratch, scratch_len, raw + off, PROBE_LEN, level);
		if (ZSTD_isError(n))
			return 0;
		out += n;
	}
	return out;
}

static int frame_level(ZSTD_CCtx *probe, const uint8_t *raw, size_t len, int level,
                       uint8_t *scratch, size_t scratch_len)
{
	if (!probe || !scratch || len < 8 * PROBE_LEN)
		return level;
	const size_t in = 3 * PROBE_LEN;
	size_t one = probe_size(probe, raw, len, 1, scratch, scratch_len);
	if (!one)
		return level;
	if (one * 100 > in * 97)
		return FAST_LEVEL;
	if (level > 9 || one * 100 <= in * 90)
		return level;
	size_t fast = probe_size(probe, raw, len, FAST_LEVEL, scratch, scratch_len);
	if (fast && fast * 1000 <= one * 1000 + in * 5)
		return FAST_LEVEL;
	return 1;
}

static void *compress_worker(void *arg)
{
	stg_framer *s = arg;
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_CCtx *probe = ZSTD_createCCtx();
	size_t scratch_len = ZSTD_compressBound(PROBE_LEN);
	uint8_t *scratch = malloc(scratch_len);
	/* the frame compressed: the worker's own, as a frame stays with its
	 * worker until it is written (a buffer a worker, not a frame buffer) */
	uint8_t *comp = NULL;
	size_t comp_cap = 0;
	if (cc) {
		ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
		ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 1);
	}
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->qhead && !s->closing && !s->err)
			pthread_cond_wait(&s->work, &s->mu);
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
			if (comp_cap < bound) {
				free(comp);
				comp = malloc(bound);
				comp_cap = comp ? bound : 0;
			}
			if (!comp) {
				zerr = "out of memory";
			} else {
				int level = frame_level(probe, j->raw, j->len, s->level, scratch,
				                        scratch_len);
				ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
				clen = compress_frame(s->ctx, cc, level, j, comp, bound, &zerr);
			}
		}
		/* the frame table's check of this frame (format 3), made here,
		 * in parallel, from bytes still in cache */
		XXH128_canonical_t fh = {{0}};
		if (!zerr)
			XXH128_canonicalFromHash(&fh, XXH3_128bits(comp, clen));

		pthread_mutex_lock(&s->mu);
		if (zerr) {
			char msg[256];
			snprintf(msg, sizeof msg, "compressing frame %zu: %s", j->idx, zerr);
			set_err(s, stg__cancelled(s->ctx) ? STG_EINTR : STG_ENOMEM, msg);
			break;
		}
		while (s->next_write != j->idx && !s->err)
			pthread_cond_wait(&s->turn, &s->mu);
		if (s->err)
			break;
		/* our turn: frames before us are written, none after us can be
		 * written until we are done, so the mutex need not be held for
		 * the write itself */
		pthread_mutex_unlock(&s->mu);
		int werr = stg__write_full(s->fd, comp, clen) ? errno : 0;
		if (!werr) {
			EVP_DigestUpdate(s->sha, comp, clen);
			/* a pack that is to be fsync'ed: start writing the
			 * frame back now, so the final fsync has little left to
			 * do.  Not otherwise: the block layer's writeback
			 * throttle (wbt) then holds this thread, and with it the
			 * frames after it and the reader (perf sched, a pack of
			 * bench/run.sh's images: 0.29 s in wbt_wait of a 1.6 s
			 * run); tar leaves writeback to the kernel */
			if (s->writeback)
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
		stg_frame *fr = &s->frames[s->n_frames++];
		*fr = (stg_frame){s->comp_off, clen, s->raw_off, j->len, {0}};
		memcpy(fr->xxh3, fh.digest, 16);
		s->comp_off += clen;
		s->raw_off += j->len;
		s->next_write++;
		j->len = 0;
		j->next = s->free_list;
		s->free_list = j;
		pthread_cond_broadcast(&s->turn);
		pthread_cond_signal(&s->room);
	}
	pthread_mutex_unlock(&s->mu);
	ZSTD_freeCCtx(cc);
	ZSTD_freeCCtx(probe);
	free(scratch);
	free(comp);
	return NULL;
}

/* Hand the current frame to the workers and take a free buffer. */
static stg_err submit(stg_framer *s)
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
	pthread_cond_signal(&s->work);
	while (!s->free_list && !s->err)
		pthread_cond_wait(&s->room, &s->mu);
	stg_err err = s->err;
	if (!err) {
		s->cur = s->free_list;
		s->free_list = s->cur->next;
	} else {
		s->cur = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	/* the pipeline's own failure (a write, a full disk), said with its
	 * detail: the caller passes it on to stg__framer_finish */
	return err ? stg__fail(s->ctx, err, "%s", s->errmsg) : STG_OK;
}

stg_err stg__framer_cut(stg_framer *f)
{
	return stg__framer_cut_before(f, 0);
}

stg_err stg__framer_cut_before(stg_framer *f, uint64_t next)
{
	if (!f->cur) /* failed already */
		return stg__framer_err(f);
	bool full = f->cur->len >= f->target;
	/* an entry that fits in a frame but not in what is left of this one
	 * starts the next: it is then in one frame, read with one */
	bool early =
	        f->cur->len > 0 && next > 0 && next <= f->target && f->cur->len + next > f->target;
	return full || early ? submit(f) : STG_OK;
}

size_t stg__framer_room(const stg_framer *f)
{
	return f->cur ? f->target - f->cur->len : 0; /* 0: failed already */
}

uint64_t stg__framer_pos(const stg_framer *f)
{
	return f->tar_pos;
}

stg_err stg__framer_err(stg_framer *f)
{
	pthread_mutex_lock(&f->mu);
	stg_err err = f->err;
	pthread_mutex_unlock(&f->mu);
	return err;
}

int stg__framer_put(stg_framer *f, const void *p, size_t n)
{
	pk_job *j = f->cur;
	if (!j) {
		errno = EIO;
		return -1;
	}
	if (j->len + n > j->cap) {
		size_t ncap = j->cap * 2 > j->len + n ? j->cap * 2 : j->len + n;
		uint8_t *b = realloc(j->raw, ncap);
		if (!b) {
			errno = ENOMEM;
			return -1;
		}
		j->raw = b;
		j->cap = ncap;
	}
	memcpy(j->raw + j->len, p, n);
	j->len += n;
	f->tar_pos += n;
	return 0;
}

stg_err stg__framer_start(stg_ctx *ctx, int fd, int level, size_t target, bool writeback,
                          stg_framer **out)
{
	stg_framer *s = calloc(1, sizeof *s);
	if (!s)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	s->ctx = ctx;
	s->fd = fd;
	struct stat st;
	s->writeback = writeback && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	s->level = level;
	s->target = target;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->turn, NULL);
	pthread_cond_init(&s->room, NULL);
	int nthreads = stg__threads(ctx);
	s->n_jobs = (size_t)nthreads + 2;
	s->jobs = calloc(s->n_jobs, sizeof *s->jobs);
	s->tids = calloc((size_t)nthreads, sizeof *s->tids);
	s->sha = EVP_MD_CTX_new();
	stg_err err = STG_OK;
	if (!s->jobs || !s->tids || !s->sha)
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	else
		EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL);
	for (size_t i = 0; !err && i < s->n_jobs; i++) {
		s->jobs[i].cap = target + FRAME_SLACK;
		if (!(s->jobs[i].raw = malloc(s->jobs[i].cap)))
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		else if (i) {
			s->jobs[i].next = s->free_list;
			s->free_list = &s->jobs[i];
		}
	}
	if (!err)
		s->cur = &s->jobs[0];
	for (; !err && s->started < nthreads; s->started++)
		if (pthread_create(&s->tids[s->started], NULL, compress_worker, s))
			err = stg__fail(ctx, STG_ENOMEM, "cannot start threads");
	if (err) {
		stg__framer_finish(s, err, NULL);
		return err;
	}
	*out = s;
	return STG_OK;
}

stg_err stg__framer_finish(stg_framer *s, stg_err err, stg_framed *out)
{
	if (!err && !s->cur)
		err = stg__framer_err(s);
	else if (!err && s->cur->len)
		err = submit(s);
	pthread_mutex_lock(&s->mu);
	s->closing = true;
	if (err && !s->err)
		s->err = err; /* stop the workers without writing more */
	pthread_cond_broadcast(&s->work);
	pthread_cond_broadcast(&s->turn);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->started; i++)
		pthread_join(s->tids[i], NULL);
	if (!err && s->err) {
		err = s->err;
		stg__fail(s->ctx, err, "%s", s->errmsg);
	}
	if (!err && s->next_write != s->submitted)
		err = stg__fail(s->ctx, STG_EIO, "pack pipeline ended early");
	if (!err) {
		unsigned int dlen = 0;
		EVP_DigestFinal_ex(s->sha, out->digest, &dlen);
		out->frames = s->frames;
		out->n_frames = s->n_frames;
		out->data_size = s->comp_off;
		out->tar_size = s->raw_off;
		s->frames = NULL;
	}
	for (size_t i = 0; s->jobs && i < s->n_jobs; i++) {
		free(s->jobs[i].raw);
	}
	free(s->jobs);
	free(s->tids);
	free(s->frames);
	EVP_MD_CTX_free(s->sha);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->turn);
	pthread_cond_destroy(&s->room);
	free(s);
	return err;
}
