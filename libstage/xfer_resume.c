/*
 * xfer_resume.c - resuming a file within, on the receiving end: what a
 * receiver keeps of a large file whose transfer was cut, and what it can
 * offer of it the next time (proto.h: WANT's offer, FILE's offset).
 *
 * A file of XFER_RESUME_MIN bytes or more is received into the partial
 * directory's root under a name that stands for its path,
 * ".stager-resume.HEX" (HEX: XXH3-128 of the path), not under a fresh
 * temporary name, and a transfer that is cut (EOF, an error, a signal, or
 * kill -9 of either end) leaves it there.  The next transfer to the same
 * PATH offers the sender its length and the XXH3-128 of its bytes; the
 * sender compares them with its own first bytes and sends only the rest if
 * they are the same (the file may have changed since: then it is sent
 * whole).  The name is tied to the path, not to the content, so a file
 * that only grew is resumed too; whatever the name, nothing is trusted
 * but the hash the sender checks, and the whole file is still checked
 * against its XXH3 before it takes its path.
 *
 * Which bytes may be offered: whatever write() took is in the file once
 * the process is gone, kill -9 included (the page cache outlives it); only
 * a crash of the machine can leave a tail that never reached the disk.
 * So every XFER_RESUME_SYNC bytes the file is flushed (fdatasync) and its
 * length recorded beside it, in ".stager-resume.HEX.ck", with the boot's
 * id: on the same boot the whole file is offered, after a reboot only what
 * the record says was flushed.  No valid record, nothing is offered.
 */
#include "xfer_resume.h"
#include "rsjob.h"
#include "ctx.h"
#include "bytes.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESUME_PREFIX ".stager-resume."
#define CK_SUFFIX     ".ck"
#define CK_MAGIC      "STGRCK01"
#define CK_LEN        64 /* magic 8, boot id 40, length 8, XXH64 of the rest 8 */

void stg__resume_names(const char *path, char data[XFER_RNAME], char rec[XFER_RNAME])
{
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits(path, strlen(path)));
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", c.digest[i]);
	snprintf(data, XFER_RNAME, RESUME_PREFIX "%s", hex);
	snprintf(rec, XFER_RNAME, RESUME_PREFIX "%s" CK_SUFFIX, hex);
}

bool stg__resume_named(const char *name)
{
	return !strncmp(name, RESUME_PREFIX, sizeof RESUME_PREFIX - 1);
}

void stg__boot_id(char boot[XFER_BOOT])
{
	memset(boot, 0, XFER_BOOT);
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, boot, XFER_BOOT - 1);
	close(fd);
	if (n <= 0)
		memset(boot, 0, XFER_BOOT);
	char *nl = memchr(boot, '\n', XFER_BOOT);
	if (nl)
		*nl = '\0';
}

