/*
 * pack_files.c - the pack writer's file reader: the files of a walked
 * tree opened, read and hashed (XXH3-128, the one loop of hash.c) in pack
 * order, on a thread of their own, a few MiB ahead of the writer that puts
 * them into the tar stream.
 *
 * The writer's thread formats the tar stream and copies the data into the
 * frames; in a tree of small files, the opens, reads and closes were about
 * half of its time, and that thread was what the compressors waited for.
 * Slots of SLOT_LEN bytes pass between the two threads: the reader fills
 * one with pieces of files in order (many small files, or a part of a
 * large one), each read straight to its place, and hands it over; the
 * writer takes the pieces in order and gives the slot back once it has
 * asked for the next.  NSLOTS slots: memory is bounded whatever the tree.
 *
 * A file that cannot be opened or read, or that is not the size the walk
 * saw, ends the reading there: its pieces so far, then its error, reach the
 * writer in order, which stops the pack with the message it gave before.
 * The reader touches only its files and the hash fields of their records;
 * errors are told on the context by the writer's thread alone.
 */
#include "pack_files.h"
#include "hash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define SLOT_LEN    (1u << 20)
#define NSLOTS      6
#define SLOT_PIECES 512
/* a piece of a larger file is not started in less room than this: the
 * slot is handed over instead */
#define MIN_PIECE (64u << 10)

typedef struct fpiece {
	size_t entry;
	uint32_t off, len;
	bool last;
} fpiece;

typedef struct fslot {
	uint8_t *buf; /* SLOT_LEN + 1: a last piece reads a byte more */
	size_t used;
	fpiece pieces[SLOT_PIECES];
	size_t n, next; /* pieces; the next one the writer takes */
} fslot;

enum { END_OK, END_OPEN, END_READ, END_SHRANK, END_GREW, END_STOPPED };

struct stg_filer {
	stg_ctx *ctx;
	int rootfd;
	stg_trailer *t;
	pthread_t tid;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t has_data, has_room; /* the writer waits on one, the reader on the other */
	fslot slots[NSLOTS];
	/* slots handed over by the reader, taken and given back by the
	 * writer (counts: slot k is slots[k % NSLOTS]) */
	size_t filled, taken, released;
	fslot *cur;       /* the writer's */
	bool stop;        /* the writer's word */
	XXH3_state_t *xs; /* the reader's */
	bool ended;       /* the reader's: why in end, at entry end_i */
	int end, end_errno;
	size_t end_i;
	uint64_t end_missing;
};

/* ---- the reader ---------------------------------------------------------- */

/* Hand s over (when it holds pieces) and take a free slot; NULL: stop. */
static fslot *next_slot(stg_filer *f, fslot *s)
{
	pthread_mutex_lock(&f->mu);
	if (s && s->n) {
		f->filled++;
		pthread_cond_signal(&f->has_data);
		s = NULL;
	}
	while (!s && !f->stop && f->filled - f->released == NSLOTS)
		pthread_cond_wait(&f->has_room, &f->mu);
	if (!s && !f->stop) {
		s = &f->slots[f->filled % NSLOTS];
		s->used = s->n = s->next = 0;
	}
	if (f->stop)
		s = NULL;
	pthread_mutex_unlock(&f->mu);
	return s;
}

static void finish(stg_filer *f, fslot *s, int end, size_t i, int e, uint64_t missing)
{
	pthread_mutex_lock(&f->mu);
	if (s && s->n)
		f->filled++;
	f->ended = true;
	f->end = end;
	f->end_i = i;
	f->end_errno = e;
	f->end_missing = missing;
	pthread_cond_signal(&f->has_data);
	pthread_mutex_unlock(&f->mu);
}

/* One file into slots, from s on (*s: the slot being filled after it). */
static int read_file(stg_filer *f, fslot **s, size_t i, XXH3_state_t *xs, int *e, uint64_t *missing)
{
	stg_rec *r = &f->t->recs[i];
	const char *path = f->t->names + r->path_off;
	int fd = openat(f->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		*e = errno;
		return END_OPEN;
	}
	if (r->size > SLOT_LEN)
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	XXH3_128bits_reset(xs);
	int end = END_OK;
	for (uint64_t pos = 0; pos < r->size;) {
		uint64_t left = r->size - pos;
		size_t room = *s ? SLOT_LEN - (*s)->used : 0;
		if (!*s || (*s)->n == SLOT_PIECES || (room <= left && room < MIN_PIECE)) {
			if (!(*s = next_slot(f, *s))) {
				end = END_STOPPED;
				break;
			}
			room = SLOT_LEN;
		}
		/* the rest, and a byte to see growth; else as much as fits, but
		 * never all of the rest: a file ends on a last piece */
		bool last = left < room;
		size_t len = last ? (size_t)left : left == room ? room - 1 : room;
		fslot *sl = *s;
		stg_hash_in in = {.fd = fd,
		                  .off = (int64_t)pos,
		                  .len = len,
		                  .whole = last,
		                  .buf = sl->buf + sl->used,
		                  .buf_len = last ? len + 1 : len,
		                  .fill = true,
		                  .path = path};
		uint64_t got;
		if (stg__hash_read(NULL, &in, xs, &got)) {
			*e = errno;
			end = END_READ;
			break;
		}
		if (got > len) {
			end = END_GREW;
			break;
		}
		if (got < len) {
			*missing = left - got;
			end = END_SHRANK;
			break;
		}
		if (last)
			stg__hash_digest(xs, r->xxh3);
		sl->pieces[sl->n++] = (fpiece){i, (uint32_t)sl->used, (uint32_t)len, last};
		sl->used += len;
		pos += len;
	}
	close(fd);
	return end;
}

