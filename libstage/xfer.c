/*
 * xfer.c - push, pull and serve: a tree sent over a pipe pair (ssh), as a
 * delta against what the receiver has, verified, resumable, switched in
 * atomically.  The frames are proto.c's.
 *
 * The sender walks its tree (not following links) and hashes every file
 * once (XXH3-128), and sends the manifest with the tree digest: a SHA-256
 * over every entry's wire encoding in order, which holds path, type, mode,
 * mtime, size, link target and XXH3.  The receiver checks every file's
 * bytes at their final path against its XXH3 once (as they arrive, or when
 * it finds them already there) and the digest over the manifest it built
 * from; so each side reads each file once, and the tree as a whole, every
 * file's content included through its XXH3, is checked end to end.
 *
 * The receiver of DEST builds the new version in DEST's sibling
 * ".stager-partial.NAME", a stable name, so that a push interrupted at any
 * moment leaves its completed files there for the next one.  For each file
 * of the manifest it looks, in the partial directory and then in DEST, for
 * a file of the same size and XXH3: reused (kept, or hardlinked from DEST
 * when its mode and mtime agree, else copied), so an unchanged file costs
 * no signature at all.  Otherwise it asks for it: with a librsync
 * signature of the old file at that path when there is one (the sender
 * answers with a delta), else whole.  Every received file is written under
 * a temporary name, checked against its XXH3 and only then renamed to its
 * path: the partial directory holds nothing but complete, checked files.
 *
 * When all has arrived, anything in the partial directory that the manifest
 * does not name was removed (at the start), links are made, every file not
 * checked in this run (a local copy) is read back, and the digest is
 * compared with the sender's; only then are
 * directory modes set and the tree switched with DEST by
 * renameat2(RENAME_EXCHANGE) (rename for a first push), and the old version
 * removed.  Files of DEST are never written: reuse links or copies them, and
 * a file that needs new metadata is copied first.  So kill -9 of either side
 * leaves DEST as it was, and readers see the old tree or the new one.
 *
 * Confinement: every path the receiver touches is resolved with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) under the partial directory
 * or DEST, manifest paths must be clean and relative with directory parents,
 * and symlinks are data (created last, never followed).  Pushes into one
 * directory are serialised by a flock on it.
 */
#include "proto.h"
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <librsync.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK         STG_WIRE_CHUNK
#define ENTRIES_MAX   (16u << 20)
#define SIG_TOTAL_MAX ((size_t)512 << 20) /* signatures a sender holds at once */

/* ---- confined filesystem access ---------------------------------------- */

static int open_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	                       .mode = (flags & O_CREAT) ? mode : 0,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
	                                  RESOLVE_NO_MAGICLINKS};
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	if (fd < 0 && errno == ENOSYS)
		return openat(dirfd, path, flags | O_CLOEXEC | O_NOFOLLOW, mode);
	return (int)fd;
}

/* The directory that holds path, opened beneath root; *base is path's last
 * component.  -1/errno. */
static int parent_of(int root, const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		*base = path;
		return fcntl(root, F_DUPFD_CLOEXEC, 0);
	}
	char dir[STG_PATH_MAX + 1];
	size_t n = (size_t)(slash - path);
	memcpy(dir, path, n);
	dir[n] = '\0';
	*base = slash + 1;
	return open_beneath(root, dir, O_RDONLY | O_DIRECTORY, 0);
}

static int hash_fd(int fd, XXH128_hash_t *h, uint64_t *size, EVP_MD_CTX *sha, uint8_t *buf)
{
	XXH3_state_t *xs = XXH3_createState();
	if (!xs)
		return -1;
	XXH3_128bits_reset(xs);
	*size = 0;
	int rc = 0;
	for (;;) {
		ssize_t n = read(fd, buf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -1;
			break;
		}
		if (n == 0)
			break;
		XXH3_128bits_update(xs, buf, (size_t)n);
		if (sha)
			EVP_DigestUpdate(sha, buf, (size_t)n);
		*size += (uint64_t)n;
	}
	*h = XXH3_128bits_digest(xs);
	XXH3_freeState(xs);
	return rc;
}

/* ---- librsync jobs ------------------------------------------------------- */

typedef stg_err (*sink_fn)(void *arg, const uint8_t *p, size_t n);

/* Give a job n bytes of input (eof: the last), passing its output to sink.
 * Returns with *done set when the job has finished. */
static stg_err job_feed(stg_ctx *ctx, rs_job_t *job, const uint8_t *in, size_t n, bool eof,
                        uint8_t *out, sink_fn sink, void *arg, bool *done)
{
	rs_buffers_t b = {.next_in = (char *)in, .avail_in = n, .eof_in = eof};
	*done = false;
	for (;;) {
		size_t before_in = b.avail_in;
		b.next_out = (char *)out;
		b.avail_out = BLOCK;
		rs_result r = rs_job_iter(job, &b);
		size_t produced = BLOCK - b.avail_out;
		if (produced && sink) {
			stg_err err = sink(arg, out, produced);
			if (err)
				return err;
		}
		if (r == RS_DONE) {
			*done = true;
			return STG_OK;
		}
		if (r != RS_BLOCKED)
			return stg__fail(ctx, STG_ECORRUPT, "librsync: %s", rs_strerror(r));
		if (produced || b.avail_in != before_in)
			continue;
		if (!eof && b.avail_in == 0)
			return STG_OK; /* wants more input */
		return stg__fail(ctx, STG_ECORRUPT, "librsync: a truncated stream");
	}
}

