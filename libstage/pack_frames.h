/*
 * pack_frames.h - the pack writer's frame pipeline (pack_frames.c): a tar
 * stream in, independent zstd frames out, written in order, with their
 * table and the SHA-256 of all that was written.
 */
#ifndef STG_PACK_FRAMES_H
#define STG_PACK_FRAMES_H

#include "trailer.h"

typedef struct stg_framer stg_framer;

/* What the pipeline wrote. */
typedef struct stg_framed {
	stg_frame *frames; /* the frame table (malloc'ed) */
	size_t n_frames;
	uint64_t data_size, tar_size; /* bytes written; tar bytes taken */
	uint8_t digest[STG_DIGEST_LEN];
} stg_framed;

/* Compress frames of about target tar bytes at level (zstd 1-19) with the
 * context's threads, writing them to fd; with writeback (a pack that will
 * be fsync'ed), each frame's writeback is started once it is written. */
stg_err stg__framer_start(stg_ctx *ctx, int fd, int level, size_t target, bool writeback,
                          stg_framer **out);
/* Append tar bytes to the current frame.  0, or -1 with errno: ENOMEM, or
 * EIO when the pipeline has stopped (stg__framer_err says why). */
int stg__framer_put(stg_framer *f, const void *p, size_t n);
/* Hand the current frame to the compressors if it holds target bytes or
 * more: before an entry's header, so that headers never straddle frames,
 * and inside a file's data, so that a large file is cut into frames. */
stg_err stg__framer_cut(stg_framer *f);
/* The same before an entry of about next tar bytes (header, data and
 * padding): also when next would not fit in the rest of the frame but fits
 * in a frame of its own, so that it is not split between two. */
stg_err stg__framer_cut_before(stg_framer *f, uint64_t next);
/* The bytes the current frame takes before it is full (after a cut: > 0). */
size_t stg__framer_room(const stg_framer *f);
/* Tar bytes taken so far: the offset of the next one. */
uint64_t stg__framer_pos(const stg_framer *f);
/* Why the pipeline stopped (STG_OK while it runs): a write or a
 * compression failed.  Its detail goes on ctx when stg__framer_finish is
 * given no error of the caller's. */
stg_err stg__framer_err(stg_framer *f);
/* Hand over the last frame (if err is STG_OK; else stop without writing
 * more), wait for every frame to be written, and free f; out is filled on
 * success. */
stg_err stg__framer_finish(stg_framer *f, stg_err err, stg_framed *out);

#endif
