/*
 * xfer_recv.c - the receiving end of push and pull: check the manifest
 * (confinement), find what is already there, ask for the rest, write each
 * file under a temporary name and check it before it takes its path, then
 * verify the whole and switch it in (or store it as a pack).  See xfer.c
 * for the whole transfer and its invariants.
 */
#include "xfer_recv.h"
#include "rsjob.h"
#include "ctx.h"
#include "bytes.h"
#include "fsutil.h"
#include "path.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* A file smaller than this is asked for whole even when an old version is
 * here: its delta would save little, and its signature is a large share
 * of it. */
#define DELTA_MIN ((uint64_t)64 << 10)
/* Signatures asked for in one transfer, at most: the sender holds them all
 * until the files are sent (its own cap, SIG_TOTAL_MAX, is twice this);
 * past it, files are asked for whole, so a transfer never fails for it. */
#define SIG_BUDGET ((uint64_t)256 << 20)
/* Partial copies offered in one transfer, at most (each holds its hash
 * state until the file arrives); others are removed. */
#define OFFERS_MAX 64

/* ---- the receiver ------------------------------------------------------- */

const char *stg__recv_shown(receiver *rc, const char *path)
{
	return stg__peer_text(path, strlen(path), rc->sh, sizeof rc->sh);
}

int stg__recv_open_file(int root, const char *path, struct stat *st)
{
	int fd = stg__open_beneath(root, path, O_RDONLY | O_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		int en = S_ISREG(st->st_mode) ? errno : EINVAL;
		close(fd);
		errno = en;
		return -1;
	}
	/* a regular file ignores O_NONBLOCK; cleared all the same */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* One entry of the manifest, checked against those before it. */
static stg_err add_entry(void *arg, const uint8_t *p, uint32_t len)
{
	receiver *rc = arg;
	/* bounded before anything is written: entries, and their names */
	if (rc->n >= STG_WIRE_ENTRIES_MAX || rc->names.bytes + len > STG_WIRE_NAMES_MAX)
		return stg__fail(rc->ctx, STG_ECORRUPT,
		                 "refusing a manifest of over %u entries or %llu MiB of path names "
		                 "(the most a receiver accepts); nothing was written: push or pull "
		                 "a smaller tree, or a pack of it",
		                 STG_WIRE_ENTRIES_MAX,
		                 (unsigned long long)(STG_WIRE_NAMES_MAX >> 20));
	if (stg__grow((void **)&rc->r, &rc->cap, rc->n + 1, sizeof *rc->r, STG_WIRE_ENTRIES_MAX))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	rentry *re = &rc->r[rc->n];
	memset(re, 0, sizeof *re);
	stg_err err = stg__wentry_decode_in(rc->ctx, p, len, &re->e, &rc->names);
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
			                 stg__recv_shown(rc, path));
	}
	if (re->e.type == STG_HARDLINK) {
		uint32_t ti = stg__strmap_get(&rc->paths, re->e.link, strlen(re->e.link));
		if (ti == UINT32_MAX || rc->r[ti].e.type != STG_FILE)
			return stg__fail(
			        rc->ctx, STG_ECORRUPT,
			        "refusing '%s': a hardlink to what is not a file before it",
			        stg__recv_shown(rc, path));
	}
	int put = stg__strmap_put(&rc->paths, path, strlen(path), (uint32_t)(rc->n - 1));
	if (put < 0)
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	if (put == 0)
		return stg__fail(rc->ctx, STG_ECORRUPT, "'%s' twice in the manifest",
		                 stg__recv_shown(rc, path));
	return STG_OK;
}

stg_err stg__recv_read_manifest(receiver *rc)
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

/* Which files are received as partial copies that a cut transfer leaves
 * (large ones whose copy's names no manifest path takes), and their names. */
