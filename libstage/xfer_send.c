/*
 * xfer_send.c - the sending end of push and pull: walk and hash the tree,
 * send the manifest, read what the receiver lacks (with librsync
 * signatures of its old files), and send each file whole or as a delta,
 * in zstd-compressed chunks.  See xfer.c for the whole transfer.
 *
 * A receiver that kept the first bytes of a file from a cut transfer
 * offers them (their length and XXH3-128): the sender reads as many of its
 * own, and if their hash is the same, sends only the rest (as rsync
 * --append-verify does); else the whole file.  Those bytes are hashed into
 * the file's XXH3 as they are read, so a file that changed since the
 * manifest is still caught, prefix included.
 *
 * With an index directory (the tool's: ~/.cache/stager/xfer), a file
 * whose inode, size, mtime, ctime and mode are those the index holds for
 * it is not read to make the manifest: its XXH3 is the index's
 * (xfer_index.c).  The index's bound of the filesystem's clock is the
 * newest ctime the walk saw on the tree's device (a lower bound of that
 * clock when the files are hashed, after the walk, whatever host's clock
 * stamps them), or this host's coarse clock before the walk for a local
 * filesystem.  --checksum reads every file (and writes the index anew).
 */
#include "xfer_send.h"
#include "xfer_index.h"
#include "rsjob.h"
#include "walk.h"
#include "ctx.h"
#include "bytes.h"
#include "fsutil.h"
#include "path.h"

#include <xxhash.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIG_TOTAL_MAX ((size_t)512 << 20) /* signatures a sender holds at once */

/* ---- the sender ------------------------------------------------------------ */

typedef struct want {
	uint32_t idx;
	uint8_t kind;
	uint64_t off;       /* the receiver's offer to resume (0: none) */
	uint8_t prefix[16]; /* XXH3-128 of its first off bytes */
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
	const char *shown;     /* the tree, for messages */
	const char *index_dir; /* where the sender's index is kept (NULL: none) */
	bool checksum;         /* read every file, trust no index */
} sender;

/* Bytes of a file or of its delta, as DATA frames (none for an empty
 * piece: that ends the file, and FILE_END says so). */
static stg_err send_chunk(void *arg, const uint8_t *p, size_t n)
{
	sender *s = arg;
	return n ? stg__wire_send_data(s->w, p, n) : STG_OK;
}

/* The index of the tree at s->root: its directory (made, 0700) and the
 * file's name in it (from the tree's real path); -1 if none. */
static int index_open(sender *s, char *name, size_t len)
{
	if (!s->index_dir || !*s->index_dir)
		return -1;
	char *real = realpath(s->shown, NULL);
	struct stat st;
	int fd = -1;
	if (real && !stg__mkdirs(s->index_dir, 0700))
		fd = open(s->index_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* the user's own, and only the user's to write */
	if (fd >= 0 && (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022))) {
		stg__log(s->ctx, STG_LOG_INFO, "'%s' is not a directory of yours alone: no index",
		         s->index_dir);
		close(fd);
		fd = -1;
	}
	if (fd >= 0)
		snprintf(name, len, "send-%016llx",
		         (unsigned long long)XXH3_64bits(real, strlen(real)));
	free(real);
	return fd;
}

/* Indexes of trees not pushed (or pulled from) for this long are removed
 * when another is written: one file a tree ever sent would pile up. */
#define INDEX_KEEP_DAYS 60

static void index_prune(int idir)
{
	int fd = dup(idir);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	time_t old = time(NULL) - (time_t)INDEX_KEEP_DAYS * 86400;
	struct dirent *de;
	struct stat st;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "send-", 5) &&
		    !fstatat(idir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
		    st.st_uid == geteuid() && st.st_mtime < old)
			unlinkat(idir, de->d_name, 0);
	closedir(d);
}

/* Hash the file e (walked as wst) into e, through the index: *read says
 * whether it was read. */
