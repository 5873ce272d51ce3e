/*
 * extract_tree.c - the tree a pack describes, around its files: checked
 * before anything is written, planned, and made (extract.c writes the
 * files themselves, delta_apply.c too).
 *
 * Safety: check_tree refuses a tree that could make a write leave the
 * destination: paths appearing twice, an entry under something that is
 * not a directory, hardlinks to anything but an earlier file of the pack,
 * symlinks that point outside (unless any_link: a pack of the user's own
 * results keeps them as they are).  Directories are created first, files
 * next (O_EXCL|O_NOFOLLOW), links last, so no write ever passes through a
 * symlink.  Setuid and setgid bits are never set, and a read-only tree
 * has no write bits (its directories get theirs back last of all).
 */
#include "extract.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- checking and planning ----------------------------------------------- */

typedef struct symlink_probe {
	const stg_pack *p;
	const stg_strmap *map;
} symlink_probe;

static bool probe_is_symlink(void *arg, const char *path, size_t len)
{
	const symlink_probe *pr = arg;
	uint32_t i = stg__strmap_get(pr->map, path, len);
	return i != NONE && pr->p->t.recs[i].type == STG_SYMLINK;
}

/* Is the tree the manifest describes safe to extract: unique paths,
 * nothing under a non-directory, hardlinks to earlier files, and (unless
 * any_link) symlinks that stay in the destination?  Fills map (path ->
 * index). */
static stg_err check_tree(stg_ctx *ctx, const stg_pack *p, stg_strmap *map, bool any_link)
{
	const stg_trailer *t = &p->t;
	if (t->n_entries >= NONE)
		return stg__fail(ctx, STG_ECORRUPT, "damaged pack: too many entries");
	if (stg__strmap_init(map, t->n_entries))
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		int rc = stg__strmap_put(map, stg__rec_path(p, r), r->path_len, (uint32_t)i);
		if (rc < 0)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		if (rc == 0)
			return stg__fail(ctx, STG_ECORRUPT, "damaged pack: '%s' appears twice",
			                 stg__rec_path(p, r));
	}
	symlink_probe probe = {p, map};
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		const char *path = stg__rec_path(p, r);
		for (size_t k = 0; k < r->path_len; k++) {
			if (path[k] != '/')
				continue;
			uint32_t j = stg__strmap_get(map, path, k);
			if (j != NONE && t->recs[j].type != STG_DIR)
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: '%s' lies under '%.*s', "
				                 "which is not a directory",
				                 path, (int)k, path);
		}
		const char *link = stg__rec_link(p, r);
		if (r->type == STG_HARDLINK) {
			uint32_t j = stg__strmap_get(map, link, r->link_len);
			if (j == NONE || j >= i || t->recs[j].type != STG_FILE)
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: hardlink '%s' points to "
				                 "'%s', which is not an earlier file of the pack",
				                 path, link);
		} else if (r->type == STG_SYMLINK && !any_link) {
			if (!stg__symlink_ok(path, link, probe_is_symlink, &probe))
				return stg__fail(ctx, STG_ECORRUPT,
				                 "refusing a hostile pack: symlink '%s' -> '%s' "
				                 "points outside the destination",
				                 path, link);
		}
	}
	return STG_OK;
}

void stg__ex_plan_free(ex_plan *pl)
{
	stg__strmap_free(&pl->map);
	free(pl->sel);
	free(pl->span_of);
	for (size_t i = 0; i < pl->n_spans; i++)
		XXH3_freeState(pl->spans[i].xs);
	free(pl->spans);
	free(pl->frames);
}

