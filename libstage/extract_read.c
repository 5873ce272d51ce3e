/*
 * extract_read.c - the readers of a parallel extraction (extract.c): the
 * needed frames, in order, into a bounded set of buffers, queued for the
 * hasher and the workers.  They do nothing else, so that the shared
 * filesystem is read without a pause: the link is what a cold stage waits
 * on.  And how every thread of an extraction fails (stg__ex_fail).
 */
#include "extract_read.h"
#include "ctx.h"
#include "trailer.h"
#include "pack_read.h"
#include "fsutil.h"

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void stg__ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
{
	pthread_mutex_lock(&s->mu);
	if (!s->err) {
		s->err = err;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&s->cv_read);
	pthread_cond_broadcast(&s->cv_work);
	pthread_cond_broadcast(&s->cv_piece);
	pthread_mutex_unlock(&s->mu);
}

bool stg__ex_failed(ex_state *s)
{
	if (stg__cancelled(s->ctx))
		stg__ex_fail(s, STG_EINTR, "interrupted");
	pthread_mutex_lock(&s->mu);
	bool f = s->err != STG_OK;
	pthread_mutex_unlock(&s->mu);
	return f;
}

/* The pack ended inside or before frames k to last: the first frame it
 * cuts, whichever reader (of several, in any order) noticed first. */
static size_t first_cut(ex_state *s, size_t k, size_t last)
{
	struct stat st;
	if (fstat(s->p->fd, &st))
		return k;
	for (size_t j = 0; j <= last; j++)
		if (s->t->frames[j].comp_off + s->t->frames[j].comp_size > (uint64_t)st.st_size)
			return j;
	return k;
}

/* Read len bytes at off into dst: frames k to last of the pack (for the
 * message: the first that failed, or that the pack's end cuts).  A direct read the filesystem
 * refuses (EINVAL: it wants aligned direct I/O, or passes O_DIRECT on to a disk that does) turns
 * direct reads off for the rest of the pack and is read again. */
static bool read_range(ex_state *s, size_t k, size_t last, uint8_t *dst, uint64_t len, uint64_t off)
{
	int rc = stg__pack_pread(s->p, dst, (size_t)len, off);
	if (rc && errno == EINVAL && s->direct) {
		pthread_mutex_lock(&s->mu);
		if (!s->direct_refused) {
			s->direct_refused = true;
			int fl = fcntl(s->p->fd, F_GETFL);
			if (fl >= 0)
				fcntl(s->p->fd, F_SETFL, fl & ~O_DIRECT);
		}
		pthread_mutex_unlock(&s->mu);
		rc = stg__pack_pread(s->p, dst, (size_t)len, off);
	}
	if (rc) {
		int e = errno;
		if (e)
			stg__ex_fail(s, STG_EIO, "reading frame %zu of the pack: %s", k,
			             strerror(e));
		else
			stg__ex_fail(s, STG_ECORRUPT, "damaged pack: frame %zu is truncated",
			             first_cut(s, k, last));
		return false;
	}
	return true;
}

/* b can hold frame k: made once at the largest frame's size. */
static bool buf_fit(ex_state *s, size_t k, ex_buf *b)
{
	if (b->cap >= s->t->frames[k].comp_size)
		return true;
	free(b->data);
	b->data = stg__io_alloc(s->comp_max);
	b->cap = b->data ? s->comp_max : 0;
	if (!b->data)
		stg__ex_fail(s, STG_ENOMEM, "out of memory");
	return b->data != NULL;
}

/* Read the n frames from the i-th needed one into the buffers bs[]: one
 * read into each, or, with a chunk c, one read of them all (they follow
 * on in the pack) into c, which the buffers then point into. */
static bool read_frames(ex_state *s, size_t i, size_t n, ex_buf **bs, ex_chunk *c)
{
	const stg_frame *f = &s->t->frames[s->frames[i]];
	if (!c)
		return buf_fit(s, s->frames[i], bs[0]) &&
		       read_range(s, s->frames[i], s->frames[i], bs[0]->data, f->comp_size,
		                  f->comp_off);
	if (!c->data && !(c->data = stg__io_alloc(READ_CHUNK))) {
		stg__ex_fail(s, STG_ENOMEM, "out of memory");
		return false;
	}
	const stg_frame *l = &s->t->frames[s->frames[i + n - 1]];
	for (size_t j = 0; j < n; j++) {
		const stg_frame *g = &s->t->frames[s->frames[i + j]];
		bs[j]->data = c->data + (g->comp_off - f->comp_off);
		bs[j]->chunk = c;
	}
	c->refs = (unsigned)n;
	return read_range(s, s->frames[i], s->frames[i + n - 1], c->data,
	                  l->comp_off + l->comp_size - f->comp_off, f->comp_off);
}

size_t stg__ex_want(const ex_state *s)
{
	size_t left = s->n_frames - s->next_read;
	return left < s->chunk_frames ? left : s->chunk_frames;
}

/* Can a reader claim its next read (mu held)? */
static bool can_read(const ex_state *s)
{
	return s->n_free >= stg__ex_want(s) && (s->chunk_frames == 1 || s->chunk_free);
}

