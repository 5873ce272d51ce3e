/*
 * results.c - results a job has yet to collect outlive the job.
 *
 * A job's scratch goes when the job ends: Slurm or the epilog removes
 * $SLURM_TMPDIR, and stg_clean the job directories of finished jobs.  A
 * final collect that KillWait's SIGKILL cut short, or a run that was
 * killed, would lose whatever it had not sent yet.  So:
 *
 *   results/<owner>        written by stg_results_pending before the job's
 *                          command starts: each SRC with its DEST.  Removed
 *                          by stg_results_done once a last collect sent
 *                          everything.
 *   kept/NAME.EPOCH        a SRC that was never fully collected, moved out
 *                          of the job's scratch (one rename)
 *   kept/NAME.EPOCH.to     its DEST
 *
 * stg_clean (the epilog's `clean --job`, a user's `clean`) moves the
 * sources of every record whose owner is gone to kept/ before it removes
 * any job directory; it never removes them.  Kept results are listed by
 * stg_kept_list, collected to their DEST by stg_collect_kept (`stager
 * collect --kept`, and the next `stager run` on the node), and removed by
 * clean only after keep_days, or when asked (`clean --kept`).
 *
 * Records and .to files live in the user's private scratch root; they are
 * read with a size limit all the same.
 */
#include "results.h"
#include "kept_note.h"

#include "walk.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RECORD_MAGIC "stager-results 1"
#define RECORD_MAX   (1 << 20)

static bool owner_ok(const char *owner)
{
	return owner && *owner && owner[0] != '.' && !strchr(owner, '/') && strlen(owner) < 160;
}

/* Write text to dir/name under the root through a temporary and a rename. */
static int write_atomic(stg_cache *c, const char *dir, const char *name, const char *text,
                        size_t len)
{
	char rel[STG_PATH_MAX], tmp[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "%s/%s", dir, name);
	snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", dir, name, (int)getpid());
	if (mkdirat(c->rootfd, dir, 0700) && errno != EEXIST)
		return -1;
	int fd =
	        openat(c->rootfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
	int e = errno;
	close(fd);
	if (!ok || renameat(c->rootfd, tmp, c->rootfd, rel)) {
		e = ok ? errno : e;
		unlinkat(c->rootfd, tmp, 0);
		errno = e;
		return -1;
	}
	return 0;
}

/* Read dir/name under the root, at most RECORD_MAX bytes, NUL-terminated;
 * NULL/errno. */
static char *read_small(stg_cache *c, const char *rel)
{
	int fd = openat(c->rootfd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > RECORD_MAX) {
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (buf)
		buf[got] = '\0';
	return buf;
}

/* One pair of a record: SRC, DEST and how it is collected. */
typedef struct rpair {
	char *src, *dest;
	bool pack;
} rpair;

typedef struct rpairs {
	rpair *v;
	size_t n;
} rpairs;

static void rpairs_free(rpairs *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].src);
		free(p->v[i].dest);
	}
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

static int rpairs_add(rpairs *p, const char *src, const char *dest, bool pack)
{
	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].src, src) && !strcmp(p->v[i].dest, dest)) {
			p->v[i].pack = pack;
			return 0;
		}
	rpair *v = realloc(p->v, (p->n + 1) * sizeof *v);
	if (!v)
		return -1;
	p->v = v;
	v[p->n] = (rpair){strdup(src), strdup(dest), pack};
	if (!v[p->n].src || !v[p->n].dest) {
		free(v[p->n].src);
		free(v[p->n].dest);
		return -1;
	}
	p->n++;
	return 0;
}

static int collect_pair(void *arg, const char *src, const char *dest, bool pack)
{
	return rpairs_add(arg, src, dest, pack) ? -1 : 0;
}

/* Add (add true) or remove the pairs of src/dest to owner's record, under
 * its lock: the record of a job is shared by its `stager run` and every
 * `stager collect` it starts.  A record left empty is removed. */
