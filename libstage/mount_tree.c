/*
 * mount_tree.c - the manifests of a mount's packs as one tree of inodes,
 * for stager mount.
 *
 * Built once, in memory, from the trailers alone: nothing is read from the
 * packs' frames and no index file is written.  Inode 1 is the root; entry
 * i of the manifest of the j-th pack is inode B + i + 2, where B counts the
 * entries of the packs before it; directories the packs imply (a parent of
 * an entry that its pack does not list) come after those.  Each
 * directory's names are one run of kids[], sorted bytewise, so a lookup is
 * a binary search and readdir's offset is an index into the run.  A
 * hardlink is a name, not an inode: its lookup gives the inode of the file
 * it links to, whose nlink counts it.
 *
 * Each pack passes the rules a stage applies first (stg__select): no path
 * twice, nothing under a non-directory, hardlinks only to an earlier file,
 * no symlink leading out of the tree.  A pack stage refuses is not mounted.
 * Several packs (shards of one dataset) make one tree: a directory two of
 * them hold is one directory, with the attributes of the first pack that
 * lists it (an implied directory takes those of a pack that lists it);
 * any other path two of them hold, or a path under another pack's file,
 * is refused, naming both packs: which of two files a name shows must not
 * depend on the order the packs were given in.
 */
#include "extract_tree.h"
#include "mount_tree.h"
#include "ctx.h"
#include "trailer.h"
#include "pack_read.h"
#include "path.h"

#include <stdlib.h>
#include <string.h>

/* The node of inode ino; NULL if there is none. */
const stg_mnode *stg__mtree_node(const stg_mtree *t, uint64_t ino)
{
	if (ino < 1 || ino > t->n_nodes || t->nodes[ino - 1].merged)
		return NULL;
	return &t->nodes[ino - 1];
}

static int cmp_kid(const void *a, const void *b, void *arg)
{
	const stg_mtree *t = arg;
	const stg_mnode *x = &t->nodes[*(const uint32_t *)a - 1];
	const stg_mnode *y = &t->nodes[*(const uint32_t *)b - 1];
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = memcmp(x->name, y->name, n);
	return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Room for one more node (a directory the pack implies). */
static int grow_nodes(stg_mtree *t)
{
	if (t->n_nodes < t->cap)
		return 0;
	size_t cap = t->cap * 2;
	stg_mnode *n = realloc(t->nodes, cap * sizeof *n);
	if (!n)
		return -1;
	t->nodes = n;
	t->cap = cap;
	return 0;
}

/* The directories that hold the last entry placed, root first: in a pack's
 * order (depth first, a directory before its contents) the parent of the
 * next entry is one of them, found without hashing. */
typedef struct dir_stack {
	struct {
		const char *path;
		size_t len;
		uint32_t ino;
	} v[STG_PATH_MAX / 2 + 2];
	size_t n;
} dir_stack;

/* What building needs besides the tree: the stack, and a map of every path
 * made only when the order does not give a parent (or for hardlinks); of
 * several packs, made from the start (to find the paths they share). */
typedef struct builder {
	stg_mtree *t;
	dir_stack st;
	stg_strmap map;
	bool mapped;
	const char *const *names; /* the packs' names, for messages */
	uint32_t pack;            /* the pack being placed */
	uint32_t first, end;      /* its entries' inodes: [first, end) */
} builder;

static int map_all(builder *b)
{
	const stg_pack *p = b->t->packs[0];
	if (b->mapped)
		return 0;
	if (stg__strmap_init(&b->map, b->t->n_nodes))
		return -1;
	b->mapped = true;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		if (stg__strmap_put(&b->map, stg__rec_path(p, r), r->path_len, (uint32_t)(i + 2)) <
		    0)
			return -1;
	}
	return 0;
}

static void push_dir(builder *b, const char *path, size_t len, uint32_t ino)
{
	dir_stack *st = &b->st;
	while (st->n > 1 && !(st->v[st->n - 1].len < len && path[st->v[st->n - 1].len] == '/' &&
	                      memcmp(st->v[st->n - 1].path, path, st->v[st->n - 1].len) == 0))
		st->n--;
	if (st->n < sizeof st->v / sizeof st->v[0]) {
		st->v[st->n].path = path;
		st->v[st->n].len = len;
		st->v[st->n].ino = ino;
		st->n++;
	}
}

