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

/* Unset the variables through which a Slurm job (the one these tests may
 * run in) reaches the library. */
static inline void ut_no_slurm(void)
{
	static const char *const vars[] = {
	        "SLURM_JOB_ID",   "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_NODEID",
	        "SLURM_JOB_NAME", "SLURMD_NODENAME",    "SLURM_TMPDIR",
	};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
}

/* A configuration that keeps a cache inside root: the scratch root
 * root/scratch, the node slots in root/slots, no free-space floor and no
 * waiting for slots; settings[] are more "key", "value" pairs (NULL
 * ends them). */
static inline stg_config *ut_config(stg_ctx *ctx, const char *root, const char *const *settings)
{
	stg_config *cfg = stg_config_new();
	assert_non_null(cfg);
	char *scratch = ut_join(root, "scratch"), *slots = ut_join(root, "slots");
	assert_int_equal(stg_config_set(ctx, cfg, "scratch_root", scratch, "test"), STG_OK);
	assert_int_equal(stg_config_set(ctx, cfg, "slot_dir", slots, "test"), STG_OK);
	assert_int_equal(stg_config_set(ctx, cfg, "min_free", "0", "test"), STG_OK);
	for (size_t i = 0; settings && settings[i]; i += 2)
		if (stg_config_set(ctx, cfg, settings[i], settings[i + 1], "test"))
			fail_msg("%s", stg_errmsg(ctx));
	free(scratch);
	free(slots);
	return cfg;
}

/* A cache opened with ut_config. */
static inline stg_cache *ut_cache(stg_ctx *ctx, const char *root, const char *const *settings)
{
	stg_config *cfg = ut_config(ctx, root, settings);
	stg_cache *c = NULL;
	if (stg_cache_open(ctx, cfg, &c))
		fail_msg("cache: %s", stg_errmsg(ctx));
	stg_config_free(cfg);
	return c;
}

/* Pack the tree src into out (64 KiB frames); fails the test on error. */
static inline void ut_pack(stg_ctx *ctx, const char *src, const char *out, stg_pack_info *info)
{
	stg_pack_opts o;
	stg_pack_opts_init(&o);
	o.frame_size = 64 * 1024;
	if (stg_pack_dir(ctx, src, out, &o, info))
		fail_msg("pack: %s", stg_errmsg(ctx));
}

/* The warnings (and other messages) of a context, in one buffer. */
typedef struct ut_log {
	int n, warnings;
	char text[16384];
} ut_log;

static inline void ut_log_fn(void *arg, stg_log_level level, const char *msg)
{
	ut_log *l = arg;
	size_t used = strlen(l->text);
	l->n++;
	if (level == STG_LOG_WARN)
		l->warnings++;
	snprintf(l->text + used, sizeof l->text - used, "%s\n", msg);
}

#define UT_MAIN(tests)                                                                             \
	int main(void)                                                                             \
	{                                                                                          \
		cmocka_set_message_output(CM_OUTPUT_TAP);                                          \
		return cmocka_run_group_tests(tests, NULL, NULL);                                  \
	}

#endif
