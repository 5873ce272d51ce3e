/*
 * pack_bases.h - the older versions a pack is written against (`pack
 * --base`), and the delta from each that is written beside it
 * (pack_bases.c).
 */
#ifndef STG_PACK_BASES_H
#define STG_PACK_BASES_H

#include "ctx.h"

/* The bases of a pack: opened, with the names and paths of their deltas. */
typedef struct stg_bases {
	size_t n;
	uint8_t (*base)[STG_DIGEST_LEN]; /* their digests: the trailer lists them */
	char **name;                     /* their deltas' names, for the trailer too */
	stg_pack **packs;
	const char **given; /* as the caller named them */
	char **paths;       /* where each delta goes */
	char **tmps;        /* the temporary file each is written to */
} stg_bases;

/* Open each of o's bases (once per digest) and name its delta beside
 * out_path. */
stg_err stg__bases_open(stg_ctx *ctx, const stg_pack_opts *o, const char *out_path, stg_bases *b);
/* Write each base's delta into a temporary file beside its final path;
 * pack is the new pack, complete, packed from dir. */
stg_err stg__bases_write(stg_ctx *ctx, const char *dir, const char *pack, stg_bases *b,
                         const stg_pack_opts *o);
/* Rename the deltas into place (durable: fsync'ed). */
stg_err stg__bases_publish(stg_ctx *ctx, stg_bases *b, bool durable);
/* Close the bases and remove the temporaries not renamed. */
void stg__bases_free(stg_bases *b);

#endif
