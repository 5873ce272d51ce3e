/* test_archive_unpack.c - an archive unpacked into an entry being built
 * (archive_unpack.c), called directly on tars and zips that python's
 * tarfile and zipfile write (tests/unit/fixtures are made at run time):
 * the tree, its modes (setuid dropped, read-only), the manifest, the
 * figures, the SHA-256 of the whole file (also for a zip, read from its
 * end first); hostile entries refused with nothing written outside and no
 * link made (absolute paths, "..", hardlinks out, symlinks out and
 * through links, a file over a directory or a link, a path under a file);
 * a file whose declared size is over the free space refused before any
 * of it is written, and a disk that fills while writing (a 1 MiB tmpfs);
 * a read error; cancel. */
#include "unit.h"
#include "archive_unpack.h"
#include "cache.h"

#include <errno.h>
#include <openssl/sha.h>
#include <sys/mount.h>
#include <xxhash.h>

typedef struct fx {
	UT_FX;
	char *fix;   /* the archives python wrote */
	char *small; /* a 1 MiB tmpfs, if mounted */
} fx;

/* Writes the archives named on its command line into the directory argv[1]. */
static const char fixtures_py[] =
        "import io, sys, tarfile, zipfile, os\n"
        "out = sys.argv[1]\n"
        "def tar(name, entries, fmt=tarfile.PAX_FORMAT):\n"
        "    with tarfile.open(os.path.join(out, name), 'w', format=fmt) as t:\n"
        "        for e in entries:\n"
        "            kind, path = e[0], e[1]\n"
        "            i = tarfile.TarInfo(path)\n"
        "            i.mtime = 1600000000\n"
        "            if kind == 'f':\n"
        "                data = e[2]\n"
        "                i.size = len(data)\n"
        "                i.mode = e[3] if len(e) > 3 else 0o644\n"
        "                t.addfile(i, io.BytesIO(data))\n"
        "            elif kind == 'd':\n"
        "                i.type = tarfile.DIRTYPE\n"
        "                i.mode = 0o755\n"
        "                t.addfile(i)\n"
        "            elif kind == 'l':\n"
        "                i.type = tarfile.SYMTYPE\n"
        "                i.linkname = e[2]\n"
        "                t.addfile(i)\n"
        "            elif kind == 'h':\n"
        "                i.type = tarfile.LNKTYPE\n"
        "                i.linkname = e[2]\n"
        "                t.addfile(i)\n"
        "            elif kind == 'c':\n"
        "                i.type = tarfile.CHRTYPE\n"
        "                t.addfile(i)\n"
        "good = [('d', 'top'), ('f', './top/a.txt', b'alpha\\n'),\n"
        "        ('f', 'top//sub/b.bin', bytes(range(256)) * 40),\n"
        "        ('f', 'suid', b'#!/bin/sh\\n', 0o4755),\n"
        "        ('h', 'top/hard', 'top/a.txt'), ('l', 'top/link', 'sub/b.bin'),\n"
        "        ('f', 'again', b'first version, longer\\n'), ('f', 'again', b'second\\n'),\n"
        "        ('f', 'empty', b'')]\n"
        "tar('good.tar', good)\n"
        "tar('good-gnu.tar', good, tarfile.GNU_FORMAT)\n"
        "with zipfile.ZipFile(os.path.join(out, 'good.zip'), 'w') as z:\n"
        "    z.writestr('z/one', b'one\\n')\n"
        "    z.writestr('z/two', b'two two\\n' * 1000)\n"
        "hostile = {\n"
        "    'abs': [('f', '/tmp/evil', b'x')],\n"
        "    'dotdot': [('f', '../evil', b'x')],\n"
        "    'deepdotdot': [('d', 'a'), ('f', 'a/./../../evil', b'x')],\n"
        "    'hardout': [('h', 'h', '../evil')],\n"
        "    'hardabs': [('h', 'h', '/etc/passwd')],\n"
        "    'harddir': [('d', 'd'), ('h', 'h', 'd')],\n"
        "    'symout': [('l', 'out', '../evil')],\n"
        "    'symabs': [('l', 'abs', '/etc')],\n"
        "    'symchain': [('d', 'd'), ('l', 'd/up', '..'), ('l', 'esc', 'd/up/..')],\n"
        "    'fileoverdir': [('d', 'd'), ('f', 'd/in', b'i'), ('f', 'd', b'x')],\n"
        "    'fileoverlink': [('f', 't', b't'), ('l', 'l', 't'), ('f', 'l', b'x')],\n"
        "    'linkoverfile': [('f', 'f', b'f'), ('l', 'f', 'g')],\n"
        "    'underfile': [('f', 'f', b'f'), ('f', 'f/x', b'x')],\n"
        "    'underlink': [('d', 'd'), ('l', 'l', 'd'), ('f', 'l/x', b'x')],\n"
        "    'device': [('f', 'ok', b'ok'), ('c', 'dev')],\n"
        "}\n"
        "for k, v in hostile.items():\n"
        "    tar(k + '.tar', v)\n"
        "tar('big.tar', [('f', 'small', b's' * 1000), ('f', 'big', b'B' * (4 << 20))])\n"
        "tar('fill.tar', [('f', 'f%d' % i, bytes([i]) * (700 << 10)) for i in range(3)])\n";

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(&f->ut, NULL);
	f->fix = ut_join(f->dir, "fix");
	ut_mkdir(f->dir, "fix");
	ut_write(f->dir, "fixtures.py", fixtures_py, strlen(fixtures_py));
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "python3 '%s/fixtures.py' '%s'", f->dir, f->fix);
	if (system(cmd) != 0)
		fail_msg("python3 could not write the fixtures");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	if (f->small) {
		umount2(f->small, MNT_DETACH);
		free(f->small);
	}
	free(f->fix);
	return ut_teardown(state);
}

