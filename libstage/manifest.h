/*
 * manifest.h - a cache entry's manifest (manifest.c): written from a
 * pack, checked against a tree, read back; escaped paths.
 */
#ifndef STG_MANIFEST_H
#define STG_MANIFEST_H

#include "pack_read.h"
#include "manifest_list.h"

/* The manifest of a cache entry (manifest.c): one line per regular file,
 * "<xxh3 hex> <size> <path, escaped>".  Written into dirfd as "manifest". */
int stg__manifest_write(int dirfd, const stg_pack *p, const bool *sel);

/* Check the files under datafd against a manifest: 0 match, 1 mismatch
 * (named on ctx), -1 unreadable manifest. */
int stg__manifest_check(stg_ctx *ctx, FILE *manifest, int datafd);
/* The cheap check of a warm entry: every file the manifest names is there
 * with its size, and no more files (local stats only); as above. */
int stg__manifest_quick(stg_ctx *ctx, FILE *manifest, int datafd);
void stg__manifest_line(FILE *f, const uint8_t xxh3[16], uint64_t size, const char *path);
/* fclose of a manifest written with stg__manifest_line: -1 (errno set) if
 * any write failed, also one whose error stdio kept to itself. */
int stg__manifest_close(FILE *f);
/* A path with '\\' and newline escaped, and back (false if malformed). */
void stg__put_escaped(FILE *f, const char *path);
bool stg__unescape(char *s);

/* 0, or -1/errno (EINVAL: a malformed line). */
int stg__manifest_load(FILE *f, stg_manifest *m);
void stg__manifest_free(stg_manifest *m);

#endif
