/*
 * cache_entry.c - building a cache entry, and checking one.
 *
 * Every kind of source builds its entry the same way: room first (nothing
 * is copied unless it fits), then cache/<name>.tmp.<pid> with the tree in
 * data/ and the manifest beside it, then the description (meta), then the
 * rename that publishes it as cache/<key>.  An entry exists iff its meta
 * does (cache.c), so a build cut short by a crash is only a leftover that
 * the next builder of the name removes (attach.c).  The same bytes may
 * arrive under two names (an archive is named by its digest only once it
 * is read): a build whose key is published already is dropped, and the
 * published entry serves.
 *
 * A warm entry is checked against its manifest: quickly (sizes and count,
 * local stats) on every use, fully (every file hashed) with --verify.
 */
#include "cache.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

stg_err stg__room_for(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep)
{
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	stg_err err = stg__make_room(ctx, c, need, keep);
	stg__cache_unlock(lk);
	return err;
}

stg_err stg__entry_begin(stg_ctx *ctx, stg_cache *c, const char *name, stg_entry_build *eb)
{
	snprintf(eb->tmp, sizeof eb->tmp, "cache/%s.tmp.%d", name, (int)getpid());
	eb->tfd = eb->dfd = -1;
	if (mkdirat(c->rootfd, eb->tmp, 0700) ||
	    (eb->tfd = openat(c->rootfd, eb->tmp,
	                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    mkdirat(eb->tfd, "data", 0700) ||
	    (eb->dfd = openat(eb->tfd, "data", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	            0) {
		int e = errno;
		return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                       "cannot create a cache entry in '%s'", c->root);
	}
	return STG_OK;
}

stg_err stg__entry_publish(stg_ctx *ctx, stg_cache *c, stg_entry_build *eb, const char *key,
                           const stg_meta *m)
{
	if (stg__meta_write(eb->tfd, m))
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write the entry's description");
	char fin[STG_PATH_MAX];
	snprintf(fin, sizeof fin, "cache/%s", key);
	/* under the cache lock, so that the check and the rename are one step
	 * for every other publisher and evicter */
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (!stg__entry_exists(c, key)) {
		if (renameat(c->rootfd, eb->tmp, c->rootfd, fin)) {
			int e = errno;
			stg__cache_unlock(lk);
			return stg__fail_errno(ctx, STG_EIO, e, "cannot publish the cache entry %s",
			                       key);
		}
		eb->tmp[0] = '\0';
	}
	stg__cache_unlock(lk);
	return STG_OK;
}

void stg__entry_end(stg_cache *c, stg_entry_build *eb)
{
	if (eb->dfd >= 0)
		close(eb->dfd);
	if (eb->tfd >= 0)
		close(eb->tfd);
	eb->dfd = eb->tfd = -1;
	if (eb->tmp[0])
		stg__rmtree_at(c->rootfd, eb->tmp);
	eb->tmp[0] = '\0';
}

int stg__entry_check(stg_ctx *ctx, stg_cache *c, const char *key, bool full)
{
	char path[STG_PATH_MAX];
	snprintf(path, sizeof path, "cache/%s/manifest", key);
	int mfd = openat(c->rootfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (mfd < 0)
		return -1;
	snprintf(path, sizeof path, "cache/%s/data", key);
	int dfd = openat(c->rootfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f = fdopen(mfd, "r");
	if (dfd < 0 || !f) {
		if (f)
			fclose(f);
		else
			close(mfd);
		if (dfd >= 0)
			close(dfd);
		return -1;
	}
	int rc = full ? stg__manifest_check(ctx, f, dfd) : stg__manifest_quick(ctx, f, dfd);
	fclose(f);
	close(dfd);
	return rc;
}

stg_err stg__entry_manifest(stg_ctx *ctx, stg_cache *c, const char *key, stg_manifest *m)
{
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "cache/%s/manifest", key);
	int fd = openat(c->rootfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return stg__fail_errno(ctx, STG_ECORRUPT, errno, "cannot read the manifest of %s",
		                       key);
	}
	int rc = stg__manifest_load(f, m);
	int e = errno;
	fclose(f);
	if (rc)
		return stg__fail_errno(ctx, e == EINVAL ? STG_ECORRUPT : STG_ENOMEM, e,
		                       "cannot read the manifest of %s", key);
	return STG_OK;
}