/* How many needed frames, from the next, one read takes (mu held): one,
 * or with a chunk those that follow on in the pack, fit in it together
 * and have a free buffer each. */
static size_t frames_to_read(const ex_state *s, bool chunk)
{
	size_t i = s->next_read, n = 1;
	const stg_frame *f = &s->t->frames[s->frames[i]];
	uint64_t end = f->comp_off + f->comp_size;
	while (chunk && i + n < s->n_frames && n < s->n_free && n < s->chunk_frames) {
		const stg_frame *g = &s->t->frames[s->frames[i + n]];
		if (g->comp_off != end || end + g->comp_size - f->comp_off > READ_CHUNK)
			break;
		end += g->comp_size;
		n++;
	}
	return n;
}

/* A reader: claims the next frame and a buffer, reads, and queues the
 * frame for the hasher and the workers in frame order, so with two readers
 * one frame is read while the other waits its turn. */
uint64_t stg__ex_drop_range(ex_state *s, size_t k, uint64_t *from)
{
	const stg_frame *f = &s->t->frames[k];
	uint64_t end = f->comp_off + f->comp_size;
	*from = s->dropped_to;
	if (!stg__ex_cached(s) || end <= *from ||
	    (end < *from + ADVISE_STEP && k != s->frames[s->n_frames - 1]))
		return 0;
	s->dropped_to = end;
	return end - *from;
}

