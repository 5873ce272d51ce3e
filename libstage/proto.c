/*
 * proto.c - frames and messages of the push/pull protocol (see proto.h).
 *
 * The reader trusts nothing: a frame's length is checked against
 * STG_WIRE_FRAME_MAX before a byte of its payload is read, into one buffer
 * grown to the largest frame yet (small for a short stream), so memory
 * stays bounded whatever the peer sends; a DATA chunk may not decompress
 * to more than STG_WIRE_CHUNK bytes; every string in a message is checked
 * (length, NUL, a clean relative path) before use.  Reading from a memory
 * buffer is the same code path, for the fuzz target.  Reads and writes are
 * bounded in time by proto_live.c.  A peer's text (its ERROR message, a
 * path it sent) reaches a local message only through stg__peer_text,
 * escaped.
 */
#include "proto.h"
#include "pace.h"
#include "proto_live.h"
#include "ctx.h"
#include "bytes.h"
#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <librsync.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A pipe to or from ssh holds 64 KiB by default: each side then wakes
 * the other for every few pages.  1 MiB (the most an unprivileged
 * process may ask) lets a whole chunk go in one write. */
static void pipe_wide(int fd)
{
	struct stat st;
	if (fd >= 0 && !fstat(fd, &st) && S_ISFIFO(st.st_mode))
		(void)fcntl(fd, F_SETPIPE_SZ, 1 << 20);
}