stg_err stg__recv_resume_names_init(receiver *rc)
{
	if (stg__strmap_init(&rc->rnames, 64))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	rc->rmap = true;
	for (size_t i = 0; i < rc->n; i++) {
		rentry *re = &rc->r[i];
		char data[XFER_RNAME], rec[XFER_RNAME];
		if (re->e.type != STG_FILE || re->e.size < XFER_RESUME_MIN)
			continue;
		stg__resume_names(re->e.path, data, rec);
		if (stg__strmap_get(&rc->paths, data, strlen(data)) != UINT32_MAX ||
		    stg__strmap_get(&rc->paths, rec, strlen(rec)) != UINT32_MAX)
			continue;
		/* the map keeps the key's pointer: the name must outlive this loop */
		if (!(re->rname = strdup(data)))
			return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
		int put = stg__strmap_put(&rc->rnames, re->rname, strlen(re->rname), (uint32_t)i);
		if (put < 0)
			return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
		re->resumable = put > 0;
	}
	return STG_OK;
}

/* Is name (in the partial root) a partial copy, or its record, of a file
 * of this manifest? */
static bool resume_known(receiver *rc, const char *name)
{
	size_t n = strlen(name);
	if (n > 3 && !strcmp(name + n - 3, ".ck"))
		n -= 3;
	return stg__resume_named(name) && stg__strmap_get(&rc->rnames, name, n) != UINT32_MAX;
}

/* Remove from the partial directory what the manifest does not hold as it
 * is there (and every link: links are made again at the end); partial
 * copies of its files stay, for plan to offer. */
