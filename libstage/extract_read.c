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
	pthread_cond_broadcast(&s->cv);
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

/* The pack ended inside or before frame k: the first frame it cuts,
 * whichever reader (of several, in any order) noticed first. */
static size_t first_cut(ex_state *s, size_t k)
{
	struct stat st;
	if (fstat(s->p->fd, &st))
		return k;
	for (size_t j = 0; j < k; j++)
		if (s->t->frames[j].comp_off + s->t->frames[j].comp_size > (uint64_t)st.st_size)
			return j;
	return k;
}

/* Read frame k into b.  A direct read the filesystem refuses (EINVAL: it
 * wants aligned direct I/O, or passes O_DIRECT on to a disk that does)
 * turns direct reads off for the rest of the pack and is read again. */
static bool read_frame(ex_state *s, size_t k, ex_buf *b)
{
	const stg_frame *f = &s->t->frames[k];
	if (b->cap < f->comp_size) {
		free(b->data);
		b->data = stg__io_alloc(s->comp_max);
		b->cap = b->data ? s->comp_max : 0;
		if (!b->data) {
			stg__ex_fail(s, STG_ENOMEM, "out of memory");
			return false;
		}
	}
	int rc = stg__pack_pread(s->p, b->data, f->comp_size, f->comp_off);
	if (rc && errno == EINVAL && s->direct) {
		pthread_mutex_lock(&s->mu);
		if (!s->direct_refused) {
			s->direct_refused = true;
			int fl = fcntl(s->p->fd, F_GETFL);
			if (fl >= 0)
				fcntl(s->p->fd, F_SETFL, fl & ~O_DIRECT);
		}
		pthread_mutex_unlock(&s->mu);
		rc = stg__pack_pread(s->p, b->data, f->comp_size, f->comp_off);
	}
	if (rc) {
		int e = errno;
		if (e)
			stg__ex_fail(s, STG_EIO, "reading frame %zu of the pack: %s", k,
			             strerror(e));
		else
			stg__ex_fail(s, STG_ECORRUPT, "damaged pack: frame %zu is truncated",
			             first_cut(s, k));
		return false;
	}
	return true;
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
	while (!stg__ex_failed(s)) {
		pthread_mutex_lock(&s->mu);
		while (!s->free_list && !s->err && s->next_read < s->n_frames)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->err || s->next_read == s->n_frames) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ex_buf *b = s->free_list;
		s->free_list = b->next;
		size_t i = s->next_read++;
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

		size_t k = s->frames[i];
		if (ahead && s->p->fd >= 0)
			posix_fadvise(s->p->fd, (off_t)from, (off_t)ahead, POSIX_FADV_WILLNEED);
		bool ok = read_frame(s, k, b);
		pthread_mutex_lock(&s->mu);
		while (ok && s->next_queued != i && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!ok || s->err) {
			b->next = s->free_list;
			s->free_list = b;
			pthread_cond_broadcast(&s->cv);
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
		s->next_queued++;
		uint64_t done = s->done += s->t->frames[k].comp_size;
		pthread_cond_broadcast(&s->cv);
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
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

#define DIRECT_MIN_FRAME (256u << 10) /* average compressed frame, bytes */

/* Direct reads, for a pack on a network filesystem: its bytes cross the
 * link either way, and the page cache only adds a copy, page bookkeeping
 * on both sides of the link, and pages dropped right after (buf_done).
 * Measured through bench/sharedfs (FUSE), 1 GiB: the machine's CPU for
 * reading halves (1.2 -> 0.6 s), and a cold stage goes from 1.2-1.5 s to
 * 1.07 s.  Without the kernel's readahead, two readers keep two frames in
 * flight.  Not for small frames (a read each), nor local disks (whose
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
	         "reading the pack past the page cache (O_DIRECT on %s), two frames in flight",
	         kind);
	return fl;
}
