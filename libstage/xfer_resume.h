/*
 * xfer_resume.h - resuming a large file cut mid-transfer (xfer_resume.c):
 * the partial copy kept, its record, what of it can be offered.
 */
#ifndef STG_XFER_RESUME_H
#define STG_XFER_RESUME_H

#include "ctx.h"

#include <xxhash.h>

/* Resuming a file within (xfer_resume.c, which explains it): a file of
 * XFER_RESUME_MIN bytes or more is received into the partial directory's
 * root as ".stager-resume.HEX" (HEX from its path), flushed and its length
 * recorded (".stager-resume.HEX.ck") every XFER_RESUME_SYNC bytes, and
 * kept when the transfer is cut. */
#define XFER_RESUME_MIN  ((uint64_t)1 << 20)
#define XFER_RESUME_SYNC ((uint64_t)32 << 20)
#define XFER_RNAME       64 /* the names' buffers */
#define XFER_BOOT        40 /* the boot id's (NUL-padded) */

/* The names of path's partial copy and of its record. */
void stg__resume_names(const char *path, char data[XFER_RNAME], char rec[XFER_RNAME]);
/* Is name one of those (either)? */
bool stg__resume_named(const char *name);
/* This boot's id (all zero if unknown: then no record counts as of it). */
void stg__boot_id(char boot[XFER_BOOT]);
/* Remove path's partial copy and record from dir, if there. */
void stg__resume_remove(int dir, const char *path);
/* What of path's partial copy in dir can be offered for a file of size
 * bytes: *off bytes (cut to that), their XXH3 in *st (the caller frees it)
 * to go on with.  Nothing usable: both files removed, *off = 0, *st NULL.
 * buf: XFER_BLOCK bytes.  Fails only when interrupted or out of memory. */
stg_err stg__resume_offer(stg_ctx *ctx, int dir, const char *path, uint64_t size, const char *boot,
                          uint8_t *buf, uint64_t *off, XXH3_state_t **st);

/* A partial copy being written. */
typedef struct stg_rfile {
	int dir, fd, ck;
	char name[XFER_RNAME], rec[XFER_RNAME];
	char boot[XFER_BOOT];
	uint64_t len, synced;
	bool done; /* renamed to its path: nothing of it to keep or remove */
} stg_rfile;

/* Open (create) path's partial copy in dir, cut to its first off bytes
 * (which must be there), to be written from there.  -1/errno. */
int stg__rfile_open(stg_rfile *rf, int dir, const char *path, uint64_t off, const char *boot);
/* Append; flushed and recorded every XFER_RESUME_SYNC bytes.  -1/errno. */
int stg__rfile_write(stg_rfile *rf, const uint8_t *p, size_t n);
/* The copy was checked and renamed to its path (rf->name): its record goes. */
void stg__rfile_done(stg_rfile *rf);
/* Close; keep: flushed and recorded for the next transfer, else removed
 * (what arrived damaged).  After stg__rfile_done, only closed. */
void stg__rfile_close(stg_rfile *rf, bool keep);

#endif
