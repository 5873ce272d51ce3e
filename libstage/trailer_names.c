/*
 * trailer_names.c - a decoded manifest's names as a directory table and
 * base names (see trailer_names.h), whole paths built on demand, and maps
 * keyed by an entry's directory and base name.
 */
#include "trailer_names.h"
#include "ctx.h"
#include "path.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define NONE UINT32_MAX

static uint64_t dir_hash(uint32_t parent, const char *name, size_t len)
{
	return XXH3_64bits_withSeed(name, len, parent);
}

uint32_t stg__trailer_dir_child(const stg_trailer *t, uint32_t parent, const char *name, size_t len)
{
	if (!t->dir_cap)
		return NONE;
	size_t mask = t->dir_cap - 1;
	for (size_t k = (size_t)dir_hash(parent, name, len) & mask;; k = (k + 1) & mask) {
		uint32_t v = t->dir_slots[k];
		if (!v)
			return NONE;
		const stg_dir *d = &t->dirs[v];
		if (d->parent == parent && d->name_len == len &&
		    memcmp(t->names + d->name_off, name, len) == 0)
			return v;
	}
}

uint32_t stg__trailer_dir_find(const stg_trailer *t, const char *path, size_t len)
{
	uint32_t d = 0;
	for (size_t at = 0; at < len;) {
		size_t end = at;
		while (end < len && path[end] != '/')
			end++;
		if ((d = stg__trailer_dir_child(t, d, path + at, end - at)) == NONE)
			return NONE;
		at = end + 1;
	}
	return d;
}

size_t stg__trailer_dir_path(const stg_trailer *t, uint32_t d, char *buf)
{
	size_t len = d ? t->dirs[d].len : 0;
	buf[len] = '\0';
	for (; d; d = t->dirs[d].parent) {
		const stg_dir *x = &t->dirs[d];
		memcpy(buf + x->len - x->name_len, t->names + x->name_off, x->name_len);
		if (x->parent)
			buf[x->len - x->name_len - 1] = '/';
	}
	return len;
}

const char *stg__trailer_path(const stg_trailer *t, const stg_rec *r, char *buf)
{
	if (!r->dir)
		return t->names + r->path_off;
	size_t dl = stg__trailer_dir_path(t, r->dir, buf);
	buf[dl] = '/';
	memcpy(buf + dl + 1, t->names + r->path_off, r->path_len - dl - 1);
	buf[r->path_len] = '\0';
	return buf;
}

const char *stg__trailer_link(const stg_trailer *t, const stg_rec *r)
{
	return r->link_len ? t->names + r->path_off + stg__rec_base_len(t, r) + 1 : NULL;
}

uint64_t stg__names_mem(const stg_trailer *t, const stg_names_in *s)
{
	return s->other + t->names_len + stg__names_dirs_mem(t->n_dirs, t->dir_cap);
}

uint64_t stg__names_dirs_mem(size_t n_dirs, size_t dir_cap)
{
	return (uint64_t)n_dirs * sizeof(stg_dir) + (uint64_t)dir_cap * sizeof(uint32_t);
}

/* ---- making the table ---------------------------------------------------- */

/* The slots a hash of n directories has: a power of two, at most half full. */
static size_t cap_for(size_t n)
{
	size_t cap = 64;
	while (n * 2 > cap)
		cap *= 2;
	return cap;
}

uint64_t stg__names_dirs_bound(const stg_trailer *t)
{
	size_t n = 1, prev_len = 0;
	char buf[STG_PATH_MAX + 1], prev[STG_PATH_MAX + 1];
	for (size_t i = 0; i < t->n_entries; i++) {
		const stg_rec *r = &t->recs[i];
		const char *p = stg__trailer_path(t, r, buf);
		size_t dl = r->path_len;
		while (dl > 0 && p[dl - 1] != '/')
			dl--;
		dl = dl ? dl - 1 : 0;
		size_t k = 0, lim = dl < prev_len ? dl : prev_len;
		while (k < lim && p[k] == prev[k])
			k++;
		if (k == dl && dl == prev_len)
			continue;
		while (k > 0 && !((k == dl || p[k] == '/') && (k == prev_len || prev[k] == '/')))
			k--;
		for (size_t at = k; at < dl; at++)
			n += at == k || p[at] == '/';
		memcpy(prev, p, dl);
		prev_len = dl;
	}
	return stg__names_dirs_mem(n, cap_for(n));
}

int stg__names_begin(stg_trailer *t, stg_names_in *s, size_t names_max, uint64_t other,
                     uint64_t mem_max)
{
	s->prev_len = 0;
	s->prev_dir = 0;
	s->names_cap = s->dirs_cap = 0;
	s->names_max = names_max;
	s->other = other;
	s->mem_max = mem_max;
	t->names_len = 0;
	t->n_dirs = 1;
	t->dir_cap = 0;
	if (stg__room((void **)&t->dirs, &s->dirs_cap, 1, sizeof *t->dirs, SIZE_MAX))
		return -1;
	t->dirs[0] = (stg_dir){0};
	return 0;
}

