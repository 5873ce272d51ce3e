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
#include <xxhash.h>

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

/* What building needs besides the tree.  Of one pack: each of its
 * directories' inode (its directory table: trailer_names.h), and the entry
 * that names each.  Of several packs: a map of every node by its parent's
 * inode and its name, to find the directories they share and the paths
 * that clash. */
typedef struct builder {
	stg_mtree *t;
	uint32_t *slots; /* of the map: inodes, a power of two of them (0: empty) */
	size_t cap, count;
	uint32_t *dir_ino;        /* the pack being placed: directory -> inode (0: not yet) */
	uint32_t *dir_rec;        /* directory -> the entry naming it (STG_MNONE: none) */
	const char *const *names; /* the packs' names, for messages */
	uint32_t pack;            /* the pack being placed */
	uint32_t first, end;      /* its entries' inodes: [first, end) */
} builder;

static uint64_t kid_hash(uint32_t parent, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent);
}

/* The slot of (parent, name): its node's, or the empty one it would take. */
static size_t kid_slot(const builder *b, uint32_t parent, const char *name, size_t len)
{
	size_t mask = b->cap - 1;
	for (size_t k = (size_t)kid_hash(parent, name, len) & mask;; k = (k + 1) & mask) {
		uint32_t v = b->slots[k];
		if (!v)
			return k;
		const stg_mnode *n = &b->t->nodes[v - 1];
		if (n->parent == parent && n->name_len == len && memcmp(n->name, name, len) == 0)
			return k;
	}
}

/* Of several packs: the node named as node ino is (its parent and name
 * set) if there is one, else ino, mapped; 0 when out of memory. */
static uint32_t kid_put(builder *b, uint32_t ino)
{
	if (!b->cap)
		return ino;
	if ((b->count + 1) * 2 > b->cap) {
		size_t cap = b->cap * 2;
		uint32_t *ns = calloc(cap, sizeof *ns);
		if (!ns)
			return 0;
		uint32_t *old = b->slots;
		size_t ocap = b->cap;
		b->slots = ns;
		b->cap = cap;
		for (size_t k = 0; k < ocap; k++)
			if (old[k]) {
				const stg_mnode *n = &b->t->nodes[old[k] - 1];
				b->slots[kid_slot(b, n->parent, n->name, n->name_len)] = old[k];
			}
		free(old);
	}
	const stg_mnode *n = &b->t->nodes[ino - 1];
	size_t k = kid_slot(b, n->parent, n->name, n->name_len);
	if (b->slots[k])
		return b->slots[k];
	b->slots[k] = ino;
	b->count++;
	return ino;
}

/* A path of the pack being placed that an earlier pack holds too. */
static stg_err clash(stg_ctx *ctx, builder *b, const char *path, uint32_t ino)
{
	return stg__fail(ctx, STG_EUSAGE,
	                 "'%s' is in both '%s' and '%s': packs mounted together may share "
	                 "directories, not files",
	                 path, b->names[b->t->nodes[ino - 1].pack], b->names[b->pack]);
}

/* The inode of directory x of pack p, made with each parent the pack only
 * implies, from the nearest one known down (without recursion: the depth
 * is the pack's); 0 when out of memory, *err set on a clash. */
static uint32_t dir_of(stg_ctx *ctx, builder *b, const stg_pack *p, uint32_t x, stg_err *err)
{
	const stg_trailer *tr = &p->t;
	stg_mtree *t = b->t;
	while (!b->dir_ino[x]) {
		/* the highest directory not known yet */
		uint32_t y = x;
		while (!b->dir_ino[tr->dirs[y].parent])
			y = tr->dirs[y].parent;
		const stg_dir *d = &tr->dirs[y];
		uint32_t parent = b->dir_ino[d->parent];
		uint32_t o = b->dir_rec[y], ino;
		if (o != STG_MNONE) {
			/* the entry that names it (placed in its turn) */
			ino = b->first + o;
			t->nodes[ino - 1].parent = parent;
			t->nodes[ino - 1].name = tr->names + tr->recs[o].path_off;
			t->nodes[ino - 1].name_len = d->name_len;
		} else {
			if (grow_nodes(t))
				return 0;
			ino = (uint32_t)++t->n_nodes;
			t->nodes[ino - 1] = (stg_mnode){
			        .parent = parent,
			        .pack = b->pack,
			        .rec = STG_MNONE,
			        .target = ino,
			        .nlink = 2,
			        .name = tr->names + d->name_off,
			        .name_len = d->name_len,
			        .type = STG_DIR,
			        .mode = 0755,
			};
		}
		uint32_t had = kid_put(b, ino);
		if (!had)
			return 0;
		if (had != ino) {
			/* an earlier pack's */
			if (t->nodes[had - 1].type != STG_DIR) {
				char path[STG_PATH_MAX + 1];
				stg__trailer_dir_path(tr, y, path);
				*err = clash(ctx, b, path, had);
				return 0;
			}
			if (o == STG_MNONE)
				t->n_nodes--; /* the implied one made is not needed */
			ino = had;
		}
		b->dir_ino[y] = ino;
	}
	return b->dir_ino[x];
}

