/*
 * source_dir.c - a plain directory as a source: walked on the shared
 * filesystem (its listing is its identity), copied into a cache entry
 * while each file is hashed, checked for a change under the copy, and
 * made read-only.  `stager pack` makes a directory cheaper to stage; stage
 * says so once.
 */
#include "source.h"
#include "walk.h"

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

/* ---- directories ---------------------------------------------------------------- */

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
	stg_err err = STG_OK;
	uint64_t total = 0;
	if (!xs) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	XXH3_128bits_reset(xs);
	for (;;) {
		stg__bucket_take(ctx, &c->lim.bw, BLOCK);
		ssize_t n = read(s, buf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = stg__fail_errno(ctx, STG_EIO, errno, "reading '%s'", it->path);
			goto out;
		}
		if (n == 0)
			break;
		XXH3_128bits_update(xs, buf, (size_t)n);
		if (stg__write_full(d, buf, (size_t)n)) {
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "writing '%s'", it->path);
			goto out;
		}
		total += (uint64_t)n;
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
	if (total != (uint64_t)it->st.st_size) {
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

/* Build the entry from the walked tree into tfd/data. */
static stg_err copy_source(stg_ctx *ctx, stg_cache *c, int sroot, int tfd, stg_walk *w,
                           uint64_t *content, uint64_t *files)
{
	stg_err err = STG_OK;
	int droot = -1;
	FILE *man = NULL;
	uint8_t *buf = malloc(BLOCK);
	int mfd = -1;
	if (!buf || mkdirat(tfd, "data", 0700) ||
	    (droot = openat(tfd, "data", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
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
	if (man && fclose(man) && !err)
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot write the manifest");
	if (droot >= 0)
		close(droot);
	free(buf);
	return err;
}

stg_err stg__stage_dir(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                       const char *owner, stg_stage_result *res)
{
	if (o->n_include)
		return stg__fail(ctx, STG_EUSAGE,
		                 "--include needs a pack: pack '%s' with 'stager pack' first", src);
	int sroot = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sroot < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", src);
	stg_walk w = {.ctx = ctx, .opl = &c->lim.ops};
	stg_err err = stg__walk_tree(&w, sroot, "");
	if (err)
		goto out;
	/* the key: a digest of the listing */
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (!md) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	EVP_DigestUpdate(md, "stager-dir-1", 12);
	for (size_t i = 0; i < w.n; i++) {
		const stg_witem *it = &w.v[i];
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
	EVP_DigestFinal_ex(md, res->digest, &hl);
	EVP_MD_CTX_free(md);
	char key[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(res->digest, key);
	stg__log(ctx, STG_LOG_INFO,
	         "'%s' is a directory: staging it costs %llu metadata operations on the shared "
	         "filesystem in every job; 'stager pack %s' once makes a warm stage cost 1",
	         src, (unsigned long long)w.ops, src);
	res->source_bytes = 0;
	bool built = false;
	for (int attempt = 0; attempt < 2 && !res->path; attempt++) {
		if (stg__entry_exists(c, key)) {
			err = stg__attach(ctx, c, key, src, o, owner, res);
			if (err != STG_ENOENT) {
				res->hit = 1;
				goto out;
			}
		}
		bool waited;
		int lk = stg__cache_lock(ctx, c, key, true, &waited);
		if (lk < 0) {
			err = stg__cancelled(ctx)
			              ? stg__fail(ctx, STG_EINTR, "interrupted")
			              : stg__fail_errno(ctx, STG_EIO, errno, "cannot lock");
			goto out;
		}
		res->waited = waited;
		if (!stg__entry_exists(c, key)) {
			stg__remove_leftovers(c, key);
			uint64_t need = 64 * 1024;
			for (size_t i = 0; i < w.n; i++)
				need += ((uint64_t)w.v[i].st.st_size + 4095) / 4096 * 4096;
			int cl = stg__cache_lock(ctx, c, "cache", true, NULL);
			err = stg__make_room(ctx, c, need, NULL);
			stg__cache_unlock(cl);
			char tmp[STG_PATH_MAX], fin[STG_PATH_MAX];
			snprintf(tmp, sizeof tmp, "cache/%s.tmp.%d", key, (int)getpid());
			snprintf(fin, sizeof fin, "cache/%s", key);
			int tfd = -1;
			uint64_t content = 0, files = 0;
			if (!err &&
			    (mkdirat(c->rootfd, tmp, 0700) ||
			     (tfd = openat(c->rootfd, tmp,
			                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0))
				err = stg__fail_errno(ctx, STG_EIO, errno,
				                      "cannot create a cache entry");
			if (!err)
				err = copy_source(ctx, c, sroot, tfd, &w, &content, &files);
			if (!err) {
				built = true;
				stg_meta m = {0};
				snprintf(m.kind, sizeof m.kind, "directory");
				snprintf(m.source, sizeof m.source, "%s", src);
				m.size = need;
				m.files = files;
				m.content = content;
				res->source_bytes = content;
				if (stg__meta_write(tfd, &m) ||
				    renameat(c->rootfd, tmp, c->rootfd, fin))
					err = stg__fail_errno(ctx, STG_EIO, errno,
					                      "cannot publish the cache entry");
			}
			if (tfd >= 0)
				close(tfd);
			stg__rmtree_at(c->rootfd, tmp);
		}
		stg__cache_unlock(lk);
		if (err)
			goto out;
		err = stg__attach(ctx, c, key, src, o, owner, res);
		if (err == STG_ENOENT)
			err = stg__fail(ctx, STG_EIO, "the new cache entry disappeared; try again");
		if (!err)
			res->hit = !built;
	}
out:
	stg__walk_free(&w);
	close(sroot);
	return err;
}
