/*
 * rsjob.h - the librsync job driver and progress reports (rsjob.c): what
 * the delta files and the two ends of push and pull share.
 */
#ifndef STG_RSJOB_H
#define STG_RSJOB_H

#include "hash.h"

#include <librsync.h>
#include <openssl/evp.h>

#define XFER_BLOCK (1u << 20) /* read, write and librsync buffers (a wire chunk) */

void stg__progress(stg_ctx *ctx, const char *what, uint64_t done, uint64_t total);

/* Give a librsync job n bytes of input (eof: the last), its output (in out,
 * XFER_BLOCK bytes) to sink; *done when the job has finished. */
stg_err stg__job_feed(stg_ctx *ctx, rs_job_t *job, const uint8_t *in, size_t n, bool eof,
                      uint8_t *out, stg_sink_fn sink, void *arg, bool *done);
/* A job as a sink (stg_sink_fn, arg a stg_jobsink): each piece is input,
 * an empty one the end; the job's output goes to sink. */
typedef struct stg_jobsink {
	stg_ctx *ctx;
	rs_job_t *job;
	uint8_t *out; /* XFER_BLOCK bytes */
	stg_sink_fn sink;
	void *arg;
	bool done;
} stg_jobsink;
stg_err stg__job_sink(void *arg, const uint8_t *p, size_t n);
/* rs_patch_begin's reader of the old file: fdp points at its descriptor. */
rs_result stg__basis_copy(void *fdp, rs_long_t pos, size_t *len, void **buf);
/* Run a job over all of fd (or of mem when fd < 0). */
stg_err stg__job_run(stg_ctx *ctx, rs_job_t *job, int fd, const uint8_t *mem, size_t mem_len,
                     uint8_t *inbuf, uint8_t *out, stg_sink_fn sink, void *arg);

#endif
