/*
 * hash.c - the one loop that reads a file (or a range of a descriptor) and
 * hashes it with XXH3-128: for the pack writer, deltas, collect, both ends
 * of push and pull, and the manifest checks.
 *
 * The loop is where the rules of reading a file live once: reads retried
 * on EINTR, each one charged to a bandwidth limit when there is one,
 * cancellation checked between pieces, progress reported, and a file that
 * is not the size it was said to be caught without a read of its own: a
 * read with room to spare asks for one byte more than is left (so a file
 * read at the size the walk saw costs one read per MiB, not one more).
 * Bytes that were not hashed are never passed on, so what a sink received
 * is always what the hash covers.
 */
#include "hash.h"
#include "ctx.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

stg_err stg__hash_read(stg_ctx *ctx, const stg_hash_in *in, XXH3_state_t *xs, uint64_t *got)
{
	*got = 0;
	while (in->len == STG_HASH_ALL || *got < in->len) {
		uint8_t *buf = in->buf;
		size_t want = in->buf_len;
		if (in->fill) { /* after what was read: the range lands whole */
			buf += *got;
			want -= (size_t)*got;
		}
		if (in->len != STG_HASH_ALL) {
			uint64_t left = in->len - *got;
			if (in->whole && left < want)
				want = (size_t)left + 1;
			else if (left < want)
				want = (size_t)left;
		}
		ssize_t n = in->off < 0 ? read(in->fd, buf, want)
		                        : pread(in->fd, buf, want, (off_t)(in->off + *got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			if (ctx)
				stg__fail_errno(ctx, STG_EIO, e, "reading '%s'", in->path);
			errno = e;
			return STG_EIO;
		}
		if (n == 0)
			break;
		if (in->len != STG_HASH_ALL && (uint64_t)n > in->len - *got) {
			*got = in->len + 1; /* it grew */
			return STG_OK;
		}
		stg__bucket_take(ctx, in->bw, (double)n);
		XXH3_128bits_update(xs, buf, (size_t)n);
		*got += (uint64_t)n;
		if (in->sink) {
			stg_err err = in->sink(in->arg, buf, (size_t)n);
			if (err)
				return err;
		}
		if (in->done) {
			*in->done += (uint64_t)n;
			if (in->what && ctx && ctx->progress_fn)
				ctx->progress_fn(ctx->progress_arg, in->what, *in->done, in->total);
		}
		if (ctx && stg__cancelled(ctx)) {
			stg_err err = stg__fail(ctx, STG_EINTR, "interrupted");
			errno = EINTR;
			return err;
		}
	}
	return in->sink ? in->sink(in->arg, in->buf, 0) : STG_OK;
}

stg_err stg__sink_fd(void *arg, const uint8_t *p, size_t n)
{
	stg_fd_sink *o = arg;
	if (stg__write_full(o->fd, p, n)) {
		o->err = errno;
		return STG_EIO;
	}
	return STG_OK;
}

void stg__hash_digest(XXH3_state_t *xs, uint8_t out[16])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xs));
	memcpy(out, c.digest, 16);
}

int stg__hash_fd(int fd, uint8_t *buf, size_t buf_len, uint8_t xxh3[16], uint64_t *size)
{
	XXH3_state_t *xs = XXH3_createState();
	if (!xs) {
		errno = ENOMEM;
		return -1;
	}
	XXH3_128bits_reset(xs);
	stg_hash_in in = {.fd = fd, .off = -1, .len = STG_HASH_ALL, .buf = buf, .buf_len = buf_len};
	int rc = stg__hash_read(NULL, &in, xs, size) ? -1 : 0;
	if (!rc)
		stg__hash_digest(xs, xxh3);
	int e = errno;
	XXH3_freeState(xs);
	errno = e;
	return rc;
}

int stg__hash_file(int dirfd, const char *path, uint8_t xxh3[16], uint64_t *size)
{
	int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	const size_t len = 1 << 20;
	uint8_t *buf = stg__io_alloc(len);
	int rc = buf ? stg__hash_fd(fd, buf, len, xxh3, size) : -1;
	int e = buf ? errno : ENOMEM;
	free(buf);
	close(fd);
	errno = e;
	return rc;
}
