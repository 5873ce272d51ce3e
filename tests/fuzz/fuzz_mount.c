/*
 * fuzz_mount.c - libFuzzer target for what `stager mount` builds from a
 * pack: the tree of inodes from its manifest (mount_tree.c) and the frames
 * fetched, checked and decoded on demand (mount_frames.c).  Every name a
 * directory lists must be found again by lookup, every inode must stat,
 * and every frame either decodes to its size or is refused, also when it
 * is decoded in two steps (to a depth the input picks, then whole).  An input
 * that begins "T\n" is not a pack but a list of entries, one a line
 * ("f path", "d path", "l path=target", "h path=target"), made into a
 * valid pack here, so that the tree's rules (names twice, parents implied
 * or listed late, hardlinks, symlinks) are reached past the trailer's
 * checksums.  The pack is also mounted with itself, as two packs of one
 * tree: that must be refused unless it holds directories alone.  Built by
 * `make fuzz` with clang; replayed over tests/fuzz/corpus/mount by
 * `make test` (replay.c).
 */
#include <xxhash.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "mount_frames.h"
#include "mount_tree.h"
#include "pack_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct mem {
	const uint8_t *data;
	size_t size;
	const stg_trailer *t;
} mem;

static int fetch(void *arg, size_t k, uint8_t *buf, size_t len)
{
	const mem *m = arg;
	const stg_frame *f = &m->t->frames[k];
	if (f->comp_off > m->size || len > m->size - f->comp_off)
		return 5; /* EIO */
	memcpy(buf, m->data + f->comp_off, len);
	return 0;
}

/* "T\n" and entry lines as a pack image (malloc'ed), or NULL. */
static uint8_t *synthetic(stg_ctx *ctx, const uint8_t *data, size_t size, size_t *len)
{
	enum { MAX = 512 };
	stg_rec recs[MAX];
	char *names = calloc(1, size * 2 + 4);
	size_t n = 0, used = 0;
	const char *p = (const char *)data + 2, *end = (const char *)data + size;
	while (names && p < end && n < MAX) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (le - p >= 3 && p[1] == ' ' && memchr("fdlh", p[0], 4)) {
			const char *path = p + 2, *eq = memchr(path, '=', (size_t)(le - path));
			size_t plen = (size_t)((eq ? eq : le) - path);
			size_t llen = eq ? (size_t)(le - eq - 1) : 0;
			stg_rec *r = &recs[n];
			memset(r, 0, sizeof *r);
			r->type = p[0] == 'f'   ? STG_FILE
			          : p[0] == 'd' ? STG_DIR
			          : p[0] == 'l' ? STG_SYMLINK
			                        : STG_HARDLINK;
			r->tar_off = (uint64_t)n * 1024;
			r->data_off = r->tar_off + 512;
			r->mode = 0644;
			r->path_off = used;
			r->path_len = (uint32_t)plen;
			r->link_len = (uint32_t)llen;
			/* in memory: the path, a NUL, the link, a NUL */
			memcpy(names + used, path, plen);
			used += plen + 1;
			memcpy(names + used, eq ? eq + 1 : "", llen);
			used += llen + 1;
			XXH128_canonical_t empty;
			XXH128_canonicalFromHash(&empty, XXH3_128bits(NULL, 0));
			memcpy(r->xxh3, empty.digest, 16);
			n++;
		}
		p = le + 1;
	}
	stg_trailer t = {0};
	t.version = 3;
	t.tar_size = (uint64_t)n * 1024 + 1024;
	t.recs = recs;
	t.n_entries = n;
	t.names = names;
	t.names_len = used;
	uint8_t *raw = calloc(1, t.tar_size);
	size_t bound = ZSTD_compressBound(t.tar_size);
	uint8_t *img = malloc(bound + 64);
	size_t clen = raw && img ? ZSTD_compress(img, bound, raw, t.tar_size, 1) : 0;
	free(raw);
	uint8_t *tr = NULL;
	size_t tlen = 0;
	stg_frame f = {0, clen, 0, t.tar_size, {0}};
	t.frames = &f;
	t.n_frames = 1;
	t.data_size = clen;
	if (!names || !img || ZSTD_isError(clen) ||
	    stg__trailer_encode(ctx, &t, 1, &tr, &tlen) != STG_OK) {
		free(names);
		free(img);
		return NULL;
	}
	uint8_t *out = realloc(img, clen + tlen);
	if (out)
		memcpy(out + clen, tr, tlen);
	else
		free(img);
	free(tr);
	free(names);
	*len = clen + tlen;
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *made = NULL;
	stg_ctx *ctx = stg_ctx_new();
	if (ctx && size >= 2 && data[0] == 'T' && data[1] == '\n') {
		if (!(made = synthetic(ctx, data, size, &size)))
			goto out;
		data = made;
	}
	stg_pack *p = NULL;
	stg_mtree *t = NULL;
	stg_frames *fr = NULL;
	if (!ctx || stg_pack_open_mem(ctx, data, size, &p) != STG_OK)
		goto out;
	const char *names[] = {"one", "two"};
	const stg_pack *pv[] = {p, p};
	/* the pack with itself: one tree if it holds directories alone, else
	 * refused (a file in both) */
	bool dirs_only = true;
	for (size_t i = 0; i < p->t.n_entries; i++)
		dirs_only &= p->t.recs[i].type == STG_DIR;
	stg_err twice = stg__mtree_build(ctx, pv, names, 2, false, &t);
	if (twice == STG_OK ? !dirs_only : twice == STG_EUSAGE && dirs_only && p->t.n_entries)
		abort();
	stg__mtree_free(t);
	t = NULL;
	if (stg__mtree_build(ctx, pv, names, 1, false, &t) != STG_OK)
		goto out;
	for (uint64_t ino = 1; ino <= t->n_nodes; ino++) {
		const stg_mnode *n = stg__mtree_node(t, ino);
		struct stat st;
		stg__mtree_stat(t, ino, &st);
		if (!n || st.st_ino != ino)
			abort();
		for (uint32_t k = 0; n->type == STG_DIR && k < n->n_kids; k++) {
			const stg_mnode *kid = stg__mtree_node(t, t->kids[n->kids + k]);
			if (!kid ||
			    stg__mtree_lookup(t, ino, kid->name, kid->name_len) != kid->target)
				abort();
		}
	}
	mem m = {data, size, &p->t};
	stg_frames_opts fo = {.max_bytes = 1 << 20, .fetch = fetch, .fetch_arg = &m};
	if (stg__frames_new(ctx, &p->t, &fo, &fr) != STG_OK)
		goto out;
	/* each frame first in part (a depth the input picks), then whole:
	 * decoding goes on from where it stopped */
	for (size_t k = 0; k < p->t.n_frames && k < 64; k++) {
		const uint8_t *raw;
		stg_fbuf *held;
		size_t len = (size_t)p->t.frames[k].raw_size;
		size_t part = len ? (size ? data[k % size] : 0) * (len / 256 + 1) % len + 1 : 0;
		if (stg__frames_get(fr, k, part, &raw, &held) == 0) {
			if (part) {
				volatile uint8_t at = raw[part - 1];
				(void)at;
			}
			stg__frames_put(fr, held);
		}
		if (stg__frames_get(fr, k, 0, &raw, &held) == 0) {
			volatile uint8_t last = len ? raw[len - 1] : 0;
			(void)last;
			stg__frames_put(fr, held);
		}
	}
out:
	stg__frames_free(fr);
	stg__mtree_free(t);
	stg_pack_close(p);
	stg_ctx_free(ctx);
	free(made);
	return 0;
}
