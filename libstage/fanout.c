/*
 * fanout.c - one node reads a pack from the shared filesystem for the
 * whole allocation: stg_copy_pack puts a checked copy on local scratch,
 * which the tool hands to Slurm's sbcast; every node then stages from its
 * copy (stg_stage_opts.from_copy), which the pack source (source_pack.c)
 * checks again before trusting.
 */
#include "pack_read.h"
#include "cache.h"
#include "ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (4u << 20)

/* Copy size bytes from s to d, the first hashed bytes into sha, reads
 * charged to the bandwidth limit. */
static stg_err copy_hashing(stg_ctx *ctx, stg_cache *c, int s, int d, uint64_t size,
                            uint64_t hashed, EVP_MD_CTX *sha, const char *src, const char *dst)
{
	uint8_t *buf = stg__io_alloc(COPY_CHUNK);
	if (!buf)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	uint64_t off = 0;
	while (off < size && !err) {
		size_t want = size - off < COPY_CHUNK ? (size_t)(size - off) : COPY_CHUNK;
		stg__bucket_take(ctx, &c->lim.bw, (double)want);
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			break;
		}
		if (stg__pread_full(s, buf, want, off)) {
			err = errno ? stg__fail_errno(ctx, STG_EIO, errno, "reading '%s'", src)
			            : stg__fail(ctx, STG_ECORRUPT, "'%s' is shorter than it was",
			                        src);
			break;
		}
		if (off < hashed)
			EVP_DigestUpdate(sha, buf,
			                 hashed - off < want ? (size_t)(hashed - off) : want);
		for (size_t done = 0; done < want;) {
			ssize_t n = pwrite(d, buf + done, want - done, (off_t)(off + done));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				int e = n < 0 ? errno : EIO;
				err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                      "writing '%s'", dst);
				break;
			}
			done += (size_t)n;
		}
		off += want;
		if (ctx->progress_fn)
			ctx->progress_fn(ctx->progress_arg, "read", off, size);
	}
	free(buf);
	return err;
}

stg_err stg_copy_pack(stg_ctx *ctx, stg_cache *c, const char *src, const char *dst,
                      uint8_t digest[STG_DIGEST_LEN], uint64_t *bytes)
{
	*bytes = 0;
	stg_slot slot = {.fd = -1, .lease_fd = -1};
	stg_pack *p = NULL;
	EVP_MD_CTX *sha = NULL;
	char *tmp = NULL;
	int s = -1, d = -1;
	stg_err err = stg__slot_acquire(ctx, &c->lim, &slot);
	if (err)
		return err;
	if ((s = open(src, O_RDONLY | O_CLOEXEC)) < 0) {
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", src);
		goto out;
	}
	if ((err = stg_pack_open_fd(ctx, s, &p))) {
		char msg[STG_ERRMSG_MAX];
		snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
		err = stg__fail(ctx, err, "'%s': %s", src, msg);
		goto out;
	}
	uint64_t size = p->size;
	/* room on scratch first, evicting unpinned entries if need be */
	int lk = stg__cache_lock(ctx, c, "cache", true, NULL);
	if (lk < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot lock the cache in '%s'",
		                      c->root);
		goto out;
	}
	err = stg__make_room(ctx, c, size, NULL);
	stg__cache_unlock(lk);
	if (err)
		goto out;
	if ((d = stg__create_tmp(dst, "copy", &tmp)) < 0) {
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "cannot create a file beside '%s'", dst);
		goto out;
	}
	posix_fadvise(s, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (!(sha = EVP_MD_CTX_new())) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	if ((err = copy_hashing(ctx, c, s, d, size, p->t.data_size, sha, src, tmp)))
		goto out;
	*bytes = size;
	uint8_t got[STG_DIGEST_LEN];
	unsigned int hl = 0;
	EVP_DigestFinal_ex(sha, got, &hl);
	if (memcmp(got, p->t.digest, STG_DIGEST_LEN)) {
		err = stg__fail(ctx, STG_ECORRUPT, "'%s' is damaged: its SHA-256 does not match",
		                src);
		goto out;
	}
	if (close(d)) {
		d = -1;
		int e = errno;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e, "writing '%s'", dst);
		goto out;
	}
	d = -1;
	if (rename(tmp, dst)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot rename into '%s'", dst);
		goto out;
	}
	memcpy(digest, got, STG_DIGEST_LEN);
	free(tmp);
	tmp = NULL;
out:
	if (sha)
		EVP_MD_CTX_free(sha);
	if (d >= 0)
		close(d);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	stg_pack_close(p);
	if (s >= 0)
		close(s);
	stg__slot_release(&slot);
	return err;
}
