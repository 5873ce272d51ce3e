/* test_source.c - archives that are not packs (source.c), written here with
 * libarchive: a tar, a gzipped tar and a zip staged into read-only cache
 * entries with manifests that verify (setuid dropped, hardlinks, a later
 * entry replacing an earlier one, links made last); warm stages from the
 * index; the same bytes under another name reuse the entry; hostile
 * archives (absolute and ".." paths, devices, FIFOs, links leading out,
 * paths under a link, hardlinks to nowhere) and damaged or truncated ones
 * refused with nothing published; empty files; --include refused. */
#include "unit.h"
#include "cache.h"
#include "source.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>

typedef struct ent {
	const char *path;
	mode_t type;      /* AE_IFREG ... */
	const char *data; /* file content, or a link's target */
	const char *hardlink;
	unsigned mode;
} ent;

typedef ut_fx fx;

enum { TAR, TGZ, ZIP };

static void write_archive(const char *path, int kind, const ent *e, size_t n)
{
	struct archive *a = archive_write_new();
	if (kind == ZIP)
		archive_write_set_format_zip(a);
	else
		archive_write_set_format_pax_restricted(a);
	if (kind == TGZ)
		archive_write_add_filter_gzip(a);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, e[i].path);
		archive_entry_set_mtime(ae, 1500000000 + (time_t)i, 0);
		if (e[i].hardlink) {
			archive_entry_set_hardlink(ae, e[i].hardlink);
			archive_entry_set_filetype(ae, AE_IFREG);
			archive_entry_set_size(ae, 0);
		} else {
			archive_entry_set_filetype(ae, e[i].type);
			archive_entry_set_perm(ae, e[i].mode ? e[i].mode : 0644);
			if (e[i].type == AE_IFLNK)
				archive_entry_set_symlink(ae, e[i].data);
			if (e[i].type == AE_IFREG)
				archive_entry_set_size(ae, (la_int64_t)strlen(e[i].data));
		}
		assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
		if (!e[i].hardlink && e[i].type == AE_IFREG)
			archive_write_data(a, e[i].data, strlen(e[i].data));
		archive_entry_free(ae);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static stg_err stage(fx *f, const char *src, const char *dest, stg_stage_result *r)
{
	return ut_stage(f->ctx, f->c, src, dest, NULL, r);
}

static const ent good[] = {
        {"./data/", AE_IFDIR, NULL, NULL, 0755},
        {"data/a.txt", AE_IFREG, "alpha\n", NULL, 0644},
        {"data/run", AE_IFREG, "#!/bin/sh\n", NULL, 04755}, /* setuid: dropped */
        {"data//sub/./b.txt", AE_IFREG, "beta\n", NULL, 0600},
        {"data/hard", 0, NULL, "data/a.txt", 0},
        {"data/link", AE_IFLNK, "a.txt", NULL, 0777},
        {"data/twice", AE_IFREG, "first\n", NULL, 0644},
        {"data/twice", AE_IFREG, "second\n", NULL, 0644},
};

