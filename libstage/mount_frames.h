/*
 * mount_frames.h - a pack's frames on demand, checked, in a bounded cache
 * (mount_frames.c).
 */
#ifndef STG_MOUNT_FRAMES_H
#define STG_MOUNT_FRAMES_H

#include "trailer.h"

#include <stdbool.h>

/* Read frame k's len compressed bytes into buf; 0 or an errno value. */
typedef int (*stg_fetch_fn)(void *arg, size_t k, uint8_t *buf, size_t len);
/* Told once per frame that failed its check or could not be read. */
typedef void (*stg_frame_bad_fn)(void *arg, size_t k, const char *why);

typedef struct stg_frames stg_frames;
typedef struct stg_fbuf stg_fbuf; /* a decoded frame, held */

typedef struct stg_frames_opts {
	size_t max_bytes;         /* decoded frames kept (at least two frames' worth) */
	unsigned prefetchers;     /* threads that read ahead (0: none) */
	bool prefetch_fetch_only; /* read ahead fetches and checks, decodes a
	                             block: the rest when a read needs it */
	stg_fetch_fn fetch;
	void *fetch_arg;
	bool fetch_checks;    /* format 3: fetch hashes what it returns against
	                         the frame table (EBADMSG if it does not match),
	                         so it is not hashed again */
	stg_frame_bad_fn bad; /* may be NULL */
	void *bad_arg;
} stg_frames_opts;

stg_err stg__frames_new(stg_ctx *ctx, const stg_trailer *t, const stg_frames_opts *o,
                        stg_frames **out);
void stg__frames_free(stg_frames *f);
/* Frame k, checked, and decoded at least up to its first need bytes (0:
 * all of it): those of *data stay valid until stg__frames_put(*held).  0,
 * or an errno value (EIO: damaged or unreadable; ESTALE: the pack
 * changed). */
int stg__frames_get(stg_frames *f, size_t k, size_t need, const uint8_t **data, stg_fbuf **held);
void stg__frames_put(stg_frames *f, stg_fbuf *held);
/* Copy the tar stream's bytes [off, off + len) into out, through the
 * frames that hold them; 0 or an errno value as stg__frames_get. */
int stg__frames_read(stg_frames *f, uint64_t off, size_t len, uint8_t *out);
/* Do the tar stream's size bytes at off have the XXH3-128 want (a file
 * checked whole)?  0, EIO if not, or the read's errno value. */
int stg__frames_check(stg_frames *f, uint64_t off, uint64_t size, const uint8_t want[16]);
/* Start reading frames [k, k + n) in the background, if not cached. */
void stg__frames_prefetch(stg_frames *f, size_t k, size_t n);
/* Counters: frames read from the source, served from the cache, bytes
 * read from the source. */
void stg__frames_counts(stg_frames *f, uint64_t *fetched, uint64_t *hits, uint64_t *bytes);
/* Bytes decoded so far, all frames. */
uint64_t stg__frames_decoded(stg_frames *f);

#endif
