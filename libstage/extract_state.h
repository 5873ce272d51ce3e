/*
 * extract_state.h - the state of one parallel decode, shared by
 * extract.c (the workers, the hasher) and extract_read.c (the readers
 * that bring frames in): the buffers, their queues, the first error.  A
 * header of its own so that the calls run one way (extract ->
 * extract_read, extract -> extract_tree).
 */
#ifndef STG_EXTRACT_STATE_H
#define STG_EXTRACT_STATE_H

#define ADVISE_STEP (4u << 20) /* the pack's page cache, asked for and let go of */

#include "extract_tree.h"
#include "ctx.h"
#include "trailer.h"

#include <pthread.h>

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
