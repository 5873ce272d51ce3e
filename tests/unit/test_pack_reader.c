/* test_pack_reader.c - a pack's files read at random (pack_reader.c):
 * every file, whole and in pieces at odd offsets, the same as its source;
 * paths found, hard links read as their targets, others not files;
 * a damaged frame fails its files only, and says which frame and why; a
 * pack changed or cut short in place is ESTALE, not damage; a forked
 * child's reader over its parent's manifest; threads reading at once;
 * frames decoded only as far as reads need; not a pack refused. */
#include "unit.h"
#include "trailer.h"
#include "pack_read.h"

#include <errno.h>

static int setup(void **state)
{
	ut_fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	ut_mkdir(f->dir, "src");
	ut_mkdir(f->src, "sub");
	for (int i = 0; i < 40; i++) {
		char name[64];
		snprintf(name, sizeof name, "sub/f%02d", i);
		ut_fill_file(f->src, name, (size_t)i * 7919, (uint64_t)i + 1);
	}
	ut_fill_file(f->src, "big", 700 * 1024, 99);
	ut_write(f->src, "empty", "", 0);
	ut_hardlink(f->src, "big-link", "big");
	ut_symlink(f->src, "sym", "big");
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL); /* 64 KiB frames */
	*state = f;
	return 0;
}

static uint8_t *slurp(const char *dir, const char *name, size_t *len)
{
	char *p = ut_join(dir, name);
	int fd = open(p, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	fstat(fd, &st);
	uint8_t *b = ut_malloc((size_t)st.st_size + 1);
	assert_int_equal(stg__pread_full(fd, b, (size_t)st.st_size, 0), 0);
	close(fd);
	free(p);
	*len = (size_t)st.st_size;
	return b;
}

static stg_reader *open_reader(ut_fx *f, const char *path)
{
	stg_reader *r;
	if (stg_reader_open(f->ctx, path, NULL, &r))
		fail_msg("open: %s", stg_errmsg(f->ctx));
	return r;
}

static void test_every_file(void **state)
{
	ut_fx *f = *state;
	stg_reader *r = open_reader(f, f->pack);
	/* 40 + big + empty + big-link; not sym, not the directories */
	assert_int_equal(stg_reader_count(r), 43);
	for (size_t i = 0; i < stg_reader_count(r); i++) {
		stg_entry e;
		assert_int_equal(stg_reader_file(r, i, &e), 0);
		assert_int_equal(e.type, STG_FILE);
		size_t len, j;
		uint8_t *want = slurp(f->src, e.path, &len);
		assert_int_equal(e.size, len);
		assert_int_equal(stg_reader_find(r, e.path, strlen(e.path), &j), 0);
		assert_int_equal(j, i);
		uint8_t *got = ut_malloc(len + 1);
		assert_int_equal(stg_reader_read(r, i, got), 0);
		assert_memory_equal(got, want, len);
		/* in pieces of an odd size, at odd offsets */
		memset(got, 0, len + 1);
		size_t off = 0, n;
		while (off < len) {
			assert_int_equal(stg_reader_pread(r, i, got + off, 3001, off, &n), 0);
			assert_true(n > 0 && n <= 3001);
			off += n;
		}
		assert_int_equal(stg_reader_pread(r, i, got, 10, len, &n), 0);
		assert_int_equal(n, 0);
		assert_memory_equal(got, want, len);
		free(got);
		free(want);
	}
	size_t j;
	assert_int_equal(stg_reader_find(r, "sym", 3, &j), -1);
	assert_int_equal(stg_reader_find(r, "sub", 3, &j), -1);
	assert_int_equal(stg_reader_find(r, "nothing", 7, &j), -1);
	/* a name with a NUL inside is no name of the pack's */
	assert_int_equal(stg_reader_find(r, "big\0x", 5, &j), -1);
	stg_entry e;
	assert_int_equal(stg_reader_file(r, 43, &e), -1);
	size_t n;
	uint8_t b[4];
	assert_int_equal(stg_reader_pread(r, 43, b, 4, 0, &n), EINVAL);
	stg_reader_close(r);
}

/* A file that fits in a frame is in one frame (the writer starts the next
 * frame before it rather than split it): reading it fetches one. */
static void test_one_frame(void **state)
{
	ut_fx *f = *state;
	stg_reader *r = open_reader(f, f->pack);
	const stg_trailer *t = &((const stg_pack *)stg_reader_pack(r))->t;
	int small = 0;
	for (size_t i = 0; i < stg_reader_count(r); i++) {
		stg_entry e;
		stg_reader_file(r, i, &e);
		if (!e.size || e.size + 1536 + strlen(e.path) > 64 * 1024)
			continue;
		small++;
		size_t a = stg__frame_of(t, e.data_offset);
		size_t b = stg__frame_of(t, e.data_offset + e.size - 1);
		if (a != b)
			fail_msg("'%s' (%llu bytes) is in frames %zu to %zu", e.path,
			         (unsigned long long)e.size, a, b);
	}
	assert_true(small >= 7);
	/* and frames are not cut to pieces: at most twice as many as full ones */
	assert_true(t->n_frames <= 2 * (t->tar_size / (64 * 1024)) + 2);
	stg_reader_close(r);
}

/* A cold 4 KiB read decodes what it needs, not the whole frame. */
static void test_partial(void **state)
{
	ut_fx *f = *state;
	char *pack = ut_join(f->dir, "big.tar.zst");
	stg_pack_opts o;
	stg_pack_opts_init(&o); /* 4 MiB frames */
	assert_int_equal(stg_pack_dir(f->ctx, f->src, pack, &o, NULL), STG_OK);
	stg_reader *r = open_reader(f, pack);
	size_t i;
	assert_int_equal(stg_reader_find(r, "big", 3, &i), 0);
	uint8_t buf[4096];
	size_t n;
	assert_int_equal(stg_reader_pread(r, i, buf, sizeof buf, 0, &n), 0);
	stg_reader_stats s;
	stg_reader_get_stats(r, &s);
	assert_int_equal(s.frames_fetched, 1);
	stg_entry e;
	stg_reader_file(r, i, &e);
	assert_true(s.bytes_decoded < e.data_offset + (256 << 10));
	stg_reader_close(r);
	free(pack);
}

static void test_damaged_frame(void **state)
{
	ut_fx *f = *state;
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &p), STG_OK);
	/* damage the frame that holds the middle of big */
	stg_reader *r = open_reader(f, f->pack);
	size_t big;
	assert_int_equal(stg_reader_find(r, "big", 3, &big), 0);
	stg_entry e;
	stg_reader_file(r, big, &e);
	size_t k = stg__frame_of(&p->t, e.data_offset + e.size / 2);
	const stg_frame *fr = &p->t.frames[k];
	stg_reader_close(r);
	ut_flip(f->pack, (off_t)(fr->comp_off + fr->comp_size / 2), 0x20);
	r = open_reader(f, f->pack);
	uint8_t *buf = ut_malloc(e.size);
	assert_int_equal(stg_reader_read(r, big, buf), EIO);
	char why[256];
	stg_reader_why(r, big, EIO, why, sizeof why);
	char want[64];
	snprintf(want, sizeof want, "frame %zu,", k);
	assert_non_null(strstr(why, want));
	assert_non_null(strstr(why, "XXH3-128"));
	/* its bytes in other frames still read; the damaged frame's never */
	size_t n;
	assert_int_equal(stg_reader_pread(r, big, buf, 100, 0, &n), 0);
	assert_int_equal(n, 100);
	assert_int_equal(stg_reader_pread(r, big, buf, 100, fr->raw_off + 10 - e.data_offset, &n),
	                 EIO);
	/* every file that has no byte in that frame reads */
	int fine = 0;
	for (size_t i = 0; i < stg_reader_count(r); i++) {
		stg_reader_file(r, i, &e);
		bool in = e.data_offset < fr->raw_off + fr->raw_size &&
		          e.data_offset + e.size > fr->raw_off;
		uint8_t *b = ut_malloc(e.size + 1);
		int rc = stg_reader_read(r, i, b);
		assert_int_equal(rc, in ? EIO : 0);
		fine += !rc;
		free(b);
	}
	assert_true(fine >= 40);
	free(buf);
	stg_reader_close(r);
	stg_pack_close(p);
}

