/*
 * trailer.h - the pack format (FORMAT.md) as data: its constants, a
 * trailer's frames, entries and deltas, and their codec (trailer.c).
 */
#ifndef STG_TRAILER_H
#define STG_TRAILER_H

#include "ctx.h"
#include "trailer_types.h"

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
