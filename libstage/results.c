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

stg_err stg_results_pending(stg_ctx *ctx, stg_cache *c, const char *owner, size_t n,
                            const char *const *src, const char *const *dest)
{
	if (!owner_ok(owner))
		return stg__fail(ctx, STG_EUSAGE, "'%s' is not an owner name", owner ? owner : "");
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	fprintf(f, "%s\n", RECORD_MAGIC);
	/* absolute: clean and collect --kept run from anywhere */
	char abs[STG_PATH_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		fputs("S ", f);
		stg__put_escaped(f, stg__absolute(src[i], abs, sizeof abs) ? src[i] : abs);
		fputs("\nD ", f);
		stg__put_escaped(f, stg__absolute(dest[i], abs, sizeof abs) ? dest[i] : abs);
		fputc('\n', f);
	}
	if (fclose(f) || !text) {
		free(text);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	int rc = write_atomic(c, "results", owner, text, len);
	free(text);
	if (rc)
		return stg__fail_errno(ctx, STG_EIO, errno,
		                       "cannot record the results of '%s' in '%s'", owner, c->root);
	return STG_OK;
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
                      int (*fn)(void *arg, const char *src, const char *dest), void *arg)
{
	char rel[STG_PATH_MAX];
	snprintf(rel, sizeof rel, "results/%s", owner);
	char *text = read_small(c, rel);
	if (!text)
		return -1;
	char *save = NULL, *src = NULL;
	int rc = 0;
	char *line = strtok_r(text, "\n", &save);
	if (!line || strcmp(line, RECORD_MAGIC)) {
		free(text);
		errno = EINVAL;
		return -1;
	}
	while (rc == 0 && (line = strtok_r(NULL, "\n", &save))) {
		if (line[0] == 'S' && line[1] == ' ' && stg__unescape(line + 2))
			src = line + 2;
		else if (line[0] == 'D' && line[1] == ' ' && src && stg__unescape(line + 2)) {
			rc = fn(arg, src, line + 2);
			src = NULL;
		}
	}
	free(text);
	return rc;
}

/* ---- kept results ----------------------------------------------------------- */

stg_err stg_keep_results(stg_ctx *ctx, stg_cache *c, const char *src, const char *name,
                         const char *dest, char **out)
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
		if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_NOREPLACE) == 0 ||
		    (errno == EINVAL && rename(src, dst) == 0)) {
			moved = true;
			break;
		}
		int e = errno;
		if (dest)
			unlinkat(c->rootfd, to, 0);
		if (e == EEXIST || e == ENOTEMPTY)
			continue;
		err = stg__fail_errno(ctx, e == EXDEV ? STG_EIO : stg__err_from_errno(e, STG_EIO),
		                      e, "cannot move '%s' to '%s/kept'%s", src, c->root,
		                      e == EXDEV ? " (another filesystem)" : "");
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
	*out = dst;
	return STG_OK;
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
		char to[STG_PATH_MAX];
		snprintf(to, sizeof to, "kept/%s.to", names[i]);
		char *text = read_small(c, to);
		if (text) {
			char *nl = strchr(text, '\n');
			if (nl)
				*nl = '\0';
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
	return 0;
}

stg_err stg_collect_kept(stg_ctx *ctx, stg_cache *c, const stg_collect_opts *opts,
                         stg_kept_fn report, void *arg)
{
	stg_kept *v;
	size_t n;
	stg_err err = stg_kept_list(ctx, c, &v, &n), worst = STG_OK;
	if (err)
		return err;
	for (size_t i = 0; i < n && !stg__cancelled(ctx); i++) {
		if (!v[i].dest)
			continue; /* kept by an older stager: its DEST is not known */
		stg_collect_result res;
		err = stg_collect(ctx, c, v[i].path, v[i].dest, opts, &res);
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
