/* test_gravity.c - node features for cached packs (gravity.c): a feature
 * per user and pack, stable, valid for Slurm, told apart from the site's;
 * the nodes that have one, from sinfo's output (each node once, hostile
 * lines ignored). */
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
	assert_true(stg_feature_ours(a, strlen(a)));
	/* Slurm's feature names: letters, digits, '_' */
	for (const char *p = a; *p; p++)
		assert_true(isalnum((unsigned char)*p) || *p == '_');
	assert_false(stg_feature_ours("gpu", 3));
	assert_false(stg_feature_ours("stg_", 4));
	assert_false(stg_feature_ours("stg_ABCDEF123456", 16));
	assert_false(stg_feature_ours("stg_0123456789abc", 17));
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
	size_t n = stg_nodes_with(sinfo, "stg_0123456789ab", out, sizeof out);
	assert_string_equal(out, "n1,n4,n5");
	assert_int_equal(n, 3);
	assert_int_equal(stg_nodes_with(sinfo, "stg_ffffffffffff", out, sizeof out), 0);
	assert_string_equal(out, "");
	/* cut short rather than overrun */
	assert_int_equal(stg_nodes_with(sinfo, "gpu", out, 3), 1);
	assert_string_equal(out, "n1");
	assert_int_equal(stg_nodes_with("", "gpu", out, sizeof out), 0);
}

static void test_cache_features(void **state)
{
	(void)state;
	char k1[65], k2[65], k3[65];
	uint8_t d1[32], d2[32], d3[32];
	memset(d1, 1, 32);
	memset(d2, 2, 32);
	memset(d3, 3, 32);
	stg_digest_hex(d1, k1);
	stg_digest_hex(d2, k2);
	stg_digest_hex(d3, k3);
	char sub[96];
	snprintf(sub, sizeof sub, "%s-0123456789abcdef", k3);
	stg_cache_entry e[] = {
	        {.key = k1, .last_use = 100},  {.key = k2, .last_use = 300},
	        {.key = sub, .last_use = 500}, /* a subset: not the pack */
	        {.key = k3, .last_use = 200},  {.key = "not-a-digest", .last_use = 900},
	};
	stg_cache_info info = {.entries = e, .n_entries = 5};
	char out[4][STG_FEATURE_LEN + 1], want[STG_FEATURE_LEN + 1];
	int64_t last[4];
	assert_int_equal(stg_cache_features(&info, 7, 4, out, last), 3);
	stg_node_feature(7, d2, want);
	assert_string_equal(out[0], want);
	stg_node_feature(7, d3, want);
	assert_string_equal(out[1], want);
	stg_node_feature(7, d1, want);
	assert_string_equal(out[2], want);
	assert_int_equal(last[0], 300);
	assert_int_equal(last[2], 100);
	/* the cap keeps the most recent */
	assert_int_equal(stg_cache_features(&info, 7, 1, out, NULL), 1);
	stg_node_feature(7, d2, want);
	assert_string_equal(out[0], want);
	assert_int_equal(stg_cache_features(&info, 7, 0, out, NULL), 0);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_features),
        cmocka_unit_test(test_feature),
        cmocka_unit_test(test_nodes_with),
};

UT_MAIN(tests)
