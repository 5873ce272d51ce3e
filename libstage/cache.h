/*
 * cache.h - the node cache proper: the handle, its entries, locks, owners
 * and pins, space and eviction, building and checking an entry (cache.c,
 * cache_pin.c, cache_evict.c, cache_entry.c).
 * See cache.c for the layout and its invariants.
 */
#ifndef STG_CACHE_H
#define STG_CACHE_H

#include "path.h"
#include "limit.h"
#include "manifest_list.h"

struct stg_cache {
	char *root;
	int rootfd;
	char *cache_max, *min_free; /* settings, resolved against the disk's size */
	unsigned stall_timeout;     /* seconds an archive reader may make no progress */
	unsigned keep_days;         /* days kept results stay (results.c) */
	char *job_tmpdir_var;       /* names the job's own scratch (attach.c) */
	stg_limits lim;             /* sparing the shared FS (limit.c) */
};

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

/* The directory that every user's scratch root shares, from the site's
 * scratch_root (/scratch/stager in /scratch/stager/$USER), into out: 1, or
 * 0 if there is none (no scratch_root, no $USER in it, or not absolute). */
int stg__scratch_parent(const stg_config *cfg, char *out, size_t len);

/* flock locks/<name>; -1/errno if busy (and !wait) or on error.  *waited
 * says whether it had to wait. */
int stg__cache_lock(stg_ctx *ctx, stg_cache *c, const char *name, bool wait, bool *waited);
void stg__cache_unlock(int fd);
/* Remove the lock files nobody holds (one is made per pack staged, per
 * source archive and per collect's DEST, and they would pile up); safe
 * against a process that opened one and waits for it. */
void stg__clean_locks(stg_cache *c);

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
 * cache_max and above min_free; STG_ENOSPC with the figures if they cannot,
 * and with nothing evicted if they could not even with every unpinned
 * entry gone.  The caller holds locks/cache. */
stg_err stg__make_room(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep);
/* The same, taking locks/cache. */
stg_err stg__room_for(stg_ctx *ctx, stg_cache *c, uint64_t need, const char *keep);

/* An entry being built (cache_entry.c): cache/<name>.tmp.<pid>, with its
 * tree in data/. */
typedef struct stg_entry_build {
	char tmp[STG_PATH_MAX]; /* "": published, or removed */
	int tfd, dfd;           /* the entry's directory, and its data/ */
} stg_entry_build;

stg_err stg__entry_begin(stg_ctx *ctx, stg_cache *c, const char *name, stg_entry_build *eb);
/* Write m into the entry and publish it as key, unless key is published
 * already (the same bytes under another name: that one serves). */
stg_err stg__entry_publish(stg_ctx *ctx, stg_cache *c, stg_entry_build *eb, const char *key,
                           const stg_meta *m);
/* Close it, and remove it unless it was published. */
void stg__entry_end(stg_cache *c, stg_entry_build *eb);
/* Check key's files against its manifest: with full, hash every file it
 * names, else their sizes and count (local stats only); 0 all match, 1 a
 * mismatch (named in ctx), -1 no manifest. */
int stg__entry_check(stg_ctx *ctx, stg_cache *c, const char *key, bool full);
stg_err stg__entry_manifest(stg_ctx *ctx, stg_cache *c, const char *key, stg_manifest *m);

#endif
