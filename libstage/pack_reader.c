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
 * A reader that walks the pack in order (a whole file read just after
 * the one read last, that begins a frame the walk has not touched)
 * streams it instead: that frame is fetched, checked and
 * decoded whole into the reader's own two buffers, which the next such
 * frame reuses, and the frame's other files are served from there.  A
 * walk in pack order thus decodes each frame once and touches no fresh
 * memory; through the cache, every frame would take new pages until the
 * cache is full (3,000 files of 13 KB, a 38 MB pack: 10,900 page faults,
 * 83 us a file on a VM where a first touch costs ~15 us a page; streamed,
 * 760 faults).  Random reads, frames read ahead (stg_reader_prefetch),
 * a file over two frames, a read that finds the stream busy in another
 * thread and older formats go through the cache.
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
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

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
	bool borrowed;          /* a fork's: pack, file, shown and map are the parent's */
	atomic_bool prefetched; /* the caller reads ahead: no streaming */
	/* the walk in pack order (all under mu) */
	struct {
		pthread_mutex_t mu;
		uint64_t end;     /* tar offset where the last whole read ended */
		size_t k;         /* the frame in data (SIZE_MAX: none) */
		uint8_t *comp;    /* its compressed bytes (room for the largest frame's), */
		uint8_t *data;    /* decoded (room for the largest frame's), */
		size_t cap_data;  /* (data's size) */
		ZSTD_DCtx *dctx;  /* and the decoder */
		uint64_t fetched; /* frames streamed, */
		uint64_t bytes;   /* their compressed bytes, */
		uint64_t hits;    /* reads served */
		uint64_t decoded; /* decoded bytes */
	} walk;
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

/* What a reader has of its own, not its manifest's: per frame the reason it
 * failed, per file (older formats) its check, the walk, the cache and its
 * read-ahead thread.  r->pack set. */
