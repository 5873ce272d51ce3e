/* test_limit.c - sparing the shared FS (limit.c): node slots in a
 * temporary slot directory (N slots, the N+1st waits until its deadline
 * or slot_wait_max and then goes ahead with a warning naming the holders,
 * a slot freed by release or by its holder's death, cancel, unusable slot
 * directories and planted slot files), cluster leases (taken, renewed,
 * waited for, broken when expired, removed only while still ours), the
 * limits' settings and idle I/O priority. */
#include "unit.h"
#include "cache.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

typedef struct fx {
	UT_FX;
	char *slots, *leases;
	pid_t child; /* killed in teardown if a test fails early */
} fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->slots = ut_join(f->dir, "slots");
	f->leases = ut_join(f->dir, "leases");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	ut_kill(&f->child);
	free(f->slots);
	free(f->leases);
	return ut_teardown(state);
}

static stg_cache *cache_with(fx *f, const char *readers, const char *wait_max)
{
	const char *set[] = {"max_readers_per_node", readers, "slot_wait_max", wait_max, NULL};
	return ut_cache(f->ctx, f->dir, set);
}

/* In a child (ut_child): a node slot of lim taken. */
static int hold_slot(void *lim)
{
	stg_slot s;
	stg_ctx *ctx = stg_ctx_new();
	return stg__slot_acquire(ctx, lim, &s) || s.fd < 0;
}

static void test_slots(void **state)
{
	fx *f = *state;
	stg_cache *c = cache_with(f, "2", "0");
	stg_slot a, b, d;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &a), STG_OK);
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &b), STG_OK);
	assert_true(a.fd >= 0);
	assert_true(b.fd >= 0);
	assert_int_equal(a.lease_fd, -1);
	/* the slot directory: sticky, world-writable; the slots read-only
	 * regular files */
	struct stat st;
	assert_int_equal(stat(f->slots, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	char *s0 = ut_join(f->slots, "slot.0"), *s1 = ut_join(f->slots, "slot.1"),
	     *s2 = ut_join(f->slots, "slot.2");
	assert_int_equal(lstat(s0, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0444);
	assert_int_equal(access(s1, F_OK), 0);
	assert_int_equal(access(s2, F_OK), -1);
	/* the third waits until its deadline, then goes ahead without one */
	assert_int_equal(f->log.warnings, 0);
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire_by(f->ctx, &c->lim, &d, stg__now() + 0.4), STG_OK);
	double t = stg__now() - t0;
	assert_true(t >= 0.4);
	ut_assert_time_below(t, 3);
	assert_int_equal(d.fd, -1);
	assert_int_equal(f->log.warnings, 1);
	assert_non_null(strstr(f->log.text, "no shared-FS slot came free in time: going ahead "
	                                    "without one"));
	stg__slot_release(&d);
	/* a release frees one at once */
	stg__slot_release(&a);
	assert_int_equal(a.fd, -1);
	t0 = stg__now();
	assert_int_equal(stg__slot_acquire_by(f->ctx, &c->lim, &d, stg__now() + 5), STG_OK);
	assert_true(d.fd >= 0);
	ut_assert_time_below(stg__now() - t0, 1);
	stg__slot_release(&b);
	stg__slot_release(&d);
	stg__slot_release(&d); /* twice: nothing */
	free(s0);
	free(s1);
	free(s2);
	stg_cache_close(c);
}

/* slot_wait_max: then a warning that names who holds the slots. */
static void test_wait_max(void **state)
{
	fx *f = *state;
	stg_cache *c = cache_with(f, "1", "1");
	stg_slot a, b;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &a), STG_OK);
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &b), STG_OK);
	double t = stg__now() - t0;
	assert_true(t >= 1);
	ut_assert_time_below(t, 4);
	assert_int_equal(b.fd, -1);
	char want[128];
	snprintf(want, sizeof want, " pid %d (test_limit", (int)getpid());
	/* first the news that it waits, then the warning with the holder */
	assert_non_null(strstr(f->log.text, "waiting for a shared-FS slot: all 1 on this node are "
	                                    "in use (max_readers_per_node), by "));
	const char *w = strstr(f->log.text, "waited 1 s for a shared-FS slot (slot_wait_max): "
	                                    "going ahead without one; held by ");
	if (!w || !strstr(w, want))
		fail_msg("log: %s", f->log.text);
	assert_int_equal(f->log.warnings, 1);
	stg__slot_release(&a);
	stg_cache_close(c);
}

/* A slot held by another process: freed when it dies, whatever killed it. */
static void test_holder_dies(void **state)
{
	fx *f = *state;
	stg_cache *c = cache_with(f, "1", "0");
	ut_child(&f->child, hold_slot, &c->lim, 0);
	stg_slot s;
	assert_int_equal(stg__slot_acquire_by(f->ctx, &c->lim, &s, stg__now() + 0.2), STG_OK);
	assert_int_equal(s.fd, -1);
	ut_kill(&f->child);
	assert_int_equal(stg__slot_acquire_by(f->ctx, &c->lim, &s, stg__now() + 2), STG_OK);
	assert_true(s.fd >= 0);
	stg__slot_release(&s);
	stg_cache_close(c);
}