stg_err stg__ex_plan(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, ex_plan *pl,
                     bool any_link)
{
	const stg_trailer *t = &p->t;
	stg_err err = check_tree(ctx, p, &pl->map, any_link);
	if (err)
		return err;
	size_t ne = t->n_entries;
	pl->sel = calloc(ne ? ne : 1, sizeof *pl->sel);
	pl->span_of = malloc((ne ? ne : 1) * sizeof *pl->span_of);
	bool *need = calloc(t->n_frames, sizeof *need);
	if (!pl->sel || !pl->span_of || !need) {
		free(need);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	bool all = !opts || !opts->n_include;
	for (size_t i = 0; i < ne; i++)
		pl->sel[i] = all;
	if (!all) {
		for (size_t k = 0; k < opts->n_include; k++) {
			bool hit = false;
			for (size_t i = 0; i < ne; i++) {
				if (stg__path_match(opts->include[k],
				                    stg__rec_path(p, &t->recs[i]))) {
					pl->sel[i] = true;
					hit = true;
				}
			}
			if (!hit) {
				free(need);
				return stg__fail(ctx, STG_EUSAGE,
				                 "--include '%s' matches nothing in the pack",
				                 opts->include[k]);
			}
		}
		/* a hardlink needs its target (an earlier entry), then every
		 * entry, targets too, its parent directories */
		for (size_t i = 0; i < ne; i++) {
			const stg_rec *r = &t->recs[i];
			if (pl->sel[i] && r->type == STG_HARDLINK)
				pl->sel[stg__strmap_get(&pl->map, stg__rec_link(p, r),
				                        r->link_len)] = true;
		}
		for (size_t i = 0; i < ne; i++) {
			const stg_rec *r = &t->recs[i];
			if (!pl->sel[i])
				continue;
			const char *path = stg__rec_path(p, r);
			for (size_t k = 0; k < r->path_len; k++) {
				if (path[k] != '/')
					continue;
				uint32_t j = stg__strmap_get(&pl->map, path, k);
				if (j != NONE)
					pl->sel[j] = true;
			}
		}
	}
	size_t n_spans = 0;
	for (size_t i = 0; i < ne; i++) {
		const stg_rec *r = &t->recs[i];
		pl->span_of[i] = NONE;
		if (!pl->sel[i] || r->type != STG_FILE || r->size == 0)
			continue;
		size_t a = stg__frame_of(t, r->data_off);
		size_t b = stg__frame_of(t, r->data_off + r->size - 1);
		for (size_t k = a; k <= b; k++)
			need[k] = true;
		if (a != b)
			n_spans++;
	}
	if (all)
		for (size_t k = 0; k < t->n_frames; k++)
			need[k] = true;
	pl->spans = calloc(n_spans ? n_spans : 1, sizeof *pl->spans);
	pl->frames = malloc(t->n_frames * sizeof *pl->frames);
	if (!pl->spans || !pl->frames) {
		free(need);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < t->n_frames; k++)
		if (need[k])
			pl->frames[pl->n_frames++] = k;
	free(need);
	for (size_t i = 0; i < ne; i++) {
		const stg_rec *r = &t->recs[i];
		if (!pl->sel[i] || r->type != STG_FILE || r->size == 0)
			continue;
		size_t a = stg__frame_of(t, r->data_off);
		size_t b = stg__frame_of(t, r->data_off + r->size - 1);
		if (a == b)
			continue;
		ex_span *sp = &pl->spans[pl->n_spans];
		sp->first = sp->next = (uint32_t)a;
		sp->last = (uint32_t)b;
		if (!(sp->xs = XXH3_createState()))
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		pl->n_spans++;
		XXH3_128bits_reset(sp->xs);
		pl->span_of[i] = (uint32_t)(pl->n_spans - 1);
	}
	/* the paths' map served the checks and the selection; extraction does
	 * not need it (32 MiB at a million entries) */
	stg__strmap_free(&pl->map);
#ifdef __GLIBC__
	/* and its pages go back now: glibc keeps freed blocks below its
	 * (growing) mmap threshold in the heap, counted in the process's
	 * memory for the whole extraction */
	malloc_trim(0);
#endif
	return STG_OK;
}

stg_err stg__select(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, bool **sel)
{
	ex_plan pl = {0};
	stg_err err = stg__ex_plan(ctx, p, opts, &pl, false);
	if (!err) {
		*sel = pl.sel;
		pl.sel = NULL;
	}
	stg__ex_plan_free(&pl);
	return err;
}

/* ---- making the tree ----------------------------------------------------- */

mode_t stg__final_mode(const stg_rec *r, bool read_only)
{
	mode_t mode = r->mode & 01777; /* never setuid/setgid */
	return read_only ? mode & ~(mode_t)0222 : mode;
}

mode_t stg__ex_create_mode(const stg_rec *r, bool read_only)
{
	return stg__final_mode(r, read_only) & 0777;
}

int stg__ex_set_meta(const ex_tree *tr, int fd, const stg_rec *r, bool force_chmod)
{
	mode_t mode = stg__final_mode(r, tr->read_only);
	if (force_chmod || mode != (stg__ex_create_mode(r, tr->read_only) & ~tr->umask)) {
		if (fchmod(fd, mode))
			return -1;
	}
	struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
	return futimens(fd, ts);
}

int stg__file_meta(int fd, const stg_rec *r, bool read_only)
{
	if (fchmod(fd, stg__final_mode(r, read_only)))
		return -1;
	struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
	return futimens(fd, ts);
}

mode_t stg__ex_umask(void)
{
	mode_t m = 022;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return m;
	char line[256];
	while (fgets(line, sizeof line, f)) {
		unsigned v;
		if (sscanf(line, "Umask: %o", &v) == 1) {
			m = (mode_t)v & 0777;
			break;
		}
	}
	fclose(f);
	return m;
}

/* mkdir -p of path's parent directories (implied by the pack). */
static int make_parents(int rootfd, const char *path, char *last, size_t *last_len)
{
	const char *slash = strrchr(path, '/');
	if (!slash)
		return 0;
	size_t plen = (size_t)(slash - path);
	if (plen == *last_len && memcmp(last, path, plen) == 0)
		return 0;
	char buf[STG_PATH_MAX + 1];
	memcpy(buf, path, plen);
	buf[plen] = '\0';
	for (size_t k = 0; k <= plen; k++) {
		if (k < plen && buf[k] != '/')
			continue;
		buf[k] = '\0';
		if (mkdirat(rootfd, buf, 0777) && errno != EEXIST)
			return -1;
		if (k < plen)
			buf[k] = '/';
	}
	memcpy(last, path, plen);
	*last_len = plen;
	return 0;
}

stg_err stg__ex_prepare(const ex_tree *s)
{
	stg_ctx *ctx = s->ctx;
	const stg_trailer *t = &s->p->t;
	char last[STG_PATH_MAX + 1];
	size_t last_len = (size_t)-1;
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		if (!s->sel[i])
			continue;
		const char *path = stg__rec_path(s->p, r);
		if (r->type == STG_FILE && r->size == 0 && memcmp(r->xxh3, empty.digest, 16))
			return stg__fail(ctx, STG_ECORRUPT,
			                 "'%s' is damaged: an empty file with a non-empty hash",
			                 path);
		if (s->rootfd < 0)
			continue;
		if (make_parents(s->rootfd, path, last, &last_len))
			return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                       "cannot create the parents of '%s'", path);
		if (r->type == STG_DIR) {
			if (mkdirat(s->rootfd, path, 0700) && errno != EEXIST)
				return stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO),
				                       errno, "cannot create '%s'", path);
		} else if (r->type == STG_FILE &&
		           (r->size == 0 || (s->span_of && s->span_of[i] != NONE))) {
			bool span = s->span_of && s->span_of[i] != NONE;
			int fd = openat(s->rootfd, path,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			                span ? 0600 : stg__ex_create_mode(r, s->read_only));
			if (fd < 0 || (!span && stg__ex_set_meta(s, fd, r, false))) {
				int e = errno;
				if (fd >= 0)
					close(fd);
				return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                       "cannot create '%s'", path);
			}
			close(fd);
		}
	}
	return STG_OK;
}

