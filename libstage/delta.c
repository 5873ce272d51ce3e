/*
 * delta.c - a new version of a pack as its changes from an older one.
 *
 * `stager pack DIR -o v2.tar.zst --base v1.tar.zst` writes v2 and, beside
 * it, a delta file that turns v1's tree into v2's; `stager stage v2` on a
 * node whose cache holds v1 reads that file instead of v2's frames.
 *
 * The delta holds only what a cached v1 cannot give.  For each non-empty
 * regular file of v2, in v2's order:
 *   - v1 has the same path with the same size and XXH3-128: nothing (the
 *     file is taken from v1's entry: a hardlink when its mode and mtime are
 *     the same too, else a reflink or a copy);
 *   - v1 has the same content at another path: COPY from that path;
 *   - v1 has the same path with other content: PATCH, a librsync delta
 *     against v1's file (RabinKarp + BLAKE2 signature);
 *   - else: WHOLE, the file's bytes.
 * Records and the list of v1's files that v2 no longer has form one zstd
 * stream behind a fixed header; payloads are cut in chunks of at most
 * 1 MiB.  The format is in FORMAT.md ("Delta files").
 *
 * Trust.  A delta is hostile input.  Its header names the base and target
 * digests, and it is used only for exactly that pair.  It cannot define
 * the result: v2's manifest does (read from v2's own trailer), and every
 * file made from the delta is checked against its size and XXH3-128 while
 * it is written, its output cut off at the size the manifest expects.  A
 * file taken from the base as it is must have, in the base entry's own
 * manifest (written when that entry was built and verified), the XXH3-128
 * that v2 wants.  Nothing is allocated from a count the delta gives; the
 * caller builds into a temporary directory and publishes only on success.
 */
#include "cache.h"
#include "rsjob.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define DELTA_MAGIC       "STGDELTA"
#define DELTA_VERSION     1
#define DELTA_HEADER_SIZE 128
#define DELTA_REC_SIZE    40
#define DELTA_CHUNK_MAX   XFER_BLOCK
#define DELTA_WINDOW_LOG  22 /* the writer's window; the reader's limit */
#define NONE              UINT32_MAX

enum { DK_COPY = 1, DK_PATCH = 2, DK_WHOLE = 3 };

/* ---- the header ----------------------------------------------------------- */

typedef struct dheader {
	uint8_t base[STG_DIGEST_LEN], target[STG_DIGEST_LEN];
	uint64_t n_records, n_removed, body_size, body_xxh;
} dheader;

static void header_encode(const dheader *h, uint8_t out[DELTA_HEADER_SIZE])
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

static stg_err header_decode(stg_ctx *ctx, const uint8_t in[DELTA_HEADER_SIZE], dheader *h)
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

/* ---- writing: the compressed body ----------------------------------------- */

typedef struct zout {
	stg_ctx *ctx;
	int fd;
	ZSTD_CCtx *cc;
	uint8_t *buf;
	size_t cap;
	XXH3_state_t *xs; /* XXH3-64 of the compressed body */
	uint64_t size;
} zout;

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

static stg_err zout_put(zout *z, const void *p, size_t n)
{
	ZSTD_inBuffer in = {p, n, 0};
	return zout_run(z, &in, ZSTD_e_continue);
}

/* A payload chunk: its length, then its bytes (never an empty one: that
 * ends the payload). */
static stg_err chunk_sink(void *arg, const uint8_t *p, size_t n)
{
	zout *z = arg;
	if (!n)
		return STG_OK;
	uint8_t len[4];
	stg__put32(len, (uint32_t)n);
	stg_err err = zout_put(z, len, 4);
	return err ? err : zout_put(z, p, n);
}

/* ---- writing: the base's files, from its frames ----------------------------- */

typedef struct frames {
	stg_ctx *ctx;
	const stg_pack *p;
	ZSTD_DCtx *dc;
	uint8_t *comp, *raw;
	size_t comp_cap, raw_cap;
	size_t cur; /* the frame in raw (n_frames: none) */
} frames;

