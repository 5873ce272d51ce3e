/*
 * stage.c - make a dataset available on this node through the cache.
 *
 * The fast path touches the shared filesystem once: stat() of the source
 * gives its identity (device, inode, size, mtime, ctime); the index maps it
 * to a digest; if that entry is in the cache, it is pinned and linked at the
 * destination.  Otherwise the source is opened, within a shared-FS slot,
 * and its kind chosen once (the table below): a pack, another archive, a
 * directory; from there on stage.c works through the interface of
 * source.h.
 * What names its entry comes next (a pack's trailer names its digest, so
 * the same pack under another name is reused); only then is the source
 * read, by one process per node: the others wait on the entry's lock and
 * reuse what it built (single flight).  A builder that dies drops its lock
 * with it; the next one in line removes the leftovers and builds.  A source
 * named only by all of its bytes (an archive) is built under a lock of its
 * identity instead, and the index says what its builder built.
 */
#include "source.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MAX (STG_DIGEST_HEXLEN + 18)

/* The kinds of source, in the order they are asked: a pack is a file that
 * ends with a pack's footer, any other file is an archive, and a directory
 * is a directory.  A new kind is its file and its line here. */
static const stg_source_ops *const kinds[] = {
        &stg__source_pack,
        &stg__source_archive,
        &stg__source_dir,
};

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

static void digest_of_hex(const char *hex, uint8_t digest[STG_DIGEST_LEN])
{
	for (int i = 0; i < STG_DIGEST_LEN; i++)
		sscanf(hex + 2 * i, "%2hhx", &digest[i]);
}

