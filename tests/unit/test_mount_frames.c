/* test_mount_frames.c - a mounted pack's frames on demand (mount_frames.c),
 * fetched from a real pack by this test's fetch function: each frame
 * decoded to the bytes zstd gives, fetched once and then served from the
 * cache; the cache's bound (least recently used out, held frames never);
 * a damaged frame (format 3: its XXH3-128) is EIO for good, told once, not
 * fetched again, while the others still read; a frame that could not be
 * read is tried again by the next read, and the fetch's own error (ESTALE)
 * comes back as it is; single flight; read-ahead; older packs: a frame
 * without zstd's checksum refused, a damaged one refused by decoding;
 * a frame decoded only as far as reads need, also by threads at once, and
 * a frame whose zstd blocks are damaged past the part read. */
#include "unit.h"
#include "mount_frames.h"

#include <errno.h>
#include <stdatomic.h>
#include <xxhash.h>
#include <zstd.h>

#define MAXF 256

typedef struct fx {
	UT_FX;
	stg_pack *p;
	int fd;
	atomic_uint fetches[MAXF];
	size_t damage;    /* a frame whose fetched bytes get a flipped byte (MAXF: none) */
	size_t fail;      /* a frame whose fetch fails ... */
	int fail_times;   /* ... this many times ... */
	int fail_errno;   /* ... with this */
	size_t slow;      /* a frame fetched slowly (MAXF: none) */
	bool no_checksum; /* fetched frames lose zstd's checksum flag */
	int bad_calls;    /* the bad callback */
	size_t bad_k;
	char bad_why[256];
	pthread_mutex_t bad_mu;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	char *text = ut_malloc(600 * 1024);
	for (size_t i = 0; i < 600 * 1024; i++)
		text[i] = "frames of text, line by line\n"[i % 29];
	ut_write(f->src, "text", text, 600 * 1024);
	free(text);
	ut_fill_file(f->src, "random", 300 * 1024, 4);
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, NULL); /* 64 KiB frames */
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &f->p), STG_OK);
	assert_true(f->p->t.n_frames >= 12 && f->p->t.n_frames < MAXF);
	assert_true(f->p->t.version >= 3);
	f->fd = open(f->pack, O_RDONLY);
	f->damage = f->fail = f->slow = MAXF;
	pthread_mutex_init(&f->bad_mu, NULL);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	stg_pack_close(f->p);
	close(f->fd);
	pthread_mutex_destroy(&f->bad_mu);
	return ut_teardown(state);
}

