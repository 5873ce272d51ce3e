/*
 * hash.h - the one loop that reads a file and hashes it with XXH3-128
 * (hash.c), and the byte sinks it can feed on the way.
 */
#ifndef STG_HASH_H
#define STG_HASH_H

#include "pace.h"

#include <xxhash.h>

#define STG_HASH_ALL UINT64_MAX /* stg_hash_in.len: up to the end of the file */

/* Where bytes go: a tar stream, a librsync job, a file, the wire.  A sink
 * fed by stg__hash_read gets an empty piece at the end. */
typedef stg_err (*stg_sink_fn)(void *arg, const uint8_t *p, size_t n);

/* What stg__hash_read reads, and what it does with the bytes besides
 * hashing them. */
typedef struct stg_hash_in {
	int fd;
	int64_t off;  /* pread from here; -1: read on from fd's position */
	uint64_t len; /* the bytes wanted (STG_HASH_ALL: all there are) */
	bool whole;   /* len is the file's size: growth is to show */
	uint8_t *buf; /* read into, buf_len bytes at most at a time */
	size_t buf_len;
	/* buf holds the whole range (buf_len >= len, one byte more when
	 * whole): each read lands after the last, not at buf */
	bool fill;
	stg_bucket *bw;   /* every read charged to it (NULL: no limit; needs ctx) */
	stg_sink_fn sink; /* every piece, then an empty one (NULL: none) */
	void *arg;
	const char *path; /* named in the error */
	uint64_t *done;   /* advanced by every piece (NULL: not counted) */
	const char *what; /* then a progress report of *done of total */
	uint64_t total;
} stg_hash_in;

/* A sink (arg: a stg_fd_sink) that writes every piece to fd; a write that
 * fails is STG_EIO, its errno in err (and errno). */
typedef struct stg_fd_sink {
	int fd;
	int err;
} stg_fd_sink;
stg_err stg__sink_fd(void *arg, const uint8_t *p, size_t n);

/*
 * Read what in says, hash it into xs (reset by the caller, or carrying on
 * from bytes hashed before) and pass it to the sink.  *got is the bytes
 * hashed: fewer than len if the file ended first, len + 1 (the last piece
 * neither hashed nor passed on) if in->whole and a read found more (one
 * with room to spare asks for a byte more than is left).
 * Returns STG_EIO if a read fails, STG_EINTR if ctx is cancelled (checked
 * after every piece), or the sink's error; errno says why as well.  With
 * ctx NULL the hash is plain: no cancellation, no detail but errno.
 */
stg_err stg__hash_read(stg_ctx *ctx, const stg_hash_in *in, XXH3_state_t *xs, uint64_t *got);

/* The canonical (big-endian) bytes of the XXH3-128 in xs, as manifests,
 * trailers and the wire hold it. */
void stg__hash_digest(XXH3_state_t *xs, uint8_t out[16]);

/* XXH3-128 and size of the rest of fd, read with buf (buf_len bytes); of
 * the file at path under dirfd (not following a link).  0 or -1/errno. */
int stg__hash_fd(int fd, uint8_t *buf, size_t buf_len, uint8_t xxh3[16], uint64_t *size);
int stg__hash_file(int dirfd, const char *path, uint8_t xxh3[16], uint64_t *size);

#endif
