/* test_gravity.c - node features for cached packs (gravity.c): a feature
 * per user and pack, stable, valid for Slurm, told apart from the site's;
 * the nodes that have one, from sinfo's output (each node once, hostile
 * lines ignored); what a node advertises (the cap, most recent first and
 * shared fairly among users, the
 * grace of a feature that leaves, a record lost); the sbatch hint. */
#include "unit.h"
#include "gravity.h"

#include <ctype.h>

static void test_feature(void **state)
{
	(void)state;
	uint8_t d[STG_DIGEST_LEN], e[STG_DIGEST_LEN];
	memset(d, 0x11, sizeof d);
	memcpy(e, d, sizeof e);
	e[31] ^= 1;
	char a[STG_FEATURE_LEN + 1], b[STG_FEATURE_LEN + 1], c[STG_FEATURE_LEN + 1],
	        again[STG_FEATURE_LEN + 1];
	stg_node_feature(1000, d, a);
	stg_node_feature(1000, d, again);
	stg_node_feature(1001, d, b);
	stg_node_feature(1000, e, c);
	assert_int_equal(strlen(a), STG_FEATURE_LEN);
	assert_string_equal(a, again);
	assert_string_not_equal(a, b); /* per user */
	assert_string_not_equal(a, c); /* per pack */
	assert_true(stg__feature_ours(a, strlen(a)));
	/* Slurm's feature names: letters, digits, '_' */
	for (const char *p = a; *p; p++)
		assert_true(isalnum((unsigned char)*p) || *p == '_');
	assert_false(stg__feature_ours("gpu", 3));
	assert_false(stg__feature_ours("stg_", 4));
	assert_false(stg__feature_ours("stg_ABCDEF123456", 16));
	assert_false(stg__feature_ours("stg_0123456789abc", 17));
}

static void test_nodes_with(void **state)
{
	(void)state;
	const char *sinfo = "n1|gpu,stg_0123456789ab\n"
	                    "n2|stg_0123456789abX\n"
	                    "n3|(null)\n"
	                    "n1|gpu,stg_0123456789ab\n" /* another partition */
	                    "garbage line\n"
	                    "n4|stg_0123456789ab,fast\n"
	                    "|stg_0123456789ab\n"
	                    "n5|stg_0123456789ab";
	char out[64];
	/* a line with no node name is no node */
	size_t n = stg__nodes_with(sinfo, "stg_0123456789ab", out, sizeof out);
	assert_string_equal(out, "n1,n4,n5");
	assert_int_equal(n, 3);
	assert_int_equal(stg__nodes_with(sinfo, "stg_ffffffffffff", out, sizeof out), 0);
	assert_string_equal(out, "");
	/* cut short rather than overrun */
	assert_int_equal(stg__nodes_with(sinfo, "gpu", out, 3), 1);
	assert_string_equal(out, "n1");
	assert_int_equal(stg__nodes_with("", "gpu", out, sizeof out), 0);
	/* a node whose copy is leaving (its marker beside) is not named */
	stg_feature_name m;
	stg__feature_leaving("stg_0123456789ab", m);
	char leaving[256];
	snprintf(leaving, sizeof leaving, "n1|gpu,stg_0123456789ab,%s\nn4|stg_0123456789ab\n", m);
	assert_int_equal(stg__nodes_staying(leaving, "stg_0123456789ab", m, out, sizeof out), 1);
	assert_string_equal(out, "n4");
	assert_true(stg__feature_ours(m, strlen(m)));
	assert_string_not_equal(m, "stg_0123456789ab");
}

