/* test_cache.c - the per-node cache on scratch (cache.c): opening a root
 * (private 0700, $USER expanded, shared parents sticky, links and files
 * refused), the job's own scratch, locks (and clean's removal of free
 * ones, safe against a waiter), owners and their liveness,
 * keys, meta, pins, listing least recently used first, eviction under
 * cache_max and min_free with pinned entries kept and the figures named. */
#include "unit.h"
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>

typedef ut_fx fx;

static void assert_mode(const char *path, mode_t mode)
{
	struct stat st;
	if (lstat(path, &st))
		fail_msg("'%s' missing", path);
	assert_true(S_ISDIR(st.st_mode));
	if ((st.st_mode & 07777) != mode)
		fail_msg("'%s' has mode %04o, want %04o", path, st.st_mode & 07777, mode);
}

static stg_err open_root(fx *f, const char *root, stg_cache **c)
{
	stg_config *cfg = stg_config_new();
	assert_int_equal(stg_config_set(f->ctx, cfg, "scratch_root", root, "--scratch"), STG_OK);
	char *slots = ut_join(f->dir, "slots");
	assert_int_equal(stg_config_set(f->ctx, cfg, "slot_dir", slots, "t"), STG_OK);
	free(slots);
	stg_err err = stg_cache_open(f->ctx, cfg, c);
	stg_config_free(cfg);
	return err;
}

static void test_open(void **state)
{
	fx *f = *state;
	mode_t old = umask(0);
	char *root = ut_join(f->dir, "a/b/root");
	stg_cache *c;
	assert_int_equal(open_root(f, root, &c), STG_OK);
	umask(old);
	assert_string_equal(stg_cache_root(c), root);
	assert_mode(root, 0700);
	static const char *const sub[] = {"cache", "locks", "pins", "jobs"};
	for (size_t i = 0; i < 4; i++) {
		char *p = ut_join(root, sub[i]);
		assert_mode(p, 0700);
		free(p);
	}
	/* the parents made on the way are the user's own, private too */
	char *a = ut_join(f->dir, "a");
	assert_mode(a, 0700);
	stg_cache_close(c);
	stg_cache_close(NULL);
	/* opened again: the same; a root made open to others is closed */
	assert_int_equal(chmod(root, 0755), 0);
	assert_int_equal(open_root(f, root, &c), STG_OK);
	assert_mode(root, 0700);
	stg_cache_close(c);
	free(a);
	free(root);
}

static void test_open_user(void **state)
{
	fx *f = *state;
	char *user = ut_env_save("USER");
	setenv("USER", "unit-user", 1);
	char *pattern = ut_join(f->dir, "shared/$USER/stager");
	stg_cache *c;
	mode_t old = umask(022);
	assert_int_equal(open_root(f, pattern, &c), STG_OK);
	umask(old);
	char *want = ut_join(f->dir, "shared/unit-user/stager");
	assert_string_equal(stg_cache_root(c), want);
	stg_cache_close(c);
	/* the directory that holds every user's: sticky and open to all,
	 * past the umask; from $USER on: private */
	char *shared = ut_join(f->dir, "shared"), *mine = ut_join(f->dir, "shared/unit-user");
	assert_mode(shared, 01777);
	assert_mode(mine, 0700);
	/* ${USER} too */
	char *p2 = ut_join(f->dir, "s2/${USER}");
	assert_int_equal(open_root(f, p2, &c), STG_OK);
	char *want2 = ut_join(f->dir, "s2/unit-user");
	assert_string_equal(stg_cache_root(c), want2);
	stg_cache_close(c);
	/* a shared parent that anyone may write to but is not sticky:
	 * refused, named, with what to do */
	char *p3 = ut_join(f->dir, "open/$USER");
	char *open_dir = ut_join(f->dir, "open");
	assert_int_equal(mkdir(open_dir, 0777), 0);
	assert_int_equal(chmod(open_dir, 0777), 0);
	assert_int_equal(open_root(f, p3, &c), STG_EIO);
	assert_null(c);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is writable by every user but not sticky "
	                                           "(mode 0777)"));
	assert_non_null(strstr(stg_errmsg(f->ctx), open_dir));
	free(open_dir);
	free(p3);
	free(want2);
	free(p2);
	free(shared);
	free(mine);
	free(want);
	free(pattern);
	ut_env_restore("USER", user);
}

