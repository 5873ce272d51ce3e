/*
 * stage.c - make a dataset available on this node through the cache.
 *
 * The fast path touches the shared filesystem once: stat() of the source
 * gives its identity (device, inode, size, mtime, ctime); the index maps it
 * to a digest; if that entry is in the cache, it is pinned and linked at the
 * destination.  A changed source has a new identity, so it is looked at
 * again: its trailer names its digest, and an entry with that digest (the
 * same pack under another name) is reused.  Only then is the pack read, by
 * one process per node: the others wait on the entry's lock and reuse what
 * it built (single flight).  A builder that dies drops its lock with it; the
 * next one in line removes the leftovers and builds.
 */
#include "source.h"
#include "limit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Has the file open on fd another identity than id now?  (fd < 0: it was
 * closed, and reopened by path, and cannot tell: yes.) */
static bool ident_changed(int fd, const stg_ident *id)
{
	struct stat st;
	stg_ident now;
	if (fd < 0 || fstat(fd, &st))
		return true;
	stg__ident_of(&st, &now);
	return now.dev != id->dev || now.ino != id->ino || now.size != id->size ||
	       now.mtime_ns != id->mtime_ns || now.ctime_ns != id->ctime_ns;
}

/* The entry key: the digest, and for a subset a hash of its patterns. */
static void make_key(const char *hex, const stg_stage_opts *o, char *key, size_t len)
{
	if (!o->n_include) {
		snprintf(key, len, "%s", hex);
		return;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t h[32];
	unsigned int hl = 0;
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (size_t i = 0; i < o->n_include; i++)
		EVP_DigestUpdate(md, o->include[i], strlen(o->include[i]) + 1);
	EVP_DigestFinal_ex(md, h, &hl);
	EVP_MD_CTX_free(md);
	char sub[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(h, sub);
	snprintf(key, len, "%s-%.16s", hex, sub);
}

/* ---- verifying a warm entry -------------------------------------------------- */

/* Check a warm entry against its manifest: with full, hash every file it
 * names, else their sizes and count (local stats only); 0 all match, 1 a
 * mismatch (named in ctx), -1 no manifest. */
static int check_entry(stg_ctx *ctx, stg_cache *c, const char *key, bool full)
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

static int verify_entry(stg_ctx *ctx, stg_cache *c, const char *key)
{
	return check_entry(ctx, c, key, true);
}

/* A warm entry that fails its check is removed, to be staged again. */
static bool entry_damaged(stg_ctx *ctx, stg_cache *c, const char *key, const char *src, bool full)
{
	if (check_entry(ctx, c, key, full) <= 0)
		return false;
	stg__log(ctx, STG_LOG_WARN, "the cached copy of '%s' is damaged (%s): staging it again",
	         src, stg_errmsg(ctx));
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	stg__entry_remove(c, key);
	stg__cache_unlock(lk);
	return true;
}

/* ---- the pack path ------------------------------------------------------------- */

/* Bytes on disk the selected part of a pack will take. */
static uint64_t disk_need(const stg_pack *p, const bool *sel)
{
	uint64_t need = 64 * 1024; /* manifest, meta, the entry's directories */
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (sel && !sel[i])
			continue;
		if (r->type == STG_FILE)
			need += (r->size + 4095) / 4096 * 4096;
		else if (r->type == STG_DIR)
			need += 4096;
	}
	return need;
}

/* An entry being built: cache/<key>.tmp.<pid>, with its tree in data/. */
typedef struct entry_build {
	char tmp[STG_PATH_MAX], fin[STG_PATH_MAX];
	int tfd, dfd;
} entry_build;

static stg_err entry_begin(stg_ctx *ctx, stg_cache *c, const char *key, entry_build *eb)
{
	snprintf(eb->tmp, sizeof eb->tmp, "cache/%s.tmp.%d", key, (int)getpid());
	snprintf(eb->fin, sizeof eb->fin, "cache/%s", key);
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

/* Its manifest and description, then the rename that publishes it. */
static stg_err entry_publish(stg_ctx *ctx, stg_cache *c, const char *key, entry_build *eb,
                             const stg_pack *p, const bool *sel, const char *src,
                             const stg_stage_result *res)
{
	/* the entry itself is read-only too, with the packed directory's read
	 * and search bits (stage --copy gives them back) */
	fchmod(eb->dfd, p->t.root_mode & STG_ROOT_MODE_SET ? (p->t.root_mode & 0555) | 0500 : 0555);
	if (stg__manifest_write(eb->tfd, p, sel))
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write the entry's manifest");
	stg_meta m = {0};
	snprintf(m.kind, sizeof m.kind, "pack");
	snprintf(m.source, sizeof m.source, "%s", src);
	m.size = disk_need(p, sel);
	m.files = res->files;
	m.content = res->content_bytes;
	if (stg__meta_write(eb->tfd, &m))
		return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write the entry's description");
	if (renameat(c->rootfd, eb->tmp, c->rootfd, eb->fin))
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot publish the cache entry %s",
		                       key);
	eb->tmp[0] = '\0';
	return STG_OK;
}

/* Close it, and remove it unless it was published. */
static void entry_end(stg_cache *c, entry_build *eb)
{
	if (eb->dfd >= 0)
		close(eb->dfd);
	if (eb->tfd >= 0)
		close(eb->tfd);
	if (eb->tmp[0])
		stg__rmtree_at(c->rootfd, eb->tmp);
}

/* Evict what must go for need more bytes, keeping keep. */
static stg_err room_for(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep)
{
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	stg_err err = stg__make_room(ctx, c, need, keep);
	stg__cache_unlock(lk);
	return err;
}

/* Build the entry key from an open pack into a temporary directory, then
 * publish it.  The caller holds the key's lock. */
static stg_err build_from_pack(stg_ctx *ctx, stg_cache *c, stg_pack *p, const char *key,
                               const char *src, const stg_stage_opts *o, stg_stage_result *res)
{
	stg_err err;
	bool *sel = NULL;
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	uo.include = o->include;
	uo.n_include = o->n_include;
	uo.read_only = 1;
	if ((err = stg__select(ctx, p, &uo, &sel)))
		return err;
	/* room first: nothing is copied unless it fits */
	if ((err = room_for(ctx, c, disk_need(p, sel), NULL))) {
		free(sel);
		return err;
	}
	entry_build eb;
	stg_unpack_stats st;
	if (!(err = entry_begin(ctx, c, key, &eb)) &&
	    !(err = stg__extract_at(ctx, p, eb.dfd, &uo, &st))) {
		res->source_bytes += st.pack_bytes_read;
		res->files = st.files;
		res->content_bytes = st.bytes;
		err = entry_publish(ctx, c, key, &eb, p, sel, src, res);
	}
	entry_end(c, &eb);
	free(sel);
	return err;
}

/* ---- the delta path ---------------------------------------------------------------- */

/* Open a regular file (not a FIFO or a device, which could block or never
 * end); -1/errno. */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		int e = S_ISREG(st.st_mode) ? errno : EINVAL;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Open the delta file name beside src (or, if src is a symbolic link and
 * it is not there, beside the pack src points to). */
static int open_delta(const char *src, const char *name, char *path, size_t len)
{
	const char *slash = strrchr(src, '/');
	snprintf(path, len, "%.*s%s", slash ? (int)(slash - src + 1) : 0, src, name);
	int fd = open_regular(path);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	char *real = realpath(src, NULL);
	if (real && strcmp(real, src)) {
		slash = strrchr(real, '/');
		snprintf(path, len, "%.*s%s", (int)(slash - real + 1), real, name);
		fd = open_regular(path);
	} else {
		errno = ENOENT;
	}
	free(real);
	return fd;
}

/* Bytes on disk a delta build adds: the files the base does not have as
 * they are (those it has are linked). */
static uint64_t delta_need(const stg_pack *p, const stg_manifest *base)
{
	uint64_t need = 64 * 1024;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (r->type == STG_DIR)
			need += 4096;
		if (r->type != STG_FILE)
			continue;
		uint32_t k = stg__strmap_get(&base->map, stg__rec_path(p, r), r->path_len);
		const stg_mfile *f = k == UINT32_MAX ? NULL : &base->files[k];
		if (!f || f->size != r->size || memcmp(f->xxh3, r->xxh3, 16))
			need += (r->size + 4095) / 4096 * 4096;
	}
	return need;
}

