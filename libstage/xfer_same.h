/*
 * xfer_same.h - the receiving end when DEST may already be the tree
 * (xfer_same.c): its index, and whether DEST is the manifest's tree.
 */
#ifndef STG_XFER_SAME_H
#define STG_XFER_SAME_H

#include "xfer_recv_state.h"

/* rc->idx: the index of DEST (none for --pack, a first transfer, or
 * --checksum). */
void stg__recv_index_load(receiver *rc);
/* Is DEST, as it is, the manifest's tree (*same)?  Only a DEST the record
 * names.  Counts the tree into res when it is. */
stg_err stg__recv_unchanged(receiver *rc, stg_xfer_result *res, bool *same);
/* stg__recv_unchanged keeps its walk of a DEST that is not the tree in
 * rc->dwalk and rc->dat (entry -> item) for the plan; freed here. */
void stg__recv_dest_walk_free(receiver *rc);
/* After a publish: the index of the new DEST (rc->part), beside it. */
void stg__recv_index_save(receiver *rc);

#endif
