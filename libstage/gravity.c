/*
 * gravity.c - data gravity: the Slurm node features that say which packs a
 * node's caches hold (libstage.h says what a feature names and tells), the
 * choice of what a node advertises, and the sbatch option that prefers
 * those nodes.  Pure functions of their input: node_features.c reads the
 * caches, the node's record and Slurm.
 *
 * A node's features, as `sinfo -h -N -o '%N|%f'` prints them, are parsed
 * here; stg_hint names only features that some node has right now, since
 * `sbatch --prefer=F` fails when no node has F.  That a feature named by a
 * hint is still there when sbatch runs a moment later is the plan's grace;
 * that no hint names one already in its grace (which could end before the
 * sbatch) is its leaving marker, which stg_where reads.
 */
#include "gravity.h"
#include "ctx.h"

#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "stg_" and the first 6 bytes of a hash in hex: a feature's name. */
static void feature_name(const uint8_t *md, char out[STG_FEATURE_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	memcpy(out, STG_FEATURE_PREFIX, sizeof STG_FEATURE_PREFIX - 1);
	char *p = out + sizeof STG_FEATURE_PREFIX - 1;
	for (size_t i = 0; i < 6; i++) {
		*p++ = hex[md[i] >> 4];
		*p++ = hex[md[i] & 15];
	}
	*p = '\0';
}

void stg_node_feature(unsigned uid, const uint8_t digest[STG_DIGEST_LEN],
                      char out[STG_FEATURE_LEN + 1])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	char who[32];
	int n = snprintf(who, sizeof who, "%u", uid);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(c, "stager-feature", 15) ||
	    !EVP_DigestUpdate(c, who, (size_t)n + 1) ||
	    !EVP_DigestUpdate(c, digest, STG_DIGEST_LEN) || !EVP_DigestFinal_ex(c, md, &md_len))
		memset(md, 0, sizeof md);
	EVP_MD_CTX_free(c);
	feature_name(md, out);
}

void stg__feature_leaving(const char *feature, char out[STG_FEATURE_LEN + 1])
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned md_len = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) ||
	    !EVP_DigestUpdate(c, "stager-leaving", 15) ||
	    !EVP_DigestUpdate(c, feature, strlen(feature)) || !EVP_DigestFinal_ex(c, md, &md_len))
		memset(md, 0xff, sizeof md);
	EVP_MD_CTX_free(c);
	feature_name(md, out);
}

int stg__feature_ours(const char *name, size_t len)
{
	size_t pl = sizeof STG_FEATURE_PREFIX - 1;
	if (len != STG_FEATURE_LEN || strncmp(name, STG_FEATURE_PREFIX, pl))
		return 0;
	for (size_t i = pl; i < len; i++)
		if (!strchr("0123456789abcdef", name[i]))
			return 0;
	return 1;
}

/* Does the comma-separated list features (len bytes) hold feature? */
static int has_feature(const char *features, size_t len, const char *feature)
{
	size_t fl = strlen(feature);
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && features[j] != ',')
			j++;
		if (j - i == fl && !memcmp(features + i, feature, fl))
			return 1;
		i = j + 1;
	}
	return 0;
}

size_t stg__nodes_with(const char *sinfo, const char *feature, char *out, size_t out_len)
{
	return stg__nodes_staying(sinfo, feature, NULL, out, out_len);
}

