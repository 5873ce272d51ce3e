/* test_xfer_switch.c - the two ends of a transfer without the HELLO
 * around them: stg__send_tree (xfer_send.c) on a thread and
 * stg__receive_tree (xfer_switch.c) over pipes.  A tree arrives whole and
 * is switched in with its record; an unchanged one sends nothing; a
 * --pack receive stores a verified pack; a transfer cut midway leaves DEST
 * as it was and its completed part (a large file's first bytes too) for
 * the next, which sends less; what stg__receive_check refuses before
 * anything is sent; a sender whose tree is missing. */
#include "unit.h"
#include "xfer_record.h"
#include "xfer_send.h"
#include "xfer_switch.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>

typedef struct sender {
	int in, out;
	const char *dir;
	size_t cut; /* > 0: a relay passes only this many bytes, then hangs up */
	stg_err err;
	stg_xfer_result res;
} sender;

static void *send_thread(void *arg)
{
	sender *s = arg;
	stg_ctx *ctx = ut_ctx(2);
	stg_wire w;
	memset(&s->res, 0, sizeof s->res);
	s->err = stg__wire_init(&w, ctx, s->in, s->out);
	if (!s->err) {
		s->err = stg__send_tree(ctx, &w, s->dir, "push", NULL, false, &s->res);
		if (s->err)
			stg__wire_send_error(&w, s->err);
		stg__wire_free(&w);
	}
	close(s->in);
	close(s->out);
	stg_ctx_free(ctx);
	return NULL;
}

typedef struct relay {
	int in, out;
	size_t limit, passed;
} relay;

static void *relay_thread(void *arg)
{
	relay *r = arg;
	uint8_t buf[65536];
	while (r->passed < r->limit) {
		size_t want = r->limit - r->passed < sizeof buf ? r->limit - r->passed : sizeof buf;
		ssize_t n = read(r->in, buf, want);
		if (n <= 0)
			break;
		if (stg__write_full(r->out, buf, (size_t)n))
			break;
		r->passed += (size_t)n;
	}
	close(r->in);
	close(r->out);
	return NULL;
}

/* One transfer of dir to dest; the receiver's result and error message. */
static stg_err transfer(const char *dir, const char *dest, bool pack, bool replace, size_t cut,
                        stg_xfer_result *res, char *msg, size_t msglen)
{
	signal(SIGPIPE, SIG_IGN);
	int to_recv[2], to_send[2], mid[2];
	assert_int_equal(pipe(to_recv), 0);
	assert_int_equal(pipe(to_send), 0);
	sender s = {.in = to_send[0], .out = to_recv[1], .dir = dir};
	relay r = {.limit = cut};
	pthread_t rt;
	if (cut) {
		assert_int_equal(pipe(mid), 0);
		r.in = to_recv[0];
		r.out = mid[1];
		to_recv[0] = mid[0];
		assert_int_equal(pthread_create(&rt, NULL, relay_thread, &r), 0);
	}
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, send_thread, &s), 0);
	stg_ctx *ctx = ut_ctx(2);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, to_recv[0], to_send[1]), STG_OK);
	memset(res, 0, sizeof *res);
	stg_err err = stg__receive_tree(ctx, &w, dest, pack, replace, false, "serve", res);
	if (err)
		stg__wire_send_error(&w, err);
	res->wire_in = w.bytes_in; /* as stg_serve counts them */
	res->wire_out = w.bytes_out;
	stg__wire_free(&w);
	close(to_recv[0]);
	close(to_send[1]);
	pthread_join(th, NULL);
	if (cut)
		pthread_join(rt, NULL);
	if (msg)
		snprintf(msg, msglen, "%s", stg_errmsg(ctx));
	stg_ctx_free(ctx);
	return err;
}

typedef ut_fx fx;

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->src = ut_join(f->dir, "src");
	f->dest = ut_join(f->dir, "dest");
	mkdir(f->src, 0755);
	ut_mkdir(f->src, "d");
	ut_mkdir(f->src, "empty");
	ut_fill_file(f->src, "d/big", 6 << 20, 1);
	ut_fill_file(f->src, "small", 1000, 2);
	char *x = ut_join(f->src, "small");
	chmod(x, 0600);
	free(x);
	ut_symlink(f->src, "link", "d/big");
	ut_hardlink(f->src, "hard", "small");
	*state = f;
	return 0;
}

