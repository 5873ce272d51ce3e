/*
 * xfer.h - what the transfer modules share: xfer.c (the two ends of a
 * connection; librsync jobs are rsjob.c's), xfer_send.c (the sender of
 * a tree) and its receiver (xfer_recv.c, xfer_record.c, xfer_switch.c,
 * sharing xfer_recv.h).  xfer.c explains the transfer.
 */
#ifndef STG_XFER_H
#define STG_XFER_H

#include "proto.h"
#include "rsjob.h"

#include <librsync.h>
#include <openssl/evp.h>
#include <sys/types.h>

/* Send the tree at dir (xfer_send.c): manifest, then what the receiver
 * asks for; returns when the receiver said PUBLISHED. */
stg_err stg__send_tree(stg_ctx *ctx, stg_wire *w, const char *dir, const char *what,
                       stg_xfer_result *res);
/* Receive a tree into dest, or with pack a pack at dest.tar.zst
 * (xfer_switch.c): verified, then switched in; then PUBLISHED.  An existing
 * dest is replaced only as stg__receive_check allows. */
stg_err stg__receive_tree(stg_ctx *ctx, stg_wire *w, const char *dest, bool pack, bool replace,
                          const char *what, stg_xfer_result *res);
/* Before anything is sent: may a tree be received at dest?  STG_EEXIST
 * (with what to do) if dest is a directory that stager did not publish
 * and is not empty (unless replace), or a home directory (always), or
 * not a directory; the receiver checks again under its lock. */
stg_err stg__receive_check(stg_ctx *ctx, const char *dest, bool pack, bool replace,
                           const char *what);

/* What a pull's receiver holds (HOLDS): this boot's id, then the device
 * and inode (u64 each) of the record it holds locked; all zero: none. */
#define XFER_HOLDS (XFER_BOOT + 16)

/* A pull's lock on the tree at path (xfer_record.c): shared, on the record
 * beside it that transfers to path hold exclusively while they run; so a
 * pull never reads a tree in the middle of its switch.  Waits (a bounded
 * time, answering cancellation) while a transfer runs; *fd is the lock
 * (-1: none needed, or none on this filesystem), for the caller to close
 * when the tree was sent.  holds (XFER_HOLDS bytes, or NULL): what the
 * pull's own receiver holds; when that is this record, the pull is into
 * the very tree it reads, and its receiver's lock keeps every other
 * transfer out already (waiting for it would wait for ever). */
stg_err stg__xfer_read_lock(stg_ctx *ctx, const char *path, const uint8_t *holds, int *fd);

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

/* Test hook, read by the receiver: STAGER_TEST_FAULTS, a comma-separated
 * list of whole words, makes calls fail as NFS, CephFS, GlusterFS and
 * Lustre make them: "renameat2" (renameat2 with flags: EINVAL), "flock"
 * (ENOSYS), "ofdlock" (fcntl's F_OFD_SETLK: ENOLCK), "btime" (statx gives
 * no birth time); "cut-switch", "cut-published" and "cut-remove" stop a
 * switch without RENAME_EXCHANGE as a receiver killed there would: between
 * its two renames, after the second before the record names the new
 * version, and before the old version is removed; "fill-dest" writes a
 * file (stager-test-fill) into DEST after its last check before the
 * switch, as another process might.  The e2e tests need it in the real
 * binary to reach the fallbacks; the receiver warns through the log
 * callback whenever it is set.  Nothing else reads it. */
#define STG_TEST_FAULTS_ENV "STAGER_TEST_FAULTS"

#endif