size_t stg__nodes_staying(const char *sinfo, const char *feature, const char *leaving, char *out,
                          size_t out_len)
{
	size_t n = 0, used = 0;
	if (out_len)
		out[0] = '\0';
	for (const char *line = sinfo; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t ll = end ? (size_t)(end - line) : strlen(line);
		const char *bar = memchr(line, '|', ll);
		size_t fl = bar ? ll - (size_t)(bar + 1 - line) : 0;
		if (bar && bar > line && has_feature(bar + 1, fl, feature) &&
		    !(leaving && has_feature(bar + 1, fl, leaving))) {
			size_t nl = (size_t)(bar - line);
			/* sinfo -N lists a node once per partition: once here */
			int seen = 0;
			for (const char *q = out; used && q < out + used && !seen;) {
				const char *c = strchr(q, ',');
				size_t ql = c ? (size_t)(c - q) : strlen(q);
				seen = ql == nl && !memcmp(q, line, nl);
				q += ql + 1;
			}
			if (!seen && used + (used ? 1 : 0) + nl + 1 <= out_len) {
				if (used)
					out[used++] = ',';
				memcpy(out + used, line, nl);
				used += nl;
				out[used] = '\0';
				n++;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return n;
}

/* by last use, newest first */
static int by_use(const void *a, const void *b)
{
	const stg_cache_entry *x = *(const stg_cache_entry *const *)a;
	const stg_cache_entry *y = *(const stg_cache_entry *const *)b;
	return x->last_use < y->last_use   ? 1
	       : x->last_use > y->last_use ? -1
	                                   : strcmp(x->key, y->key);
}

size_t stg__cache_packs(const stg_cache_info *info, size_t max, const char **keys,
                        int64_t *last_use)
{
	const stg_cache_entry **v = calloc(info->n_entries + 1, sizeof *v);
	size_t n = 0;
	if (!v)
		return 0;
	/* whole packs only: a subset's key has a suffix, and a job that
	 * needs the pack would find only part of it; a directory's or a
	 * plain archive's key is a digest too, but no `stager where` or
	 * `hint` can name its feature (they read a pack's trailer), so it
	 * would only take a place under the cap from a pack */
	for (size_t i = 0; i < info->n_entries; i++) {
		uint8_t d[STG_DIGEST_LEN];
		const stg_cache_entry *e = &info->entries[i];
		if (e->key && strlen(e->key) == STG_DIGEST_HEXLEN &&
		    stg_digest_parse(e->key, d) == 0 && e->kind && !strcmp(e->kind, "pack"))
			v[n++] = e;
	}
	qsort(v, n, sizeof *v, by_use);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++) {
		keys[i] = v[i]->key;
		if (last_use)
			last_use[i] = v[i]->last_use;
	}
	free(v);
	return n;
}
size_t stg__features_each(const char *list, size_t len,
                          void (*fn)(void *arg, const char *name, size_t len), void *arg)
{
	size_t n = 0;
	if (len == 6 && !memcmp(list, "(null)", 6))
		return 0;
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && list[j] != ',')
			j++;
		if (j > i) {
			fn(arg, list + i, j - i);
			n++;
		}
		i = j + 1;
	}
	return n;
}

static ptrdiff_t find_name(const stg_feat_ent *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return (ptrdiff_t)i;
	return -1;
}

/* by last use, newest first, then by name (a stable order) */
static int by_rank(const void *a, const void *b)
{
	const stg_feat_ent *x = *(const stg_feat_ent *const *)a;
	const stg_feat_ent *y = *(const stg_feat_ent *const *)b;
	return x->last_use < y->last_use   ? 1
	       : x->last_use > y->last_use ? -1
	                                   : strcmp(x->name, y->name);
}

/* A live feature and its place among its user's, most recent first. */
typedef struct fair {
	const stg_feat_ent *e;
	size_t turn;
} fair;

static int by_user(const void *a, const void *b)
{
	const fair *x = a, *y = b;
	if (x->e->uid != y->e->uid)
		return x->e->uid < y->e->uid ? -1 : 1;
	return by_rank(&x->e, &y->e);
}

static int by_turn(const void *a, const void *b)
{
	const fair *x = a, *y = b;
	if (x->turn != y->turn)
		return x->turn < y->turn ? -1 : 1;
	return by_rank(&x->e, &y->e);
}

/*
 * The live features rank[n] in the order they get places under the cap:
 * each user's most recent first, then each one's second, and so on
 * (round robin), and within a round by recency.  So with U users, each
 * gets at least floor(max / U) of the first max places while they have
 * that many, a user with fewer leaves the rest to the others, and the
 * remainder of the division goes to the most recently used of the next
 * round.  Deterministic: ties are broken by name.  -1: out of memory.
 */
static int fair_order(const stg_feat_ent **rank, size_t n)
{
	fair *f = calloc(n + 1, sizeof *f);
	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++)
		f[i].e = rank[i];
	qsort(f, n, sizeof *f, by_user);
	for (size_t i = 0; i < n; i++)
		f[i].turn = i && f[i - 1].e->uid == f[i].e->uid ? f[i - 1].turn + 1 : 0;
	qsort(f, n, sizeof *f, by_turn);
	for (size_t i = 0; i < n; i++)
		rank[i] = f[i].e;
	free(f);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const stg_feature_name *)a, *(const stg_feature_name *)b);
}

enum { F_ADV = 1, F_WANT = 2, F_CHOSEN = 4 };

