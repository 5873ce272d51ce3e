/*
 * walk.h - the one tree walker (walk.c).
 */
#ifndef STG_WALK_H
#define STG_WALK_H

#include "pace.h"

#include <sys/stat.h>

/* A tree walked without following links (walk.c). */
typedef struct stg_witem {
	char *path; /* relative */
	char *link; /* a symlink's target */
	struct stat st;
} stg_witem;

typedef struct stg_walk {
	stg_ctx *ctx;
	stg_witem *v;
	size_t n, cap;
	uint64_t ops;    /* metadata operations made */
	stg_bucket *opl; /* their rate limit (NULL: none) */
	/* Whether an entry (and what is under it) is walked: NULL keeps
	 * files, directories and symlinks and skips the rest with a warning;
	 * keep_arg is keep's first argument. */
	bool (*keep)(void *arg, const char *path, const struct stat *st);
	void *keep_arg;
} stg_walk;

/* Append what is under rel (relative to rootfd; "" for all), sorted
 * bytewise by name, depth first, parents before children (a pack's order:
 * the same tree gives the same list).  STG_EINTR if ctx is cancelled. */
stg_err stg__walk_tree(stg_walk *w, int rootfd, const char *rel);
void stg__walk_free(stg_walk *w);

#endif
