/* test_mount.c - a pack mounted through FUSE (mount.c, mount_open.c,
 * mount_spawn.c), served by a child process as `stager mount` and `run
 * --mount` do: the tree readable as packed (contents, a link, modes,
 * read-only); a damaged frame fails the reads that need it with EIO while
 * the rest still reads; the mount listed with its pack and digest;
 * tied: it ends when its caller closes the tie; untied: stg_umount ends
 * it; a missing pack and a mountpoint that is not an empty directory
 * refused before anything is mounted.  Skipped where FUSE cannot mount. */
#include "unit.h"
#include "cache.h"

#include <errno.h>
#include <sys/mount.h>

typedef struct fx {
	UT_FX;
	char *mnt;
	int pid, tie;
	stg_pack_info info;
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	ut_fx_cache(&f->ut, NULL);
	f->src = ut_join(f->dir, "src");
	mkdir(f->src, 0755);
	ut_write(f->src, "good.txt", "good\n", 5);
	ut_mkdir(f->src, "sub");
	ut_fill_file(f->src, "sub/big", 600 * 1024, 2);
	ut_symlink(f->src, "link", "sub/big");
	f->pack = ut_join(f->dir, "p.tar.zst");
	ut_pack(f->ctx, f->src, f->pack, &f->info);
	f->mnt = ut_join(f->dir, "mnt");
	ut_mkdir(f->dir, "mnt");
	f->tie = -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	if (f->tie >= 0)
		close(f->tie);
	if (f->pid > 0) {
		kill(f->pid, SIGKILL);
		waitpid(f->pid, NULL, 0);
	}
	umount2(f->mnt, MNT_DETACH);
	free(f->mnt);
	return ut_teardown(state);
}

/* Spawn the mount; false (the test skipped) where FUSE cannot mount. */
static bool spawn(fx *f, int tied)
{
	stg_mount_opts o;
	stg_mount_opts_init(&o);
	stg_err err = stg_mount_spawn(f->ctx, f->c, (const char *const *)&f->pack, 1, f->mnt, &o,
	                              tied, &f->pid, tied ? &f->tie : NULL);
	if (err == STG_EIO && strstr(stg_errmsg(f->ctx), "FUSE")) {
		fprintf(stderr, "# FUSE cannot mount here: %s\n", stg_errmsg(f->ctx));
		return false;
	}
	if (err)
		fail_msg("%s", stg_errmsg(f->ctx));
	return true;
}

/* Wait (5 s at most) for process pid to end; whether it did. */
static bool ended(int pid)
{
	for (int i = 0; i < 500; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return true;
		usleep(10000);
	}
	return false;
}

static void test_tied(void **state)
{
	fx *f = *state;
	if (!spawn(f, 1))
		skip();
	assert_true(f->pid > 0 && f->tie >= 0);
	/* the tree as packed, read-only */
	ut_content_is(f->mnt, "good.txt", "good\n");
	ut_same_in(f->src, f->mnt, "sub/big");
	char *link = ut_join(f->mnt, "link");
	ut_link_is(link, "sub/big");
	char *good = ut_join(f->mnt, "good.txt");
	struct stat st;
	assert_int_equal(stat(good, &st), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(open(good, O_WRONLY), -1);
	assert_true(errno == EROFS || errno == EACCES);
	char *newf = ut_join(f->mnt, "new");
	assert_int_equal(open(newf, O_WRONLY | O_CREAT, 0644), -1);
	/* listed */
	stg_mount_info *v;
	size_t n;
	assert_int_equal(stg_mount_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].mountpoint, f->mnt);
	assert_string_equal(v[0].pack, f->pack);
	char hex[STG_DIGEST_HEXLEN + 1];
	stg_digest_hex(f->info.digest, hex);
	assert_string_equal(v[0].digest, hex);
	assert_true(v[0].alive && v[0].mounted);
	stg_mount_list_free(v, n);
	/* the caller lets go: unmounted, the child ends */
	close(f->tie);
	f->tie = -1;
	assert_true(ended(f->pid));
	f->pid = 0;
	struct stat a, b;
	assert_int_equal(stat(f->mnt, &a), 0);
	assert_int_equal(stat(f->dir, &b), 0);
	assert_int_equal(a.st_dev, b.st_dev); /* no longer a mount */
	free(link);
	free(good);
	free(newf);
}