static void test_kinds(void **state)
{
	fx *f = *state;
	static const char *const names[] = {"set.tar", "set.tar.gz", "set.zip"};
	for (int kind = TAR; kind <= ZIP; kind++) {
		char *src = ut_join(f->dir, names[kind]);
		/* zip keeps no hardlinks */
		write_archive(src, kind, good, kind == ZIP ? 4 : 6);
		char *dest = ut_join(f->dir, "ds");
		stg_stage_result r;
		if (stage(f, src, dest, &r))
			fail_msg("%s: %s", names[kind], stg_errmsg(f->ctx));
		assert_string_equal(r.kind, "archive");
		assert_int_equal(r.hit, 0);
		struct stat st;
		assert_int_equal(stat(src, &st), 0);
		/* all of it, at least (libarchive may read parts again) */
		assert_true(r.source_bytes >= (uint64_t)st.st_size);
		ut_content_is(dest, "data/a.txt", "alpha\n");
		ut_content_is(dest, "data/sub/b.txt", "beta\n");
		char *run = ut_join(dest, "data/run");
		assert_int_equal(stat(run, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0555); /* no setuid, read-only */
		assert_int_equal(st.st_mtim.tv_sec, 1500000002);
		assert_int_equal(r.files, kind == ZIP ? 3 : 4);
		assert_int_equal(r.content_bytes, 6 + 10 + 5); /* a hardlink adds none */
		if (kind != ZIP) {
			char *a = ut_join(dest, "data/a.txt"), *h = ut_join(dest, "data/hard");
			struct stat sa, sh;
			assert_int_equal(stat(a, &sa), 0);
			assert_int_equal(stat(h, &sh), 0);
			assert_int_equal(sa.st_ino, sh.st_ino);
			ut_content_is(dest, "data/link", "alpha\n");
			free(a);
			free(h);
		}
		/* the entry: its key is the file's SHA-256; its manifest verifies */
		char key[STG_DIGEST_HEXLEN + 1];
		stg_digest_hex(r.digest, key);
		assert_int_equal(stg__entry_check(f->ctx, f->c, key, true), 0);
		stg_meta m;
		assert_int_equal(stg__meta_read(f->c, key, &m), 0);
		assert_string_equal(m.kind, "archive");
		assert_non_null(strstr(f->log.text,
		                       "is not a pack: it was read and unpacked in one "
		                       "stream"));
		stg_stage_result_free(&r);
		/* warm: from the index */
		assert_int_equal(stage(f, src, dest, &r), STG_OK);
		assert_int_equal(r.hit, 1);
		assert_int_equal(r.source_bytes, 0);
		assert_string_equal(r.kind, "archive");
		stg_stage_result_free(&r);
		unlink(dest);
		free(run);
		free(dest);
		free(src);
	}
}

static void test_same_bytes(void **state)
{
	fx *f = *state;
	char *a = ut_join(f->dir, "a.tar"), *b = ut_join(f->dir, "b.tar");
	write_archive(a, TAR, good, 8);
	char cmd[8400];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
	assert_int_equal(system(cmd), 0);
	char *d1 = ut_join(f->dir, "d1"), *d2 = ut_join(f->dir, "d2");
	stg_stage_result r1, r2;
	assert_int_equal(stage(f, a, d1, &r1), STG_OK);
	assert_int_equal(stage(f, b, d2, &r2), STG_OK);
	assert_memory_equal(r1.digest, r2.digest, STG_DIGEST_LEN);
	stg_stage_result_free(&r1);
	stg_stage_result_free(&r2);
	/* one entry, no build left over */
	char **names;
	size_t n;
	assert_int_equal(stg__dir_names(f->c->rootfd, "cache", true, &names, &n), 0);
	assert_int_equal(n, 1);
	stg__names_free(names, n);
	free(a);
	free(b);
	free(d1);
	free(d2);
}

static void nothing_published(fx *f, const char *dest)
{
	char **names;
	size_t n;
	assert_int_equal(stg__dir_names(f->c->rootfd, "cache", true, &names, &n), 0);
	if (n)
		fail_msg("'%s' in the cache", names[0]);
	stg__names_free(names, n);
	assert_int_equal(access(dest, F_OK), -1);
}

static void test_hostile(void **state)
{
	fx *f = *state;
	static const struct {
		ent e[3];
		size_t n;
		const char *why;
	} t[] = {
	        {{{"/etc/evil", AE_IFREG, "x", NULL, 0}}, 1, "absolute path: '/etc/evil'"},
	        {{{"../evil", AE_IFREG, "x", NULL, 0}}, 1, "unsafe path: '../evil'"},
	        {{{"a/../../evil", AE_IFREG, "x", NULL, 0}}, 1, "unsafe path"},
	        {{{"dev", AE_IFCHR, NULL, NULL, 0}}, 1, "device node: 'dev'"},
	        {{{"fifo", AE_IFIFO, NULL, NULL, 0}}, 1, "FIFO: 'fifo'"},
	        {{{"out", AE_IFLNK, "../../etc", NULL, 0}},
	         1,
	         "symlink leading outside the destination: 'out'"},
	        {{{"abs", AE_IFLNK, "/etc/passwd", NULL, 0}},
	         1,
	         "symlink leading outside the destination: 'abs'"},
	        {{{"d", AE_IFDIR, NULL, NULL, 0755},
	          {"l", AE_IFLNK, "d", NULL, 0},
	          {"l/x", AE_IFREG, "x", NULL, 0}},
	         3,
	         "a path under a file or link: 'l/x'"},
	        {{{"f", AE_IFREG, "x", NULL, 0}, {"f/x", AE_IFREG, "x", NULL, 0}},
	         2,
	         "a path under a file or link: 'f/x'"},
	        /* a/b was checked (implied) when a was not yet a link: the
	         * check of every path at the end finds it */
	        {{{"a/b/x", AE_IFREG, "x", NULL, 0},
	          {"a", AE_IFLNK, "c", NULL, 0},
	          {"a/b/y", AE_IFREG, "y", NULL, 0}},
	         3,
	         "a path under a file or link: 'a/b/x'"},
	        {{{"h", 0, NULL, "nowhere", 0}},
	         1,
	         "hardlink to something that is not an earlier file: 'h'"},
	        {{{"h", 0, NULL, "/etc/passwd", 0}}, 1, "hardlink to an unsafe path"},
	        {{{"d", AE_IFDIR, NULL, NULL, 0755}, {"d", AE_IFREG, "x", NULL, 0}},
	         2,
	         "a file over a directory or link: 'd'"},
	        {{{"f", AE_IFREG, "x", NULL, 0}, {"f", AE_IFDIR, NULL, NULL, 0755}},
	         2,
	         "a directory over a file or link: 'f'"},
	};
	char *src = ut_join(f->dir, "hostile.tar"), *dest = ut_join(f->dir, "ds");
	char *outside = ut_join(f->dir, "evil");
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		unlink(src);
		write_archive(src, TAR, t[i].e, t[i].n);
		stg_stage_result r;
		stg_err err = stage(f, src, dest, &r);
		if (err != STG_ECORRUPT)
			fail_msg("case %zu (%s) gave %d: %s", i, t[i].why, err, stg_errmsg(f->ctx));
		char want[512];
		snprintf(want, sizeof want, "refusing a hostile archive: %s", t[i].why);
		if (!strstr(stg_errmsg(f->ctx), want))
			fail_msg("case %zu: '%s' lacks '%s'", i, stg_errmsg(f->ctx), want);
		char head[4200];
		snprintf(head, sizeof head, "'%s': ", src);
		assert_memory_equal(stg_errmsg(f->ctx), head, strlen(head));
		nothing_published(f, dest);
		assert_int_equal(access(outside, F_OK), -1);
	}
	free(outside);
	free(src);
	free(dest);
}

