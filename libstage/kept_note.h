/*
 * kept_note.h - notes of kept results in the user's home (kept_note.c).
 */
#ifndef STG_KEPT_NOTE_H
#define STG_KEPT_NOTE_H

#include "ctx.h"

/* The note in the user's home of results kept on this node
 * under name (written when they are kept, dropped when they go). */
void stg__kept_note_write(stg_ctx *ctx, const char *name, const char *path, const char *dest,
                          uint64_t bytes);
void stg__kept_note_drop(const char *name);

#endif