static stg_err hash_entry(sender *s, stg_wentry *e, const struct stat *wst, const stg_xindex *idx,
                          stg_xindex_out *o, bool *read)
{
	const uint8_t *known;
	*read = false;
	if (!s->checksum && stg__xindex_vouch(idx, e->path, wst, &known)) {
		memcpy(e->xxh3, known, 16);
		e->size = (uint64_t)wst->st_size;
		stg__xindex_add(o, e->path, wst, known, true);
		return STG_OK;
	}
	/* O_NONBLOCK: a FIFO put in its place since the walk must not hold
	 * the open for ever (checked below) */
	struct stat fst, after;
	int fd = stg__open_beneath(s->root, e->path, O_RDONLY | O_NONBLOCK, 0);
	if (fd >= 0 && (fstat(fd, &fst) || !S_ISREG(fst.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0 || stg__hash_fd(fd, s->buf, XFER_BLOCK, e->xxh3, &e->size)) {
		stg_err err =
		        stg__fail_errno(s->ctx, STG_ENOENT, errno, "cannot read '%s'", e->path);
		if (fd >= 0)
			close(fd);
		return err;
	}
	*read = true;
	/* entered only if it did not change while it was read */
	if (!fstat(fd, &after) && after.st_ino == fst.st_ino && after.st_size == fst.st_size &&
	    (uint64_t)fst.st_size == e->size &&
	    stg__ns_of(&after.st_mtim) == stg__ns_of(&fst.st_mtim) &&
	    stg__ns_of(&after.st_ctim) == stg__ns_of(&fst.st_ctim))
		stg__xindex_add(o, e->path, &fst, e->xxh3, false);
	close(fd);
	return STG_OK;
}

/* Walk and hash the tree at root into s->e; digest receives the tree's. */
static stg_err build_manifest(sender *s, uint8_t digest[32], stg_xfer_result *res)
{
	stg_walk wk = {.ctx = s->ctx};
	struct stat rst;
	char iname[64];
	int idir = index_open(s, iname, sizeof iname);
	stg_xindex idx;
	stg_xindex_out o;
	bool have_idx = idir >= 0 && !fstat(s->root, &rst);
	uint64_t hashed = 0;
	memset(&idx, 0, sizeof idx);
	memset(&o, 0, sizeof o);
	if (have_idx) {
		const char *why = "";
		if (!s->checksum)
			stg__xindex_load(&idx, idir, iname, (uint64_t)rst.st_dev,
			                 (uint64_t)rst.st_ino, &why);
		if (*why)
			stg__log(s->ctx, STG_LOG_INFO,
			         "the index '%s/%s' was ignored (%s): every file is read",
			         s->index_dir, iname, why);
		stg__xindex_begin(&o, (uint64_t)rst.st_dev, (uint64_t)rst.st_ino,
		                  stg__xindex_now(-1, (uint64_t)rst.st_dev));
	}
	stg_err err = stg__walk_tree(&wk, s->root, "");
	for (size_t i = 0; have_idx && !err && i < wk.n; i++)
		if (wk.v[i].st.st_dev == rst.st_dev && stg__ns_of(&wk.v[i].st.st_ctim) > o.bound_ns)
			o.bound_ns = stg__ns_of(&wk.v[i].st.st_ctim);
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	stg_strmap inodes;
	char(*keys)[48] = NULL;
	bool map = false;
	if (err)
		goto out;
	/* what the receiver would refuse is refused before anything is hashed */
	uint64_t names = 0;
	for (size_t i = 0; i < wk.n; i++)
		names += strlen(wk.v[i].path) + 1;
	if (wk.n > STG_WIRE_ENTRIES_MAX || names > STG_WIRE_NAMES_MAX) {
		err = stg__fail(s->ctx, STG_EUSAGE,
		                "'%s' holds %zu entries and %llu MiB of path names: a transfer "
		                "takes at most %u entries and %llu MiB of names; pack it (stager "
		                "pack) and push the pack, or push its parts",
		                s->shown, wk.n, (unsigned long long)(names >> 20),
		                STG_WIRE_ENTRIES_MAX,
		                (unsigned long long)(STG_WIRE_NAMES_MAX >> 20));
		goto out;
	}
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
			bool read;
			if ((err = hash_entry(s, e, &it->st, &idx, &o, &read))) {
				s->n++;
				goto out;
			}
			hashed += read;
			res->files++;
			res->content_bytes = stg__sat_add(res->content_bytes, e->size);
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
	/* what was read this time is not read the next */
	if (have_idx && (hashed || o.n != idx.n)) {
		char tmp[96];
		snprintf(tmp, sizeof tmp, "%s.tmp.%ld", iname, (long)getpid());
		if (stg__xindex_save(&o, idir, iname, tmp))
			stg__log(s->ctx, STG_LOG_INFO, "cannot write the index '%s/%s': %s",
			         s->index_dir, iname, strerror(errno));
		index_prune(idir);
	}
	res->hashed_files = hashed;
out:
	stg__xindex_free(&idx);
	stg__xindex_out_free(&o);
	if (idir >= 0)
		close(idir);
	if (map)
		stg__strmap_free(&inodes);
	free(keys);
	EVP_MD_CTX_free(sha);
	stg__walk_free(&wk);
	return err;
}

/* The file changed since the manifest was made: not the receiver's fault
 * nor the connection's, and a new transfer picks up the new version. */
static stg_err changed(sender *s, const stg_wentry *e)
{
	return stg__fail(s->ctx, STG_EIO, "'%s' changed while it was sent; %s again", e->path,
	                 strcmp(s->what, "serve") ? "push" : "pull");
}

/* The receiver's offer: are the first wt->off bytes of fd (read into xs)
 * the ones it has?  *from is where the data to send starts: wt->off if so,
 * else 0 (fd and xs back at the start). */
static stg_err check_offer(sender *s, const want *wt, int fd, XXH3_state_t *xs, uint64_t *from)
{
	const stg_wentry *e = &s->e[wt->idx];
	stg_hash_in in = {.fd = fd,
	                  .off = -1,
	                  .len = wt->off,
	                  .buf = s->buf,
	                  .buf_len = XFER_BLOCK,
	                  .path = e->path};
	uint64_t got;
	*from = 0;
	stg_err err = stg__hash_read(s->ctx, &in, xs, &got);
	if (err)
		return err;
	if (got < wt->off) /* shorter than the manifest says */
		return changed(s, e);
	uint8_t prefix[16];
	stg__hash_digest(xs, prefix);
	if (!memcmp(prefix, wt->prefix, 16)) {
		*from = wt->off;
		return STG_OK;
	}
	stg__log(s->ctx, STG_LOG_INFO,
	         "'%s': the %llu bytes the far end kept differ from this file's: sent whole",
	         e->path, (unsigned long long)wt->off);
	XXH3_128bits_reset(xs);
	if (lseek(fd, 0, SEEK_SET) != 0)
		return stg__fail_errno(s->ctx, STG_EIO, errno, "reading '%s'", e->path);
	return STG_OK;
}

static stg_err send_file(sender *s, const want *wt, stg_xfer_result *res)
{
	const stg_wentry *e = &s->e[wt->idx];
	stg_err err = STG_OK;
	struct stat fst;
	int fd = stg__open_beneath(s->root, e->path, O_RDONLY | O_NONBLOCK, 0);
	if (fd >= 0 && (fstat(fd, &fst) || !S_ISREG(fst.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0)
		return stg__fail_errno(s->ctx, STG_ENOENT, errno, "cannot read '%s'", e->path);
	rs_signature_t *sig = NULL;
	rs_job_t *job = NULL;
	/* what is read is hashed: a file rewritten in place (same size) since
	 * the manifest would otherwise reach the receiver as "damaged" */
	XXH3_state_t *xs = XXH3_createState();
	if (!xs) {
		err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	XXH3_128bits_reset(xs);
	stg_wfile f = {.idx = wt->idx, .kind = wt->kind};
	uint8_t hdr[STG_FILE_MAX];
	if ((wt->off && (err = check_offer(s, wt, fd, xs, &f.off))) ||
	    (err = stg__wire_send(s->w, STG_W_FILE, hdr, stg__file_encode(s->w, &f, hdr), NULL, 0)))
		goto out;
	/* the delta (or the rest of the file) is of what follows the offer */
	s->done += f.off;
	stg_hash_in in = {.fd = fd,
	                  .off = -1,
	                  .len = e->size - f.off,
	                  .whole = true,
	                  .buf = s->buf,
	                  .buf_len = XFER_BLOCK,
	                  .sink = send_chunk,
	                  .arg = s,
	                  .path = e->path};
	uint64_t got;
	if (wt->kind == STG_WANT_WHOLE) {
		in.done = &s->done;
		in.what = s->what;
		in.total = s->total;
		if ((err = stg__hash_read(s->ctx, &in, xs, &got)))
			goto out;
	} else {
		/* load the receiver's signature, index it, and send the delta */
		job = rs_loadsig_begin(&sig);
		if (!job) {
			err = stg__fail(s->ctx, STG_ENOMEM, "out of memory");
			goto out;
		}
		err = stg__job_run(s->ctx, job, -1, wt->sig, wt->sig_len, NULL, s->out, NULL, NULL);
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
		stg_jobsink js = {s->ctx, job, s->out, send_chunk, s, false};
		in.sink = stg__job_sink;
		in.arg = &js;
		if ((err = stg__hash_read(s->ctx, &in, xs, &got)))
			goto out;
		s->done += e->size - f.off;
		stg__progress(s->ctx, s->what, s->done, s->total);
	}
	uint8_t h[16];
	stg__hash_digest(xs, h);
	if (got != e->size - f.off || memcmp(h, e->xxh3, 16)) {
		err = changed(s, e);
		goto out;
	}
	/* a file resumed within is neither sent whole nor a delta of the
	 * old version: its first f.off bytes were not sent again */
	if (f.off) {
		res->resumed_files++;
		res->resumed_bytes += f.off;
	} else if (wt->kind == STG_WANT_WHOLE) {
		res->whole_files++;
	} else {
		res->delta_files++;
	}
	res->sent_content += e->size - f.off;
	err = stg__wire_send(s->w, STG_W_FILE_END, NULL, 0, NULL, 0);
out:
	XXH3_freeState(xs);
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
		stg_wwant x;
		if (t != STG_W_WANT) {
			err = stg__fail(s->ctx, STG_EREMOTE, "protocol error: a bad request");
			break;
		}
		if ((err = stg__want_decode(s->w, p, len, &x)))
			break;
		uint32_t idx = x.idx;
		/* an offer is of a part of the file: never past its end */
		if (idx >= s->n || s->e[idx].type != STG_FILE || seen[idx] ||
		    x.off > s->e[idx].size) {
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
		v[n] = (want){.idx = idx, .kind = x.kind, .off = x.off};
		memcpy(v[n++].prefix, x.prefix, 16);
		s->total = stg__sat_add(s->total, s->e[idx].size);
	}
	free(seen);
	*out = v;
	*count = n;
	return err;
}

stg_err stg__send_tree(stg_ctx *ctx, stg_wire *w, const char *dir, const char *what,
                       const char *index_dir, bool checksum, stg_xfer_result *res)
{
	sender s = {.ctx = ctx,
	            .w = w,
	            .root = -1,
	            .what = what,
	            .shown = dir,
	            .index_dir = index_dir,
	            .checksum = checksum};
	want *wants = NULL;
	size_t n_wants = 0;
	stg_err err = STG_OK;
	s.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s.root < 0) {
		err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                      "cannot open the directory '%s'", dir);
		goto out;
	}
	s.buf = malloc(XFER_BLOCK);
	s.out = malloc(XFER_BLOCK);
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
		if (bl + 2 + STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1) > XFER_BLOCK) {
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
	stg__progress(ctx, what, 0, s.total);
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
	res->reused_files = res->files - res->whole_files - res->delta_files - res->resumed_files;
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