static void *cancel_later(void *arg)
{
	struct timespec ts = {0, 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	stg_cancel(arg);
	return NULL;
}

static void test_cancel(void **state)
{
	fx *f = *state;
	stg_cache *c = cache_with(f, "1", "0");
	stg_slot a, b;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &a), STG_OK);
	stg_ctx *ctx = stg_ctx_new();
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, ctx), 0);
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire(ctx, &c->lim, &b), STG_EINTR);
	ut_assert_time_below(stg__now() - t0, 3);
	pthread_join(th, NULL);
	assert_string_equal(stg_errmsg(ctx), "interrupted while waiting for a shared-FS slot");
	assert_int_equal(b.fd, -1);
	stg__slot_release(&a);
	stg_ctx_free(ctx);
	stg_cache_close(c);
}

/* No limit (0), an unusable slot directory, planted slot files: no
 * waiting, a warning, and on it goes. */
static void test_unusable(void **state)
{
	fx *f = *state;
	stg_cache *c = cache_with(f, "0", "0");
	stg_slot s;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	assert_int_equal(s.fd, -1);
	assert_int_equal(access(f->slots, F_OK), -1); /* nothing made */
	stg_cache_close(c);
	assert_int_equal(f->log.n, 0);

	/* slot_dir under a file */
	ut_write(f->dir, "file", "", 0);
	char *bad = ut_join(f->dir, "file/slots");
	const char *set[] = {"slot_dir", bad, NULL};
	c = ut_cache(f->ctx, f->dir, set);
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	assert_int_equal(s.fd, -1);
	assert_non_null(strstr(f->log.text, "no node-wide limit on shared-FS readers: cannot use "
	                                    "slot_dir '"));
	stg_cache_close(c);
	free(bad);

	/* slot files planted as a link and a FIFO: never opened */
	f->log.text[0] = '\0';
	c = cache_with(f, "2", "0");
	mkdir(f->slots, 01777);
	chmod(f->slots, 01777);
	char *s0 = ut_join(f->slots, "slot.0"), *s1 = ut_join(f->slots, "slot.1");
	char *target = ut_join(f->dir, "target");
	ut_write(f->dir, "target", "precious", 8);
	assert_int_equal(symlink(target, s0), 0);
	assert_int_equal(mkfifo(s1, 0666), 0);
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	ut_assert_time_below(stg__now() - t0, 1);
	assert_int_equal(s.fd, -1);
	assert_non_null(strstr(f->log.text, "no usable slot file in '"));
	/* the link's target was not locked nor changed */
	int tfd = open(target, O_RDONLY);
	assert_int_equal(flock(tfd, LOCK_EX | LOCK_NB), 0);
	close(tfd);
	stg_cache_close(c);
	free(s0);
	free(s1);
	free(target);
}

/* A slot directory that another user owns is not trusted, sticky or not:
 * its owner could chmod it (as root: given away to nobody). */
static void test_foreign_slot_dir(void **state)
{
	fx *f = *state;
	if (geteuid() != 0)
		skip(); /* needs root to make a directory another user's */
	assert_int_equal(mkdir(f->slots, 0755), 0);
	assert_int_equal(chown(f->slots, 65534, 65534), 0);
	stg_cache *c = cache_with(f, "2", "0");
	stg_slot s;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	assert_int_equal(s.fd, -1);
	assert_non_null(strstr(f->log.text, "belongs to nobody (uid 65534), who could turn the "
	                                    "limit off for everyone"));
	stg_cache_close(c);
	/* sticky and world-writable makes no difference */
	assert_int_equal(chmod(f->slots, 01777), 0);
	f->log.text[0] = '\0';
	c = cache_with(f, "2", "0");
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	assert_int_equal(s.fd, -1);
	assert_non_null(strstr(f->log.text, "belongs to nobody (uid 65534)"));
	stg_cache_close(c);
}

static stg_cache *lease_cache(fx *f, const char *n, const char *ttl)
{
	mkdir(f->leases, 0755);
	const char *set[] = {
	        "max_readers_per_node", "0",       "max_readers_cluster", n,   "lease_ttl", ttl,
	        "shared_lock_dir",      f->leases, "slot_wait_max",       "0", NULL};
	return ut_cache(f->ctx, f->dir, set);
}