/* The inode of path[0, len) if known (the stack, then every path):
 * UINT32_MAX if not, 0 when out of memory. */
static uint32_t known_dir(builder *b, const char *path, size_t len)
{
	if (len == 0)
		return STG_MROOT;
	dir_stack *st = &b->st;
	for (size_t k = st->n; k-- > 1;)
		if (st->v[k].len == len && memcmp(st->v[k].path, path, len) == 0)
			return st->v[k].ino;
	if (map_all(b))
		return 0;
	return stg__strmap_get(&b->map, path, len);
}

/* The inode of directory path[0, len) ("" is the root), made with each
 * parent the pack only implies (from the nearest one known down, without
 * recursion: the depth is the pack's); 0 when out of memory. */
static uint32_t dir_of(builder *b, const char *path, size_t len)
{
	stg_mtree *t = b->t;
	size_t have = len;
	uint32_t ino;
	while ((ino = known_dir(b, path, have)) == UINT32_MAX) {
		while (have > 0 && path[have - 1] != '/')
			have--;
		have = have ? have - 1 : 0;
	}
	while (ino && have < len) {
		size_t start = have ? have + 1 : 0, end = start;
		while (end < len && path[end] != '/')
			end++;
		if (grow_nodes(t))
			return 0;
		uint32_t parent = ino;
		ino = (uint32_t)++t->n_nodes;
		t->nodes[ino - 1] = (stg_mnode){
		        .parent = parent,
		        .pack = b->pack,
		        .rec = STG_MNONE,
		        .target = ino,
		        .nlink = 2,
		        .name = path + start,
		        .name_len = (uint32_t)(end - start),
		        .type = STG_DIR,
		        .mode = 0755,
		};
		if (stg__strmap_put(&b->map, path, end, ino) < 0)
			return 0;
		push_dir(b, path, end, ino);
		have = end;
	}
	return ino;
}

/* A path of the pack being placed that an earlier pack holds too. */
static stg_err clash(stg_ctx *ctx, builder *b, const char *path, size_t len, uint32_t ino)
{
	return stg__fail(ctx, STG_EUSAGE,
	                 "'%.*s' is in both '%s' and '%s': packs mounted together may share "
	                 "directories, not files",
	                 (int)len, path, b->names[b->t->nodes[ino - 1].pack], b->names[b->pack]);
}

/* Of several packs: map the paths of the one being placed, marking each
 * directory an earlier pack holds as merged into that one; a path it holds
 * that is not a directory in both is a clash. */
static stg_err map_pack(stg_ctx *ctx, builder *b, const stg_pack *p)
{
	stg_mtree *t = b->t;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		const char *path = stg__rec_path(p, r);
		uint32_t ino = b->first + (uint32_t)i;
		int rc = stg__strmap_put(&b->map, path, r->path_len, ino);
		if (rc < 0)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		if (rc > 0)
			continue;
		uint32_t had = stg__strmap_get(&b->map, path, r->path_len);
		if (r->type != STG_DIR || t->nodes[had - 1].type != STG_DIR)
			return clash(ctx, b, path, r->path_len, had);
		t->nodes[ino - 1] = (stg_mnode){.target = had, .merged = true, .type = STG_DIR};
	}
	return STG_OK;
}

/* Place the entries of the pack being placed. */
static stg_err place_pack(stg_ctx *ctx, builder *b, const stg_pack *p)
{
	stg_mtree *t = b->t;
	b->st.n = 1;
	for (size_t i = 0; i < p->t.n_entries; i++) {
		const stg_rec *r = &p->t.recs[i];
		const char *path = stg__rec_path(p, r);
		size_t slash = r->path_len;
		while (slash > 0 && path[slash - 1] != '/')
			slash--;
		uint32_t parent = dir_of(b, path, slash ? slash - 1 : 0);
		if (!parent)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		/* its own entries passed stg__select; an earlier pack's may be
		 * a file where this one has a directory */
		if ((parent < b->first || parent >= b->end) && t->nodes[parent - 1].type != STG_DIR)
			return clash(ctx, b, path, slash - 1, parent);
		uint32_t ino = b->first + (uint32_t)i;
		stg_mnode *n = &t->nodes[ino - 1];
		stg_mnode e = {
		        .parent = parent,
		        .pack = b->pack,
		        .rec = (uint32_t)i,
		        .target = ino,
		        .nlink = r->type == STG_DIR ? 2 : 1,
		        .name = path + slash,
		        .name_len = (uint32_t)(r->path_len - slash),
		        .type = (uint8_t)r->type,
		        .mode = r->mode & 07777 & ~(uint32_t)06000,
		};
		if (n->merged) {
			/* a directory an earlier pack only implied takes this one's
			 * attributes */
			stg_mnode *d = &t->nodes[n->target - 1];
			if (d->rec == STG_MNONE && n->target != STG_MROOT) {
				d->pack = e.pack;
				d->rec = e.rec;
				d->mode = e.mode;
			}
			push_dir(b, path, r->path_len, n->target);
			continue;
		}
		if (r->type == STG_DIR)
			push_dir(b, path, r->path_len, ino);
		*n = e;
	}
	return STG_OK;
}