static stg_err frame_load(frames *fr, size_t k)
{
	if (fr->cur == k)
		return STG_OK;
	const stg_frame *f = &fr->p->t.frames[k];
	if (fr->comp_cap < f->comp_size) {
		free(fr->comp);
		fr->comp_cap = 0;
		if (!(fr->comp = malloc(f->comp_size)))
			return stg__fail(fr->ctx, STG_ENOMEM, "out of memory");
		fr->comp_cap = f->comp_size;
	}
	if (fr->raw_cap < f->raw_size) {
		free(fr->raw);
		fr->raw_cap = 0;
		if (!(fr->raw = malloc(f->raw_size)))
			return stg__fail(fr->ctx, STG_ENOMEM, "out of memory");
		fr->raw_cap = f->raw_size;
	}
	fr->cur = fr->p->t.n_frames;
	if (stg__pack_pread(fr->p, fr->comp, f->comp_size, f->comp_off))
		return errno ? stg__fail_errno(fr->ctx, STG_EIO, errno, "reading the base pack")
		             : stg__fail(fr->ctx, STG_ECORRUPT, "the base pack is truncated");
	size_t n = ZSTD_decompressDCtx(fr->dc, fr->raw, f->raw_size, fr->comp, f->comp_size);
	if (ZSTD_isError(n) || n != f->raw_size)
		return stg__fail(fr->ctx, STG_ECORRUPT, "the base pack is damaged: frame %zu", k);
	fr->cur = k;
	return STG_OK;
}

/* Pass the content of the base's entry r to sink in pieces of at most
 * XFER_BLOCK, checking its XXH3-128. */
static stg_err base_content(frames *fr, const stg_rec *r, stg_sink_fn sink, void *arg,
                            XXH3_state_t *xs)
{
	const stg_trailer *t = &fr->p->t;
	XXH3_128bits_reset(xs);
	uint64_t off = r->data_off, end = r->data_off + r->size;
	while (off < end) {
		size_t k = stg__frame_of(t, off);
		if (k == t->n_frames)
			return stg__fail(fr->ctx, STG_ECORRUPT, "the base pack is damaged");
		stg_err err = frame_load(fr, k);
		if (err)
			return err;
		const stg_frame *f = &t->frames[k];
		uint64_t stop = end < f->raw_off + f->raw_size ? end : f->raw_off + f->raw_size;
		while (off < stop) {
			size_t n = stop - off < XFER_BLOCK ? (size_t)(stop - off) : XFER_BLOCK;
			const uint8_t *p = fr->raw + (off - f->raw_off);
			XXH3_128bits_update(xs, p, n);
			if ((err = sink(arg, p, n)))
				return err;
			off += n;
		}
	}
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xs));
	if (memcmp(c.digest, r->xxh3, 16))
		return stg__fail(fr->ctx, STG_ECORRUPT,
		                 "the base pack is damaged: '%s' does not match its manifest",
		                 stg__rec_path(fr->p, r));
	return STG_OK;
}

/* ---- writing: one record ---------------------------------------------------- */

typedef struct writer {
	stg_ctx *ctx;
	const stg_pack *base, *new_;
	int rootfd; /* the tree new_ was packed from */
	zout z;
	frames fr;
	XXH3_state_t *xs;
	uint8_t *buf, *out, *out2; /* XFER_BLOCK each */
	rs_job_t *sig_job, *load_job;
} writer;

static stg_err load_sink(void *arg, const uint8_t *p, size_t n)
{
	writer *w = arg;
	bool done;
	return stg__job_feed(w->ctx, w->load_job, p, n, false, w->out2, NULL, NULL, &done);
}

static stg_err sig_sink(void *arg, const uint8_t *p, size_t n)
{
	writer *w = arg;
	bool done;
	return stg__job_feed(w->ctx, w->sig_job, p, n, false, w->out, load_sink, w, &done);
}

/* The signature of the base's file r, loaded and ready for a delta. */
static stg_err base_signature(writer *w, const stg_rec *r, rs_signature_t **sig)
{
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = 0;
	rs_sig_args((rs_long_t)r->size, &magic, &block_len, &strong_len);
	stg_err err = STG_OK;
	bool done = false;
	*sig = NULL;
	w->sig_job = rs_sig_begin(block_len, strong_len, magic);
	w->load_job = rs_loadsig_begin(sig);
	if (!w->sig_job || !w->load_job)
		err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	if (!err)
		err = base_content(&w->fr, r, sig_sink, w, w->xs);
	if (!err)
		err = stg__job_feed(w->ctx, w->sig_job, NULL, 0, true, w->out, load_sink, w, &done);
	if (!err)
		err = stg__job_feed(w->ctx, w->load_job, NULL, 0, true, w->out2, NULL, NULL, &done);
	if (!err && rs_build_hash_table(*sig) != RS_DONE)
		err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	if (w->sig_job)
		rs_job_free(w->sig_job);
	if (w->load_job)
		rs_job_free(w->load_job);
	w->sig_job = w->load_job = NULL;
	if (err && *sig) {
		rs_free_sumset(*sig);
		*sig = NULL;
	}
	return err;
}

