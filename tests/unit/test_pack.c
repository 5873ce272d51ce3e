/* test_pack.c - pack, verify and unpack through the library on real trees. */
#include "unit.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>

typedef ut_fx fx;

/* src: a tree with nested dirs, an empty dir, an empty file, a file
 * spanning several 64 KiB frames, a symlink, a hardlink and a read-only
 * file; a context with 2 threads. */
static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 2);
	char *src = f->src = ut_join(f->dir, "src");
	assert_int_equal(mkdir(src, 0755), 0);
	ut_mkdir(src, "a");
	ut_mkdir(src, "a/b");
	ut_mkdir(src, "empty");
	ut_write(src, "a/b/hello.txt", "hello\n", 6);
	ut_write(src, "zero", "", 0);
	ut_fill_file(src, "a/big.bin", 300 * 1024 + 17, 1);
	for (int i = 0; i < 50; i++) {
		char name[32], data[64];
		snprintf(name, sizeof name, "a/small_%02d", i);
		int n = snprintf(data, sizeof data, "file %d\n", i);
		ut_write(src, name, data, (size_t)n);
	}
	char *l = ut_join(src, "link"), *h1 = ut_join(src, "a/b/hello.txt"),
	     *h2 = ut_join(src, "hard");
	assert_int_equal(symlink("a/b/hello.txt", l), 0);
	assert_int_equal(link(h1, h2), 0);
	assert_int_equal(chmod(h1, 0444), 0);
	free(l);
	free(h1);
	free(h2);
	*state = f;
	return 0;
}

/* The tree packed (64 KiB frames) into name beside it. */
static char *pack_to(fx *f, const char *name, stg_pack_info *info)
{
	char *out = ut_join(f->dir, name);
	ut_pack(f->ctx, f->src, out, info);
	return out;
}

static void test_round_trip(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	const char *src = f->src;
	stg_pack_info info;
	char *out = pack_to(f, "p.tar.zst", &info);
	assert_int_equal(info.files, 53);
	assert_int_equal(info.hardlinks, 1);
	assert_int_equal(info.symlinks, 1);
	assert_int_equal(info.dirs, 3);
	assert_true(info.frames >= 5); /* the big file spans frames */

	stg_pack *p;
	assert_int_equal(stg_pack_open(ctx, out, &p), STG_OK);
	stg_pack_info info2;
	stg_pack_get_info(p, &info2);
	assert_memory_equal(info.digest, info2.digest, STG_DIGEST_LEN);
	assert_int_equal(stg_verify(ctx, p), STG_OK);
	char *dst = ut_join(f->dir, "dst");
	assert_int_equal(stg_unpack(ctx, p, dst, NULL, NULL), STG_OK);
	ut_tree_holds(src, dst, true);
	/* the hardlink is a hardlink again */
	char *h1 = ut_join(dst, "a/b/hello.txt"), *h2 = ut_join(dst, "hard");
	struct stat s1, s2;
	assert_int_equal(stat(h1, &s1), 0);
	assert_int_equal(stat(h2, &s2), 0);
	assert_int_equal(s1.st_ino, s2.st_ino);
	/* unpacking onto an existing, non-empty directory is refused */
	assert_int_equal(stg_unpack(ctx, p, dst, NULL, NULL), STG_EEXIST);
	stg_pack_close(p);

	free(h1);
	free(h2);
	free(dst);
	free(out);
}

static void test_deterministic(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	stg_pack_info a, b;
	char *o1 = pack_to(f, "1.tar.zst", &a);
	stg_set_threads(ctx, 1);
	char *o2 = pack_to(f, "2.tar.zst", &b);
	assert_memory_equal(a.digest, b.digest, STG_DIGEST_LEN);
	ut_same_file(o1, o2);
	free(o1);
	free(o2);
}

