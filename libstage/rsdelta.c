/*
 * rsdelta.c - a file as the changes from an older version of it, in
 * librsync's delta format, made and applied at the speed of memory.
 *
 * The format (librsync's, so that `rdiff patch` reads what we write and we
 * read what librsync writes): the magic "rs\x026", then commands, each an
 * opcode byte and big-endian parameters: LITERAL of 1..64 bytes (opcode =
 * length) or of a length in 1, 2, 4 or 8 bytes (0x41..0x44), followed by
 * the bytes; COPY of (position, length) in the old file, each in 1, 2, 4 or
 * 8 bytes (0x45..0x54); END (0).
 *
 * Making one: the old file is cut into blocks (a power of two near the
 * square root of its size, 1 to 64 KiB); each gets a rolling sum and an
 * XXH3-64.  The new file is read in order: at each position the block
 * that followed the last match is tried first (a file changed in place
 * matches block after block, at the cost of one XXH3 per block); failing
 * that, the window's rolling sum is looked up and a candidate confirmed
 * by its XXH3-64; failing that, the window moves one byte and the byte
 * becomes literal.  Matches next to each other become one COPY.  A
 * false match (two blocks with equal sums) would make a wrong file: the
 * file a delta makes is always checked against its manifest's XXH3-128,
 * and a stage then reads the pack whole.  librsync (BLAKE2 over every
 * block of both files) took 8 s to pack a 1 GiB image against its older
 * version; this takes about as long as reading the two files.
 *
 * Applying one: commands are read as their bytes arrive (any split);
 * LITERAL bytes pass straight through, COPY reads the old file with pread
 * in large pieces.  The delta is hostile input: unknown commands, a COPY
 * past the old file's end, or a delta that ends before its END are
 * refused, and nothing is allocated from a length it gives.
 */
#include "rsdelta.h"
#include "ctx.h"

#include <xxhash.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAGIC     0x72730236u /* "rs\x026" */
#define OP_LIT_N1 0x41
#define OP_COPY   0x45
#define OP_LAST   0x54
#define LIT_MAX   (1u << 20) /* literal bytes held before they are written */
#define OUT_BUF   (64u << 10)
#define COPY_BUF  (1u << 20)
#define MULT      0x08104225u /* the rolling sum's multiplier (odd) */

/* ---- signatures ------------------------------------------------------------------ */

struct stg_rsig {
	uint32_t block;
	uint32_t mpow; /* MULT^(block - 1) */
	size_t n;      /* whole blocks */
	uint32_t *weak;
	uint64_t *strong;
	uint32_t *table; /* open addressing by weak sum: block index + 1 */
	size_t tmask;
	uint32_t tail_len; /* a last, shorter block */
	uint64_t tail_strong;
	uint8_t *part; /* a block whose bytes came in pieces */
	size_t plen;
	size_t cap_blocks;
};

/* The rolling sum of p[0..n): sum of p[i] * MULT^(n-1-i), mod 2^32.  A
 * byte at a time it is one chain of multiplies, 0.9 GB/s.  LANES
 * accumulators, each the sum of every LANES-th byte in powers of
 * MULT^LANES, are independent (the compiler makes vectors of them) and
 * are joined at the end: the same sum at 5 GB/s. */
#define LANES 32
static uint32_t weak_of(const uint8_t *p, size_t n)
{
	uint32_t ml = 1;
	for (int k = 0; k < LANES; k++)
		ml *= MULT;
	uint32_t acc[LANES] = {0};
	size_t i = 0;
	for (; i + LANES <= n; i += LANES)
		for (int j = 0; j < LANES; j++)
			acc[j] = acc[j] * ml + p[i + j];
	uint32_t h = 0;
	for (int j = 0; j < LANES; j++)
		h = h * MULT + acc[j];
	for (; i < n; i++)
		h = h * MULT + p[i];
	return h;
}

static uint32_t hash_slot(uint32_t weak, size_t mask)
{
	return (uint32_t)((weak * 2654435761u) & mask);
}

stg_rsig *stg__rsig_new(uint64_t size)
{
	stg_rsig *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	uint32_t b = 1024;
	while (b < 65536 && (uint64_t)b * b < size)
		b *= 2;
	s->block = b;
	s->mpow = 1;
	for (uint32_t i = 1; i < b; i++)
		s->mpow *= MULT;
	s->cap_blocks = (size_t)(size / b) + 1;
	size_t tcap = 16;
	while (tcap < s->cap_blocks * 2)
		tcap *= 2;
	s->tmask = tcap - 1;
	s->weak = malloc(s->cap_blocks * sizeof *s->weak);
	s->strong = malloc(s->cap_blocks * sizeof *s->strong);
	s->table = calloc(tcap, sizeof *s->table);
	s->part = malloc(b);
	if (!s->weak || !s->strong || !s->table || !s->part) {
		stg__rsig_free(s);
		return NULL;
	}
	return s;
}

