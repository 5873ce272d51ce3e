/* test_trailer.c - the trailer codec: round trip, and hostile bytes. */
#include "unit.h"
#include "trailer_names.h"

#include <xxhash.h>
#include <zstd.h>

/* A small but complete trailer: 2 frames, 3 entries, 1 delta record. */
static void make_trailer(stg_trailer *t, char *names)
{
	memset(t, 0, sizeof *t);
	static stg_frame frames[2] = {{0, 100, 0, 4096}, {100, 50, 4096, 2048}};
	static stg_rec recs[3];
	static stg_delta_rec deltas[1];
	memset(recs, 0, sizeof recs);
	/* names: "d\0\0" "d/f\0\0" "l\0d/f\0" "old.delta\0" */
	memcpy(names, "d\0\0d/f\0\0l\0d/f\0old.delta\0", 25);
	recs[0] = (stg_rec){.tar_off = 0,
	                    .data_off = 512,
	                    .type = STG_DIR,
	                    .mode = 0755,
	                    .path_off = 0,
	                    .path_len = 1};
	recs[1] = (stg_rec){.tar_off = 512,
	                    .data_off = 1024,
	                    .size = 5,
	                    .type = STG_FILE,
	                    .mode = 0644,
	                    .mtime = 1700000000,
	                    .mtime_nsec = 5,
	                    .path_off = 3,
	                    .path_len = 3};
	memset(recs[1].xxh3, 0xab, 16);
	recs[2] = (stg_rec){.tar_off = 1536,
	                    .data_off = 2048,
	                    .type = STG_SYMLINK,
	                    .mode = 0777,
	                    .path_off = 8,
	                    .path_len = 1,
	                    .link_len = 3};
	memset(deltas[0].base, 0x11, STG_DIGEST_LEN);
	deltas[0].name_off = 14;
	deltas[0].name_len = 9;
	t->frames = frames;
	t->n_frames = 2;
	t->recs = recs;
	t->n_entries = 3;
	t->deltas = deltas;
	t->n_deltas = 1;
	t->names = names;
	t->data_size = 150;
	t->tar_size = 4096 + 2048;
	t->content_size = 5;
	memset(t->digest, 0x42, STG_DIGEST_LEN);
}

/* A fake pack image: data_size zero bytes, then the trailer frame. */
static uint8_t *image(const uint8_t *frame, size_t flen, size_t data_size, size_t *len)
{
	*len = data_size + flen;
	uint8_t *img = calloc(1, *len);
	memcpy(img + data_size, frame, flen);
	return img;
}

/* make_trailer's trailer (in *t, its names in names) encoded into *frame
 * (*flen bytes) and put after 150 zero bytes: the image, *len bytes. */
static uint8_t *encoded(stg_ctx *ctx, stg_trailer *t, char *names, uint8_t **frame, size_t *flen,
                        size_t *len)
{
	make_trailer(t, names);
	assert_int_equal(stg__trailer_encode(ctx, t, 3, frame, flen), STG_OK);
	return image(*frame, *flen, 150, len);
}

