/*
 * pack_reader.c - a pack's files read at random, checked, from any thread.
 *
 * What `import stager` and other programs read packs with, without a
 * mount or a copy.  Opening reads the trailer once (stg_pack_open) and
 * maps each regular file's path (a hard link's too, with its target's
 * bytes) to its place in the tar stream.  A read takes the frames that
 * hold the bytes from a bounded cache of decoded frames (mount_frames.c):
 * each frame fetched with pread when first needed, checked against the
 * frame table's XXH3-128 before it is decoded, and decoded only as far as
 * reads need.  Older packs (format 1 and 2) have no frame hashes: a file
 * of theirs is checked whole against its XXH3-128 before any byte of it
 * is served.  stg_reader_read checks every file whole, whatever the
 * format.
 *
 * A frame that fails its check fails the reads of its files, for good,
 * and only theirs.  A frame whose bytes changed because the pack changed
 * in place (its size, mtime or ctime are not those at open) is ESTALE,
 * not damage.
 */
#include "ctx.h"
#include "mount_frames.h"
#include "pack_read.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

enum { FILE_UNCHECKED, FILE_OK, FILE_BAD };

struct stg_reader {
	stg_pack *pack;
	struct stat st;             /* the pack at open */
	uint32_t *file;             /* per file: its record (a hard link: its target's) */
	uint32_t *shown;            /* per file: the record that names it */
	size_t n;                   /* files */
	stg_recmap map;             /* path -> file */
	stg_frames *frames;         /* decoded frames, bounded */
	_Atomic(const char *) *why; /* per frame: why it failed its check (NULL: it did not) */
	_Atomic uint8_t *state;     /* format 1 and 2: per file, checked whole yet? */
	atomic_bool changed;
};

void stg_reader_opts_init(stg_reader_opts *o)
{
	memset(o, 0, sizeof *o);
	o->cache_bytes = 64u << 20;
	o->prefetch = 1;
}

/* Has the pack changed in place since it was opened? */
static bool changed(stg_reader *r)
{
	if (!stg__pack_changed(r->pack, &r->st))
		return false;
	atomic_store(&r->changed, true);
	return true;
}

/* Frame k's compressed bytes, hashed once: against the frame table (format
 * 3: EBADMSG if they do not match, the frame then damaged) and, where a
 * read fails or the bytes do not match, the pack's attributes against
 * those at open: a pack rewritten or cut short in place since (its bytes
 * gone or others) is ESTALE, not damage. */
static int fetch(void *arg, size_t k, uint8_t *buf, size_t len)
{
	stg_reader *r = arg;
	const stg_frame *f = &r->pack->t.frames[k];
	if (stg__pack_pread(r->pack, buf, len, f->comp_off)) {
		int e = errno ? errno : EIO;
		return changed(r) ? ESTALE : e;
	}
	if (r->pack->t.version >= 3) {
		XXH128_canonical_t h;
		XXH128_canonicalFromHash(&h, XXH3_128bits(buf, len));
		if (memcmp(h.digest, f->xxh3, 16))
			return changed(r) ? ESTALE : EBADMSG;
	} else if (changed(r)) {
		return ESTALE;
	}
	return 0;
}

static void frame_bad(void *arg, size_t k, const char *why)
{
	stg_reader *r = arg;
	atomic_store(&r->why[k], why);
}

stg_err stg_reader_open(stg_ctx *ctx, const char *path, const stg_reader_opts *o, stg_reader **out)
{
	stg_reader_opts def;
	if (!o) {
		stg_reader_opts_init(&def);
		o = &def;
	}
	*out = NULL;
	stg_reader *r = calloc(1, sizeof *r);
	if (!r)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = stg_pack_open(ctx, path, &r->pack);
	if (err) {
		free(r);
		return err;
	}
	const stg_trailer *t = &r->pack->t;
	size_t nf = t->n_frames ? t->n_frames : 1;
	if (fstat(r->pack->fd, &r->st) || t->n_entries > UINT32_MAX) {
		err = stg__fail(ctx, STG_EIO, "'%s': cannot read its attributes", path);
		goto fail;
	}
	r->file = malloc((t->n_entries + 1) * sizeof *r->file);
	r->shown = malloc((t->n_entries + 1) * sizeof *r->shown);
	r->why = calloc(nf, sizeof *r->why);
	/* (only older formats check files whole) */
	if (t->version < 3)
		r->state = calloc(t->n_entries + 1, 1);
	if (!r->file || !r->shown || !r->why || (t->version < 3 && !r->state) ||
	    stg__recmap_init(&r->map, t, t->n_entries)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *rec = &t->recs[i];
		uint32_t target = (uint32_t)i;
		if (rec->type == STG_HARDLINK) {
			/* the content of the file it names, if the pack has it */
			const char *to = stg__rec_link(r->pack, rec);
			uint32_t j = stg__recmap_get(&r->map, to, rec->link_len);
			if (j == UINT32_MAX)
				continue;
			target = r->file[j];
		} else if (rec->type != STG_FILE) {
			continue;
		}
		uint32_t j = stg__recmap_get_rec(&r->map, (uint32_t)i);
		if (j == UINT32_MAX) {
			j = (uint32_t)r->n++;
			if (stg__recmap_put(&r->map, (uint32_t)i, j, NULL) < 0) {
				err = stg__fail(ctx, STG_ENOMEM, "out of memory");
				goto fail;
			}
		}
		/* a path packed twice: the later wins, as tar extracts it */
		r->file[j] = target;
		r->shown[j] = (uint32_t)i;
	}
	stg_frames_opts fo = {.max_bytes = o->cache_bytes,
	                      .prefetchers = o->prefetch ? 1 : 0,
	                      .prefetch_fetch_only = true,
	                      .fetch = fetch,
	                      .fetch_arg = r,
	                      .fetch_checks = true,
	                      .bad = frame_bad,
	                      .bad_arg = r};
	if ((err = stg__frames_new(ctx, t, &fo, &r->frames)))
		goto fail;
	*out = r;
	return STG_OK;
fail:
	stg_reader_close(r);
	return err;
}

