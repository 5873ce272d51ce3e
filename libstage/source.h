/*
 * source.h - a dataset source: one interface over its kinds, one file
 * per kind: a pack (source_pack.c), another archive (source_archive.c), a
 * plain directory (source_dir.c); what they share is in source.c.
 *
 * stage.c chooses the kind once, when the source is open, and then works
 * through the interface: the kind says what names the entry (open), reads
 * its bytes by range (read), builds and publishes the entry (build);
 * stage.c does the rest (the index, single flight, attach, the warm
 * check).  Every entry, whatever its kind, is data/ (the tree, read-only),
 * manifest and meta.
 */
#ifndef STG_SOURCE_H
#define STG_SOURCE_H

#include "attach.h"

#include <sys/types.h>

typedef struct stg_source stg_source;

typedef struct stg_source_ops {
	const char *kind; /* "pack", ...: stg_stage_result.kind, an entry's meta kind */
	/* Is s of this kind?  s->st says what it is; a regular file is open
	 * at s->fd.  Asked once, in the order of the table in stage.c. */
	bool (*claims)(const stg_source *s);
	/* Read what names the entry (a pack's trailer, a directory's
	 * listing): its digest into s->digest, with s->named; a kind named
	 * only by all of its bytes leaves s->named false and finds its digest
	 * in build.  Refuses what this kind cannot stage (--include of what
	 * is not a pack). */
	stg_err (*open)(stg_ctx *ctx, stg_cache *c, stg_source *s, const stg_stage_opts *o,
	                stg_stage_result *res);
	/* Bytes [off, off + len) of the source into buf, short only at its
	 * end; -1/errno.  Charged to s->bw, and made within the source's slot;
	 * safe from several threads at once (pread, a bucket with its own
	 * lock), so reads can be pipelined or made on demand.  NULL: a tree,
	 * with no bytes of its own. */
	ssize_t (*read)(stg_ctx *ctx, const stg_source *s, void *buf, size_t len, uint64_t off);
	/* Read again what open read, the file open again at s->fd after the
	 * source was let go while another process built its entry; STG_EIO if
	 * it is not what open read.  NULL: the source is held while it waits
	 * (reading it again would cost more than the slot it frees). */
	stg_err (*reopen)(stg_ctx *ctx, stg_cache *c, stg_source *s);
	/* Build the entry under name (the lock its caller holds: the key, or
	 * for a source not named before it is read, its identity) and publish
	 * it as the key, or as the digest it finds (into res->digest). */
	stg_err (*build)(stg_ctx *ctx, stg_cache *c, stg_source *s, const char *name,
	                 const stg_stage_opts *o, stg_stage_result *res);
	/* Let go of what open took (again after reopen; NULL: nothing). */
	void (*close)(stg_source *s);
	/* The errors of staging it that are said as they are, a bit per
	 * stg_err; any other gets the source's name in front ("'SRC': "),
	 * unless it is about a local copy (the caller names the copy). */
	unsigned bare;
	/* open's errors name the source themselves: said as they are. */
	bool open_names_it;
} stg_source_ops;

struct stg_source {
	const stg_source_ops *ops; /* its kind */
	const char *name;          /* as staged (absolute): messages, meta, the index */
	const char *path;          /* what is read: name, or a local copy of it */
	bool local;                /* path is a local copy: no slot, no bandwidth limit */
	int fd;                    /* open for reading (a file, a directory); -1: not */
	struct stat st;            /* what is open */
	stg_ident id;              /* its identity, for the index ... */
	bool indexed;              /* ... if it is a file on the shared FS */
	stg_slot slot;             /* the shared-FS slot it is read within */
	stg_bucket *bw;            /* its reads are charged to this limit (NULL: none) */
	bool named;                /* digest is known before the entry is built */
	uint8_t digest[STG_DIGEST_LEN];
	void *state; /* the kind's own: the open pack, the directory's listing */
};

/* The kinds, asked in the order of the table in stage.c: a new kind is
 * its file, its line there and its name here. */
extern const stg_source_ops stg__source_pack, stg__source_archive, stg__source_dir;

/* Open name (a file or a directory, st from stat()) within a shared-FS
 * slot, for its kind to be chosen (s->ops); *s is to be closed whatever
 * this returns. */
stg_err stg__source_open(stg_ctx *ctx, stg_cache *c, const char *name, const struct stat *st,
                         stg_source *s);
/* Let go of the source while waiting (the kind's, the file, the slot), and
 * take it again (the slot unless local, the file, ops->reopen). */
void stg__source_let_go(stg_source *s);
stg_err stg__source_take_again(stg_ctx *ctx, stg_cache *c, stg_source *s);
void stg__source_close(stg_source *s);
/* The read of a source that is a file (ops->read). */
ssize_t stg__source_pread(stg_ctx *ctx, const stg_source *s, void *buf, size_t len, uint64_t off);

#endif
