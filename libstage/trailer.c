/*
 * trailer.c - encode and decode a pack's trailer (see FORMAT.md).
 *
 * The trailer is the last zstd frame of a pack: a skippable frame whose
 * payload is a zstd-compressed body (frame table, manifest, delta records,
 * names) followed by a fixed 48-byte footer.  The footer ends the file, so a
 * reader finds everything from one read at the end.
 *
 * Decoding treats every byte as hostile.  The order matters: the footer's
 * sizes are checked against the file size, the compressed body against its
 * XXH3-64, the body is decompressed into a buffer that grows only as real
 * output appears (capped by the declared size, itself capped), and every
 * count is checked against the decoded body's size before an array is
 * allocated.  Offsets are then checked for order and range, so that later
 * stages (extraction, verification) may index without further checks.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

void stg__trailer_free(stg_trailer *t)
{
	if (!t)
		return;
	free(t->frames);
	free(t->recs);
	free(t->deltas);
	free(t->names);
	memset(t, 0, sizeof *t);
}

size_t stg__frame_of(const stg_trailer *t, uint64_t off)
{
	size_t lo = 0, hi = t->n_frames;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const stg_frame *f = &t->frames[mid];
		if (off < f->raw_off)
			hi = mid;
		else if (off >= f->raw_off + f->raw_size)
			lo = mid + 1;
		else
			return mid;
	}
	return t->n_frames;
}

/* ---- encoding ---------------------------------------------------------- */

stg_err stg__trailer_encode(stg_ctx *ctx, const stg_trailer *t, int level, uint8_t **out,
                            size_t *out_len)
{
	stg_err err = STG_OK;
	uint8_t *body = NULL, *frame = NULL;
	size_t names_size = 0;
	for (size_t i = 0; i < t->n_entries; i++)
		names_size += t->recs[i].path_len + t->recs[i].link_len;
	for (size_t i = 0; i < t->n_deltas; i++)
		names_size += t->deltas[i].name_len;

	size_t raw = STG_BODY_HEADER_SIZE + t->n_frames * STG_FRAME_REC_SIZE +
	             t->n_entries * STG_ENTRY_REC_SIZE + t->n_deltas * STG_DELTA_REC_SIZE +
	             names_size;
	if (raw > STG_BODY_RAW_MAX)
		return stg__fail(ctx, STG_ENOTSUP, "manifest too large (%zu bytes, at most %llu)",
		                 raw, (unsigned long long)STG_BODY_RAW_MAX);
	body = calloc(1, raw);
	if (!body)
		return stg__fail(ctx, STG_ENOMEM, "out of memory encoding the trailer");

	uint8_t *p = body;
	memcpy(p, STG_BODY_MAGIC, 4);
	stg__put32(p + 4, STG_FORMAT_VERSION);
	stg__put64(p + 8, t->n_frames);
	stg__put64(p + 16, t->n_entries);
	stg__put64(p + 24, t->n_deltas);
	stg__put64(p + 32, names_size);
	stg__put64(p + 40, t->tar_size);
	stg__put64(p + 48, t->content_size);
	memcpy(p + 56, t->digest, STG_DIGEST_LEN);
	stg__put32(p + 88, t->root_mode);
	p += STG_BODY_HEADER_SIZE;

	for (size_t i = 0; i < t->n_frames; i++, p += STG_FRAME_REC_SIZE) {
		stg__put64(p, t->frames[i].comp_off);
		stg__put64(p + 8, t->frames[i].comp_size);
		stg__put64(p + 16, t->frames[i].raw_off);
		stg__put64(p + 24, t->frames[i].raw_size);
		memcpy(p + 32, t->frames[i].xxh3, 16);
	}
	uint64_t noff = 0;
	for (size_t i = 0; i < t->n_entries; i++, p += STG_ENTRY_REC_SIZE) {
		const stg_rec *r = &t->recs[i];
		stg__put64(p, r->tar_off);
		stg__put64(p + 8, r->data_off);
		stg__put64(p + 16, r->size);
		stg__put64(p + 24, (uint64_t)r->mtime);
		stg__put32(p + 32, r->mtime_nsec);
		stg__put32(p + 36, r->mode);
		stg__put64(p + 40, noff);
		stg__put32(p + 48, r->path_len);
		stg__put32(p + 52, r->link_len);
		p[56] = r->type;
		memcpy(p + 64, r->xxh3, 16);
		noff += r->path_len + r->link_len;
	}
	for (size_t i = 0; i < t->n_deltas; i++, p += STG_DELTA_REC_SIZE) {
		memcpy(p, t->deltas[i].base, STG_DIGEST_LEN);
		stg__put64(p + 32, noff);
		stg__put32(p + 40, t->deltas[i].name_len);
		noff += t->deltas[i].name_len;
	}
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		memcpy(p, t->names + r->path_off, r->path_len);
		p += r->path_len;
		if (r->link_len) {
			memcpy(p, t->names + r->path_off + r->path_len + 1, r->link_len);
			p += r->link_len;
		}
	}
	for (size_t i = 0; i < t->n_deltas; i++) {
		memcpy(p, t->names + t->deltas[i].name_off, t->deltas[i].name_len);
		p += t->deltas[i].name_len;
	}

	size_t bound = ZSTD_compressBound(raw);
	frame = malloc(8 + bound + STG_FOOTER_SIZE);
	if (!frame) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory encoding the trailer");
		goto out;
	}
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	if (!cc) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory encoding the trailer");
		goto out;
	}
	ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
	size_t clen = ZSTD_compress2(cc, frame + 8, bound, body, raw);
	ZSTD_freeCCtx(cc);
	if (ZSTD_isError(clen)) {
		err = stg__fail(ctx, STG_EIO, "compressing the trailer: %s",
		                ZSTD_getErrorName(clen));
		goto out;
	}
	if (clen + STG_FOOTER_SIZE > UINT32_MAX) {
		err = stg__fail(ctx, STG_ENOTSUP, "manifest too large for one trailer frame");
		goto out;
	}
	stg__put32(frame, STG_SKIP_MAGIC);
	stg__put32(frame + 4, (uint32_t)(clen + STG_FOOTER_SIZE));
	uint8_t *f = frame + 8 + clen;
	stg__put64(f, t->data_size);
	stg__put64(f + 8, clen);
	stg__put64(f + 16, raw);
	stg__put64(f + 24, XXH3_64bits(frame + 8, clen));
	stg__put32(f + 32, STG_FORMAT_VERSION);
	stg__put32(f + 36, 0);
	memcpy(f + 40, STG_FOOTER_MAGIC, 8);
	*out = frame;
	*out_len = 8 + clen + STG_FOOTER_SIZE;
	frame = NULL;
