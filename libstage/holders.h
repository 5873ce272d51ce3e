/*
 * holders.h - who holds the node's shared-FS slots and the cluster's
 * leases (holders.c).
 */
#ifndef STG_HOLDERS_H
#define STG_HOLDERS_H

#include "slots.h"

/* The holders of lim's slots and leases (stg_slot_holders, which cache.c
 * answers for a cache). */
stg_err stg__holders(stg_ctx *ctx, const stg_limits *lim, stg_holder **v, size_t *n);
/* The holders of kind ("node" or "cluster") as one line of text, for a
 * message. */
void stg__holders_text(stg_ctx *ctx, const stg_limits *lim, const char *kind, char *out,
                       size_t len);

#endif
