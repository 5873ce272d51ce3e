/* test_path.c - the lexical rules that keep extraction inside its root. */
#include "unit.h"

static bool ok(const char *p)
{
	return stg__path_ok(p, strlen(p));
}

static void test_path_ok(void **state)
{
	(void)state;
	assert_true(ok("a"));
	assert_true(ok("a/b/c.txt"));
	assert_true(ok("..a/b..")); /* dots inside names are fine */
	assert_true(ok(".hidden"));
	assert_false(ok(""));
	assert_false(ok("/etc/passwd"));
	assert_false(ok("../x"));
	assert_false(ok("a/../../x"));
	assert_false(ok("a/.."));
	assert_false(ok("./a"));
	assert_false(ok("a/./b"));
	assert_false(ok("a//b"));
	assert_false(ok("a/"));
	assert_false(stg__path_ok("a\0b", 3));
	char *longp = malloc(STG_PATH_MAX + 2);
	memset(longp, 'x', STG_PATH_MAX + 1);
	longp[STG_PATH_MAX + 1] = '\0';
	assert_false(ok(longp));
	longp[STG_PATH_MAX] = '\0';
	assert_true(ok(longp));
	free(longp);
}

/* the tree for symlink tests: "d" and "e/l" are symlinks */
static bool is_link(void *arg, const char *p, size_t len)
{
	(void)arg;
	return (len == 1 && !memcmp(p, "d", 1)) || (len == 3 && !memcmp(p, "e/l", 3));
}

static void test_symlink_ok(void **state)
{
	(void)state;
	assert_true(stg__symlink_ok("l", "a/b", is_link, NULL));
	assert_true(stg__symlink_ok("x/l", "../a", is_link, NULL));
	assert_true(stg__symlink_ok("x/y/l", "../../a", is_link, NULL));
	assert_true(stg__symlink_ok("l", "d", is_link, NULL)); /* a link to a link */
	assert_true(stg__symlink_ok("l", ".", is_link, NULL));
	assert_false(stg__symlink_ok("l", "/etc/passwd", is_link, NULL));
	assert_false(stg__symlink_ok("l", "..", is_link, NULL));
	assert_false(stg__symlink_ok("x/l", "../../a", is_link, NULL));
	assert_false(stg__symlink_ok("l", "a/../../b", is_link, NULL));
	/* through another symlink: d may point anywhere inside, so d/.. may
	 * leave the root */
	assert_false(stg__symlink_ok("l", "d/../x", is_link, NULL));
	assert_false(stg__symlink_ok("l", "e/l/x", is_link, NULL));
	assert_false(stg__symlink_ok("l", "", is_link, NULL));
}

static void test_path_match(void **state)
{
	(void)state;
	assert_true(stg__path_match("class_001/*", "class_001/img_1.jpg"));
	assert_true(stg__path_match("class_001", "class_001/img_1.jpg"));
	assert_true(stg__path_match("class_001/", "class_001/sub/img_1.jpg"));
	assert_true(stg__path_match("./class_001", "class_001/x"));
	assert_true(stg__path_match("*.txt", "a.txt"));
	assert_false(stg__path_match("*.txt", "dir/a.txt")); /* '*' stops at '/' */
	assert_true(stg__path_match("*/*.txt", "dir/a.txt"));
	assert_false(stg__path_match("class_00", "class_001/x"));
}

static void test_strmap(void **state)
{
	(void)state;
	stg_strmap m;
	assert_int_equal(stg__strmap_init(&m, 2), 0);
	char keys[1000][16];
	for (int i = 0; i < 1000; i++) {
		snprintf(keys[i], sizeof keys[i], "k%d", i);
		assert_int_equal(stg__strmap_put(&m, keys[i], strlen(keys[i]), (uint32_t)i), 1);
	}
	assert_int_equal(stg__strmap_put(&m, "k5", 2, 9), 0);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(stg__strmap_get(&m, keys[i], strlen(keys[i])), i);
	assert_int_equal(stg__strmap_get(&m, "nope", 4), UINT32_MAX);
	stg__strmap_free(&m);
}

static void test_sizes(void **state)
{
	(void)state;
	uint64_t v;
	assert_int_equal(stg_parse_size("10", &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(stg_parse_size("4K", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(stg_parse_size("1.5G", &v), 0);
	assert_int_equal(v, 1610612736ull);
	assert_int_equal(stg_parse_size("2MiB", &v), 0);
	assert_int_equal(v, 2097152);
	assert_int_equal(stg_parse_size("1T", &v), 0);
	assert_int_not_equal(stg_parse_size("-1", &v), 0);
	assert_int_not_equal(stg_parse_size("12Q", &v), 0);
	assert_int_not_equal(stg_parse_size("", &v), 0);
	assert_int_not_equal(stg_parse_size("99999999999T", &v), 0);
	assert_int_equal(stg_parse_duration("90", &v), 0);
	assert_int_equal(v, 90);
	assert_int_equal(stg_parse_duration("2h", &v), 0);
	assert_int_equal(v, 7200);
	assert_int_equal(stg_parse_duration("1.5d", &v), 0);
	assert_int_equal(v, 129600);
	assert_int_not_equal(stg_parse_duration("3w", &v), 0);
	char buf[16];
	assert_string_equal(stg_format_size(512, buf, sizeof buf), "512 B");
	assert_string_equal(stg_format_size(1536, buf, sizeof buf), "1.5 KiB");
	assert_int_equal(stg_exit_status(STG_ECORRUPT), 4);
	assert_int_equal(stg_exit_status(STG_ENOENT), 2);
	assert_int_equal(stg_exit_status(STG_ENOSPC), 3);
	assert_int_equal(stg_exit_status(STG_EINTR), 5);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_ok),    cmocka_unit_test(test_symlink_ok),
        cmocka_unit_test(test_path_match), cmocka_unit_test(test_strmap),
        cmocka_unit_test(test_sizes),
};

UT_MAIN(tests)
