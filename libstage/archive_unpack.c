/*
 * archive_unpack.c - an archive that libarchive reads, unpacked into a
 * cache entry being built: the tree in data/, the manifest beside it.
 *
 * Archives are hostile input, read as a stream.  The rules are the packs':
 * clean relative paths (absolute paths and ".." are refused, not rewritten),
 * files, directories, symlinks and hardlinks only (device nodes, FIFOs and
 * sockets are refused), no setuid or setgid.  Symlinks are created last,
 * after the whole archive was read, and only if none leads outside the
 * tree or through another symlink; no path may lie under one.  So nothing
 * is ever written through a link.  The entry's key is the SHA-256 of the
 * archive file, computed while it is read (and to its end).
 *
 * This runs in the watched child of source_archive.c, which kills it when
 * it stops making progress: every read and write adds to *progress.
 */
#include "archive_unpack.h"
#include "dircur.h"
#include "ctx.h"
#include "bytes.h"
#include "path.h"
#include "manifest.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define BLOCK (1u << 20)

/* ---- the archive reader ------------------------------------------------------ */

typedef struct ar_src {
	const stg_source *src; /* read by range, within its bandwidth limit */
	uint64_t size;
	uint64_t pos;    /* where the next read starts */
	uint64_t hashed; /* the SHA-256 covers [0, hashed) */
	uint8_t *buf;
	EVP_MD_CTX *sha;
	uint64_t bytes; /* read from the file, re-reads included */
	int err;
	volatile uint64_t *progress; /* shared with the watching parent */
} ar_src;

/* Reads may jump (zip and 7z read their directory at the end first): a read
 * that continues the hashed prefix extends it, and hash_rest() reads what
 * was skipped, so the digest is of the whole file in order. */
static la_ssize_t ar_read(struct archive *a, void *arg, const void **out)
{
	ar_src *s = arg;
	ssize_t n = s->src->ops->read(NULL, s->src, s->buf, BLOCK, s->pos);
	if (n < 0) {
		s->err = errno;
		if (a)
			archive_set_error(a, errno, "read error");
		return -1;
	}
	if (s->pos == s->hashed) {
		EVP_DigestUpdate(s->sha, s->buf, (size_t)n);
		s->hashed += (uint64_t)n;
	}
	s->pos += (uint64_t)n;
	s->bytes += (uint64_t)n;
	*s->progress += (uint64_t)n + 1;
	*out = s->buf;
	return n;
}

static la_int64_t ar_seek(struct archive *a, void *arg, la_int64_t off, int whence)
{
	(void)a;
	ar_src *s = arg;
	int64_t base = whence == SEEK_SET   ? 0
	               : whence == SEEK_CUR ? (int64_t)s->pos
	                                    : (int64_t)s->size;
	int64_t to = base + off;
	if (to < 0)
		return ARCHIVE_FATAL;
	s->pos = (uint64_t)to;
	*s->progress += 1;
	return to;
}

static int hash_rest(ar_src *s)
{
	s->pos = s->hashed;
	const void *out;
	la_ssize_t n;
	while ((n = ar_read(NULL, s, &out)) > 0)
		;
	return n < 0 ? -1 : 0;
}

/* What was extracted, for the tree checks at the end. */
typedef struct ar_item {
	char *path;
	char *link; /* symlinks only */
	uint8_t type;
	uint32_t mode;
	int64_t mtime;
	long nsec;
	bool written;     /* a regular file whose content was written: ... */
	uint64_t size;    /* ... its size ... */
	uint8_t xxh3[16]; /* ... and hash, for the manifest */
} ar_item;

typedef struct ar_state {
	stg_ctx *ctx;
	int rootfd;
	ar_item *items;
	size_t n, cap;
	stg_strmap map;  /* path -> item index (latest) */
	stg_strmap dirs; /* parents whose own parents were checked */
	stg_dircur cur;  /* where the last entry went */
	FILE *manifest;
	uint64_t files, content, disk;
	uint64_t written_since_check;
	uint64_t min_free;
	volatile uint64_t *progress;
} ar_state;

/* Strip "./" prefixes and trailing slashes; the result must be a clean
 * relative path, or the archive is refused. */