static void test_open_refused(void **state)
{
	fx *f = *state;
	stg_cache *c = (stg_cache *)0x1;
	/* a link as the root */
	char *real = ut_join(f->dir, "real"), *link = ut_join(f->dir, "link");
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink("real", link), 0);
	assert_int_equal(open_root(f, link, &c), STG_EIO);
	assert_null(c);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is not a directory (a link?)"));
	/* a file */
	ut_write(f->dir, "file", "", 0);
	char *file = ut_join(f->dir, "file");
	assert_int_equal(open_root(f, file, &c), STG_EIO);
	assert_non_null(strstr(stg_errmsg(f->ctx), "is not a directory"));
	/* beneath a file */
	char *under = ut_join(f->dir, "file/root");
	assert_int_equal(open_root(f, under, &c), STG_EIO);
	assert_non_null(strstr(stg_errmsg(f->ctx), "cannot create"));
	/* another user's (as root: given away) */
	if (geteuid() == 0) {
		char *other = ut_join(f->dir, "other");
		assert_int_equal(mkdir(other, 0700), 0);
		assert_int_equal(chown(other, 65534, 65534), 0);
		assert_int_equal(open_root(f, other, &c), STG_EIO);
		assert_non_null(strstr(stg_errmsg(f->ctx), "belongs to "));
		assert_non_null(strstr(stg_errmsg(f->ctx), "not to you (uid 0)"));
		free(other);
	}
	free(under);
	free(file);
	free(real);
	free(link);
}

static void test_job_tmpdir(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	const char *var = NULL;
	assert_null(stg_job_tmpdir(f->c, &var));
	assert_string_equal(var, "SLURM_TMPDIR");
	setenv("SLURM_TMPDIR", "/local/job42", 1);
	assert_string_equal(stg_job_tmpdir(f->c, NULL), "/local/job42");
	setenv("SLURM_TMPDIR", "relative", 1);
	assert_null(stg_job_tmpdir(f->c, NULL));
	unsetenv("SLURM_TMPDIR");
	/* another variable counts only inside a job */
	ut_fx_cache(f, (const char *const[]){"job_tmpdir_var", "JOB_SCRATCH", NULL});
	setenv("JOB_SCRATCH", "/local/js", 1);
	assert_null(stg_job_tmpdir(f->c, &var));
	assert_string_equal(var, "JOB_SCRATCH");
	setenv("SLURM_JOB_ID", "42", 1);
	assert_string_equal(stg_job_tmpdir(f->c, NULL), "/local/js");
	unsetenv("SLURM_JOB_ID");
	unsetenv("JOB_SCRATCH");
}

typedef struct later {
	int fd;
	double after;
} later;

static void *unlock_later(void *arg)
{
	later *l = arg;
	struct timespec ts = {0, (long)(l->after * 1e9)};
	nanosleep(&ts, NULL);
	stg__cache_unlock(l->fd);
	return NULL;
}

static void test_locks(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	bool waited = true;
	int a = stg__cache_lock(f->ctx, f->c, "k", false, &waited);
	assert_true(a >= 0);
	assert_false(waited);
	/* busy: -1 without waiting */
	assert_int_equal(stg__cache_lock(f->ctx, f->c, "k", false, &waited), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	/* another name is another lock */
	int b = stg__cache_lock(f->ctx, f->c, "other", false, NULL);
	assert_true(b >= 0);
	stg__cache_unlock(b);
	/* waiting: until the holder lets go */
	later l = {a, 0.2};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, unlock_later, &l), 0);
	double t0 = stg__now();
	int c = stg__cache_lock(f->ctx, f->c, "k", true, &waited);
	assert_true(c >= 0);
	assert_true(waited);
	assert_true(stg__now() - t0 >= 0.15);
	pthread_join(th, NULL);
	stg__cache_unlock(c);
	stg__cache_unlock(-1);
	/* the lock file, private, under locks/ */
	char *p = ut_join(stg_cache_root(f->c), "locks/k");
	struct stat st;
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	free(p);
}

