/* test_xfer_recv_file.c - the receiving end's files as they arrive
 * (xfer_recv_file.c), from FILE, DATA and FILE_END messages written here
 * to a stream and read back: a file in pieces, written under a temporary
 * name and renamed to its path with its mode and mtime once its XXH3-128
 * matches; damaged, short or longer than declared: refused, named,
 * nothing published and no temporary left; a FILE not asked for (or
 * twice, or out of range) and another message inside a file are protocol
 * errors; a disk that fills (a 1 MiB tmpfs) is ENOSPC and leaves no
 * partial copy, also of a resumable file. */
#include "unit.h"
/* the headers as split by the rename of i28-hdr, or as before it */
#include "xfer_recv_state.h"
#include "xfer_recv_file.h"
#include "xfer_recv.h"

#include <errno.h>
#include <sys/mount.h>

typedef struct fx {
	UT_FX;
	char *part, *stream, *small;
	stg_wire ww, rw;
	bool ww_on, rw_on; /* initialised: freed before the next init */
	int wfd, rfd;
	receiver rc;
	uint8_t *data;
	size_t len;
} fx;

#define NAME "f.bin"

static void rc_init(fx *f, const char *part)
{
	receiver *rc = &f->rc;
	memset(rc, 0, sizeof *rc);
	rc->ctx = f->ctx;
	rc->w = &f->rw;
	rc->dest = rc->parent = rc->rec = -1;
	rc->part = open(part, O_RDONLY | O_DIRECTORY);
	assert_true(rc->part >= 0);
	assert_int_equal(stg__strmap_init(&rc->paths, 16), 0);
	rc->map = true;
	rc->what = "push";
	snprintf(rc->boot, sizeof rc->boot, "boot-1");
	rc->r = calloc(1, sizeof *rc->r);
	rc->n = 1;
	rentry *re = &rc->r[0];
	re->e.type = STG_FILE;
	re->e.path = NAME;
	re->e.size = f->len;
	re->e.mode = 0640;
	re->e.mtime = 1600000000;
	XXH128_canonical_t h;
	XXH128_canonicalFromHash(&h, XXH3_128bits(f->data, f->len));
	memcpy(re->e.xxh3, h.digest, 16);
	re->wanted = true;
	re->basis = BASIS_NONE;
}

static void rc_fini(fx *f)
{
	receiver *rc = &f->rc;
	if (rc->part >= 0)
		close(rc->part);
	for (size_t i = 0; i < rc->n; i++)
		XXH3_freeState(rc->r[i].pre);
	free(rc->r);
	stg__strmap_free(&rc->paths);
	memset(rc, 0, sizeof *rc);
	rc->part = -1;
}

static int setup(void **state)
{
	fx *f = ut_fx_new(sizeof *f);
	f->part = ut_join(f->dir, "part");
	ut_mkdir(f->dir, "part");
	f->stream = ut_join(f->dir, "stream");
	f->len = 300000;
	f->data = ut_malloc(f->len);
	ut_fill(f->data, f->len, 9);
	f->rc.part = -1;
	f->wfd = f->rfd = -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	rc_fini(f);
	if (f->ww_on)
		stg__wire_free(&f->ww);
	if (f->rw_on)
		stg__wire_free(&f->rw);
	if (f->wfd >= 0)
		close(f->wfd);
	if (f->rfd >= 0)
		close(f->rfd);
	if (f->small) {
		umount2(f->small, MNT_DETACH);
		free(f->small);
	}
	free(f->part);
	free(f->stream);
	free(f->data);
	return ut_teardown(state);
}

/* A fresh stream to write messages to. */
static void stream_begin(fx *f)
{
	if (f->wfd >= 0)
		close(f->wfd);
	f->wfd = open(f->stream, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (f->ww_on)
		stg__wire_free(&f->ww);
	assert_int_equal(stg__wire_init(&f->ww, f->ctx, -1, f->wfd), STG_OK);
	f->ww_on = true;
}

static void send_file(fx *f, uint32_t idx)
{
	stg_wfile x = {.idx = idx, .kind = STG_WANT_WHOLE, .off = 0};
	uint8_t b[STG_FILE_MAX];
	size_t n = stg__file_encode(&f->ww, &x, b);
	assert_int_equal(stg__wire_send(&f->ww, STG_W_FILE, b, n, NULL, 0), STG_OK);
}

static void send_data(fx *f, const uint8_t *p, size_t len, size_t piece)
{
	for (size_t off = 0; off < len; off += piece)
		assert_int_equal(
		        stg__wire_send_data(&f->ww, p + off, len - off < piece ? len - off : piece),
		        STG_OK);
}

static void send_end(fx *f)
{
	assert_int_equal(stg__wire_send(&f->ww, STG_W_FILE_END, NULL, 0, NULL, 0), STG_OK);
}

/* Read the stream back: its FILE message to the receiver. */
static stg_err receive(fx *f)
{
	if (f->rfd >= 0)
		close(f->rfd);
	f->rfd = open(f->stream, O_RDONLY);
	if (f->rw_on)
		stg__wire_free(&f->rw);
	assert_int_equal(stg__wire_init(&f->rw, f->ctx, f->rfd, -1), STG_OK);
	f->rw_on = true;
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(stg__wire_read(&f->rw, &t, &p, &len), STG_OK);
	assert_int_equal(t, STG_W_FILE);
	return stg__recv_receive_file(&f->rc, p, len);
}

/* part holds nothing (no file, no temporary). */
static void part_empty(const char *part)
{
	DIR *d = opendir(part);
	assert_non_null(d);
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			fail_msg("'%s' left in the partial directory", e->d_name);
	closedir(d);
}

static void test_whole(void **state)
{
	fx *f = *state;
	rc_init(f, f->part);
	stream_begin(f);
	send_file(f, 0);
	send_data(f, f->data, f->len, 70000);
	send_end(f);
	if (receive(f))
		fail_msg("%s", stg_errmsg(f->ctx));
	assert_true(f->rc.r[0].received && f->rc.r[0].checked);
	assert_int_equal(f->rc.done, f->len);
	char *p = ut_join(f->part, NAME);
	size_t len;
	uint8_t *got = ut_read(p, &len);
	assert_int_equal(len, f->len);
	assert_memory_equal(got, f->data, len);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_mtim.tv_sec, 1600000000);
	ut_no_temporaries(f->part, true);
	/* the same entry again: not asked for like this */
	assert_int_equal(receive(f), STG_EREMOTE);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "protocol error: entry 0 was not asked for like this");
	free(got);
	free(p);
}

