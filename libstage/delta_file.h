/*
 * delta_file.h - the delta file format (delta_file.c): its header, and its
 * zstd-compressed body as the writer (delta_write.c) puts it and the
 * applier (delta_apply.c) reads it.  FORMAT.md ("Delta files") has the
 * layout.
 */
#ifndef STG_DELTA_FILE_H
#define STG_DELTA_FILE_H

#include "delta.h"
#include "rsjob.h"

#include <xxhash.h>
#include <zstd.h>

#define DELTA_HEADER_SIZE 128
#define DELTA_REC_SIZE    40
#define DELTA_CHUNK_MAX   XFER_BLOCK
#define NONE              UINT32_MAX

/* A record's kind: the file from another path of the base, patched from
 * the base's file at its path, or whole. */
enum { DK_COPY = 1, DK_PATCH = 2, DK_WHOLE = 3 };

typedef struct dheader {
	uint8_t base[STG_DIGEST_LEN], target[STG_DIGEST_LEN];
	uint64_t n_records, n_removed, body_size, body_xxh;
} dheader;

void stg__dheader_encode(const dheader *h, uint8_t out[DELTA_HEADER_SIZE]);
/* STG_ECORRUPT unless in is a header this version reads. */
stg_err stg__dheader_decode(stg_ctx *ctx, const uint8_t in[DELTA_HEADER_SIZE], dheader *h);

/* The body being written to fd (after the header's place). */
typedef struct zout {
	stg_ctx *ctx;
	int fd;
	ZSTD_CCtx *cc;
	uint8_t *buf;
	size_t cap;
	XXH3_state_t *xs; /* XXH3-64 of the compressed body */
	uint64_t size;
} zout;

stg_err stg__zout_init(zout *z, stg_ctx *ctx, int fd);
void stg__zout_free(zout *z);
stg_err stg__zout_put(zout *z, const void *p, size_t n);
/* A sink (arg: the zout) of a payload's chunks, each behind its length;
 * an empty piece is no chunk, as an empty chunk ends the payload. */
stg_err stg__zout_chunk(void *arg, const uint8_t *p, size_t n);
/* The last frame of the body ends. */
stg_err stg__zout_end(zout *z);

/* The body being read from a source, off bytes in (after the header). */
typedef struct zin {
	stg_ctx *ctx;
	const stg_delta_src *src;
	ZSTD_DCtx *dc;
	uint8_t *ibuf, *obuf;
	size_t icap, ocap, opos, olen;
	ZSTD_inBuffer in;
	uint64_t off, left; /* next compressed byte to read; bytes not read yet */
	XXH3_state_t *xs;   /* XXH3-64 of the compressed body */
	size_t last;        /* ZSTD_decompressStream's last answer: 0 at a frame's end */
	uint64_t *read;     /* bytes read from the source */
} zin;

/* n bytes at off of a delta source (counted in *read). */
stg_err stg__dsrc_read(stg_ctx *ctx, const stg_delta_src *s, void *buf, size_t n, uint64_t off,
                       uint64_t *read);
/* The body of size bytes behind the header of src. */
stg_err stg__zin_init(zin *z, stg_ctx *ctx, const stg_delta_src *src, uint64_t size,
                      uint64_t *read);
void stg__zin_free(zin *z);
/* Exactly n decoded bytes. */
stg_err stg__zin_read(zin *z, void *dst, size_t n);
/* The body ends here: nothing more decodes, its last frame is complete,
 * every byte is read and its XXH3-64 is want. */
stg_err stg__zin_end(zin *z, uint64_t want);

#endif