out:
	free(body);
	free(frame);
	return err;
}

/* ---- decoding ---------------------------------------------------------- */

static stg_err bad(stg_ctx *ctx, const char *what)
{
	return stg__fail(ctx, STG_ECORRUPT, "damaged pack: %s", what);
}

/* Decompress exactly raw bytes from src, growing the buffer only as output
 * appears. */
static stg_err inflate_body(stg_ctx *ctx, const uint8_t *src, size_t len, size_t raw, uint8_t **out)
{
	stg_err err = STG_OK;
	ZSTD_DStream *ds = ZSTD_createDStream();
	size_t cap = raw < (1u << 20) ? raw : (1u << 20);
	uint8_t *buf = malloc(cap ? cap : 1);
	if (!ds || !buf) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory reading the trailer");
		goto out;
	}
	/* bound the decoder's window too: a hostile frame header could ask for
	 * a huge one */
	ZSTD_DCtx_setParameter(ds, ZSTD_d_windowLogMax, 27);
	ZSTD_inBuffer in = {src, len, 0};
	ZSTD_outBuffer ob = {buf, cap, 0};
	for (;;) {
		size_t r = ZSTD_decompressStream(ds, &ob, &in);
		if (ZSTD_isError(r)) {
			err = stg__fail(ctx, STG_ECORRUPT,
			                "damaged pack: trailer does not decompress (%s)",
			                ZSTD_getErrorName(r));
			goto out;
		}
		if (r == 0)
			break;
		if (ob.pos == ob.size) {
			if (ob.size == raw) {
				err = bad(ctx, "trailer body longer than its footer says");
				goto out;
			}
			size_t ncap = ob.size * 2 > raw ? raw : ob.size * 2;
			uint8_t *nb = realloc(buf, ncap);
			if (!nb) {
				err = stg__fail(ctx, STG_ENOMEM,
				                "out of memory reading the trailer");
				goto out;
			}
			buf = nb;
			ob.dst = buf;
			ob.size = ncap;
		} else if (in.pos == in.size) {
			err = bad(ctx, "trailer body truncated");
			goto out;
		}
	}
	if (ob.pos != raw || in.pos != in.size) {
		err = bad(ctx, "trailer body size does not match its footer");
		goto out;
	}
	*out = buf;
	buf = NULL;
