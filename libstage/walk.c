/*
 * walk.c - the tree walker: a directory's entries, sorted bytewise, depth
 * first, parents before children, never through a link, each stat'ed
 * once, at the rate of an operations limit (stg_bucket) when one is set.
 * Used by the pack writer, directory sources, collect and both ends of
 * push and pull.
 *
 * The order is part of the pack format's promise that the same tree gives
 * the same pack (and digest): it must not depend on readdir's order, the
 * locale or the filesystem.  A directory is listed whole before what is
 * under it is walked; the walk's stack is on the heap, a frame and a
 * listing a level, and depth holds at most OPEN_LEVELS descriptors.
 */
#include "walk.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default rule: files, directories and symlinks; the rest skipped. */
static bool plain(stg_walk *w, const char *path, const struct stat *st)
{
	if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) || S_ISLNK(st->st_mode))
		return true;
	stg__log(w->ctx, STG_LOG_WARN, "skipping '%s': not a file, directory or link", path);
	return false;
}

/* A symlink's target into t (STG_PATH_MAX + 2 bytes), NUL-ended. */
static stg_err read_link(stg_walk *w, int dfd, const char *name, const char *path, char *t)
{
	w->ops++;
	stg__bucket_take(w->ctx, w->opl, 1);
	ssize_t k = readlinkat(dfd, name, t, STG_PATH_MAX + 1);
	if (k < 0)
		return stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot read link '%s'", path);
	if (k == 0 || (size_t)k > STG_PATH_MAX)
		return stg__fail(w->ctx, STG_ENOTSUP, "symlink target too long: '%s'", path);
	t[k] = '\0';
	return STG_OK;
}

/* The default visitor: the entry appended to the list. */
static stg_err append(stg_walk *w, const char *path, const struct stat *st, const char *link)
{
	if (stg__grow((void **)&w->v, &w->cap, w->n + 1, sizeof *w->v, SIZE_MAX))
		return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	stg_witem *it = &w->v[w->n];
	memset(it, 0, sizeof *it);
	it->st = *st;
	if (!(it->path = strdup(path)) || (link && !(it->link = strdup(link)))) {
		free(it->path);
		return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	}
	w->n++;
	return STG_OK;
}

/* How many directories up the walk keeps open: a deeper one is closed
 * while what is under it is walked and opened again by its path after. */
#define OPEN_LEVELS 32

/* One directory being walked: its sorted names, the next one, where its
 * path ends in w's path, its descriptor (-1: closed, see OPEN_LEVELS) and
 * its identity (to check it when it is opened again). */
typedef struct wframe {
	char **names;
	size_t n, i, plen;
	int dfd;
	dev_t dev;
	ino_t ino;
} wframe;

/* Open and list the directory at path (its first plen bytes), from its
 * parent's descriptor pfd (name: its last component) or, pfd < 0, from
 * rootfd. */