static stg_err results_update(stg_ctx *ctx, stg_cache *c, const char *owner, size_t n,
                              const char *const *src, const char *const *dest, bool pack, bool add)
{
	if (!owner_ok(owner))
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not an owner name", owner ? owner : "");
	char lname[200], rel[STG_PATH_MAX];
	snprintf(lname, sizeof lname, "results-%s", owner);
	snprintf(rel, sizeof rel, "results/%s", owner);
	int lk = stg__cache_lock(ctx, c, lname, true, NULL);
	if (lk < 0)
		return stg__fail_errno(ctx, STG_EIO, errno,
		                       "cannot lock the results of '%s' in '%s'", owner, c->root);
	rpairs p = {0};
	stg_err err = STG_OK;
	char *text = NULL;
	size_t len = 0;
	if (stg__results_each(c, owner, collect_pair, &p) && errno != ENOENT && errno != EINVAL) {
		err = stg__fail_errno(ctx, STG_EIO, errno, "cannot read '%s/%s'", c->root, rel);
		goto out;
	}
	bool changed = false;
	/* absolute: clean and collect --kept run from anywhere */
	char sabs[STG_PATH_MAX + 1], dabs[STG_PATH_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		const char *s = stg__absolute(src[i], sabs, sizeof sabs) ? src[i] : sabs;
		const char *d = stg__absolute(dest[i], dabs, sizeof dabs) ? dest[i] : dabs;
		size_t j = 0;
		while (j < p.n && (strcmp(p.v[j].src, s) || strcmp(p.v[j].dest, d)))
			j++;
		if (add && (j == p.n || p.v[j].pack != pack)) {
			if (rpairs_add(&p, s, d, pack)) {
				err = stg__fail(ctx, STG_ENOMEM, "out of memory");
				goto out;
			}
			changed = true;
		} else if (!add && j < p.n) {
			free(p.v[j].src);
			free(p.v[j].dest);
			p.v[j] = p.v[--p.n];
			changed = true;
		}
	}
	if (!changed)
		goto out;
	if (p.n == 0) {
		if (unlinkat(c->rootfd, rel, 0) && errno != ENOENT)
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot remove '%s/%s'", c->root,
			                      rel);
		goto out;
	}
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	fprintf(f, "%s\n", RECORD_MAGIC);
	for (size_t i = 0; i < p.n; i++) {
		if (p.v[i].pack)
			fputs("M pack\n", f);
		fputs("S ", f);
		stg__put_escaped(f, p.v[i].src);
		fputs("\nD ", f);
		stg__put_escaped(f, p.v[i].dest);
		fputc('\n', f);
	}
	if (fclose(f) || !text) {
		err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		goto out;
	}
	if (write_atomic(c, "results", owner, text, len))
		err = stg__fail_errno(ctx, STG_EIO, errno,
		                      "cannot record the results of '%s' in '%s'", owner, c->root);
out:
	free(text);
	rpairs_free(&p);
	stg__cache_unlock(lk);
	return err;
}

stg_err stg_results_pending(stg_ctx *ctx, stg_cache *c, const char *owner, size_t n,
                            const char *const *src, const char *const *dest)
{
	return results_update(ctx, c, owner, n, src, dest, false, true);
}

stg_err stg__results_add(stg_ctx *ctx, stg_cache *c, const char *owner, const char *src,
                         const char *dest, bool pack)
{
	return results_update(ctx, c, owner, 1, &src, &dest, pack, true);
}

stg_err stg_results_done(stg_ctx *ctx, stg_cache *c, const char *owner)
{
	if (!owner_ok(owner))
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not an owner name", owner ? owner : "");
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "results/%s", owner);
	if (unlinkat(c->rootfd, rel, 0) && errno != ENOENT)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot remove '%s/%s'", c->root, rel);
	return STG_OK;
}

int stg__results_each(stg_cache *c, const char *owner,
                      int (*fn)(void *arg, const char *src, const char *dest, bool pack), void *arg)
{
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "results/%s", owner);
	char *text = read_small(c, rel);
	if (!text)
		return -1;
	char *save = NULL, *src = NULL;
	bool pack = false;
	int rc = 0;
	char *line = strtok_r(text, "\n", &save);
	if (!line || strcmp(line, RECORD_MAGIC)) {
		free(text);
		errno = EINVAL;
		return -1;
	}
	while (rc == 0 && (line = strtok_r(NULL, "\n", &save))) {
		if (!strcmp(line, "M pack"))
			pack = true;
		else if (line[0] == 'S' && line[1] == ' ' && stg__unescape(line + 2))
			src = line + 2;
		else if (line[0] == 'D' && line[1] == ' ' && src && stg__unescape(line + 2)) {
			rc = fn(arg, src, line + 2, pack);
			src = NULL;
			pack = false;
		}
	}
	free(text);
	return rc;
}