void stg__rsig_free(stg_rsig *s)
{
	if (!s)
		return;
	free(s->weak);
	free(s->strong);
	free(s->table);
	free(s->part);
	free(s);
}

static void add_block(stg_rsig *s, const uint8_t *p)
{
	if (s->n == s->cap_blocks)
		return; /* more than the size given: not matched against */
	size_t i = s->n++;
	s->weak[i] = weak_of(p, s->block);
	s->strong[i] = XXH3_64bits(p, s->block);
	size_t k = hash_slot(s->weak[i], s->tmask);
	while (s->table[k])
		k = (k + 1) & s->tmask;
	s->table[k] = (uint32_t)(i + 1);
}

stg_err stg__rsig_sink(void *arg, const uint8_t *p, size_t n)
{
	stg_rsig *s = arg;
	if (!n) {
		if (s->plen) {
			s->tail_len = (uint32_t)s->plen;
			s->tail_strong = XXH3_64bits(s->part, s->plen);
		}
		return STG_OK;
	}
	while (n) {
		if (!s->plen && n >= s->block) {
			add_block(s, p);
			p += s->block;
			n -= s->block;
			continue;
		}
		size_t k = s->block - s->plen < n ? s->block - s->plen : n;
		memcpy(s->part + s->plen, p, k);
		s->plen += k;
		p += k;
		n -= k;
		if (s->plen == s->block) {
			add_block(s, s->part);
			s->plen = 0;
		}
	}
	return STG_OK;
}

/* ---- making a delta -------------------------------------------------------------- */

struct stg_rdelta {
	const stg_rsig *sig;
	stg_sink_fn out;
	void *arg;
	uint8_t *buf; /* the new file's bytes: [lit, end) kept, p the window */
	size_t cap, lit, p, end;
	uint32_t h; /* the rolling sum of the window at p, if have_h */
	bool have_h;
	size_t next; /* the block after the last match, tried first */
	bool have_next;
	uint64_t copy_pos, copy_len; /* a COPY not written yet */
	uint8_t obuf[OUT_BUF];
	size_t olen;
	stg_err err;
};