out:
	free(buf);
	ZSTD_freeDStream(ds);
	return err;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t limit)
{
	return a <= limit && b <= limit - a;
}

static stg_err parse_body(stg_ctx *ctx, const uint8_t *b, size_t raw, uint64_t data_size,
                          uint32_t version, stg_trailer *t)
{
	if (raw < STG_BODY_HEADER_SIZE || memcmp(b, STG_BODY_MAGIC, 4))
		return bad(ctx, "trailer body has no header");
	if (stg__get32(b + 4) != version)
		return bad(ctx, "trailer body version does not match its footer");
	uint64_t nf = stg__get64(b + 8), ne = stg__get64(b + 16), nd = stg__get64(b + 24);
	uint64_t names_size = stg__get64(b + 32);
	t->tar_size = stg__get64(b + 40);
	t->content_size = stg__get64(b + 48);
	memcpy(t->digest, b + 56, STG_DIGEST_LEN);
	t->version = version;
	/* version 2: the packed directory's mode at 88 */
	t->root_mode = version >= 2 ? stg__get32(b + 88) : 0;
	if ((version < 2 && stg__get32(b + 88)) || stg__get32(b + 92) ||
	    (t->root_mode & ~(STG_ROOT_MODE_SET | 07777u)) ||
	    (t->root_mode && !(t->root_mode & STG_ROOT_MODE_SET)))
		return bad(ctx, "trailer header has unknown fields set");

	/* each count is bounded by the body's size before it is multiplied */
	uint64_t left = raw - STG_BODY_HEADER_SIZE;
	size_t frame_rec = version >= 3 ? STG_FRAME_REC_SIZE : STG_FRAME_REC_SIZE_2;
	if (nf > left / frame_rec)
		return bad(ctx, "frame count exceeds the trailer");
	left -= nf * frame_rec;
	if (ne > left / STG_ENTRY_REC_SIZE)
		return bad(ctx, "entry count exceeds the trailer");
	left -= ne * STG_ENTRY_REC_SIZE;
	if (nd > left / STG_DELTA_REC_SIZE)
		return bad(ctx, "delta count exceeds the trailer");
	left -= nd * STG_DELTA_REC_SIZE;
	if (names_size != left)
		return bad(ctx, "trailer sections do not add up to its size");
	if (nf == 0)
		return bad(ctx, "no frames");

	t->n_frames = nf;
	t->n_entries = ne;
	t->n_deltas = nd;
	t->frames = calloc(nf, sizeof *t->frames);
	t->recs = calloc(ne ? ne : 1, sizeof *t->recs);
	t->deltas = calloc(nd ? nd : 1, sizeof *t->deltas);
	/* names with a NUL after each string */
	t->names = malloc(names_size + 2 * ne + nd + 1);
	if (!t->frames || !t->recs || !t->deltas || !t->names)
		return stg__fail(ctx, STG_ENOMEM, "out of memory reading the trailer");

	const uint8_t *p = b + STG_BODY_HEADER_SIZE;
	uint64_t coff = 0, roff = 0;
	for (size_t i = 0; i < nf; i++, p += frame_rec) {
		stg_frame *f = &t->frames[i];
		f->comp_off = stg__get64(p);
		f->comp_size = stg__get64(p + 8);
		f->raw_off = stg__get64(p + 16);
		f->raw_size = stg__get64(p + 24);
		if (version >= 3)
			memcpy(f->xxh3, p + 32, 16);
		if (f->comp_off != coff || f->raw_off != roff)
			return bad(ctx, "frame table is not contiguous");
		if (f->comp_size == 0 || !add_ok(coff, f->comp_size, data_size))
			return bad(ctx, "frame table runs past the data");
		if (f->raw_size == 0 || f->raw_size > STG_FRAME_RAW_MAX)
			return bad(ctx, "frame larger than a reader accepts");
		coff += f->comp_size;
		roff += f->raw_size;
	}
	if (coff != data_size)
		return bad(ctx, "frame table does not cover the data");
	if (roff != t->tar_size)
		return bad(ctx, "frame table does not match the tar size");

	const uint8_t *names = b + raw - names_size;
	size_t mo = 0; /* offset in t->names */
	uint64_t content = 0, prev_end = 0, next_name = 0;
	for (size_t i = 0; i < ne; i++, p += STG_ENTRY_REC_SIZE) {
		stg_rec *r = &t->recs[i];
		r->tar_off = stg__get64(p);
		r->data_off = stg__get64(p + 8);
		r->size = stg__get64(p + 16);
		r->mtime = (int64_t)stg__get64(p + 24);
		r->mtime_nsec = stg__get32(p + 32);
		r->mode = stg__get32(p + 36);
		uint64_t poff = stg__get64(p + 40);
		r->path_len = stg__get32(p + 48);
		r->link_len = stg__get32(p + 52);
		r->type = p[56];
		memcpy(r->xxh3, p + 64, 16);
		static const uint8_t zero[7];
		if (memcmp(p + 57, zero, 7))
			return bad(ctx, "entry has reserved bytes set");

		if (r->type < STG_FILE || r->type > STG_HARDLINK)
			return bad(ctx, "entry of unknown type");
		if (r->mode & ~07777u || r->mtime_nsec >= 1000000000u)
			return bad(ctx, "entry with invalid mode or time");
		if (r->tar_off < prev_end || r->data_off < r->tar_off ||
		    r->data_off - r->tar_off < 512 || !add_ok(r->data_off, r->size, t->tar_size))
			return bad(ctx, "entry offsets out of order or range");
		prev_end = r->data_off + r->size;
		if (r->type != STG_FILE && r->size)
			return bad(ctx, "non-file entry with content");
		if ((r->type == STG_SYMLINK || r->type == STG_HARDLINK) != (r->link_len > 0))
			return bad(ctx, "link entry without target, or target on a non-link");
		/* names lie in entry order, so the table is read once and the
		 * decoded copy cannot outgrow it */
		if (r->path_len == 0 || r->path_len > STG_PATH_MAX || r->link_len > STG_PATH_MAX ||
		    poff != next_name ||
		    !add_ok(poff, (uint64_t)r->path_len + r->link_len, names_size))
			return bad(ctx, "entry name out of range");
		next_name = poff + r->path_len + r->link_len;
		if (!stg__path_ok((const char *)names + poff, r->path_len))
			return bad(ctx, "entry with an unsafe or malformed path");
		if (memchr(names + poff + r->path_len, 0, r->link_len))
			return bad(ctx, "link target contains a NUL byte");
		if (r->type == STG_HARDLINK &&
		    !stg__path_ok((const char *)names + poff + r->path_len, r->link_len))
			return bad(ctx, "hardlink with an unsafe target");
		memcpy(t->names + mo, names + poff, r->path_len);
		t->names[mo + r->path_len] = '\0';
		memcpy(t->names + mo + r->path_len + 1, names + poff + r->path_len, r->link_len);
		t->names[mo + r->path_len + 1 + r->link_len] = '\0';
		r->path_off = mo;
		mo += r->path_len + r->link_len + 2;
		if (r->type == STG_FILE)
			content += r->size;
	}
	if (content != t->content_size)
		return bad(ctx, "content total does not match the manifest");
	if (prev_end > t->tar_size)
		return bad(ctx, "entries run past the tar stream");

	for (size_t i = 0; i < nd; i++, p += STG_DELTA_REC_SIZE) {
		stg_delta_rec *d = &t->deltas[i];
		memcpy(d->base, p, STG_DIGEST_LEN);
		uint64_t noff = stg__get64(p + 32);
		d->name_len = stg__get32(p + 40);
		if (stg__get32(p + 44) != 0)
			return bad(ctx, "delta record has reserved bytes set");
		if (d->name_len == 0 || d->name_len > 255 || noff != next_name ||
		    !add_ok(noff, d->name_len, names_size))
			return bad(ctx, "delta record name out of range");
		next_name = noff + d->name_len;
		if (!stg__path_ok((const char *)names + noff, d->name_len) ||
		    memchr(names + noff, '/', d->name_len))
			return bad(ctx, "delta record with an unsafe name");
		memcpy(t->names + mo, names + noff, d->name_len);
		t->names[mo + d->name_len] = '\0';
		d->name_off = mo;
		mo += d->name_len + 1;
	}
	if (next_name != names_size)
		return bad(ctx, "name table has bytes no entry uses");
	t->names_len = mo;
	return STG_OK;
}

