/*
 * path.c - the rules that keep extraction inside its destination, and a
 * small string hash map used to check a manifest's tree structure.
 *
 * Extraction never resolves a path through the filesystem to decide whether
 * it is safe: it decides lexically, from the manifest, before anything is
 * written.  The invariants it relies on:
 *   - every path is relative and clean (no "", ".", ".." components);
 *   - no path has a non-directory entry as a parent (so no write goes
 *     through a symlink: symlinks are created last, after every file);
 *   - a symlink's target, resolved lexically from the link's directory,
 *     stays inside the root and does not pass through another symlink of
 *     the tree (a chain of links could otherwise reach "root/.." even though
 *     each link looks harmless alone).
 */
#include "path.h"
#include "ctx.h"

#include <xxhash.h>
#include <fnmatch.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool stg__path_ok(const char *path, size_t len)
{
	if (len == 0 || len > STG_PATH_MAX || path[0] == '/')
		return false;
	if (memchr(path, '\0', len))
		return false;
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0)
			return false;
		if (n == 1 && path[start] == '.')
			return false;
		if (n == 2 && path[start] == '.' && path[start + 1] == '.')
			return false;
		start = i + 1;
	}
	return true;
}

bool stg__symlink_ok(const char *link_path, const char *target,
                     bool (*is_symlink)(void *arg, const char *path, size_t len), void *arg)
{
	size_t tlen = strlen(target);
	if (tlen == 0 || tlen > STG_PATH_MAX || target[0] == '/')
		return false;
	/* the resolved path, starting at the link's directory */
	char cur[2 * STG_PATH_MAX + 2];
	size_t clen = 0;
	const char *slash = strrchr(link_path, '/');
	if (slash) {
		clen = (size_t)(slash - link_path);
		memcpy(cur, link_path, clen);
	}
	const char *p = target;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		bool last = !e || e[1] == '\0';
		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (clen == 0)
				return false; /* above the root */
			while (clen > 0 && cur[clen - 1] != '/')
				clen--;
			if (clen > 0)
				clen--;
		} else {
			if (clen + 1 + n >= sizeof cur)
				return false;
			if (clen)
				cur[clen++] = '/';
			memcpy(cur + clen, p, n);
			clen += n;
			/* a component the kernel would go through as a directory */
			if (!last && is_symlink && is_symlink(arg, cur, clen))
				return false;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return true;
}

bool stg__path_match(const char *pattern, const char *path)
{
	/* a pattern with a trailing slash names a directory */
	size_t plen = strlen(pattern);
	while (plen > 1 && pattern[plen - 1] == '/')
		plen--;
	char pat[STG_PATH_MAX + 1];
	if (plen > STG_PATH_MAX)
		return false;
	memcpy(pat, pattern, plen);
	pat[plen] = '\0';
	const char *q = pat;
	while (q[0] == '.' && q[1] == '/')
		q += 2;
	if (fnmatch(q, path, FNM_PATHNAME) == 0)
		return true;
	/* the pattern matches a parent directory: the subtree is included */
	char buf[STG_PATH_MAX + 1];
	size_t len = strlen(path);
	if (len > STG_PATH_MAX)
		return false;
	memcpy(buf, path, len + 1);
	for (size_t i = len; i > 0; i--) {
		if (buf[i - 1] != '/')
			continue;
		buf[i - 1] = '\0';
		if (fnmatch(q, buf, FNM_PATHNAME) == 0)
			return true;
	}
	return false;
}

/* ---- string map ---------------------------------------------------------------
 *
 * Open addressing with linear probing, at most half full.  A slot keeps the
 * top bits of the key's XXH3-64 beside it, so a probe compares keys only
 * when those match: a map of a million paths sharing long prefixes costs a
 * cache miss or two per lookup, not a memcmp per slot passed. */

static uint64_t hash(const char *s, size_t len)
{
	return XXH3_64bits(s, len);
}

#define LEN_MASK ((1u << STG_STRMAP_LEN_BITS) - 1)

/* The key's length and the top bits of its hash, as a slot keeps them. */
static uint32_t lentag_of(uint64_t h, size_t len)
{
	return (uint32_t)(h >> (64 - (32 - STG_STRMAP_LEN_BITS))) << STG_STRMAP_LEN_BITS |
	       (uint32_t)len;
}

int stg__strmap_init(stg_strmap *m, size_t expected)
{
	memset(m, 0, sizeof *m);
	size_t cap = 16;
	while (cap < expected * 2 + 16)
		cap *= 2;
	m->cap = cap;
	m->slots = calloc(cap, sizeof *m->slots);
	if (!m->slots) {
		stg__strmap_free(m);
		return -1;
	}
	return 0;
}

