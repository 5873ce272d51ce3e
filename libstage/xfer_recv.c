/*
 * xfer_recv.c - the receiving end of push and pull: check the manifest
 * (confinement), find what is already there, ask for the rest, write each
 * file under a temporary name and check it before it takes its path, then
 * verify the whole and switch it in (or store it as a pack).  See xfer.c
 * for the whole transfer and its invariants.
 */
#include "xfer.h"
#include "cache.h"

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

#define ENTRIES_MAX (16u << 20)
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

enum { BASIS_NONE, BASIS_PARTIAL, BASIS_DEST };

typedef struct rentry {
	stg_wentry e;
	uint8_t basis; /* where the old version of a wanted file lives */
	bool wanted;   /* asked of the sender */
	bool received;
	bool checked;      /* its bytes at its path matched its XXH3 in this run */
	bool resumable;    /* received as a partial copy kept if cut (xfer_resume.c) */
	uint64_t offer;    /* bytes of a partial copy offered to the sender */
	uint64_t from;     /* the byte its data started at (the offer, accepted) */
	XXH3_state_t *pre; /* the XXH3 of the offered bytes, to go on with */
	char *rname;       /* its partial copy's name (rnames holds the pointer) */
} rentry;

typedef struct receiver {
	stg_ctx *ctx;
	stg_wire *w;
	int parent, part, dest; /* dest: -1 on a first push */
	int rec;                /* the record, open and locked (-1: none yet) */
	bool by_record;         /* DEST may be replaced because the record names it */
	bool by_empty;          /* ... only because it is empty: checked again after the switch */
	bool basis_made;        /* rc->basis_name is ours to remove */
	char *name, *part_name;
	char *rec_name; /* ".stager-published.NAME": the record of what stager
	                   published, and the lock of transfers to DEST */
	char *old_name; /* ".stager-old.NAME": the old version, for a moment (no RENAME_EXCHANGE) */
	char *shown;    /* DEST as given, for messages */
	bool pack;      /* publish a pack (name ends in .tar.zst), not a tree */
	bool replace;   /* --replace: an existing DEST may be replaced whatever it is */
	char *dir;      /* the parent's path (for the pack writer) */
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
	uint64_t sig_bytes; /* signatures sent (estimated) */
	const char *what;
	stg_strmap rnames; /* partial copies' names -> entry */
	bool rmap;
	unsigned offers;
	char boot[XFER_BOOT];
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

/* Which files are received as partial copies that a cut transfer leaves
 * (large ones whose copy's names no manifest path takes), and their names. */
static stg_err resume_names_init(receiver *rc)
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
static stg_err clean_partial(receiver *rc)
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
static bool same_content(receiver *rc, int root, const stg_wentry *e, bool *meta, bool *exists)
{
	*meta = *exists = false;
	if (root < 0)
		return false;
	int fd = stg__open_beneath(root, e->path, O_RDONLY, 0);
	if (fd < 0)
		return false;
	struct stat st;
	bool same = false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		*exists = true;
		XXH128_hash_t h;
		uint64_t size;
		if ((uint64_t)st.st_size == e->size &&
		    !stg__hash_fd(fd, &h, &size, NULL, rc->buf)) {
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
	int pfd = stg__parent_of(rc->part, e->path, &base);
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
	int s = stg__open_beneath(root, e->path, O_RDONLY, 0);
	int d = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	stg_err err = STG_OK;
	if (s < 0 || d < 0 || stg__copy_file(s, d, e->size)) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot copy '%s'", e->path);
		goto out;
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
	int sp = stg__parent_of(rc->dest, e->path, &sb),
	    dp = stg__parent_of(rc->part, e->path, &db);
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
	int fd = stg__open_beneath(root, e->path, O_RDONLY, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", e->path);
	}
	/* the shortest strong sums librsync deems safe for this size, not its
	 * 32-byte default: a signature is a few percent of the file, not 14% */
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block_len = 0, strong_len = (size_t)-1;
	*whole = false;
	if (rs_sig_args(st.st_size, &magic, &block_len, &strong_len) != RS_DONE) {
		close(fd);
		return stg__fail(rc->ctx, STG_EIO, "cannot make a signature of '%s'", e->path);
	}
	uint64_t est = 12 + ((uint64_t)st.st_size / block_len + 1) * (4 + strong_len);
	if (rc->sig_bytes + est > SIG_BUDGET) {
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
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", e->path);
	err = finish_file(rc, fd, data, e);
	close(fd);
	if (err)
		return err;
	unlinkat(rc->part, rec, 0);
	re->checked = *complete = true;
	return STG_OK;
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
			int pfd = stg__parent_of(rc->part, e->path, &base);
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
		bool complete = false;
		if (same_content(rc, rc->part, e, &meta, &in_part)) {
			/* it may be a link to DEST's inode: copy, never chmod */
			re->checked = meta;
			if (!meta)
				err = copy_local(rc, rc->part, e);
			res->reused_files++;
		} else if (same_content(rc, rc->dest, e, &meta, &in_dest)) {
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
		rc->total += e->size - re->offer;
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
	stg_rfile *rf; /* a partial copy, kept if the transfer is cut */
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
	if (in->rf ? stg__rfile_write(in->rf, p, n) : stg__write_full(in->fd, p, n))
		return stg__fail_errno(in->rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot write '%s'", in->e->path);
	in->rc->done += n;
	stg__progress(in->rc->ctx, in->rc->what, in->rc->done, in->rc->total);
	return STG_OK;
}

static stg_err receive_file(receiver *rc, const uint8_t *p, uint32_t len)
{
	stg_wfile f;
	stg_err err = stg__file_decode(rc->w, p, len, &f);
	if (err)
		return err;
	uint32_t idx = f.idx;
	uint8_t kind = f.kind;
	/* the data starts at 0 or where the offer ends, nowhere else */
	if (idx >= rc->n || !rc->r[idx].wanted || rc->r[idx].received ||
	    (kind == STG_WANT_DELTA) != (rc->r[idx].basis != BASIS_NONE) ||
	    (f.off && f.off != rc->r[idx].offer))
		return stg__fail(rc->ctx, STG_EREMOTE,
		                 "protocol error: entry %u was not asked for like this", idx);
	rentry *re = &rc->r[idx];
	incoming in = {.rc = rc, .e = &re->e, .fd = -1, .basis = -1, .size = f.off};
	stg_rfile rf = {.dir = -1, .fd = -1, .ck = -1};
	char tmp[XFER_RNAME];
	rs_job_t *job = NULL;
	if (re->resumable) {
		in.fd = stg__rfile_open(&rf, rc->part, re->e.path, f.off, rc->boot) ? -1 : rf.fd;
		in.rf = &rf;
		snprintf(tmp, sizeof tmp, "%s", rf.name);
	} else {
		tmp_name(rc, tmp, sizeof tmp);
		in.fd = openat(rc->part, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		               0600);
	}
	/* the offered bytes' hash goes on, or, refused, they are sent again */
	re->from = f.off;
	if (f.off) {
		in.xs = re->pre;
		re->pre = NULL;
	} else {
		rc->total += re->offer;
	}
	if (in.fd < 0 || (!in.xs && !(in.xs = XXH3_createState()))) {
		err = stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                      "cannot create '%s'", re->e.path);
		goto out;
	}
	if (!f.off)
		XXH3_128bits_reset(in.xs);
	if (kind == STG_WANT_DELTA) {
		in.basis = stg__open_beneath(re->basis == BASIS_PARTIAL ? rc->part : rc->dest,
		                             re->e.path, O_RDONLY, 0);
		if (in.basis < 0 || !(job = rs_patch_begin(stg__basis_copy, &in.basis))) {
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
			err = stg__job_feed(rc->ctx, job, raw, rl, false, rc->out, write_sink, &in,
			                    &done);
		} else {
			err = write_sink(&in, raw, rl);
		}
		if (err)
			goto out;
	}
	if (job && !done &&
	    (err = stg__job_feed(rc->ctx, job, NULL, 0, true, rc->out, write_sink, &in, &done)))
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
	if (in.rf)
		stg__rfile_done(in.rf);
	re->received = re->checked = true;
out:
	if (job)
		rs_job_free(job);
	XXH3_freeState(in.xs);
	if (in.basis >= 0)
		close(in.basis);
	if (in.rf) {
		/* cut: what arrived stays for the next transfer to offer;
		 * damaged: it goes */
		stg__rfile_close(in.rf, err != STG_ECORRUPT);
	} else {
		if (in.fd >= 0)
			close(in.fd);
		if (err)
			unlinkat(rc->part, tmp, 0);
	}
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
		int fd = e->type == STG_FILE ? stg__open_beneath(rc->part, e->path, O_RDONLY, 0)
		                             : -2;
		struct stat st;
		if (fd == -1 || (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode)))) {
			err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", e->path);
		} else if (fd >= 0 && (!rc->r[i].checked || (uint64_t)st.st_size != e->size)) {
			/* not read in this run (a local copy): read it now */
			XXH128_hash_t h;
			uint64_t size;
			XXH128_canonical_t c;
			if (stg__hash_fd(fd, &h, &size, NULL, rc->buf)) {
				err = stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'",
				                      e->path);
			} else {
				XXH128_canonicalFromHash(&c, h);
				if (size != e->size || memcmp(c.digest, e->xxh3, 16))
					err = stg__fail(rc->ctx, STG_ECORRUPT,
					                "'%s' does not match the sender's checksum",
					                e->path);
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

/* ---- the record, the lock, the switch, and what may be replaced ---------- */

/* The test hook (xfer.h): is op one of the comma-separated words of
 * STAGER_TEST_FAULTS?  Whole words only: "noflock" is not "flock". */
static bool test_fault(const char *op)
{
	const char *f = getenv(STG_TEST_FAULTS_ENV);
	size_t n = strlen(op);
	while (f && *f) {
		const char *end = strchr(f, ',');
		size_t len = end ? (size_t)(end - f) : strlen(f);
		if (len == n && !memcmp(f, op, n))
			return true;
		f = end ? end + 1 : NULL;
	}
	return false;
}

static int xrenameat2(int olddir, const char *oldname, int newdir, const char *newname,
                      unsigned flags)
{
	if (test_fault("renameat2")) {
		errno = EINVAL;
		return -1;
	}
	return renameat2(olddir, oldname, newdir, newname, flags);
}

/* A directory's identity for the record: its inode number, its ctime and,
 * where the filesystem keeps one, its birth time.  The ctime changes when
 * an entry is added to or removed from the directory, and a directory made
 * again under a reused inode number (NFS and Lustre keep no birth time) has
 * a new one; so a directory the user has changed since is not taken for
 * the one stager published. */
typedef struct dir_id {
	unsigned long long ino;
	long long ct_sec, bt_sec;
	unsigned ct_nsec, bt_nsec;
	bool bt;
} dir_id;

/* The identity of name under dfd ("": dfd itself), not following a link.
 * AT_STATX_FORCE_SYNC: an NFS client's cached attributes would hide a
 * change made from another client (a directory made again, an entry
 * added). */
static int id_at(int dfd, const char *name, dir_id *id)
{
	struct statx sx;
	int flags = (*name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH) | AT_STATX_FORCE_SYNC;
	if (statx(dfd, name, flags, STATX_INO | STATX_CTIME | STATX_BTIME, &sx))
		return -1;
	if (!(sx.stx_mask & STATX_INO) || !(sx.stx_mask & STATX_CTIME)) {
		errno = ENOTSUP;
		return -1;
	}
	memset(id, 0, sizeof *id);
	id->ino = sx.stx_ino;
	id->ct_sec = sx.stx_ctime.tv_sec;
	id->ct_nsec = sx.stx_ctime.tv_nsec;
	id->bt = (sx.stx_mask & STATX_BTIME) && !test_fault("btime");
	id->bt_sec = id->bt ? sx.stx_btime.tv_sec : 0;
	id->bt_nsec = id->bt ? sx.stx_btime.tv_nsec : 0;
	return 0;
}

static int dir_id_of(int fd, dir_id *id)
{
	return id_at(fd, "", id);
}

/* All must agree; a birth time the filesystem reports now must be in the
 * record (a record without one proves nothing there). */
static bool id_equal(const dir_id *rec, const dir_id *cur, bool ctime)
{
	return rec->ino == cur->ino &&
	       (!ctime || (rec->ct_sec == cur->ct_sec && rec->ct_nsec == cur->ct_nsec)) &&
	       rec->bt == cur->bt && rec->bt_sec == cur->bt_sec && rec->bt_nsec == cur->bt_nsec;
}

/* What ".stager-published.NAME" says (FORMAT.md): the directory (or, for
 * --pack, the file) stager published at DEST; and, while a switch without
 * RENAME_EXCHANGE runs, the old version it moves to ".stager-old.NAME"
 * (and whether that one was stager's) and the new one that takes DEST.
 * Those two by inode and birth time only: the renames change their ctime,
 * and so does removing the old one's entries. */
typedef struct record {
	bool pub, old, old_pub;
	dir_id p, o, n;
} record;

#define RECORD_MAGIC "stager-published 2\n"
#define RECORD_MAX   1024

/* Is fd (the record) a regular file of the user stager runs as?  Anyone
 * else who can write DEST's parent (a group's project directory) could
 * otherwise vouch for a directory of the user's. */
static bool record_trusted(int fd, struct stat *st)
{
	/* one link only: a hard link to another of the user's files would
	 * be emptied and overwritten by record_write */
	return !fstat(fd, st) && S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	       st->st_nlink == 1;
}

/* " INO SEC.NSEC SEC.NSEC|-", or without ctime " INO SEC.NSEC|-". */
static char *id_format(char *p, const dir_id *id, bool ctime)
{
	p += sprintf(p, " %llu ", id->ino);
	if (ctime)
		p += sprintf(p, "%lld.%09u ", id->ct_sec, id->ct_nsec);
	if (id->bt)
		p += sprintf(p, "%lld.%09u", id->bt_sec, id->bt_nsec);
	else
		p += sprintf(p, "-");
	return p;
}

/* id_format's text at *s; *s moves past it.  Strict: a torn or edited
 * record matches nothing. */
static bool id_parse(const char **s, dir_id *id, bool ctime)
{
	int n = 0;
	memset(id, 0, sizeof *id);
	if (**s != ' ' || !strchr("0123456789", (*s)[1]) || !(*s)[1])
		return false;
	if (ctime ? sscanf(*s, " %llu %lld.%9u %n", &id->ino, &id->ct_sec, &id->ct_nsec, &n) != 3
	          : sscanf(*s, " %llu %n", &id->ino, &n) != 1)
		return false;
	if (!n)
		return false;
	*s += n;
	if (**s == '-') {
		(*s)++;
		return true;
	}
	n = 0;
	if (sscanf(*s, "%lld.%9u%n", &id->bt_sec, &id->bt_nsec, &n) != 2 || !n)
		return false;
	*s += n;
	id->bt = true;
	return true;
}

/* Read the record (from the locked rc->rec, else opened here without
 * following a link or blocking on a FIFO).  false: none, not ours, or not
 * one stager wrote whole. */
static bool record_read(receiver *rc, record *r)
{
	char buf[RECORD_MAX + 1];
	struct stat st;
	memset(r, 0, sizeof *r);
	int fd = rc->rec >= 0 ? rc->rec
	                      : openat(rc->parent, rc->rec_name,
	                               O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = record_trusted(fd, &st) ? pread(fd, buf, RECORD_MAX, 0) : -1;
	if (fd != rc->rec)
		close(fd);
	if (n < (ssize_t)strlen(RECORD_MAGIC))
		return false;
	buf[n] = '\0';
	if (strncmp(buf, RECORD_MAGIC, strlen(RECORD_MAGIC)))
		return false;
	const char *s = buf + strlen(RECORD_MAGIC);
	while (*s) {
		if (!strncmp(s, "published", 9) && !r->pub) {
			s += 9;
			if (!id_parse(&s, &r->p, true))
				return false;
			r->pub = true;
		} else if (!strncmp(s, "old", 3) && !r->old) {
			s += 3;
			if (!id_parse(&s, &r->o, false))
				return false;
			if (!strncmp(s, " published", 10))
				r->old_pub = true, s += 10;
			else if (!strncmp(s, " other", 6))
				s += 6;
			else
				return false;
			if (strncmp(s, " new", 4))
				return false;
			s += 4;
			if (!id_parse(&s, &r->n, false))
				return false;
			r->old = true;
		} else {
			return false;
		}
		if (*s++ != '\n')
			return false;
	}
	return true;
}

/* Write the record in place, in the locked file: emptied first, so a write
 * cut short leaves a prefix, which names less (or, torn inside a line,
 * nothing), never more.  0, or -1/errno. */
static int record_put(receiver *rc, const record *r)
{
	char buf[RECORD_MAX], *p = buf;
	p += sprintf(p, "%s", RECORD_MAGIC);
	if (r->pub) {
		p += sprintf(p, "published");
		p = id_format(p, &r->p, true);
		*p++ = '\n';
	}
	if (r->old) {
		p += sprintf(p, "old");
		p = id_format(p, &r->o, false);
		p += sprintf(p, " %s new", r->old_pub ? "published" : "other");
		p = id_format(p, &r->n, false);
		*p++ = '\n';
	}
	size_t n = (size_t)(p - buf);
	if (rc->rec < 0) {
		errno = EBADF;
		return -1;
	}
	if (ftruncate(rc->rec, 0) || pwrite(rc->rec, buf, n, 0) != (ssize_t)n || fdatasync(rc->rec))
		return -1;
	return 0;
}

/* record_put, best effort: without it the next transfer to DEST asks for
 * --replace, which is safe. */
static void record_write(receiver *rc, const record *r)
{
	if (!record_put(rc, r))
		return;
	stg__log(rc->ctx, STG_LOG_WARN,
	         "cannot write '%s/%s' (%s): the next transfer to '%s' will need --replace",
	         rc->dir, rc->rec_name, strerror(errno), rc->shown);
}

/* The record names the directory now at DEST (name under dfd, "": dfd
 * itself): taken after the switch (the renames change its ctime); nothing
 * of stager's changes it after that. */
static void record_published(receiver *rc, int dfd, const char *name)
{
	record r = {0};
	if (!id_at(dfd, name, &r.p))
		r.pub = true;
	record_write(rc, &r);
}

/* Take the lock of transfers to DEST: 0, or an errno (EWOULDBLOCK: held
 * by another).  flock where the filesystem has it; else (Lustre without
 * -o flock, some NFS setups) a POSIX lock of the open file description,
 * which NFSv4 takes on the server. */
static int lock_fd(int fd, bool wait)
{
	if (test_fault("flock"))
		errno = ENOSYS;
	else if (!flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)))
		return 0;
	if (errno == EWOULDBLOCK || errno == EINTR)
		return errno;
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (test_fault("ofdlock"))
		errno = ENOLCK;
	else if (!fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl))
		return 0;
	return errno == EACCES ? EWOULDBLOCK : errno;
}

/* Open the record, creating it empty, and lock it: it is the lock of
 * transfers to DEST, so two of them never share the partial directory.
 * The holder before us may have removed it (an empty record, after a
 * failed first transfer): then the one at the name is locked instead. */
static stg_err record_lock(receiver *rc)
{
	for (int tries = 0; tries < 100; tries++) {
		struct stat st, now;
		int fd = openat(rc->parent, rc->rec_name,
		                O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
		if (fd < 0 && errno != ELOOP)
			return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot open '%s/%s'", rc->dir, rc->rec_name);
		if (fd < 0 || !record_trusted(fd, &st)) {
			if (fd >= 0)
				close(fd);
			return stg__fail(rc->ctx, STG_EEXIST,
			                 "'%s/%s' is not stager's record (not a regular file of "
			                 "yours): nothing was changed; remove it, or choose "
			                 "another destination",
			                 rc->dir, rc->rec_name);
		}
		int en = lock_fd(fd, false);
		if (en == EWOULDBLOCK) {
			stg__log(rc->ctx, STG_LOG_INFO, "waiting for another transfer to '%s'",
			         rc->shown);
			en = lock_fd(fd, true);
		}
		if (en == EINTR || stg__cancelled(rc->ctx)) {
			close(fd);
			return stg__fail_errno(rc->ctx, STG_EINTR, en, "waiting for a lock");
		}
		if (en)
			stg__log(rc->ctx, STG_LOG_WARN,
			         "cannot lock '%s/%s' (%s): carrying on without the lock; do "
			         "not run two transfers to '%s' at once",
			         rc->dir, rc->rec_name, strerror(en), rc->shown);
		if (!fstatat(rc->parent, rc->rec_name, &now, AT_SYMLINK_NOFOLLOW) &&
		    now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
			rc->rec = fd;
			return STG_OK;
		}
		close(fd);
	}
	return stg__fail(rc->ctx, STG_EIO, "cannot lock '%s/%s': it keeps being replaced", rc->dir,
	                 rc->rec_name);
}

/* Does the record name the directory dest as the one stager published? */
static bool record_matches(receiver *rc, int dest)
{
	record r;
	dir_id cur;
	return record_read(rc, &r) && r.pub && !dir_id_of(dest, &cur) && id_equal(&r.p, &cur, true);
}

/* Is dir the home directory of the user stager runs as? */
static bool is_home(int dir)
{
	struct stat st, hs;
	if (fstat(dir, &st))
		return false;
	const char *h = getenv("HOME");
	if (h && *h && !stat(h, &hs) && hs.st_dev == st.st_dev && hs.st_ino == st.st_ino)
		return true;
	struct passwd pw, *pp = NULL;
	char pbuf[4096];
	return !getpwuid_r(geteuid(), &pw, pbuf, sizeof pbuf, &pp) && pp && pp->pw_dir &&
	       !stat(pp->pw_dir, &hs) && hs.st_dev == st.st_dev && hs.st_ino == st.st_ino;
}

/* May the directory dest (DEST, open) be replaced?  Only what stager
 * published there itself (and the user has not changed since), an empty
 * directory, or anything with --replace; a home directory never: a
 * destination mistyped without its trailing "/" must not cost a user their
 * data.  rc->by_record: allowed because the record names it. */
static stg_err dest_allowed(receiver *rc, int dest)
{
	bool pull = !strcmp(rc->what, "pull");
	const char *verb = pull ? "pull" : "push";
	rc->by_record = rc->by_empty = false;
	if (is_home(dest))
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s' is your home directory, which stager never replaces: %s "
		                 "into it as '%s%s/' (makes %s/NAME)",
		                 rc->shown, verb, pull ? "" : "HOST:", rc->shown, rc->shown);
	rc->by_record = record_matches(rc, dest);
	if (rc->replace || rc->by_record)
		return STG_OK;
	if (stg__dir_is_empty(dest)) {
		rc->by_empty = true;
		return STG_OK;
	}
	/* the inode the record names, with another ctime: changed by hand */
	record r;
	dir_id cur;
	bool changed = record_read(rc, &r) && r.pub && !dir_id_of(dest, &cur) &&
	               id_equal(&r.p, &cur, false);
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' exists and %s: %s into it as '%s%s/' (makes %s/NAME) or give "
	                 "--replace to make it a copy of %s",
	                 rc->shown,
	                 changed ? "has changed since stager published it"
	                 : pull  ? "was not made by stager pull"
	                         : "was not made by stager push",
	                 verb, pull ? "" : "HOST:", rc->shown, rc->shown,
	                 pull ? "HOST:PATH" : "LOCAL");
}

/* Is what is at name in DEST's parent the directory open as fd? */
static bool same_dir_at(receiver *rc, const char *name, int fd)
{
	struct stat a, b;
	return !fstatat(rc->parent, name, &a, AT_SYMLINK_NOFOLLOW) && !fstat(fd, &b) &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static stg_err not_replaced(receiver *rc)
{
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' was removed or replaced while the transfer ran; nothing was "
	                 "replaced (the files are kept for the next transfer)",
	                 rc->shown);
}

/* DEST was allowed for being empty, and the directory moved aside is not
 * empty now: something wrote into it after the last check. */
static bool filled_meanwhile(receiver *rc)
{
	return rc->by_empty && !stg__dir_is_empty(rc->dest);
}

static stg_err filled(receiver *rc)
{
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' was empty when the transfer began and has files now; nothing "
	                 "was replaced (the files are kept for the next transfer): %s into it "
	                 "as '%s/' or give --replace",
	                 rc->shown, !strcmp(rc->what, "pull") ? "pull" : "push", rc->shown);
}

