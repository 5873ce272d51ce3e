/* test_fsutil.c - filesystem helpers that never follow a symlink
 * (fsutil.c): rmtree removes links, never what they point to, and
 * read-only trees; directory listings; atomic replace; copies; mkdir -p;
 * absolute paths; opens confined beneath a directory that refuse "..",
 * absolute paths and every symlink. */
#include "unit.h"
#include "dircur.h"

#include <errno.h>
#include <limits.h>
#include <sys/resource.h>

typedef struct fx {
	UT_FX;
	int dfd;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->dfd = open(f->dir, O_RDONLY | O_DIRECTORY);
	if (f->dfd < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	close(f->dfd);
	return ut_teardown(state);
}

static void symlink_at(int dfd, const char *target, const char *p)
{
	assert_int_equal(symlinkat(target, dfd, p), 0);
}

static void test_rmtree_links(void **state)
{
	fx *f = *state;
	/* outside: what links in the tree point to */
	ut_mkdir(f->dir, "outside");
	ut_write(f->dir, "outside/precious", "keep\n", 5);
	ut_write(f->dir, "outfile", "keep\n", 5);
	ut_mkdir(f->dir, "t");
	ut_mkdir(f->dir, "t/a");
	ut_mkdir(f->dir, "t/a/b");
	ut_write(f->dir, "t/a/b/f", "x", 1);
	ut_write(f->dir, "t/g", "y", 1);
	char *outside = ut_join(f->dir, "outside"), *outfile = ut_join(f->dir, "outfile");
	symlink_at(f->dfd, outside, "t/abs-dir-link");
	symlink_at(f->dfd, "../../outside", "t/a/rel-dir-link");
	symlink_at(f->dfd, outfile, "t/a/b/file-link");
	symlink_at(f->dfd, "nowhere", "t/dangling");
	/* a read-only directory and a read-only file in it */
	assert_int_equal(fchmodat(f->dfd, "t/a/b/f", 0444, 0), 0);
	assert_int_equal(fchmodat(f->dfd, "t/a/b", 0555, 0), 0);
	assert_int_equal(fchmodat(f->dfd, "t/a", 0500, 0), 0);
	char *t = ut_join(f->dir, "t");
	assert_int_equal(stg__rmtree(t), 0);
	assert_false(ut_exists_at(f->dfd, "t"));
	assert_true(ut_exists_at(f->dfd, "outside/precious"));
	assert_true(ut_exists_at(f->dfd, "outfile"));
	/* missing is fine */
	assert_int_equal(stg__rmtree(t), 0);
	/* a symlink to a directory, given as the tree: the link goes, not the
	 * directory */
	symlink_at(f->dfd, "outside", "l");
	char *l = ut_join(f->dir, "l");
	assert_int_equal(stg__rmtree(l), 0);
	assert_false(ut_exists_at(f->dfd, "l"));
	assert_true(ut_exists_at(f->dfd, "outside/precious"));
	/* a file */
	assert_int_equal(stg__rmtree(outfile), 0);
	assert_false(ut_exists_at(f->dfd, "outfile"));
	/* at a directory descriptor */
	assert_int_equal(stg__rmtree_at(f->dfd, "outside"), 0);
	assert_false(ut_exists_at(f->dfd, "outside"));
	free(l);
	free(t);
	free(outside);
	free(outfile);
}

/* Deep trees: no stack overflow, no descriptor leak. */
typedef struct deep_rm {
	int dfd;
	int rc, err;
	uint64_t bytes;
} deep_rm;

static void *rmtree_thread(void *arg)
{
	deep_rm *d = arg;
	d->bytes = stg__tree_bytes(d->dfd, "deep");
	d->rc = stg__rmtree_at(d->dfd, "deep");
	d->err = errno;
	return NULL;
}

/* A tree 3,000 levels deep (paths of 6,000 bytes, over PATH_MAX), its
 * directories read-only: its bytes counted and the tree removed from a
 * thread with a 64 KiB stack, within 64 descriptors, none left open. */
static void test_rmtree_deep(void **state)
{
	fx *f = *state;
	char *deep = ut_join(f->dir, "deep");
	mkdir(deep, 0755);
	ut_make_deep(deep, 3000);
	/* read-only on the way down, as a pack may restore a tree */
	int fd = open(deep, O_RDONLY | O_DIRECTORY), sub;
	while ((sub = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW)) >= 0) {
		fchmod(fd, 0555);
		close(fd);
		fd = sub;
	}
	fchmod(fd, 0555);
	close(fd);
	struct rlimit old, low;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 64;
	int fds = ut_open_fds();
	deep_rm d = {.dfd = f->dfd};
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	ut_on_small_stack(rmtree_thread, &d, 64 * 1024);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
	assert_true(d.bytes >= 3000 * 4096ull); /* every directory's block */
	if (d.rc)
		fail_msg("rmtree: %s", strerror(d.err));
	assert_false(ut_exists_at(f->dfd, "deep"));
	assert_int_equal(ut_open_fds(), fds);
	free(deep);
}

