/*
 * cache_evict.c - the cache's published entries by last use, the space on
 * scratch, and eviction: least recently used first, never a pinned entry
 * of a live owner, until what is to come fits under cache_max and above
 * min_free.  The callers hold locks/cache, as pinning does, so an entry is
 * never evicted between a stager finding it and pinning it.
 */
#include "cache.h"
#include "ctx.h"
#include "fsutil.h"
#include "units.h"
#include "path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

/* ---- listing and eviction ------------------------------------------------------- */

static int cmp_lru(const void *a, const void *b)
{
	const stg_lru *x = a, *y = b;
	return x->last_use < y->last_use ? -1 : x->last_use > y->last_use;
}

size_t stg__entries(stg_cache *c, stg_lru **out)
{
	*out = NULL;
	char **names;
	size_t n, k = 0;
	if (stg__dir_names(c->rootfd, "cache", false, &names, &n))
		return 0;
	stg_lru *v = calloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; v && i < n; i++) {
		stg_meta m;
		if (!stg__key_ok(names[i]) || stg__meta_read(c, names[i], &m))
			continue;
		memcpy(v[k].key, names[i], strlen(names[i]) + 1); /* key_ok bounds it */
		v[k].size = m.size;
		v[k].last_use = m.last_use;
		k++;
	}
	stg__names_free(names, n);
	if (k > 1)
		qsort(v, k, sizeof *v, cmp_lru);
	*out = v;
	return v ? k : 0;
}

stg_err stg__space(stg_ctx *ctx, stg_cache *c, stg_space *sp)
{
	struct statvfs vfs;
	if (fstatvfs(c->rootfd, &vfs))
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot read free space of '%s'",
		                       c->root);
	memset(sp, 0, sizeof *sp);
	sp->fs_size = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	sp->fs_free = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	sp->fs_files_free = vfs.f_favail;
	sp->cache_max = stg__bytes_setting(c->cache_max, sp->fs_size);
	sp->min_free = stg__bytes_setting(c->min_free, sp->fs_size);
	return STG_OK;
}

/* Remove an entry: rename it out of sight under the cache lock (the caller
 * holds it), then delete the tree. */
int stg__entry_remove(stg_cache *c, const char *key)
{
	char from[STG_PATH_MAX], to[STG_PATH_MAX];
	snprintf(from, sizeof from, "cache/%s", key);
	snprintf(to, sizeof to, "cache/%s.old.%d", key, (int)getpid());
	if (renameat(c->rootfd, from, c->rootfd, to))
		return -1;
	stg__rmtree_at(c->rootfd, to);
	snprintf(from, sizeof from, "pins/%s", key);
	stg__rmtree_at(c->rootfd, from);
	return 0;
}

/* STG_ENOSPC with the figures: what is needed, what is available, the
 * cache and what of it could go.  before: decided before evicting anything
 * (it could never fit). */
static stg_err no_room(stg_ctx *ctx, stg_cache *c, uint64_t need, const stg_space *sp,
                       uint64_t free_now, uint64_t used, uint64_t evictable, bool cap_ok,
                       bool before)
{
	char a[16], b[16], d[16], e[16], f[16], g[16], h[16];
	stg_format_size(need, a, sizeof a);
	stg_format_size(used, d, sizeof d);
	stg_format_size(evictable, e, sizeof e);
	const char *pinned = used > evictable ? "; the rest is pinned by live jobs" : "";
	const char *done = before ? "; nothing was evicted" : "";
	if (!cap_ok) {
		/* the most the cap could ever leave for it */
		uint64_t stays = used - evictable;
		stg_format_size(sp->cache_max > stays ? sp->cache_max - stays : 0, b, sizeof b);
		stg_format_size(sp->cache_max, g, sizeof g);
		return stg__fail(
		        ctx, STG_ENOSPC,
		        "not enough room in the cache on %s: need %s, at most %s available "
		        "under cache_max %s (cache %s, of which %s evictable%s)%s%s",
		        c->root, a, b, g, d, e, pinned, done,
		        need > sp->cache_max ? ": raise cache_max" : "");
	}
	uint64_t avail = free_now > sp->min_free ? free_now - sp->min_free : 0;
	stg_format_size(avail, b, sizeof b);
	stg_format_size(free_now, h, sizeof h);
	stg_format_size(sp->min_free, f, sizeof f);
	return stg__fail(ctx, STG_ENOSPC,
	                 "not enough space on %s: need %s, %s available (%s free, min_free %s; "
	                 "cache %s, of which %s evictable%s)%s",
	                 c->root, a, b, h, f, d, e, pinned, done);
}

/* Does need fit with used bytes in the cache and free_now on the
 * filesystem?  Each of the two limits apart. */
static bool fits_cap(const stg_space *sp, uint64_t used, uint64_t need)
{
	return !sp->cache_max || (need <= sp->cache_max && used <= sp->cache_max - need);
}

static bool fits_free(const stg_space *sp, uint64_t free_now, uint64_t need)
{
	return free_now >= need && free_now - need >= sp->min_free;
}

stg_err stg__make_room(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep)
{
	stg_space sp;
	stg_err err = stg__space(ctx, c, &sp);
	if (err)
		return err;
	stg_lru *v;
	size_t n = stg__entries(c, &v);
	uint64_t used = 0, evictable = 0;
	for (size_t i = 0; i < n; i++)
		used += v[i].size;
	stg_owner_cache oc = {0};
	bool *pinned = calloc(n ? n : 1, sizeof *pinned);
	if (!pinned) {
		free(v);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		pinned[i] =
		        (keep && !strcmp(v[i].key, keep)) || stg__entry_pinned(c, v[i].key, &oc);
		if (!pinned[i])
			evictable += v[i].size;
	}
	uint64_t free_now = sp.fs_free;
	/* first whether it can fit at all, with every unpinned entry gone:
	 * if not, nothing is evicted for nothing */
	uint64_t free_best = free_now + evictable < free_now ? UINT64_MAX : free_now + evictable;
	bool cap_ok = fits_cap(&sp, used - evictable, need);
	if (!cap_ok || !fits_free(&sp, free_best, need)) {
		free(v);
		free(pinned);
		return no_room(ctx, c, need, &sp, free_now, used, evictable, cap_ok, true);
	}
	/* oldest first, until both the cap and the free-space floor hold */
	for (size_t i = 0; i < n; i++) {
		if (fits_cap(&sp, used, need) && fits_free(&sp, free_now, need))
			break;
		if (pinned[i])
			continue;
		/* name what goes by what the user staged, not by its digest */
		stg_meta m = {0};
		bool named = stg__meta_read(c, v[i].key, &m) == 0 && m.source[0];
		if (stg__entry_remove(c, v[i].key) == 0) {
			char sz[32];
			stg_format_size(v[i].size, sz, sizeof sz);
			stg__log(ctx, STG_LOG_INFO,
			         "evicted the cached copy of '%s' (%s, the least recently used) "
			         "to make room",
			         named ? m.source : v[i].key, sz);
			used -= v[i].size;
			evictable -= v[i].size;
			free_now += v[i].size;
		}
	}
	/* what the filesystem says now */
	stg__space(ctx, c, &sp);
	free_now = sp.fs_free;
	cap_ok = fits_cap(&sp, used, need);
	bool free_ok = fits_free(&sp, free_now, need);
	free(v);
	free(pinned);
	if (cap_ok && free_ok)
		return STG_OK;
	return no_room(ctx, c, need, &sp, free_now, used, evictable, cap_ok, false);
}
