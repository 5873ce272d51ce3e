/*
 * mount_slot.h - a mount's shared-filesystem reader slot (mount_slot.c).
 */
#ifndef STG_MOUNT_SLOT_H
#define STG_MOUNT_SLOT_H

#include "mount_state.h"

/* Hold the slot for a fetch (taken if need be, waiting 5 s at most): 0,
 * or an errno for the read that needed it. */
int stg__mslot_take(stg_mount *m);
/* The fetch is over. */
void stg__mslot_done(stg_mount *m);
/* A thread of the serving's: gives the slot back once no fetch has
 * needed it for a second; ends when m->stopping is set. */
void *stg__mslot_keeper(void *arg);

#endif
