/*
 * extract.c - decode a pack's frames in parallel, writing files (unpack) or
 * only checking them (verify).
 *
 * The manifest says where each file's content lies in the tar stream, so a
 * decoded frame is applied directly: for every selected file that overlaps
 * it, the overlapping bytes are written at the right offset of the file and
 * hashed.  Tar headers are not parsed again; the pack's SHA-256 (over all
 * compressed bytes) and each file's XXH3-128 are what make the result
 * trustworthy.
 *
 * Threads: one reader reads the needed frames in order (one sequential
 * pass, feeding the SHA-256 when every frame is read) into a bounded queue;
 * workers decode and apply frames.  A file inside one frame is created,
 * written, hashed and closed by that frame's worker.  A file spanning frames
 * is created beforehand; each worker writes its piece with pwrite, and the
 * pieces are hashed in frame order (a worker waits for the previous piece).
 * Frames are handed out in order, so such a wait always ends.
 *
 * Safety: before anything is written the tree is checked (check_tree):
 * unique clean paths, parents that are directories, hardlinks to earlier
 * files, symlinks that stay inside.  Directories are created first, files
 * next (O_EXCL|O_NOFOLLOW), links last, so no write ever passes through a
 * symlink.  Setuid/setgid bits are never set.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#define NONE UINT32_MAX

typedef struct ex_span {
	uint32_t next; /* frame whose piece is to be hashed next */
	uint32_t last; /* last frame holding this file */
	XXH3_state_t *xs;
} ex_span;

typedef struct ex_buf {
	struct ex_buf *next;
	size_t frame;
	uint8_t *data;
	size_t cap;
} ex_buf;

typedef struct ex_state {
	stg_ctx *ctx;
	stg_pack *p;
	const stg_trailer *t;
	int rootfd; /* -1: verify only */
	mode_t umask;
	bool read_only;
	const bool *sel;
	const uint32_t *span_of;
	ex_span *spans;
	const size_t *frames; /* needed frames, in order */
	size_t n_frames;
	bool hash_pack;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	ex_buf *free_list, *qhead, *qtail;
	bool reader_done;
	stg_err err;
	char errmsg[STG_ERRMSG_MAX];
	uint8_t sha[STG_DIGEST_LEN];
	uint64_t done_bytes;
} ex_state;

static void ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void ex_fail(ex_state *s, stg_err err, const char *fmt, ...)
{
	pthread_mutex_lock(&s->mu);
	if (!s->err) {
		s->err = err;
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
		va_end(ap);
	}
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

/* Has the run failed or been cancelled?  A cancel becomes an error here, so
 * that every waiter (for a buffer, or a previous piece of a file) wakes. */
static bool ex_failed(ex_state *s)
{
	if (stg__cancelled(s->ctx))
		ex_fail(s, STG_EINTR, "interrupted");
	pthread_mutex_lock(&s->mu);
	bool f = s->err != STG_OK;
	pthread_mutex_unlock(&s->mu);
	return f;
}

static void hex16(const uint8_t *h, char *out)
{
	static const char x[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = x[h[i] >> 4];
		out[2 * i + 1] = x[h[i] & 15];
	}
	out[32] = '\0';
}

/* Compare a finished hash with the manifest's; fail naming the file. */
static bool check_hash(ex_state *s, const stg_rec *r, XXH128_hash_t h, size_t frame)
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	if (memcmp(c.digest, r->xxh3, 16) == 0)
		return true;
	char want[33], got[33];
	hex16(r->xxh3, want);
	hex16(c.digest, got);
	ex_fail(s, STG_ECORRUPT, "'%s' is damaged (frame %zu): expected xxh3 %s, found %s",
	        stg__rec_path(s->p, r), frame, want, got);
	return false;
}

mode_t stg__final_mode(const stg_rec *r, bool read_only)
{
	mode_t mode = r->mode & 01777; /* never setuid/setgid */
	return read_only ? mode & ~(mode_t)0222 : mode;
}