static int names_add(stg_trailer *t, stg_names_in *s, const char *b, size_t n, bool nul)
{
	if (stg__grow((void **)&t->names, &s->names_cap, t->names_len + n + nul, 1, s->names_max))
		return -1;
	memcpy(t->names + t->names_len, b, n);
	if (nul)
		t->names[t->names_len + n] = '\0';
	t->names_len += n + nul;
	return 0;
}

static void slot_in(uint32_t *slots, size_t cap, const stg_trailer *t, uint32_t v)
{
	const stg_dir *d = &t->dirs[v];
	size_t k = (size_t)dir_hash(d->parent, t->names + d->name_off, d->name_len) & (cap - 1);
	while (slots[k])
		k = (k + 1) & (cap - 1);
	slots[k] = v;
}

/* A new child of parent named name[0, len), its path len_all bytes long. */
static int dir_add(stg_trailer *t, stg_names_in *s, uint32_t parent, const char *name, size_t len,
                   size_t len_all, uint32_t *out)
{
	if (t->n_dirs + 1 >= NONE)
		return -1;
	size_t ncap = cap_for(t->n_dirs + 1);
	if (s->other + t->names_len + len + stg__names_dirs_mem(t->n_dirs + 1, ncap) > s->mem_max)
		return -2;
	if (ncap > t->dir_cap) {
		uint32_t *ns = calloc(ncap, sizeof *ns);
		if (!ns)
			return -1;
		for (size_t v = 1; v < t->n_dirs; v++)
			slot_in(ns, ncap, t, (uint32_t)v);
		free(t->dir_slots);
		t->dir_slots = ns;
		t->dir_cap = ncap;
	}
	if (stg__grow((void **)&t->dirs, &s->dirs_cap, t->n_dirs + 1, sizeof *t->dirs, SIZE_MAX))
		return -1;
	uint64_t off = t->names_len;
	if (off > UINT32_MAX - len || names_add(t, s, name, len, false))
		return -1;
	uint32_t v = (uint32_t)t->n_dirs++;
	t->dirs[v] = (stg_dir){.parent = parent,
	                       .name_off = (uint32_t)off,
	                       .name_len = (uint16_t)len,
	                       .len = (uint16_t)len_all};
	slot_in(t->dir_slots, t->dir_cap, t, v);
	*out = v;
	return 0;
}

/* The directory path[0, dl), made with its parents as needed: from the
 * nearest ancestor it shares with the entry before (a pack's order makes
 * that the common case), down. */
static int dir_of(stg_trailer *t, stg_names_in *s, const char *path, size_t dl, uint32_t *out)
{
	if (dl == s->prev_len && memcmp(path, s->prev, dl) == 0) {
		*out = s->prev_dir;
		return 0;
	}
	size_t k = 0, lim = dl < s->prev_len ? dl : s->prev_len;
	while (k < lim && path[k] == s->prev[k])
		k++;
	while (k > 0 && !((k == dl || path[k] == '/') && (k == s->prev_len || s->prev[k] == '/')))
		k--;
	uint32_t d = s->prev_dir;
	while (d && t->dirs[d].len > k)
		d = t->dirs[d].parent;
	for (size_t at = k ? k + 1 : 0; at < dl;) {
		size_t end = at;
		while (end < dl && path[end] != '/')
			end++;
		uint32_t c = stg__trailer_dir_child(t, d, path + at, end - at);
		if (c == NONE) {
			int rc = dir_add(t, s, d, path + at, end - at, end, &c);
			if (rc)
				return rc;
		}
		d = c;
		at = end + 1;
	}
	memcpy(s->prev, path, dl);
	s->prev_len = dl;
	s->prev_dir = d;
	*out = d;
	return 0;
}

int stg__names_put(stg_trailer *t, stg_names_in *s, stg_rec *r, const char *path, const char *link)
{
	size_t dl = r->path_len;
	while (dl > 0 && path[dl - 1] != '/')
		dl--;
	dl = dl ? dl - 1 : 0;
	uint32_t d = 0;
	int rc = dl ? dir_of(t, s, path, dl, &d) : 0;
	if (rc)
		return rc;
	size_t base = dl ? dl + 1 : 0;
	r->dir = d;
	r->path_off = t->names_len;
	if (names_add(t, s, path + base, r->path_len - base, true) ||
	    names_add(t, s, link ? link : "", r->link_len, true))
		return -1;
	return 0;
}

