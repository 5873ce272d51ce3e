/*
 * collect.c - copy results from scratch to the shared filesystem, as often
 * as a job likes, cheaply and safely.
 *
 * The record.  For each (SRC, DEST, mode) stager keeps on scratch a log,
 * collect/<id>, of what it has put in DEST: directories made; files with
 * their identity on scratch (size, mtime, ctime, inode), mode and the
 * XXH3-128 of what was written; links.  A file whose identity is unchanged
 * is not looked at again; one whose identity changed but whose size did
 * not is hashed locally and sent only if its content differs.  None of that
 * touches the shared filesystem: the one call an unchanged collect makes
 * there is a stat() of DEST, which notices a DEST removed or replaced since
 * the record was made (everything is then sent again).  Files removed from
 * SRC are not removed from DEST: collect never deletes results.
 *
 * Atomicity.  Every file is written as .stager-tmp.<host>.<pid>.<n> beside its
 * final name and renamed over it, so a final name holds the old file or the
 * complete new one.  The temporary name is logged before the file is
 * created, so the next collect removes what a killed one left; the log is
 * appended with write(2) as each file lands, so a kill loses nothing
 * recorded and at worst sends a file again.
 *
 * --pack.  SRC is packed on scratch and verified there, then copied to
 * DEST.tar.zst like a single file.  The record then lists SRC's identities
 * at that time: any change, addition or removal makes a new pack.
 */
#include "cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TRIES        5 /* attempts at a file on transient errors */
#define CHANGE_TRIES 3 /* attempts at a file that changes while it is copied */

/* One line of the record: what DEST holds from SRC. */
typedef struct crec {
	char type; /* 'd' directory, 'f' file, 'l' link */
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	unsigned mode;
	uint8_t xxh3[16];
	char *path;
} crec;

typedef struct collector {
	stg_ctx *ctx;
	stg_cache *c;
	const stg_collect_opts *o;
	stg_collect_result *res;
	uint64_t total_bytes; /* of the files this run sends: progress's total */
	char src[STG_PATH_MAX + 1], dest[STG_PATH_MAX + 1];
	char where[STG_PATH_MAX + 1]; /* the directory temporaries go in, as recorded */
	char id[17];
	int srcfd, destfd, logfd;
	crec *recs;
	size_t n_recs, cap_recs, log_lines;
	stg_strmap map;  /* path -> index in recs */
	stg_strmap dirs; /* directories of DEST changed in this run */
	char **pending;  /* temporary names logged but not resolved */
	size_t n_pending;
	uint64_t dest_dev, dest_ino;
	unsigned seq;
	char first_error[STG_ERRMSG_MAX];
	stg_err stop; /* an error that ends the run (space, interrupt) */
	bool rewrite; /* the record needs rewriting (damaged, or a new pack) */
	int umask;    /* -1: unknown */
} collector;

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* ---- the record ----------------------------------------------------------------- */

static crec *rec_find(collector *k, const char *path)
{
	uint32_t i = stg__strmap_get(&k->map, path, strlen(path));
	return i == UINT32_MAX ? NULL : &k->recs[i];
}

/* Insert or replace the record of r->path (which is taken over, or freed
 * if the path has a record already); the stored record, NULL if out of
 * memory. */
static crec *rec_set(collector *k, crec *r)
{
	crec *old = rec_find(k, r->path);
	if (old) {
		char *keep = old->path; /* the map's key */
		free(r->path);
		*old = *r;
		old->path = keep;
		return old;
	}
	if (k->n_recs == k->cap_recs) {
		size_t ncap = k->cap_recs ? k->cap_recs * 2 : 256;
		crec *nv = realloc(k->recs, ncap * sizeof *nv);
		if (!nv) {
			free(r->path);
			return NULL;
		}
		k->recs = nv;
		k->cap_recs = ncap;
	}
	if (stg__strmap_put(&k->map, r->path, strlen(r->path), (uint32_t)k->n_recs) < 0) {
		free(r->path);
		return NULL;
	}
	k->recs[k->n_recs] = *r;
	return &k->recs[k->n_recs++];
}

static void recs_clear(collector *k)
{
	for (size_t i = 0; i < k->n_recs; i++)
		free(k->recs[i].path);
	k->n_recs = 0;
	stg__strmap_free(&k->map);
	stg__strmap_init(&k->map, 1024);
}

/* Compose a line (the path escaped, last) and append it with one write. */
static int log_line(collector *k, const char *head, const char *path)
{
	char buf[STG_PATH_MAX * 2 + 256];
	FILE *f = fmemopen(buf, sizeof buf, "w");
	if (!f)
		return -1;
	fputs(head, f);
	if (path)
		stg__put_escaped(f, path);
	fputc('\n', f);
	long len = ftell(f);
	fclose(f);
	if (len <= 0 || (size_t)len >= sizeof buf)
		return -1;
	k->log_lines++;
	return stg__write_full(k->logfd, buf, (size_t)len);
}

static int log_rec(collector *k, const crec *r)
{
	char head[256];
	if (r->type == 'f') {
		char hex[33];
		for (int i = 0; i < 16; i++)
			snprintf(hex + 2 * i, 3, "%02x", r->xxh3[i]);
		snprintf(head, sizeof head, "f %llu %lld %lld %llu %o %s ",
		         (unsigned long long)r->size, (long long)r->mtime_ns,
		         (long long)r->ctime_ns, (unsigned long long)r->ino, r->mode, hex);
	} else if (r->type == 'l') {
		snprintf(head, sizeof head, "l %lld %lld %llu ", (long long)r->mtime_ns,
		         (long long)r->ctime_ns, (unsigned long long)r->ino);
	} else {
		snprintf(head, sizeof head, "d ");
	}
	return log_line(k, head, r->path);
}