static void test_cache_features(void **state)
{
	(void)state;
	char k1[65], k2[65], k3[65], k4[65], k5[65];
	uint8_t d1[32], d2[32], d3[32], d4[32], d5[32];
	memset(d1, 1, 32);
	memset(d2, 2, 32);
	memset(d3, 3, 32);
	memset(d4, 4, 32);
	memset(d5, 5, 32);
	stg_digest_hex(d1, k1);
	stg_digest_hex(d2, k2);
	stg_digest_hex(d3, k3);
	stg_digest_hex(d4, k4);
	stg_digest_hex(d5, k5);
	char sub[96];
	snprintf(sub, sizeof sub, "%s-0123456789abcdef", k3);
	stg_cache_entry e[] = {
	        {.key = k1, .kind = "pack", .last_use = 100},
	        {.key = k2, .kind = "pack", .last_use = 300},
	        {.key = sub, .kind = "pack", .last_use = 500}, /* a subset: not the pack */
	        {.key = k3, .kind = "pack", .last_use = 200},
	        {.key = "not-a-digest", .kind = "pack", .last_use = 900},
	        /* a directory and a plain archive staged: keyed by a digest
	         * too, but no where or hint can name them */
	        {.key = k4, .kind = "directory", .last_use = 700},
	        {.key = k5, .kind = "archive", .last_use = 800},
	};
	stg_cache_info info = {.entries = e, .n_entries = 7};
	const char *keys[4];
	int64_t last[4];
	assert_int_equal(stg__cache_packs(&info, 4, keys, last), 3);
	assert_string_equal(keys[0], k2);
	assert_string_equal(keys[1], k3);
	assert_string_equal(keys[2], k1);
	assert_int_equal(last[0], 300);
	assert_int_equal(last[2], 100);
	/* the cap keeps the most recent */
	assert_int_equal(stg__cache_packs(&info, 1, keys, NULL), 1);
	assert_string_equal(keys[0], k2);
	assert_int_equal(stg__cache_packs(&info, 0, keys, NULL), 0);
}

/* a record entry */
static stg_feat_ent ent(unsigned uid, char c, int64_t use, int live)
{
	stg_feat_ent e = {.uid = uid, .last_use = use, .live = live};
	snprintf(e.name, sizeof e.name, "stg_%c%c%c%c%c%c%c%c%c%c%c%c", c, c, c, c, c, c, c, c, c,
	         c, c, c);
	return e;
}

static int chosen_has(const stg_feature_name *c, size_t n, char x)
{
	stg_feat_ent e = ent(0, x, 0, 0);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(c[i], e.name))
			return 1;
	return 0;
}

/* does c[n] hold x's leaving marker? */
static int leaving_has(const stg_feature_name *c, size_t n, char x)
{
	stg_feat_ent e = ent(0, x, 0, 0);
	stg_feature_name m;
	stg__feature_leaving(e.name, m);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(c[i], m))
			return 1;
	return 0;
}

