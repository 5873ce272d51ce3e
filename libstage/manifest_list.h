/*
 * manifest_list.h - a manifest read back, as data: its files (path, size,
 * XXH3-128) and a map from path to index.  manifest.c (the cache floor)
 * reads one; a delta is applied against one (delta_apply.c, codecs), so
 * the type lives below both.
 */
#ifndef STG_MANIFEST_LIST_H
#define STG_MANIFEST_LIST_H

#include "path.h"

/* A manifest read back: its files, and a map from path to index. */
typedef struct stg_mfile {
	char *path;
	uint64_t size;
	uint8_t xxh3[16];
} stg_mfile;
typedef struct stg_manifest {
	stg_mfile *files;
	size_t n;
	stg_strmap map;
} stg_manifest;

#endif