static mode_t final_mode(const ex_state *s, const stg_rec *r)
{
	return stg__final_mode(r, s->read_only);
}

/* Files are created with their final permission bits (less the umask), so
 * most need no chmod afterwards. */
static mode_t create_mode(const ex_state *s, const stg_rec *r)
{
	return final_mode(s, r) & 0777;
}

static int set_meta(ex_state *s, int fd, const stg_rec *r, bool force_chmod)
{
	mode_t mode = final_mode(s, r);
	if (force_chmod || mode != (create_mode(s, r) & ~s->umask)) {
		if (fchmod(fd, mode))
			return -1;
	}
	struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
	return futimens(fd, ts);
}

/* Write one piece of a file at its offset. */
static int write_at(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static void io_fail(ex_state *s, const char *what, const char *path)
{
	int e = errno;
	ex_fail(s, stg__err_from_errno(e, STG_EIO), "%s '%s': %s", what, path, strerror(e));
}

/* Apply a decoded frame: every selected file overlapping it. */
static void apply_frame(ex_state *s, size_t k, const uint8_t *raw)
{
	const stg_trailer *t = s->t;
	const stg_frame *f = &t->frames[k];
	uint64_t fend = f->raw_off + f->raw_size;
	/* first entry whose content ends after the frame starts */
	size_t lo = 0, hi = t->n_entries;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const stg_rec *r = &t->recs[mid];
		if (r->data_off + r->size <= f->raw_off)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		if (r->data_off >= fend)
			break;
		if (r->type != STG_FILE || r->size == 0 || !s->sel[i])
			continue;
		if (ex_failed(s))
			return;
		uint64_t a = r->data_off > f->raw_off ? r->data_off : f->raw_off;
		uint64_t b = r->data_off + r->size < fend ? r->data_off + r->size : fend;
		const uint8_t *piece = raw + (a - f->raw_off);
		size_t plen = (size_t)(b - a);
		const char *path = stg__rec_path(s->p, r);
		uint32_t si = s->span_of[i];

		if (si == NONE) {
			/* the whole file is in this frame */
			XXH128_hash_t h = XXH3_128bits(piece, plen);
			if (!check_hash(s, r, h, k))
				return;
			if (s->rootfd < 0)
				continue;
			int fd = openat(s->rootfd, path,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			                create_mode(s, r));
			if (fd < 0) {
				io_fail(s, "cannot create", path);
				return;
			}
			if (write_at(fd, piece, plen, 0) || set_meta(s, fd, r, false)) {
				io_fail(s, "cannot write", path);
				close(fd);
				return;
			}
			if (close(fd)) {
				io_fail(s, "cannot write", path);
				return;
			}
			continue;
		}

		/* a piece of a file that spans frames */
		ex_span *sp = &s->spans[si];
		int fd = -1;
		if (s->rootfd >= 0) {
			fd = openat(s->rootfd, path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd < 0 || write_at(fd, piece, plen, a - r->data_off)) {
				io_fail(s, "cannot write", path);
				if (fd >= 0)
					close(fd);
				return;
			}
		}
		pthread_mutex_lock(&s->mu);
		while (sp->next != k && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		bool stop = s->err != STG_OK;
		pthread_mutex_unlock(&s->mu);
		if (stop) {
			if (fd >= 0)
				close(fd);
			return;
		}
		XXH3_128bits_update(sp->xs, piece, plen);
		bool ok = true;
		if (k == sp->last) {
			ok = check_hash(s, r, XXH3_128bits_digest(sp->xs), k);
			if (ok && fd >= 0 && set_meta(s, fd, r, true)) {
				io_fail(s, "cannot write", path);
				ok = false;
			}
		}
		if (fd >= 0 && close(fd) && ok) {
			io_fail(s, "cannot write", path);
			ok = false;
		}
		if (!ok)
			return;
		pthread_mutex_lock(&s->mu);
		sp->next = k + 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
}

static void *ex_worker(void *arg)
{
	ex_state *s = arg;
	ZSTD_DCtx *dc = ZSTD_createDCtx();
	uint8_t *raw = NULL;
	size_t raw_cap = 0;
	if (!dc) {
		ex_fail(s, STG_ENOMEM, "out of memory");
		return NULL;
	}
	ZSTD_DCtx_setParameter(dc, ZSTD_d_windowLogMax, 27);
	for (;;) {
		pthread_mutex_lock(&s->mu);
		while (!s->qhead && !s->reader_done && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->err || !s->qhead) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		ex_buf *b = s->qhead;
		s->qhead = b->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);

		const size_t k = b->frame; /* b is reused once it is back on the free list */
		const stg_frame *f = &s->t->frames[k];
		bool ok = true;
		if (raw_cap < f->raw_size) {
			free(raw);
			raw = malloc(f->raw_size);
			raw_cap = raw ? f->raw_size : 0;
			if (!raw) {
				ex_fail(s, STG_ENOMEM, "out of memory");
				ok = false;
			}
		}
		if (ok) {
			/* exactly one frame, of exactly the size the table says */
			size_t fsz = ZSTD_findFrameCompressedSize(b->data, f->comp_size);
			unsigned long long csz = ZSTD_getFrameContentSize(b->data, f->comp_size);
			size_t n = 0;
			if (ZSTD_isError(fsz) || fsz != f->comp_size || csz != f->raw_size) {
				ok = false;
			} else {
				n = ZSTD_decompressDCtx(dc, raw, f->raw_size, b->data,
				                        f->comp_size);
				ok = !ZSTD_isError(n) && n == f->raw_size;
			}
			if (!ok)
				ex_fail(s, STG_ECORRUPT,
				        "damaged pack: frame %zu (bytes %llu-%llu) does not "
				        "decode%s%s",
				        k, (unsigned long long)f->comp_off,
				        (unsigned long long)(f->comp_off + f->comp_size),
				        ZSTD_isError(n) ? ": " : "",
				        ZSTD_isError(n) ? ZSTD_getErrorName(n) : "");
		}
		/* the compressed buffer is free again */
		pthread_mutex_lock(&s->mu);
		b->next = s->free_list;
		s->free_list = b;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		if (!ok)
			break;
		apply_frame(s, k, raw);
	}
	free(raw);
	ZSTD_freeDCtx(dc);
	return NULL;
}

static void *ex_reader(void *arg)
{
	ex_state *s = arg;
	stg_ctx *ctx = s->ctx;
	EVP_MD_CTX *sha = s->hash_pack ? EVP_MD_CTX_new() : NULL;
	if (s->hash_pack && !sha)
		ex_fail(s, STG_ENOMEM, "out of memory");
	if (sha)
		EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	if (s->p->fd >= 0)
		posix_fadvise(s->p->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	uint64_t total = 0, done = 0;
	for (size_t i = 0; i < s->n_frames; i++)
		total += s->t->frames[s->frames[i]].comp_size;
	for (size_t i = 0; i < s->n_frames && !ex_failed(s); i++) {
		size_t k = s->frames[i];
		const stg_frame *f = &s->t->frames[k];
		pthread_mutex_lock(&s->mu);
		while (!s->free_list && !s->err)
			pthread_cond_wait(&s->cv, &s->mu);
		ex_buf *b = s->free_list;
		if (s->err || !b) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		s->free_list = b->next;
		pthread_mutex_unlock(&s->mu);

		if (b->cap < f->comp_size) {
			free(b->data);
			b->data = malloc(f->comp_size);
			b->cap = b->data ? f->comp_size : 0;
		}
		bool ok = b->data != NULL;
		if (!ok)
			ex_fail(s, STG_ENOMEM, "out of memory");
		else if (stg__pack_pread(s->p, b->data, f->comp_size, f->comp_off)) {
			int e = errno;
			if (e)
				ex_fail(s, STG_EIO, "reading frame %zu of the pack: %s", k,
				        strerror(e));
			else
				ex_fail(s, STG_ECORRUPT, "damaged pack: frame %zu is truncated", k);
			ok = false;
		}
		pthread_mutex_lock(&s->mu);
		if (!ok) {
			b->next = s->free_list;
			s->free_list = b;
			pthread_mutex_unlock(&s->mu);
			break;
		}
		b->frame = k;
		b->next = NULL;
		if (s->qtail)
			s->qtail->next = b;
		else
			s->qhead = b;
		s->qtail = b;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		/* the next frame comes in (kernel readahead) while this one is
		 * hashed: on a network filesystem reading and hashing overlap */
		if (s->p->fd >= 0 && i + 1 < s->n_frames) {
			const stg_frame *nf = &s->t->frames[s->frames[i + 1]];
			posix_fadvise(s->p->fd, (off_t)nf->comp_off, (off_t)nf->comp_size,
			              POSIX_FADV_WILLNEED);
		}
		/* b may be in use by a worker now, but its bytes are not changed
		 * until it returns to the free list, after decoding; hash them
		 * here, overlapped with the workers */
		if (sha)
			EVP_DigestUpdate(sha, b->data, f->comp_size);
		done += f->comp_size;
		if (ctx->progress_fn)
			ctx->progress_fn(ctx->progress_arg, s->rootfd < 0 ? "verify" : "unpack",
			                 done, total);
	}
	if (sha) {
		unsigned int len = 0;
		EVP_DigestFinal_ex(sha, s->sha, &len);
		EVP_MD_CTX_free(sha);
	}
	if (s->p->fd >= 0)
		posix_fadvise(s->p->fd, 0, 0, POSIX_FADV_DONTNEED);
	pthread_mutex_lock(&s->mu);
	s->reader_done = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- planning ----------------------------------------------------------- */

typedef struct symlink_probe {
	const stg_pack *p;
	const stg_strmap *map;
} symlink_probe;

static bool probe_is_symlink(void *arg, const char *path, size_t len)
{
	const symlink_probe *pr = arg;
	uint32_t i = stg__strmap_get(pr->map, path, len);
	return i != NONE && pr->p->t.recs[i].type == STG_SYMLINK;
}

/* Check the manifest describes a tree that can be extracted safely.  Fills
 * map (path -> index). */
/* The manifest's structure: unique paths, nothing under a non-directory,
 * hardlinks to earlier files, and (unless any_link) symlinks that stay in
 * the destination. */
static stg_err check_tree(stg_ctx *ctx, const stg_pack *p, stg_strmap *map, bool any_link)
{
	const stg_trailer *t = &p->t;
	if (t->n_entries >= NONE)
		return stg__fail(ctx, STG_ECORRUPT, "damaged pack: too many entries");
	if (stg__strmap_init(map, t->n_entries))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		int rc = stg__strmap_put(map, stg__rec_path(p, r), r->path_len, (uint32_t)i);
		if (rc < 0)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		if (rc == 0)
			return stg__fail(ctx, STG_ECORRUPT, "damaged pack: '%s' appears twice",
			                 stg__rec_path(p, r));
	}
	symlink_probe probe = {p, map};
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		const char *path = stg__rec_path(p, r);
		for (size_t k = 0; k < r->path_len; k++) {
			if (path[k] != '/')
				continue;
			uint32_t j = stg__strmap_get(map, path, k);
			if (j != NONE && t->recs[j].type != STG_DIR)
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: '%s' lies under '%.*s', "
				                 "which is not a directory",
				                 path, (int)k, path);
		}
		const char *link = stg__rec_link(p, r);
		if (r->type == STG_HARDLINK) {
			uint32_t j = stg__strmap_get(map, link, r->link_len);
			if (j == NONE || j >= i || t->recs[j].type != STG_FILE)
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: hardlink '%s' points to "
				                 "'%s', which is not an earlier file of the pack",
				                 path, link);
		} else if (r->type == STG_SYMLINK && !any_link) {
			if (!stg__symlink_ok(path, link, probe_is_symlink, &probe))
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: symlink '%s' -> '%s' "
				                 "points outside the destination",
				                 path, link);
		}
	}
	return STG_OK;
}