static void *reader(void *arg)
{
	stg_filer *f = arg;
	fslot *s = NULL;
	size_t at = 0;
	int end = END_OK, e = 0;
	uint64_t missing = 0;
	for (size_t i = 0; i < f->t->n_entries && end == END_OK; i++) {
		const stg_rec *r = &f->t->recs[i];
		if (r->type != STG_FILE || !r->size)
			continue;
		at = i;
		if (stg__cancelled(f->ctx))
			end = END_STOPPED;
		else
			end = read_file(f, &s, i, f->xs, &e, &missing);
	}
	finish(f, s, end, at, e, missing);
	return NULL;
}

/* ---- the writer's side --------------------------------------------------- */

static stg_err ended(stg_filer *f, size_t i)
{
	const char *path = f->t->names + f->t->recs[i].path_off;
	if (f->end_i != i || f->end == END_OK || f->end == END_STOPPED)
		return stg__fail(f->ctx, stg__cancelled(f->ctx) ? STG_EINTR : STG_EIO,
		                 stg__cancelled(f->ctx) ? "interrupted"
		                                        : "the pack's file reader ended early");
	switch (f->end) {
	case END_OPEN:
		return stg__fail_errno(f->ctx, STG_ENOENT, f->end_errno, "cannot open '%s'", path);
	case END_READ: return stg__fail_errno(f->ctx, STG_EIO, f->end_errno, "reading '%s'", path);
	case END_SHRANK:
		return stg__fail(f->ctx, STG_EIO,
		                 "'%s' shrank while it was packed (%llu bytes missing); "
		                 "pack again once nothing writes to the tree",
		                 path, (unsigned long long)f->end_missing);
	default:
		/* growth after the last read is not seen; the pack then holds a
		 * consistent copy of the file's first bytes */
		return stg__fail(f->ctx, STG_EIO,
		                 "'%s' grew while it was packed; pack again once nothing "
		                 "writes to the tree",
		                 path);
	}
}

stg_err stg__filer_next(stg_filer *f, size_t i, const uint8_t **p, size_t *n, bool *last)
{
	pthread_mutex_lock(&f->mu);
	for (;;) {
		if (f->cur && f->cur->next < f->cur->n)
			break;
		if (f->cur) { /* its pieces are in the tar stream: give it back */
			f->cur = NULL;
			f->released++;
			pthread_cond_signal(&f->has_room);
		}
		if (f->taken < f->filled) {
			f->cur = &f->slots[f->taken++ % NSLOTS];
			continue;
		}
		if (f->ended) {
			stg_err err = ended(f, i);
			pthread_mutex_unlock(&f->mu);
			return err;
		}
		pthread_cond_wait(&f->has_data, &f->mu);
	}
	const fpiece *pc = &f->cur->pieces[f->cur->next++];
	pthread_mutex_unlock(&f->mu);
	if (pc->entry != i) /* the writer asked out of order: a bug */
		return stg__fail(f->ctx, STG_EIO, "the pack's file reader is out of step");
	*p = f->cur->buf + pc->off;
	*n = pc->len;
	*last = pc->last;
	return STG_OK;
}

stg_err stg__filer_start(stg_ctx *ctx, int rootfd, stg_trailer *t, stg_filer **out)
{
	stg_filer *f = calloc(1, sizeof *f);
	if (!f)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	f->ctx = ctx;
	f->rootfd = rootfd;
	f->t = t;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->has_data, NULL);
	pthread_cond_init(&f->has_room, NULL);
	stg_err err = STG_OK;
	if (!(f->xs = XXH3_createState()))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	for (int k = 0; k < NSLOTS && !err; k++)
		if (!(f->slots[k].buf = stg__io_alloc(SLOT_LEN + 1)))
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (!err && pthread_create(&f->tid, NULL, reader, f))
		err = stg__fail(ctx, STG_ENOMEM, "cannot start a thread");
	if (err) {
		stg__filer_stop(f);
		return err;
	}
	f->started = true;
	*out = f;
	return STG_OK;
}

void stg__filer_stop(stg_filer *f)
{
	if (!f)
		return;
	if (f->started) {
		pthread_mutex_lock(&f->mu);
		f->stop = true;
		pthread_cond_signal(&f->has_room);
		pthread_mutex_unlock(&f->mu);
		pthread_join(f->tid, NULL);
	}
	for (int k = 0; k < NSLOTS; k++)
		free(f->slots[k].buf);
	XXH3_freeState(f->xs);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->has_data);
	pthread_cond_destroy(&f->has_room);
	free(f);
}