/* Links and each directory's sorted run of names, once every node is. */
static int link_and_list(builder *b)
{
	stg_mtree *t = b->t;
	/* links: a hardlink shows its file; a directory counts its subdirectories */
	for (size_t i = 1; i < t->n_nodes; i++) {
		stg_mnode *n = &t->nodes[i];
		if (n->merged)
			continue;
		if (n->type == STG_HARDLINK) {
			const stg_pack *p = t->packs[n->pack];
			const stg_rec *r = &p->t.recs[n->rec];
			if (map_all(b))
				return -1;
			n->target = stg__strmap_get(&b->map, stg__rec_link(p, r), r->link_len);
			t->nodes[n->target - 1].nlink++;
		} else if (n->type == STG_DIR) {
			t->nodes[n->parent - 1].nlink++;
		}
	}
	size_t n_kids = t->n_nodes - 1;
	if (!(t->kids = malloc((n_kids ? n_kids : 1) * sizeof *t->kids)))
		return -1;
	for (size_t i = 1; i < t->n_nodes; i++)
		if (!t->nodes[i].merged)
			t->nodes[t->nodes[i].parent - 1].n_kids++;
	uint32_t at = 0;
	for (size_t i = 0; i < t->n_nodes; i++) {
		t->nodes[i].kids = at;
		at += t->nodes[i].n_kids;
		t->nodes[i].n_kids = 0;
	}
	for (size_t i = 1; i < t->n_nodes; i++) {
		if (t->nodes[i].merged)
			continue;
		stg_mnode *d = &t->nodes[t->nodes[i].parent - 1];
		t->kids[d->kids + d->n_kids++] = (uint32_t)(i + 1);
	}
	for (size_t i = 0; i < t->n_nodes; i++) {
		stg_mnode *d = &t->nodes[i];
		bool sorted = true;
		for (uint32_t k = 1; sorted && k < d->n_kids; k++)
			sorted = cmp_kid(&t->kids[d->kids + k - 1], &t->kids[d->kids + k], t) < 0;
		if (!sorted)
			qsort_r(&t->kids[d->kids], d->n_kids, sizeof *t->kids, cmp_kid, t);
	}
	return 0;
}

