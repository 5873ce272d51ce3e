/*
 * collect.h - what others ask of collect.c: whether a collect brought SRC
 * to DEST whole.  collect.c explains collect; its parts have headers of
 * their own (collect_state.h, collect_record.h, collect_send.h).
 */
#ifndef STG_COLLECT_H
#define STG_COLLECT_H

#include "cache.h"

/* After a job (clean.c): is all of src on dest, as the record of the
 * collects from src to dest says (identities only, no shared-FS access)?
 * 1 yes; 0 no, no record, or a collect holds it. */
int stg__collect_whole(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest, bool pack);
#endif