static void put_int(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static int int_len(uint64_t v)
{
	return v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
}

static int len_class(int bytes)
{
	return bytes == 1 ? 0 : bytes == 2 ? 1 : bytes == 4 ? 2 : 3;
}

static void flush_out(stg_rdelta *d)
{
	if (d->olen && !d->err)
		d->err = d->out(d->arg, d->obuf, d->olen);
	d->olen = 0;
}

static void emit(stg_rdelta *d, const void *p, size_t n)
{
	while (n && !d->err) {
		if (d->olen == OUT_BUF)
			flush_out(d);
		size_t k = OUT_BUF - d->olen < n ? OUT_BUF - d->olen : n;
		memcpy(d->obuf + d->olen, p, k);
		d->olen += k;
		p = (const uint8_t *)p + k;
		n -= k;
	}
}

static void emit_copy(stg_rdelta *d)
{
	if (!d->copy_len)
		return;
	uint8_t c[17];
	int pb = int_len(d->copy_pos), lb = int_len(d->copy_len);
	c[0] = (uint8_t)(OP_COPY + 4 * len_class(pb) + len_class(lb));
	put_int(c + 1, d->copy_pos, pb);
	put_int(c + 1 + pb, d->copy_len, lb);
	emit(d, c, (size_t)(1 + pb + lb));
	d->copy_len = 0;
}

static void emit_literal(stg_rdelta *d, const uint8_t *p, size_t n)
{
	if (!n)
		return;
	emit_copy(d);
	uint8_t c[9];
	int lb = n <= 64 ? 0 : int_len(n);
	c[0] = (uint8_t)(lb ? OP_LIT_N1 + len_class(lb) : (int)n);
	if (lb)
		put_int(c + 1, n, lb);
	emit(d, c, (size_t)(1 + lb));
	emit(d, p, n);
}

static void add_copy(stg_rdelta *d, uint64_t pos, uint64_t len)
{
	if (d->copy_len && d->copy_pos + d->copy_len == pos) {
		d->copy_len += len;
		return;
	}
	emit_copy(d);
	d->copy_pos = pos;
	d->copy_len = len;
}

stg_rdelta *stg__rdelta_new(const stg_rsig *sig, stg_sink_fn out, void *arg)
{
	stg_rdelta *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	d->sig = sig;
	d->out = out;
	d->arg = arg;
	d->cap = LIT_MAX + 2 * (size_t)sig->block + (64u << 10);
	if (!(d->buf = malloc(d->cap))) {
		free(d);
		return NULL;
	}
	uint8_t m[4];
	put_int(m, MAGIC, 4);
	emit(d, m, 4);
	return d;
}

void stg__rdelta_free(stg_rdelta *d)
{
	if (d)
		free(d->buf);
	free(d);
}

/* The block the window at p is, or -1. */
static long find(stg_rdelta *d)
{
	const stg_rsig *s = d->sig;
	const uint8_t *w = d->buf + d->p;
	bool have_s = false;
	uint64_t strong = 0;
	if (d->have_next && d->next < s->n) {
		strong = XXH3_64bits(w, s->block);
		have_s = true;
		if (strong == s->strong[d->next])
			return (long)d->next;
	}
	if (!d->have_h) {
		d->h = weak_of(w, s->block);
		d->have_h = true;
	}
	for (size_t k = hash_slot(d->h, s->tmask); s->table[k]; k = (k + 1) & s->tmask) {
		size_t i = s->table[k] - 1;
		if (s->weak[i] != d->h)
			continue;
		if (!have_s) {
			strong = XXH3_64bits(w, s->block);
			have_s = true;
		}
		if (strong == s->strong[i])
			return (long)i;
	}
	return -1;
}

/* Move the window along what is buffered (to its end if eof). */
static void scan(stg_rdelta *d, bool eof)
{
	const stg_rsig *s = d->sig;
	const size_t b = s->block;
	if (!s->n && d->end - d->lit > s->tail_len + LIT_MAX) {
		/* no whole block to match: all literal but what could be the
		 * old file's short last block */
		size_t upto = d->end - s->tail_len;
		emit_literal(d, d->buf + d->lit, upto - d->lit);
		d->lit = d->p = upto;
	}
	while (!d->err && s->n && d->end - d->p >= b) {
		long i = find(d);
		if (i >= 0) {
			emit_literal(d, d->buf + d->lit, d->p - d->lit);
			add_copy(d, (uint64_t)i * b, b);
			d->p += b;
			d->lit = d->p;
			d->have_h = false;
			d->next = (size_t)i + 1;
			d->have_next = true;
			continue;
		}
		d->have_next = false;
		if (d->end - d->p == b)
			break; /* rolling needs the byte after the window */
		const uint8_t *w = d->buf + d->p;
		d->h = (d->h - w[0] * s->mpow) * MULT + w[b];
		d->p++;
		if (d->p - d->lit >= LIT_MAX) {
			emit_literal(d, d->buf + d->lit, d->p - d->lit);
			d->lit = d->p;
		}
	}
	if (!eof || d->err)
		return;
	/* the rest: the old file's short last block, or literal */
	size_t left = d->end - d->p;
	if (s->tail_len && left == s->tail_len &&
	    XXH3_64bits(d->buf + d->p, left) == s->tail_strong) {
		emit_literal(d, d->buf + d->lit, d->p - d->lit);
		add_copy(d, (uint64_t)s->n * b, left);
		d->lit = d->p = d->end;
	}
	emit_literal(d, d->buf + d->lit, d->end - d->lit);
	d->lit = d->p = d->end;
	emit_copy(d);
	uint8_t end = 0;
	emit(d, &end, 1);
	flush_out(d);
}

stg_err stg__rdelta_sink(void *arg, const uint8_t *p, size_t n)
{
	stg_rdelta *d = arg;
	if (!n) {
		scan(d, true);
		return d->err;
	}
	while (n && !d->err) {
		if (d->end == d->cap) {
			/* keep only what is not written yet */
			memmove(d->buf, d->buf + d->lit, d->end - d->lit);
			d->p -= d->lit;
			d->end -= d->lit;
			d->lit = 0;
		}
		size_t k = d->cap - d->end < n ? d->cap - d->end : n;
		memcpy(d->buf + d->end, p, k);
		d->end += k;
		p += k;
		n -= k;
		scan(d, false);
	}
	return d->err;
}

/* ---- applying a delta ------------------------------------------------------------ */

enum { R_MAGIC, R_OP, R_PARAMS, R_LITERAL, R_END };

struct stg_rpatch {
	stg_ctx *ctx;
	int basefd;
	uint64_t base_size;
	stg_sink_fn out;
	stg_copy_fn copy; /* NULL: COPY's bytes go to out */
	void *arg;
	int state;
	uint8_t op;
	uint8_t par[16];
	size_t plen, pneed;
	uint64_t lit_left;
	uint8_t *cbuf;
};

stg_rpatch *stg__rpatch_new(stg_ctx *ctx, int basefd, uint64_t base_size, stg_sink_fn out,
                            void *arg)
{
	stg_rpatch *r = calloc(1, sizeof *r);
	if (!r || !(r->cbuf = stg__io_alloc(COPY_BUF))) {
		free(r);
		return NULL;
	}
	r->ctx = ctx;
	r->basefd = basefd;
	r->base_size = base_size;
	r->out = out;
	r->arg = arg;
	r->pneed = 4;
	return r;
}

void stg__rpatch_set_copy(stg_rpatch *r, stg_copy_fn copy)
{
	r->copy = copy;
}

void stg__rpatch_free(stg_rpatch *r)
{
	if (r)
		free(r->cbuf);
	free(r);
}

static uint64_t get_int(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

static stg_err damaged(stg_rpatch *r, const char *why)
{
	return stg__fail(r->ctx, STG_ECORRUPT, "damaged delta: %s", why);
}

static stg_err do_copy(stg_rpatch *r, uint64_t pos, uint64_t len)
{
	if (!len || pos > r->base_size || len > r->base_size - pos)
		return damaged(r, "it copies from past the end of the older version");
	if (r->copy)
		return r->copy(r->arg, r->basefd, pos, len, r->cbuf, COPY_BUF);
	while (len) {
		size_t k = len < COPY_BUF ? (size_t)len : COPY_BUF;
		ssize_t n = pread(r->basefd, r->cbuf, k, (off_t)pos);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return stg__fail_errno(r->ctx, STG_EIO, errno, "reading the older version");
		if (n == 0)
			return damaged(r, "the older version is shorter than it says");
		stg_err err = r->out(r->arg, r->cbuf, (size_t)n);
		if (err)
			return err;
		if (stg__cancelled(r->ctx))
			return stg__fail(r->ctx, STG_EINTR, "interrupted");
		pos += (uint64_t)n;
		len -= (uint64_t)n;
	}
	return STG_OK;
}

/* An opcode read: what follows it. */
static stg_err opcode(stg_rpatch *r, uint8_t op)
{
	r->op = op;
	r->plen = 0;
	if (op == 0) {
		r->state = R_END;
	} else if (op <= 64) {
		r->lit_left = op;
		r->state = R_LITERAL;
	} else if (op <= OP_LIT_N1 + 3) {
		r->pneed = (size_t)1 << (op - OP_LIT_N1);
		r->state = R_PARAMS;
	} else if (op <= OP_LAST) {
		int k = op - OP_COPY;
		r->pneed = ((size_t)1 << (k / 4)) + ((size_t)1 << (k % 4));
		r->state = R_PARAMS;
	} else {
		return damaged(r, "an unknown command");
	}
	return STG_OK;
}

/* The parameters read: run the command. */
static stg_err params(stg_rpatch *r)
{
	if (r->state == R_MAGIC) {
		if (get_int(r->par, 4) != MAGIC)
			return damaged(r, "not a librsync delta");
		r->state = R_OP;
		return STG_OK;
	}
	if (r->op < OP_COPY) {
		r->lit_left = get_int(r->par, (int)r->pneed);
		r->state = r->lit_left ? R_LITERAL : R_OP;
		return STG_OK;
	}
	int k = r->op - OP_COPY, pb = 1 << (k / 4), lb = 1 << (k % 4);
	r->state = R_OP;
	return do_copy(r, get_int(r->par, pb), get_int(r->par + pb, lb));
}

stg_err stg__rpatch_sink(void *arg, const uint8_t *p, size_t n)
{
	stg_rpatch *r = arg;
	if (!n)
		return r->state == R_END ? r->out(r->arg, NULL, 0)
		                         : damaged(r, "it ends before its END command");
	while (n) {
		stg_err err = STG_OK;
		switch (r->state) {
		case R_MAGIC:
		case R_PARAMS: {
			size_t k = r->pneed - r->plen < n ? r->pneed - r->plen : n;
			memcpy(r->par + r->plen, p, k);
			r->plen += k;
			p += k;
			n -= k;
			if (r->plen == r->pneed)
				err = params(r);
			break;
		}
		case R_OP:
			err = opcode(r, *p);
			p++;
			n--;
			break;
		case R_LITERAL: {
			size_t k = r->lit_left < n ? (size_t)r->lit_left : n;
			err = r->out(r->arg, p, k);
			r->lit_left -= k;
			p += k;
			n -= k;
			if (!r->lit_left)
				r->state = R_OP;
			break;
		}
		default: return damaged(r, "bytes after its END command");
		}
		if (err)
			return err;
	}
	return STG_OK;
}