/* A pack rewritten in place under an open reader: stale, not damaged. */
static void test_changed(void **state)
{
	ut_fx *f = *state;
	stg_reader *r = open_reader(f, f->pack);
	size_t big;
	assert_int_equal(stg_reader_find(r, "big", 3, &big), 0);
	stg_entry e;
	stg_reader_file(r, big, &e);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &p), STG_OK);
	size_t k = stg__frame_of(&p->t, e.data_offset);
	ut_flip(f->pack, (off_t)(p->t.frames[k].comp_off + 5), 0x01);
	stg_pack_close(p);
	struct timespec ts[2] = {{0, UTIME_OMIT}, {1000, 0}};
	assert_int_equal(utimensat(AT_FDCWD, f->pack, ts, 0), 0);
	uint8_t *buf = ut_malloc(e.size);
	assert_int_equal(stg_reader_read(r, big, buf), ESTALE);
	char why[256];
	stg_reader_why(r, big, ESTALE, why, sizeof why);
	assert_non_null(strstr(why, "changed since it was opened"));
	free(buf);
	stg_reader_close(r);
}

/* A pack cut short in place under an open reader: the files past the cut
 * are stale (the pack changed), not damaged; those before it read as they
 * were. */
static void test_truncated(void **state)
{
	ut_fx *f = *state;
	stg_reader *r = open_reader(f, f->pack);
	struct stat st;
	assert_int_equal(stat(f->pack, &st), 0);
	uint64_t cut = (uint64_t)st.st_size / 3;
	assert_int_equal(truncate(f->pack, (off_t)cut), 0);
	const stg_trailer *t = &stg_reader_pack(r)->t;
	int stale = 0, fine = 0;
	for (size_t i = 0; i < stg_reader_count(r); i++) {
		stg_entry e;
		stg_reader_file(r, i, &e);
		size_t len;
		uint8_t *want = slurp(f->src, e.path, &len);
		uint8_t *got = ut_malloc(len + 1);
		int rc = stg_reader_read(r, i, got);
		size_t last = stg__frame_of(t, e.data_offset + (e.size ? e.size - 1 : 0));
		if (rc) {
			assert_int_equal(rc, ESTALE);
			assert_true(t->frames[last].comp_off + t->frames[last].comp_size > cut);
			char why[256];
			assert_int_equal(stg_reader_why(r, i, rc, why, sizeof why), ESTALE);
			assert_non_null(strstr(why, "changed since it was opened"));
			stale++;
		} else {
			assert_memory_equal(got, want, len);
			fine++;
		}
		free(got);
		free(want);
	}
	assert_true(stale >= 10);
	assert_true(fine >= 3);
	/* an EIO of this pack is said to be its change, not damage */
	char why[256];
	assert_int_equal(stg_reader_why(r, 0, EIO, why, sizeof why), ESTALE);
	stg_reader_close(r);
}