static void test_damaged(void **state)
{
	fx *f = *state;
	static const char *const why[] = {
	        "'" NAME "' arrived damaged (its XXH3-128 does not match the sender's); nothing "
	        "was published",
	        "'" NAME "' arrived damaged (299999 bytes, expected 300000); nothing was "
	        "published",
	        "'" NAME "': more data than its 300000 bytes arrived",
	};
	uint8_t *more = ut_malloc(f->len + 1);
	memcpy(more, f->data, f->len);
	more[f->len] = 'x';
	for (int k = 0; k < 3; k++) {
		rc_init(f, f->part);
		stream_begin(f);
		send_file(f, 0);
		if (k == 0) {
			f->data[1000] ^= 1;
			send_data(f, f->data, f->len, 65536);
			f->data[1000] ^= 1;
		} else if (k == 1) {
			send_data(f, f->data, f->len - 1, 65536);
		} else {
			send_data(f, more, f->len + 1, 65536);
		}
		send_end(f);
		assert_int_equal(receive(f), STG_ECORRUPT);
		assert_string_equal(stg_errmsg(f->ctx), why[k]);
		assert_false(f->rc.r[0].received);
		part_empty(f->part);
		rc_fini(f);
	}
	free(more);
}

static void test_protocol(void **state)
{
	fx *f = *state;
	rc_init(f, f->part);
	/* out of range; not wanted */
	stream_begin(f);
	send_file(f, 1);
	assert_int_equal(receive(f), STG_EREMOTE);
	assert_string_equal(stg_errmsg(f->ctx),
	                    "protocol error: entry 1 was not asked for like this");
	f->rc.r[0].wanted = false;
	stream_begin(f);
	send_file(f, 0);
	assert_int_equal(receive(f), STG_EREMOTE);
	f->rc.r[0].wanted = true;
	/* a delta for what has no old version */
	stream_begin(f);
	stg_wfile x = {.idx = 0, .kind = STG_WANT_DELTA};
	uint8_t b[STG_FILE_MAX];
	size_t n = stg__file_encode(&f->ww, &x, b);
	assert_int_equal(stg__wire_send(&f->ww, STG_W_FILE, b, n, NULL, 0), STG_OK);
	assert_int_equal(receive(f), STG_EREMOTE);
	/* another message inside the file */
	stream_begin(f);
	send_file(f, 0);
	send_data(f, f->data, 1000, 1000);
	send_file(f, 0);
	assert_int_equal(receive(f), STG_EREMOTE);
	char want[64];
	snprintf(want, sizeof want, "protocol error: message %u inside a file", STG_W_FILE);
	assert_string_equal(stg_errmsg(f->ctx), want);
	part_empty(f->part);
}

/* A disk that fills: ENOSPC, and nothing of the file kept (also when it
 * would have been kept as a partial copy for a resumed transfer). */
static void test_full(void **state)
{
	fx *f = *state;
	f->small = ut_join(f->dir, "small");
	ut_mkdir(f->dir, "small");
	if (mount("tmpfs", f->small, "tmpfs", 0, "size=1m")) {
		fprintf(stderr, "# cannot mount a 1 MiB tmpfs (%s): need root\n", strerror(errno));
		free(f->small);
		f->small = NULL;
		skip();
	}
	free(f->data);
	f->len = 2 << 20;
	f->data = ut_malloc(f->len);
	ut_fill(f->data, f->len, 3);
	for (int resumable = 0; resumable < 2; resumable++) {
		rc_init(f, f->small);
		f->rc.r[0].resumable = resumable;
		stream_begin(f);
		send_file(f, 0);
		send_data(f, f->data, f->len, 256 * 1024);
		send_end(f);
		assert_int_equal(receive(f), STG_ENOSPC);
		assert_non_null(strstr(stg_errmsg(f->ctx), "cannot write '" NAME "'"));
		part_empty(f->small);
		rc_fini(f);
	}
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
static const struct CMUnitTest tests[] = {
        T(test_whole),
        T(test_damaged),
        T(test_protocol),
        T(test_full),
};

UT_MAIN(tests)