/* Run a job over all of fd (or of mem when fd < 0). */
static stg_err job_run(stg_ctx *ctx, rs_job_t *job, int fd, const uint8_t *mem, size_t mem_len,
                       uint8_t *inbuf, uint8_t *out, sink_fn sink, void *arg)
{
	bool done = false;
	if (fd < 0)
		return job_feed(ctx, job, mem, mem_len, true, out, sink, arg, &done);
	while (!done) {
		ssize_t n = read(fd, inbuf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return stg__fail_errno(ctx, STG_EIO, errno, "reading");
		stg_err err = job_feed(ctx, job, inbuf, (size_t)n, n == 0, out, sink, arg, &done);
		if (err)
			return err;
		if (stg__cancelled(ctx))
			return stg__fail(ctx, STG_EINTR, "interrupted");
	}
	return STG_OK;
}

/* ---- the sender ------------------------------------------------------------ */

typedef struct want {
	uint32_t idx;
	uint8_t kind;
	uint8_t *sig;
	size_t sig_len;
} want;

typedef struct sender {
	stg_ctx *ctx;
	stg_wire *w;
	int root;
	stg_wentry *e;
	size_t n;
	uint8_t *buf, *out;
	uint64_t done, total; /* progress */
	const char *what;
} sender;

static void progress(stg_ctx *ctx, const char *what, uint64_t done, uint64_t total)
{
	if (ctx->progress_fn)
		ctx->progress_fn(ctx->progress_arg, what, done, total);
}

static stg_err send_chunk(void *arg, const uint8_t *p, size_t n)
{
	sender *s = arg;
	return stg__wire_send_data(s->w, p, n);
}

/* Walk and hash the tree at root into s->e; digest receives the tree's. */
static stg_err build_manifest(sender *s, uint8_t digest[32], stg_xfer_result *res)
{
	stg_walk wk = {.ctx = s->ctx};
	stg_err err = stg__walk_tree(&wk, s->root, "");
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	stg_strmap inodes;
	char(*keys)[48] = NULL;
	bool map = false;
	if (err)
		goto out;
	if (!sha || stg__strmap_init(&inodes, 64) || !(s->e = calloc(wk.n + 1, sizeof *s->e)) ||
	    !(keys = calloc(wk.n + 1, sizeof *keys))) {
		err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	map = true;
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	uint8_t enc[STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1)];
	for (size_t i = 0; i < wk.n; i++) {
		stg_witem *it = &wk.v[i];
		stg_wentry *e = &s->e[s->n];
		e->mode = it->st.st_mode & 07777;
		e->mtime = it->st.st_mtim.tv_sec;
		e->mtime_nsec = (uint32_t)it->st.st_mtim.tv_nsec;
		e->path = it->path;
		it->path = NULL;
		if (S_ISDIR(it->st.st_mode)) {
			e->type = STG_DIR;
			res->dirs++;
		} else if (S_ISLNK(it->st.st_mode)) {
			e->type = STG_SYMLINK;
			e->link = it->link;
			it->link = NULL;
			res->links++;
		} else {
			e->type = STG_FILE;
			if (it->st.st_nlink > 1) {
				int kl = snprintf(keys[i], sizeof keys[i], "%llx:%llx",
				                  (unsigned long long)it->st.st_dev,
				                  (unsigned long long)it->st.st_ino);
				uint32_t first = stg__strmap_get(&inodes, keys[i], (size_t)kl);
				if (first != UINT32_MAX) {
					e->type = STG_HARDLINK;
					if (!(e->link = strdup(s->e[first].path))) {
						err = stg__fail(s->ctx, STG_ENOMEM,
						                "out of memory");
						goto out;
					}
					res->links++;
				} else if (stg__strmap_put(&inodes, keys[i], (size_t)kl,
				                           (uint32_t)s->n) < 0) {
					err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
					goto out;
				}
			}
		}
		if (e->type == STG_FILE) {
			int fd = open_beneath(s->root, e->path, O_RDONLY, 0);
			XXH128_hash_t h;
			if (fd < 0 || hash_fd(fd, &h, &e->size, NULL, s->buf)) {
				err = stg__fail_errno(s->ctx, STG_ENOENT, errno, "cannot read '%s'",
				                      e->path);
				if (fd >= 0)
					close(fd);
				s->n++;
				goto out;
			}
			close(fd);
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, h);
			memcpy(e->xxh3, c.digest, 16);
			res->files++;
			res->content_bytes += e->size;
		}
		s->n++;
		EVP_DigestUpdate(sha, enc, stg__wentry_encode(e, enc));
		if (stg__cancelled(s->ctx)) {
			err = stg__fail(s->ctx, STG_EINTR, "interrupted");
			goto out;
		}
	}
	unsigned dl;
	EVP_DigestFinal_ex(sha, digest, &dl);
out:
	if (map)
		stg__strmap_free(&inodes);
	free(keys);
	EVP_MD_CTX_free(sha);
	stg__walk_free(&wk);
	return err;
}

static stg_err send_file(sender *s, const want *wt, stg_xfer_result *res)
{
	const stg_wentry *e = &s->e[wt->idx];
	uint8_t hdr[5];
	stg__put32(hdr, wt->idx);
	hdr[4] = wt->kind;
	stg_err err = stg__wire_send(s->w, STG_W_FILE, hdr, sizeof hdr, NULL, 0);
	if (err)
		return err;
	int fd = open_beneath(s->root, e->path, O_RDONLY, 0);
	if (fd < 0)
		return stg__fail_errno(s->ctx, STG_ENOENT, errno, "cannot read '%s'", e->path);
	rs_signature_t *sig = NULL;
	rs_job_t *job = NULL;
	if (wt->kind == STG_WANT_WHOLE) {
		uint64_t total = 0;
		for (;;) {
			ssize_t n = read(fd, s->buf, BLOCK);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				err = stg__fail_errno(s->ctx, STG_EIO, errno, "reading '%s'",
				                      e->path);
				goto out;
			}
			if (n == 0)
				break;
			total += (uint64_t)n;
			if (total > e->size)
				break;
			if ((err = stg__wire_send_data(s->w, s->buf, (size_t)n)))
				goto out;
			s->done += (uint64_t)n;
			progress(s->ctx, s->what, s->done, s->total);
		}
		if (total != e->size) {
			err = stg__fail(s->ctx, STG_EIO,
			                "'%s' changed while it was sent; push again", e->path);
			goto out;
		}
		res->whole_files++;
	} else {
		/* load the receiver's signature, index it, and send the delta */
		job = rs_loadsig_begin(&sig);
		if (!job) {
			err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
			goto out;
		}
		err = job_run(s->ctx, job, -1, wt->sig, wt->sig_len, NULL, s->out, NULL, NULL);
		rs_job_free(job);
		job = NULL;
		if (err) {
			err = stg__fail(s->ctx, STG_ECORRUPT,
			                "a bad signature for '%s' from the far end", e->path);
			goto out;
		}
		rs_result r = rs_build_hash_table(sig);
		if (r != RS_DONE) {
			err = stg__fail(s->ctx, STG_ECORRUPT, "signature of '%s': %s", e->path,
			                rs_strerror(r));
			goto out;
		}
		if (!(job = rs_delta_begin(sig))) {
			err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
			goto out;
		}
		err = job_run(s->ctx, job, fd, NULL, 0, s->buf, s->out, send_chunk, s);
		if (err)
			goto out;
		s->done += e->size;
		progress(s->ctx, s->what, s->done, s->total);
		res->delta_files++;
	}
	res->sent_content += e->size;
	err = stg__wire_send(s->w, STG_W_FILE_END, NULL, 0, NULL, 0);
out:
	if (job)
		rs_job_free(job);
	if (sig)
		rs_free_sumset(sig);
	close(fd);
	return err;
}

/* Read the receiver's wants (and the signatures of its old files). */
static stg_err read_wants(sender *s, want **out, size_t *count)
{
	want *v = NULL;
	size_t n = 0, cap = 0, sigs = 0;
	stg_err err = STG_OK;
	bool *seen = calloc(s->n + 1, 1);
	if (!seen)
		return stg__fail(s->ctx, STG_ENOMEM, "out of memory");
	for (;;) {
		uint8_t t;
		const uint8_t *p;
		uint32_t len;
		if ((err = stg__wire_read(s->w, &t, &p, &len)))
			break;
		if (t == STG_W_WANTS_END)
			break;
		if (t == STG_W_SIG && n && v[n - 1].kind == STG_WANT_DELTA) {
			want *wt = &v[n - 1];
			sigs += len;
			if (sigs > SIG_TOTAL_MAX) {
				err = stg__fail(s->ctx, STG_EREMOTE,
				                "the far end sent over %zu MiB of signatures",
				                SIG_TOTAL_MAX >> 20);
				break;
			}
			uint8_t *ns = realloc(wt->sig, wt->sig_len + len + 1);
			if (!ns) {
				err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
				break;
			}
			wt->sig = ns;
			memcpy(wt->sig + wt->sig_len, p, len);
			wt->sig_len += len;
			continue;
		}
		if (t != STG_W_WANT || len != 5) {
			err = stg__fail(s->ctx, STG_EREMOTE, "protocol error: a bad request");
			break;
		}
		uint32_t idx = stg__get32(p);
		if (idx >= s->n || s->e[idx].type != STG_FILE || seen[idx] || p[4] > 1) {
			err = stg__fail(s->ctx, STG_EREMOTE,
			                "protocol error: a request for entry %u", idx);
			break;
		}
		seen[idx] = true;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			want *nv = realloc(v, cap * sizeof *nv);
			if (!nv) {
				err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
				break;
			}
			v = nv;
		}
		v[n++] = (want){.idx = idx, .kind = p[4]};
		s->total += s->e[idx].size;
	}
	free(seen);
	*out = v;
	*count = n;
	return err;
}

