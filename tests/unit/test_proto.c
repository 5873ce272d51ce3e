/* test_proto.c - what a hostile peer meets in proto.c and proto_live.c:
 * sizes added without wrapping, its text escaped before any local message
 * shows it, a manifest's names in an arena, the keepalive skipped by the
 * reader, and reads and writes bounded by the I/O timeout. */
#include "unit.h"
#include "proto.h"
#include "proto_live.h"

#include <malloc.h>
#include <pthread.h>

static void test_sat_add(void **state)
{
	(void)state;
	uint64_t half = (uint64_t)1 << 63;
	assert_true(stg__sat_add(1, 2) == 3);
	/* two files of 2^63 bytes are not 0 bytes */
	assert_true(half + half == 0);
	assert_true(stg__sat_add(half, half) == UINT64_MAX);
	assert_true(stg__sat_add(stg__sat_add(half, half), 5) == UINT64_MAX);
	assert_true(stg__sat_add(UINT64_MAX - 1, 1) == UINT64_MAX);
	assert_true(stg__sat_add(UINT64_MAX - 2, 1) == UINT64_MAX - 1);
	assert_true(stg__sat_add(0, UINT64_MAX) == UINT64_MAX);
}

static const char *esc(const char *s, char *buf, size_t size)
{
	return stg__peer_text(s, strlen(s), buf, size);
}

static void test_peer_text(void **state)
{
	(void)state;
	char b[STG_SHOWN_MAX];
	assert_string_equal(esc("plain/path.txt", b, sizeof b), "plain/path.txt");
	/* C0, ESC sequences, DEL */
	assert_string_equal(esc("a\x1b[2Jb", b, sizeof b), "a\\x1b[2Jb");
	assert_string_equal(esc("\r\n\t\x7f", b, sizeof b), "\\x0d\\x0a\\x09\\x7f");
	/* C1 as a raw byte (CSI) and well encoded in UTF-8 (U+009B) */
	assert_string_equal(esc("x\x9b"
	                        "31m",
	                        b, sizeof b),
	                    "x\\x9b31m");
	assert_string_equal(esc("x\xc2\x9b"
	                        "31m",
	                        b, sizeof b),
	                    "x\\xc2\\x9b31m");
	/* the backslash itself, so an escape cannot be faked */
	assert_string_equal(esc("a\\x1b", b, sizeof b), "a\\x5cx1b");
	/* valid UTF-8 stays readable; bidi overrides do not */
	assert_string_equal(esc("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", b, sizeof b),
	                    "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac");
	assert_string_equal(esc("\xe2\x80\xae"
	                        "evil",
	                        b, sizeof b),
	                    "\\xe2\\x80\\xaeevil");
	/* invalid UTF-8: overlong, surrogate, cut, stray continuation */
	assert_string_equal(esc("\xc0\xaf", b, sizeof b), "\\xc0\\xaf");
	assert_string_equal(esc("\xed\xa0\x80", b, sizeof b), "\\xed\\xa0\\x80");
	assert_string_equal(esc("\xe6\x97", b, sizeof b), "\\xe6\\x97");
	assert_string_equal(esc("\x80", b, sizeof b), "\\x80");
	/* no raw control byte in anything, and cut to fit */
	char in[2000], small[40];
	for (size_t i = 0; i < sizeof in - 1; i++)
		in[i] = (char)(1 + i % 255);
	in[sizeof in - 1] = '\0';
	esc(in, b, sizeof b);
	assert_true(strlen(b) < sizeof b);
	for (const unsigned char *p = (const unsigned char *)b; *p; p++)
		assert_false(*p < 0x20 || *p == 0x7f);
	assert_null(strstr(b, "\xc2\x9b"));
	esc(in, small, sizeof small);
	assert_true(strlen(small) < sizeof small);
	assert_non_null(strstr(small, "..."));
	/* a length, not a NUL, ends the text */
	assert_string_equal(stg__peer_text("abcdef", 3, b, sizeof b), "abc");
}

static void test_arena(void **state)
{
	(void)state;
	stg_arena a = {0};
	char big[5000];
	memset(big, 'p', sizeof big);
	char *first = stg__arena_strndup(&a, "one", 3);
	assert_string_equal(first, "one");
	/* many strings: the first never moves */
	for (int i = 0; i < 1000; i++)
		assert_non_null(stg__arena_strndup(&a, big, sizeof big));
	assert_string_equal(first, "one");
	assert_true(a.bytes == 4 + 1000 * (sizeof big + 1));
	stg__arena_free(&a);
	assert_true(a.bytes == 0);
	stg__arena_free(&a);
}