typedef struct counter {
	int n, budget; /* entries seen; how many before a cancel (-1: never) */
} counter;

static bool stop_now(void *arg)
{
	counter *c = arg;
	return c->budget >= 0 && c->n >= c->budget;
}

static int count_entry(void *arg, int dirfd, const char *name, const struct stat *st)
{
	(void)dirfd;
	(void)name;
	(void)st;
	((counter *)arg)->n++;
	return 1;
}

/* The directory cursor: the levels two paths share kept, the rest opened
 * a component at a time; never through a link; levels closed beyond its
 * window opened again, the same directories. */
static void test_dircur(void **state)
{
	fx *f = *state;
	char *deep = ut_join(f->dir, "deep");
	mkdir(deep, 0755);
	ut_make_deep(deep, 100);
	ut_mkdir(f->dir, "x");
	ut_symlink(f->dir, "x/l", "..");
	stg_dircur c;
	stg__dircur_init(&c, f->dfd);
	/* made where missing, with create */
	int fd = stg__dircur_open(&c, "a/b/c", 5, false);
	assert_int_equal(fd, -1);
	assert_int_equal(errno, ENOENT);
	fd = stg__dircur_open(&c, "a/b/c", 5, true);
	assert_true(fd >= 0);
	assert_int_equal(mkdirat(fd, "in-c", 0755), 0);
	assert_true(ut_exists_at(f->dfd, "a/b/c/in-c"));
	/* a prefix of the last path, a sibling, the root */
	fd = stg__dircur_open(&c, "a/b", 3, false);
	assert_true(ut_exists_at(fd, "c"));
	fd = stg__dircur_open(&c, "a/bc", 4, true);
	assert_true(fd >= 0);
	assert_true(ut_exists_at(f->dfd, "a/bc"));
	fd = stg__dircur_open(&c, "", 0, false);
	assert_int_equal(fd, f->dfd);
	/* a link is never followed, last component or not */
	assert_int_equal(stg__dircur_open(&c, "x/l", 3, true), -1);
	assert_int_equal(stg__dircur_open(&c, "x/l/deep", 8, true), -1);
	assert_false(ut_exists_at(f->dfd, "deep/in-l"));
	/* down 100 levels, up to level 10 (closed, opened again), down again */
	char p[256] = "deep";
	for (int i = 0; i < 100; i++)
		strcat(p, "/d");
	int fds = ut_open_fds();
	assert_true(stg__dircur_open(&c, p, strlen(p), false) >= 0);
	assert_true(ut_open_fds() <= fds + 40);
	fd = stg__dircur_open(&c, p, 4 + 2 * 10, false);
	struct stat a, b;
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(fstatat(f->dfd, "deep/d/d/d/d/d/d/d/d/d/d", &b, 0), 0);
	assert_true(a.st_ino == b.st_ino);
	assert_true(stg__dircur_open(&c, p, strlen(p), false) >= 0);
	assert_true(ut_exists_at(stg__dircur_open(&c, p, strlen(p), false), "f"));
	stg__dircur_free(&c);
	assert_true(ut_open_fds() < fds);

	/* a visit goes all the way down, and stops when asked (EINTR) */
	counter all = {0, -1}, some = {0, 10};
	stg_tvisit v = {.entry = count_entry, .cancel = stop_now, .arg = &all};
	assert_int_equal(stg__tree_visit(f->dfd, "deep", &v), 0);
	assert_int_equal(all.n, 101); /* 100 directories and the file */
	v.arg = &some;
	assert_int_equal(stg__tree_visit(f->dfd, "deep", &v), -1);
	assert_int_equal(errno, EINTR);
	assert_int_equal(some.n, 10);
	assert_true(ut_open_fds() < fds);
	free(deep);
}

