/* test_xfer.c - the push/pull protocol: frames and messages on pipes and
 * memory, hostile bytes, and whole transfers with stg_push_fd/stg_pull_fd
 * against stg_serve on a thread. */
#include "unit.h"
#include "xfer_record.h"
#include "xfer_send.h"
#include "xfer_switch.h"

#include <pthread.h>
#include <signal.h>

/* A wire reading from a memory image. */
static void mem_wire(stg_wire *w, stg_ctx *ctx, const uint8_t *p, size_t n)
{
	assert_int_equal(stg__wire_init(w, ctx, -1, -1), STG_OK);
	w->mem = p;
	w->mem_len = n;
}

static void test_frames(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(2);
	int fds[2];
	assert_int_equal(pipe(fds), 0);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, fds[0], fds[1]), STG_OK);
	/* a compressible and an incompressible chunk, an empty frame */
	static uint8_t text[100000], noise[50000];
	memset(text, 'a', sizeof text);
	ut_fill(noise, sizeof noise, 3);
	assert_int_equal(stg__wire_send_data(&w, text, sizeof text), STG_OK);
	assert_true(w.bytes_out < 1000);
	assert_int_equal(stg__wire_send_data(&w, noise, sizeof noise), STG_OK);
	assert_int_equal(stg__wire_send(&w, STG_W_DONE, NULL, 0, NULL, 0), STG_OK);
	uint8_t t;
	const uint8_t *p, *raw;
	uint32_t len;
	size_t rl;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(t, STG_W_DATA);
	assert_int_equal(stg__wire_data(&w, p, len, &raw, &rl), STG_OK);
	assert_int_equal(rl, sizeof text);
	assert_memory_equal(raw, text, rl);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(stg__wire_data(&w, p, len, &raw, &rl), STG_OK);
	assert_int_equal(rl, sizeof noise);
	assert_memory_equal(raw, noise, rl);
	assert_int_equal(stg__wire_expect(&w, STG_W_DONE, &p, &len), STG_OK);
	assert_int_equal(len, 0);
	/* the peer's ERROR: its code and message */
	uint8_t code = STG_ENOSPC;
	assert_int_equal(stg__wire_send(&w, STG_W_ERROR, &code, 1, "disk full", 9), STG_OK);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_ENOSPC);
	assert_non_null(strstr(stg_errmsg(ctx), "the far end: disk full"));
	/* a type that was not expected */
	assert_int_equal(stg__wire_send(&w, STG_W_DONE, NULL, 0, NULL, 0), STG_OK);
	assert_int_equal(stg__wire_expect(&w, STG_W_WELCOME, &p, &len), STG_EREMOTE);
	assert_non_null(strstr(stg_errmsg(ctx), "DONE where WELCOME"));
	stg__wire_free(&w);
	close(fds[0]);
	close(fds[1]);
	stg_ctx_free(ctx);
}

