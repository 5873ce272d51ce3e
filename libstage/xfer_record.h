/*
 * xfer_record.h - what may be replaced at DEST (xfer_record.c): the
 * record of what stager published, the receiver's lock and a pull's
 * shared one, the test hooks.
 */
#ifndef STG_XFER_RECORD_H
#define STG_XFER_RECORD_H

#include "xfer_recv_state.h"

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

/* The record, the lock and what may be replaced (xfer_record.c). */
stg_err stg__xr_dest_allowed(receiver *rc, int dest);
int stg__xr_dir_id_of(int fd, dir_id *id);
bool stg__xr_filled_meanwhile(receiver *rc);
stg_err stg__xr_filled(receiver *rc);
int stg__xr_id_at(int dfd, const char *name, dir_id *id);
bool stg__xr_id_equal(const dir_id *rec, const dir_id *cur, bool ctime);
stg_err stg__xr_not_replaced(receiver *rc);
stg_err stg__xr_record_lock(receiver *rc);
/* Is the record's name free, or a regular file of the user's (one link)?
 * Else STG_EEXIST, naming its owner if it is another user's. */
stg_err stg__xr_record_check(receiver *rc);
/* Is name, beside DEST, a directory of the user's?  1 yes, 0 absent, -1
 * not (another user's, or not a directory); stg__xr_not_ours says so,
 * naming the owner. */
int stg__xr_sibling_ours(receiver *rc, const char *name);
stg_err stg__xr_not_ours(receiver *rc, const char *name);
void stg__xr_holds(const receiver *rc, uint8_t out[XFER_HOLDS]);
void stg__xr_record_published(receiver *rc, int dfd, const char *name);
int stg__xr_record_put(receiver *rc, const record *r);
bool stg__xr_record_read(receiver *rc, record *r);
void stg__xr_record_write(receiver *rc, const record *r);
bool stg__xr_same_dir_at(receiver *rc, const char *name, int fd);
bool stg__xr_test_fault(const char *op);
void stg__xr_test_fill(receiver *rc);
int stg__xr_xrenameat2(int olddir, const char *oldname, int newdir, const char *newname,
                       unsigned flags);

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