static void test_dir_names(void **state)
{
	fx *f = *state;
	ut_mkdir(f->dir, "d");
	static const char *const names[] = {"b", "a", "C", "a.b", "a0", ".hidden", "z"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		char p[32];
		snprintf(p, sizeof p, "d/%s", names[i]);
		ut_write(f->dir, p, "", 0);
	}
	char **v;
	size_t n;
	assert_int_equal(stg__dir_names(f->dfd, "d", true, &v, &n), 0);
	assert_int_equal(n, 7);
	static const char *const sorted[] = {".hidden", "C", "a", "a.b", "a0", "b", "z"};
	for (size_t i = 0; i < n; i++)
		assert_string_equal(v[i], sorted[i]);
	stg__names_free(v, n);
	assert_int_equal(stg__dir_names(f->dfd, "d", false, &v, &n), 0);
	assert_int_equal(n, 7);
	stg__names_free(v, n);
	/* "" and NULL: the directory itself */
	assert_int_equal(stg__dir_names(f->dfd, "", true, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(v[0], "d");
	stg__names_free(v, n);
	assert_int_equal(stg__dir_names(f->dfd, NULL, true, &v, &n), 0);
	assert_int_equal(n, 1);
	stg__names_free(v, n);
	/* empty */
	ut_mkdir(f->dir, "e");
	assert_int_equal(stg__dir_names(f->dfd, "e", true, &v, &n), 0);
	assert_int_equal(n, 0);
	stg__names_free(v, n);
	int efd = openat(f->dfd, "e", O_RDONLY | O_DIRECTORY);
	assert_true(stg__dir_is_empty(efd));
	int dfd = openat(f->dfd, "d", O_RDONLY | O_DIRECTORY);
	assert_false(stg__dir_is_empty(dfd));
	close(efd);
	close(dfd);
	/* a symlink to a directory is not listed through */
	symlink_at(f->dfd, "d", "ld");
	v = (char **)0x1;
	assert_int_equal(stg__dir_names(f->dfd, "ld", true, &v, &n), -1);
	assert_true(errno == ELOOP || errno == ENOTDIR);
	assert_null(v);
	assert_int_equal(n, 0);
	assert_int_equal(stg__dir_names(f->dfd, "missing", true, &v, &n), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(stg__dir_names(f->dfd, "d/a", true, &v, &n), -1);
	assert_int_equal(errno, ENOTDIR);
}

static void read_is(const char *dir, const char *name, const char *want)
{
	char *p = ut_join(dir, name);
	size_t len;
	uint8_t *b = ut_read(p, &len);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(b, want, len);
	free(b);
	free(p);
}

static void test_replace(void **state)
{
	fx *f = *state;
	for (int durable = 0; durable < 2; durable++) {
		ut_write(f->dir, "target", "old\n", 4);
		/* a hard link to the old file keeps the old bytes: the new
		 * file is renamed in, never written over the old */
		assert_int_equal(linkat(f->dfd, "target", f->dfd, "oldlink", 0), 0);
		ut_write(f->dir, "tmp", "new!\n", 5);
		char *tmp = ut_join(f->dir, "tmp"), *target = ut_join(f->dir, "target");
		assert_int_equal(stg__replace(tmp, target, durable), 0);
		read_is(f->dir, "target", "new!\n");
		read_is(f->dir, "oldlink", "old\n");
		assert_false(ut_exists_at(f->dfd, "tmp"));
		/* nothing there yet */
		ut_write(f->dir, "tmp", "first\n", 6);
		char *fresh = ut_join(f->dir, "fresh");
		assert_int_equal(stg__replace(tmp, fresh, durable), 0);
		read_is(f->dir, "fresh", "first\n");
		assert_false(ut_exists_at(f->dfd, "tmp"));
		/* tmp missing: an error, target untouched */
		assert_int_equal(stg__replace(tmp, target, durable), -1);
		assert_int_equal(errno, ENOENT);
		read_is(f->dir, "target", "new!\n");
		/* the old file is gone, not left under another name */
		char **v;
		size_t n;
		assert_int_equal(stg__dir_names(f->dfd, "", true, &v, &n), 0);
		assert_int_equal(n, 3);
		assert_string_equal(v[0], "fresh");
		assert_string_equal(v[1], "oldlink");
		assert_string_equal(v[2], "target");
		stg__names_free(v, n);
		unlinkat(f->dfd, "target", 0);
		unlinkat(f->dfd, "oldlink", 0);
		unlinkat(f->dfd, "fresh", 0);
		free(fresh);
		free(tmp);
		free(target);
	}
}

static void test_copy_file(void **state)
{
	fx *f = *state;
	static const size_t sizes[] = {0, 1, 65536, 65537, 1000003};
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t len = sizes[i];
		uint8_t *b = ut_malloc(len + 1);
		ut_fill(b, len, i + 1);
		ut_write(f->dir, "src", b, len);
		int s = openat(f->dfd, "src", O_RDONLY);
		int d = openat(f->dfd, "dst", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		assert_int_equal(stg__copy_file(s, d, len), 0);
		close(s);
		close(d);
		char *p = ut_join(f->dir, "dst");
		size_t got;
		uint8_t *c = ut_read(p, &got);
		assert_int_equal(got, len);
		assert_memory_equal(c, b, len);
		free(c);
		free(p);
		free(b);
	}
	/* into a descriptor it cannot write */
	int s = openat(f->dfd, "src", O_RDONLY);
	int d = openat(f->dfd, "dst", O_RDONLY);
	assert_int_equal(stg__copy_file(s, d, 10), -1);
	close(s);
	close(d);
}

static void test_mkdirs_and_absolute(void **state)
{
	fx *f = *state;
	char *p = ut_join(f->dir, "x/y//z/file");
	assert_int_equal(stg__mkdirs_parent(p), 0);
	struct stat st;
	assert_int_equal(fstatat(f->dfd, "x/y/z", &st, 0), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_false(ut_exists_at(f->dfd, "x/y/z/file"));
	/* again: nothing to do */
	assert_int_equal(stg__mkdirs_parent(p), 0);
	/* no directory part */
	assert_int_equal(stg__mkdirs_parent("file"), 0);
	assert_int_equal(stg__mkdirs_parent("/file"), 0);
	/* a component that is a file */
	ut_write(f->dir, "x/plain", "", 0);
	char *q = ut_join(f->dir, "x/plain/sub/file");
	assert_int_equal(stg__mkdirs_parent(q), -1);
	assert_int_equal(errno, ENOTDIR);
	free(q);
	free(p);

	char out[64], cwd[PATH_MAX], want[PATH_MAX + 16];
	assert_int_equal(stg__absolute("/a/b", out, sizeof out), 0);
	assert_string_equal(out, "/a/b");
	assert_non_null(getcwd(cwd, sizeof cwd));
	char big[PATH_MAX + 32];
	snprintf(want, sizeof want, "%s/rel/x", cwd);
	assert_int_equal(stg__absolute("rel/x", big, sizeof big), 0);
	assert_string_equal(big, want);
	/* what does not fit is refused, not cut */
	assert_int_equal(stg__absolute("/0123456789", out, 11), -1);
	assert_int_equal(stg__absolute("/0123456789", out, 12), 0);
	assert_int_equal(stg__absolute("rel", out, strlen(cwd) + 4), -1);
	assert_int_equal(stg__absolute("rel", out, strlen(cwd) + 5), 0);
}

static void test_beneath(void **state)
{
	fx *f = *state;
	ut_mkdir(f->dir, "root");
	ut_mkdir(f->dir, "root/sub");
	ut_write(f->dir, "root/sub/f", "in\n", 3);
	ut_write(f->dir, "secret", "out\n", 4);
	int root = openat(f->dfd, "root", O_RDONLY | O_DIRECTORY);
	symlink_at(root, "sub", "lsub");
	symlink_at(root, "sub/f", "lf");
	symlink_at(root, "../secret", "escape");
	char *secret = ut_join(f->dir, "secret");
	symlink_at(root, secret, "abs");

	int fd = stg__open_beneath(root, "sub/f", O_RDONLY, 0);
	assert_true(fd >= 0);
	char buf[8] = {0};
	assert_int_equal(read(fd, buf, sizeof buf), 3);
	assert_string_equal(buf, "in\n");
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	static const char *const refused[] = {"../secret", "sub/../../secret", "lsub/f",
	                                      "lf",        "escape",           "abs"};
	for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
		errno = 0;
		fd = stg__open_beneath(root, refused[i], O_RDONLY, 0);
		if (fd >= 0)
			fail_msg("'%s' opened", refused[i]);
		assert_true(errno == EXDEV || errno == ELOOP);
	}
	errno = 0;
	assert_int_equal(stg__open_beneath(root, secret, O_RDONLY, 0), -1);
	assert_true(errno == EXDEV || errno == ELOOP);
	/* creating: the mode, and no creation through a link */
	mode_t old = umask(0);
	fd = stg__open_beneath(root, "sub/new", O_WRONLY | O_CREAT | O_EXCL, 0640);
	umask(old);
	assert_true(fd >= 0);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	close(fd);
	assert_int_equal(stg__open_beneath(root, "lsub/new2", O_WRONLY | O_CREAT, 0600), -1);
	assert_false(ut_exists_at(root, "sub/new2"));
	/* a dangling link as the last component is not created through */
	symlink_at(root, "../planted", "dangling");
	assert_int_equal(stg__open_beneath(root, "dangling", O_WRONLY | O_CREAT, 0600), -1);
	assert_false(ut_exists_at(f->dfd, "planted"));
	/* ".." that stays inside is still inside */
	fd = stg__open_beneath(root, "sub/../sub/f", O_RDONLY, 0);
	assert_true(fd >= 0);
	close(fd);

	const char *base = NULL;
	int pfd = stg__parent_of(root, "sub/f", &base);
	assert_true(pfd >= 0);
	assert_string_equal(base, "f");
	assert_true(ut_exists_at(pfd, "f"));
	close(pfd);
	pfd = stg__parent_of(root, "top", &base);
	assert_true(pfd >= 0);
	assert_string_equal(base, "top");
	assert_true(ut_exists_at(pfd, "sub"));
	close(pfd);
	assert_int_equal(stg__parent_of(root, "lsub/f", &base), -1);
	assert_int_equal(stg__parent_of(root, "../x", &base), -1);
	assert_int_equal(stg__parent_of(root, "missing/x", &base), -1);
	assert_int_equal(errno, ENOENT);
	close(root);
	free(secret);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_rmtree_links), T(test_rmtree_deep),         T(test_dir_names), T(test_replace),
        T(test_copy_file),    T(test_mkdirs_and_absolute), T(test_beneath),   T(test_dircur),
};

UT_MAIN(tests)
