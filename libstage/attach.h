/*
 * attach.h - a cache entry at its destination (attach.c): the index of
 * source identities, DEST, the link or private copy, the pin; and the
 * leftovers of dead builders.
 */
#ifndef STG_ATTACH_H
#define STG_ATTACH_H

#include "cache.h"

#include <sys/stat.h>

/* A file's identity: what the index maps to its digest. */
typedef struct stg_ident {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
} stg_ident;

void stg__ident_of(const struct stat *st, stg_ident *id);
/* The digest (hex) indexed for an identity; 0 found, -1 not. */
int stg__index_get(stg_cache *c, const stg_ident *id, char hex[STG_DIGEST_HEXLEN + 1]);
int stg__index_put(stg_ctx *ctx, stg_cache *c, const stg_ident *id, const char *hex,
                   const char *path);

/* An entry put at its destination, pinned; STG_ENOENT if it was evicted
 * meanwhile. */
stg_err stg__attach(stg_ctx *ctx, stg_cache *c, const char *key, const char *src,
                    const stg_stage_opts *o, const char *owner, stg_stage_result *res);
/* Remove the builds of name left by dead builders (the caller holds its
 * lock). */
void stg__remove_leftovers(stg_cache *c, const char *name);

#endif