static mode_t read_umask(void)
{
	mode_t m = 022;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return m;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		unsigned v;
		if (sscanf(line, "Umask: %o", &v) == 1) {
			m = (mode_t)v & 0777;
			break;
		}
	}
	fclose(f);
	return m;
}

/* mkdir -p of path's parent directories (implied by the pack). */
static int make_parents(int rootfd, const char *path, char *last, size_t *last_len)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	size_t plen = (size_t)(slash - path);
	if (plen == *last_len && memcmp(last, path, plen) == 0)
		return 0;
	char buf[STG_PATH_MAX + 1];
	memcpy(buf, path, plen);
	buf[plen] = '\0';
	for (size_t k = 0; k <= plen; k++) {
		if (k < plen && buf[k] != '/')
			continue;
		buf[k] = '\0';
		if (mkdirat(rootfd, buf, 0777) && errno != EEXIST)
			return -1;
		if (k < plen)
			buf[k] = '/';
	}
	memcpy(last, path, plen);
	*last_len = plen;
	return 0;
}

typedef struct ex_plan {
	stg_strmap map;
	bool *sel;
	uint32_t *span_of;
	ex_span *spans;
	size_t n_spans;
	size_t *frames;
	size_t n_frames;
} ex_plan;

static void plan_free(ex_plan *pl)
{
	stg__strmap_free(&pl->map);
	free(pl->sel);
	free(pl->span_of);
	for (size_t i = 0; i < pl->n_spans; i++)
		XXH3_freeState(pl->spans[i].xs);
	free(pl->spans);
	free(pl->frames);
}