static stg_err send_tree(stg_ctx *ctx, stg_wire *w, const char *dir, const char *what,
                         stg_xfer_result *res)
{
	sender s = {.ctx = ctx, .w = w, .root = -1, .what = what};
	want *wants = NULL;
	size_t n_wants = 0;
	stg_err err = STG_OK;
	s.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.root < 0) {
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                      "cannot open the directory '%s'", dir);
		goto out;
	}
	s.buf = malloc(BLOCK);
	s.out = malloc(BLOCK);
	if (!s.buf || !s.out) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	uint8_t digest[32];
	if ((err = build_manifest(&s, digest, res)))
		goto out;
	/* entries in batches, compressed: paths and metadata repeat a lot */
	size_t bl = 0;
	for (size_t i = 0; i < s.n && !err; i++) {
		if (bl + 2 + STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1) > BLOCK) {
			err = stg__wire_send_chunk(w, STG_W_ENTRY, s.out, bl);
			bl = 0;
		}
		size_t n = stg__wentry_encode(&s.e[i], s.out + bl + 2);
		s.out[bl] = (uint8_t)n;
		s.out[bl + 1] = (uint8_t)(n >> 8);
		bl += 2 + n;
	}
	if (!err && bl)
		err = stg__wire_send_chunk(w, STG_W_ENTRY, s.out, bl);
	uint8_t end[52];
	stg__put64(end, s.n);
	memcpy(end + 8, digest, 32);
	struct stat rst;
	if (fstat(s.root, &rst)) {
		err = stg__fail_errno(ctx, STG_ENOENT, errno, "cannot read '%s'", dir);
		goto out;
	}
	stg__put32(end + 40, rst.st_mode & 07777);
	stg__put64(end + 44, (uint64_t)rst.st_mtim.tv_sec);
	if (err || (err = stg__wire_send(w, STG_W_ENTRIES_END, end, sizeof end, NULL, 0)) ||
	    (err = read_wants(&s, &wants, &n_wants)))
		goto out;
	progress(ctx, what, 0, s.total);
	for (size_t i = 0; i < n_wants && !err; i++) {
		err = send_file(&s, &wants[i], res);
		free(wants[i].sig);
		wants[i].sig = NULL;
	}
	const uint8_t *p;
	uint32_t len;
	if (err || (err = stg__wire_send(w, STG_W_DONE, NULL, 0, NULL, 0)) ||
	    (err = stg__wire_expect(w, STG_W_PUBLISHED, &p, &len)))
		goto out;
	res->reused_files = res->files - res->whole_files - res->delta_files;
out:
	for (size_t i = 0; i < n_wants; i++)
		free(wants[i].sig);
	free(wants);
	for (size_t i = 0; i < s.n; i++)
		stg__wentry_free(&s.e[i]);
	free(s.e);
	free(s.buf);
	free(s.out);
	if (s.root >= 0)
		close(s.root);
	return err;
}

/* ---- the receiver ------------------------------------------------------- */

enum { BASIS_NONE, BASIS_PARTIAL, BASIS_DEST };

typedef struct rentry {
	stg_wentry e;
	uint8_t basis; /* where the old version of a wanted file lives */
	bool wanted;   /* asked of the sender */
	bool received;
	bool checked; /* its bytes at its path matched its XXH3 in this run */
} rentry;

typedef struct receiver {
	stg_ctx *ctx;
	stg_wire *w;
	int parent, part, dest; /* dest: -1 on a first push */
	char *name, *part_name;
	bool pack;        /* publish a pack (name ends in .tar.zst), not a tree */
	char *dir;        /* the parent's path (for the pack writer) */
	char *basis_name; /* --pack: the old pack unpacked, as a basis */
	rentry *r;
	size_t n, cap;
	stg_strmap paths;
	bool map;
	uint8_t digest[32];
	uint32_t root_mode; /* of the sender's tree */
	int64_t root_mtime;
	uint8_t *buf, *out;
	unsigned tmp_seq;
	uint64_t done, total;
	const char *what;
} receiver;

/* One entry of the manifest, checked against those before it. */
static stg_err add_entry(void *arg, const uint8_t *p, uint32_t len)
{
	receiver *rc = arg;
	if (rc->n >= ENTRIES_MAX)
		return stg__fail(rc->ctx, STG_ECORRUPT, "over %u entries", ENTRIES_MAX);
	if (rc->n == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 1024;
		rentry *nv = realloc(rc->r, cap * sizeof *nv);
		if (!nv)
			return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
		rc->r = nv;
		rc->cap = cap;
	}
	rentry *re = &rc->r[rc->n];
	memset(re, 0, sizeof *re);
	stg_err err = stg__wentry_decode(rc->ctx, p, len, &re->e);
	if (err)
		return err;
	rc->n++;
	const char *path = re->e.path;
	/* parents first, and only directories as parents */
	const char *slash = strrchr(path, '/');
	if (slash) {
		uint32_t pi = stg__strmap_get(&rc->paths, path, (size_t)(slash - path));
		if (pi == UINT32_MAX || rc->r[pi].e.type != STG_DIR)
			return stg__fail(rc->ctx, STG_ECORRUPT,
			                 "refusing '%s': its parent is not a directory of the tree",
			                 path);
	}
	if (re->e.type == STG_HARDLINK) {
		uint32_t ti = stg__strmap_get(&rc->paths, re->e.link, strlen(re->e.link));
		if (ti == UINT32_MAX || rc->r[ti].e.type != STG_FILE)
			return stg__fail(
			        rc->ctx, STG_ECORRUPT,
			        "refusing '%s': a hardlink to what is not a file before it", path);
	}
	int put = stg__strmap_put(&rc->paths, path, strlen(path), (uint32_t)(rc->n - 1));
	if (put < 0)
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	if (put == 0)
		return stg__fail(rc->ctx, STG_ECORRUPT, "'%s' twice in the manifest", path);
	return STG_OK;
}

static stg_err read_manifest(receiver *rc)
{
	for (;;) {
		uint8_t t;
		const uint8_t *p;
		uint32_t len;
		stg_err err = stg__wire_read(rc->w, &t, &p, &len);
		if (err)
			return err;
		if (t == STG_W_ENTRIES_END) {
			if (len != 52 || stg__get64(p) != rc->n)
				return stg__fail(rc->ctx, STG_ECORRUPT,
				                 "the manifest arrived incomplete");
			memcpy(rc->digest, p + 8, 32);
			rc->root_mode = stg__get32(p + 40) & 01777;
			rc->root_mtime = (int64_t)stg__get64(p + 44);
			return STG_OK;
		}
		if (t != STG_W_ENTRY)
			return stg__fail(rc->ctx, STG_EREMOTE,
			                 "protocol error: message %u in the manifest", t);
		if ((err = stg__entries_decode(rc->w, p, len, add_entry, rc)))
			return err;
	}
}

/* Remove from the partial directory what the manifest does not hold as it
 * is there (and every link: links are made again at the end). */
