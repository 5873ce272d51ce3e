/*
 * fuzz_gravity.c - libFuzzer target for data gravity's readers of outside
 * text (gravity.c): the input is read as a user's list of cached packs
 * (what root's epilog merges into a node's record), as lines of that
 * record, as sinfo's "NODE|FEATURES" output and as a comma-separated
 * feature list; then the node's plan and the sbatch hint are computed
 * from what was read, and their invariants checked: never more features
 * than the cap allows, every chosen one stager's, each user with live
 * ones given their fair share of the cap, the hint within its buffer.  Built by `make fuzz` with
 * clang; replayed over tests/fuzz/corpus/gravity by `make test` (replay.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gravity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CAP 64

static void count(void *arg, const char *name, size_t len)
{
	if (!len || !name)
		abort();
	(*(size_t *)arg)++;
}

/* With nothing advertised, the chosen of v[n] are min(max, live) of the
 * live ones, and each of the U users with live ones has at least
 * min(their live ones, max / U) of them. */
static void fair_check(const stg_feat_ent *v, size_t n, const stg_feature_name *c, size_t k,
                       size_t max)
{
	size_t live = 0, users = 0;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].live)
			continue;
		live++;
		size_t j = 0;
		while (j < i && !(v[j].live && v[j].uid == v[i].uid))
			j++;
		users += j == i;
	}
	if (k != (live < max ? live : max))
		abort();
	for (size_t i = 0; i < n; i++) {
		size_t mine = 0, got = 0;
		for (size_t j = 0; j < n; j++) {
			if (!v[j].live || v[j].uid != v[i].uid)
				continue;
			mine++;
			for (size_t x = 0; x < k; x++)
				got += !strcmp(c[x], v[j].name);
		}
		size_t share = users ? max / users : 0;
		if (v[i].live && got < (mine < share ? mine : share))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	stg_feat_ent v[CAP];
	size_t n = 0;
	/* as records: each line */
	char *save = NULL, *copy = strdup(s);
	for (char *line = copy ? strtok_r(copy, "\n", &save) : NULL; line && n < CAP / 2;
	     line = strtok_r(NULL, "\n", &save))
		if (stg__feat_ent_parse(line, &v[n]) &&
		    stg__feature_ours(v[n].name, strlen(v[n].name)))
			n++;
	free(copy);
	/* as a user's list */
	size_t max = size % 5;
	stg__features_merge(v, &n, CAP, 1000, (const char *)data, size, max, 1000000);
	if (n > CAP)
		abort();
	/* as sinfo's output: the nodes with the first record's feature */
	char nodes[256];
	size_t nn = stg__nodes_with(s, n ? v[0].name : "stg_0123456789ab", nodes, sizeof nodes);
	if (strlen(nodes) >= sizeof nodes || (nn == 0 && *nodes))
		abort();
	size_t k = 0;
	stg__features_each(s, size, count, &k);
	/* the fair share, on a copy with nothing advertised (no grace) */
	stg_feat_ent fv[CAP];
	size_t nf = n;
	memcpy(fv, v, n * sizeof *v);
	stg_feature_name fch[CAP + 8];
	size_t fc = stg__features_plan(fv, &nf, CAP, NULL, 0, 1000000, max, 600, fch);
	if (fc != SIZE_MAX)
		fair_check(fv, nf, fch, fc, max);
	/* the plan: advertised, the features of the first records */
	stg_feature_name adv[4], chosen[CAP + 8];
	size_t n_adv = n < 4 ? n : 4;
	for (size_t i = 0; i < n_adv; i++)
		memcpy(adv[i], v[i].name, sizeof adv[i]);
	size_t c = stg__features_plan(v, &n, CAP, adv, n_adv, 1000000, max, 600, chosen);
	if (c != SIZE_MAX) {
		if (c > max + 2 * n_adv)
			abort();
		for (size_t i = 0; i < c; i++)
			if (!stg__feature_ours(chosen[i], strlen(chosen[i])))
				abort();
	}
	/* the hint over what sinfo said */
	stg_where_result w[2] = {0};
	memcpy(w[0].feature, n ? v[0].name : "stg_0123456789ab", STG_FEATURE_LEN + 1);
	memcpy(w[1].feature, "stg_aaaaaaaaaaaa", STG_FEATURE_LEN + 1);
	w[0].nodes = nodes;
	w[0].n_nodes = nn;
	w[1].nodes = nodes;
	w[1].n_nodes = nn;
	char hint[64];
	if (stg_hint(w, 2, hint, sizeof hint) == 0 && strlen(hint) >= sizeof hint)
		abort();
	free(s);
	return 0;
}