static stg_err plan(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, ex_plan *pl,
                    bool any_link)
{
	const stg_trailer *t = &p->t;
	stg_err err = check_tree(ctx, p, &pl->map, any_link);
	if (err)
		return err;
	size_t ne = t->n_entries;
	pl->sel = calloc(ne ? ne : 1, sizeof *pl->sel);
	pl->span_of = malloc((ne ? ne : 1) * sizeof *pl->span_of);
	bool *need = calloc(t->n_frames, sizeof *need);
	if (!pl->sel || !pl->span_of || !need) {
		free(need);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	bool all = !opts || !opts->n_include;
	for (size_t i = 0; i < ne; i++)
		pl->sel[i] = all;
	if (!all) {
		for (size_t k = 0; k < opts->n_include; k++) {
			bool hit = false;
			for (size_t i = 0; i < ne; i++) {
				if (stg__path_match(opts->include[k],
				                    stg__rec_path(p, &t->recs[i]))) {
					pl->sel[i] = true;
					hit = true;
				}
			}
			if (!hit) {
				free(need);
				return stg__fail(ctx, STG_EUSAGE,
				                 "--include '%s' matches nothing in the pack",
				                 opts->include[k]);
			}
		}
		/* a hardlink needs its target; an entry its parent directories */
		for (size_t i = 0; i < ne; i++) {
			const stg_rec *r = &t->recs[i];
			if (!pl->sel[i])
				continue;
			if (r->type == STG_HARDLINK)
				pl->sel[stg__strmap_get(&pl->map, stg__rec_link(p, r),
				                        r->link_len)] = true;
			const char *path = stg__rec_path(p, r);
			for (size_t k = 0; k < r->path_len; k++) {
				if (path[k] != '/')
					continue;
				uint32_t j = stg__strmap_get(&pl->map, path, k);
				if (j != NONE)
					pl->sel[j] = true;
			}
		}
	}
	size_t n_spans = 0;
	for (size_t i = 0; i < ne; i++) {
		const stg_rec *r = &t->recs[i];
		pl->span_of[i] = NONE;
		if (!pl->sel[i] || r->type != STG_FILE || r->size == 0)
			continue;
		size_t a = stg__frame_of(t, r->data_off);
		size_t b = stg__frame_of(t, r->data_off + r->size - 1);
		for (size_t k = a; k <= b; k++)
			need[k] = true;
		if (a != b)
			n_spans++;
	}
	if (all)
		for (size_t k = 0; k < t->n_frames; k++)
			need[k] = true;
	pl->spans = calloc(n_spans ? n_spans : 1, sizeof *pl->spans);
	pl->frames = malloc(t->n_frames * sizeof *pl->frames);
	if (!pl->spans || !pl->frames) {
		free(need);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < t->n_frames; k++)
		if (need[k])
			pl->frames[pl->n_frames++] = k;
	free(need);
	for (size_t i = 0; i < ne; i++) {
		const stg_rec *r = &t->recs[i];
		if (!pl->sel[i] || r->type != STG_FILE || r->size == 0)
			continue;
		size_t a = stg__frame_of(t, r->data_off);
		size_t b = stg__frame_of(t, r->data_off + r->size - 1);
		if (a == b)
			continue;
		ex_span *sp = &pl->spans[pl->n_spans];
		sp->next = (uint32_t)a;
		sp->last = (uint32_t)b;
		if (!(sp->xs = XXH3_createState()))
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		pl->n_spans++;
		XXH3_128bits_reset(sp->xs);
		pl->span_of[i] = (uint32_t)(pl->n_spans - 1);
	}
	return STG_OK;
}

stg_err stg__select(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, bool **sel)
{
	ex_plan pl = {0};
	stg_err err = plan(ctx, p, opts, &pl, false);
	if (!err) {
		*sel = pl.sel;
		pl.sel = NULL;
	}
	plan_free(&pl);
	return err;
}

/* Directories, empty files and the files that span frames, before the
 * frames are decoded. */
static stg_err prepare_tree(stg_ctx *ctx, ex_state *s)
{
	const stg_trailer *t = s->t;
	char last[STG_PATH_MAX + 1];
	size_t last_len = (size_t)-1;
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		if (!s->sel[i])
			continue;
		const char *path = stg__rec_path(s->p, r);
		if (r->type == STG_FILE && r->size == 0 && memcmp(r->xxh3, empty.digest, 16))
			return stg__fail(ctx, STG_ECORRUPT,
			                 "'%s' is damaged: an empty file with a non-empty hash",
			                 path);
		if (s->rootfd < 0)
			continue;
		if (make_parents(s->rootfd, path, last, &last_len))
			return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot create the parents of '%s'", path);
		if (r->type == STG_DIR) {
			if (mkdirat(s->rootfd, path, 0700) && errno != EEXIST)
				return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO),
				                       errno, "cannot create '%s'", path);
		} else if (r->type == STG_FILE &&
		           (r->size == 0 || (s->span_of && s->span_of[i] != NONE))) {
			bool span = s->span_of && s->span_of[i] != NONE;
			int fd = openat(s->rootfd, path,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			                span ? 0600 : create_mode(s, r));
			if (fd < 0 || (!span && set_meta(s, fd, r, false))) {
				int e = errno;
				if (fd >= 0)
					close(fd);
				return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                       "cannot create '%s'", path);
			}
			close(fd);
		}
	}
	return STG_OK;
}