stg_err stg__wire_init(stg_wire *w, stg_ctx *ctx, int in, int out)
{
	pipe_wide(in);
	pipe_wide(out);
	memset(w, 0, sizeof *w);
	w->ctx = ctx;
	w->in = in;
	w->out = out;
	w->level = 3;
	w->version = STG_WIRE_VERSION;
	/* the buffers come with the first frame that needs them (room): a
	 * short stream costs no 5 MiB of allocations */
	w->cz = ZSTD_createCCtx();
	w->dz = ZSTD_createDCtx();
	if (!w->cz || !w->dz) {
		stg__wire_free(w);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	return STG_OK;
}

void stg__wire_free(stg_wire *w)
{
	stg__live_free(w);
	free(w->buf);
	free(w->zbuf);
	ZSTD_freeCCtx(w->cz);
	ZSTD_freeDCtx(w->dz);
	w->buf = w->zbuf = NULL;
	w->buf_cap = w->zbuf_cap = 0;
	w->cz = NULL;
	w->dz = NULL;
}

/* Room for n bytes in *b (its size *cap, at most most): twice what was
 * asked, from 64 KiB, so a stream of big frames allocates a few times,
 * not for each one.  The old bytes are not kept (nor held meanwhile). */
static stg_err room(stg_wire *w, uint8_t **b, size_t *cap, size_t n, size_t most)
{
	if (*b && n <= *cap)
		return STG_OK;
	size_t c = *cap ? *cap : 64u << 10;
	while (c < n)
		c *= 2;
	free(*b);
	*cap = c < most ? c : most;
	if ((*b = malloc(*cap)))
		return STG_OK;
	*cap = 0;
	return stg__fail(w->ctx, STG_ENOMEM, "out of memory");
}

/* Read exactly len bytes; -1 with *eof_at_start at a clean end of stream
 * before any byte, -1/errno (ETIMEDOUT: past the I/O timeout).  start:
 * the bytes are a frame's header, whose first byte may be waited for
 * without bound (unless the wire says otherwise, proto_live.c). */
static int read_exact(stg_wire *w, uint8_t *p, size_t len, bool start, bool *eof_at_start)
{
	size_t got = 0;
	*eof_at_start = false;
	while (got < len) {
		ssize_t n;
		if (w->mem) {
			size_t left = w->mem_len - w->mem_pos;
			n = (ssize_t)(left < len - got ? left : len - got);
			memcpy(p + got, w->mem + w->mem_pos, (size_t)n);
			w->mem_pos += (size_t)n;
		} else {
			if (stg__live_wait_in(w, got > 0 || !start))
				return -1;
			n = read(w->in, p + got, len - got);
			if (n < 0 && errno == EINTR && !stg__cancelled(w->ctx))
				continue;
			if (n < 0)
				return -1;
		}
		if (n == 0) {
			*eof_at_start = got == 0;
			errno = 0;
			return -1;
		}
		got += (size_t)n;
		w->bytes_in += (uint64_t)n;
		/* a pull's limit: reading slower holds the sender back through
		 * the pipe's (and the transport's) back-pressure */
		stg__bucket_take(w->ctx, w->bw, (double)n);
	}
	return 0;
}

static stg_err peer_error(stg_wire *w, const uint8_t *p, uint32_t len)
{
	stg_err code = len ? (stg_err)p[0] : STG_EREMOTE;
	switch (code) {
	case STG_ENOENT:
	case STG_ENOSPC:
	case STG_ECORRUPT:
	case STG_EEXIST:
	case STG_ENOTSUP:
	case STG_EIO: /* e.g. a file that changed while the far end sent it */
	case STG_EUSAGE: break;
	default: code = STG_EREMOTE;
	}
	/* its text, escaped: it must not drive the local terminal */
	char msg[STG_ERRMSG_MAX - 16];
	if (len > 1)
		stg__peer_text((const char *)p + 1, len - 1, msg, sizeof msg);
	return stg__fail(w->ctx, code, "the far end: %s", len > 1 ? msg : "unknown error");
}

/* A read that failed: why, in words. */
static stg_err read_failed(stg_wire *w, bool eof, bool mid)
{
	w->broken = true;
	if (stg__cancelled(w->ctx))
		return stg__fail(w->ctx, STG_EINTR, "interrupted");
	if (errno == ETIMEDOUT && (w->stalled = true))
		return stg__fail(w->ctx, STG_EREMOTE,
		                 "the far end sent nothing for %d s%s: the connection is stalled "
		                 "or lost (io_timeout, STAGER_IO_TIMEOUT; the same command "
		                 "again resumes)",
		                 stg__live_timeout(w), mid ? " in the middle of a message" : "");
	if (errno)
		return stg__fail_errno(w->ctx, STG_EREMOTE, errno, "reading from the connection");
	return stg__fail(w->ctx, STG_EREMOTE, "the connection closed %s",
	                 eof ? "unexpectedly" : "in the middle of a frame");
}

stg_err stg__wire_read(stg_wire *w, uint8_t *type, const uint8_t **payload, uint32_t *len)
{
	uint8_t hdr[STG_WIRE_HDR];
	bool eof;
	uint32_t n;
	for (;;) {
		if (stg__cancelled(w->ctx))
			return stg__fail(w->ctx, STG_EINTR, "interrupted");
		if (read_exact(w, hdr, sizeof hdr, true, &eof))
			return read_failed(w, eof, false);
		n = stg__get32(hdr + 1);
		/* the keepalive: the peer is there, nothing more */
		if (hdr[0] != STG_W_NOOP || n)
			break;
	}
	if (hdr[0] == 0 || hdr[0] > STG_W_TYPE_MAX)
		return stg__fail(w->ctx, STG_EREMOTE,
		                 "protocol error: unknown message type %u (a damaged stream, or "
		                 "not stager at the far end)",
		                 hdr[0]);
	if (n > STG_WIRE_FRAME_MAX)
		return stg__fail(w->ctx, STG_EREMOTE,
		                 "protocol error: a frame of %u bytes (at most %u allowed)", n,
		                 STG_WIRE_FRAME_MAX);
	stg_err err = room(w, &w->buf, &w->buf_cap, (size_t)n + 1, STG_WIRE_FRAME_MAX + 1);
	if (err)
		return err;
	if (n && read_exact(w, w->buf, n, false, &eof))
		return read_failed(w, false, true);
	w->buf[n] = '\0';
	if (hdr[0] == STG_W_ERROR) {
		w->broken = true;
		return peer_error(w, w->buf, n);
	}
	*type = hdr[0];
	*payload = w->buf;
	*len = n;
	return STG_OK;
}

static const char *type_name(uint8_t t)
{
	static const char *names[] = {"?",         "HELLO",       "WELCOME", "ERROR",
	                              "ENTRY",     "ENTRIES_END", "WANT",    "SIG",
	                              "WANTS_END", "FILE",        "DATA",    "FILE_END",
	                              "DONE",      "PUBLISHED",   "NOOP",    "HOLDS"};
	return t <= STG_W_TYPE_MAX ? names[t] : "?";
}

stg_err stg__wire_expect(stg_wire *w, uint8_t want, const uint8_t **payload, uint32_t *len)
{
	uint8_t t;
	stg_err err = stg__wire_read(w, &t, payload, len);
	if (err)
		return err;
	if (t != want)
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: %s where %s was expected",
		                 type_name(t), type_name(want));
	return STG_OK;
}