size_t stg__features_plan(stg_feat_ent *v, size_t *n, size_t cap, const stg_feature_name *adv,
                          size_t n_adv, int64_t now, size_t max, int64_t grace,
                          stg_feature_name *chosen)
{
	/* one entry per feature (a record read back is outside input) */
	size_t u = 0;
	for (size_t i = 0; i < *n; i++)
		if (find_name(v, u, v[i].name) < 0)
			v[u++] = v[i];
	*n = u;
	/* the leaving markers Slurm has are no features of packs: made anew
	 * below for the features that are leaving now */
	stg_feature_name *marks = calloc(n_adv + *n + 1, sizeof *marks);
	stg_feature_name *kept = calloc(n_adv + 1, sizeof *kept);
	if (!marks || !kept) {
		free(marks);
		free(kept);
		return SIZE_MAX;
	}
	for (size_t i = 0; i < n_adv; i++)
		stg__feature_leaving(adv[i], marks[i]);
	for (size_t i = 0; i < *n; i++)
		stg__feature_leaving(v[i].name, marks[n_adv + i]);
	size_t nk = 0;
	for (size_t i = 0; i < n_adv; i++) {
		int mark = 0;
		for (size_t j = 0; j < n_adv + *n && !mark; j++)
			mark = !strcmp(adv[i], marks[j]);
		if (!mark)
			memcpy(kept[nk++], adv[i], sizeof *kept);
	}
	free(marks);
	adv = (const stg_feature_name *)kept;
	n_adv = nk;
	for (size_t i = 0; i < n_adv; i++)
		if (find_name(v, *n, adv[i]) < 0 && *n < cap) {
			stg_feat_ent *e = &v[(*n)++];
			memset(e, 0, sizeof *e);
			e->uid = STG_FEAT_NOBODY;
			memcpy(e->name, adv[i], sizeof e->name);
			e->out_since = now;
		}
	unsigned char *f = calloc(*n + 1, 1);
	const stg_feat_ent **rank = calloc(*n + 1, sizeof *rank);
	if (!f || !rank) {
		free(f);
		free(rank);
		free(kept);
		return SIZE_MAX;
	}
	size_t n_live = 0, k = 0;
	for (size_t i = 0; i < *n; i++) {
		for (size_t j = 0; j < n_adv; j++)
			if (!strcmp(v[i].name, adv[j]))
				f[i] |= F_ADV;
		if (v[i].live)
			rank[n_live++] = &v[i];
	}
	if (fair_order(rank, n_live)) {
		free(f);
		free(rank);
		free(kept);
		return SIZE_MAX;
	}
	for (size_t r = 0; r < n_live && r < max; r++)
		f[rank[r] - v] |= F_WANT;
	/* advertised but no longer wanted: stays out its grace */
	for (size_t i = 0; i < *n; i++) {
		if ((f[i] & (F_ADV | F_WANT)) != F_ADV) {
			v[i].out_since = 0;
			continue;
		}
		if (!v[i].out_since || v[i].out_since > now)
			v[i].out_since = now;
		if (now - v[i].out_since < grace) {
			f[i] |= F_CHOSEN;
			memcpy(chosen[k++], v[i].name, sizeof *chosen);
		} else {
			v[i].out_since = 0;
		}
	}
	/* wanted and advertised keep their places; new ones take free ones */
	for (int pass = 0; pass < 2; pass++)
		for (size_t r = 0; r < n_live && r < max; r++) {
			size_t i = (size_t)(rank[r] - v);
			int advertised = (f[i] & F_ADV) != 0;
			if (pass == 0 ? !advertised : advertised || k >= max)
				continue;
			f[i] |= F_CHOSEN;
			memcpy(chosen[k++], v[i].name, sizeof *chosen);
		}
	/* each one leaving says so, for stg_where: a hint that named it now
	 * could reach sbatch after it left */
	size_t leaving = 0;
	for (size_t i = 0; i < *n; i++)
		if ((f[i] & (F_ADV | F_WANT | F_CHOSEN)) == (F_ADV | F_CHOSEN))
			stg__feature_leaving(v[i].name, chosen[k + leaving++]);
	k += leaving;
	size_t m = 0;
	for (size_t i = 0; i < *n; i++)
		if (v[i].live || (f[i] & F_CHOSEN))
			v[m++] = v[i];
	*n = m;
	free(f);
	free(rank);
	free(kept);
	qsort(chosen, k, sizeof *chosen, by_name);
	return k;
}

/* Is node (len bytes) one of the comma-separated nodes? */
static int in_list(const char *nodes, const char *node, size_t len)
{
	for (const char *p = nodes; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		if (l == len && !memcmp(p, node, len))
			return 1;
		p += l + (c ? 1 : 0);
	}
	return 0;
}

