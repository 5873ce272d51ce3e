/*
 * delta_apply.c - a pack's tree built from a delta and the cached tree of
 * the older version it was made against (delta_write.c says what a delta
 * holds), or a delta checked without that tree.
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
#include "extract_tree.h"
#include "delta_file.h"
#include "rsdelta.h"
#include "writer.h"
#include "ctx.h"
#include "bytes.h"
#include "trailer.h"
#include "pack_read.h"
#include "fsutil.h"
#include "path.h"
#include "manifest_list.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	stg_writer *wr; /* writes a large file on a thread of its own */
	bool writing;   /* ... this one */
	bool patching;  /* ... or this one is patched: written at a->size */
	bool sharing;   /* outfd's filesystem shares blocks between files */
} applier;

/* Files of at least this size are written by a thread of their own.  (A
 * second writer only waits for the first: writes to one file take its
 * inode's lock; a delta stage of a 1 GiB image took 0.70 s with two
 * against 0.61 s with one.) */
#define WRITER_MIN (16u << 20)

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

static stg_err too_large(applier *a)
{
	return stg__fail(a->ctx, STG_ECORRUPT,
	                 "damaged delta: it makes '%s' larger than its %llu bytes", a->path,
	                 (unsigned long long)a->want);
}

static stg_err write_failed(applier *a)
{
	return stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
	                       "cannot write '%s'", a->path);
}

static stg_err out_sink(void *arg, const uint8_t *p, size_t n)
{
	applier *a = arg;
	if (n > a->want - a->size)
		return too_large(a);
	uint64_t at = a->size;
	a->size += n;
	XXH3_128bits_update(a->xs, p, n);
	if (a->writing)
		return stg__writer_put(a->wr, p, n) ? write_failed(a) : STG_OK;
	if (a->fd < 0)
		return STG_OK;
	if (a->patching ? stg__pwrite_full(a->fd, p, n, at) : stg__write_full(a->fd, p, n))
		return write_failed(a);
	return STG_OK;
}

static stg_err short_base(applier *a)
{
	return errno ? stg__fail_errno(a->ctx, STG_EIO, errno, "reading the base of '%s'", a->path)
	             : bad(a, "the cached base's '%s' is shorter than its manifest says", a->path);
}

/* A patch's COPY of the base's [pos, pos + len).  On a filesystem that
 * shares blocks between files (XFS, btrfs) the kernel shares them (a new
 * version of an image costs its changes on disk, not its size), and the
 * base is read for the hash; where it cannot, the bytes read are written.
 * (Elsewhere copy_file_range copies the bytes, and does that slower than
 * the writer thread.)  A file the writer thread writes gets the base's
 * bytes read straight into the writer's buffer. */