static void test_plan(void **state)
{
	(void)state;
	stg_feat_ent v[16];
	stg_feature_name adv[8], ch[24];
	size_t n = 0;
	/* nothing advertised yet: the 2 most recent of 3 live */
	v[n++] = ent(1, 'a', 100, 1);
	v[n++] = ent(1, 'b', 300, 1);
	v[n++] = ent(2, 'c', 200, 1);
	size_t k = stg__features_plan(v, &n, 16, adv, 0, 1000, 2, 600, ch);
	assert_int_equal(k, 2);
	assert_true(chosen_has(ch, k, 'b') && chosen_has(ch, k, 'c'));
	assert_int_equal(n, 3); /* 'a' is live: kept in the record */
	assert_true(strcmp(ch[0], ch[1]) < 0);

	/* advertised b, c; a newer d: c leaves but keeps its place for the
	 * grace, d waits for it */
	memcpy(adv[0], ch[0], sizeof adv[0]);
	memcpy(adv[1], ch[1], sizeof adv[1]);
	v[n++] = ent(2, 'd', 400, 1);
	k = stg__features_plan(v, &n, 16, adv, 2, 1000, 2, 600, ch);
	/* ... and says it is leaving, so that no hint names it now */
	assert_int_equal(k, 3);
	assert_true(chosen_has(ch, k, 'b') && chosen_has(ch, k, 'c'));
	assert_true(leaving_has(ch, k, 'c') && !leaving_has(ch, k, 'b'));
	for (size_t i = 0; i < n; i++)
		if (v[i].name[4] == 'c')
			assert_int_equal(v[i].out_since, 1000);
	/* still within the grace: unchanged; the marker Slurm has now is
	 * no feature of a pack (not recorded as nobody's) */
	for (size_t i = 0; i < k; i++)
		if (!chosen_has(&ch[i], 1, 'b') && !chosen_has(&ch[i], 1, 'c'))
			memcpy(adv[2], ch[i], sizeof adv[2]);
	size_t was = n;
	k = stg__features_plan(v, &n, 16, adv, 3, 1599, 2, 600, ch);
	assert_true(k == 3 && chosen_has(ch, k, 'c') && !chosen_has(ch, k, 'd'));
	assert_true(leaving_has(ch, k, 'c'));
	assert_int_equal(n, was);
	/* past it: c goes, d comes, no marker */
	k = stg__features_plan(v, &n, 16, adv, 3, 1600, 2, 600, ch);
	assert_int_equal(k, 2);
	assert_true(chosen_has(ch, k, 'b') && chosen_has(ch, k, 'd'));
	assert_false(chosen_has(ch, k, 'c'));
	assert_false(leaving_has(ch, k, 'c'));

	/* the cache lost b (not live): advertised, it stays out its grace;
	 * then it is dropped from the record */
	memcpy(adv[0], ch[0], sizeof adv[0]);
	memcpy(adv[1], ch[1], sizeof adv[1]);
	for (size_t i = 0; i < n; i++)
		if (v[i].name[4] == 'b')
			v[i].live = 0;
	k = stg__features_plan(v, &n, 16, adv, 2, 2000, 2, 600, ch);
	assert_true(k == 3 && chosen_has(ch, k, 'b') && chosen_has(ch, k, 'd'));
	assert_true(leaving_has(ch, k, 'b'));
	size_t before = n;
	k = stg__features_plan(v, &n, 16, adv, 2, 2600, 2, 600, ch);
	assert_false(chosen_has(ch, k, 'b'));
	assert_true(chosen_has(ch, k, 'd'));
	assert_int_equal(n, before - 1);
	for (size_t i = 0; i < n; i++)
		assert_int_not_equal(v[i].name[4], 'b');

	/* a record lost: what Slurm advertises is kept out its grace as
	 * nobody's, never dropped at once */
	n = 0;
	stg_feat_ent x = ent(5, 'e', 10, 0);
	memcpy(adv[0], x.name, sizeof adv[0]);
	k = stg__features_plan(v, &n, 16, adv, 1, 5000, 2, 600, ch);
	assert_int_equal(k, 2); /* e and its marker */
	assert_true(leaving_has(ch, k, 'e'));
	assert_int_equal(n, 1);
	assert_int_equal(v[0].uid, STG_FEAT_NOBODY);
	k = stg__features_plan(v, &n, 16, adv, 1, 5600, 2, 600, ch);
	assert_int_equal(k, 0);
	assert_int_equal(n, 0);

	/* grace 0: a feature leaves at once; max 0: none at all */
	n = 0;
	v[n++] = ent(1, 'f', 1, 1);
	k = stg__features_plan(v, &n, 16, adv, 0, 1, 0, 600, ch);
	assert_int_equal(k, 0);
	memcpy(adv[0], v[0].name, sizeof adv[0]);
	k = stg__features_plan(v, &n, 16, adv, 1, 1, 0, 0, ch);
	assert_int_equal(k, 0);
}

/* How many of the chosen are uid's (of the ents v[n]). */
static size_t chosen_of(const stg_feature_name *c, size_t k, const stg_feat_ent *v, size_t n,
                        unsigned uid)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < k; j++)
			m += v[i].uid == uid && !strcmp(v[i].name, c[j]);
	return m;
}

/* The cap shared fairly: one user re-staging many packs in every job (the
 * most recent uses) cannot take every place from the others. */
