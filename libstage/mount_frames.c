/*
 * mount_frames.c - a pack's frames on demand, checked, in a bounded cache.
 *
 * A read of a mounted pack needs the decoded frames that hold its bytes.
 * Each frame is fetched (the caller's function: the shared filesystem
 * within its limits, or the node cache), checked, decoded and kept in a
 * cache of at most max_bytes decoded bytes, least recently used first out.
 * One fetch per frame at a time: a reader that wants a frame being fetched
 * waits for it.  A held frame (between get and put) is never evicted, so a
 * cache smaller than the frames in use grows past its bound rather than
 * failing a read.
 *
 * No byte is served unchecked.  A format 3 pack lists the XXH3-128 of each
 * frame's compressed bytes in its frame table: a fetched frame must match
 * it before it is decoded.  Older packs have no such hash; their frames
 * carry zstd's content checksum, which decoding checks (a frame without it
 * is refused), and each frame's XXH3-128 is recorded when it is first
 * fetched: a later fetch of it (after eviction) must give the same bytes.
 * (The mount also checks a file of such a pack whole against its manifest
 * hash before serving any of it: mount.c.)  A frame that fails its check
 * is damaged for good: every read that needs it fails with EIO, and the
 * caller is told once.  A frame that could not be read is tried again by
 * the next read.
 *
 * A frame is decoded only as far as a read needs (format 3, whose frames
 * are checked before decoding): zstd's buffer-less API decodes it a block
 * (at most 128 KiB) at a time straight into the frame's buffer, which is
 * its own window, and the next read that needs more goes on from there.
 * A cold 4 KiB read thus decodes half a frame on average, not all of it.
 * Older packs are decoded whole, as their check is zstd's checksum at the
 * frame's end.
 */
#define ZSTD_STATIC_LINKING_ONLY
#include "mount_frames.h"
#include "ctx.h"
#include "trailer.h"

#include <pthread.h>
#include <xxhash.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

enum { FB_LOADING, FB_READY };
#define POOL 4 /* spare buffers kept (and as many decoders) */

struct stg_fbuf {
	size_t k;
	int state;
	unsigned refs;
	uint8_t *data;
	size_t data_cap;       /* data's size (a reused buffer may be larger) */
	size_t len;            /* the frame's raw size */
	size_t have;           /* bytes of data decoded so far */
	bool decoding;         /* a reader is decoding more (without mu) */
	size_t charged;        /* what the cache counts for it (cost() when last asked) */
	uint8_t *comp;         /* until decoded whole: the checked compressed bytes */
	size_t comp_cap;       /* (comp's size), */
	size_t comp_pos;       /* how far they are decoded, */
	ZSTD_DCtx *dctx;       /* and the decoder's state */
	stg_fbuf *prev, *next; /* LRU list of unheld ready frames; head: newest */
};

struct stg_frames {
	const stg_trailer *t;
	stg_frames_opts o;
	pthread_mutex_t mu;
	pthread_cond_t cv, work;
	stg_fbuf **slot;     /* per frame: NULL, loading or ready */
	uint8_t *bad;        /* per frame: 1 damaged (for good) */
	uint8_t (*seen)[16]; /* older packs: each frame's hash when first fetched */
	uint8_t *seen_set;
	size_t bytes; /* decoded bytes cached */
	stg_fbuf *lru_head, *lru_tail;
	/* read-ahead: a ring of frame numbers */
	size_t *queue, q_head, q_len, q_cap;
	pthread_t *threads;
	unsigned n_threads;
	bool stop;
	uint64_t fetched, hits, fetched_bytes, decoded;
	/* buffers and decoders of frames that left, for the next ones: no
	 * malloc, no fresh pages to fault in, no heap left in pieces */
	struct {
		uint8_t *p;
		size_t cap;
	} spare[POOL];
	unsigned n_spare;
	ZSTD_DCtx *spare_dctx[POOL];
	unsigned n_spare_dctx;
};