static void test_include(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	char *out = pack_to(f, "p.tar.zst", NULL);
	stg_pack *p;
	assert_int_equal(stg_pack_open(ctx, out, &p), STG_OK);
	const char *inc[] = {"hard", "a/small_1*"};
	stg_unpack_opts uo;
	stg_unpack_opts_init(&uo);
	uo.include = inc;
	uo.n_include = 2;
	char *dst = ut_join(f->dir, "sub");
	stg_unpack_stats st;
	assert_int_equal(stg_unpack(ctx, p, dst, &uo, &st), STG_OK);
	/* 10 small files and the hardlink with its target; big.bin's frames
	 * were not decoded */
	assert_int_equal(st.files, 12);
	assert_true(st.frames_read < st.frames_total);
	/* the hardlink brought its target; a/small_1* matched 10 files; a
	 * directory was created for them; big.bin was not extracted */
	char *t = ut_join(dst, "a/b/hello.txt"), *s = ut_join(dst, "a/small_13"),
	     *b = ut_join(dst, "a/big.bin"), *z = ut_join(dst, "zero");
	struct stat sb;
	assert_int_equal(stat(t, &sb), 0);
	assert_int_equal(stat(s, &sb), 0);
	assert_int_not_equal(lstat(b, &sb), 0);
	assert_int_not_equal(lstat(z, &sb), 0);
	/* a pattern that matches nothing is an error, and leaves nothing */
	const char *none[] = {"nope/*"};
	uo.include = none;
	uo.n_include = 1;
	char *dst2 = ut_join(f->dir, "sub2");
	assert_int_equal(stg_unpack(ctx, p, dst2, &uo, NULL), STG_EUSAGE);
	assert_int_not_equal(lstat(dst2, &sb), 0);
	stg_pack_close(p);
	free(t);
	free(s);
	free(b);
	free(z);
	free(dst);
	free(dst2);
	free(out);
}

/* Flip bytes across the pack: verify fails with STG_ECORRUPT (or the pack
 * no longer opens), and unpack leaves nothing behind. */
static void test_damage(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	char *out = pack_to(f, "p.tar.zst", NULL);
	size_t len;
	uint8_t *img = ut_read(out, &len);
	char *dst = ut_join(f->dir, "dst");
	for (size_t off = 0; off < len; off += len / 97 + 1) {
		img[off] ^= 0x20;
		stg_pack *p = NULL;
		stg_err err = stg_pack_open_mem(ctx, img, len, &p);
		if (!err)
			err = stg_verify(ctx, p);
		if (err != STG_ECORRUPT)
			fail_msg("flip at %zu of %zu not detected (%d)", off, len, err);
		if (p) {
			assert_int_equal(stg_unpack(ctx, p, dst, NULL, NULL), STG_ECORRUPT);
			struct stat st;
			assert_int_not_equal(lstat(dst, &st), 0);
		}
		stg_pack_close(p);
		img[off] ^= 0x20;
	}
	/* no temporary leftovers beside dst */
	DIR *d = opendir(f->dir);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_null(strstr(de->d_name, ".stager-unpack"));
	closedir(d);
	free(img);
	free(dst);
	free(out);
}

/* Rewrite a pack's trailer with a changed manifest (keeping its frames), to
 * test the tree checks on a structurally valid pack. */
static uint8_t *rewrite(stg_ctx *ctx, const uint8_t *img, size_t len, void (*edit)(stg_trailer *),
                        size_t *out_len)
{
	stg_trailer t;
	size_t need;
	assert_int_equal(stg__trailer_decode(ctx, img, len, len, &t, &need), STG_OK);
	edit(&t);
	uint8_t *frame;
	size_t flen;
	assert_int_equal(stg__trailer_encode(ctx, &t, 3, &frame, &flen), STG_OK);
	uint8_t *n = malloc(t.data_size + flen);
	memcpy(n, img, t.data_size);
	memcpy(n + t.data_size, frame, flen);
	*out_len = t.data_size + flen;
	free(frame);
	stg__trailer_free(&t);
	return n;
}

static void edit_dup(stg_trailer *t)
{
	/* the last entry gets the name of the one before it */
	stg_rec *a = &t->recs[t->n_entries - 2], *b = &t->recs[t->n_entries - 1];
	b->path_off = a->path_off;
	b->dir = a->dir;
	b->path_len = a->path_len;
	b->link_len = a->link_len;
	b->type = a->type;
}

static void edit_under_symlink(stg_trailer *t)
{
	/* "link" is a symlink; make "zero" (an empty file) "link/x" */
	for (size_t i = 0; i < t->n_entries; i++) {
		const char *p = t->names + t->recs[i].path_off;
		if (!strcmp(p, "zero")) {
			/* reuse the bytes: "zero" -> "link" is not a child; use the
			 * names buffer's space by pointing at a new string */
			static char name[] = "link/x";
			size_t off = t->names_len;
			t->names = realloc(t->names, t->names_len + sizeof name + 1);
			memcpy(t->names + off, name, sizeof name);
			t->names[off + sizeof name] = '\0';
			t->names_len += sizeof name + 1;
			t->recs[i].path_off = off;
			t->recs[i].dir = 0; /* a whole path, as a writer's */
			t->recs[i].path_len = sizeof name - 1;
		}
	}
}