/* Read the new version of r from the tree, checking it is what was packed,
 * through job (a librsync delta) or straight into the body. */
static stg_err new_content(writer *w, const stg_rec *r, rs_job_t *job)
{
	const char *path = stg__rec_path(w->new_, r);
	int fd = stg__open_beneath(w->rootfd, path, O_RDONLY, 0);
	if (fd < 0)
		return stg__fail_errno(w->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot read '%s'", path);
	XXH3_128bits_reset(w->xs);
	uint64_t size = 0;
	stg_err err = STG_OK;
	bool done = false;
	for (;;) {
		ssize_t n = read(fd, w->buf, XFER_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = stg__fail_errno(w->ctx, STG_EIO, errno, "reading '%s'", path);
			break;
		}
		XXH3_128bits_update(w->xs, w->buf, (size_t)n);
		size += (uint64_t)n;
		if (job)
			err = stg__job_feed(w->ctx, job, w->buf, (size_t)n, n == 0, w->out,
			                    chunk_sink, &w->z, &done);
		else
			err = chunk_sink(&w->z, w->buf, (size_t)n);
		if (err || n == 0)
			break;
		if (stg__cancelled(w->ctx)) {
			err = stg__fail(w->ctx, STG_EINTR, "interrupted");
			break;
		}
	}
	close(fd);
	if (err)
		return err;
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(w->xs));
	if (size != r->size || memcmp(c.digest, r->xxh3, 16))
		return stg__fail(w->ctx, STG_EIO, "'%s' changed while it was packed; pack again",
		                 path);
	return STG_OK;
}

static stg_err put_record(writer *w, uint64_t idx, int kind, const stg_rec *r, const char *basis)
{
	uint8_t h[DELTA_REC_SIZE] = {0};
	size_t bl = basis ? strlen(basis) : 0;
	stg__put64(h, idx);
	h[8] = (uint8_t)kind;
	stg__put32(h + 12, (uint32_t)bl);
	stg__put64(h + 16, r->size);
	memcpy(h + 24, r->xxh3, 16);
	stg_err err = zout_put(&w->z, h, sizeof h);
	return err || !bl ? err : zout_put(&w->z, basis, bl);
}

static stg_err write_record(writer *w, uint64_t idx, int kind, const stg_rec *r,
                            const stg_rec *basis)
{
	stg_err err = put_record(w, idx, kind, r, basis ? stg__rec_path(w->base, basis) : NULL);
	if (err || kind == DK_COPY)
		return err;
	rs_signature_t *sig = NULL;
	rs_job_t *job = NULL;
	if (kind == DK_PATCH) {
		if ((err = base_signature(w, basis, &sig)))
			return err;
		if (!(job = rs_delta_begin(sig)))
			err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	}
	if (!err)
		err = new_content(w, r, job);
	if (!err)
		err = zout_put(&w->z, "\0\0\0\0", 4); /* the payload's end */
	if (job)
		rs_job_free(job);
	if (sig)
		rs_free_sumset(sig);
	return err;
}

/* ---- writing: the whole ------------------------------------------------------- */

/* Regular files of p: by path, and (non-empty ones) by size and content. */
static int file_maps(const stg_pack *p, stg_strmap *by_path, stg_strmap *by_content)
{
	if (stg__strmap_init(by_path, p->t.n_entries) ||
	    (by_content && stg__strmap_init(by_content, p->t.n_entries)))
		return -1;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (r->type != STG_FILE)
			continue;
		if (stg__strmap_put(by_path, stg__rec_path(p, r), r->path_len, (uint32_t)i) < 0)
			return -1;
		/* the XXH3-128 and the size, side by side in the record */
		if (by_content && r->size &&
		    stg__strmap_put(by_content, (const char *)r->xxh3, 16, (uint32_t)i) < 0)
			return -1;
	}
	return 0;
}

static bool same_content(const stg_rec *a, const stg_rec *b)
{
	return a->size == b->size && !memcmp(a->xxh3, b->xxh3, 16);
}