typedef struct waiter {
	fx *f;
	bool waited;
	int fd;
} waiter;

static void *lock_k(void *arg)
{
	waiter *w = arg;
	w->fd = stg__cache_lock(w->f->ctx, w->f->c, "k", true, &w->waited);
	return NULL;
}

static bool lock_exists(fx *f, const char *name)
{
	char *p = ut_join(stg_cache_root(f->c), name);
	struct stat st;
	bool there = lstat(p, &st) == 0;
	free(p);
	return there;
}

/* clean removes the lock files nobody holds; a process that opened one
 * before it went and then got its flock takes the lock anew, so that two
 * processes never both hold "k" */
static void test_locks_cleaned(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	int held = stg__cache_lock(f->ctx, f->c, "held", false, NULL);
	assert_true(held >= 0);
	stg__cache_unlock(stg__cache_lock(f->ctx, f->c, "free", false, NULL));
	stg__cache_unlock(stg__cache_lock(f->ctx, f->c, "index", false, NULL));
	stg__clean_locks(f->c);
	assert_true(lock_exists(f, "locks/held"));
	assert_false(lock_exists(f, "locks/free"));
	assert_true(lock_exists(f, "locks/index"));
	stg__cache_unlock(held);
	stg__clean_locks(f->c);
	assert_false(lock_exists(f, "locks/held"));

	/* the race: a waiter has opened locks/k; clean (holding its flock)
	 * removes it and lets go */
	int a = stg__cache_lock(f->ctx, f->c, "k", false, NULL);
	assert_true(a >= 0);
	waiter w = {f, false, -1};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, lock_k, &w), 0);
	for (int i = 0; i < 500 && !__atomic_load_n(&w.waited, __ATOMIC_SEQ_CST); i++)
		stg__nap(NULL, 0.01);
	assert_true(__atomic_load_n(&w.waited, __ATOMIC_SEQ_CST));
	char *k = ut_join(stg_cache_root(f->c), "locks/k");
	assert_int_equal(unlink(k), 0);
	stg__cache_unlock(a);
	pthread_join(th, NULL);
	assert_true(w.fd >= 0);
	/* the waiter holds the file now under the name, so nobody else can */
	struct stat held_st, named;
	assert_int_equal(fstat(w.fd, &held_st), 0);
	assert_int_equal(lstat(k, &named), 0);
	assert_true(held_st.st_ino == named.st_ino);
	assert_int_equal(stg__cache_lock(f->ctx, f->c, "k", false, NULL), -1);
	assert_int_equal(errno, EWOULDBLOCK);
	stg__cache_unlock(w.fd);
	free(k);
}