static void test_hostile_frames(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(2);
	stg_wire w;
	uint8_t t;
	const uint8_t *p, *raw;
	uint32_t len;
	size_t rl;
	/* unknown type, oversize, truncated header, truncated payload */
	static const uint8_t unknown[] = {99, 0, 0, 0, 0};
	mem_wire(&w, ctx, unknown, sizeof unknown);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	assert_non_null(strstr(stg_errmsg(ctx), "unknown message type"));
	stg__wire_free(&w);
	static const uint8_t big[] = {STG_W_DATA, 0xff, 0xff, 0xff, 0x7f};
	mem_wire(&w, ctx, big, sizeof big);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	assert_non_null(strstr(stg_errmsg(ctx), "at most"));
	stg__wire_free(&w);
	static const uint8_t cut[] = {STG_W_DATA, 10, 0};
	mem_wire(&w, ctx, cut, sizeof cut);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	stg__wire_free(&w);
	static const uint8_t short_payload[] = {STG_W_DATA, 10, 0, 0, 0, 1, 2};
	mem_wire(&w, ctx, short_payload, sizeof short_payload);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	assert_non_null(strstr(stg_errmsg(ctx), "middle of a frame"));
	stg__wire_free(&w);
	/* a DATA chunk that claims zstd but is not, or an unknown encoding */
	mem_wire(&w, ctx, NULL, 0);
	static const uint8_t bad_zstd[] = {1, 0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0};
	assert_int_equal(stg__wire_data(&w, bad_zstd, sizeof bad_zstd, &raw, &rl), STG_ECORRUPT);
	static const uint8_t bad_enc[] = {7, 1, 2};
	assert_int_equal(stg__wire_data(&w, bad_enc, sizeof bad_enc, &raw, &rl), STG_EREMOTE);
	/* a zstd chunk that would decode past the chunk limit */
	size_t n = STG_WIRE_CHUNK + 4096;
	uint8_t *zeros = calloc(1, n), *z = malloc(ZSTD_compressBound(n) + 1);
	size_t zl = ZSTD_compress(z + 1, ZSTD_compressBound(n), zeros, n, 1);
	z[0] = 1;
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)zl + 1, &raw, &rl), STG_ECORRUPT);
	free(zeros);
	free(z);
	stg__wire_free(&w);
	stg_ctx_free(ctx);
}

static stg_err count_entry(void *arg, const uint8_t *p, uint32_t len)
{
	(void)p;
	(void)len;
	(*(int *)arg)++;
	return STG_OK;
}

static stg_err decode_one(stg_ctx *ctx, const stg_wentry *in, stg_wentry *out)
{
	uint8_t enc[STG_WENTRY_FIXED + 2 * (STG_PATH_MAX + 1)];
	size_t n = stg__wentry_encode(in, enc);
	return stg__wentry_decode(ctx, enc, (uint32_t)n, out);
}

static void test_entries(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(2);
	stg_wentry e = {.type = STG_FILE,
	                .mode = 0640,
	                .size = 12345,
	                .mtime = 1700000000,
	                .mtime_nsec = 42,
	                .path = "a/b/c.txt"},
	           d;
	memset(e.xxh3, 0xab, 16);
	assert_int_equal(decode_one(ctx, &e, &d), STG_OK);
	assert_string_equal(d.path, "a/b/c.txt");
	assert_null(d.link);
	assert_int_equal(d.size, 12345);
	assert_int_equal(d.mode, 0640);
	assert_int_equal(d.mtime_nsec, 42);
	assert_memory_equal(d.xxh3, e.xxh3, 16);
	stg__wentry_free(&d);
	/* what no sender makes */
	const char *bad_paths[] = {"../x", "/etc/passwd", "a/../../x", ".", "a//b", "a/"};
	for (size_t i = 0; i < sizeof bad_paths / sizeof *bad_paths; i++) {
		e.path = (char *)bad_paths[i];
		assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
		stg__wentry_free(&d);
	}
	e.path = "ok";
	e.mode = 0100644; /* bits past 07777 */
	assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
	e.mode = 0644;
	e.type = STG_DIR; /* a size or checksum on a directory */
	assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
	e.type = STG_SYMLINK; /* a symlink without a target */
	e.size = 0;
	memset(e.xxh3, 0, 16);
	assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
	e.type = STG_HARDLINK;
	e.link = "../outside";
	assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
	e.type = 9;
	assert_int_equal(decode_one(ctx, &e, &d), STG_ECORRUPT);
	e.type = STG_SYMLINK;
	e.link = "/anywhere"; /* a symlink's target is data */
	assert_int_equal(decode_one(ctx, &e, &d), STG_OK);
	stg__wentry_free(&d);
	/* a batch: lengths that run past its end */
	stg_wire w;
	mem_wire(&w, ctx, NULL, 0);
	uint8_t batch[1 + 2 + 200];
	batch[0] = 0;
	e.type = STG_DIR;
	e.link = NULL;
	size_t n = stg__wentry_encode(&e, batch + 3);
	batch[1] = (uint8_t)n;
	batch[2] = 0;
	int count = 0;
	assert_int_equal(stg__entries_decode(&w, batch, (uint32_t)(3 + n), count_entry, &count),
	                 STG_OK);
	assert_int_equal(count, 1);
	batch[1] = (uint8_t)(n + 1);
	assert_int_equal(stg__entries_decode(&w, batch, (uint32_t)(3 + n), count_entry, &count),
	                 STG_ECORRUPT);
	assert_int_equal(stg__entries_decode(&w, batch, 2, count_entry, &count), STG_ECORRUPT);
	stg__wire_free(&w);
	stg_ctx_free(ctx);
}