static void pending_drop(collector *k, const char *tmp)
{
	for (size_t i = 0; i < k->n_pending; i++) {
		if (!strcmp(k->pending[i], tmp)) {
			free(k->pending[i]);
			k->pending[i] = k->pending[--k->n_pending];
			return;
		}
	}
}

static int pending_add(collector *k, const char *tmp)
{
	char **nv = realloc(k->pending, (k->n_pending + 1) * sizeof *nv);
	if (!nv)
		return -1;
	k->pending = nv;
	if (!(nv[k->n_pending] = strdup(tmp)))
		return -1;
	k->n_pending++;
	return 0;
}

/* Parse one record line; false if malformed (the rest is ignored). */
static bool parse_line(collector *k, char *line)
{
	char type = line[0];
	if (!type || line[1] != ' ')
		return false;
	char *p = line + 2;
	crec r = {.type = type};
	if (type == 't' || type == 'x') {
		if (!stg__unescape(p))
			return false;
		if (type == 'x')
			pending_drop(k, p);
		else if (pending_add(k, p))
			return false;
		return true;
	}
	if (type == 'D') {
		unsigned long long dev, ino;
		if (sscanf(p, "%llu %llu", &dev, &ino) != 2)
			return false;
		k->dest_dev = dev;
		k->dest_ino = ino;
		return true;
	}
	int used = 0;
	if (type == 'f') {
		unsigned long long size, ino;
		long long mt, ct;
		char hex[33];
		if (sscanf(p, "%llu %lld %lld %llu %o %32s %n", &size, &mt, &ct, &ino, &r.mode, hex,
		           &used) != 6 ||
		    strlen(hex) != 32)
			return false;
		r.size = size;
		r.ino = ino;
		r.mtime_ns = mt;
		r.ctime_ns = ct;
		for (int i = 0; i < 16; i++)
			sscanf(hex + 2 * i, "%2hhx", &r.xxh3[i]);
	} else if (type == 'l') {
		unsigned long long ino;
		long long mt, ct;
		if (sscanf(p, "%lld %lld %llu %n", &mt, &ct, &ino, &used) != 3)
			return false;
		r.ino = ino;
		r.mtime_ns = mt;
		r.ctime_ns = ct;
	} else if (type != 'd') {
		return false;
	}
	p += used;
	if (!stg__unescape(p) || !stg__path_ok(p, strlen(p)) || !(r.path = strdup(p)))
		return false;
	return rec_set(k, &r) != NULL;
}

static void record_compact(collector *k);

/* Open (creating) the record and read what it says. */
static stg_err record_open(collector *k)
{
	stg_ctx *ctx = k->ctx;
	if (mkdirat(k->c->rootfd, "collect", 0700) && errno != EEXIST)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s/collect'",
		                       k->c->root);
	char rel[64];
	snprintf(rel, sizeof rel, "collect/%s", k->id);
	k->logfd = openat(k->c->rootfd, rel, O_RDWR | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC,
	                  0600);
	if (k->logfd < 0)
		return stg__fail_errno(ctx, STG_EIO, errno,
		                       "cannot open the collect record '%s/%s'", k->c->root, rel);
	int fd = dup(k->logfd);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot read the collect record");
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	bool first = true;
	while ((len = getline(&line, &cap, f)) > 0) {
		/* a torn last line, a line that is not ours: keep what came
		 * before and rewrite the record */
		if (line[len - 1] != '\n') {
			k->rewrite = true;
			break;
		}
		line[len - 1] = '\0';
		if (first) {
			first = false;
			if (strcmp(line, "stager-collect 1")) {
				k->rewrite = true;
				break;
			}
			k->log_lines++;
			continue;
		}
		k->log_lines++;
		if (line[0] == 'S')
			continue; /* the source, for clean */
		if (line[0] == 'P' && line[1] == ' ') {
			/* where temporaries go, for clean */
			if (stg__unescape(line + 2))
				snprintf(k->where, sizeof k->where, "%s", line + 2);
			continue;
		}
		if (!parse_line(k, line)) {
			k->rewrite = true;
			break;
		}
	}
	free(line);
	fclose(f);
	if (k->rewrite)
		record_compact(k);
	return STG_OK;
}

/* Rewrite the record with only what is current (atomically). */
static void record_compact(collector *k)
{
	char rel[64], tmp[80];
	snprintf(rel, sizeof rel, "collect/%s", k->id);
	snprintf(tmp, sizeof tmp, "collect/%s.tmp", k->id);
	int fd = openat(k->c->rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
	                0600);
	if (fd < 0)
		return;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		return;
	}
	fprintf(f, "stager-collect 1\nS ");
	stg__put_escaped(f, k->src);
	fprintf(f, "\nD %llu %llu\n", (unsigned long long)k->dest_dev,
	        (unsigned long long)k->dest_ino);
	if (k->where[0]) {
		fputs("P ", f);
		stg__put_escaped(f, k->where);
		fputc('\n', f);
	}
	int oldfd = k->logfd;
	k->logfd = fileno(f);
	size_t lines = 2;
	for (size_t i = 0; i < k->n_recs; i++) {
		fflush(f);
		log_rec(k, &k->recs[i]);
		lines++;
	}
	for (size_t i = 0; i < k->n_pending; i++) {
		fflush(f);
		log_line(k, "t ", k->pending[i]);
		lines++;
	}
	k->logfd = oldfd;
	if (fclose(f) == 0 && renameat(k->c->rootfd, tmp, k->c->rootfd, rel) == 0) {
		k->log_lines = lines;
		k->rewrite = false;
		int nfd = openat(k->c->rootfd, rel, O_RDWR | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
		if (nfd >= 0) {
			close(k->logfd);
			k->logfd = nfd;
		}
	} else {
		unlinkat(k->c->rootfd, tmp, 0);
	}
}