static pid_t test_pid;

/* Messages as the tool writes them: to stderr, which in the mount's
 * process is its log file (this process's stderr stays quiet). */
static void stderr_log(void *arg, stg_log_level level, const char *msg)
{
	(void)arg;
	(void)level;
	if (getpid() != test_pid)
		fprintf(stderr, "%s\n", msg);
}

/* A damaged frame: EIO for what needs it, told once in the mount's log;
 * the rest reads. */
static void test_damaged(void **state)
{
	fx *f = *state;
	test_pid = getpid();
	stg_set_log(f->ctx, stderr_log, NULL);
	stg_pack *p;
	assert_int_equal(stg_pack_open(f->ctx, f->pack, &p), STG_OK);
	assert_true(p->t.n_frames >= 4);
	size_t k = p->t.n_frames / 2;
	const stg_frame *fr = &p->t.frames[k];
	ut_flip(f->pack, (off_t)(fr->comp_off + fr->comp_size / 2), 0x20);
	stg_pack_close(p);
	if (!spawn(f, 0))
		skip();
	ut_content_is(f->mnt, "good.txt", "good\n");
	char *big = ut_join(f->mnt, "sub/big");
	int fd = open(big, O_RDONLY);
	assert_true(fd >= 0);
	char buf[64 * 1024];
	ssize_t r;
	size_t got = 0;
	while ((r = read(fd, buf, sizeof buf)) > 0)
		got += (size_t)r;
	assert_int_equal(r, -1);
	assert_int_equal(errno, EIO);
	assert_true(got < 600 * 1024);
	/* the start of the file, before the damaged frame, still reads */
	assert_int_equal(pread(fd, buf, 4096, 0), 4096);
	close(fd);
	ut_content_is(f->mnt, "good.txt", "good\n");
	/* told once, in the mount's log */
	char *logp = ut_join(f->dir, "scratch/mounts/log");
	char *log = ut_read_text(logp);
	char want[4300];
	snprintf(want, sizeof want,
	         "'%s': frame %zu is damaged (its bytes do not match the frame "
	         "table's XXH3-128): reads of it fail (EIO)",
	         f->pack, k);
	assert_non_null(strstr(log, want));
	assert_null(strstr(strstr(log, want) + strlen(want), "is damaged"));
	free(log);
	free(logp);
	/* untied: ended by stg_umount */
	assert_int_equal(stg_umount(f->ctx, f->c, f->mnt), STG_OK);
	assert_true(ended(f->pid));
	f->pid = 0;
	/* not a mount any more: refused */
	assert_int_equal(stg_umount(f->ctx, f->c, f->mnt), STG_EUSAGE);
	free(big);
}

static void test_refused(void **state)
{
	fx *f = *state;
	stg_mount_opts o;
	stg_mount_opts_init(&o);
	char *missing = ut_join(f->dir, "missing.tar.zst");
	int pid = 0, tie = -1;
	assert_int_equal(stg_mount_spawn(f->ctx, f->c, (const char *const *)&missing, 1, f->mnt, &o,
	                                 1, &pid, &tie),
	                 STG_ENOENT);
	ut_write(f->mnt, "inside", "x", 1);
	stg_err err = stg_mount_spawn(f->ctx, f->c, (const char *const *)&f->pack, 1, f->mnt, &o, 1,
	                              &pid, &tie);
	assert_int_equal(err, STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(f->ctx), f->mnt));
	/* nothing recorded */
	stg_mount_info *v;
	size_t n;
	assert_int_equal(stg_mount_list(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	stg_mount_list_free(v, n);
	free(missing);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_tied),
        T(test_damaged),
        T(test_refused),
};

UT_MAIN(tests)