void stg_reader_close(stg_reader *r)
{
	if (!r)
		return;
	stg__frames_free(r->frames);
	stg__recmap_free(&r->map);
	free(r->file);
	free(r->shown);
	free((void *)r->why);
	free((void *)r->state);
	stg_pack_close(r->pack);
	free(r);
}

const stg_pack *stg_reader_pack(const stg_reader *r)
{
	return r->pack;
}

size_t stg_reader_count(const stg_reader *r)
{
	return r->n;
}

int stg_reader_file(const stg_reader *r, size_t i, stg_entry *out)
{
	if (i >= r->n)
		return -1;
	/* the entry that names it, with the content of the one it links to */
	stg_pack_entry(r->pack, r->shown[i], out);
	const stg_rec *c = &r->pack->t.recs[r->file[i]];
	out->link = NULL;
	out->type = STG_FILE;
	out->mode &= 07777;
	out->size = c->size;
	out->data_offset = c->data_off;
	memcpy(out->xxh3, c->xxh3, 16);
	return 0;
}

int stg_reader_find(const stg_reader *r, const char *path, size_t len, size_t *i)
{
	uint32_t j = stg__recmap_get(&r->map, path, len);
	if (j == UINT32_MAX)
		return -1;
	*i = j;
	return 0;
}

size_t stg_reader_frame(const stg_reader *r, size_t i)
{
	if (i >= r->n)
		return 0;
	const stg_rec *c = &r->pack->t.recs[r->file[i]];
	size_t k = stg__frame_of(&r->pack->t, c->data_off);
	return k < r->pack->t.n_frames ? k : 0;
}

int stg_reader_pread(stg_reader *r, size_t i, void *buf, size_t len, uint64_t off, size_t *got)
{
	*got = 0;
	if (i >= r->n)
		return EINVAL;
	const stg_rec *c = &r->pack->t.recs[r->file[i]];
	if (r->pack->t.version < 3) {
		uint8_t st = atomic_load(&r->state[r->file[i]]);
		if (st == FILE_BAD)
			return EIO;
		if (st == FILE_UNCHECKED) {
			int rc = stg__frames_check(r->frames, c->data_off, c->size, c->xxh3);
			if (rc == EIO)
				atomic_store(&r->state[r->file[i]], FILE_BAD);
			if (rc)
				return rc;
			atomic_store(&r->state[r->file[i]], FILE_OK);
		}
	}
	if (off >= c->size)
		return 0;
	size_t n = c->size - off < len ? (size_t)(c->size - off) : len;
	int rc = stg__frames_read(r->frames, c->data_off + off, n, buf);
	if (!rc)
		*got = n;
	return rc;
}

int stg_reader_read(stg_reader *r, size_t i, void *buf)
{
	if (i >= r->n)
		return EINVAL;
	const stg_rec *c = &r->pack->t.recs[r->file[i]];
	if (!c->size)
		return 0;
	/* read into buf, then hashed there: one pass over memory the caller
	 * wants anyway */
	int rc = stg__frames_read(r->frames, c->data_off, (size_t)c->size, buf);
	if (rc)
		return rc;
	XXH128_canonical_t h;
	XXH128_canonicalFromHash(&h, XXH3_128bits(buf, (size_t)c->size));
	return memcmp(h.digest, c->xxh3, 16) ? EIO : 0;
}

int stg_reader_why(stg_reader *r, size_t i, int rc, char *buf, size_t len)
{
	/* an error that a changed pack explains is said so: the file is not
	 * the one opened (rewritten, cut short), not damaged */
	if (rc == ESTALE || atomic_load(&r->changed) || (rc == EIO && changed(r))) {
		snprintf(buf, len, "the pack changed since it was opened; open it again");
		return ESTALE;
	}
	if (rc != EIO || i >= r->n) {
		snprintf(buf, len, "%s", strerror(rc));
		return rc;
	}
	/* the first damaged frame of the file's, else its hash */
	const stg_trailer *t = &r->pack->t;
	const stg_rec *c = &r->pack->t.recs[r->file[i]];
	size_t k = stg__frame_of(t, c->data_off);
	for (; k < t->n_frames && t->frames[k].raw_off < c->data_off + (c->size ? c->size : 1);
	     k++) {
		const char *why = atomic_load(&r->why[k]);
		if (why) {
			snprintf(buf, len, "frame %zu, which holds it, is damaged (%s)", k, why);
			return rc;
		}
	}
	snprintf(buf, len, "its bytes do not match its XXH3-128");
	return rc;
}

void stg_reader_prefetch(stg_reader *r, size_t frame, size_t n)
{
	stg__frames_prefetch(r->frames, frame, n);
}

void stg_reader_get_stats(stg_reader *r, stg_reader_stats *s)
{
	stg__frames_counts(r->frames, &s->frames_fetched, &s->frames_cached, &s->bytes_fetched);
	s->bytes_decoded = stg__frames_decoded(r->frames);
}
