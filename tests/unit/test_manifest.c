/* test_manifest.c - a cache entry's manifest (manifest.c): written from a
 * pack (regular files only, a selection), escaped paths that survive a
 * round trip, loading with malformed lines refused, the full check
 * (content) and the quick one (names and sizes, no extra file), and the
 * XXH3 of a file. */
#include "unit.h"

#include <errno.h>

typedef struct fx {
	UT_FX;
	stg_pack *p;
	int datafd;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 1);
	f->src = ut_join(f->dir, "src");
	assert_int_equal(mkdir(f->src, 0755), 0);
	ut_mkdir(f->src, "d");
	ut_write(f->src, "d/a", "alpha\n", 6);
	ut_write(f->src, "b", "", 0);
	ut_write(f->src, "back\\slash", "bs", 2);
	ut_write(f->src, "new\nline", "nl", 2);
	ut_write(f->src, "with space", "sp", 2);
	ut_mkdir(f->src, "emptydir");
	ut_symlink(f->src, "link", "d/a");
	ut_hardlink(f->src, "hard", "d/a");
	f->pack = ut_join(f->dir, "p.tar.zst");
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	assert_int_equal(stg_pack_dir(f->ctx, f->src, f->pack, &o, NULL), STG_OK);
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &f->p), STG_OK);
	f->datafd = open(f->src, O_RDONLY | O_DIRECTORY);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	close(f->datafd);
	stg_pack_close(f->p);
	return ut_teardown(state);
}

static char *escaped(const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	stg__put_escaped(m, path);
	fclose(m);
	return buf;
}

/* A line's fields as the manifest's reader expects them, and a full disk
 * (/dev/full) reported by the close, never a short manifest in silence. */
static void test_line_and_full_disk(void **state)
{
	(void)state;
	uint8_t h[16];
	for (int i = 0; i < 16; i++)
		h[i] = (uint8_t)(i * 17);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	stg__manifest_line(m, h, 0, "a\nb");
	stg__manifest_line(m, h, UINT64_MAX, "d/f");
	fclose(m);
	assert_string_equal(buf, "00112233445566778899aabbccddeeff 0 a\\nb\n"
	                         "00112233445566778899aabbccddeeff 18446744073709551615 d/f\n");
	free(buf);
	FILE *full = fopen("/dev/full", "w");
	assert_non_null(full);
	for (int i = 0; i < 1000; i++)
		stg__manifest_line(full, h, (uint64_t)i, "class_000/img_000000.jpg");
	errno = 0;
	assert_int_equal(stg__manifest_close(full), -1);
	assert_int_not_equal(errno, 0);
}

static void test_escape(void **state)
{
	(void)state;
	static const struct {
		const char *raw, *esc;
	} t[] = {
	        {"plain", "plain"},       {"a\\b", "a\\\\b"},       {"a\nb", "a\\nb"},
	        {"\\n", "\\\\n"},         {"\n\n\\", "\\n\\n\\\\"}, {"", ""},
	        {"sp ace\t", "sp ace\t"},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char *e = escaped(t[i].raw);
		assert_string_equal(e, t[i].esc);
		assert_null(strchr(e, '\n'));
		assert_true(stg__unescape(e));
		assert_string_equal(e, t[i].raw);
		free(e);
	}
	static const char *const bad[] = {"a\\", "\\x", "a\\tb", "\\"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char *s = strdup(bad[i]);
		assert_false(stg__unescape(s));
		free(s);
	}
	/* a line */
	uint8_t h[16];
	for (int i = 0; i < 16; i++)
		h[i] = (uint8_t)(0xf0 + i);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	stg__manifest_line(m, h, 1234567890123ull, "d/x\ny");
	fclose(m);
	assert_string_equal(buf, "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff 1234567890123 d/x\\ny\n");
	free(buf);
}

