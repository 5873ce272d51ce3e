/* test_mount_keep.c - `stager mount --cache` (mount_keep.c): a mounted
 * pack's fetched frames kept in the node cache as the entry
 * cache/<digest>-f (a sparse "frames" file, a "have" byte per frame, meta
 * of kind "frames"), pinned by the mount while it lasts; a frame not kept
 * is not served from there, one kept is read back as it was; what was
 * kept is remembered by a later mount; a pack of an older format keeps
 * nothing (told); an entry of another size refused; a cache with no room
 * keeps nothing more; a pin clean already dropped is not waited for. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "mount_state.h"
#include "mount_keep.h"
#include "mount.h"

typedef struct fx {
	UT_FX;
	stg_mount *m;
	uint8_t *file;
	size_t file_len;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_fill_file(f->src, "a", 300 * 1024, 1);
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL);
	f->file = ut_read(f->pack, &f->file_len);
	*state = f;
	return 0;
}

/* the mount's one pack */
#define P(m) (&(m)->packs[0])

static stg_mount *mount_of(fx *f)
{
	stg_mount *m = calloc(1, sizeof *m);
	m->ctx = f->ctx;
	m->cache = f->c;
	m->packs = calloc(1, sizeof *m->packs);
	m->n_packs = 1;
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &P(m)->pack), STG_OK);
	P(m)->path = f->pack;
	stg_digest_hex(P(m)->pack->t.digest, P(m)->digest);
	snprintf(m->owner, sizeof m->owner, "pid-%d", (int)getpid());
	P(m)->entry_fd = -1;
	m->tie_fd = -1;
	return m;
}

static void mount_free(stg_mount *m)
{
	stg_pack_close(P(m)->pack);
	free(m->packs);
	free(m);
}

static int teardown(void **state)
{
	fx *f = *state;
	if (f->m) {
		stg__keep_close(f->m, P(f->m), P(f->m)->keep);
		mount_free(f->m);
	}
	free(f->file);
	return ut_teardown(state);
}

/* The pin of owner on key is there. */
static bool pinned(fx *f, const char *key, const char *owner)
{
	char rel[512];
	snprintf(rel, sizeof rel, "pins/%s/%s", key, owner);
	return ut_exists_at(f->c->rootfd, rel);
}

