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
 * XXH3-64, and the body is decompressed and parsed a piece at a time (never
 * whole in memory); its counts are checked against its declared size before
 * anything is read, and arrays grow only as their records really appear.  Offsets are then checked
 * for order and range, so that later stages (extraction, verification) may index without further
 * checks.
 */
#include "trailer.h"
#include "trailer_names.h"
#include "bytes.h"
#include "path.h"

#include <stdio.h>
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
	free(t->dirs);
	free(t->dir_slots);
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

uint64_t stg__trailer_mem(uint64_t n_frames, uint64_t n_entries, uint64_t n_deltas,
                          uint64_t names_size)
{
	/* each count is below 2^31 (the body's size over a record's), so
	 * none of this overflows */
	return n_frames * sizeof(stg_frame) + n_entries * (sizeof(stg_rec) + 2) +
	       n_deltas * (sizeof(stg_delta_rec) + 1) + names_size + 1;
}

uint64_t stg__trailer_mem_max(uint64_t file_size)
{
	uint64_t by_size = file_size > UINT64_MAX / STG_MANIFEST_MEM_RATIO
	                           ? UINT64_MAX
	                           : file_size * STG_MANIFEST_MEM_RATIO;
	return by_size > STG_MANIFEST_MEM_FLOOR ? by_size : STG_MANIFEST_MEM_FLOOR;
}

/* n bytes as "2.1 GiB", "512 MiB", "4.7 KiB", "12 B" into out */
static const char *show_size(uint64_t n, char out[32])
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0 || v >= 100 || v == (double)(uint64_t)v)
		snprintf(out, 32, "%.0f %s", v, unit[u]);
	else
		snprintf(out, 32, "%.1f %s", v, unit[u]);
	return out;
}

/* ---- encoding ---------------------------------------------------------- */

/* The body, compressed as it is laid out: a chunk at a time, so that a
 * million entries cost their compressed size, not their body's as well. */
typedef struct body_out {
	ZSTD_CCtx *cc;
	ZSTD_outBuffer out;
	uint8_t chunk[64 * 1024];
	size_t n;
	size_t zerr; /* a zstd error, once */
} body_out;

static void body_flush(body_out *o, ZSTD_EndDirective end)
{
	ZSTD_inBuffer in = {o->chunk, o->n, 0};
	size_t left;
	do {
		left = ZSTD_compressStream2(o->cc, &o->out, &in, end);
		if (ZSTD_isError(left)) {
			o->zerr = left;
			return;
		}
	} while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
	o->n = 0;
}

static void body_put(body_out *o, const void *p, size_t len)
{
	const uint8_t *b = p;
	while (len && !o->zerr) {
		size_t k = sizeof o->chunk - o->n < len ? sizeof o->chunk - o->n : len;
		memcpy(o->chunk + o->n, b, k);
		o->n += k;
		b += k;
		len -= k;
		if (o->n == sizeof o->chunk)
			body_flush(o, ZSTD_e_continue);
	}
}

/* The body's records and names, in format order. */
static void body_write(body_out *o, const stg_trailer *t, uint64_t names_size)
{
	uint8_t p[STG_BODY_HEADER_SIZE] = {0};
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
	body_put(o, p, STG_BODY_HEADER_SIZE);

	for (size_t i = 0; i < t->n_frames; i++) {
		uint8_t f[STG_FRAME_REC_SIZE] = {0};
		stg__put64(f, t->frames[i].comp_off);
		stg__put64(f + 8, t->frames[i].comp_size);
		stg__put64(f + 16, t->frames[i].raw_off);
		stg__put64(f + 24, t->frames[i].raw_size);
		memcpy(f + 32, t->frames[i].xxh3, 16);
		body_put(o, f, sizeof f);
	}
	uint64_t noff = 0;
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		uint8_t e[STG_ENTRY_REC_SIZE] = {0};
		stg__put64(e, r->tar_off);
		stg__put64(e + 8, r->data_off);
		stg__put64(e + 16, r->size);
		stg__put64(e + 24, (uint64_t)r->mtime);
		stg__put32(e + 32, r->mtime_nsec);
		stg__put32(e + 36, r->mode);
		stg__put64(e + 40, noff);
		stg__put32(e + 48, r->path_len);
		stg__put32(e + 52, r->link_len);
		e[56] = r->type;
		memcpy(e + 64, r->xxh3, 16);
		body_put(o, e, sizeof e);
		noff += r->path_len + r->link_len;
	}
	for (size_t i = 0; i < t->n_deltas; i++) {
		uint8_t d[STG_DELTA_REC_SIZE] = {0};
		memcpy(d, t->deltas[i].base, STG_DIGEST_LEN);
		stg__put64(d + 32, noff);
		stg__put32(d + 40, t->deltas[i].name_len);
		body_put(o, d, sizeof d);
		noff += t->deltas[i].name_len;
	}
	char path[STG_PATH_MAX + 1];
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		body_put(o, stg__trailer_path(t, r, path), r->path_len);
		if (r->link_len)
			body_put(o, stg__trailer_link(t, r), r->link_len);
	}
	for (size_t i = 0; i < t->n_deltas; i++)
		body_put(o, t->names + t->deltas[i].name_off, t->deltas[i].name_len);
}

