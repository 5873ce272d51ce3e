/*
 * pack_bases.c - `pack --base OLD`: the older versions a pack is written
 * against, and the delta from each (delta_write.c) written beside the
 * pack as OUT.delta-<the first 16 hex digits of OLD's digest>.
 *
 * The bases are opened before the pack is written, so that a missing or
 * damaged one stops the pack before any work, and the trailer can list
 * each delta by its base's digest (once per digest: the same base named
 * twice gives one delta).  A delta is written, into a temporary beside its
 * final name, once the pack is complete: it is made from the new pack's
 * manifest and the tree it was packed from.  The deltas are renamed into
 * place before the pack, so that a pack that lists them finds them there.
 */
#include "pack_read.h"
#include "pack_bases.h"
#include "ctx.h"
#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void stg__bases_free(stg_bases *b)
{
	for (size_t i = 0; i < b->n; i++) {
		if (b->tmps[i])
			unlink(b->tmps[i]);
		free(b->tmps[i]);
		free(b->paths[i]);
		free(b->name[i]);
		stg_pack_close(b->packs[i]);
	}
	free(b->tmps);
	free(b->paths);
	free(b->name);
	free(b->base);
	free(b->packs);
	free(b->given);
	memset(b, 0, sizeof *b);
}

stg_err stg__bases_open(stg_ctx *ctx, const stg_pack_opts *o, const char *out_path, stg_bases *b)
{
	size_t n = o->n_bases;
	memset(b, 0, sizeof *b);
	b->packs = calloc(n, sizeof *b->packs);
	b->given = calloc(n, sizeof *b->given);
	b->paths = calloc(n, sizeof *b->paths);
	b->tmps = calloc(n, sizeof *b->tmps);
	b->name = calloc(n, sizeof *b->name);
	b->base = calloc(n, sizeof *b->base);
	if (!b->packs || !b->given || !b->paths || !b->tmps || !b->name || !b->base)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	const char *slash = strrchr(out_path, '/');
	const char *name = slash ? slash + 1 : out_path;
	int dir_len = slash ? (int)(slash - out_path) : 1;
	const char *dir = slash ? out_path : ".";
	for (size_t i = 0; i < n; i++) {
		stg_pack *p = NULL;
		stg_err err = stg_pack_open(ctx, o->bases[i], &p);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			return stg__fail(ctx, err, "the base '%s': %s", o->bases[i], msg);
		}
		bool dup = false;
		for (size_t k = 0; k < b->n; k++)
			dup |= !memcmp(b->base[k], p->t.digest, STG_DIGEST_LEN);
		if (dup) {
			stg_pack_close(p);
			continue;
		}
		size_t k = b->n++;
		b->packs[k] = p;
		b->given[k] = o->bases[i];
		memcpy(b->base[k], p->t.digest, STG_DIGEST_LEN);
		char hex[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(p->t.digest, hex);
		if (strlen(name) + 23 > 255)
			return stg__fail(ctx, STG_EUSAGE,
			                 "the name '%s' is too long to name its deltas after it "
			                 "(at most 232 bytes)",
			                 name);
		if (asprintf(&b->name[k], "%s.delta-%.16s", name, hex) < 0 ||
		    asprintf(&b->paths[k], "%.*s/%s", dir_len, dir, b->name[k]) < 0) {
			b->name[k] = b->paths[k] = NULL;
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
	}
	return STG_OK;
}

stg_err stg__bases_write(stg_ctx *ctx, const char *dir, const char *pack, stg_bases *b,
                         const stg_pack_opts *o)
{
	stg_pack *np = NULL;
	stg_err err = stg_pack_open(ctx, pack, &np);
	for (size_t i = 0; i < b->n && !err; i++) {
		if (!memcmp(b->base[i], np->t.digest, STG_DIGEST_LEN)) {
			stg__log(ctx, STG_LOG_INFO,
			         "the base '%s' is the same pack (the tree has not changed): no "
			         "delta from it",
			         b->given[i]);
			continue;
		}
		int dfd = stg__create_tmp(b->paths[i], "tmp", &b->tmps[i]);
		if (dfd < 0) {
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "cannot create a file beside '%s'", b->paths[i]);
			break;
		}
		stg_delta_info di;
		err = stg_delta_write(ctx, b->packs[i], np, dir, dfd, &di);
		if (!err && o->fsync && fsync(dfd))
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "writing '%s'", b->paths[i]);
		if (close(dfd) && !err)
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "writing '%s'", b->paths[i]);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			stg__fail(ctx, err, "the delta from '%s': %s", b->given[i], msg);
		} else if (o->delta_done) {
			di.name = b->name[i];
			o->delta_done(o->delta_arg, b->given[i], &di);
		}
	}
	stg_pack_close(np);
	return err;
}

stg_err stg__bases_publish(stg_ctx *ctx, stg_bases *b, bool durable)
{
	for (size_t i = 0; i < b->n; i++) {
		if (!b->tmps[i])
			continue; /* no delta from the same pack */
		if (stg__replace(b->tmps[i], b->paths[i], durable)) {
			int e = errno;
			return stg__fail_errno(ctx, STG_EIO, e, "cannot rename into '%s'",
			                       b->paths[i]);
		}
		free(b->tmps[i]);
		b->tmps[i] = NULL;
	}
	return STG_OK;
}