void stg__resume_remove(int dir, const char *path)
{
	char data[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names(path, data, rec);
	unlinkat(dir, data, 0);
	unlinkat(dir, rec, 0);
}

/* The length a record vouches for, and whether it was written on this
 * boot; false if there is no valid record. */
static bool read_record(int dir, const char *rec, const char *boot, uint64_t *len, bool *same_boot)
{
	uint8_t r[CK_LEN];
	int fd = openat(dir, rec, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, r, sizeof r, 0);
	close(fd);
	if (n != CK_LEN || memcmp(r, CK_MAGIC, 8) ||
	    stg__get64(r + 56) != XXH3_64bits(r, CK_LEN - 8))
		return false;
	*len = stg__get64(r + 48);
	*same_boot = boot[0] && !memcmp(r + 8, boot, XFER_BOOT);
	return true;
}

stg_err stg__resume_offer(stg_ctx *ctx, int dir, const char *path, uint64_t size, const char *boot,
                          uint8_t *buf, uint64_t *off, XXH3_state_t **st)
{
	char data[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names(path, data, rec);
	*off = 0;
	*st = NULL;
	int fd = openat(dir, data, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat sb;
	uint64_t len = 0;
	bool same_boot = false;
	stg_err err = STG_OK;
	if (fd < 0 || fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    !read_record(dir, rec, boot, &len, &same_boot))
		goto drop;
	/* on this boot all that was written is there; after a reboot, only
	 * what was flushed */
	if (same_boot || len > (uint64_t)sb.st_size)
		len = (uint64_t)sb.st_size;
	if (len > size)
		len = size;
	if (len == 0 || ((uint64_t)sb.st_size > len && ftruncate(fd, (off_t)len)))
		goto drop;
	if (!(*st = XXH3_createState())) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto drop;
	}
	XXH3_128bits_reset(*st);
	stg_hash_in in = {.fd = fd, .len = len, .buf = buf, .buf_len = XFER_BLOCK, .path = path};
	uint64_t got;
	err = stg__hash_read(ctx, &in, *st, &got);
	if (err == STG_EINTR) {
		/* kept as it is, for the next transfer */
		XXH3_freeState(*st);
		*st = NULL;
		close(fd);
		return err;
	}
	if (err || got != len) {
		err = STG_OK;
		goto drop;
	}
	close(fd);
	*off = len;
	return STG_OK;
drop:
	/* nothing worth offering: it goes */
	XXH3_freeState(*st);
	*st = NULL;
	if (fd >= 0)
		close(fd);
	unlinkat(dir, data, 0);
	unlinkat(dir, rec, 0);
	return err;
}

/* Flush what was written and record its length (best effort: a record
 * that is not written leaves an older, shorter one, which is still
 * true).  An empty file's record only says which boot it is of. */
static void checkpoint(stg_rfile *rf)
{
	if (rf->ck < 0 || (rf->len && fdatasync(rf->fd)))
		return;
	uint8_t r[CK_LEN] = {0};
	memcpy(r, CK_MAGIC, 8);
	memcpy(r + 8, rf->boot, XFER_BOOT);
	stg__put64(r + 48, rf->len);
	stg__put64(r + 56, XXH3_64bits(r, CK_LEN - 8));
	if (pwrite(rf->ck, r, sizeof r, 0) == CK_LEN)
		rf->synced = rf->len;
}

int stg__rfile_open(stg_rfile *rf, int dir, const char *path, uint64_t off, const char *boot)
{
	memset(rf, 0, sizeof *rf);
	rf->dir = dir;
	rf->fd = rf->ck = -1;
	memcpy(rf->boot, boot, XFER_BOOT);
	stg__resume_names(path, rf->name, rf->rec);
	rf->fd = openat(dir, rf->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	rf->ck = openat(dir, rf->rec, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat sb;
	int en = 0;
	if (rf->fd < 0 || rf->ck < 0 || fstat(rf->fd, &sb))
		en = errno;
	else if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < off)
		en = EIO; /* not what was offered */
	else if (ftruncate(rf->fd, (off_t)off) || lseek(rf->fd, (off_t)off, SEEK_SET) != (off_t)off)
		en = errno;
	if (en) {
		stg__rfile_close(rf, false);
		errno = en;
		return -1;
	}
	rf->len = off;
	checkpoint(rf);
	return 0;
}

int stg__rfile_write(stg_rfile *rf, const uint8_t *p, size_t n)
{
	if (stg__write_full(rf->fd, p, n))
		return -1;
	rf->len += n;
	if (rf->len - rf->synced >= XFER_RESUME_SYNC)
		checkpoint(rf);
	return 0;
}

void stg__rfile_done(stg_rfile *rf)
{
	rf->done = true;
	unlinkat(rf->dir, rf->rec, 0);
}

void stg__rfile_close(stg_rfile *rf, bool keep)
{
	if (rf->dir >= 0 && !rf->done) {
		if (keep && rf->fd >= 0 && rf->len > 0) {
			checkpoint(rf);
		} else {
			unlinkat(rf->dir, rf->name, 0);
			unlinkat(rf->dir, rf->rec, 0);
		}
	}
	if (rf->fd >= 0)
		close(rf->fd);
	if (rf->ck >= 0)
		close(rf->ck);
	rf->fd = rf->ck = -1;
}
