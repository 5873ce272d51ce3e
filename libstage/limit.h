/*
 * limit.h - how stager spares the shared filesystem (limit.c): the node's
 * reader slots, the cluster's leases and the rates a cache's operations
 * keep to.  limit.c explains slots and leases.
 */
#ifndef STG_LIMIT_H
#define STG_LIMIT_H

#include "slots.h"

stg_err stg__limits_init(stg_ctx *ctx, stg_limits *lim, const stg_config *cfg);
void stg__limits_free(stg_limits *lim);
/* Wait for a node slot and a cluster lease (as configured); STG_EINTR if
 * cancelled.  Without a usable slot directory it warns and goes on. */
stg_err stg__slot_acquire(stg_ctx *ctx, stg_limits *lim, stg_slot *s);
/* The same, but waiting only until deadline (stg__now() time; 0: no
 * limit): then without a slot, with a warning. */
stg_err stg__slot_acquire_by(stg_ctx *ctx, stg_limits *lim, stg_slot *s, double deadline);
void stg__slot_release(stg_slot *s);

#endif