static stg_err clean_partial(receiver *rc)
{
	stg_walk wk = {.ctx = rc->ctx};
	stg_err err = stg__walk_tree(&wk, rc->part, "");
	for (size_t k = wk.n; k-- > 0 && !err;) {
		stg_witem *it = &wk.v[k];
		uint32_t i = stg__strmap_get(&rc->paths, it->path, strlen(it->path));
		bool keep = false;
		if (i != UINT32_MAX) {
			uint8_t t = rc->r[i].e.type;
			keep = (t == STG_DIR && S_ISDIR(it->st.st_mode)) ||
			       (t == STG_FILE && S_ISREG(it->st.st_mode));
		}
		if (keep)
			continue;
		const char *base;
		int pfd = parent_of(rc->part, it->path, &base);
		if (pfd < 0 || stg__rmtree_at(pfd, base))
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot remove '%s'",
			                      it->path);
		if (pfd >= 0)
			close(pfd);
	}
	stg__walk_free(&wk);
	return err;
}

/* Does the regular file at path under root have e's content?  *meta says
 * whether its mode and mtime agree too. */
static bool same_content(receiver *rc, int root, const stg_wentry *e, bool *meta, bool *exists)
{
	*meta = *exists = false;
	if (root < 0)
		return false;
	int fd = open_beneath(root, e->path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	struct stat st;
	bool same = false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		*exists = true;
		XXH128_hash_t h;
		uint64_t size;
		if ((uint64_t)st.st_size == e->size && !hash_fd(fd, &h, &size, NULL, rc->buf)) {
			XXH128_canonical_t c;
			XXH128_canonicalFromHash(&c, h);
			same = size == e->size && !memcmp(c.digest, e->xxh3, 16);
		}
		*meta = (st.st_mode & 07777) == (e->mode & 01777) &&
		        st.st_mtim.tv_sec == e->mtime && st.st_mtim.tv_nsec == e->mtime_nsec;
	}
	close(fd);
	return same;
}

/* A new temporary name in the partial directory's root that no manifest
 * path takes. */
static void tmp_name(receiver *rc, char *out, size_t len)
{
	do
		snprintf(out, len, ".stager-tmp.%u", rc->tmp_seq++);
	while (stg__strmap_get(&rc->paths, out, strlen(out)) != UINT32_MAX);
}

/* Give fd e's metadata and rename tmp (in the partial root) to e's path. */
static stg_err finish_file(receiver *rc, int fd, const char *tmp, const stg_wentry *e)
{
	struct timespec ts[2] = {{0, UTIME_OMIT}, {e->mtime, e->mtime_nsec}};
	if (fchmod(fd, e->mode & 01777) || futimens(fd, ts))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set the mode of '%s'",
		                       e->path);
	const char *base;
	int pfd = parent_of(rc->part, e->path, &base);
	if (pfd < 0 || renameat(rc->part, tmp, pfd, base)) {
		int en = errno;
		if (pfd >= 0)
			close(pfd);
		return stg__fail_errno(rc->ctx, stg__err_from_errno(en, STG_EIO), en,
		                       "cannot write '%s'", e->path);
	}
	close(pfd);
	return STG_OK;
}

/* Copy root's e->path into the partial directory, with e's metadata. */
static stg_err copy_local(receiver *rc, int root, const stg_wentry *e)
{
	char tmp[64];
	tmp_name(rc, tmp, sizeof tmp);
	int s = open_beneath(root, e->path, O_RDONLY, 0);
	int d = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	stg_err err = STG_OK;
	if (s < 0 || d < 0) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot copy '%s'", e->path);
		goto out;
	}
	for (;;) {
		ssize_t n = copy_file_range(s, NULL, d, NULL, 1 << 30, 0);
		if (n == 0)
			break;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		/* no copy_file_range here: plain reads and writes */
		for (;;) {
			ssize_t k = read(s, rc->buf, BLOCK);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0 || stg__write_full(d, rc->buf, (size_t)k))
				break;
		}
		break;
	}
	err = finish_file(rc, d, tmp, e);
out:
	if (s >= 0)
		close(s);
	if (d >= 0)
		close(d);
	if (err)
		unlinkat(rc->part, tmp, 0);
	return err;
}

static stg_err link_from_dest(receiver *rc, const stg_wentry *e)
{
	const char *sb, *db;
	int sp = parent_of(rc->dest, e->path, &sb), dp = parent_of(rc->part, e->path, &db);
	stg_err err = STG_OK;
	if (sp < 0 || dp < 0 || (unlinkat(dp, db, 0) && errno != ENOENT) ||
	    linkat(sp, sb, dp, db, 0))
		err = STG_EIO; /* the caller copies instead */
	if (sp >= 0)
		close(sp);
	if (dp >= 0)
		close(dp);
	return err;
}

static stg_err sig_sink(void *arg, const uint8_t *p, size_t n)
{
	return stg__wire_send(arg, STG_W_SIG, p, n, NULL, 0);
}

/* WANT idx as a delta, with the signature of the old file at root. */
static stg_err send_sig(receiver *rc, uint32_t idx, int root)
{
	const stg_wentry *e = &rc->r[idx].e;
	int fd = open_beneath(root, e->path, O_RDONLY, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", e->path);
	}
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = 0;
	rs_sig_args(st.st_size, &magic, &block_len, &strong_len);
	rs_job_t *job = rs_sig_begin(block_len, strong_len, magic);
	stg_err err = STG_OK;
	uint8_t hdr[5];
	stg__put32(hdr, idx);
	hdr[4] = STG_WANT_DELTA;
	if (!job)
		err = stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	else if (!(err = stg__wire_send(rc->w, STG_W_WANT, hdr, sizeof hdr, NULL, 0)))
		err = job_run(rc->ctx, job, fd, NULL, 0, rc->buf, rc->out, sig_sink, rc->w);
	if (job)
		rs_job_free(job);
	close(fd);
	return err;
}

/* Decide, for every file, whether it is here already; ask for the rest. */
static stg_err plan(receiver *rc, stg_xfer_result *res)
{
	stg_err err = STG_OK;
	for (size_t i = 0; i < rc->n && !err; i++) {
		rentry *re = &rc->r[i];
		const stg_wentry *e = &re->e;
		if (e->type == STG_DIR) {
			/* writable while the tree is built; modes are set at the end */
			const char *base;
			int pfd = parent_of(rc->part, e->path, &base);
			if (pfd < 0 || (mkdirat(pfd, base, 0700) && errno != EEXIST) ||
			    fchmodat(pfd, base, 0700, 0))
				err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO),
				                      errno, "cannot create the directory '%s'",
				                      e->path);
			if (pfd >= 0)
				close(pfd);
			res->dirs++;
			continue;
		}
		if (e->type != STG_FILE) {
			res->links++;
			continue;
		}
		res->files++;
		res->content_bytes += e->size;
		bool meta, in_part, in_dest;
		if (same_content(rc, rc->part, e, &meta, &in_part)) {
			/* it may be a link to DEST's inode: copy, never chmod */
			re->checked = meta;
			if (!meta)
				err = copy_local(rc, rc->part, e);
			res->reused_files++;
			continue;
		}
		if (same_content(rc, rc->dest, e, &meta, &in_dest)) {
			re->checked = meta && link_from_dest(rc, e) == STG_OK;
			if (!re->checked)
				err = copy_local(rc, rc->dest, e);
			res->reused_files++;
			continue;
		}
		re->wanted = true;
		rc->total += e->size;
		if (in_part || in_dest) {
			re->basis = in_part ? BASIS_PARTIAL : BASIS_DEST;
			err = send_sig(rc, (uint32_t)i, in_part ? rc->part : rc->dest);
		} else {
			uint8_t hdr[5];
			stg__put32(hdr, (uint32_t)i);
			hdr[4] = STG_WANT_WHOLE;
			err = stg__wire_send(rc->w, STG_W_WANT, hdr, sizeof hdr, NULL, 0);
		}
		if (stg__cancelled(rc->ctx))
			err = stg__fail(rc->ctx, STG_EINTR, "interrupted");
	}
	if (err)
		return err;
	/* room for what is to come */
	struct statvfs sv;
	if (fstatvfs(rc->part, &sv) == 0) {
		uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
		if (rc->total > avail) {
			char a[16], b[16];
			return stg__fail(rc->ctx, STG_ENOSPC,
			                 "not enough space for '%s': need %s, %s free", rc->name,
			                 stg_format_size(rc->total, a, sizeof a),
			                 stg_format_size(avail, b, sizeof b));
		}
	}
	return stg__wire_send(rc->w, STG_W_WANTS_END, NULL, 0, NULL, 0);
}

