/*
 * xfer_index.h - the stat-keyed index of a transfer's end (xfer_index.c):
 * which XXH3-128 a file had when stager last read (or wrote) it, keyed by
 * what changes whenever its bytes can: inode, size, mtime and ctime.
 */
#ifndef STG_XFER_INDEX_H
#define STG_XFER_INDEX_H

#include "ctx.h"
#include "path.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* An index as loaded: its entries point into buf. */
typedef struct xidx_ent {
	uint64_t ino, size;
	int64_t mtime_ns, ctime_ns;
	uint32_t mode;
	const uint8_t *hash; /* 16 bytes */
	const char *path;
	uint16_t plen;
} xidx_ent;

typedef struct stg_xindex {
	uint8_t *buf;
	xidx_ent *v;
	size_t n;
	stg_strmap map;
	bool map_ok;
	uint64_t dev;
} stg_xindex;

/* A new index being written: entries appended, then saved whole. */
typedef struct stg_xindex_out {
	uint8_t *buf;
	size_t len, cap;
	uint64_t n, dev, root_ino;
	int64_t bound_ns; /* a file changed at or after this is not entered */
	bool full;        /* past the size bound: the rest is left out */
} stg_xindex_out;

/* Load the index name under dirfd for a tree on device dev whose root is
 * inode root_ino.  Never fails: an index that is absent, not a regular
 * file of the user's with one link, over the size bound, damaged (its
 * checksum), or of another device or root, loads empty.  why (may be
 * NULL) gets a word on why it was ignored ("" if loaded or absent). */
void stg__xindex_load(stg_xindex *x, int dirfd, const char *name, uint64_t dev, uint64_t root_ino,
                      const char **why);
void stg__xindex_free(stg_xindex *x);
/* Does the index vouch for the file at path whose stat (lstat, or fstat
 * of it) is st?  Then *hash is its XXH3-128 (pointing into the index). */
bool stg__xindex_vouch(const stg_xindex *x, const char *path, const struct stat *st,
                       const uint8_t **hash);

/* A lower bound of the filesystem's clock (ns since the epoch) that is
 * sound now: the mtime a touch of fd (a file of the user's on the same
 * device, or -1) just got, else this host's coarse clock if dev is a local
 * filesystem (its timestamps come from that clock), else INT64_MIN. */
int64_t stg__xindex_now(int fd, uint64_t dev);

void stg__xindex_begin(stg_xindex_out *o, uint64_t dev, uint64_t root_ino, int64_t bound_ns);
/* Enter a file whose bytes were found to have hash while its stat was st
 * (and is still: the caller checked).  Left out, silently: not a regular
 * file, on another device, or changed at or after the bound (racy: a
 * change within the same timestamp tick would not show) unless vouched
 * (the old index vouched for st: its entry was admitted before). */
void stg__xindex_add(stg_xindex_out *o, const char *path, const struct stat *st,
                     const uint8_t hash[16], bool vouched);
/* Write it to name under dirfd (through tmp, O_EXCL, then renamed; mode
 * 0600).  0, or -1/errno: the caller says so and goes on (an index is
 * only a cache).  Frees o's buffer either way. */
int stg__xindex_save(stg_xindex_out *o, int dirfd, const char *name, const char *tmp);
void stg__xindex_out_free(stg_xindex_out *o);

static inline int64_t stg__ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

#endif
