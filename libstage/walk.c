/*
 * walk.c - the tree walker: a directory's entries, sorted, depth first,
 * parents before children, never through a link, each stat'ed once, at
 * the rate of an operations limit (stg_bucket) when one is set.  Used by
 * directory sources, collect and both ends of push and pull.
 */
#include "walk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sorted, depth first, not following links. */
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
		err = stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot read directory '%s'", rel);
	for (size_t i = 0; i < n && !err; i++) {
		char path[STG_PATH_MAX + 1];
		if ((size_t)snprintf(path, sizeof path, "%s%s%s", rel, *rel ? "/" : "", names[i]) >=
		    sizeof path) {
			err = stg__fail(w->ctx, STG_ENOTSUP, "path too long under '%s'", rel);
			break;
		}
		if (w->n == w->cap) {
			size_t ncap = w->cap ? w->cap * 2 : 1024;
			stg_witem *nv = realloc(w->v, ncap * sizeof *nv);
			if (!nv) {
				err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
				break;
			}
			w->v = nv;
			w->cap = ncap;
		}
		stg_witem *it = &w->v[w->n];
		memset(it, 0, sizeof *it);
		w->ops++;
		stg__bucket_take(w->ctx, w->opl, 1);
		if (fstatat(dfd, names[i], &it->st, AT_SYMLINK_NOFOLLOW)) {
			err = stg__fail_errno(w->ctx, STG_ENOENT, errno, "cannot stat '%s'", path);
			break;
		}
		if (!S_ISREG(it->st.st_mode) && !S_ISDIR(it->st.st_mode) &&
		    !S_ISLNK(it->st.st_mode)) {
			stg__log(w->ctx, STG_LOG_WARN,
			         "skipping '%s': not a file, directory or link", path);
			continue;
		}
		if (!(it->path = strdup(path))) {
			err = stg__fail(w->ctx, STG_ENOMEM, "out of memory");
			break;
		}
		if (S_ISLNK(it->st.st_mode)) {
			char t[STG_PATH_MAX + 1];
			w->ops++;
			stg__bucket_take(w->ctx, w->opl, 1);
			ssize_t k = readlinkat(dfd, names[i], t, sizeof t - 1);
			if (k <= 0 || !(it->link = strndup(t, (size_t)k))) {
				free(it->path);
				err = stg__fail_errno(w->ctx, STG_ENOENT, errno,
				                      "cannot read link '%s'", path);
				break;
			}
		}
		w->n++;
		if (S_ISDIR(it->st.st_mode))
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
}
