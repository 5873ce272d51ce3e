/* test_xfer_index.c - the stat-keyed index of a transfer's end
 * (xfer_index.c): a file is vouched for only while its inode, size, mtime,
 * ctime and mode are those entered; a file changed at or after the clock's
 * bound (racy) is never entered; an index that is damaged, about another
 * tree or device, or not the user's own file is ignored whole. */
#include "unit.h"
#include "xfer_index.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint8_t H1[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

static struct stat fake_stat(uint64_t ino, int64_t ct_sec)
{
	struct stat st;
	memset(&st, 0, sizeof st);
	st.st_mode = S_IFREG | 0644;
	st.st_dev = 42;
	st.st_ino = ino;
	st.st_size = 1000;
	st.st_mtim.tv_sec = 100;
	st.st_mtim.tv_nsec = 5;
	st.st_ctim.tv_sec = ct_sec;
	st.st_ctim.tv_nsec = 7;
	return st;
}

static int tmpdir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/test_xfer_index.XXXXXX",
	         getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	assert_non_null(mkdtemp(buf));
	int fd = open(buf, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	return fd;
}

static void cleanup(int dfd, const char *dir)
{
	unlinkat(dfd, "idx", 0);
	unlinkat(dfd, "idx.tmp", 0);
	close(dfd);
	rmdir(dir);
}

/* an index with "a" (ctime 200, before the bound) and "racy" (ctime at the
 * bound: left out), saved and loaded */
static void save_two(int dfd)
{
	stg_xindex_out o;
	stg__xindex_begin(&o, 42, 9, (int64_t)300 * 1000000000);
	struct stat a = fake_stat(11, 200), racy = fake_stat(12, 300);
	racy.st_ctim.tv_nsec = 0;
	stg__xindex_add(&o, "a", &a, H1, false);
	stg__xindex_add(&o, "racy", &racy, H1, false);
	/* vouched for by an older index: kept whatever the bound */
	struct stat old = fake_stat(13, 400);
	stg__xindex_add(&o, "kept", &old, H1, true);
	assert_int_equal(o.n, 2);
	assert_int_equal(stg__xindex_save(&o, dfd, "idx", "idx.tmp"), 0);
}

static void test_vouch_exact(void **state)
{
	(void)state;
	char dir[256];
	int dfd = tmpdir(dir, sizeof dir);
	save_two(dfd);
	stg_xindex x;
	const char *why;
	const uint8_t *h;
	stg__xindex_load(&x, dfd, "idx", 42, 9, &why);
	assert_string_equal(why, "");
	struct stat a = fake_stat(11, 200);
	assert_true(stg__xindex_vouch(&x, "a", &a, &h));
	assert_memory_equal(h, H1, 16);
	assert_false(stg__xindex_vouch(&x, "racy", &a, &h));
	struct stat k = fake_stat(13, 400);
	assert_true(stg__xindex_vouch(&x, "kept", &k, &h));
	/* each part of the key on its own */
	struct stat b = a;
	b.st_ctim.tv_nsec++; /* touch -d put the mtime back: the ctime moved */
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_mtim.tv_sec++;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_size++;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_ino++;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_dev++;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_mode = S_IFREG | 0600;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	b = a;
	b.st_mode = S_IFLNK | 0644;
	assert_false(stg__xindex_vouch(&x, "a", &b, &h));
	assert_false(stg__xindex_vouch(&x, "b", &a, &h));
	stg__xindex_free(&x);
	cleanup(dfd, dir);
}

static void test_ignored_whole(void **state)
{
	(void)state;
	char dir[256];
	int dfd = tmpdir(dir, sizeof dir);
	save_two(dfd);
	stg_xindex x;
	const char *why;
	const uint8_t *h;
	struct stat a = fake_stat(11, 200);
	/* another tree's root, another device */
	stg__xindex_load(&x, dfd, "idx", 42, 10, &why);
	assert_string_not_equal(why, "");
	assert_false(stg__xindex_vouch(&x, "a", &a, &h));
	stg__xindex_free(&x);
	stg__xindex_load(&x, dfd, "idx", 43, 9, &why);
	assert_false(stg__xindex_vouch(&x, "a", &a, &h));
	stg__xindex_free(&x);
	/* one byte flipped anywhere: the checksum */
	int fd = openat(dfd, "idx", O_RDWR);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	for (off_t off = 0; off < st.st_size; off += 7) {
		uint8_t c;
		assert_int_equal(pread(fd, &c, 1, off), 1);
		c ^= 0x20;
		assert_int_equal(pwrite(fd, &c, 1, off), 1);
		stg__xindex_load(&x, dfd, "idx", 42, 9, &why);
		assert_string_not_equal(why, "");
		assert_false(stg__xindex_vouch(&x, "a", &a, &h));
		stg__xindex_free(&x);
		c ^= 0x20;
		assert_int_equal(pwrite(fd, &c, 1, off), 1);
	}
	/* cut short */
	assert_int_equal(ftruncate(fd, st.st_size - 1), 0);
	stg__xindex_load(&x, dfd, "idx", 42, 9, &why);
	assert_false(stg__xindex_vouch(&x, "a", &a, &h));
	stg__xindex_free(&x);
	close(fd);
	/* a second link: not a file of the user's alone */
	save_two(dfd);
	assert_int_equal(linkat(dfd, "idx", dfd, "idx.tmp", 0), 0);
	stg__xindex_load(&x, dfd, "idx", 42, 9, &why);
	assert_string_equal(why, "it is not a file of yours");
	stg__xindex_free(&x);
	unlinkat(dfd, "idx.tmp", 0);
	/* another user's (root only: chown) */
	if (geteuid() == 0) {
		assert_int_equal(fchownat(dfd, "idx", 65534, 65534, 0), 0);
		stg__xindex_load(&x, dfd, "idx", 42, 9, &why);
		assert_string_equal(why, "it is not a file of yours");
		assert_false(stg__xindex_vouch(&x, "a", &a, &h));
		stg__xindex_free(&x);
	}
	/* absent: empty, nothing to say */
	stg__xindex_load(&x, dfd, "none", 42, 9, &why);
	assert_string_equal(why, "");
	stg__xindex_free(&x);
	cleanup(dfd, dir);
}

/* the clock's bound for a local filesystem is this host's coarse clock:
 * a file changed after the bound was taken has a ctime at or after it, so
 * it is never taken as older than the bound (a kernel with multigrain
 * timestamps may stamp a change made before the bound after it: that
 * file is only left out, which is safe) */
static void test_now(void **state)
{
	(void)state;
	char dir[256];
	int dfd = tmpdir(dir, sizeof dir);
	int fd = openat(dfd, "idx", O_WRONLY | O_CREAT, 0600);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	int64_t b = stg__xindex_now(fd, (uint64_t)st.st_dev);
	struct stat st2;
	assert_int_equal(fstat(fd, &st2), 0);
	/* the touch's own mtime */
	assert_true(b == stg__ns_of(&st2.st_mtim));
	assert_true(b >= stg__ns_of(&st.st_ctim));
	int64_t c = stg__xindex_now(-1, (uint64_t)st.st_dev);
	int later = openat(dfd, "later", O_WRONLY | O_CREAT, 0600);
	struct stat st3;
	assert_int_equal(fstat(later, &st3), 0);
	assert_true(stg__ns_of(&st3.st_ctim) >= c);
	close(later);
	unlinkat(dfd, "later", 0);
	close(fd);
	cleanup(dfd, dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_vouch_exact),
	        cmocka_unit_test(test_ignored_whole),
	        cmocka_unit_test(test_now),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