static stg_err write_body(writer *w, dheader *h, stg_delta_info *info)
{
	stg_ctx *ctx = w->ctx;
	stg_strmap base_path = {0}, base_content = {0}, new_path = {0};
	stg_err err = STG_OK;
	if (file_maps(w->base, &base_path, &base_content) || file_maps(w->new_, &new_path, NULL)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	/* the base's files the new version no longer has */
	const stg_trailer *bt = &w->base->t, *nt = &w->new_->t;
	for (size_t i = 0; i < bt->n_entries && !err; i++) {
		const stg_rec *r = &bt->recs[i];
		if (r->type != STG_FILE ||
		    stg__strmap_get(&new_path, stg__rec_path(w->base, r), r->path_len) != NONE)
			continue;
		uint8_t len[2] = {(uint8_t)r->path_len, (uint8_t)(r->path_len >> 8)};
		if (!(err = zout_put(&w->z, len, 2)))
			err = zout_put(&w->z, stg__rec_path(w->base, r), r->path_len);
		h->n_removed++;
	}
	info->removed = h->n_removed;
	for (size_t i = 0; i < nt->n_entries && !err; i++) {
		const stg_rec *r = &nt->recs[i];
		if (r->type != STG_FILE || !r->size)
			continue;
		uint32_t j = stg__strmap_get(&base_path, stg__rec_path(w->new_, r), r->path_len);
		const stg_rec *old = j == NONE ? NULL : &bt->recs[j];
		if (old && same_content(old, r)) {
			info->unchanged++;
			continue;
		}
		uint32_t k = stg__strmap_get(&base_content, (const char *)r->xxh3, 16);
		if (k != NONE && same_content(&bt->recs[k], r)) {
			err = write_record(w, i, DK_COPY, r, &bt->recs[k]);
			info->copied++;
		} else if (old && old->size) {
			err = write_record(w, i, DK_PATCH, r, old);
			info->patched++;
			info->patched_bytes += r->size;
		} else {
			err = write_record(w, i, DK_WHOLE, r, NULL);
			info->added++;
			info->added_bytes += r->size;
		}
		h->n_records++;
		stg__progress(ctx, "delta", i + 1, nt->n_entries);
	}
	if (!err) {
		ZSTD_inBuffer none = {NULL, 0, 0};
		err = zout_run(&w->z, &none, ZSTD_e_end);
	}
out:
	stg__strmap_free(&base_path);
	stg__strmap_free(&base_content);
	stg__strmap_free(&new_path);
	return err;
}

static stg_err delta_write(stg_ctx *ctx, stg_pack *base, stg_pack *new_, int rootfd, int fd,
                           stg_delta_info *info)
{
	writer w = {.ctx = ctx, .base = base, .new_ = new_, .rootfd = rootfd};
	w.z = (zout){.ctx = ctx, .fd = fd, .cap = ZSTD_CStreamOutSize()};
	w.fr = (frames){.ctx = ctx, .p = base, .cur = base->t.n_frames};
	w.z.cc = ZSTD_createCCtx();
	w.z.buf = malloc(w.z.cap);
	w.z.xs = XXH3_createState();
	w.fr.dc = ZSTD_createDCtx();
	w.xs = XXH3_createState();
	w.buf = malloc(XFER_BLOCK);
	w.out = malloc(XFER_BLOCK);
	w.out2 = malloc(XFER_BLOCK);
	stg_err err = STG_OK;
	dheader h = {0};
	uint8_t hdr[DELTA_HEADER_SIZE] = {0};
	if (!w.z.cc || !w.z.buf || !w.z.xs || !w.fr.dc || !w.xs || !w.buf || !w.out || !w.out2) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	ZSTD_CCtx_setParameter(w.z.cc, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(w.z.cc, ZSTD_c_windowLog, DELTA_WINDOW_LOG);
	ZSTD_CCtx_setParameter(w.z.cc, ZSTD_c_checksumFlag, 1);
	ZSTD_DCtx_setParameter(w.fr.dc, ZSTD_d_windowLogMax, 27);
	XXH3_64bits_reset(w.z.xs);
	memset(info, 0, sizeof *info);
	/* the header is written last, when the body's size is known */
	if (stg__write_full(fd, hdr, sizeof hdr)) {
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "writing the delta");
		goto out;
	}
	if ((err = write_body(&w, &h, info)))
		goto out;
	memcpy(h.base, base->t.digest, STG_DIGEST_LEN);
	memcpy(h.target, new_->t.digest, STG_DIGEST_LEN);
	h.body_size = w.z.size;
	h.body_xxh = XXH3_64bits_digest(w.z.xs);
	header_encode(&h, hdr);
	if (pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "writing the delta's header (the output must be a file)");
		goto out;
	}
	memcpy(info->base_digest, base->t.digest, STG_DIGEST_LEN);
	info->size = DELTA_HEADER_SIZE + w.z.size;
out:
	ZSTD_freeCCtx(w.z.cc);
	free(w.z.buf);
	XXH3_freeState(w.z.xs);
	ZSTD_freeDCtx(w.fr.dc);
	free(w.fr.comp);
	free(w.fr.raw);
	XXH3_freeState(w.xs);
	free(w.buf);
	free(w.out);
	free(w.out2);
	return err;
}