static stg_err copy_sink(void *arg, int basefd, uint64_t pos, uint64_t len, uint8_t *buf,
                         size_t cap)
{
	applier *a = arg;
	if (len > a->want - a->size)
		return too_large(a);
	uint64_t at = a->size;
	bool copied = false;
	if (a->fd >= 0 && a->sharing) { /* (sharing means patching: no writer) */
		int rc = stg__copy_range(basefd, pos, a->fd, at, len);
		if (rc < 0 && !errno)
			return bad(a, "the cached base's '%s' is shorter than its manifest says",
			           a->path);
		if (rc < 0)
			return write_failed(a);
		copied = rc == 0;
		a->sharing = rc == 0;
	}
	for (uint64_t done = 0; done < len;) {
		size_t k = cap;
		uint8_t *to = a->writing ? stg__writer_room(a->wr, &k) : buf;
		if (!to)
			return write_failed(a);
		k = len - done < k ? (size_t)(len - done) : k;
		if (stg__pread_full(basefd, to, k, pos + done))
			return short_base(a);
		XXH3_128bits_update(a->xs, to, k);
		/* as out_sink writes: at its place when patching, else in order */
		int rc = 0;
		if (a->writing)
			rc = stg__writer_commit(a->wr, k);
		else if (!copied && a->fd >= 0)
			rc = a->patching ? stg__pwrite_full(a->fd, to, k, at + done)
			                 : stg__write_full(a->fd, to, k);
		if (rc)
			return write_failed(a);
		done += k;
		if (stg__cancelled(a->ctx))
			return stg__fail(a->ctx, STG_EINTR, "interrupted");
	}
	a->size += len;
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
	char pbuf[STG_PATH_MAX + 1];
	const char *path = stg__rec_path(a->target, r, pbuf);
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

/* Pass a record's payload chunks to patch (applying a delta), or to the
 * file, or (discard) nowhere. */
static stg_err payload(applier *a, stg_rpatch *patch, bool discard)
{
	for (;;) {
		uint8_t len[4];
		stg_err err = stg__zin_read(&a->z, len, 4);
		if (err)
			return err;
		uint32_t n = stg__get32(len);
		if (n > DELTA_CHUNK_MAX)
			return bad(a, "damaged delta: an oversized chunk in '%s'", a->path);
		if (n && (err = stg__zin_read(&a->z, a->chunk, n)))
			return err;
		if (discard)
			err = STG_OK;
		else if (patch)
			err = stg__rpatch_sink(patch, a->chunk, n);
		else
			err = out_sink(a, a->chunk, n);
		if (err) {
			if (patch && err == STG_ECORRUPT) {
				char msg[STG_ERRMSG_MAX];
				snprintf(msg, sizeof msg, "%s", stg_errmsg(a->ctx));
				return stg__fail(a->ctx, err, "%s (the patch of '%s')", msg,
				                 a->path);
			}
			return err;
		}
		if (!n)
			return STG_OK;
	}
}

/* Make r from its record: patched from the base, or whole. */
static stg_err from_delta(applier *a, const drec *d, const stg_rec *r)
{
	char pbuf[STG_PATH_MAX + 1];
	const char *path = stg__rec_path(a->target, r, pbuf);
	int basis = -1;
	stg_rpatch *patch = NULL;
	stg_err err = STG_OK;
	a->path = path;
	if (!a->base && d->kind == DK_PATCH) {
		/* checking without the base: a patch cannot be applied */
		if (!(err = payload(a, NULL, true)))
			a->st->patched++;
		return err;
	}
	if (d->kind == DK_PATCH) {
		const stg_mfile *bf = base_file(a, d->basis, NULL);
		if (!bf)
			return bad(a, "damaged delta: it patches '%s', which the base lacks",
			           d->basis);
		basis = stg__open_beneath(a->basefd, d->basis, O_RDONLY, 0);
		if (basis < 0)
			return stg__fail_errno(a->ctx, STG_ECORRUPT, errno,
			                       "the cached base lacks '%s' (damaged entry?)",
			                       d->basis);
		if (!(patch = stg__rpatch_new(a->ctx, basis, bf->size, out_sink, a))) {
			close(basis);
			return stg__fail(a->ctx, STG_ENOMEM, "out of memory");
		}
		stg__rpatch_set_copy(patch, copy_sink);
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
	/* a patched file is written where each command puts it; a large one
	 * sent whole, by another thread while this one reads and hashes */
	a->patching = patch && a->sharing;
	a->writing = a->fd >= 0 && !a->patching && r->size >= WRITER_MIN &&
	             (a->wr || (a->wr = stg__writer_new(1, 4u << 20)));
	if (a->writing)
		stg__writer_begin(a->wr, a->fd);
	if (!err)
		err = payload(a, patch, false);
	if (a->writing) {
		a->writing = false;
		if (stg__writer_end(a->wr) && !err)
			err = stg__fail_errno(a->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "cannot write '%s'", path);
	}
	if (!err) {
		uint8_t h[16];
		stg__hash_digest(a->xs, h);
		if (a->size != r->size || memcmp(h, r->xxh3, 16))
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
	stg__rpatch_free(patch);
	if (basis >= 0)
		close(basis);
	return err;
}

/* The next record's header and basis; it must name a later non-empty
 * file of the target, with the target's size and XXH3-128. */
static stg_err next_record(applier *a, drec *d, uint64_t after, bool first)
{
	uint8_t h[DELTA_REC_SIZE];
	stg_err err = stg__zin_read(&a->z, h, sizeof h);
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
	char pbuf[STG_PATH_MAX + 1];
	const char *path = stg__rec_path(a->target, r, pbuf);
	if (h[9] || h[10] || h[11] || d->kind < DK_COPY || d->kind > DK_WHOLE)
		return bad(a, "damaged delta: a bad record for '%s'", path);
	if (r->type != STG_FILE || !r->size || d->size != r->size || memcmp(d->xxh3, r->xxh3, 16))
		return bad(a,
		           "the delta's record for '%s' is not the pack's (made for another "
		           "version?)",
		           path);
	if ((d->kind == DK_WHOLE) != (d->basis_len == 0) || d->basis_len > STG_PATH_MAX)
		return bad(a, "damaged delta: a bad record for '%s'", path);
	if ((err = stg__zin_read(&a->z, d->basis, d->basis_len)))
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
		stg_err err = stg__zin_read(&a->z, len, 2);
		if (err)
			return err;
		size_t l = (size_t)len[0] | (size_t)len[1] << 8;
		if (!l || l > STG_PATH_MAX)
			return bad(a, "damaged delta: %s",
			           "a bad entry in its list of removed files");
		if ((err = stg__zin_read(&a->z, path, l)))
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
		char pbuf[STG_PATH_MAX + 1];
		const char *path = stg__rec_path(a->target, r, pbuf);
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
	stg_err err = stg__dsrc_read(ctx, src, hb, sizeof hb, 0, &st->bytes_read);
	if (err || (err = stg__dheader_decode(ctx, hb, &h)))
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
	if ((err = stg__select(ctx, target, NULL, false, &sel)) ||
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
	err = stg__zin_init(&a.z, ctx, src, h.body_size, &st->bytes_read);
	a.chunk = malloc(DELTA_CHUNK_MAX);
	a.out = stg__io_alloc(XFER_BLOCK);
	a.xs = XXH3_createState();
	if (!err && (!a.chunk || !a.out || !a.xs))
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (err)
		goto out;
	if (src->fd >= 0)
		posix_fadvise(src->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	a.sharing = outfd >= 0 && stg__fs_shares_blocks(outfd);
	if (!(err = apply_files(&a, h.n_records, h.n_removed)) &&
	    !(err = stg__zin_end(&a.z, h.body_xxh)) && outfd >= 0)
		err = stg__tree_finish(ctx, target, sel, outfd, true);
	if (src->fd >= 0)
		posix_fadvise(src->fd, 0, 0, POSIX_FADV_DONTNEED);
out:
	stg__zin_free(&a.z);
	stg__writer_free(a.wr);
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
