/*
 * rsjob.h - the librsync job driver, the file-hashing loop and progress
 * reports (rsjob.c): what delta.c and the two ends of push and pull share.
 */
#ifndef STG_RSJOB_H
#define STG_RSJOB_H

#include "internal.h"

#include <librsync.h>
#include <openssl/evp.h>
#include <xxhash.h>

#define XFER_BLOCK (1u << 20) /* read, write and librsync buffers (a wire chunk) */

/* XXH3-128 (and SHA-256 into sha, if not NULL) of the rest of fd, read with
 * buf (XFER_BLOCK bytes).  0 or -1/errno. */
int stg__hash_fd(int fd, XXH128_hash_t *h, uint64_t *size, EVP_MD_CTX *sha, uint8_t *buf);
void stg__progress(stg_ctx *ctx, const char *what, uint64_t done, uint64_t total);

typedef stg_err (*stg_sink_fn)(void *arg, const uint8_t *p, size_t n);
/* Give a librsync job n bytes of input (eof: the last), its output (in out,
 * XFER_BLOCK bytes) to sink; *done when the job has finished. */
stg_err stg__job_feed(stg_ctx *ctx, rs_job_t *job, const uint8_t *in, size_t n, bool eof,
                      uint8_t *out, stg_sink_fn sink, void *arg, bool *done);
/* rs_patch_begin's reader of the old file: fdp points at its descriptor. */
rs_result stg__basis_copy(void *fdp, rs_long_t pos, size_t *len, void **buf);
/* Run a job over all of fd (or of mem when fd < 0). */
stg_err stg__job_run(stg_ctx *ctx, rs_job_t *job, int fd, const uint8_t *mem, size_t mem_len,
                     uint8_t *inbuf, uint8_t *out, stg_sink_fn sink, void *arg);

#endif