/* A file being received. */
typedef struct incoming {
	receiver *rc;
	const stg_wentry *e;
	int fd, basis;
	uint64_t size;
	XXH3_state_t *xs;
} incoming;

static stg_err write_sink(void *arg, const uint8_t *p, size_t n)
{
	incoming *in = arg;
	in->size += n;
	if (in->size > in->e->size)
		return stg__fail(in->rc->ctx, STG_ECORRUPT,
		                 "'%s': more data than its %llu bytes arrived", in->e->path,
		                 (unsigned long long)in->e->size);
	XXH3_128bits_update(in->xs, p, n);
	if (stg__write_full(in->fd, p, n))
		return stg__fail_errno(in->rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write '%s'", in->e->path);
	in->rc->done += n;
	progress(in->rc->ctx, in->rc->what, in->rc->done, in->rc->total);
	return STG_OK;
}

static rs_result basis_copy(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	incoming *in = arg;
	ssize_t n = pread(in->basis, *buf, *len, pos);
	if (n < 0)
		return RS_IO_ERROR;
	if (n == 0)
		return RS_INPUT_ENDED;
	*len = (size_t)n;
	return RS_DONE;
}

static stg_err receive_file(receiver *rc, const uint8_t *p, uint32_t len)
{
	if (len != 5)
		return stg__fail(rc->ctx, STG_EREMOTE, "protocol error: a bad FILE");
	uint32_t idx = stg__get32(p);
	uint8_t kind = p[4];
	if (idx >= rc->n || !rc->r[idx].wanted || rc->r[idx].received || kind > 1 ||
	    (kind == STG_WANT_DELTA) != (rc->r[idx].basis != BASIS_NONE))
		return stg__fail(rc->ctx, STG_EREMOTE,
		                 "protocol error: entry %u was not asked for like this", idx);
	rentry *re = &rc->r[idx];
	incoming in = {.rc = rc, .e = &re->e, .fd = -1, .basis = -1};
	char tmp[64];
	tmp_name(rc, tmp, sizeof tmp);
	rs_job_t *job = NULL;
	stg_err err = STG_OK;
	in.fd = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (in.fd < 0 || !(in.xs = XXH3_createState())) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot create '%s'", re->e.path);
		goto out;
	}
	XXH3_128bits_reset(in.xs);
	if (kind == STG_WANT_DELTA) {
		in.basis = open_beneath(re->basis == BASIS_PARTIAL ? rc->part : rc->dest,
		                        re->e.path, O_RDONLY, 0);
		if (in.basis < 0 || !(job = rs_patch_begin(basis_copy, &in))) {
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read the old '%s'",
			                      re->e.path);
			goto out;
		}
	}
	bool done = false;
	for (;;) {
		uint8_t t;
		const uint8_t *dp;
		uint32_t dl;
		if ((err = stg__wire_read(rc->w, &t, &dp, &dl)))
			goto out;
		if (t == STG_W_FILE_END)
			break;
		if (t != STG_W_DATA) {
			err = stg__fail(rc->ctx, STG_EREMOTE,
			                "protocol error: message %u inside a file", t);
			goto out;
		}
		const uint8_t *raw;
		size_t rl;
		if ((err = stg__wire_data(rc->w, dp, dl, &raw, &rl)))
			goto out;
		if (job) {
			if (done && rl) {
				err = stg__fail(rc->ctx, STG_ECORRUPT, "'%s': data after its delta",
				                re->e.path);
				goto out;
			}
			err = job_feed(rc->ctx, job, raw, rl, false, rc->out, write_sink, &in,
			               &done);
		} else {
			err = write_sink(&in, raw, rl);
		}
		if (err)
			goto out;
	}
	if (job && !done &&
	    (err = job_feed(rc->ctx, job, NULL, 0, true, rc->out, write_sink, &in, &done)))
		goto out;
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(in.xs));
	if (in.size != re->e.size) {
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "'%s' arrived damaged (%llu bytes, expected %llu); nothing was "
		                "published",
		                re->e.path, (unsigned long long)in.size,
		                (unsigned long long)re->e.size);
		goto out;
	}
	if (memcmp(c.digest, re->e.xxh3, 16)) {
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "'%s' arrived damaged (its XXH3-128 does not match the sender's); "
		                "nothing was published",
		                re->e.path);
		goto out;
	}
	if ((err = finish_file(rc, in.fd, tmp, &re->e)))
		goto out;
	re->received = re->checked = true;
out:
	if (job)
		rs_job_free(job);
	XXH3_freeState(in.xs);
	if (in.basis >= 0)
		close(in.basis);
	if (in.fd >= 0)
		close(in.fd);
	if (err)
		unlinkat(rc->part, tmp, 0);
	return err;
}

/* Links, then every file checked and the manifest against the sender's digest. */
static stg_err links_and_verify(receiver *rc)
{
	stg_err err = STG_OK;
	for (size_t i = 0; i < rc->n && !err; i++) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_SYMLINK && e->type != STG_HARDLINK)
			continue;
		const char *base, *tb;
		int pfd = parent_of(rc->part, e->path, &base), tfd = -1;
		if (pfd >= 0 && e->type == STG_SYMLINK) {
			if (symlinkat(e->link, pfd, base) == 0) {
				struct timespec ts[2] = {{0, UTIME_OMIT},
				                         {e->mtime, e->mtime_nsec}};
				utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
			} else {
				err = STG_EIO;
			}
		} else if (pfd >= 0) {
			tfd = parent_of(rc->part, e->link, &tb);
			if (tfd < 0 || linkat(tfd, tb, pfd, base, 0))
				err = STG_EIO;
		}
		if (pfd < 0 || err)
			err = stg__fail_errno(rc->ctx, STG_EIO, errno,
			                      "cannot create the link '%s'", e->path);
		if (pfd >= 0)
			close(pfd);
		if (tfd >= 0)
			close(tfd);
	}
	if (err)
		return err;
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	if (!sha)
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	uint8_t enc[STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1)];
	for (size_t i = 0; i < rc->n && !err; i++) {
		const stg_wentry *e = &rc->r[i].e;
		int fd = e->type == STG_FILE ? open_beneath(rc->part, e->path, O_RDONLY, 0) : -2;
		struct stat st;
		if (fd == -1 || (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode)))) {
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", e->path);
		} else if (fd >= 0 && (!rc->r[i].checked || (uint64_t)st.st_size != e->size)) {
			/* not read in this run (a local copy): read it now */
			XXH128_hash_t h;
			uint64_t size;
			XXH128_canonical_t c;
			if (hash_fd(fd, &h, &size, NULL, rc->buf))
				err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
				                      e->path);
			XXH128_canonicalFromHash(&c, h);
			if (!err && (size != e->size || memcmp(c.digest, e->xxh3, 16)))
				err = stg__fail(rc->ctx, STG_ECORRUPT,
				                "'%s' does not match the sender's checksum",
				                e->path);
		}
		if (fd >= 0)
			close(fd);
		EVP_DigestUpdate(sha, enc, stg__wentry_encode(e, enc));
		if (stg__cancelled(rc->ctx) && !err)
			err = stg__fail(rc->ctx, STG_EINTR, "interrupted");
	}
	uint8_t d[32];
	unsigned dl;
	EVP_DigestFinal_ex(sha, d, &dl);
	EVP_MD_CTX_free(sha);
	if (!err && memcmp(d, rc->digest, 32))
		err = stg__fail(rc->ctx, STG_ECORRUPT,
		                "the tree's SHA-256 does not match the sender's; nothing was "
		                "published");
	return err;
}

