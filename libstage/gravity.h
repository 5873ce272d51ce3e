/*
 * gravity.h - Slurm node features for cached packs (gravity.c).
 */
#ifndef STG_GRAVITY_H
#define STG_GRAVITY_H

#include "libstage.h"

#include <stddef.h>
#include <stdint.h>

#define STG_FEATURE_PREFIX "stg_"
#define STG_FEATURE_LEN    16 /* "stg_" and 12 hex digits */

/* The feature that names user uid's cached copy of the pack digest. */
void stg_node_feature(unsigned uid, const uint8_t digest[STG_DIGEST_LEN],
                      char out[STG_FEATURE_LEN + 1]);
/* Is name (len bytes) a feature of stager's (one the site did not set)? */
int stg_feature_ours(const char *name, size_t len);
/* The nodes of `sinfo -h -N -o '%N|%f'` output that have feature, comma
 * separated, each once, into out (cut short rather than overrun);
 * returns how many. */
size_t stg_nodes_with(const char *sinfo, const char *feature, char *out, size_t out_len);

/* The features of the whole packs info's cache holds, for user uid: at
 * most max, most recently used first, into out (and their last use into
 * last_use, may be NULL); returns how many. */
size_t stg_cache_features(const stg_cache_info *info, unsigned uid, size_t max,
                          char (*out)[STG_FEATURE_LEN + 1], int64_t *last_use);

#endif