static void lru_unlink(stg_frames *f, stg_fbuf *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else if (f->lru_head == b)
		f->lru_head = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else if (f->lru_tail == b)
		f->lru_tail = b->prev;
	b->prev = b->next = NULL;
}

static void lru_push(stg_frames *f, stg_fbuf *b)
{
	b->prev = NULL;
	b->next = f->lru_head;
	if (f->lru_head)
		f->lru_head->prev = b;
	f->lru_head = b;
	if (!f->lru_tail)
		f->lru_tail = b;
}

/* What a frame costs the cache: its bytes decoded so far, and its
 * compressed ones while they are kept.  (A frame that a file's last
 * bytes brought in early costs a block, not a frame, until its own turn.) */
static size_t cost(const stg_fbuf *b, const stg_frame *fr)
{
	return b->have + (b->comp ? (size_t)fr->comp_size : 0);
}

/* Charge b what it costs now (mu held). */
static void recharge(stg_frames *f, stg_fbuf *b)
{
	size_t c = cost(b, &f->t->frames[b->k]);
	f->bytes = f->bytes - b->charged + c;
	b->charged = c;
}

/* A buffer of at least need bytes: a spare one (the smallest that fits),
 * else a new one; its size in *cap.  mu held. */
static uint8_t *buf_take(stg_frames *f, size_t need, size_t *cap)
{
	unsigned best = POOL;
	for (unsigned i = 0; i < f->n_spare; i++)
		if (f->spare[i].cap >= need &&
		    (best == POOL || f->spare[i].cap < f->spare[best].cap))
			best = i;
	if (best == POOL) {
		*cap = need;
		return stg__io_alloc(need ? need : 1);
	}
	uint8_t *p = f->spare[best].p;
	*cap = f->spare[best].cap;
	f->spare[best] = f->spare[--f->n_spare];
	return p;
}

/* Keep a buffer for later, or free it (mu held). */
static void buf_give(stg_frames *f, uint8_t *p, size_t cap)
{
	if (!p)
		return;
	if (f->n_spare < POOL) {
		f->spare[f->n_spare].p = p;
		f->spare[f->n_spare++].cap = cap;
	} else {
		free(p);
	}
}

static void dctx_give(stg_frames *f, ZSTD_DCtx *d)
{
	if (d && f->n_spare_dctx < POOL)
		f->spare_dctx[f->n_spare_dctx++] = d;
	else
		ZSTD_freeDCtx(d);
}

/* b's compressed bytes and decoder, no longer needed (mu held). */
static void drop_comp(stg_frames *f, stg_fbuf *b)
{
	buf_give(f, b->comp, b->comp_cap);
	b->comp = NULL;
	dctx_give(f, b->dctx);
	b->dctx = NULL;
}

static void fbuf_free(stg_frames *f, stg_fbuf *b)
{
	if (!b)
		return;
	drop_comp(f, b);
	buf_give(f, b->data, b->data_cap);
	free(b);
}

/* Drop unheld frames, oldest first, until the cache fits (mu held). */
static void shrink(stg_frames *f, size_t room)
{
	while (f->lru_tail && f->bytes + room > f->o.max_bytes) {
		stg_fbuf *b = f->lru_tail;
		lru_unlink(f, b);
		f->slot[b->k] = NULL;
		f->bytes -= b->charged;
		fbuf_free(f, b);
	}
}

/* Decode b on from *have bytes until at least need are there (or the
 * frame ends); without mu, b->decoding set: only this thread touches the
 * decoder and the bytes past b->have, and *have is published under mu by
 * the caller (readers read only below b->have).  0, or EIO with why. */
