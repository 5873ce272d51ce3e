/*
 * delta_file.c - the delta file format: a fixed header of 128 bytes (the
 * base's and the target's digests, counts, the body's size and XXH3-64,
 * its own XXH3-64), then the body, one zstd stream of records and payload
 * chunks.  FORMAT.md ("Delta files") has the layout; delta_write.c says
 * what the records are, delta_apply.c how they are checked.
 *
 * The writer's zstd window is the reader's limit (DELTA_WINDOW_LOG), so a
 * hostile delta cannot make the reader allocate more.  Every byte of the
 * body is read through the XXH3-64 the header gives before the applier
 * is done, and a body that ends inside a frame, or with bytes after the
 * last record, is damaged.
 */
#include "delta_file.h"
#include "ctx.h"
#include "bytes.h"

#include <xxhash.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DELTA_MAGIC      "STGDELTA"
#define DELTA_VERSION    1
#define DELTA_WINDOW_LOG 22 /* the writer's window; the reader's limit */

/* ---- the header ---------------------------------------------------------- */

void stg__dheader_encode(const dheader *h, uint8_t out[DELTA_HEADER_SIZE])
{
	memset(out, 0, DELTA_HEADER_SIZE);
	memcpy(out, DELTA_MAGIC, 8);
	stg__put32(out + 8, DELTA_VERSION);
	memcpy(out + 16, h->base, STG_DIGEST_LEN);
	memcpy(out + 48, h->target, STG_DIGEST_LEN);
	stg__put64(out + 80, h->n_records);
	stg__put64(out + 88, h->n_removed);
	stg__put64(out + 96, h->body_size);
	stg__put64(out + 104, h->body_xxh);
	stg__put64(out + 120, XXH3_64bits(out, 120));
}

stg_err stg__dheader_decode(stg_ctx *ctx, const uint8_t in[DELTA_HEADER_SIZE], dheader *h)
{
	static const uint8_t zero[8];
	if (memcmp(in, DELTA_MAGIC, 8))
		return stg__fail(ctx, STG_ECORRUPT, "not a stager delta file");
	if (stg__get64(in + 120) != XXH3_64bits(in, 120))
		return stg__fail(ctx, STG_ECORRUPT, "damaged delta: its header checksum is wrong");
	if (stg__get32(in + 8) != DELTA_VERSION)
		return stg__fail(ctx, STG_ECORRUPT,
		                 "delta format version %u is not supported (this stager reads "
		                 "version %d)",
		                 stg__get32(in + 8), DELTA_VERSION);
	if (stg__get32(in + 12) || memcmp(in + 112, zero, 8))
		return stg__fail(ctx, STG_ECORRUPT, "damaged delta: reserved header bytes are set");
	memcpy(h->base, in + 16, STG_DIGEST_LEN);
	memcpy(h->target, in + 48, STG_DIGEST_LEN);
	h->n_records = stg__get64(in + 80);
	h->n_removed = stg__get64(in + 88);
	h->body_size = stg__get64(in + 96);
	h->body_xxh = stg__get64(in + 104);
	return STG_OK;
}

stg_err stg_delta_read_header(stg_ctx *ctx, int fd, uint8_t base[STG_DIGEST_LEN],
                              uint8_t target[STG_DIGEST_LEN], uint64_t *size)
{
	uint8_t hb[DELTA_HEADER_SIZE];
	struct stat st;
	if (fstat(fd, &st))
		return stg__fail_errno(ctx, STG_EIO, errno, "reading the delta");
	if (stg__pread_full(fd, hb, sizeof hb, 0))
		return errno ? stg__fail_errno(ctx, STG_EIO, errno, "reading the delta")
		             : stg__fail(ctx, STG_ECORRUPT, "not a stager delta file (too short)");
	dheader h;
	stg_err err = stg__dheader_decode(ctx, hb, &h);
	if (err)
		return err;
	if (h.body_size != (uint64_t)st.st_size - DELTA_HEADER_SIZE)
		return stg__fail(ctx, STG_ECORRUPT, "damaged delta: truncated");
	memcpy(base, h.base, STG_DIGEST_LEN);
	memcpy(target, h.target, STG_DIGEST_LEN);
	if (size)
		*size = (uint64_t)st.st_size;
	return STG_OK;
}

/* ---- writing the body ---------------------------------------------------- */