static void test_round_trip(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char names[32];
	stg_trailer t, d;
	uint8_t *frame;
	size_t flen, need = 1, len;
	uint8_t *img = encoded(ctx, &t, names, &frame, &flen, &len);
	stg_err err = stg__trailer_decode(ctx, img, len, len, &d, &need);
	if (err)
		assert_int_equal(err, STG_OK);
	assert_int_equal(need, 0);
	assert_int_equal(d.n_frames, 2);
	assert_int_equal(d.n_entries, 3);
	assert_int_equal(d.n_deltas, 1);
	assert_int_equal(d.tar_size, 6144);
	assert_int_equal(d.recs[1].size, 5);
	assert_int_equal(d.recs[1].mtime_nsec, 5);
	/* each directory once: d/f is d's f, its whole path built on demand */
	char buf[STG_PATH_MAX + 1];
	assert_int_equal(d.n_dirs, 2);
	assert_int_equal(d.recs[1].dir, 1);
	assert_string_equal(d.names + d.recs[1].path_off, "f");
	assert_string_equal(stg__trailer_path(&d, &d.recs[1], buf), "d/f");
	assert_string_equal(stg__trailer_link(&d, &d.recs[2]), "d/f");
	assert_string_equal(d.names + d.deltas[0].name_off, "old.delta");
	assert_memory_equal(d.digest, t.digest, STG_DIGEST_LEN);
	assert_int_equal(stg__frame_of(&d, 0), 0);
	assert_int_equal(stg__frame_of(&d, 4095), 0);
	assert_int_equal(stg__frame_of(&d, 4096), 1);
	assert_int_equal(stg__frame_of(&d, 6144), 2);
	stg__trailer_free(&d);

	/* a tail shorter than the trailer asks for more */
	assert_int_equal(stg__trailer_decode(ctx, img + len - 60, 60, len, &d, &need), STG_OK);
	assert_int_equal(need, flen);

	/* the same through the public API */
	stg_pack *p;
	assert_int_equal(stg_pack_open_mem(ctx, img, len, &p), STG_OK);
	assert_int_equal(stg_pack_count(p), 3);
	stg_entry e;
	assert_int_equal(stg_pack_entry(p, 2, &e), 0);
	assert_int_equal(e.type, STG_SYMLINK);
	assert_string_equal(e.link, "d/f");
	assert_int_equal(stg_pack_entry(p, 3, &e), -1);
	stg_pack_close(p);
	free(img);
	free(frame);
	stg_ctx_free(ctx);
}

/* Every single-byte change and every truncation of a trailer is either
 * refused or decodes to something the checks accept; never a crash (run
 * under ASan by `make asan`). */
static void test_mutations(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	char names[32];
	stg_trailer t, d;
	uint8_t *frame;
	size_t flen, need, len;
	uint8_t *img = encoded(ctx, &t, names, &frame, &flen, &len);
	size_t accepted = 0;
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit += 3) {
			img[i] ^= (uint8_t)(1u << bit);
			stg_err err = stg__trailer_decode(ctx, img, len, len, &d, &need);
			if (err == STG_OK && !need) {
				accepted++;
				stg__trailer_free(&d);
			} else if (err) {
				assert_int_equal(err, STG_ECORRUPT);
				assert_true(strlen(stg_errmsg(ctx)) > 0);
			}
			img[i] ^= (uint8_t)(1u << bit);
		}
	}
	/* only the zero data bytes before the trailer are not covered */
	assert_true(accepted <= 150 * 3);
	for (size_t cut = 0; cut < len; cut++) {
		stg_err err = stg__trailer_decode(ctx, img, cut, cut, &d, &need);
		assert_int_not_equal(err, STG_OK);
	}
	free(img);
	free(frame);
	stg_ctx_free(ctx);
}

/* Wrap an arbitrary body as a well-formed trailer frame, so the body's own
 * checks are what is tested. */
static uint8_t *wrap(const uint8_t *body, size_t raw, uint64_t data_size, size_t *len)
{
	size_t bound = ZSTD_compressBound(raw);
	*len = data_size + 8 + bound + STG_FOOTER_SIZE;
	uint8_t *img = calloc(1, *len);
	uint8_t *h = img + data_size;
	size_t clen = ZSTD_compress(h + 8, bound, body, raw, 1);
	assert_false(ZSTD_isError(clen));
	stg__put32(h, STG_SKIP_MAGIC);
	stg__put32(h + 4, (uint32_t)(clen + STG_FOOTER_SIZE));
	uint8_t *f = h + 8 + clen;
	stg__put64(f, data_size);
	stg__put64(f + 8, clen);
	stg__put64(f + 16, raw);
	stg__put64(f + 24, XXH3_64bits(h + 8, clen));
	stg__put32(f + 32, STG_FORMAT_VERSION);
	stg__put32(f + 36, 0);
	memcpy(f + 40, STG_FOOTER_MAGIC, 8);
	*len = data_size + 8 + clen + STG_FOOTER_SIZE;
	return img;
}