static stg_err open_frame(stg_walk *w, int rootfd, int pfd, const char *name, const char *path,
                          wframe *f)
{
	w->ops += 2; /* open and list */
	stg__bucket_take(w->ctx, w->opl, 2);
	f->dfd = pfd >= 0 ? openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	         : *path  ? openat(rootfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	                  : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	struct stat st;
	if (f->dfd < 0 || fstat(f->dfd, &st) ||
	    stg__dir_names(f->dfd, NULL, true, &f->names, &f->n)) {
		int e = errno;
		if (f->dfd >= 0)
			close(f->dfd);
		f->dfd = -1;
		return stg__fail_errno(w->ctx, stg__err_from_errno(e, STG_ENOENT), e,
		                       "cannot read directory '%s'", *path ? path : ".");
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	return STG_OK;
}

/* A directory closed while its subtree was walked, opened again. */
static stg_err reopen_frame(stg_walk *w, int rootfd, const char *path, wframe *f)
{
	w->ops++;
	stg__bucket_take(w->ctx, w->opl, 1);
	f->dfd = *path ? openat(rootfd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	               : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	struct stat st;
	if (f->dfd < 0 || fstat(f->dfd, &st))
		return stg__fail_errno(w->ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot read directory '%s'", *path ? path : ".");
	if (st.st_dev != f->dev || st.st_ino != f->ino)
		return stg__fail(w->ctx, STG_EIO, "'%s' was replaced during the walk",
		                 *path ? path : ".");
	return STG_OK;
}

/*
 * Depth first with a stack on the heap, not the C stack: a tree may be as
 * deep as its paths allow (STG_PATH_MAX bytes: 2,048 levels of one-letter
 * names), and deeper ones are refused by the length check before anything
 * under them is opened.  A level costs a frame and its names; at most
 * OPEN_LEVELS descriptors are open whatever the depth.
 */
stg_err stg__walk_tree(stg_walk *w, int rootfd, const char *rel)
{
	size_t rlen = strlen(rel);
	if (rlen > STG_PATH_MAX)
		return stg__fail(w->ctx, STG_ENOTSUP, "path too long (over %d bytes): '%s'",
		                 STG_PATH_MAX, rel);
	char *path = malloc(STG_PATH_MAX + 1);
	wframe *fr = NULL;
	size_t depth = 0, cap = 0;
	stg_err err = STG_OK;
	if (!path || stg__grow((void **)&fr, &cap, 1, sizeof *fr, SIZE_MAX)) {
		free(path);
		return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
	}
	memcpy(path, rel, rlen + 1);
	memset(&fr[0], 0, sizeof fr[0]);
	fr[0].plen = rlen;
	if ((err = open_frame(w, rootfd, -1, NULL, path, &fr[0])))
		goto out;
	depth = 1;
	while (depth > 0 && !err) {
		wframe *f = &fr[depth - 1];
		if (f->i == f->n) {
			if (f->dfd >= 0)
				close(f->dfd);
			stg__names_free(f->names, f->n);
			depth--;
			if (depth > 0)
				path[fr[depth - 1].plen] = '\0';
			continue;
		}
		if (stg__cancelled(w->ctx)) {
			err = stg__fail(w->ctx, STG_EINTR, "interrupted");
			break;
		}
		if (f->dfd < 0 && (err = reopen_frame(w, rootfd, path, f)))
			break;
		const char *name = f->names[f->i++];
		size_t nlen = strlen(name), sep = f->plen ? 1 : 0;
		if (f->plen + sep + nlen > STG_PATH_MAX) {
			err = stg__fail(w->ctx, STG_ENOTSUP,
			                "path too long (over %d bytes): '%s%s%s'", STG_PATH_MAX,
			                path, sep ? "/" : "", name);
			break;
		}
		if (sep)
			path[f->plen] = '/';
		memcpy(path + f->plen + sep, name, nlen + 1);
		struct stat st;
		w->ops++;
		stg__bucket_take(w->ctx, w->opl, 1);
		if (fstatat(f->dfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
			if (errno == ENOENT) {
				/* removed or renamed since the listing (NAME.tmp
				 * renamed to NAME): not there, so not walked;
				 * counted, for a caller that looks again for
				 * the new name (not in this listing) */
				w->vanished++;
				path[f->plen] = '\0';
				continue;
			}
			err = stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot stat '%s'", path);
			break;
		}
		bool kept = w->keep ? w->keep(w->keep_arg, path, &st) : plain(w, path, &st);
		const char *link = kept && S_ISLNK(st.st_mode) ? w->target : NULL;
		if (link && (err = read_link(w, f->dfd, name, path, w->target)))
			break;
		if (kept)
			err = w->visit ? w->visit(w->visit_arg, path, &st, link)
			               : append(w, path, &st, link);
		if (err || !kept || !S_ISDIR(st.st_mode)) {
			path[f->plen] = '\0';
			continue;
		}
		if (stg__grow((void **)&fr, &cap, depth + 1, sizeof *fr, SIZE_MAX)) {
			err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
			break;
		}
		f = &fr[depth - 1];
		wframe *c = &fr[depth];
		memset(c, 0, sizeof *c);
		c->plen = f->plen + sep + nlen;
		if ((err = open_frame(w, rootfd, f->dfd, name, path, c)))
			break;
		depth++;
		if (depth > OPEN_LEVELS && fr[depth - 1 - OPEN_LEVELS].dfd >= 0) {
			close(fr[depth - 1 - OPEN_LEVELS].dfd);
			fr[depth - 1 - OPEN_LEVELS].dfd = -1;
		}
	}
out:
	for (size_t k = 0; k < depth; k++) {
		if (fr[k].dfd >= 0)
			close(fr[k].dfd);
		stg__names_free(fr[k].names, fr[k].n);
	}
	free(fr);
	free(path);
	return err;
}

void stg__walk_free(stg_walk *w)
{
	for (size_t i = 0; i < w->n; i++) {
		free(w->v[i].path);
		free(w->v[i].link);
	}
	free(w->v);
	w->v = NULL;
	w->n = w->cap = 0;
}