static void test_owners(void **state)
{
	fx *f = *state;
	(void)f;
	char *me = stg_owner_process(getpid());
	char want[64];
	snprintf(want, sizeof want, "pid-%d-", (int)getpid());
	assert_memory_equal(me, want, strlen(want));
	assert_true(strlen(me) > strlen(want));
	stg_owner_cache oc = {0};
	assert_true(stg__owner_alive(&oc, me));
	/* the same pid with another start time is another process */
	char other[160];
	snprintf(other, sizeof other, "%s1", me);
	assert_false(stg__owner_alive(&oc, other));
	/* a process that ended */
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	char *gone = stg_owner_process(pid);
	waitpid(pid, NULL, 0);
	assert_false(stg__owner_alive(&oc, gone));
	/* and a zombie is dead too */
	pid = fork();
	if (pid == 0)
		_exit(0);
	char *zombie = stg_owner_process(pid);
	struct timespec ts = {0, 100 * 1000 * 1000};
	nanosleep(&ts, NULL);
	stg_owner_cache oc2 = {0};
	assert_false(stg__owner_alive(&oc2, zombie));
	waitpid(pid, NULL, 0);
	/* unknown forms: kept (when in doubt, keep) */
	assert_true(stg__owner_alive(&oc, "someone"));
	assert_true(stg__owner_alive(&oc, "pid-x"));
	assert_false(stg__owner_alive(&oc, "pid-1-0"));
	/* a job, with no squeue to ask: kept */
	char *path = ut_path_set("/nonexistent", NULL);
	assert_true(stg__owner_alive(&oc, "job-12345"));
	ut_path_restore(path);
	/* answers are remembered for the operation */
	size_t n = oc.n;
	assert_true(stg__owner_alive(&oc, me));
	assert_int_equal(oc.n, n);
	free(me);
	free(gone);
	free(zombie);

	/* the default owner: the job, else a lasting process */
	setenv("SLURM_JOB_ID", "987", 1);
	char *o = stg__default_owner();
	assert_string_equal(o, "job-987");
	free(o);
	setenv("SLURM_JOB_ID", "../x", 1);
	o = stg__default_owner();
	assert_memory_equal(o, "pid-", 4);
	free(o);
	unsetenv("SLURM_JOB_ID");
	o = stg__default_owner();
	assert_memory_equal(o, "pid-", 4);
	stg_owner_cache oc3 = {0};
	assert_true(stg__owner_alive(&oc3, o));
	free(o);
}

static void test_keys(void **state)
{
	(void)state;
	char key[100];
	memset(key, 'a', 64);
	key[64] = '\0';
	assert_true(stg__key_ok(key));
	strcpy(key + 64, "-0123456789abcdef");
	assert_true(stg__key_ok(key));
	key[70] = '-';
	assert_false(stg__key_ok(key));
	key[70] = '5';
	strcpy(key + 64, "-0123456789abcdef0");
	assert_false(stg__key_ok(key));
	key[63] = '\0';
	assert_false(stg__key_ok(key));
	memset(key, 'A', 64);
	key[64] = '\0';
	assert_false(stg__key_ok(key));
	memset(key, '0', 64);
	key[10] = '/';
	assert_false(stg__key_ok(key));
	assert_false(stg__key_ok(""));
	assert_false(stg__key_ok(".."));
}

/* Make a published entry by hand: cache/<key>/data and meta. */
static void make_entry(stg_cache *c, const char *key, uint64_t size, int64_t last_use,
                       const char *source)
{
	char p[256];
	snprintf(p, sizeof p, "cache/%s", key);
	assert_int_equal(mkdirat(c->rootfd, p, 0700), 0);
	snprintf(p, sizeof p, "cache/%s/data", key);
	assert_int_equal(mkdirat(c->rootfd, p, 0755), 0);
	snprintf(p, sizeof p, "cache/%s", key);
	int dfd = openat(c->rootfd, p, O_RDONLY | O_DIRECTORY);
	stg_meta m = {.size = size, .files = 3, .content = size - 1};
	snprintf(m.kind, sizeof m.kind, "pack");
	snprintf(m.source, sizeof m.source, "%s", source);
	assert_int_equal(stg__meta_write(dfd, &m), 0);
	struct timespec ts[2] = {{last_use, 0}, {last_use, 0}};
	assert_int_equal(utimensat(dfd, "meta", ts, 0), 0);
	close(dfd);
}

static void test_meta(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	const char *k = ut_key(1);
	assert_false(stg__entry_exists(f->c, k));
	make_entry(f->c, k, 12345, 1000000, "/shared/data set.tar.zst");
	assert_true(stg__entry_exists(f->c, k));
	stg_meta m;
	assert_int_equal(stg__meta_read(f->c, k, &m), 0);
	assert_string_equal(m.kind, "pack");
	assert_string_equal(m.source, "/shared/data set.tar.zst");
	assert_int_equal(m.size, 12345);
	assert_int_equal(m.files, 3);
	assert_int_equal(m.content, 12344);
	assert_int_equal(m.last_use, 1000000);
	/* touched: now */
	stg__entry_touch(f->c, k);
	assert_int_equal(stg__meta_read(f->c, k, &m), 0);
	assert_true(m.last_use >= time(NULL) - 5);
	/* read-only for its owner */
	char p[256];
	snprintf(p, sizeof p, "cache/%s/meta", k);
	struct stat st;
	assert_int_equal(fstatat(f->c->rootfd, p, &st, 0), 0);
	assert_int_equal(st.st_mode & 0777, 0400);
	/* no meta: no entry */
	assert_int_equal(stg__meta_read(f->c, ut_key(2), &m), -1);
	assert_int_equal(unlinkat(f->c->rootfd, p, 0), 0);
	assert_false(stg__entry_exists(f->c, k));
	/* a meta that is a directory is not an entry */
	assert_int_equal(mkdirat(f->c->rootfd, p, 0700), 0);
	assert_false(stg__entry_exists(f->c, k));
}

