/*
 * extract_tree.h - the tree around the files of an extraction
 * (extract_tree.c): the plan (what is taken, which files span frames),
 * checked before anything is written, and the directories, links and
 * metadata made around the files; the same for a builder that writes a
 * pack's files itself (delta_apply.c: stg__select, stg__tree_prepare,
 * stg__tree_finish).
 */
#ifndef STG_EXTRACT_TREE_H
#define STG_EXTRACT_TREE_H

#include "pack_read.h"
#include "path.h"
#include "trailer.h"

#include <sys/stat.h>
#include <xxhash.h>

#define NONE UINT32_MAX

/* A file whose content spans frames: its pieces are hashed in frame
 * order. */
typedef struct ex_span {
	uint32_t first; /* first frame holding this file */
	uint32_t next;  /* frame whose piece is to be hashed next */
	uint32_t last;  /* last frame holding this file */
	XXH3_state_t *xs;
} ex_span;

/* What an extraction takes from a pack, once its tree is known to be
 * safe. */
typedef struct ex_plan {
	stg_recmap map;    /* path -> entry, while planning (freed by stg__ex_plan) */
	uint32_t *dir_rec; /* directory -> the entry naming it (IMPLIED: none), likewise */
	bool *sel;         /* the entries taken */
	uint32_t *span_of; /* entry -> its span (NONE: within one frame) */
	ex_span *spans;
	size_t n_spans;
	size_t *frames; /* the frames needed, in order */
	size_t n_frames;
} ex_plan;

/* Check the pack's tree (any_link: symlinks may point anywhere) and plan
 * an extraction with opts (NULL: everything).  Free pl in any case. */
stg_err stg__ex_plan(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, ex_plan *pl,
                     bool any_link);
void stg__ex_plan_free(ex_plan *pl);

/* Where and how the selected entries of a pack are made. */
typedef struct ex_tree {
	stg_ctx *ctx;
	const stg_pack *p;
	int rootfd; /* -1: nothing is written (verify) */
	mode_t umask;
	bool read_only;
	const bool *sel;
	const uint32_t *span_of; /* NULL: the files are written elsewhere */
} ex_tree;

/* Directories, empty files and files that span frames (created, to be
 * written by pieces), before the frames are decoded; links and directory
 * metadata after every file is written. */
stg_err stg__ex_prepare(const ex_tree *tr);
stg_err stg__ex_finish(const ex_tree *tr);
/* The process's umask (read, not changed). */
mode_t stg__ex_umask(void);
/* The mode a file is created with: its final permission bits, so that
 * most need no chmod afterwards; its metadata set on the open file (the
 * mode only if the umask took some of it, or if forced). */
mode_t stg__ex_create_mode(const stg_rec *r, bool read_only);
int stg__ex_set_meta(const ex_tree *tr, int fd, const stg_rec *r, bool force_chmod);

/* For a builder that writes a pack's files itself (delta_apply.c), over the
 * entries flagged in sel: directories and empty files first (prepare),
 * hardlinks, symlinks and directory metadata once every file is in place
 * (finish).  The tree must have passed stg__select. */
stg_err stg__tree_prepare(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                          bool read_only);
stg_err stg__tree_finish(stg_ctx *ctx, const stg_pack *p, const bool *sel, int rootfd,
                         bool read_only);
/* The permission bits an extracted entry gets (no setuid/setgid; no write
 * bits if read_only), and both with the mtime set on an open file. */
mode_t stg__final_mode(const stg_rec *r, bool read_only);
int stg__file_meta(int fd, const stg_rec *r, bool read_only);
/* Which entries extraction with opts takes (after checking the tree is
 * safe; any_link: symlinks may point anywhere); *sel is malloc'ed, one
 * flag per entry. */
stg_err stg__select(stg_ctx *ctx, const stg_pack *p, const stg_unpack_opts *opts, bool any_link,
                    bool **sel);
/* Bytes on disk the entries flagged in sel (all, if NULL) take once
 * extracted: files' blocks, a block per directory, and some slack. */
uint64_t stg__disk_need(const stg_pack *p, const bool *sel);
/* STG_ENOSPC with the figures if they do not fit on the filesystem of the
 * directory dirfd (name, for the message), before anything is written. */
stg_err stg__ex_room(stg_ctx *ctx, const stg_pack *p, const bool *sel, int dirfd, const char *name);

#endif