stg_err stg__wire_send(stg_wire *w, uint8_t type, const void *a, size_t alen, const void *b,
                       size_t blen)
{
	if (alen + blen > STG_WIRE_FRAME_MAX)
		return stg__fail(w->ctx, STG_EIO, "internal error: frame too large");
	uint8_t hdr[STG_WIRE_HDR];
	hdr[0] = type;
	stg__put32(hdr + 1, (uint32_t)(alen + blen));
	stg__bucket_take(w->ctx, w->bw, (double)(alen + blen + sizeof hdr));
	if (stg__cancelled(w->ctx))
		return stg__fail(w->ctx, STG_EINTR, "interrupted");
	/* one frame at a time: the keepalive's NOOP never lands inside it */
	stg__live_lock(w);
	int bad = stg__live_write(w, hdr, sizeof hdr) || (alen && stg__live_write(w, a, alen)) ||
	          (blen && stg__live_write(w, b, blen));
	int en = errno;
	stg__live_unlock(w);
	if (bad) {
		if (en == ETIMEDOUT) {
			w->broken = w->stalled = true;
			return stg__fail(w->ctx, STG_EREMOTE,
			                 "the far end read nothing for %d s: the connection is "
			                 "stalled or lost (io_timeout, STAGER_IO_TIMEOUT; the same "
			                 "command again resumes)",
			                 stg__live_timeout(w));
		}
		if (stg__cancelled(w->ctx))
			return stg__fail(w->ctx, STG_EINTR, "interrupted");
		if (w->broken)
			return stg__fail_errno(w->ctx, STG_EREMOTE, en,
			                       "writing to the connection");
		/* the far end may have said why it stopped listening */
		w->broken = true;
		uint8_t t;
		const uint8_t *p;
		uint32_t len;
		stg_err err = stg__wire_read(w, &t, &p, &len);
		if (err && strstr(stg_errmsg(w->ctx), "the far end:"))
			return err;
		return stg__fail_errno(w->ctx, STG_EREMOTE, en, "writing to the connection");
	}
	w->bytes_out += sizeof hdr + alen + blen;
	return STG_OK;
}

void stg__wire_send_error(stg_wire *w, stg_err err)
{
	if (w->broken)
		return;
	uint8_t code = (uint8_t)err;
	const char *msg = stg_errmsg(w->ctx);
	size_t n = strlen(msg);
	if (n > 4000)
		n = 4000;
	char saved[STG_ERRMSG_MAX];
	snprintf(saved, sizeof saved, "%s", msg);
	stg__wire_send(w, STG_W_ERROR, &code, 1, saved, n);
	/* the message on ctx is the one that matters, not a failed send's */
	stg__fail(w->ctx, err, "%s", saved);
}