/* ---- the shared filesystem side ------------------------------------------------ */

static bool transient(int e)
{
	return e == EINTR || e == EAGAIN || e == ESTALE || e == EIO || e == ETIMEDOUT;
}

static void op(collector *k)
{
	stg__bucket_take(k->ctx, &k->c->ops, 1);
}

/* Where the temporary for path goes: beside it, named by host and
 * process (nodes of one job may collect into one DEST at once). */
static void tmp_name(collector *k, const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	snprintf(out, len, "%.*s%s.stager-tmp.%s.%d.%u", slash ? (int)(slash - path) : 0, path,
	         slash ? "/" : "", stg__collect_host(), (int)getpid(), k->seq++);
}

/* Remove the temporaries a killed collect left. */
static void remove_leftovers(collector *k)
{
	while (k->n_pending) {
		char *t = k->pending[k->n_pending - 1];
		op(k);
		if (unlinkat(k->destfd, t, 0) && errno != ENOENT)
			stg__log(k->ctx, STG_LOG_WARN, "cannot remove the leftover '%s/%s': %s",
			         k->dest, t, strerror(errno));
		log_line(k, "x ", t);
		free(t);
		k->n_pending--;
	}
}

/* The marker that says who writes temporaries in DEST (collect_mark.c):
 * in the record too, so that `stager clean` on this node removes it with
 * the temporaries of a collect that was killed. */
static void mark_begin(collector *k, char *mark, size_t len)
{
	if (stg__mark_begin(k->destfd, mark, len) == 0)
		log_line(k, "t ", mark);
}

static void mark_end(collector *k, const char *mark)
{
	if (mark[0]) {
		stg__mark_end(k->destfd, mark);
		log_line(k, "x ", mark);
	}
}

/* The process's umask, from /proc (umask() would change it); -1 unknown. */
static int current_umask(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned m;
	int out = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Umask: %o", &m) == 1)
			out = (int)m;
	if (f)
		fclose(f);
	return out;
}

/* Copy the open source s to a new file at tmp; its XXH3 into h.  The file
 * is created with its final mode, so most need no chmod (one round trip
 * less per file on NFS). */
static int copy_out(collector *k, int s, const char *tmp, const struct stat *st, uint8_t h[16])
{
	op(k);
	mode_t mode = st->st_mode & 01777;
	int d = openat(k->destfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	               mode & 0777);
	if (d < 0)
		return -1;
	XXH3_state_t *xs = XXH3_createState();
	const size_t bs = 1 << 20;
	uint8_t *buf = malloc(bs);
	int rc = -1, e = ENOMEM;
	if (!xs || !buf)
		goto out;
	XXH3_128bits_reset(xs);
	uint64_t off = 0;
	for (;;) {
		ssize_t n = pread(s, buf, bs, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			e = errno;
			goto out;
		}
		if (n == 0)
			break;
		stg__bucket_take(k->ctx, &k->c->bw, (double)n);
		if (stg__write_full(d, buf, (size_t)n)) {
			e = errno;
			goto out;
		}
		XXH3_128bits_update(xs, buf, (size_t)n);
		off += (uint64_t)n;
		k->res->sent_bytes += (uint64_t)n;
		if (k->ctx->progress_fn)
			k->ctx->progress_fn(k->ctx->progress_arg, "collect", k->res->sent_bytes,
			                    k->total_bytes);
		if (stg__cancelled(k->ctx)) {
			e = EINTR;
			goto out;
		}
	}
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits_digest(xs));
	memcpy(h, c.digest, 16);
	struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
	if (k->umask < 0 || (mode & ~0777u) || (mode & (mode_t)k->umask)) {
		op(k);
		if (fchmod(d, mode)) {
			e = errno;
			goto out;
		}
	}
	op(k);
	if (futimens(d, ts)) {
		e = errno;
		goto out;
	}
	/* the data is on the server before the rename publishes it: on a
	 * filesystem with client write-back (Lustre, GPFS, BeeGFS) a node that
	 * crashes after the rename would otherwise leave a short file under
	 * the final name, in place of the good one (NFS flushes at close) */
	op(k);
	if (fdatasync(d)) {
		e = errno;
		goto out;
	}
	rc = 0;
out:
	XXH3_freeState(xs);
	free(buf);
	/* NFS reports failed writes at close */
	if (close(d) && rc == 0) {
		rc = -1;
		e = errno;
	}
	errno = e;
	return rc;
}

/* Put one file or link at its place in DEST.  0, or -1/errno with the
 * error's origin in *where ("source" or "dest"). */
