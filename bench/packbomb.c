/*
 * packbomb - a hostile pack for the tests: a small file whose trailer
 * declares many long names.
 *
 *   packbomb OUT --entries N --path-len L
 *
 * Writes OUT, a pack (FORMAT.md, version 3) whose manifest lists N empty
 * files, each path L bytes long (8 to 4095): the same directories of 200
 * bytes a level, then a file name that ends in the entry's number.  The
 * data frames hold zeros, as many as the entries' tar offsets need (the
 * digest is left zero: the pack is for readers that refuse it from its
 * trailer alone).  Repeated names compress about a thousandfold, so 100,000
 * paths of 4,000 bytes (400 MB once decoded) make a pack of a few hundred
 * KiB.  The body is compressed as it is made: the tool takes a few MiB
 * whatever N is.  Exit status: 0 ok, 1 usage, 7 I/O error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#define FRAME_RAW (64u << 20) /* a reader's largest frame */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void die(const char *what)
{
	fprintf(stderr, "packbomb: %s\n", what);
	exit(7);
}

/* The body, compressed as it is written into a growing buffer. */
typedef struct zbuf {
	ZSTD_CCtx *cc;
	uint8_t *out;
	size_t len, cap;
} zbuf;

static void zput(zbuf *z, const void *p, size_t n, ZSTD_EndDirective end)
{
	ZSTD_inBuffer in = {p, n, 0};
	size_t left;
	do {
		if (z->cap - z->len < (1u << 16)) {
			z->cap = z->cap * 2 + (1u << 20);
			if (!(z->out = realloc(z->out, z->cap)))
				die("out of memory");
		}
		ZSTD_outBuffer ob = {z->out, z->cap, z->len};
		left = ZSTD_compressStream2(z->cc, &ob, &in, end);
		if (ZSTD_isError(left))
			die(ZSTD_getErrorName(left));
		z->len = ob.pos;
	} while (end == ZSTD_e_end ? left != 0 : in.pos < in.size);
}

/* Path i: directories of 200 bytes, then a file name, len bytes in all. */
static void make_path(char *p, size_t len, uint64_t i)
{
	memset(p, 'd', len);
	for (size_t k = 200; k + 16 < len; k += 201)
		p[k] = '/';
	char num[24];
	int n = snprintf(num, sizeof num, "%09llu", (unsigned long long)i);
	memcpy(p + len - (size_t)n, num, (size_t)n);
	p[len - (size_t)n - 1] = 'f';
}

int main(int argc, char **argv)
{
	uint64_t n = 0;
	size_t plen = 0;
	if (argc != 6 || strcmp(argv[2], "--entries") || strcmp(argv[4], "--path-len")) {
		fprintf(stderr, "usage: packbomb OUT --entries N --path-len L\n");
		return 1;
	}
	n = strtoull(argv[3], NULL, 10);
	plen = strtoul(argv[5], NULL, 10);
	if (n == 0 || plen < 16 || plen > 4095) {
		fprintf(stderr, "packbomb: N must be at least 1 and L from 16 to 4095\n");
		return 1;
	}
	FILE *f = fopen(argv[1], "wb");
	if (!f)
		die("cannot create the pack");

	/* data: frames of zeros over the tar stream the entries need */
	uint64_t tar_size = 512 * n + 1024;
	size_t nf = (size_t)((tar_size + FRAME_RAW - 1) / FRAME_RAW);
	uint8_t(*frec)[48] = calloc(nf, 48);
	uint8_t *zeros = calloc(1, FRAME_RAW);
	size_t zcap = ZSTD_compressBound(FRAME_RAW);
	uint8_t *zf = malloc(zcap);
	if (!frec || !zeros || !zf)
		die("out of memory");
	uint64_t coff = 0;
	for (size_t k = 0; k < nf; k++) {
		uint64_t raw = k + 1 < nf ? FRAME_RAW : tar_size - (uint64_t)k * FRAME_RAW;
		ZSTD_CCtx *cc = ZSTD_createCCtx();
		ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
		size_t c = ZSTD_compress2(cc, zf, zcap, zeros, (size_t)raw);
		ZSTD_freeCCtx(cc);
		if (ZSTD_isError(c) || fwrite(zf, 1, c, f) != c)
			die("writing a data frame");
		put64(frec[k], coff);
		put64(frec[k] + 8, c);
		put64(frec[k] + 16, (uint64_t)k * FRAME_RAW);
		put64(frec[k] + 24, raw);
		XXH128_canonicalFromHash((XXH128_canonical_t *)(frec[k] + 32), XXH3_128bits(zf, c));
		coff += c;
	}

	/* the body: header, frames, entries, names */
	uint64_t names_size = n * plen;
	uint64_t raw = 96 + 48 * (uint64_t)nf + 80 * n + names_size;
	zbuf z = {ZSTD_createCCtx(), NULL, 0, 0};
	ZSTD_CCtx_setParameter(z.cc, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(z.cc, ZSTD_c_checksumFlag, 1);
	ZSTD_CCtx_setPledgedSrcSize(z.cc, raw);
	uint8_t h[96] = {0};
	memcpy(h, "STGT", 4);
	put32(h + 4, 3);
	put64(h + 8, nf);
	put64(h + 16, n);
	put64(h + 24, 0);
	put64(h + 32, names_size);
	put64(h + 40, tar_size);
	put64(h + 48, 0);
	zput(&z, h, sizeof h, ZSTD_e_continue);
	zput(&z, frec, 48 * nf, ZSTD_e_continue);
	XXH128_canonical_t empty;
	XXH128_canonicalFromHash(&empty, XXH3_128bits("", 0));
	for (uint64_t i = 0; i < n; i++) {
		uint8_t e[80] = {0};
		put64(e, 512 * i);
		put64(e + 8, 512 * i + 512);
		put32(e + 36, 0644);
		put64(e + 40, i * plen);
		put32(e + 48, (uint32_t)plen);
		e[56] = 1;
		memcpy(e + 64, &empty, 16);
		zput(&z, e, sizeof e, ZSTD_e_continue);
	}
	char *p = malloc(plen);
	if (!p)
		die("out of memory");
	for (uint64_t i = 0; i < n; i++) {
		make_path(p, plen, i);
		zput(&z, p, plen, ZSTD_e_continue);
	}
	zput(&z, NULL, 0, ZSTD_e_end);

	uint8_t sk[8], foot[48] = {0};
	put32(sk, 0x184D2A57u);
	put32(sk + 4, (uint32_t)(z.len + 48));
	put64(foot, coff);
	put64(foot + 8, z.len);
	put64(foot + 16, raw);
	put64(foot + 24, XXH3_64bits(z.out, z.len));
	put32(foot + 32, 3);
	memcpy(foot + 40, "STGPACK\x01", 8);
	if (fwrite(sk, 1, 8, f) != 8 || fwrite(z.out, 1, z.len, f) != z.len ||
	    fwrite(foot, 1, 48, f) != 48 || fclose(f))
		die("writing the trailer");
	fprintf(stderr, "packbomb: %llu entries of %zu bytes: %llu bytes of trailer body in %llu\n",
	        (unsigned long long)n, plen, (unsigned long long)raw,
	        (unsigned long long)(coff + 8 + z.len + 48));
	return 0;
}