/* The manifest of the pack in f, read back. */
static void load(fx *f, const bool *sel, stg_manifest *m, char **text)
{
	char *e = ut_join(f->dir, "entry");
	mkdir(e, 0755);
	int efd = open(e, O_RDONLY | O_DIRECTORY);
	unlinkat(efd, "manifest", 0);
	assert_int_equal(stg__manifest_write(efd, f->p, sel), 0);
	struct stat st;
	assert_int_equal(fstatat(efd, "manifest", &st, 0), 0);
	assert_int_equal(st.st_mode & 0777, 0400);
	char *mp = ut_join(e, "manifest");
	size_t len;
	*text = (char *)ut_read(mp, &len);
	(*text)[len] = '\0';
	FILE *mf = fopen(mp, "r");
	assert_int_equal(stg__manifest_load(mf, m), 0);
	fclose(mf);
	close(efd);
	free(mp);
	free(e);
}

static void test_write_load(void **state)
{
	fx *f = *state;
	stg_manifest m;
	char *text;
	load(f, NULL, &m, &text);
	/* regular files only, hard links named once (as the hard link's
	 * target), in pack order */
	assert_int_equal(m.n, 5);
	static const char *const want[] = {"b", "back\\slash", "d/a", "new\nline", "with space"};
	for (size_t i = 0; i < m.n; i++) {
		uint32_t k = stg__strmap_get(&m.map, want[i], strlen(want[i]));
		if (k == UINT32_MAX)
			fail_msg("'%s' not in the manifest:\n%s", want[i], text);
		assert_string_equal(m.files[k].path, want[i]);
	}
	uint32_t k = stg__strmap_get(&m.map, "d/a", 3);
	assert_int_equal(m.files[k].size, 6);
	XXH128_canonical_t c;
	XXH128_canonicalFromHash(&c, XXH3_128bits("alpha\n", 6));
	assert_memory_equal(m.files[k].xxh3, c.digest, 16);
	assert_int_equal(stg__strmap_get(&m.map, "link", 4), UINT32_MAX);
	assert_int_equal(stg__strmap_get(&m.map, "hard", 4), UINT32_MAX);
	assert_int_equal(stg__strmap_get(&m.map, "emptydir", 8), UINT32_MAX);
	/* one line per file, the newline escaped */
	size_t lines = 0;
	for (char *p = text; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 5);
	assert_non_null(strstr(text, " 2 new\\nline\n"));
	assert_non_null(strstr(text, " 2 back\\\\slash\n"));
	free(text);
	stg__manifest_free(&m);
	assert_int_equal(m.n, 0);
	/* a selection */
	size_t n = stg_pack_count(f->p);
	bool *sel = calloc(n, sizeof *sel);
	for (size_t i = 0; i < n; i++) {
		stg_entry e;
		stg_pack_entry(f->p, i, &e);
		sel[i] = !strcmp(e.path, "d/a") || !strcmp(e.path, "link");
	}
	load(f, sel, &m, &text);
	assert_int_equal(m.n, 1);
	assert_string_equal(m.files[0].path, "d/a");
	free(text);
	stg__manifest_free(&m);
	free(sel);
}

static int load_text(const char *text, stg_manifest *m)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc = stg__manifest_load(f, m);
	fclose(f);
	return rc;
}

static void test_load_malformed(void **state)
{
	(void)state;
	stg_manifest m;
	assert_int_equal(load_text("", &m), 0);
	assert_int_equal(m.n, 0);
	stg__manifest_free(&m);
	assert_int_equal(load_text("00112233445566778899aabbccddeeff 5 a b\n"
	                           "00112233445566778899AABBCCDDEEFF 0 c",
	                           &m),
	                 0);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.files[0].path, "a b");
	assert_int_equal(m.files[1].xxh3[15], 0xff);
	stg__manifest_free(&m);
	static const char *const bad[] = {
	        "0011 5 a\n",
	        "00112233445566778899aabbccddeefg 5 a\n",
	        "00112233445566778899aabbccddeeff 5\n",
	        "00112233445566778899aabbccddeeff x a\n",
	        "00112233445566778899aabbccddeeff  a\n",
	        "00112233445566778899aabbccddeeff 99999999999999999999999 a\n",
	        "00112233445566778899aabbccddeeff 5 ../etc/passwd\n",
	        "00112233445566778899aabbccddeeff 5 /etc/passwd\n",
	        "00112233445566778899aabbccddeeff 5 a/./b\n",
	        "00112233445566778899aabbccddeeff 5 a//b\n",
	        "00112233445566778899aabbccddeeff 5 a\\q\n",
	        "00112233445566778899aabbccddeeff 5 \n",
	        "ok\n",
	        /* one bad line among good ones */
	        "00112233445566778899aabbccddeeff 5 a\n00112233445566778899aabbccddeeff 5 ..\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		memset(&m, 0x55, sizeof m);
		errno = 0;
		if (load_text(bad[i], &m) != -1)
			fail_msg("accepted: '%s'", bad[i]);
		assert_int_equal(errno, EINVAL);
		/* nothing left to free */
		assert_int_equal(m.n, 0);
		assert_null(m.files);
	}
}