static void test_leases(void **state)
{
	fx *f = *state;
	stg_cache *c = lease_cache(f, "1", "3");
	stg_slot a, b;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &a), STG_OK);
	assert_true(a.lease_fd >= 0);
	char *l0 = ut_join(f->leases, "lease.0");
	size_t len;
	char *text = (char *)ut_read(l0, &len);
	text[len] = '\0';
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	char want[400];
	snprintf(want, sizeof want, "%s %d ", host, (int)getpid());
	assert_memory_equal(text, want, strlen(want));
	free(text);
	/* renewed every ttl/3 s: its mtime moves */
	struct stat st1, st2;
	assert_int_equal(stat(l0, &st1), 0);
	struct timespec old[2] = {{0, UTIME_OMIT}, {st1.st_mtim.tv_sec - 2, 0}};
	utimensat(AT_FDCWD, l0, old, 0);
	struct timespec pause = {1, 300 * 1000 * 1000};
	nanosleep(&pause, NULL);
	assert_int_equal(stat(l0, &st2), 0);
	assert_true(st2.st_mtim.tv_sec >= st1.st_mtim.tv_sec);
	/* held: a second one waits, then goes ahead at its deadline */
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire_by(f->ctx, &c->lim, &b, stg__now() + 0.5), STG_OK);
	assert_true(stg__now() - t0 >= 0.5);
	assert_int_equal(b.lease_fd, -1);
	assert_non_null(strstr(f->log.text, "waiting for a cluster-wide shared-FS lease: all 1 in "
	                                    "'"));
	assert_non_null(strstr(f->log.text, "no cluster-wide lease came free in time"));
	/* released: removed */
	stg__slot_release(&a);
	assert_int_equal(access(l0, F_OK), -1);
	free(l0);
	stg_cache_close(c);
}

/* A lease not renewed for lease_ttl belongs to a dead node: broken. */
static void test_lease_expired(void **state)
{
	fx *f = *state;
	stg_cache *c = lease_cache(f, "1", "3");
	ut_write(f->leases, "lease.0", "deadhost 1 1\n", 13);
	char *l0 = ut_join(f->leases, "lease.0");
	struct timespec old[2] = {{0, UTIME_OMIT}, {time(NULL) - 100, 0}};
	assert_int_equal(utimensat(AT_FDCWD, l0, old, 0), 0);
	stg_slot a;
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &a), STG_OK);
	assert_true(a.lease_fd >= 0);
	assert_non_null(strstr(f->log.text, "broke the cluster-wide lease '"));
	assert_non_null(strstr(f->log.text, "not renewed for 10"));
	/* ours now, and nothing else left in the directory */
	char **names;
	size_t n;
	int dfd = open(f->leases, O_RDONLY | O_DIRECTORY);
	assert_int_equal(stg__dir_names(dfd, "", true, &names, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], "lease.0");
	stg__names_free(names, n);
	/* broken and retaken by another meanwhile: not ours to remove */
	assert_int_equal(unlink(l0), 0);
	ut_write(f->leases, "lease.0", "otherhost 2 2\n", 14);
	stg__slot_release(&a);
	assert_int_equal(access(l0, F_OK), 0);
	close(dfd);
	free(l0);
	stg_cache_close(c);
}

static void test_lease_dir_unusable(void **state)
{
	fx *f = *state;
	char *missing = ut_join(f->dir, "no/such/dir");
	const char *set[] = {"max_readers_per_node",
	                     "0",
	                     "max_readers_cluster",
	                     "2",
	                     "shared_lock_dir",
	                     missing,
	                     NULL};
	stg_cache *c = ut_cache(f->ctx, f->dir, set);
	stg_slot s;
	double t0 = stg__now();
	assert_int_equal(stg__slot_acquire(f->ctx, &c->lim, &s), STG_OK);
	ut_assert_time_below(stg__now() - t0, 1);
	assert_int_equal(s.lease_fd, -1);
	assert_non_null(strstr(f->log.text, "no cluster-wide limit: cannot create leases in "
	                                    "shared_lock_dir '"));
	stg_cache_close(c);
	free(missing);
}

static void test_settings(void **state)
{
	fx *f = *state;
	const char *set[] = {"lease_ttl",
	                     "1",
	                     "bwlimit",
	                     "2M",
	                     "ops_limit",
	                     "50",
	                     "slot_wait_max",
	                     "7",
	                     "max_readers_per_node",
	                     "5",
	                     NULL};
	stg_cache *c = ut_cache(f->ctx, f->dir, set);
	assert_int_equal(c->lim.lease_ttl, 3); /* at least 3 s */
	assert_int_equal(c->lim.node_slots, 5);
	assert_int_equal(c->lim.slot_wait_max, 7);
	assert_true(c->lim.bw.rate == 2 * 1024 * 1024);
	assert_true(c->lim.ops.rate == 50);
	assert_string_equal(c->lim.slot_dir, f->slots);
	assert_string_equal(c->lim.lease_dir, "");
	stg_cache_close(c);
}

static void test_io_idle(void **state)
{
	(void)state;
	const int get_process = 1;
	assert_int_equal(stg_io_idle(1), 0);
	long prio = syscall(SYS_ioprio_get, get_process, 0);
	assert_int_equal(prio >> 13, 3); /* IOPRIO_CLASS_IDLE */
	assert_int_equal(stg_io_idle(0), 0);
	prio = syscall(SYS_ioprio_get, get_process, 0);
	assert_int_equal(prio >> 13, 2); /* best effort */
	assert_int_equal(prio & 0xff, 4);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_slots),    T(test_wait_max),      T(test_holder_dies),
        T(test_cancel),   T(test_unusable),      T(test_foreign_slot_dir),
        T(test_leases),   T(test_lease_expired), T(test_lease_dir_unusable),
        T(test_settings), T(test_io_idle),
};

UT_MAIN(tests)
