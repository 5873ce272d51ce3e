/*
 * pack_read.h - an opened pack (pack_read.c): its trailer, its reads.
 */
#ifndef STG_PACK_READ_H
#define STG_PACK_READ_H

#include "trailer.h"
#include "trailer_names.h"

#include <stdbool.h>
#include <sys/stat.h>

struct stg_bucket;
struct stg_pack {
	int fd;             /* -1 for a memory pack */
	const uint8_t *mem; /* memory pack */
	uint64_t size;
	stg_trailer t;
	struct stg_bucket *bw; /* reads charged to this rate limit (NULL: none) */
	stg_ctx *bw_ctx;
	dev_t dev;         /* the file's device (st_dev) */
	uint8_t *tail;     /* the pack's last tail_len bytes, from tail_off, when the */
	uint64_t tail_off; /* trailer fit in them (NULL otherwise) */
	size_t tail_len;
};

/* Read len bytes at off of the pack's data (what the trailer's read at
 * open brought in, from memory). */
int stg__pack_pread(const stg_pack *p, void *buf, size_t len, uint64_t off);
/* How many of those bytes a read takes from the source, not from what the
 * trailer's read kept. */
uint64_t stg__pack_unread(const stg_pack *p, uint64_t off, uint64_t len);
/* r's whole path: in the pack's names, or built into buf (STG_PATH_MAX +
 * 1 bytes: trailer_names.h); valid while both are. */
const char *stg__rec_path(const stg_pack *p, const stg_rec *r, char *buf);
/* Has the pack's file changed in place since then (its attributes at
 * open: size, mtime, and ctime while its links are as they were)? */
bool stg__pack_changed(const stg_pack *p, const struct stat *then);
const char *stg__rec_link(const stg_pack *p, const stg_rec *r);

#endif