/* ---- whole transfers over pipes ----------------------------------------- */

typedef struct server {
	int in, out;
	stg_err err;
	stg_xfer_result res;
} server;

static void *serve_thread(void *arg)
{
	server *s = arg;
	stg_ctx *ctx = ut_ctx(2);
	s->err = stg_serve(ctx, s->in, s->out, &s->res);
	close(s->in);
	close(s->out);
	stg_ctx_free(ctx);
	return NULL;
}

/* Run one push (or pull) against a serving thread, with --replace or not. */
static stg_err transfer_r(bool push, bool replace, const char *local, const char *path,
                          stg_xfer_result *res)
{
	int to[2], from[2];
	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	server s = {.in = to[0], .out = from[1]};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, serve_thread, &s), 0);
	stg_ctx *ctx = ut_ctx(2);
	stg_xfer_opts o;
	stg_xfer_opts_init(&o);
	o.replace = replace;
	stg_err err = push ? stg_push_fd(ctx, local, path, from[0], to[1], &o, res)
	                   : stg_pull_fd(ctx, path, local, from[0], to[1], &o, res);
	close(to[1]);
	close(from[0]);
	pthread_join(th, NULL);
	if (err)
		print_message("# %s\n", stg_errmsg(ctx));
	stg_ctx_free(ctx);
	return err;
}

static stg_err transfer(bool push, const char *local, const char *path, stg_xfer_result *res)
{
	return transfer_r(push, false, local, path, res);
}

static bool exists(const char *dir, const char *name)
{
	char *p = ut_join(dir, name);
	bool e = ut_exists_at(AT_FDCWD, p);
	free(p);
	return e;
}

typedef ut_fx fx;

/* A transfer's ends: src (made, empty) and dst (not made yet) in dir; a
 * cut pipe is an error, not a signal. */
static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	signal(SIGPIPE, SIG_IGN);
	f->src = ut_join(f->dir, "src");
	f->dest = ut_join(f->dir, "dst");
	assert_int_equal(mkdir(f->src, 0755), 0);
	*state = f;
	return 0;
}

static void test_push_pull(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	char *back = ut_join(root, "back");
	ut_mkdir(src, "d");
	size_t big = 700 * 1024;
	uint8_t *buf = malloc(big);
	ut_fill(buf, big, 9);
	ut_write(src, "d/big", buf, big);
	ut_write(src, "small", "small\n", 6);
	stg_xfer_result r;
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	assert_int_equal(r.files, 2);
	assert_int_equal(r.whole_files, 2);
	char *a = ut_join(src, "d/big"), *b = ut_join(dst, "d/big");
	ut_same_file(a, b);
	/* a change in the middle: a delta, much smaller than the file */
	memcpy(buf + 300000, "changed!", 8);
	ut_write(src, "d/big", buf, big);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	assert_int_equal(r.delta_files, 1);
	assert_int_equal(r.reused_files, 1);
	assert_true(r.wire_out < big / 10);
	ut_same_file(a, b);
	/* and back */
	assert_int_equal(transfer(false, back, dst, &r), STG_OK);
	char *c = ut_join(back, "d/big");
	ut_same_file(a, c);
	/* a push of what is not there */
	char *missing = ut_join(root, "missing");
	assert_int_equal(transfer(true, missing, dst, &r), STG_ENOENT);
	ut_same_file(a, b);
	free(buf);
	free(a);
	free(b);
	free(c);
	free(missing);
	free(back);
}

