/*
 * xfer_same.c - the receiving end when DEST may already be the tree: its
 * index (".stager-index.NAME" beside DEST, xfer_index.c), and the check
 * that DEST, as it is, is every entry of the manifest and nothing else.
 *
 * A re-push of an unchanged tree then builds nothing: no partial
 * directory, no links, no switch, no old version to remove.  DEST is
 * that tree when the record names it (stager published it and its top
 * level has not changed since), it holds exactly the manifest's paths,
 * each of the same type, mode and mtime (the root's too), symlinks with
 * the same target, hardlinks to the same inode as their target and files
 * with no other links, the same size, and the same XXH3-128: read now, or
 * vouched for by the index (the file's inode, size, mtime, ctime and mode
 * are still those it had when stager last read or wrote it; --checksum
 * reads every one).  The manifest is checked against the sender's SHA-256
 * as always.
 *
 * The index is written after every publish, from a walk of the new DEST:
 * every file there was checked in that transfer (received, read, or
 * vouched for), and a file enters only with the manifest's size, mode and
 * mtime, and a ctime before the moment the walk began (the record touched:
 * the filesystem's own clock), so a write after the check shows.  It is
 * bound to DEST's device and inode: a new version has a new one.
 */
#include "xfer_same.h"
#include "xfer_recv.h"
#include "ctx.h"
#include "bytes.h"
#include "fsutil.h"
#include "rsjob.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Entries of DEST's walk kept for the plan, at most (about 200 bytes each). */
#define DEST_WALK_KEEP_MAX ((size_t)1 << 20)

static void index_names(const receiver *rc, char *name, char *tmp, size_t len)
{
	snprintf(name, len, ".stager-index.%s", rc->name);
	snprintf(tmp, len, ".stager-tmp-index.%s", rc->name);
}

void stg__recv_index_load(receiver *rc)
{
	struct stat st;
	if (rc->pack || rc->dest < 0 || rc->checksum || fstat(rc->dest, &st))
		return;
	char name[STG_PATH_MAX], tmp[STG_PATH_MAX];
	const char *why;
	index_names(rc, name, tmp, sizeof name);
	stg__xindex_load(&rc->idx, rc->parent, name, (uint64_t)st.st_dev, (uint64_t)st.st_ino,
	                 &why);
	if (*why)
		stg__log(rc->ctx, STG_LOG_INFO, "'%s/%s' was ignored (%s): every file is read",
		         rc->dir, name, why);
}

/* The index's lower bound of the filesystem's clock: the record (a file of
 * the user's beside DEST, locked) touched. */
static int64_t clock_bound(receiver *rc, uint64_t dev)
{
	struct stat st;
	bool ours = rc->rec >= 0 && !fstat(rc->rec, &st) && S_ISREG(st.st_mode) &&
	            st.st_uid == geteuid() && st.st_nlink == 1;
	return stg__xindex_now(ours ? rc->rec : -1, dev);
}

static void index_save(receiver *rc, stg_xindex_out *o)
{
	char name[STG_PATH_MAX], tmp[STG_PATH_MAX];
	index_names(rc, name, tmp, sizeof name);
	if (stg__xindex_save(o, rc->parent, name, tmp))
		stg__log(rc->ctx, STG_LOG_INFO,
		         "cannot write '%s/%s' (%s): the next transfer reads every file", rc->dir,
		         name, strerror(errno));
}

void stg__recv_index_save(receiver *rc)
{
	struct stat rst;
	if (rc->pack || rc->part < 0 || fstat(rc->part, &rst))
		return;
	stg_xindex_out o;
	stg__xindex_begin(&o, (uint64_t)rst.st_dev, (uint64_t)rst.st_ino,
	                  clock_bound(rc, (uint64_t)rst.st_dev));
	stg_walk wk = {.ctx = rc->ctx};
	if (!stg__walk_tree(&wk, rc->part, "")) {
		for (size_t k = 0; k < wk.n; k++) {
			const stg_witem *it = &wk.v[k];
			uint32_t i = stg__strmap_get(&rc->paths, it->path, strlen(it->path));
			const stg_wentry *e = i == UINT32_MAX ? NULL : &rc->r[i].e;
			if (e && e->type == STG_FILE && S_ISREG(it->st.st_mode) &&
			    (uint64_t)it->st.st_size == e->size &&
			    it->st.st_mtim.tv_sec == e->mtime &&
			    it->st.st_mtim.tv_nsec == e->mtime_nsec &&
			    (it->st.st_mode & 07777) == (e->mode & 01777))
				stg__xindex_add(&o, it->path, &it->st, e->xxh3, false);
		}
	}
	stg__walk_free(&wk);
	index_save(rc, &o);
}

/* Does the walked item it stand for e as publish would have made it? */
static bool same_meta(const stg_witem *it, const stg_wentry *e)
{
	const struct stat *st = &it->st;
	bool times = st->st_mtim.tv_sec == e->mtime && st->st_mtim.tv_nsec == e->mtime_nsec;
	switch (e->type) {
	case STG_DIR:
		return S_ISDIR(st->st_mode) && (st->st_mode & 07777) == (e->mode & 01777) && times;
	case STG_SYMLINK:
		return S_ISLNK(st->st_mode) && it->link && !strcmp(it->link, e->link) && times;
	case STG_HARDLINK: return S_ISREG(st->st_mode);
	default:
		return S_ISREG(st->st_mode) && (st->st_mode & 07777) == (e->mode & 01777) &&
		       times && (uint64_t)st->st_size == e->size;
	}
}