/* The test hook "fill-dest": a file written into DEST after its last
 * check, as another process of the user's might. */
static void test_fill(receiver *rc)
{
	int fd = test_fault("fill-dest") ? openat(rc->dest, "stager-test-fill",
	                                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
	                                 : -1;
	if (fd >= 0)
		close(fd);
}

/* The switch without RENAME_EXCHANGE, cut after the old version was moved
 * aside: it goes back to DEST, and the record is as it was (naming it
 * again, with the ctime the renames gave it, if stager had published it). */
static void undo_aside(receiver *rc, const record *before)
{
	if (renameat(rc->parent, rc->old_name, rc->parent, rc->name))
		return; /* the record's "old" line puts it back next time */
	if (rc->by_record)
		record_published(rc, rc->dest, "");
	else
		record_write(rc, before);
}

/* NFS, CephFS and GlusterFS cannot exchange: the old version steps aside,
 * the new one takes its place, the old one is removed.  Between the two
 * renames, a moment, DEST does not exist.  The record names both (the
 * "old" line) before the first rename and until the removal is done, so a
 * receiver killed anywhere in between is finished by the next one
 * (finish_switch).  What is at .stager-old.NAME is never removed unseen:
 * it may be such a version. */
static stg_err switch_renames(receiver *rc)
{
	struct stat st;
	if (!fstatat(rc->parent, rc->old_name, &st, AT_SYMLINK_NOFOLLOW) || errno != ENOENT)
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s/%s' is in the way of the switch (left by an interrupted "
		                 "transfer?); nothing was replaced: look at it, move it "
		                 "elsewhere, and transfer again",
		                 rc->dir, rc->old_name);
	record before, r;
	if (!record_read(rc, &before))
		memset(&before, 0, sizeof before);
	before.old = false;
	r = before;
	r.old = true;
	r.old_pub = rc->by_record;
	if (dir_id_of(rc->dest, &r.o) || dir_id_of(rc->part, &r.n) || record_put(rc, &r)) {
		int en = errno;
		record_write(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en,
		                       "cannot write '%s/%s' before the switch of '%s'; nothing "
		                       "was replaced (the files are kept for the next transfer)",
		                       rc->dir, rc->rec_name, rc->shown);
	}
	if (renameat(rc->parent, rc->name, rc->parent, rc->old_name)) {
		int en = errno;
		record_write(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot switch '%s'", rc->shown);
	}
	if (!same_dir_at(rc, rc->old_name, rc->dest)) {
		/* not the directory checked: back, and nothing else */
		renameat(rc->parent, rc->old_name, rc->parent, rc->name);
		record_write(rc, &before);
		return not_replaced(rc);
	}
	if (filled_meanwhile(rc)) {
		undo_aside(rc, &before);
		return filled(rc);
	}
	if (test_fault("cut-switch"))
		return stg__fail(rc->ctx, STG_EINTR, "the switch of '%s' was cut (test)",
		                 rc->shown);
	if (renameat(rc->parent, rc->part_name, rc->parent, rc->name)) {
		int en = errno;
		undo_aside(rc, &before);
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot switch '%s'", rc->shown);
	}
	if (test_fault("cut-published"))
		return stg__fail(rc->ctx, STG_EINTR,
		                 "the switch of '%s' was cut before the record (test)", rc->shown);
	r.pub = !dir_id_of(rc->part, &r.p);
	record_write(rc, &r);
	if (test_fault("cut-remove"))
		return stg__fail(rc->ctx, STG_EINTR, "the removal of the old '%s' was cut (test)",
		                 rc->shown);
	if (stg__rmtree_at(rc->parent, rc->old_name)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "cannot remove the old version at '%s/%s' (%s): the next transfer to "
		         "'%s' tries again",
		         rc->dir, rc->old_name, strerror(errno), rc->shown);
		return STG_OK;
	}
	r.old = false;
	record_write(rc, &r);
	return STG_OK;
}

