/*
 * rsdelta.h - deltas of one file against another in librsync's delta
 * format, made and applied fast (rsdelta.c).
 */
#ifndef STG_RSDELTA_H
#define STG_RSDELTA_H

#include "hash.h"

/* The blocks of a base file: a rolling sum and an XXH3-64 each. */
typedef struct stg_rsig stg_rsig;

/* A signature of a base file of size bytes, fed its bytes in order through
 * stg__rsig_sink (a stg_sink_fn; the empty piece at the end finishes it).
 * NULL when out of memory. */
stg_rsig *stg__rsig_new(uint64_t size);
stg_err stg__rsig_sink(void *arg, const uint8_t *p, size_t n);
void stg__rsig_free(stg_rsig *s);

/* A delta of a new file against sig, fed the new file's bytes in order
 * through stg__rdelta_sink (the empty piece at the end finishes it); the
 * delta's bytes go to out.  NULL when out of memory. */
typedef struct stg_rdelta stg_rdelta;
stg_rdelta *stg__rdelta_new(const stg_rsig *sig, stg_sink_fn out, void *arg);
stg_err stg__rdelta_sink(void *arg, const uint8_t *p, size_t n);
void stg__rdelta_free(stg_rdelta *d);

/* Applying a delta (one of these, or librsync's own) to the base file at
 * basefd, of base_size bytes: fed the delta's bytes in order through
 * stg__rpatch_sink (the empty piece at the end finishes it); the new
 * file's bytes go to out.  A delta that is not well formed, copies from
 * past the base's end, or ends early is STG_ECORRUPT, named on ctx.  NULL
 * when out of memory. */
typedef struct stg_rpatch stg_rpatch;
stg_rpatch *stg__rpatch_new(stg_ctx *ctx, int basefd, uint64_t base_size, stg_sink_fn out,
                            void *arg);
stg_err stg__rpatch_sink(void *arg, const uint8_t *p, size_t n);
void stg__rpatch_free(stg_rpatch *p);

/* A COPY done by the caller instead of as bytes through out: the range
 * (checked to lie within the base) and a buffer to read it with, so the
 * caller can copy in the kernel or share the blocks (copy_file_range)
 * and still see the bytes.  The delta's commands reach out and copy in
 * the new file's order. */
typedef stg_err (*stg_copy_fn)(void *arg, int basefd, uint64_t pos, uint64_t len, uint8_t *buf,
                               size_t cap);
void stg__rpatch_set_copy(stg_rpatch *r, stg_copy_fn copy);

#endif
