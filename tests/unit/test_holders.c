/* test_holders.c - who holds the node's slots and the cluster's leases
 * (holders.c): node slots found through /proc/locks with their holder's
 * pid, user, start and command; lease files read as "HOST PID START",
 * malformed, linked or special ones skipped; the one-line text for
 * messages. */
#include "unit.h"
#include "cache.h"
#include "holders.h"

#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
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
	mkdir(f->leases, 0755);
	const char *set[] = {"max_readers_per_node",
	                     "3",
	                     "max_readers_cluster",
	                     "4",
	                     "shared_lock_dir",
	                     f->leases,
	                     NULL};
	f->c = ut_cache(f->ctx, f->dir, set);
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

/* In a child (ut_child): a node slot of lim taken. */
static int hold_slot(void *lim)
{
	stg_slot s;
	stg_ctx *ctx = stg_ctx_new();
	return stg__slot_acquire(ctx, lim, &s) || s.fd < 0;
}

static const char *me(void)
{
	struct passwd *pw = getpwuid(geteuid());
	return pw ? pw->pw_name : "?";
}

static void test_none(void **state)
{
	fx *f = *state;
	stg_holder *v = (stg_holder *)0x1;
	size_t n = 99;
	/* no slot directory yet */
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	char text[256] = "x";
	stg__holders_text(f->ctx, &f->c->lim, "node", text, sizeof text);
	assert_string_equal(text, "");
	free(v);
	/* slot files nobody holds */
	stg_slot s;
	assert_int_equal(stg__slot_acquire(f->ctx, &f->c->lim, &s), STG_OK);
	stg__slot_release(&s);
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 0);
	free(v);
}

static void test_node(void **state)
{
	fx *f = *state;
	stg_slot a;
	assert_int_equal(stg__slot_acquire(f->ctx, &f->c->lim, &a), STG_OK);
	assert_true(a.fd >= 0);
	/* which index it took */
	struct stat st;
	fstat(a.fd, &st);
	unsigned idx = 99;
	for (unsigned i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof name, "slot.%u", i);
		char *p = ut_join(f->slots, name);
		struct stat s2;
		if (stat(p, &s2) == 0 && s2.st_ino == st.st_ino)
			idx = i;
		free(p);
	}
	/* and one held by a child */
	ut_child(&f->child, hold_slot, &f->c->lim, 0);
	pid_t pid = f->child;
	stg_holder *v;
	size_t n;
	time_t now = time(NULL);
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	/* two node slots and, as max_readers_cluster is set, two leases */
	assert_int_equal(n, 4);
	bool mine = false, child = false;
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	host[63] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].kind, "cluster")) {
			assert_string_equal(v[i].host, host);
			assert_true(v[i].pid == getpid() || v[i].pid == pid);
			assert_true(v[i].since <= now + 1);
			assert_true(v[i].since >= now - 600);
			continue;
		}
		assert_string_equal(v[i].kind, "node");
		assert_int_equal(v[i].uid, geteuid());
		assert_string_equal(v[i].user, me());
		assert_string_equal(v[i].host, "");
		/* started a little while ago */
		assert_true(v[i].since <= now + 1);
		assert_true(v[i].since >= now - 600);
		assert_memory_equal(v[i].what, "test_holders", 12);
		if (v[i].pid == getpid()) {
			mine = true;
			assert_int_equal(v[i].index, idx);
		} else if (v[i].pid == pid) {
			child = true;
			assert_int_not_equal(v[i].index, idx);
		}
	}
	assert_true(mine);
	assert_true(child);
	free(v);
	/* the text for a message: both, "; "-separated */
	char text[512];
	stg__holders_text(f->ctx, &f->c->lim, "node", text, sizeof text);
	char want[128];
	snprintf(want, sizeof want, "%s pid %d (test_holders) since ", me(), (int)getpid());
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof want, "%s pid %d (test_holders) since ", me(), (int)pid);
	assert_non_null(strstr(text, want));
	assert_non_null(strstr(text, "; "));
	/* "since HH:MM:SS" */
	const char *since = strstr(text, "since ") + 6;
	assert_true(since[2] == ':' && since[5] == ':');
	/* a short buffer: cut, terminated */
	char small[20];
	memset(small, 'x', sizeof small);
	stg__holders_text(f->ctx, &f->c->lim, "node", small, 12);
	assert_int_equal(strlen(small), 11);
	assert_int_equal(small[12], 'x');
	/* the other kind: the leases, as USER@HOST */
	stg__holders_text(f->ctx, &f->c->lim, "cluster", text, sizeof text);
	snprintf(want, sizeof want, "%s@%s pid %d (stager) since ", me(), host, (int)getpid());
	assert_non_null(strstr(text, want));
	assert_null(strstr(text, "(test_holders)"));
	/* the child dies: its slot is no longer held (its lease file stays
	 * until it expires: a lease is not a lock) */
	ut_kill(&f->child);
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	size_t nodes = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(v[i].kind, "node")) {
			nodes++;
			assert_int_equal(v[i].pid, getpid());
		}
	}
	assert_int_equal(nodes, 1);
	free(v);
	stg__slot_release(&a);
}

static void test_cluster(void **state)
{
	fx *f = *state;
	ut_write(f->leases, "lease.0", "hostA 1234 1700000000\n", 22);
	ut_write(f->leases, "lease.1", "garbage\n", 8);
	char *l2 = ut_join(f->leases, "lease.2"), *l3 = ut_join(f->leases, "lease.3");
	char *target = ut_join(f->leases, "lease.0");
	assert_int_equal(symlink(target, l2), 0);
	assert_int_equal(mkfifo(l3, 0644), 0);             /* read without blocking */
	ut_write(f->leases, "lease.4", "hostB 1 1\n", 10); /* past max_readers_cluster */
	stg_holder *v;
	size_t n;
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	assert_int_equal(n, 1);
	assert_string_equal(v[0].kind, "cluster");
	assert_int_equal(v[0].index, 0);
	assert_string_equal(v[0].host, "hostA");
	assert_int_equal(v[0].pid, 1234);
	assert_int_equal(v[0].since, 1700000000);
	assert_int_equal(v[0].uid, geteuid());
	assert_string_equal(v[0].user, me());
	assert_string_equal(v[0].what, "stager");
	free(v);
	char text[256];
	stg__holders_text(f->ctx, &f->c->lim, "cluster", text, sizeof text);
	char want[128];
	snprintf(want, sizeof want, "%s@hostA pid 1234 (stager) since ", me());
	assert_memory_equal(text, want, strlen(want));
	/* a host name longer than the field is cut, not overrun */
	char longer[200];
	memset(longer, 'h', 150);
	snprintf(longer + 150, sizeof longer - 150, " 5 6\n");
	ut_write(f->leases, "lease.0", longer, strlen(longer));
	assert_int_equal(stg_slot_holders(f->ctx, f->c, &v, &n), STG_OK);
	/* "%63s" takes the first 63, the rest fails the pid: skipped */
	assert_int_equal(n, 0);
	free(v);
	free(l2);
	free(l3);
	free(target);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_none),
        T(test_node),
        T(test_cluster),
};

UT_MAIN(tests)