/* Put the partial directory at DEST: exchanged with the old version (then
 * removed), or renamed there on a first transfer.  DEST was checked when
 * the transfer began; the renames go by name, so the directory there now
 * must be that one, still allowed, and the one moved aside is checked
 * again (anything else is put back), and still empty if it was allowed
 * for that. */
static stg_err switch_in(receiver *rc)
{
	if (rc->dest >= 0) {
		if (!same_dir_at(rc, rc->name, rc->dest))
			return not_replaced(rc);
		stg_err err = dest_allowed(rc, rc->dest);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(rc->ctx));
			return stg__fail(rc->ctx, err, "%s; nothing was replaced", msg);
		}
		test_fill(rc);
		if (!xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name, RENAME_EXCHANGE)) {
			/* the old version now has the partial name */
			bool moved = same_dir_at(rc, rc->part_name, rc->dest);
			if (!moved || filled_meanwhile(rc)) {
				xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name,
				           RENAME_EXCHANGE);
				return moved ? filled(rc) : not_replaced(rc);
			}
			record_published(rc, rc->part, "");
			stg__rmtree_at(rc->parent, rc->part_name);
			return STG_OK;
		}
		if (errno != EINVAL && errno != ENOSYS)
			return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot switch '%s'",
			                       rc->shown);
		return switch_renames(rc);
	}
	if (!xrenameat2(rc->parent, rc->part_name, rc->parent, rc->name, RENAME_NOREPLACE)) {
		record_published(rc, rc->part, "");
		return STG_OK;
	}
	int en = errno;
	struct stat st;
	/* no RENAME_NOREPLACE (EINVAL): DEST was absent when the lock was
	 * taken, and transfers to it hold the lock; look again just before */
	if (en != EEXIST && en != EINVAL && en != ENOSYS)
		return stg__fail_errno(rc->ctx, STG_EIO, en, "cannot publish '%s'", rc->shown);
	if (en == EEXIST || !fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW) ||
	    errno != ENOENT)
		return stg__fail(rc->ctx, STG_EEXIST,
		                 "'%s' appeared while the transfer ran; nothing was published "
		                 "(the files are kept for the next one)",
		                 rc->shown);
	if (renameat(rc->parent, rc->part_name, rc->parent, rc->name))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot publish '%s'", rc->shown);
	record_published(rc, rc->part, "");
	return STG_OK;
}