int stg__names_put_delta(stg_trailer *t, stg_names_in *s, stg_delta_rec *d, const char *name)
{
	d->name_off = t->names_len;
	return names_add(t, s, name, d->name_len, true);
}

int stg__trailer_index(stg_trailer *t)
{
	char *old = t->names;
	stg_names_in *s = malloc(sizeof *s);
	t->names = NULL;
	if (!s || stg__names_begin(t, s, SIZE_MAX, 0, UINT64_MAX)) {
		free(s);
		t->names = old;
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < t->n_entries && !rc; i++) {
		stg_rec *r = &t->recs[i];
		const char *p = old + r->path_off;
		rc = stg__names_put(t, s, r, p, r->link_len ? p + r->path_len + 1 : NULL);
	}
	for (size_t i = 0; i < t->n_deltas && !rc; i++)
		rc = stg__names_put_delta(t, s, &t->deltas[i], old + t->deltas[i].name_off);
	free(s);
	return rc ? -1 : 0;
}

/* ---- maps keyed by an entry's path --------------------------------------- */

static uint64_t rec_hash(uint32_t dir, const char *base, size_t len)
{
	return XXH3_64bits_withSeed(base, len, (uint64_t)dir + 0x9e3779b97f4a7c15ull);
}

int stg__recmap_init(stg_recmap *m, const stg_trailer *t, size_t expected)
{
	size_t cap = 16;
	while (cap / 2 < expected + 1)
		cap *= 2;
	m->t = t;
	m->cap = cap;
	m->count = 0;
	m->slots = calloc(cap, sizeof *m->slots);
	return m->slots ? 0 : -1;
}

void stg__recmap_free(stg_recmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

/* The slot of (dir, base): its entry's, or the empty one it would take. */
static size_t find(const stg_recmap *m, uint32_t dir, const char *base, size_t len)
{
	const stg_trailer *t = m->t;
	size_t mask = m->cap - 1;
	for (size_t k = (size_t)rec_hash(dir, base, len) & mask;; k = (k + 1) & mask) {
		uint32_t v = m->slots[k].rec;
		if (!v)
			return k;
		const stg_rec *r = &t->recs[v - 1];
		if (r->dir == dir && stg__rec_base_len(t, r) == len &&
		    memcmp(t->names + r->path_off, base, len) == 0)
			return k;
	}
}

static int grow(stg_recmap *m)
{
	if ((m->count + 1) * 2 <= m->cap)
		return 0;
	stg_recmap n = {.t = m->t, .cap = m->cap * 2, .count = m->count};
	if (!(n.slots = calloc(n.cap, sizeof *n.slots)))
		return -1;
	for (size_t k = 0; k < m->cap; k++) {
		uint32_t v = m->slots[k].rec;
		if (!v)
			continue;
		const stg_rec *r = &m->t->recs[v - 1];
		n.slots[find(&n, r->dir, m->t->names + r->path_off, stg__rec_base_len(m->t, r))] =
		        m->slots[k];
	}
	free(m->slots);
	*m = n;
	return 0;
}

static size_t find_rec(const stg_recmap *m, uint32_t i)
{
	const stg_rec *r = &m->t->recs[i];
	return find(m, r->dir, m->t->names + r->path_off, stg__rec_base_len(m->t, r));
}

int stg__recmap_put(stg_recmap *m, uint32_t i, uint32_t val, uint32_t *had)
{
	if (grow(m))
		return -1;
	size_t k = find_rec(m, i);
	if (m->slots[k].rec) {
		if (had)
			*had = m->slots[k].val;
		return 0;
	}
	m->slots[k].rec = i + 1;
	m->slots[k].val = val;
	m->count++;
	return 1;
}

int stg__recmap_set(stg_recmap *m, uint32_t i, uint32_t val)
{
	if (grow(m))
		return -1;
	size_t k = find_rec(m, i);
	if (!m->slots[k].rec) {
		m->slots[k].rec = i + 1;
		m->count++;
	}
	m->slots[k].val = val;
	return 0;
}

uint32_t stg__recmap_get_rec(const stg_recmap *m, uint32_t i)
{
	size_t k = find_rec(m, i);
	return m->slots[k].rec ? m->slots[k].val : NONE;
}

uint32_t stg__recmap_get(const stg_recmap *m, const char *path, size_t len)
{
	size_t dl = len;
	while (m->t->dirs && dl > 0 && path[dl - 1] != '/')
		dl--;
	if (dl == 1) /* "/name" */
		return NONE;
	uint32_t d = dl ? stg__trailer_dir_find(m->t, path, dl - 1) : 0;
	if (d == NONE)
		return NONE;
	size_t k = find(m, d, path + dl, len - dl);
	return m->slots[k].rec ? m->slots[k].val : NONE;
}