stg_err stg_delta_write(stg_ctx *ctx, stg_pack *base, stg_pack *new_, const char *dir, int fd,
                        stg_delta_info *info)
{
	stg_delta_info none;
	if (!info)
		info = &none;
	if (!memcmp(base->t.digest, new_->t.digest, STG_DIGEST_LEN))
		return stg__fail(ctx, STG_EUSAGE, "the base is the same pack as the new version");
	int rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot open '%s'", dir);
	stg_err err = delta_write(ctx, base, new_, rootfd, fd, info);
	close(rootfd);
	return err;
}

/* ---- reading: the compressed body ------------------------------------------- */

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

static stg_err src_read(stg_ctx *ctx, const stg_delta_src *s, void *buf, size_t n, uint64_t off,
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

static stg_err zin_fill(zin *z)
{
	if (!z->left)
		return stg__fail(z->ctx, STG_ECORRUPT, "damaged delta: it ends early");
	if (stg__cancelled(z->ctx))
		return stg__fail(z->ctx, STG_EINTR, "interrupted");
	size_t n = z->left < z->icap ? (size_t)z->left : z->icap;
	stg_err err = src_read(z->ctx, z->src, z->ibuf, n, z->off, z->read);
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

/* Exactly n decoded bytes. */
static stg_err zin_read(zin *z, void *dst, size_t n)
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

/* The body ends here: nothing more decodes, its last frame is complete,
 * every byte is read and the checksum holds. */
static stg_err zin_end(zin *z, uint64_t want)
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

/* ---- reading: applying ---------------------------------------------------------- */

typedef struct applier {
	stg_ctx *ctx;
	const stg_pack *target;
	const stg_manifest *base;
	int basefd, outfd;
	zin z;
	uint8_t *chunk, *out; /* DELTA_CHUNK_MAX, XFER_BLOCK */
	stg_delta_stats *st;
	/* the file being written */
	const char *path;
	int fd;
	XXH3_state_t *xs;
	uint64_t size, want;
} applier;

typedef struct drec {
	uint64_t idx, size;
	int kind;
	uint32_t basis_len;
	uint8_t xxh3[16];
	char basis[STG_PATH_MAX + 1];
} drec;

static stg_err bad(applier *a, const char *fmt, const char *path)
{
	return stg__fail(a->ctx, STG_ECORRUPT, fmt, path);
}

static stg_err out_sink(void *arg, const uint8_t *p, size_t n)
{
	applier *a = arg;
	if (n > a->want - a->size)
		return stg__fail(a->ctx, STG_ECORRUPT,
		                 "damaged delta: it makes '%s' larger than its %llu bytes", a->path,
		                 (unsigned long long)a->want);
	a->size += n;
	XXH3_128bits_update(a->xs, p, n);
	if (a->fd >= 0 && stg__write_full(a->fd, p, n))
		return stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write '%s'", a->path);
	return STG_OK;
}

/* The base's file at path, if its content is r's. */
static const stg_mfile *base_file(const applier *a, const char *path, const stg_rec *r)
{
	uint32_t i = stg__strmap_get(&a->base->map, path, strlen(path));
	if (i == NONE)
		return NULL;
	const stg_mfile *f = &a->base->files[i];
	return !r || (f->size == r->size && !memcmp(f->xxh3, r->xxh3, 16)) ? f : NULL;
}

/* Take r from the base's file at basis: the same inode when its mode and
 * mtime are r's too, else a copy (a reflink where the filesystem can). */
static stg_err from_base(applier *a, const char *basis, const stg_rec *r)
{
	const char *path = stg__rec_path(a->target, r);
	int s = stg__open_beneath(a->basefd, basis, O_RDONLY, 0);
	struct stat st;
	if (s < 0 || fstat(s, &st)) {
		int e = errno;
		if (s >= 0)
			close(s);
		return stg__fail_errno(a->ctx, STG_ECORRUPT, e,
		                       "the cached base lacks '%s' (damaged entry?)", basis);
	}
	stg_err err = STG_OK;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->size) {
		err = bad(a, "the cached base's '%s' is not what its manifest says", basis);
		goto out;
	}
	if ((st.st_mode & 07777) == stg__final_mode(r, true) && st.st_mtim.tv_sec == r->mtime &&
	    st.st_mtim.tv_nsec == (long)r->mtime_nsec) {
		/* link the very file checked above, through its descriptor */
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", s);
		if (linkat(AT_FDCWD, proc, a->outfd, path, AT_SYMLINK_FOLLOW) == 0) {
			a->st->linked++;
			goto out;
		}
		if (errno != EMLINK && errno != EXDEV && errno != EPERM && errno != ENOENT) {
			err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "cannot create '%s'", path);
			goto out;
		}
	}
	int d = openat(a->outfd, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (d < 0 || stg__copy_file(s, d, r->size) || stg__file_meta(d, r, true)) {
		int e = errno;
		err = stg__fail_errno(a->ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "cannot create '%s'", path);
	}
	if (d >= 0 && close(d) && !err)
		err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot write '%s'", path);
	if (!err)
		a->st->copied++;
out:
	close(s);
	return err;
}

/* Pass a record's payload chunks to job (a patch), or to the file, or
 * (discard) nowhere. */
static stg_err payload(applier *a, rs_job_t *job, bool discard)
{
	bool done = false;
	for (;;) {
		uint8_t len[4];
		stg_err err = zin_read(&a->z, len, 4);
		if (err)
			return err;
		uint32_t n = stg__get32(len);
		if (n > DELTA_CHUNK_MAX)
			return bad(a, "damaged delta: an oversized chunk in '%s'", a->path);
		if (n && (err = zin_read(&a->z, a->chunk, n)))
			return err;
		if (job && done && n)
			return bad(a, "damaged delta: data after the end of the patch of '%s'",
			           a->path);
		if (discard)
			err = STG_OK;
		else if (job && !done)
			err = stg__job_feed(a->ctx, job, a->chunk, n, n == 0, a->out, out_sink, a,
			                    &done);
		else if (!job)
			err = out_sink(a, a->chunk, n);
		if (err)
			return err;
		if (!n)
			return STG_OK;
	}
}

/* Make r from its record: patched from the base, or whole. */
static stg_err from_delta(applier *a, const drec *d, const stg_rec *r)
{
	const char *path = stg__rec_path(a->target, r);
	int basis = -1;
	rs_job_t *job = NULL;
	stg_err err = STG_OK;
	a->path = path;
	if (!a->base && d->kind == DK_PATCH) {
		/* checking without the base: a patch cannot be applied */
		if (!(err = payload(a, NULL, true)))
			a->st->patched++;
		return err;
	}
	if (d->kind == DK_PATCH) {
		if (!base_file(a, d->basis, NULL))
			return bad(a, "damaged delta: it patches '%s', which the base lacks",
			           d->basis);
		basis = stg__open_beneath(a->basefd, d->basis, O_RDONLY, 0);
		if (basis < 0)
			return stg__fail_errno(a->ctx, STG_ECORRUPT, errno,
			                       "the cached base lacks '%s' (damaged entry?)",
			                       d->basis);
		if (!(job = rs_patch_begin(stg__basis_copy, &basis))) {
			close(basis);
			return stg__fail(a->ctx, STG_ENOMEM, "out of memory");
		}
	}
	a->size = 0;
	a->want = r->size;
	XXH3_128bits_reset(a->xs);
	a->fd = a->outfd < 0 ? -1
	                     : openat(a->outfd, path,
	                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a->fd < 0 && a->outfd >= 0)
		err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot create '%s'", path);
	if (!err)
		err = payload(a, job, false);
	if (!err) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(a->xs));
		if (a->size != r->size || memcmp(c.digest, r->xxh3, 16))
			err = bad(a,
			          "the delta does not rebuild '%s' (its XXH3-128 or size is not "
			          "the manifest's)",
			          path);
	}
	if (!err && a->fd >= 0 && stg__file_meta(a->fd, r, true))
		err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot write '%s'", path);
	if (a->fd >= 0 && close(a->fd) && !err)
		err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot write '%s'", path);
	a->fd = -1;
	if (!err && d->kind == DK_PATCH)
		a->st->patched++;
	else if (!err)
		a->st->whole++;
	if (job)
		rs_job_free(job);
	if (basis >= 0)
		close(basis);
	return err;
}