static int decode_to(const stg_frame *fr, stg_fbuf *b, size_t *have, size_t need, const char **why)
{
	while (*have < need) {
		size_t next = ZSTD_nextSrcSizeToDecompress(b->dctx);
		if (next == 0)
			break;
		if (next > fr->comp_size - b->comp_pos) {
			*why = "its zstd frame is cut short";
			return EIO;
		}
		size_t n = ZSTD_decompressContinue(b->dctx, b->data + *have, b->len - *have,
		                                   b->comp + b->comp_pos, next);
		if (ZSTD_isError(n)) {
			*why = ZSTD_getErrorName(n);
			return EIO;
		}
		b->comp_pos += next;
		*have += n;
	}
	if (*have < b->len && ZSTD_nextSrcSizeToDecompress(b->dctx) == 0) {
		*why = "it decodes to the wrong size";
		return EIO;
	}
	if (*have == b->len &&
	    (ZSTD_nextSrcSizeToDecompress(b->dctx) != 0 || b->comp_pos != fr->comp_size)) {
		/* the frame's end (and any checksum) must follow its last byte */
		const char *w = NULL;
		while (!w && ZSTD_nextSrcSizeToDecompress(b->dctx) != 0) {
			size_t next = ZSTD_nextSrcSizeToDecompress(b->dctx);
			size_t n;
			if (next > fr->comp_size - b->comp_pos)
				w = "its zstd frame is cut short";
			else if (ZSTD_isError(n = ZSTD_decompressContinue(b->dctx, b->data + *have,
			                                                  0, b->comp + b->comp_pos,
			                                                  next)))
				w = ZSTD_getErrorName(n);
			else if (n)
				w = "it decodes to the wrong size";
			else
				b->comp_pos += next;
		}
		if (!w && b->comp_pos != fr->comp_size)
			w = "it has bytes after its zstd frame";
		if (w) {
			*why = w;
			return EIO;
		}
	}
	return 0;
}

/* Fetch and check frame k into b (without mu): its compressed bytes and a
 * decoder, ready for decode_to (older formats: decoded whole, as their
 * check is zstd's checksum).  0 or an errno value, and why for a damaged
 * frame. */
static int load(stg_frames *f, size_t k, stg_fbuf *b, const char **why)
{
	const stg_frame *fr = &f->t->frames[k];
	b->len = (size_t)fr->raw_size;
	pthread_mutex_lock(&f->mu);
	uint8_t *comp = b->comp = buf_take(f, fr->comp_size, &b->comp_cap);
	b->data = buf_take(f, b->len, &b->data_cap);
	if (f->n_spare_dctx && f->t->version >= 3)
		b->dctx = f->spare_dctx[--f->n_spare_dctx];
	pthread_mutex_unlock(&f->mu);
	int rc = 0;
	*why = NULL;
	if (!comp || !b->data) {
		rc = ENOMEM;
		goto out;
	}
	rc = f->o.fetch(f->o.fetch_arg, k, comp, fr->comp_size);
	if (rc == EBADMSG) {
		*why = "its bytes do not match the frame table's XXH3-128";
		rc = EIO;
	}
	if (rc)
		goto out;
	XXH128_canonical_t h;
	if (f->t->version >= 3) {
		/* hashed once: by the fetch, or here */
		if (!f->o.fetch_checks) {
			XXH128_canonicalFromHash(&h, XXH3_128bits(comp, fr->comp_size));
			if (memcmp(h.digest, fr->xxh3, 16)) {
				*why = "its bytes do not match the frame table's XXH3-128";
				rc = EIO;
				goto out;
			}
		}
		if ((!b->dctx && !(b->dctx = ZSTD_createDCtx())) ||
		    ZSTD_isError(ZSTD_decompressBegin(b->dctx)))
			rc = ENOMEM;
		return rc; /* (on failure the caller frees b with what it holds) */
	}
	XXH128_canonicalFromHash(&h, XXH3_128bits(comp, fr->comp_size));
	ZSTD_frameHeader zh;
	if (ZSTD_getFrameHeader(&zh, comp, fr->comp_size) != 0 || !zh.checksumFlag) {
		*why = "it has no zstd content checksum";
		rc = EIO;
		goto out;
	}
	pthread_mutex_lock(&f->mu);
	bool same = !f->seen_set[k] || memcmp(f->seen[k], h.digest, 16) == 0;
	pthread_mutex_unlock(&f->mu);
	if (!same) {
		*why = "it changed since it was first read";
		rc = EIO;
		goto out;
	}
	size_t n = ZSTD_decompress(b->data, b->len, comp, fr->comp_size);
	if (ZSTD_isError(n) || n != b->len) {
		*why = ZSTD_isError(n) ? ZSTD_getErrorName(n) : "it decodes to the wrong size";
		rc = EIO;
		goto out;
	}
	b->have = b->len;
	pthread_mutex_lock(&f->mu);
	if (!f->seen_set[k]) {
		memcpy(f->seen[k], h.digest, 16);
		f->seen_set[k] = 1;
	}
	drop_comp(f, b); /* decoded whole */
	pthread_mutex_unlock(&f->mu);
out:
	return rc;
}

