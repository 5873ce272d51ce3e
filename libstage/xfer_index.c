/*
 * xfer_index.c - the stat-keyed index of a transfer's end: for each file
 * stager read or wrote, its inode, size, mtime, ctime and mode, and the
 * XXH3-128 its bytes had then.  A file whose stat is still all of that is
 * taken to hold those bytes without reading them (as git's index and
 * rsync's quick check do, with ctime and inode too): writing a file's
 * bytes sets its mtime and ctime, and while a user can set an mtime back
 * (touch -d), setting it moves the ctime, which only the kernel sets.
 *
 * Racy files, as git calls them: a file changed in the very timestamp tick
 * in which its stat was taken would keep that stat.  So a file enters the
 * index only if its ctime is before a bound the caller knows the
 * filesystem's clock had passed before the stat was taken (the mtime a
 * touch of a file there got, the newest ctime seen on the device before,
 * or this host's coarse clock for a local filesystem); any later change
 * gets a ctime at or after the bound, which the entry cannot match.
 *
 * The index is hostile input like any file a user could edit or another
 * user could plant: a regular file of the user's with one link, at most
 * XIDX_MAX bytes, with a checksum over all of it, the device and root
 * inode of the tree it is about, and bounded entries; anything else is
 * ignored whole.  It is a cache: a failure to write one only costs the
 * next transfer its reads.
 *
 * Layout (little-endian): "STGXIDX1", dev u64, root inode u64, count u64;
 * per entry: inode, size u64, mtime, ctime (ns) i64, mode u32, XXH3-128
 * (16 bytes), path length u16, path; then XXH3-64 of all before it.
 */
#include "xfer_index.h"
#include "bytes.h"
#include "fsutil.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define XIDX_MAGIC "STGXIDX1"
#define XIDX_HDR   32
#define XIDX_FIXED 54                  /* an entry without its path */
#define XIDX_MAX   ((size_t)256 << 20) /* bytes of an index, at most */

void stg__xindex_free(stg_xindex *x)
{
	if (x->map_ok)
		stg__strmap_free(&x->map);
	free(x->v);
	free(x->buf);
	memset(x, 0, sizeof *x);
}

/* Parse buf[0..len) into x; false: damaged, or not about this tree. */
static bool parse(stg_xindex *x, size_t len, uint64_t dev, uint64_t root_ino)
{
	const uint8_t *p = x->buf;
	if (len < XIDX_HDR + 8 || memcmp(p, XIDX_MAGIC, 8) ||
	    XXH3_64bits(p, len - 8) != stg__get64(p + len - 8))
		return false;
	uint64_t n = stg__get64(p + 24);
	if (stg__get64(p + 8) != dev || stg__get64(p + 16) != root_ino ||
	    n > (len - XIDX_HDR) / XIDX_FIXED)
		return false;
	if (!(x->v = calloc(n + 1, sizeof *x->v)) || stg__strmap_init(&x->map, n + 1))
		return false;
	x->map_ok = true;
	size_t off = XIDX_HDR, end = len - 8;
	for (uint64_t i = 0; i < n; i++) {
		if (end - off < XIDX_FIXED)
			return false;
		xidx_ent *e = &x->v[i];
		const uint8_t *q = p + off;
		e->ino = stg__get64(q);
		e->size = stg__get64(q + 8);
		e->mtime_ns = (int64_t)stg__get64(q + 16);
		e->ctime_ns = (int64_t)stg__get64(q + 24);
		e->mode = stg__get32(q + 32);
		e->hash = q + 36;
		e->plen = (uint16_t)(q[52] | q[53] << 8);
		off += XIDX_FIXED;
		if (!e->plen || end - off < e->plen)
			return false;
		e->path = (const char *)p + off;
		off += e->plen;
		/* a path twice: someone made this by hand */
		if (stg__strmap_put(&x->map, e->path, e->plen, (uint32_t)i) != 1)
			return false;
	}
	x->n = n;
	return off == end;
}

void stg__xindex_load(stg_xindex *x, int dirfd, const char *name, uint64_t dev, uint64_t root_ino,
                      const char **why)
{
	memset(x, 0, sizeof *x);
	x->dev = dev;
	const char *w = "";
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			w = "it cannot be opened";
		goto out;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
		w = "it is not a file of yours";
		goto out;
	}
	if ((uint64_t)st.st_size > XIDX_MAX) {
		w = "it is too large";
		goto out;
	}
	size_t len = (size_t)st.st_size;
	if (!(x->buf = malloc(len + 1))) {
		w = "out of memory";
		goto out;
	}
	ssize_t got = pread(fd, x->buf, len, 0);
	if (got != (ssize_t)len || !parse(x, len, dev, root_ino)) {
		w = "it is damaged or about another tree";
		stg__xindex_free(x);
		x->dev = dev;
	}
out:
	if (fd >= 0)
		close(fd);
	if (*w) {
		stg__xindex_free(x);
		x->dev = dev;
	}
	if (why)
		*why = w;
}