int stg_hint(const stg_where_result *w, size_t n, char *out, size_t len)
{
	if (!len)
		return -1;
	out[0] = '\0';
	/* a node that holds them all - all that some node holds: a pack
	 * cached nowhere is cold wherever the job runs, and need not turn
	 * "the node with the others" into "any node with one of them" */
	size_t f0 = 0;
	while (f0 < n && !(w[f0].n_nodes && w[f0].nodes && *w[f0].nodes))
		f0++;
	const char *first = f0 < n ? w[f0].nodes : "";
	int found = 0;
	for (const char *p = first; *p && !found;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		found = 1;
		for (size_t i = f0 + 1; i < n && found; i++)
			found = !w[i].n_nodes || !w[i].nodes || !*w[i].nodes ||
			        in_list(w[i].nodes, p, l);
		p += l + (c ? 1 : 0);
	}
	size_t used = 0, named = 0;
	for (size_t i = 0; i < n; i++) {
		if (!w[i].n_nodes || !w[i].nodes || !*w[i].nodes)
			continue;
		int dup = 0;
		for (size_t j = 0; j < i && !dup; j++)
			dup = w[j].n_nodes && !strcmp(w[j].feature, w[i].feature);
		if (dup)
			continue;
		int k = snprintf(out + used, len - used, "%s%s",
		                 named ? (found ? "&" : "|") : "--prefer=", w[i].feature);
		if (k < 0 || (size_t)k >= len - used) {
			out[0] = '\0';
			return -1;
		}
		used += (size_t)k;
		named++;
	}
	return 0;
}

int stg__feat_ent_parse(const char *line, stg_feat_ent *e)
{
	char name[STG_FEATURE_LEN + 2];
	long long use, since;
	unsigned uid;
	int live, end = 0;
	if (sscanf(line, "%u %17s %lld %d %lld%n", &uid, name, &use, &live, &since, &end) != 5 ||
	    line[end] || !stg__feature_ours(name, strlen(name)) || use < 0 || since < 0 ||
	    (live != 0 && live != 1))
		return 0;
	memset(e, 0, sizeof *e);
	e->uid = uid;
	memcpy(e->name, name, sizeof e->name);
	e->last_use = use;
	e->live = live;
	e->out_since = since;
	return 1;
}

/* Does the list end with its "end" line (only blank lines after it)? */
static bool list_whole(const char *list, size_t len)
{
	while (len && (list[len - 1] == '\n' || list[len - 1] == ' '))
		len--;
	return len >= 3 && !memcmp(list + len - 3, "end", 3) && (len == 3 || list[len - 4] == '\n');
}

size_t stg__features_merge(stg_feat_ent *v, size_t *n, size_t cap, unsigned uid, const char *list,
                           size_t len, size_t max, int64_t now)
{
	/* a list cut short (the user's side failed or ran out of time) names
	 * what it names; only a whole one says the rest are gone */
	if (list_whole(list, len))
		for (size_t i = 0; i < *n; i++)
			if (v[i].uid == uid)
				v[i].live = 0;
	char line[128];
	size_t taken = 0, bad = 0;
	for (size_t i = 0; i < len && taken < max;) {
		const char *nl = memchr(list + i, '\n', len - i);
		size_t j = nl ? (size_t)(nl - list) : len;
		char hex[STG_DIGEST_HEXLEN + 2];
		uint8_t d[STG_DIGEST_LEN];
		stg_feature_name name;
		long long use;
		int end = 0;
		if (j - i >= sizeof line || memchr(list + i, '\0', j - i)) {
			bad++;
		} else if (j - i == 3 && !memcmp(list + i, "end", 3)) {
			/* the list's last line */
		} else if (j > i) {
			memcpy(line, list + i, j - i);
			line[j - i] = '\0';
			if (sscanf(line, "%65s %lld%n", hex, &use, &end) != 2 || line[end] ||
			    strlen(hex) != STG_DIGEST_HEXLEN || stg_digest_parse(hex, d) ||
			    use < 0) {
				bad++;
			} else {
				/* the feature is the user's own, whatever they say */
				stg_node_feature(uid, d, name);
				ptrdiff_t k = find_name(v, *n, name);
				if (k < 0 && *n < cap) {
					k = (ptrdiff_t)(*n)++;
					memset(&v[k], 0, sizeof v[k]);
					memcpy(v[k].name, name, sizeof v[k].name);
				}
				if (k >= 0) {
					v[k].uid = uid;
					v[k].live = 1;
					v[k].last_use = use > now ? now : use;
					taken++;
				}
			}
		}
		i = j + 1;
	}
	return bad;
}