/* A frame found damaged: for good (mu held); its holders keep their
 * bytes. */
static void mark_bad(stg_frames *f, stg_fbuf *b)
{
	f->bad[b->k] = 1;
	if (f->slot[b->k] == b && b->state == FB_READY && b->refs == 0) {
		lru_unlink(f, b);
		f->slot[b->k] = NULL;
		f->bytes -= b->charged;
		fbuf_free(f, b);
	}
}

static void tell_bad(stg_frames *f, size_t k, int rc, const char *why)
{
	if (why && f->o.bad)
		f->o.bad(f->o.bad_arg, k, why);
	else if (f->o.bad && rc != ENOMEM)
		f->o.bad(f->o.bad_arg, k, strerror(rc));
}

/* b held and ready: decoded on to need (mu held on entry and exit).  0 or
 * an errno value. */
static int decode_more(stg_frames *f, stg_fbuf *b, size_t need)
{
	const stg_frame *fr = &f->t->frames[b->k];
	while (b->have < need) {
		if (f->bad[b->k])
			return EIO;
		if (b->decoding) {
			pthread_cond_wait(&f->cv, &f->mu);
			continue;
		}
		b->decoding = true;
		size_t have = b->have;
		pthread_mutex_unlock(&f->mu);
		const char *why = NULL;
		int rc = decode_to(fr, b, &have, need, &why);
		pthread_mutex_lock(&f->mu);
		b->decoding = false;
		f->decoded += have - b->have;
		b->have = have;
		if (!rc && b->have == b->len && b->comp)
			drop_comp(f, b); /* whole: the compressed bytes and the decoder go */
		recharge(f, b);
		shrink(f, 0);
		pthread_cond_broadcast(&f->cv);
		if (rc) {
			f->bad[b->k] = 1;
			pthread_mutex_unlock(&f->mu);
			tell_bad(f, b->k, rc, why);
			pthread_mutex_lock(&f->mu);
			return rc;
		}
	}
	return 0;
}

