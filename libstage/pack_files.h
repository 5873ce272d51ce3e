/*
 * pack_files.h - the pack writer's file reader (pack_files.c): the files
 * of a walked tree read and hashed in pack order on a thread of their
 * own, handed to the writer in pieces.
 */
#ifndef STG_PACK_FILES_H
#define STG_PACK_FILES_H

#include "trailer.h"

typedef struct stg_filer stg_filer;

/* Start reading the regular files of t's records (those with data), by
 * their paths under rootfd, each one's XXH3-128 into its record.  t's
 * records and names must not move until stg__filer_stop. */
stg_err stg__filer_start(stg_ctx *ctx, int rootfd, stg_trailer *t, stg_filer **out);
/* The next piece of entry i's data (the writer asks for every piece of a
 * file in turn, the files in pack order): *p and *n, valid until the next
 * call; *last on the file's last piece, when its record holds its hash.
 * An error says why the file could not be read whole, on ctx. */
stg_err stg__filer_next(stg_filer *f, size_t i, const uint8_t **p, size_t *n, bool *last);
/* Stop reading, wait for the thread, free f (NULL: nothing). */
void stg__filer_stop(stg_filer *f);

#endif
