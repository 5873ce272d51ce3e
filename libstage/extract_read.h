/*
 * extract_read.h - extraction's readers (extract_read.c): frames in
 * order into a bounded set of buffers, past the page cache where that
 * pays; the run's failure, kept on its state.
 */
#ifndef STG_EXTRACT_READ_H
#define STG_EXTRACT_READ_H

#include "extract_state.h"

/* Fail the run (the first error is kept) and wake every waiter. */
void stg__ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
/* Has the run failed or been cancelled?  A cancel becomes an error here, so
 * that every waiter (for a buffer, or a previous piece of a file) wakes. */
bool stg__ex_failed(ex_state *s);
/* Switch s->p's fd to direct reads where that pays (a network filesystem,
 * large frames): the fd's flags to restore after, or -1 (nothing changed). */
int stg__ex_direct_begin(ex_state *s);
/* Frame k read and let go of (mu held): the range of the pack to drop from
 * the page cache now, [*from, *from + len), or 0.  A step (ADVISE_STEP) at
 * a time: frames are let go of about in order, and one dropped early is
 * only read again, never wrong. */
uint64_t stg__ex_drop_range(ex_state *s, size_t k, uint64_t *from);
/* How many readers to run; how many buffers to share between them and
 * the workers (nthreads of them), which also sets s->chunk_frames, the
 * frames a direct read may take: sized in bytes, not in frames. */
int stg__ex_readers(const ex_state *s);
size_t stg__ex_buffers(ex_state *s, int nthreads);
/* Make the run's buffers (and chunks), all free; false: out of memory.
 * stg__ex_bufs_free frees them and what they hold, made or not. */
bool stg__ex_bufs_make(ex_state *s, int nthreads);
void stg__ex_bufs_free(ex_state *s);
/* The free buffers a reader waits for before it reads (mu held): a
 * chunk's worth, or as many frames as are left. */
size_t stg__ex_want(const ex_state *s);
/* A reader thread (s->readers of them run). */
void *stg__ex_reader(void *arg);

#endif
