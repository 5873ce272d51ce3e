/*
 * slots.h - how the shared filesystem is spared, as data: the limits as
 * configured (stg_limits) and a slot held (stg_slot).  Taken by limit.c,
 * which acquires slots and leases, and by holders.c, which says who holds
 * them (limit.c calls holders.c, never the other way).
 */
#ifndef STG_SLOTS_H
#define STG_SLOTS_H

#include "pace.h"
#include "path.h"

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

#endif