static void test_hostile_counts(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	uint8_t body[STG_BODY_HEADER_SIZE + STG_FRAME_REC_SIZE] = {0};
	memcpy(body, STG_BODY_MAGIC, 4);
	stg__put32(body + 4, STG_FORMAT_VERSION);
	stg_trailer d;
	size_t need, len;
	uint64_t counts[][3] = {
	        {UINT64_MAX, 0, 0},          {1, UINT64_MAX, 0},        {1, 0, UINT64_MAX},
	        {1ull << 60, 1ull << 60, 0}, {0, 0, 0} /* no frames */, {2, 0, 0},
	};
	for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
		stg__put64(body + 8, counts[i][0]);
		stg__put64(body + 16, counts[i][1]);
		stg__put64(body + 24, counts[i][2]);
		uint8_t *img = wrap(body, sizeof body, 10, &len);
		assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
		free(img);
	}
	/* a frame larger than a reader accepts */
	stg__put64(body + 8, 1);
	stg__put64(body + 16, 0);
	stg__put64(body + 24, 0);
	stg__put64(body + 40, (uint64_t)STG_FRAME_RAW_MAX + 1);
	uint8_t *f = body + STG_BODY_HEADER_SIZE;
	stg__put64(f + 8, 10);
	stg__put64(f + 24, (uint64_t)STG_FRAME_RAW_MAX + 1);
	uint8_t *img = wrap(body, sizeof body, 10, &len);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(ctx), "frame"));
	free(img);
	/* and the same frame at an acceptable size decodes */
	stg__put64(body + 40, 4096);
	stg__put64(f + 24, 4096);
	img = wrap(body, sizeof body, 10, &len);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_OK);
	stg__trailer_free(&d);
	free(img);
	/* a footer declaring a huge body is refused before any allocation */
	img = wrap(body, sizeof body, 10, &len);
	stg__put64(img + len - STG_FOOTER_SIZE + 16, UINT64_MAX / 2);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	free(img);
	stg_ctx_free(ctx);
}

/* A trailer whose header declares n entries and names_size bytes of names
 * (and whose footer the matching body size), though its body holds the
 * header and one frame record only: a reader that allocated as declared
 * would be told so only once it had read that far. */
static uint8_t *declaring(uint64_t n, uint64_t names_size, uint64_t data_size, size_t *len)
{
	uint8_t body[STG_BODY_HEADER_SIZE + STG_FRAME_REC_SIZE] = {0};
	memcpy(body, STG_BODY_MAGIC, 4);
	stg__put32(body + 4, STG_FORMAT_VERSION);
	stg__put64(body + 8, 1);
	stg__put64(body + 16, n);
	stg__put64(body + 32, names_size);
	uint8_t *img = wrap(body, sizeof body, data_size, len);
	stg__put64(img + *len - STG_FOOTER_SIZE + 16,
	           sizeof body + n * STG_ENTRY_REC_SIZE + names_size);
	return img;
}