/* ---- kept results ----------------------------------------------------------- */

/* A tree copied into a new directory, for results on another filesystem
 * than the scratch root: files (mode, mtime), directories, symlinks, in
 * the walker's order (parents first); what else is there is skipped. */
typedef struct tcopy {
	int sfd, dfd;
	char first_error[256];
} tcopy;

static stg_err copy_item(void *arg, const char *path, const struct stat *st, const char *link)
{
	tcopy *t = arg;
	int rc = 0;
	if (S_ISDIR(st->st_mode)) {
		rc = mkdirat(t->dfd, path, 0700);
	} else if (S_ISLNK(st->st_mode)) {
		rc = symlinkat(link ? link : "", t->dfd, path);
	} else if (S_ISREG(st->st_mode)) {
		int in = openat(t->sfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		int out =
		        in < 0 ? -1
		               : openat(t->dfd, path,
		                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = in < 0 || out < 0 || stg__copy_file(in, out, (uint64_t)st->st_size) ||
		     fchmod(out, st->st_mode & 07777) ||
		     futimens(out, (struct timespec[2]){st->st_atim, st->st_mtim}) || fsync(out);
		int e = errno;
		if (in >= 0)
			close(in);
		if (out >= 0 && close(out) && !rc) {
			rc = -1;
			e = errno;
		}
		errno = e;
	}
	if (rc) {
		snprintf(t->first_error, sizeof t->first_error, "'%s': %s", path, strerror(errno));
		return STG_EIO;
	}
	return STG_OK;
}

/* Copy the directory src to dst (which must not exist) through a
 * temporary beside it, ".NAME.copy.PID": hidden from the kept results
 * (a name that ends in digits would pass for one, since 1970), and
 * removed by clean once PID is gone (a clean killed at its time bound);
 * 0, or -1 with the reason in why. */
static int copy_tree(stg_ctx *ctx, const char *src, const char *dst, char *why, size_t len)
{
	char tmp[STG_PATH_MAX + 32];
	const char *slash = strrchr(dst, '/');
	snprintf(tmp, sizeof tmp, "%.*s.%s.copy.%d", (int)(slash + 1 - dst), dst, slash + 1,
	         (int)getpid());
	tcopy t = {.sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), .dfd = -1};
	struct stat st;
	int rc = -1;
	if (t.sfd < 0 || fstat(t.sfd, &st) || mkdir(tmp, 0700) ||
	    (t.dfd = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		snprintf(why, len, "%s", strerror(errno));
		goto out;
	}
	stg_walk w = {.ctx = ctx, .visit = copy_item, .visit_arg = &t};
	stg_err err = stg__walk_tree(&w, t.sfd, "");
	stg__walk_free(&w);
	/* directories' own times and modes last, deepest first does not
	 * matter: only the top's mode is kept (the rest stay 0700, private) */
	if (!err && (fchmod(t.dfd, st.st_mode & 07777) || fsync(t.dfd) || rename(tmp, dst)))
		err = STG_EIO, snprintf(t.first_error, sizeof t.first_error, "%s", strerror(errno));
	if (err) {
		snprintf(why, len, "%s", *t.first_error ? t.first_error : stg_strerror(err));
		goto out;
	}
	rc = 0;
out:
	if (t.sfd >= 0)
		close(t.sfd);
	if (t.dfd >= 0)
		close(t.dfd);
	if (rc)
		stg__rmtree(tmp);
	return rc;
}

stg_err stg_keep_results(stg_ctx *ctx, stg_cache *c, const char *src, const char *name,
                         const char *dest, char **out)
{
	return stg__keep_results(ctx, c, src, name, dest, false, out);
}

stg_err stg__keep_results(stg_ctx *ctx, stg_cache *c, const char *src, const char *name,
                          const char *dest, bool copy, char **out)
{
	*out = NULL;
	if (!name || !*name || strchr(name, '/') || name[0] == '.')
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not a name for kept results",
		                 name ? name : "");
	if (mkdirat(c->rootfd, "kept", 0700) && errno != EEXIST)
		return stg__fail_errno(ctx, STG_EIO, errno, "cannot create '%s/kept'", c->root);
	long long now = (long long)time(NULL);
	size_t len = strlen(c->root) + 256;
	char *dst = malloc(len), *text = NULL;
	size_t text_len = 0;
	if (!dst)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (dest) {
		FILE *f = open_memstream(&text, &text_len);
		char abs[STG_PATH_MAX + 1];
		if (f) {
			stg__put_escaped(f, stg__absolute(dest, abs, sizeof abs) ? dest : abs);
			fputc('\n', f);
		}
		if (!f || fclose(f) || !text) {
			free(dst);
			free(text);
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
	}
	/* NAME.EPOCH, or NAME-2.EPOCH ... when two results of one name are kept
	 * in one second: each claims its name (the .to with O_EXCL, the
	 * directory by a rename that replaces nothing) before it is used, so
	 * one never takes the other's DEST */
	stg_err err = STG_OK;
	bool moved = false;
	for (unsigned k = 1; k <= 100 && !moved && !err; k++) {
		char base[232], to[STG_PATH_MAX];
		if (k == 1)
			snprintf(base, sizeof base, "%.200s.%lld", name, now);
		else
			snprintf(base, sizeof base, "%.200s-%u.%lld", name, k, now);
		snprintf(to, sizeof to, "kept/%s.to", base);
		snprintf(dst, len, "%s/kept/%s", c->root, base);
		if (faccessat(c->rootfd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		if (dest) {
			int fd = openat(c->rootfd, to,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == EEXIST)
				continue;
			if (fd >= 0)
				close(fd);
			if (fd < 0 || write_atomic(c, "kept", to + 5, text, text_len)) {
				int e = errno;
				unlinkat(c->rootfd, to, 0);
				err = stg__fail_errno(ctx, STG_EIO, e, "cannot write '%s/%s'",
				                      c->root, to);
				break;
			}
		}
		if (!copy && (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_NOREPLACE) == 0 ||
		              (errno == EINVAL && rename(src, dst) == 0))) {
			moved = true;
			break;
		}
		int e = copy ? EXDEV : errno;
		/* on another filesystem ($SLURM_TMPDIR beside the scratch root):
		 * copied, then removed where it was (unless a copy is asked for) */
		char why[300];
		if (e == EXDEV && copy_tree(ctx, src, dst, why, sizeof why) == 0) {
			if (!copy && stg__rmtree(src))
				stg__log(ctx, STG_LOG_WARN,
				         "results copied to '%s', but '%s' stays: %s", dst, src,
				         strerror(errno));
			moved = true;
			break;
		}
		if (e == EXDEV) {
			if (dest)
				unlinkat(c->rootfd, to, 0);
			err = stg__fail(ctx, STG_EIO, "cannot copy '%s' to '%s/kept': %s", src,
			                c->root, why);
			break;
		}
		if (dest)
			unlinkat(c->rootfd, to, 0);
		if (e == EEXIST || e == ENOTEMPTY)
			continue;
		err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
		                      "cannot move '%s' to '%s/kept'", src, c->root);
		break;
	}
	free(text);
	if (!err && !moved)
		err = stg__fail(ctx, STG_EIO,
		                "cannot move '%s' to '%s/kept': too many kept of that name", src,
		                c->root);
	if (err) {
		free(dst);
		return err;
	}
	const char *kname = strrchr(dst, '/') + 1;
	stg__kept_note_write(ctx, kname, dst, dest, stg__tree_bytes(AT_FDCWD, dst));
	*out = dst;
	return STG_OK;
}

int stg__kept_set_pack(stg_cache *c, const char *kept)
{
	const char *base = strrchr(kept, '/');
	char to[STG_PATH_MAX];
	snprintf(to, sizeof to, "kept/%s.to", base ? base + 1 : kept);
	int fd = openat(c->rootfd, to, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = write(fd, "pack\n", 5) == 5 ? 0 : -1;
	close(fd);
	return rc;
}

/* The epoch at the end of a kept name ("NAME.EPOCH"); 0 if it has none. */
int64_t stg__kept_epoch(const char *name)
{
	const char *dot = strrchr(name, '.');
	char *end;
	long long when = dot ? strtoll(dot + 1, &end, 10) : 0;
	if (!dot || end == dot + 1 || *end || when <= 0)
		return 0;
	return when;
}

void stg_kept_free(stg_kept *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].path);
		free(v[i].dest);
	}
	free(v);
}