/* Is name, beside DEST, a directory of the user's?  1 yes, 0 absent, -1
 * something else: another user's (anyone who can write DEST's parent, a
 * sticky /scratch included, can make one there first), or not a directory.
 * stager writes the user's files only into a directory of the user's. */
static int sibling_ours(receiver *rc, const char *name)
{
	struct stat st;
	if (fstatat(rc->parent, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -1;
	return S_ISDIR(st.st_mode) && st.st_uid == geteuid() ? 1 : -1;
}

static stg_err not_ours(receiver *rc, const char *name)
{
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s/%s' is not a directory of yours (another user's, or not a "
	                 "directory): nothing was written to it; remove it (or ask its owner "
	                 "to), or choose another destination",
	                 rc->dir, name);
}

/* --pack: may the file at DEST (PATH.tar.zst) be replaced?  As for a tree:
 * only a pack stager published there (the record names it by inode, ctime
 * and birth time) or with --replace; nothing there is fine. */
static stg_err pack_allowed(receiver *rc)
{
	char path[2 * STG_PATH_MAX + 2];
	snprintf(path, sizeof path, "%s/%s", rc->dir, rc->name);
	struct stat st;
	if (fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return STG_OK;
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", path);
	}
	if (!S_ISREG(st.st_mode))
		return stg__fail(rc->ctx, STG_EEXIST, "'%s' exists and is not a pack", path);
	record r;
	dir_id cur;
	if (rc->replace || (record_read(rc, &r) && r.pub && !id_at(rc->parent, rc->name, &cur) &&
	                    id_equal(&r.p, &cur, true)))
		return STG_OK;
	return stg__fail(rc->ctx, STG_EEXIST,
	                 "'%s' exists and was not made by stager push --pack (or has changed "
	                 "since): give --replace to replace it, or push to another PATH",
	                 path);
}

/* Directory modes and mtimes, deepest first, then the switch. */
static stg_err publish(receiver *rc)
{
	for (size_t i = rc->n; i-- > 0;) {
		const stg_wentry *e = &rc->r[i].e;
		if (e->type != STG_DIR)
			continue;
		const char *base;
		int pfd = stg__parent_of(rc->part, e->path, &base);
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
		/* checked again under the lock: a file put there meanwhile */
		stg_err err = pack_allowed(rc);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", stg_errmsg(rc->ctx));
			return stg__fail(rc->ctx, err, "%s; nothing was replaced", msg);
		}
		if ((err = stg_pack_dir(rc->ctx, tree, out, &po, NULL)))
			return err;
		record_published(rc, rc->parent, rc->name);
		stg__rmtree_at(rc->parent, rc->part_name);
		return STG_OK;
	}
	return switch_in(rc);
}