static void test_manifest_memory_bound(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	stg_trailer d;
	size_t need, len;
	/* 100,000 paths of 4,000 bytes (400 MB) in a pack of a few hundred
	 * bytes: refused from its header, naming the figures */
	uint8_t *img = declaring(100000, 400000000, 10, &len);
	assert_true(len < 1024);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	const char *m = stg_errmsg(ctx);
	assert_non_null(strstr(m, "would need 389 MiB of memory"));
	assert_non_null(strstr(m, "100000 entries, 381 MiB of names"));
	assert_non_null(strstr(m, "at most 256 MiB"));
	free(img);
	/* the same through stg_pack_open_mem */
	img = declaring(100000, 400000000, 10, &len);
	stg_pack *p = NULL;
	assert_int_equal(stg_pack_open_mem(ctx, img, len, &p), STG_ECORRUPT);
	assert_null(p);
	assert_non_null(strstr(stg_errmsg(ctx), "would need"));
	free(img);
	/* in a pack of 16 MiB (up to 1 GiB) the same manifest is not
	 * refused for its size: it fails later, at its frame table */
	img = declaring(100000, 400000000, 16 << 20, &len);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	assert_null(strstr(stg_errmsg(ctx), "would need"));
	assert_non_null(strstr(stg_errmsg(ctx), "frame table"));
	free(img);
	/* nor is one just under 256 MiB in a small pack */
	uint64_t under = STG_MANIFEST_MEM_FLOOR - stg__trailer_mem(1, 1000, 0, 0);
	img = declaring(1000, under, 10, &len);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	assert_null(strstr(stg_errmsg(ctx), "would need"));
	free(img);
	img = declaring(1000, under + 1, 10, &len);
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &d, &need), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(ctx), "would need"));
	free(img);

	/* nor does a writer make such a pack: 70,000 names of 4,000 bytes
	 * (280 MB) after 1 MiB of data are refused, 1,000 are not */
	static char name[4000];
	memset(name, 'n', sizeof name);
	stg_rec *recs = calloc(70000, sizeof *recs);
	assert_non_null(recs);
	for (size_t i = 0; i < 70000; i++)
		recs[i] = (stg_rec){.type = STG_FILE, .mode = 0644, .path_len = sizeof name};
	stg_frame fr = {0, 1 << 20, 0, 1 << 20};
	stg_trailer t = {.frames = &fr,
	                 .n_frames = 1,
	                 .recs = recs,
	                 .n_entries = 70000,
	                 .names = name,
	                 .data_size = 1 << 20};
	uint8_t *frame = NULL;
	size_t flen;
	assert_int_equal(stg__trailer_encode(ctx, &t, 1, &frame, &flen), STG_ENOTSUP);
	assert_null(frame);
	assert_non_null(strstr(stg_errmsg(ctx), "would need 273 MiB of memory to read (70000 "
	                                        "entries, 267 MiB of names)"));
	assert_non_null(strstr(stg_errmsg(ctx), "readers would refuse it"));
	t.n_entries = 1000;
	assert_int_equal(stg__trailer_encode(ctx, &t, 1, &frame, &flen), STG_OK);
	free(frame);
	free(recs);

	/* 10 M empty files with 60-byte paths need about 1.4 GB; their pack
	 * is at least 84 MB (a million of them with 54-byte paths, sequential
	 * names, made 8.4 MB), allowed 5.4 GB */
	uint64_t ten_m = stg__trailer_mem(1, 10000000, 0, 600000000);
	assert_true(ten_m < (uint64_t)1500 << 20);
	assert_true(ten_m <= stg__trailer_mem_max(84000000) / 3);
	/* the limit: 256 MiB, or 64 times the pack's size */
	assert_int_equal(stg__trailer_mem_max(0), STG_MANIFEST_MEM_FLOOR);
	assert_int_equal(stg__trailer_mem_max(1 << 20), STG_MANIFEST_MEM_FLOOR);
	assert_int_equal(stg__trailer_mem_max(100 << 20), (uint64_t)6400 << 20);
	assert_int_equal(stg__trailer_mem_max(UINT64_MAX), UINT64_MAX);
	stg_ctx_free(ctx);
}

static void test_not_a_pack(void **state)
{
	(void)state;
	stg_ctx *ctx = stg_ctx_new();
	stg_pack *p = NULL;
	assert_int_equal(stg_pack_open_mem(ctx, "", 0, &p), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(ctx), "empty"));
	uint8_t junk[4096];
	ut_fill(junk, sizeof junk, 7);
	assert_int_equal(stg_pack_open_mem(ctx, junk, sizeof junk, &p), STG_ECORRUPT);
	assert_null(p);
	stg_pack_close(NULL);
	stg_ctx_free(ctx);
}

/* A writer's trailer of n entries, their paths p[i] (links none) */
static void flat(stg_trailer *t, stg_rec *recs, char *names, const char *const *p, size_t n)
{
	memset(t, 0, sizeof *t);
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(p[i]);
		recs[i] = (stg_rec){.type = STG_FILE, .path_off = used, .path_len = (uint32_t)len};
		memcpy(names + used, p[i], len + 1);
		names[used + len + 1] = '\0';
		used += len + 2;
	}
	t->recs = recs;
	t->n_entries = n;
	t->names = names;
	t->names_len = used;
}

