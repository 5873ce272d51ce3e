/*
 * limit.h - how stager spares the shared filesystem (limit.c): the node's
 * reader slots, the cluster's leases and the rates a cache's operations
 * keep to.  limit.c explains slots and leases.
 */
#ifndef STG_LIMIT_H
#define STG_LIMIT_H

#include "pace.h"

#include <pthread.h>

/* The limits as configured (max_readers_per_node, max_readers_cluster,
 * lease_ttl, slot_wait_max, slot_dir, shared_lock_dir, bwlimit,
 * ops_limit); a cache holds its own (stg_cache.lim). */
typedef struct stg_limits {
	unsigned node_slots, cluster_slots, lease_ttl;
	unsigned slot_wait_max; /* seconds a wait for a slot or lease may last (0: no bound) */
	char *slot_dir, *lease_dir;
	stg_bucket bw, ops; /* bytes/s, metadata operations/s */
	bool ready;
} stg_limits;

/* A held shared-FS slot: a node slot (flock) and a cluster lease. */
typedef struct stg_slot {
	int fd, lease_fd; /* -1: not held (no such limit) */
	char lease[STG_PATH_MAX];
	unsigned ttl;
	bool renewing, stop;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} stg_slot;

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