/* --pack: the files of the pack already at PATH serve as the basis, so a
 * re-push sends deltas as it would for a tree.  A pack that cannot be read
 * is no basis (said once); nothing is sent that would not be otherwise. */
static stg_err unpack_basis(receiver *rc)
{
	stg_err err = pack_allowed(rc);
	if (err)
		return err;
	/* the old pack's files are unpacked here: the user's, so only into a
	 * directory of the user's (one left by a killed receiver is removed) */
	int ours = sibling_ours(rc, rc->basis_name);
	if (ours < 0)
		return not_ours(rc, rc->basis_name);
	if (ours)
		stg__rmtree_at(rc->parent, rc->basis_name);
	rc->basis_made = true;
	char pack_path[2 * STG_PATH_MAX + 2], basis[2 * STG_PATH_MAX + 2];
	snprintf(pack_path, sizeof pack_path, "%s/%s", rc->dir, rc->name);
	snprintf(basis, sizeof basis, "%s/%s", rc->dir, rc->basis_name);
	struct stat st;
	if (fstatat(rc->parent, rc->name, &st, AT_SYMLINK_NOFOLLOW)) {
		if (errno == ENOENT)
			return STG_OK;
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot read '%s'", pack_path);
	}
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
	if (rc->dest >= 0 && (fstat(rc->dest, &st) || st.st_uid != geteuid())) {
		close(rc->dest);
		rc->dest = -1;
		rc->basis_made = false;
		return not_ours(rc, rc->basis_name);
	}
	return STG_OK;
}