/* The next record's header and basis; it must name a later non-empty
 * file of the target, with the target's size and XXH3-128. */
static stg_err next_record(applier *a, drec *d, uint64_t after, bool first)
{
	uint8_t h[DELTA_REC_SIZE];
	stg_err err = zin_read(&a->z, h, sizeof h);
	if (err)
		return err;
	d->idx = stg__get64(h);
	d->kind = h[8];
	d->basis_len = stg__get32(h + 12);
	d->size = stg__get64(h + 16);
	memcpy(d->xxh3, h + 24, 16);
	const stg_trailer *t = &a->target->t;
	if ((!first && d->idx <= after) || d->idx >= t->n_entries)
		return stg__fail(a->ctx, STG_ECORRUPT, "damaged delta: records out of order");
	const stg_rec *r = &t->recs[d->idx];
	const char *path = stg__rec_path(a->target, r);
	if (h[9] || h[10] || h[11] || d->kind < DK_COPY || d->kind > DK_WHOLE)
		return bad(a, "damaged delta: a bad record for '%s'", path);
	if (r->type != STG_FILE || !r->size || d->size != r->size || memcmp(d->xxh3, r->xxh3, 16))
		return bad(a,
		           "the delta's record for '%s' is not the pack's (made for another "
		           "version?)",
		           path);
	if ((d->kind == DK_WHOLE) != (d->basis_len == 0) || d->basis_len > STG_PATH_MAX)
		return bad(a, "damaged delta: a bad record for '%s'", path);
	if ((err = zin_read(&a->z, d->basis, d->basis_len)))
		return err;
	d->basis[d->basis_len] = '\0';
	if (d->basis_len && !stg__path_ok(d->basis, d->basis_len))
		return bad(a, "damaged delta: an unsafe path in the record for '%s'", path);
	return STG_OK;
}

