/*
 * walk.h - the one tree walker (walk.c).
 */
#ifndef STG_WALK_H
#define STG_WALK_H

#include "pace.h"
#include "path.h"

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
	size_t vanished; /* entries gone between the listing and their stat */
	stg_bucket *opl; /* their rate limit (NULL: none) */
	/* Whether an entry (and what is under it) is walked: NULL keeps
	 * files, directories and symlinks and skips the rest with a warning;
	 * keep_arg is keep's first argument. */
	bool (*keep)(void *arg, const char *path, const struct stat *st);
	void *keep_arg;
	/* What is done with an entry kept: NULL appends it to v (a path and
	 * a stat an entry, about 200 bytes); a visitor that keeps less is how
	 * a million entries stay small (the pack writer's).  link is a
	 * symlink's target, NULL for the rest; a visitor's error stops the
	 * walk. */
	stg_err (*visit)(void *arg, const char *path, const struct stat *st, const char *link);
	void *visit_arg;
	char target[STG_PATH_MAX + 2]; /* the link being visited */
} stg_walk;

/* Append what is under rel (relative to rootfd; "" for all), sorted
 * bytewise by name, depth first, parents before children (a pack's order:
 * the same tree gives the same list).  STG_EINTR if ctx is cancelled. */
stg_err stg__walk_tree(stg_walk *w, int rootfd, const char *rel);
void stg__walk_free(stg_walk *w);

#endif