/* Data that does not compress (images, packs, anything compressed or
 * encrypted already) would cost zstd's time for nothing, more than the
 * link saves: after a chunk that shrinks by less than 1/32, the next
 * RAW_RUN chunks go as they are, then compression is tried again (the
 * data may change within a stream). */
#define RAW_RUN 32

stg_err stg__wire_send_chunk(stg_wire *w, uint8_t type, const void *raw, size_t len)
{
	uint8_t enc = 0;
	if (type == STG_W_DATA && w->raw_left) {
		w->raw_left--;
		return stg__wire_send(w, type, &enc, 1, raw, len);
	}
	size_t cap = ZSTD_compressBound(STG_WIRE_CHUNK);
	stg_err err = room(w, &w->zbuf, &w->zbuf_cap, cap, cap);
	if (err)
		return err;
	size_t n = ZSTD_compressCCtx(w->cz, w->zbuf, cap, raw, len, w->level);
	bool pays = !ZSTD_isError(n) && n < len - len / 32;
	if (type == STG_W_DATA && !pays && len >= (64u << 10))
		w->raw_left = RAW_RUN;
	if (!ZSTD_isError(n) && n < len) {
		enc = 1;
		return stg__wire_send(w, type, &enc, 1, w->zbuf, n);
	}
	return stg__wire_send(w, type, &enc, 1, raw, len);
}

stg_err stg__wire_send_data(stg_wire *w, const void *raw, size_t len)
{
	return stg__wire_send_chunk(w, STG_W_DATA, raw, len);
}

stg_err stg__entries_decode(stg_wire *w, const uint8_t *p, uint32_t len,
                            stg_err (*fn)(void *arg, const uint8_t *rec, uint32_t len), void *arg)
{
	const uint8_t *raw;
	size_t rl;
	stg_err err = stg__wire_data(w, p, len, &raw, &rl);
	if (err)
		return err;
	if (rl == 0)
		return stg__fail(w->ctx, STG_ECORRUPT, "protocol error: an empty ENTRY batch");
	while (rl) {
		if (rl < 2)
			return stg__fail(w->ctx, STG_ECORRUPT, "protocol error: a truncated ENTRY");
		uint32_t n = (uint32_t)raw[0] | (uint32_t)raw[1] << 8;
		if (n > rl - 2)
			return stg__fail(w->ctx, STG_ECORRUPT, "protocol error: a truncated ENTRY");
		if ((err = fn(arg, raw + 2, n)))
			return err;
		raw += 2 + n;
		rl -= 2 + n;
	}
	return STG_OK;
}

stg_err stg__wire_data(stg_wire *w, const uint8_t *p, uint32_t len, const uint8_t **raw,
                       size_t *rawlen)
{
	if (len < 1 || p[0] > 1)
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: a malformed data chunk");
	if (p[0] == 0) {
		if (len - 1 > STG_WIRE_CHUNK)
			return stg__fail(w->ctx, STG_EREMOTE,
			                 "protocol error: a data chunk over %u bytes",
			                 STG_WIRE_CHUNK);
		*raw = p + 1;
		*rawlen = len - 1;
		return STG_OK;
	}
	/* room for what a chunk of one frame says it holds (as a sender's
	 * does), else for a whole chunk: one that holds more than it says
	 * fails to decompress */
	unsigned long long says = ZSTD_getFrameContentSize(p + 1, len - 1);
	size_t want = STG_WIRE_CHUNK;
	if (says <= STG_WIRE_CHUNK && ZSTD_findFrameCompressedSize(p + 1, len - 1) == len - 1)
		want = (size_t)says;
	stg_err err = room(w, &w->zbuf, &w->zbuf_cap, want ? want : 1,
	                   ZSTD_compressBound(STG_WIRE_CHUNK));
	if (err)
		return err;
	size_t n = ZSTD_decompressDCtx(w->dz, w->zbuf, want, p + 1, len - 1);
	if (ZSTD_isError(n))
		return stg__fail(w->ctx, STG_ECORRUPT, "a damaged data chunk: %s",
		                 ZSTD_getErrorName(n));
	*raw = w->zbuf;
	*rawlen = n;
	return STG_OK;
}

