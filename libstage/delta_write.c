/*
 * delta_write.c - a new version of a pack as its changes from an older
 * one.
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
 * stream behind a fixed header (delta_file.c); payloads are cut in chunks
 * of at most 1 MiB.  The format is in FORMAT.md ("Delta files").
 *
 * v1's files are read from v1's frames, each checked against v1's
 * manifest; v2's from the tree v2 was packed from, each checked against
 * v2's manifest as it is read: a delta never carries bytes that the pack
 * it stands for does not hold.
 */
#include "delta_file.h"
#include "rsdelta.h"
#include "ctx.h"
#include "bytes.h"
#include "trailer.h"
#include "pack_read.h"
#include "fsutil.h"
#include "path.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the base's files, from its frames ----------------------------------- */

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
	uint8_t h[16];
	char pbuf[STG_PATH_MAX + 1];
	stg__hash_digest(xs, h);
	if (memcmp(h, r->xxh3, 16))
		return stg__fail(fr->ctx, STG_ECORRUPT,
		                 "the base pack is damaged: '%s' does not match its manifest",
		                 stg__rec_path(fr->p, r, pbuf));
	return STG_OK;
}

/* ---- one record ---------------------------------------------------------- */

typedef struct writer {
	stg_ctx *ctx;
	const stg_pack *base, *new_;
	int rootfd; /* the tree new_ was packed from */
	zout z;
	frames fr;
	XXH3_state_t *xs;
	uint8_t *buf, *out, *out2; /* XFER_BLOCK each */
} writer;

/* The signature of the base's file r, from its frames. */
static stg_err base_signature(writer *w, const stg_rec *r, stg_rsig **sig)
{
	if (!(*sig = stg__rsig_new(r->size)))
		return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	stg_err err = base_content(&w->fr, r, stg__rsig_sink, *sig, w->xs);
	if (!err)
		err = stg__rsig_sink(*sig, NULL, 0);
	if (err) {
		stg__rsig_free(*sig);
		*sig = NULL;
	}
	return err;
}

/* Read the new version of r from the tree, checking it is what was packed,
 * through delta (against the base's version) or straight into the body. */
