/*
 * mount_tree.h - the manifests of a mount's packs as one tree of inodes
 * (mount_tree.c).
 */
#ifndef STG_MOUNT_TREE_H
#define STG_MOUNT_TREE_H

#include "trailer.h"

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#define STG_MROOT 1u         /* the root's inode */
#define STG_MNONE UINT32_MAX /* a node no manifest entry stands for */

typedef struct stg_mnode {
	uint32_t parent; /* inode of its directory (the root's is itself) */
	uint32_t pack;   /* which of the tree's packs it comes from */
	uint32_t rec;    /* manifest index; STG_MNONE for the root and implied directories */
	uint32_t target; /* the inode a lookup of this name gives: itself, or a hardlink's file */
	uint32_t nlink;
	uint32_t kids, n_kids; /* a directory's names: kids[kids .. kids + n_kids) */
	const char *name;      /* the last component, not NUL-terminated (name_len) */
	uint32_t name_len;
	uint8_t type;  /* stg_type */
	bool merged;   /* a directory an earlier pack holds too: no inode of
	                  its own (target is that one's) */
	uint32_t mode; /* permission bits, without setuid and setgid */
} stg_mnode;

typedef struct stg_mtree {
	const stg_pack **packs; /* the packs (not owned; they outlive the tree) */
	size_t n_packs;
	stg_mnode *nodes; /* inode i is nodes[i - 1] */
	size_t n_nodes, cap;
	uint32_t *kids; /* inodes of names, by directory */
	uid_t uid;      /* who the files belong to (the mounting user) */
	gid_t gid;
	struct timespec mtime; /* of the root and implied directories */
} stg_mtree;

/* Build the tree of the n packs' manifests, in that order (the rules of a
 * stage apply to each: a hostile pack is STG_ECORRUPT, named on ctx by its
 * name).  Packs may share directories, which are merged (the first pack to
 * list one gives its attributes); any other path two of them hold is
 * refused (STG_EUSAGE, naming both).  any_link: symlinks may point
 * anywhere (a Python env's).  The caller sets uid, gid, mtime. */
stg_err stg__mtree_build(stg_ctx *ctx, const stg_pack *const *packs, const char *const *names,
                         size_t n, bool any_link, stg_mtree **out);
void stg__mtree_free(stg_mtree *t);
const stg_mnode *stg__mtree_node(const stg_mtree *t, uint64_t ino);
/* The manifest entry of inode ino (NULL: the root or an implied
 * directory), and the index of its pack in *pack (if pack is not NULL). */
const stg_rec *stg__mtree_rec(const stg_mtree *t, uint64_t ino, size_t *pack);
/* The inode that name (len bytes) in directory dir stands for; 0: none. */
uint32_t stg__mtree_lookup(const stg_mtree *t, uint64_t dir, const char *name, size_t len);
/* The attributes of inode ino. */
void stg__mtree_stat(const stg_mtree *t, uint64_t ino, struct stat *st);

#endif
