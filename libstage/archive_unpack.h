/*
 * archive_unpack.h - an archive that libarchive reads, unpacked into a
 * cache entry under the packs' rules (archive_unpack.c).
 */
#ifndef STG_ARCHIVE_UNPACK_H
#define STG_ARCHIVE_UNPACK_H

#include "source.h"

/* What unpacking found. */
typedef struct stg_unpacked {
	uint8_t sha[32];               /* of the whole archive file */
	uint64_t bytes;                /* read from it, re-reads included */
	uint64_t files, content, disk; /* files, their bytes, bytes on disk */
} stg_unpacked;

/* Unpack the archive src (read through src->ops->read) into dfd, the
 * data/ of the entry being built in tfd, writing tfd's manifest; every
 * byte read or written adds to *progress.  STG_ECORRUPT for a damaged or
 * hostile archive. */
stg_err stg__archive_unpack(stg_ctx *ctx, stg_cache *c, const stg_source *src, int tfd, int dfd,
                            volatile uint64_t *progress, stg_unpacked *out);

#endif