static void test_keep(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, NULL);
	stg_mount *m = f->m = mount_of(f);
	assert_true(P(m)->pack->t.version >= 3);
	assert_true(P(m)->pack->t.n_frames >= 4);
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_OK);
	stg_keep *k = P(m)->keep;
	assert_non_null(k);
	char key[STG_DIGEST_HEXLEN + 3];
	snprintf(key, sizeof key, "%s-f", P(m)->digest);
	assert_true(pinned(f, key, m->owner));
	/* the entry: a sparse file as large as the pack, a byte a frame */
	char rel[512];
	struct stat st;
	snprintf(rel, sizeof rel, "cache/%s/frames", key);
	assert_int_equal(fstatat(f->c->rootfd, rel, &st, 0), 0);
	assert_int_equal(st.st_size, P(m)->pack->size);
	snprintf(rel, sizeof rel, "cache/%s/have", key);
	assert_int_equal(fstatat(f->c->rootfd, rel, &st, 0), 0);
	assert_int_equal(st.st_size, P(m)->pack->t.n_frames);
	stg_meta meta;
	assert_int_equal(stg__meta_read(f->c, key, &meta), 0);
	assert_string_equal(meta.kind, "frames");
	assert_string_equal(meta.source, f->pack);
	assert_int_equal(meta.content, 0);

	const stg_frame *f1 = &P(m)->pack->t.frames[1], *f2 = &P(m)->pack->t.frames[2];
	uint8_t *buf = ut_malloc(f1->comp_size + f2->comp_size);
	assert_int_equal(stg__keep_get(k, f1, 1, buf), -1); /* not kept */
	stg__keep_put(m, P(m), f1, 1, f->file + f1->comp_off);
	memset(buf, 0, f1->comp_size);
	assert_int_equal(stg__keep_get(k, f1, 1, buf), 0);
	assert_memory_equal(buf, f->file + f1->comp_off, f1->comp_size);
	assert_int_equal(stg__keep_get(k, f2, 2, buf), -1);
	/* closed: meta says what is kept; the pin goes */
	stg__keep_close(m, P(m), k);
	assert_null(P(m)->keep);
	assert_false(pinned(f, key, m->owner));
	assert_int_equal(stg__meta_read(f->c, key, &meta), 0);
	assert_int_equal(meta.content, f1->comp_size);
	/* a later mount finds it */
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_OK);
	assert_int_equal(stg__keep_get(P(m)->keep, f1, 1, buf), 0);
	assert_memory_equal(buf, f->file + f1->comp_off, f1->comp_size);
	assert_int_equal(stg__keep_get(P(m)->keep, f2, 2, buf), -1);
	/* clean dropped the pin already: closing does not wait for its lock */
	int lock = stg__cache_lock(f->ctx, f->c, "cache", true, NULL);
	stg__unpin_key(f->c, key, m->owner);
	pid_t pid = fork(); /* in a child: one that waited would hang */
	if (pid == 0) {
		stg__keep_close(m, P(m), P(m)->keep);
		_exit(0);
	}
	int ws = -1;
	for (int i = 0; i < 200 && waitpid(pid, &ws, WNOHANG) == 0; i++)
		usleep(10000);
	if (ws == -1) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		stg__cache_unlock(lock);
		fail_msg("closing waited for the cache's lock");
	}
	stg__keep_close(m, P(m), P(m)->keep);
	stg__cache_unlock(lock);
	free(buf);
}

static void test_refused(void **state)
{
	fx *f = *state;
	ut_fx_cache(&f->ut, NULL);
	stg_mount *m = f->m = mount_of(f);
	/* an older format: nothing kept, said */
	uint32_t v = P(m)->pack->t.version;
	P(m)->pack->t.version = 2;
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_OK);
	assert_null(P(m)->keep);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.text, "is a pack of format 2: its frames cannot be checked "
	                                    "alone, so they are not kept (--cache)"));
	P(m)->pack->t.version = v;
	/* an entry that is not of this pack (its frames of another size) */
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_OK);
	stg__keep_close(m, P(m), P(m)->keep);
	char key[STG_DIGEST_HEXLEN + 3], rel[512];
	snprintf(key, sizeof key, "%s-f", P(m)->digest);
	snprintf(rel, sizeof rel, "%s/scratch/cache/%s/frames", f->dir, key);
	chmod(rel, 0600);
	assert_int_equal(truncate(rel, 100), 0);
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_EIO);
	char want[256];
	snprintf(want, sizeof want, "the frames' entry %s is not of this pack", key);
	assert_string_equal(stg_errmsg(f->ctx), want);
	assert_null(P(m)->keep);
	assert_false(pinned(f, key, m->owner));
}

/* A cache too small for a slice of frames keeps none. */
static void test_no_room(void **state)
{
	fx *f = *state;
	const char *set[] = {"cache_max", "1M", NULL};
	ut_fx_cache(&f->ut, set);
	stg_mount *m = f->m = mount_of(f);
	assert_int_equal(stg__keep_open(f->ctx, m, P(m)), STG_OK);
	const stg_frame *f0 = &P(m)->pack->t.frames[0];
	stg__keep_put(m, P(m), f0, 0, f->file + f0->comp_off);
	uint8_t *buf = ut_malloc(f0->comp_size);
	assert_int_equal(stg__keep_get(P(m)->keep, f0, 0, buf), -1);
	free(buf);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_keep),
        T(test_refused),
        T(test_no_room),
};

UT_MAIN(tests)