stg_err stg__recv_clean_partial(receiver *rc)
{
	stg_walk wk = {.ctx = rc->ctx};
	stg_err err = stg__walk_tree(&wk, rc->part, "");
	/* a run killed after it set the final modes may have left read-only
	 * directories: writable again while the tree is built */
	for (size_t k = 0; k < wk.n && !err; k++) {
		const char *base;
		int pfd = S_ISDIR(wk.v[k].st.st_mode) && !(wk.v[k].st.st_mode & S_IWUSR)
		                  ? stg__parent_of(rc->part, wk.v[k].path, &base)
		                  : -1;
		if (pfd >= 0) {
			fchmodat(pfd, base, 0700, 0);
			close(pfd);
		}
	}
	for (size_t k = wk.n; k-- > 0 && !err;) {
		stg_witem *it = &wk.v[k];
		uint32_t i = stg__strmap_get(&rc->paths, it->path, strlen(it->path));
		bool keep = false;
		if (i != UINT32_MAX) {
			uint8_t t = rc->r[i].e.type;
			keep = (t == STG_DIR && S_ISDIR(it->st.st_mode)) ||
			       (t == STG_FILE && S_ISREG(it->st.st_mode));
		} else if (!strchr(it->path, '/') && S_ISREG(it->st.st_mode)) {
			keep = resume_known(rc, it->path);
		}
		/* no file kept: none of the manifest's is looked for there */
		rc->part_files |= keep && S_ISREG(it->st.st_mode) && i != UINT32_MAX;
		if (keep)
			continue;
		const char *base;
		int pfd = stg__parent_of(rc->part, it->path, &base);
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
static bool same_content(receiver *rc, int root, size_t idx, bool *meta, bool *exists)
{
	const stg_wentry *e = &rc->r[idx].e;
	*meta = *exists = false;
	if (root < 0 || (root == rc->part && !rc->part_files))
		return false;
	/* DEST as walked a moment ago (xfer_same.c), if its index vouches for
	 * the file as it was then: no need to open it (the same moment's
	 * look as opening it now, for what a link from DEST then takes) */
	const struct stat *wst = root == rc->dest && rc->dat && rc->dat[idx] != UINT32_MAX
	                                 ? &rc->dwalk.v[rc->dat[idx]].st
	                                 : NULL;
	const uint8_t *known;
	if (wst && S_ISREG(wst->st_mode) && stg__xindex_vouch(&rc->idx, e->path, wst, &known)) {
		*exists = true;
		*meta = (wst->st_mode & 07777) == (e->mode & 01777) &&
		        wst->st_mtim.tv_sec == e->mtime && wst->st_mtim.tv_nsec == e->mtime_nsec;
		return (uint64_t)wst->st_size == e->size && !memcmp(known, e->xxh3, 16);
	}
	/* never a FIFO or a device another user put there: that open would
	 * wait for ever */
	struct stat st;
	int fd = stg__recv_open_file(root, e->path, &st);
	if (fd < 0)
		return false;
	bool same = false;
	{
		*exists = true;
		uint8_t h[16];
		uint64_t size;
		/* DEST's files as stager left them need no reading (xfer_same.c) */
		if (root == rc->dest && stg__xindex_vouch(&rc->idx, e->path, &st, &known))
			same = (uint64_t)st.st_size == e->size && !memcmp(known, e->xxh3, 16);
		else if ((uint64_t)st.st_size == e->size && ++rc->hashed &&
		         !stg__hash_fd(fd, rc->buf, XFER_BLOCK, h, &size))
			same = size == e->size && !memcmp(h, e->xxh3, 16);
		*meta = (st.st_mode & 07777) == (e->mode & 01777) &&
		        st.st_mtim.tv_sec == e->mtime && st.st_mtim.tv_nsec == e->mtime_nsec;
	}
	close(fd);
	return same;
}

/* A new temporary name in the partial directory's root that no manifest
 * path takes. */
void stg__recv_tmp_name(receiver *rc, char *out, size_t len)
{
	do
		snprintf(out, len, ".stager-tmp.%u", rc->tmp_seq++);
	while (stg__strmap_get(&rc->paths, out, strlen(out)) != UINT32_MAX);
}

/* Give fd e's metadata and rename tmp (in the partial root) to e's path. */
stg_err stg__recv_finish_file(receiver *rc, int fd, const char *tmp, const stg_wentry *e)
{
	struct timespec ts[2] = {{0, UTIME_OMIT}, {e->mtime, e->mtime_nsec}};
	if (fchmod(fd, e->mode & 01777) || futimens(fd, ts))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set the mode of '%s'",
		                       stg__recv_shown(rc, e->path));
	const char *base;
	int pfd = stg__parent_of(rc->part, e->path, &base);
	if (pfd < 0 || renameat(rc->part, tmp, pfd, base)) {
		int en = errno;
		if (pfd >= 0)
			close(pfd);
		return stg__fail_errno(rc->ctx, stg__err_from_errno(en, STG_EIO), en,
		                       "cannot write '%s'", stg__recv_shown(rc, e->path));
	}
	close(pfd);
	return STG_OK;
}

/* Copy root's e->path into the partial directory, with e's metadata. */
static stg_err copy_local(receiver *rc, int root, const stg_wentry *e)
{
	char tmp[64];
	stg__recv_tmp_name(rc, tmp, sizeof tmp);
	struct stat st;
	int s = stg__recv_open_file(root, e->path, &st);
	int d = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	stg_err err = STG_OK;
	if (s < 0 || d < 0 || stg__copy_file(s, d, e->size)) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot copy '%s'", stg__recv_shown(rc, e->path));
		goto out;
	}
	err = stg__recv_finish_file(rc, d, tmp, e);
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
	int sp = stg__parent_of(rc->dest, e->path, &sb),
	    dp = stg__parent_of(rc->part, e->path, &db);
	stg_err err = STG_OK;
	/* a partial directory that held none of the manifest's files has
	 * nothing at that path to make way for */
	if (sp < 0 || dp < 0 || (rc->part_files && unlinkat(dp, db, 0) && errno != ENOENT) ||
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

/* WANT idx as kind, with the offer of a partial copy if there is one. */
static stg_err send_want(receiver *rc, uint32_t idx, uint8_t kind)
{
	const rentry *re = &rc->r[idx];
	stg_wwant x = {.idx = idx, .kind = kind, .off = re->offer};
	if (re->pre) {
		XXH128_canonical_t c;
		XXH128_canonicalFromHash(&c, XXH3_128bits_digest(re->pre));
		memcpy(x.prefix, c.digest, 16);
	}
	uint8_t b[STG_WANT_MAX];
	return stg__wire_send(rc->w, STG_W_WANT, b, stg__want_encode(rc->w, &x, b), NULL, 0);
}

/* WANT idx as a delta, with the signature of the old file at root; or,
 * when the signatures would pass SIG_BUDGET, *whole and nothing sent. */
static stg_err send_sig(receiver *rc, uint32_t idx, int root, bool *whole)
{
	const stg_wentry *e = &rc->r[idx].e;
	struct stat st;
	int fd = stg__recv_open_file(root, e->path, &st);
	if (fd < 0)
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
		                       stg__recv_shown(rc, e->path));
	/* the shortest strong sums librsync deems safe for this size, not its
	 * 32-byte default: a signature is a few percent of the file, not 14% */
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = (size_t)-1;
	*whole = false;
	if (rs_sig_args(st.st_size, &magic, &block_len, &strong_len) != RS_DONE) {
		close(fd);
		return stg__fail(rc->ctx, STG_EIO, "cannot make a signature of '%s'",
		                 stg__recv_shown(rc, e->path));
	}
	uint64_t est = 12 + ((uint64_t)st.st_size / block_len + 1) * (4 + strong_len);
	if (stg__sat_add(rc->sig_bytes, est) > SIG_BUDGET) {
		close(fd);
		*whole = true;
		return STG_OK;
	}
	rc->sig_bytes += est;
	rs_job_t *job = rs_sig_begin(block_len, strong_len, magic);
	stg_err err = STG_OK;
	if (!job)
		err = stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	else if (!(err = send_want(rc, idx, STG_WANT_DELTA)))
		err = stg__job_run(rc->ctx, job, fd, NULL, 0, rc->buf, rc->out, sig_sink, rc->w);
	if (job)
		rs_job_free(job);
	close(fd);
	return err;
}

/* A wanted file's partial copy, from a cut transfer: offered if the far
 * end can take offers (re->offer, re->pre), else removed.  One as long as
 * the file with its XXH3 is the file, complete (*complete: taken here, as
 * a file already there is). */
static stg_err resume_offer(receiver *rc, rentry *re, bool *complete)
{
	const stg_wentry *e = &re->e;
	*complete = false;
	if (rc->w->version < 2 || rc->offers >= OFFERS_MAX) {
		stg__resume_remove(rc->part, e->path);
		return STG_OK;
	}
	stg_err err = stg__resume_offer(rc->ctx, rc->part, e->path, e->size, rc->boot, rc->buf,
	                                &re->offer, &re->pre);
	if (err || !re->offer)
		return err;
	rc->offers++;
	if (re->offer < e->size)
		return STG_OK;
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(re->pre));
	XXH3_freeState(re->pre);
	re->pre = NULL;
	re->offer = 0;
	char data[XFER_RNAME], rec[XFER_RNAME];
	stg__resume_names(e->path, data, rec);
	if (memcmp(c.digest, e->xxh3, 16)) {
		stg__resume_remove(rc->part, e->path);
		return STG_OK;
	}
	int fd = openat(rc->part, data, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
		                       stg__recv_shown(rc, e->path));
	err = stg__recv_finish_file(rc, fd, data, e);
	close(fd);
	if (err)
		return err;
	unlinkat(rc->part, rec, 0);
	re->checked = *complete = true;
	return STG_OK;
}