/* In a forked child, stg_reader_fork: every file read through the parent's
 * manifest with a cache of the child's own; refused once the path names
 * another file. */
static void test_fork(void **state)
{
	ut_fx *f = *state;
	stg_reader *parent = open_reader(f, f->pack);
	stg_entry e0;
	stg_reader_file(parent, 0, &e0);
	uint8_t *b = ut_malloc(e0.size + 1);
	assert_int_equal(stg_reader_read(parent, 0, b), 0); /* (its threads may be busy) */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		stg_reader *r;
		int bad = stg_reader_fork(f->ctx, parent, f->pack, NULL, &r) != STG_OK;
		for (size_t i = 0; !bad && i < stg_reader_count(r); i++) {
			stg_entry e;
			stg_reader_file(r, i, &e);
			size_t len;
			uint8_t *want = slurp(f->src, e.path, &len);
			uint8_t *got = ut_malloc(len + 1);
			bad = stg_reader_read(r, i, got) || memcmp(got, want, len);
			free(got);
			free(want);
		}
		stg_reader_stats st;
		if (!bad) {
			stg_reader_get_stats(r, &st);
			bad = st.frames_fetched == 0; /* its own cache, from empty */
			stg_reader_close(r);
		}
		free(b);
		_exit(bad);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the parent's reader still reads */
	assert_int_equal(stg_reader_read(parent, 0, b), 0);
	/* another file at the path: refused, said */
	char *other = ut_join(f->dir, "other.tar.zst");
	ut_pack(f->ctx, f->src, other, NULL);
	assert_int_equal(rename(other, f->pack), 0);
	stg_reader *r = (stg_reader *)1;
	assert_int_equal(stg_reader_fork(f->ctx, parent, f->pack, NULL, &r), STG_ECORRUPT);
	assert_null(r);
	assert_non_null(strstr(stg_errmsg(f->ctx), "changed since it was opened"));
	free(other);
	free(b);
	stg_reader_close(parent);
}

typedef struct reader_arg {
	stg_reader *r;
	const char *src;
	int seed, bad;
} reader_arg;

static void *reader_thread(void *arg)
{
	reader_arg *a = arg;
	size_t n = stg_reader_count(a->r);
	for (int round = 0; round < 200; round++) {
		size_t i = (size_t)(a->seed * 7 + round * 13) % n;
		stg_entry e;
		stg_reader_file(a->r, i, &e);
		size_t len;
		uint8_t *want = slurp(a->src, e.path, &len);
		uint8_t *got = ut_malloc(len + 1);
		if (stg_reader_read(a->r, i, got) || memcmp(got, want, len))
			a->bad++;
		free(got);
		free(want);
	}
	return NULL;
}

static void test_threads(void **state)
{
	ut_fx *f = *state;
	stg_reader_opts o;
	stg_reader_opts_init(&o);
	o.cache_bytes = 1; /* the least: frames come and go while others read */
	stg_reader *r;
	assert_int_equal(stg_reader_open(f->ctx, f->pack, &o, &r), STG_OK);
	pthread_t th[4];
	reader_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (reader_arg){r, f->src, i, 0};
		pthread_create(&th[i], NULL, reader_thread, &a[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(a[i].bad, 0);
	}
	stg_reader_close(r);
}

static void test_not_a_pack(void **state)
{
	ut_fx *f = *state;
	stg_reader *r = (stg_reader *)1;
	char *p = ut_join(f->src, "big");
	assert_int_equal(stg_reader_open(f->ctx, p, NULL, &r), STG_ECORRUPT);
	assert_null(r);
	assert_non_null(strstr(stg_errmsg(f->ctx), "big"));
	free(p);
	p = ut_join(f->dir, "none");
	assert_int_equal(stg_reader_open(f->ctx, p, NULL, &r), STG_ENOENT);
	free(p);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_every_file), T(test_partial),   T(test_damaged_frame),
        T(test_changed),    T(test_threads),   T(test_not_a_pack),
        T(test_one_frame),  T(test_truncated), T(test_fork),
};

UT_MAIN(tests)