stg_err stg__zout_init(zout *z, stg_ctx *ctx, int fd)
{
	*z = (zout){.ctx = ctx, .fd = fd, .cap = ZSTD_CStreamOutSize()};
	z->cc = ZSTD_createCCtx();
	z->buf = malloc(z->cap);
	z->xs = XXH3_createState();
	if (!z->cc || !z->buf || !z->xs)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	ZSTD_CCtx_setParameter(z->cc, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(z->cc, ZSTD_c_windowLog, DELTA_WINDOW_LOG);
	ZSTD_CCtx_setParameter(z->cc, ZSTD_c_checksumFlag, 1);
	XXH3_64bits_reset(z->xs);
	return STG_OK;
}

void stg__zout_free(zout *z)
{
	ZSTD_freeCCtx(z->cc);
	free(z->buf);
	XXH3_freeState(z->xs);
}

static stg_err zout_run(zout *z, ZSTD_inBuffer *in, ZSTD_EndDirective mode)
{
	for (;;) {
		ZSTD_outBuffer out = {z->buf, z->cap, 0};
		size_t left = ZSTD_compressStream2(z->cc, &out, in, mode);
		if (ZSTD_isError(left))
			return stg__fail(z->ctx, STG_EIO, "compressing the delta: %s",
			                 ZSTD_getErrorName(left));
		if (out.pos) {
			XXH3_64bits_update(z->xs, z->buf, out.pos);
			if (stg__write_full(z->fd, z->buf, out.pos))
				return stg__fail_errno(z->ctx, stg__err_from_errno(errno, STG_EIO),
				                       errno, "writing the delta");
			z->size += out.pos;
		}
		if (mode == ZSTD_e_end ? left == 0 : in->pos == in->size)
			return STG_OK;
	}
}

stg_err stg__zout_put(zout *z, const void *p, size_t n)
{
	ZSTD_inBuffer in = {p, n, 0};
	return zout_run(z, &in, ZSTD_e_continue);
}

stg_err stg__zout_chunk(void *arg, const uint8_t *p, size_t n)
{
	zout *z = arg;
	if (!n)
		return STG_OK;
	uint8_t len[4];
	stg__put32(len, (uint32_t)n);
	stg_err err = stg__zout_put(z, len, 4);
	return err ? err : stg__zout_put(z, p, n);
}

stg_err stg__zout_end(zout *z)
{
	ZSTD_inBuffer none = {NULL, 0, 0};
	return zout_run(z, &none, ZSTD_e_end);
}

/* ---- reading the body ---------------------------------------------------- */

stg_err stg__dsrc_read(stg_ctx *ctx, const stg_delta_src *s, void *buf, size_t n, uint64_t off,
                       uint64_t *read)
{
	if (s->fd < 0) {
		if (off > s->len || n > s->len - off)
			return stg__fail(ctx, STG_ECORRUPT, "damaged delta: it is truncated");
		memcpy(buf, s->mem + off, n);
	} else {
		if (s->bw)
			stg__bucket_take(s->bw_ctx, s->bw, (double)n);
		if (stg__pread_full(s->fd, buf, n, off))
			return errno ? stg__fail_errno(ctx, STG_EIO, errno, "reading the delta")
			             : stg__fail(ctx, STG_ECORRUPT,
			                         "damaged delta: it is truncated");
	}
	*read += n;
	return STG_OK;
}

stg_err stg__zin_init(zin *z, stg_ctx *ctx, const stg_delta_src *src, uint64_t size, uint64_t *read)
{
	*z = (zin){.ctx = ctx,
	           .src = src,
	           .icap = ZSTD_DStreamInSize(),
	           .ocap = ZSTD_DStreamOutSize(),
	           .off = DELTA_HEADER_SIZE,
	           .left = size,
	           .read = read};
	z->dc = ZSTD_createDCtx();
	z->ibuf = malloc(z->icap);
	z->obuf = malloc(z->ocap);
	z->xs = XXH3_createState();
	if (!z->dc || !z->ibuf || !z->obuf || !z->xs)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	ZSTD_DCtx_setParameter(z->dc, ZSTD_d_windowLogMax, DELTA_WINDOW_LOG);
	XXH3_64bits_reset(z->xs);
	return STG_OK;
}

void stg__zin_free(zin *z)
{
	ZSTD_freeDCtx(z->dc);
	free(z->ibuf);
	free(z->obuf);
	XXH3_freeState(z->xs);
}

static stg_err zin_fill(zin *z)
{
	if (!z->left)
		return stg__fail(z->ctx, STG_ECORRUPT, "damaged delta: it ends early");
	if (stg__cancelled(z->ctx))
		return stg__fail(z->ctx, STG_EINTR, "interrupted");
	size_t n = z->left < z->icap ? (size_t)z->left : z->icap;
	stg_err err = stg__dsrc_read(z->ctx, z->src, z->ibuf, n, z->off, z->read);
	if (err)
		return err;
	XXH3_64bits_update(z->xs, z->ibuf, n);
	z->off += n;
	z->left -= n;
	z->in = (ZSTD_inBuffer){z->ibuf, n, 0};
	return STG_OK;
}

static stg_err zin_decode(zin *z)
{
	ZSTD_outBuffer out = {z->obuf, z->ocap, 0};
	size_t r = ZSTD_decompressStream(z->dc, &out, &z->in);
	if (ZSTD_isError(r))
		return stg__fail(z->ctx, STG_ECORRUPT, "damaged delta: %s", ZSTD_getErrorName(r));
	z->last = r;
	z->opos = 0;
	z->olen = out.pos;
	return STG_OK;
}

stg_err stg__zin_read(zin *z, void *dst, size_t n)
{
	uint8_t *d = dst;
	while (n) {
		if (z->opos < z->olen) {
			size_t k = z->olen - z->opos < n ? z->olen - z->opos : n;
			memcpy(d, z->obuf + z->opos, k);
			z->opos += k;
			d += k;
			n -= k;
			continue;
		}
		stg_err err = z->in.pos == z->in.size ? zin_fill(z) : STG_OK;
		if (!err)
			err = zin_decode(z);
		if (err)
			return err;
	}
	return STG_OK;
}

stg_err stg__zin_end(zin *z, uint64_t want)
{
	for (;;) {
		if (z->opos < z->olen)
			return stg__fail(z->ctx, STG_ECORRUPT,
			                 "damaged delta: data after its last record");
		if (z->in.pos == z->in.size) {
			if (!z->left)
				break;
			stg_err err = zin_fill(z);
			if (err)
				return err;
		}
		stg_err err = zin_decode(z);
		if (err)
			return err;
	}
	if (z->last != 0)
		return stg__fail(z->ctx, STG_ECORRUPT, "damaged delta: it ends inside a frame");
	if (XXH3_64bits_digest(z->xs) != want)
		return stg__fail(z->ctx, STG_ECORRUPT, "damaged delta: its checksum is wrong");
	return STG_OK;
}