/* A destination that exists: replaced only if stager published it, or it
 * is empty, or with --replace; "DIR/" means into DIR. */
static void test_replace_rules(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src;
	char *me = ut_join(root, "me"), *into = ut_join(root, "me/"),
	     *empty = ut_join(root, "empty");
	ut_write(src, "a", "new\n", 4);
	ut_mkdir(root, "me");
	ut_write(me, "keep", "precious\n", 9);
	stg_xfer_result r;
	/* the user's directory: refused, untouched, no partial left */
	assert_int_equal(transfer(true, src, me, &r), STG_EEXIST);
	assert_true(exists(me, "keep"));
	assert_false(exists(root, ".stager-partial.me"));
	/* into it: me/src, and again (a re-push of what stager published) */
	assert_int_equal(transfer(true, src, into, &r), STG_OK);
	assert_true(exists(me, "keep"));
	assert_true(exists(me, "src/a"));
	assert_true(exists(me, ".stager-published.src"));
	ut_write(src, "b", "more\n", 5);
	char *mesrc = ut_join(root, "me/src");
	assert_int_equal(transfer(true, src, mesrc, &r), STG_OK);
	assert_true(exists(me, "src/b"));
	/* an empty directory may be replaced */
	ut_mkdir(root, "empty");
	assert_int_equal(transfer(true, src, empty, &r), STG_OK);
	assert_true(exists(empty, "b"));
	/* a pull over the user's directory: refused; into it: fine */
	assert_int_equal(transfer(false, me, mesrc, &r), STG_EEXIST);
	assert_true(exists(me, "keep"));
	assert_int_equal(transfer(false, into, mesrc, &r), STG_OK);
	assert_true(exists(me, "src/b"));
	/* --replace: the user asked for it */
	assert_int_equal(transfer_r(true, true, src, me, &r), STG_OK);
	assert_false(exists(me, "keep"));
	assert_true(exists(me, "b"));
	free(mesrc);
	free(empty);
	free(into);
	free(me);
}

/* Where renameat2's flags and flock are refused (NFS, CephFS, Lustre):
 * the fallbacks publish the same tree. */
static void test_no_exchange(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	ut_write(src, "a", "one\n", 4);
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	stg_xfer_result r;
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	char *a = ut_join(src, "a"), *b = ut_join(dst, "a");
	ut_same_file(a, b);
	ut_write(src, "a", "two!\n", 5);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	ut_same_file(a, b);
	assert_false(exists(root, ".stager-old.dst"));
	assert_false(exists(root, ".stager-partial.dst"));
	/* a switch cut between its renames: the old version is put back */
	char *old = ut_join(root, ".stager-old.dst");
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock,cut-switch", 1);
	ut_write(src, "a", "three\n", 6);
	assert_int_equal(transfer(true, src, dst, &r), STG_EREMOTE); /* the far end cut */
	assert_false(exists(root, "dst"));
	assert_true(exists(root, ".stager-old.dst"));
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	assert_int_equal(r.delta_files + r.whole_files, 0); /* resumed */
	ut_same_file(a, b);
	assert_false(exists(root, ".stager-old.dst"));
	/* a directory of that name that stager did not move there stays */
	assert_int_equal(rename(dst, old), 0);
	ut_write(src, "a", "four\n", 5);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	ut_same_file(a, b);
	assert_true(exists(root, ".stager-old.dst"));
	/* and is in the way of the next switch, which replaces nothing */
	ut_write(src, "a", "five!\n", 6);
	assert_int_equal(transfer(true, src, dst, &r), STG_EEXIST);
	assert_true(exists(root, ".stager-old.dst/a"));
	unsetenv(STG_TEST_FAULTS_ENV);
	free(old);
	free(a);
	free(b);
}