static int put_item(collector *k, const stg_witem *it, const char *final, crec *r,
                    const char **where)
{
	char tmp[STG_PATH_MAX + 64];
	tmp_name(k, final, tmp, sizeof tmp);
	*where = "dest";
	if (log_line(k, "t ", tmp))
		return -1;
	int rc = -1, e = 0, s = -1;
	if (it->link) {
		op(k);
		rc = symlinkat(it->link, k->destfd, tmp);
		if (rc == 0) { /* the link's own mtime, as rsync -a keeps it */
			struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
			utimensat(k->destfd, tmp, ts, AT_SYMLINK_NOFOLLOW);
		}
	} else {
		s = openat(k->srcfd, it->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat before, after;
		if (s < 0 || fstat(s, &before)) {
			*where = "source";
			e = errno;
			goto out;
		}
		if ((rc = copy_out(k, s, tmp, &before, r->xxh3)))
			goto fail;
		/* a file written while it was copied (a checkpoint being saved)
		 * may be torn: it must not replace the good copy in DEST */
		if (fstat(s, &after) || after.st_size != before.st_size ||
		    ns_of(&after.st_mtim) != ns_of(&before.st_mtim) ||
		    ns_of(&after.st_ctim) != ns_of(&before.st_ctim)) {
			*where = "changed";
			errno = EAGAIN;
			rc = -1;
			goto fail;
		}
		r->size = (uint64_t)before.st_size;
		r->mtime_ns = ns_of(&before.st_mtim);
		r->ctime_ns = ns_of(&before.st_ctim);
		r->ino = (uint64_t)before.st_ino;
		r->mode = before.st_mode & 07777;
	}
	if (rc)
		goto fail;
	op(k);
	if ((rc = renameat(k->destfd, tmp, k->destfd, final)))
		goto fail;
	log_line(k, "x ", tmp);
	goto out;
fail:
	e = errno;
	op(k);
	unlinkat(k->destfd, tmp, 0);
	log_line(k, "x ", tmp);
	rc = -1;
out:
	if (s >= 0)
		close(s);
	if (rc)
		errno = e;
	return rc;
}

static double slot_deadline(const stg_collect_opts *o)
{
	return o->slot_wait_max > 0 ? stg__now() + o->slot_wait_max : 0;
}

/* Record a failure that does not stop the run. */
static void failed(collector *k, const char *path, const char *where, int e)
{
	k->res->failed++;
	if (!strcmp(where, "notdir"))
		stg__log(k->ctx, STG_LOG_WARN,
		         "cannot collect the directory '%s': DEST has a file of that name "
		         "(collect never deletes results: move '%s/%s' away)",
		         path, k->dest, path);
	else
		stg__log(k->ctx, STG_LOG_WARN, "cannot collect '%s' (%s): %s", path,
		         !strcmp(where, "source") ? "reading it on scratch" : "writing it to DEST",
		         strerror(e));
	if (!k->first_error[0])
		snprintf(k->first_error, sizeof k->first_error, "'%.400s/%.400s': %s", k->dest,
		         path, strerror(e));
}

/* Send one file or link, retrying transient errors with backoff; true if
 * it landed, and then *out describes it (path not set). */
static bool send_item(collector *k, const stg_witem *it, const char *final, const char *shown,
                      crec *out)
{
	crec r = {.type = it->link ? 'l' : 'f'};
	const char *where = "dest";
	for (int attempt = 1;; attempt++) {
		if (put_item(k, it, final, &r, &where) == 0)
			break;
		int e = errno;
		/* EINTR without a cancel is a signal that stager's caller
		 * handles (a profiler, SIGCHLD): retried as transient */
		if (stg__cancelled(k->ctx)) {
			k->stop = stg__fail(k->ctx, STG_EINTR, "interrupted");
			return false;
		}
		if (!strcmp(where, "changed")) {
			if (attempt < CHANGE_TRIES) {
				stg__nap(k->ctx, 0.2 * attempt);
				continue;
			}
			stg__log(k->ctx, STG_LOG_WARN,
			         "'%s' kept changing while it was collected: DEST keeps its "
			         "previous copy, the next collect sends it",
			         shown);
			k->res->changing++;
			return false;
		}
		if (!strcmp(where, "source") && e == ENOENT) {
			stg__log(k->ctx, STG_LOG_WARN,
			         "'%s' disappeared before it could be collected", shown);
			return false;
		}
		if (e == ENOSPC || e == EDQUOT) {
			k->stop = stg__fail_errno(k->ctx, STG_ENOSPC, e,
			                          "cannot write '%s/%s' (quota or space)", k->dest,
			                          final);
			return false;
		}
		/* DEST itself gone or read-only: no use trying the other files */
		struct stat dst;
		if (strcmp(where, "source") && e == ENOENT && fstat(k->destfd, &dst) == 0 &&
		    dst.st_nlink == 0) {
			k->stop = stg__fail(k->ctx, STG_EIO,
			                    "'%s' was removed while it was collected: nothing more "
			                    "sent; collect again to send everything",
			                    k->dest);
			return false;
		}
		if (strcmp(where, "source") && e == EROFS) {
			k->stop = stg__fail(k->ctx, STG_EIO,
			                    "'%s' is on a read-only filesystem: nothing sent there",
			                    k->dest);
			return false;
		}
		if (!transient(e) || attempt == TRIES) {
			failed(k, shown, where, e);
			return false;
		}
		double wait = 0.25 * (1 << (attempt - 1));
		stg__log(k->ctx, STG_LOG_WARN, "retrying '%s' in %.2g s (attempt %d of %d): %s",
		         shown, wait, attempt + 1, TRIES, strerror(e));
		k->res->retries++;
		stg__nap(k->ctx, wait);
		if (e == ESTALE && k->where[0]) {
			/* the server forgot DEST's handle: look it up again */
			int fd = open(k->where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd >= 0) {
				close(k->destfd);
				k->destfd = fd;
			}
		}
	}
	if (it->link) {
		r.mtime_ns = ns_of(&it->st.st_mtim);
		r.ctime_ns = ns_of(&it->st.st_ctim);
		r.ino = (uint64_t)it->st.st_ino;
	}
	k->res->sent_files++;
	*out = r;
	return true;
}

/* Remember that DEST holds path as r says. */
static void remember(collector *k, crec *r, const char *path)
{
	crec *stored;
	if ((r->path = strdup(path)) && (stored = rec_set(k, r)))
		log_rec(k, stored);
}

/* ---- deciding -------------------------------------------------------------------- */

static bool same_ident(const crec *r, const struct stat *st)
{
	return r->size == (uint64_t)st->st_size && r->ino == (uint64_t)st->st_ino &&
	       r->mtime_ns == ns_of(&st->st_mtim) && r->ctime_ns == ns_of(&st->st_ctim);
}

/* Does it need sending?  Identity first; a file whose identity changed but
 * not its size is hashed (locally) against what was sent. */
static bool needs_send(collector *k, const stg_witem *it)
{
	crec *r = rec_find(k, it->path);
	if (S_ISDIR(it->st.st_mode))
		return !r || r->type != 'd';
	char type = S_ISLNK(it->st.st_mode) ? 'l' : 'f';
	if (!r || r->type != type)
		return true;
	if (type == 'l')
		return r->ino != (uint64_t)it->st.st_ino || r->mtime_ns != ns_of(&it->st.st_mtim) ||
		       r->ctime_ns != ns_of(&it->st.st_ctim);
	if (same_ident(r, &it->st) && r->mode == (it->st.st_mode & 07777))
		return false;
	if (r->size != (uint64_t)it->st.st_size || r->mode != (it->st.st_mode & 07777))
		return true;
	XXH128_hash_t h;
	uint64_t size;
	if (stg__hash_file(k->srcfd, it->path, &h, &size))
		return true;
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, h);
	if (size != r->size || memcmp(c.digest, r->xxh3, 16))
		return true;
	/* touched, not changed: remember the new identity */
	r->mtime_ns = ns_of(&it->st.st_mtim);
	r->ctime_ns = ns_of(&it->st.st_ctim);
	r->ino = (uint64_t)it->st.st_ino;
	log_rec(k, r);
	return false;
}