void stg__strmap_free(stg_strmap *m)
{
	free(m->slots);
	memset(m, 0, sizeof *m);
}

/* The slot of key, or the empty slot where it would go. */
static stg_strslot *find(const stg_strmap *m, const char *key, size_t len, uint64_t h)
{
	uint32_t lt = lentag_of(h, len);
	size_t i = h & (m->cap - 1);
	for (;;) {
		stg_strslot *s = &m->slots[i];
		if (!s->key || (s->lentag == lt && memcmp(s->key, key, len) == 0))
			return s;
		i = (i + 1) & (m->cap - 1);
	}
}

static int grow(stg_strmap *m)
{
	stg_strmap n;
	if (stg__strmap_init(&n, m->cap))
		return -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			stg__strmap_put(&n, m->slots[i].key, m->slots[i].lentag & LEN_MASK,
			                m->slots[i].val);
	stg__strmap_free(m);
	*m = n;
	return 0;
}

int stg__strmap_put(stg_strmap *m, const char *key, size_t len, uint32_t val)
{
	if (len > LEN_MASK || ((m->count + 1) * 2 > m->cap && grow(m)))
		return -1;
	uint64_t h = hash(key, len);
	stg_strslot *s = find(m, key, len, h);
	if (s->key)
		return 0;
	*s = (stg_strslot){key, val, lentag_of(h, len)};
	m->count++;
	return 1;
}

uint32_t stg__strmap_get(const stg_strmap *m, const char *key, size_t len)
{
	if (!m->cap || len > LEN_MASK)
		return UINT32_MAX;
	const stg_strslot *s = find(m, key, len, hash(key, len));
	return s->key ? s->val : UINT32_MAX;
}

int stg__strmap_set(stg_strmap *m, const char *key, size_t len, uint32_t val)
{
	int rc = stg__strmap_put(m, key, len, val);
	if (rc != 0)
		return rc < 0 ? -1 : 0;
	find(m, key, len, hash(key, len))->val = val;
	return 0;
}

/* ---- sbatch's file-name patterns -------------------------------------------- */

stg_err stg_expand_pattern(stg_ctx *ctx, const char *pattern, char **out)
{
	*out = NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return stg__fail(ctx, STG_ENOMEM, "out of memory");
	stg_err err = STG_OK;
	for (const char *p = pattern; *p && !err; p++) {
		if (*p != '%') {
			fputc(*p, f);
			continue;
		}
		const char *var = NULL, *val = NULL, *what = NULL;
		char host[256];
		if (!p[1]) {
			err = stg__fail(ctx, STG_EUSAGE, "'%s' ends with a lone %% (%%%% for a %%)",
			                pattern);
			break;
		}
		switch (*++p) {
		case '%': fputc('%', f); continue;
		case 'j': var = "SLURM_JOB_ID", what = "the job id"; break;
		case 'A': var = "SLURM_ARRAY_JOB_ID", what = "the array's job id"; break;
		case 'a': var = "SLURM_ARRAY_TASK_ID", what = "the array task id"; break;
		case 'n': var = "SLURM_NODEID", what = "the node's index in the job"; break;
		case 'x': var = "SLURM_JOB_NAME", what = "the job's name"; break;
		case 'N':
			val = getenv("SLURMD_NODENAME");
			if (!val || !*val) {
				if (gethostname(host, sizeof host))
					snprintf(host, sizeof host, "localhost");
				host[sizeof host - 1] = '\0';
				host[strcspn(host, ".")] = '\0';
				val = host;
			}
			break;
		case 'u': {
			struct passwd *pw = getpwuid(geteuid());
			val = pw ? pw->pw_name : getenv("USER");
			what = "the user's name";
			break;
		}
		default:
			err = stg__fail(
			        ctx, STG_EUSAGE,
			        "'%s': %%%c is not a pattern (%%j %%A %%a %%N %%n %%u %%x, %%%% "
			        "for a %%)",
			        pattern, *p);
			continue;
		}
		if (var)
			val = getenv(var);
		if (val && *val && strchr(val, '/')) {
			/* a '/' would make it a path of its own: refused, said so */
			err = stg__fail(ctx, STG_EUSAGE,
			                "'%s': %%%c (%s) would put a '/' in the path: %s is '%s'",
			                pattern, *p, what, var ? var : "its value", val);
			continue;
		}
		if (!val || !*val) {
			err = stg__fail(ctx, STG_EUSAGE, "'%s': %%%c (%s) is not known here%s%s%s",
			                pattern, *p, what, var ? ": " : "", var ? var : "",
			                var ? " is not set" : "");
			continue;
		}
		fputs(val, f);
	}
	if (fclose(f) || !buf) {
		free(buf);
		return err ? err : stg__fail(ctx, STG_ENOMEM, "out of memory");
	}
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	return STG_OK;
}