stg_err stg_kept_list(stg_ctx *ctx, stg_cache *c, stg_kept **out, size_t *count)
{
	*out = NULL;
	*count = 0;
	char **names;
	size_t n;
	if (stg__dir_names(c->rootfd, "kept", true, &names, &n))
		return errno == ENOENT ? STG_OK
		                       : stg__fail_errno(ctx, STG_EIO, errno,
		                                         "cannot list '%s/kept'", c->root);
	stg_kept *v = calloc(n ? n : 1, sizeof *v);
	size_t k = 0;
	for (size_t i = 0; v && i < n; i++) {
		int64_t when = stg__kept_epoch(names[i]);
		struct stat st;
		char rel[STG_PATH_MAX];
		snprintf(rel, sizeof rel, "kept/%s", names[i]);
		if (!when || names[i][0] == '.' ||
		    fstatat(c->rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st.st_mode))
			continue;
		stg_kept *e = &v[k];
		size_t plen = strlen(c->root) + strlen(rel) + 2;
		e->name = strdup(names[i]);
		e->path = malloc(plen);
		if (e->path)
			snprintf(e->path, plen, "%s/%s", c->root, rel);
		e->since = when;
		e->bytes = stg__tree_bytes(c->rootfd, rel);
		char to[STG_PATH_MAX];
		snprintf(to, sizeof to, "kept/%s.to", names[i]);
		char *text = read_small(c, to);
		if (text) {
			char *nl = strchr(text, '\n');
			if (nl) {
				*nl = '\0';
				e->pack = !strcmp(nl + 1, "pack\n");
			}
			if (nl && *text && stg__unescape(text))
				e->dest = text;
			else
				free(text);
		}
		if (!e->name || !e->path) {
			k++;
			stg_kept_free(v, k);
			stg__names_free(names, n);
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
		k++;
	}
	stg__names_free(names, n);
	if (!v)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	if (k == 0) { /* none: nothing for the caller to free */
		free(v);
		v = NULL;
	}
	*out = v;
	*count = k;
	return STG_OK;
}

/* Remove a kept entry and its .to; 0 or -1/errno. */
int stg__kept_remove(stg_cache *c, const char *name)
{
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "kept/%s", name);
	if (stg__rmtree_at(c->rootfd, rel) && errno != ENOENT)
		return -1;
	snprintf(rel, sizeof rel, "kept/%s.to", name);
	unlinkat(c->rootfd, rel, 0);
	stg__kept_note_drop(name);
	return 0;
}