/* Links and directory metadata, after every file is written. */
static stg_err finish_tree(stg_ctx *ctx, ex_state *s)
{
	const stg_trailer *t = s->t;
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < t->n_entries; i++) {
			const stg_rec *r = &t->recs[i];
			if (!s->sel[i])
				continue;
			const char *path = stg__rec_path(s->p, r);
			const char *link = stg__rec_link(s->p, r);
			struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
			int rc = 0;
			if (pass == 0 && r->type == STG_HARDLINK)
				rc = linkat(s->rootfd, link, s->rootfd, path, 0);
			else if (pass == 1 && r->type == STG_SYMLINK)
				rc = symlinkat(link, s->rootfd, path) ||
				     utimensat(s->rootfd, path, ts, AT_SYMLINK_NOFOLLOW);
			else if (pass == 2 && r->type == STG_DIR)
				rc = fchmodat(s->rootfd, path,
				              final_mode(s, r) | (s->read_only ? 0500 : 0), 0) ||
				     utimensat(s->rootfd, path, ts, AT_SYMLINK_NOFOLLOW);
			if (rc) {
				int e = errno;
				return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                       "cannot create '%s'", path);
			}
		}
	}
	return STG_OK;
}

/* The tree around the files, for a builder that writes the files itself
 * (delta.c): directories and empty files first, links and directory
 * metadata last. */