static void test_noop_skipped(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	/* NOOP, NOOP, DONE: the reader sees DONE */
	static const uint8_t img[] = {STG_W_NOOP, 0, 0,          0, 0, STG_W_NOOP, 0, 0,
	                              0,          0, STG_W_DONE, 0, 0, 0,          0};
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	w.mem = img;
	w.mem_len = sizeof img;
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(t, STG_W_DONE);
	stg__wire_free(&w);
	/* a NOOP with a payload is no keepalive */
	static const uint8_t bad[] = {STG_W_NOOP, 1, 0, 0, 0, 'x'};
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	w.mem = bad;
	w.mem_len = sizeof bad;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(t, STG_W_NOOP);
	stg__wire_free(&w);
	stg_ctx_free(ctx);
}

/* A peer's ERROR message reaches the context escaped. */
static void test_error_escaped(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	static const char msg[] = "\x07\x1b]0;owned\x07\x9b"
	                          "2J bye";
	uint8_t img[64] = {STG_W_ERROR, (uint8_t)sizeof msg, 0, 0, 0, STG_EIO};
	memcpy(img + 6, msg, sizeof msg - 1);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	w.mem = img;
	w.mem_len = 5 + sizeof msg;
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EIO);
	const char *m = stg_errmsg(ctx);
	print_message("# %s\n", m);
	for (const unsigned char *c = (const unsigned char *)m; *c; c++)
		assert_false(*c < 0x20 || (*c >= 0x7f && *c < 0xa0));
	assert_non_null(strstr(m, "\\x1b]0;owned\\x07\\x9b2J bye"));
	stg__wire_free(&w);
	stg_ctx_free(ctx);
}

/* A peer that stops in the middle of a frame: the read gives up after the
 * timeout (1 s here), with a message that says so. */
static void test_stall_mid_frame(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	int in[2], out[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, in[0], out[1]), STG_OK);
	assert_int_equal(stg__wire_timeout(&w, 1, false, false), STG_OK);
	/* a DATA frame of 100 bytes, of which 3 came */
	static const uint8_t part[] = {STG_W_DATA, 100, 0, 0, 0, 0, 'a', 'b'};
	assert_int_equal(write(in[1], part, sizeof part), (ssize_t)sizeof part);
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	double t0 = stg__now();
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	double took = stg__now() - t0;
	print_message("# %.2f s: %s\n", took, stg_errmsg(ctx));
	assert_true(took >= 0.9 && took < 2.5);
	assert_non_null(strstr(stg_errmsg(ctx), "sent nothing for 1 s in the middle"));
	stg__wire_free(&w);
	/* between frames: no bound unless idle is set; with it, the same */
	assert_int_equal(stg__wire_init(&w, ctx, in[0], out[1]), STG_OK);
	assert_int_equal(stg__wire_timeout(&w, 1, true, false), STG_OK);
	t0 = stg__now();
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	ut_assert_time_below(stg__now() - t0, 2.5);
	stg__wire_free(&w);
	for (int i = 0; i < 2; i++) {
		close(in[i]);
		close(out[i]);
	}
	stg_ctx_free(ctx);
}

/* A peer that reads nothing: a write gives up after the timeout. */
static void test_stall_write(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	int in[2], out[2];
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, in[0], out[1]), STG_OK);
	assert_int_equal(stg__wire_timeout(&w, 1, false, false), STG_OK);
	static uint8_t big[1 << 20];
	double t0 = stg__now();
	stg_err err = STG_OK;
	for (int i = 0; i < 8 && !err; i++)
		err = stg__wire_send(&w, STG_W_SIG, big, sizeof big, NULL, 0);
	print_message("# %.2f s: %s\n", stg__now() - t0, stg_errmsg(ctx));
	assert_int_equal(err, STG_EREMOTE);
	ut_assert_time_below(stg__now() - t0, 3);
	assert_non_null(strstr(stg_errmsg(ctx), "read nothing for 1 s"));
	stg__wire_free(&w);
	for (int i = 0; i < 2; i++) {
		close(in[i]);
		close(out[i]);
	}
	stg_ctx_free(ctx);
}

/* The keepalive: a busy end sends NOOPs, so a reader with idle set does
 * not give up on it; and no NOOP lands inside a frame.  The busy end is a
 * thread of this process, as in the tool (a fork would copy the wire's
 * lock in whatever state the keepalive thread had it, and no thread). */
struct busy_sender {
	stg_wire *w;
	const uint8_t *p;
	size_t n;
};

static void *send_late(void *arg)
{
	struct busy_sender *b = arg;
	usleep(2500000);
	stg__wire_send(b->w, STG_W_SIG, b->p, b->n, NULL, 0);
	return NULL;
}