static bool digest_is(const char *hex, const uint8_t digest[STG_DIGEST_LEN])
{
	char h[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(digest, h);
	return !strcmp(h, hex);
}

/* A warm entry that fails its check (quick, or full with --verify) is
 * removed, to be staged again. */
static bool entry_damaged(stg_ctx *ctx, stg_cache *c, const char *key, const char *src, bool full)
{
	if (stg__entry_check(ctx, c, key, full) <= 0)
		return false;
	stg__log(ctx, STG_LOG_WARN, "the cached copy of '%s' is damaged (%s): staging it again",
	         src, stg_errmsg(ctx));
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	stg__entry_remove(c, key);
	stg__cache_unlock(lk);
	return true;
}

/* ---- single flight ------------------------------------------------------------ */

/* err, with the source's name in front unless the kind says it as it is. */
static stg_err named(stg_ctx *ctx, const stg_source *s, stg_err err, bool bare)
{
	if (!err || bare || s->local || s->ops->bare & 1u << err)
		return err;
	char msg[STG_ERRMSG_MAX];
	snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
	return stg__fail(ctx, err, "'%s': %s", s->name, msg);
}

/* After waiting for another builder of lock: is its entry there now?  For
 * a source named by all of its bytes, the index says which it built. */
static bool built_meanwhile(stg_cache *c, const stg_source *s, const stg_stage_opts *o, char *hex,
                            char *key, stg_stage_result *res)
{
	if (s->named)
		return stg__entry_exists(c, key);
	char h[STG_DIGEST_HEXLEN + 1], k[KEY_MAX];
	if (stg__index_get(c, &s->id, h))
		return false;
	make_key(h, o, k, sizeof k);
	if (!stg__entry_exists(c, k))
		return false;
	memcpy(hex, h, sizeof h);
	memcpy(key, k, sizeof k);
	digest_of_hex(hex, res->digest);
	return true;
}

/* Stage the source s, open and of its kind.  While another process builds
 * the same entry, this one waits: without its slot and without the source
 * open if the kind can open it again (so slots count readers), else
 * holding them. */
static stg_err stage_source(stg_ctx *ctx, stg_cache *c, stg_source *s, const stg_stage_opts *o,
                            const char *owner, stg_stage_result *res)
{
	char hex[STG_DIGEST_HEXLEN + 1] = "", key[KEY_MAX] = "", lock[KEY_MAX + 48];
	int klock = -1;
	bool let_go = false;
	stg_err err = s->ops->open(ctx, c, s, o, res);
	if (err)
		return named(ctx, s, err, s->ops->open_names_it);
	if (s->named) {
		memcpy(res->digest, s->digest, STG_DIGEST_LEN);
		stg_digest_hex(s->digest, hex);
		make_key(hex, o, key, sizeof key);
		snprintf(lock, sizeof lock, "%s", key);
	} else {
		/* one builder per source file */
		snprintf(lock, sizeof lock, "src-%llu-%llu", (unsigned long long)s->id.dev,
		         (unsigned long long)s->id.ino);
	}
	for (int attempt = 0; attempt < 3; attempt++) {
		/* an entry found warm is checked; one just built or waited for is not */
		if (key[0] && stg__entry_exists(c, key) &&
		    (attempt > 0 || !entry_damaged(ctx, c, key, s->name, o->verify))) {
			err = stg__attach(ctx, c, key, s->name, o, owner, res);
			if (err != STG_ENOENT) {
				res->hit = klock < 0 || res->waited;
				goto out;
			}
		}
		if (klock < 0 && (klock = stg__cache_lock(ctx, c, lock, false, NULL)) < 0) {
			if (errno != EWOULDBLOCK)
				goto lock_failed;
			/* another process builds it: wait for it */
			stg__log(ctx, STG_LOG_INFO,
			         "'%s' is being staged by another process on this node: waiting "
			         "for it (the source is read once)",
			         s->name);
			if ((let_go = s->ops->reopen != NULL))
				stg__source_let_go(s);
			if ((klock = stg__cache_lock(ctx, c, lock, true, NULL)) < 0)
				goto lock_failed;
			res->waited = 1;
			if (built_meanwhile(c, s, o, hex, key, res))
				continue;
		}
		if (key[0] && stg__entry_exists(c, key))
			continue;
		/* its builder failed or died, or what it built went: build it */
		if (let_go && (err = stg__source_take_again(ctx, c, s)))
			goto out;
		let_go = false;
		stg__remove_leftovers(c, lock);
		if ((err = s->ops->build(ctx, c, s, lock, o, res)))
			goto out;
		if (!key[0]) {
			stg_digest_hex(res->digest, hex);
			make_key(hex, o, key, sizeof key);
		}
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
	err = stg__cancelled(ctx) ? stg__fail(ctx, STG_EINTR, "interrupted")
	      : key[0] ? stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache entry %s", key)
	               : stg__fail_errno(ctx, STG_EIO, errno, "cannot lock '%s'", lock);
out:
	/* indexed only if the file did not change while it was read (a
	 * rewrite in place would map its new identity to the old content) */
	if (!err && s->indexed && hex[0] && !ident_changed(s->fd, &s->id))
		stg__index_put(ctx, c, &s->id, hex, s->name);
	stg__cache_unlock(klock);
	return named(ctx, s, err, false);
}

/* ---- without reading the source ------------------------------------------------ */

int stg_stage_cached(stg_cache *c, const uint8_t digest[STG_DIGEST_LEN], const stg_stage_opts *o)
{
	stg_stage_opts def;
	if (!o) {
		stg_stage_opts_init(&def);
		o = &def;
	}
	char hex[STG_DIGEST_HEXLEN + 1], key[KEY_MAX];
	stg_digest_hex(digest, hex);
	make_key(hex, o, key, sizeof key);
	return stg__entry_exists(c, key);
}

/* The entry of a pack whose digest is known (from_copy_digest): used
 * without asking the shared filesystem anything.  STG_ENOENT: not cached. */
static stg_err stage_known(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                           const char *owner, stg_stage_result *res)
{
	char hex[STG_DIGEST_HEXLEN + 1], key[KEY_MAX];
	stg_digest_hex(o->from_copy_digest, hex);
	make_key(hex, o, key, sizeof key);
	if (!stg__entry_exists(c, key) || entry_damaged(ctx, c, key, src, false))
		return STG_ENOENT;
	stg_err err = stg__attach(ctx, c, key, src, o, owner, res);
	if (err != STG_ENOENT) {
		res->hit = 1;
		res->kind = "pack";
		memcpy(res->digest, o->from_copy_digest, STG_DIGEST_LEN);
	}
	return err;
}

/* The entry the index names for the identity in st, if it is cached and
 * intact: one stat() on the shared filesystem, nothing read.  STG_ENOENT:
 * a miss. */
static stg_err stage_warm(stg_ctx *ctx, stg_cache *c, const char *src, const struct stat *st,
                          const stg_stage_opts *o, const char *owner, stg_stage_result *res)
{
	stg_ident id;
	stg__ident_of(st, &id);
	char hex[STG_DIGEST_HEXLEN + 1], key[KEY_MAX];
	if (stg__index_get(c, &id, hex) ||
	    (o->from_copy_digest && !digest_is(hex, o->from_copy_digest)))
		return STG_ENOENT;
	make_key(hex, o, key, sizeof key);
	if (!stg__entry_exists(c, key) || entry_damaged(ctx, c, key, src, o->verify))
		return STG_ENOENT;
	stg_err err = stg__attach(ctx, c, key, src, o, owner, res);
	if (err != STG_ENOENT) {
		res->hit = 1;
		res->kind = "pack"; /* refined below if not */
		stg_meta m;
		if (stg__meta_read(c, key, &m) == 0)
			res->kind = !strcmp(m.kind, "archive") ? "archive" : "pack";
		digest_of_hex(hex, res->digest);
	}
	return err;
}

/* Stage src from o->from_copy, a local file said to hold its bytes: a pack
 * source over the copy (source_pack.c checks that it is the pack).
 * Anything wrong with the copy is STG_ECORRUPT (or the error reading it):
 * the caller reads src instead. */
static stg_err stage_copy(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                          const char *owner, stg_stage_result *res)
{
	stg_source s = {.ops = &stg__source_pack,
	                .name = src,
	                .path = o->from_copy,
	                .local = true,
	                .slot = {.fd = -1, .lease_fd = -1}};
	s.fd = open(o->from_copy, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (s.fd < 0)
		return stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read the copy '%s'",
		                       o->from_copy);
	stg_err err = stage_source(ctx, c, &s, o, owner, res);
	res->source_bytes = 0;
	stg__source_close(&s);
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
	stg_source s = {.fd = -1, .slot = {.fd = -1, .lease_fd = -1}};
	struct stat st;
	int idlock = -1;
	/* the pack's digest is known: an entry in the cache is used without
	 * asking the shared filesystem anything */
	if (opts->from_copy_digest && !opts->verify &&
	    (err = stage_known(ctx, c, src, opts, owner, res)) != STG_ENOENT)
		goto out;
	err = STG_OK;
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
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		err = stg__fail(ctx, STG_ENOENT, "'%s' is not a file or directory", src);
		goto out;
	}
	if (S_ISREG(st.st_mode) &&
	    (err = stage_warm(ctx, c, src, &st, opts, owner, res)) != STG_ENOENT)
		goto out;
	/* single flight before the source is opened: one process of this node
	 * reads a file (its trailer too); the others wait here without a slot
	 * and without opening it (on NFS an open drops the reader's pages), and
	 * then find it in the index like any warm stage */
	if (S_ISREG(st.st_mode)) {
		char name[96];
		bool waited = false;
		snprintf(name, sizeof name, "id-%llx-%llx-%llx-%llx", (unsigned long long)st.st_dev,
		         (unsigned long long)st.st_ino, (unsigned long long)st.st_size,
		         (unsigned long long)(st.st_mtim.tv_sec * 1000000000ll +
		                              st.st_mtim.tv_nsec));
		if ((idlock = stg__cache_lock(ctx, c, name, false, NULL)) < 0 &&
		    errno == EWOULDBLOCK) {
			stg__log(ctx, STG_LOG_INFO,
			         "'%s' is being staged by another process on this node: waiting "
			         "for it (the source is read once)",
			         src);
			waited = true;
			idlock = stg__cache_lock(ctx, c, name, true, NULL);
		}
		if (idlock < 0) {
			err = stg__cancelled(ctx) ? stg__fail(ctx, STG_EINTR, "interrupted")
			                          : stg__fail_errno(ctx, STG_EIO, errno,
			                                            "cannot lock '%s'", name);
			goto out;
		}
		if (waited &&
		    (err = stage_warm(ctx, c, src, &st, opts, owner, res)) != STG_ENOENT) {
			res->waited = 1;
			goto out;
		}
		err = STG_OK;
	}
	/* a miss: the source itself, of the kind it turns out to be */
	if ((err = stg__source_open(ctx, c, src, &st, &s)))
		goto out;
	for (size_t i = 0; !s.ops && i < sizeof kinds / sizeof kinds[0]; i++)
		if (kinds[i]->claims(&s))
			s.ops = kinds[i];
	if (!s.ops) {
		err = stg__fail(ctx, STG_ENOENT, "'%s' is not a file or directory", src);
		goto out;
	}
	if (opts->from_copy_digest && s.ops != &stg__source_pack) {
		err = stg__fail(ctx, STG_ECORRUPT,
		                "'%s' is no longer a pack: not the version the other nodes "
		                "staged (was it replaced during the job?)",
		                src);
		goto out;
	}
	res->kind = s.ops->kind;
	err = stage_source(ctx, c, &s, opts, owner, res);
out:
	stg__source_close(&s);
	stg__cache_unlock(idlock);
	free(owner);
	res->seconds = stg__now() - t0;
	if (err) {
		free(res->path);
		res->path = NULL;
	}
	return err;
}