static void test_pins(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	const char *k = ut_key(3);
	char *me = stg_owner_process(getpid());
	assert_int_equal(stg__pin(f->c, k, me), 0);
	assert_int_equal(stg__pin(f->c, k, me), 1);
	assert_int_equal(stg__pin(f->c, k, "pid-1-0"), 0);
	/* owner names that are not one path component are refused */
	static const char *const bad[] = {"", "../x", "a/b", ".hidden", "a b", "x\n"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		errno = 0;
		assert_int_equal(stg__pin(f->c, k, bad[i]), -1);
		assert_int_equal(errno, EINVAL);
	}
	char longname[200];
	memset(longname, 'a', 129);
	longname[129] = '\0';
	assert_int_equal(stg__pin(f->c, k, longname), -1);
	char owners[8][160];
	assert_int_equal(stg__pins_list(f->c, k, owners, 8), 2);
	assert_int_equal(stg__pins_list(f->c, k, owners, 1), 1);
	assert_int_equal(stg__pins_list(f->c, ut_key(4), owners, 8), 0);
	/* pinned while one owner lives */
	stg_owner_cache oc = {0};
	assert_true(stg__entry_pinned(f->c, k, &oc));
	stg__unpin_key(f->c, k, me);
	stg_owner_cache oc2 = {0};
	assert_false(stg__entry_pinned(f->c, k, &oc2)); /* pid-1-0 is dead */
	/* the last pin gone: the directory goes too */
	stg__unpin_key(f->c, k, "pid-1-0");
	char p[128];
	snprintf(p, sizeof p, "pins/%s", k);
	struct stat st;
	assert_int_equal(fstatat(f->c->rootfd, p, &st, 0), -1);
	/* stg_unpin: every pin of an owner */
	assert_int_equal(stg__pin(f->c, ut_key(5), "job-1"), 0);
	assert_int_equal(stg__pin(f->c, ut_key(6), "job-1"), 0);
	assert_int_equal(stg__pin(f->c, ut_key(6), "job-2"), 0);
	assert_int_equal(stg_unpin(f->ctx, f->c, "job-1"), STG_OK);
	assert_int_equal(stg__pins_list(f->c, ut_key(5), owners, 8), 0);
	assert_int_equal(stg__pins_list(f->c, ut_key(6), owners, 8), 1);
	assert_string_equal(owners[0], "job-2");
	free(me);
}

