/*
 * walk.c - the tree walker: a directory's entries, sorted bytewise, depth
 * first, parents before children, never through a link, each stat'ed
 * once, at the rate of an operations limit (stg_bucket) when one is set.
 * Used by the pack writer, directory sources, collect and both ends of
 * push and pull.
 *
 * The order is part of the pack format's promise that the same tree gives
 * the same pack (and digest): it must not depend on readdir's order, the
 * locale or the filesystem.  A directory is listed whole and closed before
 * what is under it is walked, so depth holds no descriptors.
 */
#include "walk.h"

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

stg_err stg__walk_tree(stg_walk *w, int rootfd, const char *rel)
{
	char **names;
	size_t n;
	w->ops += 2; /* open and list */
	stg__bucket_take(w->ctx, w->opl, 2);
	if (stg__dir_names(rootfd, rel, true, &names, &n))
		return stg__fail_errno(w->ctx, stg__err_from_errno(errno, STG_ENOENT), errno,
		                       "cannot read directory '%s'", *rel ? rel : ".");
	int dfd = *rel ? openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	               : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
	stg_err err = STG_OK;
	if (dfd < 0)
		err = stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot read directory '%s'",
		                      *rel ? rel : ".");
	for (size_t i = 0; i < n && !err; i++) {
		if (stg__cancelled(w->ctx)) {
			err = stg__fail(w->ctx, STG_EINTR, "interrupted");
			break;
		}
		char path[STG_PATH_MAX + 1];
		const char *sep = *rel ? "/" : "";
		if ((size_t)snprintf(path, sizeof path, "%s%s%s", rel, sep, names[i]) >=
		    sizeof path) {
			err = stg__fail(w->ctx, STG_ENOTSUP,
			                "path too long (over %d bytes): '%s%s%s'", STG_PATH_MAX,
			                rel, sep, names[i]);
			break;
		}
		struct stat st;
		w->ops++;
		stg__bucket_take(w->ctx, w->opl, 1);
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW)) {
			err = stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot stat '%s'", path);
			break;
		}
		if (w->keep ? !w->keep(w->keep_arg, path, &st) : !plain(w, path, &st))
			continue;
		/* in w, not on a stack as deep as the tree */
		const char *link = S_ISLNK(st.st_mode) ? w->target : NULL;
		if (link && (err = read_link(w, dfd, names[i], path, w->target)))
			break;
		err = w->visit ? w->visit(w->visit_arg, path, &st, link)
		               : append(w, path, &st, link);
		if (!err && S_ISDIR(st.st_mode))
			err = stg__walk_tree(w, rootfd, path);
	}
	if (dfd >= 0)
		close(dfd);
	stg__names_free(names, n);
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