/* The manifest's SHA-256, as the sender computed it over its entries. */
static bool digest_ok(receiver *rc)
{
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	if (!sha)
		return false;
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	uint8_t enc[STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1)], d[32];
	for (size_t i = 0; i < rc->n; i++)
		EVP_DigestUpdate(sha, enc, stg__wentry_encode(&rc->r[i].e, enc));
	unsigned dl;
	EVP_DigestFinal_ex(sha, d, &dl);
	EVP_MD_CTX_free(sha);
	return !memcmp(d, rc->digest, 32);
}

/* Is the file of it (e) the bytes e names?  Vouched for, or read. */
static bool same_bytes(receiver *rc, const stg_witem *it, const stg_wentry *e, bool *read)
{
	const uint8_t *h;
	*read = false;
	if (stg__xindex_vouch(&rc->idx, it->path, &it->st, &h))
		return !memcmp(h, e->xxh3, 16);
	struct stat st;
	int fd = stg__recv_open_file(rc->dest, it->path, &st);
	if (fd < 0)
		return false;
	uint8_t hh[16];
	uint64_t size;
	bool same = st.st_ino == it->st.st_ino &&
	            !stg__hash_fd(fd, rc->buf, XFER_BLOCK, hh, &size) && size == e->size &&
	            !memcmp(hh, e->xxh3, 16);
	close(fd);
	*read = true;
	return same;
}

stg_err stg__recv_unchanged(receiver *rc, stg_xfer_result *res, bool *same)
{
	*same = false;
	struct stat rst;
	if (rc->pack || rc->dest < 0 || !rc->by_record || fstat(rc->dest, &rst) ||
	    (rst.st_mode & 07777) != rc->root_mode || rst.st_mtim.tv_sec != rc->root_mtime ||
	    rst.st_mtim.tv_nsec != 0)
		return STG_OK;
	stg_xindex_out o;
	stg__xindex_begin(&o, (uint64_t)rst.st_dev, (uint64_t)rst.st_ino,
	                  clock_bound(rc, (uint64_t)rst.st_dev));
	stg_walk wk = {.ctx = rc->ctx};
	uint32_t *at = NULL, *links = NULL;
	bool ok = false, hashed = false;
	stg_err err = STG_OK;
	/* a DEST that cannot be walked is no tree to keep: the transfer
	 * goes on as for any other, and says what it meets */
	if (stg__walk_tree(&wk, rc->dest, ""))
		goto out;
	if (!(at = malloc((rc->n + 1) * sizeof *at)) ||
	    !(links = calloc(rc->n + 1, sizeof *links))) {
		err = stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	/* the shape first (stats only), then the bytes; the walk is kept for
	 * the plan if DEST is not the tree (what it says spares the opens) */
	bool shape = wk.n == rc->n;
	for (size_t i = 0; i < rc->n; i++)
		at[i] = UINT32_MAX;
	for (size_t k = 0; k < wk.n; k++) {
		const stg_witem *it = &wk.v[k];
		uint32_t i = stg__strmap_get(&rc->paths, it->path, strlen(it->path));
		if (i == UINT32_MAX || !same_meta(it, &rc->r[i].e))
			shape = false;
		if (i != UINT32_MAX)
			at[i] = (uint32_t)k;
	}
	if (!shape)
		goto out;
	for (size_t i = 0; i < rc->n; i++) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_HARDLINK)
			continue;
		uint32_t t = stg__strmap_get(&rc->paths, e->link, strlen(e->link));
		if (t == UINT32_MAX || wk.v[at[t]].st.st_ino != wk.v[at[i]].st.st_ino)
			goto out;
		links[t]++;
	}
	for (size_t i = 0; i < rc->n; i++) {
		const stg_wentry *e = &rc->r[i].e;
		const stg_witem *it = &wk.v[at[i]];
		if (e->type == STG_FILE && it->st.st_nlink != 1 + links[i])
			goto out;
	}
	for (size_t i = 0; i < rc->n; i++) {
		const stg_wentry *e = &rc->r[i].e;
		const stg_witem *it = &wk.v[at[i]];
		bool read;
		if (e->type != STG_FILE)
			continue;
		if (!same_bytes(rc, it, e, &read))
			goto out;
		hashed |= read;
		rc->hashed += read;
		stg__xindex_add(&o, it->path, &it->st, e->xxh3, !read);
		if (stg__cancelled(rc->ctx)) {
			err = stg__fail(rc->ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
	if (!digest_ok(rc)) {
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "the tree's SHA-256 does not match the sender's; nothing was "
		                "published");
		goto out;
	}
	ok = true;
	for (size_t i = 0; i < rc->n; i++) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type == STG_DIR) {
			res->dirs++;
		} else if (e->type != STG_FILE) {
			res->links++;
		} else {
			res->files++;
			res->reused_files++;
			res->content_bytes = stg__sat_add(res->content_bytes, e->size);
		}
	}
	/* what was read this time is not read the next */
	if (hashed)
		index_save(rc, &o);
out:
	stg__xindex_out_free(&o);
	free(links);
	*same = ok && !err;
	/* kept for the plan only while it is a fraction of what the
	 * manifest holds already */
	if (!*same && !err && at && wk.n <= DEST_WALK_KEEP_MAX) {
		rc->dwalk = wk;
		rc->dat = at;
	} else {
		free(at);
		stg__walk_free(&wk);
	}
	return err;
}

void stg__recv_dest_walk_free(receiver *rc)
{
	if (rc->dat)
		stg__walk_free(&rc->dwalk);
	free(rc->dat);
	rc->dat = NULL;
}