static void tree_state(ex_state *s, stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                       bool read_only)
{
	memset(s, 0, sizeof *s);
	s->ctx = ctx;
	s->p = (stg_pack *)p;
	s->t = &p->t;
	s->rootfd = rootfd;
	s->umask = read_umask();
	s->read_only = read_only;
	s->sel = sel;
}

stg_err stg__tree_prepare(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                          bool read_only)
{
	ex_state s;
	tree_state(&s, ctx, p, sel, rootfd, read_only);
	return prepare_tree(ctx, &s);
}

stg_err stg__tree_finish(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                         bool read_only)
{
	ex_state s;
	tree_state(&s, ctx, p, sel, rootfd, read_only);
	return finish_tree(ctx, &s);
}

int stg__file_meta(int fd, const stg_rec *r, bool read_only)
{
	if (fchmod(fd, stg__final_mode(r, read_only)))
		return -1;
	struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
	return futimens(fd, ts);
}

/* ---- running ------------------------------------------------------------ */

/* Extract (rootfd >= 0) or verify (rootfd < 0) the selected part of a pack. */
static stg_err run_extract(stg_ctx *ctx, stg_pack *p, int rootfd, const stg_unpack_opts *opts,
                           stg_unpack_stats *stats, bool any_link)
{
	ex_plan pl = {0};
	stg_err err = plan(ctx, p, opts, &pl, any_link);
	if (err) {
		plan_free(&pl);
		return err;
	}
	ex_state s = {0};
	s.ctx = ctx;
	s.p = p;
	s.t = &p->t;
	s.rootfd = rootfd;
	s.umask = read_umask();
	s.read_only = opts && opts->read_only;
	s.sel = pl.sel;
	s.span_of = pl.span_of;
	s.spans = pl.spans;
	s.frames = pl.frames;
	s.n_frames = pl.n_frames;
	s.hash_pack = pl.n_frames == p->t.n_frames;
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);

	int nthreads = stg__threads(ctx);
	size_t nbufs = (size_t)nthreads + 2;
	ex_buf *bufs = calloc(nbufs, sizeof *bufs);
	pthread_t *tids = calloc((size_t)nthreads + 1, sizeof *tids);
	int started = 0;
	if (!bufs || !tids) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < nbufs; i++) {
		bufs[i].next = s.free_list;
		s.free_list = &bufs[i];
	}
	if ((err = prepare_tree(ctx, &s)))
		goto out;
	if (pthread_create(&tids[started], NULL, ex_reader, &s)) {
		err = stg__fail(ctx, STG_ENOMEM, "cannot start threads");
		goto out;
	}
	started++;
	for (int i = 0; i < nthreads; i++, started++) {
		if (pthread_create(&tids[started], NULL, ex_worker, &s)) {
			ex_fail(&s, STG_ENOMEM, "cannot start threads");
			break;
		}
	}