/* The sources' reads: those of a plain file (no slot, no limit). */
static const stg_source_ops file_ops = {.kind = "archive", .read = stg__source_pread};

/* A read that fails with EIO past the first 4 KiB. */
static ssize_t failing_read(stg_ctx *ctx, const stg_source *s, void *buf, size_t len, uint64_t off)
{
	if (off + len > 4096) {
		if (off >= 4096) {
			errno = EIO;
			return -1;
		}
		len = 4096 - off;
	}
	return stg__source_pread(ctx, s, buf, len, off);
}
static const stg_source_ops failing_ops = {.kind = "archive", .read = failing_read};

/* An entry being built: tfd the entry, dfd its data/, under parent. */
typedef struct build {
	char *t, *d;
	int tfd, dfd;
	volatile uint64_t progress;
} build;

static void build_at(build *b, const char *parent, const char *name)
{
	b->t = ut_join(parent, name);
	b->d = ut_join(b->t, "data");
	assert_int_equal(mkdir(b->t, 0700), 0);
	assert_int_equal(mkdir(b->d, 0700), 0);
	b->tfd = open(b->t, O_RDONLY | O_DIRECTORY);
	b->dfd = open(b->d, O_RDONLY | O_DIRECTORY);
	assert_true(b->tfd >= 0 && b->dfd >= 0);
	b->progress = 0;
}

static void build_free(build *b)
{
	close(b->tfd);
	close(b->dfd);
	/* data/ may have been left read-only */
	chmod(b->d, 0700);
	ut_rmtree(b->t);
	free(b->t);
	free(b->d);
}

/* Unpack the fixture name into b with ops (NULL: a plain file's). */
static stg_err unpack_with(fx *f, const char *name, build *b, const stg_source_ops *ops,
                           stg_unpacked *u)
{
	char *path = ut_join(f->fix, name);
	stg_source s;
	memset(&s, 0, sizeof s);
	s.ops = ops ? ops : &file_ops;
	s.name = s.path = path;
	s.local = true;
	s.fd = open(path, O_RDONLY);
	assert_true(s.fd >= 0);
	assert_int_equal(fstat(s.fd, &s.st), 0);
	memset(u, 0, sizeof *u);
	stg_err err = stg__archive_unpack(f->ctx, f->c, &s, b->tfd, b->dfd, &b->progress, u);
	close(s.fd);
	free(path);
	return err;
}

/* The SHA-256 of the fixture name. */
static void sha_of(fx *f, const char *name, uint8_t out[32])
{
	char *path = ut_join(f->fix, name);
	size_t len;
	uint8_t *b = ut_read(path, &len);
	SHA256(b, len, out);
	free(b);
	free(path);
}

/* The manifest line of a file holding data. */
static void manifest_line(const char *path, const void *data, size_t len, char *out, size_t cap)
{
	XXH128_canonical_t h;
	XXH128_canonicalFromHash(&h, XXH3_128bits(data, len));
	char hex[33];
	stg__hex(h.digest, 16, hex);
	snprintf(out, cap, "%s %zu %s\n", hex, len, path);
}