/* Directory modes and mtimes, deepest first, then the switch. */
static stg_err publish(receiver *rc)
{
	for (size_t i = rc->n; i-- > 0;) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_DIR)
			continue;
		const char *base;
		int pfd = parent_of(rc->part, e->path, &base);
		struct timespec ts[2] = {{0, UTIME_OMIT}, {e->mtime, e->mtime_nsec}};
		if (pfd < 0 || fchmodat(pfd, base, e->mode & 01777, 0) ||
		    utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW)) {
			int en = errno;
			if (pfd >= 0)
				close(pfd);
			return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot set up '%s'", e->path);
		}
		close(pfd);
	}
	struct timespec ts[2] = {{0, UTIME_OMIT}, {rc->root_mtime, 0}};
	if (fchmod(rc->part, rc->root_mode) || futimens(rc->part, ts))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set up '%s'", rc->name);
	if (rc->pack) {
		/* the pack is written beside PATH and renamed over it when complete */
		char tree[2 * STG_PATH_MAX + 2], out[2 * STG_PATH_MAX + 2];
		snprintf(tree, sizeof tree, "%s/%s", rc->dir, rc->part_name);
		snprintf(out, sizeof out, "%s/%s", rc->dir, rc->name);
		stg_pack_opts po;
		stg_pack_opts_init(&po);
		stg_err err = stg_pack_dir(rc->ctx, tree, out, &po, NULL);
		if (err)
			return err;
		stg__rmtree_at(rc->parent, rc->part_name);
	} else if (rc->dest >= 0) {
		if (renameat2(rc->parent, rc->part_name, rc->parent, rc->name, RENAME_EXCHANGE))
			return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot switch '%s'",
			                       rc->name);
		/* the old version now has the partial name */
		stg__rmtree_at(rc->parent, rc->part_name);
	} else if (renameat2(rc->parent, rc->part_name, rc->parent, rc->name, RENAME_NOREPLACE)) {
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot publish '%s'", rc->name);
	}
	return STG_OK;
}

/* --pack: the files of the pack already at PATH serve as the basis, so a
 * re-push sends deltas as it would for a tree.  A pack that cannot be read
 * is no basis (said once); nothing is sent that would not be otherwise. */
static stg_err unpack_basis(receiver *rc)
{
	stg__rmtree_at(rc->parent, rc->basis_name);
	char pack_path[2 * STG_PATH_MAX + 2], basis[2 * STG_PATH_MAX + 2];
	snprintf(pack_path, sizeof pack_path, "%s/%s", rc->dir, rc->name);
	snprintf(basis, sizeof basis, "%s/%s", rc->dir, rc->basis_name);
	struct stat st;
	if (fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return STG_OK;
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", pack_path);
	}
	if (!S_ISREG(st.st_mode))
		return stg__fail(rc->ctx, STG_EEXIST, "'%s' exists and is not a pack", pack_path);
	stg_pack *p = NULL;
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	if (stg_pack_open(rc->ctx, pack_path, &p) || stg_unpack(rc->ctx, p, basis, &uo, NULL)) {
		stg__log(rc->ctx, STG_LOG_WARN, "'%s' cannot serve as a basis: %s", pack_path,
		         stg_errmsg(rc->ctx));
		stg_pack_close(p);
		return STG_OK;
	}
	stg_pack_close(p);
	rc->dest =
	        openat(rc->parent, rc->basis_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return STG_OK;
}

/* Open DEST's parent (locked), the partial directory and DEST itself. */
static stg_err receiver_open(receiver *rc, const char *dest)
{
	char path[STG_PATH_MAX + 1];
	size_t len = strlen(dest);
	while (len > 1 && dest[len - 1] == '/')
		len--;
	if (len == 0 || len > STG_PATH_MAX)
		return stg__fail(rc->ctx, STG_EUSAGE, "a bad destination '%s'", dest);
	memcpy(path, dest, len);
	path[len] = '\0';
	char *slash = strrchr(path, '/');
	const char *dir = ".";
	if (slash == path) {
		dir = "/";
	} else if (slash) {
		*slash = '\0';
		dir = path;
	}
	const char *name = slash ? slash + 1 : path;
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strlen(name) > 200)
		return stg__fail(rc->ctx, STG_EUSAGE, "'%s' does not name a directory to write",
		                 dest);
	size_t nl = strlen(name);
	bool ext = nl > 8 && !strcmp(name + nl - 8, ".tar.zst");
	if (!(rc->name = malloc(nl + 9)) || !(rc->dir = strdup(dir)) ||
	    !(rc->part_name = malloc(nl + 9 + sizeof ".stager-partial.")) ||
	    !(rc->basis_name = malloc(nl + 9 + sizeof ".stager-basis.")))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	/* --pack: PATH.tar.zst, as collect --pack writes */
	sprintf(rc->name, "%s%s", name, rc->pack && !ext ? ".tar.zst" : "");
	sprintf(rc->part_name, ".stager-partial.%s", rc->name);
	sprintf(rc->basis_name, ".stager-basis.%s", rc->name);
	rc->parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc->parent < 0)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot open '%s' (the directory that will hold '%s')", dir,
		                       name);
	if (flock(rc->parent, LOCK_EX | LOCK_NB)) {
		stg__log(rc->ctx, STG_LOG_INFO, "waiting for another transfer into '%s'", dir);
		if (flock(rc->parent, LOCK_EX))
			return stg__fail_errno(rc->ctx, STG_EINTR, errno, "waiting for a lock");
	}
	if (rc->pack) {
		stg_err err = unpack_basis(rc);
		if (err)
			return err;
	} else {
		rc->dest = openat(rc->parent, rc->name,
		                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (rc->dest < 0 && errno != ENOENT)
			return stg__fail_errno(
			        rc->ctx, errno == ENOTDIR || errno == ELOOP ? STG_EEXIST : STG_EIO,
			        errno, "'%s' exists and is not a directory", dest);
	}
	if (mkdirat(rc->parent, rc->part_name, 0700) && errno != EEXIST)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot create '%s/%s'", dir, rc->part_name);
	rc->part =
	        openat(rc->parent, rc->part_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->part < 0)
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot open '%s/%s'", dir,
		                       rc->part_name);
	fchmod(rc->part, 0700);
	return STG_OK;
}

