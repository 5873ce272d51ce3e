/*
 * collect_state.h - the state one collect run carries through its three
 * files: the collector (SRC, DEST, their descriptors, the record in
 * memory), one line of the record (crec), the retry counts.  A header of
 * its own, below collect.c, collect_record.c and collect_send.c, so that
 * the calls between them run one way (collect -> collect_send ->
 * collect_record).  collect.c explains collect.
 */
#ifndef STG_COLLECT_STATE_H
#define STG_COLLECT_STATE_H

#include "cache.h"
#include "ctx.h"
#include "path.h"

#include <time.h>

#define TRIES        5 /* attempts at a file on transient errors */
#define CHANGE_TRIES 3 /* attempts at a file that changes while it is copied */

/* One line of the record: what DEST holds from SRC. */
typedef struct crec {
	char type; /* 'd' directory, 'f' file, 'l' link */
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	unsigned mode;
	uint8_t xxh3[16];
	bool now; /* sent by this collect (so not "unchanged" when it walks again) */
	char *path;
} crec;

typedef struct collector {
	stg_ctx *ctx;
	stg_cache *c;
	const stg_collect_opts *o;
	stg_collect_result *res;
	uint64_t total_bytes; /* of the files this run sends: progress's total */
	char src[STG_PATH_MAX + 1], dest[STG_PATH_MAX + 1];
	char where[STG_PATH_MAX + 1]; /* the directory temporaries go in, as recorded */
	char id[17];
	int srcfd, destfd, logfd;
	crec *recs;
	size_t n_recs, cap_recs, log_lines;
	stg_strmap map;  /* path -> index in recs */
	stg_strmap dirs; /* directories of DEST changed in this run */
	char **pending;  /* temporary names logged but not resolved */
	size_t n_pending;
	uint64_t dest_dev, dest_ino;
	unsigned seq;
	char first_error[STG_ERRMSG_MAX];
	stg_err stop;    /* an error that ends the run (space, interrupt) */
	bool rewrite;    /* the record needs rewriting (damaged, or a new pack) */
	size_t vanished; /* files gone from SRC between the walk and their copy */
	int umask;       /* -1: unknown */
} collector;

static inline int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

#endif