static void test_plan_fair(void **state)
{
	(void)state;
	stg_feat_ent v[64];
	stg_feature_name ch[64];
	const char names[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = 0;
	/* user 1: 16 packs used at 1000..1015; user 2: 3 packs, older */
	for (int i = 0; i < 16; i++)
		v[n++] = ent(1, names[i], 1000 + i, 1);
	for (int i = 0; i < 3; i++)
		v[n++] = ent(2, names[16 + i], 10 + i, 1);
	size_t k = stg__features_plan(v, &n, 64, NULL, 0, 5000, 16, 600, ch);
	assert_int_equal(k, 16);
	/* user 2 has 3, under their share of 8: all 3; user 1 the other 13,
	 * their most recent */
	assert_int_equal(chosen_of(ch, k, v, n, 2), 3);
	assert_int_equal(chosen_of(ch, k, v, n, 1), 13);
	for (int i = 0; i < 3; i++)
		assert_true(chosen_has(ch, k, names[i + 3]) == 1 && !chosen_has(ch, k, names[i]));
	/* user 2 with 10 packs: 8 each */
	for (int i = 3; i < 10; i++)
		v[n++] = ent(2, names[16 + i], 10 + i, 1);
	k = stg__features_plan(v, &n, 64, NULL, 0, 5000, 16, 600, ch);
	assert_int_equal(k, 16);
	assert_int_equal(chosen_of(ch, k, v, n, 1), 8);
	assert_int_equal(chosen_of(ch, k, v, n, 2), 8);
	/* three users, max 16: at least 5 each; the 16th place goes to the
	 * most recent of the sixth round (user 1's 1010) */
	for (int i = 0; i < 8; i++)
		v[n++] = ent(3, names[26 + i], 500 + i, 1);
	k = stg__features_plan(v, &n, 64, NULL, 0, 5000, 16, 600, ch);
	assert_int_equal(k, 16);
	assert_int_equal(chosen_of(ch, k, v, n, 1), 6);
	assert_int_equal(chosen_of(ch, k, v, n, 2), 5);
	assert_int_equal(chosen_of(ch, k, v, n, 3), 5);
	assert_true(chosen_has(ch, k, names[10]) && !chosen_has(ch, k, names[9]));
	/* the same whatever the record's order */
	stg_feature_name again[64];
	for (size_t i = 0; i < n / 2; i++) {
		stg_feat_ent t = v[i];
		v[i] = v[n - 1 - i];
		v[n - 1 - i] = t;
	}
	size_t k2 = stg__features_plan(v, &n, 64, NULL, 0, 5000, 16, 600, again);
	assert_int_equal(k2, k);
	for (size_t i = 0; i < k; i++)
		assert_string_equal(ch[i], again[i]);
	/* advertised: a user's places above the new share leave through the
	 * grace (holding their places), then go to the newcomer */
	n = 0;
	for (int i = 0; i < 4; i++)
		v[n++] = ent(1, names[i], 1000 + i, 1);
	k = stg__features_plan(v, &n, 64, NULL, 0, 5000, 4, 600, ch);
	assert_int_equal(k, 4);
	stg_feature_name adv[8];
	memcpy(adv, ch, k * sizeof *ch);
	v[n++] = ent(2, 'x', 10, 1);
	v[n++] = ent(2, 'y', 11, 1);
	k = stg__features_plan(v, &n, 64, adv, 4, 5000, 4, 600, ch);
	assert_int_equal(chosen_of(ch, k, v, n, 2), 0);
	assert_true(leaving_has(ch, k, 'a') && leaving_has(ch, k, 'b'));
	k = stg__features_plan(v, &n, 64, adv, 4, 5600, 4, 600, ch);
	assert_int_equal(k, 4);
	assert_int_equal(chosen_of(ch, k, v, n, 1), 2);
	assert_int_equal(chosen_of(ch, k, v, n, 2), 2);
	assert_true(chosen_has(ch, k, 'c') && chosen_has(ch, k, 'd'));
}

static void test_hint(void **state)
{
	(void)state;
	stg_where_result w[3] = {0};
	char out[128];
	snprintf(w[0].feature, sizeof w[0].feature, "stg_aaaaaaaaaaaa");
	snprintf(w[1].feature, sizeof w[1].feature, "stg_bbbbbbbbbbbb");
	snprintf(w[2].feature, sizeof w[2].feature, "stg_aaaaaaaaaaaa");
	char e0[] = "", e1[] = "";
	w[0].nodes = e0;
	w[1].nodes = e1;
	w[2].nodes = e0;
	/* no node has any: nothing (sbatch refuses a feature nobody has) */
	assert_int_equal(stg_hint(w, 2, out, sizeof out), 0);
	assert_string_equal(out, "");
	char a[] = "n1,n3", b[] = "n2,n3", c[] = "n2";
	w[0].nodes = a, w[0].n_nodes = 2;
	assert_int_equal(stg_hint(w, 1, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa");
	/* only the features some node has */
	assert_int_equal(stg_hint(w, 2, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa");
	/* n3 has both: AND */
	w[1].nodes = b, w[1].n_nodes = 2;
	assert_int_equal(stg_hint(w, 2, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa&stg_bbbbbbbbbbbb");
	/* a pack cached nowhere (first or last) does not undo that: n3 still
	 * has both of those some node has */
	stg_where_result x[3] = {w[0], w[0], w[1]};
	char none[] = "";
	snprintf(x[0].feature, sizeof x[0].feature, "stg_cccccccccccc");
	x[0].nodes = none, x[0].n_nodes = 0;
	assert_int_equal(stg_hint(x, 3, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa&stg_bbbbbbbbbbbb");
	x[0] = w[0], x[1] = w[1], x[2] = w[0];
	snprintf(x[2].feature, sizeof x[2].feature, "stg_cccccccccccc");
	x[2].nodes = none, x[2].n_nodes = 0;
	assert_int_equal(stg_hint(x, 3, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa&stg_bbbbbbbbbbbb");
	/* none has both: OR; a pack named twice is named once */
	w[1].nodes = c, w[1].n_nodes = 1;
	w[2].nodes = a, w[2].n_nodes = 2;
	assert_int_equal(stg_hint(w, 3, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa|stg_bbbbbbbbbbbb");
	/* a node whose name is a prefix of another's is not it */
	char p1[] = "n1", p2[] = "n10";
	w[0].nodes = p1, w[0].n_nodes = 1;
	w[1].nodes = p2, w[1].n_nodes = 1;
	assert_int_equal(stg_hint(w, 2, out, sizeof out), 0);
	assert_string_equal(out, "--prefer=stg_aaaaaaaaaaaa|stg_bbbbbbbbbbbb");
	/* too small: -1 and nothing */
	assert_int_equal(stg_hint(w, 2, out, 20), -1);
	assert_string_equal(out, "");
}

static void features_count(void *arg, const char *name, size_t len)
{
	(void)name;
	*(size_t *)arg += len;
}

static void test_merge(void **state)
{
	(void)state;
	stg_feat_ent v[8];
	size_t n = 0;
	char k1[65], k2[65];
	uint8_t d1[32], d2[32];
	memset(d1, 1, 32);
	memset(d2, 2, 32);
	stg_digest_hex(d1, k1);
	stg_digest_hex(d2, k2);
	stg_feature_name f1, f2, other;
	stg_node_feature(7, d1, f1);
	stg_node_feature(7, d2, f2);
	stg_node_feature(8, d1, other);
	/* another user's entry, and one of this user's no longer listed */
	v[n++] = ent(8, 'x', 50, 1);
	memcpy(v[0].name, other, sizeof other);
	v[n++] = ent(7, 'y', 60, 1);
	char list[512];
	int len = snprintf(list, sizeof list,
	                   "%s 100\n"
	                   "%s 99999999999\n"     /* a last use in the future: now */
	                   "stg_0123456789ab 5\n" /* a feature, not a digest */
	                   "%.63s 5\n"            /* a digest cut short */
	                   "%s -1\n"
	                   "garbage\n\n",
	                   k1, k2, k1, k1);
	/* cut short (no "end": the user's side failed or was stopped): what
	 * it names is live, nothing is taken away */
	size_t bad = stg__features_merge(v, &n, 8, 7, list, (size_t)len, 16, 1000);
	assert_int_equal(bad, 4);
	assert_int_equal(n, 4);
	assert_true(v[1].live); /* 7's 'y': not listed, but the list is not whole */
	/* whole: "end" is no bad line, and the user's others are no longer */
	len += snprintf(list + len, sizeof list - (size_t)len, "end\n\n");
	bad = stg__features_merge(v, &n, 8, 7, list, (size_t)len, 16, 1000);
	assert_int_equal(bad, 4);
	assert_int_equal(n, 4);
	assert_int_equal(v[0].uid, 8); /* untouched */
	assert_true(v[0].live);
	assert_false(v[1].live); /* 7's 'y': not listed now */
	/* "end" not last, or part of a line, is no end */
	v[1].live = 1;
	len = snprintf(list, sizeof list, "end\n%s 100\n", k1);
	assert_int_equal(stg__features_merge(v, &n, 8, 7, list, (size_t)len, 16, 1000), 0);
	assert_true(v[1].live);
	len = snprintf(list, sizeof list, "%s 100\nxend\n", k1);
	assert_int_equal(stg__features_merge(v, &n, 8, 7, list, (size_t)len, 16, 1000), 1);
	assert_true(v[1].live);
	/* a whole list of nothing (a user who opted out): all theirs go */
	assert_int_equal(stg__features_merge(v, &n, 8, 7, "end\n", 4, 16, 1000), 0);
	assert_false(v[1].live);
	assert_false(v[2].live);
	assert_false(v[3].live);
	assert_true(v[0].live);
	assert_string_equal(v[2].name, f1);
	assert_int_equal(v[2].last_use, 100);
	assert_string_equal(v[3].name, f2);
	assert_int_equal(v[3].last_use, 1000);
	/* user 8 lists d1: their own feature, never user 7's */
	len = snprintf(list, sizeof list, "%s 200\n", k1);
	assert_int_equal(stg__features_merge(v, &n, 8, 8, list, (size_t)len, 16, 1000), 0);
	assert_string_equal(v[0].name, other);
	assert_int_equal(v[0].last_use, 200);
	assert_int_equal(v[2].uid, 7);
	/* at most max lines taken; a NUL inside a line is a bad line */
	n = 0;
	len = snprintf(list, sizeof list, "%s 1\n%s 2\n", k1, k2);
	assert_int_equal(stg__features_merge(v, &n, 8, 7, list, (size_t)len, 1, 1000), 0);
	assert_int_equal(n, 1);
	list[3] = '\0';
	n = 0;
	assert_int_equal(stg__features_merge(v, &n, 8, 7, list, (size_t)len, 4, 1000), 1);
	assert_int_equal(n, 1);
	/* a record line */
	stg_feat_ent e;
	char line[128];
	snprintf(line, sizeof line, "7 %s 100 1 0", f1);
	assert_true(stg__feat_ent_parse(line, &e));
	assert_string_equal(e.name, f1);
	snprintf(line, sizeof line, "7 %s 100 2 0", f1);
	assert_false(stg__feat_ent_parse(line, &e));
	snprintf(line, sizeof line, "7 %s 100 1 0 x", f1);
	assert_false(stg__feat_ent_parse(line, &e));
	assert_false(stg__feat_ent_parse("7 gpu 1 1 0", &e));
}

static void test_features_each(void **state)
{
	(void)state;
	size_t bytes = 0;
	assert_int_equal(stg__features_each("(null)", 6, features_count, &bytes), 0);
	assert_int_equal(stg__features_each("a,,bb,", 6, features_count, &bytes), 2);
	assert_int_equal(bytes, 3);
	assert_int_equal(stg__features_each("", 0, features_count, &bytes), 0);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_features), cmocka_unit_test(test_feature),
        cmocka_unit_test(test_nodes_with),     cmocka_unit_test(test_plan),
        cmocka_unit_test(test_plan_fair),      cmocka_unit_test(test_hint),
        cmocka_unit_test(test_merge),          cmocka_unit_test(test_features_each),
};

UT_MAIN(tests)