static void test_entries_lru(void **state)
{
	fx *f = *state;
	f->c = ut_cache(f->ctx, f->dir, NULL);
	make_entry(f->c, ut_key(1), 100, 3000, "/s/one");
	make_entry(f->c, ut_key(2), 200, 1000, "/s/two");
	make_entry(f->c, ut_key(3), 300, 2000, "/s/three");
	/* not entries: a build, an old one, a stray name, no meta */
	char p[256];
	snprintf(p, sizeof p, "cache/%s.tmp.123", ut_key(4));
	mkdirat(f->c->rootfd, p, 0700);
	mkdirat(f->c->rootfd, "cache/junk", 0700);
	snprintf(p, sizeof p, "cache/%s", ut_key(5));
	mkdirat(f->c->rootfd, p, 0700);
	stg_lru *v;
	size_t n = stg__entries(f->c, &v);
	assert_int_equal(n, 3);
	assert_string_equal(v[0].key, ut_key(2));
	assert_string_equal(v[1].key, ut_key(3));
	assert_string_equal(v[2].key, ut_key(1));
	assert_int_equal(v[0].size, 200);
	assert_int_equal(v[0].last_use, 1000);
	free(v);
	/* removed: gone whole, its pins too */
	assert_int_equal(stg__pin(f->c, ut_key(2), "job-9"), 0);
	assert_int_equal(stg__entry_remove(f->c, ut_key(2)), 0);
	assert_false(stg__entry_exists(f->c, ut_key(2)));
	snprintf(p, sizeof p, "pins/%s", ut_key(2));
	struct stat st;
	assert_int_equal(fstatat(f->c->rootfd, p, &st, 0), -1);
	char **names;
	size_t k;
	assert_int_equal(stg__dir_names(f->c->rootfd, "cache", true, &names, &k), 0);
	for (size_t i = 0; i < k; i++)
		assert_null(strstr(names[i], ".old."));
	stg__names_free(names, k);
	assert_int_equal(stg__entry_remove(f->c, ut_key(2)), -1);
	n = stg__entries(f->c, &v);
	assert_int_equal(n, 2);
	free(v);
}

static void test_space(void **state)
{
	fx *f = *state;
	const char *set[] = {"cache_max", "50%", "min_free", "1G", NULL};
	f->c = ut_cache(f->ctx, f->dir, set);
	stg_space sp;
	assert_int_equal(stg__space(f->ctx, f->c, &sp), STG_OK);
	assert_true(sp.fs_size > 0);
	assert_true(sp.fs_free <= sp.fs_size);
	assert_int_equal(sp.cache_max, (uint64_t)((double)sp.fs_size * 0.5));
	assert_int_equal(sp.min_free, 1ull << 30);
}

static void test_make_room(void **state)
{
	fx *f = *state;
	const char *set[] = {"cache_max", "1000", NULL};
	f->c = ut_cache(f->ctx, f->dir, set);
	make_entry(f->c, ut_key(1), 300, 1000, "/s/oldest");
	make_entry(f->c, ut_key(2), 300, 2000, "/s/pinned");
	make_entry(f->c, ut_key(3), 300, 3000, "/s/newer");
	char *me = stg_owner_process(getpid());
	assert_int_equal(stg__pin(f->c, ut_key(2), me), 0);
	/* fits: nothing goes */
	assert_int_equal(stg__make_room(f->ctx, f->c, 100, NULL), STG_OK);
	stg_lru *v;
	assert_int_equal(stg__entries(f->c, &v), 3);
	free(v);
	assert_int_equal(f->log.n, 0);
	/* 400 more: the oldest unpinned goes, and only it */
	assert_int_equal(stg__make_room(f->ctx, f->c, 400, NULL), STG_OK);
	assert_false(stg__entry_exists(f->c, ut_key(1)));
	assert_true(stg__entry_exists(f->c, ut_key(2)));
	assert_true(stg__entry_exists(f->c, ut_key(3)));
	assert_non_null(strstr(f->log.text, "evicted the cached copy of '/s/oldest' (300 B, the "
	                                    "least recently used) to make room"));
	/* the one being staged (keep) and the pinned one stay: not enough */
	assert_int_equal(stg__make_room(f->ctx, f->c, 800, ut_key(3)), STG_ENOSPC);
	assert_true(stg__entry_exists(f->c, ut_key(2)));
	assert_true(stg__entry_exists(f->c, ut_key(3)));
	char want[512];
	snprintf(want, sizeof want,
	         "not enough room in the cache on %s: need 800 B, at most 400 B available under "
	         "cache_max 1000 B (cache 600 B, of which 0 B evictable; the rest is pinned by "
	         "live jobs); nothing was evicted",
	         stg_cache_root(f->c));
	assert_string_equal(stg_errmsg(f->ctx), want);
	/* without keep, the newer one goes; the pinned one never */
	assert_int_equal(stg__make_room(f->ctx, f->c, 700, NULL), STG_OK);
	assert_false(stg__entry_exists(f->c, ut_key(3)));
	assert_true(stg__entry_exists(f->c, ut_key(2)));
	assert_int_equal(stg__make_room(f->ctx, f->c, 701, NULL), STG_ENOSPC);
	assert_true(stg__entry_exists(f->c, ut_key(2)));
	/* a pin of a dead owner does not hold it */
	stg__unpin_key(f->c, ut_key(2), me);
	assert_int_equal(stg__pin(f->c, ut_key(2), "pid-1-0"), 0);
	assert_int_equal(stg__make_room(f->ctx, f->c, 701, NULL), STG_OK);
	assert_false(stg__entry_exists(f->c, ut_key(2)));
	free(me);
}