/* ---- a peer's text and a manifest's names -------------------------------- */

/* The length of the valid UTF-8 sequence at p (n bytes left) and its code
 * point; 0 if it is not one (overlong, a surrogate, past U+10FFFF, cut). */
static size_t utf8_seq(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t k;
	uint32_t c, min;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		k = 2, c = p[0] & 0x1f, min = 0x80;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		k = 3, c = p[0] & 0x0f, min = 0x800;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		k = 4, c = p[0] & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return k;
}

const char *stg__peer_text(const char *s, size_t n, char *out, size_t size)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0;
	while (i < n && p[i]) {
		uint32_t cp = 0;
		size_t k = p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' ? 1 : 0;
		if (!k && p[i] >= 0x80 && (k = utf8_seq(p + i, n - i, &cp)) &&
		    (cp < 0xa0 || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)))
			k = 0; /* C1 controls and bidi overrides, even well encoded */
		size_t need = k ? k : 4 * (cp >= 0x80 ? (cp < 0x800 ? 2 : 3) : 1);
		if (o + need + 4 > size) {
			snprintf(out + o, size - o, "...");
			return out;
		}
		if (k) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
			continue;
		}
		/* escaped, each byte: a C1 character as its two, a stray one alone */
		size_t m = cp >= 0x80 ? (cp < 0x800 ? 2 : 3) : 1;
		for (size_t j = 0; j < m; j++)
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", p[i + j]);
		i += m;
	}
	out[o] = '\0';
	return out;
}

typedef struct arena_block {
	struct arena_block *next;
	size_t cap, used;
	char data[];
} arena_block;

#define ARENA_BLOCK ((size_t)1 << 20)

