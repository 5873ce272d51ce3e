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
#include "extract_tree.h"
#include "dircur.h"
#include "ctx.h"

#include <xxhash.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* ---- checking and planning ----------------------------------------------- */

/* In the paths' map, a directory no entry names (a parent implied by what
 * is under it) whose own parents were checked. */
#define IMPLIED (NONE - 1)

typedef struct symlink_probe {
	const stg_pack *p;
	const stg_recmap *map;
} symlink_probe;

static bool probe_is_symlink(void *arg, const char *path, size_t len)
{
	const symlink_probe *pr = arg;
	uint32_t i = stg__recmap_get(pr->map, path, len);
	return i < IMPLIED && pr->p->t.recs[i].type == STG_SYMLINK;
}

/* Where the parent of path[0..len) ends (0: none). */
static size_t parent_len(const char *path, size_t len)
{
	while (len > 0 && path[len - 1] != '/')
		len--;
	return len > 0 ? len - 1 : 0;
}

/* Is the tree the manifest describes safe to extract: unique paths,
 * nothing under a non-directory, hardlinks to earlier files, and (unless
 * any_link) symlinks that stay in the destination?  Fills map (path ->
 * index) and dir_rec (the pack's directories, each once: the entry that
 * names each, or IMPLIED). */
static stg_err check_tree(stg_ctx *ctx, const stg_pack *p, ex_plan *pl, bool any_link)
{
	const stg_trailer *t = &p->t;
	stg_recmap *map = &pl->map;
	char path[STG_PATH_MAX + 1], up[STG_PATH_MAX + 1];
	if (t->n_entries >= IMPLIED)
		return stg__fail(ctx, STG_ECORRUPT, "damaged pack: too many entries");
	size_t nd = t->n_dirs ? t->n_dirs : 1;
	bool *checked = calloc(nd, sizeof *checked);
	if (!checked || !(pl->dir_rec = malloc(nd * sizeof *pl->dir_rec)) ||
	    stg__recmap_init(map, t, t->n_entries)) {
		free(checked);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	for (size_t x = 0; x < nd; x++)
		pl->dir_rec[x] = IMPLIED;
	stg_err err = STG_OK;
	for (size_t i = 0; i < t->n_entries && !err; i++) {
		const stg_rec *r = &t->recs[i];
		int rc = stg__recmap_put(map, (uint32_t)i, (uint32_t)i, NULL);
		if (rc < 0)
			err = stg__fail(ctx, STG_ENOMEM, "out of memory");
		else if (rc == 0)
			err = stg__fail(ctx, STG_ECORRUPT, "damaged pack: '%s' appears twice",
			                stg__rec_path(p, r, path));
		else {
			uint32_t x = stg__trailer_dir_child(t, r->dir, t->names + r->path_off,
			                                    stg__rec_base_len(t, r));
			if (x != NONE)
				pl->dir_rec[x] = (uint32_t)i;
		}
	}
	symlink_probe probe = {p, map};
	for (size_t i = 0; i < t->n_entries && !err; i++) {
		const stg_rec *r = &t->recs[i];
		/* up to the nearest directory checked before: each once, so a
		 * tree 2,000 levels deep is checked in linear time */
		for (uint32_t x = r->dir; x && !checked[x] && !err; x = t->dirs[x].parent) {
			checked[x] = true;
			uint32_t j = pl->dir_rec[x];
			if (j != IMPLIED && t->recs[j].type != STG_DIR) {
				stg__trailer_dir_path(t, x, up);
				err = stg__fail(ctx, STG_ECORRUPT,
				                "refusing a hostile pack: '%s' lies under '%s', "
				                "which is not a directory",
				                stg__rec_path(p, r, path), up);
			}
		}
		if (err)
			break;
		const char *link = stg__rec_link(p, r);
		if (r->type == STG_HARDLINK) {
			uint32_t j = stg__recmap_get(map, link, r->link_len);
			if (j >= i || t->recs[j].type != STG_FILE) /* NONE too */
				err = stg__fail(ctx, STG_ECORRUPT,
				                "refusing a hostile pack: hardlink '%s' points to "
				                "'%s', which is not an earlier file of the pack",
				                stg__rec_path(p, r, path), link);
		} else if (r->type == STG_SYMLINK && !any_link) {
			const char *pp = stg__rec_path(p, r, path);
			if (!stg__symlink_ok(pp, link, probe_is_symlink, &probe))
				err = stg__fail(ctx, STG_ECORRUPT,
				                "refusing a hostile pack: symlink '%s' -> '%s' "
				                "points outside the destination",
				                pp, link);
		}
	}
	free(checked);
	return err;
}

void stg__ex_plan_free(ex_plan *pl)
{
	stg__recmap_free(&pl->map);
	free(pl->dir_rec);
	pl->dir_rec = NULL;
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
	stg_err err = check_tree(ctx, p, pl, any_link);
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
				char path[STG_PATH_MAX + 1];
				if (stg__path_match(opts->include[k],
				                    stg__rec_path(p, &t->recs[i], path))) {
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
				pl->sel[stg__recmap_get(&pl->map, stg__rec_link(p, r),
				                        r->link_len)] = true;
		}
		bool *up = calloc(ne, sizeof *up); /* parents selected */
		if (!up) {
			free(need);
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < ne; i++) {
			const stg_rec *r = &t->recs[i];
			if (!pl->sel[i] || up[i])
				continue;
			up[i] = true;
			for (uint32_t x = r->dir; x; x = t->dirs[x].parent) {
				uint32_t j = pl->dir_rec[x];
				if (j >= IMPLIED)
					continue;
				pl->sel[j] = true;
				if (up[j])
					break;
				up[j] = true;
			}
		}
		free(up);
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
	stg__recmap_free(&pl->map);
	free(pl->dir_rec);
	pl->dir_rec = NULL;
#ifdef __GLIBC__
	/* and its pages go back now: glibc keeps freed blocks below its
	 * (growing) mmap threshold in the heap, counted in the process's
	 * memory for the whole extraction */
	malloc_trim(0);
#endif
	return STG_OK;
}

stg_err stg__select(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, bool any_link,
                    bool **sel)
{
	ex_plan pl = {0};
	stg_err err = stg__ex_plan(ctx, p, opts, &pl, any_link);
	if (!err) {
		*sel = pl.sel;
		pl.sel = NULL;
	}
	stg__ex_plan_free(&pl);
	return err;
}

uint64_t stg__disk_need(const stg_pack *p, const bool *sel)
{
	uint64_t need = 64 * 1024; /* a cache entry's manifest and meta; slack */
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (sel && !sel[i])
			continue;
		if (r->type == STG_FILE)
			need += (r->size + 4095) / 4096 * 4096;
		else if (r->type == STG_DIR)
			need += 4096;
	}
	return need;
}

