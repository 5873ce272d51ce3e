/*
 * collect.h - what the three files of collect share: collect.c (deciding,
 * the tree, the pack, stg_collect), collect_record.c (the record on
 * scratch of what DEST holds) and collect_send.c (the shared filesystem
 * side: temporaries, copies, retries).  collect.c explains collect.
 */
#ifndef STG_COLLECT_H
#define STG_COLLECT_H

#include "cache.h"
#include "walk.h"
#include "hash.h"

#define TRIES        5 /* attempts at a file on transient errors */
#define CHANGE_TRIES 3 /* attempts at a file that changes while it is copied */

/* One line of the record: what DEST holds from SRC. */
typedef struct crec {
	char type; /* 'd' directory, 'f' file, 'l' link */
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	unsigned mode;
	uint8_t xxh3[16];
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
	stg_err stop; /* an error that ends the run (space, interrupt) */
	bool rewrite; /* the record needs rewriting (damaged, or a new pack) */
	int umask;    /* -1: unknown */
} collector;

static inline int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* collect_record.c */
/* SRC and DEST as the record knows them (absolute, DEST.tar.zst for a
 * pack), and the record's id; -1 if a path is too long. */
int stg__col_names(const char *src, const char *dest, bool pack, char asrc[STG_PATH_MAX + 1],
                   char adest[STG_PATH_MAX + 1], char id[17]);
int stg__col_log_line(collector *k, const char *head, const char *path);
int stg__col_log_rec(collector *k, const crec *r);
crec *stg__col_rec_find(collector *k, const char *path);
crec *stg__col_rec_set(collector *k, crec *r);
void stg__col_record_compact(collector *k);
stg_err stg__col_record_open(collector *k);
void stg__col_recs_clear(collector *k);

/* collect_send.c */
int stg__col_current_umask(void);
void stg__col_failed(collector *k, const char *path, const char *where, int e);
void stg__col_mark_begin(collector *k, char *mark, size_t len);
void stg__col_mark_end(collector *k, const char *mark);
void stg__col_op(collector *k);
void stg__col_remember(collector *k, crec *r, const char *path);
void stg__col_remove_leftovers(collector *k);
bool stg__col_send_item(collector *k, const stg_witem *it, const char *final, const char *shown,
                        crec *out);
double stg__col_slot_deadline(const stg_collect_opts *o);

/* After a job (clean.c): is all of src on dest, as the record of the
 * collects from src to dest says (identities only, no shared-FS access)?
 * 1 yes; 0 no, no record, or a collect holds it. */
int stg__collect_whole(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest, bool pack);
/* src's record made to_'s (results moved to kept/ keep what their
 * collects sent): 0, or -1/errno. */
int stg__collect_record_move(stg_cache *c, const char *src, const char *dest, bool pack,
                             const char *to);

#endif