static stg_err new_content(writer *w, const stg_rec *r, stg_rdelta *delta)
{
	char pbuf[STG_PATH_MAX + 1];
	const char *path = stg__rec_path(w->new_, r, pbuf);
	int fd = stg__open_beneath(w->rootfd, path, O_RDONLY, 0);
	if (fd < 0)
		return stg__fail_errno(w->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot read '%s'", path);
	stg_hash_in in = {.fd = fd,
	                  .off = -1,
	                  .len = r->size,
	                  .whole = true,
	                  .buf = w->buf,
	                  .buf_len = XFER_BLOCK,
	                  .sink = delta ? stg__rdelta_sink : stg__zout_chunk,
	                  .arg = delta ? (void *)delta : &w->z,
	                  .path = path};
	uint64_t got;
	XXH3_128bits_reset(w->xs);
	stg_err err = stg__hash_read(w->ctx, &in, w->xs, &got);
	close(fd);
	if (err)
		return err;
	uint8_t h[16];
	stg__hash_digest(w->xs, h);
	if (got != r->size || memcmp(h, r->xxh3, 16))
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
	stg_err err = stg__zout_put(&w->z, h, sizeof h);
	return err || !bl ? err : stg__zout_put(&w->z, basis, bl);
}

static stg_err write_record(writer *w, uint64_t idx, int kind, const stg_rec *r,
                            const stg_rec *basis)
{
	char pbuf[STG_PATH_MAX + 1];
	stg_err err =
	        put_record(w, idx, kind, r, basis ? stg__rec_path(w->base, basis, pbuf) : NULL);
	if (err || kind == DK_COPY)
		return err;
	stg_rsig *sig = NULL;
	stg_rdelta *delta = NULL;
	if (kind == DK_PATCH) {
		if ((err = base_signature(w, basis, &sig)))
			return err;
		if (!(delta = stg__rdelta_new(sig, stg__zout_chunk, &w->z)))
			err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	}
	if (!err)
		err = new_content(w, r, delta);
	if (!err)
		err = stg__zout_put(&w->z, "\0\0\0\0", 4); /* the payload's end */
	stg__rdelta_free(delta);
	stg__rsig_free(sig);
	return err;
}

/* ---- the whole ----------------------------------------------------------- */

/* Regular files of p: by path, and (non-empty ones) by size and content. */
static int file_maps(const stg_pack *p, stg_recmap *by_path, stg_strmap *by_content)
{
	if (stg__recmap_init(by_path, &p->t, p->t.n_entries) ||
	    (by_content && stg__strmap_init(by_content, p->t.n_entries)))
		return -1;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (r->type != STG_FILE)
			continue;
		if (stg__recmap_put(by_path, (uint32_t)i, (uint32_t)i, NULL) < 0)
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
	stg_recmap base_path = {0}, new_path = {0};
	stg_strmap base_content = {0};
	stg_err err = STG_OK;
	char pbuf[STG_PATH_MAX + 1];
	if (file_maps(w->base, &base_path, &base_content) || file_maps(w->new_, &new_path, NULL)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	/* the base's files the new version no longer has */
	const stg_trailer *bt = &w->base->t, *nt = &w->new_->t;
	for (size_t i = 0; i < bt->n_entries && !err; i++) {
		const stg_rec *r = &bt->recs[i];
		if (r->type != STG_FILE)
			continue;
		const char *path = stg__rec_path(w->base, r, pbuf);
		if (stg__recmap_get(&new_path, path, r->path_len) != NONE)
			continue;
		uint8_t len[2] = {(uint8_t)r->path_len, (uint8_t)(r->path_len >> 8)};
		if (!(err = stg__zout_put(&w->z, len, 2)))
			err = stg__zout_put(&w->z, path, r->path_len);
		h->n_removed++;
	}
	info->removed = h->n_removed;
	for (size_t i = 0; i < nt->n_entries && !err; i++) {
		const stg_rec *r = &nt->recs[i];
		if (r->type != STG_FILE || !r->size)
			continue;
		uint32_t j =
		        stg__recmap_get(&base_path, stg__rec_path(w->new_, r, pbuf), r->path_len);
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
	if (!err)
		err = stg__zout_end(&w->z);
out:
	stg__recmap_free(&base_path);
	stg__strmap_free(&base_content);
	stg__recmap_free(&new_path);
	return err;
}

static stg_err delta_write(stg_ctx *ctx, stg_pack *base, stg_pack *new_, int rootfd, int fd,
                           stg_delta_info *info)
{
	writer w = {.ctx = ctx, .base = base, .new_ = new_, .rootfd = rootfd};
	stg_err err = stg__zout_init(&w.z, ctx, fd);
	w.fr = (frames){.ctx = ctx, .p = base, .cur = base->t.n_frames};
	w.fr.dc = ZSTD_createDCtx();
	w.xs = XXH3_createState();
	w.buf = malloc(XFER_BLOCK);
	w.out = malloc(XFER_BLOCK);
	w.out2 = malloc(XFER_BLOCK);
	dheader h = {0};
	uint8_t hdr[DELTA_HEADER_SIZE] = {0};
	if (!err && (!w.fr.dc || !w.xs || !w.buf || !w.out || !w.out2))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (err)
		goto out;
	ZSTD_DCtx_setParameter(w.fr.dc, ZSTD_d_windowLogMax, 27);
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
	stg__dheader_encode(&h, hdr);
	if (pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "writing the delta's header (the output must be a file)");
		goto out;
	}
	memcpy(info->base_digest, base->t.digest, STG_DIGEST_LEN);
	info->size = DELTA_HEADER_SIZE + w.z.size;
out:
	stg__zout_free(&w.z);
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
