/* test_extract.c - extraction and verification (extract.c): which entries
 * an --include takes (a directory's subtree, a hardlink's target, the
 * parents) and the frames it decodes; permission bits (no setuid, no
 * write bits for cache entries); the building blocks delta.c uses
 * (prepare, finish, file meta); a damaged frame named, with nothing
 * published and no temporary left, while a subset that does not touch
 * it still unpacks; symlinks leaving the tree refused by verify and unpack
 * but kept by the content check of collect --pack; destinations that
 * exist; cancel; a tree 2,000 levels deep unpacked whole, on a small
 * stack, with few descriptors, in linear time. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>

typedef struct fx {
	UT_FX;
	stg_pack_info info;
	stg_pack *p;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	stg_set_threads(f->ctx, 2);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0750);
	ut_mkdir(f->src, "a");
	ut_mkdir(f->src, "a/sub");
	ut_mkdir(f->src, "b");
	ut_write(f->src, "a/one", "one\n", 4);
	ut_write(f->src, "a/sub/two", "two\n", 4);
	ut_write(f->src, "b/empty", "", 0);
	ut_fill_file(f->src, "b/big", 400000, 5);
	ut_write(f->src, "suid", "#!/bin/sh\n", 10);
	char *s = ut_join(f->src, "suid");
	chmod(s, 04755);
	free(s);
	ut_hardlink(f->src, "hard", "a/one");
	ut_symlink(f->src, "link", "a/one");
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &f->p), STG_OK);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	stg_pack_close(f->p);
	return ut_teardown(state);
}

/* The selected paths, sorted, as one string. */
static void selected(fx *f, const char *const *inc, size_t n, char *out, size_t len)
{
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.include = inc;
	o.n_include = n;
	bool *sel;
	assert_int_equal(stg__select(f->ctx, f->p, &o, false, &sel), STG_OK);
	out[0] = '\0';
	for (size_t i = 0; i < stg_pack_count(f->p); i++) {
		stg_entry e;
		stg_pack_entry(f->p, i, &e);
		if (sel[i])
			snprintf(out + strlen(out), len - strlen(out), "%s ", e.path);
	}
	free(sel);
}

static void test_select(void **state)
{
	fx *f = *state;
	char got[512];
	const char *sub[] = {"a/sub"};
	selected(f, sub, 1, got, sizeof got);
	assert_string_equal(got, "a a/sub a/sub/two ");
	const char *glob[] = {"b/*", "suid"};
	selected(f, glob, 2, got, sizeof got);
	assert_string_equal(got, "b b/big b/empty suid ");
	/* NULL options: everything */
	bool *sel;
	assert_int_equal(stg__select(f->ctx, f->p, NULL, false, &sel), STG_OK);
	for (size_t i = 0; i < stg_pack_count(f->p); i++)
		assert_true(sel[i]);
	free(sel);
	/* a pattern that matches nothing is a mistake, named */
	const char *none[] = {"a/sub", "nothing*"};
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.include = none;
	o.n_include = 2;
	sel = (bool *)0x1;
	assert_int_equal(stg__select(f->ctx, f->p, &o, false, &sel), STG_EUSAGE);
	assert_string_equal(stg_errmsg(f->ctx), "--include 'nothing*' matches nothing in the pack");
	char *out = ut_join(f->dir, "out");
	assert_int_equal(stg_unpack(f->ctx, f->p, out, &o, NULL), STG_EUSAGE);
	assert_int_equal(access(out, F_OK), -1);
	free(out);
}

/* A selected hardlink brings its target, and the target its parents: the
 * directory holding the target gets the pack's mode and mtime (not
 * whatever making it on the way gives), read-only in a cache entry. */
static void test_select_hardlink_parent(void **state)
{
	fx *f = *state;
	char got[512];
	const char *hard[] = {"hard"};
	selected(f, hard, 1, got, sizeof got);
	assert_string_equal(got, "a a/one hard ");
}

