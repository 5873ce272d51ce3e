/*
 * source_dir.c - a plain directory as a source: walked on the shared
 * filesystem, copied into a cache entry while each file is hashed, checked
 * for a change under the copy, and made read-only.
 *
 * Its key is a SHA-256 over its listing (paths, types, modes, sizes,
 * mtimes, link targets): staging it again costs a walk of the tree, which
 * is the cost stager exists to avoid; it says so once (`stager pack` makes
 * a warm stage cost one call).  The walk is the costly part, so a
 * directory waits for another builder holding its slot and its listing.
 */
#include "hash.h"
#include "source.h"
#include "walk.h"
#include "ctx.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#define BLOCK (1u << 20) /* copy buffer */

/* ---- the copy ------------------------------------------------------------------- */

/* Copy a file while hashing it; fails if it changes size meanwhile. */
static stg_err copy_hashed(stg_ctx *ctx, stg_cache *c, int sroot, int droot, const stg_witem *it,
                           uint8_t *buf, XXH128_canonical_t *h)
{
	stg__bucket_take(ctx, &c->lim.ops, 1);
	int s = openat(sroot, it->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (s < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", it->path);
	int d = openat(droot, it->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (d < 0) {
		close(s);
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot create '%s'", it->path);
	}
	XXH3_state_t *xs = XXH3_createState();
	stg_fd_sink out = {d, 0};
	stg_err err = STG_OK;
	if (!xs) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	XXH3_128bits_reset(xs);
	stg_hash_in in = {.fd = s,
	                  .off = -1,
	                  .len = (uint64_t)it->st.st_size,
	                  .whole = true,
	                  .buf = buf,
	                  .buf_len = BLOCK,
	                  .bw = &c->lim.bw,
	                  .sink = stg__sink_fd,
	                  .arg = &out,
	                  .path = it->path};
	uint64_t total;
	if ((err = stg__hash_read(ctx, &in, xs, &total))) {
		if (out.err)
			err = stg__fail_errno(ctx, stg__err_from_errno(out.err, STG_EIO), out.err,
			                      "writing '%s'", it->path);
		goto out;
	}
	/* the size, and also the times: a file rewritten in place at the same
	 * size (a checkpoint saved again) must not be published torn */
	struct stat now;
	if (total != (uint64_t)it->st.st_size || fstat(s, &now) ||
	    now.st_mtim.tv_sec != it->st.st_mtim.tv_sec ||
	    now.st_mtim.tv_nsec != it->st.st_mtim.tv_nsec ||
	    now.st_ctim.tv_sec != it->st.st_ctim.tv_sec ||
	    now.st_ctim.tv_nsec != it->st.st_ctim.tv_nsec) {
		err = stg__fail(ctx, STG_EIO, "'%s' changed while it was staged; stage again",
		                it->path);
		goto out;
	}
	XXH128_canonicalFromHash(h, XXH3_128bits_digest(xs));
	struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
	if (fchmod(d, it->st.st_mode & 01555) || futimens(d, ts))
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot write '%s'", it->path);
out:
	XXH3_freeState(xs);
	close(s);
	if (close(d) && !err)
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot write '%s'", it->path);
	return err;
}

/* Build the entry from the walked tree into tfd/data (droot). */
static stg_err copy_source(stg_ctx *ctx, stg_cache *c, int sroot, int tfd, int droot,
                           const stg_walk *w, uint64_t *content, uint64_t *files)
{
	stg_err err = STG_OK;
	FILE *man = NULL;
	uint8_t *buf = malloc(BLOCK);
	int mfd = -1;
	if (!buf ||
	    (mfd = openat(tfd, "manifest", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                  0400)) < 0 ||
	    !(man = fdopen(mfd, "w"))) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create a cache entry");
		if (mfd >= 0 && !man)
			close(mfd);
		goto out;
	}
	for (size_t i = 0; i < w->n && !err; i++) {
		const stg_witem *it = &w->v[i];
		if (S_ISDIR(it->st.st_mode)) {
			if (mkdirat(droot, it->path, 0700))
				err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO),
				                      errno, "cannot create '%s'", it->path);
		} else if (S_ISLNK(it->st.st_mode)) {
			struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
			if (symlinkat(it->link, droot, it->path) ||
			    utimensat(droot, it->path, ts, AT_SYMLINK_NOFOLLOW))
				err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s'",
				                      it->path);
		} else {
			XXH128_canonical_t h;
			if (!(err = copy_hashed(ctx, c, sroot, droot, it, buf, &h))) {
				stg__manifest_line(man, h.digest, (uint64_t)it->st.st_size,
				                   it->path);
				*content += (uint64_t)it->st.st_size;
				(*files)++;
			}
		}
	}
	/* directories read-only, deepest first */
	for (size_t i = w->n; !err && i-- > 0;) {
		const stg_witem *it = &w->v[i];
		if (!S_ISDIR(it->st.st_mode))
			continue;
		struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
		if (fchmodat(droot, it->path, (it->st.st_mode & 01555) | 0500, 0) ||
		    utimensat(droot, it->path, ts, AT_SYMLINK_NOFOLLOW))
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot finish '%s'", it->path);
	}
	/* the top too: the source's read and search bits, as the pack path */
	struct stat rst;
	if (!err)
		fchmod(droot, fstat(sroot, &rst) == 0 ? (rst.st_mode & 0555) | 0500 : 0555);