/* Is there room on DEST's filesystem for need bytes and inodes more? */
static stg_err check_space(collector *k, const char *path, uint64_t need, uint64_t inodes)
{
	struct statvfs vfs;
	if (statvfs(path, &vfs))
		return stg__fail_errno(k->ctx, STG_EIO, errno,
		                       "cannot check the free space of '%s'", path);
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	bool files_known = vfs.f_files != 0;
	bool no_bytes = need > avail;
	bool no_files = files_known && inodes > (uint64_t)vfs.f_favail;
	if (no_bytes || no_files) {
		/* the advice fits the shortage: --pack saves files (inodes), not
		 * bytes worth speaking of for results that are already compressed */
		char a[32], b[32], d[32];
		stg_format_size(need > avail ? need - avail : 0, d, sizeof d);
		return stg__fail(
		        k->ctx, STG_ENOSPC,
		        "'%s' cannot take the results: they need %s and %llu files, it has "
		        "%s and %llu files free (quota?); %s%s%s",
		        path, stg_format_size(need, a, sizeof a), (unsigned long long)inodes,
		        stg_format_size(avail, b, sizeof b),
		        (unsigned long long)(files_known ? vfs.f_favail : 0),
		        no_bytes ? "free at least " : "", no_bytes ? d : "",
		        no_bytes && no_files
		                ? " there, and collect with --pack (one file instead of many)"
		        : no_bytes ? " there, or collect to a filesystem with more room"
		                   : "too few files (inodes) are left: collect with --pack "
		                     "(one file instead of many), or remove files there");
	}
	return STG_OK;
}

