/*
 * dircur.h - a directory cursor (dircur.c): the descriptor of a directory
 * under a root, reached from the last one asked for.
 */
#ifndef STG_DIRCUR_H
#define STG_DIRCUR_H

#include "path.h"

#include <sys/types.h>

typedef struct stg_dirlevel {
	size_t end; /* the level's directory is path[0..end) */
	int fd;     /* -1: closed (only the deepest levels stay open) */
	dev_t dev;  /* its identity, to check it when it is opened again */
	ino_t ino;
} stg_dirlevel;

typedef struct stg_dircur {
	int rootfd; /* the caller's */
	char path[STG_PATH_MAX + 1];
	stg_dirlevel *lv; /* lv[0] is the root */
	size_t depth, cap;
} stg_dircur;

void stg__dircur_init(stg_dircur *c, int rootfd);

/* The descriptor of the directory path[0..len) ("" the root), relative to
 * the root, made (mode 0777 less the umask) where it is missing if
 * create; the cursor's, valid until its next call.  No component may be a
 * symlink (ELOOP, ENOTDIR).  -1/errno. */
int stg__dircur_open(stg_dircur *c, const char *path, size_t len, bool create);

/* Forget every directory open (as after a rename under the root). */
void stg__dircur_reset(stg_dircur *c);
void stg__dircur_free(stg_dircur *c);

#endif
