/* test_mount_tree.c - a pack's manifest as inodes: parents the pack only
 * implies are made, also 2,000 levels deep (without recursion), and each
 * name leads where its path says; several packs make one tree, sharing
 * directories and refusing any other path two of them hold. */
#include "unit.h"

#include "mount_tree.h"
#include "trailer_names.h"

#define DEEP 2000

typedef struct mem_pack {
	stg_pack p;
	stg_rec recs[8];
	char names[2 * DEEP + 64];
} mem_pack;

/* An entry of path (type, size) at the end of the names. */
static void add(mem_pack *m, size_t *used, const char *path, uint8_t type)
{
	stg_trailer *t = &m->p.t;
	size_t i = t->n_entries++;
	size_t len = strlen(path);
	memcpy(m->names + *used, path, len + 1);
	m->recs[i] = (stg_rec){.tar_off = 1024 * i,
	                       .data_off = 1024 * i + 512,
	                       .type = type,
	                       .mode = type == STG_DIR ? 0755 : 0644,
	                       .path_off = *used,
	                       .path_len = (uint32_t)len};
	*used += len + 2; /* a NUL after the path, and after its (empty) link */
}

/* An empty pack of format 3, and the same with its entries' names (used
 * bytes of them) and sizes set. */
static mem_pack *new_pack(void)
{
	mem_pack *m = calloc(1, sizeof *m);
	assert_non_null(m);
	m->p.fd = -1;
	m->p.t.recs = m->recs;
	m->p.t.names = m->names;
	m->p.t.version = 3;
	return m;
}

static mem_pack *done_pack(mem_pack *m, size_t used)
{
	m->p.t.names_len = used;
	m->p.t.tar_size = 1024 * m->p.t.n_entries + 1024;
	m->p.size = m->p.t.tar_size;
	/* as a reader holds it: each directory once, base names */
	assert_int_equal(stg__trailer_index(&m->p.t), 0);
	return m;
}

static void free_pack(mem_pack *m)
{
	free(m->p.t.names);
	free(m->p.t.dirs);
	free(m->p.t.dir_slots);
	free(m);
}

/* A pack with files under parents it never names: a/b/c/f, a/b/g, and a
 * file DEEP directories down; and a directory it names, x. */
static mem_pack *implied_pack(void)
{
	mem_pack *m = new_pack();
	size_t used = 0;
	add(m, &used, "a/b/c/f", STG_FILE);
	add(m, &used, "a/b/g", STG_FILE);
	add(m, &used, "x", STG_DIR);
	char deep[2 * DEEP + 2];
	for (size_t k = 0; k < DEEP; k++)
		memcpy(deep + 2 * k, "d/", 2);
	memcpy(deep + 2 * DEEP, "f", 2);
	add(m, &used, deep, STG_FILE);
	return done_pack(m, used);
}

/* The inode at path, one lookup per component from the root; 0: none. */
static uint32_t walk(const stg_mtree *t, const char *path)
{
	uint32_t ino = STG_MROOT;
	while (*path && ino) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		ino = stg__mtree_lookup(t, ino, path, len);
		path += slash ? len + 1 : len;
	}
	return ino;
}

typedef struct build_job {
	mem_pack *m;
	stg_ctx *ctx;
	stg_mtree *t;
	stg_err err;
} build_job;

static void *build(void *arg)
{
	build_job *j = arg;
	const stg_pack *p = &j->m->p;
	const char *name = "implied";
	j->err = stg__mtree_build(j->ctx, &p, &name, 1, false, &j->t);
	return NULL;
}

static void test_implied_parents(void **state)
{
	(void)state;
	mem_pack *m = implied_pack();
	stg_ctx *ctx = stg_ctx_new();
	/* built on a stack of 64 KiB: a recursion a level per directory
	 * would not fit in it (under ASan, whose frames are larger, 1 MiB) */
	build_job j = {.m = m, .ctx = ctx};
	pthread_attr_t a;
	pthread_t th;
	pthread_attr_init(&a);
#if defined(__SANITIZE_ADDRESS__)
	pthread_attr_setstacksize(&a, 1 << 20);
#else
	pthread_attr_setstacksize(&a, 64 << 10);
#endif
	assert_int_equal(pthread_create(&th, &a, build, &j), 0);
	pthread_join(th, NULL);
	pthread_attr_destroy(&a);
	assert_int_equal(j.err, STG_OK);
	stg_mtree *t = j.t;
	/* the root, 4 entries, a, a/b, a/b/c and the DEEP d's */
	assert_int_equal(t->n_nodes, 1 + 4 + 3 + DEEP);
	uint32_t f = walk(t, "a/b/c/f"), g = walk(t, "a/b/g"), ab = walk(t, "a/b");
	assert_int_equal(f, 2);
	assert_int_equal(g, 3);
	assert_int_equal(walk(t, "x"), 4);
	const stg_mnode *abn = stg__mtree_node(t, ab);
	assert_int_equal(abn->type, STG_DIR);
	assert_int_equal(abn->rec, STG_MNONE);
	assert_null(stg__mtree_rec(t, ab, NULL));
	/* one a/b, the parent of both its files, with two names (c and g) */
	assert_int_equal(stg__mtree_node(t, g)->parent, ab);
	assert_int_equal(stg__mtree_node(t, walk(t, "a/b/c"))->parent, ab);
	assert_int_equal(abn->n_kids, 2);
	assert_int_equal(abn->nlink, 3);
	/* DEEP levels down, each d the parent of the next */
	char deep[2 * DEEP + 2];
	for (size_t k = 0; k < DEEP; k++)
		memcpy(deep + 2 * k, "d/", 2);
	memcpy(deep + 2 * DEEP, "f", 2);
	assert_int_equal(walk(t, deep), 5);
	uint32_t up = stg__mtree_node(t, 5)->parent;
	size_t levels = 0;
	while (up != STG_MROOT) {
		const stg_mnode *n = stg__mtree_node(t, up);
		assert_int_equal(n->type, STG_DIR);
		assert_int_equal(n->name_len, 1);
		assert_int_equal(n->n_kids, 1);
		up = n->parent;
		levels++;
	}
	assert_int_equal(levels, DEEP);
	assert_int_equal(walk(t, "a/b/nope"), 0);
	assert_int_equal(walk(t, "a/b/c/f/g"), 0);
	stg__mtree_free(t);
	stg_ctx_free(ctx);
	free_pack(m);
}

