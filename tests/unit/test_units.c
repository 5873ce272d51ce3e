/* test_units.c - sizes and durations (units.c): the parsers every option,
 * setting and variable goes through, their edge cases and hostile input,
 * the formatter of byte counts, and byte settings ("10G", "5%"). */
#include "unit.h"

#include <inttypes.h>

typedef int parser(const char *s, uint64_t *out);

typedef struct parsed {
	const char *s;
	uint64_t v;
} parsed;

/* parse takes every ok[].s as its ok[].v. */
static void all_accepted(parser *parse, const parsed *ok, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 12345;
		if (parse(ok[i].s, &v) != 0)
			fail_msg("'%s' refused", ok[i].s);
		if (v != ok[i].v)
			fail_msg("'%s' = %" PRIu64 ", want %" PRIu64, ok[i].s, v, ok[i].v);
	}
}

/* parse refuses every one of bad[], and a refused value leaves the output
 * alone. */
static void all_refused(parser *parse, const char *const *bad, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 777;
		if (parse(bad[i], &v) == 0)
			fail_msg("'%s' accepted as %" PRIu64, bad[i], v);
		assert_int_equal(v, 777);
	}
}

static void test_size_accepts(void **state)
{
	(void)state;
	static const parsed ok[] = {
	        {"0", 0},
	        {"10", 10},
	        {"10B", 10},
	        {"10b", 10},
	        {"1k", 1024},
	        {"1K", 1024},
	        {"1KB", 1024},
	        {"1KiB", 1024},
	        {"1kib", 1024},
	        {"1.5K", 1536},
	        {".5K", 512},
	        {"1.", 1},
	        {"3M", 3u << 20},
	        {"3MiB", 3u << 20},
	        {"2g", 2ull << 30},
	        {"1.5G", 1610612736ull},
	        {"1T", 1ull << 40},
	        {"16777215T", 16777215ull << 40},
	        {"007", 7},
	        /* a fraction of a byte is cut, not rounded */
	        {"1.9", 1},
	        {"0.0001K", 0},
	};
	all_accepted(stg_parse_size, ok, sizeof ok / sizeof ok[0]);
}

static void test_size_refuses(void **state)
{
	(void)state;
	static const char *const bad[] = {
	        "",
	        " 5",
	        "5 ",
	        "+5",
	        "-1",
	        "-0",
	        "0x10",
	        "1e3",
	        "1E3",
	        "inf",
	        "nan",
	        "INF",
	        ".",
	        "1..2",
	        "1.2.3",
	        "K",
	        "1KK",
	        "1iB",
	        "1Bi",
	        "1BB",
	        "1P",
	        "1E",
	        "12Q",
	        "1 K",
	        "1K ",
	        "1,5K",
	        "5%",
	        "1KiBx",
	        "\t1",
	        "16777216T",
	        "18446744073709551615",
	        "99999999999T",
	        "1e400",
	};
	all_refused(stg_parse_size, bad, sizeof bad / sizeof bad[0]);
	uint64_t v = 5;
	assert_int_equal(stg_parse_size(NULL, &v), -1);
	assert_int_equal(v, 5);
}

/* The largest sizes: 2^64 and above refused in every unit, what lies
 * below it accepted exactly. */
static void test_size_limits(void **state)
{
	(void)state;
	uint64_t v;
	/* 2^64 is 16777216 T: a fraction below it fits */
	assert_int_equal(stg_parse_size("16777215.5T", &v), 0);
	assert_int_equal(v, (16777215ull << 40) + (1ull << 39));
	assert_int_equal(stg_parse_size("17179869183G", &v), 0);
	assert_int_equal(v, 17179869183ull << 30);
	assert_int_equal(stg_parse_size("17179869184G", &v), -1);
	assert_int_equal(stg_parse_size("9007199254740992", &v), 0);
	assert_int_equal(v, 9007199254740992ull);
}

static void test_duration(void **state)
{
	(void)state;
	static const parsed ok[] = {
	        {"0", 0},         {"90", 90},    {"90s", 90},
	        {"2m", 120},      {"1.5m", 90},  {"2h", 7200},
	        {"1.5d", 129600}, {"0.5", 1},    {"0.4", 0},
	        {"2.5", 3},       {".5h", 1800}, {"999999999999999", 999999999999999ull},
	};
	all_accepted(stg_parse_duration, ok, sizeof ok / sizeof ok[0]);
	static const char *const bad[] = {
	        "",
	        "-1",
	        "+1",
	        " 1",
	        "1 ",
	        "1S",
	        "1M",
	        "1H",
	        "3w",
	        "1y",
	        "1ms",
	        "1hh",
	        "0x1",
	        "1e3",
	        "inf",
	        "nan",
	        ".",
	        "1000000000000000",
	        "11574074075d",
	        "1.2.3",
	        "s",
	};
	all_refused(stg_parse_duration, bad, sizeof bad / sizeof bad[0]);
	uint64_t v;
	assert_int_equal(stg_parse_duration(NULL, &v), -1);
}

static void test_format_size(void **state)
{
	(void)state;
	static const struct {
		uint64_t v;
		const char *s;
	} t[] = {
	        {0, "0 B"},
	        {1, "1 B"},
	        {1023, "1023 B"},
	        {1024, "1.0 KiB"},
	        {1536, "1.5 KiB"},
	        {1048575, "1024.0 KiB"},
	        {1048576, "1.0 MiB"},
	        {44238163558ull, "41.2 GiB"},
	        {1ull << 40, "1.0 TiB"},
	        {1ull << 50, "1.0 PiB"},
	        /* no unit past PiB: large counts stay in PiB */
	        {UINT64_MAX, "16384.0 PiB"},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		char buf[32];
		memset(buf, 'x', sizeof buf);
		const char *r = stg_format_size(t[i].v, buf, sizeof buf);
		assert_ptr_equal(r, buf);
		assert_string_equal(buf, t[i].s);
	}
	/* a short buffer is cut, NUL-terminated, never overrun */
	char small[8];
	memset(small, 'x', sizeof small);
	stg_format_size(44238163558ull, small, 6);
	assert_string_equal(small, "41.2 ");
	assert_int_equal(small[6], 'x');
	assert_int_equal(small[7], 'x');
}

/* A size or percentage setting in bytes. */
static void test_bytes_setting(void **state)
{
	(void)state;
	assert_int_equal(stg__bytes_setting("10G", 0), 10ull << 30);
	assert_int_equal(stg__bytes_setting("1024", 1), 1024);
	assert_int_equal(stg__bytes_setting("5%", 1000), 50);
	assert_int_equal(stg__bytes_setting("100%", 123456789), 123456789);
	assert_int_equal(stg__bytes_setting("0%", 123456789), 0);
	assert_int_equal(stg__bytes_setting("12.5%", 800), 100);
	assert_int_equal(stg__bytes_setting("50%", 1ull << 40), 1ull << 39);
	/* malformed sizes are 0 (config.c refuses them before they get here) */
	assert_int_equal(stg__bytes_setting("junk", 1000), 0);
	assert_int_equal(stg__bytes_setting("", 1000), 0);
}

static const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_accepts), cmocka_unit_test(test_size_refuses),
        cmocka_unit_test(test_size_limits),  cmocka_unit_test(test_duration),
        cmocka_unit_test(test_format_size),  cmocka_unit_test(test_bytes_setting),
};

UT_MAIN(tests)