int stg__frames_get(stg_frames *f, size_t k, size_t need, const uint8_t **data, stg_fbuf **held)
{
	if (k >= f->t->n_frames)
		return EIO;
	size_t len = (size_t)f->t->frames[k].raw_size;
	/* what is left past need is within the frame's last block (its tar
	 * padding, say): decoded too, so that the frame is whole and its
	 * compressed bytes go */
	if (need == 0 || need > len || len - need < ZSTD_BLOCKSIZE_MAX)
		need = len;
	pthread_mutex_lock(&f->mu);
	stg_fbuf *b;
	for (;;) {
		if (f->bad[k]) {
			pthread_mutex_unlock(&f->mu);
			return EIO;
		}
		b = f->slot[k];
		if (!b)
			break;
		if (b->state == FB_READY) {
			if (b->refs++ == 0)
				lru_unlink(f, b);
			f->hits++;
			goto ready;
		}
		pthread_cond_wait(&f->cv, &f->mu);
	}
	if (!(b = calloc(1, sizeof *b))) {
		pthread_mutex_unlock(&f->mu);
		return ENOMEM;
	}
	b->k = k;
	b->state = FB_LOADING;
	b->refs = 1;
	f->slot[k] = b;
	pthread_mutex_unlock(&f->mu);

	const char *why;
	int rc = load(f, k, b, &why);

	pthread_mutex_lock(&f->mu);
	if (rc) {
		f->slot[k] = NULL;
		fbuf_free(f, b);
		if (why)
			f->bad[k] = 1;
		pthread_cond_broadcast(&f->cv);
		pthread_mutex_unlock(&f->mu);
		tell_bad(f, k, rc, why);
		return rc;
	}
	b->state = FB_READY;
	f->decoded += b->have;
	shrink(f, cost(b, &f->t->frames[k]));
	recharge(f, b);
	f->fetched++;
	f->fetched_bytes += f->t->frames[k].comp_size;
	pthread_cond_broadcast(&f->cv);
ready:
	rc = decode_more(f, b, need);
	if (rc) {
		if (--b->refs == 0) {
			lru_push(f, b);
			mark_bad(f, b);
		}
		pthread_mutex_unlock(&f->mu);
		return rc;
	}
	pthread_mutex_unlock(&f->mu);
	*data = b->data;
	*held = b;
	return 0;
}

void stg__frames_put(stg_frames *f, stg_fbuf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&f->mu);
	if (--b->refs == 0) {
		lru_push(f, b);
		if (f->bad[b->k])
			mark_bad(f, b);
		shrink(f, 0);
	}
	pthread_mutex_unlock(&f->mu);
}

static void *prefetcher(void *arg)
{
	stg_frames *f = arg;
	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->stop && !f->q_len)
			pthread_cond_wait(&f->work, &f->mu);
		if (f->stop)
			break;
		size_t k = f->queue[f->q_head];
		f->q_head = (f->q_head + 1) % f->q_cap;
		f->q_len--;
		if (f->slot[k] || f->bad[k])
			continue;
		pthread_mutex_unlock(&f->mu);
		const uint8_t *d;
		stg_fbuf *b;
		if (stg__frames_get(f, k, f->o.prefetch_fetch_only ? 1 : 0, &d, &b) == 0)
			stg__frames_put(f, b);
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

void stg__frames_prefetch(stg_frames *f, size_t k, size_t n)
{
	if (!f->n_threads)
		return;
	pthread_mutex_lock(&f->mu);
	for (size_t i = k; i < k + n && i < f->t->n_frames; i++) {
		if (f->slot[i] || f->bad[i] || f->q_len == f->q_cap)
			continue;
		bool queued = false;
		for (size_t j = 0; j < f->q_len && !queued; j++)
			queued = f->queue[(f->q_head + j) % f->q_cap] == i;
		if (queued)
			continue;
		f->queue[(f->q_head + f->q_len++) % f->q_cap] = i;
	}
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->mu);
}

uint64_t stg__frames_decoded(stg_frames *f)
{
	pthread_mutex_lock(&f->mu);
	uint64_t n = f->decoded;
	pthread_mutex_unlock(&f->mu);
	return n;
}

void stg__frames_counts(stg_frames *f, uint64_t *fetched, uint64_t *hits, uint64_t *bytes)
{
	pthread_mutex_lock(&f->mu);
	*fetched = f->fetched;
	*hits = f->hits;
	*bytes = f->fetched_bytes;
	pthread_mutex_unlock(&f->mu);
}