static void free_names(stg_trailer *t)
{
	free(t->names);
	free(t->dirs);
	free(t->dir_slots);
}

static void test_directory_table(void **state)
{
	(void)state;
	static const char *const paths[] = {"top", "a/b/c/f", "a/b/g", "a/x/h", "a/b/c/i", "z/y/j"};
	size_t n = sizeof paths / sizeof *paths;
	stg_rec recs[8];
	char names[256];
	stg_trailer t;
	flat(&t, recs, names, paths, n);
	uint64_t bound = stg__names_dirs_bound(&t);
	assert_int_equal(stg__trailer_index(&t), 0);
	/* each directory once: a, a/b, a/b/c, a/x, z, z/y and the root */
	assert_int_equal(t.n_dirs, 7);
	assert_true(stg__names_dirs_mem(t.n_dirs, t.dir_cap) <= bound);
	char buf[STG_PATH_MAX + 1];
	for (size_t i = 0; i < n; i++)
		assert_string_equal(stg__trailer_path(&t, &t.recs[i], buf), paths[i]);
	assert_int_equal(t.recs[1].dir, t.recs[4].dir);
	assert_int_equal(stg__trailer_dir_find(&t, "a/b", 3), t.dirs[t.recs[1].dir].parent);
	assert_int_equal(stg__trailer_dir_find(&t, "a/q", 3), UINT32_MAX);
	assert_int_equal(stg__trailer_dir_path(&t, t.recs[1].dir, buf), 5);
	assert_string_equal(buf, "a/b/c");
	/* paths to values, keyed by directory and base name */
	stg_recmap m;
	assert_int_equal(stg__recmap_init(&m, &t, 1), 0);
	for (uint32_t i = 0; i < n; i++)
		assert_int_equal(stg__recmap_put(&m, i, 100 + i, NULL), 1);
	uint32_t had = 0;
	assert_int_equal(stg__recmap_put(&m, 2, 7, &had), 0);
	assert_int_equal(had, 102);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(stg__recmap_get(&m, paths[i], strlen(paths[i])), 100 + i);
	static const char *const none[] = {"/top", "a/b/c",    "a//b/g", "a/b/",
	                                   "",     "a/b/c/f/", "b/g"};
	for (size_t i = 0; i < sizeof none / sizeof *none; i++)
		assert_int_equal(stg__recmap_get(&m, none[i], strlen(none[i])), UINT32_MAX);
	stg__recmap_free(&m);
	free_names(&t);

	/* the directories counted as they are made: a path 200 levels deep
	 * passes what the trailer may take at the directory that does */
	char deep[512];
	for (size_t k = 0; k < 200; k++)
		memcpy(deep + 2 * k, "d/", 2);
	memcpy(deep + 400, "f", 2);
	memset(&t, 0, sizeof t);
	stg_rec r = {.type = STG_FILE, .path_len = 401};
	stg_names_in *in = malloc(sizeof *in);
	assert_non_null(in);
	uint64_t most = 100 + 1024 + 64 * 4 + 50 * 12;
	assert_int_equal(stg__names_begin(&t, in, 1024, 100, most), 0);
	assert_int_equal(stg__names_put(&t, in, &r, deep, NULL), -2);
	assert_true(t.n_dirs > 1 && t.n_dirs < 100);
	assert_true(stg__names_mem(&t, in) <= most);
	free_names(&t);
	memset(&t, 0, sizeof t);
	assert_int_equal(stg__names_begin(&t, in, 1024, 100, UINT64_MAX), 0);
	assert_int_equal(stg__names_put(&t, in, &r, deep, NULL), 0);
	assert_int_equal(t.n_dirs, 201);
	assert_string_equal(stg__trailer_path(&t, &r, buf), deep);
	free(in);
	free_names(&t);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_hostile_counts),
        cmocka_unit_test(test_not_a_pack),
        cmocka_unit_test(test_manifest_memory_bound),
        cmocka_unit_test(test_directory_table),
};

UT_MAIN(tests)