/* A switch without RENAME_EXCHANGE cut after its second rename, before
 * the record names the new version, or during the old version's removal:
 * the next transfer finishes the removal (the record names the old version
 * until it is gone), so .stager-old.NAME never blocks later pushes. */
static void test_interrupted_removal(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	char *a = ut_join(src, "a"), *b = ut_join(dst, "a");
	ut_write(src, "a", "one\n", 4);
	stg_xfer_result r;
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	/* killed while the old version was being removed */
	ut_write(src, "a", "two!\n", 5);
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock,cut-remove", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_EREMOTE);
	ut_same_file(a, b);
	assert_true(exists(root, ".stager-old.dst"));
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	ut_write(src, "a", "three\n", 6);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK); /* no --replace needed */
	ut_same_file(a, b);
	assert_false(exists(root, ".stager-old.dst"));
	/* killed between the second rename and the record's write: DEST is
	 * the new version, not yet named, so --replace; never "in the way" */
	ut_write(src, "a", "four\n", 5);
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock,cut-published", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_EREMOTE);
	ut_same_file(a, b);
	assert_true(exists(root, ".stager-old.dst"));
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	ut_write(src, "a", "five!\n", 6);
	assert_int_equal(transfer_r(true, true, src, dst, &r), STG_OK);
	ut_same_file(a, b);
	assert_false(exists(root, ".stager-old.dst"));
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	/* an old version whose new one is not at DEST stays */
	ut_write(src, "a", "six\n", 4);
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock,cut-remove", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_EREMOTE);
	char *moved = ut_join(root, "moved");
	assert_int_equal(rename(dst, moved), 0);
	ut_mkdir(root, "dst");
	ut_write(dst, "keep", "precious\n", 9);
	setenv(STG_TEST_FAULTS_ENV, "renameat2,flock", 1);
	assert_int_equal(transfer_r(true, true, src, dst, &r), STG_EEXIST);
	assert_true(exists(root, ".stager-old.dst/a"));
	unsetenv(STG_TEST_FAULTS_ENV);
	free(moved);
	free(a);
	free(b);
}

/* A directory allowed for being empty that has a file by the switch (the
 * "fill-dest" hook writes one after the last check): put back, exit 1. */
static void test_empty_filled(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	ut_write(src, "a", "new\n", 4);
	stg_xfer_result r;
	static const char *const faults[] = {"fill-dest", "renameat2,flock,fill-dest"};
	for (int k = 0; k < 2; k++) {
		ut_mkdir(root, "dst");
		setenv(STG_TEST_FAULTS_ENV, faults[k], 1);
		assert_int_equal(transfer(true, src, dst, &r), STG_EEXIST);
		assert_true(exists(dst, "stager-test-fill"));
		assert_false(exists(dst, "a"));
		assert_false(exists(root, ".stager-old.dst"));
		assert_true(exists(root, ".stager-partial.dst/a")); /* kept */
		unsetenv(STG_TEST_FAULTS_ENV);
		ut_rmtree(dst);
	}
}

/* A record that is a hard link to another of the user's files vouches for
 * nothing and is never written: that file would be overwritten. */
static void test_record_hardlink(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	char *secret = ut_join(root, "secret"), *rec = ut_join(root, ".stager-published.dst");
	ut_write(src, "a", "new\n", 4);
	ut_write(root, "secret", "precious\n", 9);
	assert_int_equal(link(secret, rec), 0);
	stg_xfer_result r;
	assert_int_equal(transfer(true, src, dst, &r), STG_EEXIST);
	ut_content_is(root, "secret", "precious\n");
	assert_false(exists(root, "dst"));
	free(rec);
	free(secret);
}

/* Write root/.stager-published.NAME as text. */
static void forge_record(const char *root, const char *name, const char *text)
{
	char rec[64];
	snprintf(rec, sizeof rec, ".stager-published.%s", name);
	ut_write(root, rec, text, strlen(text));
}