/* Decide, for every file, whether it is here already; ask for the rest. */
stg_err stg__recv_plan(receiver *rc, stg_xfer_result *res)
{
	stg_err err = STG_OK;
	for (size_t i = 0; i < rc->n && !err; i++) {
		rentry *re = &rc->r[i];
		const stg_wentry *e = &re->e;
		if (e->type == STG_DIR) {
			/* writable while the tree is built; modes are set at the end */
			const char *base;
			int pfd = stg__parent_of(rc->part, e->path, &base);
			if (pfd < 0 || (mkdirat(pfd, base, 0700) && errno != EEXIST) ||
			    fchmodat(pfd, base, 0700, 0))
				err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO),
				                      errno, "cannot create the directory '%s'",
				                      stg__recv_shown(rc, e->path));
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
		res->content_bytes = stg__sat_add(res->content_bytes, e->size);
		bool meta, in_part, in_dest;
		bool complete = false;
		if (same_content(rc, rc->part, i, &meta, &in_part)) {
			/* it may be a link to DEST's inode: copy, never chmod */
			re->checked = meta;
			if (!meta)
				err = copy_local(rc, rc->part, e);
			res->reused_files++;
		} else if (same_content(rc, rc->dest, i, &meta, &in_dest)) {
			re->checked = meta && link_from_dest(rc, e) == STG_OK;
			if (!re->checked)
				err = copy_local(rc, rc->dest, e);
			res->reused_files++;
		} else if (re->resumable && (err = resume_offer(rc, re, &complete))) {
			break; /* interrupted: the copy stays for the next transfer */
		} else if (complete) {
			res->reused_files++;
		} else {
			re->wanted = true;
		}
		if (!re->wanted) {
			/* a partial copy of a file that is here is no use */
			if (re->resumable && !complete)
				stg__resume_remove(rc->part, e->path);
			continue;
		}
		/* sizes are the peer's word: added without wrapping */
		rc->total = stg__sat_add(rc->total, e->size - re->offer);
		bool whole = !(in_part || in_dest) || e->size < DELTA_MIN;
		if (!whole) {
			re->basis = in_part ? BASIS_PARTIAL : BASIS_DEST;
			err = send_sig(rc, (uint32_t)i, in_part ? rc->part : rc->dest, &whole);
			if (whole)
				re->basis = BASIS_NONE;
		}
		if (!err && whole)
			err = send_want(rc, (uint32_t)i, STG_WANT_WHOLE);
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
			                 "not enough space for '%s': need %s, %s free; nothing was "
			                 "written",
			                 rc->name,
			                 rc->total == UINT64_MAX
			                         ? "more than 16 EiB"
			                         : stg_format_size(rc->total, a, sizeof a),
			                 stg_format_size(avail, b, sizeof b));
		}
	}
	return stg__wire_send(rc->w, STG_W_WANTS_END, NULL, 0, NULL, 0);
}