/* Make DEST (and its parents) and open it; note its identity if note. */
static stg_err open_dest(collector *k, const char *path, mode_t mode, bool note)
{
	op(k);
	if (mkdir(path, mode) && errno != EEXIST) {
		if (errno != ENOENT || stg__mkdirs_parent(path) ||
		    (mkdir(path, mode) && errno != EEXIST))
			return stg__fail_errno(k->ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot create '%s'", path);
	}
	k->destfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (k->destfd < 0 || fstat(k->destfd, &st))
		return stg__fail_errno(k->ctx, STG_EIO, errno, "cannot open '%s'", path);
	/* where the temporaries of this collect go: `stager clean` removes
	 * what a killed one left there once the record goes */
	char abs[STG_PATH_MAX + 1];
	if (stg__absolute(path, abs, sizeof abs) == 0 && strcmp(abs, k->where)) {
		snprintf(k->where, sizeof k->where, "%s", abs);
		log_line(k, "P ", abs);
	}
	if (note && ((uint64_t)st.st_dev != k->dest_dev || (uint64_t)st.st_ino != k->dest_ino)) {
		k->dest_dev = (uint64_t)st.st_dev;
		k->dest_ino = (uint64_t)st.st_ino;
		char head[80];
		snprintf(head, sizeof head, "D %llu %llu", (unsigned long long)k->dest_dev,
		         (unsigned long long)k->dest_ino);
		log_line(k, head, NULL);
	}
	return STG_OK;
}

/* The nearest existing directory at or above path (for statvfs). */
static void existing_parent(const char *path, char *out, size_t len)
{
	snprintf(out, len, "%s", path);
	struct stat st;
	while (stat(out, &st)) {
		char *slash = strrchr(out, '/');
		if (!slash || slash == out) {
			snprintf(out, len, "/");
			return;
		}
		*slash = '\0';
	}
}

/* ---- the tree ---------------------------------------------------------------------- */

/* Note that the directory holding path changed in DEST (path itself stays
 * valid while the walk lives: the set keeps pointers into it). */
static void touched(collector *k, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;
	stg__strmap_put(&k->dirs, path, len, 1);
}

/* Give the directories that changed their mtimes from SRC, deepest first
 * (as rsync -a does). */
static void dir_times(collector *k, const stg_walk *w)
{
	for (size_t i = w->n; i-- > 0;) {
		const stg_witem *it = &w->v[i];
		if (!S_ISDIR(it->st.st_mode) ||
		    stg__strmap_get(&k->dirs, it->path, strlen(it->path)) == UINT32_MAX)
			continue;
		struct timespec ts[2] = {{0, UTIME_OMIT}, it->st.st_mtim};
		op(k);
		utimensat(k->destfd, it->path, ts, AT_SYMLINK_NOFOLLOW);
	}
	struct stat st;
	if (stg__strmap_get(&k->dirs, "", 0) != UINT32_MAX && fstat(k->srcfd, &st) == 0) {
		struct timespec ts[2] = {{0, UTIME_OMIT}, st.st_mtim};
		op(k);
		futimens(k->destfd, ts);
	}
}

static stg_err collect_tree(collector *k, stg_walk *w)
{
	struct stat dst;
	if (stat(k->dest, &dst) || (uint64_t)dst.st_dev != k->dest_dev ||
	    (uint64_t)dst.st_ino != k->dest_ino) {
		if (k->n_recs)
			stg__log(
			        k->ctx, STG_LOG_INFO,
			        "'%s' is not the directory collected to before: sending everything",
			        k->dest);
		recs_clear(k);
	}
	bool *send = calloc(w->n ? w->n : 1, sizeof *send);
	if (!send)
		return stg__fail(k->ctx, STG_ENOMEM, "out of memory");
	/* need: blocks, for the space check; bytes: what progress counts */
	uint64_t need = 0, bytes = 0, inodes = 0, todo = 0, files = 0;
	for (size_t i = 0; i < w->n; i++) {
		const stg_witem *it = &w->v[i];
		if (S_ISREG(it->st.st_mode))
			k->res->files++;
		if (!(send[i] = needs_send(k, it))) {
			if (S_ISREG(it->st.st_mode))
				k->res->unchanged++;
			continue;
		}
		todo++;
		inodes++;
		if (S_ISREG(it->st.st_mode)) {
			files++;
			bytes += (uint64_t)it->st.st_size;
			need += ((uint64_t)it->st.st_size + 4095) / 4096 * 4096;
		}
	}
	stg_err err = STG_OK;
	if (!todo && !k->n_pending)
		goto out; /* nothing to do: the shared FS is not touched */
	/* a job's last collect says what it has to do: if Slurm's SIGKILL cuts
	 * it short, the log shows where it was */
	char sz[16];
	stg__log(k->ctx, k->o->slot_wait_max > 0 ? STG_LOG_INFO : STG_LOG_DEBUG,
	         "collecting %llu file%s (%s) to '%s'", (unsigned long long)files,
	         files == 1 ? "" : "s", stg_format_size(bytes, sz, sizeof sz), k->dest);
	char at[STG_PATH_MAX + 1];
	existing_parent(k->dest, at, sizeof at);
	if ((err = check_space(k, at, need + 64 * 1024, inodes + 1)))
		goto out;
	stg_slot slot;
	if ((err = stg__slot_acquire_by(k->ctx, k->c, &slot, slot_deadline(k->o))))
		goto out;
	char mark[128] = "";
	/* DEST, when this collect makes it, keeps SRC's permission bits as the
	 * directories below it do: a private SRC gives a private DEST */
	struct stat sst;
	mode_t top = fstat(k->srcfd, &sst) == 0 ? (sst.st_mode & 0777) | 0700 : 0777;
	if (!(err = open_dest(k, k->dest, top, true))) {
		remove_leftovers(k);
		/* what a collect killed on another node left, and our marker */
		stg__mark_sweep(k->ctx, k->destfd, k->dest, false);
		mark_begin(k, mark, sizeof mark);
		k->total_bytes = bytes;
		if (k->ctx->progress_fn)
			k->ctx->progress_fn(k->ctx->progress_arg, "collect", 0, bytes);
		for (size_t i = 0; i < w->n && !k->stop; i++) {
			const stg_witem *it = &w->v[i];
			if (!send[i])
				continue;
			if (stg__cancelled(k->ctx)) {
				k->stop = stg__fail(k->ctx, STG_EINTR, "interrupted");
				break;
			}
			if (S_ISDIR(it->st.st_mode)) {
				op(k);
				struct stat st;
				if (mkdirat(k->destfd, it->path, (it->st.st_mode & 0777) | 0700) &&
				    (errno != EEXIST ||
				     fstatat(k->destfd, it->path, &st, AT_SYMLINK_NOFOLLOW) ||
				     !S_ISDIR(st.st_mode))) {
					failed(k, it->path, errno == EEXIST ? "notdir" : "dest",
					       errno == EEXIST ? ENOTDIR : errno);
					continue;
				}
				crec r = {.type = 'd'};
				remember(k, &r, it->path);
				touched(k, it->path);
				/* and its own mtime, once it is filled */
				stg__strmap_put(&k->dirs, it->path, strlen(it->path), 1);
				continue;
			}
			crec r;
			if (send_item(k, it, it->path, it->path, &r))
				remember(k, &r, it->path);
			touched(k, it->path);
			if (k->ctx->progress_fn)
				k->ctx->progress_fn(k->ctx->progress_arg, "collect",
				                    k->res->sent_bytes, bytes);
		}
		dir_times(k, w);
		mark_end(k, mark);
	}
	stg__slot_release(&slot);
out:
	free(send);
	return err;
}

/* ---- the pack ---------------------------------------------------------------------- */

/* Has SRC changed since the pack was made?  (Identities only.) */
static bool tree_changed(collector *k, stg_walk *w)
{
	size_t seen = 0;
	for (size_t i = 0; i < w->n; i++) {
		const stg_witem *it = &w->v[i];
		crec *r = rec_find(k, it->path);
		char type = S_ISDIR(it->st.st_mode) ? 'd' : S_ISLNK(it->st.st_mode) ? 'l' : 'f';
		if (!r || r->type != type)
			return true;
		if (type == 'f' && (!same_ident(r, &it->st) || r->mode != (it->st.st_mode & 07777)))
			return true;
		if (type == 'l' &&
		    (r->ino != (uint64_t)it->st.st_ino || r->mtime_ns != ns_of(&it->st.st_mtim)))
			return true;
		seen++;
	}
	return seen != k->n_recs;
}

static stg_err collect_pack(collector *k, stg_walk *w)
{
	stg_ctx *ctx = k->ctx;
	for (size_t i = 0; i < w->n; i++)
		if (S_ISREG(w->v[i].st.st_mode))
			k->res->files++;
	struct stat dst;
	bool same_dest = stat(k->res->dest, &dst) == 0 && (uint64_t)dst.st_dev == k->dest_dev &&
	                 (uint64_t)dst.st_ino == k->dest_ino;
	if (same_dest && !k->n_pending && !tree_changed(k, w)) {
		k->res->unchanged = k->res->files;
		return STG_OK;
	}
	/* pack on scratch and check it there */
	char local[STG_PATH_MAX + 64];
	snprintf(local, sizeof local, "%s/collect/%s.tar.zst", k->c->root, k->id);
	stg_pack_opts po;
	stg_pack_opts_init(&po);
	if (k->o->level)
		po.level = k->o->level;
	stg_pack_info info;
	stg_err err = stg_pack_dir(ctx, k->src, local, &po, &info);
	stg_pack *p = NULL;
	if (!err && !(err = stg_pack_open(ctx, local, &p)))
		err = stg__verify_content(ctx, p);
	stg_pack_close(p);
	int lfd = -1;
	struct stat lst;
	if (err)
		goto out;
	/* what is sent keeps the mode of the pack on scratch, which is read
	 * as SRC is (stg_pack_dir): a private SRC gives a private pack */
	if ((lfd = open(local, O_RDONLY | O_CLOEXEC)) < 0 || fstat(lfd, &lst)) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot read '%s'", local);
		goto out;
	}
	/* DEST.tar.zst's directory */
	char dir[STG_PATH_MAX + 1], at[STG_PATH_MAX + 1];
	snprintf(dir, sizeof dir, "%s", k->res->dest);
	char *slash = strrchr(dir, '/');
	const char *base = slash + 1;
	*slash = '\0';
	if (!*dir)
		snprintf(dir, sizeof dir, "/");
	existing_parent(dir, at, sizeof at);
	if ((err = check_space(k, at, (uint64_t)lst.st_size + 4096, 1)))
		goto out;
	stg_slot slot;
	if ((err = stg__slot_acquire_by(ctx, k->c, &slot, slot_deadline(k->o))))
		goto out;
	char mark[128] = "";
	if (!(err = open_dest(k, dir, 0777, false))) {
		remove_leftovers(k);
		stg__mark_sweep(k->ctx, k->destfd, dir, true);
		mark_begin(k, mark, sizeof mark);
		stg_witem it = {.path = (char *)base, .st = lst};
		it.st.st_mode = (it.st.st_mode & ~07777u) | (lst.st_mode & 0644);
		int keep = k->srcfd;
		k->srcfd = AT_FDCWD;
		it.path = local;
		crec sent;
		bool ok = send_item(k, &it, base, base, &sent);
		k->srcfd = keep;
		if (ok) {
			k->res->sent_files = info.files;
			if (stat(k->res->dest, &dst) == 0) {
				k->dest_dev = (uint64_t)dst.st_dev;
				k->dest_ino = (uint64_t)dst.st_ino;
			}
			/* the record is now SRC as packed */
			recs_clear(k);
			for (size_t i = 0; i < w->n; i++) {
				const stg_witem *wi = &w->v[i];
				crec r = {.type = S_ISDIR(wi->st.st_mode)   ? 'd'
				                  : S_ISLNK(wi->st.st_mode) ? 'l'
				                                            : 'f',
				          .size = (uint64_t)wi->st.st_size,
				          .ino = (uint64_t)wi->st.st_ino,
				          .mtime_ns = ns_of(&wi->st.st_mtim),
				          .ctime_ns = ns_of(&wi->st.st_ctim),
				          .mode = wi->st.st_mode & 07777,
				          .path = strdup(wi->path)};
				if (r.path)
					rec_set(k, &r);
			}
			k->rewrite = true;
		}
		mark_end(k, mark);
	}
	stg__slot_release(&slot);
out:
	if (lfd >= 0)
		close(lfd);
	unlink(local);
	return err;
}

