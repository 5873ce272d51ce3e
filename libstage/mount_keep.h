/*
 * mount_keep.h - `mount --cache` (mount_keep.c): a mount's frames kept in
 * the node cache, and its pins.
 */
#ifndef STG_MOUNT_KEEP_H
#define STG_MOUNT_KEEP_H

#include "mount_state.h"
#include "trailer.h"

/* drop m's pin of key, taking the cache's lock only if the
 * pin is still there (clean, which holds the lock, may have dropped it). */
void stg__mount_unpin(stg_mount *m, const char *key);
/* the frames of m's pack mp kept in the node cache (--cache; mp->keep
 * stays NULL for a pack whose frames cannot be checked alone); its frame i
 * read from there (0, or -1 if not kept), kept there (when room can be
 * made), and let go of. */
stg_err stg__keep_open(stg_ctx *ctx, stg_mount *m, stg_mpack *mp);
int stg__keep_get(stg_keep *k, const stg_frame *f, size_t i, uint8_t *buf);
void stg__keep_put(stg_mount *m, stg_mpack *mp, const stg_frame *f, size_t i, const uint8_t *buf);
void stg__keep_close(stg_mount *m, stg_mpack *mp, stg_keep *k);

#endif