static int fetch(void *arg, size_t k, uint8_t *buf, size_t len)
{
	fx *f = arg;
	f->fetches[k]++;
	if (k == f->fail && f->fail_times > 0) {
		f->fail_times--;
		return f->fail_errno;
	}
	if (k == f->slow) {
		struct timespec ts = {0, 200 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	const stg_frame *fr = &f->p->t.frames[k];
	assert_int_equal(len, fr->comp_size);
	if (stg__pread_full(f->fd, buf, len, fr->comp_off))
		return errno ? errno : EIO;
	if (k == f->damage)
		buf[len / 2] ^= 0x10;
	if (f->no_checksum)
		buf[4] &= (uint8_t)~0x04; /* the frame header's Content_Checksum_flag */
	return 0;
}

static void bad(void *arg, size_t k, const char *why)
{
	fx *f = arg;
	pthread_mutex_lock(&f->bad_mu);
	f->bad_calls++;
	f->bad_k = k;
	snprintf(f->bad_why, sizeof f->bad_why, "%s", why);
	pthread_mutex_unlock(&f->bad_mu);
}

static stg_frames *frames_with(fx *f, const stg_trailer *t, size_t max_bytes, unsigned pre)
{
	stg_frames_opts o = {.max_bytes = max_bytes,
	                     .prefetchers = pre,
	                     .fetch = fetch,
	                     .fetch_arg = f,
	                     .bad = bad,
	                     .bad_arg = f};
	stg_frames *fr;
	assert_int_equal(stg__frames_new(f->ctx, t, &o, &fr), STG_OK);
	return fr;
}

/* Frame k got through the cache is what zstd makes of the pack's bytes. */
static void check_frame(fx *f, stg_frames *fr, size_t k)
{
	const uint8_t *data;
	stg_fbuf *held;
	int rc = stg__frames_get(fr, k, 0, &data, &held);
	if (rc)
		fail_msg("frame %zu: %s", k, strerror(rc));
	const stg_frame *fm = &f->p->t.frames[k];
	uint8_t *comp = ut_malloc(fm->comp_size), *raw = ut_malloc(fm->raw_size + 1);
	assert_int_equal(stg__pread_full(f->fd, comp, fm->comp_size, fm->comp_off), 0);
	assert_int_equal(ZSTD_decompress(raw, fm->raw_size + 1, comp, fm->comp_size), fm->raw_size);
	assert_memory_equal(data, raw, fm->raw_size);
	free(comp);
	free(raw);
	stg__frames_put(fr, held);
}

static void counts(stg_frames *fr, uint64_t *fetched, uint64_t *hits)
{
	uint64_t bytes;
	stg__frames_counts(fr, fetched, hits, &bytes);
}

static void test_cached(void **state)
{
	fx *f = *state;
	stg_frames *fr = frames_with(f, &f->p->t, 64 << 20, 0);
	size_t n = f->p->t.n_frames;
	for (size_t k = 0; k < n; k++)
		check_frame(f, fr, k);
	for (size_t k = 0; k < n; k++)
		check_frame(f, fr, k);
	uint64_t fetched, hits, bytes;
	stg__frames_counts(fr, &fetched, &hits, &bytes);
	assert_int_equal(fetched, n);
	assert_int_equal(hits, n);
	assert_int_equal(bytes, f->p->t.data_size);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(f->fetches[k], 1);
	/* past the last frame */
	const uint8_t *d;
	stg_fbuf *h;
	assert_int_equal(stg__frames_get(fr, n, 0, &d, &h), EIO);
	stg__frames_put(fr, NULL); /* nothing held: nothing */
	stg__frames_free(fr);
	stg__frames_free(NULL);
}

/* A bound of three frames: the least recently used go; held ones stay. */
static void test_bound(void **state)
{
	fx *f = *state;
	size_t fs = 64 * 1024, n = f->p->t.n_frames;
	/* under two frames' worth: raised to two of the largest */
	stg_frames *fr = frames_with(f, &f->p->t, 3 * fs + fs / 2, 0);
	for (size_t k = 0; k < 6; k++)
		check_frame(f, fr, k);
	/* 3, 4, 5 cached; 0 gone */
	check_frame(f, fr, 5);
	check_frame(f, fr, 4);
	check_frame(f, fr, 3);
	assert_int_equal(f->fetches[3] + f->fetches[4] + f->fetches[5], 3);
	check_frame(f, fr, 0);
	assert_int_equal(f->fetches[0], 2);
	/* 0 was fetched: 5, the least recently used, went */
	check_frame(f, fr, 3);
	check_frame(f, fr, 5);
	assert_int_equal(f->fetches[3], 1);
	assert_int_equal(f->fetches[5], 2);
	/* held frames are never evicted: eight at once, past the bound */
	const uint8_t *data[8];
	stg_fbuf *held[8];
	for (size_t k = 0; k < 8; k++)
		assert_int_equal(stg__frames_get(fr, n - 1 - k, 0, &data[k], &held[k]), 0);
	for (size_t k = 0; k < 8; k++) {
		const uint8_t *again;
		stg_fbuf *h;
		assert_int_equal(stg__frames_get(fr, n - 1 - k, 0, &again, &h), 0);
		assert_ptr_equal(again, data[k]); /* the same buffer: still cached */
		stg__frames_put(fr, h);
	}
	for (size_t k = 0; k < 8; k++)
		stg__frames_put(fr, held[k]);
	/* once put, the cache shrinks to its bound: the last three put stay */
	uint64_t fetched0, hits0, fetched1, hits1;
	counts(fr, &fetched0, &hits0);
	for (size_t k = 5; k < 8; k++)
		check_frame(f, fr, n - 1 - k);
	counts(fr, &fetched1, &hits1);
	assert_int_equal(fetched1, fetched0);
	check_frame(f, fr, n - 1);
	counts(fr, &fetched1, &hits1);
	assert_int_equal(fetched1, fetched0 + 1);
	stg__frames_free(fr);
}

static void test_damaged(void **state)
{
	fx *f = *state;
	f->damage = 2;
	stg_frames *fr = frames_with(f, &f->p->t, 64 << 20, 0);
	const uint8_t *d;
	stg_fbuf *h;
	assert_int_equal(stg__frames_get(fr, 2, 0, &d, &h), EIO);
	assert_int_equal(f->bad_calls, 1);
	assert_int_equal(f->bad_k, 2);
	assert_string_equal(f->bad_why, "its bytes do not match the frame table's XXH3-128");
	/* for good: not fetched again, not told again */
	assert_int_equal(stg__frames_get(fr, 2, 0, &d, &h), EIO);
	assert_int_equal(f->fetches[2], 1);
	assert_int_equal(f->bad_calls, 1);
	/* the rest reads */
	check_frame(f, fr, 1);
	check_frame(f, fr, 3);
	/* nor fetched ahead */
	stg__frames_prefetch(fr, 2, 1);
	assert_int_equal(f->fetches[2], 1);
	stg__frames_free(fr);
}

/* A fetch that fails is not damage: the next read tries again. */
static void test_unreadable(void **state)
{
	fx *f = *state;
	stg_frames *fr = frames_with(f, &f->p->t, 64 << 20, 0);
	const uint8_t *d;
	stg_fbuf *h;
	f->fail = 1;
	f->fail_times = 2;
	f->fail_errno = EIO;
	assert_int_equal(stg__frames_get(fr, 1, 0, &d, &h), EIO);
	assert_int_equal(f->bad_calls, 1);
	assert_string_equal(f->bad_why, strerror(EIO));
	f->fail_errno = ESTALE; /* the pack changed: said as it is */
	assert_int_equal(stg__frames_get(fr, 1, 0, &d, &h), ESTALE);
	check_frame(f, fr, 1);
	assert_int_equal(f->fetches[1], 3);
	stg__frames_free(fr);
}

typedef struct getter {
	stg_frames *fr;
	size_t k;
	int rc;
	const uint8_t *data;
} getter;

static void *get_thread(void *arg)
{
	getter *g = arg;
	stg_fbuf *h;
	g->rc = stg__frames_get(g->fr, g->k, 0, &g->data, &h);
	if (!g->rc)
		stg__frames_put(g->fr, h);
	return NULL;
}

/* Four readers of a frame being fetched: one fetch. */
static void test_single_flight(void **state)
{
	fx *f = *state;
	f->slow = 3;
	stg_frames *fr = frames_with(f, &f->p->t, 64 << 20, 0);
	getter g[4];
	pthread_t th[4];
	for (int i = 0; i < 4; i++) {
		g[i] = (getter){.fr = fr, .k = 3};
		assert_int_equal(pthread_create(&th[i], NULL, get_thread, &g[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(g[i].rc, 0);
		assert_ptr_equal(g[i].data, g[0].data);
	}
	assert_int_equal(f->fetches[3], 1);
	uint64_t fetched, hits;
	counts(fr, &fetched, &hits);
	assert_int_equal(fetched, 1);
	assert_int_equal(hits, 3);
	stg__frames_free(fr);
}

static void test_prefetch(void **state)
{
	fx *f = *state;
	size_t n = f->p->t.n_frames;
	stg_frames *fr = frames_with(f, &f->p->t, 64 << 20, 2);
	stg__frames_prefetch(fr, n - 4, 10); /* past the end: up to it */
	uint64_t fetched = 0, hits;
	for (int i = 0; i < 200 && fetched < 4; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		counts(fr, &fetched, &hits);
	}
	assert_int_equal(fetched, 4);
	for (size_t k = n - 4; k < n; k++)
		check_frame(f, fr, k);
	counts(fr, &fetched, &hits);
	assert_int_equal(fetched, 4);
	assert_int_equal(hits, 4);
	for (size_t k = 0; k < n - 4; k++)
		assert_int_equal(f->fetches[k], 0);
	stg__frames_free(fr);
}

/* Packs before format 3: zstd's checksum is the check. */
static void test_older_format(void **state)
{
	fx *f = *state;
	stg_trailer t = f->p->t;
	t.version = 2;
	stg_frames *fr = frames_with(f, &t, 64 << 20, 0);
	check_frame(f, fr, 0);
	f->damage = 1;
	const uint8_t *d;
	stg_fbuf *h;
	assert_int_equal(stg__frames_get(fr, 1, 0, &d, &h), EIO);
	assert_int_equal(f->bad_calls, 1);
	assert_int_equal(f->bad_k, 1);
	f->damage = MAXF;
	assert_int_equal(stg__frames_get(fr, 1, 0, &d, &h), EIO); /* for good */
	f->no_checksum = true;
	assert_int_equal(stg__frames_get(fr, 2, 0, &d, &h), EIO);
	assert_string_equal(f->bad_why, "it has no zstd content checksum");
	assert_int_equal(f->bad_calls, 2);
	stg__frames_free(fr);
}

/* Readers of one 1 MiB frame (8 zstd blocks) at once, each wanting its
 * own prefix. */
typedef struct part_arg {
	stg_frames *fr;
	size_t need;
	const uint8_t *want;
	int rc;
} part_arg;

static void *part_reader(void *arg)
{
	part_arg *a = arg;
	const uint8_t *d;
	stg_fbuf *h;
	a->rc = stg__frames_get(a->fr, 0, a->need, &d, &h);
	if (!a->rc) {
		a->rc = memcmp(d, a->want, a->need) ? -1 : 0;
		stg__frames_put(a->fr, h);
	}
	return NULL;
}

static void test_partial(void **state)
{
	fx *f = *state;
	/* a pack of 1 MiB frames: text that compresses, in blocks of 128 KiB */
	char *src = ut_join(f->dir, "big"), *pack = ut_join(f->dir, "big.tar.zst");
	mkdir(src, 0755);
	size_t len = 3 << 20;
	uint8_t *text = ut_malloc(len);
	for (size_t i = 0; i < len; i++)
		text[i] = (uint8_t)("0123456789abcdef"[(i * 7 + i / 4096) % 16]);
	ut_write(src, "t", text, len);
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	o.frame_size = 1 << 20;
	assert_int_equal(stg_pack_dir(f->ctx, src, pack, &o, NULL), STG_OK);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, pack, &p), STG_OK);
	stg_pack_close(f->p);
	f->p = p;
	close(f->fd);
	f->fd = open(pack, O_RDWR);
	const stg_frame *f0 = &p->t.frames[0];
	assert_true(f0->raw_size >= (1 << 20));
	uint8_t *raw = ut_malloc(f0->raw_size), *comp = ut_malloc(f0->comp_size);
	assert_int_equal(stg__pread_full(f->fd, comp, f0->comp_size, f0->comp_off), 0);
	assert_int_equal(ZSTD_decompress(raw, f0->raw_size, comp, f0->comp_size), f0->raw_size);

	/* 4 KiB at the start: one block decoded, not the frame */
	stg_frames *fr = frames_with(f, &p->t, 64 << 20, 0);
	const uint8_t *d;
	stg_fbuf *h;
	assert_int_equal(stg__frames_get(fr, 0, 4096, &d, &h), 0);
	assert_memory_equal(d, raw, 4096);
	uint64_t dec = stg__frames_decoded(fr);
	assert_true(dec >= 4096 && dec <= (128 << 10));
	stg__frames_put(fr, h);
	/* more of it: decoding goes on from there, still one fetch */
	assert_int_equal(stg__frames_get(fr, 0, 300 << 10, &d, &h), 0);
	assert_memory_equal(d, raw, 300 << 10);
	assert_true(stg__frames_decoded(fr) < (512 << 10));
	stg__frames_put(fr, h);
	assert_int_equal(stg__frames_get(fr, 0, 0, &d, &h), 0);
	assert_memory_equal(d, raw, f0->raw_size);
	assert_int_equal(stg__frames_decoded(fr), f0->raw_size);
	assert_int_equal(f->fetches[0], 1);
	stg__frames_put(fr, h);
	stg__frames_free(fr);

	/* threads wanting prefixes of one frame at once */
	for (int round = 0; round < 20; round++) {
		fr = frames_with(f, &p->t, 64 << 20, 0);
		pthread_t th[4];
		part_arg a[4];
		for (int i = 0; i < 4; i++) {
			a[i] = (part_arg){fr, (size_t)(i + 1) * (f0->raw_size / 4) - (size_t)i * 77,
			                  raw, 1};
			pthread_create(&th[i], NULL, part_reader, &a[i]);
		}
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(a[i].rc, 0);
		}
		assert_int_equal(stg__frames_decoded(fr), f0->raw_size);
		stg__frames_free(fr);
	}

	/* damaged past its first block, with a frame table that agrees (as a pack
	 * written wrong would be): the start reads, the end is EIO for good */
	stg_trailer t = p->t;
	stg_frame *frames = ut_malloc(t.n_frames * sizeof *frames);
	memcpy(frames, t.frames, t.n_frames * sizeof *frames);
	t.frames = frames;
	f->damage = 0; /* fetch flips the byte at comp_size / 2 */
	comp[f0->comp_size / 2] ^= 0x10;
	XXH128_canonical_t hc;
	XXH128_canonicalFromHash(&hc, XXH3_128bits(comp, f0->comp_size));
	memcpy(frames[0].xxh3, hc.digest, 16);
	fr = frames_with(f, &t, 64 << 20, 0);
	int rc = stg__frames_get(fr, 0, 4096, &d, &h);
	assert_int_equal(rc, 0);
	assert_memory_equal(d, raw, 4096);
	stg__frames_put(fr, h);
	assert_int_equal(stg__frames_get(fr, 0, 0, &d, &h), EIO);
	assert_int_equal(f->bad_calls, 1);
	assert_int_equal(stg__frames_get(fr, 0, 4096, &d, &h), EIO);
	assert_int_equal(f->bad_calls, 1);
	/* the next frame reads */
	check_frame(f, fr, 1);
	stg__frames_free(fr);

	/* hostile bytes behind a frame table that agrees: a byte or a run of
	 * bytes changed anywhere, read to a random depth, then whole: the
	 * bytes zstd makes of them, or EIO; never more, never a crash */
	f->damage = MAXF;
	uint8_t *orig = ut_malloc(f0->comp_size);
	assert_int_equal(stg__pread_full(f->fd, orig, f0->comp_size, f0->comp_off), 0);
	uint64_t seed = 0x5eed;
	for (int round = 0; round < 300; round++) {
		memcpy(comp, orig, f0->comp_size);
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		size_t at = (size_t)(seed >> 33) % f0->comp_size;
		size_t run = round % 3 == 0 ? 1 + (size_t)(seed >> 20) % 64 : 1;
		for (size_t j = at; j < at + run && j < f0->comp_size; j++)
			comp[j] ^= (uint8_t)(seed >> 8 | 1);
		XXH128_canonicalFromHash(&hc, XXH3_128bits(comp, f0->comp_size));
		memcpy(frames[0].xxh3, hc.digest, 16);
		/* the fetch reads the pack: put the hostile bytes there */
		assert_int_equal(pwrite(f->fd, comp, f0->comp_size, (off_t)f0->comp_off),
		                 (ssize_t)f0->comp_size);
		fr = frames_with(f, &t, 64 << 20, 0);
		size_t need = (size_t)(seed >> 40) % f0->raw_size + 1;
		int r1 = stg__frames_get(fr, 0, need, &d, &h);
		assert_true(r1 == 0 || r1 == EIO);
		if (!r1)
			stg__frames_put(fr, h);
		int r2 = stg__frames_get(fr, 0, 0, &d, &h);
		assert_true(r2 == 0 || r2 == EIO);
		if (r1)
			assert_int_equal(r2, EIO); /* damaged for good */
		if (!r2) {
			/* whole: zstd's own decoding of these bytes */
			uint8_t *want = ut_malloc(f0->raw_size);
			size_t n = ZSTD_decompress(want, f0->raw_size, comp, f0->comp_size);
			assert_false(ZSTD_isError(n));
			assert_int_equal(n, f0->raw_size);
			assert_memory_equal(d, want, f0->raw_size);
			free(want);
			stg__frames_put(fr, h);
		}
		stg__frames_free(fr);
	}
	assert_int_equal(pwrite(f->fd, orig, f0->comp_size, (off_t)f0->comp_off),
	                 (ssize_t)f0->comp_size);
	free(orig);
	free(frames);
	free(raw);
	free(comp);
	free(text);
	free(src);
	free(pack);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_cached),        T(test_bound),    T(test_damaged),      T(test_unreadable),
        T(test_single_flight), T(test_prefetch), T(test_older_format), T(test_partial),
};

UT_MAIN(tests)