static void test_damaged(void **state)
{
	fx *f = *state;
	char *src = ut_join(f->dir, "set.tar"), *dest = ut_join(f->dir, "ds");
	/* a tar with a large file, cut in the middle of it */
	char *big = ut_malloc(200001);
	memset(big, 'z', 200000);
	big[200000] = '\0';
	ent e[] = {{"big", AE_IFREG, big, NULL, 0644}, {"small", AE_IFREG, "s", NULL, 0644}};
	write_archive(src, TAR, e, 2);
	free(big);
	assert_int_equal(truncate(src, 100000), 0);
	stg_stage_result r;
	assert_int_equal(stage(f, src, dest, &r), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "truncated"));
	nothing_published(f, dest);
	/* cut at an entry boundary: no end-of-archive marker */
	unlink(src);
	write_archive(src, TAR, good, 2);
	struct stat st;
	stat(src, &st);
	/* pax_restricted: header, "alpha\n" padded; the end is two zero blocks */
	assert_int_equal(truncate(src, st.st_size - 1024), 0);
	stg_err err = stage(f, src, dest, &r);
	assert_int_equal(err, STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "truncated"));
	nothing_published(f, dest);
	/* not an archive at all */
	unlink(src);
	ut_write(f->dir, "set.tar", "this is plain text, not any archive format\n", 44);
	assert_int_equal(stage(f, src, dest, &r), STG_ECORRUPT);
	nothing_published(f, dest);
	/* empty */
	ut_write(f->dir, "set.tar", "", 0);
	assert_int_equal(stage(f, src, dest, &r), STG_ECORRUPT);
	char want[4300];
	snprintf(want, sizeof want, "'%s' is empty: not a pack or an archive", src);
	assert_non_null(strstr(stg_errmsg(f->ctx), want));
	nothing_published(f, dest);
	free(src);
	free(dest);
}