static stg_err receive_tree(stg_ctx *ctx, stg_wire *w, const char *dest, bool pack,
                            const char *what, stg_xfer_result *res)
{
	receiver rc = {.ctx = ctx,
	               .w = w,
	               .parent = -1,
	               .part = -1,
	               .dest = -1,
	               .pack = pack,
	               .what = what};
	stg_err err = STG_OK;
	rc.buf = malloc(BLOCK);
	rc.out = malloc(BLOCK);
	if (!rc.buf || !rc.out || stg__strmap_init(&rc.paths, 1024)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	rc.map = true;
	if ((err = receiver_open(&rc, dest)) || (err = read_manifest(&rc)) ||
	    (err = clean_partial(&rc)) || (err = plan(&rc, res)))
		goto out;
	progress(ctx, what, 0, rc.total);
	for (;;) {
		uint8_t t;
		const uint8_t *p;
		uint32_t len;
		if ((err = stg__wire_read(w, &t, &p, &len)))
			goto out;
		if (t == STG_W_DONE)
			break;
		if (t != STG_W_FILE) {
			err = stg__fail(ctx, STG_EREMOTE, "protocol error: message %u, not a file",
			                t);
			goto out;
		}
		uint32_t idx = len >= 4 ? stg__get32(p) : 0; /* p is gone after the file */
		if ((err = receive_file(&rc, p, len)))
			goto out;
		rentry *re = &rc.r[idx];
		re->basis != BASIS_NONE ? res->delta_files++ : res->whole_files++;
		res->sent_content += re->e.size;
	}
	for (size_t i = 0; i < rc.n; i++)
		if (rc.r[i].wanted && !rc.r[i].received) {
			err = stg__fail(ctx, STG_ECORRUPT, "'%s' never arrived", rc.r[i].e.path);
			goto out;
		}
	if ((err = links_and_verify(&rc)) || (err = publish(&rc)))
		goto out;
	err = stg__wire_send(w, STG_W_PUBLISHED, NULL, 0, NULL, 0);
out:
	if (rc.map)
		stg__strmap_free(&rc.paths);
	for (size_t i = 0; i < rc.n; i++)
		stg__wentry_free(&rc.r[i].e);
	free(rc.r);
	free(rc.buf);
	free(rc.out);
	if (rc.dest >= 0)
		close(rc.dest);
	if (rc.pack && rc.basis_name && rc.parent >= 0)
		stg__rmtree_at(rc.parent, rc.basis_name);
	free(rc.name);
	free(rc.dir);
	free(rc.part_name);
	free(rc.basis_name);
	if (rc.part >= 0)
		close(rc.part);
	if (rc.parent >= 0)
		close(rc.parent); /* and the lock with it */
	return err;
}

/* ---- the two ends ------------------------------------------------------- */

void stg_xfer_opts_init(stg_xfer_opts *o)
{
	memset(o, 0, sizeof *o);
}

/* Split a command line into words: blanks separate, '...' and "..." quote. */
static char **split_words(const char *s, size_t extra)
{
	size_t cap = strlen(s) / 2 + 2 + extra;
	char **v = calloc(cap, sizeof *v);
	char *buf = malloc(strlen(s) + 1);
	if (!v || !buf) {
		free(v);
		free(buf);
		return NULL;
	}
	size_t n = 0;
	const char *p = s;
	while (*p) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		char *w = buf;
		char q = 0;
		for (; *p && (q || (*p != ' ' && *p != '\t')); p++) {
			if (q && *p == q)
				q = 0;
			else if (!q && (*p == '\'' || *p == '"'))
				q = *p;
			else
				*w++ = *p;
		}
		*w = '\0';
		if (!(v[n++] = strdup(buf)))
			break;
	}
	free(buf);
	return v;
}

static void free_words(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static stg_err spawn(stg_ctx *ctx, const stg_xfer_opts *o, const char *host, pid_t *pid, int *in,
                     int *out)
{
	char **argv = split_words(o->rsh && *o->rsh ? o->rsh : "ssh", 4);
	if (!argv || !argv[0]) {
		free_words(argv);
		return stg__fail(ctx, STG_EUSAGE, "an empty transport command (--rsh)");
	}
	size_t n = 0;
	while (argv[n])
		n++;
	argv[n++] = strdup(host);
	argv[n++] = strdup(o->remote_stager && *o->remote_stager ? o->remote_stager : "stager");
	argv[n++] = strdup("serve");
	int to[2] = {-1, -1}, from[2] = {-1, -1};
	stg_err err = STG_OK;
	if (!argv[n - 1] || !argv[n - 2] || !argv[n - 3]) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if (pipe2(to, O_CLOEXEC) || pipe2(from, O_CLOEXEC)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot make a pipe");
		goto out;
	}
	*pid = fork();
	if (*pid < 0) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot start '%s'", argv[0]);
		goto out;
	}
	if (*pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		_exit(127);
	}
	*out = to[1];
	*in = from[0];
	to[1] = from[0] = -1;
out:
	for (int i = 0; i < 2; i++) {
		if (to[i] >= 0)
			close(to[i]);
		if (from[i] >= 0)
			close(from[i]);
	}
	free_words(argv);
	return err;
}

/* The client's half of a connection over in/out. */
static stg_err client_run(stg_ctx *ctx, uint8_t op, const char *path, const char *local, int in,
                          int out, const stg_xfer_opts *o, stg_xfer_result *res)
{
	stg_wire w;
	stg_bucket bw;
	stg_err err = stg__wire_init(&w, ctx, in, out);
	if (err)
		return err;
	stg__bucket_init(&bw, (double)o->bwlimit);
	if (o->bwlimit)
		w.bw = &bw;
	if (o->level)
		w.level = o->level;
	size_t pl = strlen(path);
	uint8_t hello[14];
	memcpy(hello, STG_WIRE_MAGIC, 8);
	stg__put32(hello + 8, STG_WIRE_VERSION);
	hello[12] = op;
	hello[13] = o->pack ? STG_FLAG_PACK : 0;
	const uint8_t *p;
	uint32_t len;
	if (pl == 0 || pl > STG_PATH_MAX) {
		err = stg__fail(ctx, STG_EUSAGE, "a bad remote path '%s'", path);
		goto out;
	}
	if ((err = stg__wire_send(&w, STG_W_HELLO, hello, sizeof hello, path, pl)) ||
	    (err = stg__wire_expect(&w, STG_W_WELCOME, &p, &len)))
		goto out;
	if (len < 12 || memcmp(p, STG_WIRE_MAGIC, 8)) {
		err = stg__fail(ctx, STG_EREMOTE, "protocol error: not stager at the far end");
		goto out;
	}
	err = op == STG_OP_PUSH ? send_tree(ctx, &w, local, "push", res)
	                        : receive_tree(ctx, &w, local, false, "pull", res);
	if (err)
		stg__wire_send_error(&w, err);
out:
	res->wire_out = w.bytes_out;
	res->wire_in = w.bytes_in;
	stg__bucket_destroy(&bw);
	stg__wire_free(&w);
	return err;
}

/* Split "[USER@]HOST:PATH". */
static stg_err split_remote(stg_ctx *ctx, const char *spec, char **host, const char **path)
{
	const char *colon = strchr(spec, ':');
	const char *slash = strchr(spec, '/');
	if (!colon || colon == spec || (slash && slash < colon) || !colon[1])
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not [USER@]HOST:PATH", spec);
	if (!(*host = strndup(spec, (size_t)(colon - spec))))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*path = colon + 1;
	return STG_OK;
}