out:
	for (int i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	if (!err && s.err) {
		err = s.err;
		stg__fail(ctx, err, "%s", s.errmsg);
	}
	if (!err && stg__cancelled(ctx))
		err = stg__fail(ctx, STG_EINTR, "interrupted");
	if (!err && s.hash_pack && memcmp(s.sha, p->t.digest, STG_DIGEST_LEN)) {
		char want[STG_DIGEST_HEXLEN + 1], got[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(p->t.digest, want);
		stg_digest_hex(s.sha, got);
		err = stg__fail(ctx, STG_ECORRUPT,
		                "damaged pack: SHA-256 mismatch: expected %s, found %s", want, got);
	}
	if (!err && rootfd >= 0)
		err = finish_tree(ctx, &s);
	if (!err && stats) {
		memset(stats, 0, sizeof *stats);
		for (size_t i = 0; i < p->t.n_entries; i++) {
			const stg_rec *r = &p->t.recs[i];
			if (!pl.sel[i])
				continue;
			stats->files += r->type == STG_FILE || r->type == STG_HARDLINK;
			stats->dirs += r->type == STG_DIR;
			stats->symlinks += r->type == STG_SYMLINK;
			stats->bytes += r->size;
		}
		stats->frames_read = pl.n_frames;
		stats->frames_total = p->t.n_frames;
		for (size_t i = 0; i < pl.n_frames; i++)
			stats->pack_bytes_read += p->t.frames[pl.frames[i]].comp_size;
	}
	for (size_t i = 0; bufs && i < nbufs; i++)
		free(bufs[i].data);
	free(bufs);
	free(tids);
	pthread_mutex_destroy(&s.mu);
	pthread_cond_destroy(&s.cv);
	plan_free(&pl);
	return err;
}

stg_err stg_verify(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, false);
}