static void test_subset_reads_less(void **state)
{
	fx *f = *state;
	const char *inc[] = {"a"};
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	char *out = ut_join(f->dir, "out");
	stg_unpack_stats st;
	assert_int_equal(stg_unpack(f->ctx, f->p, out, &o, &st), STG_OK);
	assert_int_equal(st.files, 2);
	assert_int_equal(st.dirs, 2);
	assert_int_equal(st.symlinks, 0);
	assert_int_equal(st.bytes, 8);
	assert_int_equal(st.frames_total, f->info.frames);
	assert_true(st.frames_read < st.frames_total);
	assert_true(st.pack_bytes_read < f->info.data_size);
	char *b = ut_join(out, "b");
	assert_int_equal(access(b, F_OK), -1);
	/* the whole: every frame, all read already with the trailer (a pack
	 * under 1 MiB), so none read again */
	char *all = ut_join(f->dir, "all");
	assert_int_equal(stg_unpack(f->ctx, f->p, all, NULL, &st), STG_OK);
	assert_int_equal(st.frames_read, st.frames_total);
	assert_true(f->info.pack_size <= 1 << 20);
	assert_int_equal(st.pack_bytes_read, 0);
	assert_int_equal(st.files, 6);
	assert_int_equal(st.symlinks, 1);
	free(all);
	free(b);
	free(out);
}

