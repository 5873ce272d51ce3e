/*
 * writer.c - a large file written by threads of its own.
 *
 * Writing a file is the kernel's work: pages to allocate, account and
 * fill.  A process that makes one large file (a file patched from a
 * delta) with one thread waits for that work byte after byte; here the
 * bytes are gathered into pieces, and each full piece is written at its
 * offset (pwrite) by a writer thread while the caller goes on reading and
 * hashing the next bytes.  (More than one writer rarely helps: writes to
 * one file take its inode's lock on tmpfs, ext4 and most others.)  A
 * piece is a copy: the caller's buffer is its own again as soon as put
 * returns.  The first write that
 * fails is remembered and reported; pieces after it are not written.
 */
#include "writer.h"
#include "ctx.h"

#include <pthread.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct piece {
	struct piece *next;
	uint8_t *data;
	size_t len;
	uint64_t off;
} piece;

struct stg_writer {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t *threads;
	int n_threads;
	size_t size;
	piece *pieces, *free_list, *qhead, *qtail;
	piece *cur; /* being filled */
	int fd;
	uint64_t off;
	unsigned busy; /* pieces queued or being written */
	int err;
	bool stop;
};

/* A piece written in calls of at most 128 KiB: the page cache sizes a
 * file's folios by the write, and large ones cost several times more to
 * fill on ext4 and XFS here (extract.c, EX_WRITE_MAX). */
#define WRITE_MAX ((size_t)128 << 10)
static int write_piece(int fd, const uint8_t *data, size_t len, uint64_t off)
{
	for (size_t done = 0; done < len;) {
		size_t k = len - done < WRITE_MAX ? len - done : WRITE_MAX;
		if (stg__pwrite_full(fd, data + done, k, off + done))
			return -1;
		done += k;
	}
	return 0;
}

static void *write_loop(void *arg)
{
	stg_writer *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->qhead && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->qhead)
			break;
		piece *p = w->qhead;
		w->qhead = p->next;
		if (!w->qhead)
			w->qtail = NULL;
		int fd = w->fd, failed = w->err;
		pthread_mutex_unlock(&w->mu);
		int e = !failed && write_piece(fd, p->data, p->len, p->off) ? errno : 0;
		pthread_mutex_lock(&w->mu);
		if (e && !w->err)
			w->err = e;
		p->next = w->free_list;
		w->free_list = p;
		w->busy--;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

stg_writer *stg__writer_new(int threads, size_t buf_size)
{
	stg_writer *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	size_t n = (size_t)threads * 2 + 1;
	w->size = buf_size;
	w->pieces = calloc(n, sizeof *w->pieces);
	w->threads = calloc((size_t)threads, sizeof *w->threads);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	for (size_t i = 0; w->pieces && i < n; i++) {
		if (!(w->pieces[i].data = stg__io_alloc(buf_size)))
			break;
		w->pieces[i].next = w->free_list;
		w->free_list = &w->pieces[i];
	}
	for (int i = 0; w->threads && w->free_list && i < threads; i++)
		if (pthread_create(&w->threads[w->n_threads], NULL, write_loop, w) == 0)
			w->n_threads++;
	if (!w->n_threads) {
		stg__writer_free(w);
		return NULL;
	}
	return w;
}

void stg__writer_free(stg_writer *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->n_threads; i++)
		pthread_join(w->threads[i], NULL);
	size_t n = (size_t)w->n_threads * 2 + 1;
	for (size_t i = 0; w->pieces && i < n; i++)
		free(w->pieces[i].data);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w->pieces);
	free(w->threads);
	free(w);
}

void stg__writer_begin(stg_writer *w, int fd)
{
	w->fd = fd;
	w->off = 0;
	w->err = 0;
	w->cur = NULL;
}

/* Queue the piece being filled (mu held). */
static void queue_cur(stg_writer *w)
{
	piece *p = w->cur;
	w->cur = NULL;
	if (!p)
		return;
	if (!p->len) {
		p->next = w->free_list;
		w->free_list = p;
		return;
	}
	p->next = NULL;
	if (w->qtail)
		w->qtail->next = p;
	else
		w->qhead = p;
	w->qtail = p;
	w->busy++;
	pthread_cond_broadcast(&w->cv);
}

uint8_t *stg__writer_room(stg_writer *w, size_t *n)
{
	pthread_mutex_lock(&w->mu);
	if (!w->cur && !w->err) {
		while (!w->free_list && !w->err)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->err) {
			w->cur = w->free_list;
			w->free_list = w->cur->next;
			w->cur->len = 0;
			w->cur->off = w->off;
		}
	}
	int e = w->err;
	/* the room is filled outside the lock: this piece is ours alone */
	uint8_t *room = e ? NULL : w->cur->data + w->cur->len;
	*n = e ? 0 : w->size - w->cur->len;
	pthread_mutex_unlock(&w->mu);
	if (e)
		errno = e;
	return room;
}

int stg__writer_commit(stg_writer *w, size_t k)
{
	pthread_mutex_lock(&w->mu);
	int e = w->err;
	if (!e) {
		w->cur->len += k;
		w->off += k;
		if (w->cur->len == w->size)
			queue_cur(w);
	}
	pthread_mutex_unlock(&w->mu);
	if (e)
		errno = e;
	return e ? -1 : 0;
}

int stg__writer_put(stg_writer *w, const uint8_t *data, size_t n)
{
	while (n) {
		size_t k;
		uint8_t *room = stg__writer_room(w, &k);
		if (!room)
			return -1;
		k = k < n ? k : n;
		memcpy(room, data, k);
		if (stg__writer_commit(w, k))
			return -1;
		data += k;
		n -= k;
	}
	return 0;
}

int stg__writer_end(stg_writer *w)
{
	pthread_mutex_lock(&w->mu);
	queue_cur(w);
	while (w->busy)
		pthread_cond_wait(&w->cv, &w->mu);
	int e = w->err;
	pthread_mutex_unlock(&w->mu);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}
