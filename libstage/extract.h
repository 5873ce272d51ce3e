/*
 * extract.h - extraction and verification of a pack's content
 * (extract.c), for the sources and collect --pack.
 */
#ifndef STG_EXTRACT_H
#define STG_EXTRACT_H

#include "pack_read.h"

/* stg_verify without the rule on symlinks that leave the destination: a
 * pack of the user's own results (collect --pack) keeps them as they are. */
stg_err stg__verify_content(stg_ctx *ctx, stg_pack *pack);
/* Extract the selected part of a pack into the directory rootfd (which the
 * caller made and owns).  Nothing is renamed or removed on failure.
 * any_link: symlinks may point anywhere (a Python env's, whose interpreter
 * links out of it; nothing is written through a link either way). */
stg_err stg__extract_at(stg_ctx *ctx, stg_pack *pack, int rootfd, const stg_unpack_opts *opts,
                        stg_unpack_stats *stats, bool any_link);

#endif
