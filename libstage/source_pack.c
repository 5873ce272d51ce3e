/*
 * source_pack.c - a pack as a source: a file that ends with a pack's
 * footer.  Its trailer names the entry (its digest, and for a subset a
 * hash of the patterns: stage.c makes the key), says how much room the
 * tree takes, and lists the frames; the tree is extracted in parallel
 * (extract.c), or, when this node caches an older version the pack has a
 * delta from, built from that entry and the delta file beside the pack.
 *
 * Its bytes are read by range (pread within the bandwidth limit), from the
 * shared filesystem within a reader slot or from a local copy, so anything
 * that reads frames on demand can read them through it.  While another
 * process builds its entry, a pack is let go (its slot too) and opened
 * again after: its trailer is cheap to read again, and must name the same
 * digest, or it changed while it was being staged.
 */
#include "extract_tree.h"
#include "delta.h"
#include "source.h"
#include "ctx.h"
#include "trailer.h"
#include "pack_read.h"
#include "extract.h"
#include "path.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool pack_claims(const stg_source *s)
{
	/* one 48-byte read */
	uint8_t f[STG_FOOTER_SIZE];
	uint64_t size = (uint64_t)s->st.st_size;
	return S_ISREG(s->st.st_mode) && size >= STG_FOOTER_SIZE + 8 &&
	       stg__pread_full(s->fd, f, sizeof f, size - sizeof f) == 0 &&
	       !memcmp(f + 40, STG_FOOTER_MAGIC, 8);
}