static stg_err load_manifest(stg_ctx *ctx, stg_cache *c, const char *key, stg_manifest *m)
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

/* Build the entry key of pack p from the delta file name (beside src)
 * against the cached entry base.  The base is pinned meanwhile, so that no
 * other process evicts it.  STG_ENOENT (quietly) if the base is not cached
 * after all.  The caller holds the key's lock. */
static stg_err build_from_delta(stg_ctx *ctx, stg_cache *c, stg_pack *p, const char *key,
                                const stg_delta_rec *d, const char *src, stg_stage_result *res)
{
	char base[STG_DIGEST_HEXLEN + 1], path[STG_PATH_MAX + 1];
	stg_digest_hex(d->base, base);
	char *owner = stg_owner_process((int)getpid());
	if (!owner)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0) {
		free(owner);
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                       c->root);
	}
	stg_meta m;
	bool cached = stg__entry_exists(c, base) && stg__meta_read(c, base, &m) == 0 &&
	              !strcmp(m.kind, "pack");
	int pinned = cached ? stg__pin(c, base, owner) : -1;
	stg__cache_unlock(lk);
	if (!cached) {
		free(owner);
		return STG_ENOENT;
	}
	stg_err err = STG_OK;
	stg_manifest man = {0};
	entry_build eb = {.tfd = -1, .dfd = -1};
	int basefd = -1;
	stg_delta_src ds = {.bw = &c->lim.bw, .bw_ctx = ctx};
	if (pinned < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot pin the cache entry %s", base);
		goto out;
	}
	if ((ds.fd = open_delta(src, p->t.names + d->name_off, path, sizeof path)) < 0) {
		err = errno == EINVAL ? stg__fail(ctx, STG_ENOENT,
		                                  "the delta '%s' is not a regular file", path)
		                      : stg__fail_errno(ctx, STG_ENOENT, errno,
		                                        "cannot read the delta '%s'", path);
		goto out;
	}
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "cache/%s/data", base);
	if ((basefd = openat(c->rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
	    0) {
		err = stg__fail_errno(ctx, STG_ECORRUPT, errno, "cannot open the cache entry %s",
		                      base);
		goto out;
	}
	if ((err = load_manifest(ctx, c, base, &man)) ||
	    (err = room_for(ctx, c, delta_need(p, &man), base)) ||
	    (err = entry_begin(ctx, c, key, &eb)))
		goto out;
	stg_delta_stats st;
	err = stg__delta_apply(ctx, &ds, p, d->base, &man, basefd, eb.dfd, &st);
	res->source_bytes += st.bytes_read;
	if (err) {
		char msg[STG_ERRMSG_MAX];
		snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
		stg__fail(ctx, err, "'%s': %s", path, msg);
		goto out;
	}
	res->files = 0;
	for (size_t i = 0; i < p->t.n_entries; i++)
		res->files += p->t.recs[i].type == STG_FILE || p->t.recs[i].type == STG_HARDLINK;
	res->content_bytes = p->t.content_size;
	if ((err = entry_publish(ctx, c, key, &eb, p, NULL, src, res)))
		goto out;
	res->delta = 1;
	memcpy(res->base_digest, d->base, STG_DIGEST_LEN);
	stg__log(ctx, STG_LOG_DEBUG,
	         "built from the delta '%s' against the cached %.12s: %llu files linked, %llu "
	         "copied, %llu patched, %llu whole",
	         path, base, (unsigned long long)st.linked, (unsigned long long)st.copied,
	         (unsigned long long)st.patched, (unsigned long long)st.whole);
out:
	entry_end(c, &eb);
	stg__manifest_free(&man);
	if (basefd >= 0)
		close(basefd);
	if (ds.fd >= 0)
		close(ds.fd);
	if (pinned == 0 && (lk = stg__cache_lock(ctx, c, "cache", true, NULL)) >= 0) {
		stg__unpin_key(c, base, owner);
		stg__cache_unlock(lk);
	}
	free(owner);
	return err;
}

/* Build the entry from a delta, if the pack has one from a version this
 * node caches (whole entries only).  STG_ENOENT when none could be used:
 * the caller reads the pack; a delta that was there but failed is named in
 * a warning. */
static stg_err build_from_deltas(stg_ctx *ctx, stg_cache *c, stg_pack *p, const char *key,
                                 const char *src, const stg_stage_opts *o, stg_stage_result *res)
{
	if (!p->t.n_deltas || o->n_include || o->from_copy)
		return STG_ENOENT;
	size_t cached = 0;
	for (size_t i = 0; i < p->t.n_deltas; i++) {
		const stg_delta_rec *d = &p->t.deltas[i];
		char base[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(d->base, base);
		if (!stg__entry_exists(c, base))
			continue;
		cached++;
		if (o->verify && verify_entry(ctx, c, base) > 0) {
			stg__log(ctx, STG_LOG_WARN,
			         "%s; the cached %.12s, the base of a delta, is damaged: not using "
			         "it",
			         stg_errmsg(ctx), base);
			continue;
		}
		stg_err err = build_from_delta(ctx, c, p, key, d, src, res);
		if (err == STG_OK || err == STG_EINTR || err == STG_ENOSPC || err == STG_ENOMEM)
			return err;
		if (err == STG_ENOENT && !stg__entry_exists(c, base))
			continue; /* evicted meanwhile */
		stg__log(ctx, STG_LOG_WARN, "%s; reading the whole pack instead", stg_errmsg(ctx));
	}
	if (!cached)
		stg__log(ctx, STG_LOG_INFO,
		         "'%s' has deltas from %zu older version%s, none of them cached on this "
		         "node: reading the whole pack",
		         src, p->t.n_deltas, p->t.n_deltas == 1 ? "" : "s");
	return STG_ENOENT;
}

/* Does the file end with a pack's footer?  One 48-byte read. */
static bool is_pack(int fd, uint64_t size)
{
	uint8_t f[STG_FOOTER_SIZE];
	return size >= STG_FOOTER_SIZE + 8 &&
	       stg__pread_full(fd, f, sizeof f, size - sizeof f) == 0 &&
	       !memcmp(f + 40, STG_FOOTER_MAGIC, 8);
}

/* Open the pack at src within the shared-FS slot, its reads charged to the
 * bandwidth limit. */
static stg_err open_pack(stg_ctx *ctx, stg_cache *c, int fd, stg_pack **p)
{
	stg_err err = stg_pack_open_fd(ctx, fd, p);
	if (!err) {
		(*p)->bw = &c->lim.bw;
		(*p)->bw_ctx = ctx;
	}
	return err;
}

/* Stage the pack open at *fd, holding the shared-FS slot.  While another
 * process builds the same entry, this one waits without its slot and
 * without the source open (so slots count readers), and reopens the source
 * if it has to build after all. */
static stg_err stage_pack(stg_ctx *ctx, stg_cache *c, int *fd, stg_slot *slot, const char *src,
                          const stg_ident *id, const stg_stage_opts *o, const char *owner,
                          stg_stage_result *res)
{
	/* what is read: src, or the local copy of it */
	const char *path = o->from_copy ? o->from_copy : src;
	stg_pack *p = NULL;
	int klock = -1;
	stg_err err = open_pack(ctx, c, *fd, &p);
	if (err)
		return err;
	if (o->from_copy)
		p->bw = NULL; /* local: not the shared filesystem's bandwidth */
	uint64_t trailer = p->size - p->t.data_size;
	res->source_bytes += trailer < STG_TAIL_READ ? STG_TAIL_READ : trailer;
	if (res->source_bytes > p->size)
		res->source_bytes = p->size;
	memcpy(res->digest, p->t.digest, STG_DIGEST_LEN);
	char hex[STG_DIGEST_HEXLEN + 1], key[STG_DIGEST_HEXLEN + 18];
	stg_digest_hex(p->t.digest, hex);
	if (o->from_copy_digest && memcmp(p->t.digest, o->from_copy_digest, STG_DIGEST_LEN)) {
		char want[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(o->from_copy_digest, want);
		err = stg__fail(ctx, STG_ECORRUPT,
		                "it is pack %.16s now, not %.16s, the version the other nodes "
		                "staged (was it replaced during the job?)",
		                hex, want);
		goto out;
	}
	make_key(hex, o, key, sizeof key);

	for (int attempt = 0; attempt < 3; attempt++) {
		/* an entry found warm is checked; one just built or waited for is not */
		if (stg__entry_exists(c, key) &&
		    (attempt > 0 || !entry_damaged(ctx, c, key, src, o->verify))) {
			err = stg__attach(ctx, c, key, src, o, owner, res);
			if (err != STG_ENOENT) {
				res->hit = klock < 0 || res->waited;
				goto out;
			}
		}
		if (klock < 0 && (klock = stg__cache_lock(ctx, c, key, false, NULL)) < 0) {
			if (errno != EWOULDBLOCK)
				goto lock_failed;
			/* another process builds it: wait for it without the slot */
			stg_pack_close(p);
			p = NULL;
			close(*fd);
			*fd = -1;
			stg__slot_release(slot);
			if ((klock = stg__cache_lock(ctx, c, key, true, NULL)) < 0)
				goto lock_failed;
			res->waited = 1;
			if (stg__entry_exists(c, key))
				continue; /* built meanwhile */
			/* its builder failed or died: build it ourselves */
			if (!o->from_copy && (err = stg__slot_acquire(ctx, &c->lim, slot)))
				goto out;
			if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
				err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'",
				                      path);
				goto out;
			}
			if ((err = open_pack(ctx, c, *fd, &p)))
				goto out;
			if (o->from_copy)
				p->bw = NULL;
			if (memcmp(p->t.digest, res->digest, STG_DIGEST_LEN)) {
				err = stg__fail(ctx, STG_EIO,
				                "'%s' changed while it was being staged; try again",
				                path);
				goto out;
			}
		}
		if (stg__entry_exists(c, key))
			continue;
		stg__remove_leftovers(c, key);
		err = build_from_deltas(ctx, c, p, key, src, o, res);
		if (err == STG_ENOENT)
			err = build_from_pack(ctx, c, p, key, src, o, res);
		if (err)
			goto out;
		res->hit = 0;
		res->waited = 0;
	}
	if (!res->path)
		err = stg__fail(ctx, STG_EIO,
		                "the cache entry %s keeps disappearing (evicted by "
		                "another process?); try again",
		                key);
	goto out;
lock_failed:
	err = stg__cancelled(ctx)
	              ? stg__fail(ctx, STG_EINTR, "interrupted")
	              : stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache entry %s", key);
out:
	/* indexed only if the file did not change while it was read (a
	 * rewrite in place would map its new identity to the old content) */
	if (!err && id && !ident_changed(*fd, id))
		stg__index_put(ctx, c, id, hex, src);
	stg__cache_unlock(klock);
	stg_pack_close(p);
	return err;
}

static bool digest_is(const char *hex, const uint8_t digest[STG_DIGEST_LEN])
{
	char h[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(digest, h);
	return !strcmp(h, hex);
}

int stg_stage_cached(stg_cache *c, const uint8_t digest[STG_DIGEST_LEN], const stg_stage_opts *o)
{
	stg_stage_opts def;
	if (!o) {
		stg_stage_opts_init(&def);
		o = &def;
	}
	char hex[STG_DIGEST_HEXLEN + 1], key[STG_DIGEST_HEXLEN + 18];
	stg_digest_hex(digest, hex);
	make_key(hex, o, key, sizeof key);
	return stg__entry_exists(c, key);
}

/* The SHA-256 of the first size bytes of fd. */
static int digest_of(int fd, uint64_t size, uint8_t out[STG_DIGEST_LEN])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = malloc(1u << 20);
	int rc = md && buf ? 0 : -1;
	if (!rc)
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (uint64_t off = 0; !rc && off < size;) {
		size_t n = size - off < (1u << 20) ? (size_t)(size - off) : (1u << 20);
		if ((rc = stg__pread_full(fd, buf, n, off)))
			break;
		EVP_DigestUpdate(md, buf, n);
		off += n;
	}
	unsigned int hl = 0;
	if (!rc)
		EVP_DigestFinal_ex(md, out, &hl);
	EVP_MD_CTX_free(md);
	free(buf);
	return rc;
}

/* Stage src from o->from_copy, a local file said to hold its bytes.  Anything
 * wrong with the copy is STG_ECORRUPT (or the error reading it): the caller
 * reads src instead.  Nothing of a bad copy is published: a whole pack's
 * SHA-256 is checked while it is extracted, a subset's before. */
static stg_err stage_copy(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                          const char *owner, stg_stage_result *res)
{
	int fd = open(o->from_copy, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read the copy '%s'",
		                       o->from_copy);
	stg_pack *p = NULL;
	stg_err err = stg_pack_open_fd(ctx, fd, &p);
	if (!err && o->from_copy_digest && memcmp(p->t.digest, o->from_copy_digest, STG_DIGEST_LEN))
		err = stg__fail(ctx, STG_ECORRUPT, "it is not the same pack (another digest)");
	uint8_t got[STG_DIGEST_LEN];
	if (!err && o->n_include &&
	    (digest_of(fd, p->t.data_size, got) || memcmp(got, p->t.digest, STG_DIGEST_LEN)))
		err = stg__fail(ctx, STG_ECORRUPT, "its SHA-256 does not match");
	stg_pack_close(p);
	if (!err) {
		stg_slot none = {.fd = -1, .lease_fd = -1};
		err = stage_pack(ctx, c, &fd, &none, src, NULL, o, owner, res);
		res->source_bytes = 0;
	}
	if (fd >= 0)
		close(fd);
	return err;
}

/* ---- the whole ------------------------------------------------------------------ */

void stg_stage_opts_init(stg_stage_opts *o)
{
	memset(o, 0, sizeof *o);
}

void stg_stage_result_free(stg_stage_result *res)
{
	if (!res)
		return;
	free(res->path);
	res->path = NULL;
}

stg_err stg_stage(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *opts,
                  stg_stage_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_stage_opts def;
	if (!opts) {
		stg_stage_opts_init(&def);
		opts = &def;
	}
	char *owner = opts->owner ? strdup(opts->owner) : stg__default_owner();
	if (!owner)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	/* an absolute name for status and the index, made without asking the
	 * shared filesystem (no realpath) */
	char abs[STG_PATH_MAX + 1];
	if (src[0] != '/' && stg__absolute(src, abs, sizeof abs) == 0)
		src = abs;
	stg_err err = STG_OK;
	int fd = -1;
	stg_slot slot = {.fd = -1, .lease_fd = -1};
	struct stat st;
	if (opts->from_copy_digest && !opts->verify) {
		/* the pack's digest is known: an entry in the cache is used
		 * without asking the shared filesystem anything */
		char hex[STG_DIGEST_HEXLEN + 1], key[STG_DIGEST_HEXLEN + 18];
		stg_digest_hex(opts->from_copy_digest, hex);
		make_key(hex, opts, key, sizeof key);
		if (stg__entry_exists(c, key) && !entry_damaged(ctx, c, key, src, false)) {
			err = stg__attach(ctx, c, key, src, opts, owner, res);
			if (err != STG_ENOENT) {
				res->hit = 1;
				res->kind = "pack";
				memcpy(res->digest, opts->from_copy_digest, STG_DIGEST_LEN);
				goto out;
			}
			err = STG_OK;
		}
	}
	if (opts->from_copy) {
		res->kind = "pack";
		err = stage_copy(ctx, c, src, opts, owner, res);
		if (!err || err == STG_EINTR || err == STG_ENOSPC || err == STG_EEXIST ||
		    err == STG_ENOMEM)
			goto out;
		stg__log(ctx, STG_LOG_WARN,
		         "the copy '%s' of '%s' cannot be used (%s): reading '%s' instead",
		         opts->from_copy, src, stg_errmsg(ctx), src);
		free(res->path);
		memset(res, 0, sizeof *res);
		/* src itself, which must still be the pack the copy was of: a
		 * node of a multi-node job never stages another version */
		stg_stage_opts direct = *opts;
		direct.from_copy = NULL;
		free(owner);
		return stg_stage(ctx, c, src, &direct, res);
	}
	/* the one call on the shared filesystem that a warm stage makes */
	if (stat(src, &st)) {
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", src);
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		res->kind = "directory";
		if (!(err = stg__slot_acquire(ctx, &c->lim, &slot)))
			err = stg__stage_dir(ctx, c, src, opts, owner, res);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		err = stg__fail(ctx, STG_ENOENT, "'%s' is not a file or directory", src);
		goto out;
	}
	stg_ident id;
	stg__ident_of(&st, &id);
	char hex[STG_DIGEST_HEXLEN + 1];
	if (stg__index_get(c, &id, hex) == 0 &&
	    (!opts->from_copy_digest || digest_is(hex, opts->from_copy_digest))) {
		char key[STG_DIGEST_HEXLEN + 18];
		make_key(hex, opts, key, sizeof key);
		if (stg__entry_exists(c, key)) {
			if (!entry_damaged(ctx, c, key, src, opts->verify)) {
				err = stg__attach(ctx, c, key, src, opts, owner, res);
				if (err != STG_ENOENT) {
					res->hit = 1;
					res->kind = "pack"; /* refined below if not */
					stg_meta m;
					if (stg__meta_read(c, key, &m) == 0)
						res->kind = !strcmp(m.kind, "archive") ? "archive"
						                                       : "pack";
					for (int i = 0; i < STG_DIGEST_LEN; i++)
						sscanf(hex + 2 * i, "%2hhx", &res->digest[i]);
					goto out;
				}
			}
		}
	}
	/* a miss reads the shared filesystem: within a slot */
	if ((err = stg__slot_acquire(ctx, &c->lim, &slot)))
		goto out;
	fd = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO put there meanwhile */
	if (fd < 0) {
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", src);
		goto out;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	/* what is read is what was opened: SRC may have been replaced while
	 * this stage waited for its slot */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		err = stg__fail(ctx, STG_ENOENT, "'%s' is not a file or directory", src);
		goto out;
	}
	stg__ident_of(&st, &id);
	if (is_pack(fd, (uint64_t)st.st_size)) {
		res->kind = "pack";
		err = stage_pack(ctx, c, &fd, &slot, src, &id, opts, owner, res);
		if (err && err != STG_EINTR && err != STG_ENOSPC && err != STG_EEXIST &&
		    err != STG_ENOMEM) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			stg__fail(ctx, err, "'%s': %s", src, msg);
		}
	} else if (opts->from_copy_digest) {
		err = stg__fail(ctx, STG_ECORRUPT,
		                "'%s' is no longer a pack: not the version the other nodes "
		                "staged (was it replaced during the job?)",
		                src);
	} else {
		res->kind = "archive";
		err = stg__stage_archive(ctx, c, fd, src, &id, opts, owner, res);
	}
out:
	if (fd >= 0)
		close(fd);
	stg__slot_release(&slot);
	free(owner);
	res->seconds = stg__now() - t0;
	if (err) {
		free(res->path);
		res->path = NULL;
	}
	return err;
}