stg_err stg__trailer_decode(stg_ctx *ctx, const uint8_t *tail, size_t tail_len, uint64_t file_size,
                            stg_trailer *t, size_t *need)
{
	memset(t, 0, sizeof *t);
	*need = 0;
	if (file_size == 0)
		return stg__fail(ctx, STG_ECORRUPT, "not a pack: the file is empty");
	if (file_size < 8 + STG_FOOTER_SIZE || tail_len < STG_FOOTER_SIZE || tail_len > file_size)
		return stg__fail(ctx, STG_ECORRUPT,
		                 "not a pack: %llu bytes is too short to hold a trailer",
		                 (unsigned long long)file_size);
	const uint8_t *f = tail + tail_len - STG_FOOTER_SIZE;
	if (memcmp(f + 40, STG_FOOTER_MAGIC, 8))
		return stg__fail(ctx, STG_ECORRUPT,
		                 "not a stager pack: no trailer at its end (truncated, or "
		                 "a plain archive: make a pack with 'stager pack')");
	uint32_t version = stg__get32(f + 32);
	if (version < STG_FORMAT_OLDEST || version > STG_FORMAT_VERSION)
		return stg__fail(ctx, STG_ECORRUPT,
		                 "pack format version %u is not supported (this stager reads "
		                 "versions %d to %d%s)",
		                 version, STG_FORMAT_OLDEST, STG_FORMAT_VERSION,
		                 version > STG_FORMAT_VERSION ? ": a newer stager made it" : "");
	if (stg__get32(f + 36) != 0)
		return bad(ctx, "trailer footer has unknown flags");
	uint64_t data_size = stg__get64(f);
	uint64_t body_size = stg__get64(f + 8);
	uint64_t body_raw = stg__get64(f + 16);
	uint64_t check = stg__get64(f + 24);
	if (body_size > UINT32_MAX - STG_FOOTER_SIZE ||
	    !add_ok(data_size, 8 + body_size + STG_FOOTER_SIZE, file_size) ||
	    data_size + 8 + body_size + STG_FOOTER_SIZE != file_size)
		return bad(ctx, "trailer footer does not match the file size (truncated?)");
	if (body_raw < STG_BODY_HEADER_SIZE || body_raw > STG_BODY_RAW_MAX)
		return bad(ctx, "trailer footer declares an impossible body size");

	uint64_t trailer_len = file_size - data_size;
	if (trailer_len > tail_len) {
		*need = (size_t)trailer_len;
		return STG_OK;
	}
	const uint8_t *h = tail + tail_len - trailer_len;
	if (stg__get32(h) != STG_SKIP_MAGIC || stg__get32(h + 4) != body_size + STG_FOOTER_SIZE)
		return bad(ctx, "trailer frame header is damaged");
	const uint8_t *body = h + 8;
	if (XXH3_64bits(body, (size_t)body_size) != check)
		return bad(ctx, "trailer checksum mismatch");

	uint8_t *raw = NULL;
	stg_err err = inflate_body(ctx, body, (size_t)body_size, (size_t)body_raw, &raw);
	if (err == STG_OK) {
		t->data_size = data_size;
		err = parse_body(ctx, raw, (size_t)body_raw, data_size, version, t);
	}
	free(raw);
	if (err)
		stg__trailer_free(t);
	return err;
}