/* Links, then every file checked and the manifest against the sender's digest. */
stg_err stg__recv_links_and_verify(receiver *rc)
{
	stg_err err = STG_OK;
	for (size_t i = 0; i < rc->n && !err; i++) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_SYMLINK && e->type != STG_HARDLINK)
			continue;
		const char *base, *tb;
		int pfd = stg__parent_of(rc->part, e->path, &base), tfd = -1;
		if (pfd >= 0 && e->type == STG_SYMLINK) {
			if (symlinkat(e->link, pfd, base) == 0) {
				struct timespec ts[2] = {{0, UTIME_OMIT},
				                         {e->mtime, e->mtime_nsec}};
				utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
			} else {
				err = STG_EIO;
			}
		} else if (pfd >= 0) {
			tfd = stg__parent_of(rc->part, e->link, &tb);
			if (tfd < 0 || linkat(tfd, tb, pfd, base, 0))
				err = STG_EIO;
		}
		if (pfd < 0 || err)
			err = stg__fail_errno(rc->ctx, STG_EIO, errno,
			                      "cannot create the link '%s'",
			                      stg__recv_shown(rc, e->path));
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
		struct stat st;
		int fd = e->type == STG_FILE ? stg__recv_open_file(rc->part, e->path, &st) : -2;
		if (fd == -1) {
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
			                      stg__recv_shown(rc, e->path));
		} else if (fd >= 0 && (!rc->r[i].checked || (uint64_t)st.st_size != e->size)) {
			/* not read in this run (a local copy): read it now */
			uint8_t h[16];
			uint64_t size;
			rc->hashed++;
			if (stg__hash_fd(fd, rc->buf, XFER_BLOCK, h, &size)) {
				err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
				                      stg__recv_shown(rc, e->path));
			} else if (size != e->size || memcmp(h, e->xxh3, 16)) {
				err = stg__fail(rc->ctx, STG_ECORRUPT,
				                "'%s' does not match the sender's checksum",
				                stg__recv_shown(rc, e->path));
			}
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