/* Place the entries of the pack being placed. */
static stg_err place_pack(stg_ctx *ctx, builder *b, const stg_pack *p)
{
	stg_mtree *t = b->t;
	const stg_trailer *tr = &p->t;
	size_t nd = tr->n_dirs ? tr->n_dirs : 1;
	free(b->dir_ino);
	free(b->dir_rec);
	b->dir_ino = calloc(nd, sizeof *b->dir_ino);
	b->dir_rec = malloc(nd * sizeof *b->dir_rec);
	if (!b->dir_ino || !b->dir_rec)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	b->dir_ino[0] = STG_MROOT;
	for (size_t x = 0; x < nd; x++)
		b->dir_rec[x] = STG_MNONE;
	/* its paths are unique (stg__select), and one under another's
	 * lies under a directory */
	for (size_t i = 0; i < tr->n_entries; i++) {
		const stg_rec *r = &tr->recs[i];
		uint32_t x = stg__trailer_dir_child(tr, r->dir, tr->names + r->path_off,
		                                    stg__rec_base_len(tr, r));
		if (x != UINT32_MAX && r->type == STG_DIR)
			b->dir_rec[x] = (uint32_t)i;
	}
	char path[STG_PATH_MAX + 1];
	for (size_t i = 0; i < tr->n_entries; i++) {
		const stg_rec *r = &tr->recs[i];
		stg_err err = STG_OK;
		uint32_t parent = dir_of(ctx, b, p, r->dir, &err);
		if (!parent)
			return err ? err : stg__fail(ctx, STG_ENOMEM, "out of memory");
		uint32_t ino = b->first + (uint32_t)i;
		stg_mnode *n = &t->nodes[ino - 1];
		stg_mnode e = {
		        .parent = parent,
		        .pack = b->pack,
		        .rec = (uint32_t)i,
		        .target = ino,
		        .nlink = r->type == STG_DIR ? 2 : 1,
		        .name = tr->names + r->path_off,
		        .name_len = stg__rec_base_len(tr, r),
		        .type = (uint8_t)r->type,
		        .mode = r->mode & 07777 & ~(uint32_t)06000,
		};
		n->parent = e.parent;
		n->name = e.name;
		n->name_len = e.name_len;
		uint32_t had = kid_put(b, ino);
		if (!had)
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		if (had != ino) {
			/* an earlier pack's: a directory in both is one */
			stg_mnode *d = &t->nodes[had - 1];
			if (r->type != STG_DIR || d->type != STG_DIR)
				return clash(ctx, b, stg__rec_path(p, r, path), had);
			*n = (stg_mnode){.target = had, .merged = true, .type = STG_DIR};
			/* a directory an earlier pack only implied takes this one's
			 * attributes */
			if (d->rec == STG_MNONE && had != STG_MROOT) {
				d->pack = e.pack;
				d->rec = e.rec;
				d->mode = e.mode;
			}
			continue;
		}
		*n = e;
	}
	/* a hardlink shows the file it names, an earlier one of its pack */
	stg_recmap map = {0};
	for (size_t i = 0; i < tr->n_entries; i++) {
		const stg_rec *r = &tr->recs[i];
		if (r->type != STG_HARDLINK)
			continue;
		if (!map.slots) {
			if (stg__recmap_init(&map, tr, tr->n_entries))
				return stg__fail(ctx, STG_ENOMEM, "out of memory");
			for (size_t j = 0; j < tr->n_entries; j++)
				if (tr->recs[j].type == STG_FILE &&
				    stg__recmap_put(&map, (uint32_t)j, (uint32_t)j, NULL) < 0) {
					stg__recmap_free(&map);
					return stg__fail(ctx, STG_ENOMEM, "out of memory");
				}
		}
		uint32_t j = stg__recmap_get(&map, stg__rec_link(p, r), r->link_len);
		t->nodes[b->first + i - 1].target = b->first + j;
	}
	stg__recmap_free(&map);
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

static void free_builder(builder *b)
{
	free(b->slots);
	free(b->dir_ino);
	free(b->dir_rec);
	free(b);
}

stg_err stg__mtree_build(stg_ctx *ctx, const stg_pack *const *packs, const char *const *names,
                         size_t n, bool any_link, stg_mtree **out)
{
	*out = NULL;
	size_t total = 0;
	for (size_t j = 0; j < n; j++) {
		if (packs[j]->t.n_entries > UINT32_MAX / 4 - total)
			return stg__fail(ctx, STG_ECORRUPT, "'%s': damaged pack: too many entries",
			                 names[j]);
		total += packs[j]->t.n_entries;
		bool *sel = NULL;
		stg_err err = stg__select(ctx, packs[j], NULL, any_link, &sel);
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
		b->cap = 64;
		while (b->cap / 2 < t->cap)
			b->cap *= 2;
		if (!(b->slots = calloc(b->cap, sizeof *b->slots)))
			goto oom;
	}
	b->end = 2;
	for (size_t j = 0; j < n; j++) {
		b->pack = (uint32_t)j;
		b->first = b->end;
		b->end = b->first + (uint32_t)packs[j]->t.n_entries;
		if ((err = place_pack(ctx, b, packs[j])))
			goto fail;
	}
	if (link_and_list(b))
		goto oom;
	free_builder(b);
	*out = t;
	return STG_OK;
oom:
	err = stg__fail(ctx, STG_ENOMEM, "out of memory");
fail:
	free_builder(b);
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
