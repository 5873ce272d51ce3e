/*
 * trailer_types.h - a trailer as data: its frames, entries, delta records
 * and names (trailer.h codes it, trailer_names.h holds its names).
 */
#ifndef STG_TRAILER_TYPES_H
#define STG_TRAILER_TYPES_H

#include "libstage.h"

#include <stddef.h>
#include <stdint.h>

typedef struct stg_frame {
	uint64_t comp_off, comp_size;
	uint64_t raw_off, raw_size;
	uint8_t xxh3[16]; /* of the compressed bytes, canonical (format 3; zero before) */
} stg_frame;

typedef struct stg_rec {
	uint64_t tar_off, data_off, size;
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t mode;
	/* into names: the entry's base name (its whole path when dir is 0),
	 * a NUL, its link target, a NUL */
	uint64_t path_off;
	uint32_t path_len, link_len; /* of its whole path; of its link target */
	uint32_t dir;                /* its directory in dirs (0: the root) */
	uint8_t type;
	uint8_t xxh3[16];
} stg_rec;

typedef struct stg_delta_rec {
	uint8_t base[STG_DIGEST_LEN];
	uint64_t name_off;
	uint32_t name_len;
} stg_delta_rec;

/* A directory a decoded manifest names (trailer_names.c): each distinct
 * one once, as its parent and its last component, so that what names
 * cost a reader follows their unique parts, not their decoded length. */
typedef struct stg_dir {
	uint32_t parent;   /* its parent's index; 0, the root, for a top-level one */
	uint32_t name_off; /* its last component: names + name_off, name_len bytes */
	uint16_t name_len;
	uint16_t len; /* of its whole path */
} stg_dir;

/* Everything a trailer says, decoded and checked. */
typedef struct stg_trailer {
	uint64_t data_size, tar_size, content_size;
	uint8_t digest[STG_DIGEST_LEN];
	/* the packed directory's permission bits | STG_ROOT_MODE_SET; 0 when
	 * the pack does not say (version 1) */
	uint32_t root_mode;
	uint32_t version; /* the format version it was read as, or is written as */
	size_t n_frames, n_entries, n_deltas;
	stg_frame *frames;
	stg_rec *recs;
	stg_delta_rec *deltas;
	/* names, with a NUL after every base name, link and delta name so
	 * that they can be handed out as C strings.  A writer's trailer holds
	 * whole paths (every dir 0); a decoded one each directory once, in
	 * dirs, and each entry's base name (trailer_names.h) */
	char *names;
	size_t names_len;
	stg_dir *dirs; /* dirs[0] is the root; NULL in a writer's trailer */
	size_t n_dirs;
	uint32_t *dir_slots; /* (parent, name) -> index: a hash of n_dirs' power-of-two cap */
	size_t dir_cap;
} stg_trailer;

#endif
