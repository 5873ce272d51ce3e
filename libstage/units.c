/*
 * units.c - sizes, durations and their text: the parsers every option,
 * setting and variable goes through, and the one formatter of byte counts.
 *
 * A number is digits with at most one '.', then a suffix.  strtod alone
 * would also take " 5", "0x10", "1e3", "inf" and "nan", whose conversion to
 * an integer is undefined; hostile settings must give a clear error.
 */
#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parse a decimal number with an optional fraction ("1.5") into a value
 * scaled by mult.  Suffix returned in *end.  Only digits and one '.':
 * strtod alone would also take " 5", "0x10", "1e3", "inf" and "nan" (whose
 * conversion to an integer is undefined). */
static int parse_scaled(const char *s, const char **end, double *out)
{
	const char *p = s;
	size_t digits = 0;
	if (!s)
		return -1;
	for (; *p >= '0' && *p <= '9'; p++)
		digits++;
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			digits++;
	if (!digits)
		return -1;
	errno = 0;
	double v = strtod(s, NULL);
	if (errno || !(v >= 0) || v > 1e300)
		return -1;
	*end = p;
	*out = v;
	return 0;
}

/* A suffix and what it multiplies by. */
typedef struct suffix {
	const char *letters; /* either case where both are listed */
	double mult;
} suffix;

static const suffix size_suffixes[] = {
        {"kK", 1024.0},
        {"mM", 1024.0 * 1024},
        {"gG", 1024.0 * 1024 * 1024},
        {"tT", 1024.0 * 1024 * 1024 * 1024},
};
static const suffix time_suffixes[] = {
        {"s", 1},
        {"m", 60},
        {"h", 3600},
        {"d", 86400},
};

/* The multiplier of the suffix at *e (1 and nothing taken if none). */
static double take_suffix(const char **e, const suffix *v, size_t n)
{
	for (size_t i = 0; **e && i < n; i++)
		if (strchr(v[i].letters, **e)) {
			(*e)++;
			return v[i].mult;
		}
	return 1;
}

int stg_parse_size(const char *s, uint64_t *out)
{
	const char *e;
	double v;
	if (parse_scaled(s, &e, &v))
		return -1;
	double mult = take_suffix(&e, size_suffixes, sizeof size_suffixes / sizeof *size_suffixes);
	if (mult > 1 && (*e == 'i' || *e == 'I'))
		e++;
	if (*e == 'b' || *e == 'B')
		e++;
	if (*e)
		return -1;
	v *= mult;
	if (v >= 18446744073709551615.0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int stg_parse_duration(const char *s, uint64_t *seconds)
{
	const char *e;
	double v;
	if (parse_scaled(s, &e, &v))
		return -1;
	v *= take_suffix(&e, time_suffixes, sizeof time_suffixes / sizeof *time_suffixes);
	if (*e)
		return -1;
	if (v >= 1e15)
		return -1;
	*seconds = (uint64_t)(v + 0.5);
	return 0;
}

const char *stg_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* A size setting: bytes, or "N%" of whole (a share of the disk). */
uint64_t stg__bytes_setting(const char *v, uint64_t whole)
{
	size_t len = strlen(v);
	if (len && v[len - 1] == '%')
		return (uint64_t)(strtod(v, NULL) / 100.0 * (double)whole);
	uint64_t n = 0;
	stg_parse_size(v, &n);
	return n;
}