char *stg__arena_strndup(stg_arena *a, const char *s, size_t n)
{
	arena_block *b = a->head;
	if (!b || b->cap - b->used < n + 1) {
		size_t cap = n + 1 > ARENA_BLOCK ? n + 1 : ARENA_BLOCK;
		if (!(b = malloc(sizeof *b + cap)))
			return NULL;
		b->cap = cap;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	char *d = b->data + b->used;
	memcpy(d, s, n);
	d[n] = '\0';
	b->used += n + 1;
	a->bytes += n + 1;
	return d;
}

void stg__arena_free(stg_arena *a)
{
	while (a->head) {
		arena_block *b = a->head;
		a->head = b->next;
		free(b);
	}
	a->bytes = 0;
}

/* ---- messages ------------------------------------------------------------ */

size_t stg__wentry_encode(const stg_wentry *e, uint8_t *out)
{
	size_t pl = strlen(e->path), ll = e->link ? strlen(e->link) : 0;
	out[0] = e->type;
	stg__put32(out + 1, e->mode);
	stg__put64(out + 5, e->size);
	stg__put64(out + 13, (uint64_t)e->mtime);
	stg__put32(out + 21, e->mtime_nsec);
	memcpy(out + 25, e->xxh3, 16);
	out[41] = (uint8_t)pl;
	out[42] = (uint8_t)(pl >> 8);
	out[43] = (uint8_t)ll;
	out[44] = (uint8_t)(ll >> 8);
	memcpy(out + STG_WENTRY_FIXED, e->path, pl);
	if (ll)
		memcpy(out + STG_WENTRY_FIXED + pl, e->link, ll);
	return STG_WENTRY_FIXED + pl + ll;
}

void stg__wentry_free(stg_wentry *e)
{
	free(e->path);
	free(e->link);
	e->path = e->link = NULL;
}

stg_err stg__wentry_decode(stg_ctx *ctx, const uint8_t *p, uint32_t len, stg_wentry *e)
{
	return stg__wentry_decode_in(ctx, p, len, e, NULL);
}

stg_err stg__wentry_decode_in(stg_ctx *ctx, const uint8_t *p, uint32_t len, stg_wentry *e,
                              stg_arena *names)
{
	char sh[STG_SHOWN_MAX];
	memset(e, 0, sizeof *e);
	if (len < STG_WENTRY_FIXED)
		return stg__fail(ctx, STG_ECORRUPT, "protocol error: a short ENTRY");
	size_t pl = (size_t)p[41] | (size_t)p[42] << 8, ll = (size_t)p[43] | (size_t)p[44] << 8;
	if (STG_WENTRY_FIXED + pl + ll != len || pl > STG_PATH_MAX || ll > STG_PATH_MAX)
		return stg__fail(ctx, STG_ECORRUPT, "protocol error: an ENTRY of the wrong length");
	e->type = p[0];
	e->mode = stg__get32(p + 1);
	e->size = stg__get64(p + 5);
	e->mtime = (int64_t)stg__get64(p + 13);
	e->mtime_nsec = stg__get32(p + 21);
	memcpy(e->xxh3, p + 25, 16);
	const char *path = (const char *)p + STG_WENTRY_FIXED, *link = path + pl;
	stg__peer_text(path, pl, sh, sizeof sh);
	if (!stg__path_ok(path, pl))
		return stg__fail(ctx, STG_ECORRUPT,
		                 "refusing the path '%s': not a clean relative path", sh);
	if (e->mtime_nsec > 999999999)
		return stg__fail(ctx, STG_ECORRUPT, "'%s': a bad mtime", sh);
	bool wants_link = e->type == STG_SYMLINK || e->type == STG_HARDLINK;
	if (e->type < STG_FILE || e->type > STG_HARDLINK)
		return stg__fail(ctx, STG_ECORRUPT, "'%s': unknown entry type %u", sh, e->type);
	if (wants_link != (ll > 0) || memchr(link, '\0', ll))
		return stg__fail(ctx, STG_ECORRUPT, "'%s': a malformed link", sh);
	if (e->type == STG_HARDLINK && !stg__path_ok(link, ll))
		return stg__fail(ctx, STG_ECORRUPT, "'%s': a hardlink to a bad path", sh);
	/* every bit means something: a damaged entry never decodes */
	static const uint8_t zero[16];
	if (e->mode & ~07777u || (e->type != STG_FILE && (e->size || memcmp(e->xxh3, zero, 16))))
		return stg__fail(ctx, STG_ECORRUPT, "'%s': a malformed entry", sh);
	if (names) {
		if (!(e->path = stg__arena_strndup(names, path, pl)) ||
		    (ll && !(e->link = stg__arena_strndup(names, link, ll)))) {
			e->path = e->link = NULL;
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
		return STG_OK;
	}
	if (!(e->path = strndup(path, pl)) || (ll && !(e->link = strndup(link, ll)))) {
		stg__wentry_free(e);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	return STG_OK;
}

stg_err stg__hello_decode(stg_ctx *ctx, const uint8_t *p, uint32_t len, uint8_t *op, uint8_t *flags,
                          int *level, uint32_t *version, const char **path)
{
	if (len < 14 || memcmp(p, STG_WIRE_MAGIC, 8))
		return stg__fail(ctx, STG_EREMOTE,
		                 "protocol error: not a stager client (bad greeting)");
	uint32_t v = stg__get32(p + 8);
	if (v < STG_WIRE_VERSION_MIN)
		return stg__fail(ctx, STG_EREMOTE,
		                 "protocol version %u at the client, %u here: install the same "
		                 "stager version on both ends",
		                 v, STG_WIRE_VERSION);
	/* a newer client is answered in this end's version: it speaks the
	 * older ones too, or says so */
	*version = v > STG_WIRE_VERSION ? STG_WIRE_VERSION : v;
	*op = p[12];
	*flags = p[13];
	if (*flags & ~(STG_FLAG_PACK | STG_FLAG_REPLACE | STG_FLAG_LEVEL | STG_FLAG_CHECKSUM))
		return stg__fail(ctx, STG_EREMOTE, "protocol error: unknown flags %#x", *flags);
	size_t head = 14;
	*level = 0;
	if (*flags & STG_FLAG_LEVEL) {
		if (len < 15 || p[14] < 1 || p[14] > 19)
			return stg__fail(ctx, STG_EREMOTE,
			                 "protocol error: a bad level in the greeting");
		*level = p[14];
		head = 15;
	}
	const char *s = (const char *)p + head;
	size_t n = len - head;
	if (*op != STG_OP_PUSH && *op != STG_OP_PULL)
		return stg__fail(ctx, STG_EREMOTE, "protocol error: unknown operation %u", *op);
	if (n == 0 || n > STG_PATH_MAX || memchr(s, '\0', n))
		return stg__fail(ctx, STG_EUSAGE, "protocol error: a bad path in the greeting");
	/* the reader NUL-terminates every payload */
	*path = s;
	return STG_OK;
}

size_t stg__welcome_encode(const stg_wire *w, uint8_t out[12])
{
	memcpy(out, STG_WIRE_MAGIC, 8);
	stg__put32(out + 8, w->version);
	return 12;
}

stg_err stg__welcome_decode(stg_wire *w, const uint8_t *p, uint32_t len)
{
	if (len != 12 || memcmp(p, STG_WIRE_MAGIC, 8))
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: not stager at the far end");
	uint32_t v = stg__get32(p + 8);
	if (v < STG_WIRE_VERSION_MIN || v > w->version)
		return stg__fail(w->ctx, STG_EREMOTE,
		                 "protocol version %u at the far end, %u here: install the same "
		                 "stager version on both ends",
		                 v, w->version);
	w->version = v;
	return STG_OK;
}

size_t stg__want_encode(const stg_wire *w, const stg_wwant *x, uint8_t out[STG_WANT_MAX])
{
	stg__put32(out, x->idx);
	out[4] = x->kind;
	if (w->version < 2)
		return 5;
	stg__put64(out + 5, x->off);
	memcpy(out + 13, x->prefix, 16);
	return 29;
}

stg_err stg__want_decode(stg_wire *w, const uint8_t *p, uint32_t len, stg_wwant *x)
{
	static const uint8_t zero[16];
	memset(x, 0, sizeof *x);
	if (len != (w->version < 2 ? 5u : 29u))
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: a bad request");
	x->idx = stg__get32(p);
	x->kind = p[4];
	if (len > 5) {
		x->off = stg__get64(p + 5);
		memcpy(x->prefix, p + 13, 16);
	}
	/* every bit means something: no hash without an offer */
	if (x->kind > STG_WANT_DELTA || (!x->off && memcmp(x->prefix, zero, 16)))
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: a request for entry %u",
		                 x->idx);
	return STG_OK;
}

size_t stg__file_encode(const stg_wire *w, const stg_wfile *x, uint8_t out[STG_FILE_MAX])
{
	stg__put32(out, x->idx);
	out[4] = x->kind;
	if (w->version < 2)
		return 5;
	stg__put64(out + 5, x->off);
	return 13;
}

stg_err stg__file_decode(stg_wire *w, const uint8_t *p, uint32_t len, stg_wfile *x)
{
	memset(x, 0, sizeof *x);
	if (len != (w->version < 2 ? 5u : 13u) || p[4] > STG_WANT_DELTA)
		return stg__fail(w->ctx, STG_EREMOTE, "protocol error: a bad FILE");
	x->idx = stg__get32(p);
	x->kind = p[4];
	if (len > 5)
		x->off = stg__get64(p + 5);
	return STG_OK;
}