out:
	if (man && stg__manifest_close(man) && !err)
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot write the manifest");
	free(buf);
	return err;
}

/* ---- the kind ------------------------------------------------------------------- */

static bool dir_claims(const stg_source *s)
{
	return S_ISDIR(s->st.st_mode);
}

/* Walk the tree (its listing, in s->state) and name the entry by it. */
static stg_err dir_open(stg_ctx *ctx, stg_cache *c, stg_source *s, const stg_stage_opts *o,
                        stg_stage_result *res)
{
	if (o->n_include)
		return stg__fail(ctx, STG_EUSAGE,
		                 "--include needs a pack: pack '%s' with 'stager pack' first",
		                 s->name);
	if ((s->fd = open(s->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", s->name);
	stg_walk *w = calloc(1, sizeof *w);
	if (!w)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	s->state = w;
	w->ctx = ctx;
	w->opl = &c->lim.ops;
	stg_err err = stg__walk_tree(w, s->fd, "");
	if (err)
		return err;
	/* the key: a digest of the listing */
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	EVP_DigestUpdate(md, "stager-dir-1", 12);
	for (size_t i = 0; i < w->n; i++) {
		const stg_witem *it = &w->v[i];
		char line[256];
		int n = snprintf(line, sizeof line, "|%o|%lld|%lld.%09ld|",
		                 (unsigned)it->st.st_mode, (long long)it->st.st_size,
		                 (long long)it->st.st_mtim.tv_sec, it->st.st_mtim.tv_nsec);
		EVP_DigestUpdate(md, it->path, strlen(it->path) + 1);
		EVP_DigestUpdate(md, line, (size_t)n);
		if (it->link)
			EVP_DigestUpdate(md, it->link, strlen(it->link) + 1);
	}
	unsigned int hl = 0;
	EVP_DigestFinal_ex(md, s->digest, &hl);
	EVP_MD_CTX_free(md);
	s->named = true;
	stg__log(ctx, STG_LOG_INFO,
	         "'%s' is a directory: staging it costs %llu metadata operations on the shared "
	         "filesystem in every job; 'stager pack %s' once makes a warm stage cost 1",
	         s->name, (unsigned long long)w->ops, s->name);
	res->source_bytes = 0;
	return STG_OK;
}

static stg_err dir_build(stg_ctx *ctx, stg_cache *c, stg_source *s, const char *key,
                         const stg_stage_opts *o, stg_stage_result *res)
{
	(void)o;
	const stg_walk *w = s->state;
	uint64_t need = 64 * 1024;
	for (size_t i = 0; i < w->n; i++)
		need += ((uint64_t)w->v[i].st.st_size + 4095) / 4096 * 4096;
	stg_err err = stg__room_for(ctx, c, need, NULL);
	if (err)
		return err;
	stg_entry_build eb;
	uint64_t content = 0, files = 0;
	if (!(err = stg__entry_begin(ctx, c, key, &eb)) &&
	    !(err = copy_source(ctx, c, s->fd, eb.tfd, eb.dfd, w, &content, &files))) {
		stg_meta m = {0};
		snprintf(m.kind, sizeof m.kind, "directory");
		snprintf(m.source, sizeof m.source, "%s", s->name);
		m.size = need;
		m.files = files;
		m.content = content;
		res->source_bytes = content;
		err = stg__entry_publish(ctx, c, &eb, key, &m);
	}
	stg__entry_end(c, &eb);
	return err;
}

static void dir_close(stg_source *s)
{
	if (s->state)
		stg__walk_free(s->state);
	free(s->state);
	s->state = NULL;
}

const stg_source_ops stg__source_dir = {
        .kind = "directory",
        .claims = dir_claims,
        .open = dir_open,
        .build = dir_build,
        .close = dir_close,
        .bare = ~0u,
        .open_names_it = true,
};