/* DEST's parent directory and the names beside it. */
static stg_err dest_names(receiver *rc, const char *dest)
{
	char path[STG_PATH_MAX + 1];
	size_t len = strlen(dest);
	while (len > 1 && dest[len - 1] == '/')
		len--;
	if (len == 0 || len > STG_PATH_MAX)
		return stg__fail(rc->ctx, STG_EUSAGE, "a bad destination '%s'", dest);
	memcpy(path, dest, len);
	path[len] = '\0';
	if (!(rc->shown = strdup(path)))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
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
	    !(rc->basis_name = malloc(nl + 9 + sizeof ".stager-basis.")) ||
	    !(rc->rec_name = malloc(nl + 9 + sizeof ".stager-published.")) ||
	    !(rc->old_name = malloc(nl + 9 + sizeof ".stager-old.")))
		return stg__fail(rc->ctx, STG_ENOMEM, "out of memory");
	/* --pack: PATH.tar.zst, as collect --pack writes */
	sprintf(rc->name, "%s%s", name, rc->pack && !ext ? ".tar.zst" : "");
	sprintf(rc->part_name, ".stager-partial.%s", rc->name);
	sprintf(rc->basis_name, ".stager-basis.%s", rc->name);
	sprintf(rc->rec_name, ".stager-published.%s", rc->name);
	sprintf(rc->old_name, ".stager-old.%s", rc->name);
	rc->parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rc->parent < 0)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot open '%s' (the directory that will hold '%s')", dir,
		                       name);
	return STG_OK;
}