/* The seam: an archive is the archive kind's; a subset of it is refused
 * when opened; the whole is staged and indexed. */
static void test_direct(void **state)
{
	fx *f = *state;
	char *src = ut_join(f->dir, "set.tar");
	write_archive(src, TAR, good, 8);
	struct stat st;
	assert_int_equal(stat(src, &st), 0);
	stg_source s;
	assert_int_equal(stg__source_open(f->ctx, f->c, src, &st, &s), STG_OK);
	assert_false(stg__source_pack.claims(&s));
	assert_true(stg__source_archive.claims(&s));
	assert_string_equal(stg__source_archive.kind, "archive");
	s.ops = &stg__source_archive;
	/* its bytes by range, as a mount or a pipeline would read them */
	char head[8], want_head[8];
	FILE *fp = fopen(src, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(want_head, 1, sizeof want_head, fp), sizeof want_head);
	fclose(fp);
	assert_int_equal(stg__source_archive.read(f->ctx, &s, head, sizeof head, 0), sizeof head);
	assert_memory_equal(head, want_head, sizeof head);
	const char *inc[] = {"data"};
	stg_stage_opts o;
	stg_stage_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	stg_stage_result r;
	memset(&r, 0, sizeof r);
	assert_int_equal(stg__source_archive.open(f->ctx, f->c, &s, &o, &r), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), "--include needs a pack: '"));
	stg__source_close(&s);
	/* and the whole: staged, indexed */
	stg_stage_opts_init(&o);
	char *dest = ut_join(f->dir, "ds");
	o.dest = dest;
	o.owner = "job-1";
	assert_int_equal(stg_stage(f->ctx, f->c, src, &o, &r), STG_OK);
	assert_string_equal(r.kind, "archive");
	stg_ident id;
	stg__ident_of(&st, &id);
	char hex[STG_DIGEST_HEXLEN + 1], want[STG_DIGEST_HEXLEN + 1];
	assert_int_equal(stg__index_get(f->c, &id, hex), 0);
	stg_digest_hex(r.digest, want);
	assert_string_equal(hex, want);
	ut_content_is(dest, "data/twice", "second\n");
	stg_stage_result_free(&r);
	free(dest);
	free(src);
}

/* A tar in which a later entry replaces an earlier one of the same name
 * (tar -r, tar -u): the entry holds the later file, and its manifest must
 * say so, or the entry fails its own check: verify calls it damaged, and
 * every warm stage removes it and reads the archive again. */
static void test_replaced_entry(void **state)
{
	fx *f = *state;
	char *src = ut_join(f->dir, "appended.tar"), *dest = ut_join(f->dir, "ds");
	write_archive(src, TAR, good + 6, 2);
	stg_stage_result r;
	assert_int_equal(stage(f, src, dest, &r), STG_OK);
	ut_content_is(dest, "data/twice", "second\n");
	uint64_t files = r.files, content = r.content_bytes;
	char key[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(r.digest, key);
	stg_stage_result_free(&r);
	f->log.text[0] = '\0';
	f->log.warnings = 0;
	assert_int_equal(stage(f, src, dest, &r), STG_OK);
	if (!r.hit || f->log.warnings)
		fail_msg("the warm stage read it again: %s", f->log.text);
	stg_stage_result_free(&r);
	assert_int_equal(stg__entry_check(f->ctx, f->c, key, true), 0);
	assert_int_equal(files, 1);
	assert_int_equal(content, 7);
	free(src);
	free(dest);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup_cache, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_kinds),   T(test_same_bytes), T(test_hostile),
        T(test_damaged), T(test_direct),     T(test_replaced_entry),
};

UT_MAIN(tests)