bool stg__xindex_vouch(const stg_xindex *x, const char *path, const struct stat *st,
                       const uint8_t **hash)
{
	if (!x->n || !S_ISREG(st->st_mode) || (uint64_t)st->st_dev != x->dev)
		return false;
	uint32_t i = stg__strmap_get(&x->map, path, strlen(path));
	if (i == UINT32_MAX)
		return false;
	const xidx_ent *e = &x->v[i];
	if (e->ino != (uint64_t)st->st_ino || e->size != (uint64_t)st->st_size ||
	    e->mtime_ns != stg__ns_of(&st->st_mtim) || e->ctime_ns != stg__ns_of(&st->st_ctim) ||
	    e->mode != (uint32_t)(st->st_mode & 07777))
		return false;
	*hash = e->hash;
	return true;
}

int64_t stg__xindex_now(int fd, uint64_t dev)
{
	struct stat st;
	if (fd >= 0 && !futimens(fd, NULL) && !fstat(fd, &st) && (uint64_t)st.st_dev == dev)
		return stg__ns_of(&st.st_mtim);
	struct timespec ts;
	if (!stg__dev_is_network((dev_t)dev, NULL, 0) && !clock_gettime(CLOCK_REALTIME_COARSE, &ts))
		return stg__ns_of(&ts);
	return INT64_MIN;
}

void stg__xindex_begin(stg_xindex_out *o, uint64_t dev, uint64_t root_ino, int64_t bound_ns)
{
	memset(o, 0, sizeof *o);
	o->dev = dev;
	o->root_ino = root_ino;
	o->bound_ns = bound_ns;
}

void stg__xindex_out_free(stg_xindex_out *o)
{
	free(o->buf);
	o->buf = NULL;
	o->len = o->cap = 0;
}

void stg__xindex_add(stg_xindex_out *o, const char *path, const struct stat *st,
                     const uint8_t hash[16], bool vouched)
{
	size_t pl = strlen(path);
	if (o->full || !S_ISREG(st->st_mode) || (uint64_t)st->st_dev != o->dev || !pl ||
	    pl > UINT16_MAX || (!vouched && stg__ns_of(&st->st_ctim) >= o->bound_ns))
		return;
	size_t need = (o->len ? o->len : XIDX_HDR) + XIDX_FIXED + pl;
	if (need + 8 > XIDX_MAX) {
		o->full = true;
		return;
	}
	if (need > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : (size_t)64 << 10;
		while (cap < need)
			cap *= 2;
		uint8_t *nb = realloc(o->buf, cap + 8);
		if (!nb) {
			o->full = true;
			return;
		}
		o->buf = nb;
		o->cap = cap;
	}
	if (!o->len)
		o->len = XIDX_HDR;
	uint8_t *q = o->buf + o->len;
	stg__put64(q, (uint64_t)st->st_ino);
	stg__put64(q + 8, (uint64_t)st->st_size);
	stg__put64(q + 16, (uint64_t)stg__ns_of(&st->st_mtim));
	stg__put64(q + 24, (uint64_t)stg__ns_of(&st->st_ctim));
	stg__put32(q + 32, (uint32_t)(st->st_mode & 07777));
	memcpy(q + 36, hash, 16);
	q[52] = (uint8_t)pl;
	q[53] = (uint8_t)(pl >> 8);
	memcpy(q + XIDX_FIXED, path, pl);
	o->len += XIDX_FIXED + pl;
	o->n++;
}

int stg__xindex_save(stg_xindex_out *o, int dirfd, const char *name, const char *tmp)
{
	uint8_t hdr[XIDX_HDR];
	int rc = -1, fd = -1;
	if (!o->buf && !(o->buf = malloc(XIDX_HDR + 8))) {
		errno = ENOMEM;
		goto out;
	}
	if (!o->len)
		o->len = XIDX_HDR;
	memcpy(hdr, XIDX_MAGIC, 8);
	stg__put64(hdr + 8, o->dev);
	stg__put64(hdr + 16, o->root_ino);
	stg__put64(hdr + 24, o->n);
	memcpy(o->buf, hdr, XIDX_HDR);
	stg__put64(o->buf + o->len, XXH3_64bits(o->buf, o->len));
	/* a temporary of ours left by a killed transfer goes; another user's
	 * is left alone (and this index is not written) */
	struct stat st;
	for (int k = 0; k < 2 && fd < 0; k++) {
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 &&
		    (errno != EEXIST || fstatat(dirfd, tmp, &st, AT_SYMLINK_NOFOLLOW) ||
		     !S_ISREG(st.st_mode) || st.st_uid != geteuid() || unlinkat(dirfd, tmp, 0)))
			goto out;
	}
	if (fd < 0)
		goto out;
	int werr = stg__write_full(fd, o->buf, o->len + 8);
	if (close(fd) || werr) {
		fd = -1;
		unlinkat(dirfd, tmp, 0);
		goto out;
	}
	fd = -1;
	if (renameat(dirfd, tmp, dirfd, name)) {
		int en = errno;
		unlinkat(dirfd, tmp, 0);
		errno = en;
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	stg__xindex_out_free(o);
	return rc;
}
