/*
 * mount_tree.h - a pack's manifest as inodes (mount_tree.c).
 */
#ifndef STG_MOUNT_TREE_H
#define STG_MOUNT_TREE_H

#include "trailer.h"

#include <sys/stat.h>
#include <sys/types.h>

#define STG_MROOT 1u         /* the root's inode */
#define STG_MNONE UINT32_MAX /* a node no manifest entry stands for */

typedef struct stg_mnode {
	uint32_t parent; /* inode of its directory (the root's is itself) */
	uint32_t rec;    /* manifest index; STG_MNONE for the root and implied directories */
	uint32_t target; /* the inode a lookup of this name gives: itself, or a hardlink's file */
	uint32_t nlink;
	uint32_t kids, n_kids; /* a directory's names: kids[kids .. kids + n_kids) */
	const char *name;      /* the last component, not NUL-terminated (name_len) */
	uint32_t name_len;
	uint8_t type;  /* stg_type */
	uint32_t mode; /* permission bits, without setuid and setgid */
} stg_mnode;

typedef struct stg_mtree {
	const stg_pack *pack; /* not owned; outlives the tree */
	stg_mnode *nodes;     /* inode i is nodes[i - 1] */
	size_t n_nodes, cap;
	uint32_t *kids; /* inodes of names, by directory */
	uid_t uid;      /* who the files belong to (the mounting user) */
	gid_t gid;
	struct timespec mtime; /* of the root and implied directories */
} stg_mtree;

/* Build the tree of p's manifest (the rules of a stage apply: a hostile
 * pack is STG_ECORRUPT, named on ctx).  The caller sets uid, gid, mtime. */
stg_err stg__mtree_build(stg_ctx *ctx, const stg_pack *p, stg_mtree **out);
void stg__mtree_free(stg_mtree *t);
const stg_mnode *stg__mtree_node(const stg_mtree *t, uint64_t ino);
/* The manifest entry of inode ino (NULL: the root or an implied directory). */
const stg_rec *stg__mtree_rec(const stg_mtree *t, uint64_t ino);
/* The inode that name (len bytes) in directory dir stands for; 0: none. */
uint32_t stg__mtree_lookup(const stg_mtree *t, uint64_t dir, const char *name, size_t len);
/* The attributes of inode ino. */
void stg__mtree_stat(const stg_mtree *t, uint64_t ino, struct stat *st);

#endif