stg_err stg__mtree_build(stg_ctx *ctx, const stg_pack *const *packs, const char *const *names,
                         size_t n, stg_mtree **out)
{
	*out = NULL;
	size_t total = 0;
	for (size_t j = 0; j < n; j++) {
		if (packs[j]->t.n_entries > UINT32_MAX / 4 - total)
			return stg__fail(ctx, STG_ECORRUPT, "'%s': damaged pack: too many entries",
			                 names[j]);
		total += packs[j]->t.n_entries;
		bool *sel = NULL;
		stg_err err = stg__select(ctx, packs[j], NULL, &sel);
		free(sel);
		if (err) {
			char msg[STG_ERRMSG_MAX];
			snprintf(msg, sizeof msg, "%s", ctx->errmsg);
			return stg__fail(ctx, err, "'%s': %s", names[j], msg);
		}
	}
	stg_mtree *t = calloc(1, sizeof *t);
	builder *b = calloc(1, sizeof *b);
	if (!t || !b || !n) {
		free(t);
		free(b);
		return n ? stg__fail(ctx, STG_ENOMEM, "out of memory")
		         : stg__fail(ctx, STG_EUSAGE, "no pack to mount");
	}
	stg_err err = STG_OK;
	b->t = t;
	b->names = names;
	b->st.v[0].path = "";
	b->st.v[0].ino = STG_MROOT;
	b->st.n = 1;
	t->n_packs = n;
	t->packs = malloc(n * sizeof *t->packs);
	t->cap = total + 16;
	t->nodes = calloc(t->cap, sizeof *t->nodes);
	if (!t->packs || !t->nodes)
		goto oom;
	memcpy(t->packs, packs, n * sizeof *t->packs);
	const stg_trailer *tr = &packs[0]->t;
	uint32_t root_mode = tr->root_mode & STG_ROOT_MODE_SET ? tr->root_mode & 07777 : 0755;
	t->nodes[0] = (stg_mnode){.parent = STG_MROOT,
	                          .rec = STG_MNONE,
	                          .target = STG_MROOT,
	                          .nlink = 2,
	                          .name = "",
	                          .type = STG_DIR,
	                          .mode = root_mode & 07777 & ~(uint32_t)06000};
	t->n_nodes = 1 + total;
	if (n > 1) {
		if (stg__strmap_init(&b->map, t->cap))
			goto oom;
		b->mapped = true;
	}
	b->end = 2;
	for (size_t j = 0; j < n; j++) {
		b->pack = (uint32_t)j;
		b->first = b->end;
		b->end = b->first + (uint32_t)packs[j]->t.n_entries;
		if ((n > 1 && (err = map_pack(ctx, b, packs[j]))) ||
		    (err = place_pack(ctx, b, packs[j])))
			goto fail;
	}
	if (link_and_list(b))
		goto oom;
	stg__strmap_free(&b->map);
	free(b);
	*out = t;
	return STG_OK;
oom:
	err = stg__fail(ctx, STG_ENOMEM, "out of memory");
fail:
	stg__strmap_free(&b->map);
	free(b);
	stg__mtree_free(t);
	return err;
}

void stg__mtree_free(stg_mtree *t)
{
	if (!t)
		return;
	free(t->packs);
	free(t->nodes);
	free(t->kids);
	free(t);
}

uint32_t stg__mtree_lookup(const stg_mtree *t, uint64_t dir, const char *name, size_t len)
{
	const stg_mnode *d = stg__mtree_node(t, dir);
	if (!d || d->type != STG_DIR)
		return 0;
	size_t lo = 0, hi = d->n_kids;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const stg_mnode *k = &t->nodes[t->kids[d->kids + mid] - 1];
		size_t n = k->name_len < len ? k->name_len : len;
		int c = memcmp(k->name, name, n);
		if (!c)
			c = (k->name_len > len) - (k->name_len < len);
		if (c == 0)
			return k->target;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

void stg__mtree_stat(const stg_mtree *t, uint64_t ino, struct stat *st)
{
	const stg_mnode *n = stg__mtree_node(t, ino);
	memset(st, 0, sizeof *st);
	if (!n)
		return;
	const stg_rec *r = n->rec == STG_MNONE ? NULL : &t->packs[n->pack]->t.recs[n->rec];
	st->st_ino = ino;
	st->st_nlink = n->nlink;
	st->st_uid = t->uid;
	st->st_gid = t->gid;
	st->st_blksize = 128 * 1024;
	switch (n->type) {
	case STG_DIR: st->st_mode = S_IFDIR | n->mode; break;
	case STG_SYMLINK:
		st->st_mode = S_IFLNK | 0777;
		st->st_size = r ? r->link_len : 0;
		break;
	default:
		st->st_mode = S_IFREG | n->mode;
		st->st_size = r ? (off_t)r->size : 0;
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
	if (r) {
		st->st_mtim.tv_sec = r->mtime;
		st->st_mtim.tv_nsec = r->mtime_nsec;
	} else {
		st->st_mtim = t->mtime;
	}
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

const stg_rec *stg__mtree_rec(const stg_mtree *t, uint64_t ino, size_t *pack)
{
	const stg_mnode *n = stg__mtree_node(t, ino);
	if (!n || n->rec == STG_MNONE)
		return NULL;
	if (pack)
		*pack = n->pack;
	return &t->packs[n->pack]->t.recs[n->rec];
}