/* Open DEST itself (a tree), and check that it may be replaced. */
static stg_err dest_open(receiver *rc)
{
	rc->dest = openat(rc->parent, rc->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->dest < 0 && errno == ENOENT)
		return STG_OK;
	if (rc->dest < 0 && (errno == ENOTDIR || errno == ELOOP))
		return stg__fail(rc->ctx, STG_EEXIST, "'%s' exists and is not a directory",
		                 rc->shown);
	if (rc->dest < 0)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot open '%s'", rc->shown);
	return dest_allowed(rc, rc->dest);
}

/* A switch without RENAME_EXCHANGE that did not finish (a receiver killed
 * between its first rename and the end of the old version's removal) left
 * the old version at .stager-old.NAME, and the record's "old" line names it
 * and the version that was to replace it.  Under the lock, before anything
 * else: the old version goes back if DEST is absent, and is removed (the
 * removal finished) if DEST is that new version.  Only a directory of the
 * user's that the line names: anyone who can write the parent could make
 * one of that name. */
static void finish_switch(receiver *rc)
{
	record r;
	bool have = record_read(rc, &r);
	struct stat st;
	if (fstatat(rc->parent, rc->old_name, &st, AT_SYMLINK_NOFOLLOW)) {
		/* nothing there: a line naming it is stale (its inode may be reused) */
		if (errno == ENOENT && have && r.old) {
			r.old = false;
			record_write(rc, &r);
		}
		return;
	}
	int fd = openat(rc->parent, rc->old_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
	    nfd = -1;
	dir_id id, nid;
	bool ours = fd >= 0 && !fstat(fd, &st) && st.st_uid == geteuid() && !dir_id_of(fd, &id) &&
	            have && r.old && id_equal(&r.o, &id, false);
	if (!ours) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "'%s/%s' is not a version stager moved aside; it was left where it is: "
		         "look at it, then move it back to '%s' or remove it",
		         rc->dir, rc->old_name, rc->shown);
		goto out;
	}
	nfd = openat(rc->parent, rc->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (nfd < 0 && errno == ENOENT) {
		if (!renameat(rc->parent, rc->old_name, rc->parent, rc->name)) {
			stg__log(rc->ctx, STG_LOG_WARN,
			         "'%s': put back the version an interrupted switch had moved aside",
			         rc->shown);
			/* the rename changed its ctime: the record names it again
			 * only if stager had published it */
			r.old = false;
			r.pub = r.old_pub && !dir_id_of(fd, &r.p);
			record_write(rc, &r);
		}
		goto out;
	}
	if (nfd < 0 || fstat(nfd, &st) || st.st_uid != geteuid() || dir_id_of(nfd, &nid) ||
	    !id_equal(&r.n, &nid, false)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "'%s/%s' is the version an interrupted switch moved aside, and '%s' is "
		         "not the one that replaced it: both were left as they are; look at "
		         "them, then remove one",
		         rc->dir, rc->old_name, rc->shown);
		goto out;
	}
	if (stg__rmtree_at(rc->parent, rc->old_name)) {
		stg__log(rc->ctx, STG_LOG_WARN,
		         "cannot remove '%s/%s', the old version an interrupted switch left "
		         "(%s): remove it, then transfer again",
		         rc->dir, rc->old_name, strerror(errno));
		goto out;
	}
	stg__log(rc->ctx, STG_LOG_INFO,
	         "'%s/%s': removed the old version an interrupted switch left", rc->dir,
	         rc->old_name);
	/* the record names DEST only if it did before the cut */
	r.old = false;
	r.pub = r.pub && id_equal(&r.p, &nid, true);
	record_write(rc, &r);