static void edit_escape(stg_trailer *t)
{
	for (size_t i = 0; i < t->n_entries; i++) {
		stg_rec *r = &t->recs[i];
		if (r->type == STG_SYMLINK) {
			static char target[] = "../../../../etc/passwd";
			size_t off = t->names_len;
			t->names =
			        realloc(t->names, t->names_len + r->path_len + sizeof target + 2);
			/* its base name (the whole path: the link is at the top) */
			memcpy(t->names + off, t->names + r->path_off, r->path_len + 1);
			memcpy(t->names + off + r->path_len + 1, target, sizeof target);
			r->path_off = off;
			r->link_len = sizeof target - 1;
			t->names_len += r->path_len + sizeof target + 1;
		}
	}
}

static void test_hostile_manifest(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	char *out = pack_to(f, "p.tar.zst", NULL);
	size_t len;
	uint8_t *img = ut_read(out, &len);
	void (*edits[])(stg_trailer *) = {edit_dup, edit_under_symlink, edit_escape};
	const char *words[] = {"twice", "not a directory", "outside"};
	char *dst = ut_join(f->dir, "dst");
	for (size_t i = 0; i < 3; i++) {
		size_t nlen;
		uint8_t *n = rewrite(ctx, img, len, edits[i], &nlen);
		stg_pack *p;
		assert_int_equal(stg_pack_open_mem(ctx, n, nlen, &p), STG_OK);
		assert_int_equal(stg_verify(ctx, p), STG_ECORRUPT);
		assert_non_null(strstr(stg_errmsg(ctx), words[i]));
		assert_int_equal(stg_unpack(ctx, p, dst, NULL, NULL), STG_ECORRUPT);
		struct stat st;
		assert_int_not_equal(lstat(dst, &st), 0);
		stg_pack_close(p);
		free(n);
	}
	free(img);
	free(dst);
	free(out);
}

static void test_stream_form(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	const char *src = f->src;
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	/* a pipe is not seekable: the stream form must still work; read it
	 * back from a second thread's worth of buffer (the pack is small) */
	char *path = ut_join(f->dir, "stream.tar.zst");
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	stg_pack_info info;
	assert_int_equal(stg_pack_dir_fd(ctx, src, fd, NULL, &info), STG_OK);
	close(fd);
	close(fds[0]);
	close(fds[1]);
	stg_pack *p;
	assert_int_equal(stg_pack_open(ctx, path, &p), STG_OK);
	assert_int_equal(stg_verify(ctx, p), STG_OK);
	stg_pack_close(p);
	/* a missing source is STG_ENOENT */
	assert_int_equal(stg_pack_dir(ctx, "/nonexistent/dir", path, NULL, NULL), STG_ENOENT);
	assert_int_equal(stg_pack_open(ctx, "/nonexistent/p.tar.zst", &p), STG_ENOENT);
	free(path);
}

static void cancel_on_progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	(void)what;
	(void)total;
	if (done > 0)
		stg_cancel(arg);
}

static void test_cancel(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	const char *src = f->src;
	stg_set_progress(ctx, cancel_on_progress, ctx);
	char *out = ut_join(f->dir, "c.tar.zst");
	assert_int_equal(stg_pack_dir(ctx, src, out, NULL, NULL), STG_EINTR);
	struct stat st;
	assert_int_not_equal(lstat(out, &st), 0);
	/* no temporary file left */
	DIR *d = opendir(f->dir);
	struct dirent *de;
	while ((de = readdir(d)))
		assert_null(strstr(de->d_name, ".stager-tmp"));
	closedir(d);
	free(out);
}

/* A stop skips the frames queued behind it.  At --level 19 a 64 KiB frame
 * of text takes a visible time, and the reader queues many ahead of the
 * one compressor: a pack cancelled an eighth of the way through ends well
 * before the whole pack would, both timed here (before, the compressor
 * went through every frame queued: 5 s after a SIGTERM to `stager pack`). */
struct canceller {
	stg_ctx *ctx;
	double at;
};

static void *cancel_later(void *arg)
{
	struct canceller *c = arg;
	while (stg__now() < c->at)
		usleep(2000);
	stg_cancel(c->ctx);
	return NULL;
}

