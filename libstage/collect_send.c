/*
 * collect_send.c - the shared filesystem side of collect: temporaries
 * beside their final names, the copy (hashed, flushed, checked for a
 * change under it), the rename, retries of transient errors, the marker
 * in DEST.
 */
#include "collect_send.h"
#include "collect_record.h"
#include "hash.h"
#include "ctx.h"
#include "path.h"
#include "collect_mark.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* ---- the shared filesystem side ------------------------------------------------ */

static bool transient(int e)
{
	return e == EINTR || e == EAGAIN || e == ESTALE || e == EIO || e == ETIMEDOUT;
}

void stg__col_op(collector *k)
{
	stg__bucket_take(k->ctx, &k->c->lim.ops, 1);
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
void stg__col_remove_leftovers(collector *k)
{
	while (k->n_pending) {
		char *t = k->pending[k->n_pending - 1];
		stg__col_op(k);
		if (unlinkat(k->destfd, t, 0) && errno != ENOENT)
			stg__log(k->ctx, STG_LOG_WARN, "cannot remove the leftover '%s/%s': %s",
			         k->dest, t, strerror(errno));
		stg__col_log_line(k, "x ", t);
		free(t);
		k->n_pending--;
	}
}

/* The marker that says who writes temporaries in DEST (collect_mark.c):
 * in the record too, so that `stager clean` on this node removes it with
 * the temporaries of a collect that was killed. */
void stg__col_mark_begin(collector *k, char *mark, size_t len)
{
	if (stg__mark_begin(k->destfd, mark, len) == 0)
		stg__col_log_line(k, "t ", mark);
}

void stg__col_mark_end(collector *k, const char *mark)
{
	if (mark[0]) {
		stg__mark_end(k->destfd, mark);
		stg__col_log_line(k, "x ", mark);
	}
}

/* The process's umask, from /proc (umask() would change it); -1 unknown. */
int stg__col_current_umask(void)
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

/* Copy the open source s (path in SRC) to a new file at tmp; its XXH3
 * into h.  The file is created with its final mode, so most need no chmod
 * (one round trip less per file on NFS). */
static int copy_out(collector *k, int s, const char *path, const char *tmp, const struct stat *st,
                    uint8_t h[16])
{
	stg__col_op(k);
	mode_t mode = st->st_mode & 01777;
	int d = openat(k->destfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	               mode & 0777);
	if (d < 0)
		return -1;
	XXH3_state_t *xs = XXH3_createState();
	const size_t bs = 1 << 20;
	uint8_t *buf = stg__io_alloc(bs);
	int rc = -1, e = ENOMEM;
	if (!xs || !buf)
		goto out;
	XXH3_128bits_reset(xs);
	stg_fd_sink out = {d, 0};
	stg_hash_in in = {.fd = s,
	                  .len = STG_HASH_ALL,
	                  .buf = buf,
	                  .buf_len = bs,
	                  .bw = &k->c->lim.bw,
	                  .sink = stg__sink_fd,
	                  .arg = &out,
	                  .path = path,
	                  .done = &k->res->sent_bytes,
	                  .what = "collect",
	                  .total = k->total_bytes};
	uint64_t got;
	if (stg__hash_read(k->ctx, &in, xs, &got)) {
		e = errno;
		goto out;
	}
	stg__hash_digest(xs, h);
	struct timespec ts[2] = {{0, UTIME_OMIT}, st->st_mtim};
	if (k->umask < 0 || (mode & ~0777u) || (mode & (mode_t)k->umask)) {
		stg__col_op(k);
		if (fchmod(d, mode)) {
			e = errno;
			goto out;
		}
	}
	stg__col_op(k);
	if (futimens(d, ts)) {
		e = errno;
		goto out;
	}
	/* the data is on the server before the rename publishes it: on a
	 * filesystem with client write-back (Lustre, GPFS, BeeGFS) a node that
	 * crashes after the rename would otherwise leave a short file under
	 * the final name, in place of the good one (NFS flushes at close) */
	stg__col_op(k);
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
	if (stg__col_log_line(k, "t ", tmp))
		return -1;
	int rc = -1, e = 0, s = -1;
	if (it->link) {
		stg__col_op(k);
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
		if ((rc = copy_out(k, s, it->path, tmp, &before, r->xxh3)))
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
	stg__col_op(k);
	if ((rc = renameat(k->destfd, tmp, k->destfd, final)))
		goto fail;
	stg__col_log_line(k, "x ", tmp);
	goto out;
fail:
	e = errno;
	stg__col_op(k);
	unlinkat(k->destfd, tmp, 0);
	stg__col_log_line(k, "x ", tmp);
	rc = -1;
out:
	if (s >= 0)
		close(s);
	if (rc)
		errno = e;
	return rc;
}

double stg__col_slot_deadline(const stg_collect_opts *o)
{
	return o->slot_wait_max > 0 ? stg__now() + o->slot_wait_max : 0;
}

/* Record a failure that does not stop the run. */
void stg__col_failed(collector *k, const char *path, const char *where, int e)
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
bool stg__col_send_item(collector *k, const stg_witem *it, const char *final, const char *shown,
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
			/* removed or renamed since the walk (NAME.tmp renamed to
			 * NAME, a checkpoint's way): nothing lost, and the
			 * collect looks again for what took its place */
			stg__log(k->ctx, STG_LOG_DEBUG,
			         "'%s' was removed or renamed before it could be collected", shown);
			k->vanished++;
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
			stg__col_failed(k, shown, where, e);
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
void stg__col_remember(collector *k, crec *r, const char *path)
{
	crec *stored;
	if ((r->path = strdup(path)) && (stored = stg__col_rec_set(k, r)))
		stg__col_log_rec(k, stored);
}