/* min_free: the floor of free space; 100% can never hold. */
static void test_min_free(void **state)
{
	fx *f = *state;
	const char *set[] = {"min_free", "100%", NULL};
	f->c = ut_cache(f->ctx, f->dir, set);
	make_entry(f->c, ut_key(1), 10, 1000, "/s/x");
	assert_int_equal(stg__make_room(f->ctx, f->c, 1, NULL), STG_ENOSPC);
	/* it could never fit: the unpinned entry stays */
	assert_true(stg__entry_exists(f->c, ut_key(1)));
	char want[256];
	snprintf(want, sizeof want, "not enough space on %s: need 1 B, 0 B available (",
	         stg_cache_root(f->c));
	assert_memory_equal(stg_errmsg(f->ctx), want, strlen(want));
	assert_non_null(strstr(stg_errmsg(f->ctx), " free, min_free "));
	assert_non_null(strstr(stg_errmsg(f->ctx),
	                       "cache 10 B, of which 10 B evictable); nothing was evicted"));
	assert_int_equal(f->log.n, 0);
}

/* What can never fit is refused before anything is evicted: larger than
 * cache_max, or than what evicting every unpinned entry would free. */
static void test_make_room_never(void **state)
{
	fx *f = *state;
	const char *set[] = {"cache_max", "1000", NULL};
	f->c = ut_cache(f->ctx, f->dir, set);
	make_entry(f->c, ut_key(1), 300, 1000, "/s/old");
	make_entry(f->c, ut_key(2), 300, 2000, "/s/pinned");
	char *me = stg_owner_process(getpid());
	assert_int_equal(stg__pin(f->c, ut_key(2), me), 0);
	/* larger than the cap itself */
	assert_int_equal(stg__make_room(f->ctx, f->c, 1001, NULL), STG_ENOSPC);
	assert_true(stg__entry_exists(f->c, ut_key(1)));
	assert_int_equal(f->log.n, 0);
	char want[512];
	snprintf(want, sizeof want,
	         "not enough room in the cache on %s: need 1001 B, at most 700 B available under "
	         "cache_max 1000 B (cache 600 B, of which 300 B evictable; the rest is pinned by "
	         "live jobs); nothing was evicted: raise cache_max",
	         stg_cache_root(f->c));
	assert_string_equal(stg_errmsg(f->ctx), want);
	/* within the cap, but more than evicting the old one would free */
	assert_int_equal(stg__make_room(f->ctx, f->c, 701, NULL), STG_ENOSPC);
	assert_true(stg__entry_exists(f->c, ut_key(1)));
	assert_int_equal(f->log.n, 0);
	/* what can fit still evicts */
	assert_int_equal(stg__make_room(f->ctx, f->c, 700, NULL), STG_OK);
	assert_false(stg__entry_exists(f->c, ut_key(1)));
	assert_true(stg__entry_exists(f->c, ut_key(2)));
	free(me);
}

#define T(name) cmocka_unit_test_setup_teardown(name, ut_setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_open),      T(test_open_user),     T(test_open_refused),    T(test_job_tmpdir),
        T(test_locks),     T(test_locks_cleaned), T(test_owners),          T(test_keys),
        T(test_meta),      T(test_pins),          T(test_entries_lru),     T(test_space),
        T(test_make_room), T(test_min_free),      T(test_make_room_never),
};

UT_MAIN(tests)