static void test_cancel_skips_queued(void **state)
{
	fx *f = *state;
	char *dir = ut_join(f->dir, "text");
	assert_int_equal(mkdir(dir, 0755), 0);
	size_t cap = 16 << 20, len = 0;
	char *b = ut_malloc(cap);
	for (unsigned i = 1; len + 16 < cap; i++)
		len += (size_t)snprintf(b + len, cap - len, "%u\n", i);
	ut_write(dir, "seq", b, len);
	free(b);
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	o.level = 19;
	o.frame_size = 64 * 1024;
	stg_ctx *ctx = ut_ctx(1);
	char *out = ut_join(f->dir, "t.tar.zst");
	double t0 = stg__now();
	assert_int_equal(stg_pack_dir(ctx, dir, out, &o, NULL), STG_OK);
	double whole = stg__now() - t0;
	char *cut = ut_join(f->dir, "cut.tar.zst");
	t0 = stg__now();
	struct canceller c = {ctx, t0 + whole / 8};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &c), 0);
	assert_int_equal(stg_pack_dir(ctx, dir, cut, &o, NULL), STG_EINTR);
	double stopped = stg__now() - t0;
	pthread_join(th, NULL);
	print_message("# whole %.2f s, cancelled after %.2f s: ended at %.2f s\n", whole, whole / 8,
	              stopped);
	assert_true(stopped < whole / 2);
	struct stat st;
	assert_int_not_equal(lstat(cut, &st), 0);
	stg_ctx_free(ctx);
	free(cut);
	free(out);
	free(dir);
}

/* Files whose sizes meet the file reader's 1 MiB slots at their edges
 * (the rest of a file exactly what a slot has left, a file of exactly one
 * and of three slots, one a byte over) pack, verify and unpack whole. */
static void test_slot_edges(void **state)
{
	fx *f = *state;
	char *dir = ut_join(f->dir, "edges");
	assert_int_equal(mkdir(dir, 0755), 0);
	ut_write(dir, "a", "first\n", 6);
	ut_fill_file(dir, "b", (1 << 20) - 6, 4);
	ut_fill_file(dir, "c", 1 << 20, 5);
	ut_fill_file(dir, "d", 3 << 20, 6);
	ut_fill_file(dir, "e", (1 << 20) + 1, 7);
	ut_fill_file(dir, "f", (1 << 20) - 1, 8);
	char *out = ut_join(f->dir, "edges.tar.zst"), *dst = ut_join(f->dir, "edges.out");
	stg_pack_info info;
	ut_pack(f->ctx, dir, out, &info);
	assert_int_equal(info.files, 6);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, out, &p), STG_OK);
	assert_int_equal(stg_verify(f->ctx, p), STG_OK);
	assert_int_equal(stg_unpack(f->ctx, p, dst, NULL, NULL), STG_OK);
	ut_tree_holds(dir, dst, true);
	stg_pack_close(p);
	free(dst);
	free(out);
	free(dir);
}

/* A file that changes between the walk and its read stops the pack with
 * its name, what happened and what to do, and leaves no pack: the change
 * is made once the first file ("a") is in the tar stream, to "c", behind a
 * 16 MiB file that the reader (a few MiB ahead) has not passed yet. */
typedef struct change {
	const char *dir;
	int what; /* 0: truncated, 1: appended to, 2: removed */
	bool done;
} change;

static void change_on_progress(void *arg, const char *what, uint64_t done, uint64_t total)
{
	change *c = arg;
	(void)what;
	(void)total;
	if (c->done || done == 0)
		return;
	c->done = true;
	char *p = ut_join(c->dir, "c");
	if (c->what == 0)
		assert_int_equal(truncate(p, 16 << 20), 0);
	else if (c->what == 1)
		assert_int_equal(truncate(p, (32 << 20) + 1), 0);
	else
		assert_int_equal(unlink(p), 0);
	free(p);
}

static void test_changing_files(void **state)
{
	fx *f = *state;
	static const char *const want[] = {
	        "'c' shrank while it was packed (16777216 bytes missing); pack again once "
	        "nothing writes to the tree",
	        "'c' grew while it was packed; pack again once nothing writes to the tree",
	        "cannot open 'c': No such file or directory"};
	for (int k = 0; k < 3; k++) {
		char name[32];
		snprintf(name, sizeof name, "changing%d", k);
		char *dir = ut_join(f->dir, name);
		assert_int_equal(mkdir(dir, 0755), 0);
		ut_write(dir, "a", "first\n", 6);
		ut_fill_file(dir, "b", 16 << 20, 2);
		ut_fill_file(dir, "c", 32 << 20, 3);
		change c = {dir, k, false};
		stg_set_progress(f->ctx, change_on_progress, &c);
		char *out = ut_join(f->dir, "changing.tar.zst");
		assert_int_equal(stg_pack_dir(f->ctx, dir, out, NULL, NULL),
		                 k == 2 ? STG_ENOENT : STG_EIO);
		assert_string_equal(stg_errmsg(f->ctx), want[k]);
		struct stat st;
		assert_int_not_equal(lstat(out, &st), 0);
		stg_set_progress(f->ctx, NULL, NULL);
		free(out);
		free(dir);
	}
}

