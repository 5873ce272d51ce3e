/*
 * gravity.c - data gravity: the Slurm node features that say which packs a
 * node's caches hold, and the sbatch options that prefer those nodes.
 *
 * A feature names one user's cached copy of one pack: "stg_" and 12 hex
 * digits of SHA-256("stager-feature", uid, digest).  Caches are per user,
 * so a feature of the pack alone would send another user's job to a node
 * where its own cache is cold.  The name tells nothing by itself: only
 * someone who has the pack (its digest) and knows the uid can tell that
 * this user has it cached on that node.
 *
 * A node's features, as `sinfo -h -N -o '%N|%f'` prints them, are parsed
 * here; stg_hint names only features that some node has right now, since
 * `sbatch --prefer=F` fails when no node has F.
 *
 * (Work in progress on branch data-gravity: the epilog's update of the
 * node's features, `stager where` and `stager hint` come next.)
 */
#include "gravity.h"
#include "ctx.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	static const char hex[] = "0123456789abcdef";
	memcpy(out, STG_FEATURE_PREFIX, sizeof STG_FEATURE_PREFIX - 1);
	char *p = out + sizeof STG_FEATURE_PREFIX - 1;
	for (size_t i = 0; i < 6; i++) {
		*p++ = hex[md[i] >> 4];
		*p++ = hex[md[i] & 15];
	}
	*p = '\0';
}

int stg_feature_ours(const char *name, size_t len)
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

size_t stg_nodes_with(const char *sinfo, const char *feature, char *out, size_t out_len)
{
	size_t n = 0, used = 0;
	if (out_len)
		out[0] = '\0';
	for (const char *line = sinfo; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t ll = end ? (size_t)(end - line) : strlen(line);
		const char *bar = memchr(line, '|', ll);
		if (bar && bar > line &&
		    has_feature(bar + 1, ll - (size_t)(bar + 1 - line), feature)) {
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

size_t stg_cache_features(const stg_cache_info *info, unsigned uid, size_t max,
                          char (*out)[STG_FEATURE_LEN + 1], int64_t *last_use)
{
	const stg_cache_entry **v = calloc(info->n_entries + 1, sizeof *v);
	size_t n = 0;
	if (!v)
		return 0;
	/* whole packs only: a subset's key has a suffix, and a job that
	 * needs the pack would find only part of it */
	for (size_t i = 0; i < info->n_entries; i++) {
		uint8_t d[STG_DIGEST_LEN];
		const stg_cache_entry *e = &info->entries[i];
		if (e->key && strlen(e->key) == STG_DIGEST_HEXLEN &&
		    stg_digest_parse(e->key, d) == 0)
			v[n++] = e;
	}
	qsort(v, n, sizeof *v, by_use);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++) {
		uint8_t d[STG_DIGEST_LEN];
		stg_digest_parse(v[i]->key, d);
		stg_node_feature(uid, d, out[i]);
		if (last_use)
			last_use[i] = v[i]->last_use;
	}
	free(v);
	return n;
}