stg_err stg__frames_new(stg_ctx *ctx, const stg_trailer *t, const stg_frames_opts *o,
                        stg_frames **out)
{
	stg_frames *f = calloc(1, sizeof *f);
	*out = NULL;
	if (!f)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	f->t = t;
	f->o = *o;
	/* a read may hold two frames (one ending, one starting) per thread */
	uint64_t biggest = 0;
	for (size_t i = 0; i < t->n_frames; i++)
		if (t->frames[i].raw_size > biggest)
			biggest = t->frames[i].raw_size;
	if (f->o.max_bytes < 2 * biggest)
		f->o.max_bytes = (size_t)(2 * biggest);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	pthread_cond_init(&f->work, NULL);
	size_t n = t->n_frames ? t->n_frames : 1;
	f->slot = calloc(n, sizeof *f->slot);
	f->bad = calloc(n, 1);
	f->q_cap = 64;
	f->queue = calloc(f->q_cap, sizeof *f->queue);
	if (t->version < 3) {
		f->seen = calloc(n, sizeof *f->seen);
		f->seen_set = calloc(n, 1);
	}
	if (!f->slot || !f->bad || !f->queue || (t->version < 3 && (!f->seen || !f->seen_set))) {
		stg__frames_free(f);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	if (o->prefetchers && !(f->threads = calloc(o->prefetchers, sizeof *f->threads))) {
		stg__frames_free(f);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < o->prefetchers; i++) {
		if (pthread_create(&f->threads[i], NULL, prefetcher, f))
			break;
		f->n_threads++;
	}
	*out = f;
	return STG_OK;
}

void stg__frames_free(stg_frames *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_broadcast(&f->work);
	pthread_mutex_unlock(&f->mu);
	for (unsigned i = 0; i < f->n_threads; i++)
		pthread_join(f->threads[i], NULL);
	for (size_t k = 0; f->slot && k < f->t->n_frames; k++)
		fbuf_free(f, f->slot[k]);
	for (unsigned i = 0; i < f->n_spare; i++)
		free(f->spare[i].p);
	for (unsigned i = 0; i < f->n_spare_dctx; i++)
		ZSTD_freeDCtx(f->spare_dctx[i]);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	pthread_cond_destroy(&f->work);
	free(f->slot);
	free(f->bad);
	free(f->seen);
	free(f->seen_set);
	free(f->queue);
	free(f->threads);
	free(f);
}

int stg__frames_read(stg_frames *f, uint64_t off, size_t len, uint8_t *out)
{
	const stg_trailer *t = f->t;
	while (len) {
		size_t k = stg__frame_of(t, off);
		if (k >= t->n_frames)
			return EIO;
		const stg_frame *fr = &t->frames[k];
		size_t in = (size_t)(off - fr->raw_off);
		size_t n = (size_t)(fr->raw_size - in) < len ? (size_t)(fr->raw_size - in) : len;
		const uint8_t *data;
		stg_fbuf *held;
		int rc = stg__frames_get(f, k, in + n, &data, &held);
		if (rc)
			return rc;
		memcpy(out, data + in, n);
		stg__frames_put(f, held);
		out += n;
		off += n;
		len -= n;
	}
	return 0;
}

int stg__frames_check(stg_frames *f, uint64_t off, uint64_t size, const uint8_t want[16])
{
	XXH3_state_t *xs = XXH3_createState();
	uint8_t *buf = stg__io_alloc(1 << 20);
	int rc = xs && buf ? 0 : ENOMEM;
	if (!rc)
		XXH3_128bits_reset(xs);
	for (uint64_t done = 0; !rc && done < size;) {
		size_t n = size - done < (1 << 20) ? (size_t)(size - done) : (1 << 20);
		if (!(rc = stg__frames_read(f, off + done, n, buf)))
			XXH3_128bits_update(xs, buf, n);
		done += n;
	}
	if (!rc) {
		XXH128_canonical_t h;
		XXH128_canonicalFromHash(&h, XXH3_128bits_digest(xs));
		if (memcmp(h.digest, want, 16))
			rc = EIO;
	}
	XXH3_freeState(xs);
	free(buf);
	return rc;
}
