/*
 * trailer.h - the pack format (FORMAT.md) as data: its constants, a
 * trailer's frames, entries and deltas, and their codec (trailer.c).
 */
#ifndef STG_TRAILER_H
#define STG_TRAILER_H

#include "ctx.h"

#define STG_FORMAT_VERSION                                                                         \
	3                      /* 2: the packed directory's mode in the body;                      \
	                          3: each frame's XXH3-128 in the frame table */
#define STG_FORMAT_OLDEST    1 /* the oldest version read */
#define STG_ROOT_MODE_SET    0x10000u
#define STG_SKIP_MAGIC       0x184D2A57u /* zstd skippable frame, variant 7 */
#define STG_FOOTER_SIZE      48
#define STG_FOOTER_MAGIC     "STGPACK\x01"
#define STG_BODY_MAGIC       "STGT"
#define STG_BODY_HEADER_SIZE 96
#define STG_FRAME_REC_SIZE   48 /* 32 before format 3: no XXH3-128 */
#define STG_FRAME_REC_SIZE_2 32
#define STG_ENTRY_REC_SIZE   80
#define STG_DELTA_REC_SIZE   48
#define STG_FRAME_RAW_MAX    (64u << 20)         /* largest frame a reader accepts */
#define STG_BODY_RAW_MAX     ((uint64_t)2 << 30) /* largest decoded trailer */
#define STG_TAIL_READ        (1u << 20)          /* first read at the end of a pack */
/* What a pack's manifest may make a reader allocate once decoded: 256 MiB,
 * or 64 times the pack's own size if more.  A real dataset's pack is
 * seldom even 16 times smaller than its manifest (each entry has a tar
 * header in the data, and a file its content and an XXH3 that does not
 * compress: a million empty files with sequential names of 54 bytes pack
 * into 8.4 MB and need 137 MiB); a crafted one of 4.4 MB can declare 2 GiB
 * of names. */
#define STG_MANIFEST_MEM_FLOOR ((uint64_t)256 << 20)
#define STG_MANIFEST_MEM_RATIO 64

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

void stg__trailer_free(stg_trailer *t);

/* Encode t into a complete trailer frame (skippable header, compressed body,
 * footer).  *out is malloc'ed. */
stg_err stg__trailer_encode(stg_ctx *ctx, const stg_trailer *t, int level, uint8_t **out,
                            size_t *out_len);

/*
 * Decode a trailer.  tail holds the last tail_len bytes of a file of
 * file_size bytes.  If the trailer begins before tail, returns STG_OK with
 * *need set to the number of bytes from the end that must be supplied;
 * otherwise *need is 0 and t is filled.  Every count and offset is checked
 * against the file size before anything is allocated.
 */
stg_err stg__trailer_decode(stg_ctx *ctx, const uint8_t *tail, size_t tail_len, uint64_t file_size,
                            stg_trailer *t, size_t *need);

/* The most a trailer with these counts and name bytes takes in memory
 * once decoded, but for its directory table (its records, and its names
 * with their NULs: a reader keeps each directory's name once, so never
 * more): the bound checked from the header, before any name is read.
 * The directory table is counted as it is made (trailer_names.h), and a
 * writer counts the most it can take (stg__names_dirs_bound). */
uint64_t stg__trailer_mem(uint64_t n_frames, uint64_t n_entries, uint64_t n_deltas,
                          uint64_t names_size);
/* The most that a pack of file_size bytes may make a reader allocate for
 * its manifest. */
uint64_t stg__trailer_mem_max(uint64_t file_size);

/* Frame that holds tar offset off (t->n_frames if none). */
size_t stg__frame_of(const stg_trailer *t, uint64_t off);

#endif