out:
	if (fd >= 0)
		close(fd);
	if (nfd >= 0)
		close(nfd);
}

static void receiver_names_free(receiver *rc)
{
	/* an empty record names nothing: it was only the lock */
	struct stat st;
	if (rc->rec >= 0 && !fstat(rc->rec, &st) && st.st_size == 0)
		unlinkat(rc->parent, rc->rec_name, 0);
	if (rc->rec >= 0)
		close(rc->rec); /* and the lock with it */
	free(rc->name);
	free(rc->dir);
	free(rc->part_name);
	free(rc->basis_name);
	free(rc->rec_name);
	free(rc->old_name);
	free(rc->shown);
	if (rc->parent >= 0)
		close(rc->parent);
}

/* Open DEST's parent, the record (locked), the partial directory and DEST
 * itself. */
static stg_err receiver_open(receiver *rc, const char *dest)
{
	const char *faults = getenv(STG_TEST_FAULTS_ENV);
	if (faults && *faults)
		stg__log(rc->ctx, STG_LOG_WARN,
		         "%s=%s: simulating filesystem faults, for tests only; unset it",
		         STG_TEST_FAULTS_ENV, faults);
	stg_err err = dest_names(rc, dest);
	if (!err)
		err = record_lock(rc);
	if (err)
		return err;
	/* the temporary record of earlier stagers (renamed over the record), left by
	 * a receiver killed at that rename */
	char tmp[STG_PATH_MAX + 32];
	struct stat st;
	snprintf(tmp, sizeof tmp, ".stager-tmp-published.%s", rc->name);
	if (!fstatat(rc->parent, tmp, &st, AT_SYMLINK_NOFOLLOW) && !S_ISDIR(st.st_mode) &&
	    st.st_uid == geteuid())
		unlinkat(rc->parent, tmp, 0);
	if (rc->pack) {
		if ((err = unpack_basis(rc)))
			return err;
	} else {
		finish_switch(rc);
		if ((err = dest_open(rc)))
			return err;
	}
	if (mkdirat(rc->parent, rc->part_name, 0700) && errno != EEXIST)
		return stg__fail_errno(rc->ctx, stg__err_from_errno(errno, STG_EIO), errno,
		                       "cannot create '%s/%s'", rc->dir, rc->part_name);
	rc->part =
	        openat(rc->parent, rc->part_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rc->part < 0 && errno != ENOTDIR && errno != ELOOP)
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot open '%s/%s'", rc->dir,
		                       rc->part_name);
	/* the user's files go only into a directory of the user's: another
	 * user may have made this one first, open to all */
	struct stat pst;
	if (rc->part < 0 || fstat(rc->part, &pst) || !S_ISDIR(pst.st_mode) ||
	    pst.st_uid != geteuid()) {
		if (rc->part >= 0)
			close(rc->part);
		rc->part = -1;
		return not_ours(rc, rc->part_name);
	}
	if (fchmod(rc->part, 0700))
		return stg__fail_errno(rc->ctx, STG_EIO, errno, "cannot set the mode of '%s/%s'",
		                       rc->dir, rc->part_name);
	return STG_OK;
}

/* A receiver with nothing open yet. */
static receiver receiver_new(stg_ctx *ctx, stg_wire *w, bool pack, bool replace, const char *what)
{
	return (receiver){.ctx = ctx,
	                  .w = w,
	                  .parent = -1,
	                  .part = -1,
	                  .dest = -1,
	                  .rec = -1,
	                  .pack = pack,
	                  .replace = replace,
	                  .what = what};
}

stg_err stg__receive_check(stg_ctx *ctx, const char *dest, bool pack, bool replace,
                           const char *what)
{
	receiver rc = receiver_new(ctx, NULL, pack, replace, what);
	stg_err err = dest_names(&rc, dest);
	if (!err)
		err = pack ? pack_allowed(&rc) : dest_open(&rc);
	if (rc.dest >= 0)
		close(rc.dest);
	receiver_names_free(&rc);
	return err;
}

stg_err stg__receive_tree(stg_ctx *ctx, stg_wire *w, const char *dest, bool pack, bool replace,
                          const char *what, stg_xfer_result *res)
{
	receiver rc = receiver_new(ctx, w, pack, replace, what);
	stg_err err = STG_OK;
	rc.buf = malloc(XFER_BLOCK);
	rc.out = malloc(XFER_BLOCK);
	if (!rc.buf || !rc.out || stg__strmap_init(&rc.paths, 1024)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	rc.map = true;
	stg__boot_id(rc.boot);
	if ((err = receiver_open(&rc, dest)) || (err = read_manifest(&rc)) ||
	    (err = resume_names_init(&rc)) || (err = clean_partial(&rc)) || (err = plan(&rc, res)))
		goto out;
	stg__progress(ctx, what, 0, rc.total);
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
		res->sent_content += re->e.size - re->from;
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
	if (rc.rmap)
		stg__strmap_free(&rc.rnames);
	for (size_t i = 0; i < rc.n; i++) {
		stg__wentry_free(&rc.r[i].e);
		XXH3_freeState(rc.r[i].pre);
		free(rc.r[i].rname);
	}
	free(rc.r);
	free(rc.buf);
	free(rc.out);
	/* a partial directory with nothing to resume from is no use */
	if (err && rc.part >= 0 && stg__dir_is_empty(rc.part))
		unlinkat(rc.parent, rc.part_name, AT_REMOVEDIR);
	if (rc.dest >= 0)
		close(rc.dest);
	if (rc.basis_made && sibling_ours(&rc, rc.basis_name) > 0)
		stg__rmtree_at(rc.parent, rc.basis_name);
	if (rc.part >= 0)
		close(rc.part);
	receiver_names_free(&rc);
	return err;
}