static bool clean_path(const char *in, char *out, size_t cap)
{
	while (in[0] == '.' && in[1] == '/')
		in += 2;
	size_t len = strlen(in);
	while (len > 0 && in[len - 1] == '/')
		len--;
	if (len == 0 || len >= cap)
		return false;
	memcpy(out, in, len);
	out[len] = '\0';
	/* "a//b" and "a/./b" are harmless spellings: normalise them */
	char *w = out;
	for (const char *r = out; *r;) {
		if (r[0] == '/' && (r[1] == '/' || (r[1] == '.' && (r[2] == '/' || !r[2])))) {
			r += r[1] == '/' ? 1 : 2;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
	return stg__path_ok(out, strlen(out));
}

static stg_err remember(ar_state *s, const char *path, const char *link, uint8_t type,
                        uint32_t mode, int64_t mtime, long nsec)
{
	if (stg__grow((void **)&s->items, &s->cap, s->n + 1, sizeof *s->items, SIZE_MAX))
		return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	ar_item *it = &s->items[s->n];
	it->path = strdup(path);
	it->link = link ? strdup(link) : NULL;
	if (!it->path || (link && !it->link))
		return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	it->type = type;
	it->mode = mode;
	it->mtime = mtime;
	it->nsec = nsec;
	it->written = false; /* set by the caller once a file's content is in */
	it->size = 0;
	s->n++;
	return STG_OK;
}

static uint32_t lookup(const ar_state *s, const char *p, size_t len)
{
	return stg__strmap_get(&s->map, p, len);
}

static bool is_symlink_cb(void *arg, const char *p, size_t len)
{
	const ar_state *s = arg;
	uint32_t i = lookup(s, p, len);
	return i != UINT32_MAX && s->items[i].type == STG_SYMLINK;
}

/* Where the parent of path[0..len) ends (0: none). */
static size_t parent_len(const char *path, size_t len)
{
	while (len > 0 && path[len - 1] != '/')
		len--;
	return len > 0 ? len - 1 : 0;
}

/* No parent of path may be anything but a directory.  Parents already
 * checked (in dirs) end the walk up, so a path costs a lookup or two, not
 * one a level: a tree 2,000 levels deep is checked in linear time.  *upto
 * is where the walk ended, for note_parents once path is an item's (the
 * map's keys live as long as the items).  A later entry may put a link
 * where a checked parent was implied: finish checks every path again,
 * with dirs emptied. */
static bool parents_are_dirs(const ar_state *s, const char *path, size_t *upto)
{
	size_t k = strlen(path);
	while ((k = parent_len(path, k)) > 0) {
		if (stg__strmap_get(&s->dirs, path, k) != UINT32_MAX)
			break;
		uint32_t i = lookup(s, path, k);
		if (i != UINT32_MAX && s->items[i].type != STG_DIR)
			return false;
	}
	*upto = k;
	return true;
}

/* The parents of path that parents_are_dirs walked through, as checked. */
static int note_parents(ar_state *s, const char *path, size_t upto)
{
	for (size_t k = strlen(path); (k = parent_len(path, k)) > upto;)
		if (stg__strmap_put(&s->dirs, path, k, 0) < 0)
			return -1;
	return 0;
}

/* The directory that holds path, made with its parents if missing (an
 * archive may leave them implied); *base is path's last component. */
static int parent_fd(ar_state *s, const char *path, bool create, const char **base)
{
	const char *slash = strrchr(path, '/');
	*base = slash ? slash + 1 : path;
	return stg__dircur_open(&s->cur, path, slash ? (size_t)(slash - path) : 0, create);
}

static stg_err hostile(ar_state *s, const char *what, const char *path)
{
	return stg__fail(s->ctx, STG_ECORRUPT, "refusing a hostile archive: %s: '%s'", what, path);
}

/* Is there room on scratch for need bytes more, above min_free?  path:
 * the entry that declares them (NULL: bytes already being written). */
static stg_err space_check(ar_state *s, uint64_t need, const char *path)
{
	struct statvfs v;
	if (fstatvfs(s->rootfd, &v) == 0) {
		uint64_t free_b = (uint64_t)v.f_bavail * v.f_frsize;
		if (free_b < stg__sat_add(s->min_free, need)) {
			char a[16], b[16], c[16];
			if (path)
				return stg__fail(
				        s->ctx, STG_ENOSPC,
				        "not enough space on scratch for '%s' in the archive: "
				        "it is %s, %s free, min_free %s; nothing of it was "
				        "written",
				        path, stg_format_size(need, c, sizeof c),
				        stg_format_size(free_b, a, sizeof a),
				        stg_format_size(s->min_free, b, sizeof b));
			return stg__fail(s->ctx, STG_ENOSPC,
			                 "not enough space on scratch while unpacking the archive: "
			                 "%s free, min_free %s",
			                 stg_format_size(free_b, a, sizeof a),
			                 stg_format_size(s->min_free, b, sizeof b));
		}
	}
	return STG_OK;
}

/* A hole of a sparse file, from *pos up to end: hashed as the zeros it reads
 * as (the file's pages there are never written). */
static void hash_hole(XXH3_state_t *xs, uint64_t *pos, uint64_t end)
{
	static const uint8_t zeros[4096];
	while (*pos < end) {
		size_t z = end - *pos < sizeof zeros ? (size_t)(end - *pos) : sizeof zeros;
		XXH3_128bits_update(xs, zeros, z);
		*pos += z;
	}
}

static stg_err write_file(ar_state *s, struct archive *a, int pfd, const char *base,
                          const char *path, uint32_t mode, int64_t size_hint,
                          XXH128_canonical_t *hash, uint64_t *size)
{
	/* a later entry of the same name replaces an earlier file, as tar does */
	uint32_t prev = lookup(s, path, strlen(path));
	if (prev != UINT32_MAX) {
		if (s->items[prev].type != STG_FILE)
			return hostile(s, "a file over a directory or link", path);
		unlinkat(pfd, base, 0);
	}
	int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return stg__fail_errno(s->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot create '%s'", path);
	(void)mode;
	XXH3_state_t *xs = XXH3_createState();
	stg_err err = STG_OK;
	uint64_t pos = 0;
	if (!xs) {
		close(fd);
		return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	}
	XXH3_128bits_reset(xs);
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(a, &buf, &len, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r < ARCHIVE_WARN || off < 0 || (uint64_t)off < pos) {
			err = stg__fail(s->ctx, STG_ECORRUPT, "damaged archive at '%s': %s", path,
			                r < ARCHIVE_WARN ? archive_error_string(a)
			                                 : "data out of order");
			goto out;
		}
		hash_hole(xs, &pos, (uint64_t)off);
		XXH3_128bits_update(xs, buf, len);
		const uint8_t *p = buf;
		size_t left = len;
		while (left) {
			ssize_t n = pwrite(fd, p, left, (off_t)pos);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				err = stg__fail_errno(s->ctx, stg__err_from_errno(errno, STG_EIO),
				                      errno, "cannot write '%s'", path);
				goto out;
			}
			p += n;
			left -= (size_t)n;
			pos += (uint64_t)n;
		}
		s->written_since_check += len;
		*s->progress += len + 1;
		if (s->written_since_check > (64u << 20)) {
			s->written_since_check = 0;
			if ((err = space_check(s, 0, NULL)))
				goto out;
		}
		if (stg__cancelled(s->ctx)) {
			err = stg__fail(s->ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
	/* a trailing hole */
	if (size_hint > 0 && (uint64_t)size_hint > pos) {
		if (ftruncate(fd, size_hint)) {
			err = stg__fail_errno(s->ctx, STG_EIO, errno, "cannot write '%s'", path);
			goto out;
		}
		hash_hole(xs, &pos, (uint64_t)size_hint);
	}
	XXH128_canonicalFromHash(hash, XXH3_128bits_digest(xs));
	*size = pos;
out:
	XXH3_freeState(xs);
	if (close(fd) && !err)
		err = stg__fail_errno(s->ctx, STG_EIO, errno, "cannot write '%s'", path);
	return err;
}

static stg_err read_archive(ar_state *s, struct archive *a)
{
	stg_err err = STG_OK;
	struct archive_entry *ae;
	char path[STG_PATH_MAX + 1], target[STG_PATH_MAX + 1];
	for (;;) {
		int r = archive_read_next_header(a, &ae);
		if (r == ARCHIVE_EOF) {
			/* a tar stream ends with zero blocks; one cut at an entry
			 * boundary (a truncated copy, a pack without its end) reads
			 * as a clean end that consumed none of them */
			if ((archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR &&
			    archive_filter_bytes(a, 0) < archive_read_header_position(a) + 512)
				return stg__fail(s->ctx, STG_ECORRUPT,
				                 "damaged archive: the tar stream is truncated (it "
				                 "ends without its end-of-archive marker)");
			break;
		}
		if (r == ARCHIVE_WARN)
			stg__log(s->ctx, STG_LOG_WARN, "%s", archive_error_string(a));
		else if (r != ARCHIVE_OK)
			return stg__fail(s->ctx, STG_ECORRUPT, "damaged or unsupported archive: %s",
			                 archive_error_string(a) ? archive_error_string(a)
			                                         : "unreadable");
		if (stg__cancelled(s->ctx))
			return stg__fail(s->ctx, STG_EINTR, "interrupted");
		const char *raw = archive_entry_pathname(ae);
		if (!raw)
			return stg__fail(s->ctx, STG_ECORRUPT,
			                 "damaged archive: an entry without a name");
		if (!strcmp(raw, ".") || !strcmp(raw, "./"))
			continue;
		if (raw[0] == '/')
			return hostile(s, "absolute path", raw);
		if (!clean_path(raw, path, sizeof path))
			return hostile(s, "unsafe path", raw);
		size_t upto;
		if (!parents_are_dirs(s, path, &upto))
			return hostile(s, "a path under a file or link", path);
		if (archive_entry_is_encrypted(ae))
			return stg__fail(
			        s->ctx, STG_ECORRUPT,
			        "'%s' is encrypted: stager cannot stage an encrypted archive",
			        path);
		uint32_t mode = (uint32_t)archive_entry_perm(ae) & 01777; /* no setuid/setgid */
		int64_t mtime = archive_entry_mtime_is_set(ae) ? archive_entry_mtime(ae) : 0;
		long nsec = archive_entry_mtime_is_set(ae) ? archive_entry_mtime_nsec(ae) : 0;
		if (nsec < 0 || nsec > 999999999)
			nsec = 0;
		const char *hl = archive_entry_hardlink(ae);
		mode_t type = archive_entry_filetype(ae);
		const char *base;
		int pfd = parent_fd(s, path, true, &base);
		if (pfd < 0)
			return stg__fail_errno(s->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot create the parents of '%s'", path);
		/* a later entry of a name replaces the earlier one (tar -r):
		 * its file no longer counts */
		uint32_t prev = lookup(s, path, strlen(path));
		if (prev != UINT32_MAX && s->items[prev].type == STG_FILE) {
			s->files--;
			if (s->items[prev].written) {
				s->content -= s->items[prev].size;
				s->disk -= (s->items[prev].size + 4095) / 4096 * 4096;
			}
		}
		uint8_t t;
		XXH128_canonical_t h;
		uint64_t size = 0;
		bool written = false;
		if (hl) {
			if (hl[0] == '/' || !clean_path(hl, target, sizeof target))
				return hostile(s, "hardlink to an unsafe path", hl);
			uint32_t i = lookup(s, target, strlen(target));
			if (i == UINT32_MAX || s->items[i].type != STG_FILE)
				return hostile(s,
				               "hardlink to something that is not an earlier file",
				               path);
			if (lookup(s, path, strlen(path)) != UINT32_MAX)
				unlinkat(pfd, base, 0);
			if (linkat(s->rootfd, target, pfd, base, 0))
				return stg__fail_errno(s->ctx, STG_EIO, errno, "cannot link '%s'",
				                       path);
			t = STG_FILE;
			s->files++;
		} else if (type == AE_IFREG) {
			int64_t hint = archive_entry_size_is_set(ae) ? archive_entry_size(ae) : -1;
			/* a file the archive says is larger than the room left is
			 * refused before any of it is written (a sparse one takes
			 * only its data) */
			if (hint > (1 << 20) && archive_entry_sparse_count(ae) == 0 &&
			    (err = space_check(s, (uint64_t)hint, path)))
				return err;
			if ((err = write_file(s, a, pfd, base, path, mode, hint, &h, &size)))
				return err;
			written = true;
			s->files++;
			s->content += size;
			s->disk += (size + 4095) / 4096 * 4096;
			t = STG_FILE;
		} else if (type == AE_IFDIR) {
			if (prev != UINT32_MAX && s->items[prev].type != STG_DIR)
				return hostile(s, "a directory over a file or link", path);
			if (mkdirat(pfd, base, 0700) && errno != EEXIST)
				return stg__fail_errno(s->ctx, STG_EIO, errno, "cannot create '%s'",
				                       path);
			s->disk += 4096;
			t = STG_DIR;
		} else if (type == AE_IFLNK) {
			const char *lt = archive_entry_symlink(ae);
			if (!lt || !*lt || strlen(lt) > STG_PATH_MAX)
				return hostile(s, "symlink without a valid target", path);
			if (lookup(s, path, strlen(path)) != UINT32_MAX)
				return hostile(s, "a link over another entry", path);
			snprintf(target, sizeof target, "%s", lt);
			t = STG_SYMLINK;
		} else {
			return hostile(s,
			               type == AE_IFCHR || type == AE_IFBLK ? "device node"
			               : type == AE_IFIFO                   ? "FIFO"
			                                                    : "special file",
			               path);
		}
		if ((err = remember(s, path, t == STG_SYMLINK ? target : NULL, t, mode, mtime,
		                    nsec)))
			return err;
		uint32_t idx = (uint32_t)(s->n - 1);
		if (written) {
			s->items[idx].written = true;
			s->items[idx].size = size;
			memcpy(s->items[idx].xxh3, h.digest, 16);
		}
		/* the map points at the latest entry of a name */
		const char *key = s->items[idx].path;
		if (stg__strmap_set(&s->map, key, strlen(key), idx) < 0 ||
		    note_parents(s, key, upto))
			return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	}
	return STG_OK;
}

/* Links, then metadata, once every entry is known. */
static stg_err finish(ar_state *s, bool read_only)
{
	stg__strmap_free(&s->dirs);
	if (stg__strmap_init(&s->dirs, s->n))
		return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	for (size_t i = 0; i < s->n; i++) {
		ar_item *it = &s->items[i];
		if (lookup(s, it->path, strlen(it->path)) != i)
			continue; /* replaced by a later entry */
		if (stg__cancelled(s->ctx))
			return stg__fail(s->ctx, STG_EINTR, "interrupted");
		size_t upto;
		if (!parents_are_dirs(s, it->path, &upto))
			return hostile(s, "a path under a file or link", it->path);
		if (note_parents(s, it->path, upto))
			return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
		if (it->type == STG_SYMLINK &&
		    !stg__symlink_ok(it->path, it->link, is_symlink_cb, s))
			return hostile(s, "symlink leading outside the destination", it->path);
	}
	/* the manifest: one line per name, the file its latest entry wrote */
	for (size_t i = 0; i < s->n; i++) {
		const ar_item *it = &s->items[i];
		if (it->written && lookup(s, it->path, strlen(it->path)) == i)
			stg__manifest_line(s->manifest, it->xxh3, it->size, it->path);
	}
	for (size_t i = 0; i < s->n; i++) {
		ar_item *it = &s->items[i];
		if (lookup(s, it->path, strlen(it->path)) != i ||
		    (it->type != STG_SYMLINK && it->type != STG_FILE))
			continue;
		if (stg__cancelled(s->ctx))
			return stg__fail(s->ctx, STG_EINTR, "interrupted");
		struct timespec ts[2] = {{0, UTIME_OMIT}, {it->mtime, it->nsec}};
		mode_t mode = read_only ? it->mode & ~0222u : it->mode;
		const char *base;
		int pfd = parent_fd(s, it->path, false, &base);
		int rc = -1;
		if (pfd >= 0 && it->type == STG_SYMLINK)
			rc = symlinkat(it->link, pfd, base) ||
			     utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
		else if (pfd >= 0)
			rc = fchmodat(pfd, base, mode, 0) ||
			     utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
		if (rc)
			return stg__fail_errno(s->ctx, STG_EIO, errno, "cannot finish '%s'",
			                       it->path);
	}
	/* directories last, deepest first, so creating children does not
	 * change their mtimes and read-only ones were writable until now */
	for (size_t i = s->n; i-- > 0;) {
		ar_item *it = &s->items[i];
		if (it->type != STG_DIR || lookup(s, it->path, strlen(it->path)) != i)
			continue;
		if (stg__cancelled(s->ctx))
			return stg__fail(s->ctx, STG_EINTR, "interrupted");
		struct timespec ts[2] = {{0, UTIME_OMIT}, {it->mtime, it->nsec}};
		mode_t mode = (read_only ? it->mode & ~0222u : it->mode) | 0500;
		const char *base;
		int pfd = parent_fd(s, it->path, false, &base);
		if (pfd < 0 || fchmodat(pfd, base, mode, 0) ||
		    utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW))
			return stg__fail_errno(s->ctx, STG_EIO, errno, "cannot finish '%s'",
			                       it->path);
	}
	return STG_OK;
}

static void ar_state_free(ar_state *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->items[i].path);
		free(s->items[i].link);
	}
	free(s->items);
	stg__strmap_free(&s->map);
	stg__strmap_free(&s->dirs);
	stg__dircur_free(&s->cur);
}

stg_err stg__archive_unpack(stg_ctx *ctx, stg_cache *c, const stg_source *from, int tfd, int dfd,
                            volatile uint64_t *progress, stg_unpacked *out)
{
	stg_err err = STG_OK;
	ar_src src = {.src = from, .size = (uint64_t)from->st.st_size, .progress = progress};
	ar_state s = {.ctx = ctx, .rootfd = dfd, .progress = progress};
	struct archive *a = archive_read_new();
	src.buf = stg__io_alloc(BLOCK);
	src.sha = EVP_MD_CTX_new();
	int mfd = -1;
	stg__dircur_init(&s.cur, dfd);
	if (!a || !src.buf || !src.sha || stg__strmap_init(&s.map, 1024) ||
	    stg__strmap_init(&s.dirs, 1024)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	EVP_DigestInit_ex(src.sha, EVP_sha256(), NULL);
	if ((mfd = openat(tfd, "manifest", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                  0400)) < 0 ||
	    !(s.manifest = fdopen(mfd, "w"))) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot create a cache entry in '%s'",
		                      c->root);
		goto out;
	}
	mfd = -1;
	stg_space sp;
	if (stg__space(ctx, c, &sp) == STG_OK)
		s.min_free = sp.min_free;
	/* every format but mtree (whose entries name files on this machine
	 * to read content from) and raw */
	archive_read_support_filter_all(a);
	archive_read_support_format_7zip(a);
	archive_read_support_format_ar(a);
	archive_read_support_format_cab(a);
	archive_read_support_format_cpio(a);
	archive_read_support_format_iso9660(a);
	archive_read_support_format_lha(a);
	archive_read_support_format_rar(a);
	archive_read_support_format_rar5(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_warc(a);
	archive_read_support_format_xar(a);
	archive_read_support_format_zip(a);
	archive_read_set_seek_callback(a, ar_seek);
	if (archive_read_open(a, &src, NULL, ar_read, NULL) != ARCHIVE_OK) {
		err = src.err ? stg__fail_errno(ctx, STG_EIO, src.err, "cannot read the archive")
		              : stg__fail(ctx, STG_ECORRUPT,
		                          "not an archive stager can read: %s (make a pack with "
		                          "'stager pack')",
		                          archive_error_string(a) ? archive_error_string(a)
		                                                  : "unknown format");
		goto out;
	}
	if ((err = read_archive(&s, a)))
		goto out;
	if (src.err) {
		err = stg__fail_errno(ctx, STG_EIO, src.err, "cannot read the archive");
		goto out;
	}
	/* the identity of an archive is all of its bytes */
	if (hash_rest(&src)) {
		err = stg__fail_errno(ctx, STG_EIO, src.err, "cannot read the archive");
		goto out;
	}
	if ((err = finish(&s, true)))
		goto out;
	fchmod(dfd, 0555);
	if (stg__manifest_close(s.manifest)) {
		s.manifest = NULL;
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot write the manifest");
		goto out;
	}
	s.manifest = NULL;
	unsigned int hl = 0;
	EVP_DigestFinal_ex(src.sha, out->sha, &hl);
	out->bytes = src.bytes;
	out->files = s.files;
	out->content = s.content;
	out->disk = s.disk;
out:
	if (s.manifest)
		fclose(s.manifest);
	if (mfd >= 0)
		close(mfd);
	if (a)
		archive_read_free(a);
	EVP_MD_CTX_free(src.sha);
	free(src.buf);
	ar_state_free(&s);
	return err;
}
