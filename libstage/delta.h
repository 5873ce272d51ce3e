/*
 * delta.h - deltas between pack versions as the cache applies them
 * (delta_apply.c).  delta_write.c explains what a delta holds,
 * delta_apply.c why it is trusted; the file format is delta_file.c's.
 */
#ifndef STG_DELTA_H
#define STG_DELTA_H

#include "manifest_list.h"
#include "pace.h"

/* Where a delta's bytes are. */
typedef struct stg_delta_src {
	int fd; /* -1: the bytes are in mem */
	const uint8_t *mem;
	size_t len;
	stg_bucket *bw; /* reads charged to this rate limit (NULL: none) */
	stg_ctx *bw_ctx;
} stg_delta_src;

typedef struct stg_delta_stats {
	uint64_t bytes_read;     /* of the delta */
	uint64_t linked, copied; /* files taken from the base */
	uint64_t patched, whole; /* files made from the delta */
} stg_delta_stats;

/* Build target's tree in outfd (an empty directory) from the delta in src
 * and the base entry's files under basefd, whose manifest is base.  Every
 * file is checked against target's manifest; STG_ECORRUPT if the delta is
 * damaged, for another pair, or does not rebuild the tree.  What was built
 * is left for the caller to remove on failure. */
stg_err stg__delta_apply(stg_ctx *ctx, const stg_delta_src *src, const stg_pack *target,
                         const uint8_t base_digest[STG_DIGEST_LEN], const stg_manifest *base,
                         int basefd, int outfd, stg_delta_stats *st);

#endif