/* The tar header of path in the pack at out (read with libarchive, as tar
 * would): its owner and hardlink target ("" for none). */
static void tar_header(const char *out, const char *path, long *uid, long *gid, char *hard)
{
	struct archive *a = archive_read_new();
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_filename(a, out, 1 << 16), ARCHIVE_OK);
	struct archive_entry *ae;
	bool found = false;
	while (!found && archive_read_next_header(a, &ae) == ARCHIVE_OK) {
		if (strcmp(archive_entry_pathname(ae), path))
			continue;
		found = true;
		*uid = (long)archive_entry_uid(ae);
		*gid = (long)archive_entry_gid(ae);
		const char *h = archive_entry_hardlink(ae);
		snprintf(hard, 256, "%s", h ? h : "");
	}
	assert_true(found);
	archive_read_free(a);
}

/* Several groups of links, and owners that change from entry to entry:
 * the first of each group in pack order keeps the content, the others
 * are hardlinks to it; every header carries its own entry's owner. */
static void test_links_and_owners(void **state)
{
	fx *f = *state;
	const char *src = f->src;
	ut_mkdir(src, "g");
	ut_write(src, "g/x1", "x", 1);
	ut_write(src, "g/y1", "yy", 2);
	const char *links[][2] = {{"g/x1", "g/x2"}, {"g/x1", "g/x3"}, {"g/y1", "g/z_y"}};
	for (size_t i = 0; i < 3; i++) {
		char *a = ut_join(src, links[i][0]), *b = ut_join(src, links[i][1]);
		assert_int_equal(link(a, b), 0);
		free(a);
		free(b);
	}
	bool root = geteuid() == 0;
	if (root) {
		char *y = ut_join(src, "g/y1"), *z = ut_join(src, "zero");
		assert_int_equal(lchown(y, 1234, 5678), 0);
		assert_int_equal(lchown(z, 4321, 8765), 0);
		free(y);
		free(z);
	}
	stg_pack_info info;
	char *out = pack_to(f, "l.tar.zst", &info);
	assert_int_equal(info.hardlinks, 4); /* hard, x2, x3, z_y */
	long uid, gid;
	char hard[256];
	tar_header(out, "g/x1", &uid, &gid, hard);
	assert_string_equal(hard, "");
	tar_header(out, "g/x3", &uid, &gid, hard);
	assert_string_equal(hard, "g/x1");
	tar_header(out, "g/z_y", &uid, &gid, hard);
	assert_string_equal(hard, "g/y1");
	tar_header(out, "link", &uid, &gid, hard);
	assert_int_equal(uid, (long)geteuid());
	if (root) {
		tar_header(out, "g/y1", &uid, &gid, hard);
		assert_int_equal(uid, 1234);
		assert_int_equal(gid, 5678);
		tar_header(out, "g/z_y", &uid, &gid, hard);
		assert_int_equal(uid, 1234);
		tar_header(out, "hard", &uid, &gid, hard);
		assert_int_equal(uid, 0);
		tar_header(out, "zero", &uid, &gid, hard);
		assert_int_equal(uid, 4321);
		assert_int_equal(gid, 8765);
	}
	/* and they come back as links */
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, out, &p), STG_OK);
	char *dst = ut_join(f->dir, "dst");
	assert_int_equal(stg_unpack(f->ctx, p, dst, NULL, NULL), STG_OK);
	stg_pack_close(p);
	ut_tree_holds(src, dst, true);
	const char *same[] = {"g/x1", "g/x2", "g/x3"};
	struct stat s0, s;
	for (size_t i = 0; i < 3; i++) {
		char *q = ut_join(dst, same[i]);
		assert_int_equal(stat(q, i ? &s : &s0), 0);
		if (i)
			assert_int_equal(s.st_ino, s0.st_ino);
		free(q);
	}
	free(dst);
	free(out);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_round_trip),
        T(test_deterministic),
        T(test_changing_files),
        T(test_slot_edges),
        T(test_include),
        T(test_damage),
        T(test_hostile_manifest),
        T(test_stream_form),
        T(test_cancel),
        T(test_links_and_owners),
        T(test_cancel_skips_queued),
};

UT_MAIN(tests)