/* a/name and b/name: the same bytes, mode and mtime (to the second). */
static void same_file(const char *a, const char *b, const char *name)
{
	ut_same_in(a, b, name);
	char *pa = ut_join(a, name), *pb = ut_join(b, name);
	struct stat sa, sb;
	stat(pa, &sa);
	stat(pb, &sb);
	assert_int_equal(sa.st_mode, sb.st_mode);
	assert_int_equal(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
	free(pa);
	free(pb);
}

/* The names in dir starting with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

static void test_whole_then_nothing(void **state)
{
	fx *f = *state;
	stg_xfer_result r;
	char msg[1024];
	assert_int_equal(transfer(f->src, f->dest, false, false, 0, &r, msg, sizeof msg), STG_OK);
	assert_int_equal(r.files, 2);
	assert_int_equal(r.dirs, 2);
	assert_int_equal(r.links, 2);
	assert_int_equal(r.whole_files, 2);
	assert_int_equal(r.content_bytes, (6 << 20) + 1000);
	same_file(f->src, f->dest, "d/big");
	same_file(f->src, f->dest, "small");
	same_file(f->src, f->dest, "hard");
	char *h = ut_join(f->dest, "hard"), *s = ut_join(f->dest, "small");
	struct stat sh, ss;
	stat(h, &sh);
	stat(s, &ss);
	assert_int_equal(sh.st_ino, ss.st_ino);
	/* the record, and nothing else beside DEST */
	assert_int_equal(count_prefixed(f->dir, ".stager-published.dest"), 1);
	assert_int_equal(count_prefixed(f->dir, ".stager-partial."), 0);
	assert_int_equal(count_prefixed(f->dir, ".stager-old."), 0);
	/* again: nothing sent */
	uint64_t first_in = r.wire_in;
	assert_int_equal(transfer(f->src, f->dest, false, false, 0, &r, msg, sizeof msg), STG_OK);
	assert_int_equal(r.whole_files + r.delta_files, 0);
	assert_int_equal(r.reused_files, 2);
	assert_true(r.wire_in < first_in / 100);
	/* a change: a delta for the large file */
	char *big = ut_join(f->src, "d/big");
	int fd = open(big, O_WRONLY);
	pwrite(fd, "changed!", 8, 3 << 20);
	close(fd);
	assert_int_equal(transfer(f->src, f->dest, false, false, 0, &r, msg, sizeof msg), STG_OK);
	assert_int_equal(r.delta_files, 1);
	assert_true(r.wire_in < (1 << 20));
	same_file(f->src, f->dest, "d/big");
	free(big);
	free(h);
	free(s);
}

static void test_pack(void **state)
{
	fx *f = *state;
	stg_xfer_result r;
	char msg[1024];
	assert_int_equal(transfer(f->src, f->dest, true, false, 0, &r, msg, sizeof msg), STG_OK);
	char *p = ut_join(f->dir, "dest.tar.zst");
	stg_ctx *ctx = f->ctx;
	stg_pack *pk;
	assert_int_equal(stg_pack_open(ctx, p, &pk), STG_OK);
	assert_int_equal(stg_verify(ctx, pk), STG_OK);
	char *out = ut_join(f->dir, "out");
	assert_int_equal(stg_unpack(ctx, pk, out, NULL, NULL), STG_OK);
	stg_pack_close(pk);
	same_file(f->src, out, "d/big");
	same_file(f->src, out, "small");
	assert_int_equal(access(f->dest, F_OK), -1); /* the pack, not a tree */
	assert_int_equal(count_prefixed(f->dir, ".stager-published.dest.tar.zst"), 1);
	free(out);
	free(p);
}

/* Cut after 3 MiB: DEST keeps the old version; what arrived stays for the
 * next transfer, which sends only the rest. */