stg_err stg__ex_room(stg_ctx *ctx, const stg_pack *p, const bool *sel, int dirfd, const char *name)
{
	struct statvfs vfs;
	if (fstatvfs(dirfd, &vfs))
		return STG_OK; /* no figures: a write that fails will say */
	uint64_t need = stg__disk_need(p, sel), avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (need <= avail)
		return STG_OK;
	char a[16], b[16];
	return stg__fail(ctx, STG_ENOSPC,
	                 "not enough space to unpack into '%s': need %s, %s free there: free "
	                 "some space, or unpack elsewhere (or a part of it: --include)",
	                 name, stg_format_size(need, a, sizeof a),
	                 stg_format_size(avail, b, sizeof b));
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

/* The directory that holds path (made if missing, with its parents: a
 * pack may leave them implied), from the cursor; *base is path's last
 * component.  -1/errno. */
static int parent_fd(stg_dircur *dc, const char *path, size_t len, bool create, const char **base)
{
	size_t plen = parent_len(path, len);
	*base = path + plen + (plen > 0);
	return stg__dircur_open(dc, path, plen, create);
}

stg_err stg__ex_prepare(const ex_tree *s)
{
	stg_ctx *ctx = s->ctx;
	const stg_trailer *t = &s->p->t;
	stg_dircur dc;
	stg__dircur_init(&dc, s->rootfd);
	stg_err err = STG_OK;
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));
	for (size_t i = 0; i < t->n_entries && !err; i++) {
		const stg_rec *r = &t->recs[i];
		if (!s->sel[i])
			continue;
		if (stg__cancelled(ctx)) {
			err = stg__fail(ctx, STG_EINTR, "interrupted");
			break;
		}
		char pbuf[STG_PATH_MAX + 1];
		const char *path = stg__rec_path(s->p, r, pbuf), *base;
		if (r->type == STG_FILE && r->size == 0 && memcmp(r->xxh3, empty.digest, 16)) {
			err = stg__fail(ctx, STG_ECORRUPT,
			                "'%s' is damaged: an empty file with a non-empty hash",
			                path);
			break;
		}
		if (s->rootfd < 0)
			continue;
		int pfd = parent_fd(&dc, path, r->path_len, true, &base);
		if (pfd < 0) {
			err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO), errno,
			                      "cannot create the parents of '%s'", path);
			break;
		}
		if (r->type == STG_DIR) {
			if (mkdirat(pfd, base, 0700) && errno != EEXIST)
				err = stg__fail_errno(ctx, stg__err_from_errno(errno, STG_EIO),
				                      errno, "cannot create '%s'", path);
		} else if (r->type == STG_FILE &&
		           (r->size == 0 || (s->span_of && s->span_of[i] != NONE))) {
			bool span = s->span_of && s->span_of[i] != NONE;
			int fd = openat(pfd, base,
			                O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			                span ? 0600 : stg__ex_create_mode(r, s->read_only));
			if (fd < 0 || (!span && stg__ex_set_meta(s, fd, r, false))) {
				int e = errno;
				err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                      "cannot create '%s'", path);
			}
			if (fd >= 0)
				close(fd);
		}
	}
	stg__dircur_free(&dc);
	return err;
}