/* The SHA-256 of the first size bytes of the source. */
static int digest_of(stg_ctx *ctx, const stg_source *s, uint64_t size, uint8_t out[STG_DIGEST_LEN])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = malloc(1u << 20);
	int rc = md && buf ? 0 : -1;
	if (!rc)
		EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	for (uint64_t off = 0; !rc && off < size;) {
		size_t n = size - off < (1u << 20) ? (size_t)(size - off) : (1u << 20);
		if (s->ops->read(ctx, s, buf, n, off) != (ssize_t)n) {
			rc = -1;
			break;
		}
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

/* The pack open at s->fd, its reads charged to the source's limit. */
static stg_err open_pack(stg_ctx *ctx, stg_source *s, stg_pack **p)
{
	stg_err err = stg_pack_open_fd(ctx, s->fd, p);
	if (!err) {
		(*p)->bw = s->bw;
		(*p)->bw_ctx = ctx;
		s->state = *p;
	}
	return err;
}

/* A local copy said to hold the pack's bytes must be that pack: anything
 * wrong with it is STG_ECORRUPT (the caller reads the pack instead).  A
 * whole pack's SHA-256 is checked while it is extracted, a subset's here,
 * before anything is published. */
static stg_err pack_open(stg_ctx *ctx, stg_cache *c, stg_source *s, const stg_stage_opts *o,
                         stg_stage_result *res)
{
	(void)c;
	stg_pack *p;
	stg_err err = open_pack(ctx, s, &p);
	if (err)
		return err;
	const uint8_t *want = o->from_copy_digest;
	uint8_t got[STG_DIGEST_LEN];
	if (s->local && want && memcmp(p->t.digest, want, STG_DIGEST_LEN))
		return stg__fail(ctx, STG_ECORRUPT, "it is not the same pack (another digest)");
	if (s->local && o->n_include &&
	    (digest_of(ctx, s, p->t.data_size, got) || memcmp(got, p->t.digest, STG_DIGEST_LEN)))
		return stg__fail(ctx, STG_ECORRUPT, "its SHA-256 does not match");
	uint64_t trailer = p->size - p->t.data_size;
	res->source_bytes += trailer < STG_TAIL_READ ? STG_TAIL_READ : trailer;
	if (res->source_bytes > p->size)
		res->source_bytes = p->size;
	memcpy(s->digest, p->t.digest, STG_DIGEST_LEN);
	s->named = true;
	if (want && memcmp(p->t.digest, want, STG_DIGEST_LEN)) {
		char hex[STG_DIGEST_HEXLEN + 1], whex[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(p->t.digest, hex);
		stg_digest_hex(want, whex);
		return stg__fail(ctx, STG_ECORRUPT,
		                 "it is pack %.16s now, not %.16s, the version the other nodes "
		                 "staged (was it replaced during the job?)",
		                 hex, whex);
	}
	return STG_OK;
}

static stg_err pack_reopen(stg_ctx *ctx, stg_cache *c, stg_source *s)
{
	(void)c;
	stg_pack *p;
	stg_err err = open_pack(ctx, s, &p);
	if (!err && memcmp(p->t.digest, s->digest, STG_DIGEST_LEN))
		err = stg__fail(ctx, STG_EIO, "'%s' changed while it was being staged; try again",
		                s->path);
	return err;
}

static void pack_close(stg_source *s)
{
	stg_pack_close(s->state);
	s->state = NULL;
}

/* ---- the whole pack ----------------------------------------------------------- */

/* The entry's manifest and description, then publish it. */
static stg_err publish(stg_ctx *ctx, stg_cache *c, const char *key, stg_entry_build *eb,
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
	m.size = stg__disk_need(p, sel);
	m.files = res->files;
	m.content = res->content_bytes;
	return stg__entry_publish(ctx, c, eb, key, &m);
}

/* Build the entry key from the pack, extracting the selected part. */
static stg_err build_from_pack(stg_ctx *ctx, stg_cache *c, stg_pack *p, const char *key,
                               const char *src, const stg_stage_opts *o, stg_stage_result *res)
{
	stg_err err;
	bool *sel = NULL;
	/* links out of the tree are kept only from a pack of the caller's own
	 * (an env's): the one read here, whatever its name says */
	struct stat pst;
	if (o->env && (p->fd < 0 || fstat(p->fd, &pst) || pst.st_uid != geteuid()))
		return stg__fail(ctx, STG_EUSAGE,
		                 "'%s' is not a pack of your own: an env is served only from "
		                 "one (stager pack ENV_DIR)",
		                 src);
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	uo.include = o->include;
	uo.n_include = o->n_include;
	uo.read_only = 1;
	if ((err = stg__select(ctx, p, &uo, o->env, &sel)))
		return err;
	/* room first: nothing is copied unless it fits */
	if ((err = stg__room_for(ctx, c, stg__disk_need(p, sel), NULL))) {
		free(sel);
		return err;
	}
	stg_entry_build eb;
	stg_unpack_stats st;
	if (!(err = stg__entry_begin(ctx, c, key, &eb)) &&
	    !(err = stg__extract_at(ctx, p, eb.dfd, &uo, &st, o->env))) {
		res->source_bytes += st.pack_bytes_read;
		res->files = st.files;
		res->content_bytes = st.bytes;
		err = publish(ctx, c, key, &eb, p, sel, src, res);
	}
	stg__entry_end(c, &eb);
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
	char pbuf[STG_PATH_MAX + 1];
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (r->type == STG_DIR)
			need += 4096;
		if (r->type != STG_FILE)
			continue;
		uint32_t k = stg__strmap_get(&base->map, stg__rec_path(p, r, pbuf), r->path_len);
		const stg_mfile *f = k == UINT32_MAX ? NULL : &base->files[k];
		if (!f || f->size != r->size || memcmp(f->xxh3, r->xxh3, 16))
			need += (r->size + 4095) / 4096 * 4096;
	}
	return need;
}

/* Rates the choice between a delta and the whole pack assumes: the shared
 * filesystem's (the bandwidth limit if there is one), and what one thread
 * rebuilds locally (read, hash, write); the whole pack's files are written
 * by two. */
#define LINK_RATE  (1024.0 * 1024 * 1024)
#define LOCAL_RATE (1024.0 * 1024 * 1024)

/* Is reading the delta (delta bytes, then rebuild bytes made locally)
 * expected to be faster than reading the pack?  Says why not under
 * --verbose. */
static bool delta_pays(stg_ctx *ctx, stg_cache *c, const stg_pack *p, const char *path,
                       uint64_t delta, uint64_t rebuild)
{
	double link = c->lim.bw.rate > 0 ? c->lim.bw.rate : LINK_RATE;
	double t_delta = (double)delta / link + (double)rebuild / LOCAL_RATE;
	double t_pack = (double)p->size / link + (double)p->t.content_size / (2 * LOCAL_RATE);
	if (t_delta < t_pack)
		return true;
	char a[16], b[16], d[16];
	stg__log(ctx, STG_LOG_DEBUG,
	         "reading the whole pack, not the delta '%s': the delta (%s, then %s of files "
	         "to rebuild here) would take about %.1f s, the pack (%s) about %.1f s",
	         path, stg_format_size(delta, a, sizeof a), stg_format_size(rebuild, b, sizeof b),
	         t_delta, stg_format_size(p->size, d, sizeof d), t_pack);
	return false;
}

/* Build the entry key of pack p from the delta file name (beside src)
 * against the cached entry base.  The base is pinned meanwhile, so that no
 * other process evicts it.  STG_ENOENT (quietly) if the base is not cached
 * after all, or (*declined) if reading the pack is expected to be faster. */
static stg_err build_from_delta(stg_ctx *ctx, stg_cache *c, stg_pack *p, const char *key,
                                const stg_delta_rec *d, const char *src, stg_stage_result *res,
                                bool *declined)
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
	stg_entry_build eb = {.tfd = -1, .dfd = -1};
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
	if ((err = stg__entry_manifest(ctx, c, base, &man)))
		goto out;
	struct stat dst;
	uint64_t need = delta_need(p, &man);
	if (fstat(ds.fd, &dst) == 0 && !delta_pays(ctx, c, p, path, (uint64_t)dst.st_size, need)) {
		*declined = true;
		err = STG_ENOENT;
		goto out;
	}
	if ((err = stg__room_for(ctx, c, need, base)) || (err = stg__entry_begin(ctx, c, key, &eb)))
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
	if ((err = publish(ctx, c, key, &eb, p, NULL, src, res)))
		goto out;
	res->delta = 1;
	memcpy(res->base_digest, d->base, STG_DIGEST_LEN);
	stg__log(ctx, STG_LOG_DEBUG,
	         "built from the delta '%s' against the cached %.12s: %llu files linked, %llu "
	         "copied, %llu patched, %llu whole",
	         path, base, (unsigned long long)st.linked, (unsigned long long)st.copied,
	         (unsigned long long)st.patched, (unsigned long long)st.whole);
out:
	stg__entry_end(c, &eb);
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
		if (o->verify && stg__entry_check(ctx, c, base, true) > 0) {
			stg__log(ctx, STG_LOG_WARN,
			         "%s; the cached %.12s, the base of a delta, is damaged: not using "
			         "it",
			         stg_errmsg(ctx), base);
			continue;
		}
		bool declined = false;
		stg_err err = build_from_delta(ctx, c, p, key, d, src, res, &declined);
		if (err == STG_OK || err == STG_EINTR || err == STG_ENOSPC || err == STG_ENOMEM)
			return err;
		if (declined)
			return STG_ENOENT;
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

static stg_err pack_build(stg_ctx *ctx, stg_cache *c, stg_source *s, const char *key,
                          const stg_stage_opts *o, stg_stage_result *res)
{
	stg_err err = build_from_deltas(ctx, c, s->state, key, s->name, o, res);
	if (err == STG_ENOENT)
		err = build_from_pack(ctx, c, s->state, key, s->name, o, res);
	return err;
}

const stg_source_ops stg__source_pack = {
        .kind = "pack",
        .claims = pack_claims,
        .open = pack_open,
        .read = stg__source_pread,
        .reopen = pack_reopen,
        .build = pack_build,
        .close = pack_close,
        .bare = 1u << STG_EINTR | 1u << STG_ENOSPC | 1u << STG_EEXIST | 1u << STG_ENOMEM,
};