static stg_err skip_removed(applier *a, uint64_t n)
{
	char path[STG_PATH_MAX + 1];
	for (uint64_t i = 0; i < n; i++) {
		uint8_t len[2];
		stg_err err = zin_read(&a->z, len, 2);
		if (err)
			return err;
		size_t l = (size_t)len[0] | (size_t)len[1] << 8;
		if (!l || l > STG_PATH_MAX)
			return bad(a, "damaged delta: %s",
			           "a bad entry in its list of removed files");
		if ((err = zin_read(&a->z, path, l)))
			return err;
		path[l] = '\0';
		if (!stg__path_ok(path, l) || (a->base && !base_file(a, path, NULL)))
			return bad(a, "damaged delta: it removes '%s', which the base lacks", path);
	}
	return STG_OK;
}

static stg_err apply_files(applier *a, uint64_t n_records, uint64_t n_removed)
{
	const stg_trailer *t = &a->target->t;
	stg_err err = skip_removed(a, n_removed);
	drec *d = malloc(sizeof *d);
	if (!d)
		return stg__fail(a->ctx, STG_ENOMEM, "out of memory");
	uint64_t got = 0;
	bool have = false;
	if (!err && n_records) {
		err = next_record(a, d, 0, true);
		have = !err;
		got = have;
	}
	for (size_t i = 0; i < t->n_entries && !err; i++) {
		const stg_rec *r = &t->recs[i];
		if (r->type != STG_FILE || !r->size)
			continue;
		const char *path = stg__rec_path(a->target, r);
		if (have && d->idx == i) {
			if (d->kind != DK_COPY)
				err = from_delta(a, d, r);
			else if (!a->base)
				a->st->copied++; /* checking without the base */
			else if (!base_file(a, d->basis, r))
				err = bad(a,
				          "damaged delta: the base has no '%s' with the content "
				          "wanted",
				          d->basis);
			else
				err = from_base(a, d->basis, r);
			have = false;
			if (!err && got < n_records) {
				err = next_record(a, d, i, false);
				have = !err;
				got += have;
			}
		} else if (!a->base) {
			/* checking without the base: taken from it as it is */
		} else if (base_file(a, path, r)) {
			err = from_base(a, path, r);
		} else {
			err = bad(a, "'%s' changed, and the delta has nothing for it", path);
		}
		if (stg__cancelled(a->ctx))
			err = stg__fail(a->ctx, STG_EINTR, "interrupted");
		stg__progress(a->ctx, "delta", i + 1, t->n_entries);
	}
	if (!err && (have || got != n_records))
		err = stg__fail(a->ctx, STG_ECORRUPT, "damaged delta: records out of order");
	free(d);
	return err;
}

/* Apply (base and outfd given) or check (base NULL, outfd -1: every check
 * that needs no base: header, structure, records against target's
 * manifest, whole files' XXH3-128, the body's checksum). */
