/*
 * dircur.c - a directory cursor: the descriptor of a directory under a
 * root, for a caller that goes through a tree in order (an archive's
 * entries, parents before children).
 *
 * Opening "a/b/.../z" from the root costs a path walk as long as the path,
 * and an archive of a tree 2,000 levels deep has 2,000 such paths: a
 * quadratic cost in the kernel.  The cursor keeps the path it went down
 * last, level by level, and for the next directory goes up to the levels
 * both paths share and down the rest, one component at a time: an entry
 * costs the components where its path differs from the last one.
 *
 * Every component is opened with O_NOFOLLOW | O_DIRECTORY from its parent's
 * descriptor, so no symlink is ever followed.  Only the deepest OPEN_LEVELS
 * stay open, so depth holds a bounded number of descriptors; a level
 * closed is opened again from its child's "..", or from the root with
 * RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, and must be the directory it
 * was (device and inode).
 */
#include "dircur.h"
#include "ctx.h"
#include "fsutil.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OPEN_LEVELS 32

void stg__dircur_init(stg_dircur *c, int rootfd)
{
	memset(c, 0, sizeof *c);
	c->rootfd = rootfd;
}

/* Down to depth levels.  A level left closed is opened again from its
 * child's "..", before the child is closed, if it is still the directory
 * it was (else later from the root, beneath it): going up a deep path
 * costs a level a step, not a walk from the root. */
static void pop_to(stg_dircur *c, size_t depth)
{
	while (c->depth > depth) {
		c->depth--;
		stg_dirlevel *l = &c->lv[c->depth];
		if (c->depth == 0 || l->fd < 0)
			continue;
		stg_dirlevel *up = &c->lv[c->depth - 1];
		if (up->fd < 0 && c->depth - 1 >= depth) {
			struct stat st;
			int fd = openat(l->fd, "..",
			                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == up->dev &&
			    st.st_ino == up->ino)
				up->fd = fd;
			else if (fd >= 0)
				close(fd);
		}
		close(l->fd);
	}
}

void stg__dircur_reset(stg_dircur *c)
{
	pop_to(c, c->depth ? 1 : 0);
}

void stg__dircur_free(stg_dircur *c)
{
	pop_to(c, 0);
	free(c->lv);
	c->lv = NULL;
	c->cap = 0;
}

static int push(stg_dircur *c, size_t end, int fd)
{
	if (stg__grow((void **)&c->lv, &c->cap, c->depth + 1, sizeof *c->lv, SIZE_MAX)) {
		if (fd >= 0 && fd != c->rootfd)
			close(fd);
		errno = ENOMEM;
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st)) {
		if (fd != c->rootfd)
			close(fd);
		return -1;
	}
	c->lv[c->depth++] = (stg_dirlevel){end, fd, st.st_dev, st.st_ino};
	/* the root is the caller's: never closed */
	if (c->depth > OPEN_LEVELS + 1 && c->lv[c->depth - 1 - OPEN_LEVELS].fd >= 0) {
		close(c->lv[c->depth - 1 - OPEN_LEVELS].fd);
		c->lv[c->depth - 1 - OPEN_LEVELS].fd = -1;
	}
	return 0;
}

int stg__dircur_open(stg_dircur *c, const char *path, size_t len, bool create)
{
	if (len > STG_PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (c->depth == 0 && push(c, 0, c->rootfd))
		return -1;
	/* up to the deepest level that is a parent of path (or path) */
	size_t cur = c->lv[c->depth - 1].end;
	size_t q = 0;
	while (q < cur && q < len && c->path[q] == path[q])
		q++;
	while (c->depth > 1) {
		size_t end = c->lv[c->depth - 1].end;
		if (end <= q && (end == len || path[end] == '/'))
			break;
		pop_to(c, c->depth - 1);
	}
	stg_dirlevel *top = &c->lv[c->depth - 1];
	if (top->fd < 0) {
		c->path[top->end] = '\0';
		top->fd = stg__open_beneath(c->rootfd, c->path, O_RDONLY | O_DIRECTORY, 0);
		struct stat st;
		if (top->fd >= 0 &&
		    (fstat(top->fd, &st) || st.st_dev != top->dev || st.st_ino != top->ino)) {
			close(top->fd);
			top->fd = -1;
			errno = ESTALE; /* replaced since it was opened */
		}
		if (top->fd < 0)
			return -1;
	}
	/* and down the rest, a component at a time */
	size_t k = top->end;
	memcpy(c->path + k, path + k, len - k);
	c->path[len] = '\0';
	while (k < len) {
		if (c->path[k] == '/')
			k++;
		size_t e = k;
		while (e < len && c->path[e] != '/')
			e++;
		c->path[e] = '\0';
		int pfd = c->lv[c->depth - 1].fd;
		const char *name = c->path + k;
		int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno == ENOENT && create) {
			if (mkdirat(pfd, name, 0777) && errno != EEXIST)
				return -1;
			fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (fd < 0 || push(c, e, fd))
			return -1;
		if (e < len)
			c->path[e] = '/';
		k = e;
	}
	return c->lv[c->depth - 1].fd;
}
