/*
 * collect_mark.h - the markers a collect keeps in DEST and the sweep of
 * a dead collector's temporaries (collect_mark.c).
 */
#ifndef STG_COLLECT_MARK_H
#define STG_COLLECT_MARK_H

#include "ctx.h"

/* The host name in temporaries' names; the marker a
 * collect keeps in DEST (its name into name; -1 if it cannot), its
 * removal; and the removal of temporaries whose writer is gone (the whole
 * tree under dest, or only dest itself if flat). */
const char *stg__collect_host(void);
int stg__mark_begin(int destfd, char *name, size_t len);
void stg__mark_end(int destfd, const char *name);
void stg__mark_sweep(stg_ctx *ctx, int destfd, const char *dest, bool flat);

#endif