static stg_err client(stg_ctx *ctx, uint8_t op, const char *remote, const char *local,
                      const stg_xfer_opts *o, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	char *host = NULL;
	const char *path = NULL;
	int in = -1, out = -1;
	pid_t pid = -1;
	stg_err err = split_remote(ctx, remote, &host, &path);
	struct stat lst;
	/* what is wrong here is said before connecting */
	if (!err && op == STG_OP_PUSH && stat(local, &lst))
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                      "cannot push '%s'", local);
	else if (!err && op == STG_OP_PUSH && !S_ISDIR(lst.st_mode))
		err = stg__fail(ctx, STG_EUSAGE, "'%s' is not a directory (push sends a tree)",
		                local);
	if (!err && (err = spawn(ctx, o, host, &pid, &in, &out)) == STG_OK)
		err = client_run(ctx, op, path, local, in, out, o, res);
	if (out >= 0)
		close(out);
	if (in >= 0)
		close(in);
	if (pid > 0) {
		int st = 0;
		if (err == STG_EINTR)
			kill(pid, SIGTERM);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (err == STG_EREMOTE && !strstr(stg_errmsg(ctx), "the far end:")) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(ctx));
			if (WIFEXITED(st) && WEXITSTATUS(st))
				stg__fail(ctx, err,
				          "%s (the transport exited with status %d: is the host "
				          "reachable, and stager installed there? see --rsh and "
				          "--remote-stager)",
				          msg, WEXITSTATUS(st));
			else if (WIFSIGNALED(st))
				stg__fail(ctx, err, "%s (the transport was killed by signal %d)",
				          msg, WTERMSIG(st));
		}
	}
	free(host);
	res->seconds = stg__now() - t0;
	return err;
}

stg_err stg_push(stg_ctx *ctx, const char *local, const char *remote, const stg_xfer_opts *opts,
                 stg_xfer_result *res)
{
	return client(ctx, STG_OP_PUSH, remote, local, opts, res);
}

stg_err stg_pull(stg_ctx *ctx, const char *remote, const char *local, const stg_xfer_opts *opts,
                 stg_xfer_result *res)
{
	return client(ctx, STG_OP_PULL, remote, local, opts, res);
}

stg_err stg_push_fd(stg_ctx *ctx, const char *local, const char *path, int in, int out,
                    const stg_xfer_opts *opts, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_err err = client_run(ctx, STG_OP_PUSH, path, local, in, out, opts, res);
	res->seconds = stg__now() - t0;
	return err;
}

stg_err stg_pull_fd(stg_ctx *ctx, const char *path, const char *local, int in, int out,
                    const stg_xfer_opts *opts, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_err err = client_run(ctx, STG_OP_PULL, path, local, in, out, opts, res);
	res->seconds = stg__now() - t0;
	return err;
}

stg_err stg_serve(stg_ctx *ctx, int in, int out, stg_xfer_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_wire w;
	stg_err err = stg__wire_init(&w, ctx, in, out);
	if (err)
		return err;
	const uint8_t *p;
	uint32_t len;
	uint8_t op, flags;
	const char *path;
	if ((err = stg__wire_expect(&w, STG_W_HELLO, &p, &len)) ||
	    (err = stg__hello_decode(ctx, p, len, &op, &flags, &path)))
		goto out;
	char *dir = strdup(path);
	uint8_t welcome[12];
	memcpy(welcome, STG_WIRE_MAGIC, 8);
	stg__put32(welcome + 8, STG_WIRE_VERSION);
	if (!dir)
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
	else if (!(err = stg__wire_send(&w, STG_W_WELCOME, welcome, sizeof welcome, NULL, 0)))
		err = op == STG_OP_PUSH
		              ? receive_tree(ctx, &w, dir, flags & STG_FLAG_PACK, "serve", res)
		              : send_tree(ctx, &w, dir, "serve", res);
	free(dir);
out:
	if (err)
		stg__wire_send_error(&w, err);
	res->wire_out = w.bytes_out;
	res->wire_in = w.bytes_in;
	res->seconds = stg__now() - t0;
	stg__wire_free(&w);
	return err;
}

/* ---- for the fuzz target ------------------------------------------------- */

static rs_result zero_basis(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	(void)arg;
	if (pos >= 4096)
		return RS_INPUT_ENDED;
	if (*len > (size_t)(4096 - pos))
		*len = (size_t)(4096 - pos);
	memset(*buf, 'x', *len);
	return RS_DONE;
}

static stg_err fuzz_entry(void *arg, const uint8_t *p, uint32_t len)
{
	stg_wentry e;
	stg_err err = stg__wentry_decode(arg, p, len, &e);
	stg__wentry_free(&e);
	return err;
}

static stg_err fuzz_frames(stg_ctx *ctx, stg_wire *w, uint8_t *out)
{
	rs_job_t *job = NULL;
	rs_signature_t *sig = NULL;
	stg_err err = STG_OK;
	bool done = false;
	for (unsigned k = 0; k < 100000 && !err; k++) {
		uint8_t t, op, flags;
		const uint8_t *p, *raw;
		uint32_t len;
		size_t rl;
		const char *path;
		if ((err = stg__wire_read(w, &t, &p, &len)))
			break;
		switch (t) {
		case STG_W_HELLO: err = stg__hello_decode(ctx, p, len, &op, &flags, &path); break;
		case STG_W_ENTRY: err = stg__entries_decode(w, p, len, fuzz_entry, ctx); break;
		case STG_W_FILE:
		case STG_W_WANT:
			if (job)
				rs_job_free(job);
			if (sig)
				rs_free_sumset(sig);
			job = NULL;
			sig = NULL;
			if (len == 5 && p[4] == STG_WANT_DELTA)
				job = t == STG_W_FILE ? rs_patch_begin(zero_basis, NULL)
				                      : rs_loadsig_begin(&sig);
			done = false;
			break;
		case STG_W_SIG:
			if (job && !done)
				err = job_feed(ctx, job, p, len, false, out, NULL, NULL, &done);
			break;
		case STG_W_DATA:
			if ((err = stg__wire_data(w, p, len, &raw, &rl)))
				break;
			if (job && !done)
				err = job_feed(ctx, job, raw, rl, false, out, NULL, NULL, &done);
			break;
		case STG_W_FILE_END:
		case STG_W_WANTS_END:
			if (job && !done)
				err = job_feed(ctx, job, NULL, 0, true, out, NULL, NULL, &done);
			if (sig && !err && done)
				rs_build_hash_table(sig);
			if (job)
				rs_job_free(job);
			job = NULL;
			if (sig)
				rs_free_sumset(sig);
			sig = NULL;
			break;
		}
	}
	if (job)
		rs_job_free(job);
	if (sig)
		rs_free_sumset(sig);
	return err;
}

stg_err stg__proto_replay(stg_ctx *ctx, const uint8_t *data, size_t len, const char *dir)
{
	stg_wire w;
	stg_err err = stg__wire_init(&w, ctx, -1, -1);
	uint8_t *out = malloc(BLOCK);
	if (err || !out) {
		free(out);
		return err ? err : STG_ENOMEM;
	}
	w.mem = data;
	w.mem_len = len;
	fuzz_frames(ctx, &w, out);
	free(out);
	if (dir) {
		/* the receiver itself, as a client's stream drives serve */
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		const uint8_t *p;
		uint32_t plen;
		uint8_t op, flags;
		const char *path;
		stg_xfer_result res = {0};
		w.mem_pos = 0;
		w.out = null;
		w.broken = false;
		char dest[STG_PATH_MAX];
		snprintf(dest, sizeof dest, "%s/ds", dir);
		uint8_t t;
		/* a client's stream (HELLO) or a server's for a pull (WELCOME) */
		if (!stg__wire_read(&w, &t, &p, &plen) &&
		    (t == STG_W_WELCOME ||
		     (t == STG_W_HELLO && !stg__hello_decode(ctx, p, plen, &op, &flags, &path))))
			err = receive_tree(ctx, &w, dest, false, "fuzz", &res);
		if (null >= 0)
			close(null);
		stg__rmtree(dest);
		snprintf(dest, sizeof dest, "%s/.stager-partial.ds", dir);
		stg__rmtree(dest);
	}
	stg__wire_free(&w);
	return err;
}
