/*
 * unit.h - helpers shared by the C unit tests: temporary trees, file
 * writing, and a cmocka main that reports in TAP (tests/run.sh counts it).
 */
#ifndef STG_UNIT_H
#define STG_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "stage.h"

/* A fresh temporary directory (malloc'ed path). */
static inline void *ut_malloc(size_t n)
{
	void *p = malloc(n);
	if (!p)
		abort();
	return p;
}

static inline char *ut_tmpdir(void)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char *p = ut_malloc(strlen(base) + 32);
	sprintf(p, "%s/stg-unit.XXXXXX", base);
	assert_non_null(mkdtemp(p));
	return p;
}

static inline char *ut_join(const char *a, const char *b)
{
	if (!a || !b)
		abort();
	char *p = ut_malloc(strlen(a) + strlen(b) + 2);
	sprintf(p, "%s/%s", a, b);
	return p;
}

static inline void ut_write(const char *dir, const char *name, const void *data, size_t len)
{
	char *p = ut_join(dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
	free(p);
}

static inline void ut_mkdir(const char *dir, const char *name)
{
	char *p = ut_join(dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
	free(p);
}

/* Read a whole file (malloc'ed); *len set. */
static inline uint8_t *ut_read(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	struct stat st;
	fstat(fd, &st);
	uint8_t *buf = ut_malloc((size_t)st.st_size + 1);
	assert_int_equal(stg__pread_full(fd, buf, (size_t)st.st_size, 0), 0);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static inline void ut_rmtree(const char *p)
{
	stg__rmtree(p);
}

/* Deterministic pseudo-random bytes. */
static inline void ut_fill(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

#define UT_MAIN(tests)                                                                             \
	int main(void)                                                                             \
	{                                                                                          \
		cmocka_set_message_output(CM_OUTPUT_TAP);                                          \
		return cmocka_run_group_tests(tests, NULL, NULL);                                  \
	}

#endif