/* A pack of the entries given as "d:PATH" (a directory) or "f:PATH", NULL
 * last. */
static mem_pack *small_pack(const char *const *spec)
{
	mem_pack *m = new_pack();
	size_t used = 0;
	for (; *spec; spec++)
		add(m, &used, *spec + 2, (*spec)[0] == 'd' ? STG_DIR : STG_FILE);
	return done_pack(m, used);
}

/* Build the tree of packs a and b; the error, and the message in msg. */
static stg_err build2(mem_pack *a, mem_pack *b, stg_mtree **t, char *msg, size_t len)
{
	stg_ctx *ctx = stg_ctx_new();
	const stg_pack *pv[] = {&a->p, &b->p};
	const char *names[] = {"A.tar.zst", "B.tar.zst"};
	stg_err err = stg__mtree_build(ctx, pv, names, 2, false, t);
	snprintf(msg, len, "%s", err ? stg_errmsg(ctx) : "");
	stg_ctx_free(ctx);
	return err;
}

static void test_union(void **state)
{
	(void)state;
	static const char *const a_spec[] = {"d:data", "f:data/a1", "f:data/sub/x", "f:onlyA",
	                                     NULL};
	static const char *const b_spec[] = {"f:data/b1", "d:data/sub", "f:data/sub/y", NULL};
	mem_pack *a = small_pack(a_spec), *b = small_pack(b_spec);
	b->recs[1].mode = 0700;
	stg_mtree *t = NULL;
	char msg[512];
	assert_int_equal(build2(a, b, &t, msg, sizeof msg), STG_OK);
	/* one data/ and one data/sub/, holding the files of both */
	uint32_t data = walk(t, "data"), sub = walk(t, "data/sub");
	assert_int_equal(stg__mtree_node(t, data)->n_kids, 3); /* a1 b1 sub */
	assert_int_equal(stg__mtree_node(t, sub)->n_kids, 2);  /* x y */
	assert_int_equal(stg__mtree_node(t, data)->nlink, 3);
	size_t pk = 9;
	assert_non_null(stg__mtree_rec(t, walk(t, "data/b1"), &pk));
	assert_int_equal(pk, 1);
	assert_non_null(stg__mtree_rec(t, walk(t, "data/a1"), &pk));
	assert_int_equal(pk, 0);
	assert_int_equal(stg__mtree_node(t, walk(t, "data/sub/y"))->parent, sub);
	assert_int_equal(stg__mtree_node(t, walk(t, "data/sub/x"))->parent, sub);
	/* data/sub only implied by A takes B's attributes; data/ keeps A's */
	assert_int_equal(stg__mtree_node(t, sub)->mode, 0700);
	assert_non_null(stg__mtree_rec(t, sub, &pk));
	assert_int_equal(pk, 1);
	assert_int_equal(stg__mtree_node(t, data)->mode, 0755);
	/* B's own data/sub entry is no inode of its own */
	assert_null(stg__mtree_node(t, 1 + 4 + 2));
	assert_int_not_equal(walk(t, "onlyA"), 0);
	stg__mtree_free(t);
	free_pack(b);
	/* a file in both, a path under the other's file, a file where the
	 * other has a directory: refused, naming the path and both packs */
	static const char *const same_file[] = {"f:data/a1", NULL};
	static const char *const under_file[] = {"f:onlyA/z", NULL};
	static const char *const file_on_dir[] = {"f:data", NULL};
	const char *const *bad[] = {same_file, under_file, file_on_dir};
	const char *path[] = {"'data/a1'", "'onlyA'", "'data'"};
	for (size_t i = 0; i < 3; i++) {
		b = small_pack(bad[i]);
		t = NULL;
		assert_int_equal(build2(a, b, &t, msg, sizeof msg), STG_EUSAGE);
		assert_null(t);
		assert_non_null(strstr(msg, path[i]));
		assert_non_null(strstr(msg, "'A.tar.zst' and 'B.tar.zst'"));
		free_pack(b);
	}
	free_pack(a);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_implied_parents),
        cmocka_unit_test(test_union),
};

UT_MAIN(tests)
