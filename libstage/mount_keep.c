/*
 * mount_keep.c - `stager mount --cache`: the frames a mount fetched, kept
 * in the node cache for the mounts of later jobs.
 *
 * They are a cache entry of their own, cache/<digest>-f: "frames", a
 * sparse file holding each kept frame at its offset in the pack, "have",
 * one byte per frame (1: kept), and the usual meta (kind "frames", the
 * bytes kept), so that the cache's quota, its eviction (least recently
 * used first), `status` and `clean` treat it like any entry.  A mount that
 * uses it pins it.  A frame is written before its byte in have, and every
 * frame read back is checked against the frame table's XXH3-128 by the
 * mount, so a crash or a damaged disk costs a fetch from the pack, never
 * a wrong byte.  Room is asked of the cache (evicting others, or not
 * keeping more) a slice at a time, not for every frame.  Only packs of
 * format 3 are kept: their frames can be checked alone.
 *
 * Also a mount's own pins going (its entry's and its kept frames'): once
 * `stager clean --job` dropped them, the mount does not wait for the lock
 * that clean holds (mount_open.c).
 */
#include "pack_read.h"
#include "mount_keep.h"
#include "ctx.h"
#include "trailer.h"
#include "path.h"

#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLICE (64ull << 20) /* room asked of the cache at a time */

struct stg_keep {
	pthread_mutex_t mu;
	char key[STG_DIGEST_HEXLEN + 3];
	int dirfd, frames, have;
	uint64_t kept;     /* bytes of frames kept */
	uint64_t room;     /* bytes asked for and not used yet */
	uint64_t saved_at; /* kept when meta was last written */
	bool full;         /* the cache had no more room: keep nothing more */
	bool pinned;
};

