/*
 * cache.h - what the cache modules (cache.c, stage.c, source.c, clean.c)
 * share.  See cache.c for the layout and its invariants.
 */
#ifndef STG_CACHE_H
#define STG_CACHE_H

#include "delta.h" /* for stage.c, which applies deltas */
#include "internal.h"
#include "pace.h"
#include "walk.h"

#include <pthread.h>
#include <sys/stat.h>

struct stg_cache {
	char *root;
	int rootfd;
	char *cache_max, *min_free; /* settings, resolved against the disk's size */
	unsigned stall_timeout;     /* seconds an archive reader may make no progress */
	unsigned keep_days;         /* days kept results stay (results.c) */
	char *job_tmpdir_var;       /* names the job's own scratch (stage.c) */
	/* sparing the shared FS (limit.c) */
	unsigned node_slots, cluster_slots, lease_ttl;
	unsigned slot_wait_max; /* seconds a wait for a slot or lease may last (0: no bound) */
	char *slot_dir, *lease_dir;
	stg_bucket bw, ops; /* bytes/s, metadata operations/s */
	bool limits_ready;
};

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

stg_err stg__limits_init(stg_ctx *ctx, stg_cache *c, const stg_config *cfg);
void stg__limits_free(stg_cache *c);
/* Wait for a node slot and a cluster lease (as configured); STG_EINTR if
 * cancelled.  Without a usable slot directory it warns and goes on. */
stg_err stg__slot_acquire(stg_ctx *ctx, stg_cache *c, stg_slot *s);
/* The same, but waiting only until deadline (stg__now() time; 0: no
 * limit): then without a slot, with a warning. */
stg_err stg__slot_acquire_by(stg_ctx *ctx, stg_cache *c, stg_slot *s, double deadline);
void stg__slot_release(stg_slot *s);
/* The holders of kind ("node" or "cluster") as one line of text, for a
 * message (holders.c). */
void stg__holders_text(stg_ctx *ctx, stg_cache *c, const char *kind, char *out, size_t len);

/* results.c: call fn for each SRC and DEST of owner's record (-1/errno if
 * there is none, or it is malformed; else fn's first non-zero return);
 * the epoch of a kept name (0: not one); remove a kept entry. */
int stg__results_each(stg_cache *c, const char *owner,
                      int (*fn)(void *arg, const char *src, const char *dest), void *arg);
int64_t stg__kept_epoch(const char *name);
int stg__kept_remove(stg_cache *c, const char *name);

/* Entry description (cache/<key>/meta). */
typedef struct stg_meta {
	char kind[16];
	char source[STG_PATH_MAX + 1];
	uint64_t size; /* bytes on disk, estimated */
	uint64_t files;
	uint64_t content; /* bytes of file content */
	int64_t last_use; /* mtime of meta */
} stg_meta;

typedef struct stg_lru {
	char key[STG_DIGEST_HEXLEN + 18];
	uint64_t size;
	int64_t last_use;
} stg_lru;

typedef struct stg_space {
	uint64_t fs_size, fs_free, fs_files_free;
	uint64_t cache_max, min_free;
} stg_space;

/* Liveness answers, asked once per operation. */
typedef struct stg_owner_cache {
	char name[64][160];
	bool alive[64];
	size_t n;
} stg_owner_cache;

/* flock locks/<name>; -1/errno if busy (and !wait) or on error.  *waited
 * says whether it had to wait. */
int stg__cache_lock(stg_ctx *ctx, stg_cache *c, const char *name, bool wait, bool *waited);
void stg__cache_unlock(int fd);

char *stg__default_owner(void);
bool stg__owner_alive(stg_owner_cache *oc, const char *owner);

bool stg__key_ok(const char *key);
bool stg__entry_exists(stg_cache *c, const char *key);
void stg__entry_touch(stg_cache *c, const char *key);
int stg__meta_write(int dirfd, const stg_meta *m);
int stg__meta_read(stg_cache *c, const char *key, stg_meta *m);
/* Remove a published entry; the caller holds locks/cache. */
int stg__entry_remove(stg_cache *c, const char *key);

/* Pin key for owner: 0 pinned, 1 it was already, -1/errno. */
int stg__pin(stg_cache *c, const char *key, const char *owner);
/* Drop owner's pin of key (the caller holds locks/cache). */
void stg__unpin_key(stg_cache *c, const char *key, const char *owner);
size_t stg__pins_list(stg_cache *c, const char *key, char (*owners)[160], size_t max);
bool stg__entry_pinned(stg_cache *c, const char *key, stg_owner_cache *oc);

/* Published entries, least recently used first (malloc'ed). */
size_t stg__entries(stg_cache *c, stg_lru **out);
stg_err stg__space(stg_ctx *ctx, stg_cache *c, stg_space *sp);
/* Evict unpinned entries, oldest first, until need more bytes fit under
 * cache_max and above min_free; STG_ENOSPC with the figures if they cannot.
 * The caller holds locks/cache. */
stg_err stg__make_room(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep);

/* The source index. */
typedef struct stg_ident {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
} stg_ident;

void stg__ident_of(const struct stat *st, stg_ident *id);
/* The digest (hex) indexed for an identity; 0 found, -1 not. */
int stg__index_get(stg_cache *c, const stg_ident *id, char hex[STG_DIGEST_HEXLEN + 1]);
int stg__index_put(stg_ctx *ctx, stg_cache *c, const stg_ident *id, const char *hex,
                   const char *path);

/* An entry put at its destination, pinned (attach.c); STG_ENOENT if it
 * was evicted meanwhile.  The leftovers of dead builders of key. */
stg_err stg__attach(stg_ctx *ctx, stg_cache *c, const char *key, const char *src,
                    const stg_stage_opts *o, const char *owner, stg_stage_result *res);
void stg__remove_leftovers(stg_cache *c, const char *key);
/* Staging (stage.c, source.c). */
int stg__verify_entry(stg_ctx *ctx, stg_cache *c, const char *key);
stg_err stg__stage_archive(stg_ctx *ctx, stg_cache *c, int fd, const char *src, const stg_ident *id,
                           const stg_stage_opts *o, const char *owner, stg_stage_result *res);
stg_err stg__stage_dir(stg_ctx *ctx, stg_cache *c, const char *src, const stg_stage_opts *o,
                       const char *owner, stg_stage_result *res);

#endif