/* Is a kept name one of job's ("job<ID>-...")? */
static bool of_job(const char *name, const char *job)
{
	size_t l = strlen(job);
	return !strncmp(name, "job", 3) && !strncmp(name + 3, job, l) && name[3 + l] == '-';
}

stg_err stg_collect_kept(stg_ctx *ctx, stg_cache *c, const stg_collect_opts *opts,
                         stg_kept_fn report, void *arg)
{
	return stg_collect_kept_job(ctx, c, opts, NULL, report, arg);
}

stg_err stg_collect_kept_job(stg_ctx *ctx, stg_cache *c, const stg_collect_opts *opts,
                             const char *job, stg_kept_fn report, void *arg)
{
	stg_kept *v;
	size_t n;
	stg_err err = stg_kept_list(ctx, c, &v, &n), worst = STG_OK;
	if (err)
		return err;
	for (size_t i = 0; i < n && !stg__cancelled(ctx); i++) {
		if (!v[i].dest)
			continue; /* kept by an older stager: its DEST is not known */
		if (job && !of_job(v[i].name, job))
			continue;
		stg_collect_result res;
		stg_collect_opts o;
		if (opts)
			o = *opts;
		else
			stg_collect_opts_init(&o);
		o.pack = o.pack || v[i].pack;
		err = stg_collect(ctx, c, v[i].path, v[i].dest, &o, &res);
		bool whole = !err && !res.failed && !res.changing;
		if (whole && stg__kept_remove(c, v[i].name))
			err = stg__fail_errno(ctx, STG_EIO, errno, "cannot remove '%s'", v[i].path);
		if (report)
			report(arg, &v[i], err, &res);
		stg_collect_result_free(&res);
		if (err && !worst)
			worst = err;
	}
	stg_kept_free(v, n);
	if (stg__cancelled(ctx) && !worst)
		worst = stg__fail(ctx, STG_EINTR, "interrupted");
	return worst;
}
