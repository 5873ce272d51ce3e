/*
 * rsjob.c - the one driver of librsync jobs (signatures, deltas, patches:
 * the delta files and both ends of push and pull), and progress reports.
 */
#include "rsjob.h"
#include "ctx.h"

#include <errno.h>
#include <unistd.h>

/* Give a job n bytes of input (eof: the last), passing its output to sink.
 * Returns with *done set when the job has finished. */
stg_err stg__job_feed(stg_ctx *ctx, rs_job_t *job, const uint8_t *in, size_t n, bool eof,
                      uint8_t *out, stg_sink_fn sink, void *arg, bool *done)
{
	rs_buffers_t b = {.next_in = (char *)in, .avail_in = n, .eof_in = eof};
	*done = false;
	for (;;) {
		size_t before_in = b.avail_in;
		b.next_out = (char *)out;
		b.avail_out = XFER_BLOCK;
		rs_result r = rs_job_iter(job, &b);
		size_t produced = XFER_BLOCK - b.avail_out;
		if (produced && sink) {
			stg_err err = sink(arg, out, produced);
			if (err)
				return err;
		}
		if (r == RS_DONE) {
			*done = true;
			return STG_OK;
		}
		if (r != RS_BLOCKED)
			return stg__fail(ctx, STG_ECORRUPT, "librsync: %s", rs_strerror(r));
		if (produced || b.avail_in != before_in)
			continue;
		if (!eof && b.avail_in == 0)
			return STG_OK; /* wants more input */
		return stg__fail(ctx, STG_ECORRUPT, "librsync: a truncated stream");
	}
}

stg_err stg__job_sink(void *arg, const uint8_t *p, size_t n)
{
	stg_jobsink *j = arg;
	return stg__job_feed(j->ctx, j->job, p, n, n == 0, j->out, j->sink, j->arg, &j->done);
}

rs_result stg__basis_copy(void *fdp, rs_long_t pos, size_t *len, void **buf)
{
	ssize_t n = pread(*(int *)fdp, *buf, *len, pos);
	if (n < 0)
		return RS_IO_ERROR;
	if (n == 0)
		return RS_INPUT_ENDED;
	*len = (size_t)n;
	return RS_DONE;
}

/* Run a job over all of fd (or of mem when fd < 0). */
stg_err stg__job_run(stg_ctx *ctx, rs_job_t *job, int fd, const uint8_t *mem, size_t mem_len,
                     uint8_t *inbuf, uint8_t *out, stg_sink_fn sink, void *arg)
{
	bool done = false;
	if (fd < 0)
		return stg__job_feed(ctx, job, mem, mem_len, true, out, sink, arg, &done);
	while (!done) {
		ssize_t n = read(fd, inbuf, XFER_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return stg__fail_errno(ctx, STG_EIO, errno, "reading");
		stg_err err =
		        stg__job_feed(ctx, job, inbuf, (size_t)n, n == 0, out, sink, arg, &done);
		if (err)
			return err;
		if (stg__cancelled(ctx))
			return stg__fail(ctx, STG_EINTR, "interrupted");
	}
	return STG_OK;
}

void stg__progress(stg_ctx *ctx, const char *what, uint64_t done, uint64_t total)
{
	if (ctx->progress_fn)
		ctx->progress_fn(ctx->progress_arg, what, done, total);
}