stg_err stg__verify_content(stg_ctx *ctx, stg_pack *pack)
{
	return run_extract(ctx, pack, -1, NULL, NULL, true);
}

void stg_unpack_opts_init(stg_unpack_opts *o)
{
	memset(o, 0, sizeof *o);
	o->replace_empty = 1;
}

stg_err stg__extract_at(stg_ctx *ctx, stg_pack *pack, int rootfd, const stg_unpack_opts *opts,
                        stg_unpack_stats *stats)
{
	return run_extract(ctx, pack, rootfd, opts, stats, false);
}

stg_err stg_unpack(stg_ctx *ctx, stg_pack *pack, const char *dir, const stg_unpack_opts *opts,
                   stg_unpack_stats *stats)
{
	stg_unpack_opts def;
	if (!opts) {
		stg_unpack_opts_init(&def);
		opts = &def;
	}
	struct stat st;
	if (lstat(dir, &st) == 0) {
		bool empty = false;
		if (S_ISDIR(st.st_mode) && opts->replace_empty) {
			/* rmdir-able means empty; recreate it below by rename */
			int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0) {
				empty = stg__dir_is_empty(fd);
				close(fd);
			}
		}
		if (!empty)
			return stg__fail(ctx, STG_EEXIST,
			                 "'%s' exists%s; unpack into a new directory", dir,
			                 S_ISDIR(st.st_mode) ? " and is not empty" : "");
	}
	char *tmp = stg__tmp_name(dir, "unpack");
	if (!tmp)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	int rootfd = -1;
	if (mkdir(tmp, 0700) && (errno != ENOENT || stg__mkdirs_parent(tmp) || mkdir(tmp, 0700))) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "cannot create a directory beside '%s'", dir);
		free(tmp);
		return err;
	}
	rootfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rootfd < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot open '%s'", tmp);
		goto out;
	}
	if ((err = run_extract(ctx, pack, rootfd, opts, stats, false)))
		goto out;
	/* the packed directory's mode, as tar and rsync -a keep it (not its
	 * setuid and setgid bits); else what mkdir would have made */
	mode_t top = pack->t.root_mode & STG_ROOT_MODE_SET ? (mode_t)(pack->t.root_mode & 01777)
	                                                   : 0777 & ~read_umask();
	if (fchmod(rootfd, top)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot set the mode of '%s'", dir);
		goto out;
	}
	if (rename(tmp, dir)) {
		int e = errno;
		err = stg__fail_errno(ctx, e == ENOTEMPTY || e == EEXIST ? STG_EEXIST : STG_EIO, e,
		                      "cannot move the unpacked tree to '%s'", dir);
	}
out:
	if (rootfd >= 0)
		close(rootfd);
	if (err)
		stg__rmtree(tmp);
	free(tmp);
	return err;
}