stg_err stg__trailer_encode(stg_ctx *ctx, const stg_trailer *t, int level, uint8_t **out,
                            size_t *out_len)
{
	stg_err err = STG_OK;
	uint8_t *frame = NULL;
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
	/* room for the worst case; only the pages written are ever touched */
	size_t bound = ZSTD_compressBound(raw);
	body_out *o = calloc(1, sizeof *o);
	frame = malloc(8 + bound + STG_FOOTER_SIZE);
	if (!o || !frame || !(o->cc = ZSTD_createCCtx())) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory encoding the trailer");
		goto out;
	}
	ZSTD_CCtx_setParameter(o->cc, ZSTD_c_compressionLevel, level);
	ZSTD_CCtx_setParameter(o->cc, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setPledgedSrcSize(o->cc, raw);
	o->out = (ZSTD_outBuffer){frame + 8, bound, 0};
	body_write(o, t, names_size);
	if (!o->zerr)
		body_flush(o, ZSTD_e_end);
	if (o->zerr) {
		err = stg__fail(ctx, STG_EIO, "compressing the trailer: %s",
		                ZSTD_getErrorName(o->zerr));
		goto out;
	}
	size_t clen = o->out.pos;
	/* a pack its readers would refuse (trailer_decode) is not made */
	uint64_t file_size = t->data_size + 8 + clen + STG_FOOTER_SIZE;
	uint64_t need = stg__trailer_mem(t->n_frames, t->n_entries, t->n_deltas, names_size) +
	                stg__names_dirs_bound(t);
	if (need > stg__trailer_mem_max(file_size)) {
		char sn[32], sb[32], sf[32], sm[32];
		err = stg__fail(
		        ctx, STG_ENOTSUP,
		        "the pack's manifest would need %s of memory to read (%zu entries, %s of "
		        "names) in a pack of %s, more than a pack may ask for (%s: %d times "
		        "its size, or %llu MiB if more), so readers would refuse it: pack "
		        "its directories apart, as several packs",
		        show_size(need, sn), t->n_entries, show_size(names_size, sb),
		        show_size(file_size, sf), show_size(stg__trailer_mem_max(file_size), sm),
		        STG_MANIFEST_MEM_RATIO, (unsigned long long)(STG_MANIFEST_MEM_FLOOR >> 20));
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
	if (o)
		ZSTD_freeCCtx(o->cc);
	free(o);
	free(frame);
	return err;
}

/* ---- decoding ---------------------------------------------------------- */

static stg_err bad(stg_ctx *ctx, const char *what)
{
	return stg__fail(ctx, STG_ECORRUPT, "damaged pack: %s", what);
}

/* The decoded body, taken in order a piece at a time: the whole of it is
 * never in memory at once (a million entries make about 100 MiB). */
#define BODY_CHUNK ((size_t)64 << 10)

typedef struct body_in {
	stg_ctx *ctx;
	ZSTD_DStream *ds;
	ZSTD_inBuffer in;
	uint8_t *buf; /* decoded bytes not yet taken: buf[pos, len) */
	size_t pos, len;
	uint64_t made, raw; /* bytes decoded so far; the size the footer declares */
	bool ended;         /* the zstd frame is complete */
} body_in;

/* Decode until at least n bytes (n <= BODY_CHUNK) are there; a pointer to
 * them, taken.  NULL on error (said on ctx). */
static const uint8_t *body_next(body_in *b, size_t n, stg_err *err)
{
	while (b->len - b->pos < n) {
		if (b->ended) {
			*err = bad(b->ctx, "trailer body truncated");
			return NULL;
		}
		if (b->pos) {
			memmove(b->buf, b->buf + b->pos, b->len - b->pos);
			b->len -= b->pos;
			b->pos = 0;
		}
		ZSTD_outBuffer ob = {b->buf, BODY_CHUNK, b->len};
		size_t r = ZSTD_decompressStream(b->ds, &ob, &b->in);
		if (ZSTD_isError(r)) {
			*err = stg__fail(b->ctx, STG_ECORRUPT,
			                 "damaged pack: trailer does not decompress (%s)",
			                 ZSTD_getErrorName(r));
			return NULL;
		}
		b->made += ob.pos - b->len;
		b->len = ob.pos;
		if (b->made > b->raw) {
			*err = bad(b->ctx, "trailer body longer than its footer says");
			return NULL;
		}
		if (r == 0)
			b->ended = true;
		else if (ob.pos < ob.size && b->in.pos == b->in.size) {
			*err = bad(b->ctx, "trailer body truncated");
			return NULL;
		}
	}
	const uint8_t *p = b->buf + b->pos;
	b->pos += n;
	return p;
}

/* Is the body over, exactly at its declared size, with its frame ended? */
static stg_err body_end(body_in *b)
{
	while (!b->ended) {
		ZSTD_outBuffer ob = {b->buf, BODY_CHUNK, 0};
		size_t r = ZSTD_decompressStream(b->ds, &ob, &b->in);
		if (ZSTD_isError(r))
			return stg__fail(b->ctx, STG_ECORRUPT,
			                 "damaged pack: trailer does not decompress (%s)",
			                 ZSTD_getErrorName(r));
		if (ob.pos)
			return bad(b->ctx, "trailer body longer than its footer says");
		if (r == 0)
			b->ended = true;
		else if (b->in.pos == b->in.size)
			return bad(b->ctx, "trailer body truncated");
	}
	if (b->len != b->pos || b->made != b->raw || b->in.pos != b->in.size)
		return bad(b->ctx, "trailer body size does not match its footer");
	return STG_OK;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t limit)
{
	return a <= limit && b <= limit - a;
}

/* The frame records, checked for order and range. */
static stg_err parse_frames(body_in *b, uint64_t nf, uint64_t data_size, stg_trailer *t)
{
	stg_err err = STG_OK;
	size_t frame_rec = t->version >= 3 ? STG_FRAME_REC_SIZE : STG_FRAME_REC_SIZE_2;
	size_t cap = 0;
	uint64_t coff = 0, roff = 0;
	for (size_t i = 0; i < nf; i++) {
		const uint8_t *p = body_next(b, frame_rec, &err);
		if (!p)
			return err;
		if (stg__room((void **)&t->frames, &cap, i + 1, sizeof *t->frames, nf))
			return stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
		stg_frame *f = &t->frames[i];
		f->comp_off = stg__get64(p);
		f->comp_size = stg__get64(p + 8);
		f->raw_off = stg__get64(p + 16);
		f->raw_size = stg__get64(p + 24);
		if (t->version >= 3)
			memcpy(f->xxh3, p + 32, 16);
		if (f->comp_off != coff || f->raw_off != roff)
			return bad(b->ctx, "frame table is not contiguous");
		if (f->comp_size == 0 || !add_ok(coff, f->comp_size, data_size))
			return bad(b->ctx, "frame table runs past the data");
		if (f->raw_size == 0 || f->raw_size > STG_FRAME_RAW_MAX)
			return bad(b->ctx, "frame larger than a reader accepts");
		coff += f->comp_size;
		roff += f->raw_size;
		t->n_frames = i + 1;
	}
	if (coff != data_size)
		return bad(b->ctx, "frame table does not cover the data");
	if (roff != t->tar_size)
		return bad(b->ctx, "frame table does not match the tar size");
	return STG_OK;
}

/* The entry records; their names come later in the body (path_off is the
 * offset in the name table until then). */
static stg_err parse_entries(body_in *b, uint64_t ne, uint64_t names_size, stg_trailer *t,
                             uint64_t *next_name)
{
	stg_err err = STG_OK;
	size_t cap = 0;
	uint64_t content = 0, prev_end = 0;
	for (size_t i = 0; i < ne; i++) {
		const uint8_t *p = body_next(b, STG_ENTRY_REC_SIZE, &err);
		if (!p)
			return err;
		if (stg__room((void **)&t->recs, &cap, i + 1, sizeof *t->recs, ne))
			return stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
		stg_rec *r = &t->recs[i];
		r->tar_off = stg__get64(p);
		r->data_off = stg__get64(p + 8);
		r->size = stg__get64(p + 16);
		r->mtime = (int64_t)stg__get64(p + 24);
		r->mtime_nsec = stg__get32(p + 32);
		r->mode = stg__get32(p + 36);
		r->path_off = stg__get64(p + 40);
		r->path_len = stg__get32(p + 48);
		r->link_len = stg__get32(p + 52);
		r->type = p[56];
		memcpy(r->xxh3, p + 64, 16);
		static const uint8_t zero[7];
		if (memcmp(p + 57, zero, 7))
			return bad(b->ctx, "entry has reserved bytes set");
		t->n_entries = i + 1;

		if (r->type < STG_FILE || r->type > STG_HARDLINK)
			return bad(b->ctx, "entry of unknown type");
		if (r->mode & ~07777u || r->mtime_nsec >= 1000000000u)
			return bad(b->ctx, "entry with invalid mode or time");
		if (r->tar_off < prev_end || r->data_off < r->tar_off ||
		    r->data_off - r->tar_off < 512 || !add_ok(r->data_off, r->size, t->tar_size))
			return bad(b->ctx, "entry offsets out of order or range");
		prev_end = r->data_off + r->size;
		if (r->type != STG_FILE && r->size)
			return bad(b->ctx, "non-file entry with content");
		if ((r->type == STG_SYMLINK || r->type == STG_HARDLINK) != (r->link_len > 0))
			return bad(b->ctx, "link entry without target, or target on a non-link");
		/* names lie in entry order, so the table is read once and the
		 * decoded copy cannot outgrow it */
		if (r->path_len == 0 || r->path_len > STG_PATH_MAX || r->link_len > STG_PATH_MAX ||
		    r->path_off != *next_name ||
		    !add_ok(r->path_off, (uint64_t)r->path_len + r->link_len, names_size))
			return bad(b->ctx, "entry name out of range");
		*next_name = r->path_off + r->path_len + r->link_len;
		if (r->type == STG_FILE)
			content += r->size;
	}
	if (content != t->content_size)
		return bad(b->ctx, "content total does not match the manifest");
	if (prev_end > t->tar_size)
		return bad(b->ctx, "entries run past the tar stream");
	return STG_OK;
}

static stg_err parse_deltas(body_in *b, uint64_t nd, uint64_t names_size, stg_trailer *t,
                            uint64_t *next_name)
{
	stg_err err = STG_OK;
	size_t cap = 0;
	for (size_t i = 0; i < nd; i++) {
		const uint8_t *p = body_next(b, STG_DELTA_REC_SIZE, &err);
		if (!p)
			return err;
		if (stg__room((void **)&t->deltas, &cap, i + 1, sizeof *t->deltas, nd))
			return stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
		stg_delta_rec *d = &t->deltas[i];
		memcpy(d->base, p, STG_DIGEST_LEN);
		uint64_t noff = stg__get64(p + 32);
		d->name_len = stg__get32(p + 40);
		t->n_deltas = i + 1;
		if (stg__get32(p + 44) != 0)
			return bad(b->ctx, "delta record has reserved bytes set");
		if (d->name_len == 0 || d->name_len > 255 || noff != *next_name ||
		    !add_ok(noff, d->name_len, names_size))
			return bad(b->ctx, "delta record name out of range");
		*next_name = noff + d->name_len;
	}
	if (*next_name != names_size)
		return bad(b->ctx, "name table has bytes no entry uses");
	return STG_OK;
}

/* Past the bound with the directory table as it is: a pack whose paths
 * branch into more directories than its size allows. */
static stg_err too_many_dirs(stg_ctx *ctx, const stg_trailer *t, size_t at, uint64_t most)
{
	char sm[32];
	return stg__fail(ctx, STG_ECORRUPT,
	                 "damaged or hostile pack: its manifest would need more than %s of "
	                 "memory (%zu directories in its first %zu entries), the most a pack "
	                 "of its size may ask for (%d times its size, or %llu MiB if more); "
	                 "stager never makes such a pack, get it again from its source",
	                 show_size(most, sm), t->n_dirs, at, STG_MANIFEST_MEM_RATIO,
	                 (unsigned long long)(STG_MANIFEST_MEM_FLOOR >> 20));
}

/* The name table, in the order of the entries and then the delta records
 * that use it: each name checked, and placed as a directory (each once)
 * and a base name (trailer_names.h).  The directories may take what the
 * bound checked before left (dirs_max). */
static stg_err parse_names(body_in *b, uint64_t names_size, uint64_t most, stg_trailer *t)
{
	stg_err err = STG_OK;
	/* each name with a NUL after it: no more than this */
	size_t max = (size_t)names_size + 2 * t->n_entries + t->n_deltas + 1;
	uint64_t other =
	        stg__trailer_mem(t->n_frames, t->n_entries, t->n_deltas, 0) - (max - names_size);
	stg_names_in *s = malloc(sizeof *s);
	if (!s || stg__names_begin(t, s, max, other, most)) {
		free(s);
		return stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
	}
	for (size_t i = 0; i < t->n_entries && !err; i++) {
		stg_rec *r = &t->recs[i];
		size_t n = (size_t)r->path_len + r->link_len;
		const uint8_t *nm = body_next(b, n, &err);
		if (!nm)
			break;
		if (!stg__path_ok((const char *)nm, r->path_len))
			err = bad(b->ctx, "entry with an unsafe or malformed path");
		else if (memchr(nm + r->path_len, 0, r->link_len))
			err = bad(b->ctx, "link target contains a NUL byte");
		else if (r->type == STG_HARDLINK &&
		         !stg__path_ok((const char *)nm + r->path_len, r->link_len))
			err = bad(b->ctx, "hardlink with an unsafe target");
		else {
			int rc = stg__names_put(t, s, r, (const char *)nm,
			                        (const char *)nm + r->path_len);
			if (rc == -2)
				err = too_many_dirs(b->ctx, t, i + 1, most);
			else if (rc)
				err = stg__fail(b->ctx, STG_ENOMEM,
				                "out of memory reading the trailer");
		}
	}
	for (size_t i = 0; i < t->n_deltas && !err; i++) {
		stg_delta_rec *d = &t->deltas[i];
		const uint8_t *nm = body_next(b, d->name_len, &err);
		if (!nm)
			break;
		if (!stg__path_ok((const char *)nm, d->name_len) || memchr(nm, '/', d->name_len))
			err = bad(b->ctx, "delta record with an unsafe name");
		else if (stg__names_put_delta(t, s, d, (const char *)nm))
			err = stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
	}
	if (!err && stg__names_mem(t, s) > most)
		err = too_many_dirs(b->ctx, t, t->n_entries, most);
	free(s);
	if (!err && !t->names && !(t->names = calloc(1, 1)))
		err = stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
	return err;
}

static stg_err parse_body(body_in *b, uint64_t data_size, uint64_t file_size, uint32_t version,
                          stg_trailer *t)
{
	stg_err err = STG_OK;
	if (b->raw < STG_BODY_HEADER_SIZE)
		return bad(b->ctx, "trailer body has no header");
	const uint8_t *h = body_next(b, STG_BODY_HEADER_SIZE, &err);
	if (!h)
		return err;
	if (memcmp(h, STG_BODY_MAGIC, 4))
		return bad(b->ctx, "trailer body has no header");
	if (stg__get32(h + 4) != version)
		return bad(b->ctx, "trailer body version does not match its footer");
	uint64_t nf = stg__get64(h + 8), ne = stg__get64(h + 16), nd = stg__get64(h + 24);
	uint64_t names_size = stg__get64(h + 32);
	t->tar_size = stg__get64(h + 40);
	t->content_size = stg__get64(h + 48);
	memcpy(t->digest, h + 56, STG_DIGEST_LEN);
	t->version = version;
	/* version 2: the packed directory's mode at 88 */
	t->root_mode = version >= 2 ? stg__get32(h + 88) : 0;
	if ((version < 2 && stg__get32(h + 88)) || stg__get32(h + 92) ||
	    (t->root_mode & ~(STG_ROOT_MODE_SET | 07777u)) ||
	    (t->root_mode && !(t->root_mode & STG_ROOT_MODE_SET)))
		return bad(b->ctx, "trailer header has unknown fields set");

	/* the counts must add up to the declared size before any is read */
	uint64_t left = b->raw - STG_BODY_HEADER_SIZE;
	size_t frame_rec = version >= 3 ? STG_FRAME_REC_SIZE : STG_FRAME_REC_SIZE_2;
	if (nf > left / frame_rec)
		return bad(b->ctx, "frame count exceeds the trailer");
	left -= nf * frame_rec;
	if (ne > left / STG_ENTRY_REC_SIZE)
		return bad(b->ctx, "entry count exceeds the trailer");
	left -= ne * STG_ENTRY_REC_SIZE;
	if (nd > left / STG_DELTA_REC_SIZE)
		return bad(b->ctx, "delta count exceeds the trailer");
	left -= nd * STG_DELTA_REC_SIZE;
	if (names_size != left)
		return bad(b->ctx, "trailer sections do not add up to its size");
	if (nf == 0)
		return bad(b->ctx, "no frames");
	/* what decoding it would allocate, before any of it is: a small pack
	 * that declares millions of long names is refused here, not after
	 * its reader has taken gigabytes */
	uint64_t need = stg__trailer_mem(nf, ne, nd, names_size);
	uint64_t most = stg__trailer_mem_max(file_size);
	if (need > most) {
		char sn[32], sm[32], sf[32], sb[32];
		return stg__fail(b->ctx, STG_ECORRUPT,
		                 "damaged or hostile pack: its manifest would need %s of memory "
		                 "(%llu entries, %s of names) in a pack of %s, and a pack may ask "
		                 "for at most %s (%d times its size, or %llu MiB if more); refused "
		                 "before reading its names: stager never makes such a pack, get it "
		                 "again from its source",
		                 show_size(need, sn), (unsigned long long)ne,
		                 show_size(names_size, sb), show_size(file_size, sf),
		                 show_size(most, sm), STG_MANIFEST_MEM_RATIO,
		                 (unsigned long long)(STG_MANIFEST_MEM_FLOOR >> 20));
	}

	uint64_t next_name = 0;
	if ((err = parse_frames(b, nf, data_size, t)) ||
	    (err = parse_entries(b, ne, names_size, t, &next_name)) ||
	    (err = parse_deltas(b, nd, names_size, t, &next_name)) ||
	    (err = parse_names(b, names_size, most, t)))
		return err;
	/* at least one element each, as the readers expect */
	if ((!t->recs && !(t->recs = calloc(1, sizeof *t->recs))) ||
	    (!t->deltas && !(t->deltas = calloc(1, sizeof *t->deltas))))
		return stg__fail(b->ctx, STG_ENOMEM, "out of memory reading the trailer");
	return body_end(b);
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

	body_in b = {.ctx = ctx,
	             .ds = ZSTD_createDStream(),
	             .in = {body, (size_t)body_size, 0},
	             .buf = malloc(BODY_CHUNK),
	             .raw = body_raw};
	stg_err err = STG_OK;
	if (!b.ds || !b.buf)
		err = stg__fail(ctx, STG_ENOMEM, "out of memory reading the trailer");
	else {
		/* bound the decoder's window too: a hostile frame header could
		 * ask for a huge one */
		ZSTD_DCtx_setParameter(b.ds, ZSTD_d_windowLogMax, 27);
		t->data_size = data_size;
		err = parse_body(&b, data_size, file_size, version, t);
	}
	free(b.buf);
	ZSTD_freeDStream(b.ds);
	if (err)
		stg__trailer_free(t);
	return err;
}