void *stg__ex_reader(void *arg)
{
	ex_state *s = arg;
	stg_ctx *ctx = s->ctx;
	/* direct reads have no kernel readahead: small frames are read a
	 * chunk at a time (one 256 KiB read each left the link idle: a cold
	 * stage of 1 GiB through the emulated NFS took 1.8 s, with 4 MiB
	 * frames 1.3 s, `cat` 1.0 s): see ex_chunk */
	ex_buf *bs[READ_CHUNK_FRAMES] = {NULL};
	while (!stg__ex_failed(s)) {
		pthread_mutex_lock(&s->mu);
		/* a chunk's worth of free buffers, or what is left to read */
		while (!s->err && s->next_read < s->n_frames && !can_read(s))
			pthread_cond_wait(&s->cv_read, &s->mu);
		if (s->err || s->next_read == s->n_frames) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ex_chunk *chunk = s->chunk_frames > 1 ? s->chunk_free : NULL;
		if (chunk)
			s->chunk_free = chunk->next;
		size_t i = s->next_read, n = frames_to_read(s, chunk != NULL);
		for (size_t j = 0; j < n; j++) {
			bs[j] = s->free_list;
			s->free_list = bs[j]->next;
		}
		s->n_free -= n;
		s->next_read += n;
		bool cached = stg__ex_cached(s);
		/* the next frames come in (kernel readahead) while this one is
		 * read: on a network filesystem reading and hashing overlap;
		 * asked for a step at a time, not a call per (small) frame */
		uint64_t ahead = 0, from = s->advised_to;
		if (cached && i + 1 < s->n_frames) {
			const stg_frame *nf = &s->t->frames[s->frames[i + 1]];
			if (nf->comp_off + nf->comp_size > s->advised_to) {
				from = nf->comp_off > s->advised_to ? nf->comp_off : s->advised_to;
				ahead = nf->comp_off + nf->comp_size - from;
				if (ahead < ADVISE_STEP)
					ahead = ADVISE_STEP;
				s->advised_to = from + ahead;
			}
		}
		pthread_mutex_unlock(&s->mu);

		if (ahead && s->p->fd >= 0)
			posix_fadvise(s->p->fd, (off_t)from, (off_t)ahead, POSIX_FADV_WILLNEED);
		bool ok = read_frames(s, i, n, bs, chunk);
		pthread_mutex_lock(&s->mu);
		while (ok && s->next_queued != i && !s->err)
			pthread_cond_wait(&s->cv_read, &s->mu);
		if (!ok || s->err) {
			for (size_t j = 0; j < n; j++) {
				bs[j]->next = s->free_list;
				s->free_list = bs[j];
			}
			s->n_free += n;
			if (chunk) {
				chunk->next = s->chunk_free;
				s->chunk_free = chunk;
			}
			pthread_cond_broadcast(&s->cv_read);
			pthread_mutex_unlock(&s->mu);
			break;
		}
		uint64_t done = s->done;
		for (size_t j = 0; j < n; j++) {
			ex_buf *b = bs[j];
			b->frame = s->frames[i + j];
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
			done += s->t->frames[b->frame].comp_size;
		}
		s->next_queued += n;
		s->done = done;
		pthread_cond_broadcast(&s->cv_work);
		pthread_cond_broadcast(&s->cv_read); /* the other reader's turn */
		pthread_mutex_unlock(&s->mu);
		/* outside mu (a slow callback holds up no one else), and never
		 * backwards: the readers may get here in either order */
		if (ctx->progress_fn) {
			pthread_mutex_lock(&s->progress_mu);
			if (done > s->reported) {
				s->reported = done;
				ctx->progress_fn(ctx->progress_arg,
				                 s->tr->rootfd < 0 ? "verify" : "unpack", done,
				                 s->total);
			}
			pthread_mutex_unlock(&s->progress_mu);
		}
	}
	pthread_mutex_lock(&s->mu);
	s->readers--;
	pthread_cond_broadcast(&s->cv_work);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

#define DIRECT_MIN_FRAME (64u << 10) /* average compressed frame, bytes */
#define READ_AHEAD       (32u << 20) /* bytes read ahead of the workers */
#define MAX_BUFFERS      512

/* One reader through the page cache (the kernel reads ahead, asked for
 * in ADVISE_STEPs); two for direct reads, each with a read in flight. */
int stg__ex_readers(const ex_state *s)
{
	return s->direct ? 2 : 1;
}

/* How many frames one direct read may take: up to READ_CHUNK_FRAMES
 * small ones, within READ_CHUNK bytes; 1 for large frames (or through
 * the page cache, which reads ahead). */
static size_t chunk_frames(const ex_state *s)
{
	if (!s->direct || !s->comp_max || s->comp_max > READ_CHUNK / 2)
		return 1;
	return READ_CHUNK_FRAMES;
}

/* Enough buffers for every worker and the hasher to hold one while the
 * readers fill theirs, and for about READ_AHEAD bytes read ahead of the
 * workers (a few large frames, or many small ones), so that a worker held
 * up by a slow write does not stop the readers at once.  With chunks the
 * buffers only point into them: READ_AHEAD of chunks, and a buffer for
 * every frame they can hold. */
size_t stg__ex_buffers(ex_state *s, int nthreads)
{
	s->chunk_frames = chunk_frames(s);
	if (s->chunk_frames > 1) {
		s->n_chunks = READ_AHEAD / READ_CHUNK;
		return s->n_chunks * s->chunk_frames;
	}
	size_t n = (size_t)nthreads + 6;
	size_t ahead = s->comp_max ? READ_AHEAD / s->comp_max : 0;
	if (n < ahead)
		n = ahead < MAX_BUFFERS ? ahead : MAX_BUFFERS;
	return n;
}

bool stg__ex_bufs_make(ex_state *s, int nthreads)
{
	s->n_bufs = stg__ex_buffers(s, nthreads);
	s->bufs = calloc(s->n_bufs, sizeof *s->bufs);
	if (s->n_chunks)
		s->chunks = calloc(s->n_chunks, sizeof *s->chunks);
	if (!s->bufs || (s->n_chunks && !s->chunks))
		return false;
	for (size_t i = 0; i < s->n_bufs; i++) {
		s->bufs[i].next = s->free_list;
		s->free_list = &s->bufs[i];
	}
	s->n_free = s->n_bufs;
	for (size_t i = 0; i < s->n_chunks; i++) {
		s->chunks[i].next = s->chunk_free;
		s->chunk_free = &s->chunks[i];
	}
	return true;
}

void stg__ex_bufs_free(ex_state *s)
{
	for (size_t i = 0; s->bufs && i < s->n_bufs; i++)
		if (!s->bufs[i].chunk)
			free(s->bufs[i].data);
	for (size_t i = 0; s->chunks && i < s->n_chunks; i++)
		free(s->chunks[i].data);
	free(s->bufs);
	free(s->chunks);
	s->bufs = NULL;
	s->chunks = NULL;
}

/* Direct reads, for a pack on a network filesystem: its bytes cross the
 * link either way, and the page cache only adds a copy, page bookkeeping
 * on both sides of the link, and pages dropped right after (buf_done).
 * Measured through bench/sharedfs (FUSE), 1 GiB: the machine's CPU for
 * reading halves (1.2 -> 0.6 s), and a cold stage goes from 1.2-1.5 s to
 * 1.07 s.  Without the kernel's readahead, two readers keep two reads in
 * flight, of a frame or of a chunk of small ones.  Not for tiny frames,
 * nor local disks (whose
 * cache a pack just written may be in); a filesystem that refuses
 * O_DIRECT here, or a read later (EINVAL), is read through the cache.
 * Returns the pack fd's flags to restore, or -1 when nothing changed. */
int stg__ex_direct_begin(ex_state *s)
{
	int fd = s->p->fd;
	char kind[64];
	if (fd < 0 || !s->n_frames || s->total / s->n_frames < DIRECT_MIN_FRAME)
		return -1;
	bool net = stg__dev_is_network(s->p->dev, kind, sizeof kind);
	int fl = fcntl(fd, F_GETFL);
	if (!net || fl < 0)
		return -1;
	if (fl & O_DIRECT) { /* so opened, or another extraction of this pack */
		s->direct = true;
		return -1;
	}
	if (fcntl(fd, F_SETFL, fl | O_DIRECT)) {
		stg__log(s->ctx, STG_LOG_DEBUG,
		         "reading the pack through the page cache: %s refuses O_DIRECT (%s)", kind,
		         strerror(errno));
		return -1;
	}
	s->direct = true;
	stg__log(s->ctx, STG_LOG_DEBUG,
	         "reading the pack past the page cache (O_DIRECT on %s), two reads of up to "
	         "4 MiB in flight",
	         kind);
	return fl;
}
