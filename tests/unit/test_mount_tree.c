/* test_mount_tree.c - a pack's manifest as inodes: parents the pack only
 * implies are made, also 2,000 levels deep (without recursion), and each
 * name leads where its path says. */
#include "unit.h"

#include "mount_tree.h"

#define DEEP 2000

typedef struct mem_pack {
	stg_pack p;
	stg_rec recs[4];
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

/* A pack with files under parents it never names: a/b/c/f, a/b/g, and a
 * file DEEP directories down; and a directory it names, x. */
static mem_pack *implied_pack(void)
{
	mem_pack *m = calloc(1, sizeof *m);
	assert_non_null(m);
	m->p.fd = -1;
	m->p.t.recs = m->recs;
	m->p.t.names = m->names;
	m->p.t.version = 3;
	size_t used = 0;
	add(m, &used, "a/b/c/f", STG_FILE);
	add(m, &used, "a/b/g", STG_FILE);
	add(m, &used, "x", STG_DIR);
	char deep[2 * DEEP + 2];
	for (size_t k = 0; k < DEEP; k++)
		memcpy(deep + 2 * k, "d/", 2);
	memcpy(deep + 2 * DEEP, "f", 2);
	add(m, &used, deep, STG_FILE);
	m->p.t.names_len = used;
	m->p.t.tar_size = 1024 * m->p.t.n_entries + 1024;
	m->p.size = m->p.t.tar_size;
	return m;
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
	j->err = stg__mtree_build(j->ctx, &j->m->p, &j->t);
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
	assert_null(stg__mtree_rec(t, ab));
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
	free(m);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_implied_parents),
};

UT_MAIN(tests)