static stg_err reader_own(stg_ctx *ctx, stg_reader *r, const stg_reader_opts *o)
{
	const stg_trailer *t = &r->pack->t;
	size_t nf = t->n_frames ? t->n_frames : 1;
	r->why = calloc(nf, sizeof *r->why);
	/* (only older formats check files whole) */
	if (t->version < 3)
		r->state = calloc(t->n_entries + 1, 1);
	if (!r->why || (t->version < 3 && !r->state))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_frames_opts fo = {.max_bytes = o->cache_bytes,
	                      .prefetchers = o->prefetch ? 1 : 0,
	                      .prefetch_fetch_only = true,
	                      .fetch = fetch,
	                      .fetch_arg = r,
	                      .fetch_checks = true,
	                      .bad = frame_bad,
	                      .bad_arg = r};
	return stg__frames_new(ctx, t, &fo, &r->frames);
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
	pthread_mutex_init(&r->walk.mu, NULL);
	r->walk.k = SIZE_MAX;
	stg_err err = stg_pack_open(ctx, path, &r->pack);
	if (err) {
		pthread_mutex_destroy(&r->walk.mu);
		free(r);
		return err;
	}
	const stg_trailer *t = &r->pack->t;
	if (fstat(r->pack->fd, &r->st) || t->n_entries > UINT32_MAX) {
		err = stg__fail(ctx, STG_EIO, "'%s': cannot read its attributes", path);
		goto fail;
	}
	r->file = malloc((t->n_entries + 1) * sizeof *r->file);
	r->shown = malloc((t->n_entries + 1) * sizeof *r->shown);
	if (!r->file || !r->shown || stg__recmap_init(&r->map, t, t->n_entries)) {
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
	if ((err = reader_own(ctx, r, o)))
		goto fail;
	*out = r;
	return STG_OK;
fail:
	stg_reader_close(r);
	return err;
}

stg_err stg_reader_fork(stg_ctx *ctx, const stg_reader *parent, const char *path,
                        const stg_reader_opts *o, stg_reader **out)
{
	stg_reader_opts def;
	if (!o) {
		stg_reader_opts_init(&def);
		o = &def;
	}
	*out = NULL;
	/* the file the parent opened, as it was, still at path */
	struct stat now;
	if (path &&
	    (stat(path, &now) || now.st_dev != parent->st.st_dev ||
	     now.st_ino != parent->st.st_ino || stg__pack_changed(parent->pack, &parent->st)))
		return stg__fail_errno(ctx, STG_ECORRUPT, ESTALE,
		                       "'%s': the pack changed since it was opened, before this "
		                       "process was forked (another file there now, or its size or "
		                       "times moved): open it again",
		                       path);
	stg_reader *r = calloc(1, sizeof *r);
	if (!r)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	pthread_mutex_init(&r->walk.mu, NULL);
	r->walk.k = SIZE_MAX;
	/* the manifest as the fork left it: read here, never written, so its
	 * pages stay the parent's */
	r->borrowed = true;
	r->pack = parent->pack;
	r->st = parent->st;
	r->file = parent->file;
	r->shown = parent->shown;
	r->n = parent->n;
	r->map = parent->map;
	stg_err err = reader_own(ctx, r, o);
	if (err) {
		stg_reader_close(r);
		return err;
	}
	*out = r;
	return STG_OK;
}

void stg_reader_close(stg_reader *r)
{
	if (!r)
		return;
	stg__frames_free(r->frames);
	free((void *)r->why);
	free((void *)r->state);
	free(r->walk.comp);
	free(r->walk.data);
	ZSTD_freeDCtx(r->walk.dctx);
	pthread_mutex_destroy(&r->walk.mu);
	if (!r->borrowed) {
		stg__recmap_free(&r->map);
		free(r->file);
		free(r->shown);
		stg_pack_close(r->pack);
	}
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

/* Frame k fetched, checked and decoded whole into the walk's buffers (mu
 * held).  0, or an errno value: EIO for a damaged frame (told to
 * frame_bad), ESTALE if the pack changed. */
static int walk_load(stg_reader *r, size_t k)
{
	const stg_trailer *t = &r->pack->t;
	const stg_frame *f = &t->frames[k];
	if (!r->walk.comp || !r->walk.data || !r->walk.dctx) {
		uint64_t comp = 0, raw = 0;
		for (size_t j = 0; j < t->n_frames; j++) {
			comp = t->frames[j].comp_size > comp ? t->frames[j].comp_size : comp;
			raw = t->frames[j].raw_size > raw ? t->frames[j].raw_size : raw;
		}
		if (!r->walk.comp)
			r->walk.comp = stg__io_alloc((size_t)comp);
		if (!r->walk.data)
			r->walk.data = stg__io_alloc((size_t)raw);
		if (!r->walk.dctx)
			r->walk.dctx = ZSTD_createDCtx();
		r->walk.cap_data = (size_t)raw;
		if (!r->walk.comp || !r->walk.data || !r->walk.dctx)
			return ENOMEM;
	}
	r->walk.k = SIZE_MAX;
	int rc = fetch(r, k, r->walk.comp, (size_t)f->comp_size);
	if (rc == EBADMSG) {
		frame_bad(r, k, "its bytes do not match the frame table's XXH3-128");
		return EIO;
	}
	if (rc)
		return rc;
	size_t n = ZSTD_decompressDCtx(r->walk.dctx, r->walk.data, r->walk.cap_data, r->walk.comp,
	                               (size_t)f->comp_size);
	if (ZSTD_isError(n) || n != f->raw_size) {
		frame_bad(r, k,
		          ZSTD_isError(n) ? ZSTD_getErrorName(n) : "it decodes to the wrong size");
		return EIO;
	}
	r->walk.k = k;
	r->walk.fetched++;
	r->walk.bytes += f->comp_size;
	r->walk.decoded += n;
	return 0;
}

/* The bytes [at, at + n) of the tar stream from the walk, if it holds them
 * or they begin a frame that the walk in pack order reaches now (a whole
 * file, from at to file_end, just past where the last whole read ended,
 * in a frame it had not reached: a partial read of a cold frame decodes
 * only what it needs, through the cache); the walk's end moved to the
 * file's end when the read reaches it.  0 (served), -1 (not
 * the walk's: read them through the cache), or an errno value. */
static int walk_read(stg_reader *r, uint64_t from, uint64_t at, size_t n, uint64_t file_end,
                     uint8_t *out)
{
	const stg_trailer *t = &r->pack->t;
	if (t->version < 3 || atomic_load(&r->prefetched) || !n)
		return -1;
	size_t k = stg__frame_of(t, at);
	/* (a read over two frames, or of a frame that failed once: the
	 * cache's, which knows a damaged frame for good) */
	if (k >= t->n_frames || stg__frame_of(t, at + n - 1) != k || atomic_load(&r->why[k]))
		return -1;
	if (pthread_mutex_trylock(&r->walk.mu))
		return -1;
	int rc = -1;
	if (r->walk.k != k) {
		/* a frame the walk reaches now: this read starts a file not
		 * far past the last one's end (tar headers, empty files), and
		 * that end is in an earlier frame */
		uint64_t end = r->walk.end;
		bool next = at == from && at + n == file_end && from >= end &&
		            from - end <= (64u << 10) &&
		            (end == 0 ? k == stg__frame_of(t, 0) : stg__frame_of(t, end - 1) < k);
		if (!next)
			goto out;
		if ((rc = walk_load(r, k)))
			goto out;
	} else {
		r->walk.hits++;
	}
	const stg_frame *f = &t->frames[k];
	memcpy(out, r->walk.data + (at - f->raw_off), n);
	rc = 0;
out:
	if (rc <= 0 && at + n == file_end)
		r->walk.end = file_end;
	pthread_mutex_unlock(&r->walk.mu);
	return rc;
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
	int rc = walk_read(r, c->data_off, c->data_off + off, n, c->data_off + c->size, buf);
	if (rc < 0)
		rc = stg__frames_read(r->frames, c->data_off + off, n, buf);
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
	int rc =
	        walk_read(r, c->data_off, c->data_off, (size_t)c->size, c->data_off + c->size, buf);
	if (rc < 0)
		rc = stg__frames_read(r->frames, c->data_off, (size_t)c->size, buf);
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
	/* the caller reads ahead through the cache: the walk would fetch
	 * those frames again */
	atomic_store(&r->prefetched, true);
	stg__frames_prefetch(r->frames, frame, n);
}

void stg_reader_get_stats(stg_reader *r, stg_reader_stats *s)
{
	stg__frames_counts(r->frames, &s->frames_fetched, &s->frames_cached, &s->bytes_fetched);
	s->bytes_decoded = stg__frames_decoded(r->frames);
	/* and the walk's */
	pthread_mutex_lock(&r->walk.mu);
	s->frames_fetched += r->walk.fetched;
	s->frames_cached += r->walk.hits;
	s->bytes_fetched += r->walk.bytes;
	s->bytes_decoded += r->walk.decoded;
	pthread_mutex_unlock(&r->walk.mu);
}
