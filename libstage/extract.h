/*
 * extract.h - what the parts of extraction share: the plan and the tree
 * around the files (extract_tree.c), and the parallel decode that writes
 * the files (extract.c) from the frames its readers bring in
 * (extract_read.c).
 */
#ifndef STG_EXTRACT_H
#define STG_EXTRACT_H

#include "internal.h"

#include <pthread.h>
#include <sys/stat.h>
#include <xxhash.h>

#define NONE UINT32_MAX

/* A file whose content spans frames: its pieces are hashed in frame
 * order. */
typedef struct ex_span {
	uint32_t first; /* first frame holding this file */
	uint32_t next;  /* frame whose piece is to be hashed next */
	uint32_t last;  /* last frame holding this file */
	XXH3_state_t *xs;
} ex_span;

/* What an extraction takes from a pack, once its tree is known to be
 * safe. */
typedef struct ex_plan {
	stg_strmap map;    /* path -> entry, while planning (freed by stg__ex_plan) */
	bool *sel;         /* the entries taken */
	uint32_t *span_of; /* entry -> its span (NONE: within one frame) */
	ex_span *spans;
	size_t n_spans;
	size_t *frames; /* the frames needed, in order */
	size_t n_frames;
} ex_plan;

/* Check the pack's tree (any_link: symlinks may point anywhere) and plan
 * an extraction with opts (NULL: everything).  Free pl in any case. */
stg_err stg__ex_plan(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, ex_plan *pl,
                     bool any_link);
void stg__ex_plan_free(ex_plan *pl);

/* Where and how the selected entries of a pack are made. */
typedef struct ex_tree {
	stg_ctx *ctx;
	const stg_pack *p;
	int rootfd; /* -1: nothing is written (verify) */
	mode_t umask;
	bool read_only;
	const bool *sel;
	const uint32_t *span_of; /* NULL: the files are written elsewhere */
} ex_tree;

/* Directories, empty files and files that span frames (created, to be
 * written by pieces), before the frames are decoded; links and directory
 * metadata after every file is written. */
stg_err stg__ex_prepare(const ex_tree *tr);
stg_err stg__ex_finish(const ex_tree *tr);
/* The process's umask (read, not changed). */
mode_t stg__ex_umask(void);
/* The mode a file is created with: its final permission bits, so that
 * most need no chmod afterwards; its metadata set on the open file (the
 * mode only if the umask took some of it, or if forced). */
mode_t stg__ex_create_mode(const stg_rec *r, bool read_only);
int stg__ex_set_meta(const ex_tree *tr, int fd, const stg_rec *r, bool force_chmod);

/* ---- the parallel decode (extract.c) and its readers (extract_read.c) -- */

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
	ex_buf *sha_head, *sha_tail;   /* read, not yet hashed (in frame order) */
	size_t next_read, next_queued; /* of frames[]: claimed by a reader, queued */
	uint64_t done, total;          /* compressed bytes queued, and to read */
	pthread_mutex_t progress_mu;   /* progress_fn's calls, one at a time */
	uint64_t reported;             /* done, as progress_fn last heard it */
	int readers;                   /* reader threads still running (0: every frame queued) */
	bool direct;                   /* the pack is read past the page cache (O_DIRECT) */
	bool direct_refused;           /* ... until a read said EINVAL: through it since */
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	uint8_t sha[STG_DIGEST_LEN];
} ex_state;

/* Is the pack read through the page cache (not, or no longer, direct)? */
static inline bool stg__ex_cached(const ex_state *s)
{
	return !s->direct || s->direct_refused;
}

/* Fail the run (the first error is kept) and wake every waiter. */
void stg__ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Has the run failed or been cancelled?  A cancel becomes an error here, so
 * that every waiter (for a buffer, or a previous piece of a file) wakes. */
bool stg__ex_failed(ex_state *s);
/* Switch s->p's fd to direct reads where that pays (a network filesystem,
 * large frames): the fd's flags to restore after, or -1 (nothing changed). */
int stg__ex_direct_begin(ex_state *s);
/* A reader thread (s->readers of them run). */
void *stg__ex_reader(void *arg);

#endif
