/*
 * path.h - path-confinement rules, glob matching and the string map
 * (path.c).
 */
#ifndef STG_PATH_H
#define STG_PATH_H

#include "libstage.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define STG_PATH_MAX 4095 /* the longest path in a pack, a manifest, a record */

/* A clean relative path: not empty, not absolute, no "", "." or ".."
 * components, no NUL, at most STG_PATH_MAX bytes. */
bool stg__path_ok(const char *path, size_t len);
/* Does a symlink at link_path with this target stay inside the tree, given
 * is_symlink(prefix) to tell which paths of the tree are symlinks?  Targets
 * that are absolute, climb above the root, or pass through another symlink
 * are refused. */
bool stg__symlink_ok(const char *link_path, const char *target,
                     bool (*is_symlink)(void *arg, const char *path, size_t len), void *arg);
/* Does path match a pattern: fnmatch on the whole path, or the pattern names
 * one of its parent directories. */
bool stg__path_match(const char *pattern, const char *path);

/* A hash set of strings. */

/* 16 bytes a slot: a map of a million paths is 32 MiB of slots */
typedef struct stg_strslot {
	const char *key; /* NULL: empty */
	uint32_t val;
	uint32_t lentag; /* the key's length (low STG_STRMAP_LEN_BITS bits), then
	                  * the top bits of its hash */
} stg_strslot;
#define STG_STRMAP_LEN_BITS 20 /* keys are shorter than 1 MiB */

typedef struct stg_strmap {
	size_t cap, count;
	stg_strslot *slots;
} stg_strmap;

int stg__strmap_init(stg_strmap *m, size_t expected);
void stg__strmap_free(stg_strmap *m);
/* Insert (key, val); key is not copied.  Returns 1 inserted, 0 present,
 * -1 out of memory (or a key of 1 MiB or more). */
int stg__strmap_put(stg_strmap *m, const char *key, size_t len, uint32_t val);
/* Insert, or replace the value of an existing key; 0, or -1 OOM. */
int stg__strmap_set(stg_strmap *m, const char *key, size_t len, uint32_t val);
/* Value of key, or UINT32_MAX. */
uint32_t stg__strmap_get(const stg_strmap *m, const char *key, size_t len);

#endif