static void test_keepalive(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	int ab[2], ba[2];
	assert_int_equal(pipe(ab), 0);
	assert_int_equal(pipe(ba), 0);
	stg_wire a, b;
	assert_int_equal(stg__wire_init(&a, ctx, ba[0], ab[1]), STG_OK);
	assert_int_equal(stg__wire_init(&b, ctx, ab[0], ba[1]), STG_OK);
	assert_int_equal(stg__wire_timeout(&a, 1, true, true), STG_OK);
	assert_int_equal(stg__wire_timeout(&b, 1, true, false), STG_OK);
	/* a is "busy" for 2.5 s, then sends; b waits with a 1 s bound */
	static uint8_t payload[100000];
	memset(payload, 'k', sizeof payload);
	struct busy_sender bs = {&a, payload, sizeof payload};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, send_late, &bs), 0);
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(stg__wire_read(&b, &t, &p, &len), STG_OK);
	assert_int_equal(t, STG_W_SIG);
	assert_int_equal(len, sizeof payload);
	assert_memory_equal(p, payload, sizeof payload);
	pthread_join(th, NULL);
	assert_true(stg__live_noops(&a) >= 2);
	stg__wire_free(&a);
	stg__wire_free(&b);
	for (int i = 0; i < 2; i++) {
		close(ab[i]);
		close(ba[i]);
	}
	stg_ctx_free(ctx);
}

/* Data that does not compress is sent raw, and compression is not even
 * tried for the next chunks (it costs zstd's time for nothing); then it
 * is tried again, and compressible data is compressed. */
static void test_raw_run(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	enum { N = 256 << 10 };
	uint8_t *noise = malloc(N), *zeros = calloc(1, N);
	assert_non_null(noise);
	assert_non_null(zeros);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < N; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		noise[i] = (uint8_t)x;
	}
	FILE *f = tmpfile();
	assert_non_null(f);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, -1, fileno(f)), STG_OK);
	w.level = 3;
	assert_int_equal(stg__wire_send_data(&w, zeros, N), STG_OK); /* compressed */
	assert_int_equal(stg__wire_send_data(&w, noise, N), STG_OK); /* tried: raw */
	for (int i = 0; i < 40; i++)                                 /* 32 raw, then tried */
		assert_int_equal(stg__wire_send_data(&w, zeros, N), STG_OK);
	stg__wire_free(&w);
	rewind(f);
	assert_int_equal(stg__wire_init(&w, ctx, fileno(f), -1), STG_OK);
	int enc[42];
	for (int i = 0; i < 42; i++) {
		uint8_t t;
		const uint8_t *p, *raw;
		uint32_t len;
		size_t rl;
		assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
		assert_int_equal(t, STG_W_DATA);
		enc[i] = p[0];
		assert_int_equal(stg__wire_data(&w, p, len, &raw, &rl), STG_OK);
		assert_int_equal(rl, N);
		assert_memory_equal(raw, i == 1 ? noise : zeros, N);
	}
	assert_int_equal(enc[0], 1);
	assert_int_equal(enc[1], 0);
	for (int i = 2; i < 34; i++)
		assert_int_equal(enc[i], 0);
	assert_int_equal(enc[34], 1);
	assert_int_equal(enc[41], 1);
	stg__wire_free(&w);
	fclose(f);
	free(noise);
	free(zeros);
	stg_ctx_free(ctx);
}

/* The reader's buffers are as big as what the peer sent, not the most it
 * may send (a short stream, each input of the fuzz target, allocated 5
 * MiB): small, the largest frame allowed, small again, each read whole;
 * a compressed chunk gets the room it says it needs, and one that holds
 * more than it says, or no size, or two frames, is still read right or
 * refused. */
static void put_frame(uint8_t *img, size_t *at, uint8_t type, const void *p, uint32_t n)
{
	img[*at] = type;
	stg__put32(img + *at + 1, n);
	memcpy(img + *at + 5, p, n);
	*at += 5 + n;
}