/* The record names a directory by inode, ctime and birth time, all of
 * them: a record with less (stager 0.1's "INO -", or no birth time where
 * the filesystem has one) vouches for nothing, and a directory made again
 * under a reused inode number where there is no birth time (NFS, Lustre:
 * the "btime" fault) has another ctime. */
static void test_record_identity(void **state)
{
	fx *f = *state;
	const char *root = f->dir, *src = f->src, *dst = f->dest;
	char *me = ut_join(root, "me");
	ut_write(src, "a", "new\n", 4);
	ut_mkdir(root, "me");
	ut_write(me, "keep", "precious\n", 9);
	struct statx sx;
	assert_int_equal(statx(AT_FDCWD, me, 0, STATX_INO | STATX_CTIME | STATX_BTIME, &sx), 0);
	char text[256];
	stg_xfer_result r;
	snprintf(text, sizeof text, "stager-published 1\n%llu -\n", (unsigned long long)sx.stx_ino);
	forge_record(root, "me", text);
	assert_int_equal(transfer(true, src, me, &r), STG_EEXIST);
	assert_true(exists(me, "keep"));
	if (sx.stx_mask & STATX_BTIME) {
		snprintf(text, sizeof text, "stager-published 2\npublished %llu %lld.%09u -\n",
		         (unsigned long long)sx.stx_ino, (long long)sx.stx_ctime.tv_sec,
		         sx.stx_ctime.tv_nsec);
		forge_record(root, "me", text);
		assert_int_equal(transfer(true, src, me, &r), STG_EEXIST);
		assert_true(exists(me, "keep"));
	}
	/* no birth time: removed and made again, not the one published */
	setenv(STG_TEST_FAULTS_ENV, "btime", 1);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	assert_true(exists(dst, "a"));
	ut_rmtree(dst);
	ut_mkdir(root, "dst");
	ut_write(dst, "keep", "precious\n", 9);
	assert_int_equal(transfer(true, src, dst, &r), STG_EEXIST);
	assert_true(exists(dst, "keep"));
	unsetenv(STG_TEST_FAULTS_ENV);
	free(me);
}

/* A re-push where every file changed: small files are asked for whole, a
 * large one as a delta with a short signature. */
static void test_signatures(void **state)
{
	fx *f = *state;
	const char *src = f->src, *dst = f->dest;
	size_t big = 4 << 20;
	uint8_t *buf = malloc(big);
	ut_fill(buf, big, 5);
	char name[32], small[2000];
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof name, "s%02d", i);
		ut_fill((uint8_t *)small, sizeof small, (unsigned)i);
		ut_write(src, name, small, sizeof small);
	}
	ut_write(src, "big", buf, big);
	stg_xfer_result r;
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof name, "s%02d", i);
		ut_fill((uint8_t *)small, sizeof small, (unsigned)i + 100);
		ut_write(src, name, small, sizeof small);
	}
	memcpy(buf + 1000000, "changed!", 8);
	ut_write(src, "big", buf, big);
	assert_int_equal(transfer(true, src, dst, &r), STG_OK);
	assert_int_equal(r.delta_files, 1);
	assert_int_equal(r.whole_files, 50);
	/* what the sender read: the signature of 4 MiB, 4 + 32 bytes a
	 * block with librsync's default strong sums */
	print_message("# signatures and wants: %llu bytes\n", (unsigned long long)r.wire_in);
	assert_true(r.wire_in < 40000);
	ut_same_in(src, dst, "big");
	free(buf);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, ut_teardown)
static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frames),
        cmocka_unit_test(test_hostile_frames),
        cmocka_unit_test(test_entries),
        T(test_push_pull),
        T(test_replace_rules),
        T(test_no_exchange),
        T(test_signatures),
        T(test_record_identity),
        T(test_interrupted_removal),
        T(test_empty_filled),
        T(test_record_hardlink),
};

UT_MAIN(tests)
