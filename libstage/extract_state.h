/*
 * extract_state.h - the state of one parallel decode, shared by
 * extract.c (the workers, the hasher) and extract_read.c (the readers
 * that bring frames in): the buffers, their queues, the first error.  A
 * header of its own so that the calls run one way (extract ->
 * extract_read, extract -> extract_tree).
 */
#ifndef STG_EXTRACT_STATE_H
#define STG_EXTRACT_STATE_H

#define ADVISE_STEP       (4u << 20) /* the pack's page cache, asked for and let go of */
#define READ_CHUNK        (4u << 20) /* a direct read of small frames, at most */
#define READ_CHUNK_FRAMES 64         /* ... and of at most this many */

#include "extract_tree.h"
#include "ctx.h"
#include "trailer.h"

#include <pthread.h>

/* Small frames read past the page cache come a chunk at a time: one
 * read of READ_CHUNK bytes at most, which the frames' buffers then point
 * into (no copy); the chunk is free again once every frame in it is. */
typedef struct ex_chunk {
	struct ex_chunk *next; /* in the free list */
	uint8_t *data;         /* READ_CHUNK bytes, made on first use */
	unsigned refs;         /* its frames not yet done with */
} ex_chunk;

typedef struct ex_buf {
	struct ex_buf *next;     /* in the free list or the workers' queue */
	struct ex_buf *sha_next; /* in the hasher's queue */
	size_t frame;
	uint8_t *data; /* its own (cap bytes), or inside chunk */
	size_t cap;
	ex_chunk *chunk;
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

	/* mu guards what follows; each kind of thread waits on a condition
	 * of its own, so that a frame's events wake only those that wait on
	 * them (one for all made 10 switches a frame: 44,000 for a 1 GiB
	 * stage of 256 KiB frames, 0.4 s of its 2) */
	pthread_mutex_t mu;
	pthread_cond_t cv_read;  /* readers: free buffers, their turn to queue */
	pthread_cond_t cv_work;  /* workers and the hasher: frames queued */
	pthread_cond_t cv_piece; /* a worker: the previous piece of its file hashed */
	ex_buf *bufs;            /* n_bufs of them (stg__ex_bufs_make) */
	size_t n_bufs;
	ex_buf *free_list, *qhead, *qtail;
	size_t n_free;       /* buffers on free_list */
	size_t chunk_frames; /* frames one read may take (1: no chunks) */
	ex_chunk *chunks;    /* n_chunks of them, with chunk_frames > 1 */
	size_t n_chunks;
	ex_chunk *chunk_free;
	ex_buf *sha_head, *sha_tail;     /* read, not yet hashed (in frame order) */
	size_t next_read, next_queued;   /* of frames[]: claimed by a reader, queued */
	uint64_t advised_to, dropped_to; /* the pack's page cache: asked for ahead,
	                                    and let go of, in steps of ADVISE_STEP */
	uint64_t done, total;            /* compressed bytes queued, and to read */
	pthread_mutex_t progress_mu;     /* progress_fn's calls, one at a time */
	uint64_t reported;               /* done, as progress_fn last heard it */
	int readers;                     /* reader threads still running (0: every frame queued) */
	bool direct;                     /* the pack is read past the page cache (O_DIRECT) */
	bool direct_refused;             /* ... until a read said EINVAL: through it since */
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	uint8_t sha[STG_DIGEST_LEN];
} ex_state;

/* Is the pack read through the page cache (not, or no longer, direct)? */
static inline bool stg__ex_cached(const ex_state *s)
{
	return !s->direct || s->direct_refused;
}

#endif