static void test_buffers_grow(void **state)
{
	(void)state;
	stg_ctx *ctx = ut_ctx(1);
	const uint32_t big = STG_WIRE_FRAME_MAX;
	uint8_t *img = malloc(3 * 5 + 20 + big + 1), *payload = malloc(big + 1);
	assert_non_null(img);
	assert_non_null(payload);
	for (uint32_t i = 0; i <= big; i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	size_t at = 0;
	put_frame(img, &at, STG_W_SIG, payload, 10);
	put_frame(img, &at, STG_W_SIG, payload, big);
	put_frame(img, &at, STG_W_SIG, payload + 1, 10);
	stg_wire w;
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	w.mem = img;
	w.mem_len = at;
	uint8_t t;
	const uint8_t *p;
	uint32_t len;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(len, 10);
	assert_memory_equal(p, payload, 10);
	assert_true(malloc_usable_size(w.buf) < (128u << 10)); /* not STG_WIRE_FRAME_MAX */
	assert_null(w.zbuf);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(len, big);
	assert_memory_equal(p, payload, big);
	assert_int_equal(p[big], 0);
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_OK);
	assert_int_equal(len, 10);
	assert_memory_equal(p, payload + 1, 10);
	stg__wire_free(&w);
	/* one over the largest frame is refused */
	at = 0;
	img[0] = STG_W_SIG;
	stg__put32(img + 1, big + 1);
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	w.mem = img;
	w.mem_len = 5 + big + 1;
	assert_int_equal(stg__wire_read(&w, &t, &p, &len), STG_EREMOTE);
	stg__wire_free(&w);

	/* data chunks: [1, zstd frames] */
	enum { SMALL = 1000 };
	size_t zcap = ZSTD_compressBound(STG_WIRE_CHUNK) * 2 + 1;
	uint8_t *z = malloc(zcap);
	assert_non_null(z);
	const uint8_t *raw;
	size_t rl;
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	/* a small chunk: room for it, not for a whole chunk */
	z[0] = 1;
	size_t n = ZSTD_compress(z + 1, zcap - 1, payload, SMALL, 3);
	assert_false(ZSTD_isError(n));
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)(n + 1), &raw, &rl), STG_OK);
	assert_int_equal(rl, SMALL);
	assert_memory_equal(raw, payload, SMALL);
	assert_true(malloc_usable_size(w.zbuf) < STG_WIRE_CHUNK);
	/* a whole chunk */
	n = ZSTD_compress(z + 1, zcap - 1, payload, STG_WIRE_CHUNK, 3);
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)(n + 1), &raw, &rl), STG_OK);
	assert_int_equal(rl, STG_WIRE_CHUNK);
	assert_memory_equal(raw, payload, STG_WIRE_CHUNK);
	/* two frames in one chunk: both read */
	size_t n1 = ZSTD_compress(z + 1, zcap - 1, payload, SMALL, 3);
	size_t n2 = ZSTD_compress(z + 1 + n1, zcap - 1 - n1, payload + SMALL, SMALL, 3);
	assert_false(ZSTD_isError(n2));
	stg__wire_free(&w);
	assert_int_equal(stg__wire_init(&w, ctx, -1, -1), STG_OK);
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)(n1 + n2 + 1), &raw, &rl), STG_OK);
	assert_int_equal(rl, 2 * SMALL);
	assert_memory_equal(raw, payload, 2 * SMALL);
	/* a frame with no size */
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	assert_non_null(cc);
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
	ZSTD_outBuffer o = {z + 1, zcap - 1, 0};
	ZSTD_inBuffer in = {payload, 3 * SMALL, 0};
	assert_int_equal(ZSTD_compressStream2(cc, &o, &in, ZSTD_e_end), 0);
	assert_true(ZSTD_getFrameContentSize(z + 1, o.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)(o.pos + 1), &raw, &rl), STG_OK);
	assert_int_equal(rl, 3 * SMALL);
	assert_memory_equal(raw, payload, 3 * SMALL);
	ZSTD_freeCCtx(cc);
	/* a frame that says it holds less than it does: refused */
	n = ZSTD_compress(z + 1, zcap - 1, payload, SMALL, 3);
	unsigned long long says = ZSTD_getFrameContentSize(z + 1, n);
	assert_int_equal(says, SMALL);
	/* the header: magic, descriptor, window (unless single-segment),
	 * then the size, here in 2 bytes (the descriptor's top bits 01), less 256 */
	assert_true((z[1 + 4] & 0xc0) == 0x40);
	size_t at_size = 1 + 4 + 1 + ((z[1 + 4] & 0x20) ? 0 : 1);
	z[at_size] = (uint8_t)(SMALL / 2 - 256);
	z[at_size + 1] = (uint8_t)((SMALL / 2 - 256) >> 8);
	assert_int_equal(ZSTD_getFrameContentSize(z + 1, n), SMALL / 2);
	assert_int_equal(stg__wire_data(&w, z, (uint32_t)(n + 1), &raw, &rl), STG_ECORRUPT);
	stg__wire_free(&w);
	free(z);
	free(img);
	free(payload);
	stg_ctx_free(ctx);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sat_add),       cmocka_unit_test(test_peer_text),
        cmocka_unit_test(test_arena),         cmocka_unit_test(test_noop_skipped),
        cmocka_unit_test(test_error_escaped), cmocka_unit_test(test_stall_mid_frame),
        cmocka_unit_test(test_stall_write),   cmocka_unit_test(test_keepalive),
        cmocka_unit_test(test_raw_run),       cmocka_unit_test(test_buffers_grow),
};

UT_MAIN(tests)