static int check(fx *f, const char *text, bool quick)
{
	FILE *mf = fmemopen((void *)text, strlen(text), "r");
	int rc = quick ? stg__manifest_quick(f->ctx, mf, f->datafd)
	               : stg__manifest_check(f->ctx, mf, f->datafd);
	fclose(mf);
	return rc;
}

static void test_check(void **state)
{
	fx *f = *state;
	stg_manifest m;
	char *text;
	load(f, NULL, &m, &text);
	stg__manifest_free(&m);
	/* the tree it was made from */
	assert_int_equal(check(f, text, false), 0);
	assert_int_equal(check(f, text, true), 0);
	/* a byte changed, same size: only the full check sees it */
	ut_write(f->src, "d/a", "alphA\n", 6);
	assert_int_equal(check(f, text, true), 0);
	assert_int_equal(check(f, text, false), 1);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "'d/a' does not match its manifest (6 bytes, expected 6)");
	/* another size: both */
	ut_write(f->src, "d/a", "alpha!\n", 7);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "'d/a' has 7 bytes, its manifest says 6");
	assert_int_equal(check(f, text, false), 1);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "'d/a' does not match its manifest (7 bytes, expected 6)");
	ut_write(f->src, "d/a", "alpha\n", 6);
	/* the hard link "hard" is counted through d/a's link count; once
	 * it is a file of its own, the tree holds one more file than the
	 * manifest names */
	assert_int_equal(check(f, text, true), 0);
	assert_int_equal(unlinkat(f->datafd, "hard", 0), 0);
	ut_write(f->src, "hard", "alpha\n", 6);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "it holds 1 file more than its manifest names");
	assert_int_equal(unlinkat(f->datafd, "hard", 0), 0);
	assert_int_equal(check(f, text, true), 0);
	/* extra files, deep down too */
	ut_write(f->src, "d/extra", "x", 1);
	ut_write(f->src, "emptydir/extra2", "x", 1);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "it holds 2 files more than its manifest names");
	/* the full check looks only at what the manifest names */
	assert_int_equal(check(f, text, false), 0);
	unlinkat(f->datafd, "d/extra", 0);
	unlinkat(f->datafd, "emptydir/extra2", 0);
	/* missing */
	assert_int_equal(unlinkat(f->datafd, "with space", 0), 0);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "'with space' is missing");
	assert_int_equal(check(f, text, false), 1);
	assert_non_null(strstr(stg_errmsg(f->ctx), "'with space' is missing or unreadable"));
	/* a link where a file was: never followed */
	assert_int_equal(symlinkat("b", f->datafd, "with space"), 0);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "'with space' is no longer a file");
	assert_int_equal(check(f, text, false), 1);
	assert_non_null(strstr(stg_errmsg(f->ctx), "'with space' is missing or unreadable"));
	unlinkat(f->datafd, "with space", 0);
	/* a directory where a file was */
	assert_int_equal(mkdirat(f->datafd, "with space", 0755), 0);
	assert_int_equal(check(f, text, true), 1);
	assert_string_equal(stg_errmsg(f->ctx), "'with space' is no longer a file");
	/* a malformed manifest: -1 */
	assert_int_equal(check(f, "garbage\n", true), -1);
	assert_int_equal(check(f, "garbage\n", false), -1);
	free(text);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_line_and_full_disk),
        T(test_write_load),
        cmocka_unit_test(test_load_malformed),
        T(test_check),
};

UT_MAIN(tests)