static int write_meta(stg_keep *k, const char *source)
{
	stg_meta m = {.size = k->kept + 4096, .content = k->kept};
	snprintf(m.kind, sizeof m.kind, "frames");
	snprintf(m.source, sizeof m.source, "%s", source);
	/* meta is read-only: a new one, renamed over it */
	int tmp = openat(k->dirfd, "new", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tmp < 0 &&
	    (mkdirat(k->dirfd, "new", 0700) ||
	     (tmp = openat(k->dirfd, "new", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0))
		return -1;
	unlinkat(tmp, "meta", 0);
	int rc = stg__meta_write(tmp, &m) || renameat(tmp, "meta", k->dirfd, "meta") ? -1 : 0;
	close(tmp);
	k->saved_at = k->kept;
	return rc;
}

/* Make the entry (published empty) if it is not there. */
static stg_err make_entry(stg_ctx *ctx, stg_mount *m, stg_mpack *mp, const char *key)
{
	stg_entry_build eb;
	stg_err err = stg__entry_begin(ctx, m->cache, key, &eb);
	uint64_t n = mp->pack->t.n_frames;
	int fd = -1, hv = -1;
	if (!err) {
		fd = openat(eb.tfd, "frames", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		            0600);
		hv = openat(eb.tfd, "have", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		            0600);
		if (fd < 0 || hv < 0 || ftruncate(fd, (off_t)mp->pack->size) ||
		    ftruncate(hv, (off_t)n))
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot make the frames' entry");
	}
	if (fd >= 0)
		close(fd);
	if (hv >= 0)
		close(hv);
	stg_meta meta = {.size = 4096};
	snprintf(meta.kind, sizeof meta.kind, "frames");
	snprintf(meta.source, sizeof meta.source, "%s", mp->path);
	if (!err)
		err = stg__entry_publish(ctx, m->cache, &eb, key, &meta);
	stg__entry_end(m->cache, &eb);
	return err;
}

stg_err stg__keep_open(stg_ctx *ctx, stg_mount *m, stg_mpack *mp)
{
	if (mp->pack->t.version < 3) {
		stg__log(ctx, STG_LOG_WARN,
		         "'%s' is a pack of format %u: its frames cannot be checked alone, so "
		         "they are not kept (--cache); pack it again with this stager",
		         mp->path, mp->pack->t.version);
		return STG_OK;
	}
	stg_keep *k = calloc(1, sizeof *k);
	if (!k)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	pthread_mutex_init(&k->mu, NULL);
	k->dirfd = k->frames = k->have = -1;
	snprintf(k->key, sizeof k->key, "%s-f", mp->digest);
	stg_err err = STG_OK;
	if (!stg__entry_exists(m->cache, k->key) && (err = make_entry(ctx, m, mp, k->key)))
		goto fail;
	int lk = stg__cache_lock(ctx, m->cache, "cache", true, NULL);
	k->pinned =
	        stg__entry_exists(m->cache, k->key) && stg__pin(m->cache, k->key, m->owner) >= 0;
	stg__cache_unlock(lk);
	char rel[STG_DIGEST_HEXLEN + 16];
	snprintf(rel, sizeof rel, "cache/%s", k->key);
	if (!k->pinned ||
	    (k->dirfd = openat(m->cache->rootfd, rel,
	                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (k->frames = openat(k->dirfd, "frames", O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (k->have = openat(k->dirfd, "have", O_RDWR | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot open the frames' entry %s",
		                      k->key);
		goto fail;
	}
	struct stat st;
	stg_meta meta;
	if (fstat(k->frames, &st) || (uint64_t)st.st_size != mp->pack->size) {
		err = stg__fail(ctx, STG_EIO, "the frames' entry %s is not of this pack", k->key);
		goto fail;
	}
	if (stg__meta_read(m->cache, k->key, &meta) == 0)
		k->kept = k->saved_at = meta.content;
	mp->keep = k;
	return STG_OK;
fail:
	stg__keep_close(m, mp, k);
	return err;
}

int stg__keep_get(stg_keep *k, const stg_frame *f, size_t i, uint8_t *buf)
{
	uint8_t have = 0;
	if (pread(k->have, &have, 1, (off_t)i) != 1 || have != 1)
		return -1;
	return stg__pread_full(k->frames, buf, f->comp_size, f->comp_off);
}

void stg__keep_put(stg_mount *m, stg_mpack *mp, const stg_frame *f, size_t i, const uint8_t *buf)
{
	stg_keep *k = mp->keep;
	pthread_mutex_lock(&k->mu);
	bool go = !k->full;
	if (go && k->room < f->comp_size) {
		/* a slice of room at a time, evicting the least used entries */
		stg_ctx *c = stg_ctx_new();
		if (!c || stg__room_for(c, m->cache, SLICE, k->key) != STG_OK)
			k->full = true;
		else
			k->room += SLICE;
		stg_ctx_free(c);
		go = !k->full;
	}
	if (go)
		k->room -= f->comp_size;
	pthread_mutex_unlock(&k->mu);
	uint8_t one = 1;
	if (!go || stg__pwrite_full(k->frames, buf, f->comp_size, f->comp_off) ||
	    pwrite(k->have, &one, 1, (off_t)i) != 1)
		return;
	pthread_mutex_lock(&k->mu);
	k->kept += f->comp_size;
	if (k->kept - k->saved_at >= SLICE)
		write_meta(k, mp->path);
	pthread_mutex_unlock(&k->mu);
}

/* A mount's pins (its entry's, its kept frames'): clean may have dropped
 * them already, and holds the cache's lock while it runs. */
void stg__mount_unpin(stg_mount *m, const char *key)
{
	char rel[STG_PATH_MAX];
	struct stat st;
	snprintf(rel, sizeof rel, "pins/%s/%s", key, m->owner);
	if (fstatat(m->cache->rootfd, rel, &st, AT_SYMLINK_NOFOLLOW))
		return; /* dropped by clean already */
	int lock = stg__cache_lock(m->ctx, m->cache, "cache", true, NULL);
	stg__unpin_key(m->cache, key, m->owner);
	if (lock >= 0)
		stg__cache_unlock(lock);
}

void stg__keep_close(stg_mount *m, stg_mpack *mp, stg_keep *k)
{
	if (!k)
		return;
	if (k->dirfd >= 0 && k->kept != k->saved_at)
		write_meta(k, mp->path);
	if (k->pinned)
		stg__mount_unpin(m, k->key);
	if (k->frames >= 0)
		close(k->frames);
	if (k->have >= 0)
		close(k->have);
	if (k->dirfd >= 0)
		close(k->dirfd);
	pthread_mutex_destroy(&k->mu);
	free(k);
	if (mp->keep == k)
		mp->keep = NULL;
}