/* ---- the whole ----------------------------------------------------------------------- */

void stg_collect_opts_init(stg_collect_opts *o)
{
	memset(o, 0, sizeof *o);
}

void stg_collect_result_free(stg_collect_result *res)
{
	if (res) {
		free(res->dest);
		res->dest = NULL;
	}
}

static void strip_slashes(char *p)
{
	size_t n = strlen(p);
	while (n > 1 && p[n - 1] == '/')
		p[--n] = '\0';
}

stg_err stg_collect(stg_ctx *ctx, stg_cache *c, const char *src, const char *dest,
                    const stg_collect_opts *opts, stg_collect_result *res)
{
	double t0 = stg__now();
	memset(res, 0, sizeof *res);
	stg_collect_opts def;
	if (!opts) {
		stg_collect_opts_init(&def);
		opts = &def;
	}
	collector *k = calloc(1, sizeof *k);
	if (!k)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	*k = (collector){.ctx = ctx,
	                 .c = c,
	                 .o = opts,
	                 .res = res,
	                 .srcfd = -1,
	                 .destfd = -1,
	                 .logfd = -1,
	                 .umask = current_umask()};
	stg_err err = STG_OK;
	int lock = -1;
	stg_walk w = {.ctx = ctx};
	if (stg__absolute(src, k->src, sizeof k->src) ||
	    stg__absolute(dest, k->dest, sizeof k->dest)) {
		err = stg__fail(ctx, STG_EUSAGE, "path too long");
		goto out;
	}
	strip_slashes(k->src);
	strip_slashes(k->dest);
	if (opts->pack) {
		size_t dl = strlen(k->dest);
		if ((dl < 8 || strcmp(k->dest + dl - 8, ".tar.zst")) && dl + 8 < sizeof k->dest)
			strcat(k->dest, ".tar.zst");
	}
	if (!(res->dest = strdup(k->dest))) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	struct stat st;
	k->srcfd = open(k->src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (k->srcfd < 0 || fstat(k->srcfd, &st)) {
		err = stg__fail_errno(ctx, errno == ENOTDIR ? STG_EUSAGE : STG_ENOENT, errno,
		                      errno == ENOTDIR
		                              ? "'%s' is not a directory (collect copies a "
		                                "directory's contents)"
		                              : "cannot read '%s'",
		                      k->src);
		goto out;
	}
	size_t sl = strlen(k->src);
	if (!strncmp(k->dest, k->src, sl) &&
	    (k->dest[sl] == '/' || k->dest[sl] == '\0' || sl == 1)) {
		err = stg__fail(ctx, STG_EUSAGE, "'%s' is inside '%s': collect it elsewhere",
		                k->dest, k->src);
		goto out;
	}
	/* the record's name: XXH3 of what it is about */
	char key[2 * (STG_PATH_MAX + 1) + 8];
	int kl = snprintf(key, sizeof key, "%s%c%s%c%s", k->src, 0, k->dest, 0,
	                  opts->pack ? "pack" : "tree");
	snprintf(k->id, sizeof k->id, "%016llx", (unsigned long long)XXH3_64bits(key, (size_t)kl));
	char lname[40];
	snprintf(lname, sizeof lname, "collect-%s", k->id);
	bool waited;
	if ((lock = stg__cache_lock(ctx, c, lname, true, &waited)) < 0) {
		err = stg__cancelled(ctx) ? stg__fail(ctx, STG_EINTR, "interrupted")
		                          : stg__fail_errno(ctx, STG_EIO, errno,
		                                            "cannot lock the collect record");
		goto out;
	}
	if (stg__strmap_init(&k->map, 1024) || stg__strmap_init(&k->dirs, 64)) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if ((err = record_open(k)))
		goto out;
	if (k->log_lines == 0) {
		/* a new record */
		log_line(k, "stager-collect 1", NULL);
		log_line(k, "S ", k->src);
	}
	if ((err = stg__walk_tree(&w, k->srcfd, "")))
		goto out;
	err = opts->pack ? collect_pack(k, &w) : collect_tree(k, &w);
	if (!err && k->stop)
		err = k->stop;
	if (!err && res->failed)
		err = stg__fail(ctx, STG_EIO, "%llu of the files could not be collected; first: %s",
		                (unsigned long long)res->failed, k->first_error);
	if (k->rewrite || k->log_lines > 2 * k->n_recs + 64)
		record_compact(k);
out:
	if (k->srcfd >= 0)
		close(k->srcfd);
	if (k->destfd >= 0)
		close(k->destfd);
	if (k->logfd >= 0)
		close(k->logfd);
	stg__cache_unlock(lock);
	stg__walk_free(&w);
	for (size_t i = 0; i < k->n_recs; i++)
		free(k->recs[i].path);
	free(k->recs);
	stg__strmap_free(&k->map);
	stg__strmap_free(&k->dirs);
	for (size_t i = 0; i < k->n_pending; i++)
		free(k->pending[i]);
	free(k->pending);
	free(k);
	res->seconds = stg__now() - t0;
	return err;
}
