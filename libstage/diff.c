/*
 * diff.c - what changed between two packs, from their trailers alone.
 *
 * Entries are matched by path.  A path in both is changed when its type,
 * content (size and XXH3-128), permission bits or link target differ; a
 * different mtime alone is not a change (a copied or touched file is the
 * same data).  Reported in the new pack's order, then the removed in the
 * old pack's order.
 */
#include "ctx.h"
#include "pack_read.h"
#include "path.h"

#include <stdlib.h>
#include <string.h>

static unsigned differences(const stg_entry *a, const stg_entry *b)
{
	unsigned what = 0;
	if (a->type != b->type)
		return STG_DIFF_TYPE;
	if (a->type == STG_FILE && (a->size != b->size || memcmp(a->xxh3, b->xxh3, 16)))
		what |= STG_DIFF_CONTENT;
	if ((a->link || b->link) && (!a->link || !b->link || strcmp(a->link, b->link)))
		what |= STG_DIFF_LINK;
	if (a->type != STG_SYMLINK && a->mode != b->mode)
		what |= STG_DIFF_MODE;
	return what;
}

stg_err stg_diff(stg_ctx *ctx, const stg_pack *old, const stg_pack *new_, stg_diff_fn fn, void *arg,
                 stg_diff_stats *st)
{
	stg_diff_stats local;
	if (!st)
		st = &local;
	memset(st, 0, sizeof *st);
	size_t no = stg_pack_count(old), nn = stg_pack_count(new_);
	stg_recmap map;
	bool *seen = calloc(no ? no : 1, sizeof *seen);
	if (!seen || stg__recmap_init(&map, &old->t, no)) {
		free(seen);
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	stg_entry e, o;
	for (size_t i = 0; i < no; i++) {
		if (stg__recmap_put(&map, (uint32_t)i, (uint32_t)i, NULL) < 0) {
			stg__recmap_free(&map);
			free(seen);
			return stg__fail(ctx, STG_ENOMEM, "out of memory");
		}
	}
	/* each entry's path into a buffer of its own: the two are held at once */
	char ebuf[STG_PATH_MAX + 1], obuf[STG_PATH_MAX + 1];
	for (size_t i = 0; i < nn; i++) {
		stg_pack_entry(new_, i, &e);
		e.path = stg__rec_path(new_, &new_->t.recs[i], ebuf);
		uint32_t j = stg__recmap_get(&map, e.path, strlen(e.path));
		if (j == UINT32_MAX) {
			st->added++;
			if (e.type == STG_FILE)
				st->added_bytes += e.size;
			if (fn)
				fn(arg, STG_DIFF_ADDED, 0, NULL, &e);
			continue;
		}
		seen[j] = true;
		stg_pack_entry(old, j, &o);
		o.path = stg__rec_path(old, &old->t.recs[j], obuf);
		unsigned what = differences(&o, &e);
		if (!what) {
			st->unchanged++;
			continue;
		}
		st->changed++;
		if (e.type == STG_FILE && (what & (STG_DIFF_CONTENT | STG_DIFF_TYPE)))
			st->changed_bytes += e.size;
		if (fn)
			fn(arg, STG_DIFF_CHANGED, what, &o, &e);
	}
	for (size_t i = 0; i < no; i++) {
		if (seen[i])
			continue;
		stg_pack_entry(old, i, &o);
		st->removed++;
		if (o.type == STG_FILE)
			st->removed_bytes += o.size;
		if (fn)
			fn(arg, STG_DIFF_REMOVED, 0, &o, NULL);
	}
	stg__recmap_free(&map);
	free(seen);
	return STG_OK;
}