stg_err stg__ex_finish(const ex_tree *s)
{
	stg_ctx *ctx = s->ctx;
	const stg_trailer *t = &s->p->t;
	for (int pass = 0; pass < 3; pass++) {
		for (size_t i = 0; i < t->n_entries; i++) {
			const stg_rec *r = &t->recs[i];
			if (!s->sel[i])
				continue;
			const char *path = stg__rec_path(s->p, r);
			const char *link = stg__rec_link(s->p, r);
			struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
			int rc = 0;
			if (pass == 0 && r->type == STG_HARDLINK)
				rc = linkat(s->rootfd, link, s->rootfd, path, 0);
			else if (pass == 1 && r->type == STG_SYMLINK)
				rc = symlinkat(link, s->rootfd, path) ||
				     utimensat(s->rootfd, path, ts, AT_SYMLINK_NOFOLLOW);
			else if (pass == 2 && r->type == STG_DIR)
				rc = fchmodat(s->rootfd, path,
				              stg__final_mode(r, s->read_only) |
				                      (s->read_only ? 0500 : 0),
				              0) ||
				     utimensat(s->rootfd, path, ts, AT_SYMLINK_NOFOLLOW);
			if (rc) {
				int e = errno;
				return stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                       "cannot create '%s'", path);
			}
		}
	}
	return STG_OK;
}

/* The tree around the files, for a builder that writes the files itself
 * (delta_apply.c). */
stg_err stg__tree_prepare(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                          bool read_only)
{
	ex_tree tr = {ctx, p, rootfd, stg__ex_umask(), read_only, sel, NULL};
	return stg__ex_prepare(&tr);
}

stg_err stg__tree_finish(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                         bool read_only)
{
	ex_tree tr = {ctx, p, rootfd, stg__ex_umask(), read_only, sel, NULL};
	return stg__ex_finish(&tr);
}