static void check_good_tree(const build *b)
{
	ut_content_is(b->d, "top/a.txt", "alpha\n");
	ut_content_is(b->d, "again", "second\n"); /* the later entry wins */
	ut_content_is(b->d, "empty", "");
	char *bin = ut_join(b->d, "top/sub/b.bin");
	size_t len;
	uint8_t *data = ut_read(bin, &len);
	assert_int_equal(len, 256 * 40);
	for (size_t i = 0; i < len; i++)
		assert_int_equal(data[i], (uint8_t)i);
	free(data);
	free(bin);
	/* a hardlink is the same file; the symlink as written, made last */
	struct stat a, h, st;
	assert_int_equal(fstatat(b->dfd, "top/a.txt", &a, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(fstatat(b->dfd, "top/hard", &h, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(a.st_ino, h.st_ino);
	char *link = ut_join(b->d, "top/link");
	ut_link_is(link, "sub/b.bin");
	free(link);
	/* read-only, no setuid; the archive's mtime */
	assert_int_equal(fstatat(b->dfd, "suid", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	assert_int_equal(st.st_mtim.tv_sec, 1600000000);
	assert_int_equal(a.st_mode & 07777, 0444);
	assert_int_equal(fstatat(b->dfd, "top", &st, AT_SYMLINK_NOFOLLOW), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	assert_int_equal(st.st_mtim.tv_sec, 1600000000);
	assert_int_equal(fstat(b->dfd, &st), 0);
	assert_int_equal(st.st_mode & 0222, 0);
}

static void test_tar(void **state)
{
	fx *f = *state;
	static const char *const names[] = {"good.tar", "good-gnu.tar"};
	for (size_t k = 0; k < 2; k++) {
		build b;
		build_at(&b, f->dir, "entry");
		stg_unpacked u;
		stg_err err = unpack_with(f, names[k], &b, NULL, &u);
		if (err)
			fail_msg("%s: %s", names[k], stg_errmsg(f->ctx));
		check_good_tree(&b);
		/* files: a.txt, b.bin, suid, hard, again (once), empty; the
		 * content of each written once (not the hardlink's, not the
		 * replaced version's) */
		assert_int_equal(u.files, 6);
		assert_int_equal(u.content, 6 + 256 * 40 + 10 + 7 + 0);
		assert_true(u.disk >= u.content);
		uint8_t sha[32];
		sha_of(f, names[k], sha);
		assert_memory_equal(u.sha, sha, 32);
		char *p = ut_join(f->fix, names[k]);
		struct stat st;
		stat(p, &st);
		free(p);
		assert_true(u.bytes >= (uint64_t)st.st_size);
		assert_true(b.progress >= u.bytes);
		/* the manifest: one line per name, the latest entry's */
		char *m = ut_join(b.t, "manifest");
		char *text = ut_read_text(m);
		char line[256];
		manifest_line("again", "second\n", 7, line, sizeof line);
		assert_non_null(strstr(text, line));
		manifest_line("top/a.txt", "alpha\n", 6, line, sizeof line);
		assert_non_null(strstr(text, line));
		manifest_line("empty", "", 0, line, sizeof line);
		assert_non_null(strstr(text, line));
		assert_null(strstr(text, "22 again")); /* the first version's size */
		size_t lines = 0;
		for (char *c = text; *c; c++)
			lines += *c == '\n';
		/* a.txt, b.bin, suid, again, empty: a hardlink is another name
		 * of a file (the quick check counts names by st_nlink) */
		assert_int_equal(lines, 5);
		assert_null(strstr(text, "top/hard"));
		free(text);
		free(m);
		build_free(&b);
	}
}

/* A zip's directory is at its end, read first: the digest is still of
 * the whole file in order. */
static void test_zip(void **state)
{
	fx *f = *state;
	build b;
	build_at(&b, f->dir, "entry");
	stg_unpacked u;
	if (unpack_with(f, "good.zip", &b, NULL, &u))
		fail_msg("%s", stg_errmsg(f->ctx));
	ut_content_is(b.d, "z/one", "one\n");
	assert_int_equal(u.files, 2);
	assert_int_equal(u.content, 4 + 8000);
	uint8_t sha[32];
	sha_of(f, "good.zip", sha);
	assert_memory_equal(u.sha, sha, 32);
	build_free(&b);
}

static void test_hostile(void **state)
{
	fx *f = *state;
	static const struct {
		const char *name, *why;
	} t[] = {
	        {"abs", "absolute path: '/tmp/evil'"},
	        {"dotdot", "unsafe path: '../evil'"},
	        {"deepdotdot", "unsafe path: 'a/./../../evil'"},
	        {"hardout", "hardlink to an unsafe path: '../evil'"},
	        {"hardabs", "hardlink to an unsafe path: '/etc/passwd'"},
	        {"harddir", "hardlink to something that is not an earlier file: 'h'"},
	        {"symout", "symlink leading outside the destination: 'out'"},
	        {"symabs", "symlink leading outside the destination: 'abs'"},
	        {"symchain", "symlink leading outside the destination: 'esc'"},
	        {"fileoverdir", "a file over a directory or link: 'd'"},
	        {"fileoverlink", "a file over a directory or link: 'l'"},
	        {"linkoverfile", "a link over another entry: 'f'"},
	        {"underfile", "a path under a file or link: 'f/x'"},
	        {"underlink", "a path under a file or link: 'l/x'"},
	        {"device", "device node: 'dev'"},
	};
	char *evil = ut_join(f->dir, "evil");
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char name[64], want[256];
		snprintf(name, sizeof name, "%s.tar", t[i].name);
		build b;
		build_at(&b, f->dir, "entry");
		stg_unpacked u;
		stg_err err = unpack_with(f, name, &b, NULL, &u);
		if (err != STG_ECORRUPT)
			fail_msg("%s gave %d: %s", name, err, stg_errmsg(f->ctx));
		snprintf(want, sizeof want, "refusing a hostile archive: %s", t[i].why);
		if (strcmp(stg_errmsg(f->ctx), want))
			fail_msg("%s: '%s', want '%s'", name, stg_errmsg(f->ctx), want);
		/* nothing outside data/, and no link made at all */
		assert_int_equal(access(evil, F_OK), -1);
		assert_false(ut_exists_at(b.tfd, "evil"));
		assert_false(ut_exists_at(b.dfd, "out"));
		assert_false(ut_exists_at(b.dfd, "abs"));
		assert_false(ut_exists_at(b.dfd, "esc"));
		assert_false(ut_exists_at(b.dfd, "d/up"));
		build_free(&b);
	}
	free(evil);
}

/* Mount a 1 MiB tmpfs at dir/small (false: not possible here). */
static bool small_fs(fx *f)
{
	f->small = ut_join(f->dir, "small");
	ut_mkdir(f->dir, "small");
	if (mount("tmpfs", f->small, "tmpfs", 0, "size=1m") == 0)
		return true;
	fprintf(stderr, "# cannot mount a 1 MiB tmpfs (%s): need root\n", strerror(errno));
	free(f->small);
	f->small = NULL;
	return false;
}

/* A file declared larger than the free space is refused before any of it
 * is written; one that fits is written; a disk filling up while files are
 * written is ENOSPC, named. */
static void test_space(void **state)
{
	fx *f = *state;
	if (!small_fs(f))
		skip();
	build b;
	build_at(&b, f->small, "entry");
	stg_unpacked u;
	assert_int_equal(unpack_with(f, "big.tar", &b, NULL, &u), STG_ENOSPC);
	const char *msg = stg_errmsg(f->ctx);
	if (!strstr(msg, "not enough space on scratch for 'big' in the archive: it is 4.0 MiB,") ||
	    !strstr(msg, "nothing of it was written"))
		fail_msg("'%s'", msg);
	assert_false(ut_exists_at(b.dfd, "big")); /* not even created */
	/* what came before it was written */
	char *small = ut_join(b.d, "small");
	struct stat st;
	assert_int_equal(stat(small, &st), 0);
	assert_int_equal(st.st_size, 1000);
	free(small);
	build_free(&b);
	build_at(&b, f->small, "entry");
	assert_int_equal(unpack_with(f, "fill.tar", &b, NULL, &u), STG_ENOSPC);
	msg = stg_errmsg(f->ctx);
	if (!strstr(msg, "cannot write 'f1'"))
		fail_msg("'%s'", msg);
	build_free(&b);
}

/* A source that cannot be read past its start; cancel. */
static void test_read_error_cancel(void **state)
{
	fx *f = *state;
	build b;
	build_at(&b, f->dir, "entry");
	stg_unpacked u;
	stg_err err = unpack_with(f, "good.tar", &b, &failing_ops, &u);
	assert_int_equal(err, STG_EIO);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot read the archive"));
	build_free(&b);

	build_at(&b, f->dir, "entry");
	stg_cancel(f->ctx);
	assert_int_equal(unpack_with(f, "good.tar", &b, NULL, &u), STG_EINTR);
	assert_string_equal(stg_errmsg(f->ctx), "interrupted");
	assert_false(ut_exists_at(b.dfd, "top/a.txt"));
	build_free(&b);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_tar), T(test_zip), T(test_hostile), T(test_space), T(test_read_error_cancel),
};

UT_MAIN(tests)
