/*
 * trailer_names.h - a decoded manifest's names (trailer_names.c): each
 * directory once (stg_dir: its parent, its last component) and each entry
 * its directory and base name, so that a pack of long paths in a deep tree
 * costs its readers the unique parts of its names, not their length.  The
 * table is made once, as the trailer is decoded, and never changes after:
 * threads read it without locks.  Whole paths are built on demand into a
 * buffer the caller owns.
 */
#ifndef STG_TRAILER_NAMES_H
#define STG_TRAILER_NAMES_H

#include "path.h"
#include "trailer_types.h"

/* The table as it is made, one entry at a time (the decoder's). */
typedef struct stg_names_in {
	char prev[STG_PATH_MAX + 1]; /* the last entry's directory */
	size_t prev_len;
	uint32_t prev_dir;
	size_t names_cap, dirs_cap;
	size_t names_max; /* the most names may take */
	uint64_t other;   /* what the trailer takes besides its names */
	uint64_t mem_max; /* the most it may take in all */
} stg_names_in;

/* Ready t (names, dirs) for entries of names_max bytes of names at most,
 * the whole trailer to take at most mem_max bytes, other of them for its
 * records; -1 out of memory. */
int stg__names_begin(stg_trailer *t, stg_names_in *s, size_t names_max, uint64_t other,
                     uint64_t mem_max);
/* What the trailer takes so far: its records, names and directories. */
uint64_t stg__names_mem(const stg_trailer *t, const stg_names_in *s);
/* Place r's path (path_len bytes, checked by the caller) and link target:
 * sets r->dir and r->path_off.  0; -1 out of memory; -2 when a new
 * directory would make the trailer take more than mem_max. */
int stg__names_put(stg_trailer *t, stg_names_in *s, stg_rec *r, const char *path, const char *link);
/* A delta record's name: sets d->name_off; 0 or -1. */
int stg__names_put_delta(stg_trailer *t, stg_names_in *s, stg_delta_rec *d, const char *name);
/* What the directory table takes in memory. */
uint64_t stg__names_dirs_mem(size_t n_dirs, size_t dir_cap);
/* The most a reader's directory table for t (a writer's: whole paths)
 * takes: each directory a path enters that the one before did not
 * counted once, without a map. */
uint64_t stg__names_dirs_bound(const stg_trailer *t);

/* A writer's trailer (whole paths) as a decoded one: names, dirs and
 * dir_slots newly allocated (the old names stay the caller's); 0 or -1
 * (tests). */
int stg__trailer_index(stg_trailer *t);

/* The length of r's base name (its last component; its whole path in a
 * writer's trailer). */
static inline uint32_t stg__rec_base_len(const stg_trailer *t, const stg_rec *r)
{
	return r->dir ? r->path_len - t->dirs[r->dir].len - 1 : r->path_len;
}

/* r's whole path: in names when it has no directory, else built into buf
 * (STG_PATH_MAX + 1 bytes).  Valid while both are. */
const char *stg__trailer_path(const stg_trailer *t, const stg_rec *r, char *buf);
/* r's link target (NUL-terminated, in names), or NULL. */
const char *stg__trailer_link(const stg_trailer *t, const stg_rec *r);
/* Directory d's path into buf (STG_PATH_MAX + 1 bytes, NUL-terminated);
 * its length. */
size_t stg__trailer_dir_path(const stg_trailer *t, uint32_t d, char *buf);
/* The directory path[0, len) names ("" is the root, 0), or UINT32_MAX. */
uint32_t stg__trailer_dir_find(const stg_trailer *t, const char *path, size_t len);
/* The child of directory parent named name[0, len), or UINT32_MAX. */
uint32_t stg__trailer_dir_child(const stg_trailer *t, uint32_t parent, const char *name,
                                size_t len);

/* A map from an entry's path to a value, keyed by its directory and base
 * name (no whole path is kept): 8 bytes a slot. */
typedef struct stg_recmap {
	const stg_trailer *t;
	size_t cap, count;
	struct stg_recslot {
		uint32_t rec; /* the entry whose path is the key, + 1 (0: empty) */
		uint32_t val;
	} * slots;
} stg_recmap;

int stg__recmap_init(stg_recmap *m, const stg_trailer *t, size_t expected);
void stg__recmap_free(stg_recmap *m);
/* Insert entry i's path with val: 1 inserted, 0 present (*had its value,
 * when had is not NULL), -1 out of memory. */
int stg__recmap_put(stg_recmap *m, uint32_t i, uint32_t val, uint32_t *had);
/* Replace the value of entry i's path, or insert it; 0 or -1. */
int stg__recmap_set(stg_recmap *m, uint32_t i, uint32_t val);
/* The value of entry i's path / of path[0, len), or UINT32_MAX. */
uint32_t stg__recmap_get_rec(const stg_recmap *m, uint32_t i);
uint32_t stg__recmap_get(const stg_recmap *m, const char *path, size_t len);

#endif