static void test_modes(void **state)
{
	fx *f = *state;
	char *out = ut_join(f->dir, "out");
	assert_int_equal(stg_unpack(f->ctx, f->p, out, NULL, NULL), STG_OK);
	struct stat st;
	char *s = ut_join(out, "suid");
	assert_int_equal(stat(s, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755); /* no setuid */
	assert_int_equal(stat(out, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750); /* the packed directory's */
	/* for a cache entry: read-only, into a directory the caller made */
	char *ro = ut_join(f->dir, "ro");
	mkdir(ro, 0700);
	int rfd = open(ro, O_RDONLY | O_DIRECTORY);
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.read_only = 1;
	stg_unpack_stats us;
	assert_int_equal(stg__extract_at(f->ctx, f->p, rfd, &o, &us, false), STG_OK);
	assert_int_equal(fstatat(rfd, "suid", &st, 0), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	assert_int_equal(fstatat(rfd, "a/one", &st, 0), 0);
	assert_int_equal(st.st_mode & 0222, 0);
	assert_int_equal(fstatat(rfd, "a", &st, 0), 0);
	assert_int_equal(st.st_mode & 0222, 0);
	close(rfd);
	/* the rules themselves */
	stg_rec r = {.mode = 06775};
	assert_int_equal(stg__final_mode(&r, false), 0775);
	assert_int_equal(stg__final_mode(&r, true), 0555);
	r.mode = 01777;
	assert_int_equal(stg__final_mode(&r, false), 01777);
	free(ro);
	free(s);
	free(out);
}

/* What delta.c uses to build a tree itself. */
static void test_building_blocks(void **state)
{
	fx *f = *state;
	char *t = ut_join(f->dir, "t");
	mkdir(t, 0700);
	int tfd = open(t, O_RDONLY | O_DIRECTORY);
	bool *sel;
	assert_int_equal(stg__select(f->ctx, f->p, NULL, false, &sel), STG_OK);
	assert_int_equal(stg__tree_prepare(f->ctx, f->p, sel, tfd, false), STG_OK);
	struct stat st;
	/* directories and empty files now; files with content not yet */
	assert_int_equal(fstatat(tfd, "a/sub", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(fstatat(tfd, "b/empty", &st, 0), 0);
	assert_int_equal(fstatat(tfd, "a/one", &st, 0), -1);
	/* the builder writes the files, with their meta */
	for (size_t i = 0; i < f->p->t.n_entries; i++) {
		const stg_rec *r = &f->p->t.recs[i];
		if (r->type != STG_FILE || r->size == 0)
			continue;
		char buf[STG_PATH_MAX + 1];
		const char *path = stg__rec_path(f->p, r, buf);
		char *from = ut_join(f->src, path);
		size_t len;
		uint8_t *b = ut_read(from, &len);
		int fd = openat(tfd, path, O_WRONLY | O_CREAT | O_EXCL, 0600);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, b, len), (ssize_t)len);
		assert_int_equal(stg__file_meta(fd, r, false), 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_mode & 07777, stg__final_mode(r, false));
		assert_int_equal(st.st_mtim.tv_sec, r->mtime);
		close(fd);
		free(b);
		free(from);
	}
	/* then links and the directories' meta */
	assert_int_equal(stg__tree_finish(f->ctx, f->p, sel, tfd, false), STG_OK);
	char buf[32] = {0};
	assert_int_equal(readlinkat(tfd, "link", buf, sizeof buf), 5);
	assert_string_equal(buf, "a/one");
	struct stat a, h;
	assert_int_equal(fstatat(tfd, "a/one", &a, 0), 0);
	assert_int_equal(fstatat(tfd, "hard", &h, 0), 0);
	assert_int_equal(a.st_ino, h.st_ino);
	char *srca = ut_join(f->src, "a");
	struct stat sa, ta;
	assert_int_equal(stat(srca, &sa), 0);
	assert_int_equal(fstatat(tfd, "a", &ta, 0), 0);
	assert_int_equal(sa.st_mtim.tv_sec, ta.st_mtim.tv_sec);
	assert_int_equal(sa.st_mode & 07777, ta.st_mode & 07777);
	free(srca);
	free(sel);
	close(tfd);
	free(t);
}

/* The message names b/big and the frames that hold it, k among them (the
 * file's own XXH3 finds the damage; the frames are not hashed one by one
 * when the whole pack is read, its SHA-256 covers them). */
static void names_frame(const char *msg, size_t k)
{
	const char *at = strstr(msg, "frames ");
	size_t a, b;
	if (!strstr(msg, "'b/big'") || !at || sscanf(at, "frames %zu-%zu", &a, &b) != 2 || k < a ||
	    k > b)
		fail_msg("'%s' does not name b/big in frames around %zu", msg, k);
}

static void test_damaged_frame(void **state)
{
	fx *f = *state;
	/* the frame that holds the middle of b/big */
	stg_entry e;
	size_t n = stg_pack_count(f->p);
	uint64_t mid = 0;
	for (size_t i = 0; i < n; i++) {
		stg_pack_entry(f->p, i, &e);
		if (!strcmp(e.path, "b/big"))
			mid = e.data_offset + e.size / 2;
	}
	size_t k;
	uint64_t off, size, toff, tsize;
	for (k = 0; k < f->info.frames; k++) {
		stg_pack_frame(f->p, k, &off, &size, &toff, &tsize);
		if (toff <= mid && mid < toff + tsize)
			break;
	}
	assert_true(k < f->info.frames);
	size_t len;
	uint8_t *img = ut_read(f->pack, &len);
	img[off + size / 2] ^= 0x10;
	stg_pack *p;
	assert_int_equal(stg_pack_open_mem(f->ctx, img, len, &p), STG_OK);
	char *out = ut_join(f->dir, "out");
	assert_int_equal(stg_unpack(f->ctx, p, out, NULL, NULL), STG_ECORRUPT);
	names_frame(stg_errmsg(f->ctx), k);
	assert_int_equal(access(out, F_OK), -1);
	ut_no_temporaries(f->dir, false);
	assert_int_equal(stg_verify(f->ctx, p), STG_ECORRUPT);
	names_frame(stg_errmsg(f->ctx), k);
	/* a subset away from it: fine, every file it takes checked */
	const char *inc[] = {"a"};
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.include = inc;
	o.n_include = 1;
	assert_int_equal(stg_unpack(f->ctx, p, out, &o, NULL), STG_OK);
	stg_pack_close(p);
	free(out);
	free(img);
}

/* A link that leaves the tree: verify and unpack refuse the pack; the
 * check of collect --pack keeps the user's results as they are. */
static void test_link_out(void **state)
{
	fx *f = *state;
	char *l = ut_join(f->src, "escape");
	assert_int_equal(symlink("../../etc/passwd", l), 0);
	char *pk = ut_join(f->dir, "out.tar.zst");
	ut_pack(f->ctx, f->src, pk, NULL);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, pk, &p), STG_OK);
	assert_int_equal(stg__verify_content(f->ctx, p), STG_OK);
	assert_int_equal(stg_verify(f->ctx, p), STG_ECORRUPT);
	assert_non_null(strstr(stg_errmsg(f->ctx), "escape"));
	char *out = ut_join(f->dir, "out");
	assert_int_equal(stg_unpack(f->ctx, p, out, NULL, NULL), STG_ECORRUPT);
	assert_int_equal(access(out, F_OK), -1);
	ut_no_temporaries(f->dir, false);
	stg_pack_close(p);
	free(out);
	free(pk);
	free(l);
}

static void test_destinations(void **state)
{
	fx *f = *state;
	/* an empty directory may be the destination, unless told otherwise */
	char *out = ut_join(f->dir, "out");
	mkdir(out, 0755);
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	assert_int_equal(o.replace_empty, 1);
	o.replace_empty = 0;
	assert_int_equal(stg_unpack(f->ctx, f->p, out, &o, NULL), STG_EEXIST);
	assert_int_equal(stg_unpack(f->ctx, f->p, out, NULL, NULL), STG_OK);
	/* not empty, or a file: refused, named */
	assert_int_equal(stg_unpack(f->ctx, f->p, out, NULL, NULL), STG_EEXIST);
	char want[4300];
	snprintf(want, sizeof want, "'%s' exists and is not empty; unpack into a new directory",
	         out);
	assert_string_equal(stg_errmsg(f->ctx), want);
	char *file = ut_join(f->dir, "file");
	ut_write(f->dir, "file", "x", 1);
	assert_int_equal(stg_unpack(f->ctx, f->p, file, NULL, NULL), STG_EEXIST);
	snprintf(want, sizeof want, "'%s' exists; unpack into a new directory", file);
	assert_string_equal(stg_errmsg(f->ctx), want);
	/* missing parents are made */
	char *deep = ut_join(f->dir, "x/y/z");
	assert_int_equal(stg_unpack(f->ctx, f->p, deep, NULL, NULL), STG_OK);
	/* cancelled: nothing */
	char *c = ut_join(f->dir, "cancelled");
	stg_cancel(f->ctx);
	assert_int_equal(stg_unpack(f->ctx, f->p, c, NULL, NULL), STG_EINTR);
	assert_int_equal(access(c, F_OK), -1);
	ut_no_temporaries(f->dir, false);
	free(c);
	free(deep);
	free(file);
	free(out);
}

typedef struct deep_unpack {
	stg_ctx *ctx;
	stg_pack *p;
	const char *out;
	stg_err err;
} deep_unpack;

static void *unpack_thread(void *arg)
{
	deep_unpack *d = arg;
	d->err = stg_unpack(d->ctx, d->p, d->out, NULL, NULL);
	return NULL;
}

/* A chain 2,000 levels deep (paths of 4,001 bytes): packed and unpacked
 * whole, from a thread with a 128 KiB stack, within 128 descriptors, in
 * well under the cubic time it once took (over a minute at 1,900); the
 * unpacked tree, read-only, is removed by rmtree. */
static void test_deep(void **state)
{
	fx *f = *state;
	char *src = ut_join(f->dir, "deep"), *pk = ut_join(f->dir, "deep.tar.zst");
	char *out = ut_join(f->dir, "deep-out");
	mkdir(src, 0755);
	ut_make_deep(src, 2000);
	ut_pack(f->ctx, src, pk, NULL);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, pk, &p), STG_OK);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 128;
	int fds = ut_open_fds();
	deep_unpack d = {f->ctx, p, out, STG_OK};
	double t0 = stg__now();
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	ut_on_small_stack(unpack_thread, &d, 128 * 1024);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	double t = stg__now() - t0;
	if (d.err)
		fail_msg("unpack: %s", stg_errmsg(f->ctx));
	print_message("# unpacked 2,000 levels in %.3f s\n", t);
	ut_assert_time_below(t, 5);
	assert_int_equal(ut_open_fds(), fds);
	bool bottom;
	assert_int_equal(ut_deep_depth(out, &bottom), 2000);
	assert_true(bottom);
	/* read-only directories all the way down: rmtree makes them writable */
	stg_unpack_opts o;
	stg_unpack_opts_init(&o);
	o.read_only = 1;
	char *ro = ut_join(f->dir, "deep-ro");
	assert_int_equal(stg_unpack(f->ctx, p, ro, &o, NULL), STG_OK);
	assert_int_equal(ut_deep_depth(ro, &bottom), 2000);
	assert_int_equal(stg__rmtree(ro), 0);
	assert_int_equal(access(ro, F_OK), -1);
	stg_pack_close(p);
	free(ro);
	free(out);
	free(pk);
	free(src);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_select),   T(test_select_hardlink_parent), T(test_subset_reads_less),
        T(test_modes),    T(test_building_blocks),        T(test_damaged_frame),
        T(test_link_out), T(test_destinations),           T(test_deep),
};

UT_MAIN(tests)