static void test_cut(void **state)
{
	fx *f = *state;
	stg_xfer_result r;
	char msg[1024];
	/* an old version at DEST first */
	char *old = ut_join(f->dir, "old");
	mkdir(old, 0755);
	ut_write(old, "v1", "old version\n", 12);
	assert_int_equal(transfer(old, f->dest, false, false, 0, &r, msg, sizeof msg), STG_OK);
	ut_fill_file(f->src, "d/big", 6 << 20, 7);
	stg_err err = transfer(f->src, f->dest, false, false, 3 << 20, &r, msg, sizeof msg);
	assert_int_not_equal(err, STG_OK);
	char *v1 = ut_join(f->dest, "v1"), *big = ut_join(f->dest, "d/big");
	assert_int_equal(access(v1, F_OK), 0);
	assert_int_equal(access(big, F_OK), -1);
	/* the partial directory, with the large file's first bytes */
	char *part = ut_join(f->dir, ".stager-partial.dest");
	assert_true(count_prefixed(part, ".stager-resume.") >= 1);
	/* the next: the rest only */
	assert_int_equal(transfer(f->src, f->dest, false, false, 0, &r, msg, sizeof msg), STG_OK);
	assert_true(r.wire_in < (5 << 20));
	same_file(f->src, f->dest, "d/big");
	same_file(f->src, f->dest, "small");
	assert_int_equal(access(v1, F_OK), -1);
	assert_int_equal(access(part, F_OK), -1);
	free(part);
	free(v1);
	free(big);
	free(old);
}

static void test_check(void **state)
{
	fx *f = *state;
	stg_ctx *ctx = f->ctx;
	char *home = ut_env_save("HOME");
	setenv("HOME", "/nonexistent-home", 1);
	/* nothing there, or an empty directory: fine */
	assert_int_equal(stg__receive_check(ctx, f->dest, false, false, "serve"), STG_OK);
	ut_mkdir(f->dir, "dest");
	assert_int_equal(stg__receive_check(ctx, f->dest, false, false, "serve"), STG_OK);
	/* the user's files: refused, unless --replace */
	ut_write(f->dest, "mine", "x", 1);
	assert_int_equal(stg__receive_check(ctx, f->dest, false, false, "serve"), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(ctx), "exists and was not made by stager push"));
	assert_int_equal(stg__receive_check(ctx, f->dest, false, true, "serve"), STG_OK);
	/* a file where the tree goes */
	char *file = ut_join(f->dir, "file");
	ut_write(f->dir, "file", "x", 1);
	assert_int_equal(stg__receive_check(ctx, file, false, true, "serve"), STG_EEXIST);
	/* a missing parent, bad names */
	char *orphan = ut_join(f->dir, "no/such/dest");
	assert_int_equal(stg__receive_check(ctx, orphan, false, false, "serve"), STG_ENOENT);
	assert_non_null(strstr(stg_errmsg(ctx), "(the directory that will hold 'dest')"));
	assert_int_equal(stg__receive_check(ctx, "", false, false, "serve"), STG_EUSAGE);
	char *dots = ut_join(f->dir, "..");
	assert_int_equal(stg__receive_check(ctx, dots, false, false, "serve"), STG_EUSAGE);
	assert_non_null(strstr(stg_errmsg(ctx), "does not name a directory to write"));
	/* the home directory: never */
	setenv("HOME", f->dest, 1);
	assert_int_equal(stg__receive_check(ctx, f->dest, false, true, "serve"), STG_EEXIST);
	assert_non_null(strstr(stg_errmsg(ctx), "is your home directory"));
	ut_env_restore("HOME", home);
	/* and a receive into the user's files changes nothing */
	stg_xfer_result r;
	char msg[1024];
	assert_int_equal(transfer(f->src, f->dest, false, false, 0, &r, msg, sizeof msg),
	                 STG_EEXIST);
	char *mine = ut_join(f->dest, "mine");
	assert_int_equal(access(mine, F_OK), 0);
	assert_int_equal(count_prefixed(f->dir, ".stager-partial."), 0);
	free(mine);
	free(dots);
	free(orphan);
	free(file);
}

static void test_sender_missing(void **state)
{
	fx *f = *state;
	char *missing = ut_join(f->dir, "missing");
	stg_xfer_result r;
	char msg[1024];
	stg_err err = transfer(missing, f->dest, false, false, 0, &r, msg, sizeof msg);
	/* the sender's error reaches the receiver, named */
	assert_int_equal(err, STG_ENOENT);
	assert_non_null(strstr(msg, "missing"));
	assert_int_equal(access(f->dest, F_OK), -1);
	assert_int_equal(count_prefixed(f->dir, ".stager-partial."), 0);
	free(missing);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        T(test_whole_then_nothing), T(test_pack), T(test_cut), T(test_check),
        T(test_sender_missing),
};

UT_MAIN(tests)