static stg_err delta_run(stg_ctx *ctx, const stg_delta_src *src, const stg_pack *target,
                         const uint8_t *base_digest, const stg_manifest *base, int basefd,
                         int outfd, stg_delta_stats *st)
{
	memset(st, 0, sizeof *st);
	uint8_t hb[DELTA_HEADER_SIZE];
	dheader h;
	stg_err err = src_read(ctx, src, hb, sizeof hb, 0, &st->bytes_read);
	if (err || (err = header_decode(ctx, hb, &h)))
		return err;
	char want[STG_DIGEST_HEXLEN + 1], got[STG_DIGEST_HEXLEN + 1];
	if (base_digest && memcmp(h.base, base_digest, STG_DIGEST_LEN)) {
		stg_digest_hex(base_digest, want);
		stg_digest_hex(h.base, got);
		return stg__fail(ctx, STG_ECORRUPT,
		                 "the delta is from another base (%.12s, not %.12s)", got, want);
	}
	if (memcmp(h.target, target->t.digest, STG_DIGEST_LEN)) {
		stg_digest_hex(target->t.digest, want);
		stg_digest_hex(h.target, got);
		return stg__fail(ctx, STG_ECORRUPT,
		                 "the delta makes another pack (%.12s, not %.12s)", got, want);
	}
	uint64_t size = src->len;
	struct stat fst;
	if (src->fd >= 0) {
		if (fstat(src->fd, &fst))
			return stg__fail_errno(ctx, STG_EIO, errno, "reading the delta");
		size = (uint64_t)fst.st_size;
	}
	if (h.body_size != size - DELTA_HEADER_SIZE)
		return stg__fail(ctx, STG_ECORRUPT,
		                 "damaged delta: %llu bytes, its header says %llu (truncated?)",
		                 (unsigned long long)size,
		                 (unsigned long long)(h.body_size + DELTA_HEADER_SIZE));
	if (h.n_records > target->t.n_entries || (base && h.n_removed > base->n))
		return stg__fail(ctx, STG_ECORRUPT, "damaged delta: impossible counts");

	bool *sel = NULL;
	if ((err = stg__select(ctx, target, NULL, &sel)) ||
	    (outfd >= 0 && (err = stg__tree_prepare(ctx, target, sel, outfd, true)))) {
		free(sel);
		return err;
	}
	applier a = {.ctx = ctx,
	             .target = target,
	             .base = base,
	             .basefd = basefd,
	             .outfd = outfd,
	             .st = st,
	             .fd = -1};
	a.z = (zin){.ctx = ctx,
	            .src = src,
	            .icap = ZSTD_DStreamInSize(),
	            .ocap = ZSTD_DStreamOutSize(),
	            .off = DELTA_HEADER_SIZE,
	            .left = h.body_size,
	            .read = &st->bytes_read};
	a.z.dc = ZSTD_createDCtx();
	a.z.ibuf = malloc(a.z.icap);
	a.z.obuf = malloc(a.z.ocap);
	a.z.xs = XXH3_createState();
	a.chunk = malloc(DELTA_CHUNK_MAX);
	a.out = malloc(XFER_BLOCK);
	a.xs = XXH3_createState();
	if (!a.z.dc || !a.z.ibuf || !a.z.obuf || !a.z.xs || !a.chunk || !a.out || !a.xs) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	ZSTD_DCtx_setParameter(a.z.dc, ZSTD_d_windowLogMax, DELTA_WINDOW_LOG);
	XXH3_64bits_reset(a.z.xs);
	if (src->fd >= 0)
		posix_fadvise(src->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (!(err = apply_files(&a, h.n_records, h.n_removed)) &&
	    !(err = zin_end(&a.z, h.body_xxh)) && outfd >= 0)
		err = stg__tree_finish(ctx, target, sel, outfd, true);
	if (src->fd >= 0)
		posix_fadvise(src->fd, 0, 0, POSIX_FADV_DONTNEED);
out:
	ZSTD_freeDCtx(a.z.dc);
	free(a.z.ibuf);
	free(a.z.obuf);
	XXH3_freeState(a.z.xs);
	free(a.chunk);
	free(a.out);
	XXH3_freeState(a.xs);
	free(sel);
	return err;
}

stg_err stg__delta_apply(stg_ctx *ctx, const stg_delta_src *src, const stg_pack *target,
                         const uint8_t base_digest[STG_DIGEST_LEN], const stg_manifest *base,
                         int basefd, int outfd, stg_delta_stats *st)
{
	return delta_run(ctx, src, target, base_digest, base, basefd, outfd, st);
}

stg_err stg_delta_check(stg_ctx *ctx, stg_pack *target, int fd, uint8_t base[STG_DIGEST_LEN],
                        uint64_t *size)
{
	stg_delta_src src = {.fd = fd};
	stg_delta_stats st;
	uint8_t t2[STG_DIGEST_LEN];
	stg_err err = stg_delta_read_header(ctx, fd, base, t2, size);
	return err ? err : delta_run(ctx, &src, target, NULL, NULL, -1, -1, &st);
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
	stg_err err = header_decode(ctx, hb, &h);
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