stg_err stg__ex_finish(const ex_tree *s)
{
	stg_ctx *ctx = s->ctx;
	const stg_trailer *t = &s->p->t;
	stg_dircur dc;
	stg__dircur_init(&dc, s->rootfd);
	stg_err err = STG_OK;
	for (int pass = 0; pass < 3 && !err; pass++) {
		for (size_t i = 0; i < t->n_entries; i++) {
			const stg_rec *r = &t->recs[i];
			if (!s->sel[i])
				continue;
			if (stg__cancelled(ctx)) {
				err = stg__fail(ctx, STG_EINTR, "interrupted");
				break;
			}
			bool mine = (pass == 0 && r->type == STG_HARDLINK) ||
			            (pass == 1 && r->type == STG_SYMLINK) ||
			            (pass == 2 && r->type == STG_DIR);
			if (!mine)
				continue;
			char pbuf[STG_PATH_MAX + 1];
			const char *path = stg__rec_path(s->p, r, pbuf), *base;
			const char *link = stg__rec_link(s->p, r);
			struct timespec ts[2] = {{0, UTIME_OMIT}, {r->mtime, (long)r->mtime_nsec}};
			int pfd = parent_fd(&dc, path, r->path_len, false, &base);
			int rc = -1;
			if (pfd >= 0 && pass == 0)
				rc = linkat(s->rootfd, link, pfd, base, 0);
			else if (pfd >= 0 && pass == 1)
				rc = symlinkat(link, pfd, base) ||
				     utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
			else if (pfd >= 0)
				rc = fchmodat(pfd, base,
				              stg__final_mode(r, s->read_only) |
				                      (s->read_only ? 0500 : 0),
				              0) ||
				     utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
			if (rc) {
				int e = errno;
				err = stg__fail_errno(ctx, stg__err_from_errno(e, STG_EIO), e,
				                      "cannot create '%s'", path);
				break;
			}
		}
	}
	stg__dircur_free(&dc);
	return err;
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
